//! The forwarding engine: nicsched's enforcer on real frames. It runs on its own
//! thread inside the engine namespace, with one AF_PACKET socket per tenant port and
//! one on the uplink, and loops:
//!
//! 1. read the monotonic clock once (`now_ns`, passed to everything below) and do
//!    what is due beside the frames: the ports' drop counts, the live drops, the
//!    frames the transmit threads sent, the host side's feedback epoch
//!    (`catch_up`);
//! 2. read frames from the tenant ports in batches (`read_tenants`); each IPv4
//!    frame is copied into a preallocated slab slot, classified and offered to the
//!    enforcer with the slot as its `handle`; a refused frame frees its slot (a drop
//!    of its tenant). IPv4 and IPv6 frames are classified by the policy's rules, any
//!    other ethertype is its tenant's catch-all traffic: nothing a tenant sends
//!    reaches the link unscheduled. Malformed frames ([`Malformed`]) are dropped and
//!    counted by kind. When the run has engine cores ([`crate::cores`]), a frame
//!    first waits for a core thread to hold it for its cost, and is offered to the
//!    enforcer on a later pass;
//! 3. read the uplink and send each frame back to the tenant port its destination
//!    MAC names (flooded when none does), unscheduled: the reverse path is not the
//!    link under study; across hosts, into the [`HostSide`]'s ingress instead
//!    (`read_uplink`);
//! 4. while the emulated link is free (`Link::free_ns <= now_ns`, give or take
//!    `TX_AHEAD_NS`), dequeue a frame, send it and hold the link for its
//!    serialisation time at the link rate (`transmit`);
//! 5. sleep until the link is `WAKE_AHEAD_NS` from free, the enforcer's next
//!    deadline, the host side's next epoch, or a frame arrives (`wait`).
//!
//! Unpaced (`link_rate_bps: None`, for the benchmark), step 4 sends every frame the
//! enforcer hands out and the link is never busy; everything else is the same loop.
//!
//! On a real host's egress ([`Engine::on_egress`], `nicsched enforce`) step 2 reads
//! one tap that carries every tenant's frames, each frame's tenant told by its
//! source address, and step 3 does nothing: the uplink is the host's device, only
//! sent on, its ingress the host's own. Everything else is the same loop.
//!
//! Every socket carries a virtio-net header per frame: a TCP send the tenant's stack
//! left unsegmented (GSO, up to 64 KiB) is one frame and one `Packet`, as in the
//! simulator, and goes out whole with its header when the NIC model's last MTU-sized
//! piece of it leaves; the sink's stack takes it as it is. Per-frame costs (the
//! copies, the syscalls, the sink's TCP receive run in the engine's `send`) are paid
//! once per send instead of once per MTU.
//!
//! The link counts L3 bytes (what a frame carries past its Ethernet header, whatever
//! its IP header claims), as the simulator and the ideal do.
//! The engine's buffer stands for the host's qdiscs ([`HostBuffer`]), on top of the
//! policy's own buffer caps that the enforcer applies.

use crate::classify::{Classifier, Malformed, ParsedFrame, parse};
use crate::cores::{CoreSetup, CoreSpent, Shared};
use crate::host_side::HostSide;
use crate::link::LinkClock;
use crate::sys::packet::{BATCH, PacketSocket, Poller, RxFrame, RxRing, VNET_HDR_BYTES};
use crate::sys::tap::Tap;
use policy::wire::serialisation_ns;
use policy::{Policy, TenantId};
use sched::{Enforcer, Frame, Packet};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// What the engine needs to know of the topology and the link.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The engine's end of each tenant's veth, indexed by tenant.
    pub ports: Vec<String>,
    pub tenant_macs: Vec<[u8; 6]>,
    pub uplink: String,
    /// The emulated link's rate; `None`: unpaced, every frame leaves as soon as the
    /// enforcer hands it out (`nicsched lab-bench`, which measures how fast the
    /// engine forwards, not how well it shares a link).
    pub link_rate_bps: Option<u64>,
    pub buffer: HostBuffer,
    /// Threads that send the enforcer's frames on the uplink beside the engine's
    /// own (0: it sends them itself). Each flow's frames go to one of them, in
    /// order; the engine thread keeps receiving, scheduling and pacing.
    pub transmit_threads: usize,
    /// The engine's cores, when the run asks for them: frames then wait for a core
    /// thread before the enforcer sees them ([`crate::cores`]).
    pub cores: Option<CoreSetup>,
}

/// The lab's qdisc limits, in packets ([`sched::Capacity::for_host`]). A real host's
/// TCP small queues keep a couple of sends per flow in a qdisc, but a veth orphans
/// the tenant's frames, so in the lab only these limits bound a CUBIC flow, and a
/// deep one makes round trips of hundreds of ms that a run of seconds never sees
/// converge. Measured at 1 Gbit/s (docs/results/lab.md): 512 packets per queue
/// (8 MiB of 16 KiB GSO frames) left `hash` on 8 flows against 64 at Jain 0.98
/// after 15 s, 64 at 0.72-0.77 as on a host, and at 16 `tonic`'s one queue per
/// tenant no longer filled the link (utilization 0.83). Per app (measured when the
/// bound was per tenant, on tenants of one app), 512 packets let
/// a tenant capped at 100 Mbit/s queue 670 ms and get 96.8 Mbit/s; 128 gave
/// 99.8-100, and 64 left the tenant with 64 flows of 8 against 64 too few packets
/// (`wf2q` Jain min 0.91). (A per-tenant bound in front of the NIC model's FIFO
/// queues would itself share the link by tenant: with CUBIC senders filling it,
/// `hash` reached Jain 0.94 on 8 flows against 64.)
pub const LAB_HOST_LIMITS: sched::HostLimits = sched::HostLimits {
    queue_packets: 64,
    class_packets: 128,
};

/// What the engine holds in front of the enforcer: the host's limits, applied by
/// the enforcer's own accounting, and the frame slots that back them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostBuffer {
    /// What the enforcer is built with.
    pub capacity: sched::Capacity,
    /// Frames the engine can hold at once, whatever their tenant.
    pub slab_slots: u32,
}

/// Frame slots the engine may keep: each holds up to a frame once used, so this
/// bounds the engine's memory (about 400 MB of 1514 B frames).
pub const SLAB_SLOTS_MAX: u64 = 1 << 18;

impl HostBuffer {
    /// Refuses a policy and limits whose slots would pass [`SLAB_SLOTS_MAX`] (a
    /// multiqueue NIC of thousands of queues, each with its qdisc and ring).
    pub fn new(
        enforcer: &str,
        policy: &Policy,
        limits: sched::HostLimits,
    ) -> Result<HostBuffer, TooLarge> {
        // Room beyond the bounds for the frames an enforcer holds outside them.
        const SPARE_SLOTS: u32 = 64;
        let capacity = sched::Capacity::for_host(enforcer, limits);
        let slab_slots = match sched::registry::find(enforcer).and_then(|e| e.nic()) {
            Some(driver) => {
                let queues = u64::from(driver.queues(policy));
                // Descriptor rings hold packets beyond the qdiscs: up to
                // `ring_bytes_max` bytes of the smallest IPv4 packets each.
                let ring_bytes =
                    sched::nic::ring_bytes_max(policy.link.rate_bps, policy.link.mtu_bytes);
                let ring_packets = ring_bytes.div_ceil(MIN_IPV4_PACKET_BYTES) + 1;
                queues * u64::from(limits.queue_packets + ring_packets)
            }
            None => {
                u64::from(capacity.class_packets_max(policy.apps.len())) * policy.apps.len() as u64
            }
        };
        if slab_slots > SLAB_SLOTS_MAX {
            return Err(TooLarge(format!(
                "`{enforcer}` would hold up to {slab_slots} frames in the engine, above its bound of {SLAB_SLOTS_MAX}: lower --queue-limit or --class-limit, or use fewer queues or apps"
            )));
        }
        Ok(HostBuffer {
            capacity,
            slab_slots: slab_slots as u32 + SPARE_SLOTS,
        })
    }
}

/// A buffer the engine will not allocate, with what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge(pub String);

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TooLarge {}

/// What the engine publishes while it runs, for a live view of a run that may
/// last weeks: counts since it started, written by the engine alone every
/// [`LIVE_DROPS_EVERY_NS`] and when it stops.
#[derive(Debug)]
pub struct Published {
    /// Per tenant, its drops ([`Engine::publishing_drops`]'s).
    pub tenant_drops: Box<[AtomicU64]>,
    /// Per tenant, the L3 bytes of its frames that left whole on the uplink.
    pub tenant_sent_bytes: Box<[AtomicU64]>,
    /// Per app, the L3 bytes of its frames the engine received, and of them those
    /// refused (by the enforcer, or for want of room in the host's buffer).
    pub app_offered_bytes: Box<[AtomicU64]>,
    pub app_refused_bytes: Box<[AtomicU64]>,
    /// Frames on an egress ([`Engine::on_egress`]) from no tenant's address,
    /// dropped.
    pub unclassified: AtomicU64,
}

impl Published {
    pub fn new(policy: &Policy) -> Published {
        let zeros = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect();
        Published {
            tenant_drops: zeros(policy.tenants.len()),
            tenant_sent_bytes: zeros(policy.tenants.len()),
            app_offered_bytes: zeros(policy.apps.len()),
            app_refused_bytes: zeros(policy.apps.len()),
            unclassified: AtomicU64::new(0),
        }
    }
}

/// Where the tenants' frames come from.
enum Intake {
    /// One port per tenant ([`EngineConfig::ports`]): a frame's tenant is its port's.
    Ports(Vec<RxRing>),
    /// The ports of this thread's tenants, one engine thread of several
    /// ([`ShardPart`]); `back`: a socket that sends on every tenant's port, by
    /// tenant, for the frames from the uplink, where this thread reads it.
    Shard {
        rings: Vec<(TenantId, RxRing)>,
        back: Vec<PacketSocket>,
    },
    /// One device that carries every tenant's frames ([`Engine::on_egress`]): a
    /// frame's tenant is told by its source address.
    Egress(Tap),
}

impl Intake {
    fn fds(&self) -> Vec<std::os::fd::RawFd> {
        match self {
            Intake::Ports(ports) => ports.iter().map(|p| p.socket().raw_fd()).collect(),
            Intake::Shard { rings, .. } => rings.iter().map(|(_, r)| r.socket().raw_fd()).collect(),
            Intake::Egress(tap) => vec![tap.raw_fd()],
        }
    }
}

/// Where a frame from the uplink goes back to its tenant: the tenants' own ports'
/// sockets, or on an engine thread of several, sockets of its own on every port.
enum Back<'a> {
    Rings(&'a [RxRing]),
    Senders(&'a [PacketSocket]),
}

impl Back<'_> {
    fn ports(&self) -> usize {
        match self {
            Back::Rings(rings) => rings.len(),
            Back::Senders(senders) => senders.len(),
        }
    }

    fn socket(&self, tenant: usize) -> &PacketSocket {
        match self {
            Back::Rings(rings) => rings[tenant].socket(),
            Back::Senders(senders) => &senders[tenant],
        }
    }
}

/// What one engine thread of several handles ([`crate::shards`]): its tenants'
/// ports, and the uplink's return path on one of them.
#[derive(Clone, Debug)]
pub struct ShardPart {
    /// The tenants whose ports this thread reads, and whose frames its enforcer
    /// shard takes.
    pub tenants: Vec<TenantId>,
    /// Whether it reads the uplink and sends what comes back to the tenants' ports.
    pub reads_uplink: bool,
}

/// The uplink: read for the frames that come back to the tenants (the lab), or
/// on a real host's egress only sent on, its ingress left to the host.
enum Uplink {
    Both(RxRing),
    SendOnly(PacketSocket),
}

impl Uplink {
    fn sender(&self) -> &PacketSocket {
        match self {
            Uplink::Both(ring) => ring.socket(),
            Uplink::SendOnly(socket) => socket,
        }
    }

    fn reader_fd(&self) -> Option<std::os::fd::RawFd> {
        match self {
            Uplink::Both(ring) => Some(ring.socket().raw_fd()),
            Uplink::SendOnly(_) => None,
        }
    }
}

/// An IPv4 header alone; no frame the engine schedules is shorter.
const MIN_IPV4_PACKET_BYTES: u32 = 20;

#[derive(Clone, Copy)]
enum FrameKind {
    Ipv4,
    Ipv6,
    Other,
}

fn count_malformed(counts: &mut report::MalformedFrames, why: Malformed) {
    *match why {
        Malformed::Runt => &mut counts.runt,
        Malformed::BadHeader => &mut counts.bad_header,
        Malformed::LengthBeyondFrame => &mut counts.length_beyond_frame,
        Malformed::TruncatedTransport => &mut counts.truncated_transport,
        Malformed::Oversize => &mut counts.oversize,
    } += 1;
}

/// Per-frame counters of one engine run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineStats {
    pub rx_frames: u64,
    /// Frames scheduled and sent on the uplink, and their L3 bytes.
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Per tenant, its frames by fate: scheduled by kind, refused, malformed by kind.
    pub frames: Vec<report::TenantFrames>,
    /// Frames from the sink sent back to tenant ports.
    pub return_frames: u64,
    /// Frames from the sink too short to carry a destination MAC.
    pub return_malformed: u64,
    /// Dropped because the tenant's engine buffer or the slab was full, per tenant.
    pub buffer_drops: Vec<u64>,
    /// Refused by the enforcer (packet accounting), per tenant.
    pub refused: Vec<u64>,
    /// Sends the uplink answered "busy" (retried).
    pub send_busy: u64,
    /// Per tenant, the L3 bytes of its IPv4 frames: received from its port
    /// (offered), dropped for want of a slot or refused by the enforcer, handed to
    /// the link (the enforcer's frames, a GSO send's MTU pieces as they leave), and
    /// still held when the engine stopped.
    pub ledgers: Vec<report::TenantLedger>,
    /// Per tenant, the L3 bytes of the frames that went out whole on the uplink:
    /// what the sink can see.
    pub uplink_bytes: Vec<u64>,
    /// Classes the policy's `split` made of the packets offered (one per
    /// destination or flow key of a split app), as the enforcer counts them;
    /// `None` under an enforcer without per-class state.
    pub split_classes: Option<usize>,
    /// Iterations of the loop (each reads the clock once and ends in one `ppoll`).
    pub loops: u64,
    /// Of those, ending with the link free and packets held that the enforcer would
    /// not yet release (a shaper's or a departure time's wait).
    pub held_waits: u64,
    /// Link time lost while the enforcer had a frame ready: the engine came back
    /// later than [`CATCH_UP_NS`] after the link freed (it waited for a core).
    pub lost_link_ns: u64,
    /// How long the engine ran.
    pub run_ns: u64,
    /// CPU time of the transmit threads together ([`EngineConfig::transmit_threads`]).
    pub transmit_cpu_ns: u64,
    /// CPU time of the engine's other threads when it runs on several
    /// ([`crate::shards`]): all but the one that called it.
    pub shard_cpu_ns: u64,
    /// What the engine's cores did, when the run has them.
    pub cores: Option<CoreStats>,
    /// What a host's engine counted per traffic, in a run across hosts.
    pub hosts: Option<crate::host_side::HostCounts>,
}

impl EngineStats {
    /// Adds `other`'s counts of frames, bytes, loops and CPU time to these: the
    /// counts of two rounds, or of two threads of one engine. The times that are
    /// not counts (`run_ns`), the classes, the cores and the host side are the
    /// caller's to combine.
    pub fn add_counts(&mut self, other: &EngineStats) {
        fn add(into: &mut [u64], from: &[u64]) {
            into.iter_mut().zip(from).for_each(|(a, b)| *a += b);
        }
        self.rx_frames += other.rx_frames;
        self.tx_frames += other.tx_frames;
        self.tx_bytes += other.tx_bytes;
        for (into, from) in self.frames.iter_mut().zip(&other.frames) {
            *into = into.merged(from);
        }
        self.return_frames += other.return_frames;
        self.return_malformed += other.return_malformed;
        add(&mut self.buffer_drops, &other.buffer_drops);
        add(&mut self.refused, &other.refused);
        self.send_busy += other.send_busy;
        for (into, from) in self.ledgers.iter_mut().zip(&other.ledgers) {
            into.offered_bytes += from.offered_bytes;
            into.refused_bytes += from.refused_bytes;
            into.sent_bytes += from.sent_bytes;
            into.held_bytes += from.held_bytes;
        }
        add(&mut self.uplink_bytes, &other.uplink_bytes);
        self.loops += other.loops;
        self.held_waits += other.held_waits;
        self.lost_link_ns += other.lost_link_ns;
        self.transmit_cpu_ns += other.transmit_cpu_ns;
        self.shard_cpu_ns += other.shard_cpu_ns;
    }
}

/// The engine's cores over a run ([`crate::cores`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreStats {
    /// Per core thread, the time it held each tenant's frames.
    pub tenant_busy_ns: Vec<Vec<u64>>,
    /// Per core thread, how long of that past the frames' deadlines
    /// ([`CoreSpent::late_ns`]).
    pub late_ns: Vec<u64>,
    /// Per tenant, frames refused for want of room in the cores' queues. With the
    /// frames dropped at its port before the engine read them (under `weighted`
    /// its frames wait there for room, so that is where the cores refuse them),
    /// its `engine_refused`.
    pub queue_refused: Vec<u64>,
    pub ledgers: Vec<report::EngineLedger>,
}

/// Frame bytes of every packet the enforcer holds, one slot per packet. A slot keeps
/// the room of the largest frame it held, so after warm-up storing allocates
/// nothing, and memory follows the frames held rather than the slots times 64 KiB.
struct Slab {
    slots: Vec<Vec<u8>>,
    free: Vec<u32>,
}

impl Slab {
    fn new(slots: u32) -> Slab {
        Slab {
            slots: (0..slots).map(|_| Vec::new()).collect(),
            free: (0..slots).rev().collect(),
        }
    }

    fn store(&mut self, frame: &[u8]) -> Option<u32> {
        let slot = self.free.pop()?;
        let bytes = &mut self.slots[slot as usize];
        bytes.clear();
        bytes.extend_from_slice(frame);
        Some(slot)
    }

    fn get(&self, slot: u32) -> &[u8] {
        &self.slots[slot as usize]
    }

    fn release(&mut self, slot: u32) {
        debug_assert!(!self.free.contains(&slot));
        self.free.push(slot);
    }

    /// Lends a slot's bytes to a transmit thread; the slot stays taken.
    fn lend(&mut self, slot: u32) -> Vec<u8> {
        std::mem::take(&mut self.slots[slot as usize])
    }

    /// Takes a lent slot's bytes back and frees the slot.
    fn give_back(&mut self, slot: u32, bytes: Vec<u8>) {
        self.slots[slot as usize] = bytes;
        self.release(slot);
    }
}

/// Frames handed to a transmit thread, with their bytes; it hands the batch back
/// with how many of them it sent.
type TxBatch = Vec<(Packet, Vec<u8>)>;

/// The engine's side of its transmit threads.
struct TxThreads {
    to: Vec<std::sync::mpsc::SyncSender<TxBatch>>,
    back: std::sync::mpsc::Receiver<(TxBatch, usize)>,
    /// Batches being filled, one per thread, and emptied ones for reuse.
    filling: Vec<TxBatch>,
    spare: Vec<TxBatch>,
}

/// Batches a transmit thread may have waiting before the engine waits for it.
const TX_THREAD_BATCHES: usize = 8;

/// A transmit thread: sends each batch it gets with `sendmmsg`, retrying while
/// the device is busy (until `stop`), and hands it back. Returns its CPU time.
fn transmit(
    uplink: PacketSocket,
    batches: std::sync::mpsc::Receiver<TxBatch>,
    back: std::sync::mpsc::Sender<(TxBatch, usize)>,
    stop: &AtomicBool,
) -> std::io::Result<u64> {
    let cpu_ns = crate::sys::clock::thread_cpu_ns();
    for batch in batches {
        let mut sent = 0;
        while sent < batch.len() {
            let n = uplink.send_batch(batch[sent..].iter().map(|(_, bytes)| bytes.as_slice()))?;
            sent += n;
            if n == 0 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
        }
        if back.send((batch, sent)).is_err() {
            break;
        }
    }
    Ok(crate::sys::clock::thread_cpu_ns() - cpu_ns)
}

/// How far the emulated link may catch up after the thread woke late: frames may
/// leave back to back for at most this much lost time, never faster on average.
/// 1 ms: on a 2-core machine with a UDP flood and TCP senders beside it, the engine
/// often waits a few hundred µs for a core (200 µs lost 5-15% of a 100 Mbit/s link).
const CATCH_UP_NS: u64 = 1_000_000;
/// Frames may leave this much before the emulated link frees, so that at high
/// rates one wake-up sends a few frames instead of one; the rate is unchanged. A
/// frame handed over early is one a prioritised packet arriving then waits behind:
/// 100 µs put a probe's p99 at 568-701 µs, 30 µs at 421-477 (`prio-sockperf`,
/// `wf2q`/`valve`, 1 Gbit/s, one run each) with no loss of utilization.
const TX_AHEAD_NS: u64 = 30_000;
/// The engine sleeps until the link is this close to free (or a frame arrives):
/// each wake-up then sends what falls due in the next `TX_AHEAD_NS` (one 16 KiB
/// GSO frame or a few MTU frames at 1 Gbit/s), not the one frame that came due.
const WAKE_AHEAD_NS: u64 = 20_000;
/// Longest sleep: how quickly the engine notices `stop`.
const IDLE_WAIT_NS: u64 = 2_000_000;
/// Socket receive buffers, for the frames too large for a ring slot (GSO sends):
/// room for bursts while the engine is descheduled.
const RCVBUF_BYTES: usize = 8 << 20;
/// Receive rings of all ports together: the kernel allocates them when the engine
/// starts, so a lab of thousands of tenants gets smaller rings, not gigabytes.
const RING_BYTES_TOTAL: usize = 64 << 20;

/// One port's receive ring: up to 4 MiB (2048 MTU-sized frames, about as many
/// small frames as the 8 MiB socket buffer held), at least 64 KiB.
fn ring_bytes_per_port(ports: usize) -> usize {
    (RING_BYTES_TOTAL / ports.max(1)).clamp(64 << 10, 4 << 20)
}

const ETHERNET_HEADER_BYTES: usize = 14;
/// Loop iterations between two reads of the ports' drop counts: far fewer
/// frames than 2^32 arrive meanwhile.
const PORT_DROPS_EVERY_LOOPS: u64 = 1 << 16;
/// Engine time between two publications of the tenants' drops to a live view: a
/// few each of its lines.
const LIVE_DROPS_EVERY_NS: u64 = 10_000_000;

/// The emulated link as the loop sees it between passes.
struct Link {
    /// `None`: unpaced, the link is never busy.
    rate_bps: Option<u64>,
    /// When the frame last handed to the link has left it, shared with the
    /// engine's other threads.
    clock: Arc<LinkClock>,
    /// Whether the enforcer had a frame ready when the link was last busy: the
    /// link time lost to the loop's lateness is counted from then.
    ready_when_free: bool,
    /// Frames handed to the link, not yet sent.
    tx: VecDeque<Packet>,
}

impl Link {
    fn new(rate_bps: Option<u64>, clock: Arc<LinkClock>) -> Link {
        Link {
            rate_bps,
            clock,
            ready_when_free: false,
            tx: VecDeque::with_capacity(BATCH),
        }
    }
}

pub struct Engine {
    config: EngineConfig,
    /// The engine's time: 0 when its loop starts.
    clock: Instant,
    classifier: Classifier,
    enforcer: Box<dyn Enforcer>,
    slab: Slab,
    /// What each slab slot holds, counted when the enforcer takes it.
    slot_kind: Vec<FrameKind>,
    /// The engine's cores, when the run has them.
    shared: Option<Shared>,
    /// Frames read this pass, for the cores: each with its cost.
    for_cores: Vec<(Packet, u64)>,
    /// Frames the cores processed, taken for the enforcer (kept for its room).
    processed: Vec<Packet>,
    /// Per tenant, frames its port may be read this pass.
    port_reads: Vec<usize>,
    /// Per tenant, frames the cores' queues refused.
    core_refused: Vec<u64>,
    /// The policy's apps, the first of the enforcer's classes.
    apps: usize,
    stats: EngineStats,
    /// In a run across hosts: what enters the host, the feedback, the counts per
    /// traffic.
    hosts: Option<HostSide>,
    /// Where each tenant's drops so far ([`Engine::drops`]) are published while it
    /// runs, for a live view.
    live_drops: Option<Arc<[AtomicU64]>>,
    /// Where its counts so far are published while it runs.
    published: Option<Arc<Published>>,
    /// Per app, L3 bytes offered and refused ([`Published`]'s).
    app_offered_bytes: Vec<u64>,
    app_refused_bytes: Vec<u64>,
    /// Frames of no tenant on an egress.
    unclassified: u64,
    /// The device to read every tenant's frames from instead of a port each, on
    /// a real host's egress; taken when the engine runs.
    egress: Option<Tap>,
    /// Its part, when it is one thread of several.
    shard: Option<ShardPart>,
    /// The link's clock, shared with the other threads of its engine.
    link: Arc<LinkClock>,
}

impl Engine {
    pub fn new(
        config: EngineConfig,
        classifier: Classifier,
        policy: &Policy,
        enforcer: Box<dyn Enforcer>,
    ) -> std::io::Result<Engine> {
        let tenants = policy.tenants.len();
        let shared = match &config.cores {
            Some(setup) => Some(Shared::new(policy, setup)?),
            None => None,
        };
        Ok(Engine {
            clock: Instant::now(),
            slab: Slab::new(config.buffer.slab_slots),
            slot_kind: vec![FrameKind::Other; config.buffer.slab_slots as usize],
            shared,
            for_cores: Vec::new(),
            processed: Vec::new(),
            port_reads: vec![BATCH; tenants],
            core_refused: vec![0; tenants],
            apps: policy.apps.len(),
            stats: EngineStats {
                buffer_drops: vec![0; tenants],
                refused: vec![0; tenants],
                frames: vec![report::TenantFrames::default(); tenants],
                ledgers: vec![report::TenantLedger::default(); tenants],
                uplink_bytes: vec![0; tenants],
                ..EngineStats::default()
            },
            config,
            classifier,
            enforcer,
            hosts: None,
            live_drops: None,
            published: None,
            app_offered_bytes: vec![0; policy.apps.len()],
            app_refused_bytes: vec![0; policy.apps.len()],
            unclassified: 0,
            egress: None,
            shard: None,
            link: Arc::new(LinkClock::new()),
        })
    }

    /// Makes the engine publish its counts so far in `published` as it runs.
    pub fn publishing(mut self, published: Arc<Published>) -> Engine {
        self.published = Some(published);
        self
    }

    /// Puts the engine on a real host's egress: every tenant's frames come from
    /// `tap`, each tenant's told by its source address ([`Classifier::tenant_of_frame`]),
    /// and leave on the uplink ([`EngineConfig::uplink`], the device), which is
    /// not read. `EngineConfig::ports` are not opened.
    pub fn on_egress(mut self, tap: Tap) -> Engine {
        self.egress = Some(tap);
        self
    }

    /// Makes this engine one thread of several ([`crate::shards`]): it reads only
    /// `part`'s tenants' ports, its enforcer is their shard, and it sends on the
    /// uplink with a socket of its own, on the link's time shared through `link`.
    /// Its counts are of its tenants alone; each thread publishes its tenants'
    /// drops. Not on an egress or across hosts, which have one thread.
    pub fn as_shard(mut self, part: ShardPart, link: Arc<LinkClock>) -> Engine {
        debug_assert!(self.egress.is_none() && self.hosts.is_none());
        self.shard = Some(part);
        self.link = link;
        self
    }

    /// Makes the engine publish each tenant's drops so far in `drops` as it runs.
    pub fn publishing_drops(mut self, drops: Arc<[AtomicU64]>) -> Engine {
        debug_assert_eq!(drops.len(), self.enforcer.counters().len());
        self.live_drops = Some(drops);
        self
    }

    /// Tenant `t`'s drops as the run's figures count them: refused by the enforcer
    /// or for want of room in the host's buffer (the cores' refusals are its
    /// `engine_refused`, apart).
    fn drops(&self, t: usize) -> u64 {
        self.enforcer.counters()[t].refused_packets + self.stats.buffer_drops[t]
    }

    fn publish_drops(&self) {
        if let Some(live) = &self.live_drops {
            // Of several threads, each stores its own tenants' drops alone.
            match &self.shard {
                Some(part) => {
                    for t in &part.tenants {
                        live[t.index()].store(self.drops(t.index()), Ordering::Relaxed);
                    }
                }
                None => {
                    for (t, published) in live.iter().enumerate() {
                        published.store(self.drops(t), Ordering::Relaxed);
                    }
                }
            }
        }
        if let Some(published) = &self.published {
            let store = |to: &[AtomicU64], from: &mut dyn Iterator<Item = u64>| {
                for (to, from) in to.iter().zip(from) {
                    to.store(from, Ordering::Relaxed);
                }
            };
            let tenants = self.stats.uplink_bytes.len();
            store(
                &published.tenant_drops,
                &mut (0..tenants).map(|t| self.drops(t)),
            );
            store(
                &published.tenant_sent_bytes,
                &mut self.stats.uplink_bytes.iter().copied(),
            );
            store(
                &published.app_offered_bytes,
                &mut self.app_offered_bytes.iter().copied(),
            );
            store(
                &published.app_refused_bytes,
                &mut self.app_refused_bytes.iter().copied(),
            );
            published
                .unclassified
                .store(self.unclassified, Ordering::Relaxed);
        }
    }

    /// Makes this the engine of one host of a run across hosts: frames from the
    /// uplink go through `side` to the VMs, and it runs the host's feedback.
    pub fn across_hosts(mut self, side: HostSide) -> Engine {
        self.hosts = Some(side);
        self
    }

    /// Runs in the calling thread (already in the engine namespace) until `stop`.
    /// `ready` is called once the sockets are open.
    pub fn run(mut self, stop: &AtomicBool, ready: impl FnOnce()) -> std::io::Result<EngineStats> {
        crate::sys::set_timer_slack_ns(1);
        let (mut intake, mut uplink) = self.open()?;
        let (mut poller, mut return_poller) = self.pollers(&intake, &uplink);
        let transmitters = (0..self.config.transmit_threads)
            .map(|_| PacketSocket::open_sender(&self.config.uplink))
            .collect::<std::io::Result<Vec<_>>>()?;
        ready();
        self.clock = self.link.origin();
        if let Some(side) = &mut self.hosts {
            side.start(self.clock, self.config.buffer.slab_slots);
        }
        let tenants = self.stats.ledgers.len();
        let core_count = self.config.cores.as_ref().map_or(0, |c| c.cores);
        let shared = self.shared.take();
        let spent = std::thread::scope(|scope| {
            // Stops the core threads however the scope ends, before it joins them.
            let _stop_cores = shared.as_ref().map(crate::cores::StopOnDrop);
            let core_threads = match &shared {
                Some(shared) => (0..core_count)
                    .map(|core| {
                        std::thread::Builder::new()
                            .name(format!("nicsched-core{core}"))
                            .spawn_scoped(scope, move || {
                                crate::cores::run_core(shared, core, tenants)
                            })
                    })
                    .collect::<std::io::Result<Vec<_>>>()?,
                None => Vec::new(),
            };
            let mut threads = None;
            let mut handles = Vec::new();
            if !transmitters.is_empty() {
                let (back_tx, back) = std::sync::mpsc::channel();
                let mut to = Vec::new();
                for (k, socket) in transmitters.into_iter().enumerate() {
                    let (batch_tx, batches) = std::sync::mpsc::sync_channel(TX_THREAD_BATCHES);
                    let back_tx = back_tx.clone();
                    handles.push(
                        std::thread::Builder::new()
                            .name(format!("nicsched-tx{k}"))
                            .spawn_scoped(scope, move || {
                                transmit(socket, batches, back_tx, stop)
                            })?,
                    );
                    to.push(batch_tx);
                }
                threads = Some(TxThreads {
                    filling: vec![Vec::new(); to.len()],
                    to,
                    back,
                    spare: Vec::new(),
                });
            }
            let result = self.forward(
                stop,
                shared.as_ref(),
                &mut intake,
                &mut uplink,
                &mut poller,
                &mut return_poller,
                threads.as_mut(),
            );
            if let Some(shared) = &shared {
                shared.stop();
            }
            let spent = core_threads
                .into_iter()
                .map(|h| {
                    h.join()
                        .map_err(|_| std::io::Error::other("a core thread panicked"))
                })
                .collect::<std::io::Result<Vec<_>>>()?;
            // Closing the channels lets each thread send what it has and stop.
            let unsent = threads.map(|mut t| {
                t.to.clear();
                t
            });
            for handle in handles {
                self.stats.transmit_cpu_ns += handle
                    .join()
                    .map_err(|_| std::io::Error::other("a transmit thread panicked"))??;
            }
            if let Some(mut threads) = unsent {
                self.take_back(&mut threads, true);
            }
            result.map(|()| spent)
        })?;
        Ok(self.finish(shared, spent))
    }

    /// The tenants' ports and the uplink; on an egress, the tap and a socket
    /// that only sends.
    fn open(&mut self) -> std::io::Result<(Intake, Uplink)> {
        if let Some(tap) = self.egress.take() {
            let sender = PacketSocket::open_sender(&self.config.uplink)?;
            return Ok((Intake::Egress(tap), Uplink::SendOnly(sender)));
        }
        let ring_bytes = ring_bytes_per_port(self.config.ports.len() + 1);
        if let Some(part) = &self.shard {
            return self.open_shard(part, ring_bytes);
        }
        let ports = self
            .config
            .ports
            .iter()
            .map(|p| RxRing::open_vnet(p, ring_bytes, RCVBUF_BYTES))
            .collect::<std::io::Result<Vec<_>>>()?;
        let uplink = RxRing::open_vnet(&self.config.uplink, ring_bytes, RCVBUF_BYTES)?;
        Ok((Intake::Ports(ports), Uplink::Both(uplink)))
    }

    /// One thread's part of the ports, the uplink to read or to send on alone,
    /// and, where it reads the uplink, a socket to send back on each port.
    fn open_shard(&self, part: &ShardPart, ring_bytes: usize) -> std::io::Result<(Intake, Uplink)> {
        let ports = &self.config.ports;
        let rings = part
            .tenants
            .iter()
            .map(|&t| {
                Ok((
                    t,
                    RxRing::open_vnet(&ports[t.index()], ring_bytes, RCVBUF_BYTES)?,
                ))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        if !part.reads_uplink {
            let sender = PacketSocket::open_sender(&self.config.uplink)?;
            return Ok((
                Intake::Shard {
                    rings,
                    back: Vec::new(),
                },
                Uplink::SendOnly(sender),
            ));
        }
        let back = ports
            .iter()
            .map(|p| PacketSocket::open_sender(p))
            .collect::<std::io::Result<Vec<_>>>()?;
        let uplink = RxRing::open_vnet(&self.config.uplink, ring_bytes, RCVBUF_BYTES)?;
        Ok((Intake::Shard { rings, back }, Uplink::Both(uplink)))
    }

    /// What wakes the engine: every port, the uplink, the cores' processed
    /// frames and other hosts' feedback; and, while the link is busy, all but
    /// the tenants' ports.
    fn pollers(&self, intake: &Intake, uplink: &Uplink) -> (Poller, Poller) {
        let mut fds = intake.fds();
        fds.extend(uplink.reader_fd());
        // Processed frames wake the engine as a frame does.
        let done_fd = self.shared.as_ref().map(|s| s.done_ready.raw_fd());
        fds.extend(done_fd);
        // Feedback from other hosts wakes the engine as a frame does.
        let control_fd = self.hosts.as_ref().map(HostSide::control_fd);
        fds.extend(control_fd);
        let poller = Poller::new(&fds);
        // While the emulated link is busy a tenant's frame can wait in its ring:
        // it cannot leave before the link frees, and the engine reads every port
        // before it dequeues. Waking for each one cost a core at 50 000 frames/s and
        // starved the senders. Return traffic (ACKs, requests) still wakes it.
        let mut return_fds: Vec<_> = uplink.reader_fd().into_iter().collect();
        return_fds.extend(done_fd);
        return_fds.extend(control_fd);
        (poller, Poller::new(&return_fds))
    }

    /// The engine's loop, until `stop`: the five steps of the module's docs.
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &mut self,
        stop: &AtomicBool,
        shared: Option<&Shared>,
        intake: &mut Intake,
        uplink: &mut Uplink,
        poller: &mut Poller,
        return_poller: &mut Poller,
        mut threads: Option<&mut TxThreads>,
    ) -> std::io::Result<()> {
        let mut link = Link::new(self.config.link_rate_bps, Arc::clone(&self.link));
        let mut drops_published_ns = 0;
        while !stop.load(Ordering::Relaxed) {
            let now_ns = self.clock.elapsed().as_nanos() as u64;
            self.catch_up(
                now_ns,
                intake,
                threads.as_deref_mut(),
                &mut drops_published_ns,
            )?;
            self.read_tenants(now_ns, shared, intake)?;
            match (&mut *uplink, &*intake) {
                (Uplink::Both(uplink), Intake::Ports(ports)) => {
                    self.read_uplink(now_ns, uplink, Back::Rings(ports))?;
                }
                (Uplink::Both(uplink), Intake::Shard { back, .. }) => {
                    self.read_uplink(now_ns, uplink, Back::Senders(back))?;
                }
                _ => {}
            }
            self.transmit(now_ns, &mut link, uplink.sender(), threads.as_deref_mut())?;
            self.wait(now_ns, &mut link, poller, return_poller)?;
        }
        // Handed to the link but never sent (the uplink stayed busy to the end):
        // still held.
        for packet in std::mem::take(&mut link.tx) {
            self.unsent(&packet);
        }
        self.count_port_drops(intake)
    }

    /// Step 1, after reading the clock: what is due at `now_ns` beside the frames:
    /// the ports' drops, the live drop counts, the transmit threads' sent frames,
    /// and the host side's epoch.
    fn catch_up(
        &mut self,
        now_ns: u64,
        intake: &Intake,
        threads: Option<&mut TxThreads>,
        drops_published_ns: &mut u64,
    ) -> std::io::Result<()> {
        self.stats.loops += 1;
        if self.stats.loops.is_multiple_of(PORT_DROPS_EVERY_LOOPS) {
            self.count_port_drops(intake)?;
        }
        if now_ns >= *drops_published_ns + LIVE_DROPS_EVERY_NS {
            self.publish_drops();
            *drops_published_ns = now_ns;
        }
        if let Some(threads) = threads {
            self.take_back(threads, false);
        }
        if let Some(side) = &mut self.hosts {
            side.tick(now_ns, self.enforcer.as_mut())?;
        }
        Ok(())
    }

    /// Step 2: offers what the cores finished, reads a batch from each tenant
    /// port (on an egress, a batch from the tap, each frame's tenant told by its
    /// source), and queues what the cores must hold first.
    fn read_tenants(
        &mut self,
        now_ns: u64,
        shared: Option<&Shared>,
        intake: &mut Intake,
    ) -> std::io::Result<()> {
        if let Some(shared) = shared {
            self.offer_processed(shared, now_ns);
        }
        match intake {
            Intake::Ports(ports) => {
                for (t, port) in ports.iter_mut().enumerate() {
                    let tenant = TenantId(t as u16);
                    let room = self.port_reads[t];
                    if room > 0 {
                        port.recv(room, |frame| self.on_tenant_frame(tenant, frame, now_ns))?;
                    }
                }
            }
            Intake::Shard { rings, .. } => {
                for (tenant, ring) in rings {
                    let tenant = *tenant;
                    let room = self.port_reads[tenant.index()];
                    if room > 0 {
                        ring.recv(room, |frame| self.on_tenant_frame(tenant, frame, now_ns))?;
                    }
                }
            }
            Intake::Egress(tap) => {
                tap.recv(BATCH, |frame| {
                    let ethernet = frame.bytes.get(VNET_HDR_BYTES..).unwrap_or_default();
                    // The redirect takes only the tenants' addresses: another
                    // frame here is one the host sent on the tap itself.
                    match self.classifier.tenant_of_frame(ethernet) {
                        Some(tenant) => self.on_tenant_frame(tenant, frame, now_ns),
                        None => self.unclassified += 1,
                    }
                })?;
            }
        }
        if let Some(shared) = shared {
            self.queue_for_cores(shared);
        }
        Ok(())
    }

    /// Step 3: frames from the uplink back to the tenant ports, unscheduled; across
    /// hosts, into the host side's ingress instead.
    fn read_uplink(
        &mut self,
        now_ns: u64,
        uplink: &mut RxRing,
        back: Back<'_>,
    ) -> std::io::Result<()> {
        let mut returned = Ok(());
        uplink.recv(BATCH, |frame| {
            if returned.is_ok() {
                returned = match (&mut self.hosts, &back) {
                    (Some(side), Back::Rings(ports)) => side.arrive(frame, ports, now_ns),
                    _ => self.on_sink_frame(frame, &back),
                };
            }
        })?;
        returned
    }

    /// Step 4: while the link is free, dequeues and sends, holding the link for
    /// each frame's serialisation time. Frames handed out in one pass leave in one
    /// `sendmmsg`.
    fn transmit(
        &mut self,
        now_ns: u64,
        link: &mut Link,
        uplink: &PacketSocket,
        mut threads: Option<&mut TxThreads>,
    ) -> std::io::Result<()> {
        loop {
            let mut dry = false;
            while link.tx.len() < BATCH && link.clock.free_ns() <= now_ns + TX_AHEAD_NS {
                let Some(frame) = self.enforcer.dequeue(now_ns) else {
                    dry = true;
                    break;
                };
                self.dequeued(now_ns, link, frame);
            }
            if link.tx.is_empty() {
                return Ok(());
            }
            if let Some(threads) = threads.as_deref_mut() {
                self.hand_over(threads, &mut link.tx)?;
            } else if !self.flush(uplink, &mut link.tx)? {
                return Ok(());
            }
            if dry || link.clock.free_ns() > now_ns + TX_AHEAD_NS {
                return Ok(());
            }
        }
    }

    /// Counts a piece the enforcer handed out, queues its frame to send if it is
    /// the last piece, and holds the link for it.
    fn dequeued(&mut self, now_ns: u64, link: &mut Link, frame: Frame) {
        let t = frame.packet.tenant.index();
        if let Some(side) = &mut self.hosts {
            side.sent(frame.packet.handle, frame.bytes, now_ns);
        }
        self.stats.tx_bytes += u64::from(frame.bytes);
        self.stats.ledgers[t].sent_bytes += u64::from(frame.bytes);
        // Unpaced, the link stays free at 0: it is always free.
        if let Some(rate) = link.rate_bps {
            let caught_up_ns = now_ns.saturating_sub(CATCH_UP_NS);
            let free_ns = link
                .clock
                .hold(caught_up_ns, serialisation_ns(frame.bytes, rate));
            // Of several threads, the one that takes the link after the gap
            // counts it, once.
            if std::mem::take(&mut link.ready_when_free) && caught_up_ns > free_ns {
                self.stats.lost_link_ns += caught_up_ns - free_ns;
            }
        }
        if frame.last {
            link.tx.push_back(frame.packet);
        }
    }

    /// Step 5: sleeps until the link is nearly free, the enforcer's next deadline,
    /// the host side's next epoch, or a frame arrives. While frames wait only for
    /// the link, only the uplink's return path wakes it.
    fn wait(
        &mut self,
        now_ns: u64,
        link: &mut Link,
        poller: &mut Poller,
        return_poller: &mut Poller,
    ) -> std::io::Result<()> {
        let backlogged = self.enforcer.backlog_packets() > 0;
        let free_ns = link.clock.free_ns();
        let link_busy = free_ns > now_ns + WAKE_AHEAD_NS;
        link.ready_when_free = !link.tx.is_empty()
            || (backlogged
                && free_ns > now_ns
                && self.enforcer.next_ready_ns(now_ns) == Some(now_ns));
        let epoch_ns = self.hosts.as_mut().and_then(|s| s.wait_ns(now_ns));
        let wait_ns = if !link.tx.is_empty() {
            20_000
        } else if backlogged {
            if link_busy {
                free_ns - now_ns - WAKE_AHEAD_NS
            } else {
                self.stats.held_waits += 1;
                self.enforcer
                    .next_ready_ns(now_ns)
                    .map_or(IDLE_WAIT_NS, |at| at.saturating_sub(now_ns).max(1_000))
            }
        } else {
            IDLE_WAIT_NS
        };
        let wait_ns = epoch_ns.map_or(wait_ns, |e| wait_ns.min(e));
        if link.tx.is_empty() && backlogged && link_busy {
            return_poller.wait(wait_ns)
        } else {
            poller.wait(wait_ns)
        }
    }

    /// Queues the frames read this pass for the engine's cores; those their queue
    /// has no room for are refused against their tenant.
    fn queue_for_cores(&mut self, shared: &Shared) {
        if self.for_cores.is_empty() {
            return;
        }
        let mut state = shared.lock();
        for (packet, cost_ns) in self.for_cores.drain(..) {
            let (tenant, bytes) = (packet.tenant, packet.len_bytes);
            if let Err(packet) = state
                .cores
                .arrive(packet, packet.flow, tenant, bytes, cost_ns)
            {
                self.core_refused[tenant.index()] += 1;
                self.stats.ledgers[tenant.index()].refused_bytes += u64::from(bytes);
                self.app_refused_bytes[packet.app.index()] += u64::from(bytes);
                self.slab.release(packet.handle as u32);
            }
        }
        drop(state);
        shared.notify();
    }

    /// Offers the frames the cores processed to the enforcer, and sets how many
    /// frames each port may be read this pass.
    fn offer_processed(&mut self, shared: &Shared, now_ns: u64) {
        let mut processed = std::mem::take(&mut self.processed);
        {
            let mut state = shared.lock();
            // Cleared under the lock: a core that finishes after it finds the list
            // empty and signals again.
            shared.done_ready.clear();
            std::mem::swap(&mut state.done, &mut processed);
            // A tenant with a queue of its own for the cores waits in its port's
            // ring while that queue is full.
            if state.cores.queue_per_tenant() {
                for (t, reads) in self.port_reads.iter_mut().enumerate() {
                    *reads = state.cores.room_for(TenantId(t as u16), 0).min(BATCH);
                }
            }
        }
        for packet in processed.drain(..) {
            self.offer(now_ns, packet);
        }
        self.processed = processed;
    }

    /// The run's counts, once the loop and the transmit and core threads have
    /// stopped.
    fn finish(mut self, shared: Option<Shared>, spent: Vec<CoreSpent>) -> EngineStats {
        for t in 0..self.enforcer.counters().len() {
            self.stats.refused[t] = self.enforcer.counters()[t].refused_packets;
            self.stats.frames[t].refused = self.drops(t) + self.core_refused[t];
        }
        self.publish_drops();
        if let Some(shared) = shared {
            self.stats.cores = Some(self.core_stats(shared, spent));
        }
        self.stats.split_classes = self.enforcer.classes().map(|c| c - self.apps);
        self.stats.run_ns = self.clock.elapsed().as_nanos() as u64;
        self.drain_held(self.stats.run_ns);
        self.stats.hosts = self.hosts.take().map(HostSide::finish);
        self.stats
    }

    /// What the cores did; frames still waiting for a core, or processed and not yet
    /// offered to the enforcer, count as held.
    fn core_stats(&mut self, shared: Shared, spent: Vec<CoreSpent>) -> CoreStats {
        let mut state = shared.state.into_inner().unwrap_or_else(|e| e.into_inner());
        let ledgers = report::EngineLedger::of_cores(&state.cores);
        let held = state
            .cores
            .drain()
            .map(|w| w.item)
            .chain(state.done.drain(..));
        for packet in held {
            self.stats.ledgers[packet.tenant.index()].held_bytes += u64::from(packet.len_bytes);
        }
        CoreStats {
            tenant_busy_ns: spent.iter().map(|s| s.tenant_busy_ns.clone()).collect(),
            late_ns: spent.iter().map(|s| s.late_ns).collect(),
            queue_refused: std::mem::take(&mut self.core_refused),
            ledgers,
        }
    }

    /// Adds what the kernel dropped at each tenant's port since the last count (its
    /// count is 32 bits wide, so the loop reads it now and then).
    fn count_port_drops(&mut self, intake: &Intake) -> std::io::Result<()> {
        match intake {
            Intake::Ports(ports) => {
                for (t, port) in ports.iter().enumerate() {
                    self.stats.frames[t].lost_at_port += port.socket().take_drops()?;
                }
            }
            Intake::Shard { rings, .. } => {
                for (tenant, ring) in rings {
                    self.stats.frames[tenant.index()].lost_at_port += ring.socket().take_drops()?;
                }
            }
            // A tap's drops are the device's own count (`tx_dropped`).
            Intake::Egress(_) => {}
        }
        Ok(())
    }

    /// Counts a frame handed to the link that never left as held, not sent.
    fn unsent(&mut self, packet: &Packet) {
        if let Some(side) = &mut self.hosts {
            side.unsent(packet.handle, packet.len_bytes);
        }
        let ledger = &mut self.stats.ledgers[packet.tenant.index()];
        ledger.sent_bytes -= u64::from(packet.len_bytes);
        ledger.held_bytes += u64::from(packet.len_bytes);
        self.stats.tx_bytes -= u64::from(packet.len_bytes);
    }

    /// Hands the frames of `tx` to the transmit threads, each flow to its own, in
    /// order; waits while a thread already has [`TX_THREAD_BATCHES`] batches.
    fn hand_over(
        &mut self,
        threads: &mut TxThreads,
        tx: &mut VecDeque<Packet>,
    ) -> std::io::Result<()> {
        let count = threads.to.len();
        for packet in tx.drain(..) {
            let bytes = self.slab.lend(packet.handle as u32);
            threads.filling[packet.flow as usize % count].push((packet, bytes));
        }
        for (k, to) in threads.to.iter().enumerate() {
            if threads.filling[k].is_empty() {
                continue;
            }
            let batch = std::mem::replace(
                &mut threads.filling[k],
                threads.spare.pop().unwrap_or_default(),
            );
            to.send(batch)
                .map_err(|_| std::io::Error::other("a transmit thread stopped"))?;
        }
        Ok(())
    }

    /// Takes back the batches the transmit threads are done with (waiting for all
    /// of them when `all`): their slots free, their sent frames counted.
    fn take_back(&mut self, threads: &mut TxThreads, all: bool) {
        loop {
            let returned = if all {
                threads.back.recv().ok()
            } else {
                threads.back.try_recv().ok()
            };
            let Some((mut batch, sent)) = returned else {
                break;
            };
            for (i, (packet, bytes)) in batch.drain(..).enumerate() {
                self.slab.give_back(packet.handle as u32, bytes);
                if i < sent {
                    self.stats.tx_frames += 1;
                    self.stats.uplink_bytes[packet.tenant.index()] += u64::from(packet.len_bytes);
                } else {
                    self.unsent(&packet);
                }
            }
            threads.spare.push(batch);
        }
    }

    /// Sends the frames of `tx` in order, in one system call; whether all left (the
    /// rest stay in `tx`, first in line).
    fn flush(&mut self, uplink: &PacketSocket, tx: &mut VecDeque<Packet>) -> std::io::Result<bool> {
        let slab = &self.slab;
        let sent = uplink.send_batch(tx.iter().map(|p| slab.get(p.handle as u32)))?;
        for packet in tx.drain(..sent) {
            self.slab.release(packet.handle as u32);
            self.stats.tx_frames += 1;
            self.stats.uplink_bytes[packet.tenant.index()] += u64::from(packet.len_bytes);
        }
        if !tx.is_empty() {
            self.stats.send_busy += 1;
        }
        Ok(tx.is_empty())
    }

    /// Counts what the enforcer still holds as held, taking it out in its own
    /// time: a shaper releases its packets only as their times come.
    fn drain_held(&mut self, mut now_ns: u64) {
        // Every held packet leaves as at most one frame per MTU of a GSO send; a
        // mechanism that still holds packets after that many tries has lost its
        // way, and conservation says so.
        let mut tries = self.enforcer.backlog_packets() as u64
            * u64::from(policy::wire::TSO_BYTES_MAX / 64 + 1)
            + 1;
        while self.enforcer.backlog_packets() > 0 && tries > 0 {
            tries -= 1;
            match self.enforcer.dequeue(now_ns) {
                Some(frame) => {
                    if let Some(side) = &mut self.hosts {
                        side.held(frame.packet.handle, frame.bytes);
                    }
                    self.stats.ledgers[frame.packet.tenant.index()].held_bytes +=
                        u64::from(frame.bytes);
                }
                None => match self.enforcer.next_ready_ns(now_ns) {
                    Some(at) => now_ns = at.max(now_ns + 1),
                    None => break,
                },
            }
        }
    }

    fn on_tenant_frame(&mut self, tenant: TenantId, frame: RxFrame<'_>, now_ns: u64) {
        self.stats.rx_frames += 1;
        let t = tenant.index();
        let RxFrame {
            bytes: buf,
            len,
            cut_for_room,
        } = frame;
        if cut_for_room {
            // Larger than a ring slot and no room left to queue it whole: a drop
            // for want of buffer, like a full socket's.
            let len_bytes = len.saturating_sub(VNET_HDR_BYTES + ETHERNET_HEADER_BYTES) as u64;
            self.stats.buffer_drops[t] += 1;
            self.stats.ledgers[t].offered_bytes += len_bytes;
            self.stats.ledgers[t].refused_bytes += len_bytes;
            let app = self.classifier.classify_other(tenant).app.index();
            self.app_offered_bytes[app] += len_bytes;
            self.app_refused_bytes[app] += len_bytes;
            return;
        }
        let parsed = if len > buf.len() {
            ParsedFrame::Malformed(Malformed::Oversize)
        } else if len < VNET_HDR_BYTES {
            ParsedFrame::Malformed(Malformed::Runt)
        } else {
            parse(&buf[VNET_HDR_BYTES..len])
        };
        // Whatever a tenant sends takes the link: a frame the policy's rules cannot
        // place is its tenant's catch-all traffic, not a way past the enforcer (raw
        // frames of another ethertype once took 135 Mbit/s past a 10 Mbit/s cap).
        // A cost belongs to a traffic, and the lab's traffic is IPv4.
        // Across hosts: the frame's traffic, and the VM it goes to, which a
        // destination limit names.
        let mut crossing = None;
        let (len_bytes, mut class, kind, cost_ns) = match parsed {
            ParsedFrame::Ipv4(ip) => {
                if let Some(side) = &mut self.hosts {
                    let dst_mac = &buf[VNET_HDR_BYTES..VNET_HDR_BYTES + 6];
                    crossing = Some(side.offered(Some(&ip), dst_mac));
                }
                (
                    ip.len_bytes,
                    self.classifier.classify(tenant, &ip),
                    FrameKind::Ipv4,
                    self.config
                        .cores
                        .as_ref()
                        .map_or(0, |c| c.cost_ns(tenant, &ip)),
                )
            }
            ParsedFrame::Ipv6(ip) => (
                ip.len_bytes,
                self.classifier.classify_ipv6(tenant, &ip),
                FrameKind::Ipv6,
                0,
            ),
            ParsedFrame::Other { len_bytes } => (
                len_bytes,
                self.classifier.classify_other(tenant),
                FrameKind::Other,
                0,
            ),
            ParsedFrame::Malformed(why) => {
                count_malformed(&mut self.stats.frames[t].malformed, why);
                return;
            }
        };
        // The virtio-net header travels with the frame, into the slab and out again.
        let frame = &buf[..len];
        self.stats.ledgers[t].offered_bytes += u64::from(len_bytes);
        self.app_offered_bytes[class.app.index()] += u64::from(len_bytes);
        let (traffic, destination) = crossing.unwrap_or_default();
        class.destination = destination.unwrap_or(class.destination);
        let slot = self.slab.store(frame);
        if let Some(side) = &mut self.hosts {
            side.stored(traffic, slot, len_bytes);
        }
        let Some(slot) = slot else {
            self.stats.buffer_drops[t] += 1;
            self.stats.ledgers[t].refused_bytes += u64::from(len_bytes);
            self.app_refused_bytes[class.app.index()] += u64::from(len_bytes);
            return;
        };
        let packet = Packet {
            len_bytes,
            tenant,
            app: class.app,
            flow: class.flow,
            destination: class.destination,
            core: class.core,
            arrival_ns: now_ns,
            handle: u64::from(slot),
        };
        self.slot_kind[slot as usize] = kind;
        if self.config.cores.is_some() {
            self.for_cores.push((packet, cost_ns));
        } else {
            self.offer(now_ns, packet);
        }
    }

    /// Offers a frame to the enforcer; a refused one frees its slot.
    fn offer(&mut self, now_ns: u64, packet: Packet) {
        let t = packet.tenant.index();
        let kind = self.slot_kind[packet.handle as usize];
        match self.enforcer.enqueue(now_ns, packet) {
            Ok(()) => {
                let scheduled = &mut self.stats.frames[t].scheduled;
                *match kind {
                    FrameKind::Ipv4 => &mut scheduled.ipv4,
                    FrameKind::Ipv6 => &mut scheduled.ipv6,
                    FrameKind::Other => &mut scheduled.other,
                } += 1;
            }
            Err((packet, _reason)) => {
                if let Some(side) = &mut self.hosts {
                    side.refused_slot(packet.handle, packet.len_bytes);
                }
                self.stats.ledgers[t].refused_bytes += u64::from(packet.len_bytes);
                self.app_refused_bytes[packet.app.index()] += u64::from(packet.len_bytes);
                self.slab.release(packet.handle as u32);
            }
        }
    }

    fn on_sink_frame(&mut self, frame: RxFrame<'_>, back: &Back<'_>) -> std::io::Result<()> {
        let RxFrame {
            bytes: buf, len, ..
        } = frame;
        if len > buf.len() || len < VNET_HDR_BYTES + ETHERNET_HEADER_BYTES {
            self.stats.return_malformed += 1;
            return Ok(());
        }
        let frame = &buf[..len];
        self.stats.return_frames += 1;
        let dst: [u8; 6] = frame[VNET_HDR_BYTES..VNET_HDR_BYTES + 6]
            .try_into()
            .expect("14 bytes or more");
        match self.config.tenant_macs.iter().position(|&m| m == dst) {
            Some(t) => {
                back.socket(t).send(frame)?;
            }
            None => {
                for t in 0..back.ports() {
                    back.socket(t).send(frame)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_hands_out_each_slot_once() {
        let mut slab = Slab::new(2);
        let a = slab.store(&[1, 2, 3]).unwrap();
        let b = slab.store(&[4; 65_549]).unwrap();
        assert_ne!(a, b);
        assert!(slab.store(&[0]).is_none());
        assert_eq!(slab.get(a), &[1, 2, 3]);
        assert_eq!(slab.get(b).len(), 65_549);
        slab.release(a);
        let c = slab.store(&[9]).unwrap();
        assert_eq!(c, a);
        assert_eq!(slab.get(c), &[9]);
    }

    #[test]
    fn qdisc_limits_bound_queues_of_the_nic_model_and_tenants_of_the_schedulers() {
        let policy = policy::parse_policy(
            "link: { rate: 1Gbit, queues: 4 }\ntenants: [{ name: a }, { name: b }]\n",
            "p.yaml",
        )
        .unwrap();
        let limits = sched::HostLimits {
            queue_packets: 10,
            class_packets: 100,
        };
        // 6553 B of ring at 1 Gbit/s hold at most 328 IPv4 headers, one more to spare.
        let hash = HostBuffer::new("hash", &policy, limits).unwrap();
        assert_eq!(hash.capacity.qdisc_packets, Some(10));
        assert_eq!(hash.capacity.class_packets, None);
        assert_eq!(hash.slab_slots, 4 * (10 + 329) + 64);
        let fifo = HostBuffer::new("fifo", &policy, limits).unwrap();
        assert_eq!(fifo.slab_slots, 10 + 329 + 64, "fifo drives one queue");
        let wf2q = HostBuffer::new("wf2q", &policy, limits).unwrap();
        assert_eq!(wf2q.capacity.qdisc_packets, None);
        assert_eq!(wf2q.capacity.class_packets_max(2), 100);
        assert_eq!(wf2q.slab_slots, 2 * 100 + 64);
        let deep = sched::HostLimits {
            queue_packets: 65_536,
            class_packets: 65_536,
        };
        assert!(
            matches!(HostBuffer::new("hash", &policy, deep), Err(TooLarge(_))),
            "4 queues of 65536 packets pass the bound"
        );
    }
}
