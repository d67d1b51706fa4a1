//! A commodity multiqueue NIC and the qdisc layer in front of it, as TONIC (§II-B,
//! Fig. 3) describes them and as the Intel 82599 behaves.
//!
//! Each Tx queue `q` has
//! - a qdisc: a double-ended queue of packets (`pfifo` under `mq`), into which the
//!   host may insert at the tail or at the head; `tonic-band` adds a second band that
//!   is always pulled first;
//! - a descriptor ring, bounded in bytes the way byte queue limits (BQL) bound it:
//!   the driver moves the qdisc's head into the ring while the ring holds fewer than
//!   `ring_bytes_max` bytes, so a packet inserted at the qdisc head still waits for
//!   what is already in the ring.
//!
//! The NIC serves rings with non-empty heads in deficit round robin with a quantum of
//! one MTU: each round every backlogged queue sends one MTU of bytes. A descriptor
//! longer than the MTU (a TSO send) leaves as MTU-sized frames, interleaved with the
//! other queues' frames. Nothing of this is programmable: an enforcer chooses only the
//! queue and the end of the qdisc.

use crate::{Frame, Packet};
use std::collections::VecDeque;

/// Where in a queue's qdisc a packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    Tail,
    /// TONIC's Algorithm 3: jump every packet waiting in the qdisc.
    Head,
    /// Tail of the queue's priority band, pulled into the ring before the normal band.
    PriorityBand,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NicConfig {
    pub queues: u16,
    pub mtu_bytes: u32,
    /// BQL-like bound on bytes in one descriptor ring.
    pub ring_bytes_max: u32,
    /// The qdisc's limit (`txqueuelen`): packets one queue's qdisc and band may hold
    /// together, the ring not counted; `None`: unbounded.
    pub qdisc_packets_max: Option<u32>,
}

/// The ring bound BQL settles at: what the queue drains between two completion
/// interrupts, so it scales with the line rate. One 64 KiB TSO send on a 10 Gbit/s
/// NIC with interrupt moderation (~52 µs of the line), never less than two frames.
pub fn ring_bytes_max(rate_bps: u64, mtu_bytes: u32) -> u32 {
    const BYTES_AT_10_GBIT: u64 = 64 * 1024;
    let scaled = (u128::from(BYTES_AT_10_GBIT) * u128::from(rate_bps) / 10_000_000_000) as u64;
    scaled.clamp(2 * u64::from(mtu_bytes), u64::from(u32::MAX)) as u32
}

#[derive(Debug)]
struct TxQueue {
    qdisc: VecDeque<Packet>,
    band: VecDeque<Packet>,
    ring: VecDeque<Packet>,
    ring_bytes: u32,
    /// Bytes of the ring's head descriptor already on the wire.
    head_sent_bytes: u32,
    deficit_bytes: u32,
}

impl TxQueue {
    fn new() -> Self {
        TxQueue {
            qdisc: VecDeque::new(),
            band: VecDeque::new(),
            ring: VecDeque::new(),
            ring_bytes: 0,
            head_sent_bytes: 0,
            deficit_bytes: 0,
        }
    }

    /// The driver's transmit path: fill the ring from the qdisc (priority band first)
    /// while BQL allows.
    fn refill_ring(&mut self, ring_bytes_max: u32) {
        while self.ring_bytes < ring_bytes_max {
            let Some(packet) = self.band.pop_front().or_else(|| self.qdisc.pop_front()) else {
                break;
            };
            self.ring_bytes += packet.len_bytes;
            self.ring.push_back(packet);
        }
    }

    fn len_packets(&self) -> usize {
        self.qdisc.len() + self.band.len() + self.ring.len()
    }

    fn qdisc_packets(&self) -> usize {
        self.qdisc.len() + self.band.len()
    }
}

#[derive(Debug)]
pub struct Nic {
    config: NicConfig,
    queues: Vec<TxQueue>,
    /// Queues whose ring is non-empty, in round-robin order; the front is being served.
    active: VecDeque<u16>,
    /// Whether the front of `active` has had its quantum for this round.
    front_in_service: bool,
    packets: usize,
}

impl Nic {
    pub fn new(config: NicConfig) -> Self {
        assert!(config.queues >= 1, "a NIC has at least one Tx queue");
        assert!(config.mtu_bytes >= 1);
        Nic {
            config,
            queues: (0..config.queues).map(|_| TxQueue::new()).collect(),
            active: VecDeque::with_capacity(usize::from(config.queues)),
            front_in_service: false,
            packets: 0,
        }
    }

    pub fn config(&self) -> NicConfig {
        self.config
    }

    /// Whether `queue`'s qdisc is at its limit, so that the host would drop a packet
    /// offered to it (the qdisc's tail drop, whichever end the packet was meant for).
    pub fn qdisc_full(&self, queue: u16) -> bool {
        self.config
            .qdisc_packets_max
            .is_some_and(|max| self.queues[usize::from(queue)].qdisc_packets() >= max as usize)
    }

    /// Puts `packet` into `queue`'s qdisc; the caller has checked [`Nic::qdisc_full`].
    pub fn enqueue(&mut self, queue: u16, insert: Insert, packet: Packet) {
        debug_assert!(packet.len_bytes > 0);
        debug_assert!(!self.qdisc_full(queue));
        let q = &mut self.queues[usize::from(queue)];
        match insert {
            Insert::Tail => q.qdisc.push_back(packet),
            Insert::Head => q.qdisc.push_front(packet),
            Insert::PriorityBand => q.band.push_back(packet),
        }
        let was_idle = q.ring.is_empty();
        q.refill_ring(self.config.ring_bytes_max);
        if was_idle && !q.ring.is_empty() {
            q.deficit_bytes = 0;
            self.active.push_back(queue);
        }
        self.packets += 1;
    }

    /// The arbiter: the next frame on the wire, or `None` when every ring is empty.
    pub fn dequeue(&mut self) -> Option<(u16, Frame)> {
        let mtu = self.config.mtu_bytes;
        loop {
            let queue = *self.active.front()?;
            let q = &mut self.queues[usize::from(queue)];
            if !self.front_in_service {
                q.deficit_bytes += mtu;
                self.front_in_service = true;
            }
            let head = *q.ring.front().expect("active queues have a non-empty ring");
            let frame_bytes = (head.len_bytes - q.head_sent_bytes).min(mtu);
            if frame_bytes > q.deficit_bytes {
                self.front_in_service = false;
                self.active.rotate_left(1);
                continue;
            }
            q.deficit_bytes -= frame_bytes;
            q.head_sent_bytes += frame_bytes;
            let last = q.head_sent_bytes == head.len_bytes;
            if last {
                q.ring.pop_front();
                q.ring_bytes -= head.len_bytes;
                q.head_sent_bytes = 0;
                q.refill_ring(self.config.ring_bytes_max);
                self.packets -= 1;
                if q.ring.is_empty() {
                    q.deficit_bytes = 0;
                    self.front_in_service = false;
                    self.active.pop_front();
                }
            }
            let frame = Frame {
                packet: head,
                bytes: frame_bytes,
                last,
            };
            return Some((queue, frame));
        }
    }

    pub fn backlog_packets(&self) -> usize {
        self.packets
    }

    /// Packets held by one queue (qdisc, band and ring).
    pub fn queue_packets(&self, queue: u16) -> usize {
        self.queues[usize::from(queue)].len_packets()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{AppId, TenantId};

    fn packet(handle: u64, len_bytes: u32) -> Packet {
        Packet {
            len_bytes,
            tenant: TenantId(0),
            app: AppId(0),
            flow: 0,
            destination: 0,
            core: 0,
            arrival_ns: 0,
            handle,
        }
    }

    fn nic(queues: u16, ring_bytes_max: u32) -> Nic {
        Nic::new(NicConfig {
            queues,
            mtu_bytes: 1500,
            ring_bytes_max,
            qdisc_packets_max: None,
        })
    }

    fn drain(nic: &mut Nic) -> Vec<(u16, u64, u32, bool)> {
        std::iter::from_fn(|| nic.dequeue())
            .map(|(q, f)| (q, f.packet.handle, f.bytes, f.last))
            .collect()
    }

    #[test]
    fn the_ring_bound_follows_the_line_rate() {
        assert_eq!(ring_bytes_max(10_000_000_000, 1500), 65_536);
        assert_eq!(ring_bytes_max(100_000_000_000, 1500), 655_360);
        assert_eq!(ring_bytes_max(1_000_000_000, 1500), 6_553);
        assert_eq!(ring_bytes_max(100_000_000, 1500), 3_000);
    }

    #[test]
    fn round_robin_takes_one_mtu_per_queue_per_round() {
        let mut n = nic(3, 1 << 20);
        n.enqueue(0, Insert::Tail, packet(1, 1500));
        n.enqueue(0, Insert::Tail, packet(2, 1500));
        n.enqueue(1, Insert::Tail, packet(3, 1500));
        n.enqueue(2, Insert::Tail, packet(4, 1500));
        n.enqueue(2, Insert::Tail, packet(5, 1500));
        let order: Vec<u64> = drain(&mut n).iter().map(|f| f.1).collect();
        assert_eq!(order, vec![1, 3, 4, 2, 5]);
        assert_eq!(n.backlog_packets(), 0);
    }

    #[test]
    fn tso_send_leaves_as_mtu_frames_interleaved_with_other_queues() {
        let mut n = nic(2, 1 << 20);
        n.enqueue(0, Insert::Tail, packet(1, 4000));
        n.enqueue(1, Insert::Tail, packet(2, 1500));
        n.enqueue(1, Insert::Tail, packet(3, 1500));
        assert_eq!(
            drain(&mut n),
            vec![
                (0, 1, 1500, false),
                (1, 2, 1500, true),
                (0, 1, 1500, false),
                (1, 3, 1500, true),
                (0, 1, 1000, true),
            ]
        );
    }

    #[test]
    fn small_frames_share_one_quantum() {
        let mut n = nic(2, 1 << 20);
        for h in 0..4 {
            n.enqueue(0, Insert::Tail, packet(h, 500));
        }
        n.enqueue(1, Insert::Tail, packet(10, 1500));
        let order: Vec<u64> = drain(&mut n).iter().map(|f| f.1).collect();
        assert_eq!(order, vec![0, 1, 2, 10, 3]);
    }

    #[test]
    fn head_insertion_jumps_the_qdisc_but_not_the_ring() {
        // The ring holds one 1500 B packet; the rest waits in the qdisc.
        let mut n = nic(1, 1500);
        n.enqueue(0, Insert::Tail, packet(1, 1500));
        n.enqueue(0, Insert::Tail, packet(2, 1500));
        n.enqueue(0, Insert::Tail, packet(3, 1500));
        n.enqueue(0, Insert::Head, packet(9, 100));
        n.enqueue(0, Insert::Head, packet(8, 100));
        let order: Vec<u64> = drain(&mut n).iter().map(|f| f.1).collect();
        assert_eq!(order, vec![1, 8, 9, 2, 3]);
    }

    #[test]
    fn priority_band_keeps_order_and_goes_first() {
        let mut n = nic(1, 1500);
        n.enqueue(0, Insert::Tail, packet(1, 1500));
        n.enqueue(0, Insert::Tail, packet(2, 1500));
        n.enqueue(0, Insert::PriorityBand, packet(8, 100));
        n.enqueue(0, Insert::PriorityBand, packet(9, 100));
        let order: Vec<u64> = drain(&mut n).iter().map(|f| f.1).collect();
        assert_eq!(order, vec![1, 8, 9, 2]);
    }

    #[test]
    fn a_queue_that_empties_and_refills_rejoins_at_the_back() {
        let mut n = nic(2, 1 << 20);
        n.enqueue(0, Insert::Tail, packet(1, 1500));
        n.enqueue(1, Insert::Tail, packet(2, 1500));
        n.enqueue(1, Insert::Tail, packet(3, 1500));
        assert_eq!(n.dequeue().map(|(q, f)| (q, f.packet.handle)), Some((0, 1)));
        n.enqueue(0, Insert::Tail, packet(4, 1500));
        let order: Vec<u64> = drain(&mut n).iter().map(|f| f.1).collect();
        assert_eq!(order, vec![2, 4, 3]);
    }

    #[test]
    fn the_qdisc_limit_counts_qdisc_and_band_but_not_the_ring() {
        let mut n = Nic::new(NicConfig {
            queues: 2,
            mtu_bytes: 1500,
            ring_bytes_max: 1500,
            qdisc_packets_max: Some(2),
        });
        n.enqueue(0, Insert::Tail, packet(1, 1500));
        n.enqueue(0, Insert::Tail, packet(2, 1500));
        assert!(!n.qdisc_full(0), "packet 1 went on to the ring");
        n.enqueue(0, Insert::PriorityBand, packet(3, 100));
        assert!(n.qdisc_full(0));
        assert!(!n.qdisc_full(1), "the limit is per queue");
        assert_eq!(n.dequeue().map(|(_, f)| f.packet.handle), Some(1));
        assert!(!n.qdisc_full(0), "the band's packet moved to the ring");
        assert_eq!(n.queue_packets(0), 2);
    }

    proptest::proptest! {
        #[test]
        fn every_packet_leaves_once_and_whole(
            ops in proptest::collection::vec((0u16..4, 0u8..3, 1u32..5000, proptest::bool::ANY), 1..300),
            ring_bytes_max in 1500u32..20_000,
        ) {
            let mut n = nic(4, ring_bytes_max);
            let mut sent = std::collections::BTreeMap::new();
            let mut left: std::collections::BTreeMap<u64, u32> = std::collections::BTreeMap::new();
            let take = |n: &mut Nic, sent: &mut std::collections::BTreeMap<u64, u32>| {
                if let Some((_, f)) = n.dequeue() {
                    proptest::prop_assert!(f.bytes >= 1 && f.bytes <= 1500);
                    *sent.entry(f.packet.handle).or_insert(0) += f.bytes;
                    proptest::prop_assert_eq!(f.last, sent[&f.packet.handle] == f.packet.len_bytes);
                }
                Ok(())
            };
            for (handle, (queue, insert, len, dequeue)) in (0u64..).zip(ops) {
                let insert = [Insert::Tail, Insert::Head, Insert::PriorityBand][usize::from(insert)];
                n.enqueue(queue, insert, packet(handle, len));
                left.insert(handle, len);
                if dequeue {
                    take(&mut n, &mut sent)?;
                }
            }
            while n.backlog_packets() > 0 {
                take(&mut n, &mut sent)?;
            }
            proptest::prop_assert!(n.dequeue().is_none());
            proptest::prop_assert_eq!(sent, left);
        }
    }
}
