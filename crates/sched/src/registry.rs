//! Every enforcer, listed once. The CLI, the scenario parser's validation, `check`,
//! the simulator, the lab and the benches read this table, so an enforcer is its
//! own module plus one row here.

use crate::multiqueue::{self, Driver};
use crate::{Approximation, Bound, Capacity, Enforcer, fairnic, htb, valve, wf2q, wheel};
use policy::Policy;

/// Builds an enforcer for a policy; `Err` says why it cannot run that policy.
pub type Builder = fn(&Policy, Capacity) -> Result<Box<dyn Enforcer>, String>;

/// The engine cores each tenant's packets may be processed on (index = tenant).
pub type CoreMask = fn(&Policy) -> Vec<Vec<u16>>;

/// One selectable enforcer.
#[derive(Clone, Copy, Debug)]
pub struct EnforcerInfo {
    pub name: &'static str,
    /// The paper or system it follows.
    pub from: &'static str,
    pub mechanism: &'static str,
    /// The queue selection it puts in front of the multiqueue NIC model, which
    /// keeps a qdisc per Tx queue and no per-class state; `None` for a software
    /// scheduler, which replaces the host's qdiscs with a queue per app (leaf class).
    pub nic: Option<Driver>,
    pub build: Builder,
    /// What `nicsched check` says it expresses of a policy.
    pub approximation: fn(&Policy) -> Approximation,
    /// What its `approximation` means in numbers ([`crate::bounds`]).
    pub bounds: fn(&Policy) -> Vec<Bound>,
    /// Whether `nicsched lab-bench` runs it when no enforcer is named.
    pub lab_bench: bool,
    /// The engine cores each tenant's packets may be processed on (index = tenant),
    /// for an enforcer that partitions the engine's cores; `None`: any core.
    pub core_mask: Option<CoreMask>,
}

impl EnforcerInfo {
    /// Whether it keeps state per leaf class ([`Enforcer::classes`] is `Some`).
    pub fn has_classes(&self) -> bool {
        self.nic.is_none()
    }
}

pub const ENFORCERS: &[EnforcerInfo] = &[
    EnforcerInfo {
        name: "fifo",
        from: "-",
        mechanism: "one FIFO, no policy",
        nic: Some(Driver::Fifo),
        build: |policy, capacity| multiqueue::build(policy, capacity, Driver::Fifo),
        approximation: |policy| multiqueue::approximation(policy, Driver::Fifo),
        bounds: |policy| multiqueue::bounds(policy, Driver::Fifo),
        lab_bench: true,
        core_mask: None,
    },
    EnforcerInfo {
        name: "hash",
        from: "Linux per-flow hash",
        mechanism: "each flow hashed to one of all Tx queues; NIC round robin",
        nic: Some(Driver::Hash),
        build: |policy, capacity| multiqueue::build(policy, capacity, Driver::Hash),
        approximation: |policy| multiqueue::approximation(policy, Driver::Hash),
        bounds: |policy| multiqueue::bounds(policy, Driver::Hash),
        lab_bench: false,
        core_mask: None,
    },
    EnforcerInfo {
        name: "xps",
        from: "Linux XPS",
        mechanism: "a packet goes to the Tx queue of the core that sent it; NIC round robin",
        nic: Some(Driver::Xps),
        build: |policy, capacity| multiqueue::build(policy, capacity, Driver::Xps),
        approximation: |policy| multiqueue::approximation(policy, Driver::Xps),
        bounds: |policy| multiqueue::bounds(policy, Driver::Xps),
        lab_bench: false,
        core_mask: None,
    },
    EnforcerInfo {
        name: "tonic",
        from: "TONIC",
        mechanism: "per-tenant queue pools sized by weight, per-packet round robin, head insertion for prioritised apps",
        nic: Some(Driver::Tonic),
        build: |policy, capacity| multiqueue::build(policy, capacity, Driver::Tonic),
        approximation: |policy| multiqueue::approximation(policy, Driver::Tonic),
        bounds: |policy| multiqueue::bounds(policy, Driver::Tonic),
        lab_bench: true,
        core_mask: None,
    },
    EnforcerInfo {
        name: "tonic-band",
        from: "TONIC, improved",
        mechanism: "as tonic, with a priority band per queue instead of head insertion",
        nic: Some(Driver::TonicBand),
        build: |policy, capacity| multiqueue::build(policy, capacity, Driver::TonicBand),
        approximation: |policy| multiqueue::approximation(policy, Driver::TonicBand),
        bounds: |policy| multiqueue::bounds(policy, Driver::TonicBand),
        lab_bench: false,
        core_mask: None,
    },
    EnforcerInfo {
        name: "wf2q",
        from: "SENIC",
        mechanism: "rate-limited WF2Q+: shares water-filled by weight up to each cap, caps held in real time, tenant priorities as strict bands",
        nic: None,
        build: wf2q::build,
        approximation: wf2q::approximation,
        bounds: wf2q::bounds,
        lab_bench: true,
        core_mask: None,
    },
    EnforcerInfo {
        name: "valve",
        from: "FlowValve",
        mechanism: "token-bucket tree with priority, weights, guarantees and lending",
        nic: None,
        build: valve::build,
        approximation: valve::approximation,
        bounds: valve::bounds,
        lab_bench: true,
        core_mask: None,
    },
    EnforcerInfo {
        name: "htb",
        from: "Linux HTB semantics",
        mechanism: "hierarchical token bucket: rate, ceil, quantum, priority, borrowing",
        nic: None,
        build: htb::build,
        approximation: htb::approximation,
        bounds: htb::bounds,
        lab_bench: true,
        core_mask: None,
    },
    EnforcerInfo {
        name: "wheel",
        from: "Carousel / PicNIC",
        mechanism: "timing wheel, one earliest departure time per packet",
        nic: None,
        build: wheel::build,
        approximation: wheel::approximation,
        bounds: wheel::bounds,
        lab_bench: true,
        core_mask: None,
    },
    EnforcerInfo {
        name: "picnic",
        from: "PicNIC",
        mechanism: "wheel plus predictable congestion control across hosts: receivers feed VM-to-VM bit rates (PCCB) and, when their engine is short of CPU, packet rates (PCCP) back to senders, folded into each packet's departure time",
        nic: None,
        build: wheel::build,
        approximation: wheel::approximation,
        bounds: wheel::bounds,
        lab_bench: false,
        core_mask: None,
    },
    EnforcerInfo {
        name: "picnic-wc",
        from: "PicNIC, work conserving",
        mechanism: "picnic, but a receiver leaves what a sender held elsewhere cannot use to the other senders (the ideal's rule on measured rates)",
        nic: None,
        build: wheel::build,
        approximation: wheel::approximation,
        bounds: wheel::bounds,
        lab_bench: false,
        core_mask: None,
    },
    EnforcerInfo {
        name: "picnic-bps",
        from: "PicNIC, just the BPS envelope",
        mechanism: "picnic with bandwidth feedback only: receivers feed VM-to-VM bit rates back but no packet rates (the paper's CWFQ+PCCB, like EyeQ)",
        nic: None,
        build: wheel::build,
        approximation: wheel::approximation,
        bounds: wheel::bounds,
        lab_bench: false,
        core_mask: None,
    },
    EnforcerInfo {
        name: "fairnic",
        from: "FairNIC",
        mechanism: "engine cores masked by weight; per-core local tokens, a global overflow pool shared by AIMD",
        nic: None,
        build: fairnic::build,
        approximation: fairnic::approximation,
        bounds: fairnic::bounds,
        lab_bench: false,
        core_mask: Some(fairnic::core_mask),
    },
];

/// The registered enforcer called `name`.
pub fn find(name: &str) -> Option<&'static EnforcerInfo> {
    ENFORCERS.iter().find(|e| e.name == name)
}

/// Every registered name, in the table's order.
pub fn names() -> Vec<&'static str> {
    ENFORCERS.iter().map(|e| e.name).collect()
}
