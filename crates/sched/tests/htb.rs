//! `htb` on a saturated link against policy.md's ideal allocation: the cases shared
//! with `valve` (tests/token_tree/cases.rs), then its own property tests.

const ENFORCER: &str = "htb";

include!("token_tree/cases.rs");

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_policies_match_the_ideal_per_tenant(p in arb_policy()) {
        let apps: Vec<AppId> = (0..p.apps.len() as u32).map(AppId).collect();
        let [_, tenant_bps, _, ideal_tenant] = run_backlogged(&p, &apps, DURATION_NS);
        let link = p.link.rate_bps as f64;
        // Relative to the ideal, or to 1% of the link for tiny shares. The issue's
        // bar is on the mean over tenants (2%); HTB's fixed rates and quantum-based
        // borrowing leave single tenants of some policies a few percent off (one
        // seen: 0.571 against 0.6 Gbit/s), so the worst tenant gets more room.
        let errors: Vec<f64> = tenant_bps
            .iter()
            .zip(&ideal_tenant)
            .map(|(got, want)| (got - want).abs() / want.max(0.01 * link))
            .collect();
        let mean = errors.iter().sum::<f64>() / errors.len() as f64;
        prop_assert!(mean < 0.02, "got {:?} ideal {:?}", tenant_bps, ideal_tenant);
        prop_assert!(
            errors.iter().all(|&e| e < 0.06),
            "got {:?} ideal {:?}",
            tenant_bps,
            ideal_tenant
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// What idle tenants leave is borrowed by priority, then by quanta in
    /// proportion to weight, as the ideal shares it, where no guarantee needs
    /// re-sharing (`check`: HTB's rates are fixed for every tenant backlogged).
    #[test]
    fn idle_tenants_leave_their_part_by_weight(p in arb_policy(), idle in any::<u8>()) {
        let mut p = p;
        for tenant in &mut p.tenants {
            tenant.min_rate_bps = None;
        }
        idle_tenants_leave_within_3_percent(&p, idle)?;
    }
}

/// TONIC's prioritisation policy (scenarios/tonic/policy-prio.yaml): t2's probe is
/// priority 0, its bulk priority 1 (rate 0: it only borrows), t1 one app.
const PRIO_POLICY: &str = "
link: { rate: 10Gbit }
tenants:
  - { name: t1, weight: 3 }
  - name: t2
    weight: 3
    apps:
      - { name: probe, priority: 0, match: { ports: [5001] } }
      - { name: kvs, priority: 0, match: { ports: [5002] } }
      - { name: bulk, priority: 1, match: { ports: [5003] } }
";

/// For each probe: bytes the link sends between its arrival and its departure.
/// t1 and t2's bulk are backlogged with `len_bytes` packets; one 64-byte probe at a
/// time arrives `gap_ns` after the previous one left (sockperf's ping-pong).
fn probe_waits_bytes(len_bytes: u32, gap_ns: u64, end_ns: u64) -> Vec<u64> {
    let p = parse_policy(PRIO_POLICY, "p.yaml").unwrap();
    let mut e = enforcer(&p);
    let bulk = [app(&p, "t1", "default"), app(&p, "t2", "bulk")];
    let probe = app(&p, "t2", "probe");
    let mut queued = [0u32; 2];
    let mut handle = 0u64;
    let mut packet = |app: AppId, len_bytes: u32, now_ns: u64| {
        handle += 1;
        Packet {
            len_bytes,
            tenant: p.app(app).tenant,
            app,
            flow: (handle % 8) as u32,
            destination: (handle % 8) as u32,
            core: 0,
            arrival_ns: now_ns,
            handle,
        }
    };
    let mut now_ns = 0;
    let mut probe_at_ns = WARMUP_NS;
    let mut waiting: Option<u64> = None;
    let mut waits = Vec::new();
    while now_ns < end_ns {
        for (i, &a) in bulk.iter().enumerate() {
            while queued[i] < 16 {
                e.enqueue(now_ns, packet(a, len_bytes, now_ns)).unwrap();
                queued[i] += 1;
            }
        }
        if waiting.is_none() && now_ns >= probe_at_ns {
            e.enqueue(now_ns, packet(probe, 64, now_ns)).unwrap();
            waiting = Some(0);
        }
        let frame = e.dequeue(now_ns).expect("the link is backlogged");
        if frame.packet.app == probe {
            waits.push(waiting.take().unwrap());
            probe_at_ns = now_ns + gap_ns;
        } else {
            queued[bulk.iter().position(|&b| b == frame.packet.app).unwrap()] -= 1;
            if let Some(bytes) = waiting.as_mut() {
                *bytes += u64::from(frame.bytes);
            }
        }
        now_ns += (u64::from(frame.bytes) * 8 * 1_000_000_000).div_ceil(p.link.rate_bps);
    }
    waits
}

/// A green leaf is served before any class that borrows, as HTB's level 0 row is,
/// even while its tenant is out of rate tokens: the probe (rate 2.5 Gbit/s, mostly
/// idle, so always green) waits at most for t1's green leaf to end its DRR turn, one
/// quantum (5 Gbit/s / 8 / r2q = 62500 bytes) and the packet that crosses it. It
/// used to wait for its tenant to be green again at the root, while t1 sent alone:
/// up to 201000 bytes (1500-byte packets) or 262144 (64 KiB sends), 160 to 210 µs
/// at 10 Gbit/s.
#[test]
fn a_green_priority_leaf_waits_at_most_one_quantum_of_its_neighbour() {
    const T1_QUANTUM_BYTES: u64 = 62_500;
    for len_bytes in [1500, GSO_BYTES] {
        for gap_ns in [0, 10_000, 37_000, 100_000] {
            let waits = probe_waits_bytes(len_bytes, gap_ns, WARMUP_NS + 30 * MS);
            assert!(
                waits.len() > 250,
                "{len_bytes} B, gap {gap_ns}: {}",
                waits.len()
            );
            let worst = *waits.iter().max().unwrap();
            assert!(
                worst <= T1_QUANTUM_BYTES + u64::from(len_bytes),
                "{len_bytes} B packets, probe {gap_ns} ns after the last: {worst} bytes before it"
            );
        }
    }
}

/// Among four tenants or more, one whose share is more than half the link falls
/// behind its rate while its neighbours' sends, in step, go by in a row, and what
/// it earns beyond tc's burst is lost to them: weight 17 beside seven of weight 1
/// at 1 Gbit/s got 682.9 of 708.3 Mbit/s and each neighbour 45.3 of 41.7 (the
/// claims oracle, seed 79, 6.0% against the 5% `check` stated). `check` states
/// no share bound there, and the bound at half the link or with three tenants.
#[test]
fn check_states_no_share_bound_where_one_of_four_tenants_or_more_is_above_half_the_link() {
    let said = |heavy: u32, light: usize| {
        let mut yaml =
            format!("link: {{ rate: 1Gbit }}\ntenants:\n  - {{ name: heavy, weight: {heavy} }}\n");
        for t in 0..light {
            yaml.push_str(&format!("  - {{ name: t{t} }}\n"));
        }
        let p = parse_policy(&yaml, "p.yaml").unwrap();
        (
            sched::approximation(ENFORCER, &p).unwrap(),
            sched::bounds(ENFORCER, &p).unwrap(),
        )
    };
    for (heavy, light) in [(17, 7), (4, 3)] {
        let (said, bounds) = said(heavy, light);
        assert_eq!(said.share_error_max, None, "{heavy} beside {light}");
        assert!(
            said.approximate
                .iter()
                .any(|l| l.contains("one's share is more than half the link: no bound")),
            "{said:?}"
        );
        assert!(
            bounds
                .iter()
                .all(|b| matches!(b.figure, sched::Figure::OverCap { .. })),
            "{bounds:?}"
        );
    }
    for (heavy, light) in [(7, 7), (3, 3), (80, 2)] {
        let (said, _) = said(heavy, light);
        assert_eq!(said.share_error_max, Some(0.05), "{heavy} beside {light}");
    }
}

/// A tenant whose `max_rate` is at most its share has its ceil for its rate; where
/// it has several apps, its idle `default` app's part of that rate reaches its busy
/// apps only as borrowing, which HTB serves only while no leaf anywhere has
/// tokens of its own, and the rest passes its burst: 122.1 of a cap of 131.2
/// Mbit/s beside five tenants of several apps each (the claims oracle, seed 28,
/// against the 5% `check` stated). A tenant of one app capped at 180.5 beside five
/// such tenants got 168.0 (seed 95: 5.4%), its tokens passing its burst while it
/// waited behind their sends. `check` states no share bound where any tenant's
/// cap binds, of one app or several, and the bound where the cap is above the
/// share.
#[test]
fn check_states_no_share_bound_where_a_tenant_has_its_cap_bind() {
    let said = |cap: &str, apps: &str| {
        let p = parse_policy(
            &format!(
                "link: {{ rate: 1Gbit }}
tenants:
  - {{ name: a, weight: 3 }}
  - {{ name: capped, max_rate: {cap}{apps} }}
"
            ),
            "p.yaml",
        )
        .unwrap();
        (
            sched::approximation(ENFORCER, &p).unwrap(),
            sched::bounds(ENFORCER, &p).unwrap(),
        )
    };
    let apps = ", apps: [ { name: web, match: { proto: tcp, ports: [80] } } ]";
    let (binding, bounds) = said("250Mbit", apps);
    assert_eq!(binding.share_error_max, None);
    assert!(
        binding
            .approximate
            .iter()
            .any(|l| l.contains("a tenant has a max_rate at most its share: no bound")),
        "{binding:?}"
    );
    assert!(
        bounds
            .iter()
            .all(|b| matches!(b.figure, sched::Figure::OverCap { .. })),
        "{bounds:?}"
    );
    let one = ", apps: [ { name: all } ]";
    for apps in ["", one] {
        let (binding, _) = said("250Mbit", apps);
        assert_eq!(binding.share_error_max, None, "{apps}: {binding:?}");
    }
    let (bounded, _) = said("251Mbit", apps);
    assert_eq!(bounded.share_error_max, Some(0.05), "{bounded:?}");
}

/// With tenants of several priorities a less urgent tenant sends even on its
/// own tokens only while no more urgent one can, and its tokens pass tc's
/// default burst while it waits: a tenant of priority 2 guaranteed 89 Mbit/s got
/// 79.6 beside tenants of priority 1 with several apps each (found by the claims
/// oracle against the 5% `check` stated). `check` says so and states no share
/// bound.
#[test]
fn check_states_no_share_bound_for_tenants_of_several_priorities() {
    let p = parse_policy(
        "link: { rate: 1Gbit }
tenants:
  - { name: a, weight: 3 }
  - { name: low, priority: 2, min_rate: 90Mbit }
",
        "p.yaml",
    )
    .unwrap();
    let approximation = sched::approximation(ENFORCER, &p).unwrap();
    assert_eq!(approximation.share_error_max, None);
    assert!(
        approximation.approximate.iter().any(|l| l.starts_with(
            "shares when every app is backlogged: a tenant of a less urgent priority"
        )),
        "{approximation:?}"
    );
    assert!(
        !approximation.exact.iter().any(|l| l.starts_with("shares")),
        "{approximation:?}"
    );
    let bounds = sched::bounds(ENFORCER, &p).unwrap();
    assert!(
        bounds
            .iter()
            .all(|b| matches!(b.figure, sched::Figure::OverCap { .. })),
        "{bounds:?}"
    );
}
