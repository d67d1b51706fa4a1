//! `nicsched sweep`: one scenario simulated over a grid of values of its keys,
//! seeds and enforcers, summarised as a table, sweep.csv, sweep.json and a plot
//! per figure against the first swept key (docs/scenario.md, "Sweeps").
//!
//! Every value is set in the scenario's YAML tree and the result parsed by the
//! scenario parser a user's file goes through, before anything runs: a value that
//! file would refuse is refused here, in the parser's words.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use crate::{
    EXIT_CHECKS_FAILED, Failure, LAB_ONLY_ENFORCER, expand_all, jobs, provenance, unwritten,
};

/// Runs of one sweep at most: a grid is the product of its axes, and a typo in
/// `--seeds 1..10000` should not take the machine for a day.
const POINTS_MAX: usize = 10_000;

pub(crate) struct SweepArgs {
    pub scenario: PathBuf,
    pub sets: Vec<String>,
    pub seeds: Option<String>,
    pub enforcers: Vec<String>,
    pub jobs: Option<usize>,
    pub out: Option<PathBuf>,
    pub quiet: bool,
}

/// One `--set KEY=V1,V2,...`.
struct Axis {
    key: String,
    path: Vec<String>,
    /// The values as given, and as YAML read them.
    values: Vec<(String, Value)>,
}

fn parse_set(text: &str) -> Result<Axis, Failure> {
    let usage = || {
        Failure::input(format!(
            "--set {text}: give KEY=V1,V2,... with KEY a dotted path into the scenario, e.g. `--set policy.tenants.vm1.weight=1,2,4` (docs/scenario.md, \"Sweeps\")"
        ))
    };
    let (key, values) = text.split_once('=').ok_or_else(usage)?;
    let path: Vec<String> = key.split('.').map(str::to_string).collect();
    if path.iter().any(String::is_empty) {
        return Err(usage());
    }
    if path.len() == 1 && path[0] == "seed" {
        return Err(Failure::input(format!(
            "--set {text}: sweep the seed with --seeds (e.g. --seeds 1..5)"
        )));
    }
    let values: Vec<(String, Value)> = values
        .split(',')
        .map(|value| (value.to_string(), yaml_value(value)))
        .collect();
    if values.iter().any(|(value, _)| value.is_empty()) {
        return Err(usage());
    }
    Ok(Axis {
        key: key.to_string(),
        path,
        values,
    })
}

fn yaml_options() -> serde_saphyr::options::Options {
    // As the scenario parser reads YAML: `no`, `on` stay names.
    serde_saphyr::options! { strict_booleans: true }
}

/// A value as it would read written in the file: `4` a number, `10Gbit` a string.
fn yaml_value(text: &str) -> Value {
    serde_saphyr::from_str_with_options::<Value>(text, yaml_options())
        .unwrap_or_else(|_| Value::String(text.to_string()))
}

/// `--seeds 1..5` (inclusive) or `--seeds 3,7`.
fn parse_seeds(text: &str) -> Result<Vec<u64>, Failure> {
    let refused = || {
        Failure::input(format!(
            "--seeds {text}: give a range FIRST..LAST (inclusive, e.g. 1..5) or a list (e.g. 3,7) of whole numbers"
        ))
    };
    let number = |n: &str| n.trim().parse::<u64>().map_err(|_| refused());
    let seeds: Vec<u64> = match text.split_once("..") {
        Some((first, last)) => {
            let (first, last) = (number(first)?, number(last)?);
            if first > last {
                return Err(refused());
            }
            if last - first >= POINTS_MAX as u64 {
                return Err(Failure::input(format!(
                    "--seeds {text}: more than {POINTS_MAX} seeds, the most runs a sweep makes"
                )));
            }
            (first..=last).collect()
        }
        None => text.split(',').map(number).collect::<Result<_, _>>()?,
    };
    Ok(seeds)
}

/// Sets `value` at `path` in the scenario's tree. Every step but the last must
/// exist; the last may be a key the place does not have yet (the parser says
/// whether it may). A list is entered by index from 0 or by an entry's `name`. A
/// `policy:` naming a file is read in its place, so that its keys can be set.
fn set(tree: &mut Value, path: &[String], value: Value, base_dir: &Path) -> Result<(), String> {
    let mut node = tree;
    for (depth, step) in path.iter().enumerate() {
        let at = path[..depth].join(".");
        let place = if at.is_empty() {
            "the scenario".to_string()
        } else {
            format!("`{at}`")
        };
        let last = depth + 1 == path.len();
        if depth == 1
            && path[0] == "policy"
            && let Value::String(file) = node
        {
            let file_path = base_dir.join(&*file);
            let text = std::fs::read_to_string(&file_path)
                .map_err(|e| format!("{}: {e}", file_path.display()))?;
            *node = serde_saphyr::from_str_with_options::<Value>(&text, yaml_options())
                .map_err(|e| format!("{}: {e}", file_path.display()))?;
        }
        node = match node {
            Value::Object(map) if last => {
                map.insert(step.clone(), value);
                return Ok(());
            }
            Value::Object(map) => {
                if !map.contains_key(step) {
                    let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                    return Err(format!(
                        "{place} has no `{step}` (it has {})",
                        keys.join(", ")
                    ));
                }
                map.get_mut(step).expect("just looked up")
            }
            Value::Array(items) => {
                let count = items.len();
                let index = match step.parse::<usize>() {
                    Ok(index) if index < count => index,
                    Ok(_) => {
                        return Err(format!(
                            "{place} has {count} entries, indexed from 0: no `{step}`"
                        ));
                    }
                    Err(_) => {
                        let names: Vec<String> = items
                            .iter()
                            .filter_map(|item| item.get("name")?.as_str().map(str::to_string))
                            .collect();
                        names.iter().position(|name| name == step).ok_or_else(|| {
                            format!(
                                "{place} has no entry named `{step}` (named: {}; or give an index from 0)",
                                if names.is_empty() { "none".to_string() } else { names.join(", ") }
                            )
                        })?
                    }
                };
                if last {
                    items[index] = value;
                    return Ok(());
                }
                &mut items[index]
            }
            _ => return Err(format!("{place} is a value, not a map or list")),
        };
    }
    Ok(())
}

/// One set of values, one of each axis, and the scenario they make.
struct Setting {
    /// The value text of each axis, in axis order.
    values: Vec<String>,
    scenario: policy::Scenario,
}

/// Every combination of the axes' values, each scenario parsed and validated.
fn settings(path: &Path, axes: &[Axis]) -> Result<Vec<Setting>, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    let tree: Value = serde_saphyr::from_str_with_options(&text, yaml_options())
        .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    let base_dir = path.parent().unwrap_or(Path::new(""));
    let mut combinations: Vec<Vec<usize>> = vec![Vec::new()];
    for axis in axes {
        combinations = combinations
            .into_iter()
            .flat_map(|prefix| {
                (0..axis.values.len()).map(move |index| {
                    let mut combination = prefix.clone();
                    combination.push(index);
                    combination
                })
            })
            .collect();
    }
    combinations
        .into_iter()
        .map(|combination| {
            let mut tree = tree.clone();
            let mut said = Vec::new();
            for (axis, &index) in axes.iter().zip(&combination) {
                let (text, value) = &axis.values[index];
                set(&mut tree, &axis.path, value.clone(), base_dir).map_err(|e| {
                    Failure::input(format!("{}: --set {}: {e}", path.display(), axis.key))
                })?;
                said.push(format!("{}={text}", axis.key));
            }
            let yaml = serde_json::to_string_pretty(&tree).expect("a YAML tree is JSON");
            let file = path.display().to_string();
            let scenario = policy::parse_scenario(&yaml, &file, base_dir, &lab::enforcer_names())
                .map_err(|e| {
                let hint = e.hint.map(|h| format!(" (hint: {h})")).unwrap_or_default();
                Failure::input(format!(
                    "{file}: --set {}: {}{hint}",
                    said.join(" --set "),
                    e.message
                ))
            })?;
            Ok(Setting {
                values: combination
                    .iter()
                    .zip(axes)
                    .map(|(&index, axis)| axis.values[index].0.clone())
                    .collect(),
                scenario,
            })
        })
        .collect()
}

/// One run of the grid.
struct Point {
    setting: usize,
    seed: u64,
    enforcer: String,
}

pub(crate) fn sweep(args: SweepArgs) -> Result<(), Failure> {
    let path = &args.scenario;
    let base = match crate::load_scenario_to_run(path)? {
        policy::AnyScenario::OneHost(scenario) => scenario,
        policy::AnyScenario::Hosts(_) => {
            return Err(Failure::input(format!(
                "{}: nicsched sweep runs scenarios of one host (`policy:`); a scenario across hosts (`hosts:`) is not swept yet: run nicsched sim on each variant",
                path.display()
            )));
        }
    };
    if args.sets.is_empty() {
        return Err(Failure::input(
            "nicsched sweep: give at least one --set KEY=V1,V2,... (docs/scenario.md, \"Sweeps\")",
        ));
    }
    let axes: Vec<Axis> = args
        .sets
        .iter()
        .map(|set| parse_set(set))
        .collect::<Result<_, _>>()?;
    if let Some((_, twice)) = axes
        .iter()
        .enumerate()
        .find(|(i, axis)| axes[..*i].iter().any(|a| a.key == axis.key))
    {
        return Err(Failure::input(format!(
            "--set {}: the key is swept twice; give its values in one --set",
            twice.key
        )));
    }
    let seeds = match &args.seeds {
        Some(text) => parse_seeds(text)?,
        None => vec![base.seed],
    };
    let enforcers = expand_all(&args.enforcers, false);
    let enforcers: Vec<String> = if enforcers.is_empty() {
        base.enforcers
            .iter()
            .filter(|name| *name != LAB_ONLY_ENFORCER)
            .cloned()
            .collect()
    } else {
        enforcers
    };
    if let Some(name) = enforcers.iter().find(|name| *name == LAB_ONLY_ENFORCER) {
        return Err(Failure::input(format!(
            "enforcer `{name}` is the kernel's own HTB and runs only in the lab (nicsched lab)"
        )));
    }
    if enforcers.is_empty() {
        return Err(Failure::input(format!(
            "{}: no enforcer to simulate; name one with --enforcer",
            path.display()
        )));
    }
    let runs = axes
        .iter()
        .map(|axis| axis.values.len())
        .chain([seeds.len(), enforcers.len()])
        .fold(1usize, usize::saturating_mul);
    if runs > POINTS_MAX {
        return Err(Failure::input(format!(
            "nicsched sweep: the grid has {runs} runs (values × seeds × enforcers), more than {POINTS_MAX}; sweep fewer"
        )));
    }
    let settings = settings(path, &axes)?;
    for setting in &settings {
        for name in &enforcers {
            sched::build(name, &setting.scenario.policy).map_err(|e| {
                Failure::input(format!("{}: {}: {e}", path.display(), said(&axes, setting)))
            })?;
        }
    }
    let points: Vec<Point> = (0..settings.len())
        .flat_map(|setting| {
            seeds.iter().flat_map({
                let enforcers = &enforcers;
                move |&seed| {
                    enforcers.iter().map(move |enforcer| Point {
                        setting,
                        seed,
                        enforcer: enforcer.clone(),
                    })
                }
            })
        })
        .collect();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(format!("{}-sweep", base.name)));
    let out = report::OutDir::claim(&out, &[path.as_path()]).map_err(Failure::input)?;
    let provenance = provenance(path, base.seed)?;

    let summaries = run_grid(&settings, &points, args.jobs, args.quiet)?;
    let sweep = Sweep {
        scenario: &base.name,
        axes: &axes,
        settings: &settings,
        points: &points,
        summaries: &summaries,
        enforcers: &enforcers,
        seeds: &seeds,
    };
    let write = |name: &str, text: String| {
        let file = out.staging().join(name);
        std::fs::write(&file, text).map_err(|e| {
            unwritten(
                out.target(),
                std::io::Error::new(e.kind(), format!("{}: {e}", file.display())),
            )
        })
    };
    write("sweep.csv", sweep.csv())?;
    write("sweep.json", sweep.json())?;
    for figure in sweep.figures() {
        let file = out.staging().join(format!("{}.png", figure.file));
        report::write_sweep_plot(
            &file,
            &format!("{}: {} against {}", base.name, figure.title, axes[0].key),
            &axes[0].key,
            &axes[0]
                .values
                .iter()
                .map(|(text, _)| text.clone())
                .collect::<Vec<_>>(),
            &figure.title,
            figure.y_top_min.map(|least| {
                let highest = figure
                    .lines
                    .iter()
                    .flat_map(|line| line.points.iter().flatten())
                    .map(|point| point.max)
                    .fold(0.0, f64::max);
                least.max(highest * 1.1)
            }),
            &figure.lines,
        )
        .map_err(|e| unwritten(out.target(), e))?;
    }
    let target = out.target().to_path_buf();
    let written = out.commit(&provenance).map_err(|e| unwritten(&target, e))?;
    print!("{}", sweep.table());
    println!("results: {}", written.display());
    let failed: Vec<String> = points
        .iter()
        .zip(&summaries)
        .filter(|(_, summary)| summary.failed_checks().next().is_some())
        .map(|(point, summary)| {
            let checks: Vec<&str> = summary.failed_checks().map(|c| c.name.as_str()).collect();
            format!(
                "{} seed {} {}: {}",
                said(&axes, &settings[point.setting]),
                point.seed,
                point.enforcer,
                checks.join(", ")
            )
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure {
            message: format!(
                "self-checks failed ({}): those runs are flagged in sweep.csv (checks_failed), not vouched for",
                failed.join("; ")
            ),
            status: EXIT_CHECKS_FAILED,
        })
    }
}

/// `KEY=VALUE ...` of a setting.
fn said(axes: &[Axis], setting: &Setting) -> String {
    axes.iter()
        .zip(&setting.values)
        .map(|(axis, value)| format!("{}={value}", axis.key))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs every point on `jobs` threads (default: every core) and keeps only each
/// run's summary: a record holds every interval of every class, a summary a few
/// figures, so the grid's memory stays that of `jobs` runs.
fn run_grid(
    settings: &[Setting],
    points: &[Point],
    jobs: Option<usize>,
    quiet: bool,
) -> Result<Vec<report::Summary>, Failure> {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(points.len() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("sweep [{bar:30}] {pos:>5}/{len} runs  {elapsed}")
            .expect("constant template")
            .progress_chars("=> "),
    );
    let results = jobs::map(points, jobs::threads(jobs, points.len()), |point| {
        let mut scenario = settings[point.setting].scenario.clone();
        scenario.seed = point.seed;
        let outcome = sim::run(
            &scenario,
            &point.enforcer,
            sim::HostModel::default(),
            &mut |_| {},
        )
        .map(|record| report::summarize(&record))
        .map_err(|e| e.to_string());
        bar.inc(1);
        outcome
    });
    bar.finish_and_clear();
    results
        .into_iter()
        .map(|outcome| outcome.map_err(Failure::input))
        .collect()
}

/// A figure read from a run's summary; `None` where the run has none (a tenant
/// without an ideal, a traffic without latency).
type Reading = Box<dyn Fn(&report::Summary) -> Option<f64>>;

/// A figure of every run, as the table, the CSV and the plots take it.
struct Figure {
    /// The CSV column, the plot's file name (without .png) and its y label.
    column: String,
    file: String,
    title: String,
    /// The least top of the plot's axis, so that sweeps compare by eye: Jain's
    /// index and utilization 0..1 (and a little room), relative error at least
    /// 0..1. `None`: from the data alone.
    y_top_min: Option<f64>,
    value: Reading,
    lines: Vec<report::SweepLine>,
}

struct Sweep<'a> {
    scenario: &'a str,
    axes: &'a [Axis],
    settings: &'a [Setting],
    points: &'a [Point],
    summaries: &'a [report::Summary],
    enforcers: &'a [String],
    seeds: &'a [u64],
}

/// Letters, digits, `-` and `_` of a name, so that it makes a file name.
fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Sweep<'_> {
    /// Tenants and latency traffics of any run, in the order first met.
    fn names(&self) -> (Vec<String>, Vec<String>) {
        let (mut tenants, mut traffics) = (Vec::new(), Vec::new());
        for summary in self.summaries {
            for tenant in &summary.tenants {
                if !tenants.contains(&tenant.name) {
                    tenants.push(tenant.name.clone());
                }
            }
            for (traffic, latency) in &summary.latency {
                if latency.count > 0 && !traffics.contains(traffic) {
                    traffics.push(traffic.clone());
                }
            }
        }
        (tenants, traffics)
    }

    /// The figures plotted and tabled: the fairness figures, utilization, each
    /// tenant's throughput over its ideal and each latency traffic's p99.
    fn figure_specs(&self) -> Vec<Figure> {
        let figure = |column: &str, title: &str, y_top_min, value: Reading| Figure {
            column: column.to_string(),
            file: file_name(column),
            title: title.to_string(),
            y_top_min,
            value,
            lines: Vec::new(),
        };
        let mut figures = vec![
            figure(
                "jain_mean",
                "Jain's index (mean)",
                Some(1.05),
                Box::new(|s| Some(s.fairness.jain_mean)),
            ),
            figure(
                "rel_error_mean",
                "relative error (mean)",
                Some(1.0),
                Box::new(|s| Some(s.fairness.rel_error_mean)),
            ),
            figure(
                "utilization",
                "utilization",
                Some(1.05),
                Box::new(|s| Some(s.utilization)),
            ),
        ];
        let (tenants, traffics) = self.names();
        for tenant in tenants {
            let name = tenant.clone();
            figures.push(figure(
                &format!("share.{tenant}"),
                &format!("throughput / ideal of {tenant}"),
                None,
                Box::new(move |s| {
                    let t = s.tenants.iter().find(|t| t.name == name)?;
                    (t.ideal_bps > 0.0).then(|| t.throughput_bps / t.ideal_bps)
                }),
            ));
        }
        for traffic in traffics {
            let name = traffic.clone();
            figures.push(figure(
                &format!("p99_us.{traffic}"),
                &format!("p99 latency of {traffic} (µs)"),
                None,
                Box::new(move |s| {
                    s.latency
                        .get(&name)
                        .filter(|l| l.count > 0)
                        .map(|l| l.p99_us)
                }),
            ));
        }
        figures
    }

    /// The settings that differ only in the first axis' value, as lines: the
    /// values of the other axes, in setting order.
    fn rest_of(&self, setting: usize) -> Vec<String> {
        self.settings[setting].values[1..].to_vec()
    }

    /// Mean, lowest and highest over the seeds of `value` at one setting and enforcer.
    fn spread(
        &self,
        setting: usize,
        enforcer: &str,
        value: &dyn Fn(&report::Summary) -> Option<f64>,
    ) -> Option<report::SweepPoint> {
        let values: Vec<f64> = self
            .points
            .iter()
            .zip(self.summaries)
            .filter(|(p, _)| p.setting == setting && p.enforcer == enforcer)
            .filter_map(|(_, s)| value(s))
            .collect();
        (!values.is_empty()).then(|| report::SweepPoint {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }

    /// Lines of a figure: per enforcer and values of the other axes, the first
    /// axis' values in order.
    fn figures(&self) -> Vec<Figure> {
        let first_len = self.axes[0].values.len();
        // Settings are the cross product with the first axis outermost: setting
        // `x * rest + r` has the first axis' value x and the others' combination r.
        let rest = self.settings.len() / first_len;
        let mut figures = self.figure_specs();
        for figure in &mut figures {
            for enforcer in self.enforcers {
                for r in 0..rest {
                    let others = self.rest_of(r);
                    let mut name = enforcer.clone();
                    for (axis, value) in self.axes[1..].iter().zip(&others) {
                        name.push_str(&format!(" {}={value}", axis.key));
                    }
                    let points = (0..first_len)
                        .map(|x| self.spread(x * rest + r, enforcer, &*figure.value))
                        .collect();
                    figure.lines.push(report::SweepLine { name, points });
                }
            }
        }
        figures
    }

    fn csv(&self) -> String {
        let (tenants, traffics) = self.names();
        let mut header: Vec<String> = self
            .axes
            .iter()
            .map(|a| report::csv_field(&a.key))
            .collect();
        header.extend(
            [
                "seed",
                "enforcer",
                "utilization",
                "jain_mean",
                "jain_min",
                "rel_error_mean",
                "rel_error_max",
                "drops",
            ]
            .map(str::to_string),
        );
        for tenant in &tenants {
            for column in ["throughput_bps", "ideal_bps", "share"] {
                header.push(report::csv_field(&format!("{column}.{tenant}")));
            }
        }
        for traffic in &traffics {
            header.push(report::csv_field(&format!("p99_us.{traffic}")));
        }
        header.push("checks_failed".to_string());
        let mut text = header.join(",") + "\n";
        for (point, summary) in self.points.iter().zip(self.summaries) {
            let mut row: Vec<String> = self.settings[point.setting]
                .values
                .iter()
                .map(|v| report::csv_field(v))
                .collect();
            let f = &summary.fairness;
            row.extend([
                point.seed.to_string(),
                report::csv_field(&point.enforcer),
                summary.utilization.to_string(),
                f.jain_mean.to_string(),
                f.jain_min.to_string(),
                f.rel_error_mean.to_string(),
                f.rel_error_max.to_string(),
                summary.drops().to_string(),
            ]);
            for tenant in &tenants {
                match summary.tenants.iter().find(|t| &t.name == tenant) {
                    Some(t) => row.extend([
                        t.throughput_bps.to_string(),
                        t.ideal_bps.to_string(),
                        if t.ideal_bps > 0.0 {
                            (t.throughput_bps / t.ideal_bps).to_string()
                        } else {
                            String::new()
                        },
                    ]),
                    None => row.extend([String::new(), String::new(), String::new()]),
                }
            }
            for traffic in &traffics {
                row.push(
                    summary
                        .latency
                        .get(traffic)
                        .filter(|l| l.count > 0)
                        .map_or_else(String::new, |l| l.p99_us.to_string()),
                );
            }
            let failed: Vec<&str> = summary.failed_checks().map(|c| c.name.as_str()).collect();
            row.push(report::csv_field(&failed.join(";")));
            text.push_str(&row.join(","));
            text.push('\n');
        }
        text
    }

    fn json(&self) -> String {
        let points: Vec<Value> = self
            .points
            .iter()
            .zip(self.summaries)
            .map(|(point, summary)| {
                let values: serde_json::Map<String, Value> = self
                    .axes
                    .iter()
                    .zip(&self.settings[point.setting].values)
                    .map(|(axis, value)| (axis.key.clone(), Value::String(value.clone())))
                    .collect();
                let failed: Vec<&str> = summary.failed_checks().map(|c| c.name.as_str()).collect();
                serde_json::json!({
                    "values": values,
                    "seed": point.seed,
                    "enforcer": point.enforcer,
                    "checks_failed": failed,
                    "summary": summary,
                })
            })
            .collect();
        let keys: BTreeMap<&str, Vec<&str>> = self
            .axes
            .iter()
            .map(|axis| {
                (
                    axis.key.as_str(),
                    axis.values.iter().map(|(t, _)| t.as_str()).collect(),
                )
            })
            .collect();
        let sweep = serde_json::json!({
            "scenario": self.scenario,
            "keys": self.axes.iter().map(|a| a.key.as_str()).collect::<Vec<_>>(),
            "values": keys,
            "seeds": self.seeds,
            "enforcers": self.enforcers,
            "points": points,
        });
        serde_json::to_string_pretty(&sweep).expect("figures are finite") + "\n"
    }

    /// Mean ± half the range over seeds, per setting and enforcer; a run whose
    /// checks failed is counted in `checks`.
    fn table(&self) -> String {
        let figures = self.figure_specs();
        let mut header: Vec<String> = self.axes.iter().map(|a| a.key.clone()).collect();
        header.push("enforcer".to_string());
        header.extend(figures.iter().map(|f| f.column.clone()));
        header.push("checks".to_string());
        let mut rows = Vec::new();
        for (setting, values) in self.settings.iter().enumerate() {
            for enforcer in self.enforcers {
                let mut row = values.values.clone();
                row.push(enforcer.clone());
                for figure in &figures {
                    row.push(match self.spread(setting, enforcer, &*figure.value) {
                        Some(p) => {
                            // Four significant digits of a ratio near 1, fewer
                            // decimals for latencies in the hundreds of µs.
                            let decimals = match p.mean.abs() {
                                m if m >= 100.0 => 1,
                                m if m >= 10.0 => 2,
                                _ => 4,
                            };
                            if self.seeds.len() > 1 {
                                let half_range = (p.max - p.min) / 2.0;
                                format!("{:.decimals$} ±{half_range:.decimals$}", p.mean)
                            } else {
                                format!("{:.decimals$}", p.mean)
                            }
                        }
                        None => "-".to_string(),
                    });
                }
                let runs: Vec<&report::Summary> = self
                    .points
                    .iter()
                    .zip(self.summaries)
                    .filter(|(p, _)| p.setting == setting && &p.enforcer == enforcer)
                    .map(|(_, s)| s)
                    .collect();
                let failed = runs
                    .iter()
                    .filter(|s| s.failed_checks().next().is_some())
                    .count();
                row.push(if failed == 0 {
                    "ok".to_string()
                } else {
                    format!("FAILED {failed}/{}", runs.len())
                });
                rows.push(row);
            }
        }
        report::aligned_table(&header, &rows, self.axes.len() + 1, true)
    }
}
