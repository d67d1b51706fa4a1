//! The class tree both token-bucket enforcers ([`crate::valve`] and [`crate::htb`])
//! run on: the policy as link → tenants → apps → split classes, one node per class
//! in one flat array, each node with two token buckets, and the selection machinery
//! that finds a class allowed to send in O(depth) per packet.
//!
//! ## Nodes
//!
//! Node 0 is the link (the root); tenant t is node 1 + t; the leaf class c of
//! [`Classes`] is node 1 + T + c, so app a is node 1 + T + a and split classes follow
//! the apps in order of first appearance. An app with `split` is an interior node
//! whose children are its split classes; every other app is a leaf with a FIFO.
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
//! The root has no bucket: the link itself is its limit, so it always lends.
//!
//! ## Selection
//!
//! Each interior node keeps [`KINDS`] × [`PRIO_LEVELS`] rings of its children that
//! have something to send and are not red: one ring per (kind, priority), and a
//! bitmap of the non-empty rings. A child's *kind* says where in its subtree the
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
//! skipped. Per packet: O(depth) ring and bucket updates plus O(1) event work (a
//! binary heap here took 44% of `valve`'s time at 1M classes: twenty levels of
//! cache misses per pop).
//!
//! ## Units
//!
//! Tokens are integers in 10⁻⁹ bit: a rate of r bit/s earns r tokens per nanosecond,
//! so refilling is one multiply and no division, and a byte costs 8·10⁹ tokens.
//! An i64 holds 1.1 GB of burst, far more than any bucket needs.

use crate::classes::{ClassId, Classes};
use crate::wheel::timing::{Links, WheelSlots};
use crate::{Accounting, Frame, Packet, Refusal, TenantCounters};
use policy::{AppId, Policy, TenantId};

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
    let demand: Vec<f64> = policy
        .apps
        .iter()
        .map(|a| match (backlogged(a), a.max_rate_bps) {
            (false, _) => 0.0,
            (true, cap) => cap.map_or(f64::INFINITY, |r| r as f64),
        })
        .collect();
    let mut out = vec![0.0; Layout::new(policy).fixed()];
    allocate(policy, &demand, &mut Vec::new(), &mut Vec::new(), &mut out);
    out
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Green,
    Yellow,
    Red,
}

/// One class; ~100 bytes, so a path of three stays within a few cache lines.
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
    /// Tokens of the largest packet this node has paid rate tokens for.
    packet_max: i64,
    /// DRR deficit in the parent's rings of a kind below [`BORROW`] and in its
    /// [`BORROW`] rings: turns on own tokens and turns at borrowing are separate
    /// rounds (HTB keeps a deficit per level for the same reason).
    deficit: [i32; 2],
    quantum: i32,
    parent: u32,
    /// Ring neighbours in the parent's ring `slot`.
    next: u32,
    prev: u32,
    /// Packets held in the subtree.
    queued: u32,
    /// Packet FIFO of a leaf: slab indices.
    head: u32,
    tail: u32,
    prio: u8,
    slot: u8,
    interior: bool,
    /// Its kind when it lends (green with only borrowers below): 0 for a leaf, 1
    /// for an app, 2 for a tenant.
    lend_kind: u8,
}

impl Node {
    fn new(parent: usize, params: &NodeParams, interior: bool, now_ns: u64) -> Self {
        let buffer = bytes_to_tokens(params.buffer_bytes);
        let cbuffer = bytes_to_tokens(params.cbuffer_bytes);
        Node {
            tokens: buffer,
            ctokens: cbuffer,
            buffer,
            cbuffer,
            rate_bps: params.rate_bps,
            ceil_bps: params.ceil_bps.unwrap_or(UNCAPPED),
            t_c_ns: now_ns,
            event_ns: NO_EVENT,
            sent_bytes: 0,
            packet_max: 0,
            deficit: [params.quantum_bytes.max(1) as i32; 2],
            quantum: params.quantum_bytes.max(1) as i32,
            parent: parent as u32,
            next: NONE,
            prev: NONE,
            queued: 0,
            head: NONE,
            tail: NONE,
            prio: params.prio.min(PRIO_LEVELS as u8 - 1),
            slot: NO_SLOT,
            interior,
            lend_kind: 0,
        }
    }
}

impl Node {
    /// The lowest its rate tokens go: a debt of one burst or of its largest packet,
    /// whichever is more. A green class pays its whole packet, however large
    /// (HTB's tokens go negative), so a packet larger than the burst is never
    /// partly forgiven; a debt beyond that, which only an ancestor of the lender
    /// runs into, is, since the class would otherwise stay yellow long after its
    /// parent's lending made up for it.
    fn debt_floor(&self) -> i64 {
        -self.buffer.max(self.packet_max)
    }
}

/// The priority of ring `slot` when it is a borrowing ring.
fn borrowing_prio(slot: u8) -> Option<usize> {
    let slot = usize::from(slot);
    (slot / PRIO_LEVELS == usize::from(BORROW)).then_some(slot % PRIO_LEVELS)
}

fn bytes_to_tokens(bytes: u64) -> i64 {
    i64::try_from(u128::from(bytes) * TOKENS_PER_BYTE as u128).unwrap_or(i64::MAX)
}

/// `tokens` refilled at `rate_bps` for `dt_ns`, at most `cap`.
fn refill(tokens: i64, rate_bps: u64, dt_ns: u64, cap: i64) -> i64 {
    let earned = (u128::from(rate_bps) * u128::from(dt_ns)).min(i64::MAX as u128) as i64;
    tokens.saturating_add(earned).min(cap)
}

/// The class tree with its buckets, rings, packet queues and packet accounting.
#[derive(Debug)]
pub struct Hierarchy {
    layout: Layout,
    classes: Classes,
    accounting: Accounting,
    /// Configuration of the split classes of each app (`None`: no split).
    split_params: Vec<Option<NodeParams>>,
    nodes: Vec<Node>,
    /// Ring heads of the fixed nodes, by (kind, priority).
    ring_head: Vec<[u32; RINGS]>,
    /// Per fixed node and priority, the child that left its borrowing ring in the
    /// middle of its turn while still holding packets (it turned green or red):
    /// it gets the turn back when it returns. Without this a child that changes
    /// mode often hands its turn to a sibling each time, and siblings whose token
    /// refills keep one phase split what their parent lends by that phase, not by
    /// weight (two equal apps at 4.4 against 26.1 MB of borrowed bytes, 9% apart).
    resumes: Vec<[u32; PRIO_LEVELS]>,
    occupied: Vec<u32>,
    selection: Selection,
    slab: Vec<Packet>,
    slab_next: Vec<u32>,
    free: u32,
    events: Events,
    backlog: usize,
}

/// Pending token events, by the nanosecond they fall due, on a timing wheel of
/// nanosecond ticks. A node may have stale events here (a later one, superseded by
/// an earlier): the caller skips an event whose time is no longer its node's.
#[derive(Default)]
struct Events {
    slots: WheelSlots,
    records: EventRecords,
    /// Records of events already popped, for reuse: the wheel never allocates once
    /// the most events ever pending have been.
    free: Vec<u32>,
}

#[derive(Clone, Copy)]
struct EventRecord {
    /// The wheel's tick, which it may raise to where it stands; `at_ns` is kept apart.
    tick: u64,
    at_ns: u64,
    next: u32,
    node: u32,
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
            .field("pending", &self.slots.len())
            .finish()
    }
}

impl Events {
    fn push(&mut self, at_ns: u64, node: u32) {
        let record = EventRecord {
            tick: at_ns,
            at_ns,
            next: NONE,
            node,
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
        let (id, _) = self.slots.pop_expired(&mut self.records, now_ns)?;
        self.free.push(id);
        let record = self.records.0[id as usize];
        Some((record.at_ns, record.node))
    }

    /// When the earliest pending event falls due, exactly: a caller that sleeps
    /// until then must find it due.
    fn next_at_ns(&self) -> Option<u64> {
        self.slots.next_tick_exact(&self.records)
    }
}

impl Hierarchy {
    /// `params` configures the fixed nodes (index = node; the root's is unused);
    /// `split_params[app]` every split class of `app`.
    pub fn new(
        policy: &Policy,
        params: &[NodeParams],
        split_params: Vec<Option<NodeParams>>,
        bounds: crate::Capacity,
        selection: Selection,
    ) -> Self {
        let layout = Layout::new(policy);
        debug_assert_eq!(params.len(), layout.fixed());
        let any_split = split_params.iter().any(Option::is_some);
        let capacity = policy.apps.len() + if any_split { bounds.classes } else { 0 };
        let mut nodes = Vec::with_capacity(1 + layout.tenants + capacity);
        nodes.push(Node::new(ROOT, &params[ROOT], true, 0));
        for t in 0..policy.tenants.len() {
            let mut tenant = Node::new(ROOT, &params[1 + t], true, 0);
            tenant.lend_kind = 2;
            nodes.push(tenant);
        }
        for (a, app) in policy.apps.iter().enumerate() {
            let x = layout.app(AppId(a as u32));
            let parent = layout.tenant(app.tenant);
            let mut node = Node::new(parent, &params[x], app.split.is_some(), 0);
            node.lend_kind = u8::from(node.interior);
            nodes.push(node);
        }
        let packets = bounds.packets;
        Hierarchy {
            layout,
            classes: Classes::new(policy, capacity),
            accounting: Accounting::new(policy, bounds.class_packets_max(policy.apps.len())),
            split_params,
            nodes,
            ring_head: vec![[NONE; RINGS]; layout.fixed()],
            resumes: vec![[NONE; PRIO_LEVELS]; layout.fixed()],
            occupied: vec![0; layout.fixed()],
            selection,
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
        if x == self.nodes.len() {
            let params = self.split_params[packet.app.index()]
                .expect("only split apps create classes beyond the apps");
            let parent = self.layout.app(packet.app);
            self.nodes.push(Node::new(parent, &params, false, now_ns));
        }
        if self.free == NONE && self.slab.len() == self.slab.capacity() {
            self.accounting.refuse(packet.tenant, packet.len_bytes);
            return Err((packet, Refusal::QueueFull));
        }
        if let Err(reason) = self.accounting.admit(&packet) {
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
        let node = &mut self.nodes[x];
        if node.tail == NONE {
            node.head = index;
        } else {
            self.slab_next[node.tail as usize] = index;
        }
        node.tail = index;
        let mut y = x;
        while y != ROOT {
            self.nodes[y].queued += 1;
            y = self.nodes[y].parent as usize;
        }
        self.backlog += 1;
        self.sync(x, now_ns);
        Ok(())
    }

    pub fn dequeue(&mut self, now_ns: u64) -> Option<Frame> {
        self.run_events(now_ns);
        if self.occupied[ROOT] == 0 {
            return None;
        }
        let mut path = [NONE; DEPTH_MAX];
        let mut depth = 0;
        // Index in `path` of the lender; `None` when the root lends.
        let mut lender = None;
        // Which nodes on the path were taken green (from a ring below BORROW).
        let mut green = [false; DEPTH_MAX];
        let mut x = ROOT;
        loop {
            let ring = self.occupied[x].trailing_zeros() as usize;
            let child = self.next_turn(x, ring);
            path[depth] = child;
            if ring < usize::from(BORROW) * PRIO_LEVELS {
                lender = Some(depth);
                green[depth] = true;
            }
            depth += 1;
            x = child as usize;
            if !self.nodes[x].interior {
                break;
            }
        }
        let leaf = x;
        let index = self.nodes[leaf].head as usize;
        let packet = self.slab[index];
        self.nodes[leaf].head = self.slab_next[index];
        if self.nodes[leaf].head == NONE {
            self.nodes[leaf].tail = NONE;
        }
        self.slab_next[index] = self.free;
        self.free = index as u32;
        self.backlog -= 1;
        self.accounting.release(&packet);
        // The sender's refill then finds its class in the recent-departures cache
        // instead of missing in a split table of megabytes (86% of an enqueue at 1M
        // classes).
        self.classes.departed(&packet, self.layout.class_of(leaf));

        let cost = i64::from(packet.len_bytes) * TOKENS_PER_BYTE;
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
                node.packet_max = node.packet_max.max(cost);
                node.tokens = (node.tokens - cost).max(node.debt_floor());
            }
            if node.ceil_bps != UNCAPPED {
                node.ctokens = refill(node.ctokens, node.ceil_bps, dt_ns, node.cbuffer) - cost;
            }
            node.t_c_ns = now_ns;
            node.sent_bytes += u64::from(packet.len_bytes);
            node.queued -= 1;
            let borrowing = usize::from(node.slot / PRIO_LEVELS as u8 == BORROW);
            let deficit = &mut node.deficit[borrowing];
            *deficit -= packet.len_bytes as i32;
            if *deficit < 0 {
                *deficit += node.quantum;
                if borrowing == 0 {
                    // A turn on own tokens ends with no DRR debt; see `next_turn`.
                    *deficit = (*deficit).max(0);
                }
                let (parent, slot, next) = (node.parent as usize, node.slot as usize, node.next);
                if self.ring_head[parent][slot] == y as u32 {
                    self.ring_head[parent][slot] = next;
                }
            }
        }
        for &y in &path[..depth] {
            self.sync(y as usize, now_ns);
        }
        Some(Frame::whole(packet))
    }

    /// The child of `x` whose turn it is in ring `ring`. A child pays its packets
    /// from its deficit after sending, so a packet larger than its quantum leaves
    /// it in debt. In a yellow (borrowing) ring the debtor then sits out whole
    /// rounds, earning a quantum each, until it has paid: what a parent lends is
    /// shared by the quanta, i.e. by weight, whatever the packet sizes (DRR). Each
    /// skip earns a quantum that is later spent on a packet, so skips cost
    /// O(packet / quantum) amortized. A green ring forgives the debt instead (one
    /// packet per turn at least): its members send on their own tokens, whose rate
    /// already bounds their share, and making a class wait for turns there as
    /// well would let its bucket overflow, costing it part of its rate.
    fn next_turn(&mut self, x: usize, ring: usize) -> u32 {
        let mut child = self.ring_head[x][ring];
        debug_assert_ne!(child, NONE);
        if ring >= usize::from(BORROW) * PRIO_LEVELS {
            while self.nodes[child as usize].deficit[1] < 0 {
                let node = &mut self.nodes[child as usize];
                node.deficit[1] += node.quantum;
                child = node.next;
            }
            self.ring_head[x][ring] = child;
        }
        child
    }

    /// Brings every node whose event is due to its current mode.
    fn run_events(&mut self, now_ns: u64) {
        while let Some((at_ns, x)) = self.events.pop_due(now_ns) {
            let x = x as usize;
            if self.nodes[x].event_ns == at_ns {
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

    /// Mode of node `x` at `now_ns`, and when it next changes by itself.
    fn mode(&self, x: usize, now_ns: u64) -> (Mode, u64) {
        let node = &self.nodes[x];
        let dt_ns = now_ns.saturating_sub(node.t_c_ns);
        if node.ceil_bps != UNCAPPED {
            let ctokens = refill(node.ctokens, node.ceil_bps, dt_ns, node.cbuffer);
            if ctokens < 0 {
                let wait_ns = (ctokens.unsigned_abs()).div_ceil(node.ceil_bps.max(1));
                return (Mode::Red, now_ns + wait_ns);
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

    /// Puts `x` in the ring its mode and backlog call for, and its ancestors too
    /// where that changes whether they have anything to send.
    fn sync(&mut self, mut x: usize, now_ns: u64) {
        while x != ROOT {
            let node = &self.nodes[x];
            let has_work = if node.interior {
                self.occupied[x] != 0
            } else {
                node.head != NONE
            };
            let want = if has_work {
                let (mode, event_ns) = self.mode(x, now_ns);
                if event_ns < self.nodes[x].event_ns {
                    self.nodes[x].event_ns = event_ns;
                    self.events.push(event_ns, x as u32);
                }
                let node = &self.nodes[x];
                // The best kind among the children; BORROW for a leaf.
                let below = if node.interior {
                    (self.occupied[x].trailing_zeros() as usize / PRIO_LEVELS) as u8
                } else {
                    BORROW
                };
                let kind = match (self.selection, mode) {
                    (_, Mode::Red) => None,
                    (Selection::ByLevel, _) if below < BORROW => Some(below),
                    (Selection::ByLevel, Mode::Green) => Some(node.lend_kind),
                    (Selection::AtEachNode, Mode::Green) => Some(0),
                    (_, Mode::Yellow) => Some(BORROW),
                };
                kind.map_or(NO_SLOT, |k| k * PRIO_LEVELS as u8 + node.prio)
            } else {
                NO_SLOT
            };
            if want == self.nodes[x].slot {
                return;
            }
            if self.nodes[x].slot != NO_SLOT {
                self.unlink(x, has_work);
            }
            if want != NO_SLOT {
                self.link(x, want);
            }
            x = self.nodes[x].parent as usize;
        }
    }

    /// Adds `x` at the tail of its parent's ring `slot`, or at its head when `x`
    /// left that borrowing ring in the middle of its turn.
    fn link(&mut self, x: usize, slot: u8) {
        let parent = self.nodes[x].parent as usize;
        let resumes = borrowing_prio(slot).is_some_and(|p| {
            let resumes = &mut self.resumes[parent][p];
            std::mem::replace(resumes, NONE) == x as u32
        });
        let head = self.ring_head[parent][slot as usize];
        if head == NONE {
            self.nodes[x].next = x as u32;
            self.nodes[x].prev = x as u32;
            self.ring_head[parent][slot as usize] = x as u32;
            self.occupied[parent] |= 1 << slot;
        } else {
            let tail = self.nodes[head as usize].prev;
            self.nodes[tail as usize].next = x as u32;
            self.nodes[x].prev = tail;
            self.nodes[x].next = head;
            self.nodes[head as usize].prev = x as u32;
            if resumes {
                self.ring_head[parent][slot as usize] = x as u32;
            }
        }
        self.nodes[x].slot = slot;
    }

    /// Takes `x` out of its parent's ring; `backlogged`: it still holds packets.
    fn unlink(&mut self, x: usize, backlogged: bool) {
        let Node {
            parent,
            slot,
            next,
            prev,
            ..
        } = self.nodes[x];
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
            self.nodes[prev as usize].next = next;
            self.nodes[next as usize].prev = prev;
            if self.ring_head[parent][slot] == x as u32 {
                self.ring_head[parent][slot] = next;
            }
        }
        self.nodes[x].slot = NO_SLOT;
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
        self.sync(x, now_ns);
    }

    /// Bytes node `x` sent since the last call, which starts a new count.
    pub fn take_sent_bytes(&mut self, x: usize) -> u64 {
        std::mem::take(&mut self.nodes[x].sent_bytes)
    }

    /// Bytes app `app` holds, its split classes together.
    pub fn app_buffered_bytes(&self, app: AppId) -> u64 {
        self.accounting.app_buffered_bytes(app)
    }

    /// Whether app `app` held nothing at some moment since the last call.
    pub fn take_app_emptied(&mut self, app: AppId) -> bool {
        self.accounting.take_app_emptied(app)
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
    /// A node stays within 120 bytes: `bytes per class` in docs/results/bench.md.
    #[test]
    fn node_is_120_bytes() {
        assert_eq!(std::mem::size_of::<super::Node>(), 120);
    }
}
