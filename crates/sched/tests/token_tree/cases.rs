// Cases shared by `htb` and `valve`, which run on one class tree: included by
// tests/htb.rs and tests/valve.rs, each with its own `ENFORCER`.

use policy::{AppId, Policy, ideal_allocation, parse_policy};
use proptest::prelude::*;
use sched::testkit::{LinkRun, Source, drive_link};
use sched::{Enforcer, Packet, Refusal};

const LEN_BYTES: u32 = 1500;
const MS: u64 = 1_000_000;
/// Measurements skip the start, where every bucket begins full: a class with
/// tc's 1 ms burst at rate r spends it at link − r, for up to ~10 ms when r = 0.9 link.
const WARMUP_NS: u64 = 20 * MS;
/// Long enough that one packet more or less is well under 0.1% of any share.
const DURATION_NS: u64 = 70 * MS;

/// FlowValve's example (slides, "Complex & Flexible Network Policies"); the
/// controller is capped so that the others get something when it is backlogged.
const FLOWVALVE: &str = "
link: { rate: 10Gbit }
tenants:
  - name: controller
    priority: 0
    max_rate: 1Gbit
  - name: vm1
    weight: 1
    apps:
      - { name: kvs, priority: 0, match: { ports: [5001] } }
      - { name: ml, priority: 1, min_rate: 2Gbit, match: { ports: [5002] } }
  - name: vm2
    weight: 2
";

fn enforcer(policy: &Policy) -> Box<dyn Enforcer> {
    sched::build(ENFORCER, policy).unwrap()
}

fn source(app: AppId) -> Source {
    sized_source(app, LEN_BYTES)
}

fn sized_source(app: AppId, len_bytes: u32) -> Source {
    Source {
        app,
        len_bytes,
        flows: 4,
        depth: 8,
    }
}

fn app(policy: &Policy, tenant: &str, app: &str) -> AppId {
    policy
        .app_by_name(policy.tenant_by_name(tenant).unwrap(), app)
        .unwrap()
}

/// Rate of every app over [WARMUP_NS, end), bit/s.
fn app_rates_bps(policy: &Policy, run: &LinkRun, end_ns: u64) -> Vec<f64> {
    sized_app_rates_bps(policy, run, end_ns, LEN_BYTES)
}

fn sized_app_rates_bps(policy: &Policy, run: &LinkRun, end_ns: u64, len_bytes: u32) -> Vec<f64> {
    let mut bytes = vec![0u64; policy.apps.len()];
    for &(at_ns, app) in &run.departures {
        if at_ns >= WARMUP_NS {
            bytes[app.index()] += u64::from(len_bytes);
        }
    }
    let seconds = (end_ns - WARMUP_NS) as f64 / 1e9;
    bytes.iter().map(|&b| b as f64 * 8.0 / seconds).collect()
}

fn tenant_rates_bps(policy: &Policy, app_bps: &[f64]) -> Vec<f64> {
    policy
        .tenants
        .iter()
        .map(|t| t.apps.iter().map(|a| app_bps[a.index()]).sum())
        .collect()
}

/// Runs `apps` backlogged for `duration_ns`; rates per app and per tenant, and the
/// ideal of both.
fn run_backlogged(policy: &Policy, apps: &[AppId], duration_ns: u64) -> [Vec<f64>; 4] {
    run_backlogged_sized(policy, apps, duration_ns, LEN_BYTES)
}

/// [`run_backlogged`] with packets of `len_bytes`.
fn run_backlogged_sized(
    policy: &Policy,
    apps: &[AppId],
    duration_ns: u64,
    len_bytes: u32,
) -> [Vec<f64>; 4] {
    let mut e = enforcer(policy);
    let sources: Vec<Source> = apps.iter().map(|&a| sized_source(a, len_bytes)).collect();
    let run = drive_link(policy, e.as_mut(), &sources, 0, duration_ns);
    let app_bps = sized_app_rates_bps(policy, &run, duration_ns, len_bytes);
    let tenant_bps = tenant_rates_bps(policy, &app_bps);
    let demands: Vec<Vec<f64>> = (0..policy.apps.len())
        .map(|i| {
            if apps.contains(&AppId(i as u32)) {
                vec![f64::INFINITY]
            } else {
                vec![]
            }
        })
        .collect();
    let ideal = ideal_allocation(policy, &demands);
    [app_bps, tenant_bps, ideal.app_bps, ideal.tenant_bps]
}

/// Mean relative error over the entries the ideal gives something; an entry the
/// ideal gives nothing must get under 0.5% of the link.
fn mean_relative_error(policy: &Policy, got: &[f64], want: &[f64]) -> f64 {
    let link = policy.link.rate_bps as f64;
    let mut sum = 0.0;
    let mut n = 0;
    for (g, w) in got.iter().zip(want) {
        if *w > 0.0 {
            sum += (g - w).abs() / w;
            n += 1;
        } else {
            assert!(*g < 0.005 * link, "got {got:?} want {want:?}");
        }
    }
    sum / f64::from(n.max(1))
}

#[test]
fn flowvalve_example_all_backlogged() {
    let p = parse_policy(FLOWVALVE, "p.yaml").unwrap();
    let apps = [
        app(&p, "controller", "default"),
        app(&p, "vm1", "kvs"),
        app(&p, "vm1", "ml"),
        app(&p, "vm2", "default"),
    ];
    let [app_bps, tenant_bps, ideal_app, ideal_tenant] = run_backlogged(&p, &apps, DURATION_NS);
    let app_error = mean_relative_error(&p, &app_bps, &ideal_app);
    let tenant_error = mean_relative_error(&p, &tenant_bps, &ideal_tenant);
    assert!(app_error < 0.02, "apps {app_bps:?} ideal {ideal_app:?}");
    assert!(
        tenant_error < 0.02,
        "tenants {tenant_bps:?} ideal {ideal_tenant:?}"
    );
    // ML's guarantee.
    assert!(app_bps[apps[2].index()] >= 2e9 * 0.99, "{app_bps:?}");
}

#[test]
fn flowvalve_example_ml_borrows_what_kvs_leaves() {
    let p = parse_policy(FLOWVALVE, "p.yaml").unwrap();
    let ml = app(&p, "vm1", "ml");
    let apps = [
        app(&p, "controller", "default"),
        ml,
        app(&p, "vm2", "default"),
    ];
    let [app_bps, _, ideal_app, _] = run_backlogged(&p, &apps, DURATION_NS);
    // KVS idle: ML has VM1's whole third of what the controller leaves.
    assert!((ideal_app[ml.index()] - 3e9).abs() < 1.0);
    let error = (app_bps[ml.index()] - 3e9).abs() / 3e9;
    assert!(error < 0.02, "{app_bps:?}");
}

#[test]
fn capped_tenant_alone_stays_under_its_cap() {
    let p = parse_policy(
        "link: { rate: 10Gbit }\ntenants:\n  - { name: capped, max_rate: 3Gbit }\n  - { name: idle }\n",
        "p.yaml",
    )
    .unwrap();
    let capped = app(&p, "capped", "default");
    let [app_bps, ..] = run_backlogged(&p, &[capped], DURATION_NS);
    let bps = app_bps[capped.index()];
    assert!(bps <= 3e9 * 1.005, "{bps}");
    assert!(bps >= 3e9 * 0.99, "{bps}");
}

#[test]
fn weights_one_two_three() {
    let p = parse_policy(
        "link: { rate: 12Gbit }\ntenants:\n  - { name: a }\n  - { name: b, weight: 2 }\n  - { name: c, weight: 3 }\n",
        "p.yaml",
    )
    .unwrap();
    let apps: Vec<AppId> = (0..3).map(AppId).collect();
    let [_, tenant_bps, _, ideal_tenant] = run_backlogged(&p, &apps, DURATION_NS);
    for (got, want) in tenant_bps.iter().zip(&ideal_tenant) {
        assert!((got - want).abs() / want < 0.01, "{tenant_bps:?}");
    }
}

/// A borrower whose own tokens turn it green for a packet now and then keeps its
/// place in the borrowing round. It lost it at each such turn, and one that
/// turned green more often than the round came round never borrowed: the
/// weight-3 tenant here got 53.6 Mbit/s (its own rate, nothing borrowed) and the
/// weight-4 one 143.5 under `htb`.
#[test]
fn an_idle_tenants_share_is_borrowed_by_weight() {
    let p = parse_policy(
        "link: { rate: 250Mbit }\ntenants:\n  - { name: a, weight: 3 }\n  - { name: b, weight: 1 }\n  - { name: c, weight: 4 }\n  - { name: idle, weight: 6 }\n",
        "p.yaml",
    )
    .unwrap();
    let apps: Vec<AppId> = (0..3).map(AppId).collect();
    let [_, tenant_bps, _, ideal_tenant] = run_backlogged(&p, &apps, DURATION_NS);
    assert_eq!(&ideal_tenant[..3], [93.75e6, 31.25e6, 125e6]);
    for (got, want) in tenant_bps.iter().zip(&ideal_tenant) {
        assert!(
            (got - want).abs() <= 0.01 * want,
            "got {tenant_bps:?} ideal {ideal_tenant:?}"
        );
    }
}

/// A 64 KiB send (GSO/TSO), the packet bulk TCP hands the qdisc.
const GSO_BYTES: u32 = 65536;

/// Each tenant's rate against the ideal, all backlogged with `len_bytes` packets.
fn assert_tenants_near_ideal(yaml: &str, len_bytes: u32, tolerance: f64) {
    let p = parse_policy(yaml, "p.yaml").unwrap();
    let apps: Vec<AppId> = (0..p.apps.len() as u32).map(AppId).collect();
    let [_, tenant_bps, _, ideal_tenant] = run_backlogged_sized(&p, &apps, DURATION_NS, len_bytes);
    for (got, want) in tenant_bps.iter().zip(&ideal_tenant) {
        assert!(
            (got - want).abs() / want < tolerance,
            "got {tenant_bps:?} ideal {ideal_tenant:?}"
        );
    }
}

/// A class whose bucket holds less than one packet (here 0.25 Gbit/s: htb's burst
/// is tc's 1 ms of it, 31 KB, valve's ΔT = 500 µs, 15.6 KB; + MTU < 64 KiB) pays
/// every packet in full, going
/// into debt, rather than having the part beyond its burst forgiven.
#[test]
fn packets_larger_than_a_burst_are_paid_in_full() {
    assert_tenants_near_ideal(
        "link: { rate: 10Gbit }\ntenants:\n  - { name: a, weight: 39 }\n  - { name: b, weight: 1 }\n",
        GSO_BYTES,
        0.02,
    );
    // The simulator's case: b's bucket (0.75 Gbit/s) is smaller than a packet.
    assert_tenants_near_ideal(
        "link: { rate: 10Gbit }\ntenants:\n  - { name: a, weight: 5 }\n  - { name: b, weight: 1, max_rate: 1Gbit }\n  - { name: c, weight: 2, min_rate: 4Gbit }\n",
        GSO_BYTES,
        0.02,
    );
}

/// Round robin with packets larger than a quantum: a class's DRR debt stays
/// bounded by a packet (it once grew by a packet minus a quantum per packet and
/// overflowed after some 33 000 packets of 64 KiB, ~3 s at 10 Gbit/s).
#[test]
fn long_runs_of_packets_larger_than_a_quantum_keep_their_shares() {
    let p = parse_policy(
        "link: { rate: 10Gbit }\ntenants:\n  - { name: a, weight: 1 }\n  - { name: b, weight: 3 }\n",
        "p.yaml",
    )
    .unwrap();
    let apps: Vec<AppId> = (0..p.apps.len() as u32).map(AppId).collect();
    let [_, tenant_bps, _, ideal_tenant] = run_backlogged_sized(&p, &apps, 4000 * MS, GSO_BYTES);
    for (got, want) in tenant_bps.iter().zip(&ideal_tenant) {
        assert!(
            (got - want).abs() / want < 0.01,
            "got {tenant_bps:?} ideal {ideal_tenant:?}"
        );
    }
}

#[test]
fn split_classes_are_capped_each_and_share_their_app() {
    let p = parse_policy(
        "
link: { rate: 10Gbit }
tenants:
  - name: t
    apps:
      - name: batch
        match: { ports: [5001] }
        max_rate: 4Gbit
        split: { by: destination, max_rate: 50Mbit }
  - { name: u }
",
        "p.yaml",
    )
    .unwrap();
    let batch = app(&p, "t", "batch");
    let u = app(&p, "u", "default");
    for (flows, want_batch) in [(10u32, 0.5e9), (1000, 4e9)] {
        let mut e = enforcer(&p);
        let sources = [
            Source {
                app: batch,
                len_bytes: LEN_BYTES,
                flows,
                depth: 2 * flows,
            },
            source(u),
        ];
        let run = drive_link(&p, e.as_mut(), &sources, 0, DURATION_NS);
        let app_bps = app_rates_bps(&p, &run, DURATION_NS);
        let error = (app_bps[batch.index()] - want_batch).abs() / want_batch;
        assert!(error < 0.02, "{flows} flows: {app_bps:?}");
        let error = (app_bps[u.index()] - (10e9 - want_batch)).abs() / (10e9 - want_batch);
        assert!(error < 0.02, "{flows} flows: {app_bps:?}");
    }
}

#[test]
fn the_whole_policy_is_expressed() {
    let p = parse_policy(FLOWVALVE, "p.yaml").unwrap();
    let approximation = sched::approximation(ENFORCER, &p).unwrap();
    assert!(approximation.ignored.is_empty(), "{approximation:?}");
    match approximation.share_error_max {
        Some(error) => assert!(error <= 0.02, "{approximation:?}"),
        // htb: the apps here have two priorities, so its shares follow borrowing and
        // it says so instead of stating a bound, naming that reason alone.
        None => assert!(
            approximation.approximate.iter().any(|l| l
                .starts_with("shares when every app is backlogged: apps of a better priority")
                && !l.contains("split")),
            "{approximation:?}"
        ),
    }
}

fn packet(p: &Policy, app: AppId, handle: u64) -> Packet {
    Packet {
        len_bytes: LEN_BYTES,
        tenant: p.app(app).tenant,
        app,
        flow: handle as u32 % 7,
        destination: handle as u32 % 5,
        core: 0,
        arrival_ns: 0,
        handle,
    }
}

#[test]
fn no_packet_lost_or_duplicated() {
    let p = parse_policy(FLOWVALVE, "p.yaml").unwrap();
    let mut e = enforcer(&p);
    let mut seen = vec![false; 20_000];
    let mut now_ns = 0;
    let mut handle = 0;
    let mut sent = 0;
    while sent < seen.len() {
        // Bursts of arrivals of every app, unevenly, then some departures.
        for _ in 0..3 {
            if (handle as usize) < seen.len() {
                let app = AppId((handle * 7 % 5) as u32);
                e.enqueue(now_ns, packet(&p, app, handle)).unwrap();
                handle += 1;
            }
        }
        for _ in 0..2 {
            match e.dequeue(now_ns) {
                Some(frame) => {
                    assert!(frame.last && frame.bytes == LEN_BYTES);
                    let h = frame.packet.handle as usize;
                    assert!(!seen[h], "packet {h} twice");
                    seen[h] = true;
                    sent += 1;
                    now_ns += 1200;
                }
                None => now_ns = e.next_ready_ns(now_ns).unwrap_or(now_ns + 1200),
            }
        }
    }
    assert_eq!(e.backlog_packets(), 0);
    assert!(seen.iter().all(|&s| s));
    let admitted: u64 = e.counters().iter().map(|c| c.admitted_packets).sum();
    assert_eq!(admitted, seen.len() as u64);
}

#[test]
fn refusals_are_counted_for_the_tenant_over_its_buffer() {
    let p = parse_policy(
        "link: { rate: 1Gbit }\ntenants:\n  - { name: flood, buffer: 15KB }\n  - { name: calm }\n",
        "p.yaml",
    )
    .unwrap();
    let mut e = enforcer(&p);
    for h in 0..10 {
        e.enqueue(0, packet(&p, AppId(0), h)).unwrap();
    }
    let (back, reason) = e.enqueue(0, packet(&p, AppId(0), 10)).unwrap_err();
    assert_eq!((back.handle, reason), (10, Refusal::TenantBuffer));
    for h in 11..40 {
        e.enqueue(0, packet(&p, AppId(1), h)).unwrap();
    }
    let counters = e.counters();
    assert_eq!(counters[0].refused_packets, 1);
    assert_eq!(counters[0].admitted_packets, 10);
    assert_eq!(counters[1].refused_packets, 0);
    assert_eq!(counters[1].admitted_packets, 29);
    // Space comes back as packets leave.
    let frame = e.dequeue(0).unwrap();
    let freed = frame.packet.tenant.index() == 0;
    assert_eq!(e.enqueue(0, packet(&p, AppId(0), 99)).is_ok(), freed);
}

#[test]
fn a_capped_class_says_when_it_may_send_again() {
    let p = parse_policy(
        "link: { rate: 10Gbit }\ntenants:\n  - { name: slow, max_rate: 100Mbit }\n",
        "p.yaml",
    )
    .unwrap();
    let mut e = enforcer(&p);
    for h in 0..200 {
        e.enqueue(0, packet(&p, AppId(0), h)).unwrap();
    }
    let mut now_ns = 0;
    while e.dequeue(now_ns).is_some() {}
    let at_ns = e.next_ready_ns(now_ns).expect("packets wait for tokens");
    assert!(at_ns > now_ns);
    // Not before: a packet costs 120 µs at 100 Mbit/s.
    assert!(e.dequeue(at_ns - 1).is_none());
    now_ns = at_ns;
    assert!(e.dequeue(now_ns).is_some());
}

/// `p` with the apps whose bit is set in `idle` idle (one app backlogged at
/// least) and the rest backlogged: each tenant within 3% of its ideal, or of 1%
/// of the link for tiny shares.
fn idle_tenants_leave_within_3_percent(p: &Policy, idle: u8) -> Result<(), TestCaseError> {
    let mut apps: Vec<AppId> = (0..p.apps.len() as u32)
        .filter(|&a| idle & (1 << a) == 0)
        .map(AppId)
        .collect();
    if apps.is_empty() {
        apps.push(AppId(0));
    }
    let [_, tenant_bps, _, ideal_tenant] = run_backlogged(p, &apps, DURATION_NS);
    let link = p.link.rate_bps as f64;
    for (got, want) in tenant_bps.iter().zip(&ideal_tenant) {
        let error = (got - want).abs() / want.max(0.01 * link);
        prop_assert!(error < 0.03, "got {:?} ideal {:?}", tenant_bps, ideal_tenant);
    }
    Ok(())
}

/// A generated policy: 2 to 4 tenants with one app each, random weights,
/// priorities, caps and guarantees, all backlogged.
fn arb_policy() -> impl Strategy<Value = Policy> {
    let tenant = (
        1u32..5,
        0u8..3,
        proptest::option::of(1u64..10),
        any::<bool>(),
    );
    proptest::collection::vec(tenant, 2..5).prop_map(|tenants| {
        let mut yaml = String::from("link: {rate: 10Gbit}\ntenants:\n");
        for (t, (weight, priority, max, guaranteed)) in tenants.iter().enumerate() {
            yaml += &format!("- {{name: t{t}, weight: {weight}, priority: {priority}");
            if let Some(max) = max {
                yaml += &format!(", max_rate: {max}Gbit");
            }
            // At most 4 × 1 Gbit of guarantees: always within the link.
            if *guaranteed {
                yaml += ", min_rate: 1Gbit";
            }
            yaml += "}\n";
        }
        parse_policy(&yaml, "gen.yaml").unwrap()
    })
}
