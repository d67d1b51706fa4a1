//! # `wf2q`: SENIC's rate-limited WF2Q+
//!
//! Radhakrishnan et al., "SENIC: Scalable NIC for End-Host Rate Limiting", NSDI 2014,
//! §3.2 (the unified scheduler) and §3.3 (the two-level hierarchy), built on
//! Bennett and Zhang's WF2Q+ (the paper's reference 6). Names follow the paper: S and F are
//! a class's start and finish tags, V the system virtual time, w_i a class's rate,
//! φ the rate oversubscription factor, R the link's drain rate.
//!
//! ## The model
//!
//! Every leaf class (an app, or one split class of an app created on demand by
//! [`Classes`]) is a FIFO of packets; only its head packet carries tags:
//!
//! ```text
//! S_i = max(F_i, V)  when the class becomes backlogged,   S_i = F_i  after each dequeue
//! F_i = S_i + L / w_i                                     (L: head packet's length)
//! ```
//!
//! A class is eligible when S_i <= V; among eligible classes the smallest F_i goes
//! first. V is real time measured in bytes at the link's rate, slowed when the
//! backlogged classes ask for more than the link has:
//!
//! ```text
//! V(t + τ) = V(t) + R·τ / max(1, φ),   φ = Σ_{backlogged} w_i / R
//! ```
//!
//! so a class alone at 4 Gbit/s on a 10 Gbit/s link gets exactly 4 Gbit/s and the link
//! idles 60 % (strict limits), and limits that add up to more than R fall back to
//! shares proportional to the limits. [`Enforcer::next_ready_ns`] is the instant V
//! reaches the smallest start tag.
//!
//! ## Scaled rates: tenant, app, split class
//!
//! SENIC computes tags for leaves only; a leaf's w_i is its configured rate scaled to
//! its parent's current rate (§3.3: `w_i^scaled = min(w_i, w_L1 · w_i / φ_L1)`). We
//! apply the same rule at every level of the policy tree (link → tenant → app →
//! split class), with one refinement for classes that have no limit: each node
//! offers its parent a *share* (ω, limited?):
//!
//! - a tenant or app with `max_rate` offers ω = max_rate, limited (SENIC's sharing in
//!   the ratio of limits); one without offers its weighted share of the link or of
//!   its tenant from [`policy::ideal_allocation`] with everything backlogged,
//!   unlimited; a split class offers `split.max_rate`, limited;
//! - a node whose backlogged children are all limited offers no more than they can
//!   take: min(ω, Σ limited ω of its children), limited when that is below ω.
//!
//! A node running at rate P with backlogged limited children summing to L and
//! unlimited ones to U gives its child of share ω the rate
//!
//! ```text
//! unlimited children absorb the slack:  b = (P - L) / U  when U > 0 and P > L + U, else 1
//! everyone scales down when oversubscribed:  s = min(1, P / (L + U·b))
//! w_child = ω · (b if unlimited else 1) · s
//! ```
//!
//! At the link the scale-down s is not applied to the rates: it is V's slowdown by φ
//! above, exactly as SENIC's flat scheduler. The sums are kept incrementally when a
//! class becomes backlogged or empty (O(depth) = O(3)), and w_i is computed when a
//! tag is, so per-packet work does not depend on the number of classes.
//!
//! When no backlogged class is limited anywhere (the link's L is 0), the scheduler is
//! plain work-conserving WF2Q+: if nothing is eligible V jumps to the smallest start
//! tag (WF2Q+'s `V = max(V, min S)`), so rounding never idles the link.
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
//! - A class's w_i is what its level alone would get of the tenant's rate P (the sums
//!   above, kept per level): it does not change when a more urgent app comes and goes,
//!   and a level alone takes the whole tenant.
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
//!   P·t + C + one packet, so a more urgent app's bytes come out of the less urgent
//!   levels' part, and the tenant keeps its share whatever the mix, limits included.
//!   C keeps the credit of a level that WF2Q+ served late (F behind V) instead of
//!   losing it to every probe packet.
//! - Eligible classes of a level above its tenant's least urgent one wait on their own
//!   wheel, served before the other eligible classes: a prioritised packet leaves at
//!   the next dequeue once eligible (S <= V), ahead of other tenants' overdue classes
//!   too. No tenant loses rate to this, since a prioritised class is eligible only
//!   within its own w_i <= P, but another tenant's packet may wait one prioritised
//!   packet per eligible prioritised class. With three or more levels the middle ones
//!   are strict in throughput (S_k), and go in F order with the most urgent one.
//!
//! Why not the alternatives: a true two-level H-WF2Q+ (tenants filed by their own
//! tags, apps picked inside) would need per-tenant wheels for app limits and split
//! classes and would pace a tenant's capped apps at the tenant's rate, changing
//! SENIC's Fig. 4 schedule with app limits in one tenant; recomputing a class's F when
//! its rate changes would touch every backlogged sibling (split classes included) on
//! each backlog change and needs removal from the wheels. The level tags cost
//! O(levels of the tenant) per packet of a multi-level tenant and nothing elsewhere.
//!
//! ## Fixed point and constants
//!
//! - V, S and F are `u64` in units of 2^-[`V_FRAC_BITS`] byte-times at R (12 bits:
//!   a 64-byte packet's tag increment keeps 18 significant bits at any rate ratio).
//!   V starts at 0 when the enforcer is built and lasts 2^52 bytes of link time,
//!   about 100 hours at 100 Gbit/s (1000 at 10 Gbit/s), longer than any run; the
//!   timing wheels below need absolute ticks, which is why V does not wrap.
//! - A tag increment is capped at [`COST_V_MAX`] (2^50 units = 2^38 bytes at R): a
//!   class slower than R/2^22 (2.4 kbit/s on 10 Gbit/s) is served at that rate, so
//!   no single packet can push a tag past V's lifetime.
//! - V's speed is kept as V units per ns in 32.32 fixed point and V is recomputed from
//!   a reference point (V_ref at t_ref) that moves only when φ changes, so rounding
//!   never accumulates over packets.
//!
//! ## Data structures and cost
//!
//! Backlogged classes wait in one of the hierarchical timing wheels
//! ([`WheelSlots`], shared with the `wheel` enforcer): *ineligible* filed by S
//! rounded up to a byte-time (so no class is eligible before S <= V, and none later
//! than one byte-time after: eligibility, and so every limit and SENIC's Fig. 4
//! schedule, stays exact), *eligible* filed by F in ticks of 2^6 byte-times
//! ([`F_TICK_BITS`]). A dequeue pops the ineligible wheel up to V into the eligible
//! one and takes the eligible wheel's first item: the smallest F to within one
//! F tick, ties FIFO. That grouping (QFQ's, with a fixed slot size) lets a class
//! whose F is up to 64 byte-times of V larger go first: each class's service lag
//! grows by at most that one tick over WF2Q+'s bound, less than a minimum-size
//! packet at R, and in exchange an item cascades one level fewer. A class whose F lies
//! below the last one served is filed at the wheel's current tick, which keeps the
//! order among those still waiting exact. Eligible classes of prioritised apps have a
//! second eligible wheel, *urgent*, taken before the other (strict levels above).
//! All are O(1) per packet plus at most 10 cascades per item; a binary heap keyed by
//! F was measured first and spent half its time popping when classes of equal rates
//! became eligible together (50 k at a time at 100 k classes).
//!
//! Per class: one 32-byte record (F, the wheel link and tick, FIFO head and tail,
//! app), aligned so a packet touches one cache line of it; the wheels keep their
//! links there ([`Links`]), one link for all three since a class waits on one wheel
//! at a time. S is not kept: it is only needed when the class is filed. Beside it, the
//! class map's entry ([`Classes`]). w_i is cached per app until the backlogged set
//! changes, so a tag costs a multiply. Packets sit in a preallocated descriptor pool
//! (`slab`).
//!
//! Approximations, stated by [`approximation`]: tenant priorities become weights (×16
//! per level); app priorities are strict levels as above, within C of credit, with
//! prioritised classes served ahead of other tenants' eligible ones; guarantees are
//! not expressed; weights among capped classes give way to the ratio of the caps when
//! the caps oversubscribe their parent.

pub(crate) mod slab;

use crate::classes::{ClassId, Classes};
use crate::wheel::timing::{Links, WheelSlots};
use crate::{Accounting, Approximation, Enforcer, Frame, Packet, Refusal, TenantCounters};
use policy::{Policy, format_rate, format_size};
use slab::{List, Slab};

/// Fractional bits of V, S and F below one byte-time (see the module docs).
pub const V_FRAC_BITS: u32 = 12;
/// The eligible wheel's tick is 2^6 byte-times (see the module docs): coarser than
/// the ineligible wheel's, whose byte-time ticks keep eligibility exact.
pub const F_TICK_BITS: u32 = V_FRAC_BITS + 6;
/// Largest tag increment of one packet, in V units (see the module docs).
pub const COST_V_MAX: u64 = 1 << 50;
/// Fractional bits of V's speed (V units per ns).
const SPEED_FRAC_BITS: u32 = 32;
/// How much more weight each more urgent tenant priority level gets, since WF2Q+ has
/// no strict priority: 16 keeps a higher level above 94 % against one equal-weight
/// lower tenant without starving the lower level. (App priorities are strict levels
/// inside their tenant: module docs.)
pub const PRIORITY_WEIGHT_FACTOR: u32 = 16;
/// How far behind V a tenant's start tag of a less urgent app priority level may lag
/// (module docs): two TSO sends, more than the lag WF2Q+ leaves a class served late.
pub const LEVEL_CREDIT_BYTES: u64 = 128 * 1024;
/// Levels beyond this many get no further factor, so weights stay within u32.
const PRIORITY_LEVELS_MAX: u32 = 7;

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

/// What a node offers its parent while it has backlogged leaves below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Share {
    bps: u64,
    limited: bool,
}

/// A tenant, an app, or the link: its own share and the sums of its backlogged
/// children's shares.
#[derive(Clone, Copy, Debug, Default)]
struct Node {
    omega_bps: u64,
    limited: bool,
    limited_sum_bps: u64,
    unlimited_sum_bps: u64,
    active_children: u32,
}

impl Node {
    fn new(omega_bps: u64, limited: bool) -> Self {
        Node {
            omega_bps: omega_bps.max(1),
            limited,
            ..Node::default()
        }
    }

    fn contribution(&self) -> Option<Share> {
        if self.active_children == 0 {
            None
        } else if self.unlimited_sum_bps > 0 {
            Some(Share {
                bps: self.omega_bps,
                limited: self.limited,
            })
        } else {
            Some(Share {
                bps: self.omega_bps.min(self.limited_sum_bps),
                limited: self.limited || self.limited_sum_bps < self.omega_bps,
            })
        }
    }

    fn apply(&mut self, old: Option<Share>, new: Option<Share>) {
        if let Some(s) = old {
            let sum = if s.limited {
                &mut self.limited_sum_bps
            } else {
                &mut self.unlimited_sum_bps
            };
            debug_assert!(*sum >= s.bps);
            *sum -= s.bps;
            self.active_children -= 1;
        }
        if let Some(s) = new {
            if s.limited {
                self.limited_sum_bps += s.bps;
            } else {
                self.unlimited_sum_bps += s.bps;
            }
            self.active_children += 1;
        }
    }

    /// The rate of a backlogged child offering `child` while this node runs at
    /// `rate_bps` (module docs: b and s).
    fn child_rate(&self, rate_bps: f64, child: Share, scale_down: bool) -> f64 {
        let l = self.limited_sum_bps as f64;
        let u = self.unlimited_sum_bps as f64;
        let boosted = u > 0.0 && rate_bps > l + u;
        let omega = child.bps as f64;
        let mut w = if boosted && !child.limited {
            omega * (rate_bps - l) / u
        } else {
            omega
        };
        let demand = if boosted { rate_bps } else { l + u };
        if scale_down && demand > rate_bps {
            w *= rate_bps / demand;
        }
        w
    }
}

/// A leaf class's state, all that a packet of it touches in one 32-byte record
/// (one cache line): F, the FIFO, and the link of whichever wheel holds the class (it
/// waits on one at a time). S is needed only when the class is filed, so it is not
/// kept.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct ClassState {
    finish_v: u64,
    /// The tick the class is filed at, on whichever wheel holds it.
    tick: u64,
    /// The next class in the same wheel slot.
    next: u32,
    app: u32,
    fifo: List,
}

const _: () = assert!(std::mem::size_of::<ClassState>() == 32);

impl Links for Vec<ClassState> {
    #[inline]
    fn next(&self, item: u32) -> u32 {
        self[item as usize].next
    }
    #[inline]
    fn set_next(&mut self, item: u32, next: u32) {
        self[item as usize].next = next;
    }
    #[inline]
    fn tick(&self, item: u32) -> u64 {
        self[item as usize].tick
    }
    #[inline]
    fn set_tick(&mut self, item: u32, tick: u64) {
        self[item as usize].tick = tick;
    }
}

pub struct Wf2q {
    link_bps: u64,
    classes: Classes,
    accounting: Accounting,
    slab: Slab,
    class: Vec<ClassState>,
    root: Node,
    tenant: Vec<Node>,
    app: Vec<Node>,
    app_tenant: Vec<u16>,
    /// The share an app offers as a leaf (apps without split).
    app_leaf: Vec<Share>,
    /// `split.max_rate` of each app with split.
    split_bps: Vec<u64>,
    /// Eligible classes, filed by F in byte-time ticks.
    eligible: WheelSlots,
    /// Eligible classes of prioritised apps (module docs: strict priority), served
    /// before `eligible`, filed the same way.
    urgent: WheelSlots,
    /// Backlogged classes waiting for V, filed by S in byte-time ticks.
    ineligible: WheelSlots,
    v_ref: u64,
    t_ref_ns: u64,
    /// V units per ns at R, 32.32 fixed point.
    speed_link_fx: u128,
    speed_fx: u128,
    /// Bumped whenever the backlogged set changes, invalidating `v_per_byte`.
    epoch: u64,
    /// Per app: (epoch, V units per byte at its leaves' current w_i).
    v_per_byte: Vec<(u64, f64)>,
    /// Per app of a tenant with more than one app priority level: its level's node
    /// in `level`; [`NO_LEVEL`] in a tenant of one level.
    app_level: Vec<u32>,
    /// Per app: whether a less urgent level of its tenant exists, so that its eligible
    /// classes wait in `urgent`.
    app_urgent: Vec<bool>,
    /// Per tenant: the first of its level nodes in `level` and how many (none for a
    /// tenant of one level), most urgent first.
    tenant_levels: Vec<(u32, u32)>,
    /// One node per app priority level of each multi-level tenant: the backlogged
    /// sums of that level's apps alone, which give its classes their w_i.
    level: Vec<Node>,
    /// Per level node: its tenant's start tag for it (module docs: strict priority),
    /// advanced at the tenant's rate by every packet of it and of more urgent levels;
    /// a class of the level is not served before V reaches it. Stays 0 for a tenant's
    /// most urgent level.
    level_start_v: Vec<u64>,
    /// Per tenant: (epoch, V units per byte at its current rate), as `v_per_byte`.
    tenant_v_per_byte: Vec<(u64, f64)>,
}

/// `app_level` of an app whose tenant has a single priority level.
const NO_LEVEL: u32 = u32::MAX;

/// A copy of `policy` with tenant priorities turned into weights, app priorities,
/// guarantees and split dropped, for the ideal allocation that gives unlimited nodes
/// their ω. App priorities are strict levels (module docs), within which only the
/// ratio of the ω of unlimited apps matters, so their plain weights serve.
fn flattened(policy: &Policy) -> Policy {
    fn factor(priority: u8, levels: &[u8]) -> u32 {
        let below = levels.iter().filter(|&&p| p > priority).count() as u32;
        PRIORITY_WEIGHT_FACTOR.pow(below.min(PRIORITY_LEVELS_MAX))
    }
    let mut flat = policy.clone();
    let tenant_levels: Vec<u8> = policy.tenants.iter().map(|t| t.priority).collect();
    for t in &mut flat.tenants {
        t.weight = t.weight.saturating_mul(factor(t.priority, &tenant_levels));
        t.priority = 0;
        t.min_rate_bps = None;
    }
    for app in &mut flat.apps {
        app.priority = 0;
        app.min_rate_bps = None;
        app.split = None;
    }
    flat
}

impl Wf2q {
    pub fn new(policy: &Policy, config: Config) -> Result<Self, String> {
        let link_bps = policy.link.rate_bps;
        if link_bps == 0 {
            return Err("link rate must be positive".into());
        }
        let backlogged = vec![vec![f64::INFINITY]; policy.apps.len()];
        let ideal = policy::ideal_allocation(&flattened(policy), &backlogged);
        let tenant = policy
            .tenants
            .iter()
            .zip(&ideal.tenant_bps)
            .map(|(t, &ideal_bps)| match t.max_rate_bps {
                Some(max) => Node::new(max, true),
                None => Node::new(ideal_bps as u64, false),
            })
            .collect();
        let app_leaf: Vec<Share> = policy
            .apps
            .iter()
            .zip(&ideal.app_bps)
            .map(|(a, &ideal_bps)| match a.max_rate_bps {
                Some(max) => Share {
                    bps: max.max(1),
                    limited: true,
                },
                None => Share {
                    bps: (ideal_bps as u64).max(1),
                    limited: false,
                },
            })
            .collect();
        let app = app_leaf
            .iter()
            .map(|s| Node::new(s.bps, s.limited))
            .collect();
        let classes = Classes::new(policy, config.classes_max);
        // App priority levels: a node per distinct priority of a tenant's apps, for
        // tenants with more than one.
        let mut app_level = vec![NO_LEVEL; policy.apps.len()];
        let mut app_urgent = vec![false; policy.apps.len()];
        let mut tenant_levels = Vec::with_capacity(policy.tenants.len());
        let mut levels_total = 0u32;
        for t in &policy.tenants {
            let priorities: std::collections::BTreeSet<u8> =
                t.apps.iter().map(|&a| policy.app(a).priority).collect();
            if priorities.len() < 2 {
                tenant_levels.push((levels_total, 0));
                continue;
            }
            for &a in &t.apps {
                let rank = priorities
                    .iter()
                    .position(|&p| p == policy.app(a).priority)
                    .expect("collected above");
                app_level[a.index()] = levels_total + rank as u32;
                app_urgent[a.index()] = rank + 1 < priorities.len();
            }
            tenant_levels.push((levels_total, priorities.len() as u32));
            levels_total += priorities.len() as u32;
        }
        let speed_link_fx =
            (u128::from(link_bps) << (V_FRAC_BITS + SPEED_FRAC_BITS)) / 8_000_000_000;
        Ok(Wf2q {
            link_bps,
            class: Vec::with_capacity(classes.capacity()),
            eligible: WheelSlots::new(),
            urgent: WheelSlots::new(),
            ineligible: WheelSlots::new(),
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
            root: Node::new(link_bps, true),
            tenant,
            app,
            app_tenant: policy.apps.iter().map(|a| a.tenant.0).collect(),
            app_leaf,
            split_bps: policy
                .apps
                .iter()
                .map(|a| a.split.map_or(0, |s| s.max_rate_bps.max(1)))
                .collect(),
            v_ref: 0,
            t_ref_ns: 0,
            speed_link_fx,
            speed_fx: speed_link_fx,
            epoch: 1,
            v_per_byte: vec![(0, 0.0); policy.apps.len()],
            app_level,
            app_urgent,
            tenant_levels,
            level: vec![Node::default(); levels_total as usize],
            level_start_v: vec![0; levels_total as usize],
            tenant_v_per_byte: vec![(0, 0.0); policy.tenants.len()],
        })
    }

    fn v_at(&self, now_ns: u64) -> u64 {
        let elapsed = u128::from(now_ns.saturating_sub(self.t_ref_ns));
        self.v_ref + ((elapsed * self.speed_fx) >> SPEED_FRAC_BITS) as u64
    }

    fn rebase_v(&mut self, now_ns: u64, v: u64) {
        self.v_ref = v;
        self.t_ref_ns = now_ns;
    }

    /// V's speed for the link's current φ: R, or R/φ when oversubscribed.
    fn update_speed(&mut self) {
        let demand = self.root.limited_sum_bps + self.root.unlimited_sum_bps;
        self.speed_fx = if demand > self.link_bps {
            self.speed_link_fx * u128::from(self.link_bps) / u128::from(demand)
        } else {
            self.speed_link_fx
        };
    }

    fn is_split(&self, class: usize) -> bool {
        class >= self.app.len()
    }

    fn leaf_share(&self, class: usize) -> Share {
        let app = self.class[class].app as usize;
        if self.is_split(class) {
            Share {
                bps: self.split_bps[app],
                limited: true,
            }
        } else {
            self.app_leaf[app]
        }
    }

    /// Adds or removes `class` from the backlogged sums up to the link.
    fn set_backlogged(&mut self, now_ns: u64, class: usize, backlogged: bool) {
        self.epoch += 1;
        let leaf = self.leaf_share(class);
        let (old, new) = if backlogged {
            (None, Some(leaf))
        } else {
            (Some(leaf), None)
        };
        let app = self.class[class].app as usize;
        let (old, new) = if self.is_split(class) {
            let node = &mut self.app[app];
            let before = node.contribution();
            node.apply(old, new);
            (before, node.contribution())
        } else {
            (old, new)
        };
        let level = self.app_level[app];
        if level != NO_LEVEL {
            self.level[level as usize].apply(old, new);
        }
        let node = &mut self.tenant[usize::from(self.app_tenant[app])];
        let before = node.contribution();
        node.apply(old, new);
        let after = node.contribution();
        if before != after {
            let v = self.v_at(now_ns);
            self.rebase_v(now_ns, v);
            self.root.apply(before, after);
            self.update_speed();
        }
    }

    /// w_i of a backlogged class, scaled down the tree (module docs). In a tenant of
    /// several app priority levels, an app's rate is what its level alone would get
    /// of the tenant's.
    fn rate_bps(&self, class: usize) -> f64 {
        let app = self.class[class].app as usize;
        let tenant = &self.tenant[usize::from(self.app_tenant[app])];
        let tenant_share = tenant.contribution().expect("class is backlogged");
        let tenant_bps = self
            .root
            .child_rate(self.link_bps as f64, tenant_share, false);
        let level = self.app_level[app];
        let parent = if level == NO_LEVEL {
            tenant
        } else {
            &self.level[level as usize]
        };
        if self.is_split(class) {
            let app_node = &self.app[app];
            let app_share = app_node.contribution().expect("class is backlogged");
            let app_bps = parent.child_rate(tenant_bps, app_share, true);
            app_node.child_rate(app_bps, self.leaf_share(class), true)
        } else {
            parent.child_rate(tenant_bps, self.app_leaf[app], true)
        }
    }

    /// After a packet of `app` of `len_bytes` left at `v`: its tenant's start tag of
    /// its level and of every less urgent one moves on by L at the tenant's rate,
    /// from no earlier than [`LEVEL_CREDIT_BYTES`] before V (module docs).
    #[inline]
    fn advance_levels<const LEVELS: bool>(&mut self, app: usize, len_bytes: u32, v: u64) {
        if !LEVELS {
            return;
        }
        let level = self.app_level[app];
        if level == NO_LEVEL {
            return;
        }
        let tenant = usize::from(self.app_tenant[app]);
        let (epoch, cached) = self.tenant_v_per_byte[tenant];
        let v_per_byte = if epoch == self.epoch {
            cached
        } else {
            let share = self.tenant[tenant]
                .contribution()
                .expect("the tenant is backlogged until after this call");
            let tenant_bps = self.root.child_rate(self.link_bps as f64, share, false);
            let fresh = self.link_bps as f64 / tenant_bps * f64::from(1u32 << V_FRAC_BITS);
            self.tenant_v_per_byte[tenant] = (self.epoch, fresh);
            fresh
        };
        let cost = ((f64::from(len_bytes) * v_per_byte).ceil() as u64).clamp(1, COST_V_MAX);
        let credit = ((LEVEL_CREDIT_BYTES as f64 * v_per_byte) as u64).min(COST_V_MAX);
        let floor = v.saturating_sub(credit);
        let (first, count) = self.tenant_levels[tenant];
        // The most urgent level answers to no one: its start tag stays 0.
        for less_urgent in level.max(first + 1)..first + count {
            let start = &mut self.level_start_v[less_urgent as usize];
            *start = (*start).max(floor) + cost;
        }
    }

    /// The earliest start tag `class` may have: its tenant's for its level.
    #[inline]
    fn level_start<const LEVELS: bool>(&self, class: usize) -> u64 {
        if !LEVELS {
            return 0;
        }
        let level = self.app_level[self.class[class].app as usize];
        if level == NO_LEVEL {
            0
        } else {
            self.level_start_v[level as usize]
        }
    }

    /// Whether `class`, just taken as eligible at `v`, must wait for its tenant's
    /// start tag of its level (more urgent levels sent since it was tagged); if so
    /// it is tagged again from there and filed as ineligible.
    #[inline]
    fn held_by_tenant<const LEVELS: bool>(&mut self, class: usize, v: u64) -> bool {
        let start_v = self.level_start::<LEVELS>(class);
        if start_v <= v {
            return false;
        }
        let cost = self.cost_v(class, self.head_len(class));
        self.class[class].finish_v = start_v + cost;
        self.place::<LEVELS>(class, start_v, v);
        true
    }

    /// L / w_i in V units, rounded up so a class never exceeds its rate.
    fn cost_v(&mut self, class: usize, len_bytes: u32) -> u64 {
        // All leaves of an app share one w_i, which changes only with the backlogged
        // set: while it stands, a tag costs one multiply instead of the tree walk.
        let app = self.class[class].app as usize;
        let (epoch, cached) = self.v_per_byte[app];
        let v_per_byte = if epoch == self.epoch {
            cached
        } else {
            let fresh =
                self.link_bps as f64 / self.rate_bps(class) * f64::from(1u32 << V_FRAC_BITS);
            self.v_per_byte[app] = (self.epoch, fresh);
            fresh
        };
        let cost = (f64::from(len_bytes) * v_per_byte).ceil();
        (cost as u64).clamp(1, COST_V_MAX)
    }

    fn head_len(&self, class: usize) -> u32 {
        self.slab.get(self.class[class].fifo.head).len_bytes
    }

    /// Files a backlogged class by its new tags (S = `start_v`, F as stored).
    #[inline]
    fn place<const LEVELS: bool>(&mut self, class: usize, start_v: u64, v: u64) {
        if start_v <= v {
            self.file_eligible::<LEVELS>(class as u32);
        } else {
            // Rounded up, so a class never becomes eligible before S <= V.
            let tick = start_v.div_ceil(1 << V_FRAC_BITS);
            self.ineligible.insert(&mut self.class, class as u32, tick);
        }
    }

    /// Files an eligible class by F, on the urgent wheel if its app is prioritised.
    #[inline]
    fn file_eligible<const LEVELS: bool>(&mut self, class: u32) {
        let state = &self.class[class as usize];
        let tick = state.finish_v >> F_TICK_BITS;
        if LEVELS && self.app_urgent[state.app as usize] {
            self.urgent.insert(&mut self.class, class, tick);
        } else {
            self.eligible.insert(&mut self.class, class, tick);
        }
    }

    #[inline]
    fn promote_eligible<const LEVELS: bool>(&mut self, v: u64) {
        while let Some((class, _)) = self
            .ineligible
            .pop_expired(&mut self.class, v >> V_FRAC_BITS)
        {
            self.file_eligible::<LEVELS>(class);
        }
    }

    /// [`Enforcer::dequeue`], for a policy with app priority levels (`LEVELS`) or
    /// without, so that the latter pays nothing for them.
    #[inline]
    fn dequeue_with<const LEVELS: bool>(&mut self, now_ns: u64) -> Option<Frame> {
        let mut v = self.v_at(now_ns);
        self.promote_eligible::<LEVELS>(v);
        let class = loop {
            while self.eligible.is_empty() && (!LEVELS || self.urgent.is_empty()) {
                let start_tick = self.ineligible.next_tick()?;
                if self.root.limited_sum_bps > 0 {
                    return None;
                }
                // WF2Q+'s V = max(V, min S); the wheel's bound may sit below min S, in
                // which case the next round has cascaded it closer.
                v = v.max(start_tick << V_FRAC_BITS);
                self.rebase_v(now_ns, v);
                self.promote_eligible::<LEVELS>(v);
            }
            // The smallest F, prioritised apps first: every eligible tick has expired
            // at u64::MAX.
            let wheel = if !LEVELS || self.urgent.is_empty() {
                &mut self.eligible
            } else {
                &mut self.urgent
            };
            let (class, _) = wheel
                .pop_expired(&mut self.class, u64::MAX)
                .expect("promoted above");
            if !self.held_by_tenant::<LEVELS>(class as usize, v) {
                break class as usize;
            }
        };
        let packet = self.class[class]
            .fifo
            .pop_front(&mut self.slab)
            .expect("a filed class is backlogged");
        self.accounting.release(&packet);
        self.classes.departed(&packet, ClassId(class as u32));
        self.advance_levels::<LEVELS>(self.class[class].app as usize, packet.len_bytes, v);
        if self.class[class].fifo.is_empty() {
            self.set_backlogged(now_ns, class, false);
        } else {
            let cost = self.cost_v(class, self.head_len(class));
            let level_start_v = self.level_start::<LEVELS>(class);
            let state = &mut self.class[class];
            let start_v = state.finish_v.max(level_start_v);
            state.finish_v = start_v + cost;
            self.place::<LEVELS>(class, start_v, v);
        }
        Some(Frame::whole(packet))
    }

    fn refuse(&mut self, packet: Packet) -> Result<(), (Packet, Refusal)> {
        self.accounting.refuse(packet.tenant, packet.len_bytes);
        Err((packet, Refusal::QueueFull))
    }
}

impl Enforcer for Wf2q {
    fn enqueue(&mut self, now_ns: u64, packet: Packet) -> Result<(), (Packet, Refusal)> {
        let Some(ClassId(class)) = self.classes.classify(&packet) else {
            return self.refuse(packet);
        };
        let class = class as usize;
        if self.slab.is_full() {
            return self.refuse(packet);
        }
        if let Err(reason) = self.accounting.admit(&packet) {
            return Err((packet, reason));
        }
        while self.class.len() <= class {
            // Apps take the first ids; a split class is created at its first packet.
            let app = if self.class.len() < self.app.len() {
                self.class.len() as u32
            } else {
                packet.app.0
            };
            let v = self.v_at(now_ns);
            self.class.push(ClassState {
                finish_v: v,
                tick: 0,
                next: slab::NIL,
                app,
                fifo: List::EMPTY,
            });
        }
        let index = self.slab.insert(packet).expect("checked not full");
        let was_idle = self.class[class].fifo.is_empty();
        self.class[class].fifo.push_back(&mut self.slab, index);
        if was_idle {
            self.set_backlogged(now_ns, class, true);
            let v = self.v_at(now_ns);
            let cost = self.cost_v(class, packet.len_bytes);
            let level_start_v = if self.level.is_empty() {
                0
            } else {
                self.level_start::<true>(class)
            };
            let state = &mut self.class[class];
            let start_v = state.finish_v.max(v).max(level_start_v);
            state.finish_v = start_v + cost;
            if self.level.is_empty() {
                self.place::<false>(class, start_v, v);
            } else {
                self.place::<true>(class, start_v, v);
            }
        }
        Ok(())
    }

    fn dequeue(&mut self, now_ns: u64) -> Option<Frame> {
        if self.level.is_empty() {
            self.dequeue_with::<false>(now_ns)
        } else {
            self.dequeue_with::<true>(now_ns)
        }
    }

    fn next_ready_ns(&self, now_ns: u64) -> Option<u64> {
        if self.slab.len() == 0 {
            return None;
        }
        let Some(start_tick) = self.ineligible.next_tick() else {
            return Some(now_ns);
        };
        if !self.eligible.is_empty() || !self.urgent.is_empty() || self.root.limited_sum_bps == 0 {
            return Some(now_ns);
        }
        let ahead = (start_tick << V_FRAC_BITS).saturating_sub(self.v_ref);
        let wait = (u128::from(ahead) << SPEED_FRAC_BITS).div_ceil(self.speed_fx);
        let at = self
            .t_ref_ns
            .saturating_add(wait.min(u128::from(u64::MAX)) as u64);
        Some(at.max(now_ns))
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

/// What `check` says for `wf2q`.
pub fn approximation(policy: &Policy) -> Approximation {
    let mut out = Approximation::default();
    let rate = |bps: u64| format_rate(bps as f64);
    for t in &policy.tenants {
        if let Some(max) = t.max_rate_bps {
            out.exact.push(format!(
                "{}: max_rate {} (strict limit: V runs at link speed, the tenant's rate scales its apps' tags)",
                t.name,
                rate(max)
            ));
        }
        if let Some(min) = t.min_rate_bps {
            out.ignored.push(format!(
                "{}: min_rate {} (SENIC has no guarantees; only weights and limits share the link)",
                t.name,
                rate(min)
            ));
        }
    }
    for a in &policy.apps {
        let tenant = &policy.tenant(a.tenant).name;
        if let Some(max) = a.max_rate_bps {
            out.exact.push(format!(
                "{tenant}/{}: max_rate {} (strict limit, scaled down when its tenant's rate is smaller)",
                a.name,
                rate(max)
            ));
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
                "{tenant}/{}: split into one class per key, each limited to {}, sharing the app's rate equally",
                a.name,
                rate(split.max_rate_bps)
            ));
        }
    }
    out.approximate.push(
        "weights: an unlimited class's rate is its weighted share of the link (or of its tenant) with everything backlogged, scaled up to take what backlogged classes leave; capped siblings that oversubscribe their parent share it in the ratio of their caps (SENIC's fallback), not of their weights".into(),
    );
    let tenant_levels: std::collections::BTreeSet<u8> =
        policy.tenants.iter().map(|t| t.priority).collect();
    if tenant_levels.len() > 1 {
        out.approximate.push(format!(
            "tenant priorities: {} levels become weight factors of {PRIORITY_WEIGHT_FACTOR} per level (no strict priority)",
            tenant_levels.len()
        ));
    }
    for t in &policy.tenants {
        let levels: std::collections::BTreeSet<u8> =
            t.apps.iter().map(|&a| policy.app(a).priority).collect();
        if levels.len() > 1 {
            out.approximate.push(format!(
                "{}: {} app priority levels, strict within the tenant (SENIC has none): a level's classes get the tenant's rate as if alone, and a more urgent level's bytes come out of the less urgent levels' part (a tenant start tag per level, at most {} of credit for a level served late); prioritised classes go before other eligible classes, so another tenant's packet may wait one packet per eligible prioritised class",
                t.name,
                levels.len(),
                format_size(LEVEL_CREDIT_BYTES)
            ));
        }
    }
    out.approximate.push(
        "a class's rate is recomputed when its tags are (SENIC's scaled rates), so a change of the backlogged set reaches a class one packet late".into(),
    );
    let caps =
        policy.buffer_bytes.is_some() || policy.tenants.iter().any(|t| t.buffer_bytes.is_some());
    if caps {
        out.exact
            .push("buffer caps (packet accounting at admission)".into());
    }
    out
}
