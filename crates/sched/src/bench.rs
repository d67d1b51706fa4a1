//! The enforcer benchmark: enqueue+dequeue pairs per second on one core, and bytes
//! of state per class, on a two-level tree of many classes. The harness (not the
//! enforcers) reads the wall clock; the enforcer sees a virtual clock that advances by
//! each frame's serialisation time at the link rate, so limits pace it exactly as on
//! a real link and the measurement is of the scheduler's CPU cost alone.
//!
//! The tree: [`TENANTS`] tenants of equal weight, each with one app split by
//! destination, so classes = tenants × destinations. By default every split class is
//! limited to its equal part of the link among the active classes, as SENIC would be
//! configured (the sum of active limits equals the link), so every limit binds;
//! [`ClassCap::Link`] limits each to the link instead, as the rte_sched peer limits
//! its pipes, so none does. A backlogged class keeps two packets
//! queued: when one of its packets leaves, the harness enqueues the next, as a
//! backlogged sender refills its socket.
//!
//! ## Bursts
//!
//! With [`BenchConfig::burst`] B above 1 the harness works in bursts, as DPDK's
//! rte_sched does (the peer dequeues and enqueues 32 at a time): it takes up to B
//! frames with [`Enforcer::dequeue_burst`], then hands the refills of the classes
//! that sent back in one [`Enforcer::enqueue_burst`] at the time the link frees up
//! after the burst. With B = 1 (the default) each departure is refilled at once
//! by `dequeue` and `enqueue`, as a backlogged sender's socket is. A pair is one
//! departure and its refill; docs/results/bench.md has what bursts cost.
//!
//! ## Threads
//!
//! With [`BenchConfig::threads`] N above 1, the same load is driven from N threads,
//! and the result also holds the one-thread rate measured in the same run:
//! - an enforcer whose registry row runs it per core ([`Threads::PerCore`], as
//!   `fairnic` and `valve`) runs as its engine would, one shard per thread on a
//!   policy of N engine cores: each thread serves the classes its core's tenants
//!   own, with its own virtual clock and local state, over what the shards share
//!   (`fairnic`'s [`SharedPools`], `valve`'s [`SharedRates`], which every thread
//!   reaches through atomics only);
//! - every other enforcer ([`Threads::HandOff`]) is one object that only one thread
//!   may touch, so it runs
//!   behind a hand-off as the lab's engine thread does: N producer threads prepare
//!   each backlogged class's next packet and hand them to the enforcer's thread in
//!   batches over a bounded `sync_channel`; that thread enqueues and dequeues, and
//!   hands each departure back to the producer of its class to be refilled.
//!
//! [`SharedPools`]: crate::fairnic::SharedPools
//! [`SharedRates`]: crate::valve::SharedRates

use crate::registry::{self, CoreMask, Shards, Threads};
use crate::{Enforcer, Frame, Packet};
use policy::{AppId, Link, Policy, Split, SplitBy, TenantId};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::time::{Duration, Instant};

/// Tenants of the benchmark tree: enough that the tenant level is not trivial, few
/// enough that every tenant holds many classes.
pub const TENANTS: u32 = 16;
/// Link of the benchmark: fast enough that limits are never the bottleneck of a
/// measurement lasting a second of wall time.
pub const LINK_RATE_BPS: u64 = 100_000_000_000;
pub const PACKET_BYTES: u32 = 1500;
/// Packets the state measurement's enforcer may hold: it touches each class with
/// one packet at a time.
const PROBE_PACKETS: usize = 64;
/// Packets each active class keeps queued.
const BACKLOG_PACKETS: u32 = 2;
/// Most threads [`BenchConfig::threads`] may ask for.
pub const THREADS_MAX: usize = 256;
/// Pairs between two reads of the wall clock.
const PAIRS_PER_CLOCK_READ: u64 = 4096;
/// rte_sched's burst: its examples and the peer dequeue 32 and enqueue 32.
pub const RTE_SCHED_BURST: usize = 32;
/// Most frames [`BenchConfig::burst`] may ask for.
pub const BURST_MAX: usize = 4096;
/// Packets in one batch of the hand-off, as the lab's engine reads and sends frames.
const HANDOFF_BATCH: usize = RTE_SCHED_BURST;
/// Batches each producer may have waiting for the enforcer's thread before it
/// waits, as the lab's engine may for a transmit thread.
const HANDOFF_BATCHES_QUEUED: usize = 8;

#[derive(Clone, Debug, PartialEq)]
pub struct BenchConfig {
    pub enforcer: String,
    pub classes: u32,
    /// Fraction of the classes that are backlogged (1.0: all; 0.01: sparse).
    pub active_fraction: f64,
    pub seconds: f64,
    /// Threads driving the enforcer (1: the one-thread harness, see the module docs).
    pub threads: usize,
    /// Frames the one-thread harness and each shard dequeue at once, and refills
    /// they enqueue at once (1: one pair at a time; see the module docs).
    pub burst: usize,
    /// What each class is capped at: whether the enforcer times waits or only
    /// shares the link.
    pub class_cap: ClassCap,
}

/// What each split class of the benchmark tree is capped at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClassCap {
    /// Its equal part of the link among the active classes, as SENIC would be
    /// configured: the active caps add up to the link, so every cap binds and
    /// the enforcer times each class's wait between two of its packets.
    #[default]
    Share,
    /// The link's rate, as the rte_sched peer caps each pipe: a class sends one
    /// packet per round of all the active classes, far below its cap, so no
    /// class ever waits and the enforcer only shares the link. The peer's pipes
    /// never wait for credits (its clock is the real one and its rates are the
    /// link's), so this is the load the peer runs.
    Link,
}

impl ClassCap {
    pub const ALL: [ClassCap; 2] = [ClassCap::Share, ClassCap::Link];

    pub fn name(self) -> &'static str {
        match self {
            ClassCap::Share => "share",
            ClassCap::Link => "link",
        }
    }

    fn per_class_bps(self, active: u32) -> u64 {
        match self {
            ClassCap::Share => (LINK_RATE_BPS / u64::from(active.max(1))).max(1),
            ClassCap::Link => LINK_RATE_BPS,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct BenchResult {
    pub enforcer: String,
    pub classes: u32,
    pub active_classes: u32,
    pub pairs: u64,
    pub seconds: f64,
    pub pairs_per_sec: f64,
    pub ns_per_pair: f64,
    /// `pairs`, `seconds` and the rates above are of this many threads together.
    pub threads: usize,
    /// Frames dequeued at once ([`BenchConfig::burst`]).
    pub burst: usize,
    /// The one-thread harness in the same run: `pairs_per_sec` itself when
    /// `threads` is 1.
    pub pairs_per_sec_1_thread: f64,
    /// `pairs_per_sec` over `pairs_per_sec_1_thread`.
    pub speedup: f64,
}

/// The benchmark's policy for `classes` classes (rounded up to a multiple of
/// [`TENANTS`]) of which `active` are backlogged, each capped at its share.
pub fn policy_for(classes: u32, active: u32) -> Policy {
    policy_capped(classes, active, ClassCap::Share)
}

/// [`policy_for`] with each class capped as `cap` says.
pub fn policy_capped(classes: u32, active: u32, cap: ClassCap) -> Policy {
    let per_class_bps = cap.per_class_bps(active);
    let tenants: Vec<policy::Tenant> = (0..TENANTS)
        .map(|t| policy::Tenant {
            name: format!("t{t}"),
            weight: 1,
            priority: 1,
            min_rate_bps: None,
            max_rate_bps: None,
            cores: vec![0],
            buffer_bytes: None,
            match_src: None,
            match_port: None,
            ingress: None,
            completions: Default::default(),
            napi_tx: false,
            apps: vec![AppId(t)],
        })
        .collect();
    let apps = (0..TENANTS)
        .map(|t| policy::App {
            name: "default".to_string(),
            tenant: TenantId(t as u16),
            weight: 1,
            priority: 1,
            min_rate_bps: None,
            max_rate_bps: None,
            match_proto: None,
            match_ports: Vec::new(),
            split: Some(Split {
                by: SplitBy::Destination,
                max_rate_bps: per_class_bps,
            }),
            implicit: true,
        })
        .collect();
    debug_assert!(classes >= TENANTS);
    Policy {
        link: Link {
            rate_bps: LINK_RATE_BPS,
            queues: 16,
            mtu_bytes: PACKET_BYTES,
        },
        buffer_bytes: None,
        tenants,
        apps,
        host_cores: 1,
        engine: policy::EngineCpu::default(),
    }
}

/// The packet of class `class`: tenant `class % TENANTS`, destination `class / TENANTS`.
pub fn packet_of(class: u32, handle: u64) -> Packet {
    let tenant = class % TENANTS;
    Packet {
        len_bytes: PACKET_BYTES,
        tenant: TenantId(tenant as u16),
        app: AppId(tenant),
        flow: class,
        destination: class / TENANTS,
        core: 0,
        arrival_ns: 0,
        handle,
    }
}

/// The active classes, spread evenly over all classes so every tenant has some.
fn active_classes(classes: u32, active_fraction: f64) -> Vec<u32> {
    let active = ((f64::from(classes) * active_fraction).round() as u32).clamp(1, classes);
    let stride = f64::from(classes) / f64::from(active);
    (0..active)
        .map(|i| ((f64::from(i) * stride) as u32).min(classes - 1))
        .collect()
}

/// Every class of the tree, and every packet of a fully backlogged one.
fn capacity_for(classes: u32) -> crate::Capacity {
    let classes = classes as usize + TENANTS as usize;
    crate::Capacity {
        classes,
        packets: classes * BACKLOG_PACKETS as usize,
        qdisc_packets: None,
        class_packets: None,
    }
}

fn classes_rounded(classes: u32) -> u32 {
    classes.max(TENANTS).div_ceil(TENANTS) * TENANTS
}

/// An enforcer with every active class of the benchmark tree backlogged, ready to
/// run pairs.
pub struct Harness {
    enforcer: Box<dyn Enforcer>,
    now_ns: u64,
    burst: usize,
    /// The frames of the burst being sent and the refills they call for.
    frames: Vec<Frame>,
    refills: Vec<Packet>,
    pub classes: u32,
    pub active_classes: u32,
}

impl Harness {
    pub fn new(config: &BenchConfig) -> Result<Self, String> {
        let classes = classes_rounded(config.classes);
        let active = active_classes(classes, config.active_fraction);
        let policy = policy_capped(classes, active.len() as u32, config.class_cap);
        let enforcer = crate::build_with(&config.enforcer, &policy, capacity_for(classes))
            .map_err(|e| e.to_string())?;
        Harness::backlogged(enforcer, &config.enforcer, classes, &active, config.burst)
    }

    /// `enforcer` with `active` (of `classes`) backlogged.
    fn backlogged(
        mut enforcer: Box<dyn Enforcer>,
        name: &str,
        classes: u32,
        active: &[u32],
        burst: usize,
    ) -> Result<Self, String> {
        for &class in active {
            for _ in 0..BACKLOG_PACKETS {
                enforcer
                    .enqueue(0, packet_of(class, u64::from(class)))
                    .map_err(|(_, why)| {
                        format!(
                            "`{name}` refused the backlog of class {class} of {classes}: {why:?}"
                        )
                    })?;
            }
        }
        Ok(Harness {
            enforcer,
            now_ns: 0,
            burst: burst.max(1),
            frames: Vec::with_capacity(burst),
            refills: Vec::with_capacity(burst),
            classes,
            active_classes: active.len() as u32,
        })
    }

    /// Runs `pairs` enqueue+dequeue pairs, in bursts of up to its burst.
    pub fn pairs(&mut self, pairs: u64) -> Result<(), String> {
        if self.burst == 1 {
            let mut done = 0;
            while done < pairs {
                done += step(self.enforcer.as_mut(), &mut self.now_ns)?;
            }
            return Ok(());
        }
        let mut done = 0;
        while done < pairs {
            let max = usize::try_from(pairs - done).map_or(self.burst, |left| left.min(self.burst));
            depart(
                self.enforcer.as_mut(),
                &mut self.now_ns,
                max,
                &mut self.frames,
            )?;
            self.refills.extend(
                self.frames
                    .drain(..)
                    .filter(|frame| frame.last)
                    .map(|frame| packet_of(frame.packet.flow, frame.packet.handle)),
            );
            done += self.refills.len() as u64;
            refill(self.enforcer.as_mut(), &mut self.refills, self.now_ns)?;
        }
        Ok(())
    }

    /// Runs pairs for `budget` of wall time; the pairs run and the seconds taken.
    fn pairs_for(&mut self, budget: Duration) -> Result<(u64, f64), String> {
        let started = Instant::now();
        let mut pairs = 0u64;
        while started.elapsed() < budget {
            self.pairs(PAIRS_PER_CLOCK_READ)?;
            pairs += PAIRS_PER_CLOCK_READ;
        }
        Ok((pairs, started.elapsed().as_secs_f64()))
    }
}

/// Refuses a thread count the benchmark cannot run, before anything is built.
pub fn check_threads(config: &BenchConfig) -> Result<(), String> {
    if !(1..=BURST_MAX).contains(&config.burst) {
        return Err(format!(
            "a burst of {}: the benchmark takes 1 to {BURST_MAX} frames at once",
            config.burst
        ));
    }
    if !(1..=THREADS_MAX).contains(&config.threads) {
        return Err(format!(
            "{} threads: the benchmark runs 1 to {THREADS_MAX}",
            config.threads
        ));
    }
    if config.threads > 1
        && let Some((mask, _)) = per_core(&config.enforcer)
    {
        shard_classes(config, mask)?;
    }
    Ok(())
}

/// Runs the benchmark for `config.seconds` of wall time, on one thread; with more,
/// on one thread first and then on `config.threads` for as long again.
pub fn run(config: &BenchConfig) -> Result<BenchResult, String> {
    check_threads(config)?;
    let budget = Duration::from_secs_f64(config.seconds.max(0.001));
    let mut harness = Harness::new(config)?;
    let (pairs, seconds) = harness.pairs_for(budget)?;
    let one_thread = pairs as f64 / seconds;
    let (classes, active_classes) = (harness.classes, harness.active_classes);
    drop(harness);
    let (pairs, seconds) = match (config.threads, per_core(&config.enforcer)) {
        (1, _) => (pairs, seconds),
        (_, Some((mask, shards))) => run_shards(config, mask, shards, budget)?,
        (_, None) => run_handoff(config, budget)?,
    };
    let pairs_per_sec = pairs as f64 / seconds;
    Ok(BenchResult {
        enforcer: config.enforcer.clone(),
        classes,
        active_classes,
        pairs,
        seconds,
        pairs_per_sec,
        ns_per_pair: seconds * 1e9 / pairs.max(1) as f64,
        threads: config.threads,
        burst: config.burst,
        pairs_per_sec_1_thread: one_thread,
        speedup: pairs_per_sec / one_thread,
    })
}

/// Rounds of one benchmark added up, as `lab-bench --rounds` adds its rounds: the
/// pairs and seconds summed, so the rates are of all rounds together; the one-thread
/// rate is the rounds' mean (each ran as long), the rate itself on one thread.
/// `None` for no rounds.
pub fn add_rounds(rounds: &[BenchResult]) -> Option<BenchResult> {
    let first = rounds.first()?;
    let pairs: u64 = rounds.iter().map(|r| r.pairs).sum();
    let seconds: f64 = rounds.iter().map(|r| r.seconds).sum();
    let pairs_per_sec = pairs as f64 / seconds;
    let one_thread = if first.threads == 1 {
        pairs_per_sec
    } else {
        rounds.iter().map(|r| r.pairs_per_sec_1_thread).sum::<f64>() / rounds.len() as f64
    };
    Some(BenchResult {
        pairs,
        seconds,
        pairs_per_sec,
        ns_per_pair: seconds * 1e9 / pairs.max(1) as f64,
        pairs_per_sec_1_thread: one_thread,
        speedup: pairs_per_sec / one_thread,
        ..first.clone()
    })
}

/// Rounds of the rte_sched peer added up: each ran as long as the others, so the
/// mean of their rates is the rate of all of them together. `None` for no rounds.
pub fn add_peer_rounds(rounds: &[PeerResult]) -> Option<PeerResult> {
    let first = rounds.first()?;
    let pairs_per_sec = rounds.iter().map(|p| p.pairs_per_sec).sum::<f64>() / rounds.len() as f64;
    Some(PeerResult {
        pairs_per_sec,
        ns_per_pair: 1e9 / pairs_per_sec,
        ..first.clone()
    })
}

/// The lowest and the highest of `values` (`None` when empty or not all finite).
pub fn spread(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .into_iter()
        .try_fold(None, |range: Option<(f64, f64)>, v| {
            v.is_finite()
                .then(|| Some(range.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v)))))
        })?
}

/// The core mask and shards of an enforcer whose row runs it per core.
fn per_core(enforcer: &str) -> Option<(CoreMask, Shards)> {
    match registry::find(enforcer)?.threads()? {
        Threads::PerCore { mask, shards } => Some((mask, shards)),
        Threads::HandOff => None,
    }
}

/// The policy of a threaded run per core (one engine core per thread), and per
/// core the backlogged classes its tenants own (by `mask`); `Err` when a core would
/// have none, since its thread would have nothing to measure.
fn shard_classes(config: &BenchConfig, mask: CoreMask) -> Result<(Policy, Vec<Vec<u32>>), String> {
    let classes = classes_rounded(config.classes);
    let active = active_classes(classes, config.active_fraction);
    let mut policy = policy_capped(classes, active.len() as u32, config.class_cap);
    policy.engine.cores = u16::try_from(config.threads).map_err(|_| {
        format!(
            "{} threads are more engine cores than a policy has",
            config.threads
        )
    })?;
    let mask = mask(&policy);
    let mut per_core = vec![Vec::new(); config.threads];
    for &class in &active {
        let packet = packet_of(class, 0);
        let core = crate::cores::core_of(&mask, packet.tenant, packet.flow);
        per_core[usize::from(core)].push(class);
    }
    if let Some(idle) = per_core.iter().position(Vec::is_empty) {
        return Err(format!(
            "{} with {} threads: engine core {idle} serves none of the {} backlogged classes (a flow stays on one core of its tenant, and the tree has {TENANTS} tenants); use fewer threads or a larger --active",
            config.enforcer,
            config.threads,
            active.len()
        ));
    }
    Ok((policy, per_core))
}

/// `config.threads` threads, each driving one engine core's shard over what the
/// shards share; the pairs of all threads, and the longest any thread ran.
fn run_shards(
    config: &BenchConfig,
    mask: CoreMask,
    shards: Shards,
    budget: Duration,
) -> Result<(u64, f64), String> {
    let (policy, per_core) = shard_classes(config, mask)?;
    let classes = classes_rounded(config.classes);
    let shard = shards(&policy)?;
    // Every thread builds its shard, then they start the clock together.
    let ready = Barrier::new(per_core.len());
    let measured: Vec<Result<(u64, f64), String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = per_core
            .iter()
            .enumerate()
            .map(|(core, mine)| {
                let (shard, ready) = (&shard, &ready);
                scope.spawn(move || {
                    let capacity = crate::Capacity {
                        classes: capacity_for(mine.len() as u32).classes,
                        ..capacity_for(classes)
                    };
                    let harness = Harness::backlogged(
                        shard(core as u16, capacity),
                        &config.enforcer,
                        classes,
                        mine,
                        config.burst,
                    );
                    ready.wait();
                    harness?.pairs_for(budget)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("a shard's thread panicked".into()))
            })
            .collect()
    });
    let mut pairs = 0;
    let mut seconds = 0f64;
    for result in measured {
        let (p, s) = result?;
        pairs += p;
        seconds = seconds.max(s);
    }
    Ok((pairs, seconds))
}

/// Any enforcer behind the lab engine's hand-off: `config.threads` producers and
/// the enforcer's own thread (this one). The pairs are the departures the
/// enforcer's thread handed back.
fn run_handoff(config: &BenchConfig, budget: Duration) -> Result<(u64, f64), String> {
    let mut harness = Harness::new(config)?;
    let producers = config.threads;
    // Small enough that the batches held back while they fill leave most classes
    // backlogged.
    let batch = (harness.active_classes as usize * BACKLOG_PACKETS as usize / (4 * producers))
        .clamp(1, HANDOFF_BATCH);
    let (to_enforcer, handed) = std::sync::mpsc::sync_channel(producers * HANDOFF_BATCHES_QUEUED);
    std::thread::scope(|scope| {
        let departures: Vec<Sender<Vec<Packet>>> = (0..producers)
            .map(|_| {
                let (departures, left) = std::sync::mpsc::channel();
                let to_enforcer = to_enforcer.clone();
                scope.spawn(move || produce(left, to_enforcer));
                departures
            })
            .collect();
        drop(to_enforcer);
        // Returning drops the channels, which ends the producers.
        enforce(&mut harness, handed, departures, batch, budget)
    })
}

/// A producer: turns each departure of its classes into the class's next packet,
/// and hands the batch back in the same buffer.
fn produce(left: Receiver<Vec<Packet>>, to_enforcer: SyncSender<Vec<Packet>>) {
    for mut batch in left {
        for packet in &mut batch {
            *packet = packet_of(packet.flow, packet.handle);
        }
        if to_enforcer.send(batch).is_err() {
            return;
        }
    }
}

/// The enforcer's thread of the hand-off: enqueues what producers handed over,
/// dequeues up to a batch, and hands each departure to its class's producer in
/// batches. It waits only when it holds nothing, after handing over every partial
/// batch, so it never waits on a producer that waits on it. The producers' channels
/// are not bounded, as the lab's transmit threads hand batches back: the packets
/// in flight bound them.
fn enforce(
    harness: &mut Harness,
    handed: Receiver<Vec<Packet>>,
    departures: Vec<Sender<Vec<Packet>>>,
    batch: usize,
    budget: Duration,
) -> Result<(u64, f64), String> {
    let producers = departures.len();
    let mut filling: Vec<Vec<Packet>> = (0..producers).map(|_| Vec::with_capacity(batch)).collect();
    let mut spare: Vec<Vec<Packet>> = Vec::new();
    let enforcer = harness.enforcer.as_mut();
    let now_ns = &mut harness.now_ns;
    let frames = &mut harness.frames;
    let started = Instant::now();
    let mut pairs = 0u64;
    let mut next_clock_read = PAIRS_PER_CLOCK_READ;
    loop {
        if pairs >= next_clock_read {
            if started.elapsed() >= budget {
                break;
            }
            next_clock_read = pairs + PAIRS_PER_CLOCK_READ;
        }
        while let Ok(mut packets) = handed.try_recv() {
            refill(enforcer, &mut packets, *now_ns)?;
            spare.push(packets);
        }
        if enforcer.backlog_packets() > 0 {
            depart(enforcer, now_ns, batch, frames)?;
        }
        for frame in frames.drain(..).filter(|frame| frame.last) {
            pairs += 1;
            let producer = frame.packet.flow as usize % producers;
            filling[producer].push(frame.packet);
            if filling[producer].len() == batch {
                hand_over(
                    &mut filling[producer],
                    &departures[producer],
                    &mut spare,
                    batch,
                )?;
            }
        }
        if enforcer.backlog_packets() == 0 {
            for (packets, to) in filling.iter_mut().zip(&departures) {
                if !packets.is_empty() {
                    hand_over(packets, to, &mut spare, batch)?;
                }
            }
            let mut packets = handed
                .recv()
                .map_err(|_| "every producer stopped".to_string())?;
            refill(enforcer, &mut packets, *now_ns)?;
            spare.push(packets);
        }
    }
    Ok((pairs, started.elapsed().as_secs_f64()))
}

/// Enqueues refills in one burst, leaving their buffer empty.
fn refill(
    enforcer: &mut dyn Enforcer,
    packets: &mut Vec<Packet>,
    now_ns: u64,
) -> Result<(), String> {
    let admitted = enforcer.enqueue_burst(now_ns, packets);
    if let Err((i, why)) = admitted {
        return Err(format!(
            "refill of class {} refused: {why:?}",
            packets[i].flow
        ));
    }
    packets.clear();
    Ok(())
}

/// Sends `packets` to a producer and starts a new batch in a spare buffer.
fn hand_over(
    packets: &mut Vec<Packet>,
    to: &Sender<Vec<Packet>>,
    spare: &mut Vec<Vec<Packet>>,
    batch: usize,
) -> Result<(), String> {
    let fresh = spare.pop().unwrap_or_else(|| Vec::with_capacity(batch));
    to.send(std::mem::replace(packets, fresh))
        .map_err(|_| "a producer stopped".to_string())
}

/// One dequeue and the refill of the class that sent; 1 pair, or 0 when a frame
/// of a longer packet left or the enforcer held everything back (the virtual clock
/// then jumps to its next time).
fn step(enforcer: &mut dyn Enforcer, now_ns: &mut u64) -> Result<u64, String> {
    let Some(frame) = enforcer.dequeue(*now_ns) else {
        wait_for(enforcer, now_ns)?;
        return Ok(0);
    };
    *now_ns += policy::wire::serialisation_ns(frame.bytes, LINK_RATE_BPS);
    if !frame.last {
        return Ok(0);
    }
    let class = frame.packet.flow;
    enforcer
        .enqueue(*now_ns, packet_of(class, frame.packet.handle))
        .map_err(|(_, why)| format!("refill of class {class} refused: {why:?}"))?;
    Ok(1)
}

/// The enforcer held everything back: the virtual clock jumps to its next time.
fn wait_for(enforcer: &dyn Enforcer, now_ns: &mut u64) -> Result<(), String> {
    let next = enforcer
        .next_ready_ns(*now_ns)
        .ok_or("the enforcer holds packets but names no time to send them")?;
    *now_ns = next.max(*now_ns + 1);
    Ok(())
}

/// One burst of up to `max` frames onto the benchmark's link, appended to
/// `frames`, the virtual clock moving past them; when the enforcer held everything
/// back, none, and the clock jumps to its next time.
fn depart(
    enforcer: &mut dyn Enforcer,
    now_ns: &mut u64,
    max: usize,
    frames: &mut Vec<Frame>,
) -> Result<(), String> {
    let sent_before = frames.len();
    let free_ns = enforcer.dequeue_burst(*now_ns, LINK_RATE_BPS, max, frames);
    if frames.len() > sent_before {
        *now_ns = free_ns;
        return Ok(());
    }
    wait_for(enforcer, now_ns)
}

/// A global allocator that counts live heap bytes, for [`bytes_per_class`]: a
/// library cannot install one, so each binary that measures state installs this
/// (`#[global_allocator] static A: CountingAllocator = CountingAllocator;`).
pub struct CountingAllocator;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Heap bytes allocated and not yet freed.
pub fn live_heap_bytes() -> usize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter
// only observes sizes.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller passes a pointer this allocator returned, with its layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for alloc and dealloc.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
            LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        moved
    }
}

/// Bytes of heap the enforcer holds per class once every class has been seen:
/// `allocated` reads the process's live heap bytes ([`live_heap_bytes`] under a
/// [`CountingAllocator`]). Preallocated capacity counts, since
/// that is what a host must have; the packet pool does not, since it is sized by
/// the packets a host holds, not by its classes (rte_sched's mbufs are not counted
/// either): it is built for [`PROBE_PACKETS`] here.
pub fn bytes_per_class(
    enforcer: &str,
    classes: u32,
    allocated: &dyn Fn() -> usize,
) -> Result<f64, String> {
    let classes = classes_rounded(classes);
    let policy = policy_for(classes, classes);
    let mut frames = Vec::with_capacity(PROBE_PACKETS);
    let before = allocated();
    let capacity = crate::Capacity {
        packets: PROBE_PACKETS,
        ..capacity_for(classes)
    };
    let mut built = crate::build_with(enforcer, &policy, capacity).map_err(|e| e.to_string())?;
    let mut now_ns = 0;
    // Touch every class once, so classes created on demand exist.
    for class in 0..classes {
        built
            .enqueue(now_ns, packet_of(class, u64::from(class)))
            .map_err(|(_, why)| format!("class {class} of {classes} refused: {why:?}"))?;
        now_ns = built.dequeue_burst(now_ns, LINK_RATE_BPS, usize::MAX, &mut frames);
        // An enforcer that holds packets for tokens (fairnic's buckets start empty)
        // is waited for once the probe's packets are all held, or the next class
        // would be refused.
        while built.backlog_packets() >= PROBE_PACKETS {
            depart(built.as_mut(), &mut now_ns, 1, &mut frames)?;
        }
        frames.clear();
    }
    let after = allocated();
    drop(built);
    Ok(after.saturating_sub(before) as f64 / f64::from(classes))
}

/// What the rte_sched peer measured (its one JSON line, parsed).
#[derive(Clone, Debug, PartialEq)]
pub struct PeerResult {
    pub pairs_per_sec: f64,
    pub ns_per_pair: f64,
    pub queues: u64,
    pub active_queues: u64,
}

/// Where the rte_sched peer is: `$NICSCHED_RTE_SCHED_PEER`, else
/// `target/rte_sched_peer/rte_sched_peer` (as scripts/setup.sh builds it) below the
/// current directory or one of its parents (cargo runs tests and benches from the
/// crate's directory, below the workspace root), else beside the running program's
/// `target/`.
pub fn peer_binary() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    let relative = PathBuf::from("target/rte_sched_peer/rte_sched_peer");
    let mut candidates: Vec<PathBuf> = std::env::var_os("NICSCHED_RTE_SCHED_PEER")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if let Ok(cwd) = std::env::current_dir() {
        candidates.extend(cwd.ancestors().map(|dir| dir.join(&relative)));
    }
    if let Ok(exe) = std::env::current_exe() {
        // target/release/nicsched or target/release/deps/bench-…: walk up to target/.
        for dir in exe.ancestors().skip(1).take(3) {
            if dir.file_name().is_some_and(|n| n == "target") {
                candidates.push(dir.join("rte_sched_peer/rte_sched_peer"));
            }
        }
    }
    candidates.into_iter().find(|p| p.is_file())
}

/// Runs the rte_sched peer on `queues` queues for `seconds` and parses its result.
pub fn run_peer(
    peer: &std::path::Path,
    queues: u32,
    active_fraction: f64,
    seconds: f64,
) -> Result<PeerResult, String> {
    let output = std::process::Command::new(peer)
        .args(["--queues", &queues.to_string()])
        .args(["--active", &active_fraction.to_string()])
        .args(["--seconds", &seconds.to_string()])
        .output()
        .map_err(|e| format!("{}: {e}", peer.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            peer.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let field = |name: &str| -> Result<f64, String> {
        let key = format!("\"{name}\":");
        let start = stdout
            .find(&key)
            .ok_or_else(|| format!("peer output lacks {name}: {stdout}"))?
            + key.len();
        stdout[start..]
            .split([',', '}'])
            .next()
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("peer output has a bad {name}: {stdout}"))
    };
    Ok(PeerResult {
        pairs_per_sec: field("pairs_per_sec")?,
        ns_per_pair: field("ns_per_pair")?,
        queues: field("queues")? as u64,
        active_queues: field("active_queues")? as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_has_the_classes_asked_for_and_active_ones_spread_over_tenants() {
        assert_eq!(classes_rounded(1000), 1008);
        assert_eq!(classes_rounded(1), TENANTS);
        let active = active_classes(1600, 0.01);
        assert_eq!(active.len(), 16);
        let tenants: std::collections::BTreeSet<u32> = active.iter().map(|c| c % TENANTS).collect();
        assert!(tenants.len() > 1);
        assert!(active.windows(2).all(|w| w[0] < w[1]));
        let policy = policy_for(1600, 16);
        assert_eq!(
            policy.apps[0].split.unwrap().max_rate_bps,
            LINK_RATE_BPS / 16
        );
    }
}
