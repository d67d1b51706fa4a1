#!/usr/bin/env bash
# The project's one test command, what CI runs (.ci/run): as root on a fresh Debian
# machine with Rust, it installs what the tests need (scripts/setup-lab.sh: iperf3,
# sockperf, memcached, ethtool, iproute2; scripts/setup-report.sh: chromium, for
# report.html's browser test; scripts/setup.sh: DPDK and the rte_sched peer;
# scripts/setup-slurm.sh: a one-node Slurm, which the sharded sweep's test submits
# its parts to), then runs the formatter, clippy and every test of the workspace.
#
#   sudo scripts/test.sh
#
# The lab's tests need root and those programs. With CI set (CI=true, as CI
# services set it) a test that cannot run fails; without it, it says why and passes.
# Property tests draw from one fixed seed unless PROPTEST_RNG_SEED says otherwise,
# so a red run is reproducible with the same variable.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: run as root (sudo $0): it installs the lab's programs and the lab's tests create network namespaces" >&2
    exit 1
fi
command -v cargo >/dev/null || {
    echo "test.sh: cargo not found: install Rust (https://rustup.rs) or source ~/.cargo/env" >&2
    exit 1
}

scripts/setup-lab.sh
scripts/setup-report.sh
scripts/setup.sh
scripts/setup-slurm.sh

export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261123}"

cargo --version
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
cargo test --workspace
