//! `compare --baseline` fails closed: what the baseline had and a run lacks (a
//! run, tenant, app or traffic missing, or there but silent) regresses unless it
//! is expected; counts add without wrapping; figures from a tampered summary.json
//! print in a bounded width. Runs are written through report's own `OutDir`, as
//! `nicsched sim` commits them, then read back by `load_summaries`.

use std::fs;
use std::path::{Path, PathBuf};

use report::{
    Absence, MissingKind, OutDir, Provenance, Summary, Thresholds, against_baseline, load_summaries,
};
use serde_json::{Value, json};

/// A scratch folder removed when dropped.
struct Temp(PathBuf);

impl Temp {
    fn new(test: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("report-baseline-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        Temp(path)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// One run's summary.json: tenants a (apps bulk, kv) and b (one app), an rpc
/// traffic `a-rpc` with latency and pacing, a bulk traffic `b-bulk` with pacing.
fn summary(enforcer: &str) -> Value {
    let latency = json!({"count": 500, "mean_us": 40.0, "min_us": 30.0, "p50_us": 35.0,
        "p90_us": 60.0, "p99_us": 120.0, "p999_us": 300.0, "max_us": 310.0});
    let pacing = json!({"flows": 1, "samples": 900, "mean_gap_us": 12.0, "std_gap_us": 1.0,
        "std_gap_us_max": 1.0});
    json!({
        "scenario": "s", "enforcer": enforcer, "mode": "sim", "duration_s": 1.0,
        "interval_s": 0.5, "link_rate_bps": 1_000_000_000u64, "utilization": 0.97, "seed": 1,
        "tenants": [
            {"name": "a", "throughput_bps": 5e8, "ideal_bps": 5e8, "rel_error_mean": 0.01,
             "rel_error_max": 0.02, "drops": 0, "apps": [
                {"name": "bulk", "throughput_bps": 4e8, "ideal_bps": 4e8},
                {"name": "kv", "throughput_bps": 1e8, "ideal_bps": 1e8}]},
            {"name": "b", "throughput_bps": 4.7e8, "ideal_bps": 5e8, "rel_error_mean": 0.06,
             "rel_error_max": 0.06, "drops": 3, "apps": [
                {"name": "default", "throughput_bps": 4.7e8, "ideal_bps": 5e8}]}],
        "fairness": {"jain_mean": 0.999, "jain_min": 0.98, "rel_error_mean": 0.05,
            "rel_error_max": 0.1, "intervals": 2},
        "latency": {"a-rpc": latency},
        "pacing": {"a-rpc": pacing, "b-bulk": pacing},
        "frames_sent": 100
    })
}

/// Commits `runs` (summary.json each, by enforcer) to `dir` as a complete run.
fn committed(dir: &Path, runs: &[Value]) -> Vec<Summary> {
    let out = OutDir::claim(dir, &[]).unwrap();
    for run in runs {
        let folder = out.staging().join(run["enforcer"].as_str().unwrap());
        fs::create_dir_all(&folder).unwrap();
        fs::write(
            folder.join("summary.json"),
            serde_json::to_string_pretty(run).unwrap(),
        )
        .unwrap();
    }
    let provenance = Provenance {
        nicsched: env!("CARGO_PKG_VERSION").to_string(),
        commit: "unknown".to_string(),
        command: "nicsched sim s.yaml".to_string(),
        ..Provenance::default()
    };
    out.commit(&provenance).unwrap();
    load_summaries(dir).unwrap()
}

/// The baseline (`old`, one wf2q run of [`summary`]) and `new`, `change`d.
fn old_and_new(temp: &Temp, change: impl FnOnce(&mut Value)) -> (Vec<Summary>, Vec<Summary>) {
    let mut new = summary("wf2q");
    change(&mut new);
    (
        committed(&temp.0.join("old"), &[summary("wf2q")]),
        committed(&temp.0.join("new"), &[new]),
    )
}

fn names(expect: &[&str]) -> Vec<String> {
    expect.iter().map(|name| name.to_string()).collect()
}

#[test]
fn a_run_equal_to_its_baseline_passes_with_nothing_missing() {
    let temp = Temp::new("equal");
    let (old, new) = old_and_new(&temp, |_| {});
    let compared = against_baseline(&new, &old, &Thresholds::default(), &[]);
    assert!(!compared.regressed(), "{:?}", compared.regressions);
    assert!(compared.runs[0].missing.is_empty());
}

#[test]
fn a_starved_rpc_traffic_regresses_unless_expected() {
    let temp = Temp::new("starved");
    // Present, with no request answered: its p99 is no figure to compare.
    let (old, new) = old_and_new(&temp, |new| {
        new["latency"]["a-rpc"]["count"] = json!(0);
        new["latency"]["a-rpc"]["p99_us"] = json!(0.0);
    });
    let compared = against_baseline(&new, &old, &Thresholds::default(), &[]);
    assert_eq!(compared.regressions, ["s/wf2q/sim latency.a-rpc.count"]);
    let missing = &compared.runs[0].missing[0];
    assert_eq!(
        (
            missing.name.as_str(),
            missing.what,
            missing.how,
            missing.baseline
        ),
        ("a-rpc", MissingKind::Traffic, Absence::Silent, 500.0)
    );
    let text = compared.table(false);
    let line = text
        .lines()
        .find(|l| l.contains("latency.a-rpc.count"))
        .unwrap();
    assert_eq!(
        line,
        "s/wf2q/sim latency.a-rpc.count: traffic a-rpc silent: no request answered, 500 in the baseline: REGRESSED; if that is intended, name it with --expect-missing a-rpc"
    );
    assert!(!text.contains("in the baseline only"), "{text}");

    let compared = against_baseline(&new, &old, &Thresholds::default(), &names(&["a-rpc"]));
    assert!(!compared.regressed(), "{:?}", compared.regressions);
    assert!(compared.runs[0].missing[0].expected);
    assert!(
        compared
            .table(true)
            .contains("- s/wf2q/sim latency.a-rpc.count: traffic a-rpc silent: no request answered, 500 in the baseline: expected (--expect-missing a-rpc)")
    );
}

#[test]
fn a_traffic_tenant_or_app_the_baseline_had_regresses_when_missing_or_silent() {
    let temp = Temp::new("missing");
    let (old, new) = old_and_new(&temp, |new| {
        new["latency"] = json!({});
        new["pacing"].as_object_mut().unwrap().remove("a-rpc");
        new["pacing"]["b-bulk"]["samples"] = json!(0);
        new["tenants"][0]["apps"][1]["throughput_bps"] = json!(0.0);
        new["tenants"][1]["apps"] = json!([]);
    });
    let compared = against_baseline(&new, &old, &Thresholds::default(), &[]);
    let missing: Vec<(&str, MissingKind, Absence, &str)> = compared.runs[0]
        .missing
        .iter()
        .map(|m| (m.name.as_str(), m.what, m.how, m.figure.as_str()))
        .collect();
    assert_eq!(
        missing,
        [
            (
                "a/kv",
                MissingKind::App,
                Absence::Silent,
                "tenants.a.apps.kv.throughput_bps"
            ),
            (
                "b/default",
                MissingKind::App,
                Absence::Missing,
                "tenants.b.apps.default"
            ),
            (
                "a-rpc",
                MissingKind::Traffic,
                Absence::Missing,
                "latency.a-rpc"
            ),
            (
                "b-bulk",
                MissingKind::Traffic,
                Absence::Silent,
                "pacing.b-bulk.samples"
            ),
        ]
    );
    for m in &compared.runs[0].missing {
        let named = format!("s/wf2q/sim {}", m.figure);
        assert!(compared.regressions.contains(&named), "{named}");
    }
    // A tenant's name covers its apps; a traffic is named on its own.
    let compared = against_baseline(
        &new,
        &old,
        &Thresholds::default(),
        &names(&["a/kv", "b", "a-rpc", "b-bulk", "nothing"]),
    );
    assert!(!compared.regressed(), "{:?}", compared.regressions);
    let text = compared.table(false);
    assert!(
        text.contains("--expect-missing nothing: no run, tenant, app or traffic of that name is missing or silent"),
        "{text}"
    );

    let (old, new) = old_and_new(&Temp::new("tenant"), |new| {
        new["tenants"].as_array_mut().unwrap().remove(1);
    });
    let compared = against_baseline(&new, &old, &Thresholds::default(), &[]);
    assert!(
        compared
            .regressions
            .contains(&"s/wf2q/sim tenants.b".to_string()),
        "{:?}",
        compared.regressions
    );
    let (old, new) = old_and_new(&Temp::new("silent-tenant"), |new| {
        new["tenants"][1]["throughput_bps"] = json!(0.0);
        new["tenants"][1]["apps"][0]["throughput_bps"] = json!(0.0);
    });
    // A tenant with no ideal would be judged better for getting nothing: its
    // silence regresses whatever the thresholds.
    let loose = {
        let mut thresholds = Thresholds::default();
        thresholds.apply("1000").unwrap();
        thresholds
    };
    let compared = against_baseline(&new, &old, &loose, &[]);
    assert_eq!(
        compared.regressions,
        ["s/wf2q/sim tenants.b.throughput_bps"]
    );
}

#[test]
fn a_baseline_run_missing_from_the_results_regresses_unless_expected() {
    let temp = Temp::new("run");
    let old = committed(&temp.0.join("old"), &[summary("wf2q"), summary("hash")]);
    let new = committed(&temp.0.join("new"), &[summary("wf2q")]);
    let compared = against_baseline(&new, &old, &Thresholds::default(), &[]);
    assert_eq!(compared.regressions, ["s/hash/sim"]);
    assert!(
        compared.table(false).contains(
            "s/hash/sim: in the baseline only, not among the results: REGRESSED; if that is intended, name it with --expect-missing s/hash/sim"
        )
    );
    let compared = against_baseline(&new, &old, &Thresholds::default(), &names(&["s/hash/sim"]));
    assert!(!compared.regressed(), "{:?}", compared.regressions);
    assert!(compared.only_in_baseline[0].expected);
}

#[test]
fn drops_that_would_wrap_saturate_and_regress() {
    let temp = Temp::new("wrap");
    let (old, new) = old_and_new(&temp, |new| {
        new["tenants"][0]["drops"] = json!(u64::MAX);
        new["tenants"][1]["drops"] = json!(1);
    });
    assert_eq!(new[0].drops(), u64::MAX);
    let compared = against_baseline(&new, &old, &Thresholds::default(), &[]);
    assert_eq!(compared.regressions, ["s/wf2q/sim drops"]);
}

#[test]
fn figures_as_large_as_json_holds_print_in_a_bounded_width() {
    let temp = Temp::new("huge");
    let (old, new) = old_and_new(&temp, |new| {
        new["utilization"] = json!(1e308);
        new["fairness"]["jain_mean"] = json!(-1e308);
        new["tenants"][0]["throughput_bps"] = json!(1.7e308);
        new["latency"]["a-rpc"]["p99_us"] = json!(1e308);
    });
    let compared = against_baseline(&new, &old, &Thresholds::default(), &[]);
    for markdown in [false, true] {
        let text = compared.table(markdown);
        let widest = text.lines().map(str::len).max().unwrap();
        assert!(widest < 400, "{widest}: {text}");
        assert!(
            text.contains("1.000e308") && text.contains("-1.000e308"),
            "{text}"
        );
    }
    let side = report::side_by_side(&new, false);
    assert!(
        side.contains("1.000e308") && side.lines().all(|l| l.len() < 200),
        "{side}"
    );
    let table = report::comparison_table(&new);
    assert!(
        table.contains("1.000e308") && !table.contains("00000000000000000000"),
        "{table}"
    );
}

#[test]
fn a_figure_that_cannot_be_judged_regresses() {
    let temp = Temp::new("nan");
    // Both a tenant's throughput and its ideal at the top of f64: the distance
    // from the ideal is inf in both, and inf − inf is NaN.
    let huge = |run: &mut Value| {
        run["tenants"][0]["throughput_bps"] = json!(f64::MAX);
        run["tenants"][0]["ideal_bps"] = json!(f64::MIN_POSITIVE);
    };
    let old = {
        let mut old = summary("wf2q");
        huge(&mut old);
        committed(&temp.0.join("old"), &[old])
    };
    let new = {
        let mut new = summary("wf2q");
        huge(&mut new);
        committed(&temp.0.join("new"), &[new])
    };
    let compared = against_baseline(&new, &old, &Thresholds::default(), &[]);
    let figure = compared.runs[0]
        .figures
        .iter()
        .find(|f| f.figure == "tenants.a.throughput_bps")
        .unwrap();
    assert!(figure.worse_by.is_nan());
    assert!(figure.regressed);
}
