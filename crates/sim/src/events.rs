//! The event queue: a binary heap ordered by (time, sequence number), so events at
//! the same nanosecond run in the order they were scheduled and a run is
//! reproducible bit for bit.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The frame on the wire has been serialised.
    LinkFree,
    /// The enforcer asked to be polled again (a shaper waiting for time).
    Kick,
    TrafficStart {
        traffic: u32,
    },
    TrafficStop {
        traffic: u32,
    },
    /// The guest reaped the completion of a send its socket is charged for (a
    /// bulk flow's sent packet, a datagram under NAPI-TX).
    TxCompletion {
        sender: u32,
    },
    /// A descriptor of a tenant's full ring is free again and sends wait for one.
    RingWake {
        tenant: u16,
    },
    /// A bulk flow refused with nothing in flight tries again.
    Retry {
        sender: u32,
    },
    /// An open-loop source sends its next datagram (udp, poisson) or request (rpc).
    OpenLoopSend {
        sender: u32,
    },
    /// A request reached the server, which sends its response now, behind those
    /// its connection holds.
    Respond {
        sender: u32,
        issued_ns: u64,
    },
    /// A connection's refused response, the first it holds, is offered again.
    RespondAgain {
        sender: u32,
        issued_ns: u64,
    },
    /// An engine core finished processing a send; the enforcer gets it now.
    Processed {
        handle: u64,
        bytes: u32,
        core: u16,
    },
    /// The last byte of a response reached the client.
    ResponseReceived {
        sender: u32,
        issued_ns: u64,
    },
}

#[derive(Debug)]
struct Scheduled<E> {
    time_ns: u64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.time_ns, self.seq) == (other.time_ns, other.seq)
    }
}

impl<E> Eq for Scheduled<E> {}

impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Scheduled<E> {
    // Reversed: BinaryHeap is a max-heap and the earliest event must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time_ns, other.seq).cmp(&(self.time_ns, self.seq))
    }
}

/// Generic over the event type: the one-host engine and the engine across hosts
/// have events of their own.
#[derive(Debug)]
pub struct EventQueue<E = Event> {
    heap: BinaryHeap<Scheduled<E>>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn schedule(&mut self, time_ns: u64, event: E) {
        self.seq += 1;
        self.heap.push(Scheduled {
            time_ns,
            seq: self.seq,
            event,
        });
    }

    pub fn pop(&mut self) -> Option<(u64, E)> {
        self.heap.pop().map(|s| (s.time_ns, s.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_fifo_among_equal_times() {
        let mut q = EventQueue::default();
        q.schedule(5, Event::Retry { sender: 1 });
        q.schedule(3, Event::Retry { sender: 2 });
        q.schedule(5, Event::Retry { sender: 3 });
        q.schedule(3, Event::Retry { sender: 4 });
        let order: Vec<(u64, Event)> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (3, Event::Retry { sender: 2 }),
                (3, Event::Retry { sender: 4 }),
                (5, Event::Retry { sender: 1 }),
                (5, Event::Retry { sender: 3 }),
            ]
        );
    }
}
