#!/usr/bin/env bash
# Installs what the project needs beyond Rust and builds the rte_sched peer that
# `nicsched bench --vs rte_sched` and `cargo bench -p sched` measure beside nicsched's
# enforcers: Debian's DPDK (libdpdk-dev) and a small C harness, into
# target/rte_sched_peer/rte_sched_peer. Idempotent and quiet: packages already
# installed are not touched (no apt-get at all), the peer is rebuilt only when its
# source changed. Installing needs root; every failure says what failed.
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
    echo "setup.sh: $*" >&2
    exit 1
}

packages=(libdpdk-dev pkg-config build-essential)
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null || die "${missing[*]} missing and no apt-get: install them by hand (Debian/Ubuntu package names)"
    [ "$(id -u)" -eq 0 ] || die "${missing[*]} missing: run as root (sudo $0) to install them"
    echo "setup.sh: installing ${missing[*]}"
    log=$(mktemp)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >"$log" 2>&1 || { cat "$log" >&2; die "apt-get update failed"; }
    apt-get install -y -qq "${missing[@]}" >"$log" 2>&1 || { cat "$log" >&2; die "apt-get install ${missing[*]} failed"; }
    rm -f "$log"
fi

pkg-config --exists libdpdk || die "pkg-config does not find libdpdk (is libdpdk-dev installed?)"
out="$PWD/target/rte_sched_peer"
make --quiet -C tools/rte_sched_peer OUT="$out" || die "building the rte_sched peer failed"
"$out/rte_sched_peer" --queues 64 --active 1 --seconds 0.01 >/dev/null ||
    die "the rte_sched peer was built but does not run: $out/rte_sched_peer --queues 64 --active 1 --seconds 0.01"
echo "setup.sh: rte_sched peer ready: target/rte_sched_peer/rte_sched_peer"
