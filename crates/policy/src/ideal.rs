//! The ideal (fluid) allocation of policy.md, the oracle every enforcer is judged
//! against. At each node of the tree (link, tenants, apps, split classes) the
//! capacity handed down is shared among the children: guarantees first, then
//! priority levels in order, each water-filled in proportion to the weights.
//! Water-filling is exact: it repeatedly satisfies every child whose remaining want
//! is below its fair share, so it ends after at most one round per child.

use crate::Policy;

/// The fluid allocation for one set of demands, in bit/s.
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    pub tenant_bps: Vec<f64>,
    pub app_bps: Vec<f64>,
}

/// One child of a node, as the sharing sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Child {
    /// Subtree demand, already capped by the child's max_rate.
    pub(crate) demand_bps: f64,
    pub(crate) min_rate_bps: f64,
    pub(crate) weight: f64,
    pub(crate) priority: u8,
}

/// Shares `capacity_bps` among `children` (policy.md, steps 2 and 3).
pub(crate) fn share(capacity_bps: f64, children: &[Child]) -> Vec<f64> {
    let mut given: Vec<f64> = children
        .iter()
        .map(|c| c.min_rate_bps.min(c.demand_bps))
        .collect();
    let guaranteed: f64 = given.iter().sum();
    if guaranteed > capacity_bps {
        // Only a scenario's slower link can get here; validation keeps the
        // guarantees within the link otherwise.
        let scale = if guaranteed > 0.0 {
            capacity_bps / guaranteed
        } else {
            0.0
        };
        given.iter_mut().for_each(|g| *g *= scale);
        return given;
    }
    let mut left_bps = capacity_bps - guaranteed;
    let mut priorities: Vec<u8> = children.iter().map(|c| c.priority).collect();
    priorities.sort_unstable();
    priorities.dedup();
    for priority in priorities {
        if left_bps <= 0.0 {
            break;
        }
        let mut wanting: Vec<usize> = (0..children.len())
            .filter(|&i| children[i].priority == priority && given[i] < children[i].demand_bps)
            .collect();
        while !wanting.is_empty() && left_bps > 0.0 {
            let weight_sum: f64 = wanting.iter().map(|&i| children[i].weight).sum();
            let per_weight = left_bps / weight_sum;
            let (sated, hungry): (Vec<usize>, Vec<usize>) = wanting.iter().partition(|&&i| {
                children[i].demand_bps - given[i] <= per_weight * children[i].weight
            });
            if sated.is_empty() {
                for &i in &hungry {
                    given[i] += per_weight * children[i].weight;
                }
                left_bps = 0.0;
            } else {
                for &i in &sated {
                    left_bps -= children[i].demand_bps - given[i];
                    given[i] = children[i].demand_bps;
                }
                left_bps = left_bps.max(0.0);
            }
            wanting = hungry;
        }
    }
    given
}

fn rate(bps: Option<u64>) -> f64 {
    bps.map_or(f64::INFINITY, |r| r as f64)
}

/// The ideal allocation for `app_flow_demands_bps`: one list per app (index =
/// [`crate::AppId`]), one demand per active flow (`f64::INFINITY` = backlogged).
/// A missing or empty list is an idle app; NaN and negative demands count as 0.
pub fn ideal_allocation(policy: &Policy, app_flow_demands_bps: &[Vec<f64>]) -> Allocation {
    let app_demand_bps: Vec<f64> = policy
        .apps
        .iter()
        .enumerate()
        .map(|(i, app)| {
            let flows = app_flow_demands_bps.get(i).map_or(&[][..], |f| &f[..]);
            // A split class is capped on its own, so the app's demand is the sum of
            // the capped flows; without split the flows simply add up.
            let split_cap = app.split.map_or(f64::INFINITY, |s| s.max_rate_bps as f64);
            // Folded from +0: a float sum of no flows is -0, which an idle app's
            // ideal would carry into every figure and print as "-0.0%".
            let sum: f64 = flows
                .iter()
                .map(|&d| if d > 0.0 { d.min(split_cap) } else { 0.0 })
                .fold(0.0, |sum, d| sum + d);
            sum.min(rate(app.max_rate_bps))
        })
        .collect();

    let tenant_children: Vec<Child> = policy
        .tenants
        .iter()
        .map(|tenant| Child {
            demand_bps: tenant
                .apps
                .iter()
                .map(|a| app_demand_bps[a.index()])
                .sum::<f64>()
                .min(rate(tenant.max_rate_bps)),
            min_rate_bps: tenant.min_rate_bps.unwrap_or(0) as f64,
            weight: f64::from(tenant.weight),
            priority: tenant.priority,
        })
        .collect();
    let tenant_bps = share(policy.link.rate_bps as f64, &tenant_children);

    let mut app_bps = vec![0.0; policy.apps.len()];
    for (tenant, &capacity_bps) in policy.tenants.iter().zip(&tenant_bps) {
        let children: Vec<Child> = tenant
            .apps
            .iter()
            .map(|&a| {
                let app = policy.app(a);
                Child {
                    demand_bps: app_demand_bps[a.index()],
                    min_rate_bps: app.min_rate_bps.unwrap_or(0) as f64,
                    weight: f64::from(app.weight),
                    priority: app.priority,
                }
            })
            .collect();
        for (&a, bps) in tenant.apps.iter().zip(share(capacity_bps, &children)) {
            app_bps[a.index()] = bps;
        }
    }
    Allocation {
        tenant_bps,
        app_bps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_policy;
    use proptest::prelude::*;

    const INF: f64 = f64::INFINITY;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
    }

    fn assert_close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!(close(*g, *w), "{got:?} vs {want:?}");
        }
    }

    fn policy(yaml: &str) -> Policy {
        parse_policy(yaml, "test.yaml").unwrap()
    }

    /// One backlogged flow for each listed app, nothing for the others.
    fn backlogged(policy: &Policy, apps: &[usize]) -> Vec<Vec<f64>> {
        (0..policy.apps.len())
            .map(|i| if apps.contains(&i) { vec![INF] } else { vec![] })
            .collect()
    }

    #[test]
    fn weights_one_two_three() {
        let p = policy(
            "link: {rate: 12Gbit}\ntenants:\n- {name: a}\n- {name: b, weight: 2}\n- {name: c, weight: 3}\n",
        );
        let a = ideal_allocation(&p, &backlogged(&p, &[0, 1, 2]));
        assert_close(&a.tenant_bps, &[2e9, 4e9, 6e9]);
        assert_close(&a.app_bps, &[2e9, 4e9, 6e9]);
        // Idle tenants leave their part to the others.
        let a = ideal_allocation(&p, &backlogged(&p, &[0, 2]));
        assert_close(&a.tenant_bps, &[3e9, 0.0, 9e9]);
    }

    #[test]
    fn an_idle_app_gets_plus_zero_even_with_a_guarantee() {
        let p = policy(
            "link: {rate: 2Gbit}\ntenants:\n- name: a\n  apps:\n  - {name: x, min_rate: 400Mbit, match: {ports: [9000]}}\n  - {name: y}\n",
        );
        let a = ideal_allocation(&p, &backlogged(&p, &[1]));
        assert_eq!(a.app_bps[0].to_bits(), 0f64.to_bits(), "{}", a.app_bps[0]);
        assert_close(&a.app_bps, &[0.0, 2e9]);
    }

    #[test]
    fn finite_demand_leaves_the_rest() {
        let p = policy(
            "link: {rate: 12Gbit}\ntenants:\n- {name: a}\n- {name: b, weight: 2}\n- {name: c, weight: 3}\n",
        );
        let a = ideal_allocation(&p, &[vec![1e9], vec![INF], vec![INF]]);
        assert_close(&a.tenant_bps, &[1e9, 4.4e9, 6.6e9]);
    }

    #[test]
    fn priorities_are_strict() {
        let p = policy(
            "link: {rate: 10Gbit}\ntenants:\n- name: t\n  apps:\n  - {name: kvs, priority: 0, match: {ports: [11211]}}\n  - {name: batch, priority: 1, match: {ports: [5201]}}\n",
        );
        // kvs wants 3Gbit: it gets it, batch and the default app share the rest.
        let a = ideal_allocation(&p, &[vec![3e9], vec![INF], vec![INF]]);
        assert_close(&a.app_bps, &[3e9, 3.5e9, 3.5e9]);
        // A backlogged priority 0 takes everything.
        let a = ideal_allocation(&p, &[vec![INF], vec![INF], vec![]]);
        assert_close(&a.app_bps, &[10e9, 0.0, 0.0]);
    }

    #[test]
    fn guarantees_come_first() {
        let p = policy(
            "link: {rate: 10Gbit}\ntenants:\n- {name: hi, priority: 0}\n- {name: lo, priority: 2, min_rate: 2Gbit}\n- {name: mid, min_rate: 1Gbit}\n",
        );
        let a = ideal_allocation(&p, &backlogged(&p, &[0, 1, 2]));
        assert_close(&a.tenant_bps, &[7e9, 2e9, 1e9]);
        // A guarantee is only given up to the demand.
        let a = ideal_allocation(&p, &[vec![INF], vec![0.5e9], vec![INF]]);
        assert_close(&a.tenant_bps, &[8.5e9, 0.5e9, 1e9]);
        // Weighted sharing of the excess, above the guarantees.
        let p =
            policy("link: {rate: 10Gbit}\ntenants:\n- {name: a, min_rate: 4Gbit}\n- {name: b}\n");
        let a = ideal_allocation(&p, &backlogged(&p, &[0, 1]));
        assert_close(&a.tenant_bps, &[7e9, 3e9]);
    }

    #[test]
    fn caps_free_capacity_for_others() {
        let p = policy(
            "link: {rate: 10Gbit}\ntenants:\n- {name: a, max_rate: 2Gbit}\n- {name: b}\n- {name: c}\n",
        );
        let a = ideal_allocation(&p, &backlogged(&p, &[0, 1, 2]));
        assert_close(&a.tenant_bps, &[2e9, 4e9, 4e9]);
        // A cap holds even on an idle link: the allocation is then below the link.
        let a = ideal_allocation(&p, &backlogged(&p, &[0]));
        assert_close(&a.tenant_bps, &[2e9, 0.0, 0.0]);
    }

    #[test]
    fn app_cap_above_tenant_cap_is_bounded_by_the_tenant() {
        let p = policy(
            "link: {rate: 10Gbit}\ntenants:\n- name: a\n  max_rate: 3Gbit\n  apps: [{name: x, max_rate: 8Gbit, match: {proto: tcp}}]\n- {name: b, priority: 2}\n",
        );
        let a = ideal_allocation(&p, &[vec![INF], vec![], vec![INF]]);
        assert_close(&a.tenant_bps, &[3e9, 7e9]);
        assert_close(&a.app_bps, &[3e9, 0.0, 7e9]);
    }

    #[test]
    fn split_classes_are_capped_each() {
        let p = policy(
            "link: {rate: 10Gbit}\ntenants:\n- name: t\n  apps:\n  - name: batch\n    match: {proto: tcp}\n    max_rate: 4Gbit\n    split: {by: destination, max_rate: 50Mbit}\n- {name: u}\n",
        );
        // 10 split classes of 50Mbit: 500Mbit in all; u takes the rest.
        let a = ideal_allocation(&p, &[vec![INF; 10], vec![], vec![INF]]);
        assert_close(&a.tenant_bps, &[0.5e9, 9.5e9]);
        // 1000 classes are held by the app's cap, then shared fairly with u.
        let a = ideal_allocation(&p, &[vec![INF; 1000], vec![], vec![INF]]);
        assert_close(&a.tenant_bps, &[4e9, 6e9]);
        // Small flows take their demand, the others their cap.
        let a = ideal_allocation(&p, &[vec![10e6, 1e9, INF], vec![], vec![]]);
        assert_close(&a.app_bps, &[110e6, 0.0, 0.0]);
    }

    #[test]
    fn odd_demands_count_as_idle() {
        let p = policy("link: {rate: 1Gbit}\ntenants:\n- {name: a}\n- {name: b}\n");
        let a = ideal_allocation(&p, &[vec![f64::NAN, -1.0]]);
        assert_close(&a.tenant_bps, &[0.0, 0.0]);
    }

    fn arb_policy() -> impl Strategy<Value = Policy> {
        let app = (
            1u32..4,
            0u8..3,
            proptest::option::of(1u64..6),
            proptest::option::of(1u64..20),
            any::<bool>(),
        );
        let tenant = (
            1u32..4,
            0u8..3,
            proptest::option::of(1u64..4),
            proptest::option::of(1u64..20),
            proptest::collection::vec(app, 0..4),
        );
        proptest::collection::vec(tenant, 1..5).prop_map(|tenants| {
            let mut yaml = String::from("link: {rate: 20Gbit}\ntenants:\n");
            for (t, (weight, priority, min, max, apps)) in tenants.iter().enumerate() {
                yaml += &format!("- name: t{t}\n  weight: {weight}\n  priority: {priority}\n");
                // Guarantees are bounded so that every generated policy is valid.
                if let Some(min) = min {
                    yaml += &format!(
                        "  min_rate: {min}Gbit\n  max_rate: {}Gbit\n",
                        max.unwrap_or(20).max(*min)
                    );
                } else if let Some(max) = max {
                    yaml += &format!("  max_rate: {max}Gbit\n");
                }
                if !apps.is_empty() {
                    yaml += "  apps:\n";
                }
                for (a, (weight, priority, app_min, app_max, split)) in apps.iter().enumerate() {
                    // Each app its own port, so that none is a catch-all.
                    yaml += &format!(
                        "  - {{name: a{a}, weight: {weight}, priority: {priority}, match: {{ports: [{}]}}",
                        a + 1
                    );
                    if let (Some(app_min), Some(min)) = (app_min, min)
                        && apps.len() as u64 * app_min <= *min
                        && app_max.is_none_or(|m| m >= *app_min)
                    {
                        yaml += &format!(", min_rate: {app_min}Gbit");
                    }
                    if let Some(app_max) = app_max {
                        yaml += &format!(", max_rate: {app_max}Gbit");
                    }
                    if *split {
                        yaml += ", split: {by: flow, max_rate: 1Gbit}";
                    }
                    yaml += "}\n";
                }
            }
            parse_policy(&yaml, "gen.yaml").unwrap()
        })
    }

    fn arb_case() -> impl Strategy<Value = (Policy, Vec<Vec<f64>>)> {
        arb_policy().prop_flat_map(|p| {
            let demand = prop_oneof![Just(INF), 0.0..15e9f64];
            let demands =
                proptest::collection::vec(proptest::collection::vec(demand, 0..4), p.apps.len());
            (Just(p), demands)
        })
    }

    fn app_demand(p: &Policy, demands: &[Vec<f64>], app: usize) -> f64 {
        let cap = p.apps[app].split.map_or(INF, |s| s.max_rate_bps as f64);
        let sum: f64 = demands[app].iter().map(|d| d.min(cap)).sum();
        sum.min(rate(p.apps[app].max_rate_bps))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn allocation_is_consistent((p, demands) in arb_case()) {
            let a = ideal_allocation(&p, &demands);
            let link = p.link.rate_bps as f64;
            let total = a.tenant_bps.iter().sum::<f64>();
            prop_assert!(total <= link * (1.0 + 1e-9));
            // Work conserving under caps: the link is full or every demand is met.
            let wanted: f64 = p
                .tenants
                .iter()
                .map(|t| {
                    let apps: f64 = t.apps.iter().map(|x| app_demand(&p, &demands, x.index())).sum();
                    apps.min(rate(t.max_rate_bps))
                })
                .sum();
            prop_assert!(close(total, wanted.min(link)), "total {total} wanted {wanted}");
            for (t, tenant) in p.tenants.iter().enumerate() {
                let apps_sum: f64 = tenant.apps.iter().map(|x| a.app_bps[x.index()]).sum();
                prop_assert!(close(apps_sum, a.tenant_bps[t]), "apps {apps_sum} tenant {}", a.tenant_bps[t]);
                prop_assert!(a.tenant_bps[t] <= rate(tenant.max_rate_bps) * (1.0 + 1e-9));
                let demand = tenant
                    .apps
                    .iter()
                    .map(|x| app_demand(&p, &demands, x.index()))
                    .sum::<f64>()
                    .min(rate(tenant.max_rate_bps));
                prop_assert!(a.tenant_bps[t] <= demand * (1.0 + 1e-9) + 1e-6);
                // Guarantees are met when demanded (they always fit the link here).
                let min = tenant.min_rate_bps.unwrap_or(0) as f64;
                prop_assert!(a.tenant_bps[t] >= min.min(demand) * (1.0 - 1e-9));
            }
            for (i, app) in p.apps.iter().enumerate() {
                prop_assert!(a.app_bps[i] >= 0.0);
                prop_assert!(a.app_bps[i] <= rate(app.max_rate_bps) * (1.0 + 1e-9));
                prop_assert!(a.app_bps[i] <= app_demand(&p, &demands, i) * (1.0 + 1e-9) + 1e-6);
                let min = app.min_rate_bps.unwrap_or(0) as f64;
                prop_assert!(a.app_bps[i] >= min.min(app_demand(&p, &demands, i)) * (1.0 - 1e-9));
            }
        }

        #[test]
        fn work_conserving_without_caps((p, mut demands) in arb_case(), backlogged in any::<proptest::sample::Index>()) {
            // Remove every cap: then any infinite demand must fill the link.
            let mut p = p;
            p.tenants.iter_mut().for_each(|t| t.max_rate_bps = None);
            p.apps.iter_mut().for_each(|a| { a.max_rate_bps = None; a.split = None; });
            let chosen = backlogged.index(demands.len());
            demands[chosen].push(INF);
            let a = ideal_allocation(&p, &demands);
            prop_assert!(close(a.tenant_bps.iter().sum::<f64>(), p.link.rate_bps as f64));
        }
    }
}
