//! `nicsched sweep`: a grid of a shipped scenario runs, writes its table, CSV,
//! JSON and plots, and each point's figures are those `nicsched sim` gives for the
//! same scenario, value and seed (the same code path, so the same numbers).

#[allow(
    dead_code,
    reason = "only its scratch folder: a sweep needs neither root nor programs"
)]
mod common;

use common::Scratch;
use std::path::Path;
use std::process::{Command, Output};

fn nicsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

const BORROWING: &str = "../../scenarios/flowvalve/borrowing.yaml";

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_sweep_runs_its_grid_and_each_point_is_what_sim_gives() {
    let scratch = Scratch::new("sweep-grid");
    let out = scratch.0.join("sweep");
    let run = nicsched(&[
        "sweep",
        BORROWING,
        "--set",
        "policy.tenants.vm2.weight=1,2,4",
        "--seeds",
        "1..3",
        "-e",
        "valve",
        "-e",
        "wf2q",
        "-j",
        "2",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let table = String::from_utf8_lossy(&run.stdout);
    // A header, a rule, and a row per weight and enforcer.
    assert!(
        table.starts_with("policy.tenants.vm2.weight  enforcer"),
        "{table}"
    );
    assert_eq!(
        table.lines().filter(|l| l.contains(" ±")).count(),
        3 * 2,
        "{table}"
    );

    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let mut rows = csv.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    assert_eq!(
        header[..3],
        ["policy.tenants.vm2.weight", "seed", "enforcer"]
    );
    for column in ["jain_mean", "rel_error_max", "share.vm2", "checks_failed"] {
        assert!(header.contains(&column), "{column} in {header:?}");
    }
    assert_eq!(
        rows.count(),
        3 * 3 * 2,
        "a row per value, seed and enforcer"
    );

    let sweep = json(&out.join("sweep.json"));
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 18);
    for figure in [
        "jain_mean",
        "rel_error_mean",
        "utilization",
        "share_vm1",
        "share_vm2",
    ] {
        let png = out.join(format!("{figure}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{figure}");
    }
    // The controller gets its ideal whatever vm2's weight, in both enforcers: a
    // figure that does not vary over the grid is not plotted.
    assert!(!out.join("share_controller.png").exists());

    // The oracle: the scenario written with vm2's weight at 4, simulated with seed 2.
    let policy = std::fs::read_to_string("../../scenarios/flowvalve/policy.yaml").unwrap();
    let vm2 = policy
        .find("  - name: vm2\n    weight: 2\n")
        .expect("vm2 of weight 2");
    let policy = format!(
        "{}  - name: vm2\n    weight: 4\n{}",
        &policy[..vm2],
        &policy[vm2 + "  - name: vm2\n    weight: 2\n".len()..]
    );
    scratch.file("policy.yaml", &policy);
    let scenario = scratch.file(
        "borrowing.yaml",
        &std::fs::read_to_string(BORROWING).unwrap(),
    );
    let sim_out = scratch.0.join("sim");
    let sim = nicsched(&[
        "sim",
        &scenario,
        "--seed",
        "2",
        "-e",
        "wf2q",
        "-q",
        "--out",
        sim_out.to_str().unwrap(),
    ]);
    assert_eq!(
        sim.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let expected = json(&sim_out.join("wf2q/summary.json"));
    let point = points
        .iter()
        .find(|p| {
            p["values"]["policy.tenants.vm2.weight"] == "4"
                && p["seed"] == 2
                && p["enforcer"] == "wf2q"
        })
        .expect("the point of weight 4, seed 2, wf2q");
    assert_eq!(point["utilization"], expected["utilization"]);
    for figure in ["jain_mean", "jain_min", "rel_error_mean", "rel_error_max"] {
        assert_eq!(
            point["fairness"][figure], expected["fairness"][figure],
            "{figure}"
        );
    }
    let tenants = expected["tenants"].as_array().unwrap();
    assert_eq!(point["tenants"].as_array().unwrap().len(), tenants.len());
    for (got, tenant) in point["tenants"].as_array().unwrap().iter().zip(tenants) {
        for figure in ["name", "throughput_bps", "ideal_bps"] {
            assert_eq!(got[figure], tenant[figure], "{figure}");
        }
    }
    assert_eq!(point["checks_failed"], serde_json::json!([]));
    // The weight changed the ideal: the grid is not one scenario run nine times.
    let ideal_of_vm2 = |weight: &str| {
        points
            .iter()
            .find(|p| p["values"]["policy.tenants.vm2.weight"] == weight)
            .unwrap()["tenants"][2]["ideal_bps"]
            .as_f64()
            .unwrap()
    };
    assert!(ideal_of_vm2("1") < ideal_of_vm2("4"));
}

#[test]
fn a_key_the_scenario_does_not_have_is_refused_before_anything_runs() {
    let scratch = Scratch::new("sweep-bad-key");
    let out = scratch.0.join("sweep");
    for (set, says) in [
        ("policy.tenants.vm3.weight=1,2", "has no entry named `vm3`"),
        ("polcy.link.rate=1Gbit", "has no `polcy`"),
        ("policy.tenants.vm2.wieght=3", "unknown key `wieght`"),
        ("policy.link.rate=10Gbit,fast", "`fast` is not a rate"),
    ] {
        let run = nicsched(&[
            "sweep",
            BORROWING,
            "--set",
            set,
            "-q",
            "--out",
            out.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{set}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains("--set"),
            "{set}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(!out.exists(), "{set}: nothing is written");
    }
}

/// The test binary is built with the simulator's faults (Cargo.toml): with one
/// of them every run fails its conservation check, and the sweep says so.
#[test]
fn a_run_whose_checks_fail_is_flagged_and_the_sweep_exits_3() {
    let scratch = Scratch::new("sweep-checks");
    let out = scratch.0.join("sweep");
    let run = Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args([
            "sweep",
            BORROWING,
            "--set",
            "policy.tenants.vm2.weight=1,2",
            "-e",
            "valve",
            "-q",
            "--out",
            out.to_str().unwrap(),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NICSCHED_FAULT", "lose-packets")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("self-checks failed"), "{stderr}");
    let table = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        table.lines().filter(|l| l.ends_with("FAILED 1/1")).count(),
        2,
        "{table}"
    );
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert!(row.ends_with("conservation"), "{row}");
    }
}

fn refused(args: &[&str], out: &Path) -> String {
    let run = nicsched(args);
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(!out.exists(), "{args:?}: nothing is written");
    stderr
}

/// `traffic.1` and `traffic.vm1-kvs-before` are one entry of borrowing.yaml: two
/// --set on it would label rows with values the other one overwrote.
#[test]
fn an_index_and_a_name_of_one_entry_are_one_key() {
    let scratch = Scratch::new("sweep-one-entry");
    let out = scratch.0.join("sweep");
    let out_arg = out.to_str().unwrap();
    for (first, second, says) in [
        (
            "traffic.1.flows=1,2",
            "traffic.vm1-kvs-before.flows=3",
            "reaches the same value as `--set traffic.1.flows` (`traffic.1.flows`)",
        ),
        (
            "policy.tenants.2.weight=1,2",
            "policy.tenants.vm2.weight=4",
            "reaches the same value as `--set policy.tenants.2.weight`",
        ),
        (
            "traffic.1={tenant: vm1, kind: bulk}",
            "traffic.vm1-kvs-before.flows=3",
            "one inside the other",
        ),
    ] {
        let stderr = refused(
            &[
                "sweep", BORROWING, "--set", first, "--set", second, "-q", "--out", out_arg,
            ],
            &out,
        );
        assert!(stderr.contains(says), "{first} {second}: {stderr}");
    }
}

#[test]
fn a_key_no_run_takes_is_refused_saying_why() {
    let scratch = Scratch::new("sweep-no-op");
    let out = scratch.0.join("sweep");
    let out_arg = out.to_str().unwrap();
    let stderr = refused(
        &[
            "sweep",
            BORROWING,
            "--set",
            "enforcers.0=valve,wf2q",
            "-q",
            "--out",
            out_arg,
        ],
        &out,
    );
    assert!(stderr.contains("sweep them with -e NAME"), "{stderr}");

    // The scenario's own `link:` overrides the policy's.
    let overriding = std::fs::read_to_string(BORROWING).unwrap().replace(
        "policy: policy.yaml",
        "policy: policy.yaml\nlink: { rate: 5Gbit }",
    );
    std::fs::copy(
        "../../scenarios/flowvalve/policy.yaml",
        scratch.0.join("policy.yaml"),
    )
    .unwrap();
    let scenario = scratch.file("overriding.yaml", &overriding);
    let stderr = refused(
        &[
            "sweep",
            &scenario,
            "--set",
            "policy.link.rate=4Gbit,8Gbit",
            "-q",
            "--out",
            out_arg,
        ],
        &out,
    );
    assert!(stderr.contains("set `link.rate` instead"), "{stderr}");

    // Found by parsing: every value gives the same scenario to run.
    for set in [
        "name=a,b",
        "policy.tenants.vm2.weight=2,2",
        "duration=3s,3000ms",
    ] {
        let stderr = refused(
            &["sweep", BORROWING, "--set", set, "-q", "--out", out_arg],
            &out,
        );
        assert!(
            stderr.contains("no value of this key changes what runs"),
            "{set}: {stderr}"
        );
    }
}

/// Each row ran with its label's value: the controller, capped and first in
/// priority, is given its cap in the ideal, which follows the swept cap.
#[test]
fn each_row_ran_the_value_it_is_labelled_with() {
    let scratch = Scratch::new("sweep-labels");
    let out = scratch.0.join("sweep");
    let run = nicsched(&[
        "sweep",
        BORROWING,
        "--set",
        "policy.tenants.controller.max_rate=500Mbit,2Gbit",
        "-e",
        "wf2q",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let sweep = json(&out.join("sweep.json"));
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (point, cap) in points.iter().zip([500e6, 2e9]) {
        let controller = &point["tenants"][0];
        assert_eq!(controller["name"], "controller");
        assert_eq!(controller["ideal_bps"].as_f64(), Some(cap), "{point}");
    }
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert!(rows[0].starts_with("500Mbit,"), "{}", rows[0]);
    assert!(rows[1].starts_with("2Gbit,"), "{}", rows[1]);
}

/// A value's YAML comment may hold escape sequences; none reaches the terminal.
#[test]
fn control_characters_in_values_are_not_printed_raw() {
    let scratch = Scratch::new("sweep-control");
    let out = scratch.0.join("sweep");
    let out_arg = out.to_str().unwrap();
    let stderr = refused(
        &[
            "sweep",
            BORROWING,
            "--set",
            "policy.tenants.vm2.weight=1 # \x1b[2J\x1b[31mred,2",
            "-q",
            "--out",
            out_arg,
        ],
        &out,
    );
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
    assert!(stderr.contains("\\u{1b}[2J"), "{stderr}");

    // A tab in a comment is YAML, so the setting runs; its label is escaped in
    // the table and kept as given in the CSV.
    let run = nicsched(&[
        "sweep",
        BORROWING,
        "--set",
        "policy.tenants.vm2.weight=1 #\tone,2",
        "-e",
        "wf2q",
        "-q",
        "--out",
        out_arg,
    ]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(!stdout.contains('\t'), "{stdout:?}");
    assert!(stdout.contains("1 #\\tone"), "{stdout}");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert!(csv.contains("\n1 #\tone,"), "{csv}");
}
