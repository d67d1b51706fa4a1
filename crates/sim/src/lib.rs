//! # nicsched simulator
//!
//! A deterministic discrete-event simulation of one multi-tenant host and its egress
//! link, driving any enforcer of the `sched` crate. Time is integer nanoseconds;
//! every random draw comes from the scenario's seed, so the same scenario and seed
//! give the same run, bit for bit.
//!
//! - [`host`]: the mechanisms around the enforcer (TCP small queues, a datagram
//!   socket's send buffer, a VM's transmit ring, Tx completion moderation, wire and
//!   server delays) as named constants.
//! - `events`: the event queue.
//! - `ring`: a VM's transmit ring, its completions in order or out of order.
//! - `engine`: senders (bulk TCP-like flows placed on the tenant's cores, udp,
//!   poisson, rpc), backpressure from the ring to their sockets, the link,
//!   completions.
//! - `hosts`: [`run_hosts`], a scenario across hosts: each host's egress, the
//!   fabric, each receiving host's ingress and its VMs' policers, PicNIC's feedback.
//! - `faults` (feature `faults`, tests only): figures made wrong on purpose.
//!
//! It imports `policy`, `sched` and `report`; never the lab or the datapath.

mod engine;
mod events;
#[cfg(feature = "faults")]
mod faults;
pub mod host;
mod hosts;
mod responses;
mod ring;

pub use host::HostModel;
pub use hosts::run_hosts;

use policy::Scenario;
use report::RunRecord;
use sched::{BuildError, Enforcer};

/// Simulates `scenario` under the enforcer called `enforcer`. `progress` is called
/// with the simulated time as the run goes.
pub fn run(
    scenario: &Scenario,
    enforcer: &str,
    host: HostModel,
    progress: &mut dyn FnMut(u64),
) -> Result<RunRecord, BuildError> {
    let capacity = sched::Capacity::for_host(enforcer, host.limits);
    let built = sched::build_with(enforcer, &scenario.policy, capacity)?;
    Ok(run_enforcer(scenario, enforcer, built, host, progress))
}

/// Simulates `scenario` under an enforcer already built, reported as `name`: for
/// mechanisms outside the registry, and for tests that hand the simulator a broken
/// one to see its self-checks fail.
pub fn run_enforcer(
    scenario: &Scenario,
    name: &str,
    enforcer: Box<dyn Enforcer>,
    host: HostModel,
    progress: &mut dyn FnMut(u64),
) -> RunRecord {
    let started = std::time::Instant::now();
    let mut record = engine::Engine::new(scenario, name, enforcer, host).run(progress);
    record.wall_s = started.elapsed().as_secs_f64();
    // What `check` says of a registry row, held by this run wherever its
    // conditions are met; judged only on figures the run vouches for.
    if record.failed_checks().next().is_none()
        && let Ok(bounds) = sched::bounds(name, &scenario.policy)
    {
        let claims = report::claims::claims(&record, scenario, &bounds);
        record.checks.push(claims);
    }
    record.provenance.seed = scenario.seed;
    record.provenance.settings = host.settings();
    record
}
