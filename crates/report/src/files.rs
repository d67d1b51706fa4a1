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

/// Writes every file of one run into `dir` (created if needed) and returns its summary.
pub fn write_run(dir: &Path, run: &RunRecord) -> io::Result<Summary> {
    fs::create_dir_all(dir)?;
    let summary = summarize(run);
    fs::write(dir.join(SUMMARY_JSON), summary.to_json() + "\n")?;
    write_timeseries(&dir.join(TIMESERIES_CSV), run)?;
    write_latency(&dir.join(LATENCY_CSV), run)?;
    plot::throughput(&dir.join(THROUGHPUT_PNG), run)?;
    plot::fairness(&dir.join(FAIRNESS_PNG), run)?;
    let latency_cdf = dir.join(LATENCY_CDF_PNG);
    if plot::has_latency(run) {
        plot::latency_cdf(&latency_cdf, run)?;
    } else {
        // A CDF left by an earlier run into the same folder would end up in report.html.
        match fs::remove_file(&latency_cdf) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
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
