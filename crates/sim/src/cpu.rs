//! The engine's cores: each processes one send at a time for the engine's own cost
//! plus its traffic's; the enforcer sees a send only once a core processed it.
//! Under `engine.cpu: fifo` sends wait in one queue in arrival order, so a tenant
//! that sends more, or costlier, sends takes more of the cores. Under `weighted`
//! each tenant waits in its own queue and the cores are shared by start-time fair
//! queueing on core time divided by tenant weight (PicNIC's CPU-fair queues).
//! Under an enforcer with a core mask (`fairnic`), a tenant's sends wait only for
//! its own cores: each core has its queue, fed in arrival order by the tenants it
//! serves (a sender to one of its tenant's cores), so another tenant's costly sends
//! never hold up a core outside its mask.

use policy::{CpuSharing, Policy, TenantId};
use report::EngineLedger;
use std::collections::{BTreeSet, VecDeque};

/// Fixed-point scale of virtual time: core nanoseconds per unit of weight, so that
/// a 1 ns send of a tenant of weight `u32::MAX` still advances its tag.
const TAG_SCALE: u128 = 1 << 32;

/// A send waiting for a core.
#[derive(Clone, Copy, Debug)]
pub struct Waiting {
    pub sender: u32,
    pub tenant: TenantId,
    pub bytes: u32,
    pub issued_ns: u64,
    pub cost_ns: u64,
    /// Masked: the core it waits for, and runs on.
    pub core: u16,
    /// Weighted: the send's start tag in virtual time; fifo: unused.
    start_tag: u128,
}

pub struct Cpu {
    sharing: CpuSharing,
    /// Weighted: one queue per tenant; fifo: one queue for all; masked: one per core.
    queues: Vec<VecDeque<Waiting>>,
    /// Per tenant, the cores it may use (masked), from the enforcer's registry row.
    mask: Option<Vec<Vec<u16>>>,
    /// Masked: whether each core is busy.
    core_busy: Vec<bool>,
    /// Room of each queue, in sends.
    room: usize,
    cores: u32,
    idle_cores: u32,
    weights: Vec<u32>,
    /// Weighted: (start tag, tenant) of each non-empty queue's head.
    heads: BTreeSet<(u128, usize)>,
    /// Weighted: the start tag of the send a core took last; a new send starts no
    /// earlier, so that a tenant idle for a while gets no credit for it.
    virtual_time: u128,
    /// Weighted: each tenant's finish tag of its last send.
    last_finish: Vec<u128>,
    /// Per tenant: core time its sends took, and sends refused for want of room.
    pub busy_ns: Vec<u64>,
    pub refused_packets: Vec<u64>,
    pub ledgers: Vec<EngineLedger>,
    /// Per tenant: bytes on a core now.
    on_cores_bytes: Vec<u64>,
}

impl Cpu {
    /// `mask`: per tenant, the cores its sends may run on; `None`: any core.
    pub fn new(policy: &Policy, room: u32, mask: Option<Vec<Vec<u16>>>) -> Cpu {
        let tenants = policy.tenants.len();
        let queues = match (&mask, policy.engine.cpu) {
            (Some(_), _) => usize::from(policy.engine.cores),
            (None, CpuSharing::Fifo) => 1,
            (None, CpuSharing::Weighted) => tenants,
        };
        Cpu {
            sharing: policy.engine.cpu,
            queues: vec![VecDeque::new(); queues],
            core_busy: vec![false; if mask.is_some() { queues } else { 0 }],
            mask,
            room: room as usize,
            cores: u32::from(policy.engine.cores),
            idle_cores: u32::from(policy.engine.cores),
            weights: policy.tenants.iter().map(|t| t.weight).collect(),
            heads: BTreeSet::new(),
            virtual_time: 0,
            last_finish: vec![0; tenants],
            busy_ns: vec![0; tenants],
            refused_packets: vec![0; tenants],
            ledgers: vec![EngineLedger::default(); tenants],
            on_cores_bytes: vec![0; tenants],
        }
    }

    /// A send arrives for a core; false when its queue has no room (the send is
    /// refused against its tenant).
    pub fn arrive(
        &mut self,
        sender: u32,
        tenant: TenantId,
        bytes: u32,
        issued_ns: u64,
        cost_ns: u64,
    ) -> bool {
        let t = tenant.index();
        self.ledgers[t].arrived_bytes += u64::from(bytes);
        // A masked tenant waits for one of its own cores; otherwise one queue for
        // all (fifo) or one per tenant (weighted).
        let (q, core) = match &self.mask {
            Some(mask) => {
                let cores = &mask[t];
                let core = cores[sender as usize % cores.len()];
                (usize::from(core), core)
            }
            None => match self.sharing {
                CpuSharing::Fifo => (0, 0),
                CpuSharing::Weighted => (t, 0),
            },
        };
        if self.queues[q].len() >= self.room {
            self.ledgers[t].refused_bytes += u64::from(bytes);
            self.refused_packets[t] += 1;
            return false;
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
            sender,
            tenant,
            bytes,
            issued_ns,
            cost_ns,
            core,
            start_tag,
        });
        true
    }

    /// Puts the next waiting send on an idle core, if there are both.
    pub fn take(&mut self) -> Option<Waiting> {
        if self.idle_cores == 0 {
            return None;
        }
        let send = if self.mask.is_some() {
            let core = (0..self.queues.len())
                .find(|&c| !self.core_busy[c] && !self.queues[c].is_empty())?;
            self.core_busy[core] = true;
            self.queues[core].pop_front().expect("checked not empty")
        } else {
            self.take_shared()?
        };
        let t = send.tenant.index();
        self.idle_cores -= 1;
        self.busy_ns[t] += send.cost_ns;
        self.on_cores_bytes[t] += u64::from(send.bytes);
        Some(send)
    }

    /// The next send for any idle core, by `engine.cpu`.
    fn take_shared(&mut self) -> Option<Waiting> {
        Some(match self.sharing {
            CpuSharing::Fifo => self.queues[0].pop_front()?,
            CpuSharing::Weighted => {
                let (start, q) = self.heads.pop_first()?;
                let send = self.queues[q]
                    .pop_front()
                    .expect("a head names a non-empty queue");
                if let Some(next) = self.queues[q].front() {
                    self.heads.insert((next.start_tag, q));
                }
                self.virtual_time = start;
                send
            }
        })
    }

    /// Core `core` finished a send of `tenant`.
    pub fn processed(&mut self, tenant: TenantId, bytes: u32, core: u16) {
        let t = tenant.index();
        self.idle_cores += 1;
        if let Some(busy) = self.core_busy.get_mut(usize::from(core)) {
            *busy = false;
        }
        self.on_cores_bytes[t] -= u64::from(bytes);
        self.ledgers[t].processed_bytes += u64::from(bytes);
        if self.heads.is_empty() && self.idle_cores == self.cores {
            // Idle cores: every tenant starts afresh, as SFQ's virtual time jumps
            // to the largest finish tag when the server idles.
            self.virtual_time = self.last_finish.iter().copied().max().unwrap_or(0);
        }
    }

    /// The ledgers with what still waits or sits on a core counted as waiting.
    pub fn final_ledgers(&self) -> Vec<EngineLedger> {
        let mut ledgers = self.ledgers.clone();
        for queue in &self.queues {
            for send in queue {
                ledgers[send.tenant.index()].waiting_bytes += u64::from(send.bytes);
            }
        }
        for (ledger, &bytes) in ledgers.iter_mut().zip(&self.on_cores_bytes) {
            ledger.waiting_bytes += bytes;
        }
        ledgers
    }
}
