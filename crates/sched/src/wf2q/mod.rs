//! # `wf2q`: SENIC's rate-limited WF2Q+
//!
//! Radhakrishnan et al., "SENIC: Scalable NIC for End-Host Rate Limiting", NSDI 2014,
//! §3.2 (the unified scheduler) and §3.3 (the two-level hierarchy), built on
//! Bennett and Zhang's WF2Q+ (the paper's reference 6). Names follow the paper: S and F are
//! a class's start and finish tags, V the system virtual time, w_i a class's rate,
//! R the link's drain rate.
//!
//! ## The model
//!
//! Every leaf class (an app, or one split class of an app created on demand by
//! [`Classes`]) is a FIFO of packets; only its head packet carries tags:
//!
//! ```text
//! S_i = max(F_i, V)       when the class becomes backlogged
//! S_i = max(F_i, V - C)   after each dequeue          (C: LEVEL_CREDIT_BYTES at w_i)
//! F_i = S_i + L / w_i                                 (L: head packet's length)
//! ```
//!
//! WF2Q+ has S_i = F_i after a dequeue; the credit C keeps a class that fell
//! behind V (a cap or a more urgent band held it) within C of it, so it does not
//! come back with an unbounded claim. A class that its band's last packet emptied
//! and that gets a packet before the band sends again is tagged as after a
//! dequeue, as if it had not emptied: no packet was chosen while it lacked one. A
//! bulk TCP sender empties its class that way at each of its sends (TCP small
//! queues let it keep two, and it posts the next when a send's completion comes
//! back, 20 us after the send left the wire); tagged from V there, a tenant of
//! weight 11 beside four of weight 1 got 728.6 of its 733.3 Mbit/s, each of the
//! others 67.8 of 66.7.
//!
//! A class is eligible when S_i <= V; among eligible classes the smallest F_i goes
//! first. V is WF2Q+'s: it advances by the bytes sent (in byte-times at R), and when
//! no class is eligible it moves up to the smallest start tag, `V = max(V + W, min S)`.
//! So the scheduler is work conserving: the link idles only while every class that
//! holds packets waits for a cap (below).
//!
//! ## Rates: the ideal's sharing of the classes that hold packets
//!
//! SENIC computes tags for leaves only, a leaf's w_i its configured rate scaled to
//! its parent's current rate (§3.3). Here w_i is what policy.md's ideal gives the
//! class with every class that holds packets backlogged, level by level (link →
//! tenant → app → split class): at each node the children of one priority share
//! the node's rate by water-filling ([`fill`]), each child min(c_i, λ·w_i) where
//! c_i is its `max_rate` and what its backlogged classes can take, the rest by
//! weight. SENIC instead gave a capped class its cap as its rate, so a tenant capped
//! at 500 Mbit/s beside four uncapped ones of the same weight took 385 of 1000
//! Mbit/s (issue 25); its fallback for caps that oversubscribe the link (shares in
//! the ratio of the caps) is replaced by the same water-filling. Split classes share
//! their app's rate equally.
//!
//! Only the ratios of the rates in one band matter to WF2Q+ with V as above (what
//! some classes leave goes to the others in proportion), so at the link a tenant's
//! tags run at a rate fixed when the enforcer is built: its share with every
//! tenant of its band and every app backlogged, over that fill's λ, times R/W (W
//! the band's weights). That is w_t·R/W for a tenant below its limit then, and
//! c_t·R/(λ·W) for one at it (c_t its `max_rate`, or what its apps' caps add up
//! to), so caps that fit the link keep SENIC's rates in the ratio of the caps. It
//! does not change when another tenant comes or goes: λ only falls as tenants
//! come, so a tenant at its limit then is at it whenever it holds packets, and
//! its tags give it at least its limit, which its cap tags (below) hold. With
//! absolute rates, a tenant's TSO send tagged while a Poisson tenant held a packet
//! was costed at the lower rate of that moment, and one of four bulk tenants got
//! 226 of its 237 Mbit/s; with c_t over the λ of the moment, a tenant of weight 91
//! capped at 328 Mbit/s, tagged while only a weight-1 tenant was backlogged beside
//! it (λ = 672 Mbit/s), carried a tag of 0.58 Mbit/s for 0.44 s once a weight-748
//! tenant came and got 97.5 of its 108.3 Mbit/s over 4 s. Inside a tenant
//! the rates stay absolute, since an app's share of its tenant must shrink when a
//! sibling comes. The fills are kept incrementally when a class becomes
//! backlogged or empty (O(log n) per change, n the node's children); w_i is computed
//! when a tag is, cached per app until the backlogged set changes, so a tag costs a
//! multiply.
//!
//! ## Caps: real-time ceilings
//!
//! Since V runs ahead of real time whenever classes leave capacity unused, a cap
//! cannot be a rate in V (SENIC's V ran in real time, slowed when the limits
//! oversubscribed the link, and so idled the link whenever a class held a packet
//! but sent below its rate: 77% utilization with a tenant backlogged, issue 25).
//! Every class under a cap (its app's, its tenant's, its split class's) has a
//! second start tag in real time T (nanoseconds scaled to byte-times at R):
//!
//! ```text
//! T_i = max(T_i, T - C_cap) + L / c_i       after each of its packets
//! ```
//!
//! where c_i is its ceiling: its app's share of its tenant's `max_rate` among the
//! tenant's backlogged apps of its priority (the same water-filling with the cap as
//! the capacity), or its app's own limit, split equally among split classes. A class
//! whose T_i is ahead of real time is *parked* on a real-time wheel until it is
//! due, and the other classes are served meanwhile. C_cap ([`CAP_CREDIT_BYTES`] of
//! link time) keeps the time a class lost waiting for other classes' packets (up
//! to eight TSO sends), so a cap is met over the run; over any window a class sends
//! at most one packet and c_i·C_cap/R above c_i, and a class kept waiting longer
//! (behind a more urgent band, say) loses the excess. [`Enforcer::next_ready_ns`] is the instant the
//! first parked class is due.
//!
//! ## Tenant priorities: a band each
//!
//! Tenants of one priority form a *band* with its own V and wheels; a dequeue takes
//! the first band, most urgent first, that has a class to send. Each band's tenants
//! share the link as if the band were alone, and its V advances only by what the
//! band sends, so a more urgent band's bytes come out of the less urgent band as a
//! whole and its weights stay as they are. (Priority as a weight factor of 16, what
//! `wf2q` did first, gave a weight-3 tenant 118 of its 354 Mbit/s beside a
//! priority-0 Poisson tenant: its tags were costed at the rate it had while a
//! Poisson packet waited.) A class's S is kept within [`LEVEL_CREDIT_BYTES`] of its
//! own rate of V, so a class that a cap parked does not come back with an unbounded
//! claim on its band.
//!
//! ## App priorities: strict levels inside a tenant
//!
//! SENIC has no priorities; this is nicsched's extension. The policy's app priorities
//! are strict within a tenant (a level gets nothing until the levels before it are
//! satisfied), and a tenant's share must not depend on how its demand is spread over
//! its levels. Turning priorities into weights (×16 per level, what `wf2q` did first)
//! failed the second: while a priority-0 probe was backlogged, its priority-1 bulk
//! sibling's w_i fell to 1/17 of the tenant's, a 64 KiB send tagged then kept
//! F = S + L/w_i long after the probe's one small packet had left, and the tenant lost
//! a quarter of its share (TONIC's `prio-sockperf`: 3.65 of 5 Gbit/s). So in a tenant
//! whose apps have more than one priority, each priority is a *level*:
//!
//! - A class's w_i is what its level alone would get of the tenant's rate P (a fill
//!   per level): it does not change when a more urgent app comes and goes, and a
//!   level alone takes the whole tenant.
//! - The tenant keeps a start tag S_k for each level below its most urgent one,
//!   advanced at P by every packet of level k and of the more urgent levels:
//!
//!   ```text
//!   S_k = max(S_k, V - C) + L / P        C: LEVEL_CREDIT_BYTES at P
//!   ```
//!
//!   A class of level k is not served before V reaches S_k: it is tagged from no
//!   earlier than S_k, and one taken as eligible after a more urgent packet moved S_k
//!   past V is tagged again from S_k and filed as ineligible. This is H-WF2Q+'s
//!   tenant tag used as a bound: the tenant's service at levels <= k stays within
//!   its share of its band plus C and one packet, so a more urgent app's bytes come
//!   out of the less urgent levels' part. A capped tenant keeps the same tags in real
//!   time at its `max_rate` (each level's ceiling is its share of the cap as if
//!   alone), so its levels together stay within the cap.
//! - A capped tenant also keeps one real-time tag over all its apps, advanced at
//!   its `max_rate` by each of their packets (from no earlier than a credit of
//!   `CAP_CREDIT_BYTES` before now); none of its classes sends before it. The
//!   ceilings above share the cap among the apps that hold packets, which an app
//!   holding one only now and then does not count in.
//! - Eligible classes of a level above its tenant's least urgent one wait on their
//!   band's urgent wheel, served before the band's other eligible classes: a
//!   prioritised packet leaves at the next dequeue once eligible, ahead of other
//!   tenants' overdue classes of the band too. No tenant loses rate to this, since a
//!   prioritised class is eligible only within its own w_i <= P, but another
//!   tenant's packet may wait one prioritised packet per eligible prioritised class.
//!   With three or more levels the middle ones are strict in throughput (S_k), and
//!   go in F order with the most urgent one.
//!
//! Why not the alternatives: a true two-level H-WF2Q+ (tenants filed by their own
//! tags, apps picked inside) would need per-tenant wheels for app limits and split
//! classes and would pace a tenant's capped apps at the tenant's rate, changing
//! SENIC's Fig. 4 schedule with app limits in one tenant; recomputing a class's F when
//! its rate changes would touch every backlogged sibling (split classes included) on
//! each backlog change and needs removal from the wheels. A cap as one real-time tag
//! per tenant rather than a ceiling per class would park and release every class of
//! the tenant at each of its packets. The level tags cost O(levels of the tenant)
//! per packet of a multi-level tenant and nothing elsewhere.
//!
//! ## Fixed point and constants
//!
//! - V, S, F and T are `u64` in units of 2^-[`V_FRAC_BITS`] byte-times at R (12 bits:
//!   a 64-byte packet's tag increment keeps 18 significant bits at any rate ratio).
//!   V starts at 0 when the enforcer is built and lasts 2^52 bytes of link time,
//!   about 100 hours at 100 Gbit/s (1000 at 10 Gbit/s), longer than any run; the
//!   timing wheels below need absolute ticks, which is why V does not wrap.
//! - A tag increment is capped at [`COST_V_MAX`] (2^50 units = 2^38 bytes at R): a
//!   class slower than R/2^22 (2.4 kbit/s on 10 Gbit/s) is served at that rate, so
//!   no single packet can push a tag past V's lifetime.
//! - The link's speed is kept as V units per ns in 32.32 fixed point, and T is
//!   computed from the clock, so rounding never accumulates over packets.
//!
//! ## Data structures and cost
//!
//! Backlogged classes wait in one of the hierarchical timing wheels ([`Buckets`]:
//! the `wheel` enforcer's levels and order, FFS bitmaps, a bucket whose classes
//! share one tick moved down as one list), per band: *ineligible* filed
//! by S rounded up to a byte-time (so no class is eligible before S <= V, and none
//! later than one byte-time after), *eligible* filed by F in ticks of 2^6
//! byte-times ([`F_TICK_BITS`]), *urgent* likewise for prioritised apps; and one
//! *parked* wheel of capped classes filed by their real-time tag, in byte-time
//! ticks, so no class goes before its cap allows and none later than a byte-time
//! after (SENIC's Fig. 4 schedule stays exact). A class is parked when it would
//! be filed as eligible, not when it is taken, so the eligible wheel's order is
//! kept. A dequeue releases the parked classes that are due, pops the band's
//! ineligible wheel up to V into the eligible one and takes the first item: the
//! smallest F to within one F tick, ties FIFO. That grouping (QFQ's, with a fixed
//! slot size) lets a class whose F is up to 64 byte-times of V larger go first:
//! each class's service lag grows by at most that one tick over WF2Q+'s bound,
//! less than a minimum-size packet at R, and in exchange an item cascades one
//! level fewer. F does not come in order: a class whose F lies below the last one
//! served waits in a heap in front of the wheel ([`Ordered`]), by F, O(log n) for
//! such classes only. (Filed at the wheel's current tick, behind the classes there,
//! it made a weight-10 tenant beside ten of weight 1 wait behind nine of them each
//! round: 411.6 of its 500 Mbit/s.) The rest
//! are O(1) per packet plus at most 10 cascades per item, except that ineligible
//! classes filed in order of S (each S at least the last so filed, as S = F of
//! classes served by F mostly is) wait on a plain list in front of the wheel
//! ([`Sorted`]), in the same order and with no cascade; a binary heap keyed by F
//! was measured first and spent half its time popping when classes of equal rates
//! became eligible together (50 k at a time at 100 k classes).
//!
//! Per class: one 32-byte record (F, its real-time cap tag, the wheel link, app,
//! FIFO head and tail), aligned so a packet touches one cache line of it, within
//! SENIC's budget of ~40 B per limiter. S is kept only while a class waits for V,
//! beside its head packet's descriptor; the wheels keep their links in the record
//! ([`Links`]), one link for all of them since a class waits on one wheel at a
//! time, and derive the tick a class is filed at from the tag they order by, so
//! none is stored. Beside it, the class map's entry ([`Classes`]). Packets sit in
//! a preallocated descriptor pool (`slab`). (F is computed when a class is tagged,
//! after each of its packets: computed instead when it became eligible, at the
//! rate of that moment, a bulk app beside an intermittent UDP app of its tenant
//! got 3.2 of its 4.5 Gbit/s, since V passes S at a dequeue, and a dequeue often
//! follows an arrival of the UDP app.)
//!
//! What this holds, stated by [`approximation`]: caps in real time as above; with
//! the classes that hold packets steady, each class within WF2Q+'s one packet of
//! the ideal's bytes at every instant. Rates follow which classes hold packets, not
//! their demand: while a class that sends below its share holds a packet it counts
//! at its share, and the capacity it leaves goes to the classes of its band in
//! proportion to their rates (through V), not first to its own tenant's. Guarantees
//! are not expressed.
//!
//! ## Invariants (asserted in debug builds)
//!
//! Each is asserted where it must hold, before and after the operation that could
//! break it, so the property tests and the simulator's debug builds check it at
//! every packet:
//!
//! - S = max(F, V, S_k) when a class becomes backlogged, unless its band's last
//!   packet emptied it and the band has not sent since; then, and after each of
//!   its packets, S = max(F, S_k, V − C) >= F (S_k its tenant's start tag of its level,
//!   C its credit of [`LEVEL_CREDIT_BYTES`]).
//! - F = S + L/w_i: 1 <= F − S <= [`COST_V_MAX`], rounded up, so that no class
//!   exceeds its rate.
//! - V is monotone: each packet moves its band's V on by its length, and V moves up
//!   to the smallest S only forward. V and every tag stay at most [`TAG_MAX`], one
//!   increment below 2^64 (V's 2^52 bytes of link time), so no increment wraps.
//! - Eligible when S <= V: a class leaves the ineligible wheel only once V has
//!   reached its S, and a class of a less urgent level is served only once V has
//!   reached its tenant's S_k.
//! - Caps: a parked class is released only once real time has reached its cap tag,
//!   a capped class sends only when none of its caps' tags is ahead of real time,
//!   and each of its packets moves its cap tag on; a tenant's level start tags only
//!   move on.
//! - Counts: every class that holds packets waits on exactly one wheel. An enqueue
//!   files one class more (the class's first packet) or none, a dequeue one class
//!   fewer (its last) or none; no more classes are filed than packets held, and
//!   none exactly when no packet is.
//! - Fills ([`fill`]): each backlogged child is on one side, and the children at
//!   their limit take no more than the node's capacity.

mod buckets;
pub(crate) mod fill;

use crate::classes::{ClassId, Classes};
use crate::slab::{self, List, NIL, Slab};
use crate::wheel::timing::Links;
use crate::{Accounting, Approximation, Enforcer, Frame, Packet, Refusal, TenantCounters};
use buckets::{Buckets, Ordered, Sorted};
use fill::{Demand, Fill};
use policy::{Policy, format_rate, format_size};

/// Fractional bits of V, S and F below one byte-time (see the module docs).
pub const V_FRAC_BITS: u32 = 12;
/// The eligible wheel's tick is 2^6 byte-times (see the module docs): coarser than
/// the ineligible wheel's, whose byte-time ticks keep eligibility exact.
pub const F_TICK_BITS: u32 = V_FRAC_BITS + 6;
/// Largest tag increment of one packet, in V units (see the module docs).
pub const COST_V_MAX: u64 = 1 << 50;
/// Fractional bits of the link's speed (V units per ns).
const SPEED_FRAC_BITS: u32 = 32;
/// How far behind V a class's start tag, or a tenant's start tag of a less urgent
/// app priority level, may lag, in bytes of its own rate (module docs): two TSO
/// sends, more than the one packet WF2Q+ lets a class fall behind.
pub const LEVEL_CREDIT_BYTES: u64 = 128 * 1024;
/// How far behind real time a cap's start tag may lag, in byte-times of the link
/// (module docs): a class taken late keeps that time, up to eight TSO sends of
/// other classes that went before it (measured: a 130 Mbit/s cap of 228-byte
/// datagrams beside three capped TSO senders waited three sends, and with one send
/// of credit lost 0.9% of its cap).
pub const CAP_CREDIT_BYTES: u64 = 512 * 1024;
/// The relative error of a tenant's share over a run with every tenant backlogged
/// that `check` states (module docs: what it rests on).
pub const SHARE_ERROR_MAX: f64 = 0.01;
/// The largest V or tag: one increment ([`COST_V_MAX`]) below 2^64, so that adding
/// one never wraps (module docs: invariants).
pub const TAG_MAX: u64 = u64::MAX - COST_V_MAX;

const _: () = assert!(
    COST_V_MAX < 1 << 52,
    "one packet stays far within V's range"
);
const _: () = assert!(V_FRAC_BITS + 8 + SPEED_FRAC_BITS < 64);

/// Bounds of the preallocated state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Leaf classes, apps and split classes together.
    pub classes_max: usize,
    /// Packets held at once (the descriptor pool).
    pub packets_max: usize,
    /// Packets one app may hold ([`crate::Capacity::class_packets`]).
    pub class_packets: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            classes_max: 1 << 18,
            packets_max: 1 << 16,
            class_packets: None,
        }
    }
}

/// A leaf class's state, all that a packet of it touches in one 32-byte record
/// (one cache line): its tags, the FIFO, and the link of whichever wheel holds the
/// class (it waits on one at a time).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct ClassState {
    /// F.
    finish_v: u64,
    /// The real time its caps next allow a packet at (module docs), for a class
    /// under a cap.
    cap_t: u64,
    /// The next class in the same wheel slot.
    next: u32,
    /// Its app's index: `policy::limits::APPS_MAX` apps fit 16 bits.
    app: u16,
    /// Packets a split class holds, for its app's dynamic thresholds
    /// ([`crate::accounting`]); 0 for an app's own class.
    packets: u16,
    fifo: List,
}

const _: () = assert!(std::mem::size_of::<ClassState>() == 32);

/// The class records as one kind of wheel sees them: each wheel derives the tick a
/// class is filed at from the tag it orders by, so no record keeps a tick. That is
/// sound because a class waits on one wheel at a time and its tag does not change
/// while it waits, and because a wheel moves only items filed above its current
/// tick (`Buckets` files a tick already passed at the current one, on its lowest
/// level, which it never cascades).
macro_rules! wheel_view {
    ($(#[$doc:meta])* $name:ident { $($extra:ident: $ty:ty),* }, |$view:ident, $state:ident| $tick:expr) => {
        $(#[$doc])*
        struct $name<'a> {
            class: &'a mut [ClassState],
            $($extra: $ty),*
        }

        impl Links for $name<'_> {
            #[inline]
            fn next(&self, item: u32) -> u32 {
                self.class[item as usize].next
            }
            #[inline]
            fn set_next(&mut self, item: u32, next: u32) {
                self.class[item as usize].next = next;
            }
            #[inline]
            fn tick(&self, item: u32) -> u64 {
                let $view = self;
                let $state = &self.class[item as usize];
                $tick
            }
            #[inline]
            fn set_tick(&mut self, _item: u32, _tick: u64) {}
        }
    };
}

wheel_view!(
    /// Eligible and urgent wheels: F, in ticks of 2^[`F_TICK_BITS`].
    ByFinish {},
    |_view, state| state.finish_v >> F_TICK_BITS
);
wheel_view!(
    /// Ineligible wheels: S of the class's head packet, rounded up to a byte-time
    /// so that no class becomes eligible before S <= V.
    ByStart { head_start_v: &'a [u64] },
    |view, state| view.head_start_v[state.fifo.head as usize].div_ceil(1 << V_FRAC_BITS)
);
wheel_view!(
    /// The parked wheel: the cap's real-time tag, rounded up to a byte-time so that
    /// no class goes before its cap allows.
    ByCap {},
    |_view, state| state.cap_t.div_ceil(1 << V_FRAC_BITS)
);

/// The tenants of one priority: their virtual time and their classes' wheels.
struct Band {
    /// V: the bytes this band has sent, in V units, moved up to the smallest start
    /// tag when none of its classes is eligible (WF2Q+'s V = max(V + W, min S)).
    v: u64,
    /// Eligible classes, filed by F in ticks of 2^[`F_TICK_BITS`].
    eligible: Ordered,
    /// Eligible classes of prioritised apps, served before `eligible`.
    urgent: Ordered,
    /// Backlogged classes waiting for V, filed by S in byte-time ticks.
    ineligible: Sorted,
    /// The class the band's last packet emptied, until the band sends again
    /// (`NIL` if none): a packet it gets meanwhile is tagged as if it had not
    /// emptied.
    emptied: u32,
}

impl Band {
    /// A band: its queues hold buckets only once something is filed (a band
    /// without prioritised apps never files an urgent class).
    fn new() -> Self {
        Band {
            v: 0,
            eligible: Ordered::new(),
            urgent: Ordered::new(),
            ineligible: Sorted::new(),
            emptied: NIL,
        }
    }

    fn is_empty(&self) -> bool {
        self.eligible.is_empty() && self.urgent.is_empty() && self.ineligible.is_empty()
    }
}

pub struct Wf2q {
    link_bps: u64,
    classes: Classes,
    accounting: Accounting,
    slab: Slab,
    class: Vec<ClassState>,
    app_tenant: Vec<u16>,
    app_weight: Vec<u64>,
    app_max_bps: Vec<Option<u64>>,
    /// `split.max_rate` of each app with split, 0 for the others.
    split_bps: Vec<u64>,
    /// Per app with split: its backlogged split classes.
    split_backlogged: Vec<u32>,
    /// Per app: whether a cap lies above its classes (its own, its tenant's, or
    /// its split classes').
    app_capped: Vec<bool>,
    /// Per app: its tenant's fill for the app's priority level (an index into
    /// `fills`), and its child index there.
    app_fill: Vec<u32>,
    app_child: Vec<u32>,
    /// Per app: whether a less urgent level of its tenant exists, so that its
    /// eligible classes wait in `urgent`.
    app_urgent: Vec<bool>,
    tenant_weight: Vec<u64>,
    tenant_max_bps: Vec<Option<u64>>,
    /// Per tenant: its band (an index into `bands` and `root`) and its child index
    /// in that band's fill.
    tenant_band: Vec<u32>,
    tenant_child: Vec<u32>,
    /// Per tenant: its first fill in `fills` and how many, one per priority of its
    /// apps, most urgent first.
    tenant_fills: Vec<(u32, u32)>,
    /// Per band: the link's rate shared among its backlogged tenants.
    root: Vec<Fill>,
    /// Per tenant: the rate its tags run at (module docs: rates at the link).
    tenant_tag_bps: Vec<f64>,
    /// Per tenant and app priority: the tenant's rate shared among the backlogged
    /// apps of that priority.
    fills: Vec<Fill>,
    /// As `fills`, sharing the tenant's `max_rate` instead (capped tenants only):
    /// its apps' real-time ceilings.
    cap_fills: Vec<Fill>,
    /// Per tenant priority, most urgent first.
    bands: Vec<Band>,
    /// Per packet descriptor: S, while the packet heads a class that waits for V;
    /// kept by packet rather than by class since few classes wait at a time.
    head_start_v: Vec<u64>,
    /// Classes held back by a cap, filed by the real time they may go at, in
    /// byte-time ticks.
    parked: Buckets,
    /// V units per ns at the link's rate, 32.32 fixed point: T = now · speed.
    speed_fx: u128,
    /// Bumped whenever the backlogged set changes, invalidating the rates cached
    /// below.
    epoch: u64,
    /// Per app: (epoch, V units per byte of one of its classes at its fair rate).
    v_per_byte: Vec<(u64, f64)>,
    /// Per app: (epoch, T units per byte of one of its classes at its ceiling).
    cap_t_per_byte: Vec<(u64, f64)>,
    /// Per tenant: V units per byte at its tag rate, fixed as that rate is.
    tenant_v_per_byte: Vec<f64>,
    /// Per fill of a tenant with several app priorities: the tenant's start tag for
    /// that level (module docs), in its band's V; 0 for the most urgent level.
    level_start_v: Vec<u64>,
    /// The same in real time at the tenant's `max_rate`, for capped tenants.
    level_start_t: Vec<u64>,
    /// Per capped tenant: when its next packet may leave under its `max_rate`, in
    /// real time, advanced by every packet of every app of it. The classes'
    /// ceilings share the cap among the apps that hold packets, so without it an
    /// app that holds none most of the time (udp, rpc) sent beside a sibling that
    /// took the whole cap: 52 Mbit/s under a 40.6 Mbit/s cap.
    tenant_cap_t: Vec<u64>,
    /// Per capped tenant: real-time units a byte at its `max_rate`, fixed for the
    /// run, so that a packet pays no division for its tenant's tag.
    tenant_cap_t_per_byte: Vec<Option<f64>>,
    /// Per capped app with split classes: when its next packet may leave under its
    /// `max_rate`, advanced by every packet of every split class of it. Each split
    /// class's ceiling is the cap over the split classes that hold packets, and a
    /// class's tag may lag real time by [`CAP_CREDIT_BYTES`]; with only those, 13
    /// udp flows that each emptied their class between packets came back each with
    /// that credit: 295 Mbit/s under a 126.8 Mbit/s cap.
    app_cap_t: Vec<u64>,
    /// Per capped app with split classes: real-time units a byte at its `max_rate`.
    app_cap_t_per_byte: Vec<Option<f64>>,
}

/// A class's byte cost at `per_byte` units a byte, rounded up so that a class never
/// exceeds its rate.
fn cost(len_bytes: u32, per_byte: f64) -> u64 {
    debug_assert!(per_byte > 0.0, "a rate gives {per_byte} units per byte");
    let cost = ((f64::from(len_bytes) * per_byte).ceil() as u64).clamp(1, COST_V_MAX);
    debug_assert!(
        cost == COST_V_MAX || cost as f64 >= f64::from(len_bytes) * per_byte,
        "a tag increment is rounded up, so that no class exceeds its rate"
    );
    cost
}

/// What the debug builds count around an enqueue or a dequeue (module docs:
/// invariants).
#[derive(Clone, Copy, Debug)]
struct Census {
    /// Classes waiting on a wheel.
    filed: usize,
    packets: usize,
}

/// The tighter of two limits in bit/s, `None` being none.
fn tighter(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// V (or T) units per byte at `rate_bps` on a link of `link_bps`.
fn per_byte(link_bps: u64, rate_bps: f64) -> f64 {
    link_bps as f64 / rate_bps * f64::from(1u32 << V_FRAC_BITS)
}

/// The tenants in bands, one per priority present, in priority order.
struct TenantBands {
    priorities: Vec<u8>,
    band_size: Vec<u32>,
    /// Each tenant's band, and its child index in that band's fill.
    tenant_band: Vec<u32>,
    tenant_child: Vec<u32>,
    /// The rate each tenant's tags run at (module docs: rates at the link).
    tenant_tag_bps: Vec<f64>,
}

impl TenantBands {
    fn of(policy: &Policy, link_bps: u64) -> TenantBands {
        let mut priorities: Vec<u8> = policy.tenants.iter().map(|t| t.priority).collect();
        priorities.sort_unstable();
        priorities.dedup();
        let mut band_size = vec![0u32; priorities.len()];
        let mut tenant_band = Vec::with_capacity(policy.tenants.len());
        let mut tenant_child = Vec::with_capacity(policy.tenants.len());
        for t in &policy.tenants {
            let band = priorities
                .binary_search(&t.priority)
                .expect("collected above");
            tenant_band.push(band as u32);
            tenant_child.push(band_size[band]);
            band_size[band] += 1;
        }
        let mut band_weight = vec![0u64; priorities.len()];
        let mut full: Vec<Fill> = band_size
            .iter()
            .map(|&n| Fill::new(n as usize, link_bps))
            .collect();
        for ((t, &band), &child) in policy.tenants.iter().zip(&tenant_band).zip(&tenant_child) {
            band_weight[band as usize] += u64::from(t.weight);
            let apps = t.apps.iter().map(|&a| policy.app(a).max_rate_bps).sum();
            let limit = tighter(t.max_rate_bps, apps);
            full[band as usize].set(
                child as usize,
                Some(Demand {
                    weight: u64::from(t.weight),
                    limit,
                }),
            );
        }
        let tenant_tag_bps = tenant_band
            .iter()
            .zip(&tenant_child)
            .map(|(&band, &child)| {
                let fill = &mut full[band as usize];
                let per_weight = fill.rate(child as usize, link_bps) / fill.level(link_bps);
                per_weight * link_bps as f64 / band_weight[band as usize] as f64
            })
            .collect();
        TenantBands {
            priorities,
            band_size,
            tenant_band,
            tenant_child,
            tenant_tag_bps,
        }
    }
}

/// Each tenant's apps in levels, one per app priority present: a fill per level
/// sharing the tenant's rate, and one sharing its cap among its capped apps.
struct AppLevels {
    app_fill: Vec<u32>,
    app_child: Vec<u32>,
    /// Whether an app has a level of lower priority behind it in its tenant.
    app_urgent: Vec<bool>,
    /// Each tenant's first level and how many it has.
    tenant_fills: Vec<(u32, u32)>,
    fills: Vec<Fill>,
    cap_fills: Vec<Fill>,
}

impl AppLevels {
    fn of(policy: &Policy, link_bps: u64) -> AppLevels {
        let mut app_fill = vec![0; policy.apps.len()];
        let mut app_child = vec![0; policy.apps.len()];
        let mut app_urgent = vec![false; policy.apps.len()];
        let mut tenant_fills = Vec::with_capacity(policy.tenants.len());
        let mut fills = Vec::new();
        let mut cap_fills = Vec::new();
        for t in &policy.tenants {
            let mut levels: Vec<u8> = t.apps.iter().map(|&a| policy.app(a).priority).collect();
            levels.sort_unstable();
            levels.dedup();
            let first = fills.len() as u32;
            let mut size = vec![0u32; levels.len()];
            for &a in &t.apps {
                let rank = levels
                    .binary_search(&policy.app(a).priority)
                    .expect("collected above");
                app_fill[a.index()] = first + rank as u32;
                app_child[a.index()] = size[rank];
                app_urgent[a.index()] = rank + 1 < levels.len();
                size[rank] += 1;
            }
            for &n in &size {
                fills.push(Fill::new(n as usize, t.max_rate_bps.unwrap_or(link_bps)));
                let capped = if t.max_rate_bps.is_some() { n } else { 0 };
                cap_fills.push(Fill::new(
                    capped as usize,
                    t.max_rate_bps.unwrap_or(link_bps),
                ));
            }
            tenant_fills.push((first, levels.len() as u32));
        }
        AppLevels {
            app_fill,
            app_child,
            app_urgent,
            tenant_fills,
            fills,
            cap_fills,
        }
    }
}

impl Wf2q {
    pub fn new(policy: &Policy, config: Config) -> Result<Self, String> {
        let link_bps = policy.link.rate_bps;
        if link_bps == 0 {
            return Err("link rate must be positive".into());
        }
        let TenantBands {
            priorities,
            band_size,
            tenant_band,
            tenant_child,
            tenant_tag_bps,
        } = TenantBands::of(policy, link_bps);
        let root = band_size
            .iter()
            .map(|&n| Fill::new(n as usize, link_bps))
            .collect();
        let AppLevels {
            app_fill,
            app_child,
            app_urgent,
            tenant_fills,
            fills,
            cap_fills,
        } = AppLevels::of(policy, link_bps);
        let tenant_v_per_byte = tenant_tag_bps
            .iter()
            .map(|&bps| per_byte(link_bps, bps))
            .collect();
        let classes = Classes::new(policy, config.classes_max);
        let speed_fx = (u128::from(link_bps) << (V_FRAC_BITS + SPEED_FRAC_BITS)) / 8_000_000_000;
        let levels = fills.len();
        let bands = (0..priorities.len()).map(|_| Band::new()).collect();
        Ok(Wf2q {
            link_bps,
            class: Vec::with_capacity(classes.capacity()),
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
            app_tenant: policy.apps.iter().map(|a| a.tenant.0).collect(),
            app_weight: policy.apps.iter().map(|a| u64::from(a.weight)).collect(),
            app_max_bps: policy.apps.iter().map(|a| a.max_rate_bps).collect(),
            split_bps: policy
                .apps
                .iter()
                .map(|a| a.split.map_or(0, |s| s.max_rate_bps.max(1)))
                .collect(),
            split_backlogged: vec![0; policy.apps.len()],
            app_capped: policy
                .apps
                .iter()
                .map(|a| {
                    a.max_rate_bps.is_some()
                        || a.split.is_some()
                        || policy.tenant(a.tenant).max_rate_bps.is_some()
                })
                .collect(),
            app_fill,
            app_child,
            app_urgent,
            tenant_weight: policy.tenants.iter().map(|t| u64::from(t.weight)).collect(),
            tenant_max_bps: policy.tenants.iter().map(|t| t.max_rate_bps).collect(),
            tenant_band,
            tenant_child,
            tenant_fills,
            root,
            tenant_tag_bps,
            fills,
            cap_fills,
            bands,
            head_start_v: vec![0; config.packets_max],
            parked: Buckets::new(),
            speed_fx,
            epoch: 1,
            v_per_byte: vec![(0, 0.0); policy.apps.len()],
            cap_t_per_byte: vec![(0, 0.0); policy.apps.len()],
            tenant_v_per_byte,
            level_start_v: vec![0; levels],
            level_start_t: vec![0; levels],
            tenant_cap_t: vec![0; policy.tenants.len()],
            tenant_cap_t_per_byte: policy
                .tenants
                .iter()
                .map(|t| t.max_rate_bps.map(|max| per_byte(link_bps, max as f64)))
                .collect(),
            app_cap_t: vec![0; policy.apps.len()],
            app_cap_t_per_byte: policy
                .apps
                .iter()
                .map(|a| {
                    a.max_rate_bps
                        .filter(|_| a.split.is_some())
                        .map(|max| per_byte(link_bps, max as f64))
                })
                .collect(),
        })
    }

    /// T: real time since the enforcer was built, in V units at the link's rate.
    fn t_at(&self, now_ns: u64) -> u64 {
        ((u128::from(now_ns) * self.speed_fx) >> SPEED_FRAC_BITS) as u64
    }

    /// In debug builds only, what [`Wf2q::assert_census`] compares: O(bands).
    fn census(&self) -> Option<Census> {
        cfg!(debug_assertions).then(|| Census {
            filed: self.parked.len()
                + self
                    .bands
                    .iter()
                    .map(|b| b.eligible.len() + b.urgent.len() + b.ineligible.len())
                    .sum::<usize>(),
            packets: self.slab.len(),
        })
    }

    /// Every class that holds packets waits on exactly one wheel: after an operation
    /// that changed the packets held by `change` (one or none), the classes filed
    /// changed by the same or not at all, and a class is filed only while it holds
    /// packets.
    fn assert_census(&self, before: Option<Census>, change: isize) {
        let (Some(before), Some(after)) = (before, self.census()) else {
            return;
        };
        debug_assert_eq!(
            after.packets as isize,
            before.packets as isize + change,
            "every packet admitted is held until it is sent"
        );
        let filed = after.filed as isize - before.filed as isize;
        debug_assert!(
            filed == 0 || filed == change,
            "a class is filed at its first packet and leaves at its last ({before:?} -> {after:?})"
        );
        debug_assert!(
            after.filed <= after.packets && (after.filed == 0) == (after.packets == 0),
            "every class that holds packets waits on exactly one wheel ({after:?})"
        );
    }

    fn is_split(&self, class: usize) -> bool {
        class >= self.app_tenant.len()
    }

    fn app_of(&self, class: usize) -> usize {
        usize::from(self.class[class].app)
    }

    fn band_of(&self, class: usize) -> usize {
        let tenant = usize::from(self.app_tenant[self.app_of(class)]);
        self.tenant_band[tenant] as usize
    }

    /// What a backlogged app asks of its tenant: its weight, up to its `max_rate`
    /// and, with split, its backlogged split classes' caps.
    fn app_demand(&self, app: usize) -> Demand {
        let split = (self.split_bps[app] > 0)
            .then(|| self.split_bps[app] * u64::from(self.split_backlogged[app]));
        let limit = tighter(self.app_max_bps[app], split);
        Demand {
            weight: self.app_weight[app],
            limit,
        }
    }

    /// What a tenant asks of the link: its weight, up to its `max_rate` and what its
    /// backlogged apps can take.
    fn tenant_demand(&self, tenant: usize) -> Option<Demand> {
        let (first, count) = self.tenant_fills[tenant];
        let mut active = false;
        let mut limit = Some(0u64);
        for fill in &self.fills[first as usize..(first + count) as usize] {
            match fill.demand() {
                None => {}
                Some(None) => {
                    active = true;
                    limit = None;
                }
                Some(Some(bps)) => {
                    active = true;
                    limit = limit.map(|sum| sum + bps);
                }
            }
        }
        let limit = tighter(self.tenant_max_bps[tenant], limit);
        active.then_some(Demand {
            weight: self.tenant_weight[tenant],
            limit,
        })
    }

    /// Adds or removes `class` from the backlogged set, up to the link.
    fn set_backlogged(&mut self, class: usize, backlogged: bool) {
        self.epoch += 1;
        let app = self.app_of(class);
        let active = if self.is_split(class) {
            let n = &mut self.split_backlogged[app];
            if backlogged {
                *n += 1;
            } else {
                *n -= 1;
            }
            *n > 0
        } else {
            backlogged
        };
        let demand = active.then(|| self.app_demand(app));
        let (fill, child) = (self.app_fill[app] as usize, self.app_child[app] as usize);
        self.fills[fill].set(child, demand);
        let tenant = usize::from(self.app_tenant[app]);
        if self.tenant_max_bps[tenant].is_some() {
            self.cap_fills[fill].set(child, demand);
        }
        let demand = self.tenant_demand(tenant);
        let band = self.tenant_band[tenant] as usize;
        self.root[band].set(self.tenant_child[tenant] as usize, demand);
    }

    /// A backlogged tenant's rate, its share of the link among its band's
    /// backlogged tenants as if no more urgent band sent.
    fn tenant_bps(&mut self, tenant: usize) -> f64 {
        let band = self.tenant_band[tenant] as usize;
        self.root[band].rate(self.tenant_child[tenant] as usize, self.link_bps)
    }

    /// V units per byte of `class` at its fair rate: its app's share of its tenant's
    /// rate among the backlogged apps of its priority (as if no more urgent app
    /// sent), split equally among the app's backlogged split classes.
    fn fair_v_per_byte(&mut self, class: usize) -> f64 {
        let app = self.app_of(class);
        let (epoch, cached) = self.v_per_byte[app];
        if epoch == self.epoch {
            return cached;
        }
        let tenant = usize::from(self.app_tenant[app]);
        let capacity = self.tenant_bps(tenant).round().max(1.0) as u64;
        let (fill, child) = (self.app_fill[app] as usize, self.app_child[app] as usize);
        let mut rate =
            self.fills[fill].rate(child, capacity) / capacity as f64 * self.tenant_tag_bps[tenant];
        if self.is_split(class) {
            rate /= f64::from(self.split_backlogged[app]);
        }
        let fresh = per_byte(self.link_bps, rate);
        self.v_per_byte[app] = (self.epoch, fresh);
        fresh
    }

    /// T units per byte of `class` at its ceiling: its app's share of its tenant's
    /// `max_rate` among the backlogged apps of its priority, else the app's own
    /// limit, split equally among the app's backlogged split classes. Only for a
    /// class under a cap.
    fn cap_t_per_byte(&mut self, class: usize) -> f64 {
        let app = self.app_of(class);
        let (epoch, cached) = self.cap_t_per_byte[app];
        if epoch == self.epoch {
            return cached;
        }
        let tenant = usize::from(self.app_tenant[app]);
        let (fill, child) = (self.app_fill[app] as usize, self.app_child[app] as usize);
        let mut rate = match self.tenant_max_bps[tenant] {
            Some(max) => self.cap_fills[fill].rate(child, max),
            None => self
                .app_demand(app)
                .limit
                .expect("an app under a cap has a limit") as f64,
        };
        if self.is_split(class) {
            rate /= f64::from(self.split_backlogged[app]);
        }
        let fresh = per_byte(self.link_bps, rate);
        self.cap_t_per_byte[app] = (self.epoch, fresh);
        fresh
    }

    /// After a packet of `app` of `len_bytes` left at `v` (its band's V) and `t`:
    /// its tenant's start tags of its level and of every less urgent one move on by
    /// L at the tenant's rate, from no earlier than [`LEVEL_CREDIT_BYTES`] before V,
    /// and for a capped tenant in real time at its `max_rate` (module docs).
    #[inline]
    fn advance_levels<const LEVELS: bool>(&mut self, app: usize, len_bytes: u32, v: u64, t: u64) {
        if !LEVELS {
            return;
        }
        let tenant = usize::from(self.app_tenant[app]);
        let (first, count) = self.tenant_fills[tenant];
        if count < 2 {
            return;
        }
        let v_per_byte = self.tenant_v_per_byte[tenant];
        let cost_v = cost(len_bytes, v_per_byte);
        let credit = ((LEVEL_CREDIT_BYTES as f64 * v_per_byte) as u64).min(COST_V_MAX);
        let floor_v = v.saturating_sub(credit);
        let capped = self.tenant_max_bps[tenant].map(|max| {
            let t_per_byte = per_byte(self.link_bps, max as f64);
            (
                cost(len_bytes, t_per_byte),
                t.saturating_sub(CAP_CREDIT_BYTES << V_FRAC_BITS),
            )
        });
        let level = self.app_fill[app];
        // The most urgent level answers to no one: its start tags stay 0.
        for less_urgent in level.max(first + 1)..first + count {
            let start = &mut self.level_start_v[less_urgent as usize];
            let previous = *start;
            *start = (*start).max(floor_v) + cost_v;
            debug_assert!(
                *start > previous && *start <= TAG_MAX,
                "a level's start tag only moves on"
            );
            if let Some((cost_t, floor_t)) = capped {
                let start = &mut self.level_start_t[less_urgent as usize];
                let previous = *start;
                *start = (*start).max(floor_t) + cost_t;
                debug_assert!(*start > previous, "a level's real-time tag only moves on");
            }
        }
    }

    /// S of `class`'s next packet in its band standing at `v`, after one of its
    /// packets (or the packet its band's last one emptied it of): max(F, S_k, V - C).
    #[inline]
    fn next_start<const LEVELS: bool>(&mut self, class: usize, v: u64) -> u64 {
        let v_per_byte = self.fair_v_per_byte(class);
        let credit = ((LEVEL_CREDIT_BYTES as f64 * v_per_byte) as u64).min(COST_V_MAX);
        let finish_v = self.class[class].finish_v;
        let start_v = finish_v
            .max(self.level_start::<LEVELS>(class))
            .max(v.saturating_sub(credit));
        debug_assert!(
            start_v >= finish_v && start_v >= v.saturating_sub(credit),
            "S = F, within the credit of V"
        );
        start_v
    }

    /// The earliest start tag `class` may have: its tenant's for its level.
    #[inline]
    fn level_start<const LEVELS: bool>(&self, class: usize) -> u64 {
        if !LEVELS {
            return 0;
        }
        self.level_start_v[self.app_fill[self.app_of(class)] as usize]
    }

    /// Whether `class`, just taken as eligible at `v`, must wait for its tenant's
    /// start tag of its level (more urgent levels sent since it was tagged); if so
    /// it is tagged again from there and filed as ineligible.
    #[inline]
    fn held_by_tenant<const LEVELS: bool>(&mut self, class: usize, v: u64, t: u64) -> bool {
        let start_v = self.level_start::<LEVELS>(class);
        if start_v <= v {
            return false;
        }
        self.place::<LEVELS>(class, start_v, v, t);
        true
    }

    /// The real time before which `class` may not send under its caps (its own
    /// ceiling, and its tenant's `max_rate` across app priority levels), if that is
    /// after `t`.
    #[inline]
    fn cap_blocked<const LEVELS: bool>(&self, class: usize, t: u64) -> Option<u64> {
        let app = self.app_of(class);
        if !self.app_capped[app] {
            return None;
        }
        let mut at = self.class[class].cap_t;
        if self.app_cap_t_per_byte[app].is_some() {
            at = at.max(self.app_cap_t[app]);
        }
        let tenant = usize::from(self.app_tenant[app]);
        if self.tenant_max_bps[tenant].is_some() {
            at = at.max(self.tenant_cap_t[tenant]);
            if LEVELS {
                at = at.max(self.level_start_t[self.app_fill[app] as usize]);
            }
        }
        (at > t).then_some(at)
    }

    fn head_len(&self, class: usize) -> u32 {
        self.slab.get(self.class[class].fifo.head).len_bytes
    }

    /// Tags a backlogged class whose head packet starts at S = `start_v`, with
    /// F = S + L / w_i at its rate now, and files it in its band standing at `v`,
    /// at real time `t`: as eligible if V has reached S, else by S until it has.
    #[inline]
    fn place<const LEVELS: bool>(&mut self, class: usize, start_v: u64, v: u64, t: u64) {
        debug_assert!(
            !self.class[class].fifo.is_empty(),
            "only a class holding packets is tagged"
        );
        debug_assert_eq!(
            v,
            self.bands[self.band_of(class)].v,
            "tagged at its band's V"
        );
        debug_assert!(
            start_v <= TAG_MAX && v <= TAG_MAX,
            "V and S stay within V's 2^52 bytes"
        );
        let cost = cost(self.head_len(class), self.fair_v_per_byte(class));
        self.class[class].finish_v = start_v + cost;
        if start_v <= v {
            self.file_eligible::<LEVELS>(class as u32, t);
        } else {
            self.head_start_v[self.class[class].fifo.head as usize] = start_v;
            let band = self.band_of(class);
            let mut view = ByStart {
                class: &mut self.class,
                head_start_v: &self.head_start_v,
            };
            let tick = view.tick(class as u32);
            self.bands[band]
                .ineligible
                .insert(&mut view, class as u32, tick);
        }
    }

    /// Parks `class` until real time reaches `at`.
    #[inline]
    fn park(&mut self, class: u32, at: u64) {
        self.class[class as usize].cap_t = at;
        let mut view = ByCap {
            class: &mut self.class,
        };
        let tick = view.tick(class);
        self.parked.insert(&mut view, class, tick);
    }

    /// Files an eligible class by F, on its band's urgent wheel if its app is
    /// prioritised, or parks it until real time `t` reaches what its caps allow.
    /// Parking it here rather than when it is taken keeps the eligible wheels'
    /// order: a class taken there moves the wheel's tick to its F.
    #[inline]
    fn file_eligible<const LEVELS: bool>(&mut self, class: u32, t: u64) {
        if let Some(at) = self.cap_blocked::<LEVELS>(class as usize, t) {
            self.park(class, at);
            return;
        }
        let band = self.band_of(class as usize);
        let urgent = LEVELS && self.app_urgent[self.app_of(class as usize)];
        let mut view = ByFinish {
            class: &mut self.class,
        };
        let tick = view.tick(class);
        let band = &mut self.bands[band];
        if urgent {
            band.urgent.insert(&mut view, class, tick);
        } else {
            band.eligible.insert(&mut view, class, tick);
        }
    }

    /// The class `band` serves next at real time `t`, if any: the smallest F among
    /// its eligible classes, prioritised apps first, V moved up to the smallest S
    /// when none is eligible; classes a cap holds back are parked on the way.
    #[inline]
    fn pick<const LEVELS: bool>(&mut self, band: usize, t: u64) -> Option<usize> {
        loop {
            let v = self.bands[band].v;
            while let Some(class) = self.bands[band].ineligible.pop_expired(
                &mut ByStart {
                    class: &mut self.class,
                    head_start_v: &self.head_start_v,
                },
                v >> V_FRAC_BITS,
            ) {
                debug_assert!(
                    self.head_start_v[self.class[class as usize].fifo.head as usize] <= v,
                    "no class is eligible before S <= V"
                );
                self.file_eligible::<LEVELS>(class, t);
            }
            let b = &mut self.bands[band];
            let wheel = if LEVELS && !b.urgent.is_empty() {
                &mut b.urgent
            } else if !b.eligible.is_empty() {
                &mut b.eligible
            } else {
                // WF2Q+'s V = max(V, min S); the wheel's bound may sit below min S,
                // in which case the next round has cascaded it closer.
                let start_tick = b.ineligible.next_tick()?;
                let v_before = b.v;
                b.v = b.v.max(start_tick << V_FRAC_BITS);
                debug_assert!(
                    b.v >= v_before && b.v <= TAG_MAX,
                    "V only moves forward, within its 2^52 bytes"
                );
                continue;
            };
            let class = wheel
                .pop(&mut ByFinish {
                    class: &mut self.class,
                })
                .expect("not empty");
            let class = class as usize;
            if self.held_by_tenant::<LEVELS>(class, v, t) {
                continue;
            }
            // Its tenant's real-time start tag may have moved since it was filed.
            if let Some(at) = self.cap_blocked::<LEVELS>(class, t) {
                self.park(class as u32, at);
                continue;
            }
            return Some(class);
        }
    }

    /// Sends the head packet of `class` of `band` at real time `t`.
    #[inline]
    fn serve<const LEVELS: bool>(&mut self, band: usize, class: usize, t: u64) -> Frame {
        debug_assert!(
            self.cap_blocked::<LEVELS>(class, t).is_none(),
            "a capped class sends only once real time reaches its caps' tags"
        );
        debug_assert!(
            self.level_start::<LEVELS>(class) <= self.bands[band].v,
            "a class of a less urgent level waits for its tenant's start tag"
        );
        let packet = self.class[class]
            .fifo
            .pop_front(&mut self.slab)
            .expect("a filed class is backlogged");
        if self.is_split(class) {
            self.class[class].packets -= 1;
            debug_assert_eq!(
                self.class[class].fifo.is_empty(),
                self.class[class].packets == 0
            );
        }
        self.accounting.release(&packet);
        self.classes.departed(&packet, ClassId(class as u32));
        let app = self.app_of(class);
        let v = self.bands[band].v;
        self.advance_levels::<LEVELS>(app, packet.len_bytes, v, t);
        if self.app_capped[app] {
            // Each cap's tag moves on by the packet at the cap, from no earlier
            // than its credit behind real time.
            let credit_from = t.saturating_sub(CAP_CREDIT_BYTES << V_FRAC_BITS);
            let cost = cost(packet.len_bytes, self.cap_t_per_byte(class));
            let start = &mut self.class[class].cap_t;
            let previous = *start;
            *start = (*start).max(credit_from) + cost;
            debug_assert!(*start > previous, "each packet moves its cap's tag on");
            if let Some(t_per_byte) = self.app_cap_t_per_byte[app] {
                let start = &mut self.app_cap_t[app];
                *start = (*start).max(credit_from) + self::cost(packet.len_bytes, t_per_byte);
            }
            let tenant = usize::from(self.app_tenant[app]);
            if let Some(t_per_byte) = self.tenant_cap_t_per_byte[tenant] {
                let start = &mut self.tenant_cap_t[tenant];
                *start = (*start).max(credit_from) + self::cost(packet.len_bytes, t_per_byte);
            }
        }
        let v_before = v;
        let v = v + (u64::from(packet.len_bytes) << V_FRAC_BITS);
        debug_assert!(
            v > v_before && v <= TAG_MAX,
            "each packet moves its band's V on, within its 2^52 bytes"
        );
        self.bands[band].v = v;
        if self.class[class].fifo.is_empty() {
            self.bands[band].emptied = class as u32;
            self.set_backlogged(class, false);
        } else {
            self.bands[band].emptied = NIL;
            let start_v = self.next_start::<LEVELS>(class, v);
            self.place::<LEVELS>(class, start_v, v, t);
        }
        Frame::whole(packet)
    }

    /// [`Enforcer::dequeue`], for a policy with app priority levels (`LEVELS`) or
    /// without, so that the latter pays nothing for them.
    #[inline]
    fn dequeue_with<const LEVELS: bool>(&mut self, now_ns: u64) -> Option<Frame> {
        let t = self.t_at(now_ns);
        while let Some(class) = self.parked.pop_expired(
            &mut ByCap {
                class: &mut self.class,
            },
            t >> V_FRAC_BITS,
        ) {
            debug_assert!(
                self.class[class as usize].cap_t <= t,
                "a parked class is released only once real time reaches its cap tag"
            );
            // A class is parked only when eligible, and V only grows.
            self.file_eligible::<LEVELS>(class, t);
        }
        for band in 0..self.bands.len() {
            if let Some(class) = self.pick::<LEVELS>(band, t) {
                return Some(self.serve::<LEVELS>(band, class, t));
            }
        }
        None
    }

    fn has_levels(&self) -> bool {
        self.fills.len() > self.tenant_fills.len()
    }

    fn refuse(&mut self, packet: Packet) -> Result<(), (Packet, Refusal)> {
        self.accounting.refuse(packet.tenant, packet.len_bytes);
        Err((packet, Refusal::QueueFull))
    }

    /// Tags `class`, just backlogged at `now_ns`, and files it.
    fn start<const LEVELS: bool>(&mut self, now_ns: u64, class: usize) {
        debug_assert_eq!(
            self.class[class].fifo.head, self.class[class].fifo.tail,
            "a class becomes backlogged with its first packet"
        );
        self.set_backlogged(class, true);
        let v = self.bands[self.band_of(class)].v;
        let t = self.t_at(now_ns);
        let state = &mut self.class[class];
        state.cap_t = state.cap_t.max(t);
        let band = self.band_of(class);
        let start_v = if std::mem::replace(&mut self.bands[band].emptied, NIL) == class as u32 {
            self.next_start::<LEVELS>(class, v)
        } else {
            let start_v = self.class[class]
                .finish_v
                .max(v)
                .max(self.level_start::<LEVELS>(class));
            debug_assert!(
                start_v >= self.class[class].finish_v && start_v >= v,
                "S = max(F, V) when a class becomes backlogged"
            );
            start_v
        };
        self.place::<LEVELS>(class, start_v, v, t);
    }

    /// [`Enforcer::enqueue`], which wraps it in the debug builds' counts.
    fn admit(&mut self, now_ns: u64, packet: Packet) -> Result<(), (Packet, Refusal)> {
        let Some(ClassId(class)) = self.classes.classify(&packet) else {
            return self.refuse(packet);
        };
        let class = class as usize;
        if self.slab.is_full() {
            return self.refuse(packet);
        }
        let split = self.is_split(class);
        let admitted = if split {
            let packets = self.class.get(class).map_or(0, |c| c.packets);
            self.accounting.admit_split(&packet, packets)
        } else {
            self.accounting.admit(&packet)
        };
        if let Err(reason) = admitted {
            return Err((packet, reason));
        }
        while self.class.len() <= class {
            // Apps take the first ids; a split class is created at its first packet.
            let app = if self.class.len() < self.app_tenant.len() {
                self.class.len() as u32
            } else {
                packet.app.0
            };
            self.class.push(ClassState {
                finish_v: 0,
                cap_t: 0,
                next: slab::NIL,
                app: u16::try_from(app).expect("apps fit 16 bits (policy::limits::APPS_MAX)"),
                packets: 0,
                fifo: List::EMPTY,
            });
        }
        if split {
            self.class[class].packets += 1;
        }
        let index = self.slab.insert(packet).expect("checked not full");
        let was_idle = self.class[class].fifo.is_empty();
        self.class[class].fifo.push_back(&mut self.slab, index);
        if was_idle {
            if self.has_levels() {
                self.start::<true>(now_ns, class);
            } else {
                self.start::<false>(now_ns, class);
            }
        }
        Ok(())
    }
}

impl Enforcer for Wf2q {
    fn enqueue(&mut self, now_ns: u64, packet: Packet) -> Result<(), (Packet, Refusal)> {
        let before = self.census();
        let admitted = self.admit(now_ns, packet);
        self.assert_census(before, isize::from(admitted.is_ok()));
        admitted
    }

    fn dequeue(&mut self, now_ns: u64) -> Option<Frame> {
        let before = self.census();
        let frame = if self.has_levels() {
            self.dequeue_with::<true>(now_ns)
        } else {
            self.dequeue_with::<false>(now_ns)
        };
        self.assert_census(before, -isize::from(frame.is_some()));
        frame
    }

    fn next_ready_ns(&self, now_ns: u64) -> Option<u64> {
        if self.slab.len() == 0 {
            return None;
        }
        if self.bands.iter().any(|b| !b.is_empty()) {
            return Some(now_ns);
        }
        let tick = self.parked.next_tick()?;
        let at_ns = (u128::from(tick << V_FRAC_BITS) << SPEED_FRAC_BITS).div_ceil(self.speed_fx);
        Some((at_ns.min(u128::from(u64::MAX)) as u64).max(now_ns))
    }

    fn backlog_packets(&self) -> usize {
        self.slab.len()
    }

    fn counters(&self) -> &[TenantCounters] {
        self.accounting.counters()
    }

    fn classes(&self) -> Option<usize> {
        Some(self.classes.len())
    }
}

pub fn build(policy: &Policy, capacity: crate::Capacity) -> Result<Box<dyn Enforcer>, String> {
    let config = Config {
        classes_max: capacity.classes,
        packets_max: capacity.packets,
        class_packets: capacity.class_packets,
    };
    Ok(Box::new(Wf2q::new(policy, config)?))
}

/// The time `bytes` take at `link_bps`, for the sentences below.
fn link_time(bytes: u64, link_bps: u64) -> String {
    let ns = bytes as f64 * 8e9 / link_bps as f64;
    if ns >= 1e6 {
        format!("{:.1}ms", ns / 1e6)
    } else {
        format!("{:.0}us", ns / 1e3)
    }
}

/// The most ways of backlogging the tenants that [`worst_guarantee_error`] weighs.
const BACKLOGS_MAX: u64 = 4096;

/// The largest relative error of a tenant's share that ignoring the guarantees
/// makes with `flows` (per app, as [`policy::ideal_allocation`] takes them):
/// `wf2q` shares as the ideal of `unguaranteed`, the policy without its
/// `min_rate`s, does.
fn guarantee_error_with(policy: &Policy, unguaranteed: &Policy, flows: &[Vec<f64>]) -> f64 {
    let ideal = policy::ideal_allocation(policy, flows).tenant_bps;
    let given = policy::ideal_allocation(unguaranteed, flows).tenant_bps;
    ideal
        .iter()
        .zip(&given)
        .filter(|&(&ideal, _)| ideal > 0.0)
        .map(|(ideal, given)| (given - ideal).abs() / ideal)
        .fold(0.0, f64::max)
}

fn unguaranteed(policy: &Policy) -> Policy {
    let mut unguaranteed = policy.clone();
    unguaranteed
        .tenants
        .iter_mut()
        .for_each(|t| t.min_rate_bps = None);
    unguaranteed
        .apps
        .iter_mut()
        .for_each(|a| a.min_rate_bps = None);
    unguaranteed
}

/// [`guarantee_error_with`] every app backlogged.
fn guarantee_error(policy: &Policy) -> f64 {
    let backlogged = vec![vec![f64::INFINITY]; policy.apps.len()];
    guarantee_error_with(policy, &unguaranteed(policy), &backlogged)
}

/// [`guarantee_error_with`] at its worst over every way each tenant can be
/// backlogged (bulk traffic on some of its apps, each then wanting all its cap
/// allows); `None` where there are more than [`BACKLOGS_MAX`] ways, or a split
/// app, whose demand grows with its flows. A tenant's share depends only on its
/// demand: unbounded where it backlogs an app without max_rate, else its
/// backlogged apps' caps added up, so one such app stands for all, and the capped
/// ones count by subset. With every app backlogged
/// alone, a tenant whose guarantee covers an app capped below its share was 34.6%
/// off where, its other apps idle, it was 39.9% (sim tests/claims.rs).
fn worst_guarantee_error(policy: &Policy) -> Option<f64> {
    if policy.tenants.iter().all(|t| t.min_rate_bps.is_none()) {
        return Some(0.0);
    }
    if policy.apps.iter().any(|a| a.split.is_some()) {
        return None;
    }
    // Per tenant: an unbounded app, if any, and its capped apps.
    let choices: Vec<(Option<usize>, Vec<usize>)> = policy
        .tenants
        .iter()
        .map(|t| {
            let (capped, unbounded): (Vec<usize>, Vec<usize>) = t
                .apps
                .iter()
                .map(|a| a.index())
                .partition(|&a| policy.apps[a].max_rate_bps.is_some());
            (unbounded.first().copied(), capped)
        })
        .collect();
    let mut ways: Vec<u64> = Vec::with_capacity(choices.len());
    let mut total: u64 = 1;
    for (unbounded, capped) in &choices {
        let subsets = 1u64
            .checked_shl(u32::try_from(capped.len()).ok()?)
            .filter(|&n| n <= BACKLOGS_MAX)?;
        let n = subsets - 1 + u64::from(unbounded.is_some());
        total = total.checked_mul(n).filter(|&n| n <= BACKLOGS_MAX)?;
        ways.push(n);
    }
    let unguaranteed = unguaranteed(policy);
    let mut flows = vec![Vec::new(); policy.apps.len()];
    let mut worst: f64 = 0.0;
    for way in 0..total {
        let mut rest = way;
        for ((unbounded, capped), &n) in choices.iter().zip(&ways) {
            let mut pick = rest % n;
            rest /= n;
            for &a in capped {
                flows[a].clear();
            }
            if let Some(a) = *unbounded {
                flows[a].clear();
                if pick == 0 {
                    flows[a].push(f64::INFINITY);
                    continue;
                }
                pick -= 1;
            }
            // Subsets 1..2^len of the capped apps, as bit masks.
            for (bit, &a) in capped.iter().enumerate() {
                if (pick + 1) >> bit & 1 == 1 {
                    flows[a].push(f64::INFINITY);
                }
            }
        }
        worst = worst.max(guarantee_error_with(policy, &unguaranteed, &flows));
    }
    Some(worst)
}

/// Whether a tenant's share may stray by more than a couple of sends: where a
/// tenant has apps of several priorities (prioritised apps go before other
/// eligible classes, so another tenant's packet waits a packet per prioritised
/// class: one whose cap was its share fell 4% short of it beside five
/// prioritised apps at 1 Gbit/s), or split classes (a tenant is within a packet
/// per class of it, and split classes are many: one with eight of them swung
/// from 21.7 to 28.9 Mbit/s about an ideal of 24.1 over 500 ms intervals).
fn shares_beyond_packets(policy: &Policy) -> bool {
    policy.apps.iter().any(|a| a.split.is_some()) || crate::tenant_has_app_priorities(policy)
}

/// The share error `check` states with every tenant backlogged, given
/// [`worst_guarantee_error`]: none where shares stray beyond packets or the
/// guarantees' effect is not weighed.
fn share_error(policy: &Policy, worst_guarantee_error: Option<f64>) -> Option<f64> {
    if shares_beyond_packets(policy) {
        return None;
    }
    worst_guarantee_error.map(|worst| SHARE_ERROR_MAX + worst)
}

/// What `approximation` says, in numbers: each tenant's share with every tenant
/// backlogged within the share error `check` prints (what ignoring guarantees moves
/// included), give or take two sends, unless [`shares_beyond_packets`]; caps in
/// real time.
pub fn bounds(policy: &Policy) -> Vec<crate::Bound> {
    let credit_ns = CAP_CREDIT_BYTES * 8_000_000_000 / policy.link.rate_bps.max(1);
    let mut out = vec![
        crate::Bound::over_cap(crate::Subject::Tenant, credit_ns),
        crate::Bound::over_cap(crate::Subject::App, credit_ns),
    ];
    if let Some(max) = share_error(policy, worst_guarantee_error(policy)) {
        out.push(crate::Bound {
            subject: crate::Subject::Tenant,
            figure: crate::Figure::RelErrorMean {
                grain: crate::Grain {
                    sends: 2,
                    ideal_ns: 0,
                },
            },
            max,
            condition: crate::Condition::EveryTenantBacklogged,
        });
    }
    out
}

pub fn approximation(policy: &Policy) -> Approximation {
    let guarantee_error = guarantee_error(policy);
    let worst = worst_guarantee_error(policy);
    let mut out = Approximation {
        share_error_max: share_error(policy, worst),
        ..Approximation::default()
    };
    let some_idle = match worst {
        Some(worst) if worst > guarantee_error + 5e-4 => {
            format!(
                ", and with some apps of a tenant idle by up to {:.1}%",
                worst * 100.0
            )
        }
        Some(_) => String::new(),
        None => format!(
            ", and with some apps of a tenant idle by what `check` does not weigh here (more than {BACKLOGS_MAX} ways to backlog the tenants, or a split app)"
        ),
    };
    // A split app's demand grows with its flows: the figure counts one class.
    let every_app = if policy.apps.iter().any(|a| a.split.is_some()) {
        "with every app backlogged by one flow and a split app by one class (with more classes its tenant wants more, which the figure does not cover)"
    } else {
        "with every app backlogged"
    };
    let rate = |bps: u64| format_rate(bps as f64);
    let credit = link_time(CAP_CREDIT_BYTES, policy.link.rate_bps);
    let cap = |bps: u64| {
        format!(
            "{} (a real-time ceiling: over the run never above it; over any window at most one packet and what the cap sends in {credit} above it)",
            rate(bps)
        )
    };
    for t in &policy.tenants {
        if let Some(max) = t.max_rate_bps {
            out.exact.push(format!("{}: max_rate {}", t.name, cap(max)));
        }
        if let Some(min) = t.min_rate_bps {
            out.ignored.push(format!(
                "{}: min_rate {} (SENIC has no guarantees; only weights, priorities and caps share the link: {every_app}, ignoring this policy's guarantees moves a tenant's share by up to {:.1}% of its ideal{some_idle})",
                t.name,
                rate(min),
                guarantee_error * 100.0
            ));
        }
    }
    for a in &policy.apps {
        let tenant = &policy.tenant(a.tenant).name;
        if let Some(max) = a.max_rate_bps {
            out.exact
                .push(format!("{tenant}/{}: max_rate {}", a.name, cap(max)));
        }
        if let Some(min) = a.min_rate_bps {
            out.ignored.push(format!(
                "{tenant}/{}: min_rate {} (no guarantees)",
                a.name,
                rate(min)
            ));
        }
        if let Some(split) = a.split {
            out.exact.push(format!(
                "{tenant}/{}: split into one class per key, each with a ceiling of {}, sharing the app's rate equally",
                a.name,
                rate(split.max_rate_bps)
            ));
        }
    }
    out.approximate.push(format!(
        "weights and caps: shared as the ideal shares them among the classes that hold packets (at the link among the tenants of one priority, in a tenant among its apps of one priority: each up to its max_rate and what its backlogged classes can take, the rest by weight); while those classes stay the same, each class's bytes stay within one packet (at most {}) of the ideal's at every instant (WF2Q+'s bound), a tenant's or app's within one packet per class of it, so a share is within {:.0}% of the ideal over any span in which the ideal sends {} of its packets; the shares follow which classes hold packets, not their demand: a class that sends below its share (udp, poisson, rpc) counts at its full share while it holds a packet, what it leaves goes to every class of its priority in proportion to their rates rather than first to its own tenant's other apps, and an app of its tenant tagged meanwhile pays that packet at the lower rate, an error that grows with the time such classes hold packets and with the other apps' packet sizes",
        format_size(64 * 1024),
        SHARE_ERROR_MAX * 100.0,
        (2.0 / SHARE_ERROR_MAX).round()
    ));
    let tenant_levels: std::collections::BTreeSet<u8> =
        policy.tenants.iter().map(|t| t.priority).collect();
    if tenant_levels.len() > 1 {
        out.approximate.push(format!(
            "tenant priorities: {} levels, strict, each sharing the link by weight among its tenants as if alone (its own virtual time advances only by what it sends), so a more urgent tenant's bytes come out of the less urgent levels without changing their weights; a more urgent packet may wait for the packet on the link (one TSO send, {})",
            tenant_levels.len(),
            link_time(64 * 1024, policy.link.rate_bps)
        ));
    }
    for t in &policy.tenants {
        let levels: std::collections::BTreeSet<u8> =
            t.apps.iter().map(|&a| policy.app(a).priority).collect();
        if levels.len() > 1 {
            out.approximate.push(format!(
                "{}: {} app priority levels, strict within the tenant (SENIC has none): a level's classes get the tenant's rate as if alone, and a more urgent level's bytes come out of the less urgent levels' part (a tenant start tag per level, at most {} of credit for a level served late; in real time at the tenant's max_rate where it has one); prioritised classes go before other eligible classes of the tenant's priority, so another tenant's packet may wait one packet per eligible prioritised class",
                t.name,
                levels.len(),
                format_size(LEVEL_CREDIT_BYTES)
            ));
        }
    }
    if shares_beyond_packets(policy) {
        out.approximate.push("tenants' shares with every tenant backlogged: no bound for a policy with split classes or tenants with apps of several priorities, as a tenant is within a packet per class of it and waits a packet per prioritised class (a tenant capped at its share got 4% less beside five prioritised apps; one with eight split classes swung from 21.7 to 28.9 Mbit/s about 24.1 over 500 ms)".into());
    } else if worst.is_none() {
        out.approximate.push(format!("tenants' shares with every tenant backlogged: no bound for this policy, as the guarantees `wf2q` ignores move a share by what each tenant's backlogged apps' caps add up to, and there are more than {BACKLOGS_MAX} ways to backlog its tenants"));
    }
    out.approximate.push(
        "a class's rate is recomputed when its tags are (SENIC's scaled rates), so a change of the classes that hold packets reaches a class one packet late".into(),
    );
    let caps =
        policy.buffer_bytes.is_some() || policy.tenants.iter().any(|t| t.buffer_bytes.is_some());
    if caps {
        out.exact
            .push("buffer caps (packet accounting at admission)".into());
    }
    out
}

#[cfg(all(test, debug_assertions))]
mod invariants {
    use super::*;

    fn packet(tenant: u16) -> Packet {
        crate::testkit::tenant_packet(tenant, 16)
    }

    fn two_tenants() -> Wf2q {
        let policy = policy::parse_policy(
            "link: { rate: 10Gbit }\ntenants:\n  - { name: a }\n  - { name: b }\n",
            "p.yaml",
        )
        .unwrap();
        Wf2q::new(&policy, Config::default()).unwrap()
    }

    #[test]
    #[should_panic(expected = "no class is eligible before S <= V")]
    fn a_start_tag_moved_while_its_class_waits_trips_eligibility() {
        let mut wf2q = two_tenants();
        for tenant in [0, 0, 1, 1] {
            wf2q.enqueue(0, packet(tenant)).unwrap();
        }
        // Each tenant's tags run at half the link: a's first packet leaves, and its
        // second waits for V to reach S = F = 32 byte-times.
        assert!(wf2q.dequeue(0).is_some());
        let head = wf2q.class[0].fifo.head as usize;
        assert_eq!(wf2q.head_start_v[head], 32 << V_FRAC_BITS);
        wf2q.head_start_v[head] = 1 << 40;
        // b's packet takes V to 32 byte-times, where the queue hands a back.
        assert!(wf2q.dequeue(0).is_some());
        wf2q.dequeue(0);
    }

    #[test]
    #[should_panic(expected = "a rate gives")]
    fn a_class_rate_of_nothing_trips_its_tag() {
        let mut wf2q = two_tenants();
        for _ in 0..2 {
            wf2q.enqueue(0, packet(0)).unwrap();
        }
        wf2q.v_per_byte[0] = (wf2q.epoch, 0.0);
        wf2q.dequeue(0);
    }
}
