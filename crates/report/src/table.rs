//! The comparison of enforcers, one row each: the same cells for the terminal and for
//! report.html, so the two never disagree.

use std::collections::BTreeSet;

use crate::summary::Summary;

pub(crate) struct Comparison {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

pub(crate) fn comparison(summaries: &[Summary]) -> Comparison {
    // Enforcers of one scenario share their traffic, but a run that recorded no
    // latency for one still gets a cell.
    let traffics: BTreeSet<&str> = summaries
        .iter()
        .flat_map(|summary| summary.latency.keys().map(String::as_str))
        .collect();
    let mut header: Vec<String> = [
        "enforcer",
        "utilization",
        "jain_mean",
        "jain_min",
        "rel_error_mean",
        "rel_error_max",
        "drops",
        "checks",
    ]
    .map(String::from)
    .into();
    header.extend(traffics.iter().map(|traffic| format!("p99 {traffic} (µs)")));
    let rows = summaries
        .iter()
        .map(|summary| {
            let fairness = &summary.fairness;
            let mut row = vec![
                summary.enforcer.clone(),
                format!("{:.3}", summary.utilization),
                format!("{:.4}", fairness.jain_mean),
                format!("{:.4}", fairness.jain_min),
                format!("{:.4}", fairness.rel_error_mean),
                format!("{:.4}", fairness.rel_error_max),
                summary.drops().to_string(),
                checks_cell(summary),
            ];
            row.extend(
                traffics
                    .iter()
                    .map(|&traffic| match summary.latency.get(traffic) {
                        Some(latency) if latency.count > 0 => format!("{:.1}", latency.p99_us),
                        _ => "-".to_string(),
                    }),
            );
            row
        })
        .collect();
    Comparison { header, rows }
}

/// `ok`, or `FAILED` and the names of the checks that failed: the row's figures
/// are not to be trusted.
fn checks_cell(summary: &Summary) -> String {
    let failed: Vec<&str> = summary.failed_checks().map(|c| c.name.as_str()).collect();
    if failed.is_empty() {
        "ok".to_string()
    } else {
        format!("FAILED {}", failed.join(","))
    }
}

/// An aligned plain-text table of the enforcers' figures, for the end of a run:
/// names left-aligned, numbers right-aligned; beneath it, one line per failed
/// self-check with what failed.
pub fn comparison_table(summaries: &[Summary]) -> String {
    let Comparison { header, rows } = comparison(summaries);
    let mut table = aligned_table(&header, &rows, 1, true);
    for summary in summaries {
        for check in summary.failed_checks() {
            table.push_str(&format!(
                "FAILED {}: {}: {}\n",
                summary.enforcer, check.name, check.detail
            ));
        }
    }
    table
}

/// `header` and `rows` as aligned text: the first `left_columns` columns
/// left-aligned, the others right-aligned; `rule`: a line of dashes under the header.
pub fn aligned_table(
    header: &[String],
    rows: &[Vec<String>],
    left_columns: usize,
    rule: bool,
) -> String {
    let mut widths: Vec<usize> = header.iter().map(|cell| cell.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(column, (cell, &width))| {
                if column < left_columns {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut table = line(header);
    if rule {
        let rule_chars = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
        table.push_str(&"-".repeat(rule_chars));
        table.push('\n');
    }
    for row in rows {
        table.push_str(&line(row));
    }
    table
}
