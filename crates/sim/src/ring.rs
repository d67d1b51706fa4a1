//! A VM's transmit ring: the descriptors of its virtio Tx queue, held from the
//! moment a send is posted until the engine is done with its packet, and given back
//! to the guest with deferred completions (PicNIC §5.4.3).
//!
//! A descriptor is *done* when its packet has left the engine (its last frame is
//! serialised on the link) or was refused; its completion is then *due*:
//!
//! - out of order: at once, whatever was posted before it;
//! - in order (virtio's in-order mode): only once every descriptor posted before it
//!   is due too, so one packet the engine holds back (a throttled flow's, waiting in
//!   the timing wheel) holds back every later completion of the VM.
//!
//! The guest reaps a due completion a little later, at a time the caller gives;
//! only then is the descriptor free for another send. Reaping is lazy: the ring
//! frees what is due whenever it is asked for room, so a completion nobody waits
//! for costs no event. Time comes in as an argument, so the order of completions is
//! tested exactly below.

use policy::Completions;
use std::collections::VecDeque;

/// What a descriptor carries: who sent it and, for an rpc response, when the
/// request was issued (its latency is measured from then).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Post {
    pub sender: u32,
    pub issued_ns: u64,
}

/// What became of a descriptor's packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Held,
    Sent,
    Refused,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    post: Post,
    fate: Fate,
}

#[derive(Debug)]
pub struct TxRing {
    order: Completions,
    descriptors: u32,
    /// Every descriptor used so far; grows to the most ever posted at once, never
    /// past `descriptors`, so a VM that sends little costs little.
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Posted descriptors in posting order, not yet due (in-order only).
    posted: VecDeque<u32>,
    /// Due descriptors and when the guest reaps each, in that order (a completion
    /// is reaped a fixed time after it falls due, and falls due at the present).
    due: VecDeque<(u64, u32)>,
    /// Descriptors posted and not yet reaped.
    used: u32,
    full_since_ns: Option<u64>,
    full_ns: u64,
}

impl TxRing {
    pub fn new(order: Completions, descriptors: u32) -> Self {
        assert!(descriptors > 0, "a ring needs a descriptor");
        TxRing {
            order,
            descriptors,
            slots: Vec::new(),
            free: Vec::new(),
            posted: VecDeque::new(),
            due: VecDeque::new(),
            used: 0,
            full_since_ns: None,
            full_ns: 0,
        }
    }

    /// Whether a send posted at `now_ns` would find a free descriptor.
    pub fn has_room(&mut self, now_ns: u64) -> bool {
        self.reap(now_ns);
        self.used < self.descriptors
    }

    /// Takes a free descriptor for `post`; `None` when the ring is full.
    pub fn post(&mut self, now_ns: u64, post: Post) -> Option<u32> {
        if !self.has_room(now_ns) {
            return None;
        }
        let slot = Slot {
            post,
            fate: Fate::Held,
        };
        let descriptor = match self.free.pop() {
            Some(d) => {
                self.slots[d as usize] = slot;
                d
            }
            None => {
                self.slots.push(slot);
                self.slots.len() as u32 - 1
            }
        };
        self.used += 1;
        if self.used == self.descriptors {
            self.full_since_ns = Some(now_ns);
        }
        if self.order == Completions::InOrder {
            self.posted.push_back(descriptor);
        }
        Some(descriptor)
    }

    /// Takes back the newest post, whose send never reached the engine (it came
    /// after a refused send of the same burst): the ring is as it was before that
    /// post, and the next post takes the same descriptor. Posts are taken back
    /// newest first.
    pub fn unpost(&mut self, descriptor: u32) {
        if self.used == self.descriptors {
            // Only the post that filled the ring started its full time.
            self.full_since_ns = None;
        }
        self.used -= 1;
        self.free.push(descriptor);
        if self.order == Completions::InOrder {
            let newest = self.posted.pop_back();
            debug_assert_eq!(
                newest,
                Some(descriptor),
                "posts are taken back newest first"
            );
        }
    }

    pub fn post_of(&self, descriptor: u32) -> Post {
        self.slots[descriptor as usize].post
    }

    /// The engine is done with `descriptor`'s packet; every completion that makes
    /// due, in posting order, goes to `due` and will be reaped at `reap_at_ns`.
    pub fn done(
        &mut self,
        reap_at_ns: u64,
        descriptor: u32,
        fate: Fate,
        due: &mut Vec<(Post, Fate)>,
    ) {
        debug_assert_ne!(fate, Fate::Held);
        debug_assert!(self.due.back().is_none_or(|&(at, _)| at <= reap_at_ns));
        let slot = &mut self.slots[descriptor as usize];
        debug_assert_eq!(slot.fate, Fate::Held, "a packet is done once");
        slot.fate = fate;
        match self.order {
            Completions::OutOfOrder => self.make_due(reap_at_ns, descriptor, due),
            Completions::InOrder => {
                while let Some(&head) = self.posted.front() {
                    if self.slots[head as usize].fate == Fate::Held {
                        break;
                    }
                    self.posted.pop_front();
                    self.make_due(reap_at_ns, head, due);
                }
            }
        }
    }

    fn make_due(&mut self, reap_at_ns: u64, descriptor: u32, due: &mut Vec<(Post, Fate)>) {
        let slot = self.slots[descriptor as usize];
        due.push((slot.post, slot.fate));
        self.due.push_back((reap_at_ns, descriptor));
    }

    /// When the next due completion is reaped, if any is due.
    pub fn next_reap_ns(&self) -> Option<u64> {
        self.due.front().map(|&(at, _)| at)
    }

    /// Frees every descriptor whose completion has been reaped by `now_ns`.
    fn reap(&mut self, now_ns: u64) {
        while let Some(&(at, descriptor)) = self.due.front() {
            if at > now_ns {
                break;
            }
            self.due.pop_front();
            if let Some(since) = self.full_since_ns.take() {
                self.full_ns += at - since;
            }
            self.used -= 1;
            self.free.push(descriptor);
        }
    }

    /// Nanoseconds the ring has been full, up to `now_ns`.
    pub fn full_ns(&mut self, now_ns: u64) -> u64 {
        self.reap(now_ns);
        self.full_ns + self.full_since_ns.map_or(0, |since| now_ns - since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(sender: u32) -> Post {
        Post {
            sender,
            issued_ns: 0,
        }
    }

    /// Posts sends 0..n and returns their descriptors.
    fn posted(ring: &mut TxRing, n: u32) -> Vec<u32> {
        (0..n).map(|s| ring.post(0, post(s)).unwrap()).collect()
    }

    /// Marks the sends in `order` done, one at a time; what each makes due, as
    /// senders.
    fn due_after(ring: &mut TxRing, d: &[u32], order: &[usize]) -> Vec<Vec<u32>> {
        order
            .iter()
            .map(|&i| {
                let mut due = Vec::new();
                ring.done(0, d[i], Fate::Sent, &mut due);
                due.iter().map(|(p, _)| p.sender).collect()
            })
            .collect()
    }

    #[test]
    fn out_of_order_completes_each_packet_when_it_is_done() {
        let mut ring = TxRing::new(Completions::OutOfOrder, 8);
        let d = posted(&mut ring, 4);
        assert_eq!(
            due_after(&mut ring, &d, &[2, 0, 3, 1]),
            vec![vec![2], vec![0], vec![3], vec![1]]
        );
    }

    #[test]
    fn in_order_holds_later_completions_behind_the_head() {
        let mut ring = TxRing::new(Completions::InOrder, 8);
        let d = posted(&mut ring, 4);
        // Send 0 is the throttled one: 2, 1 and 3 are done first and wait for it.
        assert_eq!(
            due_after(&mut ring, &d, &[2, 1, 3, 0]),
            vec![vec![], vec![], vec![], vec![0, 1, 2, 3]]
        );
        let mut ring = TxRing::new(Completions::InOrder, 8);
        let d = posted(&mut ring, 4);
        assert_eq!(
            due_after(&mut ring, &d, &[1, 0, 3, 2]),
            vec![vec![], vec![0, 1], vec![], vec![2, 3]]
        );
    }

    #[test]
    fn a_full_ring_has_room_again_once_a_completion_is_reaped() {
        for order in [Completions::InOrder, Completions::OutOfOrder] {
            let mut ring = TxRing::new(order, 2);
            let d = posted(&mut ring, 2);
            assert_eq!(ring.post(10, post(9)), None);
            let mut due = Vec::new();
            ring.done(30, d[0], Fate::Refused, &mut due);
            assert_eq!(due, vec![(post(0), Fate::Refused)]);
            assert_eq!(ring.next_reap_ns(), Some(30));
            // Due is not free: the guest reaps it at 30.
            assert!(!ring.has_room(29));
            assert!(ring.has_room(30));
            assert_eq!(ring.next_reap_ns(), None);
            assert_eq!(ring.full_ns(100), 30);
            assert_eq!(ring.post(40, post(2)), Some(d[0]));
            assert_eq!(ring.full_ns(100), 30 + 60);
        }
    }

    #[test]
    fn a_post_taken_back_leaves_the_ring_as_before_it() {
        for order in [Completions::InOrder, Completions::OutOfOrder] {
            // Two rings: one posts three and takes back the last two, the other
            // posts one; from then on they give the same descriptors and times.
            let mut burst = TxRing::new(order, 3);
            let mut single = TxRing::new(order, 3);
            let d = posted(&mut burst, 3);
            assert_eq!(burst.post(5, post(9)), None);
            burst.unpost(d[2]);
            burst.unpost(d[1]);
            assert_eq!(posted(&mut single, 1), vec![d[0]]);
            let mut due = (Vec::new(), Vec::new());
            burst.done(20, d[0], Fate::Refused, &mut due.0);
            single.done(20, d[0], Fate::Refused, &mut due.1);
            assert_eq!(due.0, due.1);
            for ring in [&mut burst, &mut single] {
                assert_eq!(ring.post(10, post(1)), Some(1));
                assert_eq!(ring.post(10, post(2)), Some(2));
                assert_eq!(ring.post(20, post(3)), Some(0));
                // Full from 10 to 20 and from 20 on; the full time the taken-back
                // post started at 0 is gone.
                assert_eq!(ring.full_ns(50), 40);
            }
        }
    }

    #[test]
    fn in_order_frees_descriptors_posted_after_a_reap() {
        let mut ring = TxRing::new(Completions::InOrder, 3);
        let d = posted(&mut ring, 3);
        let mut due = Vec::new();
        ring.done(0, d[0], Fate::Sent, &mut due);
        let again = ring.post(0, post(3)).unwrap();
        assert_eq!(again, d[0]);
        due.clear();
        // The reused descriptor is now the newest: it waits for 1 and 2.
        ring.done(0, again, Fate::Sent, &mut due);
        ring.done(0, d[2], Fate::Sent, &mut due);
        assert!(due.is_empty());
        ring.done(0, d[1], Fate::Sent, &mut due);
        let senders: Vec<u32> = due.iter().map(|(p, _)| p.sender).collect();
        assert_eq!(senders, vec![1, 2, 3]);
    }
}
