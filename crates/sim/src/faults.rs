//! Figures made wrong on purpose, so that a test can see a run's self-checks catch
//! them. Built only with the feature `faults`, which nothing but the tests turns on;
//! a run takes the fault named in `NICSCHED_FAULT` ([`policy::faults`]).

use policy::Scenario;
use policy::faults::{Fault, from_env as fault};
use sched::{Enforcer, Frame, Packet, Refusal, TenantCounters};

/// `enforcer`, made to lose packets if that is the fault.
pub fn enforcer(scenario: &Scenario, enforcer: Box<dyn Enforcer>) -> Box<dyn Enforcer> {
    match fault(scenario) {
        Some(Fault::LosePackets) => Box::new(Lossy {
            inner: enforcer,
            handed_out: 0,
        }),
        _ => enforcer,
    }
}

/// Takes the dropped app out of the meter's map of apps to report classes.
pub fn blind_meter(scenario: &Scenario, app_class: &mut [Option<usize>]) {
    if let Some(Fault::MeterDropsApp(app)) = fault(scenario) {
        app_class[app.index()] = None;
    }
}

/// Hands the link every frame of its enforcer but each 100th, which vanishes.
struct Lossy {
    inner: Box<dyn Enforcer>,
    handed_out: u64,
}

impl Enforcer for Lossy {
    fn enqueue(&mut self, now_ns: u64, packet: Packet) -> Result<(), (Packet, Refusal)> {
        self.inner.enqueue(now_ns, packet)
    }

    fn dequeue(&mut self, now_ns: u64) -> Option<Frame> {
        let frame = self.inner.dequeue(now_ns)?;
        self.handed_out += 1;
        if self.handed_out.is_multiple_of(100) {
            return self.inner.dequeue(now_ns);
        }
        Some(frame)
    }

    fn next_ready_ns(&self, now_ns: u64) -> Option<u64> {
        self.inner.next_ready_ns(now_ns)
    }

    fn backlog_packets(&self) -> usize {
        self.inner.backlog_packets()
    }

    fn counters(&self) -> &[TenantCounters] {
        self.inner.counters()
    }

    fn classes(&self) -> Option<usize> {
        self.inner.classes()
    }
}
