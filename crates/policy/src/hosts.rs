//! Scenarios across several hosts (hosts.md): each host has a full policy, tenants
//! are VMs with an ingress envelope beside their egress one, and every traffic goes
//! from a VM on one host to a VM on another.

use crate::{Policy, TenantId, Traffic};

/// Index of a host in [`HostsScenario::hosts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub u16);

impl HostId {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// A VM: a tenant of one host's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Vm {
    pub host: HostId,
    pub tenant: TenantId,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    pub name: String,
    /// The host's policy; its `link.rate` bounds what leaves and what enters it.
    pub policy: Policy,
}

/// Bytes a host's ingress may queue before it drops: a receive ring of 1024
/// descriptors of one MTU each. The simulator and the lab bound what enters a host
/// alike.
pub const INGRESS_QUEUE_BYTES: u64 = 1024 * 1500;
/// Bytes the fabric (`fabric.rate`, simulator) may queue before it drops: as much
/// as one host's ingress.
pub const FABRIC_QUEUE_BYTES: u64 = INGRESS_QUEUE_BYTES;
/// Bytes a VM may receive above its ingress envelope at once: the depth of the
/// bucket that polices `ingress.max_rate` in both worlds, full after a quiet
/// spell. Four 64 KiB sends, so that TCP's bursts within the envelope pass;
/// the `envelopes` check allows for it.
pub const INGRESS_BURST_BYTES: u64 = 256 * 1024;

/// How often receivers feed rates back to senders, and how long feedback takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feedback {
    pub epoch_ns: u64,
    pub delay_ns: u64,
}

impl Default for Feedback {
    fn default() -> Self {
        Feedback {
            epoch_ns: 1_000_000,
            delay_ns: 50_000,
        }
    }
}

/// One VM-to-VM traffic: the one-host traffic on the sender's host, and its receiver.
#[derive(Clone, Debug, PartialEq)]
pub struct HostsTraffic {
    /// `tenant` and `app` are the sender's, in its host's policy.
    pub traffic: Traffic,
    pub host: HostId,
    pub to: Vm,
}

impl HostsTraffic {
    pub fn from(&self) -> Vm {
        Vm {
            host: self.host,
            tenant: self.traffic.tenant,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct HostsScenario {
    pub name: String,
    pub hosts: Vec<Host>,
    /// The switch between hosts; `None` is non-blocking.
    pub fabric_rate_bps: Option<u64>,
    pub feedback: Feedback,
    pub duration_ns: u64,
    pub interval_ns: u64,
    pub seed: u64,
    pub enforcers: Vec<String>,
    pub traffic: Vec<HostsTraffic>,
}

impl HostsScenario {
    /// The fastest host link's rate (a scenario has at least two hosts).
    pub fn fastest_link_bps(&self) -> u64 {
        self.hosts
            .iter()
            .map(|h| h.policy.link.rate_bps)
            .max()
            .unwrap_or(0)
    }

    pub fn host(&self, id: HostId) -> &Host {
        &self.hosts[id.index()]
    }

    pub fn tenant(&self, vm: Vm) -> &crate::Tenant {
        self.host(vm.host).policy.tenant(vm.tenant)
    }

    /// Every VM of every host, host by host in tenant order.
    pub fn vms(&self) -> Vec<Vm> {
        self.hosts
            .iter()
            .enumerate()
            .flat_map(|(h, host)| {
                (0..host.policy.tenants.len()).map(move |t| Vm {
                    host: HostId(h as u16),
                    tenant: TenantId(t as u16),
                })
            })
            .collect()
    }

    pub fn vm_by_name(&self, name: &str) -> Option<Vm> {
        self.vms()
            .into_iter()
            .find(|&vm| self.tenant(vm).name == name)
    }
}

/// A scenario file: one host (scenario.md) or several (hosts.md).
#[derive(Clone, Debug, PartialEq)]
pub enum AnyScenario {
    OneHost(crate::Scenario),
    Hosts(HostsScenario),
}
