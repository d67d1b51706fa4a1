//! Packet accounting (PicNIC): bytes buffered per tenant and for the whole host,
//! each under its cap, and packets held per tenant under the host's per-tenant
//! limit. A packet that would exceed a cap is refused at admission and counted
//! against its own tenant, so a flood can only ever use up its own buffer: the
//! per-tenant packet limits add up to no more than the enforcer's descriptor pool,
//! so a neighbour's backlog can never leave a tenant without a descriptor.

use crate::Refusal;
use policy::{Policy, TenantId};

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
    tenant_held_packets: Vec<u32>,
    tenant_packets_max: u32,
    host_buffered_bytes: u64,
    host_cap_bytes: u64,
    counters: Vec<TenantCounters>,
}

impl Accounting {
    /// `tenant_packets_max`: packets one tenant may hold at once (see
    /// [`crate::Capacity::tenant_packets_max`]).
    pub fn new(policy: &Policy, tenant_packets_max: u32) -> Self {
        let tenants = policy.tenants.len();
        Accounting {
            tenant_buffered_bytes: vec![0; tenants],
            tenant_held_packets: vec![0; tenants],
            tenant_packets_max,
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

    /// Admits `bytes` for `tenant`, or refuses them and counts the refusal.
    pub fn admit(&mut self, tenant: TenantId, bytes: u32) -> Result<(), Refusal> {
        let t = tenant.index();
        let bytes = u64::from(bytes);
        let refusal = if self.tenant_held_packets[t] >= self.tenant_packets_max {
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
                self.tenant_held_packets[t] += 1;
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
    pub fn release(&mut self, tenant: TenantId, bytes: u32) {
        let t = tenant.index();
        let bytes = u64::from(bytes);
        debug_assert!(self.tenant_buffered_bytes[t] >= bytes);
        debug_assert!(self.host_buffered_bytes >= bytes);
        debug_assert!(self.tenant_held_packets[t] > 0);
        self.tenant_held_packets[t] -= 1;
        self.tenant_buffered_bytes[t] -= bytes;
        self.host_buffered_bytes -= bytes;
    }

    pub fn counters(&self) -> &[TenantCounters] {
        &self.counters
    }

    pub fn buffered_bytes(&self, tenant: TenantId) -> u64 {
        self.tenant_buffered_bytes[tenant.index()]
    }

    pub fn host_buffered_bytes(&self) -> u64 {
        self.host_buffered_bytes
    }
}
