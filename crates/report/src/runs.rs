//! Runs read back from the files they left, for report.html: one loader for the
//! report `nicsched sim` and `nicsched lab` write beside their runs and for
//! `nicsched report`, which overlays runs of any world from their folders.
//!
//! A run's folder holds summary.json, timeseries.csv and, where it measured
//! latency, latency.csv. Runs on one host report per tenant and app; runs across
//! hosts (summary.json with `flows`) per flow, with its sending VM.

use std::collections::BTreeMap;
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
use crate::summary::{Summary, judged};

/// One series of a run's throughput: a tenant, an app or a flow, over time.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub kind: SeriesKind,
    /// `tenant`, `tenant/app`, `flow`, or `host/vm`.
    pub name: String,
    pub time_s: Vec<f64>,
    pub throughput_bps: Vec<f64>,
    pub ideal_bps: Vec<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SeriesKind {
    Tenant,
    App,
    /// A sending VM of a run across hosts: its flows together.
    Vm,
    Flow,
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
    pub series: Vec<Series>,
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
pub fn read_run(dir: &Path) -> io::Result<Run> {
    let summary_path = dir.join(SUMMARY_JSON);
    let text = fs::read_to_string(&summary_path).map_err(at(&summary_path))?;
    let invalid = |path: &Path, what: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        )
    };
    let not_summary = |e: serde_json::Error| {
        invalid(
            &summary_path,
            format!("not a nicsched summary.json ({e}); run it again"),
        )
    };
    let json: serde_json::Value = serde_json::from_str(&text).map_err(not_summary)?;
    let timeseries_path = dir.join(TIMESERIES_CSV);
    let timeseries = fs::read_to_string(&timeseries_path).map_err(at(&timeseries_path))?;
    let table = parse_csv(&timeseries).map_err(|e| invalid(&timeseries_path, e))?;
    let mut run = if json.get("flows").is_some() {
        let summary: HostsSummaryFile = serde_json::from_value(json).map_err(not_summary)?;
        let rows = hosts_rows(&table).map_err(|e| invalid(&timeseries_path, e))?;
        hosts_run(dir, summary, &rows)
    } else {
        let summary: Summary = serde_json::from_value(json).map_err(not_summary)?;
        let rows = one_host_rows(&table).map_err(|e| invalid(&timeseries_path, e))?;
        one_host_run(dir, summary, &rows)
    };
    let latency_path = dir.join(LATENCY_CSV);
    match fs::read_to_string(&latency_path) {
        Ok(text) => {
            run.latency = latency_cdfs(&text).map_err(|e| invalid(&latency_path, e))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(at(&latency_path)(e)),
    }
    run.files = LINKED_FILES
        .into_iter()
        .filter(|name| dir.join(name).is_file())
        .collect();
    Ok(run)
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

/// One row of a one-host timeseries.csv.
struct OneHostRow {
    time_s: f64,
    tenant: String,
    app: String,
    throughput_bps: f64,
    ideal_bps: f64,
}

/// One row of a timeseries.csv across hosts.
struct HostsRow {
    time_s: f64,
    host: String,
    vm: String,
    flow: String,
    throughput_bps: f64,
    ideal_bps: f64,
}

fn one_host_run(dir: &Path, summary: Summary, rows: &[OneHostRow]) -> Run {
    let mut series = Series::grouped();
    for row in rows {
        let at = (row.time_s, row.throughput_bps, row.ideal_bps);
        series.add(SeriesKind::Tenant, &row.tenant, at);
        series.add(SeriesKind::App, &format!("{}/{}", row.tenant, row.app), at);
    }
    let mut series = series.finish();
    // A tenant of one app would get the same chart twice.
    let apps_of = |tenant: &str| {
        rows.iter()
            .filter(|r| r.tenant == tenant)
            .map(|r| r.app.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    series.retain(|s| {
        s.kind != SeriesKind::App || apps_of(s.name.split_once('/').map_or("", |(t, _)| t)) > 1
    });
    let tenants: Vec<&Series> = series
        .iter()
        .filter(|s| s.kind == SeriesKind::Tenant)
        .collect();
    let fairness = interval_points(&tenants);
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
        series,
        fairness,
        latency: Vec::new(),
        files: Vec::new(),
    }
}

fn hosts_run(dir: &Path, summary: HostsSummaryFile, rows: &[HostsRow]) -> Run {
    let mut series = Series::grouped();
    for row in rows {
        let at = (row.time_s, row.throughput_bps, row.ideal_bps);
        series.add(SeriesKind::Vm, &format!("{}/{}", row.host, row.vm), at);
        series.add(SeriesKind::Flow, &row.flow, at);
    }
    let mut series = series.finish();
    let vms: Vec<&Series> = series.iter().filter(|s| s.kind == SeriesKind::Vm).collect();
    // As summary.json's figures: over the VMs that send, what reached their peers.
    let fairness = interval_points(&vms);
    // A VM of one flow would get the same chart twice.
    let flows_of = |vm: &str| {
        rows.iter()
            .filter(|r| format!("{}/{}", r.host, r.vm) == vm)
            .map(|r| r.flow.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    series.retain(|s| s.kind != SeriesKind::Vm || flows_of(&s.name) > 1);
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
        series,
        fairness,
        latency: Vec::new(),
        files: Vec::new(),
    }
}

/// Sums of rows into series, in the order each first appears.
struct Grouped {
    series: Vec<Series>,
    index: BTreeMap<(SeriesKind, String), usize>,
}

impl Series {
    fn grouped() -> Grouped {
        Grouped {
            series: Vec::new(),
            index: BTreeMap::new(),
        }
    }
}

impl Grouped {
    /// Adds `(time_s, throughput_bps, ideal_bps)` to the series `name`: to its
    /// last point when at the same time, so that a tenant is the sum of its apps.
    fn add(&mut self, kind: SeriesKind, name: &str, (time_s, throughput, ideal): (f64, f64, f64)) {
        let at = *self
            .index
            .entry((kind, name.to_string()))
            .or_insert_with(|| {
                self.series.push(Series {
                    kind,
                    name: name.to_string(),
                    time_s: Vec::new(),
                    throughput_bps: Vec::new(),
                    ideal_bps: Vec::new(),
                });
                self.series.len() - 1
            });
        let series = &mut self.series[at];
        if series.time_s.last() == Some(&time_s) {
            *series.throughput_bps.last_mut().expect("one per time") += throughput;
            *series.ideal_bps.last_mut().expect("one per time") += ideal;
        } else {
            series.time_s.push(time_s);
            series.throughput_bps.push(throughput);
            series.ideal_bps.push(ideal);
        }
    }

    /// The series by kind, each kind in the order its members first appeared.
    fn finish(mut self) -> Vec<Series> {
        self.series.sort_by_key(|s| s.kind);
        self.series
    }
}

/// Per interval, fairness over `members` as summary.json defines it (every
/// interval here: timeseries.csv does not mark which intervals summary.json
/// leaves out as unsteady).
fn interval_points(members: &[&Series]) -> Vec<IntervalPoint> {
    // Members' rows of one interval carry the very same time, written alike: an
    // interval by its time's bits.
    let mut intervals: BTreeMap<u64, Vec<(usize, f64, f64)>> = BTreeMap::new();
    for (index, member) in members.iter().enumerate() {
        for (at, time_s) in member.time_s.iter().enumerate() {
            intervals.entry(time_s.to_bits()).or_default().push((
                index,
                member.throughput_bps[at],
                member.ideal_bps[at],
            ));
        }
    }
    let mut points: Vec<IntervalPoint> = intervals
        .into_iter()
        .filter_map(|(bits, shares)| {
            let figures = judged(shares)?;
            let errors = figures.rel_error.len() as f64;
            Some(IntervalPoint {
                time_s: f64::from_bits(bits),
                jain: figures.jain,
                rel_error: figures.rel_error.iter().map(|&(_, e)| e).sum::<f64>() / errors,
            })
        })
        .collect();
    points.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
    points
}

/// A CSV file with a header, as files.rs writes it (RFC 4180 quoting): each
/// record by its header's column names.
struct Table {
    header: Vec<String>,
    records: Vec<(usize, Vec<String>)>,
}

impl Table {
    fn column(&self, name: &str) -> Result<usize, String> {
        self.header.iter().position(|h| h == name).ok_or_else(|| {
            format!(
                "no `{name}` column in its header ({}); run it again",
                self.header.join(",")
            )
        })
    }
}

fn parse_csv(text: &str) -> Result<Table, String> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut line = 1;
    let mut record_line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                records.push((record_line, std::mem::take(&mut record)));
                line += 1;
                record_line = line;
            }
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (_, c) => {
                if c == '\n' {
                    line += 1;
                }
                field.push(c);
            }
        }
    }
    if quoted {
        return Err(format!("line {record_line}: a quoted field is not closed"));
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push((record_line, record));
    }
    let mut records = records.into_iter();
    let (_, header) = records
        .next()
        .ok_or_else(|| "empty, without its header; run it again".to_string())?;
    let records: Vec<(usize, Vec<String>)> = records.collect();
    if let Some((line, record)) = records.iter().find(|(_, r)| r.len() != header.len()) {
        return Err(format!(
            "line {line}: {} fields where the header has {}",
            record.len(),
            header.len()
        ));
    }
    Ok(Table { header, records })
}

fn number(table: &Table, line: usize, record: &[String], column: usize) -> Result<f64, String> {
    let text = &record[column];
    text.parse::<f64>()
        .ok()
        .filter(|value| value.is_finite())
        .ok_or_else(|| {
            format!(
                "line {line}: `{}` is {text:?}, not a number",
                table.header[column]
            )
        })
}

fn one_host_rows(table: &Table) -> Result<Vec<OneHostRow>, String> {
    let [time, tenant, app, throughput, ideal] =
        ["time_s", "tenant", "app", "throughput_bps", "ideal_bps"].map(|name| table.column(name));
    let (time, tenant, app, throughput, ideal) = (time?, tenant?, app?, throughput?, ideal?);
    table
        .records
        .iter()
        .map(|(line, r)| {
            Ok(OneHostRow {
                time_s: number(table, *line, r, time)?,
                tenant: r[tenant].clone(),
                app: r[app].clone(),
                throughput_bps: number(table, *line, r, throughput)?,
                ideal_bps: number(table, *line, r, ideal)?,
            })
        })
        .collect()
}

fn hosts_rows(table: &Table) -> Result<Vec<HostsRow>, String> {
    let [time, host, tenant, flow, throughput, ideal] = [
        "time_s",
        "host",
        "tenant",
        "flow",
        "throughput_bps",
        "ideal_bps",
    ]
    .map(|name| table.column(name));
    let (time, host, tenant, flow, throughput, ideal) =
        (time?, host?, tenant?, flow?, throughput?, ideal?);
    table
        .records
        .iter()
        .map(|(line, r)| {
            Ok(HostsRow {
                time_s: number(table, *line, r, time)?,
                host: r[host].clone(),
                vm: r[tenant].clone(),
                flow: r[flow].clone(),
                throughput_bps: number(table, *line, r, throughput)?,
                ideal_bps: number(table, *line, r, ideal)?,
            })
        })
        .collect()
}

fn latency_cdfs(text: &str) -> Result<Vec<LatencyCdf>, String> {
    let table = parse_csv(text)?;
    let [traffic, quantile, latency] =
        ["traffic", "quantile", "latency_us"].map(|name| table.column(name));
    let (traffic, quantile, latency) = (traffic?, quantile?, latency?);
    let mut cdfs: Vec<LatencyCdf> = Vec::new();
    for (line, r) in &table.records {
        let point = (
            number(&table, *line, r, quantile)?,
            number(&table, *line, r, latency)?,
        );
        match cdfs.last_mut() {
            Some(cdf) if cdf.traffic == r[traffic] => cdf.points.push(point),
            _ => cdfs.push(LatencyCdf {
                traffic: r[traffic].clone(),
                points: vec![point],
            }),
        }
    }
    Ok(cdfs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_read_back_as_files_rs_quotes_them() {
        let table = parse_csv("a,b\r\n\"x,\"\"y\"\"\",\"two\nlines\"\n1,\n").unwrap();
        assert_eq!(table.header, ["a", "b"]);
        assert_eq!(
            table.records,
            [
                (2, vec!["x,\"y\"".to_string(), "two\nlines".to_string()]),
                (4, vec!["1".to_string(), String::new()]),
            ]
        );
        let short = parse_csv("a,b\n1\n").err().unwrap();
        assert_eq!(short, "line 2: 1 fields where the header has 2");
        assert!(parse_csv("a\n\"open\n").is_err());
    }

    #[test]
    fn tenants_are_their_apps_summed_and_fairness_is_judged_per_interval() {
        let rows = [
            (0.1, "t1", "a", 3e8, 2.5e8),
            (0.1, "t1", "b", 2e8, 2.5e8),
            (0.1, "t2", "c", 5e8, 5e8),
            (0.2, "t1", "a", 1e8, 2.5e8),
            (0.2, "t1", "b", 1e8, 2.5e8),
            (0.2, "t2", "c", 8e8, 5e8),
        ]
        .map(
            |(time_s, tenant, app, throughput_bps, ideal_bps)| OneHostRow {
                time_s,
                tenant: tenant.into(),
                app: app.into(),
                throughput_bps,
                ideal_bps,
            },
        );
        let members: Vec<Series> = {
            let mut grouped = Series::grouped();
            for r in &rows {
                grouped.add(
                    SeriesKind::Tenant,
                    &r.tenant,
                    (r.time_s, r.throughput_bps, r.ideal_bps),
                );
            }
            grouped.finish()
        };
        assert_eq!(members[0].throughput_bps, [5e8, 2e8]);
        assert_eq!(members[0].ideal_bps, [5e8, 5e8]);
        let points = interval_points(&members.iter().collect::<Vec<_>>());
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].jain, 1.0);
        assert_eq!(points[0].rel_error, 0.0);
        // Shares 0.4 and 1.6: Jain 4 / (2 × 2.72), errors 0.6 and 0.6.
        assert!((points[1].jain - 4.0 / 5.44).abs() < 1e-12);
        assert!((points[1].rel_error - 0.6).abs() < 1e-12);
    }
}
