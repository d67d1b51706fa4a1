//! Figures of a run across hosts (hosts.md): per VM-to-VM flow and interval what
//! left the sender's link and what reached the receiving VM, judged against the
//! ideal across hosts, with the run's self-checks.

use crate::{Check, LatencyRecord};
use policy::{HostsScenario, Vm, ideal_across_hosts};
use serde::Serialize;
use std::collections::BTreeMap;

/// What a run across hosts measured, before any figure is derived. The lab's
/// engines each count their own host's side of a run in one.
#[derive(Clone, Debug, PartialEq)]
pub struct HostsRecord {
    pub enforcer: String,
    pub mode: crate::Mode,
    /// Per traffic, per interval: bytes that left the sender's link.
    pub sent_bytes: Vec<Vec<u64>>,
    /// Per traffic, per interval: bytes that reached the receiving VM.
    pub delivered_bytes: Vec<Vec<u64>>,
    /// Per traffic: bytes that left the sender's link, and that reached the VM,
    /// outside the run's intervals (the lab's programs start before time zero and
    /// its engines stop after the end); none in the simulator.
    pub sent_outside_bytes: Vec<u64>,
    pub delivered_outside_bytes: Vec<u64>,
    /// Per traffic: bytes offered to the sender's enforcer, refused by it, held in
    /// it at the end, dropped on the receiver's side, on their way at the end.
    pub offered_bytes: Vec<u64>,
    pub refused_bytes: Vec<u64>,
    pub queued_bytes: Vec<u64>,
    pub dropped_bytes: Vec<u64>,
    pub in_flight_bytes: Vec<u64>,
    pub latency: Vec<LatencyRecord>,
}

impl HostsRecord {
    /// Nothing counted yet: a zero for every traffic of `scenario`, and for each of
    /// its intervals.
    pub fn empty(scenario: &HostsScenario, enforcer: &str, mode: crate::Mode) -> HostsRecord {
        let flows = scenario.traffic.len();
        let intervals = scenario.duration_ns.div_ceil(scenario.interval_ns) as usize;
        HostsRecord {
            enforcer: enforcer.to_string(),
            mode,
            sent_bytes: vec![vec![0; intervals]; flows],
            delivered_bytes: vec![vec![0; intervals]; flows],
            sent_outside_bytes: vec![0; flows],
            delivered_outside_bytes: vec![0; flows],
            offered_bytes: vec![0; flows],
            refused_bytes: vec![0; flows],
            queued_bytes: vec![0; flows],
            dropped_bytes: vec![0; flows],
            in_flight_bytes: vec![0; flows],
            latency: Vec::new(),
        }
    }

    /// Adds `other`'s byte counts to these, traffic by traffic and interval by
    /// interval: one host's side of a run to the others'. Latency is no count, and
    /// stays as it is.
    pub fn add_counts(&mut self, other: &HostsRecord) {
        fn add(into: &mut [u64], from: &[u64]) {
            into.iter_mut().zip(from).for_each(|(a, b)| *a += b);
        }
        for (into, from) in self.sent_bytes.iter_mut().zip(&other.sent_bytes) {
            add(into, from);
        }
        for (into, from) in self.delivered_bytes.iter_mut().zip(&other.delivered_bytes) {
            add(into, from);
        }
        add(&mut self.sent_outside_bytes, &other.sent_outside_bytes);
        add(
            &mut self.delivered_outside_bytes,
            &other.delivered_outside_bytes,
        );
        add(&mut self.offered_bytes, &other.offered_bytes);
        add(&mut self.refused_bytes, &other.refused_bytes);
        add(&mut self.queued_bytes, &other.queued_bytes);
        add(&mut self.dropped_bytes, &other.dropped_bytes);
        add(&mut self.in_flight_bytes, &other.in_flight_bytes);
    }
}

#[derive(Debug, Serialize)]
pub struct FlowFigures {
    pub name: String,
    pub from: String,
    pub to: String,
    pub throughput_bps: f64,
    pub ideal_bps: f64,
    pub rel_error_mean: f64,
    pub dropped_bytes: u64,
    pub refused_bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct VmFigures {
    pub name: String,
    pub throughput_bps: f64,
    pub ideal_bps: f64,
    pub ingress_bps: f64,
    pub ingress_ideal_bps: f64,
}

#[derive(Debug, Serialize)]
pub struct HostFigures {
    pub name: String,
    pub link_rate_bps: u64,
    pub egress_bps_max: f64,
    pub ingress_bps_max: f64,
    pub tenants: Vec<VmFigures>,
}

#[derive(Debug, Serialize)]
pub struct HostsSummary {
    pub scenario: String,
    pub enforcer: String,
    pub mode: &'static str,
    pub duration_s: f64,
    pub hosts: Vec<HostFigures>,
    pub flows: Vec<FlowFigures>,
    pub fairness: BTreeMap<&'static str, f64>,
    pub latency: BTreeMap<String, crate::LatencySummary>,
    pub checks: Vec<Check>,
}

/// One row of timeseries.csv.
#[derive(Debug, Serialize)]
pub struct HostsRow {
    pub time_s: f64,
    pub host: String,
    pub tenant: String,
    pub app: String,
    pub flow: String,
    pub throughput_bps: f64,
    pub ideal_bps: f64,
}

/// Relative slack of the capacity checks beyond one frame per interval: float
/// rounding, and in the lab the sink's counts read a little off the intervals'
/// edges.
const CAPACITY_SLACK: f64 = 0.02;

/// A frame counts in the interval its last byte leaves in, so an interval may
/// hold what the rate carries in it plus one frame begun in the one before: the
/// largest, a TSO send of 64 KiB at the host's MTU, in bit/s over an interval. At
/// 100 Mbit/s and 100 ms intervals that is 5.4% of the link, so a relative slack
/// alone failed a link that never ran above its rate.
fn frame_slack_bps(run: &Intervals, host: &policy::Host) -> f64 {
    let mtu = host.policy.link.mtu_bytes;
    run.bps(u64::from(policy::wire::tcp_wire_bytes(
        policy::wire::TSO_BYTES_MAX,
        mtu,
    )))
}

/// How far an open-loop generator may fall short of what it was asked before
/// the `offered-demand` check says so, as in the one-host lab.
const OFFERED_TOLERANCE: f64 = 0.02;

/// `offered-demand` (scenario.md): what each open-loop traffic (udp, poisson)
/// offered its sender's enforcer over the time it ran, against `asked_bps`.
/// Returns the check and the demands the ideal is to use: the asked ones, with a
/// traffic that fell short at what it offered. Poisson arrivals vary by about
/// one over the square root of their count, so a short run of them is allowed
/// three such deviations before it counts as short.
fn offered_demand(
    scenario: &HostsScenario,
    record: &HostsRecord,
    mut asked_bps: Vec<f64>,
) -> (Check, Vec<f64>) {
    let loads: Vec<crate::OfferedLoad> = scenario
        .traffic
        .iter()
        .enumerate()
        .map(|(f, t)| {
            let ran_ns = t
                .traffic
                .stop_ns
                .min(scenario.duration_ns)
                .saturating_sub(t.traffic.start_ns);
            let (size_bytes, poisson) = match t.traffic.kind.pacing() {
                policy::Pacing::Datagrams {
                    size_bytes, gaps, ..
                } => (size_bytes, gaps == policy::Gaps::Exponential),
                _ => (0, false),
            };
            let ran_s = ran_ns as f64 / 1e9;
            let sends = asked_bps[f] * ran_s
                / (8.0 * f64::from(size_bytes + policy::wire::UDP_HEADER_BYTES));
            crate::OfferedLoad {
                traffic: &t.traffic.name,
                asked_bps: asked_bps[f],
                offered_bps: (size_bytes > 0 && ran_ns > 0)
                    .then(|| record.offered_bytes[f] as f64 * 8.0 / ran_s),
                tolerance: if poisson {
                    OFFERED_TOLERANCE.max(3.0 / sends.max(1.0).sqrt())
                } else {
                    OFFERED_TOLERANCE
                },
            }
        })
        .collect();
    let (check, short) = crate::offered_demand(&loads);
    for (f, load) in loads.iter().enumerate() {
        if let (true, Some(offered)) = (short[f], load.offered_bps) {
            asked_bps[f] = offered;
        }
    }
    (check, asked_bps)
}

/// What each traffic asks while it runs, all its flows together, as the one-host
/// ideal counts it ([`crate::measure::flow_demand_bps`]): the demands of the ideal
/// across hosts, in `summary.json` and in `nicsched explain` alike. `path` is the
/// rpc path that bounds what a closed-loop rpc asks.
pub fn asked_bps(scenario: &HostsScenario, path: &crate::measure::RpcPath) -> Vec<f64> {
    scenario
        .traffic
        .iter()
        .map(|t| {
            let link = &scenario.host(t.host).policy.link;
            crate::measure::flow_demand_bps(&t.traffic, link, path)
                * f64::from(t.traffic.kind.flows())
        })
        .collect()
}

/// `path` is the simulator's rpc path, which bounds what a closed-loop rpc asks.
pub fn summarise(
    scenario: &HostsScenario,
    record: &HostsRecord,
    path: &crate::measure::RpcPath,
) -> (HostsSummary, Vec<HostsRow>) {
    let (demand_check, asked_bps) = offered_demand(scenario, record, asked_bps(scenario, path));
    let run = Intervals::new(scenario, record, &asked_bps);
    let by_vm = ByVm::new(scenario);
    let (hosts, over_link, over_envelope) = host_figures(&run, &by_vm);
    let check = |name: &str, bad: Vec<String>, good: &str| Check {
        name: name.to_string(),
        ok: bad.is_empty(),
        detail: if bad.is_empty() {
            good.to_string()
        } else {
            bad.join("; ")
        },
    };
    let checks = vec![
        check(
            "conservation",
            unbalanced(scenario, record),
            "every flow: offered = sent + refused + queued, sent = delivered + dropped + on the way",
        ),
        check(
            "host-links",
            over_link,
            "no host link over its rate in any interval, either way",
        ),
        demand_check,
        check(
            "envelopes",
            over_envelope,
            "no VM over its envelope's max_rate in any interval, either way",
        ),
    ];
    let latency = record
        .latency
        .iter()
        .filter(|l| !l.histogram_ns.is_empty())
        .map(|l| {
            (
                l.traffic.clone(),
                crate::LatencySummary::from_histogram(&l.histogram_ns),
            )
        })
        .collect();
    (
        HostsSummary {
            scenario: scenario.name.clone(),
            enforcer: record.enforcer.clone(),
            mode: record.mode.as_str(),
            duration_s: scenario.duration_ns as f64 / 1e9,
            hosts,
            flows: flow_figures(&run),
            fairness: fairness(&run, &by_vm),
            latency,
            checks,
        },
        rows(&run),
    )
}

/// A run's flows interval by interval: what they sent and delivered, and the
/// ideal across hosts of the flows running in each interval.
struct Intervals<'a> {
    scenario: &'a HostsScenario,
    record: &'a HostsRecord,
    interval_s: f64,
    intervals: usize,
    flows: usize,
    /// Per flow, per interval, bit/s.
    ideal: Vec<Vec<f64>>,
    /// Per interval: whether the set of running flows stays the same throughout.
    steady: Vec<bool>,
}

impl<'a> Intervals<'a> {
    fn new(scenario: &'a HostsScenario, record: &'a HostsRecord, asked_bps: &[f64]) -> Self {
        let mut run = Intervals {
            scenario,
            record,
            interval_s: scenario.interval_ns as f64 / 1e9,
            intervals: record.delivered_bytes.first().map_or(0, Vec::len),
            flows: scenario.traffic.len(),
            ideal: Vec::new(),
            steady: Vec::new(),
        };
        let mut ideal = vec![vec![0.0; run.intervals]; run.flows];
        let mut steady = vec![false; run.intervals];
        let mut cache: BTreeMap<Vec<u64>, Vec<f64>> = BTreeMap::new();
        for k in 0..run.intervals {
            steady[k] = (0..run.flows).all(|f| run.running(f, k) == run.touched(f, k));
            let demand: Vec<f64> = (0..run.flows)
                .map(|f| if run.running(f, k) { asked_bps[f] } else { 0.0 })
                .collect();
            let key: Vec<u64> = demand.iter().map(|d| d.to_bits()).collect();
            let rates = cache
                .entry(key)
                .or_insert_with(|| ideal_across_hosts(scenario, &demand));
            for f in 0..run.flows {
                ideal[f][k] = rates[f];
            }
        }
        run.ideal = ideal;
        run.steady = steady;
        run
    }

    fn bps(&self, bytes: u64) -> f64 {
        bytes as f64 * 8.0 / self.interval_s
    }

    /// Interval `k`'s bounds, in ns.
    fn span(&self, k: usize) -> (u64, u64) {
        let interval_ns = self.scenario.interval_ns;
        (k as u64 * interval_ns, (k as u64 + 1) * interval_ns)
    }

    /// Whether flow `f` runs all of interval `k`: the intervals its figures count.
    fn running(&self, f: usize, k: usize) -> bool {
        let t = &self.scenario.traffic[f].traffic;
        let (from, to) = self.span(k);
        t.start_ns <= from && t.stop_ns >= to
    }

    /// Whether flow `f` runs at some time of interval `k`.
    fn touched(&self, f: usize, k: usize) -> bool {
        let t = &self.scenario.traffic[f].traffic;
        let (from, to) = self.span(k);
        t.start_ns < to && t.stop_ns > from
    }

    fn sent(&self, f: usize, k: usize) -> f64 {
        self.bps(self.record.sent_bytes[f][k])
    }

    fn delivered(&self, f: usize, k: usize) -> f64 {
        self.bps(self.record.delivered_bytes[f][k])
    }

    fn ideal(&self, f: usize, k: usize) -> f64 {
        self.ideal[f][k]
    }

    fn vm_name(&self, vm: Vm) -> String {
        self.scenario.tenant(vm).name.clone()
    }
}

/// The flows each VM sends (`out`) and receives (`into`), in the order of
/// [`HostsScenario::vms`].
struct ByVm {
    vms: Vec<Vm>,
    out: Vec<Vec<usize>>,
    into: Vec<Vec<usize>>,
}

impl ByVm {
    fn new(scenario: &HostsScenario) -> ByVm {
        let vms = scenario.vms();
        let flows_where = |of_vm: &dyn Fn(&policy::HostsTraffic) -> Vm| -> Vec<Vec<usize>> {
            vms.iter()
                .map(|&vm| {
                    (0..scenario.traffic.len())
                        .filter(|&f| of_vm(&scenario.traffic[f]) == vm)
                        .collect()
                })
                .collect()
        };
        let out = flows_where(&|t| t.from());
        let into = flows_where(&|t| t.to);
        ByVm { vms, out, into }
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// The sum over flows `fs` of `what` (bit/s) in interval `k`.
fn sum_at(fs: &[usize], k: usize, what: &dyn Fn(usize, usize) -> f64) -> f64 {
    fs.iter().map(|&f| what(f, k)).sum::<f64>()
}

/// Each flow's throughput and ideal over the intervals it runs throughout, and its
/// error against the ideal over the steady ones.
fn flow_figures(run: &Intervals) -> Vec<FlowFigures> {
    (0..run.flows)
        .map(|f| {
            let t = &run.scenario.traffic[f];
            let ks: Vec<usize> = (0..run.intervals).filter(|&k| run.running(f, k)).collect();
            FlowFigures {
                name: t.traffic.name.clone(),
                from: run.vm_name(t.from()),
                to: run.vm_name(t.to),
                throughput_bps: mean(ks.iter().map(|&k| run.delivered(f, k))),
                ideal_bps: mean(ks.iter().map(|&k| run.ideal(f, k))),
                rel_error_mean: mean(
                    ks.iter()
                        .filter(|&&k| run.steady[k] && run.ideal(f, k) > 0.0)
                        .map(|&k| (run.delivered(f, k) - run.ideal(f, k)).abs() / run.ideal(f, k)),
                ),
                dropped_bytes: run.record.dropped_bytes[f],
                refused_bytes: run.record.refused_bytes[f],
            }
        })
        .collect()
}

/// Jain's index over the VMs of what each delivered against its ideal, and the
/// relative errors, over the steady intervals.
fn fairness(run: &Intervals, by_vm: &ByVm) -> BTreeMap<&'static str, f64> {
    let mut jain = Vec::new();
    let mut rel = Vec::new();
    for k in (0..run.intervals).filter(|&k| run.steady[k]) {
        let ratios: Vec<f64> = by_vm
            .out
            .iter()
            .filter_map(|out| {
                let want = sum_at(out, k, &|f, k| run.ideal(f, k));
                (want > 0.0).then(|| sum_at(out, k, &|f, k| run.delivered(f, k)) / want)
            })
            .collect();
        if !ratios.is_empty() {
            let (s, s2) = ratios
                .iter()
                .fold((0.0, 0.0), |(a, b), r| (a + r, b + r * r));
            jain.push(s * s / (ratios.len() as f64 * s2.max(f64::MIN_POSITIVE)));
            rel.extend(ratios.iter().map(|r| (r - 1.0).abs()));
        }
    }
    let mut fairness = BTreeMap::new();
    fairness.insert("jain_mean", mean(jain.iter().copied()));
    fairness.insert(
        "jain_min",
        jain.iter().copied().fold(f64::INFINITY, f64::min).min(1.0),
    );
    fairness.insert("rel_error_mean", mean(rel.iter().copied()));
    fairness.insert("rel_error_max", rel.iter().copied().fold(0.0, f64::max));
    fairness
}

/// Each host's peaks each way and its VMs' figures, with the host links and the
/// VM envelopes that a peak went over.
fn host_figures(run: &Intervals, by_vm: &ByVm) -> (Vec<HostFigures>, Vec<String>, Vec<String>) {
    let mut hosts = Vec::new();
    let mut over_link = Vec::new();
    let mut over_envelope = Vec::new();
    let traffic = &run.scenario.traffic;
    for (h, host) in run.scenario.hosts.iter().enumerate() {
        let link = host.policy.link.rate_bps as f64;
        let from_host: Vec<usize> = (0..run.flows)
            .filter(|&f| traffic[f].host.index() == h)
            .collect();
        let to_host: Vec<usize> = (0..run.flows)
            .filter(|&f| traffic[f].to.host.index() == h)
            .collect();
        let egress_max = (0..run.intervals)
            .map(|k| sum_at(&from_host, k, &|f, k| run.sent(f, k)))
            .fold(0.0, f64::max);
        let ingress_max = (0..run.intervals)
            .map(|k| sum_at(&to_host, k, &|f, k| run.delivered(f, k)))
            .fold(0.0, f64::max);
        for (what, peak) in [("out", egress_max), ("in", ingress_max)] {
            if peak > link * (1.0 + CAPACITY_SLACK) + frame_slack_bps(run, host) {
                over_link.push(format!(
                    "{} {what}: {:.3e} bit/s in an interval, link {:.3e}",
                    host.name, peak, link
                ));
            }
        }
        let tenants = (0..by_vm.vms.len())
            .filter(|&v| by_vm.vms[v].host.index() == h)
            .map(|v| vm_figures(run, by_vm, v, &mut over_envelope))
            .collect();
        hosts.push(HostFigures {
            name: host.name.clone(),
            link_rate_bps: host.policy.link.rate_bps,
            egress_bps_max: egress_max,
            ingress_bps_max: ingress_max,
            tenants,
        });
    }
    (hosts, over_link, over_envelope)
}

/// VM `v`'s figures each way over the intervals it is active in, its peaks that
/// went over its envelope added to `over_envelope`.
fn vm_figures(
    run: &Intervals,
    by_vm: &ByVm,
    v: usize,
    over_envelope: &mut Vec<String>,
) -> VmFigures {
    let (out, inn) = (&by_vm.out[v], &by_vm.into[v]);
    let active = |fs: &[usize]| -> Vec<usize> {
        (0..run.intervals)
            .filter(|&k| fs.iter().any(|&f| run.running(f, k)))
            .collect()
    };
    let (active_out, active_in) = (active(out), active(inn));
    let sent = |f, k| run.sent(f, k);
    let delivered = |f, k| run.delivered(f, k);
    let ideal = |f, k| run.ideal(f, k);
    let tenant = run.scenario.tenant(by_vm.vms[v]);
    let limits = [
        (
            "out",
            out,
            tenant.max_rate_bps,
            &sent as &dyn Fn(usize, usize) -> f64,
        ),
        (
            "in",
            inn,
            tenant.ingress.and_then(|e| e.max_rate_bps),
            &delivered,
        ),
    ];
    for (what, fs, cap, measure) in limits {
        let Some(cap) = cap else { continue };
        let peak = (0..run.intervals)
            .map(|k| sum_at(fs, k, measure))
            .fold(0.0, f64::max);
        // What the ingress policer lets through at once, spread over an interval.
        let burst_bps = if what == "in" {
            run.bps(policy::INGRESS_BURST_BYTES)
        } else {
            0.0
        };
        let frame_bps = frame_slack_bps(run, &run.scenario.hosts[by_vm.vms[v].host.index()]);
        if peak > cap as f64 * (1.0 + CAPACITY_SLACK) + frame_bps + burst_bps {
            over_envelope.push(format!(
                "{} {what}: {:.3e} bit/s in an interval, envelope {:.3e}",
                tenant.name, peak, cap as f64
            ));
        }
    }
    VmFigures {
        name: tenant.name.clone(),
        throughput_bps: mean(active_out.iter().map(|&k| sum_at(out, k, &delivered))),
        ideal_bps: mean(active_out.iter().map(|&k| sum_at(out, k, &ideal))),
        ingress_bps: mean(active_in.iter().map(|&k| sum_at(inn, k, &delivered))),
        ingress_ideal_bps: mean(active_in.iter().map(|&k| sum_at(inn, k, &ideal))),
    }
}

/// The flows whose bytes do not add up, at the sender (offered = sent + refused +
/// queued) or past it (sent = delivered + dropped + on the way), saying how.
fn unbalanced(scenario: &HostsScenario, record: &HostsRecord) -> Vec<String> {
    (0..scenario.traffic.len())
        .filter_map(|f| {
            let sent: u64 =
                record.sent_bytes[f].iter().sum::<u64>() + record.sent_outside_bytes[f];
            let delivered: u64 =
                record.delivered_bytes[f].iter().sum::<u64>() + record.delivered_outside_bytes[f];
            let at_sender = sent + record.refused_bytes[f] + record.queued_bytes[f];
            let past_sender = delivered + record.dropped_bytes[f] + record.in_flight_bytes[f];
            (at_sender != record.offered_bytes[f] || past_sender != sent).then(|| {
                format!(
                    "{}: offered {} B, sent {sent} + refused {} + queued {}; delivered {delivered} + dropped {} + on the way {}",
                    scenario.traffic[f].traffic.name,
                    record.offered_bytes[f],
                    record.refused_bytes[f],
                    record.queued_bytes[f],
                    record.dropped_bytes[f],
                    record.in_flight_bytes[f]
                )
            })
        })
        .collect()
}

/// timeseries.csv: each flow in each interval it runs at some time of.
fn rows(run: &Intervals) -> Vec<HostsRow> {
    let mut rows = Vec::new();
    for k in 0..run.intervals {
        for f in (0..run.flows).filter(|&f| run.touched(f, k)) {
            let t = &run.scenario.traffic[f];
            let host = run.scenario.host(t.host);
            rows.push(HostsRow {
                time_s: (k as f64 + 1.0) * run.interval_s,
                host: host.name.clone(),
                tenant: run.vm_name(t.from()),
                app: host.policy.app(t.traffic.app).name.clone(),
                flow: t.traffic.name.clone(),
                throughput_bps: run.delivered(f, k),
                ideal_bps: run.ideal(f, k),
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_hosts() -> HostsScenario {
        let text = "name: t\nduration: 2s\ninterval: 500ms\nenforcers: [picnic]\nhosts:\n  - { name: h1, policy: { link: { rate: 1Gbit }, tenants: [ { name: a } ] } }\n  - { name: h2, policy: { link: { rate: 1Gbit }, tenants: [ { name: b } ] } }\ntraffic:\n  - { name: u, tenant: a, to: b, kind: udp, rate: 400Mbit, size: 1000B }\n";
        match policy::parse_any_scenario(text, "t.yaml", std::path::Path::new("."), &["picnic"])
            .expect("valid")
        {
            policy::AnyScenario::Hosts(s) => s,
            policy::AnyScenario::OneHost(_) => panic!("two hosts"),
        }
    }

    /// A record whose one udp traffic offered `offered_bps` at L3 for the whole run
    /// and delivered all of it.
    fn record(scenario: &HostsScenario, offered_bps: f64) -> HostsRecord {
        let intervals = (scenario.duration_ns / scenario.interval_ns) as usize;
        let per_interval = (offered_bps * scenario.interval_ns as f64 / 8e9) as u64;
        HostsRecord {
            enforcer: "picnic".into(),
            mode: crate::Mode::Sim,
            sent_outside_bytes: vec![0],
            delivered_outside_bytes: vec![0],
            sent_bytes: vec![vec![per_interval; intervals]],
            delivered_bytes: vec![vec![per_interval; intervals]],
            offered_bytes: vec![per_interval * intervals as u64],
            refused_bytes: vec![0],
            queued_bytes: vec![0],
            dropped_bytes: vec![0],
            in_flight_bytes: vec![0],
            latency: Vec::new(),
        }
    }

    fn demand_check(summary: &HostsSummary) -> &Check {
        summary
            .checks
            .iter()
            .find(|c| c.name == "offered-demand")
            .expect("offered-demand is checked")
    }

    #[test]
    fn a_generator_that_falls_short_is_flagged_and_judged_at_what_it_offered() {
        let scenario = two_hosts();
        let asked = 400e6 * 1028.0 / 1000.0;
        let path = crate::measure::RpcPath::default();

        let (summary, _) = summarise(&scenario, &record(&scenario, asked), &path);
        assert!(demand_check(&summary).ok, "{:?}", demand_check(&summary));
        assert!((summary.flows[0].ideal_bps - asked).abs() < 1.0);

        let (summary, _) = summarise(&scenario, &record(&scenario, 0.5 * asked), &path);
        let check = demand_check(&summary);
        assert!(!check.ok && check.detail.contains("the ideal uses the offered load"));
        assert!((summary.flows[0].ideal_bps - 0.5 * asked).abs() < 1e3);
        assert!(summary.flows[0].rel_error_mean < 1e-3);
    }

    #[test]
    fn hosts_sides_add_up_count_by_count_and_interval_by_interval() {
        let scenario = two_hosts();
        let mut sender = HostsRecord::empty(&scenario, "picnic", crate::Mode::Lab);
        sender.sent_bytes[0][1] = 700;
        sender.sent_outside_bytes[0] = 3;
        sender.offered_bytes[0] = 800;
        sender.refused_bytes[0] = 90;
        sender.queued_bytes[0] = 7;
        let mut receiver = HostsRecord::empty(&scenario, "picnic", crate::Mode::Lab);
        receiver.delivered_bytes[0][1] = 600;
        receiver.delivered_bytes[0][3] = 50;
        receiver.delivered_outside_bytes[0] = 2;
        receiver.dropped_bytes[0] = 40;
        receiver.in_flight_bytes[0] = 1;

        let mut all = HostsRecord::empty(&scenario, "picnic", crate::Mode::Lab);
        assert_eq!(all.sent_bytes, vec![vec![0; 4]], "2s in 500ms intervals");
        all.add_counts(&sender);
        all.add_counts(&receiver);
        all.add_counts(&sender);

        assert_eq!(all.sent_bytes, vec![vec![0, 1400, 0, 0]]);
        assert_eq!(all.delivered_bytes, vec![vec![0, 600, 0, 50]]);
        assert_eq!(
            (all.sent_outside_bytes[0], all.delivered_outside_bytes[0]),
            (6, 2)
        );
        assert_eq!(
            (
                all.offered_bytes[0],
                all.refused_bytes[0],
                all.queued_bytes[0]
            ),
            (1600, 180, 14)
        );
        assert_eq!((all.dropped_bytes[0], all.in_flight_bytes[0]), (40, 1));
        assert_eq!(all.enforcer, "picnic");
    }
}
