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
                figure_cell(summary.utilization, 3),
                figure_cell(fairness.jain_mean, 4),
                figure_cell(fairness.jain_min, 4),
                figure_cell(fairness.rel_error_mean, 4),
                figure_cell(fairness.rel_error_max, 4),
                summary.drops().to_string(),
                checks_cell(summary),
            ];
            row.extend(
                traffics
                    .iter()
                    .map(|&traffic| match summary.latency.get(traffic) {
                        Some(latency) if latency.count > 0 => figure_cell(latency.p99_us, 1),
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
/// Cells may be of any length: padding is written out, not left to `format!`,
/// whose widths stop at 65,535.
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
        let mut text = String::new();
        for (column, (cell, &width)) in cells.iter().zip(&widths).enumerate() {
            if column > 0 {
                text.push_str("  ");
            }
            let padding = std::iter::repeat_n(' ', width - cell.chars().count());
            if column < left_columns {
                text.push_str(cell);
                text.extend(padding);
            } else {
                text.extend(padding);
                text.push_str(cell);
            }
        }
        text.truncate(text.trim_end().len());
        text + "\n"
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

/// Magnitudes from here up print in scientific notation: a figure read from a
/// summary.json may be as large as an f64 goes, 309 digits written out.
const FIXED_BELOW: f64 = 1e15;

/// A figure as a table shows it (the terminal, Markdown, report.html): `decimals`
/// after the point, in scientific notation from 10^15 up, `NaN`, `inf` and `-inf`
/// as such, so a cell is at most about 20 characters whatever the value. A value
/// that rounds to zero prints unsigned.
pub fn figure_cell(x: f64, decimals: usize) -> String {
    figure_text(x, decimals, false)
}

/// [`figure_cell`] with its sign always shown, for deltas.
pub fn signed_figure_cell(x: f64, decimals: usize) -> String {
    figure_text(x, decimals, true)
}

fn figure_text(x: f64, decimals: usize, signed: bool) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    let sign = |x: f64| if signed && x >= 0.0 { "+" } else { "" };
    if x.is_infinite() {
        return format!("{}{x}", sign(x));
    }
    if x.abs() >= FIXED_BELOW {
        return format!("{}{x:.3e}", sign(x));
    }
    let text = format!("{x:.decimals$}");
    if text.chars().all(|c| matches!(c, '-' | '0' | '.')) {
        format!("{}{:.decimals$}", sign(0.0), 0.0)
    } else {
        format!("{}{text}", sign(x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_of_any_length_is_aligned_without_a_panic() {
        let long = "x".repeat(100_000);
        let header = ["name".to_string(), "value".to_string()];
        let rows = vec![
            vec![long.clone(), "1".to_string()],
            vec!["short".to_string(), long.clone()],
        ];
        let table = aligned_table(&header, &rows, 1, true);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[1].len(), 2 * 100_000 + 2);
        assert_eq!(lines[2], format!("{long}  {}1", " ".repeat(99_999)));
        assert_eq!(lines[3], format!("short{}  {long}", " ".repeat(99_995)));
        assert!(lines[0].starts_with("name ") && lines[0].ends_with(" value"));
    }

    #[test]
    fn figures_print_in_a_bounded_width_whatever_their_magnitude() {
        assert_eq!(figure_cell(0.97, 3), "0.970");
        assert_eq!(figure_cell(512e6 / 1e6, 0), "512");
        assert_eq!(figure_cell(1e308, 4), "1.000e308");
        assert_eq!(figure_cell(-f64::MAX, 0), "-1.798e308");
        assert_eq!(figure_cell(f64::NAN, 4), "NaN");
        assert_eq!(figure_cell(f64::INFINITY, 1), "inf");
        assert_eq!(figure_cell(f64::NEG_INFINITY, 1), "-inf");
        assert_eq!(figure_cell(-1e-300, 4), "0.0000");
        assert_eq!(figure_cell(999_999_999_999_999.0, 0), "999999999999999");
        assert_eq!(signed_figure_cell(1e308, 0), "+1.000e308");
        assert_eq!(signed_figure_cell(f64::INFINITY, 0), "+inf");
        assert_eq!(signed_figure_cell(-2.5, 1), "-2.5");
        assert_eq!(signed_figure_cell(-1e-9, 4), "+0.0000");
        for x in [
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            1e15,
            -1e15,
        ] {
            for decimals in [0, 1, 4] {
                let cell = signed_figure_cell(x, decimals);
                assert!(cell.len() <= 22, "{x}: {cell}");
            }
        }
    }
}
