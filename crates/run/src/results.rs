//! What a run gives, and how the runs of one command are written: each run's
//! folder as it finishes, then the overlays, report.html, the move into `--out`,
//! and the table (or `--json`) with every failed self-check beneath it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::provenance::stamp;
use crate::{EXIT_CHECKS_FAILED, Failure, output};

/// One enforcer's run, in whichever world ran it.
pub enum Ran {
    /// On one host: its record, which keeps its own seed and settings.
    OneHost(Box<report::RunRecord>),
    /// Across hosts: its summary (checks included), timeseries rows and the
    /// world's settings for its provenance.
    Hosts {
        summary: Box<report::HostsSummary>,
        rows: Vec<report::HostsRow>,
        settings: BTreeMap<String, String>,
    },
}

/// The runs of one command written so far, one host or across hosts.
pub(crate) enum Written {
    OneHost {
        runs: Vec<(report::Summary, PathBuf)>,
        records: Vec<report::RunRecord>,
    },
    Hosts(HostsResults),
}

impl Written {
    pub(crate) fn new(across_hosts: bool) -> Self {
        if across_hosts {
            Written::Hosts(HostsResults::default())
        } else {
            Written::OneHost {
                runs: Vec::new(),
                records: Vec::new(),
            }
        }
    }

    /// Writes `ran`, `name`'s run, under its folder of `out`, stamped with the
    /// command's `provenance`.
    pub(crate) fn add(
        &mut self,
        out: &report::OutDir,
        name: &str,
        ran: Ran,
        provenance: &report::Provenance,
    ) -> Result<(), Failure> {
        match (self, ran) {
            (Written::OneHost { runs, records }, Ran::OneHost(mut record)) => {
                stamp(&mut record, provenance);
                let dir = out.staging().join(name);
                let summary =
                    report::write_run(&dir, &record).map_err(|e| unwritten(out.target(), e))?;
                runs.push((summary, dir));
                records.push(*record);
                Ok(())
            }
            (
                Written::Hosts(results),
                Ran::Hosts {
                    summary,
                    rows,
                    settings,
                },
            ) => HostsRunOut {
                summary: *summary,
                rows,
                provenance: report::Provenance {
                    settings,
                    ..provenance.clone()
                },
            }
            .write(out, name, results),
            _ => unreachable!("a world gives runs of its own kind"),
        }
    }

    /// The overlays and report.html beside the runs, the results moved into
    /// `out`, and what the command prints of them.
    pub(crate) fn finish(
        self,
        out: report::OutDir,
        scenario: &str,
        provenance: &report::Provenance,
        json: bool,
    ) -> Result<(), Failure> {
        match self {
            Written::OneHost { runs, records } => {
                overlay(&out, &records)?;
                finish(out, runs, provenance, json)
            }
            Written::Hosts(results) => finish_hosts(out, scenario, provenance, &results, json),
        }
    }
}

/// One run across hosts, simulated or in the lab, with what it is written with.
struct HostsRunOut {
    summary: report::HostsSummary,
    rows: Vec<report::HostsRow>,
    provenance: report::Provenance,
}

impl HostsRunOut {
    /// Writes summary.json and timeseries.csv under the enforcer's folder and adds
    /// the run to `results`.
    fn write(
        self,
        out: &report::OutDir,
        name: &str,
        results: &mut HostsResults,
    ) -> Result<(), Failure> {
        let HostsRunOut {
            summary,
            rows,
            provenance,
        } = self;
        let dir = out.staging().join(name);
        let write = || -> std::io::Result<serde_json::Value> {
            std::fs::create_dir_all(&dir)?;
            let mut json = serde_json::to_value(&summary).map_err(std::io::Error::other)?;
            json["provenance"] =
                serde_json::to_value(&provenance).map_err(std::io::Error::other)?;
            std::fs::write(
                dir.join("summary.json"),
                serde_json::to_string_pretty(&json).map_err(std::io::Error::other)? + "\n",
            )?;
            report::write_hosts_timeseries(&dir.join(report::TIMESERIES_CSV), &rows)?;
            Ok(json)
        };
        let json = write().map_err(|e| unwritten(out.target(), e))?;
        for flow in &summary.flows {
            results.table.push(vec![
                name.to_string(),
                flow.name.clone(),
                format!("{}→{}", flow.from, flow.to),
                policy::format_rate(flow.throughput_bps),
                policy::format_rate(flow.ideal_bps),
                format!("{:.3}", flow.rel_error_mean),
            ]);
        }
        results.failed.extend(
            summary
                .checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| (format!("{name}/{}", c.name), c.detail.clone())),
        );
        results.summaries.push(json);
        results.runs.push((name.to_string(), rows));
        Ok(())
    }
}

/// The runs across hosts of one command, as they are written.
#[derive(Default)]
pub(crate) struct HostsResults {
    /// A row per flow of every run.
    table: Vec<Vec<String>>,
    /// `ENFORCER/CHECK` and its detail of every failed self-check.
    failed: Vec<(String, String)>,
    /// What each run's summary.json holds.
    summaries: Vec<serde_json::Value>,
    /// Each run's enforcer and timeseries rows.
    runs: Vec<(String, Vec<report::HostsRow>)>,
}

/// Writes the overlay PNG and report.html beside the runs across hosts of
/// `scenario`, moves them into `--out`, prints their table (or with `json` their
/// summaries) with every failed self-check beneath it, and fails with status 3
/// when one did.
fn finish_hosts(
    out: report::OutDir,
    scenario: &str,
    provenance: &report::Provenance,
    results: &HostsResults,
    json: bool,
) -> Result<(), Failure> {
    let HostsResults {
        table,
        failed,
        summaries,
        runs,
    } = results;
    report::write_hosts_overlay_plot(out.staging(), scenario, runs)
        .map_err(|e| unwritten(out.target(), e))?;
    let dirs: Vec<PathBuf> = runs
        .iter()
        .map(|(name, _)| out.staging().join(name))
        .collect();
    report::write_html(out.staging(), &dirs).map_err(|e| unwritten(out.target(), e))?;
    let target = out.target().to_path_buf();
    let out = out.commit(provenance).map_err(|e| unwritten(&target, e))?;
    if json {
        let failed_checks: Vec<String> = failed.iter().map(|(check, _)| check.clone()).collect();
        output::print_json(&output::Ran {
            results: out.display().to_string(),
            report: out.join(report::REPORT_HTML).display().to_string(),
            across_hosts: true,
            runs: summaries,
            failed_checks: &failed_checks,
        });
    } else {
        let header: Vec<String> = [
            "enforcer",
            "flow",
            "VMs",
            "throughput",
            "ideal",
            "rel_error",
        ]
        .map(String::from)
        .to_vec();
        println!("{}", report::aligned_table(&header, table, 3, false));
        print_where(&out);
    }
    if failed.is_empty() {
        Ok(())
    } else {
        for (check, detail) in failed {
            eprintln!("check failed: {check}: {detail}");
        }
        Err(Failure {
            message: "self-checks failed: the figures of those runs are flagged, not vouched for"
                .to_string(),
            status: EXIT_CHECKS_FAILED,
        })
    }
}

/// A file of the run that could not be written (`error` names it): the run fails
/// and, as its `OutDir` drops, the staging folder goes with everything written so far.
pub fn unwritten(target: &Path, error: std::io::Error) -> Failure {
    Failure::runtime(format!(
        "{error}\nthe run is not in {}, which only a whole run replaces",
        target.display()
    ))
}

/// The overlay plots of a scenario's runs, beside report.html.
fn overlay(out: &report::OutDir, records: &[report::RunRecord]) -> Result<(), Failure> {
    let records: Vec<&report::RunRecord> = records.iter().collect();
    report::write_overlay_plots(out.staging(), &records).map_err(|e| unwritten(out.target(), e))
}

/// Writes report.html beside the runs, moves the results into `--out`, prints the
/// table with every failed self-check beneath it, and fails with status 3 when one
/// did: everything is written, but those figures are not vouched for.
fn finish(
    out: report::OutDir,
    runs: Vec<(report::Summary, PathBuf)>,
    provenance: &report::Provenance,
    json: bool,
) -> Result<(), Failure> {
    let dirs: Vec<PathBuf> = runs.iter().map(|(_, dir)| dir.clone()).collect();
    report::write_html(out.staging(), &dirs).map_err(|e| unwritten(out.target(), e))?;
    let target = out.target().to_path_buf();
    let out = out.commit(provenance).map_err(|e| unwritten(&target, e))?;
    let summaries: Vec<report::Summary> = runs.into_iter().map(|(s, _)| s).collect();
    let failed: Vec<String> = summaries
        .iter()
        .flat_map(|s| {
            s.failed_checks()
                .map(|c| format!("{}/{}", s.enforcer, c.name))
        })
        .collect();
    if json {
        output::print_json(&output::Ran {
            results: out.display().to_string(),
            report: out.join(report::REPORT_HTML).display().to_string(),
            across_hosts: false,
            runs: &summaries,
            failed_checks: &failed,
        });
    } else {
        println!("{}", report::comparison_table(&summaries));
        print_where(&out);
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure {
            message: format!(
                "self-checks failed ({}): the figures of those runs are flagged, not vouched for",
                failed.join(", ")
            ),
            status: EXIT_CHECKS_FAILED,
        })
    }
}

/// The line after the table that says where the results and their page are.
fn print_where(out: &Path) {
    println!(
        "results: {}  report: {}",
        out.display(),
        out.join(report::REPORT_HTML).display()
    );
}
