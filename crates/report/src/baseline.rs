//! Runs against a baseline, as criterion compares a benchmark with its saved
//! baseline: `nicsched compare NEW... --baseline OLD` matches runs by scenario,
//! enforcer and mode, gives the delta of every figure, and calls a figure regressed
//! when it got worse by more than its threshold. Worse has a direction per figure:
//! Jain's index down, relative error up, utilization down, a tenant's throughput
//! further from its ideal, a latency p99 up, drops up. It fails closed: what the
//! baseline had and a run lacks (a run, tenant, app or traffic missing, or there
//! but silent) is a regression too, unless `--expect-missing` names it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::summary::Summary;
use crate::table::{figure_cell, signed_figure_cell};

/// The kinds of figure a threshold is set for; each says how "worse" is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FigureKind {
    /// `fairness.jain_mean`, `fairness.jain_min`: down, relative to the baseline.
    Jain,
    /// `fairness.rel_error_mean`, `fairness.rel_error_max`: up, in fractions of the
    /// ideal (absolute: the figures are themselves relative).
    RelError,
    /// `utilization`: down, in fractions of the link (absolute).
    Utilization,
    /// `tenants.NAME.throughput_bps`: its distance from the tenant's ideal,
    /// |got − ideal| / ideal, up (absolute, in fractions of the ideal).
    Throughput,
    /// `latency.NAME.p99_us`: up, relative to the baseline (at least 1 µs).
    P99,
    /// `drops`: up, relative to the baseline (at least 1 packet).
    Drops,
}

impl FigureKind {
    pub const ALL: [FigureKind; 6] = [
        FigureKind::Jain,
        FigureKind::RelError,
        FigureKind::Utilization,
        FigureKind::Throughput,
        FigureKind::P99,
        FigureKind::Drops,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FigureKind::Jain => "jain",
            FigureKind::RelError => "rel_error",
            FigureKind::Utilization => "utilization",
            FigureKind::Throughput => "throughput",
            FigureKind::P99 => "p99",
            FigureKind::Drops => "drops",
        }
    }
}

/// The default threshold of every figure kind: criterion's noise threshold.
pub const THRESHOLD_DEFAULT: f64 = 0.05;

/// How much worse each kind of figure may get before it counts as regressed, in
/// the unit its [`FigureKind`] measures "worse" in.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Thresholds(BTreeMap<FigureKind, f64>);

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds(
            FigureKind::ALL
                .iter()
                .map(|&kind| (kind, THRESHOLD_DEFAULT))
                .collect(),
        )
    }
}

impl Thresholds {
    /// Applies one `--threshold` setting: `X` for every kind, `KIND=X` for one.
    /// Settings apply in order, so `0.1 p99=0.5` sets p99's apart from the rest.
    pub fn apply(&mut self, setting: &str) -> Result<(), String> {
        let (kinds, value) = match setting.split_once('=') {
            None => (FigureKind::ALL.to_vec(), setting),
            Some((name, value)) => {
                let kind = FigureKind::ALL
                    .into_iter()
                    .find(|kind| kind.name() == name.trim())
                    .ok_or_else(|| {
                        format!(
                            "`{name}` is not a figure kind; the kinds are {}",
                            FigureKind::ALL.map(FigureKind::name).join(", ")
                        )
                    })?;
                (vec![kind], value)
            }
        };
        let x = match value.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => x,
            _ => {
                return Err(format!(
                    "`{value}` is not a threshold: give a number at least 0, e.g. 0.05 for 5%"
                ));
            }
        };
        for kind in kinds {
            self.0.insert(kind, x);
        }
        Ok(())
    }

    pub fn of(&self, kind: FigureKind) -> f64 {
        self.0[&kind]
    }
}

/// One figure of a run against the same figure of its baseline run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FigureDelta {
    /// Its place in summary.json: `fairness.jain_mean`, `tenants.NAME.throughput_bps`.
    pub figure: String,
    pub kind: FigureKind,
    pub baseline: f64,
    pub value: f64,
    /// `value − baseline`, in the figure's own unit.
    pub delta: f64,
    /// How much worse the figure got, in the unit of its kind's threshold;
    /// negative when it got better.
    pub worse_by: f64,
    pub threshold: f64,
    /// `worse_by` above `threshold`.
    pub regressed: bool,
}

/// A run and its baseline run: same scenario, enforcer and mode.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunDelta {
    pub scenario: String,
    pub enforcer: String,
    pub mode: String,
    pub figures: Vec<FigureDelta>,
    /// Figures only one side has (a tenant or a latency traffic the other lacks,
    /// or that recorded no sample there), with the side that has it.
    pub one_sided: Vec<OneSided>,
    /// What the baseline run had and this run lacks or left silent.
    pub missing: Vec<Missing>,
}

/// What a baseline run had and a run lacks: a tenant, one of its apps, or a traffic
/// (known by its latency or pacing figures).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Missing {
    /// What `--expect-missing` names it by: `TENANT`, `TENANT/APP` or `TRAFFIC`.
    pub name: String,
    pub what: MissingKind,
    pub how: Absence,
    /// Its place in summary.json: the entry when missing (`tenants.NAME`,
    /// `tenants.NAME.apps.APP`, `latency.TRAFFIC`, `pacing.TRAFFIC`), the figure
    /// that fell to 0 when silent (`tenants.NAME.throughput_bps`,
    /// `tenants.NAME.apps.APP.throughput_bps`, `latency.TRAFFIC.count`,
    /// `pacing.TRAFFIC.samples`).
    pub figure: String,
    /// That figure in the baseline (bit/s, requests answered, gaps timed).
    pub baseline: f64,
    /// Named by `--expect-missing`: listed, not a regression.
    pub expected: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MissingKind {
    Tenant,
    App,
    Traffic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Absence {
    /// Not in the run's summary.json.
    Missing,
    /// There, but with nothing where the baseline had something: 0 bit/s, no
    /// request answered, no packet paced.
    Silent,
}

/// A baseline run no run of the results matches.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BaselineOnly {
    #[serde(flatten)]
    pub run: RunKey,
    /// Named by `--expect-missing SCENARIO/ENFORCER/MODE`: listed, not a regression.
    pub expected: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OneSided {
    pub figure: String,
    /// `baseline` or `results`.
    pub only_in: &'static str,
}

/// A run by its scenario, enforcer and mode.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RunKey {
    pub scenario: String,
    pub enforcer: String,
    pub mode: String,
}

impl RunKey {
    fn of(summary: &Summary) -> RunKey {
        RunKey {
            scenario: summary.scenario.clone(),
            enforcer: summary.enforcer.clone(),
            mode: summary.mode.as_str().to_string(),
        }
    }
}

impl std::fmt::Display for RunKey {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(out, "{}/{}/{}", self.scenario, self.enforcer, self.mode)
    }
}

/// Every run against its baseline run, and the runs without one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BaselineComparison {
    pub thresholds: Thresholds,
    pub runs: Vec<RunDelta>,
    /// Runs of the results no baseline run matches.
    pub only_in_results: Vec<RunKey>,
    /// Baseline runs no run of the results matches.
    pub only_in_baseline: Vec<BaselineOnly>,
    /// The names given to `--expect-missing`.
    pub expect_missing: Vec<String>,
    /// `SCENARIO/ENFORCER/MODE FIGURE` of every regressed figure and of everything
    /// missing or silent that was not expected; `SCENARIO/ENFORCER/MODE` alone for
    /// a baseline run missing from the results.
    pub regressions: Vec<String>,
}

/// How much worse `value` is than `baseline` for a figure of `kind` (see
/// [`FigureKind`]); `ideals` are the tenant's ideal in the baseline and the run.
fn worse_by(kind: FigureKind, baseline: f64, value: f64, ideals: (f64, f64)) -> f64 {
    match kind {
        FigureKind::Jain if baseline > 0.0 => (baseline - value) / baseline,
        FigureKind::Jain | FigureKind::Utilization => baseline - value,
        FigureKind::RelError => value - baseline,
        FigureKind::Throughput => {
            let off = |got: f64, ideal: f64| {
                if ideal > 0.0 {
                    (got - ideal).abs() / ideal
                } else {
                    // No ideal: anything it got is off; as a fraction of its
                    // own baseline's (or 1 bit/s), so the scale stays a ratio.
                    got / baseline.max(1.0)
                }
            };
            off(value, ideals.1) - off(baseline, ideals.0)
        }
        FigureKind::P99 | FigureKind::Drops => (value - baseline) / baseline.max(1.0),
    }
}

/// Matches every run of `results` with the baseline run of the same scenario,
/// enforcer and mode, and judges each figure by `thresholds`; what the baseline
/// had and the results lack is a regression unless `expect_missing` names it
/// (see [`Missing`] and [`BaselineOnly`]).
pub fn against_baseline(
    results: &[Summary],
    baseline: &[Summary],
    thresholds: &Thresholds,
    expect_missing: &[String],
) -> BaselineComparison {
    let expected = |names: &[&str]| {
        names
            .iter()
            .any(|name| expect_missing.iter().any(|e| e == name))
    };
    let mut runs = Vec::new();
    let mut only_in_results = Vec::new();
    for run in results {
        let key = RunKey::of(run);
        match baseline.iter().find(|b| RunKey::of(b) == key) {
            Some(base) => runs.push(run_delta(key, base, run, thresholds, &expected)),
            None => only_in_results.push(key),
        }
    }
    let only_in_baseline: Vec<BaselineOnly> = baseline
        .iter()
        .map(RunKey::of)
        .filter(|key| !results.iter().any(|r| RunKey::of(r) == *key))
        .map(|run| BaselineOnly {
            expected: expected(&[&run.to_string()]),
            run,
        })
        .collect();
    let mut regressions: Vec<String> = runs
        .iter()
        .flat_map(|run| {
            let key = run.key();
            let figures = run
                .figures
                .iter()
                .filter(|f| f.regressed)
                .map(|f| &f.figure);
            let missing = run
                .missing
                .iter()
                .filter(|m| !m.expected)
                .map(|m| &m.figure);
            figures
                .chain(missing)
                .map(move |figure| format!("{key} {figure}"))
        })
        .collect();
    regressions.extend(
        only_in_baseline
            .iter()
            .filter(|only| !only.expected)
            .map(|only| only.run.to_string()),
    );
    BaselineComparison {
        thresholds: thresholds.clone(),
        runs,
        only_in_results,
        only_in_baseline,
        expect_missing: expect_missing.to_vec(),
        regressions,
    }
}

fn run_delta(
    key: RunKey,
    base: &Summary,
    run: &Summary,
    thresholds: &Thresholds,
    expected: &dyn Fn(&[&str]) -> bool,
) -> RunDelta {
    let mut deltas = Deltas {
        thresholds,
        figures: Vec::new(),
        one_sided: Vec::new(),
    };
    deltas.headline(base, run);
    deltas.tenants(base, run);
    deltas.latencies(base, run);
    deltas.add(
        "drops".into(),
        FigureKind::Drops,
        base.drops() as f64,
        run.drops() as f64,
        NO_IDEALS,
    );
    RunDelta {
        scenario: key.scenario,
        enforcer: key.enforcer,
        mode: key.mode,
        figures: deltas.figures,
        one_sided: deltas.one_sided,
        missing: missing(base, run, expected),
    }
}

/// The ideals of a figure that has none: only throughput is judged against its ideal.
const NO_IDEALS: (f64, f64) = (0.0, 0.0);

/// The figures of one run against its baseline run as they are judged, in the
/// order the comparison lists them.
struct Deltas<'a> {
    thresholds: &'a Thresholds,
    figures: Vec<FigureDelta>,
    one_sided: Vec<OneSided>,
}

impl Deltas<'_> {
    /// Judges one figure both sides have; `ideals` are the baseline's and the
    /// run's, for a throughput.
    fn add(
        &mut self,
        figure: String,
        kind: FigureKind,
        baseline: f64,
        value: f64,
        ideals: (f64, f64),
    ) {
        let worse_by = worse_by(kind, baseline, value, ideals);
        let threshold = self.thresholds.of(kind);
        self.figures.push(FigureDelta {
            figure,
            kind,
            baseline,
            value,
            delta: value - baseline,
            worse_by,
            threshold,
            // A figure that cannot be judged (NaN, from a summary.json holding
            // values no run gives) fails the comparison rather than passing it.
            regressed: worse_by.is_nan() || worse_by > threshold,
        });
    }

    fn only_in(&mut self, figure: String, only_in: &'static str) {
        self.one_sided.push(OneSided { figure, only_in });
    }

    /// Utilization and the fairness figures.
    fn headline(&mut self, base: &Summary, run: &Summary) {
        let (b, r) = (&base.fairness, &run.fairness);
        self.add(
            "utilization".into(),
            FigureKind::Utilization,
            base.utilization,
            run.utilization,
            NO_IDEALS,
        );
        self.add(
            "fairness.jain_mean".into(),
            FigureKind::Jain,
            b.jain_mean,
            r.jain_mean,
            NO_IDEALS,
        );
        self.add(
            "fairness.jain_min".into(),
            FigureKind::Jain,
            b.jain_min,
            r.jain_min,
            NO_IDEALS,
        );
        self.add(
            "fairness.rel_error_mean".into(),
            FigureKind::RelError,
            b.rel_error_mean,
            r.rel_error_mean,
            NO_IDEALS,
        );
        self.add(
            "fairness.rel_error_max".into(),
            FigureKind::RelError,
            b.rel_error_max,
            r.rel_error_max,
            NO_IDEALS,
        );
    }

    /// Each tenant's throughput against its ideal: the baseline's tenants in
    /// its order, then the tenants only the run has.
    fn tenants(&mut self, base: &Summary, run: &Summary) {
        for tenant in &base.tenants {
            let figure = format!("tenants.{}.throughput_bps", tenant.name);
            match run.tenants.iter().find(|t| t.name == tenant.name) {
                Some(now) => self.add(
                    figure,
                    FigureKind::Throughput,
                    tenant.throughput_bps,
                    now.throughput_bps,
                    (tenant.ideal_bps, now.ideal_bps),
                ),
                None => self.only_in(figure, "baseline"),
            }
        }
        for tenant in run
            .tenants
            .iter()
            .filter(|t| !base.tenants.iter().any(|b| b.name == t.name))
        {
            self.only_in(format!("tenants.{}.throughput_bps", tenant.name), "results");
        }
    }

    /// Each traffic's latency p99, by name across both sides; a traffic that
    /// recorded no sample counts as absent on that side.
    fn latencies(&mut self, base: &Summary, run: &Summary) {
        let sampled = |summary: &Summary, traffic: &str| {
            summary
                .latency
                .get(traffic)
                .filter(|latency| latency.count > 0)
                .map(|latency| latency.p99_us)
        };
        let mut traffics: Vec<&String> = base.latency.keys().chain(run.latency.keys()).collect();
        traffics.sort_unstable();
        traffics.dedup();
        for traffic in traffics {
            let figure = format!("latency.{traffic}.p99_us");
            match (sampled(base, traffic), sampled(run, traffic)) {
                (Some(baseline), Some(value)) => {
                    self.add(figure, FigureKind::P99, baseline, value, NO_IDEALS)
                }
                (Some(_), None) => self.only_in(figure, "baseline"),
                (None, Some(_)) => self.only_in(figure, "results"),
                (None, None) => {}
            }
        }
    }
}

/// What `base` had and `run` lacks: each tenant, then each app of a tenant that
/// is there and not silent, then each traffic, by latency (requests answered) or
/// else pacing (departures timed), the first one that tells.
fn missing(base: &Summary, run: &Summary, expected: &dyn Fn(&[&str]) -> bool) -> Vec<Missing> {
    let mut found = Vec::new();
    let mut lacks = |name: String, what, how, figure: String, baseline: f64, names: &[&str]| {
        found.push(Missing {
            expected: expected(names),
            name,
            what,
            how,
            figure,
            baseline,
        })
    };
    for tenant in &base.tenants {
        let entry = format!("tenants.{}", tenant.name);
        let Some(now) = run.tenants.iter().find(|t| t.name == tenant.name) else {
            lacks(
                tenant.name.clone(),
                MissingKind::Tenant,
                Absence::Missing,
                entry,
                tenant.throughput_bps,
                &[&tenant.name],
            );
            continue;
        };
        if tenant.throughput_bps > 0.0 && now.throughput_bps <= 0.0 {
            lacks(
                tenant.name.clone(),
                MissingKind::Tenant,
                Absence::Silent,
                format!("{entry}.throughput_bps"),
                tenant.throughput_bps,
                &[&tenant.name],
            );
            continue;
        }
        for app in &tenant.apps {
            let name = format!("{}/{}", tenant.name, app.name);
            let entry = format!("{entry}.apps.{}", app.name);
            let names = [name.as_str(), tenant.name.as_str()];
            match now.apps.iter().find(|a| a.name == app.name) {
                None => lacks(
                    name.clone(),
                    MissingKind::App,
                    Absence::Missing,
                    entry,
                    app.throughput_bps,
                    &names,
                ),
                Some(now) if app.throughput_bps > 0.0 && now.throughput_bps <= 0.0 => lacks(
                    name.clone(),
                    MissingKind::App,
                    Absence::Silent,
                    format!("{entry}.throughput_bps"),
                    app.throughput_bps,
                    &names,
                ),
                Some(_) => {}
            }
        }
    }
    let mut traffics: Vec<&String> = base.latency.keys().chain(base.pacing.keys()).collect();
    traffics.sort_unstable();
    traffics.dedup();
    for traffic in traffics {
        // (figure, its count in the baseline, and in the run if it has the entry)
        let latency = base.latency.get(traffic).map(|b| {
            let now = run.latency.get(traffic).map(|r| r.count);
            (format!("latency.{traffic}"), "count", b.count, now)
        });
        let pacing = base.pacing.get(traffic).map(|b| {
            let now = run.pacing.get(traffic).map(|r| r.samples);
            (format!("pacing.{traffic}"), "samples", b.samples, now)
        });
        let lacking = latency
            .into_iter()
            .chain(pacing)
            .find_map(|(entry, field, was, now)| match now {
                None => Some((Absence::Missing, entry, was)),
                Some(0) if was > 0 => Some((Absence::Silent, format!("{entry}.{field}"), was)),
                Some(_) => None,
            });
        if let Some((how, figure, was)) = lacking {
            lacks(
                traffic.clone(),
                MissingKind::Traffic,
                how,
                figure,
                was as f64,
                &[traffic],
            );
        }
    }
    found
}

/// Decimals a figure of `kind` reads best with: counts and rates none.
fn decimals(kind: FigureKind) -> usize {
    match kind {
        FigureKind::Throughput | FigureKind::Drops => 0,
        FigureKind::P99 => 1,
        _ => 4,
    }
}

impl RunDelta {
    /// `SCENARIO/ENFORCER/MODE`, as regressions name the run.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.scenario, self.enforcer, self.mode)
    }
}

impl Missing {
    /// What is missing, and how, in words.
    fn described(&self) -> String {
        let what = match self.what {
            MissingKind::Tenant => "tenant",
            MissingKind::App => "app",
            MissingKind::Traffic => "traffic",
        };
        let was = figure_cell(self.baseline, 0);
        let how = match (self.how, self.what) {
            (Absence::Missing, _) => "missing from the results".to_string(),
            (Absence::Silent, MissingKind::Traffic) if self.figure.starts_with("latency.") => {
                format!("silent: no request answered, {was} in the baseline")
            }
            (Absence::Silent, MissingKind::Traffic) => {
                format!("silent: no packet sent, {was} gaps timed in the baseline")
            }
            (Absence::Silent, _) => format!("silent: 0 bit/s, {was} bit/s in the baseline"),
        };
        format!("{what} {} {how}", self.name)
    }
}

impl BaselineComparison {
    pub fn regressed(&self) -> bool {
        !self.regressions.is_empty()
    }

    /// One row per figure of every matched run; then what the baseline had and the
    /// results lack, regressed or expected; then the runs and figures only the
    /// results have. `markdown`: a Markdown table instead of aligned text.
    pub fn table(&self, markdown: bool) -> String {
        let header: Vec<String> = [
            "run",
            "figure",
            "baseline",
            "value",
            "delta",
            "worse by",
            "threshold",
            "",
        ]
        .map(String::from)
        .into();
        let rows: Vec<Vec<String>> = self
            .runs
            .iter()
            .flat_map(|run| {
                run.figures.iter().map(move |f| {
                    let decimals = decimals(f.kind);
                    vec![
                        run.key(),
                        f.figure.clone(),
                        figure_cell(f.baseline, decimals),
                        figure_cell(f.value, decimals),
                        signed_figure_cell(f.delta, decimals),
                        signed_figure_cell(f.worse_by, 4),
                        figure_cell(f.threshold, 4),
                        if f.regressed { "REGRESSED" } else { "ok" }.to_string(),
                    ]
                })
            })
            .collect();
        let mut out = if markdown {
            let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
            let mut table = line(&header);
            table.push_str(&line(&vec!["---".to_string(); header.len()]));
            for row in &rows {
                table.push_str(&line(row));
            }
            table
        } else {
            crate::table::aligned_table(&header, &rows, 3, false)
        };
        let mut notes = vec![
            "worse by: Jain's index, p99 and drops relative to the baseline; rel_error and utilization in absolute fractions; a tenant's throughput as the growth of its distance from its ideal, in fractions of the ideal".to_string(),
        ];
        let verdict = |expected: bool, name: &str| {
            if expected {
                format!("expected (--expect-missing {name})")
            } else {
                format!("REGRESSED; if that is intended, name it with --expect-missing {name}")
            }
        };
        for only in &self.only_in_baseline {
            let key = only.run.to_string();
            notes.push(format!(
                "{key}: in the baseline only, not among the results: {}",
                verdict(only.expected, &key)
            ));
        }
        for run in &self.runs {
            for m in &run.missing {
                notes.push(format!(
                    "{} {}: {}: {}",
                    run.key(),
                    m.figure,
                    m.described(),
                    verdict(m.expected, &m.name)
                ));
            }
        }
        for name in self.unused_expectations() {
            notes.push(format!(
                "--expect-missing {name}: no run, tenant, app or traffic of that name is missing or silent"
            ));
        }
        for key in &self.only_in_results {
            notes.push(format!("{key}: no baseline run to compare with"));
        }
        for run in &self.runs {
            // What only the baseline has is listed above, as missing or silent.
            for f in run.one_sided.iter().filter(|f| f.only_in == "results") {
                notes.push(format!("{} {}: in the results only", run.key(), f.figure));
            }
        }
        out.push('\n');
        for note in notes {
            if markdown {
                out += "- ";
            }
            out += &note;
            out.push('\n');
        }
        out
    }

    /// The `--expect-missing` names that named nothing missing or silent.
    fn unused_expectations(&self) -> impl Iterator<Item = &String> {
        self.expect_missing.iter().filter(|name| {
            let runs = self
                .only_in_baseline
                .iter()
                .any(|only| only.run.to_string() == **name);
            let inside = self.runs.iter().flat_map(|run| &run.missing).any(|m| {
                m.name == **name
                    || (m.what == MissingKind::App && m.name.split('/').next() == Some(name))
            });
            !runs && !inside
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worse_points_the_way_each_figure_gets_worse() {
        let none = (0.0, 0.0);
        assert!((worse_by(FigureKind::Jain, 1.0, 0.9, none) - 0.1).abs() < 1e-12);
        assert!(worse_by(FigureKind::Jain, 0.9, 1.0, none) < 0.0);
        assert!((worse_by(FigureKind::RelError, 0.01, 0.04, none) - 0.03).abs() < 1e-12);
        assert!((worse_by(FigureKind::Utilization, 0.99, 0.89, none) - 0.1).abs() < 1e-12);
        // 10% above the ideal, then 10% below it: as far off, not worse.
        assert!(worse_by(FigureKind::Throughput, 110.0, 90.0, (100.0, 100.0)).abs() < 1e-12);
        assert!(
            (worse_by(FigureKind::Throughput, 100.0, 80.0, (100.0, 100.0)) - 0.2).abs() < 1e-12
        );
        assert!((worse_by(FigureKind::P99, 100.0, 150.0, none) - 0.5).abs() < 1e-12);
        // From no drops, one is a whole packet's worth worse.
        assert_eq!(worse_by(FigureKind::Drops, 0.0, 1.0, none), 1.0);
    }

    #[test]
    fn thresholds_apply_in_order_and_refuse_what_is_not_one() {
        let mut thresholds = Thresholds::default();
        thresholds.apply("0.1").unwrap();
        thresholds.apply("p99=0.5").unwrap();
        assert_eq!(thresholds.of(FigureKind::Jain), 0.1);
        assert_eq!(thresholds.of(FigureKind::P99), 0.5);
        let error = thresholds.apply("latency=0.5").unwrap_err();
        assert!(
            error.contains("jain, rel_error, utilization, throughput, p99, drops"),
            "{error}"
        );
        assert!(thresholds.apply("-1").is_err());
        assert!(thresholds.apply("jain=x").is_err());
    }
}
