//! The command line as a user meets it: exit statuses, error lines, files written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nicsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

fn shipped(name: &str) -> String {
    format!("../../scenarios/tonic/{name}")
}

/// A scratch directory removed when dropped, even when the test fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("nicsched-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn check_explains_tonic_pools_and_the_share_error() {
    let out = nicsched(&[
        "check",
        &shipped("policy-weighted-case1.yaml"),
        "--enforcer",
        "tonic",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("t3 (weight 3) -> 3 queue(s) 3..5"), "{text}");
    assert!(
        text.contains("share error with every tenant backlogged: 0.00%"),
        "{text}"
    );

    let scratch = Scratch::new("check");
    let policy = scratch.file(
        "tight.yaml",
        "link: { rate: 10Gbit, queues: 6 }\ntenants:\n  - { name: a, weight: 2 }\n  - { name: b, weight: 3 }\n  - { name: c, weight: 5 }\n",
    );
    let out = nicsched(&["check", &policy, "-e", "tonic"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cannot express the weights exactly"),
        "{text}"
    );
    assert!(text.contains("16.67%"), "{text}");
}

#[test]
fn check_names_prioritised_apps() {
    let out = nicsched(&[
        "check",
        &shipped("policy-prio.yaml"),
        "-e",
        "tonic",
        "-e",
        "tonic-band",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("t2: apps probe, kvs prioritised, inserted at the head"),
        "{text}"
    );
    assert!(text.contains("priority band"), "{text}");
}

#[test]
fn a_bad_policy_is_one_line_with_its_position_and_status_2() {
    let scratch = Scratch::new("bad");
    let cases = [
        (
            "unknown-key.yaml",
            "link:\n  rate: 1Gbit\n  speed: 2\ntenants:\n  - name: a\n",
            ":3:3: error:",
        ),
        (
            "weight.yaml",
            "link:\n  rate: 1Gbit\ntenants:\n  - name: a\n    weight: 0\n",
            ":5:13: error:",
        ),
        ("empty.yaml", "", ":1:1: error:"),
        ("not-yaml.yaml", "link: [\n", ": error:"),
    ];
    for (name, text, position) in cases {
        let path = scratch.file(name, text);
        let out = nicsched(&["check", &path]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(stderr.starts_with(&path), "{name}: {stderr}");
        assert!(stderr.contains(position), "{name}: {stderr}");
    }
}

#[test]
fn explain_prints_the_tree_and_the_ideal() {
    let out = nicsched(&[
        "explain",
        &shipped("policy-weighted-case1.yaml"),
        "--active",
        "t1,t3",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2.5Gbit"), "{text}");
    assert!(text.contains("7.5Gbit"), "{text}");
    let out = nicsched(&[
        "explain",
        &shipped("policy-weighted-case1.yaml"),
        "--active",
        "nobody",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sim_writes_every_result_file_and_a_table() {
    let scratch = Scratch::new("sim");
    let scenario = scratch.file(
        "short.yaml",
        "name: short\npolicy:\n  link: { rate: 1Gbit, queues: 4 }\n  tenants:\n    - { name: a, cores: [0, 1] }\n    - { name: b, cores: [2, 3] }\nduration: 200ms\ninterval: 50ms\nenforcers: [hash, tonic]\ntraffic:\n  - { tenant: a, kind: bulk, flows: 2 }\n  - { tenant: b, kind: rpc, response: 2KiB }\n",
    );
    let out_dir = scratch.0.join("out");
    let out = nicsched(&["sim", &scenario, "--out", out_dir.to_str().unwrap(), "-q"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("jain_mean") && table.contains("tonic"),
        "{table}"
    );
    for enforcer in ["hash", "tonic"] {
        for file in [
            "summary.json",
            "timeseries.csv",
            "latency.csv",
            "throughput.png",
            "fairness.png",
            "latency_cdf.png",
        ] {
            assert!(
                Path::new(&out_dir).join(enforcer).join(file).is_file(),
                "{enforcer}/{file}"
            );
        }
    }
    assert!(out_dir.join("report.html").is_file());

    let out = nicsched(&[
        "sim",
        &scenario,
        "-e",
        "nope",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown enforcer `nope`"));

    // The runs side by side, as aligned text and as Markdown, from the results folder
    // and from one run's folder; a folder without results is an input error.
    let hash_run = out_dir.join("hash");
    let out = nicsched(&[
        "compare",
        out_dir.to_str().unwrap(),
        hash_run.to_str().unwrap(),
        "--markdown",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let markdown = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = markdown
        .lines()
        .filter(|l| l.starts_with("| short |"))
        .collect();
    assert_eq!(rows.len(), 3, "{markdown}");
    assert!(rows[0].starts_with("| short | hash | sim |"), "{markdown}");
    assert!(
        markdown
            .lines()
            .next()
            .unwrap()
            .contains("| a Mbit/s | b Mbit/s |")
    );
    let out = nicsched(&["compare", scratch.0.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no summary.json"));
}

#[test]
fn lab_bench_teaches_its_table_and_refuses_bad_input_before_building() {
    let help = nicsched(&["lab-bench", "--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in ["vs kernel", "offered kframes/s", "--rounds", "linux-htb"] {
        assert!(text.contains(needle), "help lacks {needle}: {text}");
    }
    // Refused (as root: the bad size; otherwise: root) with status 2, nothing built.
    for args in [
        &["lab-bench", "--size", "0"][..],
        &["lab-bench", "-e", "nope", "--seconds", "0.1"][..],
    ] {
        let out = nicsched(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let error = String::from_utf8_lossy(&out.stderr);
        assert!(
            error.contains("needs root")
                || error.contains("--size")
                || error.contains("unknown enforcer"),
            "{args:?}: {error}"
        );
    }
}

#[test]
fn lab_teaches_its_qdisc_limits_and_refuses_an_empty_one() {
    let help = nicsched(&["lab", "--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "--queue-limit",
        "[default: 64]",
        "--class-limit",
        "[default: 128]",
    ] {
        assert!(text.contains(needle), "help lacks {needle}: {text}");
    }
    for flag in ["--queue-limit", "--class-limit", "--tenant-limit"] {
        let scenario = shipped("asymmetry-1-8.yaml");
        let out = nicsched(&["lab", &scenario, flag, "0"]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let error = String::from_utf8_lossy(&out.stderr);
        // The old name is an alias: the error names the option by its name.
        let named = flag.replace("tenant", "class");
        assert!(
            error.contains(&named) && error.contains("0"),
            "{flag}: {error}"
        );
    }
}
