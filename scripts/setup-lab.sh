#!/usr/bin/env bash
# Installs the programs `nicsched lab` runs inside its network namespaces:
# iperf3 (bulk, udp), sockperf (rpc), memcached (rpc), ethtool (offloads off on
# the veths) and iproute2 (ip, tc). Idempotent: installs only what is missing and
# runs `apt-get update` at most once.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "setup-lab.sh: run as root (sudo $0): it installs packages with apt-get" >&2
    exit 1
fi

packages=(iperf3 sockperf memcached ethtool iproute2)
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup-lab.sh: everything is installed (${packages[*]})"
    exit 0
fi

echo "setup-lab.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
# iperf3's package may ask to start a system-wide daemon; nicsched starts its own
# servers inside namespaces, so make sure none is running on the host.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet iperf3 2>/dev/null; then
    systemctl disable --now iperf3 || true
fi
echo "setup-lab.sh: done"
