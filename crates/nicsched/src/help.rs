//! The help of flags that name enforcers, written from the registry so that a
//! new row is in `--help` without an edit here.

use sched::registry::World;

/// `` `a`, `b`, `c` ``
fn quoted<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn check_enforcers() -> String {
    format!(
        "Enforcer(s) to explain the policy for; may repeat; `all` for every one. Default: {}.",
        sched::registry::defaults(World::OneHost).join(", ")
    )
}

pub(crate) fn queue_limit() -> String {
    let nic_model = sched::ENFORCERS.iter().filter(|e| e.nic().is_some());
    format!(
        "The host's qdisc limit per Tx queue, in packets, in front of the multiqueue NIC model \
         ({}): a packet that finds its queue full is dropped and counted against its tenant, as \
         `txqueuelen` drops it on a host.",
        quoted(nic_model.map(|e| e.name))
    )
}

pub(crate) fn class_limit() -> String {
    let engine = sched::ENFORCERS.iter().filter(|e| e.has_classes());
    format!(
        "The packets each app (leaf class, its split classes together) may hold in the engine in \
         front of the software schedulers ({}), which replace the qdiscs: as HTB's leaves each \
         have a qdisc of their own. A packet beyond it is dropped and counted against its tenant. \
         Default: 128 on one host; across hosts the simulator's 1000, since a flood the wheel \
         lets hold its horizon would fill 128 and refuse a TCP flow of the same app \
         (docs/results/lab.md, \"Where sim and lab agree\").",
        quoted(engine.map(|e| e.name))
    )
}

pub(crate) fn lab_bench_enforcers() -> String {
    let in_kernel = sched::ENFORCERS.iter().filter(|e| !e.is_built());
    format!(
        "Engine path(s) to run, one per enforcer; may repeat. `{kernel}` and {in_kernel} name \
         the kernel paths. Default: {defaults}. `{kernel}`, the base of \"vs kernel\", always \
         runs; {in_kernel} runs by default or when named.",
        kernel = lab::KERNEL_FORWARDING,
        in_kernel = quoted(in_kernel.map(|e| e.name)),
        defaults = lab::default_enforcers().collect::<Vec<_>>().join(", "),
    )
}
