//! The contract of scenario.md "Results", checked through the public API on small
//! hand-built records whose figures can be worked out on paper.

use std::fs;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use report::{
    ClassName, GapStats, Interval, LatencyRecord, Mode, PacingRecord, RunRecord, Summary,
    comparison_table, summarize, write_html, write_run,
};

const GBPS: f64 = 1e9;

fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= 1e-12 * expected.abs().max(1.0),
        "{what}: {actual} != {expected}"
    );
}

/// Bytes that make `gbps` over `length_s`.
fn bytes(gbps: f64, length_s: f64) -> u64 {
    (gbps * GBPS * length_s / 8.0) as u64
}

struct Spec {
    start_s: f64,
    end_s: f64,
    steady: bool,
    /// Per class (t1/a, t1/b, t2/default): Gbit/s sent, ideal Gbit/s, active.
    classes: [(f64, f64, bool); 3],
    /// Per tenant: ideal Gbit/s, active.
    tenants: [(f64, bool); 2],
}

fn interval(spec: Spec) -> Interval {
    let length_s = spec.end_s - spec.start_s;
    Interval {
        start_ns: (spec.start_s * 1e9) as u64,
        end_ns: (spec.end_s * 1e9) as u64,
        steady: spec.steady,
        class_bytes: spec.classes.iter().map(|c| bytes(c.0, length_s)).collect(),
        class_ideal_bps: spec.classes.iter().map(|c| c.1 * GBPS).collect(),
        class_active: spec.classes.iter().map(|c| c.2).collect(),
        tenant_ideal_bps: spec.tenants.iter().map(|t| t.0 * GBPS).collect(),
        tenant_active: spec.tenants.iter().map(|t| t.1).collect(),
    }
}

/// Two tenants on a 10 Gbit/s link; t1 has apps a and b, t2 one app.
///
/// - 0..1 s, not steady: t1/a alone at 4 of an ideal 10: must not count.
/// - 1..2 s: t1 4 (a 2, b 2) against 5, t2 6 against 5: shares 0.8 and 1.2.
/// - 2..3 s: t1 5 (a alone) and t2 5, both against 5: exact.
/// - 3..3.5 s, a short last interval: t2 alone at 4 against 10.
fn two_tenants() -> RunRecord {
    let off = (0.0, 0.0, false);
    let intervals = vec![
        interval(Spec {
            start_s: 0.0,
            end_s: 1.0,
            steady: false,
            classes: [(4.0, 10.0, true), off, off],
            tenants: [(10.0, true), (0.0, false)],
        }),
        interval(Spec {
            start_s: 1.0,
            end_s: 2.0,
            steady: true,
            classes: [(2.0, 2.5, true), (2.0, 2.5, true), (6.0, 5.0, true)],
            tenants: [(5.0, true), (5.0, true)],
        }),
        interval(Spec {
            start_s: 2.0,
            end_s: 3.0,
            steady: true,
            classes: [(5.0, 5.0, true), off, (5.0, 5.0, true)],
            tenants: [(5.0, true), (5.0, true)],
        }),
        interval(Spec {
            start_s: 3.0,
            end_s: 3.5,
            steady: true,
            classes: [off, off, (4.0, 10.0, true)],
            tenants: [(0.0, false), (10.0, true)],
        }),
    ];
    let mut probe = Histogram::new(3).unwrap();
    for ns in 1..=1000 {
        probe.record(ns * 1000).unwrap();
    }
    RunRecord {
        scenario: "two-tenants".into(),
        enforcer: "tonic".into(),
        mode: Mode::Sim,
        seed: 7,
        duration_ns: 3_500_000_000,
        interval_ns: 1_000_000_000,
        link_rate_bps: 10_000_000_000,
        tenants: vec!["t1".into(), "t2".into()],
        classes: vec![
            ClassName {
                tenant: "t1".into(),
                app: "a".into(),
            },
            ClassName {
                tenant: "t1".into(),
                app: "b".into(),
            },
            ClassName {
                tenant: "t2".into(),
                app: "default".into(),
            },
        ],
        class_tenant: vec![0, 0, 1],
        intervals,
        latency: vec![LatencyRecord {
            traffic: "t2-probe".into(),
            histogram_ns: probe,
        }],
        pacing: vec![PacingRecord {
            traffic: "t1-bulk".into(),
            flows: vec![
                paced(&[0, 10_000, 20_000, 30_000]),
                paced(&[0, 4_000, 12_000]),
            ],
        }],
        tenant_drops: vec![3, 0],
        tenant_frames: Vec::new(),
        engine_cpu: Vec::new(),
        backpressure: Vec::new(),
        frames_sent: 123_456,
        checks: Vec::new(),
        provenance: Default::default(),
        wall_s: 0.25,
    }
}

fn paced(departures_ns: &[u64]) -> GapStats {
    let mut stats = GapStats::default();
    for &t in departures_ns {
        stats.departure(t);
    }
    stats
}

#[test]
fn pacing_averages_each_flows_gap_statistics() {
    let pacing = &summarize(&two_tenants()).pacing["t1-bulk"];
    // Flow 1: gaps 10, 10, 10 us (std 0); flow 2: gaps 4, 8 us (mean 6, std 2).
    assert_eq!(pacing.flows, 2);
    assert_eq!(pacing.samples, 5);
    assert_close(pacing.mean_gap_us, 8.0, "mean_gap_us");
    assert_close(pacing.std_gap_us, 1.0, "std_gap_us");
    assert_close(pacing.std_gap_us_max, 2.0, "std_gap_us_max");
}

#[test]
fn summary_counts_only_steady_intervals() {
    let summary = summarize(&two_tenants());
    let fairness = &summary.fairness;
    assert_eq!(fairness.intervals, 3);
    assert_close(fairness.jain_min, 4.0 / 4.16, "jain_min");
    assert_close(fairness.jain_mean, (4.0 / 4.16 + 2.0) / 3.0, "jain_mean");
    // Pairs: (t1, 0.2), (t2, 0.2), (t1, 0), (t2, 0), (t2, 0.6).
    assert_close(fairness.rel_error_mean, 0.2, "rel_error_mean");
    assert_close(fairness.rel_error_max, 0.6, "rel_error_max");
    // 10/10, 10/10 and 4/10 of the link.
    assert_close(summary.utilization, 0.8, "utilization");
}

#[test]
fn tenant_and_app_figures_are_means_over_their_active_steady_intervals() {
    let summary = summarize(&two_tenants());
    let [t1, t2] = &summary.tenants[..] else {
        panic!("two tenants expected, got {:?}", summary.tenants);
    };
    assert_eq!((t1.name.as_str(), t2.name.as_str()), ("t1", "t2"));
    assert_close(t1.throughput_bps, 4.5 * GBPS, "t1 throughput");
    assert_close(t1.ideal_bps, 5.0 * GBPS, "t1 ideal");
    assert_close(t1.rel_error_mean, 0.1, "t1 rel_error_mean");
    assert_close(t1.rel_error_max, 0.2, "t1 rel_error_max");
    assert_eq!((t1.drops, t2.drops), (3, 0));
    assert_close(t2.throughput_bps, 5.0 * GBPS, "t2 throughput");
    assert_close(t2.ideal_bps, 20.0 / 3.0 * GBPS, "t2 ideal");
    assert_close(t2.rel_error_mean, 0.8 / 3.0, "t2 rel_error_mean");
    assert_close(t2.rel_error_max, 0.6, "t2 rel_error_max");

    let apps: Vec<&str> = t1.apps.iter().map(|app| app.name.as_str()).collect();
    assert_eq!(apps, ["a", "b"]);
    assert_close(t1.apps[0].throughput_bps, 3.5 * GBPS, "t1/a throughput");
    assert_close(t1.apps[0].ideal_bps, 3.75 * GBPS, "t1/a ideal");
    assert_close(t1.apps[1].throughput_bps, 2.0 * GBPS, "t1/b throughput");
    assert_close(t1.apps[1].ideal_bps, 2.5 * GBPS, "t1/b ideal");
    assert_eq!(t2.apps.len(), 1);
    assert_close(
        t2.apps[0].throughput_bps,
        5.0 * GBPS,
        "t2/default throughput",
    );
}

#[test]
fn summary_carries_the_run_and_its_latency() {
    let summary = summarize(&two_tenants());
    assert_eq!(summary.scenario, "two-tenants");
    assert_eq!(summary.enforcer, "tonic");
    assert_eq!(summary.mode, Mode::Sim);
    assert_eq!(summary.duration_s, 3.5);
    assert_eq!(summary.link_rate_bps, 10_000_000_000);
    assert_eq!(summary.seed, 7);
    assert_eq!(summary.frames_sent, 123_456);
    let probe = &summary.latency["t2-probe"];
    assert_eq!(probe.count, 1000);
    // 1..=1000 µs sit above 2048 ns, where a 3-digit histogram rounds within 0.1%.
    assert!(
        (probe.mean_us - 500.5).abs() <= 0.5,
        "mean {}",
        probe.mean_us
    );
    assert!((probe.p50_us - 500.0).abs() <= 0.5, "p50 {}", probe.p50_us);
    assert!((probe.p99_us - 990.0).abs() <= 1.0, "p99 {}", probe.p99_us);
    assert!((probe.max_us - 1000.0).abs() <= 1.0, "max {}", probe.max_us);
}

#[test]
fn summary_json_has_the_contract_keys_and_is_deterministic() {
    let run = two_tenants();
    let json = summarize(&run).to_json();
    assert_eq!(json, summarize(&run).to_json());
    assert_eq!(
        json,
        serde_json::to_string_pretty(&summarize(&run.clone())).unwrap()
    );

    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["mode"], "sim");
    assert_eq!(value["link_rate_bps"], 10_000_000_000u64);
    for key in [
        "scenario",
        "enforcer",
        "duration_s",
        "utilization",
        "seed",
        "frames_sent",
    ] {
        assert!(value.get(key).is_some(), "missing {key}");
    }
    for key in [
        "name",
        "throughput_bps",
        "ideal_bps",
        "rel_error_mean",
        "rel_error_max",
        "drops",
    ] {
        assert!(
            value["tenants"][0].get(key).is_some(),
            "missing tenants[].{key}"
        );
    }
    for key in ["name", "throughput_bps", "ideal_bps"] {
        assert!(
            value["tenants"][0]["apps"][0].get(key).is_some(),
            "missing apps[].{key}"
        );
    }
    for key in [
        "jain_mean",
        "jain_min",
        "rel_error_mean",
        "rel_error_max",
        "intervals",
    ] {
        assert!(
            value["fairness"].get(key).is_some(),
            "missing fairness.{key}"
        );
    }
    for key in [
        "count", "mean_us", "stdev_us", "min_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
    ] {
        assert!(
            value["latency"]["t2-probe"].get(key).is_some(),
            "missing latency.{key}"
        );
    }

    let back: Summary = serde_json::from_str(&json).unwrap();
    assert_eq!(back, summarize(&run));
}

/// The simulator's record of each VM's backpressure reaches its tenant in
/// summary.json as it was; a run without one (the lab) writes no such key.
#[test]
fn backpressure_reaches_each_tenant_and_only_where_recorded() {
    let mut run = two_tenants();
    let lab = summarize(&run);
    assert!(lab.tenants.iter().all(|t| t.backpressure.is_none()));
    let json: serde_json::Value = serde_json::from_str(&lab.to_json()).unwrap();
    assert!(json["tenants"][0].get("backpressure").is_none());

    let flooded = report::Backpressure {
        held_packets_mean: 999.5,
        held_packets_max: 1000,
        ring_full_s: 1.9,
        dropped_in_guest: 586_548,
    };
    run.backpressure = vec![flooded.clone(), report::Backpressure::default()];
    let summary = summarize(&run);
    assert_eq!(summary.tenants[0].backpressure.as_ref(), Some(&flooded));
    assert_eq!(
        summary.tenants[1].backpressure,
        Some(report::Backpressure::default())
    );
    let json: serde_json::Value = serde_json::from_str(&summary.to_json()).unwrap();
    let written = &json["tenants"][0]["backpressure"];
    assert_eq!(written["held_packets_max"], 1000);
    assert_eq!(written["dropped_in_guest"], 586_548);
    assert_eq!(written["ring_full_s"], 1.9);
    assert_eq!(written["held_packets_mean"], 999.5);
    let back: Summary = serde_json::from_str(&summary.to_json()).unwrap();
    assert_eq!(back, summary);
}

#[test]
fn without_steady_intervals_figures_stay_finite() {
    let mut run = two_tenants();
    for interval in &mut run.intervals {
        interval.steady = false;
    }
    let summary = summarize(&run);
    let fairness = &summary.fairness;
    assert_eq!(fairness.intervals, 0);
    assert_eq!((fairness.jain_mean, fairness.jain_min), (1.0, 1.0));
    assert_eq!(
        (fairness.rel_error_mean, fairness.rel_error_max),
        (0.0, 0.0)
    );
    assert_eq!(summary.utilization, 0.0);
    assert_eq!(summary.tenants[0].throughput_bps, 0.0);
    assert!(!summary.to_json().contains("null"));
}

/// A folder under the system temp dir, unique to this process and test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!("report-test-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn is_png(path: &Path) -> bool {
    fs::read(path).is_ok_and(|bytes| bytes.starts_with(b"\x89PNG\r\n\x1a\n"))
}

#[test]
fn write_run_leaves_every_file() {
    let temp = TempDir::new("write-run");
    let dir = temp.0.join("tonic");
    let run = two_tenants();
    let summary = write_run(&dir, &run).unwrap();
    assert_eq!(summary, summarize(&run));
    assert_eq!(
        fs::read_to_string(dir.join("summary.json"))
            .unwrap()
            .trim_end(),
        summary.to_json()
    );

    let timeseries = lines(&dir.join("timeseries.csv"));
    assert_eq!(timeseries[0], "time_s,tenant,app,throughput_bps,ideal_bps");
    assert_eq!(timeseries.len(), 1 + 4 * 3);
    assert_eq!(timeseries[1], "1,t1,a,4000000000,10000000000");
    // Inactive classes get an ideal of 0.
    assert_eq!(timeseries[2], "1,t1,b,0,0");
    assert_eq!(timeseries[12], "3.5,t2,default,4000000000,10000000000");

    let latency = lines(&dir.join("latency.csv"));
    assert_eq!(latency[0], "traffic,quantile,latency_us");
    assert_eq!(latency.len(), 1 + 103);
    assert!(latency[1].starts_with("t2-probe,0,"));
    assert!(latency[103].starts_with("t2-probe,1,"));

    for plot in ["throughput.png", "fairness.png", "latency_cdf.png"] {
        assert!(is_png(&dir.join(plot)), "{plot} is not a PNG");
    }
}

#[test]
fn write_run_survives_degenerate_records() {
    let temp = TempDir::new("degenerate");
    let mut empty = two_tenants();
    empty.intervals.clear();
    empty.latency.clear();
    empty.duration_ns = 0;
    let mut nothing = empty.clone();
    nothing.tenants.clear();
    nothing.classes.clear();
    nothing.class_tenant.clear();
    nothing.tenant_drops.clear();
    let mut single_idle = two_tenants();
    single_idle.intervals.truncate(1);
    single_idle.intervals[0].steady = true;
    single_idle.intervals[0].class_bytes = vec![0; 3];
    single_idle.latency[0].histogram_ns = Histogram::new(3).unwrap();
    let mut zero_length = two_tenants();
    zero_length.intervals[3].end_ns = zero_length.intervals[3].start_ns;

    for (name, run) in [
        ("empty", empty),
        ("nothing", nothing),
        ("single-idle", single_idle),
        ("zero-length", zero_length),
    ] {
        let dir = temp.0.join(name);
        let summary = write_run(&dir, &run).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!summary.to_json().contains("null"), "{name}");
        assert!(is_png(&dir.join("throughput.png")), "{name}");
        assert!(is_png(&dir.join("fairness.png")), "{name}");
        let has_latency = run.latency.iter().any(|r| !r.histogram_ns.is_empty());
        assert_eq!(dir.join("latency_cdf.png").exists(), has_latency, "{name}");
        let timeseries = lines(&dir.join("timeseries.csv"));
        assert_eq!(
            timeseries.len(),
            1 + run.intervals.len() * run.classes.len()
        );
        assert_eq!(
            lines(&dir.join("latency.csv")).len(),
            1 + 103 * run.latency.len()
        );
    }
}

#[test]
fn html_report_overlays_every_run_from_its_files_and_fetches_nothing() {
    let temp = TempDir::new("html");
    let tonic = two_tenants();
    let mut xps = two_tenants();
    xps.enforcer = "<xps & co>".into();
    xps.latency.clear();
    let dirs: Vec<PathBuf> = [tonic, xps]
        .iter()
        .enumerate()
        .map(|(index, run)| {
            let dir = temp.0.join(format!("run{index}"));
            write_run(&dir, run).unwrap();
            dir
        })
        .collect();
    let path = write_html(&temp.0, &dirs).unwrap();
    assert_eq!(path, temp.0.join("report.html"));
    let html = fs::read_to_string(&path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("nicsched: two-tenants"));
    assert!(html.contains("sim/&lt;xps &amp; co&gt;"));
    assert!(!html.contains("<xps"), "names are escaped, in the data too");
    for chart in [
        "tenant t1",
        "tenant t2",
        "app t1/a",
        "app t1/b",
        "Jain&#39;s index of throughput / ideal, every run",
        "latency of t2-probe",
    ] {
        assert!(
            html.contains(&format!("<figcaption>{chart}</figcaption>")),
            "missing {chart}"
        );
    }
    // t2 has one app: its chart would be t2's again.
    assert!(!html.contains("<figcaption>app t2/default</figcaption>"));
    for column in [
        "Jain mean",
        "rel. error max",
        "drops",
        "t2-probe p99 (µs)",
        "self-checks",
    ] {
        assert!(
            html.contains(&format!("<th>{column}</th>")),
            "missing {column}"
        );
    }
    assert!(html.contains("<a href=\"run0/timeseries.csv\">timeseries.csv</a>"));
    assert!(html.contains("<a href=\"run1/summary.json\">summary.json</a>"));
    assert!(!html.contains("run1/latency_cdf.png"), "xps drew no CDF");
    for fetch in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
        "src=\"//",
    ] {
        assert!(!html.contains(fetch), "the page fetches: {fetch}");
    }
}

#[test]
fn comparison_table_aligns_one_row_per_enforcer() {
    let tonic = summarize(&two_tenants());
    let mut xps = tonic.clone();
    xps.enforcer = "xps-with-a-long-name".into();
    xps.latency.clear();
    let table = comparison_table(&[tonic, xps]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    for column in [
        "enforcer",
        "utilization",
        "jain_mean",
        "jain_min",
        "rel_error_mean",
    ] {
        assert!(lines[0].contains(column), "missing {column}");
    }
    assert!(lines[0].contains("p99 t2-probe"));
    assert!(lines[2].starts_with("tonic "));
    assert!(lines[3].starts_with("xps-with-a-long-name "));
    // The last column is right-aligned, so every line ends at the same width.
    let width = lines[0].chars().count();
    assert!(
        lines.iter().all(|line| line.chars().count() == width),
        "{table}"
    );
    assert!(
        lines[2].contains(" 0.800 ") && lines[2].contains(" 3 "),
        "{table}"
    );
    assert!(lines[3].trim_end().ends_with('-'), "{table}");
}

#[test]
fn a_file_that_cannot_be_written_is_named_in_the_error() {
    let temp = TempDir::new("unwritable");
    let run = two_tenants();
    for file in [
        "summary.json",
        "timeseries.csv",
        "latency.csv",
        "throughput.png",
        "fairness.png",
        "latency_cdf.png",
    ] {
        // A folder where the file goes: no write to it succeeds, root's neither.
        let dir = temp.0.join(file.replace('.', "-"));
        let blocked = dir.join(file);
        fs::create_dir_all(&blocked).unwrap();
        let error = write_run(&dir, &run).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("{}: ", blocked.display())),
            "{file}: {error}"
        );
    }
    let dir = temp.0.join("html");
    write_run(&dir, &run).unwrap();
    let blocked = dir.join("report.html");
    fs::create_dir_all(&blocked).unwrap();
    let error = write_html(&dir, std::slice::from_ref(&dir))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!("{}: ", blocked.display())),
        "{error}"
    );
}

#[test]
fn names_across_hosts_that_hold_commas_or_quotes_stay_one_field_each() {
    let temp = TempDir::new("hosts-csv");
    fs::create_dir_all(&temp.0).unwrap();
    let path = temp.0.join(report::TIMESERIES_CSV);
    let row = report::HostsRow {
        time_s: 0.25,
        host: "h1".into(),
        tenant: "a,b".into(),
        app: "say \"hi\"".into(),
        flow: "f".into(),
        throughput_bps: 1e9,
        ideal_bps: 2e9,
    };
    report::write_hosts_timeseries(&path, &[row]).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(
        text,
        format!(
            "{}\n0.25,h1,\"a,b\",\"say \"\"hi\"\"\",f,1000000000,2000000000\n",
            report::HOSTS_TIMESERIES_HEADER
        )
    );
}
