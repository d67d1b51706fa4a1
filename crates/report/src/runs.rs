//! Runs read back from the files they left, for report.html: one loader for the
//! report `nicsched sim` and `nicsched lab` write beside their runs and for
//! `nicsched report`, which overlays runs of any world from their folders.
//!
//! A run's folder holds summary.json, timeseries.csv and, where it measured
//! latency, latency.csv. Runs on one host report per tenant and app; runs across
//! hosts (summary.json with `flows`) per flow, with its sending VM.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::checks::{Check, Provenance};
use crate::compare::complete_summaries;
use crate::files::{
    FAIRNESS_PNG, LATENCY_CDF_PNG, LATENCY_CSV, SUMMARY_JSON, THROUGHPUT_APPS_PNG, THROUGHPUT_PNG,
    TIMESERIES_CSV, at,
};
use crate::plot::Thinned;
use crate::summary::{Summary, judged};

/// One series of a run's throughput as it is drawn: a tenant, an app or a flow,
/// over time, thinned to what a chart can show ([`crate::plot::Thinned`]), or
/// the sum of every series of its kind that is not drawn on its own.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub kind: SeriesKind,
    /// `tenant`, `tenant/app`, `flow`, or `host/vm`; for a sum of the rest, empty.
    pub name: String,
    pub time_s: Vec<f64>,
    pub throughput_bps: Vec<f64>,
    pub ideal_bps: Vec<f64>,
}

/// A series of a run as its timeseries.csv holds it, with how much it carried:
/// what to draw is chosen from these before any series is read whole.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesTotal {
    pub kind: SeriesKind,
    pub name: String,
    /// Over its intervals, the sums of its throughput and of its ideal (bit/s
    /// summed: a rank, not a figure).
    pub throughput: f64,
    pub ideal: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SeriesKind {
    Tenant,
    App,
    /// A sending VM of a run across hosts: its flows together.
    Vm,
    Flow,
}

/// A series [`read_series`] is asked for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Wanted {
    /// The series of this kind and name.
    One(SeriesKind, String),
    /// Every series of this kind that no [`Wanted::One`] asks for, summed.
    Rest(SeriesKind),
}

/// The fairness of one interval, over the tenants (one host) or sending VMs
/// (across hosts) with an ideal in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntervalPoint {
    pub time_s: f64,
    pub jain: f64,
    /// The mean over those of |throughput − ideal| / ideal.
    pub rel_error: f64,
}

/// One traffic's latency distribution as latency.csv holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyCdf {
    pub traffic: String,
    /// (quantile, latency_us), quantiles ascending.
    pub points: Vec<(f64, f64)>,
}

/// The whole-run figures of the summary table; None where the run's kind has none.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFigures {
    pub utilization: Option<f64>,
    pub jain_mean: Option<f64>,
    pub jain_min: Option<f64>,
    pub rel_error_mean: Option<f64>,
    pub rel_error_max: Option<f64>,
    pub drops: Option<u64>,
    /// p99 per latency traffic, µs.
    pub p99_us: BTreeMap<String, f64>,
}

/// One enforcer's run, as its folder holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// The run's folder.
    pub dir: PathBuf,
    pub scenario: String,
    pub enforcer: String,
    /// `sim` or `lab`.
    pub mode: String,
    pub across_hosts: bool,
    /// The link its rates were measured on: the one host's, or the fastest host's.
    /// The lab scales a scenario to its emulated link, so a lab run's is the
    /// emulated one.
    pub link_rate_bps: f64,
    pub seed: u64,
    pub figures: RunFigures,
    pub checks: Vec<Check>,
    pub provenance: Provenance,
    /// Every series its timeseries.csv makes (tenants, apps of tenants of
    /// several, sending VMs of several flows, flows), by kind, each kind in the
    /// order its members first appear. [`read_series`] reads them.
    pub series: Vec<SeriesTotal>,
    /// The end of each interval of timeseries.csv, ascending.
    pub times_s: Vec<f64>,
    /// One point per interval: at most `INTERVALS_MAX` of them.
    pub fairness: Vec<IntervalPoint>,
    pub latency: Vec<LatencyCdf>,
    /// The files of the run a reader may open, by name, in this order.
    pub files: Vec<&'static str>,
}

impl Run {
    pub fn failed_checks(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.ok)
    }
}

const LINKED_FILES: [&str; 7] = [
    SUMMARY_JSON,
    TIMESERIES_CSV,
    LATENCY_CSV,
    THROUGHPUT_PNG,
    THROUGHPUT_APPS_PNG,
    FAIRNESS_PNG,
    LATENCY_CDF_PNG,
];

/// The runs `path` names, from complete runs only (as `nicsched compare` takes
/// them): a results folder (every enforcer's run in it), one enforcer's folder,
/// or its summary.json.
pub fn load_runs(path: &Path) -> io::Result<Vec<Run>> {
    complete_summaries(path)?
        .iter()
        .map(|summary| read_run(summary.parent().expect("a file is in a folder")))
        .collect()
}

/// The run in `dir`, from its files, whether or not the run is complete yet:
/// sim and lab write report.html before they mark their runs so. An error
/// names the file and what is wrong with it.
///
/// timeseries.csv is read as a stream, in memory linear in its series and
/// intervals, not its rows: a series' points are read by [`read_series`], for
/// the series a page draws.
pub fn read_run(dir: &Path) -> io::Result<Run> {
    let summary_path = dir.join(SUMMARY_JSON);
    let text = fs::read_to_string(&summary_path).map_err(at(&summary_path))?;
    let not_summary = |e: serde_json::Error| {
        invalid(
            &summary_path,
            format!("not a nicsched summary.json ({e}); run it again"),
        )
    };
    let json: serde_json::Value = serde_json::from_str(&text).map_err(not_summary)?;
    let timeseries_path = dir.join(TIMESERIES_CSV);
    let mut run = if json.get("flows").is_some() {
        let summary: HostsSummaryFile = serde_json::from_value(json).map_err(not_summary)?;
        hosts_run(dir, summary)
    } else {
        let summary: Summary = serde_json::from_value(json).map_err(not_summary)?;
        one_host_run(dir, summary)
    };
    let read = first_reading(&timeseries_path, Layout::of(&run))?;
    run.series = read.series;
    run.times_s = read.times_s;
    run.fairness = read.fairness;
    let latency_path = dir.join(LATENCY_CSV);
    match fs::symlink_metadata(&latency_path) {
        Ok(_) => run.latency = latency_cdfs(&latency_path)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(at(&latency_path)(e)),
    }
    run.files = LINKED_FILES
        .into_iter()
        .filter(|name| dir.join(name).is_file())
        .collect();
    Ok(run)
}

fn invalid(path: &Path, what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}

/// What report.html needs of a run across hosts' summary.json (hosts.md).
#[derive(Deserialize)]
struct HostsSummaryFile {
    scenario: String,
    enforcer: String,
    mode: String,
    hosts: Vec<HostLink>,
    #[serde(default)]
    fairness: BTreeMap<String, f64>,
    #[serde(default)]
    latency: BTreeMap<String, crate::LatencySummary>,
    #[serde(default)]
    checks: Vec<Check>,
    #[serde(default)]
    provenance: Provenance,
}

#[derive(Deserialize)]
struct HostLink {
    link_rate_bps: f64,
}

fn one_host_run(dir: &Path, summary: Summary) -> Run {
    let figures = RunFigures {
        utilization: Some(summary.utilization),
        jain_mean: Some(summary.fairness.jain_mean),
        jain_min: Some(summary.fairness.jain_min),
        rel_error_mean: Some(summary.fairness.rel_error_mean),
        rel_error_max: Some(summary.fairness.rel_error_max),
        drops: Some(summary.drops()),
        p99_us: summary
            .latency
            .iter()
            .filter(|(_, l)| l.count > 0)
            .map(|(traffic, l)| (traffic.clone(), l.p99_us))
            .collect(),
    };
    Run {
        dir: dir.to_path_buf(),
        scenario: summary.scenario,
        enforcer: summary.enforcer,
        mode: summary.mode.as_str().to_string(),
        across_hosts: false,
        link_rate_bps: summary.link_rate_bps as f64,
        seed: summary.seed,
        figures,
        checks: summary.checks,
        provenance: summary.provenance,
        series: Vec::new(),
        times_s: Vec::new(),
        fairness: Vec::new(),
        latency: Vec::new(),
        files: Vec::new(),
    }
}

fn hosts_run(dir: &Path, summary: HostsSummaryFile) -> Run {
    let figure = |key: &str| summary.fairness.get(key).copied();
    let figures = RunFigures {
        utilization: None,
        jain_mean: figure("jain_mean"),
        jain_min: figure("jain_min"),
        rel_error_mean: figure("rel_error_mean"),
        rel_error_max: figure("rel_error_max"),
        drops: None,
        p99_us: summary
            .latency
            .iter()
            .filter(|(_, l)| l.count > 0)
            .map(|(traffic, l)| (traffic.clone(), l.p99_us))
            .collect(),
    };
    Run {
        dir: dir.to_path_buf(),
        scenario: summary.scenario,
        enforcer: summary.enforcer,
        mode: summary.mode,
        across_hosts: true,
        link_rate_bps: summary
            .hosts
            .iter()
            .map(|h| h.link_rate_bps)
            .fold(0.0, f64::max),
        seed: summary.provenance.seed,
        figures,
        checks: summary.checks,
        provenance: summary.provenance,
        series: Vec::new(),
        times_s: Vec::new(),
        fairness: Vec::new(),
        latency: Vec::new(),
        files: Vec::new(),
    }
}

/// How the rows of a timeseries.csv make series: each row is a member (an app
/// of one host's tenant, a flow across hosts) of a group (the tenant, the
/// sending VM), and a group's series is the sum of its members'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    OneHost,
    Hosts,
}

impl Layout {
    fn of(run: &Run) -> Layout {
        if run.across_hosts {
            Layout::Hosts
        } else {
            Layout::OneHost
        }
    }

    fn kinds(self) -> (SeriesKind, SeriesKind) {
        match self {
            Layout::OneHost => (SeriesKind::Tenant, SeriesKind::App),
            Layout::Hosts => (SeriesKind::Vm, SeriesKind::Flow),
        }
    }

    /// Whether a group of `members` and its members get series of their own: a
    /// tenant of one app, or a VM of one flow, would get the same chart twice.
    fn drawn(self, members: usize) -> (bool, bool) {
        match self {
            Layout::OneHost => (true, members > 1),
            Layout::Hosts => (members > 1, true),
        }
    }
}

/// The rows of a timeseries.csv, one at a time: what each names and measured.
struct Rows {
    path: PathBuf,
    layout: Layout,
    reader: csv::Reader<io::BufReader<fs::File>>,
    header: csv::StringRecord,
    record: csv::StringRecord,
    /// Columns: time, the group's (tenant; host and VM), the member's (app;
    /// flow), throughput, ideal.
    time: usize,
    group: Vec<usize>,
    member: usize,
    throughput: usize,
    ideal: usize,
    /// The current row's group and member names.
    group_name: String,
    member_name: String,
}

/// One row of a timeseries.csv; its names are [`Rows::group_name`] and
/// [`Rows::member_name`].
#[derive(Clone, Copy)]
struct Row {
    line: u64,
    time_s: f64,
    throughput_bps: f64,
    ideal_bps: f64,
}

impl Rows {
    fn open(path: &Path, layout: Layout) -> io::Result<Rows> {
        let file = fs::File::open(path).map_err(at(path))?;
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_reader(io::BufReader::with_capacity(1 << 16, file));
        let header = reader.headers().map_err(|e| csv_error(path, e))?.clone();
        if header.is_empty() || header.iter().all(str::is_empty) {
            return Err(invalid(
                path,
                "empty, without its header; run it again".to_string(),
            ));
        }
        let column = |name: &str| {
            header.iter().position(|h| h == name).ok_or_else(|| {
                invalid(
                    path,
                    format!(
                        "no `{name}` column in its header ({}); run it again",
                        header.iter().collect::<Vec<_>>().join(",")
                    ),
                )
            })
        };
        let (group, member) = match layout {
            Layout::OneHost => (vec![column("tenant")?], column("app")?),
            Layout::Hosts => (vec![column("host")?, column("tenant")?], column("flow")?),
        };
        Ok(Rows {
            path: path.to_path_buf(),
            layout,
            time: column("time_s")?,
            group,
            member,
            throughput: column("throughput_bps")?,
            ideal: column("ideal_bps")?,
            reader,
            header,
            record: csv::StringRecord::new(),
            group_name: String::new(),
            member_name: String::new(),
        })
    }

    fn next(&mut self) -> io::Result<Option<Row>> {
        if !self
            .reader
            .read_record(&mut self.record)
            .map_err(|e| csv_error(&self.path, e))?
        {
            return Ok(None);
        }
        let line = self.record.position().map_or(0, csv::Position::line);
        let number = |column: usize| {
            let text = &self.record[column];
            text.parse::<f64>()
                .ok()
                .filter(|value| value.is_finite())
                .ok_or_else(|| {
                    invalid(
                        &self.path,
                        format!(
                            "line {line}: `{}` is {text:?}, not a number",
                            &self.header[column]
                        ),
                    )
                })
        };
        let row = Row {
            line,
            time_s: number(self.time)?,
            throughput_bps: number(self.throughput)?,
            ideal_bps: number(self.ideal)?,
        };
        self.group_name.clear();
        self.member_name.clear();
        for (i, &column) in self.group.iter().enumerate() {
            if i > 0 {
                self.group_name.push('/');
            }
            self.group_name.push_str(&self.record[column]);
        }
        if self.layout == Layout::OneHost {
            self.member_name.push_str(&self.group_name);
            self.member_name.push('/');
        }
        self.member_name.push_str(&self.record[self.member]);
        Ok(Some(row))
    }
}

fn csv_error(path: &Path, error: csv::Error) -> io::Error {
    let line = error
        .position()
        .map(|p| format!("line {}: ", p.line()))
        .unwrap_or_default();
    let what = match error.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} fields where the header has {expected_len}"),
        csv::ErrorKind::Io(e) => e.to_string(),
        _ => error.to_string(),
    };
    invalid(path, format!("{line}{what}; run it again"))
}

/// Names to indexes, in the order they first appear.
#[derive(Default)]
struct Names {
    names: Vec<String>,
    index: HashMap<String, usize>,
}

impl Names {
    /// The index of `name`, and whether it is new.
    fn slot(&mut self, name: &str) -> (usize, bool) {
        if let Some(&at) = self.index.get(name) {
            return (at, false);
        }
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), self.names.len() - 1);
        (self.names.len() - 1, true)
    }
}

/// The intervals of a timeseries.csv one after another: its rows hold each
/// interval's rows together, in time order, as nicsched writes them.
struct Intervals {
    path: PathBuf,
    current: Option<f64>,
}

impl Intervals {
    /// Whether `row` starts a new interval; an error where it goes back in time.
    fn starts(&mut self, row: &Row) -> io::Result<bool> {
        match self.current {
            Some(time_s) if time_s.to_bits() == row.time_s.to_bits() => Ok(false),
            Some(time_s) if row.time_s < time_s => Err(invalid(
                &self.path,
                format!(
                    "line {}: time_s {} after {time_s}: the rows of each interval are together, in time order; run it again",
                    row.line, row.time_s
                ),
            )),
            _ => {
                self.current = Some(row.time_s);
                Ok(true)
            }
        }
    }
}

/// What the first reading of a timeseries.csv finds.
struct FirstReading {
    series: Vec<SeriesTotal>,
    times_s: Vec<f64>,
    fairness: Vec<IntervalPoint>,
}

/// Reads `path` once: its series with their totals, its intervals, and per
/// interval the fairness over the groups (tenants, sending VMs), as summary.json
/// defines it (every interval here: timeseries.csv does not mark which intervals
/// summary.json leaves out as unsteady).
fn first_reading(path: &Path, layout: Layout) -> io::Result<FirstReading> {
    let mut rows = Rows::open(path, layout)?;
    let mut groups = Names::default();
    let mut group_totals: Vec<(f64, f64)> = Vec::new();
    let mut group_members: Vec<usize> = Vec::new();
    let mut members = Names::default();
    let mut member_totals: Vec<(f64, f64)> = Vec::new();
    let mut member_group: Vec<usize> = Vec::new();
    let mut intervals = Intervals {
        path: path.to_path_buf(),
        current: None,
    };
    let mut times_s = Vec::new();
    let mut fairness = Vec::new();
    // The groups' sums in the current interval and whether each has a row in
    // it; which do, in the order they came.
    let mut sums: Vec<(f64, f64, bool)> = Vec::new();
    let mut touched: Vec<usize> = Vec::new();
    let mut close = |time_s: f64, sums: &mut Vec<(f64, f64, bool)>, touched: &mut Vec<usize>| {
        touched.sort_unstable();
        let shares = touched.iter().map(|&g| (g, sums[g].0, sums[g].1));
        if let Some(figures) = judged(shares) {
            let errors = figures.rel_error.len() as f64;
            fairness.push(IntervalPoint {
                time_s,
                jain: figures.jain,
                rel_error: figures.rel_error.iter().map(|&(_, e)| e).sum::<f64>() / errors,
            });
        }
        for &g in touched.iter() {
            sums[g] = (0.0, 0.0, false);
        }
        touched.clear();
    };
    while let Some(row) = rows.next()? {
        if intervals.starts(&row)? {
            if let Some(&previous) = times_s.last() {
                close(previous, &mut sums, &mut touched);
            }
            times_s.push(row.time_s);
        }
        let (group, new_group) = groups.slot(&rows.group_name);
        if new_group {
            group_totals.push((0.0, 0.0));
            group_members.push(0);
            sums.push((0.0, 0.0, false));
        }
        let (member, new_member) = members.slot(&rows.member_name);
        if new_member {
            member_totals.push((0.0, 0.0));
            member_group.push(group);
            group_members[group] += 1;
        }
        for total in [&mut group_totals[group], &mut member_totals[member]] {
            total.0 += row.throughput_bps;
            total.1 += row.ideal_bps;
        }
        let sum = &mut sums[group];
        if !sum.2 {
            sum.2 = true;
            touched.push(group);
        }
        sum.0 += row.throughput_bps;
        sum.1 += row.ideal_bps;
    }
    if let Some(&last) = times_s.last() {
        close(last, &mut sums, &mut touched);
    }
    let (group_kind, member_kind) = layout.kinds();
    let total = |kind, name: &String, (throughput, ideal): (f64, f64)| SeriesTotal {
        kind,
        name: name.clone(),
        throughput,
        ideal,
    };
    let mut series: Vec<SeriesTotal> = Vec::new();
    for (g, name) in groups.names.iter().enumerate() {
        if layout.drawn(group_members[g]).0 {
            series.push(total(group_kind, name, group_totals[g]));
        }
    }
    for (m, name) in members.names.iter().enumerate() {
        if layout.drawn(group_members[member_group[m]]).1 {
            series.push(total(member_kind, name, member_totals[m]));
        }
    }
    series.sort_by_key(|s| s.kind);
    Ok(FirstReading {
        series,
        times_s,
        fairness,
    })
}

/// The series `wanted` of `run`, read again from its timeseries.csv and thinned
/// to what a chart shows ([`Thinned`]), in the order asked; a series the run
/// does not have comes back without points. Memory is that of the series asked,
/// whatever the rows.
pub fn read_series(run: &Run, wanted: &[Wanted]) -> io::Result<Vec<Series>> {
    let layout = Layout::of(run);
    let path = run.dir.join(TIMESERIES_CSV);
    let mut target: HashMap<(SeriesKind, &str), usize> = HashMap::new();
    let mut rest: HashMap<SeriesKind, usize> = HashMap::new();
    for (at, want) in wanted.iter().enumerate() {
        match want {
            Wanted::One(kind, name) => {
                target.insert((*kind, name.as_str()), at);
            }
            Wanted::Rest(kind) => {
                rest.insert(*kind, at);
            }
        }
    }
    // Every series of the run to the one it adds to, by kind.
    let (group_kind, member_kind) = layout.kinds();
    let mut adds_to: [HashMap<&str, usize>; 2] = [HashMap::new(), HashMap::new()];
    for s in &run.series {
        let to = target
            .get(&(s.kind, s.name.as_str()))
            .or_else(|| rest.get(&s.kind));
        if let Some(&to) = to {
            adds_to[usize::from(s.kind == member_kind)].insert(s.name.as_str(), to);
        }
    }
    debug_assert!(group_kind != member_kind);
    let mut thinned: Vec<Thinned<2>> = wanted
        .iter()
        .map(|_| Thinned::new(run.times_s.len()))
        .collect();
    // Each series' sums in the current interval, where it has a row in it.
    let mut sums: Vec<Option<[f64; 2]>> = vec![None; wanted.len()];
    let mut touched: Vec<usize> = Vec::new();
    let mut flush =
        |interval: usize, time_s: f64, sums: &mut [Option<[f64; 2]>], touched: &mut Vec<usize>| {
            for &to in touched.iter() {
                if let Some(sum) = sums[to].take() {
                    thinned[to].push(interval, time_s, time_s, sum);
                }
            }
            touched.clear();
        };
    let mut rows = Rows::open(&path, layout)?;
    let mut intervals = Intervals {
        path: path.clone(),
        current: None,
    };
    let mut interval: Option<usize> = None;
    let changed = |line: u64| {
        invalid(
            &path,
            format!("line {line}: changed while it was read; write the report again"),
        )
    };
    while let Some(row) = rows.next()? {
        if intervals.starts(&row)? {
            if let Some(k) = interval {
                flush(k, run.times_s[k], &mut sums, &mut touched);
            }
            let next = interval.map_or(0, |k| k + 1);
            match run.times_s.get(next) {
                Some(t) if t.to_bits() == row.time_s.to_bits() => interval = Some(next),
                _ => return Err(changed(row.line)),
            }
        }
        for (names, name) in [
            (&adds_to[0], rows.group_name.as_str()),
            (&adds_to[1], rows.member_name.as_str()),
        ] {
            if let Some(&to) = names.get(name) {
                if sums[to].is_none() {
                    touched.push(to);
                }
                let sum = sums[to].get_or_insert([0.0; 2]);
                sum[0] += row.throughput_bps;
                sum[1] += row.ideal_bps;
            }
        }
    }
    if let Some(k) = interval {
        flush(k, run.times_s[k], &mut sums, &mut touched);
    }
    Ok(wanted
        .iter()
        .zip(thinned)
        .map(|(want, thinned)| {
            let (kind, name) = match want {
                Wanted::One(kind, name) => (*kind, name.clone()),
                Wanted::Rest(kind) => (*kind, String::new()),
            };
            let (time_s, [throughput_bps, ideal_bps]) = thinned.finish();
            Series {
                kind,
                name,
                time_s,
                throughput_bps,
                ideal_bps,
            }
        })
        .collect())
}

/// latency.csv's CDFs, each traffic's rows together as nicsched writes them.
fn latency_cdfs(path: &Path) -> io::Result<Vec<LatencyCdf>> {
    let mut reader = csv::Reader::from_path(path).map_err(|e| csv_error(path, e))?;
    let header = reader.headers().map_err(|e| csv_error(path, e))?.clone();
    let column = |name: &str| {
        header.iter().position(|h| h == name).ok_or_else(|| {
            invalid(
                path,
                format!(
                    "no `{name}` column in its header ({}); run it again",
                    header.iter().collect::<Vec<_>>().join(",")
                ),
            )
        })
    };
    let (traffic, quantile, latency) = (
        column("traffic")?,
        column("quantile")?,
        column("latency_us")?,
    );
    let mut cdfs: Vec<LatencyCdf> = Vec::new();
    let mut record = csv::StringRecord::new();
    while reader
        .read_record(&mut record)
        .map_err(|e| csv_error(path, e))?
    {
        let line = record.position().map_or(0, csv::Position::line);
        let number = |column: usize| {
            let text = &record[column];
            text.parse::<f64>()
                .ok()
                .filter(|value| value.is_finite())
                .ok_or_else(|| {
                    invalid(
                        path,
                        format!(
                            "line {line}: `{}` is {text:?}, not a number",
                            &header[column]
                        ),
                    )
                })
        };
        let point = (number(quantile)?, number(latency)?);
        match cdfs.last_mut() {
            Some(cdf) if cdf.traffic == record[traffic] => cdf.points.push(point),
            _ => cdfs.push(LatencyCdf {
                traffic: record[traffic].to_string(),
                points: vec![point],
            }),
        }
    }
    Ok(cdfs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of its own under the system's temporary one, removed after.
    struct Scratch(PathBuf);

    impl Scratch {
        fn with_timeseries(test: &str, csv: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("nicsched-runs-{test}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join(TIMESERIES_CSV), csv).unwrap();
            Scratch(dir)
        }

        fn csv(&self) -> PathBuf {
            self.0.join(TIMESERIES_CSV)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// A one-host run of the files in `dir`, as [`read_run`] would find it.
    fn run_of(dir: &Path) -> Run {
        let read = first_reading(&dir.join(TIMESERIES_CSV), Layout::OneHost).unwrap();
        Run {
            dir: dir.to_path_buf(),
            scenario: "s".into(),
            enforcer: "e".into(),
            mode: "sim".into(),
            across_hosts: false,
            link_rate_bps: 1e9,
            seed: 1,
            figures: RunFigures::default(),
            checks: Vec::new(),
            provenance: Provenance::default(),
            series: read.series,
            times_s: read.times_s,
            fairness: read.fairness,
            latency: Vec::new(),
            files: Vec::new(),
        }
    }

    const TWO_TENANTS: &str = "time_s,tenant,app,throughput_bps,ideal_bps
0.1,t1,a,3e8,2.5e8
0.1,t1,b,2e8,2.5e8
0.1,t2,c,5e8,5e8
0.2,t1,a,1e8,2.5e8
0.2,t1,b,1e8,2.5e8
0.2,t2,c,8e8,5e8
";

    #[test]
    fn tenants_are_their_apps_summed_and_fairness_is_judged_per_interval() {
        let scratch = Scratch::with_timeseries("sums", TWO_TENANTS);
        let run = run_of(&scratch.0);
        assert_eq!(run.times_s, [0.1, 0.2]);
        let names: Vec<(SeriesKind, &str)> = run
            .series
            .iter()
            .map(|s| (s.kind, s.name.as_str()))
            .collect();
        // t2 has one app: its app's chart would be t2's again.
        assert_eq!(
            names,
            [
                (SeriesKind::Tenant, "t1"),
                (SeriesKind::Tenant, "t2"),
                (SeriesKind::App, "t1/a"),
                (SeriesKind::App, "t1/b"),
            ]
        );
        assert_eq!((run.series[0].throughput, run.series[0].ideal), (7e8, 1e9));
        assert_eq!(run.fairness.len(), 2);
        assert_eq!(run.fairness[0].jain, 1.0);
        assert_eq!(run.fairness[0].rel_error, 0.0);
        // Shares 0.4 and 1.6: Jain 4 / (2 × 2.72), errors 0.6 and 0.6.
        assert!((run.fairness[1].jain - 4.0 / 5.44).abs() < 1e-12);
        assert!((run.fairness[1].rel_error - 0.6).abs() < 1e-12);

        let series = read_series(
            &run,
            &[
                Wanted::One(SeriesKind::Tenant, "t1".into()),
                Wanted::Rest(SeriesKind::Tenant),
                Wanted::One(SeriesKind::App, "t1/b".into()),
                Wanted::Rest(SeriesKind::App),
                Wanted::One(SeriesKind::App, "t2/c".into()),
            ],
        )
        .unwrap();
        assert_eq!(series[0].time_s, [0.1, 0.2]);
        assert_eq!(series[0].throughput_bps, [5e8, 2e8]);
        assert_eq!(series[0].ideal_bps, [5e8, 5e8]);
        assert_eq!(series[1].throughput_bps, [5e8, 8e8], "the rest is t2");
        assert_eq!(series[2].throughput_bps, [2e8, 1e8]);
        assert_eq!(series[3].throughput_bps, [3e8, 1e8], "the rest is t1/a");
        assert!(series[4].time_s.is_empty(), "t2/c has no series of its own");
    }

    #[test]
    fn names_are_read_back_as_files_rs_quotes_them() {
        let scratch = Scratch::with_timeseries(
            "quoted",
            "time_s,tenant,app,throughput_bps,ideal_bps\r\n\
             1,\"x,\"\"y\"\"\",\"two\nlines\",1,2\r\n\
             1,\"x,\"\"y\"\"\",b,3,4\n",
        );
        let run = run_of(&scratch.0);
        let names: Vec<&str> = run.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["x,\"y\"", "x,\"y\"/two\nlines", "x,\"y\"/b"]);
        assert_eq!(run.series[0].throughput, 4.0);
    }

    #[test]
    fn a_bad_timeseries_is_refused_naming_its_file_and_line() {
        for (csv, expected) in [
            (
                "time_s,tenant,app,throughput_bps,ideal_bps\n1,t,a,1\n",
                "line 2: 4 fields where the header has 5",
            ),
            (
                "time_s,tenant,app,throughput_bps,ideal_bps\n1,t,a,1,NaN\n",
                "line 2: `ideal_bps` is \"NaN\", not a number",
            ),
            (
                "time_s,tenant,throughput_bps,ideal_bps\n",
                "no `app` column",
            ),
            (
                "time_s,tenant,app,throughput_bps,ideal_bps\n2,t,a,1,1\n1,t,a,1,1\n",
                "line 3: time_s 1 after 2",
            ),
            ("", "empty, without its header"),
        ] {
            let scratch = Scratch::with_timeseries("bad", csv);
            let error = first_reading(&scratch.csv(), Layout::OneHost)
                .err()
                .unwrap_or_else(|| panic!("{csv:?} was taken"))
                .to_string();
            assert!(
                error.starts_with(&format!("{}: ", scratch.csv().display())),
                "{error}"
            );
            assert!(error.contains(expected), "{csv:?}: {error}");
        }
    }

    #[test]
    fn a_long_run_is_drawn_thinned_with_its_extremes() {
        let intervals = 10 * crate::plot::POINTS_MAX;
        let mut csv = String::from("time_s,tenant,app,throughput_bps,ideal_bps\n");
        for k in 0..intervals {
            // One spike, in one interval of the whole run.
            let throughput = if k == 4321 { 9e9 } else { 1e9 };
            csv.push_str(&format!("{},t,a,{throughput},1e9\n", (k + 1) as f64 * 1e-3));
        }
        let scratch = Scratch::with_timeseries("long", &csv);
        let run = run_of(&scratch.0);
        assert_eq!(run.times_s.len(), intervals);
        let series = read_series(&run, &[Wanted::One(SeriesKind::Tenant, "t".into())]).unwrap();
        let drawn = &series[0];
        assert!(
            drawn.time_s.len() <= crate::plot::POINTS_MAX,
            "{}",
            drawn.time_s.len()
        );
        assert!(drawn.time_s.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(drawn.time_s.first(), Some(&1e-3));
        assert_eq!(drawn.time_s.last(), run.times_s.last());
        assert_eq!(
            drawn.throughput_bps.iter().filter(|&&v| v == 9e9).count(),
            1
        );
        assert!(drawn.ideal_bps.iter().all(|&v| v == 1e9));
    }
}
