//! The multiqueue drivers on a saturated link: who gets what, exactly.

use policy::{AppId, parse_policy};
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
