//! # `wheel`: Carousel / PicNIC shaping on one timing wheel
//!
//! Saeed et al., "Carousel: Scalable Traffic Shaping at End Hosts", SIGCOMM 2017, as
//! used by Kumar et al., "PicNIC: Predictable Virtualized NIC", SIGCOMM 2019, §5.4.1:
//! every rate limit a packet is under is consolidated into one timestamp, its
//! earliest departure time (EDT), and the packet waits in a single time-indexed queue
//! until then. Packet accounting (§5.4.2) caps what each tenant and the host may
//! hold, so a tenant flooding a throttled class cannot take buffer from another.
//!
//! ## The model
//!
//! Each limit (a split class's `split.max_rate`, an app's and a tenant's `max_rate`)
//! keeps a "next free time" t_x, as a token bucket of depth one packet would. A
//! packet of L bytes arriving at `now` under the limits X gets
//!
//! ```text
//! EDT = max(now, max_{x in X} t_x)        then, for each x in X:  t_x = max(t_x, now) + L / rate_x
//! ```
//!
//! so the slowest limit decides, and every limit is charged for every packet under
//! it whichever limit decided (nested caps give the lower one; siblings under a
//! common cap share it first come, first served). Traffic under no limit gets
//! EDT = now and leaves as soon as possible, in arrival order.
//!
//! Under PicNIC's feedback a packet is also under its VM-to-VM pair's limits: a
//! rate in bit/s (PCCB) and a packet rate (PCCP), the latter charged 1 / rate per
//! frame the packet leaves as (a TSO send is many), whatever their length: a
//! receiver's engine spends its CPU per frame.
//!
//! ## The wheel
//!
//! Packets are filed by EDT in a hierarchical [`timing::TimingWheel`] of ticks of
//! 2^`tick_shift` ns: O(1) insert, O(1) amortised extraction, an occupied bitmap per
//! level so nothing scans empty slots. Packets whose EDT has passed leave in EDT order,
//! FIFO within a tick. A limited packet's EDT is rounded *up* to its tick (a shaper
//! must never send early); a packet due now is rounded down so it is not held.
//! [`Enforcer::next_ready_ns`] is the earliest occupied slot's start.
//!
//! ## Fixed point and constants
//!
//! - t_x is a `u128` of ns in 96.32 fixed point (ns << 32), and rates
//!   are kept as their inverse, ns per byte in 32.32 ([`ns_per_byte_fx`]), so the
//!   hot path multiplies instead of divides and long-run rates carry no rounding
//!   drift (2^-32 ns per byte is 10^-10 relative at 100 Gbit/s).
//! - [`TICK_SHIFT_DEFAULT`] = 8: ticks of 256 ns, below one 1500-byte serialisation
//!   at 40 Gbit/s (300 ns), so packets of different limited classes are ordered to
//!   within less than one MTU time up to 40 Gbit/s. Finer ticks order more exactly
//!   but put far EDTs on higher levels, costing one more cascade per 6 bits of
//!   distance (a 50 Mbit/s class's 240 µs gap is ~2^10 ticks: one cascade); coarser
//!   ticks release several packets of a tick back to back.
//!
//! ## Invariants (asserted in debug builds)
//!
//! - A limit's next free time never goes back, and a packet charged to it starts no
//!   earlier than the previous packet's next free time nor than its arrival.
//! - A packet's EDT is not before its arrival, its slot is not before the arrival's
//!   tick, and a limited packet's slot is not before its EDT: no packet leaves early.
//! - Counts are conserved: every held packet waits on the wheel exactly once, and
//!   under PicNIC's feedback no more flows hold bytes than packets are held (a flow
//!   holding nothing has no entry).
//! - The wheel's horizon: every `u64` tick has a slot (a `const` assert on
//!   [`timing::LEVELS`]), so no departure time within `u64` ns is clamped. The
//!   horizons of PicNIC's feedback are where a packet is refused, not a bound on
//!   what is held.

pub mod timing;

use crate::classes::{ClassId, Classes};
use crate::slab::Slab;
use crate::{Accounting, Approximation, Enforcer, Frame, Packet, Refusal, TenantCounters};
use policy::{Policy, format_rate};
use std::collections::HashMap;
use timing::TimingWheel;

/// Default tick: 2^8 ns = 256 ns (see the module docs).
pub const TICK_SHIFT_DEFAULT: u32 = 8;
/// Under PicNIC's feedback, the most a limit holds, in bytes of its rate (the
/// wheel's horizon): four times what TCP small queues let one bulk sender have
/// queued, so that a sender pacing to its limit is not refused by it.
const HORIZON_BYTES: u128 = 4 * TSQ_BYTES;
/// The same horizon for a VM-to-VM packet-rate limit, in packets: as many MTU
/// frames as [`HORIZON_BYTES`] holds.
const HORIZON_PACKETS: u128 = HORIZON_BYTES / 1500;
/// What TCP small queues let one bulk sender have queued: two 64 KiB sends.
const TSQ_BYTES: u128 = 2 * 64 * 1024;
/// Fractional bits of next-free times and inverse rates.
const FRAC_BITS: u32 = 32;

/// Bounds and resolution of a wheel enforcer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Leaf classes, apps and split classes together.
    pub classes_max: usize,
    /// Packets held at once (the descriptor pool).
    pub packets_max: usize,
    /// Packets one app may hold ([`crate::Capacity::class_packets`]).
    pub class_packets: Option<u32>,
    /// A tick is 2^`tick_shift` ns.
    pub tick_shift: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            classes_max: 1 << 18,
            packets_max: 1 << 16,
            class_packets: None,
            tick_shift: TICK_SHIFT_DEFAULT,
        }
    }
}

/// ns per byte at `rate_bps`, in 32.32 fixed point; `None` for no limit.
pub fn ns_per_byte_fx(rate_bps: Option<u64>) -> Option<u64> {
    rate_bps.map(|r| {
        let fx = (8_000_000_000u128 << FRAC_BITS) / u128::from(r.max(1));
        fx.min(u128::from(u64::MAX)) as u64
    })
}

/// ns per packet at `packets_per_s`, in 32.32 fixed point; `None` for no limit.
pub fn ns_per_packet_fx(packets_per_s: Option<u64>) -> Option<u64> {
    packets_per_s.map(|r| {
        let fx = (1_000_000_000u128 << FRAC_BITS) / u128::from(r.max(1));
        fx.min(u128::from(u64::MAX)) as u64
    })
}

/// One limit's state: its next free time (ns << 32) and its cost per unit: a
/// byte for a rate in bit/s, a packet for a packet rate.
#[derive(Clone, Copy, Debug)]
struct Limit {
    free_fx: u128,
    ns_per_unit_fx: u64,
}

impl Limit {
    fn new(ns_per_unit_fx: u64) -> Self {
        Limit {
            free_fx: 0,
            ns_per_unit_fx,
        }
    }

    /// Charges `units` arriving at `now_fx`; returns when this limit allows the
    /// packet to leave.
    fn charge(&mut self, now_fx: u128, units: u32) -> u128 {
        charge(&mut self.free_fx, self.ns_per_unit_fx, now_fx, units)
    }

    /// The limit at a new cost per unit (`None`: lifted). The next free time
    /// carries over, so a new rate neither forgives what was sent nor holds back
    /// what the old rate allowed.
    fn reset(old: Option<Limit>, ns_per_unit_fx: Option<u64>) -> Option<Limit> {
        match (ns_per_unit_fx, old) {
            (None, _) => None,
            (Some(fx), Some(old)) => Some(Limit {
                free_fx: old.free_fx,
                ns_per_unit_fx: fx,
            }),
            (Some(fx), None) => Some(Limit::new(fx)),
        }
    }
}

/// Charges `len_bytes` arriving at `now_fx` to a limit of next free time `free_fx`
/// and cost `ns_per_byte_fx`; returns when the limit allows the packet to leave.
fn charge(free_fx: &mut u128, ns_per_byte_fx: u64, now_fx: u128, len_bytes: u32) -> u128 {
    let previous_fx = *free_fx;
    let start = previous_fx.max(now_fx);
    *free_fx = start + u128::from(len_bytes) * u128::from(ns_per_byte_fx);
    debug_assert!(
        start >= previous_fx && start >= now_fx,
        "a stamp is never before the previous one nor before now"
    );
    debug_assert!(
        *free_fx >= start,
        "a limit's next free time never goes back"
    );
    start
}

pub struct Wheel {
    classes: Classes,
    accounting: Accounting,
    slab: Slab,
    /// Each held packet by its slab slot, tagged with its leaf class so a departure
    /// can tell the class map which class to keep at hand for the sender's refill:
    /// without it, every enqueue at 1M classes missed in the split table (86% of
    /// `wheel`'s time). The tag sits in the link's record; kept in an array of its
    /// own, it was one more line to miss at each dequeue (28.0 against 26.6 ns a
    /// pair at 1M classes).
    wheel: TimingWheel,
    tick_shift: u32,
    /// Per split class (index = class id - apps), its next free time (ns << 32).
    /// Its cost per byte is its app's: the split classes of an app share
    /// `split.max_rate`, so each keeps 16 bytes rather than a 32-byte [`Limit`].
    split_free_fx: Vec<u128>,
    /// Per app, the cost per byte of each of its split classes.
    split_ns_per_byte_fx: Vec<Option<u64>>,
    app_limit: Vec<Option<Limit>>,
    tenant_limit: Vec<Option<Limit>>,
    /// VM-to-VM limits, index `destination * tenants + tenant`; grown only when a
    /// limit is set, never on the per-packet path.
    destination_limit: Vec<Option<Limit>>,
    /// VM-to-VM packet-rate limits (PCCP), indexed as `destination_limit`. A
    /// second limit per pair, charged one unit per packet, rather than a byte rate
    /// derived from a packet rate: the wheel folds both into the one departure
    /// time, so a pair sending small packets is held by its packet rate and one
    /// sending large packets by its byte rate, without guessing packet sizes.
    destination_packet_limit: Vec<Option<Limit>>,
    /// Bytes held per flow ([`Packet::flow`], a hash of its 5-tuple in the lab),
    /// counted once a VM-to-VM limit is set; a flow holding nothing has no
    /// entry, so there are never more entries than packets held.
    flow_held_bytes: HashMap<u32, u64>,
    /// The classes of the burst being enqueued, kept to reuse its buffer.
    burst_classes: Vec<Option<ClassId>>,
    apps: usize,
    mtu_bytes: u32,
}

impl Wheel {
    pub fn new(policy: &Policy, config: Config) -> Result<Self, String> {
        if config.tick_shift >= 40 {
            return Err(format!(
                "a tick of 2^{} ns is longer than any useful horizon",
                config.tick_shift
            ));
        }
        let classes = Classes::new(policy, config.classes_max);
        let apps = policy.apps.len();
        Ok(Wheel {
            split_free_fx: Vec::with_capacity(classes.capacity() - apps),
            classes,
            accounting: Accounting::new(
                policy,
                crate::class_packets_max(
                    config.packets_max,
                    config.class_packets,
                    policy.apps.len(),
                ),
            ),
            slab: Slab::with_capacity(config.packets_max),
            wheel: TimingWheel::new(config.packets_max),
            tick_shift: config.tick_shift,
            split_ns_per_byte_fx: policy
                .apps
                .iter()
                .map(|a| ns_per_byte_fx(a.split.map(|s| s.max_rate_bps)))
                .collect(),
            app_limit: policy
                .apps
                .iter()
                .map(|a| ns_per_byte_fx(a.max_rate_bps).map(Limit::new))
                .collect(),
            tenant_limit: policy
                .tenants
                .iter()
                .map(|t| ns_per_byte_fx(t.max_rate_bps).map(Limit::new))
                .collect(),
            destination_limit: Vec::new(),
            destination_packet_limit: Vec::new(),
            flow_held_bytes: HashMap::new(),
            burst_classes: Vec::new(),
            apps,
            mtu_bytes: policy.link.mtu_bytes.max(1),
        })
    }

    /// The packet's EDT in ns << 32, charging every limit it is under.
    fn edt_fx(&mut self, now_ns: u64, class: usize, packet: &Packet) -> u128 {
        let now_fx = u128::from(now_ns) << FRAC_BITS;
        let len = packet.len_bytes;
        let mut edt = now_fx;
        if class >= self.apps {
            let split = class - self.apps;
            // Classes are made at classification, before admission: a new class
            // whose first packet was refused has no next free time yet, nor has
            // any made after it until one of their packets is admitted.
            if split >= self.split_free_fx.len() {
                self.split_free_fx.resize(split + 1, 0);
            }
            let cost = self.split_ns_per_byte_fx[packet.app.index()]
                .expect("split classes exist only for apps with split");
            edt = edt.max(charge(&mut self.split_free_fx[split], cost, now_fx, len));
        }
        if let Some(limit) = &mut self.app_limit[packet.app.index()] {
            edt = edt.max(limit.charge(now_fx, len));
        }
        if let Some(limit) = &mut self.tenant_limit[packet.tenant.index()] {
            edt = edt.max(limit.charge(now_fx, len));
        }
        let pair = self.pair(packet);
        if let Some(Some(limit)) = self.destination_limit.get_mut(pair) {
            edt = edt.max(limit.charge(now_fx, len));
        }
        if let Some(Some(limit)) = self.destination_packet_limit.get_mut(pair) {
            edt = edt.max(limit.charge(now_fx, len.div_ceil(self.mtu_bytes)));
        }
        debug_assert!(edt >= now_fx, "a packet's EDT is not before its arrival");
        edt
    }

    /// Whether every held packet waits on the wheel exactly once, and no more flows
    /// hold bytes than packets are held.
    fn counts_agree(&self) -> bool {
        self.wheel.len() == self.slab.len() && self.flow_held_bytes.len() <= self.slab.len()
    }

    /// Whether `packet` is beyond a horizon: its VM-to-VM limit already holds
    /// [`HORIZON_BYTES`] of its rate, or its VM's `max_rate` [`TSQ_BYTES`], and
    /// its own flow holds more than one sender's small queue. Carousel refuses a
    /// packet whose timestamp lies beyond the wheel's horizon. Without one, a
    /// pair throttled by its receiver filled the class's room with packets due
    /// far ahead, so the same VM's flows to other receivers were refused behind
    /// them; and a VM whose pairs' limits added up to more than its `max_rate`
    /// (a flow growing into its share) pushed that limit's next free time ever
    /// later, so a TCP-like flow of the VM waited behind its neighbour's flood,
    /// at two sends per wait. Only a flow holding more than [`TSQ_BYTES`] is
    /// refused: the flood, not the TCP-like flow that paces itself beside it,
    /// in the same pair or not, and would halve its window at each refusal.
    /// The horizons hold under PicNIC's feedback only (once a VM-to-VM limit is
    /// set): the one-host `wheel` keeps its packets until accounting refuses them.
    fn beyond_horizon(&self, now_ns: u64, packet: &Packet) -> bool {
        if !self.under_feedback() {
            return false;
        }
        let now_fx = u128::from(now_ns) << FRAC_BITS;
        let holds_more_than = |limit: &Limit, units: u128| {
            limit.free_fx > now_fx + units * u128::from(limit.ns_per_unit_fx)
        };
        let held = self.flow_held_bytes.get(&packet.flow).copied().unwrap_or(0);
        let pair = |limits: &[Option<Limit>], units: u128| {
            limits
                .get(self.pair(packet))
                .and_then(Option::as_ref)
                .is_some_and(|p| holds_more_than(p, units))
        };
        u128::from(held) > TSQ_BYTES
            && (pair(&self.destination_limit, HORIZON_BYTES)
                || pair(&self.destination_packet_limit, HORIZON_PACKETS)
                || self.tenant_limit[packet.tenant.index()]
                    .as_ref()
                    .is_some_and(|t| holds_more_than(t, TSQ_BYTES)))
    }

    /// Whether a VM-to-VM limit of either kind was ever set: PicNIC's feedback runs.
    fn under_feedback(&self) -> bool {
        !self.destination_limit.is_empty() || !self.destination_packet_limit.is_empty()
    }

    /// The index of `packet`'s VM-to-VM pair in `destination_limit`.
    fn pair(&self, packet: &Packet) -> usize {
        packet.destination as usize * self.tenant_limit.len() + packet.tenant.index()
    }

    fn refuse(&mut self, packet: Packet) -> Result<(), (Packet, Refusal)> {
        self.accounting.refuse(packet.tenant, packet.len_bytes);
        Err((packet, Refusal::QueueFull))
    }

    /// [`Enforcer::enqueue`] of a packet whose class a burst lookup found
    /// (`None`: not found, so classified here, in order, as a new key is).
    fn admit(
        &mut self,
        now_ns: u64,
        packet: Packet,
        found: Option<ClassId>,
    ) -> Result<(), (Packet, Refusal)> {
        debug_assert!(
            self.counts_agree(),
            "every held packet waits on the wheel once"
        );
        let Some(ClassId(class)) = found.or_else(|| self.classes.classify(&packet)) else {
            return self.refuse(packet);
        };
        if self.slab.is_full() || self.beyond_horizon(now_ns, &packet) {
            return self.refuse(packet);
        }
        if let Err(reason) = self.accounting.admit(&packet) {
            return Err((packet, reason));
        }
        let edt_fx = self.edt_fx(now_ns, class as usize, &packet);
        let tick = if edt_fx >> FRAC_BITS <= u128::from(now_ns) {
            now_ns >> self.tick_shift
        } else {
            let edt_ns = edt_fx.div_ceil(1 << FRAC_BITS);
            let tick = edt_ns.div_ceil(1 << self.tick_shift);
            tick.min(u128::from(u64::MAX)) as u64
        };
        debug_assert!(
            tick >= now_ns >> self.tick_shift,
            "a packet's slot is not before now"
        );
        debug_assert!(
            edt_fx >> FRAC_BITS <= u128::from(now_ns)
                || tick == u64::MAX
                || u128::from(tick) << self.tick_shift << FRAC_BITS >= edt_fx,
            "a limited packet's slot is not before its EDT"
        );
        if self.under_feedback() {
            *self.flow_held_bytes.entry(packet.flow).or_insert(0) += u64::from(packet.len_bytes);
        }
        let index = self.slab.insert(packet).expect("checked not full");
        self.wheel.insert(index, tick, class);
        debug_assert!(
            self.counts_agree(),
            "every held packet waits on the wheel once"
        );
        Ok(())
    }
}

impl Enforcer for Wheel {
    fn enqueue(&mut self, now_ns: u64, packet: Packet) -> Result<(), (Packet, Refusal)> {
        self.admit(now_ns, packet, None)
    }

    /// The burst's classes are looked up together ([`Classes::lookup_burst`]) and
    /// the next free times of those found touched together, so that their cache
    /// misses overlap; then each packet is admitted in order as `enqueue` would.
    fn enqueue_burst(&mut self, now_ns: u64, packets: &[Packet]) -> Result<(), (usize, Refusal)> {
        let mut found = std::mem::take(&mut self.burst_classes);
        self.classes.lookup_burst(packets, &mut found);
        let mut touched = 0u128;
        for class in found.iter().flatten() {
            if let Some(free_fx) = class
                .index()
                .checked_sub(self.apps)
                .and_then(|split| self.split_free_fx.get(split))
            {
                touched ^= free_fx;
            }
        }
        // Only warms the cache; kept so that the loads are not optimised away.
        std::hint::black_box(touched);
        let admitted =
            packets
                .iter()
                .zip(&found)
                .enumerate()
                .try_for_each(|(i, (&packet, &class))| {
                    self.admit(now_ns, packet, class)
                        .map_err(|(_, why)| (i, why))
                });
        self.burst_classes = found;
        admitted
    }

    fn dequeue(&mut self, now_ns: u64) -> Option<Frame> {
        debug_assert!(
            self.counts_agree(),
            "every held packet waits on the wheel once"
        );
        let (index, tick) = self.wheel.pop_expired(now_ns >> self.tick_shift)?;
        debug_assert!(
            tick <= now_ns >> self.tick_shift,
            "a packet never leaves before its slot"
        );
        let packet = self.slab.remove(index);
        if let Some(held) = self.flow_held_bytes.get_mut(&packet.flow) {
            // A packet admitted before the first VM-to-VM limit was not counted.
            *held = held.saturating_sub(u64::from(packet.len_bytes));
            if *held == 0 {
                self.flow_held_bytes.remove(&packet.flow);
            }
        }
        self.classes
            .departed(&packet, ClassId(self.wheel.tag(index)));
        self.accounting.release(&packet);
        debug_assert!(
            self.counts_agree(),
            "every held packet waits on the wheel once"
        );
        Some(Frame::whole(packet))
    }

    fn next_ready_ns(&self, now_ns: u64) -> Option<u64> {
        let tick = self.wheel.next_tick()?;
        Some(
            tick.checked_shl(self.tick_shift)
                .filter(|&at| at >> self.tick_shift == tick)
                .unwrap_or(u64::MAX)
                .max(now_ns),
        )
    }

    fn backlog_packets(&self) -> usize {
        self.wheel.len()
    }

    fn counters(&self) -> &[TenantCounters] {
        self.accounting.counters()
    }

    fn classes(&self) -> Option<usize> {
        Some(self.classes.len())
    }

    fn set_destination_limit(
        &mut self,
        tenant: policy::TenantId,
        destination: u32,
        rate_bps: Option<u64>,
    ) -> bool {
        let pair = destination as usize * self.tenant_limit.len() + tenant.index();
        if pair >= self.destination_limit.len() {
            self.destination_limit.resize(pair + 1, None);
        }
        let slot = &mut self.destination_limit[pair];
        *slot = Limit::reset(*slot, ns_per_byte_fx(rate_bps));
        true
    }

    fn set_destination_packet_limit(
        &mut self,
        tenant: policy::TenantId,
        destination: u32,
        packets_per_s: Option<u64>,
    ) -> bool {
        let pair = destination as usize * self.tenant_limit.len() + tenant.index();
        if pair >= self.destination_packet_limit.len() {
            self.destination_packet_limit.resize(pair + 1, None);
        }
        let slot = &mut self.destination_packet_limit[pair];
        *slot = Limit::reset(*slot, ns_per_packet_fx(packets_per_s));
        true
    }
}

pub fn build(policy: &Policy, capacity: crate::Capacity) -> Result<Box<dyn Enforcer>, String> {
    let config = Config {
        classes_max: capacity.classes,
        packets_max: capacity.packets,
        class_packets: capacity.class_packets,
        ..Config::default()
    };
    Ok(Box::new(Wheel::new(policy, config)?))
}

/// What `approximation` says, in numbers: caps only, as weights are not enforced.
pub fn bounds(_policy: &Policy) -> Vec<crate::Bound> {
    [crate::Subject::Tenant, crate::Subject::App]
        .into_iter()
        .map(|subject| crate::Bound::over_cap(subject, 0))
        .collect()
}

/// What `check` says for `wheel`.
pub fn approximation(policy: &Policy) -> Approximation {
    let mut out = Approximation::default();
    let capped = policy.tenants.iter().any(|t| t.max_rate_bps.is_some())
        || policy
            .apps
            .iter()
            .any(|a| a.max_rate_bps.is_some() || a.split.is_some());
    if capped {
        // Carousel stamps a packet when it arrives, from the previous stamp, not
        // from when the previous packet left.
        out.approximate.push("caps over a short window: a packet waits for its departure time and then for the link, so a class the busy link kept late catches up what it fell behind, above its cap for a while (a tenant capped at 14 Mbit/s sent 19.2 in 200 ms after a busy second); over the run it stays within a packet of its cap".into());
    }
    let rate = |bps: u64| format_rate(bps as f64);
    let tick_ns = 1u64 << TICK_SHIFT_DEFAULT;
    for t in &policy.tenants {
        if let Some(max) = t.max_rate_bps {
            out.exact.push(format!(
                "{}: max_rate {} (every packet of the tenant charged to one next-free time, so from when it starts sending it is never more than one packet above its cap: never early, a packet's departure time rounded up to a {tick_ns} ns tick)",
                t.name,
                rate(max)
            ));
        }
        if let Some(min) = t.min_rate_bps {
            out.ignored.push(format!(
                "{}: min_rate {} (a timing wheel only delays; no guarantees)",
                t.name,
                rate(min)
            ));
        }
    }
    for a in &policy.apps {
        let tenant = &policy.tenant(a.tenant).name;
        if let Some(max) = a.max_rate_bps {
            out.exact.push(format!(
                "{tenant}/{}: max_rate {} (consolidated into the packet's departure time with the tenant's)",
                a.name,
                rate(max)
            ));
        }
        if let Some(split) = a.split {
            out.exact.push(format!(
                "{tenant}/{}: split, each key limited to {}",
                a.name,
                rate(split.max_rate_bps)
            ));
        }
        if let Some(min) = a.min_rate_bps {
            out.ignored.push(format!(
                "{tenant}/{}: min_rate {} (no guarantees)",
                a.name,
                rate(min)
            ));
        }
    }
    out.approximate.push(
        "siblings under a common cap share it first come, first served (by arrival), not by weight"
            .into(),
    );
    out.ignored.push(
        "weights and priorities of tenants and apps: below its limits, traffic leaves in arrival order, so a saturated link is shared by what each class keeps queued, not by the policy; a class's limit counts packets, so a sender of small packets beside TSO sends gets less than it offers, and can get less than its cap (`wheel` in the lab: 400 Mbit/s of 1400-byte udp capped at 150 got 66 beside two TCP tenants)".into(),
    );
    out.exact.push(format!(
        "buffer caps (packet accounting at admission{})",
        if policy.buffer_bytes.is_some() || policy.tenants.iter().any(|t| t.buffer_bytes.is_some())
        {
            ""
        } else {
            "; this policy sets none, so only the descriptor pool bounds a tenant"
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{AppId, TenantId};

    fn one_tenant() -> Wheel {
        let policy = policy::parse_policy(
            "link: { rate: 10Gbit }\ntenants:\n  - { name: a }\n",
            "p.yaml",
        )
        .unwrap();
        Wheel::new(&policy, Config::default()).unwrap()
    }

    fn packet(handle: u64) -> Packet {
        Packet {
            len_bytes: 64,
            tenant: TenantId(0),
            app: AppId(0),
            flow: 1,
            destination: 3,
            core: 0,
            arrival_ns: 0,
            handle,
        }
    }

    #[test]
    fn a_packet_rate_limit_spaces_a_pairs_packets_whatever_their_length() {
        let mut wheel = one_tenant();
        assert!(wheel.set_destination_packet_limit(TenantId(0), 3, Some(100_000)));
        for handle in 0..3 {
            wheel.enqueue(0, packet(handle)).unwrap();
        }
        // 100 kpps: one packet each 10 µs, however few bytes they carry.
        let mut left = Vec::new();
        for now in (0..=30_000).step_by(256) {
            while wheel.dequeue(now).is_some() {
                left.push(now / 10_000);
            }
        }
        assert_eq!(left, vec![0, 1, 2]);
        // Lifted: the next packet leaves at once.
        wheel.set_destination_packet_limit(TenantId(0), 3, None);
        wheel.enqueue(40_000, packet(9)).unwrap();
        assert_eq!(wheel.dequeue(40_000).map(|f| f.packet.handle), Some(9));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "every held packet waits on the wheel once")]
    fn a_packet_filed_twice_trips_the_count() {
        let mut wheel = one_tenant();
        wheel.enqueue(0, packet(0)).unwrap();
        wheel.wheel.insert(0, 0, 0);
        wheel.dequeue(0);
    }
}
