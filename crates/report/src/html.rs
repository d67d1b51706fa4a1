//! report.html: runs of a scenario overlaid on one self-contained page, read back
//! from their folders' files ([`crate::runs`]): the same page for `nicsched sim`,
//! `nicsched lab` and `nicsched report` over runs of both worlds.
//!
//! Charts are drawn in the browser by uPlot (MIT, assets/LICENSE-uPlot.txt), which
//! the page embeds with the figures as JSON: it fetches nothing and can be mailed
//! or archived as one file. Every chart's series are aligned here on one x axis
//! and put in units chosen from the data, so the script only draws.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::files::at;
use crate::plot::{OVERLAY_FAIRNESS_PNG, OVERLAY_LATENCY_CDF_PNG, OVERLAY_THROUGHPUT_PNG};

const OVERLAY_PNGS: [&str; 3] = [
    OVERLAY_THROUGHPUT_PNG,
    OVERLAY_FAIRNESS_PNG,
    OVERLAY_LATENCY_CDF_PNG,
];
use crate::plot::{POINTS_MAX, Thinned, top};
use crate::runs::{Run, Series, SeriesKind, Wanted, read_run, read_series};

pub const REPORT_HTML: &str = "report.html";
/// In the head of every page nicsched writes: what tells a page `nicsched report --out` may
/// overwrite from a file of someone else's.
pub const REPORT_PAGE_MARK: &str = "<meta name=\"generator\" content=\"nicsched report\">";
/// How far into a page [`REPORT_PAGE_MARK`] is looked for.
const REPORT_PAGE_HEAD_BYTES: u64 = 512;

/// Whether the file `path` is a page nicsched wrote: [`REPORT_PAGE_MARK`] in its head.
pub fn is_report_page(path: &Path) -> io::Result<bool> {
    use std::io::Read;
    let mut head = Vec::new();
    fs::File::open(path)?
        .take(REPORT_PAGE_HEAD_BYTES)
        .read_to_end(&mut head)?;
    Ok(String::from_utf8_lossy(&head).contains(REPORT_PAGE_MARK))
}

/// uPlot 1.6.32 (MIT), see assets/LICENSE-uPlot.txt; from its npm package's dist/.
const UPLOT_JS: &str = include_str!("../assets/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/uPlot.min.css");
const REPORT_JS: &str = include_str!("../assets/report.js");
const REPORT_CSS: &str = include_str!("../assets/report.css");

/// Writes `dir/report.html` over the runs in `run_dirs`, read from their files.
/// An error names the file it happened at.
pub fn write_html(dir: &Path, run_dirs: &[PathBuf]) -> io::Result<PathBuf> {
    let runs = run_dirs
        .iter()
        .map(|run_dir| read_run(run_dir))
        .collect::<io::Result<Vec<Run>>>()?;
    let path = dir.join(REPORT_HTML);
    write_report(&path, &runs)?;
    Ok(path)
}

/// Writes the report of `runs` to the file `path`, its links to the runs' files
/// relative to the folder it is in.
pub fn write_report(path: &Path, runs: &[Run]) -> io::Result<()> {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    fs::create_dir_all(folder).map_err(at(folder))?;
    let html = render(runs, folder)?;
    fs::write(path, html).map_err(at(path))
}

/// Run colours: d3's category10 without its grey, which the ideal's dark grey
/// would be confused with, then darker shades of category20b; runs past the
/// eighteenth repeat them dashed.
const PALETTE: [&str; 18] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
    "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d",
    "#31a354", "#756bb1",
];
const IDEAL_COLOURS: [&str; 3] = ["#222222", "#777777", "#aaaaaa"];

/// The page: what the script draws.
#[derive(Serialize)]
struct PageData {
    charts: Vec<Chart>,
}

#[derive(Serialize)]
struct Chart {
    id: String,
    title: String,
    x_label: &'static str,
    y_label: String,
    /// The unit of the values, for the legend.
    unit: String,
    x_log: bool,
    /// `zero`: y from 0; `jain`: up to just above 1; `fraction`: 0 to 1.
    y_range: &'static str,
    x: Vec<f64>,
    series: Vec<ChartSeries>,
}

#[derive(Serialize)]
struct ChartSeries {
    label: String,
    color: &'static str,
    dash: bool,
    ideal: bool,
    values: Vec<Option<f64>>,
}

/// One run as the page shows it.
struct Shown<'a> {
    run: &'a Run,
    label: String,
    color: &'static str,
    dash: bool,
    /// Its rates are drawn multiplied by this: the reference link over its own.
    scale: f64,
}

/// Throughput charts of one kind (tenants, apps, VMs, flows) at most: past
/// it, those with the most traffic get one each and the rest one together, so
/// that a page of 4,000 apps stays one a browser opens.
const CHARTS_PER_KIND_MAX: usize = 24;

/// The throughput charts of one kind.
struct KindCharts {
    kind: SeriesKind,
    /// Those with a chart of their own, in the order they first appear.
    names: Vec<String>,
    /// How many more there are, summed in one chart.
    rest: usize,
}

/// The series of each kind the page draws one by one: all of them up to
/// [`CHARTS_PER_KIND_MAX`], else those with the most traffic (the larger of
/// their throughput and ideal over the run, summed over the runs as drawn).
fn kind_charts(shown: &[Shown]) -> Vec<KindCharts> {
    [
        SeriesKind::Tenant,
        SeriesKind::App,
        SeriesKind::Vm,
        SeriesKind::Flow,
    ]
    .into_iter()
    .filter_map(|kind| {
        let mut names: Vec<&str> = Vec::new();
        let mut keys: Vec<f64> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for s in shown {
            for series in s.run.series.iter().filter(|x| x.kind == kind) {
                let at = *index.entry(series.name.as_str()).or_insert_with(|| {
                    names.push(&series.name);
                    keys.push(0.0);
                    names.len() - 1
                });
                keys[at] += series.throughput.max(series.ideal) * s.scale;
            }
        }
        if names.is_empty() {
            return None;
        }
        let chosen = top(&keys, CHARTS_PER_KIND_MAX);
        Some(KindCharts {
            kind,
            rest: names.len() - chosen.len(),
            names: chosen.into_iter().map(|i| names[i].to_string()).collect(),
        })
    })
    .collect()
}

/// What one run draws of `kinds`: its series thinned, by what they are.
fn drawn_series(run: &Run, kinds: &[KindCharts]) -> io::Result<HashMap<Wanted, Series>> {
    let wanted: Vec<Wanted> = kinds
        .iter()
        .flat_map(|k| {
            k.names
                .iter()
                .map(|name| Wanted::One(k.kind, name.clone()))
                .chain((k.rest > 0).then_some(Wanted::Rest(k.kind)))
        })
        .collect();
    let series = read_series(run, &wanted)?;
    Ok(wanted
        .into_iter()
        .zip(series)
        .filter(|(_, s)| !s.time_s.is_empty())
        .collect())
}

fn render(runs: &[Run], folder: &Path) -> io::Result<String> {
    let reference_bps = runs.iter().map(|r| r.link_rate_bps).fold(0.0, f64::max);
    let shown = shown_runs(runs, reference_bps);
    let kinds = kind_charts(&shown);
    let drawn = shown
        .iter()
        .map(|s| drawn_series(s.run, &kinds))
        .collect::<io::Result<Vec<_>>>()?;
    let charts = PageCharts::of(&shown, &kinds, &drawn);

    let mut html = String::new();
    push_head(&mut html, runs);
    push_notes(&mut html, &shown, reference_bps);
    push_left_out(&mut html, &shown, &kinds);
    push_summary_table(&mut html, &shown);
    charts.push_sections(&mut html);
    push_checks(&mut html, &shown);
    push_provenance(&mut html, &shown, folder);
    push_page_data(&mut html, charts.charts);
    Ok(html)
}

/// Each run with its label, its colour and the scale that draws its rates on
/// the fastest run's link (`reference_bps`).
fn shown_runs(runs: &[Run], reference_bps: f64) -> Vec<Shown<'_>> {
    runs.iter()
        .zip(labels(runs))
        .enumerate()
        .map(|(i, (run, label))| Shown {
            run,
            label,
            color: PALETTE[i % PALETTE.len()],
            dash: i >= PALETTE.len(),
            scale: if run.link_rate_bps > 0.0 {
                reference_bps / run.link_rate_bps
            } else {
                1.0
            },
        })
        .collect()
}

/// Every chart of the page, and the sections that show them, by index into
/// `charts` (which is also each chart's place in the page's data).
struct PageCharts {
    charts: Vec<Chart>,
    /// One section per kind of throughput chart, with its heading.
    throughput: Vec<(&'static str, Vec<usize>)>,
    fairness: Vec<usize>,
    latency: Vec<usize>,
}

impl PageCharts {
    /// The throughput charts of `kinds` from each run's `drawn` series, then
    /// Jain's index and relative error, then a latency CDF per traffic in the
    /// order the runs first name it.
    fn of(shown: &[Shown], kinds: &[KindCharts], drawn: &[HashMap<Wanted, Series>]) -> PageCharts {
        let mut page = PageCharts {
            charts: Vec::new(),
            throughput: Vec::new(),
            fairness: Vec::new(),
            latency: Vec::new(),
        };
        for k in kinds {
            page.add_throughput(shown, k, drawn);
        }
        let at = page.charts.len();
        page.fairness = vec![at, at + 1];
        page.charts.push(fairness_chart(shown, true, at));
        page.charts.push(fairness_chart(shown, false, at + 1));
        let mut traffics: Vec<&str> = Vec::new();
        for cdf in shown.iter().flat_map(|s| &s.run.latency) {
            if !traffics.contains(&cdf.traffic.as_str()) {
                traffics.push(&cdf.traffic);
            }
        }
        for traffic in traffics {
            page.latency.push(page.charts.len());
            page.charts
                .push(latency_chart(shown, traffic, page.charts.len()));
        }
        page
    }

    /// The section of one kind's throughput charts: one per name it shows,
    /// then the rest together.
    fn add_throughput(
        &mut self,
        shown: &[Shown],
        k: &KindCharts,
        drawn: &[HashMap<Wanted, Series>],
    ) {
        let (heading, what, whats) = match k.kind {
            SeriesKind::Tenant => ("Throughput per tenant", "tenant", "tenants"),
            SeriesKind::App => ("Throughput per app", "app", "apps"),
            SeriesKind::Vm => ("Throughput per sending VM", "VM", "VMs"),
            SeriesKind::Flow => ("Throughput per flow", "flow", "flows"),
        };
        let mut members = Vec::new();
        let wanted = k
            .names
            .iter()
            .map(|name| (Wanted::One(k.kind, name.clone()), format!("{what} {name}")))
            .chain((k.rest > 0).then(|| {
                (
                    Wanted::Rest(k.kind),
                    format!("{whats}: the other {} together", k.rest),
                )
            }));
        for (want, title) in wanted {
            members.push(self.charts.len());
            let series: Vec<Option<&Series>> = drawn.iter().map(|d| d.get(&want)).collect();
            self.charts
                .push(throughput_chart(shown, &series, title, self.charts.len()));
        }
        self.throughput.push((heading, members));
    }

    /// The charts under their headings; no latency heading where no run has one.
    fn push_sections(&self, html: &mut String) {
        for (heading, members) in &self.throughput {
            push_charts(html, heading, members, &self.charts);
        }
        push_charts(html, "Fairness per interval", &self.fairness, &self.charts);
        if !self.latency.is_empty() {
            push_charts(html, "Latency CDF", &self.latency, &self.charts);
        }
    }
}

/// The page's head, styles and error trap, and its title: the runs' scenarios.
fn push_head(html: &mut String, runs: &[Run]) {
    let mut scenarios: Vec<&str> = Vec::new();
    for run in runs {
        if !scenarios.contains(&run.scenario.as_str()) {
            scenarios.push(&run.scenario);
        }
    }
    let title = format!("nicsched: {}", scenarios.join(", "));
    // Writing into a String cannot fail.
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         {REPORT_PAGE_MARK}\n<title>{}</title>\n<style>{UPLOT_CSS}\n{REPORT_CSS}</style>\n\
         <script>{}</script>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        ERROR_TRAP,
        escape(&title),
    );
    let _ = writeln!(html, "<p class=\"meta\">{}</p>", escape(&overview(runs)));
}

/// The charts as the JSON the page's script draws, then the scripts, closing the page.
fn push_page_data(html: &mut String, charts: Vec<Chart>) {
    let data = serde_json::to_string(&PageData { charts }).expect("finite figures serialize");
    // Inside <script>, "</script>" or "<!--" in a name would end or break it.
    let data = data.replace('<', "\\u003c");
    let _ = write!(
        html,
        "<pre id=\"page-status\" hidden></pre>\n\
         <script type=\"application/json\" id=\"report-data\">{data}</script>\n\
         <script>{UPLOT_JS}</script>\n<script>{REPORT_JS}</script>\n</body>\n</html>\n"
    );
}

/// Says what the charts leave out: series past [`CHARTS_PER_KIND_MAX`] of a
/// kind, and intervals past [`POINTS_MAX`] of a run, which are thinned.
fn push_left_out(html: &mut String, shown: &[Shown], kinds: &[KindCharts]) {
    let summed: Vec<String> = kinds
        .iter()
        .filter(|k| k.rest > 0)
        .map(|k| {
            let whats = match k.kind {
                SeriesKind::Tenant => "tenants",
                SeriesKind::App => "apps (of tenants of several)",
                SeriesKind::Vm => "sending VMs (of several flows)",
                SeriesKind::Flow => "flows",
            };
            format!(
                "of {} {whats}, the {} with the most traffic have a chart each and the other {} one chart together",
                k.names.len() + k.rest,
                k.names.len(),
                k.rest
            )
        })
        .collect();
    if !summed.is_empty() {
        let _ = writeln!(
            html,
            "<p class=\"note\">Throughput charts are bounded at {CHARTS_PER_KIND_MAX} of a kind: {} \
             (traffic: the larger of its throughput and its ideal over the run, summed over the runs). \
             Each run's timeseries.csv holds every one.</p>",
            escape(&summed.join("; "))
        );
    }
    let longest = shown.iter().map(|s| s.run.times_s.len()).max().unwrap_or(0);
    if longest > POINTS_MAX {
        let _ = writeln!(
            html,
            "<p class=\"note\">Runs of more than {POINTS_MAX} intervals (the longest here has {longest}) \
             are drawn thinned to at most {POINTS_MAX} points a line: each run of consecutive intervals \
             under a pixel wide is drawn as its lowest and its highest value, so that spikes and swings \
             show as they would at full detail; zoomed in, the lines are no finer than that. \
             Each run's timeseries.csv holds every interval.</p>"
        );
    }
}

/// Registered first, so that an error anywhere on the page is kept for its
/// status (which the headless browser test reads) and shown to the reader.
const ERROR_TRAP: &str = "window.reportErrors=[];\
window.addEventListener('error',function(e){window.reportErrors.push(String(e.message||e));});\
window.addEventListener('unhandledrejection',function(e){window.reportErrors.push('unhandled rejection: '+String(e.reason));});";

/// `mode/enforcer`; where two runs would share one, the results folder they came
/// from too, and then their place in the list.
fn labels(runs: &[Run]) -> Vec<String> {
    let base: Vec<String> = runs
        .iter()
        .map(|r| format!("{}/{}", r.mode, r.enforcer))
        .collect();
    let with_folder: Vec<String> = runs
        .iter()
        .zip(&base)
        .map(|(run, label)| {
            if base.iter().filter(|b| *b == label).count() < 2 {
                return label.clone();
            }
            let folder = run
                .dir
                .parent()
                .and_then(Path::file_name)
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("{label} ({folder})")
        })
        .collect();
    with_folder
        .iter()
        .enumerate()
        .map(|(i, label)| {
            if with_folder.iter().filter(|l| *l == label).count() < 2 {
                label.clone()
            } else {
                format!("{label} #{}", i + 1)
            }
        })
        .collect()
}

fn overview(runs: &[Run]) -> String {
    let mut worlds: BTreeMap<&str, usize> = BTreeMap::new();
    for run in runs {
        *worlds.entry(run.mode.as_str()).or_default() += 1;
    }
    let worlds: Vec<String> = worlds
        .iter()
        .map(|(mode, n)| format!("{n} {mode}"))
        .collect();
    format!(
        "{} run{} ({}) · drawn by nicsched {} · drag across a chart to zoom, double-click to zoom out, click a legend entry to hide or show it",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        worlds.join(", "),
        env!("CARGO_PKG_VERSION"),
    )
}

fn push_notes(html: &mut String, shown: &[Shown], reference_bps: f64) {
    let untrusted: Vec<&str> = shown
        .iter()
        .filter(|s| s.run.failed_checks().next().is_some())
        .map(|s| s.label.as_str())
        .collect();
    if !untrusted.is_empty() {
        let _ = writeln!(
            html,
            "<p class=\"warning\">Self-checks failed for {}: their figures are not vouched for (see <a href=\"#checks\">Self-checks</a>).</p>",
            escape(&untrusted.join(", "))
        );
    }
    let scaled: Vec<String> = shown
        .iter()
        .filter(|s| (s.scale - 1.0).abs() > 1e-9)
        .map(|s| {
            format!(
                "{} ran on a {} link, drawn ×{}",
                s.label,
                policy::format_rate(s.run.link_rate_bps),
                crate::figures::trimmed(s.scale, 3)
            )
        })
        .collect();
    if !scaled.is_empty() {
        let _ = writeln!(
            html,
            "<p class=\"note\">Rates are drawn on the {} link of the fastest run, so that runs compare: {}. \
             The lab runs a scenario scaled to its emulated link; the table keeps each run's measured figures.</p>",
            escape(&policy::format_rate(reference_bps)),
            escape(&scaled.join("; "))
        );
    }
    let _ = writeln!(
        html,
        "<p class=\"note\">The per-interval fairness charts are derived from each run's timeseries.csv, \
         over every interval (summary.json, and the table, leave out intervals in which traffic started or stopped). \
         Jain's index is of throughput / ideal over the tenants (across hosts: the sending VMs) with an ideal; \
         relative error is their mean |throughput − ideal| / ideal.</p>"
    );
}

fn push_summary_table(html: &mut String, shown: &[Shown]) {
    let mut traffics: Vec<&str> = Vec::new();
    for s in shown {
        for traffic in s.run.figures.p99_us.keys() {
            if !traffics.contains(&traffic.as_str()) {
                traffics.push(traffic);
            }
        }
    }
    html.push_str("<h2 id=\"summary\">Summary</h2>\n<p class=\"hint\">Click a column's header to sort by it.</p>\n<table class=\"report sortable summary\">\n<thead><tr>");
    let mut header: Vec<String> = [
        "run",
        "link",
        "utilization",
        "Jain mean",
        "Jain min",
        "rel. error mean",
        "rel. error max",
        "drops",
    ]
    .map(String::from)
    .to_vec();
    header.extend(traffics.iter().map(|t| format!("{t} p99 (µs)")));
    header.push("self-checks".to_string());
    for cell in &header {
        let _ = write!(html, "<th>{}</th>", escape(cell));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for s in shown {
        let figures = &s.run.figures;
        let failed: Vec<&str> = s.run.failed_checks().map(|c| c.name.as_str()).collect();
        let _ = write!(
            html,
            "<tr{}><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td>",
            if failed.is_empty() {
                ""
            } else {
                " class=\"failed\""
            },
            s.color,
            escape(&s.label)
        );
        let _ = write!(
            html,
            "<td data-v=\"{}\">{}</td>",
            s.run.link_rate_bps,
            escape(&policy::format_rate(s.run.link_rate_bps))
        );
        for value in [
            figures.utilization,
            figures.jain_mean,
            figures.jain_min,
            figures.rel_error_mean,
            figures.rel_error_max,
        ] {
            push_number_cell(html, value, 4);
        }
        push_number_cell(html, figures.drops.map(|d| d as f64), 0);
        for traffic in &traffics {
            push_number_cell(html, figures.p99_us.get(*traffic).copied(), 1);
        }
        if failed.is_empty() {
            let _ = write!(html, "<td data-v=\"0\">✓ {} ok</td>", s.run.checks.len());
        } else {
            let _ = write!(
                html,
                "<td data-v=\"{}\"><a href=\"#checks\">✗ {} failed</a>: {}</td>",
                failed.len(),
                failed.len(),
                escape(&failed.join(", "))
            );
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>\n");
}

fn push_number_cell(html: &mut String, value: Option<f64>, decimals: usize) {
    match value {
        Some(value) => {
            let _ = write!(html, "<td data-v=\"{value}\">{value:.decimals$}</td>");
        }
        None => html.push_str("<td data-v=\"\">–</td>"),
    }
}

fn push_charts(html: &mut String, heading: &str, members: &[usize], charts: &[Chart]) {
    let _ = writeln!(html, "<h2>{}</h2>\n<div class=\"charts\">", escape(heading));
    for &index in members {
        let chart = &charts[index];
        let _ = writeln!(
            html,
            "<figure class=\"card\"><figcaption>{}</figcaption><div class=\"chart\" id=\"{}\"></div></figure>",
            escape(&chart.title),
            chart.id
        );
    }
    html.push_str("</div>\n");
}

fn push_checks(html: &mut String, shown: &[Shown]) {
    html.push_str("<h2 id=\"checks\">Self-checks</h2>\n<ul class=\"checks\">\n");
    for s in shown {
        let failed: Vec<_> = s.run.failed_checks().collect();
        let passed: Vec<&str> = s
            .run
            .checks
            .iter()
            .filter(|c| c.ok)
            .map(|c| c.name.as_str())
            .collect();
        let _ = write!(html, "<li><strong>{}</strong>: ", escape(&s.label));
        if passed.is_empty() && failed.is_empty() {
            html.push_str("none recorded");
        } else if !passed.is_empty() {
            let _ = write!(html, "ok: {}", escape(&passed.join(", ")));
        }
        if !failed.is_empty() {
            html.push_str("<ul>");
            for check in failed {
                let _ = write!(
                    html,
                    "<li class=\"failed\">✗ {}: {}</li>",
                    escape(&check.name),
                    escape(&check.detail)
                );
            }
            html.push_str("</ul>");
        }
        html.push_str("</li>\n");
    }
    html.push_str("</ul>\n");
}

/// What made each run, and links to its files: what every run shares once, above
/// a table of what differs.
fn push_provenance(html: &mut String, shown: &[Shown], folder: &Path) {
    html.push_str("<h2 id=\"provenance\">Provenance and files</h2>\n");
    let fields: Vec<(&str, Vec<String>)> = vec![
        (
            "nicsched",
            shown
                .iter()
                .map(|s| {
                    let p = &s.run.provenance;
                    format!(
                        "{} <span class=\"commit\">{}</span>",
                        escape(&p.nicsched),
                        escape(&p.commit)
                    )
                })
                .collect(),
        ),
        (
            "seed",
            shown.iter().map(|s| s.run.seed.to_string()).collect(),
        ),
        (
            "kernel",
            shown
                .iter()
                .map(|s| escape(&s.run.provenance.kernel))
                .collect(),
        ),
        (
            "host",
            shown
                .iter()
                .map(|s| escape(&s.run.provenance.host))
                .collect(),
        ),
        (
            "settings",
            shown
                .iter()
                .map(|s| {
                    s.run
                        .provenance
                        .settings
                        .iter()
                        .map(|(key, value)| {
                            format!(
                                "<span class=\"setting\">{}</span>",
                                escape(&format!("{key}={value}"))
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect(),
        ),
        (
            "command",
            shown
                .iter()
                .map(|s| format!("<code>{}</code>", escape(&s.run.provenance.command)))
                .collect(),
        ),
    ];
    let (shared, differing): (Vec<_>, Vec<_>) = fields
        .into_iter()
        .partition(|(_, values)| values.iter().all(|v| *v == values[0]));
    if shown.len() > 1 && !shared.is_empty() {
        html.push_str("<p class=\"hint\">Shared by every run:</p>\n");
    }
    html.push_str("<dl class=\"shared\">\n");
    for (name, values) in &shared {
        let value = if values[0].is_empty() {
            "–"
        } else {
            &values[0]
        };
        let _ = writeln!(html, "<dt>{name}</dt><dd>{value}</dd>");
    }
    html.push_str("</dl>\n<table class=\"report provenance\">\n<thead><tr><th>run</th>");
    for (name, _) in &differing {
        let _ = write!(html, "<th>{name}</th>");
    }
    html.push_str("<th>files</th></tr></thead>\n<tbody>\n");
    for (i, s) in shown.iter().enumerate() {
        let href = relative_href(folder, &s.run.dir);
        let files: Vec<String> = s
            .run
            .files
            .iter()
            .map(|name| {
                format!(
                    "<a href=\"{}\">{}</a>",
                    escape(&format!("{href}{name}")),
                    escape(name)
                )
            })
            .collect();
        let _ = write!(html, "<tr><td>{}</td>", escape(&s.label));
        for (_, values) in &differing {
            let _ = write!(html, "<td>{}</td>", values[i]);
        }
        let _ = writeln!(html, "<td>{}</td></tr>", files.join(" "));
    }
    html.push_str("</tbody>\n</table>\n");
    push_overlay_links(html, shown, folder);
}

/// Links to the overlay PNGs (every run of one results folder on shared axes, for
/// papers) of each results folder the runs come from.
fn push_overlay_links(html: &mut String, shown: &[Shown], folder: &Path) {
    let mut results: Vec<&Path> = shown.iter().filter_map(|s| s.run.dir.parent()).collect();
    results.dedup();
    for dir in results {
        let href = relative_href(folder, dir);
        let links: Vec<String> = OVERLAY_PNGS
            .into_iter()
            .filter(|name| dir.join(name).is_file())
            .map(|name| {
                format!(
                    "<a href=\"{}\">{}</a>",
                    escape(&format!("{href}{name}")),
                    escape(name)
                )
            })
            .collect();
        if !links.is_empty() {
            let of = if href.is_empty() {
                "this folder".to_string()
            } else {
                format!("<code>{}</code>", escape(&href))
            };
            let _ = writeln!(
                html,
                "<p>Every run of {of} on shared axes, as PNG (for papers): {}</p>",
                links.join(" ")
            );
        }
    }
}

/// The chart of one series (or the sum of a kind's rest), `series` each run's
/// as drawn, where it has one.
fn throughput_chart(
    shown: &[Shown],
    series: &[Option<&Series>],
    title: String,
    index: usize,
) -> Chart {
    let mut columns: Vec<Column> = Vec::new();
    let mut ideals: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut ideal_of: Vec<String> = Vec::new();
    for (s, series) in shown.iter().zip(series) {
        let Some(series) = series else {
            continue;
        };
        let points = |values: &[f64]| -> Vec<(f64, f64)> {
            series
                .time_s
                .iter()
                .zip(values)
                .map(|(&t, &v)| (t, v * s.scale))
                .collect()
        };
        columns.push((
            s.label.clone(),
            s.color,
            s.dash,
            false,
            points(&series.throughput_bps),
        ));
        let ideal = points(&series.ideal_bps);
        // One ideal for the runs whose ideals agree, as a scenario's runs' do
        // unless a lab run's generators fell short of what they were asked.
        if !ideals.iter().any(|known| same_curve(known, &ideal)) {
            ideals.push(ideal);
            ideal_of.push(s.label.clone());
        }
    }
    let many = ideals.len() > 1;
    for (i, (ideal, of)) in ideals.into_iter().zip(ideal_of).enumerate() {
        let label = if many {
            format!("ideal ({of})")
        } else {
            "ideal".to_string()
        };
        columns.push((
            label,
            IDEAL_COLOURS[i % IDEAL_COLOURS.len()],
            true,
            true,
            ideal,
        ));
    }
    let max_bps = columns
        .iter()
        .flat_map(|c| c.4.iter().map(|&(_, v)| v))
        .fold(0.0, f64::max);
    let crate::checks::RateUnit {
        name: unit,
        bps: divisor,
    } = crate::checks::rate_unit(max_bps);
    let (x, series) = aligned(
        columns
            .into_iter()
            .map(|(label, color, dash, ideal, points)| {
                (
                    label,
                    color,
                    dash,
                    ideal,
                    points.into_iter().map(|(t, v)| (t, v / divisor)).collect(),
                )
            })
            .collect(),
        &time_domain(shown),
    );
    Chart {
        id: format!("chart-{index}"),
        title,
        x_label: "time (s)",
        y_label: format!("throughput ({unit})"),
        unit: unit.to_string(),
        x_log: false,
        y_range: "zero",
        x,
        series,
    }
}

/// Whether two ideals are one curve: the same times, values within 1% of the
/// larger's peak (less than a line's width apart on the chart).
fn same_curve(a: &[(f64, f64)], b: &[(f64, f64)]) -> bool {
    let peak = a.iter().chain(b).map(|&(_, v)| v.abs()).fold(0.0, f64::max);
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(p, q)| time_key(p.0) == time_key(q.0) && (p.1 - q.1).abs() <= 0.01 * peak)
}

fn fairness_chart(shown: &[Shown], jain: bool, index: usize) -> Chart {
    let columns = shown
        .iter()
        .map(|s| {
            let mut thinned = Thinned::<1>::new(s.run.fairness.len());
            for (i, p) in s.run.fairness.iter().enumerate() {
                let value = if jain { p.jain } else { p.rel_error };
                thinned.push(i, p.time_s, p.time_s, [value]);
            }
            let (x, [y]) = thinned.finish();
            let points = x.into_iter().zip(y).collect();
            (s.label.clone(), s.color, s.dash, false, points)
        })
        .collect();
    let (x, series) = aligned(columns, &time_domain(shown));
    let (title, y_label) = if jain {
        (
            "Jain's index of throughput / ideal, every run",
            "Jain's index",
        )
    } else {
        (
            "mean relative error against the ideal, every run",
            "relative error",
        )
    };
    Chart {
        id: format!("chart-{index}"),
        title: title.to_string(),
        x_label: "time (s)",
        y_label: y_label.to_string(),
        unit: String::new(),
        x_log: false,
        y_range: if jain { "jain" } else { "zero" },
        x,
        series,
    }
}

fn latency_chart(shown: &[Shown], traffic: &str, index: usize) -> Chart {
    let columns = shown
        .iter()
        .filter_map(|s| {
            let cdf = s.run.latency.iter().find(|c| c.traffic == traffic)?;
            // A log axis has no 0; a latency is never below a microsecond's tenth.
            let points = cdf
                .points
                .iter()
                .map(|&(quantile, us)| (us.max(0.1), quantile))
                .collect();
            Some((s.label.clone(), s.color, s.dash, false, points))
        })
        .collect();
    let (x, series) = aligned(columns, &[]);
    Chart {
        id: format!("chart-{index}"),
        title: format!("latency of {traffic}"),
        x_label: "latency (µs)",
        y_label: "fraction of requests".to_string(),
        unit: String::new(),
        x_log: true,
        y_range: "fraction",
        x,
        series,
    }
}

/// Time charts span the whole of the longest run, so that a traffic that ran for
/// part of it is seen where it ran.
fn time_domain(shown: &[Shown]) -> [f64; 2] {
    let end_s = shown
        .iter()
        .filter_map(|s| s.run.times_s.last().copied())
        .fold(0.0, f64::max);
    [0.0, end_s]
}

/// A time or latency as a key that equal values written by different runs share.
fn time_key(x: f64) -> i64 {
    (x * 1e6).round() as i64
}

/// A series before alignment: label, colour, dashed, an ideal, its (x, y) points.
type Column = (String, &'static str, bool, bool, Vec<(f64, f64)>);

/// The columns' points on one x axis, the union of theirs and `domain` (the
/// ends the axis is to span): a column has no value (null: the line spans it)
/// at an x of another's; of several values at one x (a CDF's step), the last.
fn aligned(columns: Vec<Column>, domain: &[f64]) -> (Vec<f64>, Vec<ChartSeries>) {
    let mut xs: BTreeMap<i64, f64> = domain.iter().map(|&x| (time_key(x), x)).collect();
    for (_, _, _, _, points) in &columns {
        for &(x, _) in points {
            xs.entry(time_key(x)).or_insert(x);
        }
    }
    let position: BTreeMap<i64, usize> = xs.keys().enumerate().map(|(i, &k)| (k, i)).collect();
    let series = columns
        .into_iter()
        .map(|(label, color, dash, ideal, points)| {
            let mut values = vec![None; xs.len()];
            for (x, y) in points {
                values[position[&time_key(x)]] = Some(y);
            }
            ChartSeries {
                label,
                color,
                dash,
                ideal,
                values,
            }
        })
        .collect();
    (xs.into_values().collect(), series)
}

/// `to`'s folder relative to `from`, ending in `/`, for an href; absolute where
/// they share no root.
fn relative_href(from: &Path, to: &Path) -> String {
    let from = from.canonicalize().unwrap_or_else(|_| from.to_path_buf());
    let to = to.canonicalize().unwrap_or_else(|_| to.to_path_buf());
    let from: Vec<Component> = from.components().collect();
    let to_parts: Vec<Component> = to.components().collect();
    let shared = from
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut href = String::new();
    if shared == 0 {
        href.push_str("file://");
        href.push_str(&percent_encode(&to.to_string_lossy()));
        href.push('/');
        return href;
    }
    for _ in shared..from.len() {
        href.push_str("../");
    }
    for part in &to_parts[shared..] {
        href.push_str(&percent_encode(&part.as_os_str().to_string_lossy()));
        href.push('/');
    }
    href
}

/// Percent-encodes what a URL path may not hold as is.
fn percent_encode(text: &str) -> String {
    let mut encoded = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

/// A factor as a reader writes it: 10, 2.5, 3.333.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn series_share_one_x_axis_with_gaps_where_a_run_has_no_point() {
        let (x, series) = aligned(
            vec![
                (
                    "a".into(),
                    "#000",
                    false,
                    false,
                    vec![(0.1, 1.0), (0.2, 2.0)],
                ),
                (
                    "b".into(),
                    "#000",
                    false,
                    false,
                    vec![(0.30000000000000004, 3.0), (0.2, 4.0)],
                ),
            ],
            &[0.0, 0.3],
        );
        assert_eq!(x, [0.0, 0.1, 0.2, 0.3]);
        assert_eq!(series[0].values, [None, Some(1.0), Some(2.0), None]);
        assert_eq!(series[1].values, [None, None, Some(4.0), Some(3.0)]);
    }

    #[test]
    fn links_are_relative_to_the_page() {
        let href = relative_href(Path::new("/r/out"), Path::new("/r/sim run/tonic"));
        assert_eq!(href, "../sim%20run/tonic/");
        assert_eq!(
            relative_href(Path::new("/r"), Path::new("/r/tonic")),
            "tonic/"
        );
    }

    #[test]
    fn numbers_lose_trailing_zeros() {
        assert_eq!(crate::figures::trimmed(10.0, 3), "10");
        assert_eq!(crate::figures::trimmed(2.5, 3), "2.5");
    }
}
