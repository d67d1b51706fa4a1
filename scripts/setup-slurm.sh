#!/usr/bin/env bash
# Installs and starts a one-node Slurm on this machine, for the sharded sweep's
# test (crates/nicsched/tests/sweep_shard.rs runs `nicsched sweep --shard` as an
# `sbatch --array` job and the merge as a job that depends on it). Debian's
# slurm-wlm and munge; a slurm.conf for this host alone (its short name, its
# cores); munged, slurmctld and slurmd started where they are not running.
# Idempotent: run it again and it leaves a running cluster as it is. A machine
# with its own /etc/slurm/slurm.conf (a real cluster) is left alone.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "setup-slurm.sh: run as root (sudo $0): it installs packages and starts daemons" >&2
    exit 1
fi

missing=()
for package in slurm-wlm munge; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup-slurm.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi

conf=/etc/slurm/slurm.conf
# Ours carries this line first; a slurm.conf without it was written by someone else.
mark="# written by nicsched scripts/setup-slurm.sh: one node, this host"
node="$(hostname -s)"
if [ -e "$conf" ] && [ "$(head -n 1 "$conf")" != "$mark" ]; then
    echo "setup-slurm.sh: $conf is not ours; using the cluster it describes"
else
    wanted="$(
        cat <<EOF
$mark
ClusterName=nicsched-test
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
# No cgroups: a container may not delegate them.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=main Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    )"
    if [ ! -e "$conf" ] || [ "$(cat "$conf")" != "$wanted" ]; then
        echo "setup-slurm.sh: writing $conf for node $node ($(nproc) CPUs)"
        printf '%s\n' "$wanted" >"$conf"
        # Daemons running on an older file would not take this one.
        for daemon in slurmd slurmctld; do
            if [ -e "/run/$daemon.pid" ] && kill -0 "$(cat "/run/$daemon.pid")" 2>/dev/null; then
                pid="$(cat "/run/$daemon.pid")"
                kill "$pid"
                for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            fi
        done
    fi
fi
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm

running() { pgrep -x "$1" >/dev/null; }

if ! running munged; then
    echo "setup-slurm.sh: starting munged"
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    mkdir -p /run/munge
    chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged
fi
if ! running slurmctld; then
    echo "setup-slurm.sh: starting slurmctld"
    slurmctld
fi
if ! running slurmd; then
    echo "setup-slurm.sh: starting slurmd"
    slurmd
fi

# Up when the node takes jobs: bounded, so that a cluster that cannot start says so.
for _ in $(seq 1 60); do
    state="$(sinfo --noheader --nodes="$node" --format=%t 2>/dev/null || true)"
    case "$state" in
    idle* | mix* | alloc*)
        echo "setup-slurm.sh: node $node is $state"
        exit 0
        ;;
    esac
    sleep 0.5
done
echo "setup-slurm.sh: node $node did not come up (state: ${state:-no answer}); see /var/log/slurm/" >&2
exit 1
