//! The multiqueue drivers on a saturated link: who gets what, exactly.

use policy::{AppId, parse_policy};
use sched::Refusal;
use sched::testkit::{Source, drive_link};

const TWO_TENANTS_1_2: &str = "
link: { rate: 10Gbit, queues: 6 }
tenants:
  - name: a
    weight: 1
    cores: [0, 1, 2]
  - name: b
    weight: 2
    cores: [3, 4, 5]
";

fn share(bytes: &[u64], app: usize) -> f64 {
    bytes[app] as f64 / bytes.iter().sum::<u64>() as f64
}

#[test]
fn tonic_gives_weighted_shares_whatever_the_flow_counts() {
    let policy = parse_policy(TWO_TENANTS_1_2, "p.yaml").unwrap();
    let mut tonic = sched::build("tonic", &policy).unwrap();
    let sources = [
        Source {
            app: AppId(0),
            len_bytes: 1500,
            flows: 64,
            depth: 64,
        },
        Source {
            app: AppId(1),
            len_bytes: 1500,
            flows: 1,
            depth: 8,
        },
    ];
    let run = drive_link(&policy, tonic.as_mut(), &sources, 0, 100_000_000);
    // Pools of 1 and 2 queues: exactly one third and two thirds, to the frame.
    assert!(
        (share(&run.app_bytes, 0) - 1.0 / 3.0).abs() < 1e-3,
        "{:?}",
        run.app_bytes
    );
}

#[test]
fn fifo_gives_shares_by_offered_backlog() {
    let policy = parse_policy(TWO_TENANTS_1_2, "p.yaml").unwrap();
    let mut fifo = sched::build("fifo", &policy).unwrap();
    let sources = [
        Source {
            app: AppId(0),
            len_bytes: 1500,
            flows: 1,
            depth: 30,
        },
        Source {
            app: AppId(1),
            len_bytes: 1500,
            flows: 1,
            depth: 10,
        },
    ];
    let run = drive_link(&policy, fifo.as_mut(), &sources, 0, 100_000_000);
    assert!(
        (share(&run.app_bytes, 0) - 0.75).abs() < 1e-3,
        "{:?}",
        run.app_bytes
    );
}

#[test]
fn tenant_buffer_refuses_only_the_flooding_tenant() {
    let policy = parse_policy(
        "
link: { rate: 1Gbit, queues: 4 }
tenants:
  - name: flood
    buffer: 15KB
  - name: calm
",
        "p.yaml",
    )
    .unwrap();
    let mut tonic = sched::build("tonic", &policy).unwrap();
    let sources = [
        Source {
            app: AppId(0),
            len_bytes: 1500,
            flows: 4,
            depth: 1000,
        },
        Source {
            app: AppId(1),
            len_bytes: 1500,
            flows: 1,
            depth: 4,
        },
    ];
    let run = drive_link(&policy, tonic.as_mut(), &sources, 0, 10_000_000);
    let counters = tonic.counters();
    assert!(counters[0].refused_packets > 0);
    assert_eq!(counters[1].refused_packets, 0);
    assert!(
        (share(&run.app_bytes, 1) - 0.5).abs() < 0.01,
        "{:?}",
        run.app_bytes
    );
}

#[test]
fn a_full_qdisc_refuses_at_its_tail_and_counts_against_the_sender() {
    let policy = parse_policy(
        "
link: { rate: 1Gbit, queues: 1 }
tenants:
  - name: a
",
        "p.yaml",
    )
    .unwrap();
    let capacity = sched::Capacity {
        qdisc_packets: Some(2),
        ..sched::Capacity::default()
    };
    let mut fifo = sched::build_with("fifo", &policy, capacity).unwrap();
    // A 1500 B packet of tenant 0's first app.
    let packet = |handle: u64| sched::bench::packet_of(0, handle);
    // BQL lets five 1500 B packets onto a 1 Gbit/s ring (6553 B); two more wait in
    // the qdisc, and the eighth finds it full.
    for handle in 0..7 {
        fifo.enqueue(0, packet(handle)).unwrap();
    }
    let (refused, reason) = fifo.enqueue(0, packet(7)).unwrap_err();
    assert_eq!((refused.handle, reason), (7, Refusal::QueueFull));
    assert_eq!(fifo.counters()[0].refused_packets, 1);
    assert_eq!(fifo.counters()[0].admitted_packets, 7);
    // A packet leaving the ring pulls one from the qdisc, which has room again.
    assert_eq!(fifo.dequeue(0).map(|f| f.packet.handle), Some(0));
    fifo.enqueue(0, packet(8)).unwrap();
    assert_eq!(fifo.backlog_packets(), 7);
}

/// `check` names what a queue-per-pool NIC ignores of each app, each as it is set.
#[test]
fn check_names_each_app_limit_it_ignores_as_set() {
    let policy = parse_policy(
        "link: { rate: 1Gbit }
tenants:
  - name: web
    min_rate: 100Mbit
    apps:
      - { name: api, max_rate: 200Mbit, match: { ports: [443] } }
      - { name: db, min_rate: 50Mbit, match: { ports: [5432] } }
",
        "p.yaml",
    )
    .unwrap();
    let ignored = sched::approximation("tonic", &policy).unwrap().ignored;
    for line in [
        "web: min_rate 100Mbit (no guarantees)",
        "web/api: max_rate 200Mbit (no shaping)",
        "web/db: min_rate 50Mbit (no guarantees)",
    ] {
        assert!(ignored.iter().any(|l| l == line), "{line}: {ignored:?}");
    }
    assert!(
        !ignored
            .iter()
            .any(|l| l.contains("api: min_rate") || l.contains("db: max_rate")),
        "{ignored:?}"
    );
}
