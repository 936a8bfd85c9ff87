#!/usr/bin/env bash
# The IPAM power-cut test (I4, issues 16 and 30): the file store's state directory on a virtio disk
# of its own (ext4, qemu cache=none, so the host keeps only what the guest wrote out and nothing of
# the guest's page cache), claims and releases running in the guest (test/ipam/powercut-guest.ts),
# and the guest killed hard (SIGKILL of qemu) CYCLES times (default 10), each time the moment it says
# it has just finished the step the cut is aimed at, in turn: a claim answered, a store directory
# made (mkdirDurably), a release done. The guest's kernel flushes nothing on its own (ext4 commit=600,
# periodic writeback off), so only the store's own syncs put anything on the disk, however slow the
# guest or this machine: a dropped sync loses its step at every cut aimed at it, not by luck. After
# each cut the next boot reads the store first: no torn claim file, no owner with two claims, every
# claim the previous boot answered (and did not release) still there, every store directory made
# still there. A dropped fdatasync leaves empty claim files (every claim or release cut); a dropped
# directory fsync loses the last answered claim (claim cut) or the new directory (mkdir cut); a
# dropped parent fsync in mkdirDurably loses the new directory (mkdir cut; after a claim the range
# directory's own fsync commits the ext4 journal, parent entry included).
#
#   scripts/vm-powercut.sh            (npm run build first; npm run test:vm runs it)
#   PODWIRE_POWERCUT_CYCLES=N         cuts (the kinds in turn: claim, mkdir, release)
#
# Same guest as vm-kernel-test.sh (Debian's kernel, this machine's root read-only over virtio-9p,
# software emulation); its disk image lives in .cache and is removed at the end, pass or fail.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
guest=${PODWIRE_POWERCUT_GUEST:-dist/test/ipam/powercut-guest.js}
[ -f "$guest" ] || { echo "vm-powercut: no $guest (npm run build first?)" >&2; exit 2; }
command -v qemu-system-x86_64 >/dev/null || { echo "vm-powercut: qemu-system-x86_64 missing" >&2; exit 2; }
command -v mkfs.ext4 >/dev/null || { echo "vm-powercut: mkfs.ext4 missing (e2fsprogs)" >&2; exit 2; }
busybox=/bin/busybox
[ -x "$busybox" ] || { echo "vm-powercut: busybox-static missing" >&2; exit 2; }
cycles=${PODWIRE_POWERCUT_CYCLES:-10}

cache=${PODWIRE_VM_CACHE:-$repo/.cache/vm}
mkdir -p "$cache"
if [ ! -d "$cache/root/boot" ]; then
  apt-cache show linux-image-amd64 >/dev/null 2>&1 || apt-get update -qq
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
  [ -n "$pkg" ] || { echo "vm-powercut: no linux-image package known to apt" >&2; exit 2; }
  (cd "$cache" && apt-get download -qq "$pkg")
  dpkg-deb -x "$cache"/"$pkg"_*.deb "$cache/root.tmp"
  rm -f "$cache"/"$pkg"_*.deb
  mv "$cache/root.tmp" "$cache/root"
fi
kver=$(basename "$(ls -d "$cache"/root/lib/modules/*)")
[ -f "$cache/root/lib/modules/$kver/modules.dep" ] || depmod -b "$cache/root" "$kver"
mods=$cache/root/lib/modules/$kver/kernel

mkdir -p "$repo/.cache"
work=$(mktemp -d "$repo/.cache/powercut.XXXXXX")
qemu_pid=
cleanup() {
  [ -n "$qemu_pid" ] && kill -9 "$qemu_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
init=$work/initramfs
mkdir -p "$init"/{bin,proc,sys,dev,host,mods}
cp "$busybox" "$init/bin/busybox"
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
# All in the initramfs: 9p for this machine's root, virtio-blk and ext4 for the state disk.
for m in fs/9p/9p net/9p/9pnet_virtio drivers/virtio/virtio_pci drivers/block/virtio_blk crypto/crc32c_generic fs/ext4/ext4; do
  load_order "kernel/$m.ko"
done
for m in "${ordered[@]}"; do cp "$mods/$m" "$init/mods/"; done

cat > "$init/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(for m in "${ordered[@]}"; do printf '%s ' "$(basename "$m")"; done); do insmod /mods/\$m 2>/dev/null || echo "insmod \$m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 hostroot /host
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mount -t tmpfs run /host/run; mkdir -p /host/run/tmp /host/run/state
# Nothing written out but what the store syncs: no journal commit on a timer, no periodic writeback.
echo 0 > /proc/sys/vm/dirty_writeback_centisecs; echo 360000 > /proc/sys/vm/dirty_expire_centisecs
mount -t ext4 -o commit=600 /dev/vda /host/run/state || echo "POWERCUT NODISK"
mkdir -p /host/run/log; mount -t 9p -o trans=virtio,version=9p2000.L pclog /host/run/log
boot=\$(cat /proc/cmdline | tr ' ' '\n' | sed -n 's/^pcboot=//p')
mode=\$(cat /proc/cmdline | tr ' ' '\n' | sed -n 's/^pcmode=//p')
chroot /host /bin/sh -c "cd $repo && TMPDIR=/run/tmp node $guest /run/state/ipam \$boot /run/log/boot-\$boot.log \$mode"
echo "POWERCUT EXIT \$?"
poweroff -f
EOF
chmod +x "$init/init"
(cd "$init" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) > "$work/initrd.gz"

mkdir -p "$work/log"
disk=$work/state.img
truncate -s 128M "$disk"
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$disk"

# boot N MODE CONSOLE: starts the guest in the background; sets qemu_pid.
boot() {
  qemu-system-x86_64 -m 1024 -smp 2 -nographic -no-reboot -nic none \
    -kernel "$cache/root/boot/vmlinuz-$kver" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 loglevel=1 panic=-1 pcboot=$1 pcmode=$2" \
    -drive "file=$disk,if=virtio,format=raw,cache=none" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap \
    -virtfs "local,path=$work/log,mount_tag=pclog,security_model=passthrough" \
    >"$3" 2>&1 &
  qemu_pid=$!
}

# wait_for FILE PATTERN SECONDS: the limit only ends a guest that hangs (a boot takes 30 s here
# alone, minutes beside other emulated guests); nothing is judged by how long a step took.
wait_for() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$qemu_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# The guest's lines of boot N (from its log on the 9p share, never behind what it did).
lines() { grep -a '^POWERCUT ' "$work/log/boot-$1.log" 2>/dev/null || true; }

kinds=(claim mkdir release)
declare -A cuts=() caught=()
failures=0
expected=$work/expected # claims answered and not released by the last boot
made=$work/made         # store directories made by earlier boots and not yet found lost
: > "$expected"
: > "$made"
: > "$work/torn"
cut=
for ((cycle = 1; cycle <= cycles + 1; cycle++)); do
  console=$work/console-$cycle.log
  mode=${kinds[$(((cycle - 1) % ${#kinds[@]}))]}
  [ "$cycle" -gt "$cycles" ] && mode=check
  boot "$cycle" "$mode" "$console"
  if ! wait_for "$work/log/boot-$cycle.log" 'POWERCUT CHECKED' 900; then
    echo "vm-powercut: boot $cycle did not check the store; its console:" >&2
    tr -d '\r' < "$console" | tail -30 >&2
    exit 1
  fi
  # What this boot found against what the last one answered. A torn file is counted against the cut
  # before the boot that first finds it (later boots find it again).
  held=$(lines "$cycle" | awk '$2 == "HELD" {print $3 " " $4}' | sort)
  torn=$(lines "$cycle" | awk '$2 == "TORN" || $2 == "DUPLICATE" || $2 == "LISTFAILED"' | sort)
  newtorn=$(comm -23 <(echo "$torn" | grep . || true) "$work/torn")
  echo "$torn" | grep . > "$work/torn" || true
  missing=$(comm -23 <(sort "$expected") <(echo "$held"))
  madeheld=$(lines "$cycle" | awk '$2 == "MADEHELD" {print $3}' | sort)
  lostdirs=$(comm -23 <(sort "$made") <(echo "$madeheld"))
  verdict=ok
  if [ -n "$newtorn" ] || [ -n "$missing" ] || [ -n "$lostdirs" ]; then
    verdict=FAIL
    failures=$((failures + 1))
    [ -n "$cut" ] && caught[$cut]=$((${caught[$cut]:-0} + 1))
  fi
  echo "boot $cycle${cut:+ (after a $cut cut)}: $(echo "$held" | grep -c . || true) claims held, $(wc -l < "$expected") answered before the cut, $(wc -l < "$made") directories made; $verdict"
  [ -n "$newtorn" ] && echo "$newtorn" | sed 's/^/  /'
  [ -n "$missing" ] && echo "$missing" | sed 's/^/  lost: /'
  [ -n "$lostdirs" ] && echo "$lostdirs" | sed 's/^/  lost directory: made\//'
  if [ "$mode" = check ]; then
    wait "$qemu_pid" || true
    qemu_pid=
    break
  fi
  # The guest says CUT once the aimed-at step is done and then does nothing; cut the power at once.
  if ! wait_for "$work/log/boot-$cycle.log" 'POWERCUT CUT' 900; then
    echo "vm-powercut: boot $cycle did not reach its $mode cut; its console:" >&2
    tr -d '\r' < "$console" | tail -30 >&2
    exit 1
  fi
  kill -9 "$qemu_pid"
  wait "$qemu_pid" 2>/dev/null || true
  qemu_pid=
  cut=$mode
  cuts[$cut]=$((${cuts[$cut]:-0} + 1))
  # Answered and not released by this boot, plus what earlier boots left that this one did not touch.
  lines "$cycle" | awk '
    $2 == "ANSWERED" { held[$3 " " $4] = 1 }
    $2 == "RELEASING" { delete held[$3 " " $4] }
    END { for (k in held) print k }' > "$work/answered"
  { echo "$held"; cat "$work/answered"; } | grep . | sort -u > "$expected.new"
  # Released (or being released) by this boot: not expected any more; a release lost to the cut is
  # allowed (releases are not fsynced; reconcile repairs them, store.ts).
  lines "$cycle" | awk '$2 == "RELEASING" {print $3 " " $4}' | sort > "$work/released"
  comm -23 "$expected.new" "$work/released" > "$expected"
  # Directories: those this boot found (a lost one is reported once) and the one it made.
  { echo "$madeheld"; lines "$cycle" | awk '$2 == "MADE" {print $3}'; } | grep . | sort -u > "$made" || true
done
summary=
for k in "${kinds[@]}"; do summary+=" $k ${caught[$k]:-0}/${cuts[$k]:-0},"; done
echo "vm-powercut: $cycles cuts; cuts after which the next boot found a torn, duplicate or lost claim or a lost directory:${summary%,}"
[ "$failures" -eq 0 ]
