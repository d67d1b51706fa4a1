//! PicNIC Fig. 7c-d (the shipped `picnic/fig7c.yaml`): two UDP floods of small
//! datagrams overload the receiving host's engine, not its link. With PCCP
//! (`picnic`) the latency prober beside them keeps close to its idle latency and
//! the receiver drops next to nothing; with bandwidth feedback only
//! (`picnic-bps`) the prober waits behind a full receive queue and the receiver
//! drops most of the floods.

use policy::{AnyScenario, HostsScenario, load_any_scenario};
use std::path::PathBuf;

fn fig7c() -> HostsScenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/picnic/fig7c.yaml");
    match load_any_scenario(&path, &sched::registry::names()) {
        Ok(AnyScenario::Hosts(mut s)) => {
            // The prober's first 400 ms beside the floods are enough for the shape.
            s.duration_ns = 1_500_000_000;
            s
        }
        other => panic!("fig7c is a scenario across hosts: {other:?}"),
    }
}

struct Outcome {
    idle_p99_ns: u64,
    loaded_p99_ns: u64,
    /// The floods' frames the receiving host h3 dropped, per second of floods.
    h3_drops_per_s: f64,
}

fn run(s: &HostsScenario, enforcer: &str) -> Outcome {
    let record = sim::run_hosts(s, enforcer, sim::HostModel::default(), &mut |_| {})
        .expect("enforcer builds");
    let p99 = |name: &str| {
        let l = record
            .latency
            .iter()
            .find(|l| l.traffic == name)
            .expect("a prober");
        l.histogram_ns.value_at_quantile(0.99)
    };
    let floods_start_ns = s
        .traffic
        .iter()
        .find(|t| t.traffic.name == "f-ac")
        .expect("a flood")
        .traffic
        .start_ns;
    let h3 = s
        .traffic
        .iter()
        .find(|t| t.traffic.name == "f-ac")
        .unwrap()
        .to
        .host;
    let dropped_frames: f64 = s
        .traffic
        .iter()
        .enumerate()
        .filter(|(_, t)| t.to.host == h3)
        .filter_map(|(f, t)| match t.traffic.kind {
            policy::TrafficKind::Poisson { size_bytes, .. } => {
                let frame_bytes = size_bytes + policy::wire::UDP_HEADER_BYTES;
                Some(record.dropped_bytes[f] as f64 / f64::from(frame_bytes))
            }
            _ => None,
        })
        .sum();
    Outcome {
        idle_p99_ns: p99("probe-idle"),
        loaded_p99_ns: p99("probe"),
        h3_drops_per_s: dropped_frames * 1e9 / (s.duration_ns - floods_start_ns) as f64,
    }
}

#[test]
fn pccp_keeps_the_probers_latency_near_idle_and_drops_near_zero_where_bandwidth_feedback_alone_does_not()
 {
    let s = fig7c();
    let picnic = run(&s, "picnic");
    let bps = run(&s, "picnic-bps");
    assert!(
        picnic.loaded_p99_ns < 2 * picnic.idle_p99_ns,
        "picnic: p99 {} ns beside the floods, {} ns alone",
        picnic.loaded_p99_ns,
        picnic.idle_p99_ns
    );
    assert!(
        picnic.h3_drops_per_s < 100.0,
        "picnic: {} drops/s",
        picnic.h3_drops_per_s
    );
    assert_eq!(
        bps.idle_p99_ns, picnic.idle_p99_ns,
        "alone, the prober sees no feedback"
    );
    assert!(
        bps.loaded_p99_ns > 20 * bps.idle_p99_ns,
        "picnic-bps: p99 {} ns beside the floods, {} ns alone",
        bps.loaded_p99_ns,
        bps.idle_p99_ns
    );
    // The floods offer 976 kpps to an engine that processes 333 kpps.
    assert!(
        bps.h3_drops_per_s > 500_000.0,
        "picnic-bps: {} drops/s",
        bps.h3_drops_per_s
    );
}
