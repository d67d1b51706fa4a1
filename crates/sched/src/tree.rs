//! The class tree both token-bucket enforcers ([`crate::valve`] and [`crate::htb`])
//! run on: the policy as link → tenants → apps → split classes, each class with two
//! token buckets, and the selection machinery that finds a class allowed to send in
//! O(depth) per packet.
//!
//! ## Nodes
//!
//! Node 0 is the link (the root); tenant t is node 1 + t; the leaf class c of
//! [`Classes`] is node 1 + T + c, so app a is node 1 + T + a and split classes follow
//! the apps in order of first appearance. An app with `split` is an interior node
//! whose children are its split classes; every other app is a leaf with a FIFO.
//!
//! Under [`Selection::ByLevel`] (`htb`) a tenant whose only app has the tenant's
//! rate and burst and no cap of its own (a tenant without apps, whose implicit
//! `default` takes all it sends) is that app: the app's node hangs from the root
//! with the tenant's ceil, quantum and priority, and the tenant's node stays out of
//! every ring. Kept apart, the two hold the same tokens at every instant: the same
//! rate, burst and debt floor, paid for the same packets, since under HTB's levels
//! every node above the lender pays and the lender is never the tenant while its
//! app is as green as it. So the tenant's node only doubled the walk, the payment
//! and the sync of each packet (`htb`, 1M classes: 53.1 ns a pair with it, 43.1
//! without; the shipped scenarios' figures the same either way). Not under
//! [`Selection::AtEachNode`]: `valve` sets each node's rate from its own estimate,
//! so a tenant's tokens and its app's part.
//!
//! The root, the tenants and the apps are the *fixed* nodes, each a full [`Node`].
//! A split class, of which there may be millions, is a 32-byte [`Leaf`]: the split
//! classes of one app share their ceil, burst and quantum ([`SplitParams`]), have no
//! rate of their own, and only ever sit in their app's rings, so a leaf keeps only
//! what differs from class to class (its ceil bucket, its ring link, its FIFO, its
//! deficit). A full node per split class was 136 B of state per class at 1M classes,
//! and a cache miss of two lines on every visit.
//!
//! ## Buckets and modes (HTB's vocabulary, Linux `sch_htb.c` and Devera's HTB manual)
//!
//! Every node but the root has a *rate* bucket (`tokens`, refilled at `rate_bps`, at
//! most `buffer`) and, when it is capped, a *ceil* bucket (`ctokens`, refilled at
//! `ceil_bps`, at most `cbuffer`). Its mode follows from them:
//! - green (HTB's CAN_SEND): rate tokens left, it may send on its own;
//! - yellow (MAY_BORROW): out of rate tokens but under its ceil, it may send on
//!   tokens an ancestor lends;
//! - red (CANT_SEND): over its ceil; neither it nor anything below it may send.
//!
//! The root has no bucket: the link itself is its limit, so it always lends. A split
//! class's rate is 0 and its burst one quantum: green until it has sent that, it
//! borrows for good after, so its only bucket that changes with time is its ceil.
//!
//! ## Selection
//!
//! Each interior node keeps [`KINDS`] × [`PRIO_LEVELS`] rings of its children that
//! have something to send and are not red: one ring per (kind, priority), and a
//! bitmap of the non-empty rings. A child is in the ring of its kind and, of any
//! kind, in the [`BORROW`] ring of its priority, so that its turns at borrowing
//! keep their order while its own tokens come and go (`Node::rings`). A child's *kind* says where in its subtree the
//! tokens for its next packet come from, best first: 0, a green leaf (the packet
//! needs no lender); 1, a green app lending to its split classes; 2, a green tenant
//! lending to its apps; [`BORROW`], nothing in it can send on its own tokens, the
//! lender is above it. Which kinds a child takes depends on the [`Selection`]:
//! - [`Selection::AtEachNode`] (`valve`): the child's own mode alone, green → 0,
//!   yellow → [`BORROW`]: green before yellow is decided at each node on the way
//!   down, so a green leaf under a yellow tenant waits for the tenant's turn;
//! - [`Selection::ByLevel`] (`htb`): HTB's levels (`sch_htb.c` serves the row of
//!   level 0, the green leaves, then each inner level, deepest first, each by
//!   prio). An interior child takes the best kind among its own children whatever
//!   its own mode, so a child holding a green leaf is of kind 0 and is served
//!   before any class that borrows, anywhere in the tree; when all its children
//!   borrow, it is of its own lending kind if green and [`BORROW`] if yellow.
//!
//! Dequeue walks down from the root taking, at each node, the first non-empty ring
//! (lowest kind, then the lowest priority number) and its head; the rings are
//! deficit round robin (Shreedhar and Varghese, 1995) with a per-node quantum. The
//! deepest node on the walk taken from a ring of a kind below [`BORROW`] is the
//! *lender*. Under [`Selection::ByLevel`] it and its ancestors pay rate tokens, the
//! nodes below it borrowed and pay only ceil tokens (HTB's `htb_charge_class`).
//! Under [`Selection::AtEachNode`] each node taken green pays and each taken
//! yellow borrowed, whatever lies below it: a tenant its parent lends to does not
//! pay for the packet of a green app of its own (it did, and a tenant whose apps
//! often had tokens of their own got a smaller part of what the link lends than
//! one whose single app borrowed: 185.8 against 197.6 Mbit/s, each ideal 191.6).
//! A payer's rate tokens may go
//! negative by a whole packet, however much larger than its burst (64 KiB GSO
//! sends), so nothing it
//! sent is forgiven. Green and yellow both change with time, so a node that
//! is not green waits on a timing wheel of events (HTB's wait queue) for the time its
//! tokens allow it again; an event whose time is no longer the node's is stale and
//! skipped. Under [`Selection::AtEachNode`] an app that goes yellow by paying stays
//! in its green ring until its turn there finds it still yellow ([`Stale`]), as most
//! are green again by then, and so does a split class over its ceil after its turn
//! in the borrowing ring ([`Hierarchy::leaf_sent`]). Per packet: O(depth) ring and
//! bucket updates plus O(1) event work (a binary heap here took 44% of `valve`'s
//! time at 1M classes: twenty levels of cache misses per pop).
//!
//! ## Units
//!
//! Tokens are integers in 10⁻⁹ bit: a rate of r bit/s earns r tokens per nanosecond,
//! so refilling is one multiply and no division, and a byte costs 8·10⁹ tokens.
//! An i64 holds 1.1 GB of burst, far more than any bucket needs.
//!
//! ## Invariants (asserted in debug builds)
//!
//! - Tokens within the bucket's depth: a node's rate tokens lie between its debt
//!   floor (a burst or its largest packet below zero) and its burst, its ceil
//!   tokens at most its ceil burst (below zero by what it sent over its ceil), and
//!   so are a split class's ceil tokens; a refill starts within the depth and
//!   never passes it.
//! - Rates are non-negative, and [`share`] gives each child between nothing and its
//!   demand, at least its guarantee where the guarantees fit, and no more than the
//!   parent has in all, so the children's guarantees are within the parent's.
//! - Backlog counts are consistent: after each enqueue and dequeue the packets held
//!   below a node are at most those held below its parent, and at most the tree's;
//!   [`Hierarchy::assert_counts`] (O(tenants + apps), at `valve`'s rate updates)
//!   checks that the tree's are the tenants' together and each tenant's its apps'.
//! - Nothing is stranded: a tree that holds no packet has no child in a ring of the
//!   root, and one that holds packets has one there or an event pending.

use crate::classes::{ClassId, Classes};
use crate::wheel::timing::{Links, WheelSlots};
use crate::{Accounting, Frame, Packet, Refusal, TenantCounters};
use policy::{AppId, Policy, TenantId};
use std::collections::VecDeque;

/// Priority levels a node's children may use, as in HTB (`TC_HTB_NUMPRIO`); policy
/// priorities above the last share it.
pub const PRIO_LEVELS: usize = 8;

/// Tokens per byte: 8 bits of 10⁹ tokens each.
pub const TOKENS_PER_BYTE: i64 = 8_000_000_000;

const NONE: u32 = u32::MAX;
const NO_SLOT: u8 = u8::MAX;
const NO_EVENT: u64 = u64::MAX;
const UNCAPPED: u64 = u64::MAX;
const ROOT: usize = 0;
/// Levels below the root: tenant, app, split class.
const DEPTH_MAX: usize = 3;
/// Kinds of rings (see the module docs): 0 = a green leaf, 1 = a green app lends,
/// 2 = a green tenant lends, [`BORROW`] = the lender is above.
pub const KINDS: usize = 4;
/// The kind of a child whose subtree has no lender.
pub const BORROW: u8 = KINDS as u8 - 1;
const RINGS: usize = KINDS * PRIO_LEVELS;
const _: () = assert!(RINGS <= 32, "ring bitmap is a u32");

/// How a node ranks its children (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Green children before yellow ones at each node (FlowValve).
    AtEachNode,
    /// Green leaves anywhere before any borrowing, then the deepest lender (HTB).
    ByLevel,
}

/// Whether a sync under [`Selection::AtEachNode`] leaves an app that went yellow
/// in its green ring. A node goes yellow only by paying, and most are green again
/// by their next turn (an app at its share: after one packet of each of its
/// siblings); leaving the ring and filing an event to come back was two ring
/// updates and an event per packet. So it stays, and the dequeue that finds it
/// first in its green ring and still yellow takes it out ([`Stale::Dropped`]) with
/// its event, as the sync when it paid would have.
///
/// A tenant leaves at once. Staying, it kept its place in the root's ring instead
/// of rejoining it in the order tenants turn green, and a weight-31 tenant's six
/// weight-1 neighbours were served 5.7% off their ideals instead of 4.0% (the
/// claims oracle, seed 114); and a core's own-token turns read the root's green
/// rings (a stale tenant there had its core asked for a turn at once, which it
/// passed: a steady sender's core mate 14.8% over its share, `sim --test
/// valve_cores`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stale {
    Kept,
    Dropped,
}

/// Where a dequeue's walk ended ([`Hierarchy::walk`]).
struct Walk {
    /// The fixed nodes taken below the root, `depth` of them.
    path: [u32; DEPTH_MAX],
    depth: usize,
    /// The split class taken, and from which of its app's rings.
    leaf: Option<(usize, LeafRing)>,
    /// Index in `path` of the lender, a split class's being `depth`; `None` when
    /// the root lends.
    lender: Option<usize>,
    /// Which nodes on the path were taken green (from a ring below [`BORROW`]).
    green: [bool; DEPTH_MAX],
    /// The deepest fixed node taken.
    x: usize,
}

/// How a turn on own tokens (in a ring of a kind below [`BORROW`]) ends, when
/// a child's packet overdraws its DRR quantum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GreenTurns {
    /// Its debt is forgiven: one packet per turn at least (see
    /// [`Hierarchy::next_turn`]).
    Forgiven,
    /// Its debt is kept, as in a borrowing ring, so that classes on their own
    /// tokens share by bytes in proportion to their weights whatever their
    /// packet sizes.
    Charged,
}

/// Whether some tenant or app has a priority past the last of [`PRIO_LEVELS`].
pub fn has_priorities_beyond_levels(policy: &Policy) -> bool {
    policy
        .tenants
        .iter()
        .any(|t| usize::from(t.priority) >= PRIO_LEVELS)
        || policy
            .apps
            .iter()
            .any(|a| usize::from(a.priority) >= PRIO_LEVELS)
}

/// Node numbering (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    tenants: usize,
    apps: usize,
}

impl Layout {
    pub fn new(policy: &Policy) -> Self {
        Layout {
            tenants: policy.tenants.len(),
            apps: policy.apps.len(),
        }
    }

    pub fn tenant(&self, tenant: TenantId) -> usize {
        1 + tenant.index()
    }

    pub fn app(&self, app: AppId) -> usize {
        1 + self.tenants + app.index()
    }

    pub fn class(&self, class: ClassId) -> usize {
        1 + self.tenants + class.index()
    }

    /// The leaf class of node `x`, the inverse of [`Layout::class`].
    pub fn class_of(&self, x: usize) -> ClassId {
        ClassId((x - 1 - self.tenants) as u32)
    }

    /// The app of app node `x`, the inverse of [`Layout::app`].
    pub fn app_of(&self, x: usize) -> AppId {
        AppId((x - 1 - self.tenants) as u32)
    }

    /// Nodes that exist from the start: the root, the tenants and the apps.
    pub fn fixed(&self) -> usize {
        1 + self.tenants + self.apps
    }
}

/// What the sharing of one node's capacity sees of a child.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    /// Already capped by the child's max_rate; `f64::INFINITY` = backlogged.
    pub demand_bps: f64,
    pub min_rate_bps: f64,
    pub weight: f64,
    pub priority: u8,
}

/// Shares `capacity_bps` among `claims` as policy.md's ideal does: guarantees first,
/// then priority levels in order, each water-filled by weight up to the demands.
/// Writes into `given` and allocates nothing, so it may run while packets flow.
pub fn share(capacity_bps: f64, claims: &[Claim], given: &mut [f64]) {
    debug_assert_eq!(claims.len(), given.len());
    debug_assert!(
        capacity_bps >= 0.0
            && claims
                .iter()
                .all(|c| c.demand_bps >= 0.0 && c.min_rate_bps >= 0.0 && c.weight >= 0.0),
        "rates are non-negative: {capacity_bps} among {claims:?}"
    );
    for (g, c) in given.iter_mut().zip(claims) {
        *g = c.min_rate_bps.min(c.demand_bps);
    }
    let guaranteed: f64 = given.iter().sum();
    if guaranteed >= capacity_bps {
        // Only a scenario's slower link gets here: guarantees fit the policy's link.
        let scale = if guaranteed > 0.0 {
            capacity_bps / guaranteed
        } else {
            0.0
        };
        given.iter_mut().for_each(|g| *g *= scale);
        debug_assert!(shared_within(capacity_bps, claims, given));
        return;
    }
    let mut left_bps = capacity_bps - guaranteed;
    let mut level = claims.iter().map(|c| c.priority).min();
    while let Some(priority) = level {
        // Each round either satisfies at least one child or hands out all that is
        // left, so it ends after at most one round per child.
        while left_bps > 0.0 {
            let hungry = |given: &[f64], i: usize| {
                claims[i].priority == priority && given[i] < claims[i].demand_bps
            };
            let weight_sum: f64 = (0..claims.len())
                .filter(|&i| hungry(given, i))
                .map(|i| claims[i].weight)
                .sum();
            if weight_sum == 0.0 {
                break;
            }
            let per_weight = left_bps / weight_sum;
            let mut sated = false;
            for i in 0..claims.len() {
                if hungry(given, i)
                    && claims[i].demand_bps - given[i] <= per_weight * claims[i].weight
                {
                    left_bps -= claims[i].demand_bps - given[i];
                    given[i] = claims[i].demand_bps;
                    sated = true;
                }
            }
            if !sated {
                for i in 0..claims.len() {
                    if hungry(given, i) {
                        given[i] += per_weight * claims[i].weight;
                    }
                }
                left_bps = 0.0;
            }
            left_bps = left_bps.max(0.0);
        }
        level = claims
            .iter()
            .map(|c| c.priority)
            .filter(|&p| p > priority)
            .min();
    }
    debug_assert!(
        shared_within(capacity_bps, claims, given),
        "{capacity_bps} shared among {claims:?} as {given:?}"
    );
}

/// [`share`]'s post-condition: each child gets between nothing and its demand, at
/// least its guarantee where the guarantees fit, and no more than the parent has in
/// all (to a float's rounding).
fn shared_within(capacity_bps: f64, claims: &[Claim], given: &[f64]) -> bool {
    let guaranteed = |c: &Claim| c.min_rate_bps.min(c.demand_bps);
    let fit = claims.iter().map(guaranteed).sum::<f64>() < capacity_bps;
    given.iter().sum::<f64>() <= capacity_bps * (1.0 + 1e-9)
        && claims
            .iter()
            .zip(given)
            .all(|(c, &g)| g >= 0.0 && g <= c.demand_bps && (!fit || g >= guaranteed(c)))
}

/// The policy's allocation down to the apps for the given app demands (bit/s,
/// already capped by the apps' max_rate), indexed by fixed node; the root gets the
/// link rate. `claims` and `given` are scratch space, kept by the caller so that
/// nothing is allocated.
pub fn allocate(
    policy: &Policy,
    app_demand_bps: &[f64],
    claims: &mut Vec<Claim>,
    given: &mut Vec<f64>,
    out_bps: &mut [f64],
) {
    let layout = Layout::new(policy);
    let cap = |bps: Option<u64>| bps.map_or(f64::INFINITY, |r| r as f64);
    out_bps[ROOT] = policy.link.rate_bps as f64;
    claims.clear();
    claims.extend(policy.tenants.iter().map(|t| {
        Claim {
            demand_bps: t
                .apps
                .iter()
                .map(|a| app_demand_bps[a.index()])
                .sum::<f64>()
                .min(cap(t.max_rate_bps)),
            min_rate_bps: t.min_rate_bps.unwrap_or(0) as f64,
            weight: f64::from(t.weight),
            priority: t.priority,
        }
    }));
    given.clear();
    given.resize(claims.len(), 0.0);
    share(out_bps[ROOT], claims, given);
    for (t, &bps) in given.iter().enumerate() {
        out_bps[layout.tenant(TenantId(t as u16))] = bps;
    }
    share_among_apps(policy, app_demand_bps, claims, given, out_bps);
}

/// Shares each tenant's part in `out_bps` among its apps for the given app demands,
/// as [`allocate`]'s second level does.
pub fn share_among_apps(
    policy: &Policy,
    app_demand_bps: &[f64],
    claims: &mut Vec<Claim>,
    given: &mut Vec<f64>,
    out_bps: &mut [f64],
) {
    let layout = Layout::new(policy);
    for (t, tenant) in policy.tenants.iter().enumerate() {
        let capacity_bps = out_bps[layout.tenant(TenantId(t as u16))];
        claims.clear();
        claims.extend(tenant.apps.iter().map(|&a| {
            let app = policy.app(a);
            Claim {
                demand_bps: app_demand_bps[a.index()],
                min_rate_bps: app.min_rate_bps.unwrap_or(0) as f64,
                weight: f64::from(app.weight),
                priority: app.priority,
            }
        }));
        given.clear();
        given.resize(claims.len(), 0.0);
        share(capacity_bps, claims, given);
        for (&a, &bps) in tenant.apps.iter().zip(given.iter()) {
            out_bps[layout.app(a)] = bps;
        }
    }
}

/// The allocation when every app is backlogged (an app's demand is its max_rate),
/// indexed by fixed node.
pub fn backlogged_rates_bps(policy: &Policy) -> Vec<f64> {
    rates_for_bps(policy, |_| true)
}

/// Each fixed node's part of the ideal allocation when the apps `backlogged` picks
/// are, and the others idle.
pub fn rates_for_bps(policy: &Policy, backlogged: impl Fn(&policy::App) -> bool) -> Vec<f64> {
    let mut out = vec![0.0; Layout::new(policy).fixed()];
    allocate(
        policy,
        &demand_for_bps(policy, backlogged),
        &mut Vec::new(),
        &mut Vec::new(),
        &mut out,
    );
    out
}

/// Each app's demand when the apps `backlogged` picks are (their max_rate, or
/// unbounded) and the others idle, indexed by app.
pub fn demand_for_bps(policy: &Policy, backlogged: impl Fn(&policy::App) -> bool) -> Vec<f64> {
    policy
        .apps
        .iter()
        .map(|a| match (backlogged(a), a.max_rate_bps) {
            (false, _) => 0.0,
            (true, cap) => cap.map_or(f64::INFINITY, |r| r as f64),
        })
        .collect()
}

/// A node's configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeParams {
    pub rate_bps: u64,
    pub buffer_bytes: u64,
    /// `None`: uncapped here (an ancestor's cap still holds).
    pub ceil_bps: Option<u64>,
    pub cbuffer_bytes: u64,
    pub quantum_bytes: u32,
    pub prio: u8,
}

/// The configuration every split class of one app shares. A split class has no
/// rate of its own: it starts with one quantum of rate tokens, which it may send
/// green, and after that only borrows from its app.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplitParams {
    pub ceil_bps: u64,
    pub cbuffer_bytes: u64,
    pub quantum_bytes: u32,
}

/// A split app: its split classes' shared configuration and its rings of them.
#[derive(Clone, Copy, Debug)]
struct SplitApp {
    ceil_bps: u64,
    cbuffer: i64,
    quantum: i32,
    /// The last leaf of its green ring and of its borrowing ring ([`LeafRing`]);
    /// each ring is singly linked and circular, so the first is the last's `next`.
    tails: [u32; 2],
    /// The leaf that left the borrowing ring in the middle of its turn while still
    /// holding packets (see `Hierarchy::resumes`).
    resume: u32,
    /// Its leaves that hold packets, and the most of them at once since the last
    /// [`Hierarchy::take_split_peak`].
    held: u32,
    held_peak: u32,
}

/// The rings of a split app: a split class is green until it has spent its burst,
/// and borrows after, so its kind is [`GREEN_LEAF`] or [`BORROW`] and its priority
/// is its siblings' (all of them are of the one app), ring 0 of the kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeafRing {
    Green,
    Borrowing,
}

/// The kind of a green leaf (see the module docs).
const GREEN_LEAF: u8 = 0;

impl LeafRing {
    fn slot(self) -> u8 {
        match self {
            LeafRing::Green => GREEN_LEAF * PRIO_LEVELS as u8,
            LeafRing::Borrowing => BORROW * PRIO_LEVELS as u8,
        }
    }
}

/// A split class's deficit while it spends its burst is stored as this plus its
/// green deficit (see [`Leaf::deficit`]).
const SPENDING: i32 = i32::MIN;

/// A split class: 32 bytes, a quarter of a [`Node`]. Its rate bucket needs no
/// word of its own: with no rate, its tokens are its initial burst less what it sent
/// green, and the burst being one quantum, that is its green deficit.
#[derive(Clone, Copy, Debug)]
struct Leaf {
    ctokens: i64,
    /// When `ctokens` was last brought up to date.
    t_c_ns: u64,
    /// The next leaf in its app's ring; [`NONE`] when it is in none.
    next: u32,
    /// The slab index of its last packet, whose `slab_next` is its first: the FIFO
    /// is circular, so one word holds both ends.
    tail: u32,
    /// Its DRR deficit in one of its app's two rings. While it spends its burst it is
    /// green and this is [`SPENDING`] plus its green deficit, which is also its rate
    /// tokens left in bytes (both start at one quantum and fall by each packet it
    /// sends green); once that goes below zero it only ever borrows, and this is its
    /// deficit in the borrowing ring, which stays above −2³⁰ for packets and quanta
    /// of under 1 GiB, far from [`SPENDING`].
    deficit: i32,
    /// Its app's index: `policy::limits::APPS_MAX` apps fit 16 bits.
    app: u16,
    /// Packets it holds, for its app's dynamic thresholds
    /// ([`crate::accounting`]).
    packets: u16,
}

impl Leaf {
    fn new(app: AppId, split: &SplitApp, now_ns: u64) -> Self {
        Leaf {
            ctokens: split.cbuffer,
            t_c_ns: now_ns,
            next: NONE,
            tail: NONE,
            deficit: SPENDING + split.quantum,
            app: u16::try_from(app.0).expect("apps fit 16 bits (policy::limits::APPS_MAX)"),
            packets: 0,
        }
    }

    /// The ring it belongs in while it may send: green while its burst lasts.
    fn ring(&self) -> LeafRing {
        if self.deficit < SPENDING / 2 {
            LeafRing::Green
        } else {
            LeafRing::Borrowing
        }
    }

    /// Its ceil tokens at `now_ns`.
    fn ctokens_at(&self, split: &SplitApp, now_ns: u64) -> i64 {
        let dt_ns = now_ns.saturating_sub(self.t_c_ns);
        refill(self.ctokens, split.ceil_bps, dt_ns, split.cbuffer)
    }
}

/// What a node's packets are held by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holds {
    /// A FIFO of its own: an app without split.
    Fifo,
    /// Child nodes: the root and the tenants.
    Nodes,
    /// Split classes ([`Leaf`]): an app with split.
    Leaves,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Green,
    Yellow,
    Red,
}

/// A fixed node: the root, a tenant or an app.
#[derive(Clone, Copy, Debug)]
struct Node {
    tokens: i64,
    ctokens: i64,
    buffer: i64,
    cbuffer: i64,
    rate_bps: u64,
    ceil_bps: u64,
    /// When the buckets were last brought up to date.
    t_c_ns: u64,
    /// The time of this node's live heap entry.
    event_ns: u64,
    sent_bytes: u64,
    /// Tokens of the deepest debt it may run into besides its burst: the largest
    /// packet it has paid rate tokens for and, under [`Selection::ByLevel`], the
    /// sum of its children's bursts, which they may send green at once.
    debt_max: i64,
    /// DRR deficit in the parent's rings of a kind below [`BORROW`] and in its
    /// [`BORROW`] rings: turns on own tokens and turns at borrowing are separate
    /// rounds (HTB keeps a deficit per level for the same reason).
    deficit: [i32; 2],
    quantum: i32,
    parent: u32,
    /// Its places in its parent's rings: [`OWN`], a ring of a kind below
    /// [`BORROW`], while it is green or holds a green child; [`BORROWING`], its
    /// [`BORROW`] ring, while it holds packets and is under its ceil, green or
    /// not. A borrower that its own tokens turn green for a packet or two so
    /// keeps its place in the borrowing round: sent to the ring's tail each time,
    /// one that turned green more often than the ring took a round never reached
    /// its turn (weights 3, 1 and 4 beside an idle tenant of 6: the weight-3
    /// tenant borrowed 8 packets of 1500 B in 4 s where the weight-4 one
    /// borrowed 23 926). Linux's HTB keeps its classes in a ring by classid for
    /// the same effect. The borrowing ring is taken only when no ring below it
    /// holds anyone, so every class in it is yellow when it is.
    rings: [RingPlace; 2],
    /// Packets held in the subtree.
    queued: u32,
    /// Whether it held packets while out of its rate tokens or over its ceil
    /// since the last [`Hierarchy::take_short`].
    short: bool,
    /// Packet FIFO of a leaf: slab indices.
    head: u32,
    tail: u32,
    prio: u8,
    holds: Holds,
    /// Its kind when it lends (green with only borrowers below): 0 for a leaf, 1
    /// for an app, 2 for a tenant.
    lend_kind: u8,
}

impl Node {
    fn new(parent: usize, params: &NodeParams, holds: Holds) -> Self {
        let buffer = bytes_to_tokens(params.buffer_bytes);
        let cbuffer = bytes_to_tokens(params.cbuffer_bytes);
        Node {
            tokens: buffer,
            ctokens: cbuffer,
            buffer,
            cbuffer,
            rate_bps: params.rate_bps,
            ceil_bps: params.ceil_bps.unwrap_or(UNCAPPED),
            t_c_ns: 0,
            event_ns: NO_EVENT,
            sent_bytes: 0,
            debt_max: 0,
            deficit: [params.quantum_bytes.max(1) as i32; 2],
            quantum: params.quantum_bytes.max(1) as i32,
            parent: parent as u32,
            rings: [RingPlace::NONE; 2],
            queued: 0,
            short: false,
            head: NONE,
            tail: NONE,
            prio: params.prio.min(PRIO_LEVELS as u8 - 1),
            holds,
            lend_kind: 0,
        }
    }
}

impl Node {
    /// The lowest its rate tokens go: a debt of one burst or of
    /// [`Node::debt_max`], whichever is more. A green class pays its whole
    /// packet, however large (HTB's tokens go negative), so a packet larger than
    /// the burst is never partly forgiven, nor what its green children send at
    /// once under [`Selection::ByLevel`]: with one burst, a tenant of two green
    /// apps was forgiven part of their simultaneous sends and lent the tokens it
    /// kept, 115.5 Mbit/s against its rate of 76.9 (sim tests/overload.rs). A
    /// debt beyond that, which only an ancestor of the lender runs into, is
    /// forgiven, since the class would otherwise stay yellow long after its
    /// parent's lending made up for it.
    fn debt_floor(&self) -> i64 {
        -self.buffer.max(self.debt_max)
    }
}

/// Which of a node's [`Node::rings`].
const OWN: usize = 0;
const BORROWING: usize = 1;

/// A node's neighbours in one of its parent's rings, and which ring (`slot`).
#[derive(Clone, Copy, Debug)]
struct RingPlace {
    next: u32,
    prev: u32,
    slot: u8,
}

impl RingPlace {
    const NONE: RingPlace = RingPlace {
        next: NONE,
        prev: NONE,
        slot: NO_SLOT,
    };
}

/// The priority of ring `slot` when it is a borrowing ring.
fn borrowing_prio(slot: u8) -> Option<usize> {
    let slot = usize::from(slot);
    (slot / PRIO_LEVELS == usize::from(BORROW)).then_some(slot % PRIO_LEVELS)
}

fn bytes_to_tokens(bytes: u64) -> i64 {
    i64::try_from(u128::from(bytes) * TOKENS_PER_BYTE as u128).unwrap_or(i64::MAX)
}

/// How long ceil tokens of `ctokens` (below zero) take to reach zero at `ceil_bps`.
fn ceil_wait_ns(ctokens: i64, ceil_bps: u64) -> u64 {
    ctokens.unsigned_abs().div_ceil(ceil_bps.max(1))
}

/// Whether an app of `app` params, its tenant's only one, may stand in for its
/// tenant of `tenant` params under [`Selection::ByLevel`] (see the module docs):
/// the same rate and burst, and no cap of its own.
fn stands_in_for(app: &NodeParams, tenant: &NodeParams) -> bool {
    app.rate_bps == tenant.rate_bps
        && app.buffer_bytes == tenant.buffer_bytes
        && app.ceil_bps.is_none()
}

/// `tokens` refilled at `rate_bps` for `dt_ns`, at most `cap`.
fn refill(tokens: i64, rate_bps: u64, dt_ns: u64, cap: i64) -> i64 {
    debug_assert!(
        tokens <= cap,
        "tokens {tokens} beyond the bucket's depth {cap}"
    );
    let earned = (u128::from(rate_bps) * u128::from(dt_ns)).min(i64::MAX as u128) as i64;
    tokens.saturating_add(earned).min(cap)
}

/// The class tree with its buckets, rings, packet queues and packet accounting.
#[derive(Debug)]
pub struct Hierarchy {
    layout: Layout,
    classes: Classes,
    accounting: Accounting,
    /// The split classes of each app and their rings (`None`: no split), by app.
    split: Vec<Option<SplitApp>>,
    nodes: Vec<Node>,
    /// Split class c is `leaves[c - apps]`, node `layout.fixed() + c - apps`.
    leaves: Vec<Leaf>,
    /// Ring heads of the root and the tenants, by (kind, priority); a split app's
    /// rings are its [`SplitApp::tails`].
    ring_head: Vec<[u32; RINGS]>,
    /// Per fixed node and priority, the child that left its borrowing ring in the
    /// middle of its turn while still holding packets (it went over its ceil): it
    /// gets the turn back when it returns. Without this a child that changes mode
    /// often hands its turn to a sibling each time, and siblings whose token
    /// refills keep one phase split what their parent lends by that phase, not by
    /// weight (two equal apps at 4.4 against 26.1 MB of borrowed bytes, 9% apart).
    /// A child that turns green stays in its borrowing ring ([`Node::rings`]).
    resumes: Vec<[u32; PRIO_LEVELS]>,
    occupied: Vec<u32>,
    selection: Selection,
    green_turns: GreenTurns,
    slab: Vec<Packet>,
    slab_next: Vec<u32>,
    free: u32,
    events: Events,
    backlog: usize,
}

/// Pending token events, by the nanosecond they fall due. A fixed node may have
/// stale events here (a later one, superseded by an earlier): the caller skips an
/// event whose time is no longer its node's. A split class has one at most, for
/// when it is over its ceil, so it keeps no event time.
///
/// Events leave in order of time, and those of one time in the order they came.
/// Most come in order of time within their sort: a class's wait for tokens is
/// about the same from one packet to the next (a leaf's ceil, a tenant's or app's
/// rate), and the clock only advances. So each event goes at the back of one of a
/// few runs, each a FIFO in order of time: the run whose last event is the latest
/// not after it, else an empty run. Only an event that fits no run goes on a timing
/// wheel of nanosecond ticks. Before, every event went on the wheel: at 1M
/// backlogged classes half a million leaf events waited up to a round (level 4),
/// each cascading four times with a cache miss per record, and every packet also
/// filed its tenant's and app's events a level or two up (`cascade` and `push`
/// were 27% of `valve`'s time). A run is read and written in order, no pointers
/// followed.
///
/// The wheel orders by `max(time, where it stands)`: for a clock that never goes
/// back (the simulator's, the engine's) that is the time itself, and the order here
/// is exactly the wheel's alone.
#[derive(Default)]
struct Events {
    runs: [VecDeque<Event>; RUNS],
    slots: WheelSlots,
    records: EventRecords,
    /// Records of events already popped, for reuse: the wheel never allocates once
    /// the most events ever pending have been.
    free: Vec<u32>,
    /// The wheel's earliest event, once due: taken out to be compared with the
    /// runs' first.
    due: Option<Event>,
    /// Events pushed so far: an event's place among those of its time.
    pushed: u64,
    /// Events pending: when none is, as on a load whose caps never bind, a
    /// dequeue asks one comparison instead of every run.
    pending: usize,
}

/// Runs of events in order of time: a leaf's events, a fixed node's and a
/// straggler's each find one in the benchmark's tree.
const RUNS: usize = 3;

#[derive(Clone, Copy, Debug)]
struct Event {
    at_ns: u64,
    seq: u64,
    node: u32,
}

impl Event {
    fn key(&self) -> (u64, u64) {
        (self.at_ns, self.seq)
    }
}

#[derive(Clone, Copy)]
struct EventRecord {
    /// The wheel's tick, which it may raise to where it stands; `at_ns` is kept apart.
    tick: u64,
    event: Event,
    next: u32,
}

#[derive(Default)]
struct EventRecords(Vec<EventRecord>);

impl Links for EventRecords {
    fn next(&self, item: u32) -> u32 {
        self.0[item as usize].next
    }
    fn set_next(&mut self, item: u32, next: u32) {
        self.0[item as usize].next = next;
    }
    fn tick(&self, item: u32) -> u64 {
        self.0[item as usize].tick
    }
    fn set_tick(&mut self, item: u32, tick: u64) {
        self.0[item as usize].tick = tick;
    }
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("pending", &self.len())
            .finish()
    }
}

impl Events {
    fn len(&self) -> usize {
        debug_assert_eq!(
            self.pending,
            self.runs.iter().map(VecDeque::len).sum::<usize>()
                + self.slots.len()
                + usize::from(self.due.is_some()),
            "the pending count is what the runs, the wheel and the taken-out event hold"
        );
        self.pending
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push(&mut self, at_ns: u64, node: u32) {
        let event = Event {
            at_ns,
            seq: self.pushed,
            node,
        };
        self.pushed += 1;
        self.pending += 1;
        let mut best: Option<usize> = None;
        let mut empty = None;
        for (i, run) in self.runs.iter().enumerate() {
            match run.back() {
                Some(last) if last.at_ns <= at_ns => {
                    if best.is_none_or(|b| self.runs[b].back().unwrap().at_ns < last.at_ns) {
                        best = Some(i);
                    }
                }
                Some(_) => {}
                None => empty = empty.or(Some(i)),
            }
        }
        if let Some(run) = best.or(empty) {
            self.runs[run].push_back(event);
            return;
        }
        let record = EventRecord {
            tick: at_ns,
            event,
            next: NONE,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.records.0[id as usize] = record;
                id
            }
            None => {
                self.records.0.push(record);
                (self.records.0.len() - 1) as u32
            }
        };
        self.slots.insert(&mut self.records, id, at_ns);
    }

    /// The earliest event due at `now_ns`, as its time and node.
    fn pop_due(&mut self, now_ns: u64) -> Option<(u64, u32)> {
        if self.pending == 0 {
            return None;
        }
        if self.due.is_none()
            && !self.slots.is_empty()
            && let Some((id, _)) = self.slots.pop_expired(&mut self.records, now_ns)
        {
            self.free.push(id);
            self.due = Some(self.records.0[id as usize].event);
        }
        let mut first = None;
        for (i, run) in self.runs.iter().enumerate() {
            if let Some(event) = run.front()
                && event.at_ns <= now_ns
                && first.is_none_or(|(_, f): (usize, Event)| event.key() < f.key())
            {
                first = Some((i, *event));
            }
        }
        let due = self.due.filter(|due| due.at_ns <= now_ns);
        let event = match (first, due) {
            (Some((_, f)), Some(due)) if due.key() < f.key() => self.due.take(),
            (Some((run, _)), _) => self.runs[run].pop_front(),
            (None, Some(_)) => self.due.take(),
            (None, None) => None,
        }?;
        self.pending -= 1;
        Some((event.at_ns, event.node))
    }

    /// When the earliest pending event falls due, exactly: a caller that sleeps
    /// until then must find it due.
    fn next_at_ns(&self) -> Option<u64> {
        self.runs
            .iter()
            .filter_map(|run| run.front().map(|e| e.at_ns))
            .chain(self.due.map(|e| e.at_ns))
            .chain(self.slots.next_tick_exact(&self.records))
            .min()
    }
}

impl Hierarchy {
    /// `params` configures the fixed nodes (index = node; the root's is unused);
    /// `split_params[app]` every split class of `app`.
    pub fn new(
        policy: &Policy,
        params: &[NodeParams],
        split_params: &[Option<SplitParams>],
        bounds: crate::Capacity,
        selection: Selection,
    ) -> Self {
        Self::with_stand_ins(policy, params, split_params, bounds, selection, true)
    }

    /// [`Hierarchy::new`]; `stand_ins`: whether a tenant's only app may stand in
    /// for it where that is exact, under [`Selection::ByLevel`] (see the module
    /// docs). The tests that hold a stand-in to the tenant's own node build the
    /// tree without them too.
    pub(crate) fn with_stand_ins(
        policy: &Policy,
        params: &[NodeParams],
        split_params: &[Option<SplitParams>],
        bounds: crate::Capacity,
        selection: Selection,
        stand_ins: bool,
    ) -> Self {
        let layout = Layout::new(policy);
        debug_assert_eq!(params.len(), layout.fixed());
        debug_assert_eq!(split_params.len(), policy.apps.len());
        let any_split = split_params.iter().any(Option::is_some);
        let split_classes = if any_split { bounds.classes } else { 0 };
        let mut nodes = Vec::with_capacity(layout.fixed());
        nodes.push(Node::new(ROOT, &params[ROOT], Holds::Nodes));
        for t in 0..policy.tenants.len() {
            let mut tenant = Node::new(ROOT, &params[1 + t], Holds::Nodes);
            tenant.lend_kind = 2;
            nodes.push(tenant);
        }
        for (a, app) in policy.apps.iter().enumerate() {
            let x = layout.app(AppId(a as u32));
            let tenant = layout.tenant(app.tenant);
            let holds = if app.split.is_some() {
                Holds::Leaves
            } else {
                Holds::Fifo
            };
            let stands_in = stand_ins
                && selection == Selection::ByLevel
                && policy.tenant(app.tenant).apps.len() == 1
                && stands_in_for(&params[x], &params[tenant]);
            let mut node = if stands_in {
                Node::new(ROOT, &params[tenant], holds)
            } else {
                Node::new(tenant, &params[x], holds)
            };
            let parent = node.parent as usize;
            node.lend_kind = u8::from(holds == Holds::Leaves);
            if selection == Selection::ByLevel {
                nodes[parent].debt_max += node.buffer;
            }
            nodes.push(node);
        }
        let split = split_params
            .iter()
            .map(|p| {
                p.map(|p| {
                    assert!(
                        p.quantum_bytes < 1 << 30,
                        "a split class's quantum is under 1 GiB"
                    );
                    SplitApp {
                        ceil_bps: p.ceil_bps,
                        cbuffer: bytes_to_tokens(p.cbuffer_bytes),
                        quantum: p.quantum_bytes.max(1) as i32,
                        tails: [NONE; 2],
                        resume: NONE,
                        held: 0,
                        held_peak: 0,
                    }
                })
            })
            .collect();
        let packets = bounds.packets;
        Hierarchy {
            layout,
            classes: Classes::new(policy, policy.apps.len() + split_classes),
            accounting: Accounting::new(policy, bounds.class_packets_max(policy.apps.len())),
            split,
            nodes,
            leaves: Vec::with_capacity(split_classes),
            ring_head: vec![[NONE; RINGS]; layout.fixed()],
            resumes: vec![[NONE; PRIO_LEVELS]; layout.fixed()],
            occupied: vec![0; layout.fixed()],
            selection,
            green_turns: GreenTurns::Forgiven,
            slab: Vec::with_capacity(packets),
            slab_next: Vec::with_capacity(packets),
            free: NONE,
            events: Events::default(),
            backlog: 0,
        }
    }

    pub fn enqueue(&mut self, now_ns: u64, packet: Packet) -> Result<(), (Packet, Refusal)> {
        let Some(class) = self.classes.classify(&packet) else {
            self.accounting.refuse(packet.tenant, packet.len_bytes);
            return Err((packet, Refusal::QueueFull));
        };
        let x = self.layout.class(class);
        let fixed = self.layout.fixed();
        if x == fixed + self.leaves.len() {
            let split = self.split[packet.app.index()]
                .as_ref()
                .expect("only split apps create classes beyond the apps");
            self.leaves.push(Leaf::new(packet.app, split, now_ns));
        }
        if self.free == NONE && self.slab.len() == self.slab.capacity() {
            self.accounting.refuse(packet.tenant, packet.len_bytes);
            return Err((packet, Refusal::QueueFull));
        }
        let admitted = match x.checked_sub(fixed) {
            Some(l) => self.accounting.admit_split(&packet, self.leaves[l].packets),
            None => self.accounting.admit(&packet),
        };
        if let Err(reason) = admitted {
            return Err((packet, reason));
        }
        let index = if self.free == NONE {
            self.slab.push(packet);
            self.slab_next.push(NONE);
            (self.slab.len() - 1) as u32
        } else {
            let index = self.free;
            self.free = self.slab_next[index as usize];
            self.slab[index as usize] = packet;
            self.slab_next[index as usize] = NONE;
            index
        };
        self.backlog += 1;
        if x >= fixed {
            let l = x - fixed;
            let leaf = &mut self.leaves[l];
            leaf.packets += 1;
            let had_packets = leaf.tail != NONE;
            if had_packets {
                self.slab_next[index as usize] = self.slab_next[leaf.tail as usize];
                self.slab_next[leaf.tail as usize] = index;
            } else {
                self.slab_next[index as usize] = index;
                let split = self.split[packet.app.index()]
                    .as_mut()
                    .expect("a leaf's app splits");
                split.held += 1;
                split.held_peak = split.held_peak.max(split.held);
            }
            leaf.tail = index;
            let in_ring = leaf.next != NONE;
            self.count_queued(self.layout.app(packet.app));
            // One in a ring stays there until it sends (the call to find that out
            // cost `htb` 19 instructions a pair); one that held packets outside any
            // ring is over its ceil, with its event pending.
            if !in_ring {
                self.sync_leaf(l, now_ns, had_packets);
            }
        } else {
            let node = &mut self.nodes[x];
            if node.tail == NONE {
                node.head = index;
            } else {
                self.slab_next[node.tail as usize] = index;
            }
            node.tail = index;
            self.count_queued(x);
            self.sync(x, now_ns);
        }
        let app = self.layout.app(packet.app);
        debug_assert!(
            self.nodes[app].queued > 0 && self.queued_nested(app),
            "the packets held below a node are within those held below its parent"
        );
        debug_assert!(self.nothing_stranded());
        Ok(())
    }

    /// Whether the packets held below `x` and each of its ancestors are within
    /// those held below its parent, and within the tree's: O(depth).
    fn queued_nested(&self, mut x: usize) -> bool {
        let mut below = 0;
        while x != ROOT {
            let node = &self.nodes[x];
            if node.queued < below {
                return false;
            }
            below = node.queued;
            x = node.parent as usize;
        }
        below as usize <= self.backlog
    }

    /// Whether a tree holding no packet has nothing in the root's rings, and one
    /// holding packets has something there or an event pending.
    fn nothing_stranded(&self) -> bool {
        if self.backlog == 0 {
            self.occupied[ROOT] == 0
        } else {
            self.occupied[ROOT] != 0 || !self.events.is_empty()
        }
    }

    /// Whether fixed node `x`'s buckets are within their depths (module docs).
    fn within_depth(&self, x: usize) -> bool {
        let node = &self.nodes[x];
        (node.debt_floor()..=node.buffer).contains(&node.tokens) && node.ctokens <= node.cbuffer
    }

    /// Checks that the tree's backlog is its tenants' together and each tenant's its
    /// apps': O(tenants + apps), so for callers at a bounded rate (`valve`'s rate
    /// updates). Nothing in release builds.
    pub fn assert_counts(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let mut below = vec![0u64; self.layout.fixed()];
        for x in 1..self.layout.fixed() {
            below[self.nodes[x].parent as usize] += u64::from(self.nodes[x].queued);
        }
        debug_assert_eq!(
            below[ROOT], self.backlog as u64,
            "the tree holds what its tenants hold"
        );
        for (x, tenant) in self
            .nodes
            .iter()
            .enumerate()
            .skip(1)
            .take(self.layout.tenants)
        {
            debug_assert_eq!(
                below[x],
                u64::from(tenant.queued),
                "tenant node {x} holds what its apps hold"
            );
        }
    }

    /// Counts one more packet held in the subtrees of `x` and its ancestors.
    fn count_queued(&mut self, mut x: usize) {
        while x != ROOT {
            self.nodes[x].queued += 1;
            x = self.nodes[x].parent as usize;
        }
    }

    pub fn dequeue(&mut self, now_ns: u64) -> Option<Frame> {
        self.take::<true>(now_ns)
    }

    /// [`Hierarchy::dequeue`], where the root lends only if `LENDS`.
    #[inline]
    fn take<const LENDS: bool>(&mut self, now_ns: u64) -> Option<Frame> {
        // Most dequeues find no event pending, and the call alone cost `htb` 17
        // of its 1044 instructions a pair.
        if !self.events.is_empty() {
            self.run_events(now_ns);
        }
        let Walk {
            path,
            depth,
            leaf,
            lender,
            green,
            x,
        } = self.walk::<LENDS>(now_ns)?;
        let (packet, class_node) = match leaf {
            Some((l, _)) => (self.pop_leaf_packet(l), self.layout.fixed() + l),
            None => (self.pop_node_packet(x), x),
        };
        self.backlog -= 1;
        self.accounting.release(&packet);
        // The sender's refill then finds its class in the recent-departures cache
        // instead of missing in a split table of megabytes (86% of an enqueue at 1M
        // classes).
        self.classes
            .departed(&packet, self.layout.class_of(class_node));

        let cost = i64::from(packet.len_bytes) * TOKENS_PER_BYTE;
        let leaf = leaf.map(|(l, taken)| (l, taken, self.pay_leaf(l, taken, &packet, now_ns)));
        for (level, &y) in path[..depth].iter().enumerate().rev() {
            let y = y as usize;
            let pays_rate = match self.selection {
                Selection::ByLevel => lender.is_some_and(|l| level <= l),
                Selection::AtEachNode => green[level],
            };
            let node = &mut self.nodes[y];
            let dt_ns = now_ns.saturating_sub(node.t_c_ns);
            node.tokens = refill(node.tokens, node.rate_bps, dt_ns, node.buffer);
            if pays_rate {
                node.debt_max = node.debt_max.max(cost);
                node.tokens = (node.tokens - cost).max(node.debt_floor());
            }
            if node.ceil_bps != UNCAPPED {
                node.ctokens = refill(node.ctokens, node.ceil_bps, dt_ns, node.cbuffer) - cost;
            }
            node.t_c_ns = now_ns;
            node.sent_bytes += u64::from(packet.len_bytes);
            node.queued -= 1;
            debug_assert!(self.within_depth(y), "node {y}'s tokens within its buckets");
            let node = &mut self.nodes[y];
            let borrowing = if green[level] { OWN } else { BORROWING };
            let deficit = &mut node.deficit[borrowing];
            *deficit -= packet.len_bytes as i32;
            if *deficit < 0 {
                *deficit += node.quantum;
                if borrowing == OWN && self.green_turns == GreenTurns::Forgiven {
                    // A turn on own tokens ends with no DRR debt; see `next_turn`.
                    *deficit = (*deficit).max(0);
                }
                let place = node.rings[borrowing];
                let (parent, slot, next) = (node.parent as usize, place.slot as usize, place.next);
                if self.ring_head[parent][slot] == y as u32 {
                    self.ring_head[parent][slot] = next;
                }
            }
        }
        if let Some((l, taken, turn_over)) = leaf {
            self.leaf_sent(l, taken, turn_over, now_ns);
        }
        // Every node on the path paid, so each is synced, once, deepest first: a
        // node's rings then see its children's final places.
        if depth > 0 {
            self.sync_up(path[depth - 1] as usize, now_ns, depth, Stale::Kept);
        }
        debug_assert!(
            depth == 0 || self.queued_nested(path[depth - 1] as usize),
            "the packets held below a node are within those held below its parent"
        );
        debug_assert!(self.nothing_stranded());
        Some(Frame::whole(packet))
    }

    /// The walk of a dequeue from the root to the class whose packet leaves next,
    /// where the root lends only if `LENDS`; `None` when nothing may send. On the
    /// way, what stayed in a ring stale ([`Stale`], [`Hierarchy::leaf_sent`]) and
    /// is still so leaves it, and the walk starts again.
    fn walk<const LENDS: bool>(&mut self, now_ns: u64) -> Option<Walk> {
        'walk: loop {
            if self.occupied[ROOT] == 0 || (!LENDS && !self.root_has_own_tokens()) {
                return None;
            }
            let mut path = [NONE; DEPTH_MAX];
            let mut depth = 0;
            let mut lender = None;
            let mut green = [false; DEPTH_MAX];
            let mut x = ROOT;
            let leaf = loop {
                let ring = self.occupied[x].trailing_zeros() as usize;
                let taken_green = ring < usize::from(BORROW) * PRIO_LEVELS;
                if self.nodes[x].holds == Holds::Leaves {
                    let taken = if taken_green {
                        lender = Some(depth);
                        LeafRing::Green
                    } else {
                        LeafRing::Borrowing
                    };
                    let Some(l) = self.next_leaf(x, taken, now_ns) else {
                        // Every class of its borrowing ring was over its ceil: the
                        // app has nothing to send.
                        self.sync(x, now_ns);
                        continue 'walk;
                    };
                    break Some((l, taken));
                }
                let child = self.next_turn(x, ring);
                if taken_green
                    && self.keeps_stale_children(x)
                    && self.mode(child as usize, now_ns).0 != Mode::Green
                {
                    // A stale member of its green ring: out of it, with its event.
                    self.sync_up(child as usize, now_ns, 0, Stale::Dropped);
                    continue 'walk;
                }
                path[depth] = child;
                if taken_green {
                    lender = Some(depth);
                    green[depth] = true;
                }
                depth += 1;
                x = child as usize;
                if self.nodes[x].holds == Holds::Fifo {
                    break None;
                }
            };
            return Some(Walk {
                path,
                depth,
                leaf,
                lender,
                green,
                x,
            });
        }
    }

    /// Takes the first packet of fixed node `x`'s FIFO.
    fn pop_node_packet(&mut self, x: usize) -> Packet {
        let index = self.nodes[x].head as usize;
        self.nodes[x].head = self.slab_next[index];
        if self.nodes[x].head == NONE {
            self.nodes[x].tail = NONE;
        }
        self.free_slab(index)
    }

    /// Takes the first packet of leaf `l`'s circular FIFO.
    fn pop_leaf_packet(&mut self, l: usize) -> Packet {
        self.leaves[l].packets -= 1;
        let tail = self.leaves[l].tail as usize;
        let index = self.slab_next[tail] as usize;
        if index == tail {
            self.leaves[l].tail = NONE;
            let app = usize::from(self.leaves[l].app);
            self.split[app].as_mut().expect("a leaf's app splits").held -= 1;
        } else {
            self.slab_next[tail] = self.slab_next[index];
        }
        debug_assert_eq!(self.leaves[l].packets == 0, self.leaves[l].tail == NONE);
        self.free_slab(index)
    }

    fn free_slab(&mut self, index: usize) -> Packet {
        self.slab_next[index] = self.free;
        self.free = index as u32;
        self.slab[index]
    }

    /// Charges leaf `l`, taken from its app's ring `taken`, for `packet`; returns
    /// whether its turn there is over. A split class pays rate tokens exactly when
    /// it was taken green (it is the lender then, and nothing is below it), and
    /// since those tokens are its green deficit, paying them is the deficit's
    /// update: they never go below the debt floor of a [`Node`], one packet.
    fn pay_leaf(&mut self, l: usize, taken: LeafRing, packet: &Packet, now_ns: u64) -> bool {
        let split = self.split[usize::from(self.leaves[l].app)]
            .as_ref()
            .expect("a leaf's app splits");
        let leaf = &mut self.leaves[l];
        let cost = i64::from(packet.len_bytes) * TOKENS_PER_BYTE;
        leaf.ctokens = leaf.ctokens_at(split, now_ns) - cost;
        leaf.t_c_ns = now_ns;
        let len = packet.len_bytes as i32;
        match taken {
            LeafRing::Green => {
                let left = leaf.deficit - SPENDING - len;
                if left < 0 {
                    // Out of rate tokens, for good: from now on it borrows, with the
                    // borrowing deficit it started with.
                    leaf.deficit = split.quantum;
                    true
                } else {
                    leaf.deficit = SPENDING + left;
                    false
                }
            }
            LeafRing::Borrowing => {
                leaf.deficit -= len;
                if leaf.deficit < 0 {
                    leaf.deficit += split.quantum;
                    true
                } else {
                    false
                }
            }
        }
    }

    /// The child of `x` whose turn it is in ring `ring`. A child pays its packets
    /// from its deficit after sending, so a packet larger than its quantum leaves
    /// it in debt. In a yellow (borrowing) ring the debtor then sits out whole
    /// rounds, earning a quantum each, until it has paid: what a parent lends is
    /// shared by the quanta, i.e. by weight, whatever the packet sizes (DRR). Each
    /// skip earns a quantum that is later spent on a packet, so skips cost
    /// O(packet / quantum) amortized. A green ring forgives the debt instead (one
    /// packet per turn at least) unless [`GreenTurns::Charged`]: its members send
    /// on their own tokens, whose rate already bounds their share over an
    /// interval, and short turns keep a small packet's wait short (`htb`'s probe
    /// behind 64 KiB sends waited 40% longer with the debt kept). `valve` keeps
    /// the debt: a class with small packets was held below its rate.
    fn next_turn(&mut self, x: usize, ring: usize) -> u32 {
        let mut child = self.ring_head[x][ring];
        debug_assert_ne!(child, NONE);
        let place = if ring >= usize::from(BORROW) * PRIO_LEVELS {
            BORROWING
        } else if self.green_turns == GreenTurns::Charged {
            OWN
        } else {
            return child;
        };
        while self.nodes[child as usize].deficit[place] < 0 {
            let node = &mut self.nodes[child as usize];
            node.deficit[place] += node.quantum;
            child = node.rings[place].next;
        }
        self.ring_head[x][ring] = child;
        child
    }

    /// [`Hierarchy::next_turn`] among the split classes of app node `x`: the leaf
    /// whose turn it is in `ring`. A class of the borrowing ring found over its
    /// ceil there (one that stayed after its turn, see [`Hierarchy::leaf_sent`])
    /// leaves it with its event, as it would have when it sent; `None` when none
    /// of the ring is left.
    fn next_leaf(&mut self, x: usize, ring: LeafRing, now_ns: u64) -> Option<usize> {
        let app = self.layout.app_of(x).index();
        loop {
            let split = self.split[app]
                .as_mut()
                .expect("an app holding leaves splits");
            let tail = split.tails[ring as usize];
            debug_assert_ne!(tail, NONE);
            let mut before = tail as usize;
            let mut leaf = self.leaves[before].next as usize;
            if ring == LeafRing::Green {
                return Some(leaf);
            }
            while self.leaves[leaf].deficit < 0 {
                self.leaves[leaf].deficit += split.quantum;
                before = leaf;
                leaf = self.leaves[leaf].next as usize;
            }
            split.tails[ring as usize] = before as u32;
            let ctokens = self.leaves[leaf].ctokens_at(split, now_ns);
            if ctokens >= 0 {
                return Some(leaf);
            }
            let ceil_bps = split.ceil_bps;
            self.wait_for_ceil(leaf, ctokens, ceil_bps, now_ns);
            if self.unlink_first_leaf(x, leaf, ring) {
                return None;
            }
        }
    }

    /// Brings every node whose event is due to its current mode.
    fn run_events(&mut self, now_ns: u64) {
        while let Some((at_ns, x)) = self.events.pop_due(now_ns) {
            let x = x as usize;
            let fixed = self.layout.fixed();
            if x >= fixed {
                // A leaf has at most one event pending (see `sync_leaf`), never stale.
                self.sync_leaf(x - fixed, now_ns, false);
            } else if self.nodes[x].event_ns == at_ns {
                self.nodes[x].event_ns = NO_EVENT;
                self.sync(x, now_ns);
            }
        }
    }

    /// The earliest time worth asking again, for a caller that got no frame.
    pub fn next_ready_ns(&self, now_ns: u64) -> Option<u64> {
        if self.backlog == 0 {
            return None;
        }
        if self.occupied[ROOT] != 0 {
            return Some(now_ns);
        }
        self.events.next_at_ns().map(|at_ns| at_ns.max(now_ns))
    }

    /// Mode of fixed node `x` at `now_ns`, and when it next changes by itself.
    fn mode(&self, x: usize, now_ns: u64) -> (Mode, u64) {
        let node = &self.nodes[x];
        let dt_ns = now_ns.saturating_sub(node.t_c_ns);
        if node.ceil_bps != UNCAPPED {
            let ctokens = refill(node.ctokens, node.ceil_bps, dt_ns, node.cbuffer);
            if ctokens < 0 {
                return (Mode::Red, now_ns + ceil_wait_ns(ctokens, node.ceil_bps));
            }
        }
        let tokens = refill(node.tokens, node.rate_bps, dt_ns, node.buffer);
        if tokens >= 0 {
            (Mode::Green, NO_EVENT)
        } else if node.rate_bps > 0 {
            let wait_ns = tokens.unsigned_abs().div_ceil(node.rate_bps);
            (Mode::Yellow, now_ns + wait_ns)
        } else {
            (Mode::Yellow, NO_EVENT)
        }
    }

    /// Whether the green rings of fixed node `x` may hold a child gone yellow
    /// ([`Stale`]): a tenant's, under [`Selection::AtEachNode`].
    fn keeps_stale_children(&self, x: usize) -> bool {
        self.selection == Selection::AtEachNode && x != ROOT
    }

    /// Puts fixed node `x` in the rings its mode and backlog call for, and its
    /// ancestors too where that changes whether they have anything to send.
    fn sync(&mut self, x: usize, now_ns: u64) {
        self.sync_up(x, now_ns, 0, Stale::Kept);
    }

    /// [`Hierarchy::sync`] that goes on to the parent whether or not `x` changed,
    /// for `levels` levels: for the nodes on a dequeue's path, whose tokens changed.
    /// `stale`: whether a yellow node may stay in its green ring (see [`Stale`]).
    fn sync_up(&mut self, mut x: usize, now_ns: u64, mut levels: usize, stale: Stale) {
        while x != ROOT {
            let node = &self.nodes[x];
            let has_work = if node.holds == Holds::Fifo {
                node.head != NONE
            } else {
                self.occupied[x] != 0
            };
            let want = if has_work {
                let (mode, event_ns) = self.mode(x, now_ns);
                let stays_green = stale == Stale::Kept
                    && mode == Mode::Yellow
                    && self.nodes[x].rings[OWN].slot != NO_SLOT
                    && self.keeps_stale_children(self.nodes[x].parent as usize);
                if stays_green {
                    // Short as when its event is filed, which its turn does if
                    // it is still yellow then.
                    self.nodes[x].short |= event_ns != NO_EVENT;
                } else if event_ns < self.nodes[x].event_ns {
                    // Out of tokens or over its ceil: its event is when that ends.
                    self.nodes[x].short = true;
                    self.nodes[x].event_ns = event_ns;
                    self.events.push(event_ns, x as u32);
                }
                let node = &self.nodes[x];
                // The best kind among the children; BORROW for a leaf.
                let below = if node.holds == Holds::Fifo {
                    BORROW
                } else {
                    (self.occupied[x].trailing_zeros() as usize / PRIO_LEVELS) as u8
                };
                let own = match (self.selection, mode) {
                    (_, Mode::Red) => None,
                    (Selection::ByLevel, _) if below < BORROW => Some(below),
                    (Selection::ByLevel, Mode::Green) => Some(node.lend_kind),
                    (Selection::AtEachNode, Mode::Green) => Some(0),
                    (Selection::AtEachNode, Mode::Yellow) if stays_green => Some(0),
                    (_, Mode::Yellow) => None,
                };
                let slot = |kind: u8| kind * PRIO_LEVELS as u8 + node.prio;
                [
                    own.map_or(NO_SLOT, slot),
                    if mode == Mode::Red {
                        NO_SLOT
                    } else {
                        slot(BORROW)
                    },
                ]
            } else {
                [NO_SLOT; 2]
            };
            let mut changed = false;
            for ring in [OWN, BORROWING] {
                let slot = self.nodes[x].rings[ring].slot;
                if want[ring] == slot {
                    continue;
                }
                changed = true;
                if slot != NO_SLOT {
                    self.unlink(x, ring, has_work);
                }
                if want[ring] != NO_SLOT {
                    self.link(x, ring, want[ring]);
                }
            }
            if !changed && levels == 0 {
                return;
            }
            levels = levels.saturating_sub(1);
            x = self.nodes[x].parent as usize;
        }
    }

    /// [`Hierarchy::sync`] for leaf `l` outside a dequeue of its own, which can only
    /// put it in a ring: holding packets, a leaf leaves its ring only when it sends
    /// (over its ceil), so one in a ring is still under its ceil here, and its ceil
    /// tokens only grow until it sends. `waiting`: it is over its ceil and holds
    /// packets, so its event is pending. Under either selection a split class is of
    /// the kind of its rate tokens alone, green or [`BORROW`], since nothing is below
    /// it.
    fn sync_leaf(&mut self, l: usize, now_ns: u64, waiting: bool) {
        let leaf = self.leaves[l];
        if leaf.tail == NONE || leaf.next != NONE {
            return;
        }
        let split = self.split[usize::from(leaf.app)]
            .as_ref()
            .expect("a leaf's app splits");
        let ctokens = leaf.ctokens_at(split, now_ns);
        if ctokens < 0 {
            if !waiting {
                self.wait_for_ceil(l, ctokens, split.ceil_bps, now_ns);
            }
            return;
        }
        let x = self.layout.app(AppId(u32::from(leaf.app)));
        self.link_leaf(x, l, leaf.ring());
        self.sync(x, now_ns);
    }

    /// Puts leaf `l` in its app's rings after it sent from ring `taken`, where it
    /// was first: it stays, moving to the back if `turn_over`, or leaves for the
    /// borrowing ring (its burst spent), for its event (over its ceil), or for good
    /// (empty). The dequeue then syncs its app, which was on the path.
    fn leaf_sent(&mut self, l: usize, taken: LeafRing, turn_over: bool, now_ns: u64) {
        let leaf = self.leaves[l];
        let app = usize::from(leaf.app);
        let split = self.split[app].as_ref().expect("a leaf's app splits");
        let has_work = leaf.tail != NONE;
        // Over its ceil at the end of a turn in the borrowing ring, it stays there:
        // its turn comes again after every other class's, when most classes held
        // at their ceil may send again, and [`Hierarchy::next_leaf`] takes it out
        // if it still may not. Until then a ring of such classes alone says that
        // its app has something to send, and the dequeue that walks there finds
        // nothing and starts again.
        let stays = turn_over && taken == LeafRing::Borrowing && leaf.ring() == LeafRing::Borrowing;
        let want = if !has_work {
            None
        } else if leaf.ctokens < 0 && !stays {
            self.wait_for_ceil(l, leaf.ctokens, split.ceil_bps, now_ns);
            None
        } else {
            Some(leaf.ring())
        };
        let split = self.split[app].as_mut().expect("a leaf's app splits");
        if want == Some(taken) {
            if turn_over {
                split.tails[taken as usize] = l as u32;
            }
            return;
        }
        // It was first in its ring: out of it, the one after it is first and the
        // ring's last stays last, whether or not its turn was over. It keeps its
        // turn for when it is back only if the turn was not over.
        if has_work && taken == LeafRing::Borrowing && !turn_over {
            split.resume = l as u32;
        }
        let x = self.layout.app(AppId(u32::from(leaf.app)));
        self.unlink_first_leaf(x, l, taken);
        if let Some(ring) = want {
            self.link_leaf(x, l, ring);
        }
    }

    /// Takes leaf `l`, first in ring `ring` of its app, node `x`, out of it: the
    /// one after it is first and the ring's last stays last. Whether the ring is
    /// left empty.
    fn unlink_first_leaf(&mut self, x: usize, l: usize, ring: LeafRing) -> bool {
        let split = self.split[usize::from(self.leaves[l].app)]
            .as_mut()
            .expect("a leaf's app splits");
        let tail = split.tails[ring as usize] as usize;
        debug_assert_eq!(self.leaves[tail].next as usize, l, "the leaf is first");
        let next = std::mem::replace(&mut self.leaves[l].next, NONE);
        if next as usize == l {
            split.tails[ring as usize] = NONE;
            self.occupied[x] &= !(1 << ring.slot());
            true
        } else {
            self.leaves[tail].next = next;
            false
        }
    }

    /// Files leaf `l`'s event for when its ceil tokens, `ctokens` at `now_ns`
    /// (below zero), let it send again.
    fn wait_for_ceil(&mut self, l: usize, ctokens: i64, ceil_bps: u64, now_ns: u64) {
        let at_ns = now_ns + ceil_wait_ns(ctokens, ceil_bps);
        self.events.push(at_ns, (self.layout.fixed() + l) as u32);
    }

    /// Adds leaf `l` at the back of ring `ring` of its app, node `x`, or at the
    /// front when it left the borrowing ring in the middle of its turn (see
    /// [`Hierarchy::link`]).
    fn link_leaf(&mut self, x: usize, l: usize, ring: LeafRing) {
        let split = self.split[usize::from(self.leaves[l].app)]
            .as_mut()
            .expect("a leaf's app splits");
        let resumes =
            ring == LeafRing::Borrowing && std::mem::replace(&mut split.resume, NONE) == l as u32;
        let tail = split.tails[ring as usize];
        if tail == NONE {
            self.leaves[l].next = l as u32;
            split.tails[ring as usize] = l as u32;
            self.occupied[x] |= 1 << ring.slot();
        } else {
            self.leaves[l].next = self.leaves[tail as usize].next;
            self.leaves[tail as usize].next = l as u32;
            if !resumes {
                split.tails[ring as usize] = l as u32;
            }
        }
    }

    /// Adds `x` at the tail of its parent's ring `slot` (`ring` says which of its
    /// places that is), or at its head when `x` left that borrowing ring in the
    /// middle of its turn.
    fn link(&mut self, x: usize, ring: usize, slot: u8) {
        let parent = self.nodes[x].parent as usize;
        let resumes = borrowing_prio(slot).is_some_and(|p| {
            let resumes = &mut self.resumes[parent][p];
            std::mem::replace(resumes, NONE) == x as u32
        });
        let head = self.ring_head[parent][slot as usize];
        if head == NONE {
            self.nodes[x].rings[ring] = RingPlace {
                next: x as u32,
                prev: x as u32,
                slot,
            };
            self.ring_head[parent][slot as usize] = x as u32;
            self.occupied[parent] |= 1 << slot;
        } else {
            let tail = self.nodes[head as usize].rings[ring].prev;
            self.nodes[tail as usize].rings[ring].next = x as u32;
            self.nodes[x].rings[ring] = RingPlace {
                next: head,
                prev: tail,
                slot,
            };
            self.nodes[head as usize].rings[ring].prev = x as u32;
            if resumes {
                self.ring_head[parent][slot as usize] = x as u32;
            }
        }
    }

    /// Takes `x` out of its parent's ring that is its place `ring`; `backlogged`:
    /// it still holds packets.
    fn unlink(&mut self, x: usize, ring: usize, backlogged: bool) {
        let parent = self.nodes[x].parent;
        let RingPlace { next, prev, slot } = self.nodes[x].rings[ring];
        if let Some(p) = borrowing_prio(slot).filter(|_| backlogged)
            && self.ring_head[parent as usize][slot as usize] == x as u32
        {
            self.resumes[parent as usize][p] = x as u32;
        }
        let (parent, slot) = (parent as usize, slot as usize);
        if next == x as u32 {
            self.ring_head[parent][slot] = NONE;
            self.occupied[parent] &= !(1 << slot);
        } else {
            self.nodes[prev as usize].rings[ring].next = next;
            self.nodes[next as usize].rings[ring].prev = prev;
            if self.ring_head[parent][slot] == x as u32 {
                self.ring_head[parent][slot] = next;
            }
        }
        self.nodes[x].rings[ring] = RingPlace::NONE;
    }

    /// Empties every rate bucket: each class then earns its burst from time 0
    /// rather than all of them spending theirs at once.
    pub fn empty_rate_buckets(&mut self) {
        for node in &mut self.nodes[1..] {
            node.tokens = 0;
        }
    }

    /// Starts fixed node `x`'s ceil bucket with at most `bytes` of tokens.
    pub fn start_cap_bucket_at(&mut self, x: usize, bytes: u64) {
        let node = &mut self.nodes[x];
        node.ctokens = node.ctokens.min(bytes_to_tokens(bytes));
    }

    /// How turns on own tokens end from now on ([`GreenTurns::Forgiven`] unless set).
    pub fn set_green_turns(&mut self, green_turns: GreenTurns) {
        self.green_turns = green_turns;
    }

    /// Changes a fixed node's rate bucket, keeping the tokens it has earned so far.
    pub fn set_rate(&mut self, x: usize, now_ns: u64, rate_bps: u64, buffer_bytes: u64) {
        let node = &mut self.nodes[x];
        let dt_ns = now_ns.saturating_sub(node.t_c_ns);
        node.tokens = refill(node.tokens, node.rate_bps, dt_ns, node.buffer);
        if node.ceil_bps != UNCAPPED {
            node.ctokens = refill(node.ctokens, node.ceil_bps, dt_ns, node.cbuffer);
        }
        node.t_c_ns = now_ns;
        node.rate_bps = rate_bps;
        node.buffer = bytes_to_tokens(buffer_bytes);
        node.tokens = node.tokens.clamp(node.debt_floor(), node.buffer);
        debug_assert!(self.within_depth(x), "node {x}'s tokens within its buckets");
        self.sync(x, now_ns);
    }

    /// Bytes node `x` sent since the last call, which starts a new count.
    pub fn take_sent_bytes(&mut self, x: usize) -> u64 {
        std::mem::take(&mut self.nodes[x].sent_bytes)
    }

    /// A turn of the link that no packet of this tree took
    /// ([`crate::Accounting::turn_elsewhere`]).
    pub fn turn_elsewhere(&mut self) {
        self.accounting.turn_elsewhere();
    }

    /// Bytes app `app` holds, its split classes together.
    pub fn app_buffered_bytes(&self, app: AppId) -> u64 {
        self.accounting.app_buffered_bytes(app)
    }

    /// The most split classes of app `app` that held packets at once since the
    /// last call (0 for an app that does not split); starts a new watch from
    /// those that hold packets now.
    pub fn take_split_peak(&mut self, app: AppId) -> u32 {
        self.split[app.index()].as_mut().map_or(0, |split| {
            std::mem::replace(&mut split.held_peak, split.held)
        })
    }

    /// Whether app `app` held packets all along since the last call, save for
    /// instants ([`crate::Accounting::take_app_hungry`]).
    pub fn take_app_hungry(&mut self, app: AppId) -> bool {
        self.accounting.take_app_hungry(app)
    }

    /// Whether fixed node `x` held packets while out of its rate tokens or over
    /// its ceil at some moment since the last call; starts a new watch from its
    /// mode at `now_ns`. Marked where its event for the end of that is scheduled,
    /// which costs the path of every packet nothing; a node of rate 0 has no such
    /// event and is not counted short.
    pub fn take_short(&mut self, x: usize, now_ns: u64) -> bool {
        let short_now = self.nodes[x].queued > 0 && self.mode(x, now_ns).0 != Mode::Green;
        std::mem::replace(&mut self.nodes[x].short, short_now)
    }

    /// Whether a child of the root may send on its own tokens: no lender needed.
    fn root_has_own_tokens(&self) -> bool {
        (self.occupied[ROOT].trailing_zeros() as usize) < usize::from(BORROW) * PRIO_LEVELS
    }

    /// When a child of the root may next send on its own tokens, at the earliest
    /// `now_ns`, as far as the tree knows without running its events (`None`:
    /// not before something else changes).
    pub fn own_tokens_ready_ns(&self, now_ns: u64) -> Option<u64> {
        if self.root_has_own_tokens() {
            return Some(now_ns);
        }
        self.events.next_at_ns().map(|at_ns| at_ns.max(now_ns))
    }

    /// [`Hierarchy::dequeue`] for a child of the root on its own tokens only:
    /// the root lends nothing.
    pub fn dequeue_own_tokens(&mut self, now_ns: u64) -> Option<Frame> {
        self.take::<false>(now_ns)
    }

    /// Whether node `x` holds packets in its subtree.
    pub fn is_backlogged(&self, x: usize) -> bool {
        self.nodes[x].queued > 0
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn backlog_packets(&self) -> usize {
        self.backlog
    }

    pub fn classes(&self) -> usize {
        self.classes.len()
    }

    pub fn counters(&self) -> &[TenantCounters] {
        self.accounting.counters()
    }
}

#[cfg(test)]
mod size {
    /// A split class stays within 32 bytes, 48 with its split table slot: `bytes
    /// per class` in docs/results/bench.md.
    #[test]
    fn leaf_is_32_bytes() {
        assert_eq!(std::mem::size_of::<super::Leaf>(), 32);
    }
}

#[cfg(test)]
mod events {
    use super::Events;
    use std::collections::BTreeSet;

    /// Events leave in order of time, and of arrival within a time, as from one
    /// ordered set, whether they fit a run or go to the wheel: waits of two sizes
    /// (a leaf's long one, a fixed node's short one) with jitter, ties included.
    #[test]
    fn events_leave_by_time_then_arrival() {
        let mut events = Events::default();
        let mut reference = BTreeSet::new();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut random = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let (mut now_ns, mut seq, mut popped) = (0u64, 0u64, 0);
        for _ in 0..200_000 {
            if random(2) == 0 {
                let wait_ns = match random(3) {
                    0 => 120_000 + random(4) * 1000,
                    1 => 1_900 + random(50),
                    _ => 1 + random(5_000_000),
                };
                let node = random(1000) as u32;
                events.push(now_ns + wait_ns, node);
                reference.insert((now_ns + wait_ns, seq, node));
                seq += 1;
            } else {
                now_ns += random(3_000);
                while let Some((at_ns, node)) = events.pop_due(now_ns) {
                    let first = reference.pop_first().expect("an event the reference holds");
                    assert_eq!((at_ns, node), (first.0, first.2));
                    popped += 1;
                }
                assert!(reference.first().is_none_or(|e| e.0 > now_ns));
                assert_eq!(events.next_at_ns(), reference.first().map(|e| e.0));
            }
        }
        assert!(
            popped > 50_000 && !events.slots.is_empty(),
            "runs and wheel both used"
        );
    }
}

#[cfg(all(test, debug_assertions))]
mod invariants {
    use super::*;
    use crate::Capacity;

    #[test]
    #[should_panic(expected = "beyond the bucket's depth")]
    fn tokens_beyond_a_buckets_depth_trip_its_refill() {
        let policy = policy::parse_policy(
            "link: { rate: 1Gbit }\ntenants:\n  - { name: a }\n",
            "p.yaml",
        )
        .unwrap();
        let params = NodeParams {
            rate_bps: 1_000_000_000,
            buffer_bytes: 10_000,
            ceil_bps: None,
            cbuffer_bytes: 0,
            quantum_bytes: 1500,
            prio: 0,
        };
        let fixed = Layout::new(&policy).fixed();
        let mut tree = Hierarchy::new(
            &policy,
            &vec![params; fixed],
            &[None],
            Capacity::default(),
            Selection::AtEachNode,
        );
        let packet = Packet {
            len_bytes: 1500,
            tenant: TenantId(0),
            app: AppId(0),
            flow: 1,
            destination: 0,
            core: 0,
            arrival_ns: 0,
            handle: 0,
        };
        tree.enqueue(0, packet).unwrap();
        let tenant = tree.layout.tenant(TenantId(0));
        tree.nodes[tenant].tokens = tree.nodes[tenant].buffer + 1;
        tree.dequeue(0);
    }
}
