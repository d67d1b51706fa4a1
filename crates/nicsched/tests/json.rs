//! `--json`: every command's document validated against its schema in
//! docs/schema (JSON Schema 2020-12), on shipped policies and scenarios, one host
//! and across hosts; the schemas strict enough that a renamed field fails; and
//! `compare --baseline`, whose exit status gates a change on its figures.

mod common;
mod schema;

use common::{Scratch, runnable};
use schema::{SCHEMA_BASE, assert_valid, errors, schemas};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const EXIT_CHECKS_FAILED: i32 = 3;
const EXIT_REGRESSED: i32 = 4;

fn nicsched(args: &[&str]) -> Output {
    nicsched_with(args, &[])
}

fn nicsched_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("the binary runs")
}

/// stdout as the one JSON document it must be.
fn document(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A document of `command` valid against its schema, with `schema_version` 1.
fn validated(schema: &str, args: &[&str]) -> Value {
    let out = nicsched(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = document(&out);
    assert_eq!(json["schema_version"], 1, "{args:?}");
    assert_valid(schema, &json);
    json
}

#[test]
fn every_schema_is_a_draft_2020_12_schema_with_its_file_as_id() {
    let schemas = schemas();
    assert!(schemas.len() >= 12, "{schemas:?}");
    for (file, schema) in &schemas {
        assert!(
            jsonschema::meta::is_valid(schema),
            "{file} is not a valid schema"
        );
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["$id"], format!("{SCHEMA_BASE}{file}"));
    }
}

#[test]
fn check_json_follows_its_schema_for_a_policy_and_a_scenario_across_hosts() {
    let json = validated(
        "check.schema.json",
        &[
            "check",
            "scenarios/tonic/policy-weighted-case1.yaml",
            "-e",
            "all",
            "--json",
        ],
    );
    let names: Vec<&str> = json["enforcers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, lab::enforcer_names());
    let tonic = &json["enforcers"][names.iter().position(|&n| n == "tonic").unwrap()];
    assert_eq!(tonic["share_error_max"], 0.0);
    // The text says the same, from the same values.
    let text = String::from_utf8(
        nicsched(&[
            "check",
            "scenarios/tonic/policy-weighted-case1.yaml",
            "-e",
            "tonic",
        ])
        .stdout,
    )
    .unwrap();
    let exact = tonic["exact"][0].as_str().unwrap();
    assert!(text.contains(&format!("  exact:       {exact}")), "{text}");
    assert_eq!(tonic["bounds"][0]["max"], 0.02);
    assert_eq!(
        tonic["bounds"][0]["condition"],
        "every_tenant_backlogged_on_every_queue"
    );
    assert!(text.contains("  bound:       each tenant: "), "{text}");

    let json = validated(
        "check.schema.json",
        &["check", "scenarios/picnic/fig7b.yaml", "--json"],
    );
    assert_eq!(json["across_hosts"], true);
    assert_eq!(json["hosts"], 3);
}

#[test]
fn check_of_a_bad_policy_prints_no_json_and_its_error_on_stderr() {
    let scratch = Scratch::new("json-bad-policy");
    let bad = scratch.file("bad.yaml", "link: { rate: fast }\ntenants: []\n");
    let out = nicsched(&["check", &bad, "--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with(&bad), "{stderr}");
}

#[test]
fn explain_json_follows_its_schema_for_policies_scenarios_and_hosts() {
    let json = validated(
        "explain.schema.json",
        &[
            "explain",
            "scenarios/tonic/policy-weighted-case1.yaml",
            "--active",
            "t1,t3",
            "--json",
        ],
    );
    let phase = &json["phases"][0];
    assert!(phase["from_s"].is_null());
    let ideal: Vec<f64> = phase["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["ideal_bps"].as_f64().unwrap())
        .collect();
    // t2 idle: t1 and t3 share 10 Gbit/s 1:3.
    assert_eq!(ideal, [2.5e9, 0.0, 7.5e9]);

    let json = validated(
        "explain.schema.json",
        &["explain", "scenarios/tonic/weighted-case1.yaml", "--json"],
    );
    let text =
        String::from_utf8(nicsched(&["explain", "scenarios/tonic/weighted-case1.yaml"]).stdout)
            .unwrap();
    assert_eq!(
        json["phases"].as_array().unwrap().len(),
        text.matches(": ideal allocation").count(),
        "{text}"
    );

    let json = validated(
        "explain.schema.json",
        &["explain", "scenarios/picnic/fig7b.yaml", "--json"],
    );
    let second = &json["phases"][1];
    assert_eq!(second["from_s"], 10.0);
    assert_eq!(second["flows"].as_array().unwrap().len(), 2);
}

#[test]
fn enforcers_json_follows_its_schema() {
    let json = validated("enforcers.schema.json", &["enforcers", "--json"]);
    assert_eq!(
        json["enforcers"].as_array().unwrap().len(),
        lab::enforcer_names().len()
    );
}

/// A short one-host scenario: two tenants, a bulk sender and an rpc.
fn short_scenario(scratch: &Scratch, weight_a: u32) -> String {
    scratch.file(
        &format!("short-{weight_a}.yaml"),
        &format!(
            "name: short\npolicy:\n  link: {{ rate: 1Gbit, queues: 4 }}\n  tenants:\n    - {{ name: a, weight: {weight_a}, cores: [0, 1] }}\n    - {{ name: b, cores: [2, 3] }}\nduration: 200ms\ninterval: 50ms\nenforcers: [hash, wf2q]\ntraffic:\n  - {{ name: a-bulk, tenant: a, kind: bulk, flows: 2 }}\n  - {{ name: b-bulk, tenant: b, kind: bulk, flows: 2 }}\n  - {{ name: b-rpc, tenant: b, kind: rpc, response: 2KiB }}\n"
        ),
    )
}

/// scenarios/picnic/fig7b.yaml with every time a hundredth of the original.
fn short_fig7b(scratch: &Scratch) -> String {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/picnic/fig7b.yaml"
    ))
    .unwrap()
    .replace("duration: 40s", "duration: 400ms")
    .replace("interval: 250ms", "interval: 20ms");
    let text = ["30", "20", "10", "0"].iter().fold(text, |text, s| {
        text.replace(&format!("start: {s}s"), &format!("start: {s}0ms"))
    });
    assert!(!text.contains("0s }"), "{text}");
    scratch.file("fig7b-short.yaml", &text)
}

/// Asserts `runs` are the summary.json files in `results`, in the order run.
fn assert_runs_are_the_summaries(json: &Value, enforcers: &[&str]) {
    let results = Path::new(json["results"].as_str().unwrap());
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), enforcers.len());
    for (run, enforcer) in runs.iter().zip(enforcers) {
        assert_eq!(run["enforcer"], *enforcer);
        let file = results.join(enforcer).join("summary.json");
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(run, &written, "{}", file.display());
    }
}

#[test]
fn sim_json_is_every_summary_one_host_and_across_hosts() {
    let scratch = Scratch::new("json-sim");
    let scenario = short_scenario(&scratch, 1);
    let out_dir = scratch.0.join("one-host");
    let out = nicsched(&[
        "sim",
        &scenario,
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = document(&out);
    assert_valid("sim.schema.json", &json);
    assert_eq!(json["across_hosts"], false);
    assert_eq!(
        json["report"],
        out_dir.join("report.html").to_str().unwrap()
    );
    assert_runs_are_the_summaries(&json, &["hash", "wf2q"]);
    // Progress goes to stderr, so stdout parsed as one document above.
    for run in json["runs"].as_array().unwrap() {
        assert_valid("summary.schema.json", run);
    }

    let scenario = short_fig7b(&scratch);
    let out_dir = scratch.0.join("hosts");
    let out = nicsched(&[
        "sim",
        &scenario,
        "-e",
        "picnic",
        "-e",
        "wheel",
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = document(&out);
    assert_valid("sim.schema.json", &json);
    assert_eq!(json["across_hosts"], true);
    assert_eq!(
        json["report"],
        out_dir.join("report.html").to_str().unwrap()
    );
    assert_runs_are_the_summaries(&json, &["picnic", "wheel"]);
    for run in json["runs"].as_array().unwrap() {
        assert_valid("hosts-summary.schema.json", run);
    }
}

#[test]
fn sim_json_of_a_run_whose_checks_fail_is_printed_and_exits_3() {
    let scratch = Scratch::new("json-sim-fault");
    let scenario = short_scenario(&scratch, 1);
    let out_dir = scratch.0.join("out");
    let out = nicsched_with(
        &[
            "sim",
            &scenario,
            "-e",
            "wf2q",
            "--out",
            out_dir.to_str().unwrap(),
            "--json",
            "-q",
        ],
        &[("NICSCHED_FAULT", "lose-packets")],
    );
    assert_eq!(out.status.code(), Some(EXIT_CHECKS_FAILED));
    let json = document(&out);
    assert_valid("sim.schema.json", &json);
    assert_eq!(json["failed_checks"][0], "wf2q/conservation");
}

#[test]
fn the_schemas_refuse_a_renamed_or_missing_field() {
    let scratch = Scratch::new("json-strict");
    let scenario = short_scenario(&scratch, 1);
    let out_dir = scratch.0.join("out");
    let out = nicsched(&[
        "sim",
        &scenario,
        "-e",
        "wf2q",
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
        "-q",
    ]);
    let json = document(&out);
    assert_valid("sim.schema.json", &json);

    let mut renamed = json.clone();
    let fairness = renamed["runs"][0]["fairness"].as_object_mut().unwrap();
    let jain = fairness.remove("jain_mean").unwrap();
    fairness.insert("jain_average".into(), jain);
    assert!(!errors("sim.schema.json", &renamed).is_empty());

    let mut missing = json.clone();
    missing["runs"][0]["tenants"][0]
        .as_object_mut()
        .unwrap()
        .remove("ideal_bps");
    assert!(!errors("sim.schema.json", &missing).is_empty());

    let mut unversioned = json;
    unversioned
        .as_object_mut()
        .unwrap()
        .remove("schema_version");
    assert!(!errors("sim.schema.json", &unversioned).is_empty());

    let check = validated(
        "check.schema.json",
        &["check", "scenarios/tonic/policy-equal.yaml", "--json"],
    );
    let mut renamed = check;
    let tonic = renamed["enforcers"][0].as_object_mut().unwrap();
    let ignored = tonic.remove("not_enforced").unwrap();
    tonic.insert("ignored".into(), ignored);
    assert!(!errors("check.schema.json", &renamed).is_empty());
}

#[test]
fn lab_json_is_the_summary_of_a_lab_run_one_host_and_across_hosts() {
    if !runnable(
        "lab_json_is_the_summary_of_a_lab_run_one_host_and_across_hosts",
        &["iperf3", "sockperf", "ip", "tc"],
    ) {
        return;
    }
    let scratch = Scratch::new("json-lab");
    // One second of two bulk senders: the lab's cheapest run.
    let scenario = scratch.file(
        "lab.yaml",
        "name: lab-json\npolicy:\n  link: { rate: 100Mbit, queues: 2 }\n  tenants:\n    - { name: a, cores: [0] }\n    - { name: b, weight: 3, cores: [1] }\nduration: 1s\ninterval: 250ms\nenforcers: [wf2q]\ntraffic:\n  - { tenant: a, kind: bulk, flows: 1 }\n  - { tenant: b, kind: bulk, flows: 1 }\n",
    );
    let out_dir = scratch.0.join("out");
    let out = nicsched(&[
        "lab",
        &scenario,
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
        "-q",
    ]);
    let json = document(&out);
    assert_valid("sim.schema.json", &json);
    assert_eq!(json["runs"][0]["mode"], "lab");
    assert_runs_are_the_summaries(&json, &["wf2q"]);
    // A machine too busy to keep the link fed fails `engine` (exit 3); the
    // document is printed all the same.
    assert_checks_agree(&json, &out);

    // Across hosts, scenarios/picnic/lab-fig7b.yaml in a fifteenth of its time.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/picnic/lab-fig7b.yaml"
    ))
    .unwrap()
    .replace("duration: 15s", "duration: 1s")
    .replace("interval: 1s", "interval: 250ms")
    .replace("start: 5s", "start: 500ms")
    .replace("start: 10s", "start: 750ms");
    let scenario = scratch.file("lab-hosts.yaml", &text);
    let out_dir = scratch.0.join("hosts");
    let out = nicsched(&[
        "lab",
        &scenario,
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
        "-q",
    ]);
    let json = document(&out);
    assert_valid("sim.schema.json", &json);
    assert_eq!(json["across_hosts"], true);
    assert_runs_are_the_summaries(&json, &["picnic"]);
    assert_valid("hosts-summary.schema.json", &json["runs"][0]);
    // So short a run may leave bytes in flight that `meter-vs-programs` flags.
    assert_checks_agree(&json, &out);
}

/// `failed_checks` names every failed check of the runs, and the exit status is
/// 3 exactly when there is one.
fn assert_checks_agree(json: &Value, out: &Output) {
    let failed: Vec<String> = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|run| {
            run["checks"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|check| check["ok"] == false)
                .map(|check| {
                    format!(
                        "{}/{}",
                        run["enforcer"].as_str().unwrap(),
                        check["name"].as_str().unwrap()
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(json["failed_checks"], serde_json::json!(failed));
    let expected = if failed.is_empty() {
        0
    } else {
        EXIT_CHECKS_FAILED
    };
    assert_eq!(
        out.status.code(),
        Some(expected),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `sim` of `scenario` under `hash` into `dir`.
fn sim_into(scenario: &str, dir: &Path) {
    let out = nicsched(&[
        "sim",
        scenario,
        "-e",
        "hash",
        "--out",
        dir.to_str().unwrap(),
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_baseline_equal_to_the_run_gives_zero_deltas_and_exit_0() {
    let scratch = Scratch::new("json-baseline-equal");
    let scenario = short_scenario(&scratch, 1);
    let (old, new) = (scratch.0.join("old"), scratch.0.join("new"));
    sim_into(&scenario, &old);
    sim_into(&scenario, &new);
    let args = [
        "compare",
        new.to_str().unwrap(),
        "--baseline",
        old.to_str().unwrap(),
    ];
    let out = nicsched(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("fairness.jain_mean"), "{text}");
    assert!(!text.contains("REGRESSED"), "{text}");

    let json = validated("compare.schema.json", &[&args[..], &["--json"]].concat());
    let runs = json["baseline"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    for figure in runs[0]["figures"].as_array().unwrap() {
        assert_eq!(figure["delta"], 0.0, "{figure}");
        assert_eq!(figure["regressed"], false, "{figure}");
    }
    assert_eq!(json["baseline"]["regressions"], serde_json::json!([]));

    let json = validated(
        "compare.schema.json",
        &["compare", old.to_str().unwrap(), "--json"],
    );
    assert!(json["baseline"].is_null());
    assert_eq!(json["runs"][0]["enforcer"], "hash");
}

#[test]
fn a_run_made_worse_exits_4_naming_the_figures_unless_the_threshold_allows() {
    let scratch = Scratch::new("json-baseline-worse");
    let (old, new) = (scratch.0.join("old"), scratch.0.join("new"));
    // `hash` ignores weights: with a weighted 3:1 the ideal moves, the
    // throughputs do not, so every fairness figure gets worse.
    sim_into(&short_scenario(&scratch, 1), &old);
    sim_into(&short_scenario(&scratch, 3), &new);
    let args = [
        "compare",
        new.to_str().unwrap(),
        "--baseline",
        old.to_str().unwrap(),
    ];
    let out = nicsched(&args);
    assert_eq!(out.status.code(), Some(EXIT_REGRESSED));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("short/hash/sim fairness.jain_mean")
            && stderr.contains("short/hash/sim tenants.a.throughput_bps"),
        "{stderr}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let jain = text
        .lines()
        .find(|l| l.contains("fairness.jain_mean"))
        .unwrap();
    assert!(jain.ends_with("REGRESSED"), "{text}");

    let out = nicsched(&[&args[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(EXIT_REGRESSED));
    let json = document(&out);
    assert_valid("compare.schema.json", &json);
    let regressions: Vec<&str> = json["baseline"]["regressions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(
        regressions.contains(&"short/hash/sim fairness.rel_error_mean"),
        "{regressions:?}"
    );
    // Latency was not made worse on purpose: it is compared, not necessarily
    // regressed; what is regressed got worse by more than its threshold.
    for figure in json["baseline"]["runs"][0]["figures"].as_array().unwrap() {
        let over = figure["worse_by"].as_f64().unwrap() > figure["threshold"].as_f64().unwrap();
        assert_eq!(figure["regressed"], over, "{figure}");
    }

    let out = nicsched(&[&args[..], &["--threshold", "100"]].concat());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One kind loosened: the others still catch it.
    let out = nicsched(
        &[
            &args[..],
            &["--threshold", "100", "--threshold", "jain=0.01"],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(EXIT_REGRESSED));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fairness.jain_mean") && !stderr.contains("rel_error"),
        "{stderr}"
    );
}

#[test]
fn runs_on_one_side_only_are_listed_and_a_bad_threshold_is_an_input_error() {
    let scratch = Scratch::new("json-baseline-missing");
    let scenario = short_scenario(&scratch, 1);
    let (old, new) = (scratch.0.join("old"), scratch.0.join("new"));
    sim_into(&scenario, &old);
    let out = nicsched(&[
        "sim",
        &scenario,
        "-e",
        "hash",
        "-e",
        "wf2q",
        "--out",
        new.to_str().unwrap(),
        "-q",
    ]);
    assert!(out.status.success());
    let args = [
        "compare",
        new.to_str().unwrap(),
        "--baseline",
        old.to_str().unwrap(),
    ];
    let out = nicsched(&args);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("short/wf2q/sim: no baseline run to compare with"),
        "{text}"
    );
    let json = validated("compare.schema.json", &[&args[..], &["--json"]].concat());
    assert_eq!(json["baseline"]["only_in_results"][0]["enforcer"], "wf2q");

    // Swapped: the baseline's wf2q run has nothing to compare with.
    let out = nicsched(&[
        "compare",
        old.to_str().unwrap(),
        "--baseline",
        new.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("short/wf2q/sim: in the baseline only"),
        "{text}"
    );

    let out = nicsched(&[&args[..], &["--threshold", "latency=1"]].concat());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("--threshold latency=1: "), "{stderr}");
    let out = nicsched(&["compare", new.to_str().unwrap(), "--json", "--markdown"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The ```json examples of docs/json.md's section `heading`, in order.
fn examples_of(heading: &str) -> Vec<Value> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/json.md"))
        .unwrap();
    let section = doc
        .split("\n## ")
        .find(|s| s.lines().next() == Some(heading))
        .unwrap_or_else(|| panic!("json.md has no section `{heading}`"));
    section
        .split("```json\n")
        .skip(1)
        .map(|block| {
            let example = block.split("```").next().unwrap();
            serde_json::from_str(example).unwrap_or_else(|e| panic!("{e}: {example}"))
        })
        .collect()
}

/// `apply`, `apply --remove` and `watch` need root and a device
/// (crates/nicsched/tests/realhost.rs holds their real output to these schemas);
/// here the documented examples, each taken from such output, are held to them,
/// and the schemas refuse a field renamed or missing.
#[test]
fn the_apply_and_watch_examples_follow_their_schemas_which_are_strict() {
    let examples = examples_of("apply and watch");
    let of = |key: &str| {
        examples
            .iter()
            .find(|e| e.get(key).is_some())
            .unwrap_or_else(|| panic!("no example with `{key}` in {examples:?}"))
            .clone()
    };
    let (apply, removed, line) = (of("applied"), of("qdiscs"), of("time_s"));
    assert_eq!(examples.len(), 3, "{examples:?}");
    assert_valid("apply.schema.json", &apply);
    assert_valid("apply-remove.schema.json", &removed);
    assert_valid("watch.schema.json", &line);

    let mut renamed = apply.clone();
    let approximation = renamed["approximation"].as_object_mut().unwrap();
    let sentences = approximation.remove("not_enforced").unwrap();
    approximation.insert("ignored".into(), sentences);
    assert!(!errors("apply.schema.json", &renamed).is_empty());
    let mut unversioned = apply;
    unversioned
        .as_object_mut()
        .unwrap()
        .remove("schema_version");
    assert!(!errors("apply.schema.json", &unversioned).is_empty());

    let mut counted = removed.clone();
    counted["qdiscs"][0]["refcnt"] = 2.into();
    assert!(!errors("apply-remove.schema.json", &counted).is_empty());
    let mut kindless = removed;
    kindless["qdiscs"][0]
        .as_object_mut()
        .unwrap()
        .remove("kind");
    assert!(!errors("apply-remove.schema.json", &kindless).is_empty());

    let mut missing = line.clone();
    missing["tenants"][0]
        .as_object_mut()
        .unwrap()
        .remove("ideal_bps");
    assert!(!errors("watch.schema.json", &missing).is_empty());
    let mut versioned = line;
    versioned["schema_version"] = 1.into();
    assert!(!errors("watch.schema.json", &versioned).is_empty());
}

/// `enforce` needs root and a device (crates/nicsched/tests/enforce.rs holds its
/// real lines and summary.json to these schemas); here the documented examples,
/// each taken from such output, are held to them; the schemas are strict, and
/// neither takes the other's document, so a script tells them apart.
#[test]
fn the_enforce_examples_follow_their_schemas_which_are_strict_and_tell_line_from_summary() {
    let examples = examples_of("enforce");
    assert_eq!(examples.len(), 2, "{examples:?}");
    let (line, summary) = (&examples[0], &examples[1]);
    assert_valid("enforce-line.schema.json", line);
    assert_valid("enforce-summary.schema.json", summary);
    assert!(!errors("enforce-line.schema.json", summary).is_empty());
    assert!(!errors("enforce-summary.schema.json", line).is_empty());
    assert!(line.get("checks").is_none() && summary.get("checks").is_some());

    let mut missing = line.clone();
    missing["tenants"][0]
        .as_object_mut()
        .unwrap()
        .remove("drops");
    assert!(!errors("enforce-line.schema.json", &missing).is_empty());
    let mut versioned = line.clone();
    versioned["schema_version"] = 1.into();
    assert!(!errors("enforce-line.schema.json", &versioned).is_empty());

    let mut renamed = summary.clone();
    let device = renamed["device"].as_object_mut().unwrap();
    let packets = device.remove("tx_packets").unwrap();
    device.insert("tx_frames".into(), packets);
    assert!(!errors("enforce-summary.schema.json", &renamed).is_empty());
    let mut uncounted = summary.clone();
    uncounted["tenants"][1]
        .as_object_mut()
        .unwrap()
        .remove("held_bytes");
    assert!(!errors("enforce-summary.schema.json", &uncounted).is_empty());
    let mut unchecked = summary.clone();
    unchecked["checks"][0]
        .as_object_mut()
        .unwrap()
        .remove("detail");
    assert!(!errors("enforce-summary.schema.json", &unchecked).is_empty());
}
