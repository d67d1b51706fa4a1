//! The engine's cores in the lab (docs/policy.md, `engine`): `engine.cores` threads
//! beside the engine's own, each processing one frame at a time and really busy for
//! its traffic's `cost` (a busy wait standing for a costly action, FairNIC's
//! antagonist's 100 extra actions). The engine thread reads the tenants' ports and
//! queues their frames for the cores in [`sched::cores::Cores`], the queues and the
//! discipline the simulator uses; a core thread takes the next frame the discipline
//! gives it, holds it for its cost, and hands it back, and only then does the
//! enforcer see it.
//!
//! A core holds a frame for its cost on the monotonic clock: it sleeps through all
//! but the last [`SPIN_NS`] of a cost and spins those, so a frame leaves its core
//! at its deadline to within a few µs. Spinning whole costs, on a machine without
//! a CPU to spare per engine core, took the CPUs the tenants' programs send with:
//! beside iperf3 on 2 CPUs one core thread left the senders a third short of their
//! rate, and niced it came back late for 32% of its busy time or ran 41-63% as
//! fast as a core (a loop calibrated in CPU work), so the engine had fewer cores
//! than the scenario said, by an amount that moved with the machine's load. How
//! late a core came back ([`CoreSpent::late_ns`]) is what the `engine` check holds
//! it to.
//!
//! `engine_cpu_share` is each tenant's share of the time the cores held frames
//! (engine.md: busy engine time), measured per frame on the clock.
//!
//! Under `engine.cpu: weighted` a tenant's frames wait in its own port's receive
//! ring until its queue has room, so a tenant that floods the cores overflows its
//! own ring, never its neighbour's. Under `fifo` every port is read as frames come
//! and all tenants share one queue: whoever sends most fills it. Under a core mask
//! (`fairnic`) each core has its queue, fed only by the tenants it serves.
//!
//! Each core thread measures its CPU time per tenant (the thread's CPU clock read
//! after every frame), so `engine_cpu_share` is what the threads spent, not what the
//! scenario asked.

use crate::classify::FrameMatch;
use crate::classify::Ipv4Header;
use crate::sys::clock::now_ns;
use crate::sys::event::EventFd;
use policy::{Policy, TenantId};
use sched::Packet;
use sched::cores::{Cores, Waiting};
use std::sync::{Condvar, Mutex};

/// What a run asks of the engine's cores.
#[derive(Clone, Debug)]
pub struct CoreSetup {
    pub cores: u16,
    /// Each costly traffic's frames, and what one of them costs.
    pub costs: Vec<(FrameMatch, u64)>,
    /// Per tenant, the cores its frames may run on (the enforcer's core mask).
    pub mask: Option<Vec<Vec<u16>>>,
}

impl CoreSetup {
    /// `None` when the run asks nothing of the engine's CPU (no traffic has a
    /// `cost`, one core): frames then go straight to the enforcer, as before the
    /// engine had cores. `frames[i]` tells traffic i's frames apart.
    pub fn for_run(
        policy: &Policy,
        enforcer: &str,
        costs_ns: &[u64],
        frames: &[FrameMatch],
    ) -> Option<CoreSetup> {
        if policy.engine.cores <= 1 && costs_ns.iter().all(|&c| c == 0) {
            return None;
        }
        Some(CoreSetup {
            cores: policy.engine.cores.max(1),
            costs: frames
                .iter()
                .zip(costs_ns)
                .filter(|&(_, &cost)| cost > 0)
                .map(|(m, &cost)| (m.clone(), cost))
                .collect(),
            mask: sched::registry::find(enforcer)
                .and_then(|e| e.core_mask())
                .map(|core_mask| core_mask(policy)),
        })
    }

    /// The cost of one frame of `tenant`: its traffic's, 0 for frames of no costly
    /// traffic.
    pub fn cost_ns(&self, tenant: TenantId, ip: &Ipv4Header) -> u64 {
        self.costs
            .iter()
            .find(|(m, _)| m.matches(tenant, ip))
            .map_or(0, |&(_, cost)| cost)
    }

    /// Frames the cores' queues may hold at once.
    pub fn queued_max(&self, policy: &Policy) -> u32 {
        let queues = Cores::<()>::new(policy, 0, self.mask.clone()).queues() as u32;
        queues * sched::cores::QUEUE_PACKETS
    }
}

/// What the engine thread and the core threads share.
pub struct Shared {
    pub state: Mutex<State>,
    /// Core threads wait here for frames.
    work: Condvar,
    /// Wakes the engine thread when processed frames wait for it.
    pub done_ready: EventFd,
}

pub struct State {
    pub cores: Cores<Packet>,
    /// Frames processed, for the enforcer.
    pub done: Vec<Packet>,
    stop: bool,
}

impl Shared {
    pub fn new(policy: &Policy, setup: &CoreSetup) -> std::io::Result<Shared> {
        Ok(Shared {
            state: Mutex::new(State {
                cores: Cores::new(policy, sched::cores::QUEUE_PACKETS, setup.mask.clone()),
                done: Vec::new(),
                stop: false,
            }),
            work: Condvar::new(),
            done_ready: EventFd::new()?,
        })
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the core threads: frames arrived.
    pub fn notify(&self) {
        self.work.notify_all();
    }

    /// Tells the core threads to stop once their frame is done.
    pub fn stop(&self) {
        self.lock().stop = true;
        self.work.notify_all();
    }
}

/// The last part of a cost a core spins rather than sleeps: more than a timer's
/// wake-up takes with the engine's 1 ns timer slack, so it is on time.
pub const SPIN_NS: u64 = 100_000;

/// Tells the core threads to stop when dropped: a scope that ends early (a thread
/// that would not start) still joins them.
pub struct StopOnDrop<'a>(pub &'a Shared);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// What one core thread did.
#[derive(Clone, Debug, Default)]
pub struct CoreSpent {
    /// Per tenant, the time it held that tenant's frames, from taking each to
    /// letting it go (frames without a cost take none).
    pub tenant_busy_ns: Vec<u64>,
    /// Of that time, how long past the frames' deadlines (each cost after it was
    /// taken): a core whose thread did not run when a frame was due.
    pub late_ns: u64,
}

/// One core thread: takes the frames its core may process, spends their cost,
/// hands them back; until [`Shared::stop`].
pub fn run_core(shared: &Shared, core: u16, tenants: usize) -> CoreSpent {
    crate::sys::set_timer_slack_ns(1);
    let mut spent = CoreSpent {
        tenant_busy_ns: vec![0; tenants],
        ..CoreSpent::default()
    };
    let mut state = shared.lock();
    loop {
        let Some(Waiting {
            item,
            tenant,
            bytes,
            cost_ns,
            ..
        }) = state.cores.take_for(core)
        else {
            if state.stop {
                break;
            }
            state = shared.work.wait(state).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        drop(state);
        // A frame without a cost holds its core for no time: it has no deadline
        // to be late for, and the hand-over is the engine's own work.
        if cost_ns > 0 {
            let taken_ns = now_ns();
            let done_ns = hold(taken_ns + cost_ns);
            spent.tenant_busy_ns[tenant.index()] += done_ns - taken_ns;
            spent.late_ns += done_ns - (taken_ns + cost_ns);
        }
        state = shared.lock();
        state.cores.processed(tenant, bytes, core);
        if state.done.is_empty() {
            shared.done_ready.signal();
        }
        state.done.push(item);
    }
    spent
}

/// Holds the calling core until the monotonic clock reads `deadline_ns`: asleep
/// until [`SPIN_NS`] before it, spinning after. Returns when it saw the deadline.
fn hold(deadline_ns: u64) -> u64 {
    if deadline_ns.saturating_sub(now_ns()) > SPIN_NS {
        // A failed sleep only leaves more to spin.
        let _ = crate::sys::clock::sleep_until_ns(deadline_ns - SPIN_NS);
    }
    loop {
        let now = now_ns();
        if now >= deadline_ns {
            return now;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::clock::thread_cpu_ns;

    #[test]
    fn a_core_holds_a_frame_until_its_deadline_and_spins_its_last_part() {
        let cpu_before = thread_cpu_ns();
        let start = now_ns();
        let done = hold(start + 2_000_000);
        assert!(done >= start + 2_000_000);
        // The last SPIN_NS are spun, so its thread's CPU clock moves.
        assert!(thread_cpu_ns() > cpu_before);
    }
}
