#!/usr/bin/env bash
# Builds, on this machine, every container image the Kubernetes test bed (issue 26) needs, since
# there is no registry to pull from, and saves each as a docker archive for
# `ctr -n k8s.io images import`, under the exact name the manifests and the e2e ask for:
#   podwire   deploy/Dockerfile, unchanged, over local equivalents of its bases (node:20-bookworm
#             and node:20-bookworm-slim: Debian 12 from debootstrap plus this machine's Node.js 20)
#   pause     the kubelet's default sandbox image, from build/pause/linux/pause.c (FROM scratch)
#   agnhost   the e2e's test image, from test/images/agnhost, on Debian with upstream's tools
#   nginx, debian-iptables  the e2e's Nginx and DebianIptables images, which tests podwire runs
#             need (an EndpointSlice test; the KubeProxy CLOSE_WAIT test's conntrack): Debian's
#             packages on the Debian base, under the names test/utils/image/manifest.go gives
# pause and agnhost come from the Kubernetes source tree that scripts/k8s-build.sh unpacks (read
# only). An image is rebuilt only when it is missing or its inputs changed (a key over them is kept
# as a label and beside each archive); a second run with nothing changed does nothing but say so.
# Everything runs at the lowest CPU and I/O priority; podman keeps all its state in the cache and
# builds with the host's network (no netavark rules, no ip_forward). See
# docs/decisions/0037-images-built-here.md.
#
#   scripts/k8s-images.sh [IMAGE...]   build what is missing or stale; IMAGE: node-base, podwire,
#                                      pause, agnhost, nginx, debian-iptables (default: all, in
#                                      that order)
#   scripts/k8s-images.sh --print-dir  print the archive directory (fails unless all are built);
#                                      its images.list has one line per archive: FILE NAME...
#
# PODWIRE_IMAGES_CACHE (default /var/cache/podwire/images): archives, podman's storage, the Go
# build cache. PODWIRE_K8S_CACHE (default /var/cache/podwire/k8s): where k8s-build.sh unpacked the
# source. Nothing is written inside the repository.
set -euo pipefail
# One block, read before it runs: editing or checking out this file during a build changes nothing.
{

cache=${PODWIRE_IMAGES_CACHE:-/var/cache/podwire/images}
k8s_cache=${PODWIRE_K8S_CACHE:-/var/cache/podwire/k8s}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
debian_sources=/etc/apt/sources.list.d/debian.sources
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
suite=bookworm
go_bin=/usr/lib/go-1.19/bin
# podman's short-lived state (runroot, libpod's tmp dir): on tmpfs, removed when the script ends.
run_dir=/run/podwire-images
# Bump when a recipe below changes in a way the keys do not see.
recipe=1

# Names the node bases must carry for deploy/Dockerfile to build unchanged.
node_full=docker.io/library/node:20-bookworm
node_slim=docker.io/library/node:20-bookworm-slim
debian_base=localhost/podwire-images/debian:bookworm
# What node:20-bookworm adds over the slim image: the part of buildpack-deps:bookworm (curl, scm and
# the toolchain) that a Node build uses; not its image and database libraries.
full_packages=(ca-certificates curl gnupg netbase wget git openssh-client procps autoconf automake
  bzip2 dpkg-dev file g++ gcc libc6-dev libtool make patch unzip xz-utils zlib1g-dev libssl-dev python3)
# What upstream's agnhost image adds to Alpine (test/images/agnhost/Dockerfile: bind-tools curl
# netcat-openbsd iproute2 iperf bash), in Debian's names, plus ping, and wget, which Alpine's busybox
# gives upstream's image and the e2e runs in it (the Service checks' `wget -q -T 1 -O - http://VIP`).
agnhost_packages=(bind9-dnsutils curl ca-certificates netcat-openbsd iproute2 iperf bash iputils-ping wget)
# The e2e's other images that the [sig-network] tests podwire runs need (bed/k8s-e2e/tests.yaml), in
# Debian's packages: Nginx (an nginx in the foreground), DebianIptables (upstream's
# build/debian-iptables package list: iptables, conntrack, ipset, ebtables, kmod, netbase).
nginx_packages=(nginx)
iptables_packages=(iptables conntrack ipset ebtables kmod netbase)

die() { echo "k8s-images: $*" >&2; exit 1; }
log() { echo "k8s-images: $*"; }
usage() { echo "usage: $0 [--print-dir | node-base|podwire|pause|agnhost|nginx|debian-iptables ...]" >&2; exit 2; }

all_targets=(node-base podwire pause agnhost nginx debian-iptables)
archives=(podwire pause agnhost nginx debian-iptables)
print_dir=0
targets=()
for a in "$@"; do
  case "$a" in
    --print-dir) print_dir=1 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    node-base|podwire|pause|agnhost|nginx|debian-iptables) targets+=("$a") ;;
    *) usage ;;
  esac
done
[ "$print_dir" = 0 ] || [ "$#" = 1 ] || usage
[ "${#targets[@]}" -gt 0 ] || targets=("${all_targets[@]}")
wanted() { local t; for t in "${targets[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }

if [ "$print_dir" = 1 ]; then
  for a in "${archives[@]}"; do
    [ -f "$cache/$a.tar" ] && [ -f "$cache/$a.tar.key" ] || die "no $cache/$a.tar: run $0 first"
  done
  echo "$cache"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, podman, apt-get)"
# Lowest priority for this shell and everything it starts.
# Equivalent to: nice -n 19 ionice -c3 <this script>
renice -n 19 -p $$ >/dev/null
ionice -c3 -p $$

mkdir -p "$cache"
exec 9>>"$cache/.lock"
flock -n 9 || die "another k8s-images run holds $cache/.lock"

work=$cache/work
mkdir -p "$work" "$cache/tmp" "$cache/podman/networks"

# --- podman, confined to the cache -----------------------------------------------------------------
# Its own storage (graphroot in the cache, runroot on tmpfs), no events log, its network config in
# the cache: the machine's /var/lib/containers, /etc/containers and /var/tmp stay as they are.
# netavark creates /run/containers/networks whatever the config says: removed at the end if it was
# not there before.
run_containers_existed=0
[ ! -e /run/containers ] || run_containers_existed=1
# containers/image keeps a blob-info cache in /var/lib/containers/cache whatever graphroot says:
# removed at the end (and the directories, when empty) if it was not there before.
blob_cache_existed=0
[ ! -e /var/lib/containers/cache/blob-info-cache-v1.boltdb ] || blob_cache_existed=1
# runc's default state root, made on first use; removed at the end if it was not there before.
run_runc_existed=0
[ ! -e /run/runc ] || run_runc_existed=1
cat >"$cache/podman/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$cache/storage"
runroot = "$run_dir/storage"
EOF
# podman run's default limits (nofile and nproc 1048576) are above what this machine's root may set
# (no CAP_SYS_RESOURCE; the hard nofile is 20000): runc fails with "error setting rlimits". nproc
# at the hard limit (96363 here) fails as well: 32768 does not, and is plenty for a check run.
cat >"$cache/podman/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
[engine]
tmp_dir = "$run_dir/libpod"
events_logger = "none"
image_copy_tmp_dir = "$cache/tmp"
[network]
network_config_dir = "$cache/podman/networks"
EOF
export CONTAINERS_STORAGE_CONF=$cache/podman/storage.conf
export CONTAINERS_CONF=$cache/podman/containers.conf
export TMPDIR=$cache/tmp
pm() { podman "$@"; }

cleanup() {
  local rc=$?
  trap - ERR
  set +e
  # debootstrap mounts /proc and /sys in its target; an interrupted run can leave them.
  local m
  for m in $(findmnt -rn -o TARGET | grep -F "$work/" | sort -r); do umount -l "$m"; done
  rm -rf "$work"/*.partial "$work"/ctx-* "$cache/tmp"/* 2>/dev/null
  # Containers left by an interrupted build (podman build removes its own on success and failure;
  # killed, as a failed CI run kills it, it leaves its working container: --external lists those).
  pm ps -aq --external 2>/dev/null | xargs -r podman rm -f >/dev/null 2>&1
  pm unmount -a >/dev/null 2>&1
  # Whatever is still mounted in the storage (a killed build's root, seen left after a failed CI run).
  for m in $(findmnt -rn -o TARGET | grep -F "$cache/storage/overlay/" | sort -r); do umount -l "$m"; done
  # containers/storage bind-mounts its overlay directory onto itself (made private) for as long as
  # the storage is in use: nothing uses it once the script ends.
  findmnt -rn -o TARGET "$cache/storage/overlay" >/dev/null 2>&1 && umount "$cache/storage/overlay"
  rm -rf "$run_dir"
  [ "$run_runc_existed" = 1 ] || rmdir /run/runc 2>/dev/null
  if [ "$blob_cache_existed" = 0 ]; then
    rm -f /var/lib/containers/cache/blob-info-cache-v1.boltdb
    rmdir /var/lib/containers/cache /var/lib/containers 2>/dev/null
  fi
  if [ "$run_containers_existed" = 0 ] && [ -d /run/containers ]; then
    rm -f /run/containers/networks/netavark.lock /run/containers/networks/aardvark-dns/* 2>/dev/null
    rmdir /run/containers/networks/aardvark-dns /run/containers/networks /run/containers 2>/dev/null
  fi
  exit "$rc"
}
trap cleanup EXIT
# A command that fails outside a `|| die` still says where.
set -E
trap 'echo "k8s-images: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT TERM

# Equivalent to: sha256sum of stdin, hex only
hash() { sha256sum | cut -d' ' -f1; }
# The key label of an image, empty when the image is missing.
image_key() { pm image inspect --format '{{index .Labels "io.podwire.images.key"}}' "$1" 2>/dev/null || true; }
image_id() { pm image inspect --format '{{.Id}}' "$1"; }
image_size() { pm image inspect --format '{{.Size}}' "$1" | awk '{ printf "%.0f MB", $1 / 1e6 }'; }

t0=0
stage() { stage_name=$1; t0=$(date +%s); log "$stage_name ..."; }
stage_done() {
  local took=$(( $(date +%s) - t0 ))
  log "$stage_name took $((took / 60)) min $((took % 60)) s"
  echo "$(date -u +%FT%TZ) $stage_name: ${took}s" >>"$cache/timings.log"
}

need_packages() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ "${#missing[@]}" = 0 ] && return 0
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "could not install ${missing[*]}"
}

# Saves an image as a docker archive (what `ctr images import` reads) under all its names, by
# rename, with the key beside it; skips it when the archive already holds that key.
save_archive() {
  local file=$1 key=$2; shift 2
  if [ -f "$cache/$file" ] && [ "$(cat "$cache/$file.key" 2>/dev/null)" = "$key" ]; then
    log "$cache/$file is up to date: $*"
    return 0
  fi
  rm -f "$cache/$file.partial"
  pm save -q -m --format docker-archive -o "$cache/$file.partial" "$@" || die "podman save $* failed"
  mv "$cache/$file.partial" "$cache/$file"
  echo "$key" >"$cache/$file.key"
  echo "$file $*" >"$cache/$file.names"
  log "saved $cache/$file ($(du -m "$cache/$file" | cut -f1) MB): $*"
}

write_list() {
  local a
  : >"$cache/images.list.tmp"
  for a in "${archives[@]}"; do
    [ ! -f "$cache/$a.tar.names" ] || cat "$cache/$a.tar.names" >>"$cache/images.list.tmp"
  done
  mv "$cache/images.list.tmp" "$cache/images.list"
}

# --- 1. node-base: Debian 12 minbase, node:20-bookworm-slim, node:20-bookworm ------------------------
# The main archive of debian.sources (not -security): URIs and the first suite's name.
mirror=$(awk -v RS= '/(^|\n)Types:[^\n]*deb/ && !/URIs:[^\n]*-security/ {
  n = split($0, l, "\n"); for (i = 1; i <= n; i++) if (l[i] ~ /^URIs:/) { split(l[i], u, /[ \t]+/); print u[2]; exit } }' \
  "$debian_sources" 2>/dev/null || true)

debian_key() {
  [ -n "$mirror" ] || die "no main archive URI in $debian_sources"
  { echo "recipe $recipe $suite $mirror"; cat "$debian_sources"; } | hash
}

build_debian() {
  local key
  key=$(debian_key)
  if [ "$(image_key "$debian_base")" = "$key" ]; then log "$debian_base is up to date"; return 0; fi
  need_packages debootstrap
  stage "debootstrap --variant=minbase $suite from $mirror"
  local root=$work/rootfs.partial
  rm -rf "$root"
  debootstrap --variant=minbase --arch=amd64 --keyring="$keyring" "$suite" "$root" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || die "debootstrap failed: see $work/debootstrap.log"
  # As Debian's own images are: the archive in deb822 form (the one this machine uses, with its
  # security and updates suites), no package lists or .debs kept, apt cleaning up after itself,
  # and nothing of this host (podman provides resolv.conf and hosts at run time).
  rm -f "$root/etc/apt/sources.list"
  cp "$debian_sources" "$root/etc/apt/sources.list.d/debian.sources"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin
  printf '%s\n' \
    'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };' \
    'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };' \
    'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";' >"$root/etc/apt/apt.conf.d/docker-clean"
  rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
  : >"$root/etc/resolv.conf"
  echo localhost >"$root/etc/hostname"
  tar --numeric-owner --xattrs -C "$root" -cf "$work/rootfs.tar.partial" . \
    || die "tar of the debootstrap root failed"
  # Equivalent to: podman import rootfs.tar debian:bookworm
  pm import -q --change 'CMD ["bash"]' --change "LABEL io.podwire.images.key=$key" \
    "$work/rootfs.tar.partial" "$debian_base" >/dev/null || die "podman import of the Debian root failed"
  rm -rf "$root" "$work/rootfs.tar.partial"
  stage_done
}

# This machine's Node.js 20 as it is installed (NodeSource's package, npm updated in place), laid
# out as the official images do: everything under /usr/local.
node_files=(/usr/bin/node /usr/lib/node_modules/npm /usr/lib/node_modules/corepack /usr/include/node)
node_key() {
  local f
  for f in "${node_files[@]}"; do [ -e "$f" ] || die "$f missing: this script uses the machine's Node.js 20"; done
  node --version | grep -q '^v20\.' || die "node is $(node --version), not 20"
  { echo "recipe $recipe base $(image_id "$debian_base")"
    find "${node_files[@]}" -type f -print0 | sort -z | xargs -0 sha256sum
    find "${node_files[@]}" -type l -printf '%p -> %l\n' | sort; } | hash
}

build_node_slim() {
  local key ctx version
  key=$(node_key)
  if [ "$(image_key "$node_slim")" = "$key" ]; then log "$node_slim is up to date"; return 0; fi
  stage "build $node_slim (the machine's node $(node --version), npm $(npm --version 2>/dev/null))"
  version=$(node --version | sed 's/^v//')
  ctx=$work/ctx-node
  rm -rf "$ctx"
  mkdir -p "$ctx/usr/local/bin" "$ctx/usr/local/lib/node_modules" "$ctx/usr/local/include"
  cp -a /usr/bin/node "$ctx/usr/local/bin/node"
  cp -a /usr/lib/node_modules/npm /usr/lib/node_modules/corepack "$ctx/usr/local/lib/node_modules/"
  cp -a /usr/include/node "$ctx/usr/local/include/node"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$ctx/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$ctx/usr/local/bin/npx"
  ln -s ../lib/node_modules/corepack/dist/corepack.js "$ctx/usr/local/bin/corepack"
  # The official images' entrypoint: runs `node ARGS` when the first argument is not a command.
  cat >"$ctx/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}")" ] || { [ -f "${1}" ] && ! [ -x "${1}" ]; }; then
  set -- node "$@"
fi
exec "$@"
EOF
  chmod 755 "$ctx/usr/local/bin/docker-entrypoint.sh"
  cat >"$ctx/Containerfile" <<EOF
FROM $debian_base
COPY usr/ /usr/
ENV NODE_VERSION=$version
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["node"]
EOF
  pm build -q --pull=never --network=none --label "io.podwire.images.key=$key" -t "$node_slim" "$ctx" \
    >/dev/null || die "podman build of $node_slim failed (see above)"
  rm -rf "$ctx"
  stage_done
}

# The certificate authorities this machine adds to Debian's (update-ca-certificates' local ones).
# Here that includes the CA of a TLS-intercepting egress proxy: the npm registry's certificate is
# signed by it, and npm ci in the build stages fails with SELF_SIGNED_CERT_IN_CHAIN without it.
local_cas=(/usr/local/share/ca-certificates/*.crt)
[ -e "${local_cas[0]}" ] || local_cas=()

build_node_full() {
  local key ctx
  key=$( { echo "recipe $recipe base $(image_id "$node_slim") ${full_packages[*]}"
    [ "${#local_cas[@]}" = 0 ] || sha256sum "${local_cas[@]}"; } | hash)
  if [ "$(image_key "$node_full")" = "$key" ]; then log "$node_full is up to date"; return 0; fi
  stage "build $node_full (apt-get install ${#full_packages[@]} packages, host network)"
  ctx=$work/ctx-node-full
  rm -rf "$ctx"; mkdir -p "$ctx/ca"
  [ "${#local_cas[@]}" = 0 ] || cp "${local_cas[@]}" "$ctx/ca/"
  # Only this build base trusts the machine's own CAs (Debian's store, and npm's global npmrc, as
  # the machine's npm does with cafile): the slim base, and so podwire's image, do not.
  cat >"$ctx/Containerfile" <<EOF
FROM $node_slim
RUN apt-get update && apt-get install -y --no-install-recommends ${full_packages[*]} \\
  && rm -rf /var/lib/apt/lists/*
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates && mkdir -p /usr/local/etc \\
  && echo cafile=/etc/ssl/certs/ca-certificates.crt >/usr/local/etc/npmrc
EOF
  pm build -q --pull=never --network=host --label "io.podwire.images.key=$key" -t "$node_full" "$ctx" \
    >/dev/null || die "podman build of $node_full failed (see above)"
  rm -rf "$ctx"
  stage_done
}

# --- 2. podwire: deploy/Dockerfile from the repository root ------------------------------------------
dockerfile=$repo/deploy/Dockerfile
ignorefile=$repo/deploy/Dockerfile.dockerignore
# The name deploy/daemonset.yaml runs (every container there uses the one image).
podwire_name=$(awk '$1 == "image:" { print $2; exit }' "$repo/deploy/daemonset.yaml")
podwire_dev=localhost/podwire:dev

# The key covers what the build can see: the Dockerfile, the ignore file and every file under the
# paths that file lets in. It must have the shape "*" then "!PATH" lines then excluding lines (a
# superset is hashed: excluded files under an admitted path count too, which only costs a rebuild
# that podman's layer cache makes short); another shape makes the key change on every run.
podwire_key() {
  local lines first p includes=()
  mapfile -t lines < <(grep -v '^[[:space:]]*\(#\|$\)' "$ignorefile")
  first=${lines[0]:-}
  for p in "${lines[@]:1}"; do
    case "$p" in '!'*) includes+=("${p#!}") ;; esac
  done
  {
    echo "recipe $recipe $(image_id "$node_full") $(image_id "$node_slim") $podwire_name"
    cat "$dockerfile" "$ignorefile"
    if [ "$first" != "*" ]; then
      echo "unrecognised ignore file: $(date +%s%N)"
    else
      (cd "$repo" && for p in "${includes[@]}"; do
        p=${p%/}
        [ -e "$p" ] || continue
        find "$p" -type f -print0
      done | sort -z | xargs -0 -r sha256sum)
    fi
  } | hash
}

build_podwire() {
  local key
  [ -n "$podwire_name" ] || die "no image: line in $repo/deploy/daemonset.yaml"
  for n in "$node_full" "$node_slim"; do
    pm image exists "$n" || die "$n is missing: build node-base first ($0 node-base)"
  done
  key=$(podwire_key)
  if [ "$(image_key "$podwire_name")" != "$key" ]; then
    stage "podman build -f deploy/Dockerfile (host network for npm and apt)"
    # As a user builds it: podman 4.3 reads deploy/Dockerfile.dockerignore by itself, as BuildKit
    # does (checked: a file that ignore file leaves out is not in the context), so no --ignorefile.
    (cd "$repo" && pm build --pull=never --network=host -f "$dockerfile" \
      --label "io.podwire.images.key=$key" -t "$podwire_name" -t "$podwire_dev" . ) \
      >"$cache/podwire-build.log" 2>&1 \
      || { tail -n 30 "$cache/podwire-build.log" >&2; die "podman build of deploy/Dockerfile failed: see $cache/podwire-build.log"; }
    stage_done
  fi
  check "$podwire_name" podwire --help
  save_archive podwire.tar "$key" "$podwire_name" "$podwire_dev"
}

# --- the Kubernetes source tree ----------------------------------------------------------------------
tree=
find_tree() {
  tree=$( { find "$k8s_cache" -mindepth 3 -maxdepth 3 -type d -path '*/src/kubernetes-*' 2>/dev/null || true; } | sort | tail -n 1)
  [ -n "$tree" ] && [ -f "$tree/build/pause/linux/pause.c" ] && [ -d "$tree/test/images/agnhost" ] \
    || die "no Kubernetes source tree under $k8s_cache/*/src/ (run scripts/k8s-build.sh; it unpacks it first)"
}

# A Go constant's string value from a Go source file: NAME = "value" or NAME: "value".
go_string() {
  sed -n "s/^[[:space:]]*$1[[:space:]]*[:=][[:space:]]*\"\([^\"]*\)\".*/\1/p" "$2" | head -n 1
}

# --- 3. pause: build/pause/linux/pause.c, static, FROM scratch ---------------------------------------
build_pause() {
  find_tree
  local opts=$tree/cmd/kubelet/app/options/container_runtime.go name version tag key ctx
  name=$(go_string defaultPodSandboxImageName "$opts")
  version=$(go_string defaultPodSandboxImageVersion "$opts")
  [ -n "$name" ] && [ -n "$version" ] || die "no default sandbox image in $opts"
  # The kubelet's default (--pod-infra-container-image, and the e2e's Pause image), and
  # containerd 1.6's default sandbox_image, so that either configuration finds it.
  local names=("$name:$version" registry.k8s.io/pause:3.6)
  need_packages gcc libc6-dev
  tag=$(awk -F' *[?:]?= *' '$1 == "TAG" { print $2; exit }' "$tree/build/pause/Makefile")
  key=$( { echo "recipe $recipe ${names[*]} $tag $(gcc --version | head -n 1)"; cat "$tree/build/pause/linux/pause.c"; } | hash)
  if [ "$(image_key "${names[0]}")" != "$key" ]; then
    stage "gcc -static pause.c (v$tag), image ${names[*]}"
    ctx=$work/ctx-pause
    rm -rf "$ctx"; mkdir -p "$ctx"
    # As build/pause/Makefile compiles it.
    gcc -Os -Wall -Werror -static -DVERSION="v$tag-podwire" -o "$ctx/pause" "$tree/build/pause/linux/pause.c" \
      || die "gcc build/pause/linux/pause.c failed"
    strip "$ctx/pause"
    # build/pause/Dockerfile with BASE=scratch.
    printf 'FROM scratch\nADD pause /pause\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
    local t tags=()
    for t in "${names[@]}"; do tags+=(-t "$t"); done
    pm build -q --pull=never --network=none --label "io.podwire.images.key=$key" "${tags[@]}" "$ctx" >/dev/null \
      || die "podman build of the pause image failed"
    rm -rf "$ctx"
    stage_done
  fi
  check "${names[0]}" -v
  save_archive pause.tar "$key" "${names[@]}"
}

# --- 4. agnhost: test/images/agnhost, static Go, on Debian with upstream's tools ----------------------
build_agnhost() {
  find_tree
  local manifest=$tree/test/utils/image/manifest.go reg line tag name key ctx version goversion
  reg=$(go_string PromoterE2eRegistry "$manifest")
  line=$(grep -m1 'configs\[Agnhost\] *= *Config{' "$manifest" || true)
  tag=$(sed -n 's/.*Config{promoterE2eRegistry, *"agnhost", *"\([^"]*\)"}.*/\1/p' <<<"$line")
  [ -n "$reg" ] && [ -n "$tag" ] || die "no agnhost image name in $manifest (configs[Agnhost] with promoterE2eRegistry)"
  name=$reg/agnhost:$tag
  version=$(cat "$tree/test/images/agnhost/VERSION")
  [ -x "$go_bin/go" ] || need_packages golang-1.19-go
  goversion=$("$go_bin/go" version)
  pm image exists "$debian_base" || die "$debian_base is missing: build node-base first ($0 node-base)"
  key=$( { echo "recipe $recipe $name $version $(basename "$(dirname "$(dirname "$tree")")") $goversion"
    echo "$(image_id "$debian_base") ${agnhost_packages[*]}"; } | hash)
  if [ "$(image_key "$name")" != "$key" ]; then
    stage "go build test/images/agnhost ($version), image $name"
    ctx=$work/ctx-agnhost
    rm -rf "$ctx"; mkdir -p "$ctx"
    # GOPATH mode as debian/rules and k8s-build.sh do, over a GOPATH of our own that links to the
    # tree (nothing is written into the tree or into k8s-build's cache).
    mkdir -p "$cache/gopath/src/k8s.io"
    ln -sfn "$tree" "$cache/gopath/src/k8s.io/kubernetes"
    (cd "$cache/gopath/src/k8s.io/kubernetes" \
      && GOPATH=$cache/gopath GO111MODULE=off CGO_ENABLED=0 GOFLAGS= GOCACHE=$cache/go-build \
         PATH=$go_bin:$PATH "$go_bin/go" build -o "$ctx/agnhost" ./test/images/agnhost) \
      || die "go build ./test/images/agnhost failed (see above)"
    cp "$tree/test/images/agnhost/porter/localhost.crt" "$tree/test/images/agnhost/porter/localhost.key" "$ctx/"
    # test/images/agnhost/Dockerfile, on Debian instead of Alpine and without CoreDNS (not in
    # Debian 12; the DNS tests are out of scope).
    cat >"$ctx/Containerfile" <<EOF
FROM $debian_base
RUN apt-get update && apt-get install -y --no-install-recommends ${agnhost_packages[*]} \\
  && rm -rf /var/lib/apt/lists/* && ln -s /usr/bin/iperf /usr/local/bin/iperf
EXPOSE 80 8080 8081 9376
RUN mkdir /uploads
ADD localhost.crt localhost.crt
ADD localhost.key localhost.key
ADD agnhost agnhost
RUN ln -s agnhost agnhost-2
ENTRYPOINT ["/agnhost"]
CMD ["pause"]
EOF
    pm build -q --pull=never --network=host --label "io.podwire.images.key=$key" \
      --label "io.podwire.agnhost.version=$version" -t "$name" "$ctx" >/dev/null \
      || die "podman build of $name failed"
    rm -rf "$ctx"
    stage_done
  fi
  check "$name" --help
  save_archive agnhost.tar "$key" "$name"
}

# An image's name as test/utils/image/manifest.go gives it: configs[ID] = Config{registryVar, "name",
# "tag"}, registryVar being the lower-case field of the default RegistryList (dockerLibraryRegistry
# is DockerLibraryRegistry: "docker.io/library").
e2e_image_name() {
  local id=$1 manifest=$tree/test/utils/image/manifest.go line regvar= name= tag= reg
  line=$(grep -m1 "configs\[$id\] *= *Config{" "$manifest" || true)
  read -r regvar name tag < <(sed -n 's/.*Config{\([A-Za-z]*\), *"\([^"]*\)", *"\([^"]*\)"}.*/\1 \2 \3/p' <<<"$line") || true
  [ -n "$regvar" ] && [ -n "$name" ] && [ -n "$tag" ] || die "no configs[$id] in $manifest"
  reg=$(go_string "${regvar^}" "$manifest")
  [ -n "$reg" ] || die "no ${regvar^} in $manifest's default registries"
  echo "$reg/$name:$tag"
}

# --- 5. nginx and debian-iptables: Debian packages on the Debian base, under the e2e's names ---------
# build_debian_tool ARCHIVE MANIFEST_ID "PACKAGES" "CONTAINERFILE TAIL" CHECK_ARGS...
build_debian_tool() {
  find_tree
  local archive=$1 id=$2 packages=$3 tail=$4 name key ctx
  shift 4
  name=$(e2e_image_name "$id")
  pm image exists "$debian_base" || die "$debian_base is missing: build node-base first ($0 node-base)"
  key=$( { echo "recipe $recipe $name $(image_id "$debian_base") $packages"; echo "$tail"; } | hash)
  if [ "$(image_key "$name")" != "$key" ]; then
    stage "image $name (Debian: $packages)"
    ctx=$work/ctx-$archive
    rm -rf "$ctx"; mkdir -p "$ctx"
    printf 'FROM %s\nRUN apt-get update && apt-get install -y --no-install-recommends %s && rm -rf /var/lib/apt/lists/*\n%s\n' \
      "$debian_base" "$packages" "$tail" >"$ctx/Containerfile"
    pm build -q --pull=never --network=host --label "io.podwire.images.key=$key" -t "$name" "$ctx" >/dev/null \
      || die "podman build of $name failed"
    rm -rf "$ctx"
    stage_done
  fi
  check "$name" "$@"
  save_archive "$archive.tar" "$key" "$name"
}

build_nginx() {
  # As the official image: logs to the container's output, nginx in the foreground, port 80.
  build_debian_tool nginx Nginx "${nginx_packages[*]}" \
    "$(printf '%s\n' 'RUN ln -sf /dev/stdout /var/log/nginx/access.log && ln -sf /dev/stderr /var/log/nginx/error.log' \
      'EXPOSE 80' 'STOPSIGNAL SIGQUIT' 'CMD ["nginx", "-g", "daemon off;"]')" nginx -t
}

build_debian_iptables() {
  # The e2e runs it with its own command (sleep, then conntrack through kubectl exec).
  build_debian_tool debian-iptables DebianIptables "${iptables_packages[*]}" 'CMD ["/bin/sh"]' conntrack --version
}

# Runs the image once, without a network, and fails unless the command succeeds.
check() {
  local image=$1; shift
  pm run --rm --network=none "$image" "$@" >"$work/check.out" 2>&1 \
    || { cat "$work/check.out" >&2; die "$image does not run: podman run $image $* failed"; }
}

if wanted node-base; then
  build_debian
  build_node_slim
  build_node_full
  check "$node_slim" node --version
  check "$node_full" npm --version
  log "$node_slim: $(image_size "$node_slim"), $node_full: $(image_size "$node_full")"
fi
if wanted podwire; then build_podwire; fi
if wanted pause; then build_pause; fi
if wanted agnhost; then build_agnhost; fi
if wanted nginx; then build_nginx; fi
if wanted debian-iptables; then build_debian_iptables; fi
# Images a change of inputs left without a name, and the build stages' cache, once a week old:
# the cache stays bounded and recent rebuilds stay quick.
pm image prune -f --filter until=168h >/dev/null || log "podman image prune failed (ignored)"
write_list
log "done; in $cache (ctr -n k8s.io images import FILE):"
sed 's/^/  /' "$cache/images.list"
exit 0
}
