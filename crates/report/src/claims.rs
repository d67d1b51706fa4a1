//! A run held to what `nicsched check` says of its enforcer: every bound
//! (`sched::bounds`) whose condition the scenario meets, measured on the run's own
//! figures. The claims oracle (crates/sim/tests/claims.rs) holds generated
//! scenarios to the same measure; a run of any scenario holds itself to it, so a
//! sentence of `check` that a user's scenario proves false is flagged in that run.

use crate::measure::{self, RpcPath};
use crate::{Check, RunRecord};
use policy::{Scenario, TrafficKind};
use sched::{Bound, Condition, Figure, Subject};

/// Whether `scenario` meets `condition` ([`sched::Condition`]'s words).
pub fn condition_holds(condition: Condition, scenario: &Scenario) -> bool {
    let policy = &scenario.policy;
    let no_cost =
        policy.engine.packet_cost_ns == 0 && scenario.traffic.iter().all(|t| t.cost_ns == 0);
    let traffic_of = |t: usize| {
        scenario
            .traffic
            .iter()
            .filter(move |x| x.tenant.index() == t)
    };
    // All of a tenant's traffic, not some: an rpc beside a bulk app has an ideal
    // from its unloaded round trip that its queue behind the bulk app does not let
    // it reach (a tenant's total fell 11-15% short of it).
    let backlogged = |t: usize| {
        traffic_of(t).next().is_some()
            && traffic_of(t).all(|x| {
                matches!(x.kind, TrafficKind::Bulk { .. })
                    && x.start_ns == 0
                    && x.stop_ns >= scenario.duration_ns
            })
    };
    let few = policy.tenants.len() <= sched::FEW_TENANTS_MAX;
    let steady = || {
        no_cost
            && scenario
                .traffic
                .iter()
                .all(|x| matches!(x.kind, TrafficKind::Bulk { .. } | TrafficKind::Udp { .. }))
            && !udp_backlog_drains(scenario)
    };
    let every_backlogged = || no_cost && (0..policy.tenants.len()).all(backlogged);
    let every_app_busy = || {
        policy.tenants.iter().all(|tenant| {
            tenant
                .apps
                .iter()
                .all(|&app| scenario.traffic.iter().any(|x| x.app == app))
        })
    };
    match condition {
        Condition::AnyTraffic => true,
        Condition::SteadySenders => steady(),
        Condition::SteadySendersFewTenants => few && steady(),
        Condition::EveryTenantBacklogged => every_backlogged(),
        Condition::EveryTenantBackloggedFewTenants => few && every_backlogged(),
        Condition::EveryAppBackloggedFewTenants => few && every_backlogged() && every_app_busy(),
        Condition::SteadySendersFewTenantsOwnCores => {
            few && steady() && !udp_beside_a_core_mate(scenario)
        }
        Condition::EveryTenantBackloggedOnEveryQueue => {
            let weights: Vec<u32> = policy.tenants.iter().map(|t| t.weight).collect();
            every_backlogged()
                && sched::multiqueue::tonic_pools(&weights, policy.link.queues).is_some_and(
                    |pools| {
                        pools.iter().enumerate().all(|(t, pool)| {
                            let flows: u32 = traffic_of(t)
                                .map(|x| match x.kind {
                                    TrafficKind::Bulk { flows } => flows,
                                    _ => 0,
                                })
                                .sum();
                            flows >= u32::from(pool.len)
                        })
                    },
                )
        }
    }
}

/// Whether a tenant with udp traffic shares its engine core with another tenant,
/// where the engine has several ([`sched::valve::core_mask`] places them).
pub fn udp_beside_a_core_mate(scenario: &Scenario) -> bool {
    let policy = &scenario.policy;
    if policy.engine.cores <= 1 {
        return false;
    }
    let core_of: Vec<u16> = sched::valve::core_mask(policy)
        .iter()
        .map(|cores| cores[0])
        .collect();
    scenario
        .traffic
        .iter()
        .filter(|t| matches!(t.kind, TrafficKind::Udp { .. }))
        .any(|t| {
            let core = core_of[t.tenant.index()];
            core_of
                .iter()
                .enumerate()
                .any(|(other, &c)| other != t.tenant.index() && c == core)
        })
}

/// Whether an app of udp traffic only asks for more than its ideal in one phase
/// of the run and for no more in a later one (its traffic stopped, or its ideal
/// risen): what it held while it asked for more, up to its buffer, then leaves
/// above its ideal, which follows what is offered and knows nothing of what is
/// held (a tenant of 7.8 Mbit/s held to 0.4 for 1.4 s sent 19.5 against an
/// ideal of 8.0 from 0.4 to 1.4 s after its neighbour stopped under `valve`,
/// 19.6 under `htb`, 14.1 under `wf2q`: sim tests/steady_senders.rs).
pub fn udp_backlog_drains(scenario: &Scenario) -> bool {
    let demands = measure::asked_demands_bps(scenario, &RpcPath::default());
    let mut udp_only = vec![true; scenario.policy.apps.len()];
    for t in &scenario.traffic {
        udp_only[t.app.index()] &= matches!(t.kind, TrafficKind::Udp { .. });
    }
    let mut held = vec![false; scenario.policy.apps.len()];
    let starts = std::iter::once(0).chain(
        measure::traffic_boundaries(scenario)
            .into_iter()
            .filter(|&b| b > 0 && b < scenario.duration_ns),
    );
    for from in starts {
        let active = measure::active_at(scenario, from);
        let allocation = measure::allocation_while(scenario, &demands, &active);
        let mut asked = vec![0.0; scenario.policy.apps.len()];
        for (i, t) in scenario.traffic.iter().enumerate() {
            if active[i] {
                asked[t.app.index()] += demands[i] * f64::from(t.kind.flows());
            }
        }
        for (a, &asked_bps) in asked.iter().enumerate() {
            if !udp_only[a] {
                continue;
            }
            let short = asked_bps > allocation.app_bps[a] * (1.0 + 1e-9) + 1.0;
            if held[a] && !short {
                return true;
            }
            held[a] |= short;
        }
    }
    false
}

/// The intervals bounds are judged over ([`sched::Figure`]): steady, after a
/// steady one with the same classes active.
pub fn settled(run: &RunRecord) -> Vec<usize> {
    (1..run.intervals.len())
        .filter(|&k| {
            let (before, now) = (&run.intervals[k - 1], &run.intervals[k]);
            now.steady && before.steady && before.class_active == now.class_active
        })
        .collect()
}

/// `bound`'s figure for the run at its worst subject, and which subject it is;
/// `None` where no subject is judged.
pub fn figure(run: &RunRecord, policy: &policy::Policy, bound: &Bound) -> Option<(f64, String)> {
    let settled = settled(run);
    let frame_bits = f64::from(policy.link.mtu_bytes) * 8.0;
    let judged = |ideal: f64, k: usize| {
        ideal * run.intervals[k].length_s() >= sched::JUDGED_FRAMES_MIN as f64 * frame_bits
    };
    let mean = |values: Vec<f64>| {
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    // An interval's distance from the ideal, in bit/s, less what the grain forgives.
    let beyond_grain = |throughput: f64, ideal: f64, grain: sched::Grain, k: usize| {
        let length_s = run.intervals[k].length_s();
        ((throughput - ideal).abs() - grain.bits(ideal, policy.link.mtu_bytes) / length_s).max(0.0)
    };
    // What a subject sent over every interval it is active in above its cap, less
    // one grain (a burst is allowed once, not every interval), over what the cap
    // sends in them: a cap holds over the run, and a class served late catches up.
    let over_cap = |cap: f64,
                    grain: sched::Grain,
                    active: &dyn Fn(usize) -> bool,
                    sent: &dyn Fn(usize) -> f64| {
        let (mut excess_bits, mut length_s) = (0.0, 0.0);
        for k in (0..run.intervals.len()).filter(|&k| active(k)) {
            let len = run.intervals[k].length_s();
            excess_bits += (sent(k) - cap) * len;
            length_s += len;
        }
        (length_s > 0.0)
            .then(|| (excess_bits - grain.bits(cap, policy.link.mtu_bytes)) / (cap * length_s))
    };
    let class_name = |c: usize| format!("{}/{}", run.classes[c].tenant, run.classes[c].app);
    let per_class = |f: &dyn Fn(usize, usize) -> Option<f64>| -> Vec<(f64, String)> {
        (0..run.classes.len())
            .filter_map(|c| {
                let values: Vec<f64> = settled.iter().filter_map(|&k| f(c, k)).collect();
                mean(values).map(|v| (v, class_name(c)))
            })
            .collect()
    };
    let per_tenant = |f: &dyn Fn(usize, usize) -> Option<f64>| -> Vec<(f64, String)> {
        (0..run.tenants.len())
            .filter_map(|t| {
                let values: Vec<f64> = settled.iter().filter_map(|&k| f(t, k)).collect();
                mean(values).map(|v| (v, run.tenants[t].clone()))
            })
            .collect()
    };
    let found = match (bound.subject, bound.figure) {
        (Subject::Tenant, Figure::RelErrorMean { grain }) => per_tenant(&|t, k| {
            let i = &run.intervals[k];
            let ideal = i.tenant_ideal_bps(t);
            judged(ideal, k)
                .then(|| beyond_grain(run.tenant_throughput_bps(i, t), ideal, grain, k) / ideal)
        }),
        (Subject::App, Figure::RelErrorMean { grain }) => per_class(&|c, k| {
            let i = &run.intervals[k];
            let ideal = i.class_ideal_bps(c);
            judged(ideal, k)
                .then(|| beyond_grain(i.class_throughput_bps(c), ideal, grain, k) / ideal)
        }),
        (Subject::App, Figure::AppErrorMean { of_tenant, grain }) => per_class(&|c, k| {
            let i = &run.intervals[k];
            let ideal = i.class_ideal_bps(c);
            let floor = ideal.max(of_tenant * i.tenant_ideal_bps(run.class_tenant[c]));
            (i.class_active(c) && judged(floor, k))
                .then(|| beyond_grain(i.class_throughput_bps(c), ideal, grain, k) / floor)
        }),
        (Subject::Tenant, Figure::AppErrorMean { .. }) => return None,
        (Subject::Tenant, Figure::OverCap { cap_min_bps, grain }) => (0..run.tenants.len())
            .filter_map(|t| {
                let cap = policy.tenants[t]
                    .max_rate_bps
                    .filter(|&m| m >= cap_min_bps)?;
                let active = |k: usize| run.intervals[k].tenant_active(t);
                let sent = |k: usize| run.tenant_throughput_bps(&run.intervals[k], t);
                over_cap(cap as f64, grain, &active, &sent).map(|v| (v, run.tenants[t].clone()))
            })
            .collect(),
        (Subject::App, Figure::OverCap { cap_min_bps, grain }) => (0..run.classes.len())
            .filter_map(|c| {
                let cap = app_cap(run, policy, c).filter(|&m| m >= cap_min_bps)?;
                let active = |k: usize| run.intervals[k].class_active(c);
                let sent = |k: usize| run.intervals[k].class_throughput_bps(c);
                over_cap(cap as f64, grain, &active, &sent).map(|v| (v, class_name(c)))
            })
            .collect(),
    };
    // A mean below the cap is no excess.
    let clamp = matches!(bound.figure, Figure::OverCap { .. });
    found
        .into_iter()
        .map(|(value, subject)| (if clamp { value.max(0.0) } else { value }, subject))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

fn app_cap(run: &RunRecord, policy: &policy::Policy, class: usize) -> Option<u64> {
    let name = &run.classes[class];
    let tenant = policy.tenants.iter().find(|t| t.name == name.tenant)?;
    tenant
        .apps
        .iter()
        .map(|&a| policy.app(a))
        .find(|a| a.name == name.app)?
        .max_rate_bps
}

/// What `bound` measures, in a few words.
fn label(bound: &Bound) -> &'static str {
    match (bound.subject, bound.figure) {
        (Subject::Tenant, Figure::OverCap { .. }) => "tenants above max_rate:",
        (Subject::App, Figure::OverCap { .. }) => "apps above max_rate:",
        (Subject::Tenant, _) => "tenants' mean error:",
        (Subject::App, _) => "apps' mean error:",
    }
}

/// The `claims` self-check: every bound of `bounds` (what `check` states for the
/// run's enforcer) whose condition `scenario` meets, held by the run's figures.
pub fn claims(run: &RunRecord, scenario: &Scenario, bounds: &[Bound]) -> Check {
    let mut broken = Vec::new();
    let mut held = Vec::new();
    for bound in bounds
        .iter()
        .filter(|b| condition_holds(b.condition, scenario))
    {
        let Some((value, subject)) = figure(run, &scenario.policy, bound) else {
            continue;
        };
        let (value, max) = (value * 100.0, bound.max * 100.0);
        if value > max {
            broken.push(format!("{subject} {value:.2}% against `{bound}`"));
        } else {
            held.push(format!(
                "{} {subject} {value:.2}% of {max:.2}%",
                label(bound)
            ));
        }
    }
    if !broken.is_empty() {
        return Check::new(
            "claims",
            false,
            format!(
                "beyond what `nicsched check` states for {}: {}",
                run.enforcer,
                broken.join("; ")
            ),
        );
    }
    let detail = if held.is_empty() {
        format!(
            "no bound `nicsched check` states for {} applies to this run's traffic or subjects",
            run.enforcer
        )
    } else {
        format!(
            "within what `nicsched check` states for {} (the worst subject of each bound): {}",
            run.enforcer,
            held.join("; ")
        )
    };
    Check::new("claims", true, detail)
}
