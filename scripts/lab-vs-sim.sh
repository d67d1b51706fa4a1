#!/usr/bin/env bash
# Runs scenarios in the simulator and in the lab, each under the scenario's own
# enforcers (the lab adds linux-htb), and prints `nicsched compare --markdown` of the
# two worlds per scenario: the tables of docs/results/lab.md.
#
#   sudo scripts/lab-vs-sim.sh [SCENARIO.yaml ...] > lab-vs-sim.md
#   sudo ENFORCERS="tonic wf2q valve hash" scripts/lab-vs-sim.sh scenarios/tonic/asymmetry-1-8.yaml
#
# Default scenarios: TONIC's, SENIC's and FlowValve's that docs/results/lab.md
# compares, and the lab's own (cap, flood, idle probe). Results go to
# results/lab-vs-sim/NAME/{sim,lab}. The lab runs at its default link rate (1 Gbit/s,
# the scenario's rates scaled); needs root and scripts/setup-lab.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
    scenarios=(
        scenarios/tonic/asymmetry-1-8.yaml
        scenarios/tonic/weighted-case1.yaml
        scenarios/tonic/prio-sockperf-idle.yaml
        scenarios/tonic/prio-sockperf.yaml
        scenarios/tonic/prio-memcached-1k.yaml
        scenarios/senic/fig4.yaml
        scenarios/senic/oversubscribed.yaml
        scenarios/flowvalve/example.yaml
        scenarios/flowvalve/borrowing.yaml
        scenarios/lab/cap-100mbit.yaml
        scenarios/lab/udp-flood.yaml
        scenarios/lab/split-destination.yaml
        scenarios/lab/poisson.yaml
    )
fi

cargo build --release -q -p nicsched
nicsched=target/release/nicsched
for scenario in "${scenarios[@]}"; do
    name=$(basename "$scenario" .yaml)
    group=$(basename "$(dirname "$scenario")")
    out=results/lab-vs-sim/$group-$name
    enforcers=${ENFORCERS:-$(sed -n 's/^enforcers: *\[\(.*\)\]/\1/p' "$scenario" | tr -d ' ' | tr ',' ' ')}
    sim_args=() lab_args=()
    for e in $enforcers; do
        [ "$e" = linux-htb ] || sim_args+=(-e "$e")
        lab_args+=(-e "$e")
    done
    case " $enforcers " in *" linux-htb "*) ;; *) lab_args+=(-e linux-htb) ;; esac
    echo "lab-vs-sim.sh: $scenario" >&2
    "$nicsched" sim "$scenario" "${sim_args[@]}" -q --out "$out/sim" >/dev/null
    "$nicsched" lab "$scenario" "${lab_args[@]}" -q --out "$out/lab" >/dev/null
    printf '#### %s/%s\n\n' "$group" "$name"
    "$nicsched" compare --markdown "$out/sim" "$out/lab"
    printf '\n'
done
