//! Simulated frames per wall-clock second on TONIC's 64-flow asymmetry scenario (8
//! flows against 64 on a saturated 10 Gbit/s link), per enforcer; `fifo` is the peer
//! every other enforcer's cost is read against. Run with `cargo bench -p sim`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::path::PathBuf;

/// Simulated time per iteration: long enough to be past start-up, short enough for
/// criterion to take ten samples in a few seconds.
const SIMULATED_NS: u64 = 1_000_000_000;

fn asymmetry_1_8(c: &mut Criterion) {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/tonic/asymmetry-1-8.yaml");
    let mut scenario =
        policy::load_scenario(&path, &sched::registry::names()).expect("shipped scenario");
    scenario.duration_ns = SIMULATED_NS;
    for t in &mut scenario.traffic {
        t.stop_ns = t.stop_ns.min(SIMULATED_NS);
    }
    let mut group = c.benchmark_group("sim/asymmetry-1-8");
    group.sample_size(10);
    let nic_model = sched::ENFORCERS.iter().filter(|e| e.nic().is_some());
    for enforcer in nic_model.map(|e| e.name) {
        let frames = sim::run(&scenario, enforcer, sim::HostModel::default(), &mut |_| {})
            .expect("builds")
            .frames_sent;
        group.throughput(Throughput::Elements(frames));
        group.bench_function(enforcer, |b| {
            b.iter(|| sim::run(&scenario, enforcer, sim::HostModel::default(), &mut |_| {}))
        });
    }
    group.finish();
}

criterion_group!(benches, asymmetry_1_8);
criterion_main!(benches);
