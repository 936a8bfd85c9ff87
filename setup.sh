#!/usr/bin/env bash
# Installs and builds podwire on Debian (as root; Node.js 20 or newer must be installed first), then
# runs the demo (a two-node cluster of namespaces, removed at the end). `--agent` runs the agent on
# config/default.yaml instead; `--no-start` (or CI=true) stops after the build. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"

# Node.js 20 or newer, with npm: the agent, the CLI and the build need both. Checked before anything
# is installed, so a machine without them is told what to do and left as it was.
node_help() {
  cat >&2 <<'EOF'
setup: podwire needs Node.js 20 or newer, with npm. Install them first, as root, then run ./setup.sh again:
  - Debian 13 (trixie) and later: apt-get install nodejs npm   (Debian 13's nodejs is 20)
  - Debian 12 (bookworm): its own nodejs package is 18, too old; install Node.js 20 or newer from
    NodeSource's Debian packages (package nodejs, which includes npm), then check with: node --version
EOF
}
if ! command -v node >/dev/null 2>&1; then
  echo "setup: node not found on PATH" >&2
  node_help
  exit 1
fi
node_version=$(node --version 2>/dev/null || true)
node_major=${node_version#v}
node_major=${node_major%%.*}
if ! [[ "$node_major" =~ ^[0-9]+$ ]] || [ "$node_major" -lt 20 ]; then
  echo "setup: found Node.js ${node_version:-of unknown version} ($(command -v node)); podwire needs 20 or newer" >&2
  node_help
  exit 1
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: found Node.js $node_version but not npm" >&2
  node_help
  exit 1
fi

start=demo
for arg in "$@"; do
  case "$arg" in
    --no-start) start=0 ;;
    --agent) start=agent ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
[ "${CI:-}" = "true" ] && start=0

packages=(iproute2 tcpdump arping iputils-ping curl containernetworking-plugins python3-scapy build-essential
  podman runc busybox-static openvswitch-switch etcd-server nftables iptables openssl iperf3
  containerd conntrack)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  # podwire starts its own ovsdb-server, ovs-vswitchd and etcd where it needs them: keep the packages'
  # services from starting system-wide during the install.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; own_policy=1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  if [ "$own_policy" = 1 ]; then rm -f "$policy"; fi
fi
# The Kubernetes bed (bed/k8s/) runs a containerd of its own per node: the package's system service
# must not run (policy-rc.d above kept it from starting at install; disabled here so that no boot
# starts it either).
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now containerd.service >/dev/null 2>&1 || true
fi
rm -f /etc/systemd/system/multi-user.target.wants/containerd.service
# scripts/vm-kernel-test.sh (npm run test:vm): qemu alone, without the firmware and desktop bits it recommends.
if ! command -v qemu-system-x86_64 >/dev/null; then
  echo "setup: installing qemu-system-x86"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
fi

if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
npm run build

case "$start" in
  demo)
    echo "setup: running the demo (bin/podwire demo --help for its options)"
    exec bin/podwire demo ;;
  agent)
    echo "setup: starting the agent on config/default.yaml (Ctrl-C stops it)"
    exec bin/podwire agent --config config/default.yaml ;;
esac
