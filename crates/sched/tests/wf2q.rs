//! `wf2q` (SENIC's rate-limited WF2Q+) on a saturated link: exact schedules, limits,
//! fallback to limit-proportional shares, and the invariants every enforcer keeps.

use policy::{AppId, Policy, TenantId, parse_policy};
use sched::testkit::{Source, drive_link};
use sched::wf2q::{Config, Wf2q};
use sched::{Enforcer, Packet};

fn policy(yaml: &str) -> Policy {
    parse_policy(yaml, "p.yaml").unwrap()
}

fn backlogged(app: u32) -> Source {
    Source {
        app: AppId(app),
        len_bytes: 1500,
        flows: 1,
        depth: 16,
    }
}

fn rate_bps(bytes: u64, duration_ns: u64) -> f64 {
    bytes as f64 * 8e9 / duration_ns as f64
}

const FIG4_TENANTS: &str = "
link: { rate: 10Gbit }
tenants:
  - { name: c1, max_rate: 4Gbit }
  - { name: c2, max_rate: 2Gbit }
";

const FIG4_APPS: &str = "
link: { rate: 10Gbit }
tenants:
  - name: t
    apps:
      - { name: c1, max_rate: 4Gbit }
      - { name: c2, max_rate: 2Gbit }
";

/// SENIC Fig. 4: w1 = 0.4, w2 = 0.2, 1500 B packets. Per 7500 byte-times (6 µs at
/// 10 Gbit/s): C1 at 0, C2 at 1500, C1 at 3750 byte-times, the link idle 750 + 2250.
fn assert_fig4_schedule(yaml: &str, c1: AppId, c2: AppId) {
    let p = policy(yaml);
    let mut wf2q = sched::build("wf2q", &p).unwrap();
    let run = drive_link(
        &p,
        wf2q.as_mut(),
        &[backlogged(c1.0), backlogged(c2.0)],
        0,
        60_000,
    );
    let expected: Vec<(u64, AppId)> = (0..10u64)
        .flat_map(|i| [(i * 6000, c1), (i * 6000 + 1200, c2), (i * 6000 + 3000, c1)])
        .collect();
    assert_eq!(run.departures, expected);
    let busy_ns: u64 = run.departures.len() as u64 * 1200;
    assert_eq!(busy_ns * 10, 60_000 * 6, "link idle 40% of the time");
}

#[test]
fn senic_fig4_schedule_with_tenant_limits() {
    assert_fig4_schedule(FIG4_TENANTS, AppId(0), AppId(1));
}

#[test]
fn senic_fig4_schedule_with_app_limits_in_one_tenant() {
    assert_fig4_schedule(FIG4_APPS, AppId(0), AppId(1));
}

#[test]
fn a_class_alone_gets_its_limit_evenly_paced() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - name: t
    apps:
      - { name: limited, max_rate: 3.3Gbit }
",
    );
    let mut wf2q = sched::build("wf2q", &p).unwrap();
    let duration_ns = 20_000_000;
    let run = drive_link(&p, wf2q.as_mut(), &[backlogged(0)], 0, duration_ns);
    let got = rate_bps(run.app_bytes[0], duration_ns);
    assert!((got / 3.3e9 - 1.0).abs() < 1e-3, "{got}");
    let gaps: Vec<f64> = run
        .departures
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) as f64)
        .collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
    let mtu_time_ns = 1200.0;
    assert!(var.sqrt() < mtu_time_ns, "stddev {} ns", var.sqrt());
    assert!((mean - 1500.0 * 8.0 / 3.3).abs() < 1.0, "mean gap {mean}");
}

#[test]
fn oversubscribed_limits_share_in_proportion_to_the_limits() {
    for yaml in [
        "
link: { rate: 10Gbit }
tenants:
  - { name: a, max_rate: 6Gbit }
  - { name: b, max_rate: 4Gbit }
  - { name: c, max_rate: 2Gbit }
",
        "
link: { rate: 10Gbit }
tenants:
  - name: t
    apps:
      - { name: a, max_rate: 6Gbit }
      - { name: b, max_rate: 4Gbit }
      - { name: c, max_rate: 2Gbit }
",
    ] {
        let p = policy(yaml);
        let mut wf2q = sched::build("wf2q", &p).unwrap();
        let duration_ns = 20_000_000;
        let sources = [backlogged(0), backlogged(1), backlogged(2)];
        let run = drive_link(&p, wf2q.as_mut(), &sources, 0, duration_ns);
        let total: u64 = run.app_bytes.iter().sum();
        for (app, limit) in [(0, 6.0), (1, 4.0), (2, 2.0)] {
            let share = run.app_bytes[app] as f64 / total as f64;
            assert!(
                (share / (limit / 12.0) - 1.0).abs() < 0.01,
                "{yaml}: app {app} share {share}"
            );
        }
        let link = rate_bps(total, duration_ns);
        assert!(link > 0.999e10, "oversubscribed link stays busy: {link}");
    }
}

#[test]
fn unlimited_weights_share_the_whole_link() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - { name: a, weight: 1 }
  - { name: b, weight: 3 }
",
    );
    let mut wf2q = sched::build("wf2q", &p).unwrap();
    let duration_ns = 10_000_000;
    let run = drive_link(
        &p,
        wf2q.as_mut(),
        &[backlogged(0), backlogged(1)],
        0,
        duration_ns,
    );
    let total: u64 = run.app_bytes.iter().sum();
    assert!((run.app_bytes[0] as f64 / total as f64 - 0.25).abs() < 1e-3);
    assert!(rate_bps(total, duration_ns) > 0.999e10);
    // Alone, the weight-1 tenant takes the whole link (work conservation).
    let mut wf2q = sched::build("wf2q", &p).unwrap();
    let run = drive_link(&p, wf2q.as_mut(), &[backlogged(0)], 0, duration_ns);
    assert!(rate_bps(run.app_bytes[0], duration_ns) > 0.999e10);
}

#[test]
fn an_unlimited_tenant_takes_what_a_limited_one_leaves() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - { name: capped, max_rate: 3Gbit }
  - { name: free }
  - { name: idle }
",
    );
    let mut wf2q = sched::build("wf2q", &p).unwrap();
    let duration_ns = 10_000_000;
    let run = drive_link(
        &p,
        wf2q.as_mut(),
        &[backlogged(0), backlogged(1)],
        0,
        duration_ns,
    );
    let capped = rate_bps(run.app_bytes[0], duration_ns);
    let free = rate_bps(run.app_bytes[1], duration_ns);
    assert!((capped / 3e9 - 1.0).abs() < 1e-3, "{capped}");
    assert!((free / 7e9 - 1.0).abs() < 2e-3, "{free}");
}

#[test]
fn split_classes_each_get_their_limit_under_the_app_cap() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - name: t
    apps:
      - name: bulk
        max_rate: 2Gbit
        split: { by: destination, max_rate: 300Mbit }
",
    );
    let duration_ns = 200_000_000;
    // Every class that becomes backlogged may send its first packet at once (S = V),
    // so the rate is measured after that first round.
    let warmup_ns = 1_000_000;
    // 4 destinations under the cap: 4 x 300 Mbit/s; 10 over it: the 2 Gbit/s cap.
    for (flows, expected_bps) in [(4u32, 1.2e9), (10, 2e9)] {
        let mut wf2q = sched::build("wf2q", &p).unwrap();
        // One source per destination, so no class ever runs empty.
        let sources: Vec<Source> = (0..flows).map(|_| backlogged(0)).collect();
        let run = drive_link(&p, wf2q.as_mut(), &sources, 0, duration_ns);
        let steady = run.departures.iter().filter(|d| d.0 >= warmup_ns).count() as u64;
        let got = rate_bps(steady * 1500, duration_ns - warmup_ns);
        assert!((got / expected_bps - 1.0).abs() < 1e-3, "{flows}: {got}");
    }
}

#[test]
fn tenant_buffer_refuses_its_own_packets_only() {
    let p = policy(
        "
link: { rate: 1Gbit }
tenants:
  - { name: small, buffer: 3000B, max_rate: 100Mbit }
  - { name: other }
",
    );
    let mut wf2q = sched::build("wf2q", &p).unwrap();
    let packet = |tenant: u16, handle: u64| Packet {
        len_bytes: 1500,
        tenant: TenantId(tenant),
        app: p.default_app(TenantId(tenant)),
        flow: 0,
        destination: 0,
        core: 0,
        arrival_ns: 0,
        handle,
    };
    assert!(wf2q.enqueue(0, packet(0, 1)).is_ok());
    assert!(wf2q.enqueue(0, packet(0, 2)).is_ok());
    let (back, reason) = wf2q.enqueue(0, packet(0, 3)).unwrap_err();
    assert_eq!(back.handle, 3);
    assert_eq!(reason, sched::Refusal::TenantBuffer);
    assert!(wf2q.enqueue(0, packet(1, 4)).is_ok());
    assert_eq!(wf2q.counters()[0].refused_packets, 1);
    assert_eq!(wf2q.counters()[1].refused_packets, 0);
    assert_eq!(wf2q.backlog_packets(), 3);
}

#[test]
fn a_full_descriptor_pool_refuses_with_queue_full() {
    let p = policy("link: { rate: 1Gbit }\ntenants:\n  - { name: a }\n");
    let mut wf2q = Wf2q::new(
        &p,
        Config {
            classes_max: 16,
            packets_max: 2,
        },
    )
    .unwrap();
    let packet = Packet {
        len_bytes: 100,
        tenant: TenantId(0),
        app: AppId(0),
        flow: 0,
        destination: 0,
        core: 0,
        arrival_ns: 0,
        handle: 0,
    };
    assert!(wf2q.enqueue(0, packet).is_ok());
    assert!(wf2q.enqueue(0, packet).is_ok());
    assert_eq!(
        wf2q.enqueue(0, packet).unwrap_err().1,
        sched::Refusal::QueueFull
    );
    assert!(wf2q.dequeue(0).is_some());
    assert!(wf2q.enqueue(0, packet).is_ok());
}

mod invariants {
    use super::*;
    use proptest::prelude::*;

    /// (weight, max_rate in Mbit/s) of an app.
    type AppSpec = (u32, Option<u32>);
    /// (weight, apps) of a tenant.
    type TenantSpec = (u32, Vec<AppSpec>);

    /// A policy of 1-3 tenants with 1-3 apps each; limits only when `limited`.
    fn policy_yaml(tenants: &[TenantSpec], tenant_cap: Option<u32>) -> String {
        let mut yaml = String::from("link: { rate: 10Gbit }\ntenants:\n");
        for (t, (weight, apps)) in tenants.iter().enumerate() {
            yaml += &format!("  - name: t{t}\n    weight: {weight}\n");
            if let (0, Some(cap)) = (t, tenant_cap) {
                yaml += &format!("    max_rate: {cap}Mbit\n");
            }
            yaml += "    apps:\n";
            for (a, (weight, cap)) in apps.iter().enumerate() {
                yaml += &format!("      - name: a{a}\n        weight: {weight}\n");
                if let Some(cap) = cap {
                    yaml += &format!("        max_rate: {cap}Mbit\n");
                }
            }
        }
        yaml
    }

    fn tenants_strategy(limited: bool) -> impl Strategy<Value = Vec<TenantSpec>> {
        let cap = if limited {
            proptest::option::of(100u32..8000).boxed()
        } else {
            Just(None).boxed()
        };
        proptest::collection::vec(
            (1u32..5, proptest::collection::vec((1u32..5, cap), 1..4)),
            1..4,
        )
    }

    /// (time step ns, app index, length, how many dequeues)
    fn ops() -> impl Strategy<Value = Vec<(u64, usize, u32, u8)>> {
        proptest::collection::vec((0u64..3000, 0usize..64, 64u32..9000, 0u8..3), 1..300)
    }

    fn run(
        p: &Policy,
        ops: &[(u64, usize, u32, u8)],
        work_conserving: bool,
    ) -> Result<(), TestCaseError> {
        let mut wf2q = sched::build("wf2q", p).unwrap();
        let mut now = 0u64;
        let mut held = std::collections::BTreeSet::new();
        for (handle, &(step, app, len, dequeues)) in ops.iter().enumerate() {
            now += step;
            let app = AppId((app % p.apps.len()) as u32);
            let packet = Packet {
                len_bytes: len,
                tenant: p.app(app).tenant,
                app,
                flow: handle as u32 % 7,
                destination: handle as u32 % 5,
                core: 0,
                arrival_ns: now,
                handle: handle as u64,
            };
            if wf2q.enqueue(now, packet).is_ok() {
                held.insert(handle as u64);
            }
            for _ in 0..dequeues {
                match wf2q.dequeue(now) {
                    Some(frame) => {
                        prop_assert!(frame.last);
                        prop_assert!(held.remove(&frame.packet.handle), "unknown or duplicate");
                    }
                    None => prop_assert!(!work_conserving || held.is_empty(), "idle with backlog"),
                }
            }
            prop_assert_eq!(wf2q.backlog_packets(), held.len());
        }
        // Drain: every admitted packet leaves, asking again when the enforcer says.
        let mut rounds = 0;
        while !held.is_empty() {
            match wf2q.dequeue(now) {
                Some(frame) => {
                    prop_assert!(held.remove(&frame.packet.handle), "unknown or duplicate");
                }
                None => {
                    prop_assert!(!work_conserving, "idle with backlog");
                    let at = wf2q.next_ready_ns(now);
                    prop_assert!(at.is_some(), "packets held but nothing to wait for");
                    now = at.unwrap().max(now + 1);
                }
            }
            rounds += 1;
            prop_assert!(rounds < 100_000, "does not drain");
        }
        prop_assert_eq!(wf2q.dequeue(now), None);
        prop_assert_eq!(wf2q.next_ready_ns(now), None);
        Ok(())
    }

    proptest! {
        #[test]
        fn limited_policies_lose_nothing_and_drain(
            tenants in tenants_strategy(true),
            tenant_cap in proptest::option::of(100u32..8000),
            ops in ops(),
        ) {
            let p = policy(&policy_yaml(&tenants, tenant_cap));
            run(&p, &ops, false)?;
        }

        #[test]
        fn unlimited_policies_are_work_conserving(
            tenants in tenants_strategy(false),
            ops in ops(),
        ) {
            let p = policy(&policy_yaml(&tenants, None));
            run(&p, &ops, true)?;
        }
    }
}

/// Which class gets the next packet in [`pairs_per_second`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    /// Every class backlogged (two packets each); the class whose packet just left
    /// gets the next one, as a backlogged sender refilling its window would.
    Refill,
    /// About 1 % of the classes backlogged at a time: each packet goes to a class
    /// drawn at random among all of them, so most enqueues find the class idle.
    Sparse,
}

/// A small deterministic generator (xorshift64*), so the benchmark needs no crate.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Enqueue+dequeue pairs per second with `classes` split classes on a 100 Gbit/s link
/// whose backlogged split limits oversubscribe it 10 times over (so V runs slowed and
/// every dequeue chooses among all backlogged classes).
fn pairs_per_second(classes: u32, pattern: Pattern) -> f64 {
    let backlogged = match pattern {
        Pattern::Refill => classes,
        Pattern::Sparse => (classes / 100).max(1),
    };
    let split_mbit = 10 * 100_000 / backlogged;
    let p = policy(&format!(
        "
link: {{ rate: 100Gbit }}
tenants:
  - name: t
    apps:
      - name: many
        split: {{ by: destination, max_rate: {split_mbit}Mbit }}
"
    ));
    let mut wf2q = Wf2q::new(
        &p,
        Config {
            classes_max: classes as usize + p.apps.len(),
            packets_max: 2 * classes as usize,
        },
    )
    .unwrap();
    let packet = |destination: u32, now: u64| Packet {
        len_bytes: 1500,
        tenant: TenantId(0),
        app: AppId(0),
        flow: destination,
        destination,
        core: 0,
        arrival_ns: now,
        handle: u64::from(destination),
    };
    let mut random = 0x9e37_79b9_7f4a_7c15u64;
    // Destinations are scattered over u32 (as addresses are), not dense.
    let destination = |class: u32| class.wrapping_mul(0x9e37_79b9);
    match pattern {
        Pattern::Refill => {
            for d in 0..classes {
                wf2q.enqueue(0, packet(destination(d), 0)).unwrap();
                wf2q.enqueue(0, packet(destination(d), 0)).unwrap();
            }
        }
        Pattern::Sparse => {
            // Create every class, drain, then keep `backlogged` packets in flight.
            for d in 0..classes {
                wf2q.enqueue(0, packet(destination(d), 0)).unwrap();
            }
            let mut now = 0;
            while wf2q.backlog_packets() > 0 {
                if wf2q.dequeue(now).is_none() {
                    now = wf2q.next_ready_ns(now).unwrap();
                }
            }
            for _ in 0..backlogged {
                let d = (next_random(&mut random) % u64::from(classes)) as u32;
                wf2q.enqueue(now, packet(destination(d), now)).unwrap();
            }
        }
    }
    let pairs = 10_000_000u64;
    let mut now = 1u64 << 20;
    let started = on_cpu_ns();
    for _ in 0..pairs {
        let frame = loop {
            if let Some(frame) = wf2q.dequeue(now) {
                break frame;
            }
            now = wf2q.next_ready_ns(now).unwrap();
        };
        let next = match pattern {
            Pattern::Refill => frame.packet.destination,
            Pattern::Sparse => destination((next_random(&mut random) % u64::from(classes)) as u32),
        };
        wf2q.enqueue(now, packet(next, now)).unwrap();
        now += 120;
    }
    pairs as f64 * 1e9 / (on_cpu_ns() - started) as f64
}

/// Time this thread has spent on a CPU (Linux's schedstat), so that other work
/// sharing the machine does not count against the enforcer; wall time elsewhere.
fn on_cpu_ns() -> u64 {
    let wall = || {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    };
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(wall)
}

/// `WF2Q_BENCH_CLASSES` (comma-separated) and `WF2Q_BENCH_PATTERN` (`refill`,
/// `sparse`) narrow the run, e.g. for a profiler.
#[test]
#[ignore = "throughput measurement; run in release with --ignored --nocapture"]
fn throughput_at_scale() {
    let classes: Vec<u32> = std::env::var("WF2Q_BENCH_CLASSES").map_or_else(
        |_| vec![1_000, 10_000, 100_000, 1_000_000],
        |list| list.split(',').map(|n| n.trim().parse().unwrap()).collect(),
    );
    let patterns: Vec<Pattern> = match std::env::var("WF2Q_BENCH_PATTERN").as_deref() {
        Ok("refill") => vec![Pattern::Refill],
        Ok("sparse") => vec![Pattern::Sparse],
        _ => vec![Pattern::Refill, Pattern::Sparse],
    };
    for pattern in patterns {
        for &n in &classes {
            let rate = pairs_per_second(n, pattern);
            println!(
                "wf2q: {pattern:?}: {n} classes: {:.2} M pairs/s",
                rate / 1e6
            );
        }
    }
}
