//! `wf2q` (SENIC's rate-limited WF2Q+) on a saturated link: exact schedules, limits,
//! weighted shares under caps, work conservation, priorities, and the invariants
//! every enforcer keeps.

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
      - { name: c1, max_rate: 4Gbit, match: { ports: [5001] } }
      - { name: c2, max_rate: 2Gbit, match: { ports: [5002] } }
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
      - { name: limited, max_rate: 3.3Gbit, match: { ports: [5001] } }
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

/// Caps that add up to more than the link: each tenant (or app) gets its weighted
/// share up to its cap, as the ideal water-fills, not SENIC's shares in the ratio
/// of the caps (issue 25, defect 4). Weights 2, 1, 1 and caps 6, 4, 2 Gbit/s on
/// 10: c stops at 2, a and b share 8 as 2:1.
#[test]
fn caps_that_oversubscribe_the_link_share_it_by_weight_up_to_each_cap() {
    for yaml in [
        "
link: { rate: 10Gbit }
tenants:
  - { name: a, weight: 2, max_rate: 6Gbit }
  - { name: b, max_rate: 4Gbit }
  - { name: c, max_rate: 2Gbit }
",
        "
link: { rate: 10Gbit }
tenants:
  - name: t
    apps:
      - { name: a, weight: 2, max_rate: 6Gbit, match: { ports: [5001] } }
      - { name: b, max_rate: 4Gbit, match: { ports: [5002] } }
      - { name: c, max_rate: 2Gbit, match: { ports: [5003] } }
",
    ] {
        let p = policy(yaml);
        let mut wf2q = sched::build("wf2q", &p).unwrap();
        let duration_ns = 20_000_000;
        let sources = [backlogged(0), backlogged(1), backlogged(2)];
        let run = drive_link(&p, wf2q.as_mut(), &sources, 0, duration_ns);
        for (app, ideal) in [(0, 16e9 / 3.0), (1, 8e9 / 3.0), (2, 2e9)] {
            let got = rate_bps(run.app_bytes[app], duration_ns);
            assert!(
                (got / ideal - 1.0).abs() < 0.01,
                "{yaml}: app {app} {got} against {ideal}"
            );
        }
        let link = rate_bps(run.app_bytes.iter().sum(), duration_ns);
        assert!(link > 0.999e10, "oversubscribed link stays busy: {link}");
    }
}

/// Issue 25, defect 4: a tenant capped at 500 Mbit/s beside four uncapped ones of
/// the same weight got 385 of 1000 Mbit/s, its cap counted as its share.
#[test]
fn a_tenant_capped_above_its_share_gets_its_weighted_share() {
    let p = policy(
        "
link: { rate: 1Gbit }
tenants:
  - { name: capped, max_rate: 500Mbit }
  - { name: a }
  - { name: b }
  - { name: c }
  - { name: d }
",
    );
    let mut wf2q = sched::build("wf2q", &p).unwrap();
    let duration_ns = 50_000_000;
    let sources: Vec<Source> = (0..5).map(backlogged).collect();
    let run = drive_link(&p, wf2q.as_mut(), &sources, 0, duration_ns);
    for app in 0..5 {
        let got = rate_bps(run.app_bytes[app], duration_ns);
        assert!((got / 2e8 - 1.0).abs() < 0.005, "tenant {app}: {got}");
    }
}

/// Issue 25, defect 5: a capped tenant that holds packets of an app sending below
/// its share now and then must not idle the link while another tenant is
/// backlogged. Here x (capped at 8 Gbit/s) has a packet every 24 µs (500 Mbit/s of
/// 1500 B) beside its 1 Gbit/s-capped app, and y takes all the rest.
#[test]
fn the_link_serves_a_backlogged_tenant_while_a_capped_one_waits() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - name: x
    max_rate: 8Gbit
    apps:
      - { name: capped, max_rate: 1Gbit, match: { ports: [5001] } }
      - { name: rest }
  - { name: y }
",
    );
    let mut wf2q = sched::build("wf2q", &p).unwrap();
    let packet = |app: u32, now: u64, handle: u64| Packet {
        len_bytes: 1500,
        tenant: p.app(AppId(app)).tenant,
        app: AppId(app),
        flow: app,
        destination: app,
        core: 0,
        arrival_ns: now,
        handle,
    };
    let duration_ns = 20_000_000;
    let gap_ns = 24_000;
    let mut bytes = [0u64; 3];
    let mut queued = [0u32; 3];
    let mut next_rest_ns = 0;
    let mut now = 0;
    while now < duration_ns {
        for app in [0, 2] {
            while queued[app as usize] < 16 {
                assert!(wf2q.enqueue(now, packet(app, now, u64::from(app))).is_ok());
                queued[app as usize] += 1;
            }
        }
        while next_rest_ns <= now {
            assert!(wf2q.enqueue(now, packet(1, next_rest_ns, 1)).is_ok());
            queued[1] += 1;
            next_rest_ns += gap_ns;
        }
        let frame = wf2q.dequeue(now).expect("y is backlogged");
        bytes[frame.packet.handle as usize] += u64::from(frame.bytes);
        queued[frame.packet.handle as usize] -= 1;
        now += 1200;
    }
    let capped = rate_bps(bytes[0], duration_ns);
    let rest = rate_bps(bytes[1], duration_ns);
    let y = rate_bps(bytes[2], duration_ns);
    assert!((capped / 1e9 - 1.0).abs() < 0.01, "capped {capped}");
    assert!((rest / 5e8 - 1.0).abs() < 0.01, "rest {rest}");
    assert!((y / 8.5e9 - 1.0).abs() < 0.01, "y {y}");
}

/// Issue 25, defect 6: a priority-0 tenant's packets now and then must not change
/// the weights of the tenants below it: 3:5 of what it leaves.
#[test]
fn a_priority_tenant_leaves_the_weights_below_it_intact() {
    let p = policy(
        "
link: { rate: 1Gbit }
tenants:
  - { name: prio, priority: 0 }
  - { name: small, weight: 3 }
  - { name: big, weight: 5 }
",
    );
    let mut wf2q = sched::build("wf2q", &p).unwrap();
    let packet = |app: u32, len_bytes: u32, now: u64| Packet {
        len_bytes,
        tenant: p.app(AppId(app)).tenant,
        app: AppId(app),
        flow: app,
        destination: app,
        core: 0,
        arrival_ns: now,
        handle: u64::from(app),
    };
    // prio: 228 B every 40 µs (about 45 Mbit/s); small: 92 B packets; big: TSO sends.
    let len = [228u32, 92, 65_536];
    let duration_ns = 200_000_000;
    let mut bytes = [0u64; 3];
    let mut queued = [0u32; 3];
    let mut next_prio_ns = 0;
    let mut now = 0;
    while now < duration_ns {
        for app in [1u32, 2] {
            while queued[app as usize] < 8 {
                assert!(
                    wf2q.enqueue(now, packet(app, len[app as usize], now))
                        .is_ok()
                );
                queued[app as usize] += 1;
            }
        }
        while next_prio_ns <= now {
            assert!(wf2q.enqueue(now, packet(0, len[0], next_prio_ns)).is_ok());
            queued[0] += 1;
            next_prio_ns += 40_000;
        }
        let frame = wf2q.dequeue(now).expect("backlogged");
        let app = frame.packet.handle as usize;
        bytes[app] += u64::from(frame.bytes);
        queued[app] -= 1;
        now += u64::from(frame.bytes) * 8;
    }
    let prio = rate_bps(bytes[0], duration_ns);
    assert!(
        (prio / (228.0 * 8.0 / 40e-6) - 1.0).abs() < 0.01,
        "prio {prio}"
    );
    let below = (bytes[1] + bytes[2]) as f64;
    let small = bytes[1] as f64 / below;
    assert!(
        (small / (3.0 / 8.0) - 1.0).abs() < 0.01,
        "small's part {small}"
    );
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
        match: { ports: [5001] }
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
        app: p.catch_all_app(TenantId(tenant)),
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
            class_packets: None,
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

/// T1 (one app) beside T2, whose priority-0 `probe` sends one small packet at a time
/// (a ping-pong: the next one arrives a round trip after the last left) while its
/// priority-1 `bulk` app is backlogged.
const PRIO_PROBE: &str = "
link: { rate: 10Gbit }
tenants:
  - name: t1
  - name: t2
    apps:
      - { name: probe, priority: 0, match: { ports: [5001] } }
      - { name: bulk, priority: 1, match: { ports: [5002] } }
";

/// TSO-sized sends, as the simulator's bulk senders make them.
const TSO_BYTES: u32 = 65_536;

struct ProbeRun {
    /// Bytes sent per app (index = AppId).
    app_bytes: Vec<u64>,
    /// Each probe packet's wait from its arrival until it went on the link.
    probe_delays_ns: Vec<u64>,
}

/// Drives `enforcer` on a saturated link as [`drive_link`] does, with `backlogged`
/// apps kept 4 TSO sends deep and the closed-loop `probe` app: one `probe_bytes`
/// packet outstanding, the next arriving `rtt_ns` after the last has left, at its
/// arrival time even while a frame is on the link.
fn drive_with_probe(
    p: &Policy,
    enforcer: &mut dyn sched::Enforcer,
    backlogged: &[AppId],
    probe: AppId,
    probe_bytes: u32,
    rtt_ns: u64,
    duration_ns: u64,
) -> ProbeRun {
    let rate_bps = p.link.rate_bps;
    let tx_ns = |bytes: u32| (u64::from(bytes) * 8 * 1_000_000_000).div_ceil(rate_bps);
    let packet = |app: AppId, len_bytes: u32, now: u64, handle: u64| Packet {
        len_bytes,
        tenant: p.app(app).tenant,
        app,
        flow: app.0,
        destination: app.0,
        core: 0,
        arrival_ns: now,
        handle,
    };
    let mut run = ProbeRun {
        app_bytes: vec![0; p.apps.len()],
        probe_delays_ns: Vec::new(),
    };
    let mut queued = vec![0u32; backlogged.len()];
    let mut probe_arrival_ns = Some(0u64);
    let mut now = 0u64;
    while now < duration_ns {
        for (i, &app) in backlogged.iter().enumerate() {
            while queued[i] < 4 {
                assert!(
                    enforcer
                        .enqueue(now, packet(app, TSO_BYTES, now, i as u64))
                        .is_ok()
                );
                queued[i] += 1;
            }
        }
        if let Some(at) = probe_arrival_ns.filter(|&at| at <= now) {
            assert!(
                enforcer
                    .enqueue(now, packet(probe, probe_bytes, at, u64::MAX))
                    .is_ok()
            );
            probe_arrival_ns = None;
        }
        let frame = enforcer.dequeue(now).expect("the link stays saturated");
        assert!(frame.last);
        run.app_bytes[frame.packet.app.index()] += u64::from(frame.bytes);
        let done = now + tx_ns(frame.bytes);
        if frame.packet.handle == u64::MAX {
            run.probe_delays_ns.push(now - frame.packet.arrival_ns);
            probe_arrival_ns = Some(done + rtt_ns);
        } else {
            queued[frame.packet.handle as usize] -= 1;
        }
        // The probe's next packet arrives while this frame is on the link.
        if let Some(at) = probe_arrival_ns.filter(|&at| at < done) {
            assert!(
                enforcer
                    .enqueue(at, packet(probe, probe_bytes, at, u64::MAX))
                    .is_ok()
            );
            probe_arrival_ns = None;
        }
        now = done;
    }
    run
}

/// The defect this guards against: with a priority worth 16x the weight, the bulk
/// app's rate fell to 1/17 of its tenant's whenever the probe was backlogged, a TSO
/// send tagged then kept that F after the probe had left, and T2 got ~3.6 of its
/// 5 Gbit/s. T2 keeps its half, and the probe still goes first.
#[test]
fn a_closed_loop_priority_probe_costs_its_tenant_nothing_and_goes_first() {
    let p = policy(PRIO_PROBE);
    let (t1, probe, bulk) = (AppId(0), AppId(1), AppId(2));
    assert_eq!(p.app(probe).name, "probe");
    assert_eq!(p.app(bulk).name, "bulk");
    for rtt_ns in [0, 5_000, 20_000, 100_000] {
        let mut wf2q = sched::build("wf2q", &p).unwrap();
        let duration_ns = 100_000_000;
        let run = drive_with_probe(
            &p,
            wf2q.as_mut(),
            &[t1, bulk],
            probe,
            64,
            rtt_ns,
            duration_ns,
        );
        let t1_bytes = run.app_bytes[t1.index()];
        let t2_bytes = run.app_bytes[probe.index()] + run.app_bytes[bulk.index()];
        let t2_share = t2_bytes as f64 / (t1_bytes + t2_bytes) as f64;
        assert!(
            (t2_share / 0.5 - 1.0).abs() < 0.01,
            "rtt {rtt_ns}: T2 share {t2_share}"
        );
        assert!(
            run.probe_delays_ns.len() > 100,
            "rtt {rtt_ns}: the probe ran"
        );
        // The probe waits at most for the frame on the link when it arrived.
        let tso_ns = (u64::from(TSO_BYTES) * 8).div_ceil(10);
        let worst = *run.probe_delays_ns.iter().max().unwrap();
        assert!(worst <= tso_ns, "rtt {rtt_ns}: probe waited {worst} ns");
    }
}

#[test]
fn check_says_app_priorities_are_strict_levels() {
    let a = sched::approximation("wf2q", &policy(PRIO_PROBE)).unwrap();
    assert!(
        a.approximate
            .iter()
            .any(|l| l.starts_with("t2: 2 app priority levels, strict")),
        "{a:?}"
    );
    assert!(!a.approximate.iter().any(|l| l.contains("weight factor")));
}

/// What `check` says of caps, weights and tenant priorities: the claims the
/// regression tests above hold, each with its bound, and no longer SENIC's
/// fallback to the ratio of the caps nor priorities as weight factors.
#[test]
fn check_states_each_claim_with_its_bound() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - { name: gold, priority: 0, max_rate: 4Gbit }
  - { name: silver, weight: 3 }
  - { name: bronze, max_rate: 1Gbit }
",
    );
    let a = sched::approximation("wf2q", &p).unwrap();
    assert_eq!(a.share_error_max, Some(0.01));
    assert!(
        a.exact.iter().any(|l| l.starts_with("gold: max_rate 4Gbit")
            && l.contains("over any window at most one packet")
            && l.contains("419us")),
        "{a:?}"
    );
    let weights = a
        .approximate
        .iter()
        .find(|l| l.starts_with("weights and caps"))
        .expect("a weights sentence");
    assert!(weights.contains("within one packet"), "{weights}");
    assert!(weights.contains("1% of the ideal"), "{weights}");
    assert!(
        a.approximate
            .iter()
            .any(|l| l.starts_with("tenant priorities: 2 levels, strict")),
        "{a:?}"
    );
    let all = format!("{a:?}");
    assert!(!all.contains("ratio of their caps"), "{all}");
    assert!(!all.contains("weight factor"), "{all}");
}

/// Guarantees are not enforced, so the share error `check` states grows by what
/// ignoring them moves a tenant's share: 10 Gbit/s, a with a 4 Gbit/s guarantee
/// beside b, both weight 1: the ideal is 7 and 3, `wf2q` gives 5 and 5 (b +67%).
#[test]
fn check_counts_ignored_guarantees_in_the_share_error() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - { name: a, min_rate: 4Gbit }
  - { name: b }
",
    );
    let a = sched::approximation("wf2q", &p).unwrap();
    let error = a.share_error_max.unwrap();
    assert!((error - (0.01 + 2.0 / 3.0)).abs() < 1e-9, "{error}");
    assert!(
        a.ignored
            .iter()
            .any(|l| l.starts_with("a: min_rate 4Gbit") && l.contains("66.7%")),
        "{a:?}"
    );
    // And the run gives what the sentence says.
    let mut wf2q = sched::build("wf2q", &p).unwrap();
    let duration_ns = 20_000_000;
    let run = drive_link(
        &p,
        wf2q.as_mut(),
        &[backlogged(0), backlogged(1)],
        0,
        duration_ns,
    );
    let b = rate_bps(run.app_bytes[1], duration_ns);
    assert!((b / 5e9 - 1.0).abs() < 0.01, "b {b}");
}

/// A split app's demand grows with its flows, so what ignoring guarantees moves is
/// figured with it backlogged by one class, and the sentence says so: here a is
/// moved by nothing with one class of s's (s wants 100 Mbit/s either way), but
/// with four (400 Mbit/s) a's ideal is 700 and `wf2q` gives it 600.
#[test]
fn check_says_the_guarantees_figure_counts_a_split_app_by_one_class() {
    let split = policy(
        "
link: { rate: 1Gbit }
tenants:
  - { name: a, min_rate: 400Mbit }
  - name: s
    apps:
      - { name: fan, split: { by: flow, max_rate: 100Mbit } }
",
    );
    let a = sched::approximation("wf2q", &split).unwrap();
    assert!(
        a.ignored.iter().any(|l| l.starts_with("a: min_rate")
            && l.contains("with every app backlogged by one flow and a split app by one class")
            && l.contains("by up to 0.0% of its ideal")),
        "{a:?}"
    );
    let unsplit = policy(
        "
link: { rate: 1Gbit }
tenants:
  - { name: a, min_rate: 400Mbit }
  - { name: s }
",
    );
    let a = sched::approximation("wf2q", &unsplit).unwrap();
    assert!(
        a.ignored
            .iter()
            .any(|l| l.contains("with every app backlogged, ignoring")),
        "{a:?}"
    );
}

/// Guaranteed tenants each with an app capped below its share: a tenant's demand
/// is that cap or unbounded (its implicit default app), so `n` tenants can be
/// backlogged 2^n ways. `check` weighs them all up to 4096, and states no share
/// bound beyond, with a sentence saying why.
fn guaranteed_tenants_with_capped_apps(n: usize) -> policy::Policy {
    let tenants: String = (0..n)
        .map(|i| {
            format!(
                "  - name: t{i}\n    weight: {}\n    min_rate: {}Mbit\n    apps:\n      - {{ name: a, max_rate: {}Mbit, match: {{ ports: [5000] }} }}\n",
                i + 1,
                100 + 10 * i,
                200 + 50 * i
            )
        })
        .collect();
    policy(&format!("link: {{ rate: 10Gbit }}\ntenants:\n{tenants}"))
}

#[test]
fn check_weighs_every_backlog_of_guaranteed_tenants_up_to_its_limit() {
    let weighed = sched::approximation("wf2q", &guaranteed_tenants_with_capped_apps(12)).unwrap();
    let error = weighed
        .share_error_max
        .expect("a share error for 4096 ways");
    assert!(
        weighed
            .ignored
            .iter()
            .any(|l| l.contains("with some apps of a tenant idle by up to")),
        "{weighed:?}"
    );
    let p = guaranteed_tenants_with_capped_apps(12);
    let stated = sched::bounds("wf2q", &p).unwrap();
    assert!(
        stated
            .iter()
            .any(|b| b.holds_share_error() && b.max == error),
        "{stated:?}"
    );

    let p = guaranteed_tenants_with_capped_apps(13);
    let unweighed = sched::approximation("wf2q", &p).unwrap();
    assert_eq!(unweighed.share_error_max, None);
    assert!(
        unweighed
            .approximate
            .iter()
            .any(|l| l.contains("more than 4096 ways to backlog its tenants")),
        "{unweighed:?}"
    );
    assert!(
        !sched::bounds("wf2q", &p)
            .unwrap()
            .iter()
            .any(|b| b.holds_share_error())
    );
}

#[test]
fn a_backlogged_priority_app_takes_its_tenants_share_and_no_more() {
    let p = policy(PRIO_PROBE);
    let duration_ns = 20_000_000;
    let run = drive_link(
        &p,
        sched::build("wf2q", &p).unwrap().as_mut(),
        &[backlogged(0), backlogged(1), backlogged(2)],
        0,
        duration_ns,
    );
    let total: u64 = run.app_bytes.iter().sum();
    let share = |app: usize| run.app_bytes[app] as f64 / total as f64;
    assert!((share(0) / 0.5 - 1.0).abs() < 0.01, "T1 {}", share(0));
    // Strictly before the bulk app: it keeps at most a packet now and then.
    assert!((share(1) / 0.5 - 1.0).abs() < 0.01, "probe {}", share(1));
    assert!(share(2) < 0.001, "bulk {}", share(2));
    assert!(rate_bps(total, duration_ns) > 0.999e10);
}

#[test]
fn three_app_priority_levels_are_strict_in_order() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - name: t1
  - name: t2
    apps:
      - { name: high, priority: 0, match: { ports: [5001] } }
      - { name: mid, priority: 1, match: { ports: [5002] } }
      - { name: low, priority: 2, match: { ports: [5003] } }
",
    );
    let duration_ns = 20_000_000;
    // (backlogged apps of t2, the one that takes all of t2's half)
    for (apps, winner) in [(vec![1u32, 2, 3], 1u32), (vec![2, 3], 2), (vec![1, 3], 1)] {
        let mut sources = vec![backlogged(0)];
        sources.extend(apps.iter().map(|&a| backlogged(a)));
        let run = drive_link(
            &p,
            sched::build("wf2q", &p).unwrap().as_mut(),
            &sources,
            0,
            duration_ns,
        );
        let total: u64 = run.app_bytes.iter().sum();
        let share = |app: usize| run.app_bytes[app] as f64 / total as f64;
        assert!(
            (share(0) / 0.5 - 1.0).abs() < 0.01,
            "{apps:?}: T1 {}",
            share(0)
        );
        assert!(
            (share(winner as usize) / 0.5 - 1.0).abs() < 0.01,
            "{apps:?}: {}",
            share(winner as usize)
        );
        for &a in apps.iter().filter(|&&a| a != winner) {
            assert!(
                share(a as usize) < 0.001,
                "{apps:?}: app {a} {}",
                share(a as usize)
            );
        }
    }
}

#[test]
fn app_priorities_stay_within_the_tenants_limit() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - name: t
    max_rate: 3Gbit
    apps:
      - { name: urgent, priority: 0, match: { ports: [5001] } }
      - { name: bulk, priority: 1, match: { ports: [5002] } }
  - name: other
",
    );
    let duration_ns = 20_000_000;
    let run = drive_link(
        &p,
        sched::build("wf2q", &p).unwrap().as_mut(),
        &[backlogged(0), backlogged(1), backlogged(3)],
        0,
        duration_ns,
    );
    let t = rate_bps(run.app_bytes[0] + run.app_bytes[1], duration_ns);
    assert!(
        (t / 3e9 - 1.0).abs() < 1e-3,
        "tenant {t} {:?}",
        run.app_bytes
    );
    let other = rate_bps(run.app_bytes[3], duration_ns);
    assert!((other / 7e9 - 1.0).abs() < 2e-3, "other {other}");
    // The urgent app alone holds the tenant at its limit, evenly paced.
    let run = drive_link(
        &p,
        sched::build("wf2q", &p).unwrap().as_mut(),
        &[backlogged(0)],
        0,
        duration_ns,
    );
    let t = rate_bps(run.app_bytes[0], duration_ns);
    assert!((t / 3e9 - 1.0).abs() < 1e-3, "urgent alone {t}");
}

mod invariants {
    use super::*;
    use proptest::prelude::*;

    /// (weight, max_rate in Mbit/s, priority) of an app.
    type AppSpec = (u32, Option<u32>, u8);
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
            for (a, (weight, cap, priority)) in apps.iter().enumerate() {
                // Each app its own port, so that none is a catch-all: the tenant keeps
                // its implicit `default` app.
                yaml += &format!(
                    "      - name: a{a}\n        weight: {weight}\n        priority: {priority}\n        match: {{ ports: [{}] }}\n",
                    5001 + a
                );
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
            (
                1u32..5,
                proptest::collection::vec((1u32..5, cap, 0u8..3), 1..4),
            ),
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

/// A capped tenant's cap holds over all its apps together, also when one of them
/// holds a packet only now and then: the apps' ceilings share the cap among the
/// apps that hold packets, and the sporadic app sent beside a sibling that took
/// the whole cap (52 of 40.6 Mbit/s in the claims oracle's case).
#[test]
fn a_capped_tenants_sporadic_app_sends_within_the_cap_beside_a_backlogged_one() {
    let policy = policy(
        "link: { rate: 100Mbit }\ntenants:\n  - name: a\n    max_rate: 40Mbit\n    apps:\n      - { name: sporadic, match: { proto: udp, ports: [5000] } }\n      - { name: bulk }\n",
    );
    let mut wf2q = sched::build("wf2q", &policy).unwrap();
    let (sporadic, bulk) = (AppId(0), AppId(1));
    let packet = |app: AppId, handle: u64| Packet {
        len_bytes: 1500,
        tenant: TenantId(0),
        app,
        flow: app.0,
        destination: 0,
        core: 0,
        arrival_ns: 0,
        handle,
    };
    let (duration_ns, every_ns) = (1_000_000_000u64, 1_000_000u64);
    let (mut now_ns, mut next_sporadic_ns, mut handle) = (0u64, 0u64, 0u64);
    let mut sent = [0u64; 2];
    let mut bulk_held = 0;
    while now_ns < duration_ns {
        if now_ns >= next_sporadic_ns {
            handle += 1;
            wf2q.enqueue(now_ns, packet(sporadic, handle)).unwrap();
            next_sporadic_ns += every_ns;
        }
        while bulk_held < 2 {
            handle += 1;
            wf2q.enqueue(now_ns, packet(bulk, handle)).unwrap();
            bulk_held += 1;
        }
        match wf2q.dequeue(now_ns) {
            Some(frame) => {
                sent[frame.packet.app.index()] += u64::from(frame.bytes);
                if frame.packet.app == bulk {
                    bulk_held -= 1;
                }
                now_ns += policy::wire::serialisation_ns(frame.bytes, policy.link.rate_bps);
            }
            None => {
                let ready = wf2q.next_ready_ns(now_ns).unwrap_or(u64::MAX);
                now_ns = ready.min(next_sporadic_ns).max(now_ns + 1);
            }
        }
    }
    let total_bps = rate_bps(sent[0] + sent[1], duration_ns);
    // The sporadic app sends all it offers: 1500 B a millisecond, 12 Mbit/s.
    assert!(rate_bps(sent[0], duration_ns) > 11.9e6, "{sent:?}");
    assert!(
        total_bps <= 40e6 * 1.01,
        "{total_bps} above the 40Mbit cap: {sent:?}"
    );
    assert!(
        total_bps >= 40e6 * 0.98,
        "{total_bps}: the cap is not met: {sent:?}"
    );
}
