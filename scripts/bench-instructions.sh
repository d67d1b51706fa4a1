#!/bin/sh
# Instructions per enqueue+dequeue pair, counted by valgrind's callgrind, for
# enforcers of `nicsched bench` and for DPDK's rte_sched peer on the same classes
# (`-k link` gives nicsched the peer's load: docs/results/bench.md, "The peer's load").
#
# Why: on a shared VM the wall-clock rate of one binary moves by 2x between runs
# a few seconds apart (docs/results/bench.md), so a change of 5-10% cannot be seen
# in `bench` ns per pair. An instruction count is the same on every run. It is not
# time: it misses cache misses and branch misses, so read it beside `bench`, not
# instead of it. At 16k classes the tree fits in L2 and `valve` takes the same ns
# per pair as at 1M, so there its time is its instructions.
#
# For nicsched, the harness's loop is counted (callgrind's --toggle-collect on
# `Harness::pairs`): the enforcer's enqueue and dequeue, and the harness's own few
# instructions per pair (the refill's packet, the virtual clock). For the peer only
# `rte_sched_port_enqueue` and `rte_sched_port_dequeue` are, not its mbuf pool, so
# the comparison leans against nicsched. The peer's count includes its initial
# fill, two enqueues per queue: at the defaults under 2% of its enqueues.
#
# Usage: scripts/bench-instructions.sh [-c CLASSES] [-s SECONDS] [-k CAP] ENFORCER... [rte_sched]
#   CLASSES defaults to 16000, SECONDS (of valgrind's much slower wall time) to 8,
#   CAP (`bench --class-cap`: share or link; the peer's pipes are always capped at
#   the link) to share.
#   Runs target/release/nicsched (cargo build --release -p nicsched) and
#   target/rte_sched_peer/rte_sched_peer (scripts/setup.sh). Needs valgrind
#   (apt-get install valgrind). Prints one line per name: instructions per pair,
#   pairs counted.
set -eu

die() {
    echo "bench-instructions.sh: $*" >&2
    exit 1
}

classes=16000
seconds=8
cap=share
while getopts c:s:k:h opt; do
    case $opt in
    c) classes=$OPTARG ;;
    s) seconds=$OPTARG ;;
    k) cap=$OPTARG ;;
    h) sed -n '2,27p' "$0"; exit 0 ;;
    *) sed -n '2,27p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || die "name at least one enforcer, or rte_sched (-h for help)"
command -v valgrind >/dev/null || die "valgrind is not installed: apt-get install valgrind"

root=$(cd "$(dirname "$0")/.." && pwd)
nicsched=$root/target/release/nicsched
peer=${NICSCHED_RTE_SCHED_PEER:-$root/target/rte_sched_peer/rte_sched_peer}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The JSON field $2 of the one-line object in file $1.
field() {
    sed -n "s/.*\"$2\":\([0-9.e+-]*\).*/\1/p" "$1"
}

for name in "$@"; do
    if [ "$name" = rte_sched ]; then
        [ -x "$peer" ] || die "no rte_sched peer at $peer: run scripts/setup.sh"
        valgrind --tool=callgrind --callgrind-out-file="$work/out" \
            --toggle-collect=rte_sched_port_enqueue --toggle-collect=rte_sched_port_dequeue \
            "$peer" --queues "$classes" --active 1 --seconds "$seconds" \
            >"$work/json" 2>"$work/log" || die "the peer failed: $(grep -v '^==' "$work/log" | tail -3)"
    else
        [ -x "$nicsched" ] || die "no $nicsched: cargo build --release -p nicsched"
        valgrind --tool=callgrind --callgrind-out-file="$work/out" \
            --toggle-collect="sched::bench::Harness::pairs" \
            "$nicsched" bench -e "$name" --classes "$classes" --active 1 --seconds "$seconds" \
            --class-cap "$cap" --json \
            >"$work/json" 2>"$work/log" || die "bench -e $name failed: $(grep -v '^==' "$work/log" | tail -3)"
    fi
    pairs=$(field "$work/json" pairs)
    instructions=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/log")
    [ -n "$pairs" ] && [ -n "$instructions" ] || die "$name: no count in $work/json or the valgrind log"
    [ "$name" = rte_sched ] && capped=link || capped=$cap
    awk -v n="$name" -v i="$instructions" -v p="$pairs" -v c="$classes" -v k="$capped" \
        'BEGIN { printf "%-10s %8.1f instructions per pair (%d pairs, %d classes capped at %s)\n", n, i / p, p, c, k }'
done
