//! Every enforcer, listed once. The CLI, the scenario parser's validation, `check`,
//! the simulator, the lab, the benches and the docs read this table, so an enforcer
//! is its own module plus one row here: the row says where it runs and how it is
//! built there, what its hosts feed back to each other, how it runs on several
//! threads, and where it runs when no enforcer is named.

use std::sync::Arc;

use crate::multiqueue::Driver;
use crate::{Approximation, Bound, Capacity, Enforcer, fairnic, htb, valve, wf2q, wheel};
use policy::Policy;
use policy::pcc::Feedback;

/// Builds an enforcer for a policy; `Err` says why it cannot run that policy.
pub type Builder = fn(&Policy, Capacity) -> Result<Box<dyn Enforcer>, String>;

/// The engine cores each tenant's packets may be processed on (index = tenant).
pub type CoreMask = fn(&Policy) -> Vec<Vec<u16>>;

/// One engine core's shard, by core index and its capacity, over the state every
/// shard of one policy shares.
pub type Shard = Box<dyn Fn(u16, Capacity) -> Box<dyn Enforcer> + Send + Sync>;

/// Builds what the shards of a policy share, and hands back how to build each.
pub type Shards = fn(&Policy) -> Result<Shard, String>;

/// Where an enforcer runs, and how nicsched builds it there.
#[derive(Clone, Copy, Debug)]
pub enum Runs {
    /// In front of the multiqueue NIC model, which keeps a qdisc per Tx queue and no
    /// per-class state: the enforcer is the queue selection (`Driver`), built by
    /// [`crate::multiqueue`].
    Nic(Driver),
    /// In nicsched's engine: a software scheduler, which replaces the host's qdiscs
    /// with a queue per app (leaf class).
    Engine(Software),
    /// In the kernel: the lab compiles the policy to `tc` and the kernel runs it on
    /// a Linux bridge's uplink. Nothing here builds it, so the simulator cannot run
    /// it; the lab runs it, on one host.
    Kernel,
}

/// A software scheduler, as the engine runs it.
#[derive(Clone, Copy, Debug)]
pub struct Software {
    pub build: Builder,
    /// What `nicsched check` says it expresses of a policy.
    pub approximation: fn(&Policy) -> Approximation,
    /// What its `approximation` means in numbers ([`crate::bounds`]).
    pub bounds: fn(&Policy) -> Vec<Bound>,
    pub threads: Threads,
}

/// How an enforcer runs when the engine has several cores.
#[derive(Clone, Copy, Debug)]
pub enum Threads {
    /// One instance on a thread of its own, to which the cores hand their packets.
    HandOff,
    /// Each tenant's packets run only on its cores (`mask`), each core with a shard
    /// of the enforcer of its own over state the shards share (`shards`).
    PerCore { mask: CoreMask, shards: Shards },
}

/// What runs enforcers, for the enforcers it runs when none is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum World {
    /// A scenario on one host, in the simulator or the lab.
    OneHost,
    /// A scenario across hosts, in the simulator or the lab.
    Hosts,
    /// `nicsched lab-bench`, the lab's forwarding benchmark.
    LabBench,
}

/// One selectable enforcer.
#[derive(Clone, Copy, Debug)]
pub struct EnforcerInfo {
    pub name: &'static str,
    /// The paper or system it follows.
    pub from: &'static str,
    pub mechanism: &'static str,
    pub runs: Runs,
    /// What receivers feed back to senders across hosts (docs/hosts.md);
    /// [`Feedback::None`]: each host's enforcer alone.
    pub feedback: Feedback,
    /// Where it runs when no enforcer is named.
    pub defaults: &'static [World],
}

impl EnforcerInfo {
    /// The queue selection it puts in front of the multiqueue NIC model; `None`
    /// for a software scheduler or the kernel's.
    pub fn nic(&self) -> Option<Driver> {
        match self.runs {
            Runs::Nic(driver) => Some(driver),
            Runs::Engine(_) | Runs::Kernel => None,
        }
    }

    /// Whether nicsched builds it (on the NIC model or in the engine), so that the
    /// simulator can run it.
    pub fn is_built(&self) -> bool {
        !matches!(self.runs, Runs::Kernel)
    }

    /// Whether it keeps state per leaf class ([`Enforcer::classes`] is `Some`).
    pub fn has_classes(&self) -> bool {
        matches!(self.runs, Runs::Engine(_))
    }

    /// How it runs on several engine cores; `None` for the kernel's.
    pub fn threads(&self) -> Option<Threads> {
        match self.runs {
            Runs::Nic(_) => Some(Threads::HandOff),
            Runs::Engine(software) => Some(software.threads),
            Runs::Kernel => None,
        }
    }

    /// The engine cores each tenant's packets may be processed on (index =
    /// tenant), for an enforcer that partitions the engine's cores; `None`: any
    /// core.
    pub fn core_mask(&self) -> Option<CoreMask> {
        match self.threads() {
            Some(Threads::PerCore { mask, .. }) => Some(mask),
            Some(Threads::HandOff) | None => None,
        }
    }

    /// Whether `world` runs it when no enforcer is named.
    pub fn is_default(&self, world: World) -> bool {
        self.defaults.contains(&world)
    }
}

/// `wheel` on one host, which `picnic` and its variants run beside their feedback.
const WHEEL: Software = Software {
    build: wheel::build,
    approximation: wheel::approximation,
    bounds: wheel::bounds,
    threads: Threads::HandOff,
};

pub const ENFORCERS: &[EnforcerInfo] = &[
    EnforcerInfo {
        name: "fifo",
        from: "-",
        mechanism: "one FIFO, no policy",
        runs: Runs::Nic(Driver::Fifo),
        feedback: Feedback::None,
        defaults: &[World::LabBench],
    },
    EnforcerInfo {
        name: "hash",
        from: "Linux per-flow hash",
        mechanism: "each flow hashed to one of all Tx queues; NIC round robin",
        runs: Runs::Nic(Driver::Hash),
        feedback: Feedback::None,
        defaults: &[],
    },
    EnforcerInfo {
        name: "xps",
        from: "Linux XPS",
        mechanism: "a packet goes to the Tx queue of the core that sent it; NIC round robin",
        runs: Runs::Nic(Driver::Xps),
        feedback: Feedback::None,
        defaults: &[],
    },
    EnforcerInfo {
        name: "tonic",
        from: "TONIC",
        mechanism: "per-tenant queue pools sized by weight, per-packet round robin, head insertion for prioritised apps",
        runs: Runs::Nic(Driver::Tonic),
        feedback: Feedback::None,
        defaults: &[World::OneHost, World::LabBench],
    },
    EnforcerInfo {
        name: "tonic-band",
        from: "TONIC, improved",
        mechanism: "as tonic, with a priority band per queue instead of head insertion",
        runs: Runs::Nic(Driver::TonicBand),
        feedback: Feedback::None,
        defaults: &[],
    },
    EnforcerInfo {
        name: "wf2q",
        from: "SENIC",
        mechanism: "rate-limited WF2Q+: shares water-filled by weight up to each cap, caps held in real time, tenant priorities as strict bands",
        runs: Runs::Engine(Software {
            build: wf2q::build,
            approximation: wf2q::approximation,
            bounds: wf2q::bounds,
            threads: Threads::HandOff,
        }),
        feedback: Feedback::None,
        defaults: &[World::LabBench],
    },
    EnforcerInfo {
        name: "valve",
        from: "FlowValve",
        mechanism: "token-bucket tree with priority, weights, guarantees and lending",
        runs: Runs::Engine(Software {
            build: valve::build,
            approximation: valve::approximation,
            bounds: valve::bounds,
            threads: Threads::PerCore {
                mask: valve::core_mask,
                shards: |policy| {
                    let shared = Arc::new(valve::SharedRates::new(policy));
                    Ok(Box::new(move |core, capacity| {
                        let shared = Arc::clone(&shared);
                        Box::new(valve::Shard::new(core, capacity, shared))
                    }))
                },
            },
        }),
        feedback: Feedback::None,
        defaults: &[World::LabBench],
    },
    EnforcerInfo {
        name: "htb",
        from: "Linux HTB semantics",
        mechanism: "hierarchical token bucket: rate, ceil, quantum, priority, borrowing",
        runs: Runs::Engine(Software {
            build: htb::build,
            approximation: htb::approximation,
            bounds: htb::bounds,
            threads: Threads::HandOff,
        }),
        feedback: Feedback::None,
        defaults: &[World::LabBench],
    },
    EnforcerInfo {
        name: "wheel",
        from: "Carousel / PicNIC",
        mechanism: "timing wheel, one earliest departure time per packet",
        runs: Runs::Engine(WHEEL),
        feedback: Feedback::None,
        defaults: &[World::LabBench],
    },
    EnforcerInfo {
        name: "picnic",
        from: "PicNIC",
        mechanism: "wheel plus predictable congestion control across hosts: receivers feed VM-to-VM bit rates (PCCB) and, when their engine is short of CPU, packet rates (PCCP) back to senders, folded into each packet's departure time",
        runs: Runs::Engine(WHEEL),
        feedback: Feedback::PicNic,
        defaults: &[World::Hosts],
    },
    EnforcerInfo {
        name: "picnic-wc",
        from: "PicNIC, work conserving",
        mechanism: "picnic, but a receiver leaves what a sender held elsewhere cannot use to the other senders (the ideal's rule on measured rates)",
        runs: Runs::Engine(WHEEL),
        feedback: Feedback::WorkConserving,
        defaults: &[],
    },
    EnforcerInfo {
        name: "picnic-bps",
        from: "PicNIC, just the BPS envelope",
        mechanism: "picnic with bandwidth feedback only: receivers feed VM-to-VM bit rates back but no packet rates (the paper's CWFQ+PCCB, like EyeQ)",
        runs: Runs::Engine(WHEEL),
        feedback: Feedback::BandwidthOnly,
        defaults: &[],
    },
    EnforcerInfo {
        name: "fairnic",
        from: "FairNIC",
        mechanism: "engine cores masked by weight; per-core local tokens, a global overflow pool shared by AIMD",
        runs: Runs::Engine(Software {
            build: fairnic::build,
            approximation: fairnic::approximation,
            bounds: fairnic::bounds,
            threads: Threads::PerCore {
                mask: fairnic::core_mask,
                shards: |policy| {
                    let pools = Arc::new(fairnic::SharedPools::new(policy)?);
                    let policy = policy.clone();
                    Ok(Box::new(move |core, capacity| {
                        let pools = Arc::clone(&pools);
                        Box::new(fairnic::Shard::shard(&policy, capacity, core, pools))
                    }))
                },
            },
        }),
        feedback: Feedback::None,
        defaults: &[],
    },
    EnforcerInfo {
        name: "linux-htb",
        from: "Linux kernel",
        mechanism: "the policy compiled to tc HTB classes and u32 filters",
        runs: Runs::Kernel,
        feedback: Feedback::None,
        defaults: &[World::LabBench],
    },
];

/// The registered enforcer called `name`.
pub fn find(name: &str) -> Option<&'static EnforcerInfo> {
    ENFORCERS.iter().find(|e| e.name == name)
}

/// Every registered name, in the table's order: every name a scenario's
/// `enforcers` or `--enforcer` may give.
pub fn names() -> Vec<&'static str> {
    ENFORCERS.iter().map(|e| e.name).collect()
}

/// The rows nicsched builds (on the NIC model or in the engine), in the table's
/// order: every enforcer the simulator runs.
pub fn built() -> impl Iterator<Item = &'static EnforcerInfo> {
    ENFORCERS.iter().filter(|e| e.is_built())
}

/// Whether the enforcer called `name` runs in the kernel ([`Runs::Kernel`]): only
/// the lab runs it, on one host.
pub fn in_kernel(name: &str) -> bool {
    find(name).is_some_and(|e| matches!(e.runs, Runs::Kernel))
}

/// The enforcers `world` runs when none is named, in the table's order.
pub fn defaults(world: World) -> Vec<&'static str> {
    ENFORCERS
        .iter()
        .filter(|e| e.is_default(world))
        .map(|e| e.name)
        .collect()
}

/// What the receivers of the enforcer called `name` feed back across hosts;
/// [`Feedback::None`] for a name the registry does not know.
pub fn feedback(name: &str) -> Feedback {
    find(name).map_or(Feedback::None, |e| e.feedback)
}
