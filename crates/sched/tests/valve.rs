//! `valve` on a saturated link against policy.md's ideal allocation: the cases shared
//! with `htb` (tests/token_tree/cases.rs), then its own property tests.

const ENFORCER: &str = "valve";

include!("token_tree/cases.rs");

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_policies_match_the_ideal_per_tenant(p in arb_policy()) {
        let apps: Vec<AppId> = (0..p.apps.len() as u32).map(AppId).collect();
        let [_, tenant_bps, _, ideal_tenant] = run_backlogged(&p, &apps, DURATION_NS);
        let link = p.link.rate_bps as f64;
        for (got, want) in tenant_bps.iter().zip(&ideal_tenant) {
            // Relative to the ideal, or to 1% of the link for tiny shares.
            let error = (got - want).abs() / want.max(0.01 * link);
            prop_assert!(error < 0.03, "got {:?} ideal {:?}", tenant_bps, ideal_tenant);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// What idle tenants leave is re-shared as the ideal does: the rate update
    /// sees no backlog and no consumption, and hands their part to the others.
    #[test]
    fn idle_tenants_leave_their_part_to_the_others(p in arb_policy(), idle in any::<u8>()) {
        idle_tenants_leave_within_3_percent(&p, idle)?;
    }
}
