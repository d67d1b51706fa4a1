//! The measurement frame of a lab run, the simulator's to the letter: report classes
//! (every app some traffic uses), intervals, which traffic is active in each, and the
//! ideal allocation each is judged against. Demands come from `sim::flow_demand_bps`.

use policy::{Allocation, AppId, Scenario, ideal_allocation};
use report::{ClassName, Interval};
use std::collections::BTreeMap;

pub fn report_classes(scenario: &Scenario) -> Vec<AppId> {
    let mut used = vec![false; scenario.policy.apps.len()];
    for t in &scenario.traffic {
        used[t.app.index()] = true;
    }
    (0..used.len())
        .filter(|&i| used[i])
        .map(|i| AppId(i as u32))
        .collect()
}

pub fn class_names(scenario: &Scenario, classes: &[AppId]) -> Vec<ClassName> {
    classes
        .iter()
        .map(|&a| {
            let app = scenario.policy.app(a);
            ClassName {
                tenant: scenario.policy.tenant(app.tenant).name.clone(),
                app: app.name.clone(),
            }
        })
        .collect()
}

/// Empty intervals with their ideal allocations and activity filled in.
pub fn intervals(scenario: &Scenario, classes: &[AppId]) -> Vec<Interval> {
    let policy = &scenario.policy;
    let host = sim::HostModel::default();
    let demands: Vec<f64> = scenario
        .traffic
        .iter()
        .map(|t| sim::flow_demand_bps(t, scenario, &host))
        .collect();
    let mut cache: BTreeMap<Vec<bool>, Allocation> = BTreeMap::new();
    let mut allocation_for = |active: &[bool]| -> Allocation {
        cache
            .entry(active.to_vec())
            .or_insert_with(|| {
                let mut per_app: Vec<Vec<f64>> = vec![Vec::new(); policy.apps.len()];
                for (i, t) in scenario.traffic.iter().enumerate() {
                    if active[i] {
                        let flows = t.kind.flows() as usize;
                        per_app[t.app.index()].extend(std::iter::repeat_n(demands[i], flows));
                    }
                }
                ideal_allocation(policy, &per_app)
            })
            .clone()
    };
    let mut boundaries: Vec<u64> = scenario
        .traffic
        .iter()
        .flat_map(|t| [t.start_ns, t.stop_ns])
        .collect();
    boundaries.sort_unstable();
    boundaries.dedup();

    let count = scenario.duration_ns.div_ceil(scenario.interval_ns);
    (0..count)
        .map(|k| {
            let start_ns = k * scenario.interval_ns;
            let end_ns = (start_ns + scenario.interval_ns).min(scenario.duration_ns);
            let mut cuts = vec![start_ns];
            cuts.extend(
                boundaries
                    .iter()
                    .copied()
                    .filter(|&b| b > start_ns && b < end_ns),
            );
            cuts.push(end_ns);
            let steady = cuts.len() == 2;
            let mut class_ideal_bps = vec![0.0; classes.len()];
            let mut tenant_ideal_bps = vec![0.0; policy.tenants.len()];
            let mut class_active = vec![false; classes.len()];
            let mut tenant_active = vec![false; policy.tenants.len()];
            let length = (end_ns - start_ns) as f64;
            for piece in cuts.windows(2) {
                let (from, to) = (piece[0], piece[1]);
                let active: Vec<bool> = scenario
                    .traffic
                    .iter()
                    .map(|t| t.start_ns <= from && from < t.stop_ns)
                    .collect();
                let allocation = allocation_for(&active);
                let weight = (to - from) as f64 / length;
                for (c, &app) in classes.iter().enumerate() {
                    class_ideal_bps[c] += weight * allocation.app_bps[app.index()];
                }
                for (t, ideal) in tenant_ideal_bps.iter_mut().enumerate() {
                    *ideal += weight * allocation.tenant_bps[t];
                }
                for (i, t) in scenario.traffic.iter().enumerate() {
                    if active[i] {
                        tenant_active[t.tenant.index()] = true;
                        if let Some(c) = classes.iter().position(|&a| a == t.app) {
                            class_active[c] = true;
                        }
                    }
                }
            }
            Interval {
                start_ns,
                end_ns,
                steady,
                class_bytes: vec![0; classes.len()],
                class_ideal_bps,
                class_active,
                tenant_ideal_bps,
                tenant_active,
            }
        })
        .collect()
}
