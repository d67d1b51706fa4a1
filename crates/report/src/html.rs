//! report.html: every enforcer of a scenario side by side on one self-contained page
//! (plots inlined), so it can be mailed or archived as a single file.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::files::{FAIRNESS_PNG, LATENCY_CDF_PNG, THROUGHPUT_PNG, at};
use crate::summary::Summary;
use crate::table::comparison;

pub const REPORT_HTML: &str = "report.html";

const PLOTS: [(&str, &str); 3] = [
    (THROUGHPUT_PNG, "throughput per tenant over time"),
    (FAIRNESS_PNG, "Jain's index and relative error over time"),
    (LATENCY_CDF_PNG, "latency CDF"),
];

const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem; color: #222; background: #fafafa; }
h1 { margin-bottom: 0.2rem; }
h2 { margin: 0 0 0.4rem; }
.meta { color: #666; margin: 0 0 1rem; }
table { border-collapse: collapse; margin-bottom: 1.2rem; background: #fff; }
th, td { padding: 0.3rem 0.7rem; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; }
th:first-child, td:first-child { text-align: left; }
tr.app td:first-child { padding-left: 1.6rem; color: #555; }
.grid { display: grid; gap: 1.5rem; align-items: start; overflow-x: auto; }
.run { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 1rem; min-width: 0; overflow-x: auto; }
.run table { width: 100%; }
.failed { color: #a40000; font-weight: 600; }
.warning { background: #fde8e8; border: 1px solid #a40000; border-radius: 6px; padding: 0.6rem 1rem; margin-bottom: 1rem; }
.checks td { white-space: normal; text-align: left; }
img { width: 100%; height: auto; display: block; margin-bottom: 1rem; }
";

/// Writes `dir/report.html` from the runs' summaries and the plots in each run's folder.
/// A plot that a run did not produce (no latency data) is simply absent. An error
/// names the file it happened at.
pub fn write_html(dir: &Path, scenario: &str, runs: &[(Summary, PathBuf)]) -> io::Result<PathBuf> {
    let mut html = String::new();
    let title = escape(&format!("nicsched: {scenario}"));
    // Writing into a String cannot fail.
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    if let Some((first, _)) = runs.first() {
        let _ = writeln!(html, "<p class=\"meta\">{}</p>", escape(&run_meta(first)));
    }
    let summaries: Vec<Summary> = runs.iter().map(|(summary, _)| summary.clone()).collect();
    let untrusted: Vec<&str> = summaries
        .iter()
        .filter(|s| s.failed_checks().next().is_some())
        .map(|s| s.enforcer.as_str())
        .collect();
    if !untrusted.is_empty() {
        let _ = writeln!(
            html,
            "<p class=\"warning\">Self-checks failed for {}: their figures below are not vouched for (see each run's checks).</p>",
            escape(&untrusted.join(", "))
        );
    }
    let table = comparison(&summaries);
    let rows: Vec<Row> = table
        .rows
        .into_iter()
        .zip(&summaries)
        .map(|(cells, s)| (s.failed_checks().next().map(|_| "failed"), cells))
        .collect();
    push_table(&mut html, "comparison", &table.header, &rows);

    let _ = writeln!(
        html,
        "<div class=\"grid\" style=\"grid-template-columns: repeat({}, minmax(28rem, 1fr))\">",
        runs.len().max(1)
    );
    for (summary, run_dir) in runs {
        let _ = writeln!(
            html,
            "<section class=\"run\">\n<h2>{}</h2>\n<p class=\"meta\">{}</p>",
            escape(&summary.enforcer),
            escape(&format!(
                "{}, seed {}, {} frames sent",
                run_meta(summary),
                summary.seed,
                summary.frames_sent
            ))
        );
        push_table(&mut html, "tenants", &TENANT_HEADER, &tenant_rows(summary));
        push_table(&mut html, "checks", &CHECKS_HEADER, &check_rows(summary));
        if !summary.latency.is_empty() {
            push_table(
                &mut html,
                "latency",
                &LATENCY_HEADER,
                &latency_rows(summary),
            );
        }
        for (file, description) in PLOTS {
            let plot = run_dir.join(file);
            let png = match fs::read(&plot) {
                Ok(png) => png,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(at(&plot)(error)),
            };
            let _ = writeln!(
                html,
                "<img src=\"data:image/png;base64,{}\" alt=\"{}\">",
                base64(&png),
                escape(&format!("{}: {description}", summary.enforcer))
            );
        }
        html.push_str("</section>\n");
    }
    html.push_str("</div>\n</body>\n</html>\n");

    fs::create_dir_all(dir).map_err(at(dir))?;
    let path = dir.join(REPORT_HTML);
    fs::write(&path, html).map_err(at(&path))?;
    Ok(path)
}

fn run_meta(summary: &Summary) -> String {
    format!(
        "{}, {} s, link {} Gbit/s",
        summary.mode.as_str(),
        summary.duration_s,
        summary.link_rate_bps as f64 / 1e9
    )
}

fn gbps(bps: f64) -> String {
    format!("{:.3}", bps / 1e9)
}

/// A table row: the CSS class of the row, if any, and its cells.
type Row = (Option<&'static str>, Vec<String>);

const TENANT_HEADER: [&str; 6] = [
    "tenant / app",
    "throughput (Gbit/s)",
    "ideal (Gbit/s)",
    "rel_error_mean",
    "rel_error_max",
    "drops",
];

/// Tenants with their apps beneath, indented.
fn tenant_rows(summary: &Summary) -> Vec<Row> {
    let mut rows = Vec::new();
    for tenant in &summary.tenants {
        let cells = vec![
            tenant.name.clone(),
            gbps(tenant.throughput_bps),
            gbps(tenant.ideal_bps),
            format!("{:.4}", tenant.rel_error_mean),
            format!("{:.4}", tenant.rel_error_max),
            tenant.drops.to_string(),
        ];
        rows.push((None, cells));
        for app in &tenant.apps {
            let cells = vec![
                app.name.clone(),
                gbps(app.throughput_bps),
                gbps(app.ideal_bps),
                String::new(),
                String::new(),
                String::new(),
            ];
            rows.push((Some("app"), cells));
        }
    }
    rows
}

const CHECKS_HEADER: [&str; 3] = ["check", "result", "detail"];

fn check_rows(summary: &Summary) -> Vec<Row> {
    summary
        .checks
        .iter()
        .map(|check| {
            let (class, result) = if check.ok {
                (None, "ok")
            } else {
                (Some("failed"), "FAILED")
            };
            (
                class,
                vec![check.name.clone(), result.to_string(), check.detail.clone()],
            )
        })
        .collect()
}

const LATENCY_HEADER: [&str; 9] = [
    "traffic (µs)",
    "count",
    "mean",
    "min",
    "p50",
    "p90",
    "p99",
    "p99.9",
    "max",
];

fn latency_rows(summary: &Summary) -> Vec<Row> {
    summary
        .latency
        .iter()
        .map(|(traffic, latency)| {
            let mut row = vec![traffic.clone(), latency.count.to_string()];
            row.extend(
                [
                    latency.mean_us,
                    latency.min_us,
                    latency.p50_us,
                    latency.p90_us,
                    latency.p99_us,
                    latency.p999_us,
                    latency.max_us,
                ]
                .map(|us| format!("{us:.1}")),
            );
            (None, row)
        })
        .collect()
}

fn push_table(html: &mut String, class: &str, header: &[impl AsRef<str>], rows: &[Row]) {
    let _ = write!(html, "<table class=\"{class}\">\n<thead><tr>");
    for cell in header {
        let _ = write!(html, "<th>{}</th>", escape(cell.as_ref()));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for (row_class, cells) in rows {
        match row_class {
            Some(row_class) => {
                let _ = write!(html, "<tr class=\"{row_class}\">");
            }
            None => html.push_str("<tr>"),
        }
        for cell in cells {
            let _ = write!(html, "<td>{}</td>", escape(cell));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>\n");
}

/// Escapes text for both element content and quoted attribute values.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(c),
        }
    }
    escaped
}

/// Standard base64 with padding (RFC 4648), for data URIs; a few lines beat a dependency.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut encoded = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let triple = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for position in 0..4 {
            if position <= chunk.len() {
                let sextet = (triple >> (18 - 6 * position)) & 0x3f;
                encoded.push(char::from(ALPHABET[sextet as usize]));
            } else {
                encoded.push('=');
            }
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }
}
