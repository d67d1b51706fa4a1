//! Runs of one scenario side by side, whatever made them: the simulator and the lab,
//! two seeds, two commits. Reads the summary.json files that `nicsched sim` and
//! `nicsched lab` leave, and lays out one row per run with each tenant's throughput
//! against its ideal, so a reader sees at once where two worlds disagree.

use std::io;
use std::path::{Path, PathBuf};

use crate::summary::Summary;

/// The summaries under `path`: `path` itself if it is a summary.json, the run folder
/// holding one, or every `ENFORCER/summary.json` of a results folder, by enforcer name.
pub fn load_summaries(path: &Path) -> io::Result<Vec<Summary>> {
    let files: Vec<PathBuf> = if path.is_file() {
        vec![path.to_path_buf()]
    } else if path.join("summary.json").is_file() {
        vec![path.join("summary.json")]
    } else {
        let mut runs: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?
            .filter_map(Result::ok)
            .map(|entry| entry.path().join("summary.json"))
            .filter(|file| file.is_file())
            .collect();
        runs.sort();
        runs
    };
    if files.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{}: no summary.json here or in its subfolders (give the --out folder of `nicsched sim` or `nicsched lab`)",
                path.display()
            ),
        ));
    }
    files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?;
            serde_json::from_str(&text).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: not a nicsched summary.json: {e}", file.display()),
                )
            })
        })
        .collect()
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
                format!("{:.3}", run.utilization),
                format!(
                    "{:.3} / {:.3}",
                    run.fairness.jain_mean, run.fairness.jain_min
                ),
                format!("{:.3}", run.fairness.rel_error_mean),
            ];
            row.extend(tenants.iter().map(
                |&name| match run.tenants.iter().find(|t| t.name == name) {
                    Some(t) => format!("{:.0}/{:.0}", t.throughput_bps / 1e6, t.ideal_bps / 1e6),
                    None => "-".into(),
                },
            ));
            row.extend(
                traffics
                    .iter()
                    .map(|&traffic| match run.latency.get(traffic) {
                        Some(latency) if latency.count > 0 => format!("{:.0}", latency.p99_us),
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
        let dir = std::env::temp_dir().join(format!("nicsched-compare-{}", std::process::id()));
        for (enforcer, t1) in [("wf2q", 5.1e8), ("tonic", 4.9e8)] {
            std::fs::create_dir_all(dir.join(enforcer)).unwrap();
            std::fs::write(
                dir.join(enforcer).join("summary.json"),
                summary_json(enforcer, "lab", t1),
            )
            .unwrap();
        }
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
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn folders_without_summaries_and_foreign_json_are_errors_that_say_what_to_give() {
        let dir = std::env::temp_dir().join(format!("nicsched-compare-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let error = load_summaries(&dir).unwrap_err();
        assert!(error.to_string().contains("--out folder"), "{error}");
        let missing = dir.join("missing");
        let error = load_summaries(&missing).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with(&missing.display().to_string()),
            "{error}"
        );
        std::fs::write(dir.join("summary.json"), "{\"scenario\": 1}").unwrap();
        let error = load_summaries(&dir).unwrap_err();
        assert!(
            error.to_string().contains("not a nicsched summary.json"),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
