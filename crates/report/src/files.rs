//! The files one run leaves in its folder: summary.json, the two CSVs and the plots.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::figures::{latency_quantiles, latency_us_at};
use crate::plot;
use crate::record::RunRecord;
use crate::summary::{Summary, summarize};

pub const SUMMARY_JSON: &str = "summary.json";
pub const TIMESERIES_CSV: &str = "timeseries.csv";
pub const LATENCY_CSV: &str = "latency.csv";
pub const THROUGHPUT_PNG: &str = "throughput.png";
pub const FAIRNESS_PNG: &str = "fairness.png";
pub const LATENCY_CDF_PNG: &str = "latency_cdf.png";

pub const TIMESERIES_HEADER: &str = "time_s,tenant,app,throughput_bps,ideal_bps";
pub const LATENCY_HEADER: &str = "traffic,quantile,latency_us";

/// `error` with the path it happened at in front: "No space left on device" alone
/// does not say which file is missing.
pub(crate) fn at(path: &Path) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |error| io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// Writes every file of one run into `dir` (created if needed) and returns its
/// summary. An error names the file it happened at.
pub fn write_run(dir: &Path, run: &RunRecord) -> io::Result<Summary> {
    fs::create_dir_all(dir).map_err(at(dir))?;
    let summary = summarize(run);
    let file = |name: &str, write: &dyn Fn(&Path) -> io::Result<()>| {
        let path = dir.join(name);
        write(&path).map_err(at(&path))
    };
    file(SUMMARY_JSON, &|path| {
        fs::write(path, summary.to_json() + "\n")
    })?;
    file(TIMESERIES_CSV, &|path| write_timeseries(path, run))?;
    file(LATENCY_CSV, &|path| write_latency(path, run))?;
    file(THROUGHPUT_PNG, &|path| plot::throughput(path, run))?;
    file(FAIRNESS_PNG, &|path| plot::fairness(path, run))?;
    if plot::has_latency(run) {
        file(LATENCY_CDF_PNG, &|path| plot::latency_cdf(path, run))?;
    } else {
        // A CDF left by an earlier run into the same folder would end up in report.html.
        file(LATENCY_CDF_PNG, &|path| match fs::remove_file(path) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        })?;
    }
    Ok(summary)
}

fn write_timeseries(path: &Path, run: &RunRecord) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    writeln!(out, "{TIMESERIES_HEADER}")?;
    for interval in &run.intervals {
        for (class, name) in run.classes.iter().enumerate() {
            writeln!(
                out,
                "{},{},{},{},{}",
                interval.end_s(),
                csv_field(&name.tenant),
                csv_field(&name.app),
                interval.class_throughput_bps(class),
                interval.class_ideal_bps(class),
            )?;
        }
    }
    out.flush()
}

fn write_latency(path: &Path, run: &RunRecord) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    writeln!(out, "{LATENCY_HEADER}")?;
    let quantiles = latency_quantiles();
    for record in &run.latency {
        let traffic = csv_field(&record.traffic);
        for &quantile in &quantiles {
            let latency_us = latency_us_at(&record.histogram_ns, quantile);
            writeln!(out, "{traffic},{quantile},{latency_us}")?;
        }
    }
    out.flush()
}

/// Names come from scenario files and may hold anything; quote them the RFC 4180 way
/// when they would break the row.
fn csv_field(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// The file that marks a folder as a nicsched run's: what `--out` may replace.
pub const RUN_MARKER: &str = "nicsched-run.json";

/// A run's `--out`, owned for the run: its files are written beside the folder,
/// in a staging folder of its own, and only a run that finished moves them in,
/// replacing an earlier nicsched run whole (never leaving another run's enforcer
/// folders beside its own). A folder with files that no nicsched run made is
/// refused before anything runs. Dropped uncommitted, the staging folder goes.
#[derive(Debug)]
pub struct OutDir {
    target: std::path::PathBuf,
    staging: std::path::PathBuf,
    committed: bool,
}

impl OutDir {
    /// Claims `target`, or says why it cannot be a run's folder.
    pub fn claim(target: &Path) -> Result<OutDir, String> {
        match fs::read_dir(target) {
            Ok(mut entries) => {
                if entries.next().is_some() && !target.join(RUN_MARKER).is_file() {
                    return Err(format!(
                        "{}: the folder has files that no nicsched run made; give --out an empty or new folder, or an earlier run's",
                        target.display()
                    ));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                return Err(format!("{}: not a folder", target.display()));
            }
            Err(e) => return Err(format!("{}: {e}", target.display())),
        }
        let name = target
            .file_name()
            .ok_or_else(|| format!("{}: not a folder a run can own", target.display()))?
            .to_string_lossy()
            .into_owned();
        let staging = target.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
        Ok(OutDir {
            target: target.to_path_buf(),
            staging,
            committed: false,
        })
    }

    /// Where the run writes its files until it commits.
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    /// Where the files will be once committed.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Marks the staging folder as a run's (`marker` is written to [`RUN_MARKER`])
    /// and moves it in place of the target.
    pub fn commit(mut self, marker: &str) -> io::Result<std::path::PathBuf> {
        fs::write(self.staging.join(RUN_MARKER), marker)?;
        if self.target.exists() {
            let mut old_name = self.staging.file_name().unwrap_or_default().to_os_string();
            old_name.push(".old");
            let old = self.staging.with_file_name(old_name);
            fs::rename(&self.target, &old)?;
            fs::rename(&self.staging, &self.target)?;
            fs::remove_dir_all(&old)?;
        } else {
            fs::rename(&self.staging, &self.target)?;
        }
        self.committed = true;
        Ok(self.target.clone())
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.staging);
        }
    }
}
