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
//! its own cores: each core is a group of its own (a packet goes to one of its
//! tenant's cores, chosen by its key), so another tenant's costly packets never
//! hold up a core outside its mask. Where masks share a core (fewer cores than
//! tenants), `engine.cpu` decides among the tenants on it as it does among all
//! tenants without a mask: one queue in arrival order under `fifo`, a queue per
//! tenant shared by weight under `weighted`.

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

/// Cores that take packets from the same queues, and how they choose among them:
/// every core without a mask, one core with one.
struct Group {
    /// Its queues: one under `fifo`, one per tenant it serves under `weighted`.
    queues: Vec<usize>,
    /// Weighted: (start tag, queue) of each non-empty queue's head.
    heads: BTreeSet<(u128, usize)>,
    /// Weighted: the start tag of the packet a core took last; a new packet starts
    /// no earlier, so that a tenant idle for a while gets no credit for it.
    virtual_time: u128,
    /// Its cores now busy.
    busy: usize,
}

pub struct Cores<T> {
    sharing: CpuSharing,
    queues: Vec<VecDeque<Waiting<T>>>,
    /// Per tenant, per position in its mask (one position without a mask): the
    /// queue its packets wait in.
    queue_of: Vec<Vec<usize>>,
    /// Per queue: its group, and its tenant's weight (weighted).
    queue_group: Vec<usize>,
    queue_weight: Vec<u32>,
    /// Weighted, per queue: the finish tag of its last packet.
    last_finish: Vec<u128>,
    groups: Vec<Group>,
    /// Whether each group is one core (masked), whose index it shares.
    masked: bool,
    /// Whether each core is busy.
    core_busy: Vec<bool>,
    /// Room of each queue, in packets.
    room: usize,
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
        let sharing = policy.engine.cpu;
        let masked = mask.is_some();
        // Each tenant's cores: its mask, or every core as one group.
        let mask = mask.unwrap_or_else(|| vec![vec![0]; tenants]);
        let group_count = if masked { cores } else { 1 };
        let mut groups: Vec<Group> = (0..group_count)
            .map(|_| Group {
                queues: Vec::new(),
                heads: BTreeSet::new(),
                virtual_time: 0,
                busy: 0,
            })
            .collect();
        let (mut queue_group, mut queue_weight, mut queue_tenant) =
            (Vec::new(), Vec::new(), Vec::new());
        let queue_of = mask
            .iter()
            .enumerate()
            .map(|(t, tenant_cores)| {
                tenant_cores
                    .iter()
                    .map(|&core| {
                        let g = usize::from(core);
                        let shared = match sharing {
                            CpuSharing::Fifo => groups[g].queues.first(),
                            CpuSharing::Weighted => {
                                groups[g].queues.iter().find(|&&q| queue_tenant[q] == t)
                            }
                        };
                        if let Some(&q) = shared {
                            return q;
                        }
                        let q = queue_group.len();
                        queue_group.push(g);
                        queue_weight.push(policy.tenants[t].weight);
                        queue_tenant.push(t);
                        groups[g].queues.push(q);
                        q
                    })
                    .collect()
            })
            .collect();
        let queues = queue_group.len();
        Cores {
            sharing,
            queues: (0..queues).map(|_| VecDeque::new()).collect(),
            queue_of,
            queue_group,
            queue_weight,
            last_finish: vec![0; queues],
            groups,
            masked,
            core_busy: vec![false; cores],
            room: room as usize,
            busy_ns: vec![0; tenants],
            refused_packets: vec![0; tenants],
            ledgers: vec![CoreLedger::default(); tenants],
            on_cores_bytes: vec![0; tenants],
        }
    }

    /// The queue a packet of `tenant` keyed `key` waits in: `key` picks one of a
    /// masked tenant's cores (a sender, a flow), so that its packets stay on one
    /// core, in order.
    fn queue_for(&self, tenant: TenantId, key: u32) -> usize {
        let queues = &self.queue_of[tenant.index()];
        queues[mask_index(key, queues.len())]
    }

    /// The group core `core` takes packets from.
    fn group_of(&self, core: usize) -> usize {
        if self.masked { core } else { 0 }
    }

    /// Whether each tenant waits in a queue of its own (`weighted`, no mask): a
    /// world may then leave a tenant's packets where they arrived (its own socket)
    /// until its queue has room, instead of refusing them.
    pub fn queue_per_tenant(&self) -> bool {
        !self.masked && self.sharing == CpuSharing::Weighted
    }

    /// Queues packets wait in, each of [`Self::room_for`] packets at most.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Packets of `tenant` (keyed `key`) its queue has room for now.
    pub fn room_for(&self, tenant: TenantId, key: u32) -> usize {
        let q = self.queue_for(tenant, key);
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
        let q = self.queue_for(tenant, key);
        if self.queues[q].len() >= self.room {
            self.ledgers[t].refused_bytes += u64::from(bytes);
            self.refused_packets[t] += 1;
            return Err(item);
        }
        let g = self.queue_group[q];
        let start_tag = match self.sharing {
            CpuSharing::Weighted => {
                let group = &mut self.groups[g];
                let start = group.virtual_time.max(self.last_finish[q]);
                self.last_finish[q] =
                    start + u128::from(cost_ns) * TAG_SCALE / u128::from(self.queue_weight[q]);
                if self.queues[q].is_empty() {
                    group.heads.insert((start, q));
                }
                start
            }
            CpuSharing::Fifo => 0,
        };
        self.queues[q].push_back(Waiting {
            item,
            tenant,
            bytes,
            cost_ns,
            core: if self.masked { g as u16 } else { 0 },
            start_tag,
        });
        Ok(())
    }

    /// Whether a packet waits in group `g`.
    fn has_work(&self, g: usize) -> bool {
        let group = &self.groups[g];
        match self.sharing {
            CpuSharing::Fifo => group
                .queues
                .first()
                .is_some_and(|&q| !self.queues[q].is_empty()),
            CpuSharing::Weighted => !group.heads.is_empty(),
        }
    }

    /// Puts the next waiting packet on an idle core, if there are both.
    pub fn take(&mut self) -> Option<Waiting<T>> {
        let core = (0..self.core_busy.len())
            .find(|&c| !self.core_busy[c] && self.has_work(self.group_of(c)))?;
        self.take_for(core as u16)
    }

    /// The next packet core `core` may process, if it is idle and one waits.
    pub fn take_for(&mut self, core: u16) -> Option<Waiting<T>> {
        let c = usize::from(core);
        if self.core_busy[c] {
            return None;
        }
        let g = self.group_of(c);
        let mut packet = match self.sharing {
            CpuSharing::Fifo => {
                let &q = self.groups[g].queues.first()?;
                self.queues[q].pop_front()?
            }
            CpuSharing::Weighted => {
                let group = &mut self.groups[g];
                let (start, q) = group.heads.pop_first()?;
                let packet = self.queues[q]
                    .pop_front()
                    .expect("a head names a non-empty queue");
                if let Some(next) = self.queues[q].front() {
                    group.heads.insert((next.start_tag, q));
                }
                group.virtual_time = start;
                packet
            }
        };
        packet.core = core;
        self.core_busy[c] = true;
        self.groups[g].busy += 1;
        let t = packet.tenant.index();
        self.busy_ns[t] += packet.cost_ns;
        self.on_cores_bytes[t] += u64::from(packet.bytes);
        Some(packet)
    }

    /// Core `core` finished a packet of `tenant`.
    pub fn processed(&mut self, tenant: TenantId, bytes: u32, core: u16) {
        let t = tenant.index();
        let c = usize::from(core);
        self.core_busy[c] = false;
        self.on_cores_bytes[t] -= u64::from(bytes);
        self.ledgers[t].processed_bytes += u64::from(bytes);
        let g = self.group_of(c);
        let group = &mut self.groups[g];
        group.busy -= 1;
        if group.heads.is_empty() && group.busy == 0 {
            // Idle cores: every tenant starts afresh, as SFQ's virtual time jumps
            // to the largest finish tag when the server idles.
            group.virtual_time = group
                .queues
                .iter()
                .map(|&q| self.last_finish[q])
                .max()
                .unwrap_or(0);
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
        for group in &mut self.groups {
            group.heads.clear();
        }
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

    /// Both tenants masked to the one core (fewer cores than tenants), a filling
    /// 4 packets of 3 µs each before b's first arrives.
    fn one_shared_core(cpu: &str) -> (Vec<u16>, Vec<u64>) {
        let mut cores = Cores::new(&policy(cpu, 1), 4, Some(vec![vec![0], vec![0]]));
        for t in [0, 1] {
            for i in 0..4 {
                // A full queue refuses; refused_packets counts it.
                let _ = cores.arrive(i, 0, TenantId(t), 100, 3_000);
            }
        }
        let refused = cores.refused_packets.clone();
        (order(&mut cores), refused)
    }

    #[test]
    fn a_core_that_masks_share_is_shared_by_weight_under_weighted() {
        let (taken, refused) = one_shared_core("weighted");
        assert_eq!(refused, vec![0, 0], "each tenant its own queue on the core");
        // b (weight 3) takes three of every four once both wait, although a came first.
        assert_eq!(taken, vec![0, 1, 1, 1, 0, 1, 0, 0]);
    }

    #[test]
    fn a_core_that_masks_share_serves_in_arrival_order_under_fifo() {
        let (taken, refused) = one_shared_core("fifo");
        assert_eq!(refused, vec![0, 4], "one queue on the core, full with a's");
        assert_eq!(taken, vec![0, 0, 0, 0]);
    }
}
