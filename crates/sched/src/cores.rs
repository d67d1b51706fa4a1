//! The engine's cores: each processes one packet at a time for its cost; the
//! enforcer sees a packet only once a core processed it. Both worlds queue for
//! their cores here: the simulator in virtual time, the lab's engine with real
//! threads that spend each cost.
//!
//! Under `engine.cpu: fifo` packets wait in one queue in arrival order, so a tenant
//! that sends more, or costlier, packets takes more of the cores. Under `weighted`
//! each tenant waits in its own queue and the cores are shared by start-time fair
//! queueing on core time divided by tenant weight (PicNIC's CPU-fair queues).
//! Under an enforcer with a core mask (`fairnic`), a tenant's packets wait only for
//! its own cores: each core has its queue, fed in arrival order by the tenants it
//! serves (a packet to one of its tenant's cores, chosen by its key), so another
//! tenant's costly packets never hold up a core outside its mask.

use policy::{CpuSharing, Policy, TenantId};
use std::collections::{BTreeSet, VecDeque};

/// Packets that may wait in one queue for a core, unless a world says otherwise: a
/// NIC's receive ring of 1024 descriptors.
pub const QUEUE_PACKETS: u32 = 1024;

/// Fixed-point scale of virtual time: core nanoseconds per unit of weight, so that
/// a 1 ns packet of a tenant of weight `u32::MAX` still advances its tag.
const TAG_SCALE: u128 = 1 << 32;

/// Which of a tenant's `cores` (positions in its mask) serves packets keyed `key`
/// (a sender, a flow): the same one every time, so they stay in order.
pub fn mask_index(key: u32, cores: usize) -> usize {
    key as usize % cores
}

/// The engine core of `mask` that serves `tenant`'s packets keyed `key`: the one
/// both worlds queue them for, and the one `fairnic` binds them to.
pub fn core_of(mask: &[Vec<u16>], tenant: TenantId, key: u32) -> u16 {
    let cores = &mask[tenant.index()];
    cores[mask_index(key, cores.len())]
}

/// A packet waiting for a core, with what its world carries along (`item`).
#[derive(Clone, Copy, Debug)]
pub struct Waiting<T> {
    pub item: T,
    pub tenant: TenantId,
    pub bytes: u32,
    pub cost_ns: u64,
    /// Masked: the core it waits for, and runs on; otherwise the core that took it.
    pub core: u16,
    /// Weighted: the packet's start tag in virtual time; fifo: unused.
    start_tag: u128,
}

/// Bytes of one tenant at the cores: arrived, processed (handed on), refused for
/// want of room; what still waits is [`Cores::waiting_bytes`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreLedger {
    pub arrived_bytes: u64,
    pub processed_bytes: u64,
    pub refused_bytes: u64,
}

pub struct Cores<T> {
    sharing: CpuSharing,
    /// Weighted: one queue per tenant; fifo: one queue for all; masked: one per core.
    queues: Vec<VecDeque<Waiting<T>>>,
    /// Per tenant, the cores it may use (masked), from the enforcer's registry row.
    mask: Option<Vec<Vec<u16>>>,
    /// Whether each core is busy.
    core_busy: Vec<bool>,
    /// Room of each queue, in packets.
    room: usize,
    idle_cores: usize,
    weights: Vec<u32>,
    /// Weighted: (start tag, tenant) of each non-empty queue's head.
    heads: BTreeSet<(u128, usize)>,
    /// Weighted: the start tag of the packet a core took last; a new packet starts
    /// no earlier, so that a tenant idle for a while gets no credit for it.
    virtual_time: u128,
    /// Weighted: each tenant's finish tag of its last packet.
    last_finish: Vec<u128>,
    /// Per tenant: core time its packets were charged (their costs), and packets
    /// refused for want of room.
    pub busy_ns: Vec<u64>,
    pub refused_packets: Vec<u64>,
    pub ledgers: Vec<CoreLedger>,
    /// Per tenant: bytes on a core now.
    on_cores_bytes: Vec<u64>,
}

impl<T> Cores<T> {
    /// `room`: packets each queue holds; `mask`: per tenant, the cores its packets
    /// may run on (`None`: any core).
    pub fn new(policy: &Policy, room: u32, mask: Option<Vec<Vec<u16>>>) -> Cores<T> {
        let tenants = policy.tenants.len();
        let cores = usize::from(policy.engine.cores.max(1));
        let queues = match (&mask, policy.engine.cpu) {
            (Some(_), _) => cores,
            (None, CpuSharing::Fifo) => 1,
            (None, CpuSharing::Weighted) => tenants,
        };
        Cores {
            sharing: policy.engine.cpu,
            queues: (0..queues).map(|_| VecDeque::new()).collect(),
            core_busy: vec![false; cores],
            mask,
            room: room as usize,
            idle_cores: cores,
            weights: policy.tenants.iter().map(|t| t.weight).collect(),
            heads: BTreeSet::new(),
            virtual_time: 0,
            last_finish: vec![0; tenants],
            busy_ns: vec![0; tenants],
            refused_packets: vec![0; tenants],
            ledgers: vec![CoreLedger::default(); tenants],
            on_cores_bytes: vec![0; tenants],
        }
    }

    /// The queue a packet of `tenant` waits in, and its core when masked; `key`
    /// picks one of a masked tenant's cores (a sender, a flow), so that its
    /// packets stay on one core, in order.
    fn queue_of(&self, tenant: TenantId, key: u32) -> (usize, u16) {
        match &self.mask {
            Some(mask) => {
                let core = core_of(mask, tenant, key);
                (usize::from(core), core)
            }
            None => match self.sharing {
                CpuSharing::Fifo => (0, 0),
                CpuSharing::Weighted => (tenant.index(), 0),
            },
        }
    }

    /// Whether each tenant waits in a queue of its own (`weighted`, no mask): a
    /// world may then leave a tenant's packets where they arrived (its own socket)
    /// until its queue has room, instead of refusing them.
    pub fn queue_per_tenant(&self) -> bool {
        self.mask.is_none() && self.sharing == CpuSharing::Weighted
    }

    /// Queues packets wait in, each of [`Self::room_for`] packets at most.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Packets of `tenant` (keyed `key`) its queue has room for now.
    pub fn room_for(&self, tenant: TenantId, key: u32) -> usize {
        let (q, _) = self.queue_of(tenant, key);
        self.room.saturating_sub(self.queues[q].len())
    }

    /// A packet arrives for a core; handed back when its queue has no room (it is
    /// refused against its tenant).
    pub fn arrive(
        &mut self,
        item: T,
        key: u32,
        tenant: TenantId,
        bytes: u32,
        cost_ns: u64,
    ) -> Result<(), T> {
        let t = tenant.index();
        self.ledgers[t].arrived_bytes += u64::from(bytes);
        let (q, core) = self.queue_of(tenant, key);
        if self.queues[q].len() >= self.room {
            self.ledgers[t].refused_bytes += u64::from(bytes);
            self.refused_packets[t] += 1;
            return Err(item);
        }
        let start_tag = match (&self.mask, self.sharing) {
            (None, CpuSharing::Weighted) => {
                let start = self.virtual_time.max(self.last_finish[t]);
                self.last_finish[t] =
                    start + u128::from(cost_ns) * TAG_SCALE / u128::from(self.weights[t]);
                if self.queues[q].is_empty() {
                    self.heads.insert((start, q));
                }
                start
            }
            _ => 0,
        };
        self.queues[q].push_back(Waiting {
            item,
            tenant,
            bytes,
            cost_ns,
            core,
            start_tag,
        });
        Ok(())
    }

    /// Puts the next waiting packet on an idle core, if there are both.
    pub fn take(&mut self) -> Option<Waiting<T>> {
        let core = match &self.mask {
            Some(_) => (0..self.queues.len())
                .find(|&c| !self.core_busy[c] && !self.queues[c].is_empty())?,
            None => self.core_busy.iter().position(|busy| !busy)?,
        };
        self.take_for(core as u16)
    }

    /// The next packet core `core` may process, if it is idle and one waits.
    pub fn take_for(&mut self, core: u16) -> Option<Waiting<T>> {
        let c = usize::from(core);
        if self.core_busy[c] {
            return None;
        }
        let mut packet = if self.mask.is_some() {
            self.queues[c].pop_front()?
        } else {
            self.take_shared()?
        };
        packet.core = core;
        self.core_busy[c] = true;
        self.idle_cores -= 1;
        let t = packet.tenant.index();
        self.busy_ns[t] += packet.cost_ns;
        self.on_cores_bytes[t] += u64::from(packet.bytes);
        Some(packet)
    }

    /// The next packet for any idle core, by `engine.cpu`.
    fn take_shared(&mut self) -> Option<Waiting<T>> {
        Some(match self.sharing {
            CpuSharing::Fifo => self.queues[0].pop_front()?,
            CpuSharing::Weighted => {
                let (start, q) = self.heads.pop_first()?;
                let packet = self.queues[q]
                    .pop_front()
                    .expect("a head names a non-empty queue");
                if let Some(next) = self.queues[q].front() {
                    self.heads.insert((next.start_tag, q));
                }
                self.virtual_time = start;
                packet
            }
        })
    }

    /// Core `core` finished a packet of `tenant`.
    pub fn processed(&mut self, tenant: TenantId, bytes: u32, core: u16) {
        let t = tenant.index();
        self.idle_cores += 1;
        self.core_busy[usize::from(core)] = false;
        self.on_cores_bytes[t] -= u64::from(bytes);
        self.ledgers[t].processed_bytes += u64::from(bytes);
        if self.heads.is_empty() && self.idle_cores == self.core_busy.len() {
            // Idle cores: every tenant starts afresh, as SFQ's virtual time jumps
            // to the largest finish tag when the server idles.
            self.virtual_time = self.last_finish.iter().copied().max().unwrap_or(0);
        }
    }

    /// Per tenant, the bytes still waiting or on a core.
    pub fn waiting_bytes(&self) -> Vec<u64> {
        let mut waiting = self.on_cores_bytes.clone();
        for packet in self.queues.iter().flatten() {
            waiting[packet.tenant.index()] += u64::from(packet.bytes);
        }
        waiting
    }

    /// Takes out every packet still waiting for a core (the run ended).
    pub fn drain(&mut self) -> impl Iterator<Item = Waiting<T>> + '_ {
        self.heads.clear();
        self.queues.iter_mut().flat_map(|q| q.drain(..))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(cpu: &str, cores: u16) -> Policy {
        policy::parse_policy(
            &format!(
                "link: {{ rate: 10Gbit }}\nengine: {{ cores: {cores}, cpu: {cpu} }}\ntenants:\n  - {{ name: a, weight: 1 }}\n  - {{ name: b, weight: 3 }}\n"
            ),
            "cores.yaml",
        )
        .unwrap()
    }

    /// Runs one core to completion; the tenants in the order it took them.
    fn order(cores: &mut Cores<u32>) -> Vec<u16> {
        let mut taken = Vec::new();
        while let Some(p) = cores.take() {
            taken.push(p.tenant.0);
            cores.processed(p.tenant, p.bytes, p.core);
        }
        taken
    }

    #[test]
    fn fifo_serves_in_arrival_order_and_refuses_beyond_its_one_queue() {
        let mut cores = Cores::new(&policy("fifo", 1), 3, None);
        for (i, t) in [0u16, 0, 1, 0].into_iter().enumerate() {
            let arrived = cores.arrive(i as u32, 0, TenantId(t), 100, 1_000);
            assert_eq!(arrived.is_ok(), i < 3, "room for 3 in all");
        }
        assert_eq!(cores.refused_packets, vec![1, 0]);
        assert_eq!(order(&mut cores), vec![0, 0, 1]);
    }

    #[test]
    fn weighted_shares_core_time_by_weight_and_each_tenant_waits_in_its_own_queue() {
        let mut cores = Cores::new(&policy("weighted", 1), 8, None);
        // 3 µs divides by weight 3 exactly, so no tag rounds ahead of another.
        for i in 0..8 {
            cores.arrive(i, 0, TenantId(0), 100, 3_000).unwrap();
            cores.arrive(i, 0, TenantId(1), 100, 3_000).unwrap();
        }
        assert!(cores.arrive(9, 0, TenantId(0), 100, 3_000).is_err());
        assert_eq!(cores.room_for(TenantId(1), 0), 0);
        let taken = order(&mut cores);
        // Weight 3 to 1: b takes three of every four while both wait.
        assert_eq!(&taken[..8], &[0, 1, 1, 1, 0, 1, 1, 1]);
        assert_eq!(cores.busy_ns, vec![24_000, 24_000]);
        assert_eq!(cores.waiting_bytes(), vec![0, 0]);
        assert_eq!(cores.ledgers[0].processed_bytes, 800);
        assert_eq!(cores.ledgers[0].refused_bytes, 100);
    }

    #[test]
    fn a_masked_tenant_waits_only_for_its_own_cores() {
        let mask = vec![vec![0], vec![1]];
        let mut cores = Cores::new(&policy("fifo", 2), 4, Some(mask));
        cores.arrive(1, 7, TenantId(0), 100, 50_000).unwrap();
        cores.arrive(2, 7, TenantId(0), 100, 50_000).unwrap();
        cores.arrive(3, 7, TenantId(1), 100, 1_000).unwrap();
        let first = cores.take().unwrap();
        assert_eq!((first.item, first.core), (1, 0));
        // Core 0 is busy with a's costly packet; b's runs on core 1 meanwhile.
        assert!(cores.take_for(0).is_none());
        let second = cores.take().unwrap();
        assert_eq!((second.item, second.core), (3, 1));
        assert_eq!(cores.waiting_bytes(), vec![200, 100]);
        assert_eq!(cores.drain().count(), 1);
    }
}
