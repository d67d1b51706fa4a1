//! Runs of one scenario side by side, whatever made them: the simulator and the lab,
//! two seeds, two commits. Reads the summary.json files that `nicsched sim` and
//! `nicsched lab` leave, from complete runs only, and lays out one row per run with
//! each tenant's throughput against its ideal, so a reader sees at once where two
//! worlds disagree.

use std::io;
use std::path::{Path, PathBuf};

use crate::files::{RUN_MARKER, SUMMARY_JSON, at, complete_run_files, staged_for};
use crate::summary::Summary;
use crate::table::figure_cell;

/// The summaries under `path`, which must lie inside a complete run (one whose
/// nicsched-run.json lists every file the run wrote, each still there at the size
/// it was written): `path` itself if it is a summary.json, the folder of one
/// enforcer's run, or every `ENFORCER/summary.json` of a run's folder (the `--out`
/// of sim or lab), by enforcer name.
pub fn load_summaries(path: &Path) -> io::Result<Vec<Summary>> {
    complete_summaries(path)?
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).map_err(at(file))?;
            serde_json::from_str(&text).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: not a nicsched summary.json: {e}", file.display()),
                )
            })
        })
        .collect()
}

/// The summary.json files `path` names, as [`load_summaries`] takes them, checked
/// to lie in a complete run; by enforcer name.
pub(crate) fn complete_summaries(path: &Path) -> io::Result<Vec<PathBuf>> {
    let found = path.canonicalize().map_err(at(path))?;
    let root = run_folder(path, &found)?;
    let files = complete_run_files(&root)?;
    let relative = found
        .strip_prefix(&root)
        .expect("the run's folder holds the path");
    let listed = |file: &Path| files.iter().any(|f| Path::new(&f.path) == file);
    let summaries: Vec<PathBuf> = if !found.is_dir() {
        if !listed(relative) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: not a file of the run in {} (its {RUN_MARKER} does not list it)",
                    path.display(),
                    root.display()
                ),
            ));
        }
        vec![relative.to_path_buf()]
    } else if listed(&relative.join(SUMMARY_JSON)) {
        vec![relative.join(SUMMARY_JSON)]
    } else {
        let mut runs: Vec<PathBuf> = files
            .iter()
            .map(|f| PathBuf::from(&f.path))
            .filter(|f| {
                f.file_name().is_some_and(|name| name == SUMMARY_JSON)
                    && f.parent().and_then(Path::parent) == Some(relative)
            })
            .collect();
        runs.sort();
        runs
    };
    if summaries.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{}: no summary.json here or in its subfolders (give the --out folder of `nicsched sim` or `nicsched lab`)",
                path.display()
            ),
        ));
    }
    Ok(summaries
        .iter()
        .map(|relative| root.join(relative))
        .collect())
}

/// The run `found` (`path`, canonical) lies in: the nearest folder at or above it
/// that holds the marker. A folder an unfinished run wrote in is never one, marker
/// or not: the marker is written there just before the folder moves into place.
fn run_folder(path: &Path, found: &Path) -> io::Result<PathBuf> {
    let folder = if found.is_dir() {
        found
    } else {
        found.parent().expect("a file is in a folder")
    };
    for dir in folder.ancestors() {
        let name = dir.file_name().and_then(|name| name.to_str());
        if name.and_then(staged_for).is_some() {
            let inside = if dir == found {
                String::new()
            } else {
                format!("inside {}, ", dir.display())
            };
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: {inside}the folder of a run that did not finish (it failed, was stopped, or still runs), not a complete run; run it again",
                    path.display(),
                ),
            ));
        }
        if dir.join(RUN_MARKER).is_file() {
            return Ok(dir.to_path_buf());
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "{}: not a complete nicsched run: no {RUN_MARKER} in it or in a folder above it, and a run writes it last (one that failed or was stopped leaves none); give the --out folder of a `nicsched sim` or `nicsched lab` that finished, or run it again",
            path.display()
        ),
    ))
}

/// One row per run: scenario, enforcer, mode, utilization, Jain mean/min, mean
/// relative error, then per tenant (in the first run's order) `got/ideal` in Mbit/s,
/// and the p99 of every latency traffic in µs. `markdown`: a Markdown table instead
/// of aligned text.
pub fn side_by_side(runs: &[Summary], markdown: bool) -> String {
    let tenants: Vec<&str> = runs
        .first()
        .map(|run| run.tenants.iter().map(|t| t.name.as_str()).collect())
        .unwrap_or_default();
    let mut traffics: Vec<&str> = runs
        .iter()
        .flat_map(|run| run.latency.keys().map(String::as_str))
        .collect();
    traffics.sort_unstable();
    traffics.dedup();
    let mut header: Vec<String> = [
        "scenario",
        "enforcer",
        "mode",
        "util.",
        "Jain mean/min",
        "rel. err.",
    ]
    .map(String::from)
    .into();
    header.extend(tenants.iter().map(|t| format!("{t} Mbit/s")));
    header.extend(traffics.iter().map(|t| format!("{t} p99 µs")));
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let mut row = vec![
                run.scenario.clone(),
                run.enforcer.clone(),
                run.mode.as_str().to_string(),
                figure_cell(run.utilization, 3),
                format!(
                    "{} / {}",
                    figure_cell(run.fairness.jain_mean, 3),
                    figure_cell(run.fairness.jain_min, 3)
                ),
                figure_cell(run.fairness.rel_error_mean, 3),
            ];
            row.extend(tenants.iter().map(
                |&name| match run.tenants.iter().find(|t| t.name == name) {
                    Some(t) => format!(
                        "{}/{}",
                        figure_cell(t.throughput_bps / 1e6, 0),
                        figure_cell(t.ideal_bps / 1e6, 0)
                    ),
                    None => "-".into(),
                },
            ));
            row.extend(
                traffics
                    .iter()
                    .map(|&traffic| match run.latency.get(traffic) {
                        Some(latency) if latency.count > 0 => figure_cell(latency.p99_us, 0),
                        _ => "-".into(),
                    }),
            );
            row
        })
        .collect();
    if markdown {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut table = line(&header);
        table.push_str(&line(&vec!["---".to_string(); header.len()]));
        for row in &rows {
            table.push_str(&line(row));
        }
        return table;
    }
    crate::table::aligned_table(&header, &rows, 3, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::OutDir;
    use crate::files::tests::{TempDir, committed_run};
    use std::fs;

    fn summary_json(enforcer: &str, mode: &str, t1_bps: f64) -> String {
        format!(
            r#"{{"scenario": "s", "enforcer": "{enforcer}", "mode": "{mode}", "duration_s": 1.0,
  "interval_s": 0.5, "link_rate_bps": 1000000000, "utilization": 0.97, "seed": 1,
  "tenants": [
    {{"name": "t1", "throughput_bps": {t1_bps}, "ideal_bps": 5e8, "rel_error_mean": 0.01,
      "rel_error_max": 0.02, "drops": 0, "apps": []}},
    {{"name": "t2", "throughput_bps": 4.5e8, "ideal_bps": 5e8, "rel_error_mean": 0.1,
      "rel_error_max": 0.1, "drops": 3, "apps": []}}],
  "fairness": {{"jain_mean": 0.999, "jain_min": 0.98, "rel_error_mean": 0.05,
    "rel_error_max": 0.1, "intervals": 2}},
  "latency": {{"probe": {{"count": 10, "mean_us": 40.0, "min_us": 30.0, "p50_us": 35.0,
    "p90_us": 60.0, "p99_us": 120.4, "p999_us": 300.0, "max_us": 310.0}}}},
  "pacing": {{}}, "frames_sent": 100}}"#
        )
    }

    #[test]
    fn a_results_folder_gives_one_row_per_run_with_tenants_against_their_ideal() {
        let temp = TempDir::new("compare");
        let dir = temp.0.join("lab");
        let (wf2q, tonic) = (
            summary_json("wf2q", "lab", 5.1e8),
            summary_json("tonic", "lab", 4.9e8),
        );
        committed_run(
            &dir,
            &[("wf2q/summary.json", &wf2q), ("tonic/summary.json", &tonic)],
        );
        let runs = load_summaries(&dir).unwrap();
        assert_eq!(
            runs.iter().map(|r| r.enforcer.as_str()).collect::<Vec<_>>(),
            ["tonic", "wf2q"]
        );
        assert_eq!(load_summaries(&dir.join("wf2q")).unwrap().len(), 1);
        let markdown = side_by_side(&runs, true);
        assert_eq!(
            markdown.lines().collect::<Vec<_>>(),
            [
                "| scenario | enforcer | mode | util. | Jain mean/min | rel. err. | t1 Mbit/s | t2 Mbit/s | probe p99 µs |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
                "| s | tonic | lab | 0.970 | 0.999 / 0.980 | 0.050 | 490/500 | 450/500 | 120 |",
                "| s | wf2q | lab | 0.970 | 0.999 / 0.980 | 0.050 | 510/500 | 450/500 | 120 |",
            ]
        );
        let text = side_by_side(&runs, false);
        assert_eq!(text.lines().count(), 3);
        assert!(
            text.lines()
                .nth(1)
                .unwrap()
                .starts_with("s         tonic     lab")
        );
    }

    #[test]
    fn folders_without_summaries_and_foreign_json_are_errors_that_say_what_to_give() {
        let temp = TempDir::new("compare-bad");
        let error = load_summaries(&temp.0).unwrap_err();
        assert!(error.to_string().contains("--out folder"), "{error}");
        let missing = temp.0.join("missing");
        let error = load_summaries(&missing).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with(&missing.display().to_string()),
            "{error}"
        );
        let foreign = temp.0.join("foreign");
        committed_run(&foreign, &[("summary.json", "{\"scenario\": 1}")]);
        let error = load_summaries(&foreign).unwrap_err();
        assert!(
            error.to_string().contains("not a nicsched summary.json"),
            "{error}"
        );
        let logs = temp.0.join("logs-only");
        committed_run(&logs, &[("logs/iperf3.json", "{}")]);
        let error = load_summaries(&logs).unwrap_err();
        assert!(
            error.to_string().contains("no summary.json here"),
            "{error}"
        );
    }

    /// A complete run of two enforcers in `dir`, with a file beside the summaries.
    fn two_enforcers(dir: &Path) {
        let (wf2q, tonic) = (
            summary_json("wf2q", "sim", 5.1e8),
            summary_json("tonic", "sim", 4.9e8),
        );
        committed_run(
            dir,
            &[
                ("wf2q/summary.json", &wf2q),
                ("tonic/summary.json", &tonic),
                (
                    "tonic/timeseries.csv",
                    "time_s,tenant,app,throughput_bps,ideal_bps\n",
                ),
                ("report.html", "<!DOCTYPE html>\n"),
            ],
        );
    }

    /// Every way `compare` may name a run: each must be refused alike.
    fn ways_to_name(dir: &Path) -> [PathBuf; 3] {
        [
            dir.to_path_buf(),
            dir.join("tonic"),
            dir.join("tonic").join("summary.json"),
        ]
    }

    #[test]
    fn a_complete_run_is_read_from_its_folder_an_enforcers_folder_or_a_summary() {
        let temp = TempDir::new("complete");
        let dir = temp.0.join("run");
        two_enforcers(&dir);
        let counts: Vec<usize> = ways_to_name(&dir)
            .iter()
            .map(|path| load_summaries(path).unwrap().len())
            .collect();
        assert_eq!(counts, [2, 1, 1]);
    }

    #[test]
    fn a_run_with_a_file_missing_or_cut_short_is_refused_as_incomplete() {
        let temp = TempDir::new("incomplete");
        let truncated = temp.0.join("truncated");
        two_enforcers(&truncated);
        let report = truncated.join("report.html");
        let written = fs::metadata(&report).unwrap().len();
        fs::File::options()
            .write(true)
            .open(&report)
            .unwrap()
            .set_len(written - 1)
            .unwrap();
        let missing = temp.0.join("missing");
        two_enforcers(&missing);
        fs::remove_file(missing.join("tonic/timeseries.csv")).unwrap();
        for (dir, problem) in [
            (
                &truncated,
                format!(
                    "report.html has {} bytes, written with {written}",
                    written - 1
                ),
            ),
            (&missing, "tonic/timeseries.csv is missing".to_string()),
        ] {
            for path in ways_to_name(dir) {
                let error = load_summaries(&path).unwrap_err().to_string();
                assert!(
                    error.contains("an incomplete nicsched run") && error.contains(&problem),
                    "{}: {error}",
                    path.display()
                );
                assert!(error.contains("run it again"), "{error}");
            }
        }
    }

    #[test]
    fn a_run_without_its_marker_or_a_file_it_does_not_list_is_refused() {
        let temp = TempDir::new("unmarked");
        let dir = temp.0.join("run");
        two_enforcers(&dir);
        let extra = dir.join("extra");
        fs::create_dir_all(&extra).unwrap();
        fs::copy(dir.join("wf2q/summary.json"), extra.join("summary.json")).unwrap();
        let error = load_summaries(&extra.join("summary.json"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("does not list it"), "{error}");

        fs::remove_file(dir.join(RUN_MARKER)).unwrap();
        for path in ways_to_name(&dir) {
            let error = load_summaries(&path).unwrap_err().to_string();
            assert!(
                error.contains("not a complete nicsched run: no nicsched-run.json"),
                "{}: {error}",
                path.display()
            );
        }
    }

    #[test]
    fn the_folder_an_unfinished_run_writes_in_is_refused_even_with_a_marker() {
        let temp = TempDir::new("unfinished");
        let complete = temp.0.join("complete");
        two_enforcers(&complete);
        let out = OutDir::claim(&temp.0.join("run"), &[]).unwrap();
        let summary = out.staging().join("tonic").join(SUMMARY_JSON);
        fs::create_dir_all(summary.parent().unwrap()).unwrap();
        fs::copy(complete.join("tonic").join(SUMMARY_JSON), &summary).unwrap();
        let refuse = |what: &str| {
            for path in ways_to_name(out.staging()) {
                let error = load_summaries(&path).unwrap_err().to_string();
                assert!(
                    error.contains("the folder of a run that did not finish"),
                    "{what}: {}: {error}",
                    path.display()
                );
            }
        };
        refuse("no marker");
        // Killed between writing its marker and moving into place.
        fs::copy(complete.join(RUN_MARKER), out.staging().join(RUN_MARKER)).unwrap();
        refuse("a marker");
    }
}
