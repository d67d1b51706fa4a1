#!/usr/bin/env bash
# Builds the rte_sched peer that `nicsched bench --vs rte_sched` and `cargo bench -p
# sched` measure beside nicsched's enforcers: Debian's DPDK (libdpdk-dev) and a small C
# harness, into target/rte_sched_peer/. Idempotent; run as root to install packages.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libdpdk-dev pkg-config make gcc)
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup.sh: ${missing[*]} missing; run as root (sudo $0) to install them" >&2
        exit 1
    fi
    echo "setup.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi

make --quiet -C tools/rte_sched_peer OUT="$PWD/target/rte_sched_peer"
echo "setup.sh: built target/rte_sched_peer/rte_sched_peer"
