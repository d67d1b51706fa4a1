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
