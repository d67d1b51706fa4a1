//! Packet accounting (PicNIC): bytes buffered per tenant and for the whole host,
//! each under its cap, and packets held per app (leaf class) under the host's
//! per-class queue limit. A packet that would exceed a cap is refused at admission
//! and counted against its own tenant, so a flood can only ever use up its own
//! buffer: the per-class packet limits add up to no more than the enforcer's
//! descriptor pool, so a neighbour's backlog, or a sibling app's, can never leave a
//! class without a descriptor.

use crate::{Packet, Refusal};
use policy::{AppId, Policy, TenantId};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantCounters {
    pub admitted_packets: u64,
    pub admitted_bytes: u64,
    pub refused_packets: u64,
    pub refused_bytes: u64,
}

#[derive(Clone, Debug)]
pub struct Accounting {
    tenant_buffered_bytes: Vec<u64>,
    tenant_cap_bytes: Vec<u64>,
    app_held_packets: Vec<u32>,
    app_held_bytes: Vec<u64>,
    /// Per app: whether it held nothing at some moment since the last
    /// [`Accounting::take_app_emptied`].
    app_emptied: Vec<bool>,
    class_packets_max: u32,
    host_buffered_bytes: u64,
    host_cap_bytes: u64,
    counters: Vec<TenantCounters>,
}

impl Accounting {
    /// `class_packets_max`: packets one app may hold at once, its split classes
    /// together (see [`crate::Capacity::class_packets_max`]).
    pub fn new(policy: &Policy, class_packets_max: u32) -> Self {
        let tenants = policy.tenants.len();
        Accounting {
            tenant_buffered_bytes: vec![0; tenants],
            app_held_packets: vec![0; policy.apps.len()],
            app_held_bytes: vec![0; policy.apps.len()],
            app_emptied: vec![true; policy.apps.len()],
            class_packets_max,
            tenant_cap_bytes: policy
                .tenants
                .iter()
                .map(|t| t.buffer_bytes.unwrap_or(u64::MAX))
                .collect(),
            host_buffered_bytes: 0,
            host_cap_bytes: policy.buffer_bytes.unwrap_or(u64::MAX),
            counters: vec![TenantCounters::default(); tenants],
        }
    }

    /// Admits `packet`, or refuses it and counts the refusal against its tenant.
    pub fn admit(&mut self, packet: &Packet) -> Result<(), Refusal> {
        let (t, a) = (packet.tenant.index(), packet.app.index());
        let bytes = u64::from(packet.len_bytes);
        let refusal = if self.app_held_packets[a] >= self.class_packets_max {
            Some(Refusal::QueueFull)
        } else if self.tenant_buffered_bytes[t] + bytes > self.tenant_cap_bytes[t] {
            Some(Refusal::TenantBuffer)
        } else if self.host_buffered_bytes + bytes > self.host_cap_bytes {
            Some(Refusal::HostBuffer)
        } else {
            None
        };
        let counters = &mut self.counters[t];
        match refusal {
            Some(reason) => {
                counters.refused_packets += 1;
                counters.refused_bytes += bytes;
                Err(reason)
            }
            None => {
                counters.admitted_packets += 1;
                counters.admitted_bytes += bytes;
                self.tenant_buffered_bytes[t] += bytes;
                self.app_held_packets[a] += 1;
                self.app_held_bytes[a] += bytes;
                self.host_buffered_bytes += bytes;
                Ok(())
            }
        }
    }

    /// Counts a refusal the enforcer decided itself (a full queue).
    pub fn refuse(&mut self, tenant: TenantId, bytes: u32) {
        let counters = &mut self.counters[tenant.index()];
        counters.refused_packets += 1;
        counters.refused_bytes += u64::from(bytes);
    }

    /// Returns buffer space when a packet (or its last frame) leaves.
    pub fn release(&mut self, packet: &Packet) {
        let (t, a) = (packet.tenant.index(), packet.app.index());
        let bytes = u64::from(packet.len_bytes);
        debug_assert!(self.tenant_buffered_bytes[t] >= bytes);
        debug_assert!(self.host_buffered_bytes >= bytes);
        debug_assert!(self.app_held_packets[a] > 0);
        self.app_held_packets[a] -= 1;
        self.app_held_bytes[a] -= bytes;
        if self.app_held_packets[a] == 0 {
            self.app_emptied[a] = true;
        }
        self.tenant_buffered_bytes[t] -= bytes;
        self.host_buffered_bytes -= bytes;
    }

    pub fn counters(&self) -> &[TenantCounters] {
        &self.counters
    }

    pub fn buffered_bytes(&self, tenant: TenantId) -> u64 {
        self.tenant_buffered_bytes[tenant.index()]
    }

    /// Bytes app `app` holds, its split classes together.
    pub fn app_buffered_bytes(&self, app: AppId) -> u64 {
        self.app_held_bytes[app.index()]
    }

    /// Whether app `app` held nothing at some moment since the last call; starts
    /// a new watch.
    pub fn take_app_emptied(&mut self, app: AppId) -> bool {
        let held = self.app_held_packets[app.index()] > 0;
        std::mem::replace(&mut self.app_emptied[app.index()], !held)
    }

    pub fn host_buffered_bytes(&self) -> u64 {
        self.host_buffered_bytes
    }
}
