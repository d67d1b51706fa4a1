//! The engine's cores: a pass-through without engine cost, and under an antagonist
//! that saturates them, `engine.cpu: weighted` keeps a well-behaved tenant at its
//! ideal where `fifo` does not (docs/policy.md, `engine`).

mod common;

use common::{beside, checked_run as run};
use proptest::prelude::*;
use report::{RunRecord, Summary, summarize};

/// summary.json without its provenance, which names the host model's settings.
fn summary_json(record: &RunRecord) -> String {
    let mut summary = summarize(record);
    summary.provenance = Default::default();
    summary.to_json()
}

const TRAFFIC: &str = "duration: 300ms
interval: 50ms
traffic:
  - { tenant: a, kind: bulk, flows: 5 }
  - { tenant: b, kind: poisson, rate: 2Gbit, flows: 3 }
  - { tenant: b, kind: rpc, response: 4KiB, concurrency: 2, start: 100ms }
";

#[test]
fn without_engine_cost_the_cores_are_a_pass_through() {
    let plain = format!(
        "policy:\n  link: {{ rate: 10Gbit, queues: 4 }}\n  tenants: [{{ name: a }}, {{ name: b, weight: 3 }}]\n{TRAFFIC}"
    );
    let explicit = format!(
        "policy:\n  link: {{ rate: 10Gbit, queues: 4 }}\n  engine: {{ cores: 1, cpu: weighted, packet_cost: 0ns }}\n  tenants: [{{ name: a }}, {{ name: b, weight: 3 }}]\n{TRAFFIC}"
    );
    let fifo = explicit.replace("cores: 1, cpu: weighted", "cores: 8, cpu: fifo");
    for enforcer in ["wf2q", "tonic", "fifo"] {
        let before = summary_json(&run(&plain, enforcer));
        assert!(!before.contains("engine_"), "{before}");
        assert_eq!(
            before,
            summary_json(&run(&explicit, enforcer)),
            "{enforcer}"
        );
        assert_eq!(before, summary_json(&run(&fifo, enforcer)), "{enforcer}");
    }
}

/// The victim's throughput over its ideal, and the summary.
fn victim_share(text: &str, enforcer: &str) -> (f64, Summary) {
    let summary = summarize(&run(text, enforcer));
    let victim = &summary.tenants[0];
    (victim.throughput_bps / victim.ideal_bps, summary)
}

fn bar(packet_cost: &str, antagonist: &str) {
    for enforcer in ["wf2q", "fifo"] {
        let (weighted, summary) =
            victim_share(&beside("weighted", packet_cost, antagonist), enforcer);
        eprintln!("{enforcer} weighted: victim at {weighted:.3} of its ideal");
        assert!(weighted >= 0.95, "{enforcer} weighted: {weighted}");
        let [victim, antagonist_] = &summary.tenants[..] else {
            panic!("two tenants")
        };
        // The antagonist overruns its own queue; the victim's never fills.
        assert!(antagonist_.engine_refused.unwrap() > 0);
        assert_eq!(victim.engine_refused, Some(0));
        let (fifo, summary) = victim_share(&beside("fifo", packet_cost, antagonist), enforcer);
        eprintln!("{enforcer} fifo: victim at {fifo:.3} of its ideal");
        assert!(fifo < 0.70, "{enforcer} fifo: {fifo}");
        assert!(summary.tenants[0].engine_refused.unwrap() > 0);
        let shares: f64 = summary
            .tenants
            .iter()
            .map(|t| t.engine_cpu_share.unwrap())
            .sum();
        assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    }
}

#[test]
fn a_costly_antagonist_under_weighted_and_fifo_cores() {
    bar("1us", "kind: udp, rate: 2Gbit, size: 1000B, cost: 20us");
}

#[test]
fn a_small_packet_flood_under_weighted_and_fifo_cores() {
    bar("2us", "kind: udp, rate: 1Gbit, size: 64B");
}

/// A bulk sender whose sends the enforcer refuses after a core processed them
/// keeps sending: no send is left counted in flight.
#[test]
fn bulk_sends_refused_after_the_cores_are_retried() {
    let record = run(
        "policy:
  link: { rate: 1Gbit }
  engine: { cores: 4, packet_cost: 20us }
  tenants: [{ name: a, buffer: 70KB }, { name: b }]
duration: 1s
interval: 100ms
traffic:
  - { tenant: a, kind: bulk, flows: 8 }
  - { tenant: b, kind: udp, rate: 600Mbit, flows: 4 }
",
        "wf2q",
    );
    assert!(record.tenant_drops[0] > 0, "a's sends were refused");
    let last = record.intervals.last().unwrap();
    let a = record.tenant_throughput_bps(last, 0);
    assert!(a > 0.3e9, "a sends {a} bit/s in the last interval");
}

#[derive(Clone, Debug)]
struct TenantSpec {
    weight: u32,
    cost_ns: u64,
    bulk: bool,
    rate_mbit: u32,
}

fn tenant() -> impl Strategy<Value = TenantSpec> {
    (1u32..5, 0u64..4000, any::<bool>(), 50u32..2000).prop_map(
        |(weight, cost_ns, bulk, rate_mbit)| TenantSpec {
            weight,
            cost_ns,
            bulk,
            rate_mbit,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn the_cores_conserve_bytes_and_share_all_their_time(
        tenants in proptest::collection::vec(tenant(), 1..5),
        cores in 1u16..4,
        fifo in any::<bool>(),
        packet_cost_ns in 0u64..2000,
        seed in any::<u64>(),
    ) {
        let mut text = format!(
            "policy:\n  link: {{ rate: 2Gbit }}\n  engine: {{ cores: {cores}, cpu: {}, packet_cost: {packet_cost_ns}ns }}\n  tenants:\n",
            if fifo { "fifo" } else { "weighted" }
        );
        for (i, t) in tenants.iter().enumerate() {
            text += &format!("    - {{ name: t{i}, weight: {}, buffer: 200KB }}\n", t.weight);
        }
        text += &format!("duration: 200ms\ninterval: 50ms\nseed: {seed}\ntraffic:\n");
        for (i, t) in tenants.iter().enumerate() {
            let kind = if t.bulk {
                "kind: bulk, flows: 3".to_string()
            } else {
                format!("kind: udp, rate: {}Mbit, size: 500B, flows: 2", t.rate_mbit)
            };
            text += &format!("  - {{ tenant: t{i}, {kind}, cost: {}ns }}\n", t.cost_ns);
        }
        let record = run(&text, "wf2q");
        let engine_on = packet_cost_ns > 0 || tenants.iter().any(|t| t.cost_ns > 0);
        prop_assert_eq!(
            record.checks.iter().any(|c| c.name == "engine-conservation"),
            engine_on
        );
        let summary = summarize(&record);
        if engine_on && record.engine_cpu.iter().any(|c| c.busy_ns > 0) {
            let shares: f64 = summary.tenants.iter().map(|t| t.engine_cpu_share.unwrap()).sum();
            prop_assert!((shares - 1.0).abs() < 1e-9, "{}", shares);
        }
        prop_assert_eq!(summary.tenants.iter().all(|t| t.engine_refused.is_some()), engine_on);
    }
}
