/**
 * containerd's configuration for a bed node. Paths are the standard ones: the node's mount namespace
 * binds a directory of its own over each (node-mounts.ts). The CRI plugin: cgroupfs (runc's
 * default), `restrict_oom_score_adj` (this machine's root lacks CAP_SYS_RESOURCE: runc could not
 * lower a score), the pause image imported under this name, CNI from /opt/cni/bin and /etc/cni/net.d.
 */
export const PAUSE_IMAGE = 'k8s.gcr.io/pause:3.2';

export function containerdConfig(): string {
  return `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
oom_score = 0

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
`;
}
