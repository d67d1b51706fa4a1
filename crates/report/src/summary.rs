//! summary.json: the figures of one run, derived from its `RunRecord` alone so that the
//! same record always gives byte-identical JSON.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::checks::{Check, Provenance};
use crate::figures::{LatencySummary, jain_index, rel_error};
use crate::record::{GapStats, Interval, Mode, PacingRecord, RunRecord};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    pub enforcer: String,
    pub mode: Mode,
    pub duration_s: f64,
    pub interval_s: f64,
    pub link_rate_bps: u64,
    /// Mean over steady intervals with any active traffic of total throughput / link rate.
    pub utilization: f64,
    pub seed: u64,
    pub tenants: Vec<TenantSummary>,
    pub fairness: Fairness,
    /// Keyed by traffic name; a BTreeMap so the JSON does not depend on hash order.
    pub latency: BTreeMap<String, LatencySummary>,
    /// Keyed by traffic name: how evenly each traffic's flows were paced.
    pub pacing: BTreeMap<String, PacingSummary>,
    pub frames_sent: u64,
    /// The run's self-checks; a figure a failed check touches is not to be trusted.
    #[serde(default)]
    pub checks: Vec<Check>,
    #[serde(default)]
    pub provenance: Provenance,
}

/// Inter-departure times of one traffic: per flow mean and standard deviation, then
/// averaged over its flows (SENIC's Table 3 reports one class; its classes are alike).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PacingSummary {
    pub flows: u64,
    pub samples: u64,
    pub mean_gap_us: f64,
    pub std_gap_us: f64,
    pub std_gap_us_max: f64,
}

impl PacingSummary {
    fn from_record(record: &PacingRecord) -> Self {
        let measured: Vec<_> = record.flows.iter().filter(|f| f.count > 0).collect();
        let flows = measured.len() as u64;
        let average = |value: &dyn Fn(&GapStats) -> f64| {
            if measured.is_empty() {
                0.0
            } else {
                measured.iter().map(|f| value(f)).sum::<f64>() / measured.len() as f64
            }
        };
        PacingSummary {
            flows,
            samples: measured.iter().map(|f| f.count).sum(),
            mean_gap_us: average(&|f| f.mean_ns / 1e3),
            std_gap_us: average(&|f| f.std_ns() / 1e3),
            std_gap_us_max: measured
                .iter()
                .map(|f| f.std_ns() / 1e3)
                .fold(0.0, f64::max),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantSummary {
    pub name: String,
    /// Mean over the steady intervals in which the tenant was active.
    pub throughput_bps: f64,
    pub ideal_bps: f64,
    pub rel_error_mean: f64,
    pub rel_error_max: f64,
    pub drops: u64,
    /// The lab engine's count of the tenant's frames by fate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<crate::TenantFrames>,
    /// The fraction of the engine cores' busy time its packets took, where the run
    /// asked for engine cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_cpu_share: Option<f64>,
    /// Packets refused for want of room waiting for an engine core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_refused: Option<u64>,
    /// What the enforcer held for the tenant and its VM's ring, in the simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backpressure: Option<crate::Backpressure>,
    pub apps: Vec<AppSummary>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppSummary {
    pub name: String,
    /// Mean over the steady intervals in which the app was active.
    pub throughput_bps: f64,
    pub ideal_bps: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    pub jain_mean: f64,
    pub jain_min: f64,
    pub rel_error_mean: f64,
    pub rel_error_max: f64,
    /// Steady intervals with at least one active tenant that has an ideal: the ones the
    /// Jain figures are taken over.
    pub intervals: u64,
}

impl Summary {
    /// The checks that failed.
    pub fn failed_checks(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.ok)
    }

    /// Every tenant's drops, saturating at `u64::MAX`: a summary.json read back may
    /// hold any count, and a total that wrapped would read as fewer drops.
    pub fn drops(&self) -> u64 {
        self.tenants
            .iter()
            .fold(0, |total: u64, tenant| total.saturating_add(tenant.drops))
    }

    /// Pretty JSON as written to summary.json.
    pub fn to_json(&self) -> String {
        // Every figure is finite by construction and the keys are strings, so
        // serialization cannot fail.
        serde_json::to_string_pretty(self).expect("a Summary always serializes")
    }
}

/// Running mean, min and max; empty gives the `empty` value for all three rather than
/// NaN or infinities, which JSON cannot hold.
#[derive(Default)]
struct Accumulator {
    sum: f64,
    min: f64,
    max: f64,
    count: u64,
}

impl Accumulator {
    fn add(&mut self, value: f64) {
        if self.count == 0 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.sum += value;
        self.count += 1;
    }

    fn mean_or(&self, empty: f64) -> f64 {
        if self.count == 0 {
            empty
        } else {
            self.sum / self.count as f64
        }
    }

    fn min_or(&self, empty: f64) -> f64 {
        if self.count == 0 { empty } else { self.min }
    }

    fn max_or(&self, empty: f64) -> f64 {
        if self.count == 0 { empty } else { self.max }
    }
}

/// A tenant with an ideal allocation in an interval: the only ones fairness speaks of.
fn has_ideal(interval: &Interval, tenant: usize) -> bool {
    interval.tenant_active(tenant) && interval.tenant_ideal_bps(tenant) > 0.0
}

pub fn summarize(run: &RunRecord) -> Summary {
    debug_assert!(
        run.is_well_formed(),
        "RunRecord of {} has vectors of the wrong length",
        run.enforcer
    );
    let steady: Vec<&Interval> = run.intervals.iter().filter(|i| i.steady).collect();
    Summary {
        scenario: run.scenario.clone(),
        enforcer: run.enforcer.clone(),
        mode: run.mode,
        duration_s: run.duration_ns as f64 / 1e9,
        interval_s: run.interval_ns as f64 / 1e9,
        link_rate_bps: run.link_rate_bps,
        utilization: utilization(run, &steady),
        seed: run.seed,
        tenants: (0..run.tenants.len())
            .map(|tenant| tenant_summary(run, &steady, tenant))
            .collect(),
        fairness: fairness(run, &steady),
        latency: run
            .latency
            .iter()
            .map(|record| {
                let summary = LatencySummary::from_histogram(&record.histogram_ns);
                (record.traffic.clone(), summary)
            })
            .collect(),
        pacing: run
            .pacing
            .iter()
            .map(|record| (record.traffic.clone(), PacingSummary::from_record(record)))
            .collect(),
        frames_sent: run.frames_sent,
        checks: run.checks.clone(),
        provenance: run.provenance.clone(),
    }
}

fn utilization(run: &RunRecord, steady: &[&Interval]) -> f64 {
    if run.link_rate_bps == 0 {
        return 0.0;
    }
    let mut utilization = Accumulator::default();
    for interval in steady {
        let classes = 0..run.classes.len();
        if classes.clone().any(|class| interval.class_active(class)) {
            let total_bps: f64 = classes
                .map(|class| interval.class_throughput_bps(class))
                .sum();
            utilization.add(total_bps / run.link_rate_bps as f64);
        }
    }
    utilization.mean_or(0.0)
}

/// The fairness figures of one interval, as both summary.json and the plots take them.
pub(crate) struct IntervalFairness {
    pub jain: f64,
    /// (tenant, rel_error) for each tenant with an ideal in the interval.
    pub rel_error: Vec<(usize, f64)>,
}

/// None for an interval the fairness figures leave out: not steady, or without any
/// tenant that has an ideal to be judged against.
pub(crate) fn interval_fairness(run: &RunRecord, interval: &Interval) -> Option<IntervalFairness> {
    if !interval.steady {
        return None;
    }
    judged(
        (0..run.tenants.len())
            .filter(|&tenant| has_ideal(interval, tenant))
            .map(|tenant| {
                (
                    tenant,
                    run.tenant_throughput_bps(interval, tenant),
                    interval.tenant_ideal_bps(tenant),
                )
            }),
    )
}

/// The one definition of an interval's fairness, for a run's record and for what
/// report.html reads back from timeseries.csv: Jain's index of throughput / ideal
/// and each one's relative error, over the `(index, throughput_bps, ideal_bps)`
/// given that have an ideal; None when none has.
pub(crate) fn judged(
    shares: impl IntoIterator<Item = (usize, f64, f64)>,
) -> Option<IntervalFairness> {
    let mut ratios = Vec::new();
    let mut errors = Vec::new();
    for (index, throughput_bps, ideal_bps) in shares {
        if ideal_bps > 0.0 {
            ratios.push(throughput_bps / ideal_bps);
            errors.push((index, rel_error(throughput_bps, ideal_bps)));
        }
    }
    (!ratios.is_empty()).then(|| IntervalFairness {
        jain: jain_index(&ratios),
        rel_error: errors,
    })
}

fn fairness(run: &RunRecord, steady: &[&Interval]) -> Fairness {
    let mut jain = Accumulator::default();
    let mut error = Accumulator::default();
    for figures in steady
        .iter()
        .filter_map(|interval| interval_fairness(run, interval))
    {
        jain.add(figures.jain);
        for (_, rel_error) in figures.rel_error {
            error.add(rel_error);
        }
    }
    Fairness {
        jain_mean: jain.mean_or(1.0),
        jain_min: jain.min_or(1.0),
        rel_error_mean: error.mean_or(0.0),
        rel_error_max: error.max_or(0.0),
        intervals: jain.count,
    }
}

fn tenant_summary(run: &RunRecord, steady: &[&Interval], tenant: usize) -> TenantSummary {
    let mut throughput = Accumulator::default();
    let mut ideal = Accumulator::default();
    let mut error = Accumulator::default();
    for interval in steady.iter().filter(|i| i.tenant_active(tenant)) {
        let throughput_bps = run.tenant_throughput_bps(interval, tenant);
        let ideal_bps = interval.tenant_ideal_bps(tenant);
        throughput.add(throughput_bps);
        ideal.add(ideal_bps);
        if ideal_bps > 0.0 {
            error.add(rel_error(throughput_bps, ideal_bps));
        }
    }
    let apps = run
        .class_tenant
        .iter()
        .enumerate()
        .filter(|&(_, &owner)| owner == tenant)
        .map(|(class, _)| app_summary(run, steady, class))
        .collect();
    TenantSummary {
        name: run.tenants[tenant].clone(),
        throughput_bps: throughput.mean_or(0.0),
        ideal_bps: ideal.mean_or(0.0),
        rel_error_mean: error.mean_or(0.0),
        rel_error_max: error.max_or(0.0),
        drops: run.tenant_drops.get(tenant).copied().unwrap_or(0),
        frames: run.tenant_frames.get(tenant).cloned(),
        engine_cpu_share: run.engine_cpu.get(tenant).map(|cpu| {
            let busy_ns: u64 = run.engine_cpu.iter().map(|c| c.busy_ns).sum();
            if busy_ns == 0 {
                0.0
            } else {
                cpu.busy_ns as f64 / busy_ns as f64
            }
        }),
        engine_refused: run.engine_cpu.get(tenant).map(|cpu| cpu.refused_packets),
        backpressure: run.backpressure.get(tenant).cloned(),
        apps,
    }
}

fn app_summary(run: &RunRecord, steady: &[&Interval], class: usize) -> AppSummary {
    let mut throughput = Accumulator::default();
    let mut ideal = Accumulator::default();
    for interval in steady.iter().filter(|i| i.class_active(class)) {
        throughput.add(interval.class_throughput_bps(class));
        ideal.add(interval.class_ideal_bps(class));
    }
    AppSummary {
        name: run
            .classes
            .get(class)
            .map_or_else(String::new, |c| c.app.clone()),
        throughput_bps: throughput.mean_or(0.0),
        ideal_bps: ideal.mean_or(0.0),
    }
}
