#!/usr/bin/env bash
# Installs and builds podwire on Debian 12 (as root), then runs the agent in the foreground on
# config/default.yaml. `--no-start` (or CI=true) stops after the build. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"

start=1
for arg in "$@"; do
  case "$arg" in
    --no-start) start=0 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
[ "${CI:-}" = "true" ] && start=0

packages=(iproute2 tcpdump arping iputils-ping containernetworking-plugins python3-scapy build-essential podman runc busybox-static)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
npm run build

if [ "$start" = 1 ]; then
  echo "setup: starting the agent on config/default.yaml (Ctrl-C stops it)"
  exec bin/podwire agent --config config/default.yaml
fi
