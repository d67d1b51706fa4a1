//! `nicsched sweep`: one scenario simulated over a grid of values of its keys,
//! seeds and enforcers, summarised as a table, sweep.csv, sweep.json and a plot
//! per figure that varies, against the first swept key (docs/scenario.md, "Sweeps").
//!
//! A sweep runs what its rows say. Each key is resolved to the one place it
//! reaches in the scenario's tree, so that an index and a name of one entry are
//! one key; every setting is parsed by the scenario parser a user's file goes
//! through, before anything runs, so that a value that file would refuse is
//! refused here in the parser's words; and a key none of whose values changes the
//! scenario that runs (overridden, ignored) is refused rather than labelling rows
//! with values that never ran.
//!
//! Memory is that of the runs at once, not of the grid: settings are parsed one
//! at a time and dropped, a run parses its own when it starts, and the figures of
//! each finished run go to a scratch file in the staging folder, from which the
//! CSV, the JSON, the table and the plots are written at the end.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs::File;
use std::hash::Hasher;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use run::enforcers::{For, chosen};

use crate::{EXIT_CHECKS_FAILED, Failure, jobs, provenance, unwritten};

// A child of the sweep for the grid, order and figures it keeps to itself, in a
// file of its own beside it.
#[path = "shard.rs"]
pub(crate) mod shard;

/// Runs of one sweep at most: a grid is the product of its axes, and a typo in
/// `--seeds 1..10000` should not take the machine for a day.
const POINTS_MAX: usize = 10_000;

/// Characters of a user's text (a key, a value) shown in a message, the table or a
/// plot: a value may carry a YAML comment of any length.
const SHOWN_CHARS_MAX: usize = 40;

/// Characters of the scenario parser's message on a setting: it may quote a value.
const MESSAGE_CHARS_MAX: usize = 300;

/// Names listed in a message on a list that has no such entry.
const NAMES_LISTED_MAX: usize = 8;

/// Plots (and table columns) of tenants' shares, and of traffics' p99, at most:
/// those that vary most over the grid. Every tenant's and traffic's figures are in
/// sweep.csv and sweep.json.
const PLOTS_OF_KIND_MAX: usize = 12;

/// Lines of one plot at most (an enforcer and a combination of the other keys'
/// values each): each has its own colour and legend entry.
const PLOT_LINES_MAX: usize = 24;

/// Relative change below which a figure is taken not to vary over the grid: the
/// last bits of a float mean summed in another order.
const VARIES_RELATIVE: f64 = 1e-9;

/// A run's memory beyond what its classes take: the simulator, the enforcer's
/// tables, the scenario.
const RUN_BYTES_BASE: u64 = 16 << 20;
/// Per interval cell (an interval of one tenant, app or flow): the record's
/// bytes and the ideal's rate of it, 16 bytes, twice over for what is built
/// from them (a 19.8M-cell run took 185 MB in a sweep, issue 24).
const RUN_BYTES_PER_CELL: u64 = 32;
/// Per class or flow: its sender, queue and statistics in the simulator and the
/// enforcer (a 3,600-tenant scenario of 8,436 classes took about 30 MB a run,
/// docs/scenario.md "Sweeps").
const RUN_BYTES_PER_CLASS: u64 = 4096;

pub(crate) struct SweepArgs {
    pub scenario: PathBuf,
    pub sets: Vec<String>,
    pub seeds: Option<String>,
    pub enforcers: Vec<String>,
    pub jobs: Option<usize>,
    pub out: Option<PathBuf>,
    pub quiet: bool,
    pub plan: shard::Plan,
}

/// A user's text as it may be printed: control characters escaped (`\u{1b}`),
/// so that a value cannot move the cursor or colour the terminal, and cut short.
fn shown(text: &str) -> String {
    cut(&escaped(text), SHOWN_CHARS_MAX)
}

fn escaped(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn cut(text: &str, most: usize) -> String {
    let count = text.chars().count();
    if count <= most {
        text.to_string()
    } else {
        let kept: String = text.chars().take(most).collect();
        format!("{kept}… ({count} characters)")
    }
}

/// Names, the first few of them.
fn listed(names: &[String]) -> String {
    if names.is_empty() {
        return "none".to_string();
    }
    let first: Vec<String> = names
        .iter()
        .take(NAMES_LISTED_MAX)
        .map(|n| shown(n))
        .collect();
    if names.len() > NAMES_LISTED_MAX {
        format!("{}, … ({} in all)", first.join(", "), names.len())
    } else {
        first.join(", ")
    }
}

/// One step into the scenario's tree, as resolved: a map's key or a list's index.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

fn place_text(place: &[Step]) -> String {
    place
        .iter()
        .map(|step| match step {
            Step::Key(key) => key.clone(),
            Step::Index(index) => index.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// One `--set KEY=V1,V2,...`.
struct Axis {
    /// As given.
    key: String,
    /// Where the key reaches in the scenario's tree.
    place: Vec<Step>,
    /// The values as given, and as YAML read them.
    values: Vec<(String, Value)>,
}

/// A `--set` as given: its key, the key's steps and its values.
type GivenSet = (String, Vec<String>, Vec<(String, Value)>);

fn parse_set(text: &str) -> Result<GivenSet, Failure> {
    let usage = || {
        Failure::input(format!(
            "--set {}: give KEY=V1,V2,... with KEY a dotted path into the scenario, e.g. `--set policy.tenants.vm1.weight=1,2,4` (docs/scenario.md, \"Sweeps\")",
            shown(text)
        ))
    };
    let (key, values) = text.split_once('=').ok_or_else(usage)?;
    let path: Vec<String> = key.split('.').map(str::to_string).collect();
    if path.iter().any(String::is_empty) {
        return Err(usage());
    }
    if path.len() == 1 && path[0] == "seed" {
        return Err(Failure::input(
            "--set seed: sweep the seed with --seeds (e.g. --seeds 1..5)",
        ));
    }
    let values: Vec<(String, Value)> = values
        .split(',')
        .map(|value| (value.to_string(), yaml_value(value)))
        .collect();
    if values.iter().any(|(value, _)| value.is_empty()) {
        return Err(usage());
    }
    Ok((key.to_string(), path, values))
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
            "--seeds {}: give a range FIRST..LAST (inclusive, e.g. 1..5) or a list (e.g. 3,7) of whole numbers",
            shown(text)
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
                    "--seeds {}: more than {POINTS_MAX} seeds, the most runs a sweep makes",
                    shown(text)
                )));
            }
            (first..=last).collect()
        }
        None => text.split(',').map(number).collect::<Result<_, _>>()?,
    };
    Ok(seeds)
}

/// Where `path` reaches in `tree`. Every step but the last must exist; the last
/// may be a key the place does not have yet (the parser says whether it may). A
/// list is entered by index from 0 or by an entry's `name`.
fn resolve(tree: &Value, path: &[String]) -> Result<Vec<Step>, String> {
    let mut node = tree;
    let mut place = Vec::new();
    for (depth, step) in path.iter().enumerate() {
        let at = path[..depth].join(".");
        let here = if at.is_empty() {
            "the scenario".to_string()
        } else {
            format!("`{}`", shown(&at))
        };
        let last = depth + 1 == path.len();
        node = match node {
            Value::Object(map) => {
                place.push(Step::Key(step.clone()));
                match map.get(step) {
                    Some(next) => next,
                    None if last => return Ok(place),
                    None => {
                        let keys: Vec<String> = map.keys().cloned().collect();
                        return Err(format!(
                            "{here} has no `{}` (it has {})",
                            shown(step),
                            listed(&keys)
                        ));
                    }
                }
            }
            Value::Array(items) => {
                let count = items.len();
                let index = match step.parse::<usize>() {
                    Ok(index) if index < count => index,
                    Ok(_) => {
                        return Err(format!(
                            "{here} has {count} entries, indexed from 0: no `{}`",
                            shown(step)
                        ));
                    }
                    Err(_) => {
                        let names: Vec<String> = items
                            .iter()
                            .filter_map(|item| item.get("name")?.as_str().map(str::to_string))
                            .collect();
                        items
                            .iter()
                            .position(|item| item.get("name").and_then(Value::as_str) == Some(step))
                            .ok_or_else(|| {
                                format!(
                                    "{here} has no entry named `{}` (named: {}; or give an index from 0)",
                                    shown(step),
                                    listed(&names)
                                )
                            })?
                    }
                };
                place.push(Step::Index(index));
                &items[index]
            }
            _ => return Err(format!("{here} is a value, not a map or list")),
        };
    }
    Ok(place)
}

/// The value at `place`, where there is one.
fn get<'t>(tree: &'t Value, place: &[Step]) -> Option<&'t Value> {
    place.iter().try_fold(tree, |node, step| match step {
        Step::Key(key) => node.get(key),
        Step::Index(index) => node.get(index),
    })
}

/// Sets `value` at `place`, as [`resolve`] found it in the same tree; `None`
/// where the tree is not the one it was resolved in.
fn set(tree: &mut Value, place: &[Step], value: Value) -> Option<()> {
    let (last, steps) = place.split_last()?;
    let mut node = tree;
    for step in steps {
        node = match step {
            Step::Key(key) => node.get_mut(key)?,
            Step::Index(index) => node.get_mut(index)?,
        };
    }
    match (last, node) {
        (Step::Key(key), Value::Object(map)) => {
            map.insert(key.clone(), value);
        }
        (Step::Index(index), Value::Array(items)) => *items.get_mut(*index)? = value,
        _ => return None,
    }
    Some(())
}

/// The scenario file and its axes: setting `s` takes from axis `a` the value
/// `(s / stride(a)) % len(a)`, the first axis outermost.
struct Grid {
    file: String,
    base_dir: PathBuf,
    tree: Value,
    axes: Vec<Axis>,
    settings: usize,
}

impl Grid {
    /// Reads the scenario's tree once (and a `policy:` file in its place where a
    /// key enters it) and resolves every key; refuses two keys that reach one
    /// place or one inside the other, and keys no run takes from the scenario.
    fn new(path: &Path, sets: &[GivenSet]) -> Result<Grid, Failure> {
        let file = path.display().to_string();
        let base_dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
        let read = |path: &Path| -> Result<Value, Failure> {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
            serde_saphyr::from_str_with_options(&text, yaml_options())
                .map_err(|e| Failure::input(format!("{}: {e}", path.display())))
        };
        let mut tree = read(path)?;
        if sets.iter().any(|(_, steps, _)| steps[0] == "policy")
            && let Some(Value::String(policy)) = tree.get("policy")
        {
            let policy = read(&base_dir.join(policy))?;
            set(&mut tree, &[Step::Key("policy".into())], policy)
                .expect("the scenario has a `policy` key");
        }
        let mut axes: Vec<Axis> = Vec::new();
        for (key, steps, values) in sets {
            let refused =
                |why: String| Failure::input(format!("{file}: --set {}: {why}", shown(key)));
            let place = resolve(&tree, steps).map_err(refused)?;
            if place[0] == Step::Key("enforcers".into()) {
                return Err(refused(
                    "a sweep runs the enforcers of -e (or, without -e, those of the file's `enforcers:`): sweep them with -e NAME for each".into(),
                ));
            }
            if let [Step::Key(policy), Step::Key(link), Step::Key(field)] = &place[..]
                && policy == "policy"
                && link == "link"
                && get(&tree, &[Step::Key("link".into()), Step::Key(field.clone())]).is_some()
            {
                return Err(refused(format!(
                    "the scenario's own `link: {{{field}: ...}}` overrides the policy's, so no value of this key would run: set `link.{field}` instead"
                )));
            }
            for earlier in &axes {
                let (a, b) = (&earlier.place, &place);
                let (shorter, longer) = if a.len() <= b.len() { (a, b) } else { (b, a) };
                if longer.starts_with(shorter) {
                    let why = if a.len() == b.len() {
                        format!(
                            "it reaches the same value as `--set {}` (`{}`): give its values in one --set",
                            shown(&earlier.key),
                            shown(&place_text(&place))
                        )
                    } else {
                        format!(
                            "it and `--set {}` reach one value, one inside the other (`{}` and `{}`): sweep one of them",
                            shown(&earlier.key),
                            shown(&place_text(&place)),
                            shown(&place_text(&earlier.place))
                        )
                    };
                    return Err(refused(why));
                }
            }
            axes.push(Axis {
                key: key.clone(),
                place,
                values: values.clone(),
            });
        }
        let settings = axes
            .iter()
            .map(|axis| axis.values.len())
            .fold(1usize, usize::saturating_mul);
        Ok(Grid {
            file,
            base_dir,
            tree,
            axes,
            settings,
        })
    }

    fn stride(&self, axis: usize) -> usize {
        self.axes[axis + 1..]
            .iter()
            .map(|a| a.values.len())
            .product()
    }

    /// The index of axis `axis`'s value in setting `setting`.
    fn index(&self, setting: usize, axis: usize) -> usize {
        (setting / self.stride(axis)) % self.axes[axis].values.len()
    }

    /// The values of a setting as given, in axis order.
    fn values(&self, setting: usize) -> impl Iterator<Item = &str> {
        (0..self.axes.len())
            .map(move |axis| self.axes[axis].values[self.index(setting, axis)].0.as_str())
    }

    /// `KEY=VALUE ...` of a setting, as it may be printed.
    fn said(&self, setting: usize) -> String {
        self.axes
            .iter()
            .zip(self.values(setting))
            .map(|(axis, value)| format!("{}={}", shown(&axis.key), shown(value)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The scenario of a setting, as parsed from the tree with its values set
    /// (but axis `omit`'s).
    fn scenario(&self, setting: usize, omit: Option<usize>) -> Result<policy::Scenario, Failure> {
        let mut tree = self.tree.clone();
        for (axis, index) in (0..self.axes.len()).map(|a| (a, self.index(setting, a))) {
            if Some(axis) == omit {
                continue;
            }
            set(
                &mut tree,
                &self.axes[axis].place,
                self.axes[axis].values[index].1.clone(),
            )
            .expect("keys on different places are set in any order");
        }
        let yaml = serde_json::to_string(&tree).expect("a YAML tree is JSON");
        policy::parse_scenario(&yaml, &self.file, &self.base_dir, &lab::enforcer_names()).map_err(
            |e| {
                let hint = e.hint.map(|h| format!(" (hint: {h})")).unwrap_or_default();
                Failure::input(format!(
                    "{}: --set {}: {}",
                    self.file,
                    self.said(setting),
                    cut(&escaped(&format!("{}{hint}", e.message)), MESSAGE_CHARS_MAX)
                ))
            },
        )
    }
}

/// What a run takes from its scenario, as a hash: the scenario but for what a
/// sweep sets itself (the seed, the enforcers) and its name, which changes no
/// figure. Two settings of one hash run alike.
fn run_hash(scenario: &policy::Scenario) -> u64 {
    struct Hashing(std::collections::hash_map::DefaultHasher);
    impl std::fmt::Write for Hashing {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.write(s.as_bytes());
            Ok(())
        }
    }
    let mut hashing = Hashing(Default::default());
    write!(
        hashing,
        "{:?}{}{}{:?}",
        scenario.policy, scenario.duration_ns, scenario.interval_ns, scenario.traffic
    )
    .expect("hashing does not fail");
    hashing.0.finish()
}

/// A run's memory, as [`RUN_BYTES_BASE`] and the rest estimate it.
fn run_bytes(scenario: &policy::Scenario) -> u64 {
    let intervals = scenario.duration_ns.div_ceil(scenario.interval_ns.max(1));
    let flows: u64 = scenario
        .traffic
        .iter()
        .map(|t| u64::from(t.kind.flows()))
        .sum();
    let classes = (scenario.policy.tenants.len() + scenario.policy.apps.len()) as u64 + flows;
    RUN_BYTES_BASE + classes * (intervals * RUN_BYTES_PER_CELL + RUN_BYTES_PER_CLASS)
}

/// Tenants and rpc traffics (those with latency) of any setting, in the order
/// first met; and the largest run's memory.
struct Columns {
    tenants: Vec<String>,
    traffics: Vec<String>,
    run_bytes: u64,
}

/// Names by the setting and position they were first met at.
#[derive(Default)]
struct FirstMet(HashMap<String, (usize, usize)>);

impl FirstMet {
    fn meet<'n>(&mut self, setting: usize, names: impl Iterator<Item = &'n str>) {
        for (position, name) in names.enumerate() {
            match self.0.get_mut(name) {
                Some(first) => *first = (*first).min((setting, position)),
                None => {
                    self.0.insert(name.to_string(), (setting, position));
                }
            }
        }
    }

    fn in_order(self) -> Vec<String> {
        let mut names: Vec<(String, (usize, usize))> = self.0.into_iter().collect();
        names.sort_by_key(|(_, first)| *first);
        names.into_iter().map(|(name, _)| name).collect()
    }
}

/// Parses and validates every setting, `threads` at a time, each dropped once
/// checked, and refuses an axis whose values change nothing that runs.
fn validate(grid: &Grid, enforcers: &[String], threads: usize) -> Result<Columns, Failure> {
    let hashes = Mutex::new(vec![0u64; grid.settings]);
    let met = Mutex::new((FirstMet::default(), FirstMet::default(), 0u64));
    jobs::try_each(grid.settings, threads, |setting| {
        let scenario = grid.scenario(setting, None)?;
        for name in enforcers {
            sched::build(name, &scenario.policy).map_err(|e| {
                Failure::input(format!(
                    "{}: --set {}: {}",
                    grid.file,
                    grid.said(setting),
                    cut(&escaped(&e.to_string()), MESSAGE_CHARS_MAX)
                ))
            })?;
        }
        let hash = run_hash(&scenario);
        hashes.lock().expect("no worker panics holding it")[setting] = hash;
        let mut met = met.lock().expect("no worker panics holding it");
        met.0.meet(
            setting,
            scenario.policy.tenants.iter().map(|t| t.name.as_str()),
        );
        met.1.meet(
            setting,
            scenario
                .traffic
                .iter()
                .filter(|t| t.kind.has_requests())
                .map(|t| t.name.as_str()),
        );
        met.2 = met.2.max(run_bytes(&scenario));
        Ok::<(), Failure>(())
    })?;
    let hashes = hashes.into_inner().expect("workers are done");
    for (a, axis) in grid.axes.iter().enumerate() {
        let changes = if axis.values.len() > 1 {
            // Some two settings that differ in this axis' value alone run differently.
            let (stride, count) = (grid.stride(a), axis.values.len());
            (0..grid.settings).any(|s| hashes[s] != hashes[s - (s / stride) % count * stride])
        } else {
            // One value: it changes the run (or makes it valid), or the file
            // already says it.
            get(&grid.tree, &axis.place) == Some(&axis.values[0].1)
                || grid
                    .scenario(0, Some(a))
                    .ok()
                    .is_none_or(|without| run_hash(&without) != hashes[0])
        };
        if !changes {
            return Err(Failure::input(format!(
                "{}: --set {}: no value of this key changes what runs (the scenario parses the same for each: the key is overridden or ignored, or its values are one value written differently); sweep a key that the run takes",
                grid.file,
                shown(&axis.key)
            )));
        }
    }
    let (tenants, traffics, run_bytes) = met.into_inner().expect("workers are done");
    Ok(Columns {
        tenants: tenants.in_order(),
        traffics: traffics.in_order(),
        run_bytes,
    })
}

/// The figures of a run kept for the files, the table and the plots, by column:
/// [`FIXED`] figures, then a throughput and an ideal per tenant, then a p99 per
/// traffic; NaN where the run has none (a tenant it does not have, a traffic that
/// answered nothing).
const FIXED: [&str; 5] = [
    "utilization",
    "jain_mean",
    "jain_min",
    "rel_error_mean",
    "rel_error_max",
];

fn figures_of(summary: &report::Summary, columns: &Columns, at: &Lookup) -> Vec<f64> {
    let f = &summary.fairness;
    let mut row = vec![f64::NAN; FIXED.len() + 2 * columns.tenants.len() + columns.traffics.len()];
    row[..FIXED.len()].copy_from_slice(&[
        summary.utilization,
        f.jain_mean,
        f.jain_min,
        f.rel_error_mean,
        f.rel_error_max,
    ]);
    for tenant in &summary.tenants {
        if let Some(&column) = at.tenants.get(&tenant.name) {
            row[FIXED.len() + 2 * column] = tenant.throughput_bps;
            row[FIXED.len() + 2 * column + 1] = tenant.ideal_bps;
        }
    }
    for (traffic, latency) in &summary.latency {
        if let Some(&column) = at.traffics.get(traffic)
            && latency.count > 0
        {
            row[FIXED.len() + 2 * columns.tenants.len() + column] = latency.p99_us;
        }
    }
    row
}

/// Columns by name.
struct Lookup {
    tenants: HashMap<String, usize>,
    traffics: HashMap<String, usize>,
}

/// A figure the table and a plot show: read from a run's row of figures.
#[derive(Clone, Copy)]
enum Figure {
    Fixed(usize),
    /// Throughput / ideal of the tenant of this column, where it has an ideal.
    Share(usize),
    P99(usize),
}

impl Figure {
    fn read(self, row: &[f64], tenants: usize) -> Option<f64> {
        let value = match self {
            Figure::Fixed(index) => row[index],
            Figure::Share(column) => {
                let (throughput, ideal) = (
                    row[FIXED.len() + 2 * column],
                    row[FIXED.len() + 2 * column + 1],
                );
                if ideal > 0.0 {
                    throughput / ideal
                } else {
                    f64::NAN
                }
            }
            Figure::P99(column) => row[FIXED.len() + 2 * tenants + column],
        };
        (!value.is_nan()).then_some(value)
    }
}

/// What the finished runs leave in memory: per shown candidate its lowest and
/// highest value over the grid, each run's drops and its failed checks' names.
struct Fold {
    ranges: Vec<(f64, f64)>,
    drops: Vec<u64>,
    failed: BTreeMap<usize, Vec<String>>,
}

impl Fold {
    fn new(candidates: usize, runs: usize) -> Fold {
        Fold {
            ranges: vec![(f64::INFINITY, f64::NEG_INFINITY); candidates],
            drops: vec![0; runs],
            failed: BTreeMap::new(),
        }
    }

    /// A finished run's figures (`row`), drops and failed checks.
    fn add(
        &mut self,
        point: usize,
        row: &[f64],
        drops: u64,
        failed: Vec<String>,
        candidates: &[Figure],
        tenants: usize,
    ) {
        for (range, candidate) in self.ranges.iter_mut().zip(candidates) {
            if let Some(value) = candidate.read(row, tenants) {
                *range = (range.0.min(value), range.1.max(value));
            }
        }
        self.drops[point] = drops;
        if !failed.is_empty() {
            self.failed.insert(point, failed);
        }
    }
}

pub(crate) fn sweep(args: SweepArgs) -> Result<(), Failure> {
    let path = &args.scenario;
    let base = swept_scenario(path)?;
    let sets = given_sets(&args.sets)?;
    let seeds = match &args.seeds {
        Some(text) => parse_seeds(text)?,
        None => vec![base.seed],
    };
    let enforcers = chosen(&args.enforcers, &base.enforcers, For::Sweep, path)?;
    let runs = sets
        .iter()
        .map(|(_, _, values)| values.len())
        .chain([seeds.len(), enforcers.len()])
        .fold(1usize, usize::saturating_mul);
    if runs > POINTS_MAX {
        return Err(Failure::input(format!(
            "nicsched sweep: the grid has {runs} runs (values × seeds × enforcers), more than {POINTS_MAX}; sweep fewer"
        )));
    }
    let grid = Grid::new(path, &sets)?;
    // Parsing is work for the cores: more threads than cores would only hold
    // more settings at once.
    let parsing = jobs::threads(None, grid.settings).min(jobs::threads(args.jobs, grid.settings));
    let columns = validate(&grid, &enforcers, parsing)?;
    let threads = threads_in_memory(args.jobs, runs, columns.run_bytes);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(format!("{}-sweep", base.name)));
    let out =
        report::OutDir::claim(&out, &shard::inputs(path, &args.plan)).map_err(Failure::input)?;
    let provenance = provenance(path, base.seed)?;

    let sweep = Sweep {
        scenario: &base.name,
        grid: &grid,
        columns: &columns,
        enforcers: &enforcers,
        seeds: &seeds,
        runs,
    };
    let scratch = out.staging().join(".figures");
    let (fold, plotted) = {
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&scratch)
            .map_err(|e| unwritten(out.target(), io_at(&scratch, e)))?;
        let fold = match &args.plan {
            shard::Plan::Merge(parts) => {
                shard::replay(&sweep, parts, &file, &scratch, out.target())?
            }
            plan => {
                let points = shard::points(plan, runs);
                sweep.run(&file, &scratch, &points, threads, args.quiet, out.target())?
            }
        };
        if let shard::Plan::Part(part) = args.plan {
            return shard::write_part(&args, &sweep, part, out, &scratch, &fold, &provenance);
        }
        let plotted = sweep.plotted(&fold);
        (fold, plotted)
    };
    let cells = sweep
        .write(&out, &scratch, &fold, &plotted)
        .map_err(|e| unwritten(out.target(), e))?;
    std::fs::remove_file(&scratch).map_err(|e| unwritten(out.target(), io_at(&scratch, e)))?;
    for (figure, plotted) in plotted.iter().enumerate() {
        sweep
            .plot(&out, figure, plotted, &cells)
            .map_err(|e| unwritten(out.target(), e))?;
    }
    let target = out.target().to_path_buf();
    let written = out.commit(&provenance).map_err(|e| unwritten(&target, e))?;
    print!("{}", sweep.table(&plotted, &cells, &fold));
    println!("results: {}", written.display());
    flag_failed(&sweep, &fold)
}

/// The scenario of one host a sweep varies.
fn swept_scenario(path: &Path) -> Result<policy::Scenario, Failure> {
    match run::scenario::load_scenario_to_run(path)? {
        policy::AnyScenario::OneHost(scenario) => Ok(scenario),
        policy::AnyScenario::Hosts(_) => Err(Failure::input(format!(
            "{}: nicsched sweep runs scenarios of one host (`policy:`); a scenario across hosts (`hosts:`) is not swept yet: run nicsched sim on each variant",
            path.display()
        ))),
    }
}

/// The `--set`s, each key swept once.
fn given_sets(given: &[String]) -> Result<Vec<GivenSet>, Failure> {
    if given.is_empty() {
        return Err(Failure::input(
            "nicsched sweep: give at least one --set KEY=V1,V2,... (docs/scenario.md, \"Sweeps\")",
        ));
    }
    let sets: Vec<GivenSet> = given
        .iter()
        .map(|set| parse_set(set))
        .collect::<Result<_, _>>()?;
    if let Some((_, (twice, _, _))) = sets
        .iter()
        .enumerate()
        .find(|(i, set)| sets[..*i].iter().any(|s| s.0 == set.0))
    {
        return Err(Failure::input(format!(
            "--set {}: the key is swept twice; give its values in one --set",
            shown(twice)
        )));
    }
    Ok(sets)
}

/// The runs at once: `-j` (or one per core), fewer where that many would not
/// fit in the memory available, saying so.
fn threads_in_memory(jobs: Option<usize>, runs: usize, run_bytes: u64) -> usize {
    let threads = jobs::threads(jobs, runs);
    match jobs::memory_available() {
        Some(available) => {
            let fit = jobs::within_memory(threads, run_bytes, available);
            if fit < threads {
                eprintln!(
                    "nicsched sweep: running {fit} at a time, not {threads}: a run of this scenario takes up to about {} MB and {} MB of memory is available",
                    run_bytes >> 20,
                    available >> 20
                );
            }
            fit
        }
        None => threads,
    }
}

/// Status 3, naming every run whose self-checks failed, when one did.
fn flag_failed(sweep: &Sweep, fold: &Fold) -> Result<(), Failure> {
    let failed: Vec<String> = fold
        .failed
        .iter()
        .map(|(&point, checks)| {
            let (setting, seed, enforcer) = sweep.point(point);
            format!(
                "{} seed {seed} {enforcer}: {}",
                sweep.grid.said(setting),
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

fn io_at(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// A figure shown in the table and plotted: its column, file and title.
struct Plotted {
    column: String,
    title: String,
    /// The least top of the plot's axis, so that sweeps compare by eye: Jain's
    /// index and utilization 0..1 (and a little room), relative error at least
    /// 0..1. `None`: from the data alone.
    y_top_min: Option<f64>,
    figure: Figure,
}

/// Mean, lowest and highest over the seeds of each shown figure, per setting
/// and enforcer (`setting * enforcers + enforcer`).
type Cells = Vec<Vec<Option<report::SweepPoint>>>;

struct Sweep<'a> {
    scenario: &'a str,
    grid: &'a Grid,
    columns: &'a Columns,
    enforcers: &'a [String],
    seeds: &'a [u64],
    runs: usize,
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
    /// Run `point`'s setting, seed and enforcer: settings outermost, then seeds.
    fn point(&self, point: usize) -> (usize, u64, &str) {
        let per_setting = self.seeds.len() * self.enforcers.len();
        (
            point / per_setting,
            self.seeds[point / self.enforcers.len() % self.seeds.len()],
            &self.enforcers[point % self.enforcers.len()],
        )
    }

    fn record_bytes(&self) -> usize {
        8 * (FIXED.len() + 2 * self.columns.tenants.len() + self.columns.traffics.len())
    }

    /// The candidates for showing beyond the fixed figures: each tenant's share,
    /// then each traffic's p99.
    fn candidates(&self) -> Vec<Figure> {
        (0..self.columns.tenants.len())
            .map(Figure::Share)
            .chain((0..self.columns.traffics.len()).map(Figure::P99))
            .collect()
    }

    /// Runs `points`, `threads` at a time, each parsing its setting when it
    /// starts; its figures go to `file` at its place as it finishes.
    fn run(
        &self,
        file: &File,
        scratch: &Path,
        points: &[usize],
        threads: usize,
        quiet: bool,
        target: &Path,
    ) -> Result<Fold, Failure> {
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
        let lookup = Lookup {
            tenants: (self.columns.tenants.iter().cloned()).zip(0..).collect(),
            traffics: (self.columns.traffics.iter().cloned()).zip(0..).collect(),
        };
        let candidates = self.candidates();
        let fold = Mutex::new(Fold::new(candidates.len(), self.runs));
        let record_bytes = self.record_bytes();
        let outcome = jobs::try_each(points.len(), threads, |index| {
            let point = points[index];
            let (setting, seed, enforcer) = self.point(point);
            let mut scenario = self.grid.scenario(setting, None)?;
            scenario.seed = seed;
            let record =
                run::sim_world::simulate_one(&scenario, enforcer, &mut |_| {}).map_err(|e| {
                    Failure::input(format!(
                        "{}: --set {} seed {seed} {enforcer}: {e}",
                        self.grid.file,
                        self.grid.said(setting)
                    ))
                })?;
            drop(scenario);
            let summary = report::summarize(&record);
            drop(record);
            let row = figures_of(&summary, self.columns, &lookup);
            let bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
            file.write_all_at(&bytes, (point * record_bytes) as u64)
                .map_err(|e| unwritten(target, io_at(scratch, e)))?;
            let failed: Vec<String> = summary.failed_checks().map(|c| c.name.clone()).collect();
            fold.lock().expect("no worker panics holding it").add(
                point,
                &row,
                summary.drops(),
                failed,
                &candidates,
                self.columns.tenants.len(),
            );
            bar.inc(1);
            Ok::<(), Failure>(())
        });
        bar.finish_and_clear();
        outcome?;
        Ok(fold.into_inner().expect("workers are done"))
    }

    /// The figures shown: the fairness figures and utilization, then of the
    /// tenants' shares and traffics' p99 those that vary over the grid, the
    /// [`PLOTS_OF_KIND_MAX`] that vary most of each, in column order.
    fn plotted(&self, fold: &Fold) -> Vec<Plotted> {
        let fixed = |index: usize, title: &str, y_top_min| Plotted {
            column: FIXED[index].to_string(),
            title: title.to_string(),
            y_top_min,
            figure: Figure::Fixed(index),
        };
        let mut plotted = vec![
            fixed(1, "Jain's index (mean)", Some(1.05)),
            fixed(3, "relative error (mean)", Some(1.0)),
            fixed(0, "utilization", Some(1.05)),
        ];
        let candidates = self.candidates();
        let varying = |of_kind: &dyn Fn(&Figure) -> bool| {
            let mut varying: Vec<(usize, f64)> = candidates
                .iter()
                .zip(&fold.ranges)
                .enumerate()
                .filter(|(_, (candidate, _))| of_kind(candidate))
                .filter_map(|(index, (_, &(low, high)))| {
                    let spread = (high - low) / low.abs().max(high.abs()).max(f64::MIN_POSITIVE);
                    (spread > VARIES_RELATIVE).then_some((index, spread))
                })
                .collect();
            varying.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            varying.truncate(PLOTS_OF_KIND_MAX);
            varying.sort_by_key(|(index, _)| *index);
            varying.into_iter().map(|(index, _)| candidates[index])
        };
        for figure in varying(&|c| matches!(c, Figure::Share(_))) {
            let Figure::Share(column) = figure else {
                continue;
            };
            let tenant = &self.columns.tenants[column];
            plotted.push(Plotted {
                column: format!("share.{tenant}"),
                title: format!("throughput / ideal of {}", shown_name(tenant)),
                y_top_min: None,
                figure,
            });
        }
        for figure in varying(&|c| matches!(c, Figure::P99(_))) {
            let Figure::P99(column) = figure else {
                continue;
            };
            let traffic = &self.columns.traffics[column];
            plotted.push(Plotted {
                column: format!("p99_us.{traffic}"),
                title: format!("p99 latency of {} (µs)", shown_name(traffic)),
                y_top_min: None,
                figure,
            });
        }
        plotted
    }

    /// Writes sweep.csv and sweep.json from the scratch file, run by run in the
    /// grid's order, and gathers the shown figures per setting and enforcer.
    fn write(
        &self,
        out: &report::OutDir,
        scratch: &Path,
        fold: &Fold,
        plotted: &[Plotted],
    ) -> std::io::Result<Cells> {
        let create = |name: &str| -> std::io::Result<(PathBuf, BufWriter<File>)> {
            let path = out.staging().join(name);
            let file = File::create(&path).map_err(|e| io_at(&path, e))?;
            Ok((path, BufWriter::new(file)))
        };
        let (csv_path, mut csv) = create("sweep.csv")?;
        let (json_path, mut json) = create("sweep.json")?;
        let mut records = BufReader::new(File::open(scratch).map_err(|e| io_at(scratch, e))?);
        let tenants = self.columns.tenants.len();
        let (mut sums, mut cells): (Vec<Vec<(f64, usize)>>, Cells) = (
            vec![vec![(0.0, 0); plotted.len()]; self.grid.settings * self.enforcers.len()],
            vec![vec![None; plotted.len()]; self.grid.settings * self.enforcers.len()],
        );
        let mut text = self.csv_header();
        csv.write_all(text.as_bytes())
            .map_err(|e| io_at(&csv_path, e))?;
        text = self.json_head();
        json.write_all(text.as_bytes())
            .map_err(|e| io_at(&json_path, e))?;
        let mut bytes = vec![0u8; self.record_bytes()];
        for point in 0..self.runs {
            records
                .read_exact(&mut bytes)
                .map_err(|e| io_at(scratch, e))?;
            let row: Vec<f64> = bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("chunks of 8")))
                .collect();
            let (setting, _, _) = self.point(point);
            let failed = fold.failed.get(&point).map_or(&[][..], Vec::as_slice);
            text = self.csv_row(point, &row, fold.drops[point], failed);
            csv.write_all(text.as_bytes())
                .map_err(|e| io_at(&csv_path, e))?;
            text = self.json_point(point, &row, fold.drops[point], failed);
            if point + 1 < self.runs {
                text.push(',');
            }
            text.push('\n');
            json.write_all(text.as_bytes())
                .map_err(|e| io_at(&json_path, e))?;
            let cell = setting * self.enforcers.len() + point % self.enforcers.len();
            for (figure, plotted) in plotted.iter().enumerate() {
                if let Some(value) = plotted.figure.read(&row, tenants) {
                    let sum = &mut sums[cell][figure];
                    *sum = (sum.0 + value, sum.1 + 1);
                    let point = cells[cell][figure].get_or_insert(report::SweepPoint {
                        mean: 0.0,
                        min: value,
                        max: value,
                    });
                    point.min = point.min.min(value);
                    point.max = point.max.max(value);
                    point.mean = sum.0 / sum.1 as f64;
                }
            }
        }
        json.write_all(b"  ]\n}\n")
            .map_err(|e| io_at(&json_path, e))?;
        csv.flush().map_err(|e| io_at(&csv_path, e))?;
        json.flush().map_err(|e| io_at(&json_path, e))?;
        Ok(cells)
    }

    fn csv_header(&self) -> String {
        let mut header: Vec<String> = self
            .grid
            .axes
            .iter()
            .map(|a| report::csv_field(&a.key))
            .collect();
        header.extend(
            ["seed", "enforcer"]
                .into_iter()
                .chain(FIXED)
                .chain(["drops"])
                .map(str::to_string),
        );
        for tenant in &self.columns.tenants {
            for column in ["throughput_bps", "ideal_bps", "share"] {
                header.push(report::csv_field(&format!("{column}.{tenant}")));
            }
        }
        for traffic in &self.columns.traffics {
            header.push(report::csv_field(&format!("p99_us.{traffic}")));
        }
        header.push("checks_failed".to_string());
        header.join(",") + "\n"
    }

    fn csv_row(&self, point: usize, row: &[f64], drops: u64, failed: &[String]) -> String {
        let (setting, seed, enforcer) = self.point(point);
        let mut line: Vec<String> = self.grid.values(setting).map(report::csv_field).collect();
        line.extend([seed.to_string(), report::csv_field(enforcer)]);
        line.extend(row[..FIXED.len()].iter().map(f64::to_string));
        line.push(drops.to_string());
        let number = |v: f64| {
            if v.is_nan() {
                String::new()
            } else {
                v.to_string()
            }
        };
        for pair in row[FIXED.len()..FIXED.len() + 2 * self.columns.tenants.len()].chunks_exact(2) {
            let (throughput, ideal) = (pair[0], pair[1]);
            line.extend([number(throughput), number(ideal)]);
            line.push(if ideal > 0.0 {
                (throughput / ideal).to_string()
            } else {
                String::new()
            });
        }
        line.extend(
            row[FIXED.len() + 2 * self.columns.tenants.len()..]
                .iter()
                .map(|&v| number(v)),
        );
        line.push(report::csv_field(&failed.join(";")));
        line.join(",") + "\n"
    }

    fn json_head(&self) -> String {
        let keys: BTreeMap<&str, Vec<&str>> = self
            .grid
            .axes
            .iter()
            .map(|axis| {
                (
                    axis.key.as_str(),
                    axis.values.iter().map(|(t, _)| t.as_str()).collect(),
                )
            })
            .collect();
        let field = |name: &str, value: Value| {
            format!(
                "  {}: {},\n",
                Value::String(name.into()),
                serde_json::to_string(&value).expect("JSON of JSON")
            )
        };
        let mut text = "{\n".to_string();
        text += &field("scenario", self.scenario.into());
        text += &field(
            "keys",
            self.grid.axes.iter().map(|a| a.key.as_str()).collect(),
        );
        text += &field("values", serde_json::json!(keys));
        text += &field("seeds", serde_json::json!(self.seeds));
        text += &field("enforcers", serde_json::json!(self.enforcers));
        text += "  \"points\": [\n";
        text
    }

    /// A run's entry in sweep.json, on one line: its values, seed, enforcer,
    /// failed checks and the figures sweep.csv has.
    fn json_point(&self, point: usize, row: &[f64], drops: u64, failed: &[String]) -> String {
        let (setting, seed, enforcer) = self.point(point);
        let values: serde_json::Map<String, Value> = self
            .grid
            .axes
            .iter()
            .zip(self.grid.values(setting))
            .map(|(axis, value)| (axis.key.clone(), Value::String(value.to_string())))
            .collect();
        let at = |index: usize| row[index];
        let tenants: Vec<Value> = self
            .columns
            .tenants
            .iter()
            .enumerate()
            .filter(|(column, _)| !at(FIXED.len() + 2 * column).is_nan())
            .map(|(column, name)| {
                serde_json::json!({
                    "name": name,
                    "throughput_bps": at(FIXED.len() + 2 * column),
                    "ideal_bps": at(FIXED.len() + 2 * column + 1),
                })
            })
            .collect();
        let latency: serde_json::Map<String, Value> = self
            .columns
            .traffics
            .iter()
            .enumerate()
            .map(|(column, name)| {
                (
                    name,
                    at(FIXED.len() + 2 * self.columns.tenants.len() + column),
                )
            })
            .filter(|(_, p99)| !p99.is_nan())
            .map(|(name, p99)| (name.clone(), serde_json::json!({ "p99_us": p99 })))
            .collect();
        let entry = serde_json::json!({
            "values": values,
            "seed": seed,
            "enforcer": enforcer,
            "checks_failed": failed,
            "utilization": at(0),
            "fairness": {
                "jain_mean": at(1),
                "jain_min": at(2),
                "rel_error_mean": at(3),
                "rel_error_max": at(4),
            },
            "drops": drops,
            "tenants": tenants,
            "latency": latency,
        });
        format!("    {entry}")
    }

    /// One shown figure's plot against the first key: a line per enforcer and
    /// combination of the other keys' values.
    fn plot(
        &self,
        out: &report::OutDir,
        figure: usize,
        plotted: &Plotted,
        cells: &Cells,
    ) -> std::io::Result<()> {
        let axes = &self.grid.axes;
        let first_len = axes[0].values.len();
        // Setting `x * rest + r` has the first axis' value x and the others' combination r.
        let rest = self.grid.settings / first_len;
        let mut lines = Vec::new();
        let all_lines = self.enforcers.len() * rest;
        for (e, enforcer) in self.enforcers.iter().enumerate() {
            for r in (0..rest).take(PLOT_LINES_MAX.saturating_sub(lines.len())) {
                let mut name = enforcer.clone();
                for (axis, value) in axes[1..].iter().zip(self.grid.values(r).skip(1)) {
                    name.push_str(&format!(" {}={}", shown(&axis.key), shown(value)));
                }
                let points = (0..first_len)
                    .map(|x| cells[(x * rest + r) * self.enforcers.len() + e][figure])
                    .collect();
                lines.push(report::SweepLine { name, points });
            }
        }
        let file = out
            .staging()
            .join(format!("{}.png", file_name(&plotted.column)));
        report::write_sweep_plot(
            &file,
            &format!(
                "{}: {} against {}{}",
                self.scenario,
                plotted.title,
                shown(&axes[0].key),
                if all_lines > lines.len() {
                    format!(" (the first {} of {all_lines} lines)", lines.len())
                } else {
                    String::new()
                }
            ),
            &shown(&axes[0].key),
            &axes[0]
                .values
                .iter()
                .map(|(text, _)| shown(text))
                .collect::<Vec<_>>(),
            &plotted.title,
            plotted.y_top_min.map(|least| {
                let highest = lines
                    .iter()
                    .flat_map(|line| line.points.iter().flatten())
                    .map(|point| point.max)
                    .fold(0.0, f64::max);
                least.max(highest * 1.1)
            }),
            &lines,
        )
    }

    /// Mean ± half the range over seeds of each shown figure, per setting and
    /// enforcer; a run whose checks failed is counted in `checks`.
    fn table(&self, plotted: &[Plotted], cells: &Cells, fold: &Fold) -> String {
        let mut header: Vec<String> = self.grid.axes.iter().map(|a| shown_name(&a.key)).collect();
        header.push("enforcer".to_string());
        header.extend(plotted.iter().map(|f| shown_name(&f.column)));
        header.push("checks".to_string());
        let mut failed = vec![0usize; cells.len()];
        for &point in fold.failed.keys() {
            let (setting, _, _) = self.point(point);
            failed[setting * self.enforcers.len() + point % self.enforcers.len()] += 1;
        }
        let mut rows = Vec::new();
        for setting in 0..self.grid.settings {
            for (e, enforcer) in self.enforcers.iter().enumerate() {
                let cell = setting * self.enforcers.len() + e;
                let mut row: Vec<String> = self.grid.values(setting).map(shown).collect();
                row.push(enforcer.clone());
                for point in &cells[cell] {
                    row.push(match point {
                        Some(p) => {
                            // Four significant digits of a ratio near 1, fewer
                            // decimals for latencies in the hundreds of µs.
                            let decimals = match p.mean.abs() {
                                m if m >= 100.0 => 1,
                                m if m >= 10.0 => 2,
                                _ => 4,
                            };
                            // Any magnitude in a bounded width, as every table's figures.
                            let mean = report::figure_cell(p.mean, decimals);
                            if self.seeds.len() > 1 {
                                let half_range = (p.max - p.min) / 2.0;
                                format!("{mean} ±{}", report::figure_cell(half_range, decimals))
                            } else {
                                mean
                            }
                        }
                        None => "-".to_string(),
                    });
                }
                row.push(if failed[cell] == 0 {
                    "ok".to_string()
                } else {
                    format!("FAILED {}/{}", failed[cell], self.seeds.len())
                });
                rows.push(row);
            }
        }
        report::aligned_table(&header, &rows, self.grid.axes.len() + 1, true)
    }
}

/// A name from the scenario (a tenant's, a traffic's) as it may be printed,
/// whole but for control characters.
fn shown_name(name: &str) -> String {
    cut(&escaped(name), 2 * SHOWN_CHARS_MAX)
}
