#!/usr/bin/env bash
# Builds Kubernetes from Debian 12's own source package `kubernetes` (1.20.5+really1.20.2) for the
# cluster test bed (issue 26): the control plane, kubelet, kube-proxy, kubectl, the upstream e2e
# binary and the ginkgo CLI that runs it in parallel, the e2e image `agnhost` and the pause binary. It builds once into a cache outside the
# repository, keyed by the source package version, and only what is missing: a second run with the
# cache complete does nothing but say so. Everything runs at the lowest CPU and I/O priority (the
# machine is shared), in the way Debian's packaging builds it (debian/rules: GOPATH mode over a
# `.go/src/k8s.io/kubernetes` link to the tree, CGO off, `make WHAT=...`, which runs the code
# generators first). See docs/decisions/0036-kubernetes-built-from-debian-source.md.
#
#   scripts/k8s-build.sh               build what is missing (root: adds a deb-src entry, installs
#                                      the build's Debian packages)
#   scripts/k8s-build.sh --print-dir   print the bin directory (fails if the build is not complete)
#
# PODWIRE_K8S_CACHE (default /var/cache/podwire/k8s): <cache>/<version>/src is the unpacked source
# (with the build's GOPATH and Go build cache under its _output/local/go), <cache>/<version>/bin the
# binaries and BUILD-STAMP (durations, sizes). Nothing is written inside the repository.
set -euo pipefail
# The whole script is one block, read before it runs: editing or checking out this file while a
# long build runs does not change what that build executes.
{

pkg=kubernetes
cache=${PODWIRE_K8S_CACHE:-/var/cache/podwire/k8s}
go_bin=/usr/lib/go-1.19/bin
debsrc_file=/etc/apt/sources.list.d/podwire-deb-src.sources
debian_sources=/etc/apt/sources.list.d/debian.sources
# What `make WHAT=...` needs beyond a Debian base with make and gcc: the Go toolchain Debian 12
# builds this package with, rsync (hack/lib/golang.sh copies the generated files with it),
# dpkg-dev (`apt-get source` unpacks with dpkg-source), libc6-dev (the static pause binary).
# golang-github-modern-go-reflect2-dev: reflect2 1.0.2, vendored in place of the tree's 1.0.1 (below).
build_packages=(golang-1.19-go rsync dpkg-dev make gcc libc6-dev golang-github-modern-go-reflect2-dev)
stage1_targets=(cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler cmd/kubelet
  cmd/kube-proxy cmd/kubectl)
stage1_bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
stage2_bins=(e2e.test agnhost pause ginkgo)

die() { echo "k8s-build: $*" >&2; exit 1; }
log() { echo "k8s-build: $*"; }

print_dir=0
case "${1:-}" in
  '') ;;
  --print-dir) print_dir=1 ;;
  -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0 [--print-dir]" >&2; exit 2 ;;
esac
[ "$#" -le 1 ] || { echo "usage: $0 [--print-dir]" >&2; exit 2; }

# The source package's version as apt knows it; empty when no deb-src entry lists it.
# Equivalent to: apt-cache showsrc --only-source kubernetes | grep ^Version:
source_version() {
  # apt-cache fails when nothing lists it (that is the empty answer, not an error).
  { apt-cache showsrc --only-source "$pkg" 2>/dev/null || true; } |
    awk '/^Version:/ && v == "" { v = $2 } END { print v }'
}

if [ "$print_dir" = 1 ]; then
  version=$(source_version)
  [ -n "$version" ] || die "apt lists no source package '$pkg' (no deb-src entry?): run $0 first"
  [ -f "$cache/$version/bin/BUILD-STAMP" ] || die "no complete build in $cache/$version/bin: run $0 first"
  echo "$cache/$version/bin"
  exit 0
fi

# Lowest priority for this shell and everything it starts (the build, the generators, go, gcc).
# Equivalent to: nice -n 19 ionice -c3 <this script>
renice -n 19 -p $$ >/dev/null
ionice -c3 -p $$

stage_start=0
stage() { stage_name=$1; stage_start=$(date +%s); log "stage '$stage_name' ..."; }
stage_done() {
  local took=$(( $(date +%s) - stage_start ))
  log "stage '$stage_name' took $((took / 60)) min $((took % 60)) s"
  # Kept across runs (an interrupted build resumes at the missing stage), for the stamp.
  [ -z "${top:-}" ] || echo "$stage_name: ${took}s" >>"$top/stage-durations"
  stage_name=
}
# A stage cut short (failure, kill) is recorded too: the next run resumes it from Go's build cache,
# and the stamp's durations then still add up to what the build cost.
stage_name=
trap 'if [ -n "$stage_name" ] && [ -n "${top:-}" ]; then
  echo "$stage_name: stopped after $(( $(date +%s) - stage_start ))s, unfinished" >>"$top/stage-durations"; fi' EXIT

# --- the deb-src entry and the source package's version --------------------------------------------
# The deb-src stanza mirrors the main archive's deb stanza of debian.sources (URIs, Suites,
# Components, Signed-By), not the security archive, whose sources are not needed.
want_debsrc() {
  [ -r "$debian_sources" ] || die "$debian_sources not found: cannot tell which Debian archive to use"
  awk -v RS= '
    /(^|\n)Types:[^\n]*(^|[ \t])deb([ \t]|\n|$)/ && !/URIs:[^\n]*-security/ {
      print "# Added by podwire scripts/k8s-build.sh: sources of the archive in debian.sources."
      print "Types: deb-src"
      n = split($0, lines, "\n")
      for (i = 1; i <= n; i++)
        if (lines[i] ~ /^(URIs|Suites|Components|Signed-By):/) print lines[i]
      exit
    }' "$debian_sources"
}

version=$(source_version)
# Complete: the stamp, and every binary (a binary added to the list later is built on the next run).
complete() {
  local b
  [ -f "$1/BUILD-STAMP" ] || return 1
  [ -f "$1/.stage1-reflect2-1.0.2" ] || return 1
  for b in "${stage1_bins[@]}" "${stage2_bins[@]}"; do [ -x "$1/$b" ] || return 1; done
}
if [ -z "$version" ] || ! complete "$cache/$version/bin"; then
  [ "$(id -u)" = 0 ] || die "must run as root (adds $debsrc_file, installs Debian packages)"
  # One build at a time: a second run touches nothing while one is going.
  mkdir -p "$cache"
  exec 9>>"$cache/.lock"
  flock -n 9 || die "another k8s-build is running (holds $cache/.lock); its log says how far it is"
fi
if [ -z "$version" ]; then
  stanza=$(want_debsrc)
  [ -n "$stanza" ] || die "no deb stanza for the main archive in $debian_sources"
  if [ ! -f "$debsrc_file" ] || [ "$(cat "$debsrc_file")" != "$stanza" ]; then
    log "writing $debsrc_file"
    printf '%s\n' "$stanza" >"$debsrc_file.tmp"
    mv "$debsrc_file.tmp" "$debsrc_file"
  fi
  stage "apt-get update"
  apt-get update -qq || die "apt-get update failed (see above)"
  stage_done
  version=$(source_version)
  [ -n "$version" ] || die "apt lists no source package '$pkg' even with $debsrc_file"
fi

top=$cache/$version
bin=$top/bin
if complete "$bin"; then
  log "Kubernetes $version is already built in $bin (nothing to do)"
  exit 0
fi
log "building Kubernetes $version (Debian source package) in $top"
mkdir -p "$top"

# --- build dependencies ---------------------------------------------------------------------------
missing=()
for p in "${build_packages[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  stage "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "could not install ${missing[*]}"
  stage_done
fi
[ -x "$go_bin/go" ] || die "$go_bin/go missing after installing golang-1.19-go"

# --- source ----------------------------------------------------------------------------------------
# Unpacked into src.partial and renamed once complete, so that an interrupted download or
# unpack is started over rather than built from.
if [ ! -d "$top/src" ]; then
  stage "apt-get source $pkg=$version"
  rm -rf "$top/src.partial"
  mkdir "$top/src.partial"
  (cd "$top/src.partial" && apt-get source -qq --only-source "$pkg=$version") \
    || die "apt-get source $pkg=$version failed (see above); nothing kept"
  mv "$top/src.partial" "$top/src"
  stage_done
fi
tree=$(find "$top/src" -mindepth 1 -maxdepth 1 -type d -name "$pkg-*" | head -n 1)
[ -n "$tree" ] && [ -f "$tree/Makefile" ] && [ -f "$tree/debian/rules" ] \
  || die "no unpacked source tree with Makefile and debian/rules in $top/src (remove $top/src to fetch it again)"

# --- reflect2 1.0.2 ------------------------------------------------------------------------------------
# v1.20.2 vendors github.com/modern-go/reflect2 v1.0.1, whose map iteration copies the Go runtime's
# iterator struct of before Go 1.18; built with Go 1.19 it faults (SIGSEGV in mapiterinit) on the
# first map json-iterator encodes by reflection: kube-apiserver dies on the first custom resource it
# decodes (decision 48). Debian's reflect2 1.0.2 is the upstream fix, API-compatible; stage 1 is
# rebuilt with it (the marker below says it was).
reflect2=$tree/vendor/github.com/modern-go/reflect2
reflect2_debian=/usr/share/gocode/src/github.com/modern-go/reflect2
if [ ! -f "$reflect2/go_above_118.go" ]; then
  [ -f "$reflect2_debian/go_above_118.go" ] || die "$reflect2_debian: no reflect2 1.0.2 (golang-github-modern-go-reflect2-dev)"
  log "vendoring github.com/modern-go/reflect2 1.0.2 from $reflect2_debian"
  rm -f "$reflect2"/*.go "$reflect2"/*.s
  cp "$reflect2_debian"/*.go "$reflect2_debian"/*.s "$reflect2/"
fi

# --- the GOPATH that debian/rules sets up ------------------------------------------------------------
# debian/rules: `mkdir -p .go/src/k8s.io && ln -s ../../.. .go/src/k8s.io/kubernetes`, GOPATH on
# .go, CGO_ENABLED=0; GO111MODULE=off (GOPATH mode: this tree's vendor/ is used). hack/lib/golang.sh
# then points GOPATH and GOCACHE at _output/local/go itself; agnhost goes through the same make so
# that it reuses that cache.
mkdir -p "$tree/.go/src/k8s.io"
[ -L "$tree/.go/src/k8s.io/kubernetes" ] || ln -s ../../.. "$tree/.go/src/k8s.io/kubernetes"
gotree=$tree/.go/src/k8s.io/kubernetes
export GOPATH=$tree/.go
export GO111MODULE=off
export CGO_ENABLED=0
export GOFLAGS=
export PATH=$go_bin:$PATH
export HOME=${HOME:-/root}
# No version to set: the orig tarball is a `git archive` of v1.20.2, whose hack/lib/version.sh
# carries the tag and commit, so the binaries report v1.20.2 (gitTreeState "archive").
mkdir -p "$bin"
out=$gotree/_output/local/bin/linux/amd64

have_all() { local b; for b in "$@"; do [ -x "$bin/$b" ] || return 1; done; }

# --- stage 1: control plane, node, client ------------------------------------------------------------
if ! have_all "${stage1_bins[@]}" || [ ! -f "$bin/.stage1-reflect2-1.0.2" ]; then
  stage "make WHAT=${stage1_targets[*]}"
  (cd "$gotree" && make WHAT="${stage1_targets[*]}") || die "stage 1 (make WHAT=${stage1_targets[*]}) failed (see above)"
  for b in "${stage1_bins[@]}"; do
    [ -x "$out/$b" ] || die "make finished without $out/$b"
    cp "$out/$b" "$bin/$b.tmp" && mv "$bin/$b.tmp" "$bin/$b"
  done
  touch "$bin/.stage1-reflect2-1.0.2"
  stage_done
fi

# --- stage 2: e2e binary, agnhost, pause ---------------------------------------------------------------
if [ ! -x "$bin/e2e.test" ]; then
  # hack/lib/golang.sh builds *.test targets with `go test -c`.
  stage "make WHAT=test/e2e/e2e.test"
  (cd "$gotree" && make WHAT=test/e2e/e2e.test) || die "stage 2 (make WHAT=test/e2e/e2e.test) failed (see above)"
  [ -x "$out/e2e.test" ] || die "make finished without $out/e2e.test"
  cp "$out/e2e.test" "$bin/e2e.test.tmp" && mv "$bin/e2e.test.tmp" "$bin/e2e.test"
  stage_done
fi
if [ ! -x "$bin/agnhost" ]; then
  # `go build ./test/images/agnhost` in the build's GOPATH, by hack/lib/golang.sh.
  stage "make WHAT=test/images/agnhost"
  (cd "$gotree" && make WHAT=test/images/agnhost) || die "make WHAT=test/images/agnhost failed (see above)"
  [ -x "$out/agnhost" ] || die "make finished without $out/agnhost"
  cp "$out/agnhost" "$bin/agnhost.tmp" && mv "$bin/agnhost.tmp" "$bin/agnhost"
  stage_done
fi
if [ ! -x "$bin/ginkgo" ]; then
  # The ginkgo CLI of the tree's vendor/ (v1): it runs e2e.test in parallel (-p, --nodes), which
  # e2e.test alone cannot (-ginkgo.parallel.* needs the CLI's aggregator).
  stage "make WHAT=vendor/github.com/onsi/ginkgo/ginkgo"
  (cd "$gotree" && make WHAT=vendor/github.com/onsi/ginkgo/ginkgo) || die "make WHAT=vendor/github.com/onsi/ginkgo/ginkgo failed (see above)"
  [ -x "$out/ginkgo" ] || die "make finished without $out/ginkgo"
  cp "$out/ginkgo" "$bin/ginkgo.tmp" && mv "$bin/ginkgo.tmp" "$bin/ginkgo"
  stage_done
fi
if [ ! -x "$bin/pause" ]; then
  stage "gcc -static build/pause/linux/pause.c"
  # build/pause/Makefile compiles it the same way, with VERSION from its TAG and REV.
  pause_tag=$(awk -F' *[?:]?= *' '$1 == "TAG" { print $2; exit }' "$gotree/build/pause/Makefile")
  gcc -Os -Wall -Werror -static -DVERSION="v${pause_tag:-unknown}-$version" \
    -o "$bin/pause.tmp" "$gotree/build/pause/linux/pause.c" || die "gcc build/pause/linux/pause.c failed"
  strip "$bin/pause.tmp"
  mv "$bin/pause.tmp" "$bin/pause"
  stage_done
fi

# --- stamp ------------------------------------------------------------------------------------------
have_all "${stage1_bins[@]}" "${stage2_bins[@]}" || die "some binaries are missing from $bin"
{
  echo "source package: $pkg $version"
  echo "go: $(go version)"
  echo "vendored github.com/modern-go/reflect2: 1.0.2 (Debian's; the tree's 1.0.1 faults under Go 1.18+)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(nproc) cores)"
  echo "stage durations (nice 19, ionice idle, on a shared machine):"
  sed 's/^/  /' "$top/stage-durations" 2>/dev/null || true
  (cd "$bin" && ls -l --block-size=1 "${stage1_bins[@]}" "${stage2_bins[@]}")
} >"$bin/BUILD-STAMP.tmp"
mv "$bin/BUILD-STAMP.tmp" "$bin/BUILD-STAMP"
log "done: the binaries are in $bin"
ls -lh "$bin"
exit 0
}
