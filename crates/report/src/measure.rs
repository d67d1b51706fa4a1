//! The measurement frame of a run, the same for the simulator and the lab:
//! intervals, which traffic is active in each, the classes traffic is reported in,
//! and the ideal allocation each interval is judged against.

use crate::record::{ClassName, Interval, Mode, RunRecord};
use policy::wire::{UDP_HEADER_BYTES, serialisation_ns, tcp_wire_bytes};
use policy::{Allocation, Pacing, Scenario, Traffic, ideal_allocation};
use std::collections::BTreeMap;

/// The unloaded path a closed-loop rpc crosses, which bounds its demand: one way
/// between the host and its peer (propagation, one switch, the receiving stack), and
/// the server's time from a request's arrival to its response's send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcPath {
    pub wire_delay_ns: u64,
    pub server_delay_ns: u64,
}

impl Default for RpcPath {
    fn default() -> Self {
        RpcPath {
            wire_delay_ns: 10_000,
            server_delay_ns: 5_000,
        }
    }
}

/// Offered load of one flow of `traffic` in bit/s at L3, as the ideal allocation
/// sees it: infinite for backlogged senders, the configured rate for open-loop ones.
/// A closed-loop rpc connection can at most send one response per unloaded round
/// trip, which bounds its demand.
pub fn flow_demand_bps(traffic: &Traffic, link: &policy::Link, path: &RpcPath) -> f64 {
    match traffic.kind.pacing() {
        Pacing::Backlogged => f64::INFINITY,
        Pacing::Datagrams {
            rate_bps,
            size_bytes,
            ..
        } => {
            let wire_per_payload = f64::from(size_bytes + UDP_HEADER_BYTES) / f64::from(size_bytes);
            rate_bps as f64 * wire_per_payload / f64::from(traffic.kind.flows())
        }
        Pacing::Requests {
            response_bytes,
            rate_per_s: Some(rate),
            ..
        } => rate * response_bits(response_bytes, link) / f64::from(traffic.kind.flows()),
        Pacing::Requests { response_bytes, .. } => closed_loop_demand_bps(
            response_bytes,
            link,
            closed_loop_round_trip_ns(response_bytes, link, path),
        ),
    }
}

/// A response of `response_bytes` on `link`, in bits at L3: what an rpc's demand
/// counts (the requests cross the other way).
fn response_bits(response_bytes: u32, link: &policy::Link) -> f64 {
    f64::from(tcp_wire_bytes(response_bytes, link.mtu_bytes)) * 8.0
}

/// The round trip of one connection of a closed-loop rpc on the unloaded `path`:
/// there and back, the server's time, and the response's serialisation.
pub fn closed_loop_round_trip_ns(response_bytes: u32, link: &policy::Link, path: &RpcPath) -> u64 {
    2 * path.wire_delay_ns
        + path.server_delay_ns
        + serialisation_ns(
            tcp_wire_bytes(response_bytes, link.mtu_bytes),
            link.rate_bps,
        )
}

/// What one connection of a closed-loop rpc asks, in bit/s at L3, when each of
/// its round trips takes `round_trip_ns`: one response per round trip.
pub fn closed_loop_demand_bps(response_bytes: u32, link: &policy::Link, round_trip_ns: u64) -> f64 {
    response_bits(response_bytes, link) * 1e9 / round_trip_ns.max(1) as f64
}

/// Classes reported for a scenario: every app that some traffic uses, in policy order.
pub fn report_classes(scenario: &Scenario) -> Vec<policy::AppId> {
    let mut used = vec![false; scenario.policy.apps.len()];
    for t in &scenario.traffic {
        used[t.app.index()] = true;
    }
    (0..used.len())
        .filter(|&i| used[i])
        .map(|i| policy::AppId(i as u32))
        .collect()
}

pub fn class_names(scenario: &Scenario, classes: &[policy::AppId]) -> Vec<ClassName> {
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

/// The interval a byte that arrived at `at_ns` (counted from the run's time zero)
/// is counted in: intervals are (k·I, (k+1)·I], so a frame that finishes exactly
/// at a boundary counts in the interval it was sent in. Both worlds bucket by it.
pub fn interval_of(at_ns: u64, interval_ns: u64) -> usize {
    (at_ns.saturating_sub(1) / interval_ns.max(1)) as usize
}

/// What each traffic of `scenario` asks for, per flow, in bit/s at L3
/// ([`flow_demand_bps`]), in scenario order.
pub fn asked_demands_bps(scenario: &Scenario, path: &RpcPath) -> Vec<f64> {
    scenario
        .traffic
        .iter()
        .map(|t| flow_demand_bps(t, &scenario.policy.link, path))
        .collect()
}

/// The instants at which some traffic of `scenario` starts or stops, ascending:
/// the ideal allocation is constant between two of them.
pub fn traffic_boundaries(scenario: &Scenario) -> Vec<u64> {
    let mut boundaries: Vec<u64> = scenario
        .traffic
        .iter()
        .flat_map(|t| [t.start_ns, t.stop_ns])
        .collect();
    boundaries.sort_unstable();
    boundaries.dedup();
    boundaries
}

/// Which traffic of `scenario` runs at `at_ns`, in scenario order.
pub fn active_at(scenario: &Scenario, at_ns: u64) -> Vec<bool> {
    scenario
        .traffic
        .iter()
        .map(|t| t.start_ns <= at_ns && at_ns < t.stop_ns)
        .collect()
}

/// The ideal allocation while the traffic `active` marks runs, each of its flows
/// asking for `demands_bps` of its traffic (scenario order).
pub fn allocation_while(scenario: &Scenario, demands_bps: &[f64], active: &[bool]) -> Allocation {
    let mut per_app: Vec<Vec<f64>> = vec![Vec::new(); scenario.policy.apps.len()];
    for (i, t) in scenario.traffic.iter().enumerate() {
        if active[i] {
            let flows = t.kind.flows() as usize;
            per_app[t.app.index()].extend(std::iter::repeat_n(demands_bps[i], flows));
        }
    }
    ideal_allocation(&scenario.policy, &per_app)
}

/// Empty intervals with their ideal allocations and activity filled in, for the
/// per-flow demand of each traffic in `demands_bps` (scenario order): what it asked
/// for, or what it was measured to offer where a generator fell short.
pub fn intervals(
    scenario: &Scenario,
    demands_bps: &[f64],
    classes: &[policy::AppId],
) -> Vec<Interval> {
    let policy = &scenario.policy;
    let mut cache: BTreeMap<Vec<bool>, Allocation> = BTreeMap::new();
    let mut allocation_for = |active: &[bool]| -> Allocation {
        cache
            .entry(active.to_vec())
            .or_insert_with(|| allocation_while(scenario, demands_bps, active))
            .clone()
    };
    let boundaries = traffic_boundaries(scenario);

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
                let active = active_at(scenario, from);
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

/// The record a run of `enforcer` fills in, the same for both worlds: the run's
/// header, its report classes and its intervals with their ideals for
/// `demands_bps` (as [`intervals`]), nothing measured yet (no bytes, latency,
/// pacing, drops, frames or checks).
pub fn empty_record(
    scenario: &Scenario,
    enforcer: &str,
    mode: Mode,
    demands_bps: &[f64],
) -> RunRecord {
    let policy = &scenario.policy;
    let classes = report_classes(scenario);
    RunRecord {
        scenario: scenario.name.clone(),
        enforcer: enforcer.to_string(),
        mode,
        seed: scenario.seed,
        duration_ns: scenario.duration_ns,
        interval_ns: scenario.interval_ns,
        link_rate_bps: policy.link.rate_bps,
        tenants: policy.tenants.iter().map(|t| t.name.clone()).collect(),
        class_tenant: classes
            .iter()
            .map(|&a| policy.app(a).tenant.index())
            .collect(),
        classes: class_names(scenario, &classes),
        intervals: intervals(scenario, demands_bps, &classes),
        latency: Vec::new(),
        pacing: Vec::new(),
        tenant_drops: vec![0; policy.tenants.len()],
        tenant_frames: Vec::new(),
        engine_cpu: Vec::new(),
        backpressure: Vec::new(),
        frames_sent: 0,
        checks: Vec::new(),
        provenance: Default::default(),
        wall_s: 0.0,
    }
}
