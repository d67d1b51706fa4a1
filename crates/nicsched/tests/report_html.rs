//! report.html in a real browser: headless Chromium opens the page a run wrote, and
//! the one `nicsched report` overlays runs on, at 1280 and 1920 px wide. A page
//! fails on horizontal overflow, a JavaScript error (the page's own record of
//! them, and Chromium's console), or a chart that did not draw: each must hold a
//! canvas of non-zero size, with its series (every run, and the ideal on the
//! throughput charts), coloured by the runs' lines. Screenshots are left under
//! the test's target folder (report-shots/) for people to look at.

// Each test binary uses the helpers it needs, not all of them.
#[allow(dead_code)]
mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::Scratch;
use serde_json::Value;

fn nicsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args(args)
        .output()
        .unwrap()
}

fn succeeded(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

const CHROMIUM: &str = "chromium";

/// Whether Chromium is here; in CI (`CI` set) its absence fails the test.
fn chromium_runnable(test: &str) -> bool {
    if Command::new(CHROMIUM).arg("--version").output().is_ok() {
        return true;
    }
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    let why = format!("`{CHROMIUM}` is missing (scripts/setup-report.sh installs it)");
    assert!(!in_ci, "{test}: {why}; CI must run every browser test");
    eprintln!("skipping {test}: {why}");
    false
}

/// Opens `page` in headless Chromium `width` px wide and returns the status the
/// page leaves in #page-status, with Chromium's console errors under `console`.
/// Leaves a screenshot of the page's top as `shot`.
fn open(page: &Path, width: u32, scratch: &Path, shot: &Path) -> Value {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let chromium = |profile: &str, extra: &[String]| {
        // A profile of its own: tests run in parallel, and two browsers on one
        // profile wait for each other's lock.
        let mut command = Command::new(CHROMIUM);
        command.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--virtual-time-budget=10000",
            &format!("--user-data-dir={}", scratch.join(profile).display()),
        ]);
        command.args(extra).arg(&url);
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "chromium: {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        output
    };
    let dumped = chromium(
        &format!("dump-{width}"),
        &[
            format!("--window-size={width},900"),
            "--enable-logging=stderr".into(),
            "--v=0".into(),
            "--dump-dom".into(),
        ],
    );
    fs::create_dir_all(shot.parent().unwrap()).unwrap();
    chromium(
        &format!("shot-{width}"),
        &[
            format!("--window-size={width},2400"),
            "--hide-scrollbars".into(),
            format!("--screenshot={}", shot.display()),
        ],
    );
    eprintln!("screenshot: {}", shot.display());

    let dom = String::from_utf8(dumped.stdout).unwrap();
    let start = dom
        .find("id=\"page-status\"")
        .unwrap_or_else(|| panic!("{}: no #page-status in the DOM", page.display()));
    let text = &dom[start..];
    let text = &text[text.find('>').unwrap() + 1..text.find("</pre>").unwrap()];
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    assert!(
        !text.is_empty(),
        "{}: the page's script did not finish (its status is empty)",
        page.display()
    );
    let mut status: Value = serde_json::from_str(&text).unwrap();
    let console: Vec<String> = String::from_utf8_lossy(&dumped.stderr)
        .lines()
        // The page logs nothing; Chromium logs its console, uncaught errors too.
        .filter(|line| line.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    status["console"] = console.into();
    status
}

/// The page at `width` has no error, no overflow, and every chart drew its
/// series; returns the charts by title with their series' labels.
fn assert_draws(page: &Path, width: u32, scratch: &Path, name: &str) -> Vec<(String, Vec<String>)> {
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("report-shots")
        .join(format!("{name}-{width}.png"));
    let status = open(page, width, scratch, &shot);
    let at = format!("{} at {width} px", page.display());
    assert_eq!(
        status["errors"],
        Value::Array(vec![]),
        "{at}: JavaScript errors"
    );
    assert_eq!(
        status["console"],
        Value::Array(vec![]),
        "{at}: console errors"
    );
    let (scroll, client) = (
        status["scroll_width"].as_u64().unwrap(),
        status["client_width"].as_u64().unwrap(),
    );
    assert!(
        scroll <= client,
        "{at}: the page overflows sideways: {scroll} px wide in a {client} px window"
    );
    let charts = status["charts"].as_array().unwrap();
    assert!(!charts.is_empty(), "{at}: no charts");
    charts
        .iter()
        .map(|chart| {
            let title = chart["title"].as_str().unwrap().to_string();
            let labels: Vec<String> = chart["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_string())
                .collect();
            assert!(
                chart["width"].as_u64().unwrap() > 0 && chart["height"].as_u64().unwrap() > 0,
                "{at}: chart {title} has no canvas: {chart}"
            );
            assert_eq!(
                labels.len() as u64,
                chart["expected"].as_u64().unwrap(),
                "{at}: chart {title} drew other series than it was given"
            );
            assert!(
                chart["coloured"].as_u64().unwrap() > 0,
                "{at}: chart {title} drew no run's line"
            );
            (title, labels)
        })
        .collect()
}

fn is_throughput(title: &str) -> bool {
    ["tenant ", "app ", "VM ", "flow "]
        .iter()
        .any(|kind| title.starts_with(kind))
}

/// Every throughput chart holds every run in `runs` and one ideal.
fn assert_every_run_and_the_ideal(charts: &[(String, Vec<String>)], runs: &[&str]) {
    let throughput: Vec<_> = charts.iter().filter(|(t, _)| is_throughput(t)).collect();
    assert!(!throughput.is_empty());
    for (title, labels) in throughput {
        for run in runs {
            assert!(
                labels.iter().any(|l| l == run),
                "{title}: no {run} in {labels:?}"
            );
        }
        assert_eq!(
            labels.iter().filter(|l| l.starts_with("ideal")).count(),
            1,
            "{title}: {labels:?}"
        );
    }
}

#[test]
fn five_enforcers_of_a_sim_run_draw_in_chromium_without_overflow() {
    if !chromium_runnable("five_enforcers_of_a_sim_run_draw_in_chromium_without_overflow") {
        return;
    }
    let scratch = Scratch::new("report-five");
    let out = scratch.0.join("borrowing");
    let enforcers = ["tonic", "wf2q", "valve", "htb", "fairnic"];
    let mut args = vec!["sim", "scenarios/flowvalve/borrowing.yaml", "-q", "--out"];
    let out_arg = out.to_str().unwrap();
    args.push(out_arg);
    for e in &enforcers {
        args.extend(["-e", e]);
    }
    let run = Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(&args)
        .output()
        .unwrap();
    succeeded(&run, "nicsched sim");
    let page = out.join("report.html");
    let runs: Vec<String> = enforcers.iter().map(|e| format!("sim/{e}")).collect();
    let runs: Vec<&str> = runs.iter().map(String::as_str).collect();
    for width in [1280, 1920] {
        let charts = assert_draws(&page, width, &scratch.0, "borrowing");
        let titles: Vec<&str> = charts.iter().map(|(t, _)| t.as_str()).collect();
        // Three tenants, vm1's two apps, Jain's index and relative error.
        assert_eq!(
            titles,
            [
                "tenant controller",
                "tenant vm1",
                "tenant vm2",
                "app vm1/kvs",
                "app vm1/ml",
                "Jain's index of throughput / ideal, every run",
                "mean relative error against the ideal, every run",
            ]
        );
        assert_every_run_and_the_ideal(&charts, &runs);
        for (title, labels) in &charts[5..] {
            assert_eq!(labels, &runs, "{title}");
        }
    }
    // The overlay PNGs beside the page, for papers, are linked from it.
    let html = std::fs::read_to_string(&page).unwrap();
    for png in ["overlay_throughput.png", "overlay_fairness.png"] {
        assert!(out.join(png).is_file(), "{png}");
        assert!(
            html.contains(&format!("href=\"{png}\"")),
            "{png} not linked"
        );
    }
}

/// A lab run's folder made from a sim run's, as the lab would have written it on
/// a link `factor` times slower: mode `lab`, rates divided, committed with its
/// marker so that `nicsched report` takes it as complete.
fn fabricate_lab_run(sim: &Path, lab: &Path, enforcer: &str, factor: f64) {
    let out = report::OutDir::claim(lab, &[]).unwrap();
    let (from, to) = (sim.join(enforcer), out.staging().join(enforcer));
    fs::create_dir_all(&to).unwrap();
    let mut summary: Value =
        serde_json::from_str(&fs::read_to_string(from.join("summary.json")).unwrap()).unwrap();
    let link_rate_bps = (summary["link_rate_bps"].as_f64().unwrap() / factor) as u64;
    summary["mode"] = "lab".into();
    summary["link_rate_bps"] = link_rate_bps.into();
    summary["provenance"]["settings"] =
        serde_json::json!({ "link_rate_bps": link_rate_bps.to_string() });
    fs::write(to.join("summary.json"), summary.to_string()).unwrap();
    let timeseries = fs::read_to_string(from.join("timeseries.csv")).unwrap();
    let mut lines = timeseries.lines();
    let mut scaled = format!("{}\n", lines.next().unwrap());
    for line in lines {
        let mut fields: Vec<String> = line.split(',').map(str::to_string).collect();
        for field in &mut fields[3..] {
            *field = (field.parse::<f64>().unwrap() / factor).to_string();
        }
        scaled += &(fields.join(",") + "\n");
    }
    fs::write(to.join("timeseries.csv"), scaled).unwrap();
    fs::copy(from.join("latency.csv"), to.join("latency.csv")).unwrap();
    out.commit(&report::Provenance::default()).unwrap();
}

/// The figures `chart` of a page carries, by series label.
fn chart_values(page: &Path, title: &str) -> Vec<(String, Vec<Option<f64>>)> {
    let html = fs::read_to_string(page).unwrap();
    let start = html.find("id=\"report-data\">").unwrap() + "id=\"report-data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    let data: Value = serde_json::from_str(&html[start..end]).unwrap();
    let chart = data["charts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["title"] == title)
        .unwrap_or_else(|| panic!("no chart {title}"));
    chart["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let values = s["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(Value::as_f64)
                .collect();
            (s["label"].as_str().unwrap().to_string(), values)
        })
        .collect()
}

#[test]
fn a_sim_run_and_a_lab_run_overlay_on_one_page_scaled_to_one_link() {
    if !chromium_runnable("a_sim_run_and_a_lab_run_overlay_on_one_page_scaled_to_one_link") {
        return;
    }
    let scratch = Scratch::new("report-overlay");
    let sim = scratch.0.join("sim");
    let lab = scratch.0.join("lab");
    let run = Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args([
            "sim",
            "scenarios/tonic/prio-sockperf.yaml",
            "-q",
            "-e",
            "tonic",
            "-e",
            "wf2q",
        ])
        .arg("--out")
        .arg(&sim)
        .output()
        .unwrap();
    succeeded(&run, "nicsched sim");
    fabricate_lab_run(&sim, &lab, "tonic", 10.0);

    let page = scratch.0.join("pages").join("sim-vs-lab.html");
    let report = nicsched(&[
        "report",
        sim.to_str().unwrap(),
        lab.to_str().unwrap(),
        "--out",
        page.to_str().unwrap(),
    ]);
    succeeded(&report, "nicsched report");
    let html = fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("lab/tonic ran on a 1Gbit link, drawn ×10"),
        "the page says how the lab run is scaled"
    );
    assert!(html.contains("<a href=\"../lab/tonic/timeseries.csv\">"));
    assert!(html.contains("<a href=\"../sim/wf2q/summary.json\">"));
    // Scaled back to the sim's link, the lab run made from it is the sim run.
    let values = chart_values(&page, "tenant t2");
    let labels: Vec<&str> = values.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(labels, ["sim/tonic", "sim/wf2q", "lab/tonic", "ideal"]);
    for (sim, lab) in values[0].1.iter().zip(&values[2].1) {
        match (sim, lab) {
            (Some(sim), Some(lab)) => assert!((sim - lab).abs() <= 1e-9 * sim.abs()),
            _ => assert_eq!(sim, lab),
        }
    }
    for width in [1280, 1920] {
        let charts = assert_draws(&page, width, &scratch.0, "sim-vs-lab");
        assert_every_run_and_the_ideal(&charts, &["sim/tonic", "sim/wf2q", "lab/tonic"]);
        let latency = charts
            .iter()
            .find(|(t, _)| t == "latency of t2-sockperf")
            .expect("a latency CDF");
        assert_eq!(latency.1, ["sim/tonic", "sim/wf2q", "lab/tonic"]);
    }
}

#[test]
fn a_run_across_hosts_writes_a_report_per_flow() {
    let scratch = Scratch::new("report-hosts");
    let out = scratch.0.join("fig7c");
    let run = Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args([
            "sim",
            "scenarios/picnic/fig7c.yaml",
            "-q",
            "-e",
            "picnic",
            "-e",
            "wheel",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    succeeded(&run, "nicsched sim");
    let page = out.join("report.html");
    let flows = [
        "flow probe-idle",
        "flow f-ac",
        "flow f-bd",
        "flow probe",
        "VM h2/e",
    ];
    let html = fs::read_to_string(&page).unwrap();
    for flow in flows {
        assert!(
            html.contains(&format!("<figcaption>{flow}</figcaption>")),
            "no chart {flow}"
        );
    }
    // The PNG overlay of every flow, for papers, beside the page and linked from it.
    let png = page.with_file_name("overlay_throughput.png");
    let bytes = fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is no PNG",
        png.display()
    );
    assert!(html.contains("href=\"overlay_throughput.png\""));
    if !chromium_runnable("a_run_across_hosts_writes_a_report_per_flow") {
        return;
    }
    let charts = assert_draws(&page, 1280, &scratch.0, "fig7c");
    let titles: Vec<&str> = charts.iter().map(|(t, _)| t.as_str()).collect();
    for flow in flows {
        assert!(titles.contains(&flow), "no chart {flow} in {titles:?}");
    }
    assert_every_run_and_the_ideal(&charts, &["sim/picnic", "sim/wheel"]);
}

#[test]
fn report_refuses_a_page_inside_a_run_a_folder_as_page_and_several_runs_without_out() {
    let scratch = Scratch::new("report-refusals");
    let sim = scratch.0.join("sim");
    let run = Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args([
            "sim",
            "scenarios/tonic/prio-sockperf.yaml",
            "-q",
            "-e",
            "tonic",
        ])
        .arg("--out")
        .arg(&sim)
        .output()
        .unwrap();
    succeeded(&run, "nicsched sim");
    let sim_arg = sim.to_str().unwrap();
    let inside = format!("{sim_arg}/tonic/page.html");
    let folder = scratch.0.to_str().unwrap();
    let refusals = [
        (
            vec!["report", sim_arg, sim_arg],
            "give --out FILE for the page of several results folders".to_string(),
        ),
        (
            vec!["report", sim_arg, "--out", &inside],
            format!(
                "inside the run folder {}",
                sim.canonicalize().unwrap().display()
            ),
        ),
        (
            vec!["report", sim_arg, "--out", folder],
            format!("--out {folder}: a folder; give the page's file name"),
        ),
    ];
    for (args, said) in &refusals {
        let output = nicsched(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said.as_str()), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
    // One folder: the page goes beside it, and the run stays complete.
    let output = nicsched(&["report", &format!("{sim_arg}/tonic")]);
    succeeded(&output, "nicsched report");
    assert!(scratch.0.join("sim.html").is_file());
    succeeded(&nicsched(&["compare", sim_arg]), "compare after report");
    // An incomplete run is refused as compare refuses it.
    fs::remove_file(sim.join("tonic").join("latency.csv")).unwrap();
    let output = nicsched(&["report", sim_arg]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("an incomplete nicsched run"));
}
