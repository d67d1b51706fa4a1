//! The emulated link's clock: when the link is next free, shared by every engine
//! thread that sends on it, without a lock.
//!
//! One engine thread owns it alone; several ([`crate::shards`]) share one. Each
//! frame holds the link for its serialisation time at the link rate
//! ([`policy::wire::serialisation_ns`]) by one compare-and-swap on "free at", so
//! the frames of all threads together never take more than the link rate: two
//! threads that saw the link free at once both take it, one after the other. What
//! sharing costs is order, not rate: a thread decides that the link is free, then
//! takes it, and another thread's frame may have taken it in between, so its own
//! frame is sent on the device up to one frame's serialisation time per other
//! thread before its slot on the emulated link comes (docs/enforcers.md, "Engine
//! threads").
//!
//! The threads' clocks share one origin ([`LinkClock::origin`]), so that "free at"
//! means the same instant to each, as do the enforcer shards' periods.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// When the link is free, in ns of the engine's time, and where that time starts.
#[derive(Debug, Default)]
pub struct LinkClock {
    free_ns: AtomicU64,
    origin: OnceLock<Instant>,
}

impl LinkClock {
    pub fn new() -> LinkClock {
        LinkClock::default()
    }

    /// The engine's time 0, the same for every thread: set by the first thread to
    /// ask, once its sockets are open.
    pub fn origin(&self) -> Instant {
        *self.origin.get_or_init(Instant::now)
    }

    /// When the last frame handed to the link has left it.
    pub fn free_ns(&self) -> u64 {
        self.free_ns.load(Ordering::Relaxed)
    }

    /// Holds the link for `busy_ns` from when it frees, or from `earliest_ns` when
    /// that is later (time the link lay idle is not made up beyond it). Returns
    /// when it was free before this frame took it.
    pub fn hold(&self, earliest_ns: u64, busy_ns: u64) -> u64 {
        self.free_ns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |free_ns| {
                Some(free_ns.max(earliest_ns) + busy_ns)
            })
            .expect("the update always gives a value")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_frame_takes_the_link_from_when_it_frees_or_from_the_earliest_start() {
        let link = LinkClock::new();
        assert_eq!(link.hold(1_000, 100), 0);
        assert_eq!(link.free_ns(), 1_100);
        // Busy: the next frame starts when the first has left.
        assert_eq!(link.hold(1_050, 100), 1_100);
        assert_eq!(link.free_ns(), 1_200);
        // Idle since 1 200: time before `earliest_ns` is not made up.
        link.hold(5_000, 10);
        assert_eq!(link.free_ns(), 5_010);
    }

    #[test]
    fn threads_sharing_the_link_never_take_more_than_its_time() {
        let link = Arc::new(LinkClock::new());
        let (threads, frames, busy_ns) = (4, 10_000, 7);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let link = &link;
                scope.spawn(move || {
                    for _ in 0..frames {
                        link.hold(0, busy_ns);
                    }
                });
            }
        });
        // Every frame's time, back to back, none lost and none overlapping.
        assert_eq!(link.free_ns(), threads * frames * busy_ns);
    }

    #[test]
    fn every_thread_sees_one_origin() {
        let link = LinkClock::new();
        let first = link.origin();
        let other = std::thread::scope(|scope| scope.spawn(|| link.origin()).join().unwrap());
        assert_eq!(first, other);
    }
}
