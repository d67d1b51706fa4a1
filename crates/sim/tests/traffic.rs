//! The traffic models offer what scenario.md says they offer.

use policy::parse_scenario;
use report::summarize;
use std::path::Path;

fn run(traffic: &str, enforcer: &str) -> report::RunRecord {
    let text = format!(
        "policy:\n  link: {{ rate: 10Gbit, queues: 4 }}\n  tenants:\n    - name: a\n    - name: b\n      buffer: 100KB\nduration: 1s\ninterval: 100ms\ntraffic:\n{traffic}"
    );
    let scenario =
        parse_scenario(&text, "t.yaml", Path::new("."), &sched::registry::names()).unwrap();
    sim::run(&scenario, enforcer, sim::HostModel::default(), &mut |_| {}).unwrap()
}

fn tenant_bps(record: &report::RunRecord, tenant: usize) -> f64 {
    summarize(record).tenants[tenant].throughput_bps
}

#[test]
fn udp_and_poisson_offer_their_rate_on_the_wire() {
    // 1470 B datagrams carry 28 B of headers: the wire rate is 1498/1470 of the payload rate.
    let wire = 2e9 * 1498.0 / 1470.0;
    for kind in ["udp", "poisson"] {
        let record = run(
            &format!("  - {{ tenant: a, kind: {kind}, rate: 2Gbit, flows: 4 }}\n"),
            "tonic",
        );
        let got = tenant_bps(&record, 0);
        let tolerance = if kind == "udp" { 0.001 } else { 0.02 };
        assert!((got / wire - 1.0).abs() < tolerance, "{kind}: {got}");
    }
}

#[test]
fn open_loop_rpc_answers_requests_at_their_rate() {
    let record = run(
        "  - { tenant: a, kind: rpc, rate: 20000, response: 1KiB, concurrency: 4 }\n",
        "fifo",
    );
    let count = record.latency[0].histogram_ns.len() as f64;
    assert!(
        (count / 20_000.0 - 1.0).abs() < 0.03,
        "{count} responses in 1 s"
    );
    // An idle link: two wire delays, the server's delay and one frame's serialisation.
    let host = sim::HostModel::default();
    let floor_ns = 2 * host.path.wire_delay_ns + host.path.server_delay_ns;
    assert!(record.latency[0].histogram_ns.min() >= floor_ns);
    assert!(record.latency[0].histogram_ns.value_at_quantile(0.5) < floor_ns + 5_000);
}

#[test]
fn a_flooding_tenant_is_refused_against_its_own_buffer_only() {
    let record = run(
        "  - { tenant: a, kind: bulk, flows: 4 }\n  - { tenant: b, kind: udp, rate: 9Gbit, flows: 8 }\n",
        "tonic",
    );
    assert_eq!(record.tenant_drops[0], 0);
    assert!(record.tenant_drops[1] > 0);
    let summary = summarize(&record);
    assert!((summary.tenants[0].throughput_bps / 5e9 - 1.0).abs() < 0.02);
}

#[test]
fn stopped_traffic_drains_and_then_sends_nothing() {
    let record = run(
        "  - { tenant: a, kind: bulk, flows: 3, stop: 500ms }\n  - { tenant: b, kind: poisson, rate: 3Gbit, flows: 2, stop: 500ms }\n  - { tenant: a, kind: rpc, response: 20KiB, stop: 500ms }\n",
        "tonic-band",
    );
    let bytes = |k: usize| record.intervals[k].class_bytes.iter().sum::<u64>();
    // Sends in flight at the stop still leave (a few TSQ windows), then nothing.
    assert!(bytes(5) > 0 && bytes(5) < 2_000_000, "{}", bytes(5));
    assert!((6..10).all(|k| bytes(k) == 0));
}
