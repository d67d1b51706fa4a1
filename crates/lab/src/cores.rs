//! The engine's cores in the lab (docs/policy.md, `engine`): `engine.cores` threads
//! beside the engine's own, each processing one frame at a time and really spending
//! its traffic's `cost` of CPU (a calibrated busy loop standing for a costly action,
//! FairNIC's antagonist's 100 extra actions). The engine thread reads the tenants'
//! ports and queues their frames for the cores in [`sched::cores::Cores`], the
//! queues and the discipline the simulator uses; a core thread takes the next frame
//! the discipline gives it, spends its cost, and hands it back, and only then does
//! the enforcer see it.
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

use crate::classify::Ipv4Header;
use crate::sys::clock::thread_cpu_ns;
use crate::sys::event::EventFd;
use crate::traffic::FrameMatch;
use policy::{Policy, TenantId};
use sched::Packet;
use sched::cores::{Cores, Waiting};
use std::sync::{Condvar, Mutex, OnceLock};

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
                .and_then(|e| e.core_mask)
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

/// The core threads' nice value: 10 gives a normal thread about 10 times their
/// share of a contended core.
const CORE_THREAD_NICE: libc::c_int = 10;

/// What one core thread spent: CPU time per tenant, and in all.
#[derive(Clone, Debug, Default)]
pub struct CoreSpent {
    pub tenant_cpu_ns: Vec<u64>,
    pub thread_cpu_ns: u64,
    pub frames: u64,
}

/// One core thread: takes the frames its core may process, spends their cost,
/// hands them back; until [`Shared::stop`].
pub fn run_core(shared: &Shared, core: u16, tenants: usize) -> CoreSpent {
    // The modelled cores busy-loop for their costs; on a machine with fewer spare
    // cores than `engine.cores` they would otherwise take the engine thread's core
    // and leave the emulated link idle (1.5% of a run on 2 cores). Nice, they get
    // the time the engine, senders and meter leave.
    let _ = crate::sys::set_thread_nice(CORE_THREAD_NICE);
    let iterations_per_ns = spin_rate();
    let mut spent = CoreSpent {
        tenant_cpu_ns: vec![0; tenants],
        ..CoreSpent::default()
    };
    let started = thread_cpu_ns();
    let mut state = shared.lock();
    let mut mark = thread_cpu_ns();
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
            mark = thread_cpu_ns();
            continue;
        };
        drop(state);
        spin((cost_ns as f64 * iterations_per_ns) as u64);
        let now = thread_cpu_ns();
        spent.tenant_cpu_ns[tenant.index()] += now - mark;
        spent.frames += 1;
        mark = now;
        state = shared.lock();
        state.cores.processed(tenant, bytes, core);
        if state.done.is_empty() {
            shared.done_ready.signal();
        }
        state.done.push(item);
    }
    spent.thread_cpu_ns = thread_cpu_ns() - started;
    spent
}

/// Work that the compiler cannot fold away: `n` steps of a linear congruential
/// generator.
fn spin(n: u64) {
    let mut x = 0u64;
    for i in 0..n {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    std::hint::black_box(x);
}

/// Busy-loop steps per ns of this thread's CPU, measured once per process over
/// about 20 ms of CPU: a cost is CPU work, so a core thread that loses its CPU
/// takes longer by the clock but spends the same.
pub fn spin_rate() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        let mut steps = 1u64 << 16;
        loop {
            let start = thread_cpu_ns();
            spin(steps);
            let took = thread_cpu_ns() - start;
            if took >= 20_000_000 {
                return steps as f64 / took as f64;
            }
            steps *= 2;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calibrated_spin_spends_about_the_cpu_asked() {
        let rate = spin_rate();
        let start = thread_cpu_ns();
        spin((5_000_000.0 * rate) as u64);
        let took = thread_cpu_ns() - start;
        // CPU time, not wall time: only frequency changes between calibration and
        // now move it, and they are far smaller than a factor of two.
        assert!(
            (2_500_000..10_000_000).contains(&took),
            "5 ms of spin took {took} ns of CPU"
        );
    }
}
