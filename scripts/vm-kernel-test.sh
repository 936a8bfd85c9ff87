#!/usr/bin/env bash
# Runs some of podwire's kernel tests inside a VM on Debian's own kernel, for what the kernel of
# these machines is built without: bridge VLAN filtering (CONFIG_BRIDGE_VLAN_FILTERING), 802.1Q
# devices, and Open vSwitch's kernel datapath (openvswitch.ko: the OVS suites run there with
# PODWIRE_OVS_DATAPATH=system). The guest sees this machine's root file system read-only over
# virtio-9p and runs the already built tests from it (`npm run build` first); it has no network
# device. After the tests it lists what they left behind (namespaces, temporary files, daemons,
# links, kernel datapaths, nftables rules); anything there fails the run.
#
#   scripts/vm-kernel-test.sh dist/test/kernel/netlink/bridge-vlan.test.js ...
#   scripts/vm-kernel-test.sh --run 'node dist/bench/run.js --scenarios 4 --quick'
#
# --run COMMAND [ARG...] runs one shell command in the guest instead of tests (from the repository's
# top, same environment and leftover check) and exits with its status: `npm run bench:vm` runs the OVS
# bench (scenario 4) there, on OVS's kernel datapath.
#
# Needs root, qemu-system-x86 and busybox-static (both Debian packages); downloads Debian's kernel
# package (linux-image-amd64) once into $PODWIRE_VM_CACHE (default .cache/vm in the repository,
# ignored by git). Runs under software emulation (minutes for the suites of `npm run test:vm`, by how
# busy the machine is: see docs/architecture.md, Tests); PODWIRE_VM_KVM=1 tries KVM. Exits with the tests' status; prints their TAP output.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
usage="usage: $0 TEST.js... | $0 --run COMMAND [ARG...]"
[ "$#" -gt 0 ] || { echo "$usage" >&2; exit 2; }
if [ "$1" = --run ]; then
  shift
  guest_cmd="$*" # COMMAND and any words after it (`npm run bench:vm -- --quick`)
  [ -n "$guest_cmd" ] || { echo "$usage" >&2; exit 2; }
  case $guest_cmd in *"'"*) echo "vm-kernel-test: --run COMMAND must not contain a single quote" >&2; exit 2 ;; esac
  run_mode=1
else
  for t in "$@"; do [ -f "$t" ] || { echo "vm-kernel-test: no $t (npm run build first?)" >&2; exit 2; }; done
  guest_cmd="node --test --test-reporter=tap --test-concurrency=1 $*"
fi
command -v qemu-system-x86_64 >/dev/null || { echo "vm-kernel-test: qemu-system-x86_64 missing (apt-get install qemu-system-x86)" >&2; exit 2; }
busybox=/bin/busybox
[ -x "$busybox" ] || { echo "vm-kernel-test: busybox-static missing" >&2; exit 2; }

cache=${PODWIRE_VM_CACHE:-$repo/.cache/vm}
mkdir -p "$cache"
if [ ! -d "$cache/root/boot" ]; then
  apt-cache show linux-image-amd64 >/dev/null 2>&1 || apt-get update -qq
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
  [ -n "$pkg" ] || { echo "vm-kernel-test: no linux-image package known to apt (apt-get update?)" >&2; exit 2; }
  (cd "$cache" && apt-get download -qq "$pkg")
  dpkg-deb -x "$cache"/"$pkg"_*.deb "$cache/root.tmp"
  rm -f "$cache"/"$pkg"_*.deb
  mv "$cache/root.tmp" "$cache/root"
fi
kver=$(basename "$(ls -d "$cache"/root/lib/modules/*)")
[ -f "$cache/root/lib/modules/$kver/modules.dep" ] || depmod -b "$cache/root" "$kver"
mods=$cache/root/lib/modules/$kver/kernel

work=$(mktemp -d /tmp/podwire-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
init=$work/initramfs
mkdir -p "$init"/{bin,proc,sys,dev,host,mods}
cp "$busybox" "$init/bin/busybox"
# Modules in load order (dependencies first), from modules.dep, as paths under kernel/.
declare -A seen=()
ordered=()
load_order() {
  local m=$1 dep
  [ -n "${seen[$m]:-}" ] && return
  seen[$m]=1
  for dep in $(awk -v m="$m:" '$1 == m { $1 = ""; print }' "$cache/root/lib/modules/$kver/modules.dep"); do
    load_order "$dep"
  done
  ordered+=("${m#kernel/}")
}
# What mounts this machine's root over virtio-9p (copied into the initramfs), then what the tests use
# (loaded from the mounted copy: the guest has no modprobe of its own).
for m in fs/9p/9p net/9p/9pnet_virtio drivers/virtio/virtio_pci; do load_order "kernel/$m.ko"; done
root_mods=("${ordered[@]}")
ordered=()
# libcrc32c (for nf_tables and openvswitch) finds its algorithm through the crypto API, which would ask
# modprobe. openvswitch: the OVS kernel datapath (its dependencies bring conntrack, NAT and defrag).
# ifb and tc's ingress qdisc, u32, mirred and tbf: the checksum hop and the bandwidth capability
# (decisions 32, 42), which the agent sets up on both datapaths.
for m in crypto/crc32c_generic net/bridge/bridge drivers/net/veth net/8021q/8021q net/netfilter/nf_tables \
  net/openvswitch/openvswitch drivers/net/ifb net/sched/sch_ingress net/sched/cls_u32 net/sched/act_mirred \
  net/sched/sch_tbf; do
  load_order "kernel/$m.ko"
done
# nft lists every kind of object when it starts: all of nftables' own modules, as modprobe would.
# The bridge family's own expressions too (its meta keys: the Linux bridge's pod guards, decision 17).
for m in "$mods"/net/netfilter/nft_*.ko "$mods"/net/netfilter/nf_flow_table*.ko "$mods"/net/bridge/netfilter/nft_*.ko; do
  load_order "kernel/${m#"$mods/"}"
done
test_mods=("${ordered[@]}")
for m in "${root_mods[@]}"; do cp "$mods/$m" "$init/mods/"; done

# What a test run must not leave behind (each test cleans up, pass or fail): run in the guest after the
# tests, in the chroot; prints every leftover, one a line. $1: the top of the repository's path when it
# lives under /tmp (kept there on purpose), else nothing.
cat > "$init/leftovers.sh" <<'LEFT'
ip netns list
find /run/tmp /tmp -mindepth 1 -maxdepth 1 ! -path "${1:-/nonexistent}"
ps -eo pid=,comm= | grep -E ' (ovsdb-server|ovs-vswitchd|node|python3|tcpdump|arping|ping)$'
ip -o link show | grep -v ': lo:'
ovs-dpctl dump-dps 2>/dev/null
nft list ruleset
exit 0
LEFT
tmp_top=
case $repo/ in /tmp/*) rel=${repo#/tmp/} && tmp_top=/tmp/${rel%%/*} ;; esac

cat > "$init/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(for m in "${root_mods[@]}"; do printf '%s ' "$(basename "$m")"; done); do insmod /mods/\$m || echo "insmod \$m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /host
# ifb with no devices of its own (numifbs=0): the agent makes the one it uses, and the leftover check
# would find the module's ifb0 and ifb1.
for m in ${test_mods[*]}; do
  case \$m in *drivers/net/ifb.ko) p=numifbs=0 ;; *) p= ;; esac
  insmod /host$mods/\$m \$p || echo "insmod \$m failed"
done
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
# PODWIRE_VM_GUEST=1: the suites fail instead of skipping when the kernel lacks what they test (a
# module that did not load must not turn the run green). PODWIRE_OVS_DATAPATH=system: the OVS suites
# run on the kernel datapath (bed/ovs.ts). /run is the guest's own and temporary files go to TMPDIR
# under it. /tmp is a guest tmpfs too, because glibc's tmpfile(3) (ovsdb-server) ignores TMPDIR; the
# repository is bound back into it when it lives there (as a CI clone may).
mount -t tmpfs run /host/run; mkdir -p /host/run/tmp
case $repo/ in /tmp/*) mkdir -p /repo; mount -o bind /host$repo /repo ;; esac
mount -t tmpfs tmp /host/tmp
case $repo/ in /tmp/*) mkdir -p /host$repo; mount -o bind /repo /host$repo ;; esac
chroot /host /bin/sh -c 'ip link set lo up; cd $repo && TMPDIR=/run/tmp PODWIRE_VM_GUEST=1 PODWIRE_OVS_DATAPATH=system $guest_cmd'
status=\$?
cp /leftovers.sh /host/run/leftovers.sh
chroot /host /bin/sh /run/leftovers.sh $tmp_top > /leftovers.txt 2>&1
while read -r line; do echo "PODWIRE-VM-LEFTOVER \$line"; status=1; done < /leftovers.txt
echo "PODWIRE-VM-EXIT \$status"
poweroff -f
EOF
chmod +x "$init/init"
(cd "$init" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) > "$work/initrd.gz"

accel=()
# KVM here starts the guest but its kernel never prints a line (nested virtualisation); opt in.
[ "${PODWIRE_VM_KVM:-0}" = 1 ] && accel=(-enable-kvm)
out=$work/console.log
# The guest is emulated: the suite took 24.6 min on an idle machine (2026-12-02) and ran past 30 min
# beside a Kubernetes build from nothing and other tests (CI with empty caches). The limit catches a
# hung guest; 45 min keeps CI under its 90 even then.
timeout "${PODWIRE_VM_TIMEOUT:-2700}" qemu-system-x86_64 "${accel[@]}" -m 2048 -smp 2 -nographic -no-reboot -nic none \
  -kernel "$cache/root/boot/vmlinuz-$kver" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 loglevel=${PODWIRE_VM_LOGLEVEL:-3} panic=-1" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap >"$out" 2>&1 || true
tr -d '\r' < "$out" > "$out.txt"
status=$(awk '/^PODWIRE-VM-EXIT/ {print $2}' "$out.txt")
if [ -n "${run_mode:-}" ]; then
  # What the command printed, after the kernel's boot lines (loglevel 3 keeps them few).
  grep -v '^PODWIRE-VM-EXIT' "$out.txt"
  [ -n "$status" ] || { echo "vm-kernel-test: the guest did not finish the command" >&2; exit 1; }
  exit "$status"
fi
# The TAP stream, from its first line (kernel messages may share the serial line with it).
awk '/TAP version|# Subtest/ { on = 1 } on && !/^PODWIRE-VM-EXIT/' "$out.txt"
if [ -z "$status" ] || ! grep -q '^# tests [0-9]' "$out.txt"; then
  echo "vm-kernel-test: the guest ran no test (exit ${status:-none}); the end of its console:" >&2
  tail -40 "$out.txt" >&2
  exit 1
fi
exit "$status"
