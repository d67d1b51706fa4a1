//! An rpc connection's responses, sent in order by both worlds (one host's
//! engine and the hosts' fabric).

use std::collections::VecDeque;

/// The responses of one rpc connection due behind the one it holds, by their
/// requests' times. A TCP connection sends in order: while one response is held
/// (refused and offered again later, or waiting for a descriptor), those due
/// after it wait behind it rather than each retrying on its own, which grew the
/// simulator's work with the square of the time an rpc spent beyond its cap.
#[derive(Debug, Default)]
pub(crate) struct Behind(VecDeque<u64>);

impl Behind {
    /// A response that was sent and then refused goes out before any held
    /// behind it.
    pub(crate) fn put_first(&mut self, issued_ns: u64) {
        self.0.push_front(issued_ns);
    }
}

/// A world that sends rpc responses.
pub(crate) trait Responder {
    /// Whether `sender`'s connection holds a response now.
    fn holds(&self, sender: u32) -> bool;
    /// Sends the response to the request of `issued_ns`, or holds it and arranges
    /// to offer it again: whether it was sent.
    fn send_response(&mut self, now: u64, sender: u32, issued_ns: u64) -> bool;
    fn behind(&mut self, sender: u32) -> &mut Behind;
}

/// A response is due: it goes out behind those its connection holds.
pub(crate) fn respond(world: &mut impl Responder, now: u64, sender: u32, issued_ns: u64) {
    if world.holds(sender) {
        world.behind(sender).0.push_back(issued_ns);
    } else {
        send_from(world, now, sender, issued_ns);
    }
}

/// Sends the response to the request of `issued_ns`, then those held behind it,
/// until one is held again.
pub(crate) fn send_from(world: &mut impl Responder, now: u64, sender: u32, mut issued_ns: u64) {
    while world.send_response(now, sender, issued_ns) {
        match world.behind(sender).0.pop_front() {
            Some(next) => issued_ns = next,
            None => return,
        }
    }
}
