//! `nicsched compare`: runs side by side, or each against its baseline run.

use std::path::PathBuf;

use crate::{EXIT_REGRESSED, Failure, output};

pub fn load_all_summaries(paths: &[PathBuf]) -> Result<Vec<report::Summary>, Failure> {
    let mut runs = Vec::new();
    for path in paths {
        runs.extend(report::load_summaries(path).map_err(|e| Failure::input(e.to_string()))?);
    }
    Ok(runs)
}

/// The runs under `results`, side by side, or with `baseline` each against its
/// baseline run; status 4 when one regressed beyond `thresholds`.
pub fn compare(
    results: &[PathBuf],
    baseline: &[PathBuf],
    thresholds: &[String],
    expect_missing: &[String],
    markdown: bool,
    json: bool,
) -> Result<(), Failure> {
    let runs = load_all_summaries(results)?;
    if baseline.is_empty() {
        if json {
            output::print_json(&output::Compared {
                runs: &runs,
                baseline: None,
            });
        } else {
            print!("{}", report::side_by_side(&runs, markdown));
        }
        return Ok(());
    }
    let mut limits = report::Thresholds::default();
    for setting in thresholds {
        limits
            .apply(setting)
            .map_err(|e| Failure::input(format!("--threshold {setting}: {e}")))?;
    }
    let baseline_runs = load_all_summaries(baseline)?;
    let compared = report::against_baseline(&runs, &baseline_runs, &limits, expect_missing);
    if compared.runs.is_empty() {
        return Err(Failure::input(
            "nicsched compare --baseline: no run matches a baseline run by scenario, enforcer and mode; give the --out of the same scenario's sim (or lab) for both",
        ));
    }
    if json {
        output::print_json(&output::Compared {
            runs: &runs,
            baseline: Some(&compared),
        });
    } else {
        print!("{}", compared.table(markdown));
    }
    if compared.regressed() {
        return Err(Failure {
            message: format!(
                "regressed against the baseline (worse beyond the threshold, or missing or silent; --expect-missing NAME for what is meant to be): {}",
                compared.regressions.join(", ")
            ),
            status: EXIT_REGRESSED,
        });
    }
    Ok(())
}
