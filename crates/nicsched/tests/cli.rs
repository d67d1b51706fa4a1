//! The command line as a user meets it: exit statuses, error lines, files written.

mod common;

use common::{Scratch, runnable};
use std::path::Path;
use std::process::{Command, Output};

fn nicsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// Two enforcers for 200 ms: everything it writes (measured: 0.57 MB, of which
/// report.html 69 kB, each PNG 35 to 79 kB, summary.json 3.2 kB, each CSV 0.4 to
/// 2.9 kB) in well under a second.
const SHORT: &str = "name: short\npolicy:\n  link: { rate: 1Gbit, queues: 4 }\n  tenants:\n    - { name: a, cores: [0, 1] }\n    - { name: b, cores: [2, 3] }\nduration: 200ms\ninterval: 50ms\nenforcers: [hash, tonic]\ntraffic:\n  - { tenant: a, kind: bulk, flows: 2 }\n  - { tenant: b, kind: rpc, response: 2KiB }\n";

fn shipped(name: &str) -> String {
    format!("../../scenarios/tonic/{name}")
}

/// The enforcer names in the first column of the Markdown table of `doc` that
/// starts with `header`, in order.
fn enforcer_table_names(doc: &str, header: &str) -> Vec<String> {
    doc.lines()
        .skip_while(|line| !line.starts_with(header))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.split('|')
                .nth(1)
                .unwrap()
                .trim()
                .trim_matches('`')
                .to_string()
        })
        .collect()
}

#[test]
fn the_enforcer_tables_of_the_docs_follow_the_registry() {
    let out = nicsched(&["enforcers", "--markdown"]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    let mut readme = std::fs::read_to_string("../../README.md").unwrap();
    if !readme.contains(&table) && std::env::var_os("NICSCHED_BLESS").is_some() {
        let header = table.lines().next().unwrap();
        let start = readme
            .find(header)
            .expect("README.md has an enforcer table");
        let end = readme[start..]
            .split_inclusive('\n')
            .take_while(|line| line.starts_with('|'))
            .map(str::len)
            .sum::<usize>();
        readme.replace_range(start..start + end, &table);
        std::fs::write("../../README.md", &readme).unwrap();
    }
    assert!(
        readme.contains(&table),
        "README.md's enforcer table is not `nicsched enforcers --markdown` (NICSCHED_BLESS=1 rewrites it):\n{table}"
    );
    let names = lab::enforcer_names();
    assert_eq!(enforcer_table_names(&table, "| enforcer |"), names);
    let reference = std::fs::read_to_string("../../docs/enforcers.md").unwrap();
    assert_eq!(
        enforcer_table_names(&reference, "| name | from |"),
        names,
        "docs/enforcers.md's summary table"
    );
}

#[test]
fn enforcers_lists_every_name_as_text_and_as_json() {
    let names = lab::enforcer_names();
    let out = nicsched(&["enforcers"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let listed: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(listed, names);

    let out = nicsched(&["enforcers", "--json"]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["enforcers"].as_array().unwrap();
    let listed: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(listed, names);
    for (row, info) in rows.iter().zip(sched::ENFORCERS) {
        assert_eq!(row["from"], info.from);
        assert_eq!(row["mechanism"], info.mechanism);
        assert_eq!(row["nic_model"], info.nic().is_some(), "{}", info.name);
        let lab_bench = info.is_default(sched::registry::World::LabBench);
        assert_eq!(row["lab_bench"], lab_bench, "{}", info.name);
        assert_eq!(row["lab_only"], !info.is_built(), "{}", info.name);
    }
    let kernel = rows.last().unwrap();
    assert_eq!(kernel["name"], "linux-htb");
    assert_eq!(kernel["lab_only"], true);
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
        text.contains(
            "share error with every tenant backlogged (all its traffic bulk, the whole run) with at least as many flows as the Tx queues of its pool, and no engine cost: 0.00%"
        ),
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
    let scenario = scratch.file("short.yaml", SHORT);
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
    // and from one run's folder; a folder that is no complete run is an input error.
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
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a complete nicsched run"));
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
fn bench_threads_reports_the_speedup_over_one_thread_and_refuses_what_it_cannot_run() {
    let help = String::from_utf8(nicsched(&["bench", "--help"]).stdout).unwrap();
    for needle in [
        "--threads <N>",
        "speedup",
        "producer threads",
        "[default: 1]",
    ] {
        assert!(
            help.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .contains(needle),
            "help lacks {needle}: {help}"
        );
    }
    let short = ["--classes", "64", "--seconds", "0.05"];
    for enforcer in ["fairnic", "tonic"] {
        let out = nicsched(
            &[
                &["bench", "-e", enforcer, "--threads", "2", "--json"][..],
                &short,
            ]
            .concat(),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["threads"], 2, "{json}");
        assert_eq!(
            json["burst"], 1,
            "one pair at a time unless --burst: {json}"
        );
        let one = json["pairs_per_sec_1_thread"].as_f64().unwrap();
        let many = json["pairs_per_sec"].as_f64().unwrap();
        assert!(one > 0.0 && many > 0.0, "{json}");
        assert_eq!(json["speedup"].as_f64().unwrap(), many / one, "{json}");
    }
    let out = nicsched(&[&["bench", "-e", "fairnic", "--threads", "2"][..], &short].concat());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("on 2 threads") && text.contains("x the"),
        "{text}"
    );
    // One thread: the speedup over itself, in the same fields.
    let out = nicsched(&[&["bench", "-e", "wf2q", "--json"][..], &short].concat());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (json["threads"].as_u64(), json["speedup"].as_f64()),
        (Some(1), Some(1.0))
    );

    // Rounds add up: the pairs of all of them, and each one's rate kept.
    let out = nicsched(
        &[
            &["bench", "-e", "htb", "--rounds", "3", "--json"][..],
            &short,
        ]
        .concat(),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rates = json["rounds_pairs_per_sec"].as_array().unwrap();
    assert_eq!(
        (json["rounds"].as_u64(), rates.len()),
        (Some(3), 3),
        "{json}"
    );
    assert!(json["seconds"].as_f64().unwrap() >= 3.0 * 0.05, "{json}");
    let rate = json["pairs"].as_f64().unwrap() / json["seconds"].as_f64().unwrap();
    assert!(
        (json["pairs_per_sec"].as_f64().unwrap() - rate).abs() <= rate * 1e-9,
        "{json}"
    );
    let out = nicsched(&[&["bench", "-e", "htb", "--rounds", "2"][..], &short].concat());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(", 2 rounds from "), "{text}");

    // What the classes are capped at is said, in the line and in the JSON.
    assert!(
        text.contains("each capped at its share of the link"),
        "{text}"
    );
    let out = nicsched(&[&["bench", "-e", "htb", "--class-cap", "link"][..], &short].concat());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("each capped at the link rate"), "{text}");
    let out = nicsched(
        &[
            &["bench", "-e", "wf2q", "--class-cap", "link", "--json"][..],
            &short,
        ]
        .concat(),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["class_cap"], "link", "{json}");

    for (args, says) in [
        (&["--rounds", "0"][..], "--rounds"),
        (&["--threads", "0"][..], "--threads"),
        (&["--threads", "257"][..], "--threads"),
        (&["--threads", "32"][..], "engine core 1 serves none"),
        (&["--threads", "2", "--vs", "rte_sched"][..], "--vs"),
        (&["--class-cap", "none"][..], "share, link"),
    ] {
        let out = nicsched(&[&["bench", "-e", "fairnic"][..], &short, args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let error = String::from_utf8_lossy(&out.stderr);
        assert!(error.contains(says), "{args:?}: {error}");
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
        "Default: 128 on one host; across hosts the simulator's 1000",
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

#[test]
fn tc_refuses_unmatched_tenants_and_odd_devices_and_prints_a_whole_script() {
    let scratch = Scratch::new("tc");
    let unmatched = shipped("policy-weighted-case1.yaml");
    let out = nicsched(&["tc", &unmatched, "--dev", "eth0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no half script");
    let error = String::from_utf8_lossy(&out.stderr);
    // At t1's entry of `tenants`, line 6, as the parser locates its own mistakes.
    assert!(
        error.starts_with(&format!(
            "{unmatched}:6:5: error: tenant `t1` has no `match.src`"
        )) && error.contains("hint: add `match: { src: CIDR }` to tenant t1"),
        "{error}"
    );
    // A scenario whose policy is a file of its own: the policy file, at the first
    // tenant without an address.
    let policy = scratch.file(
        "half.yaml",
        "link: { rate: 1Gbit }\ntenants:\n  - { name: a, match: { src: 10.0.1.0/24 } }\n  - name: b\n    weight: 2\n",
    );
    let scenario = scratch.file(
        "half-scenario.yaml",
        "duration: 1s\npolicy: half.yaml\ntraffic:\n  - { tenant: b, kind: bulk }\n",
    );
    let out = nicsched(&["tc", &scenario, "--dev", "eth0"]);
    assert_eq!(out.status.code(), Some(2));
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(
        error.starts_with(&format!(
            "{policy}:4:5: error: tenant `b` has no `match.src`"
        )),
        "{error}"
    );
    let matched = scratch.file(
        "matched.yaml",
        "link: { rate: 1Gbit }\ntenants:\n  - { name: a, weight: 3, match: { src: 10.0.1.0/24 } }\n  - { name: b, match: { src: 10.0.2.0/24 } }\n",
    );
    // Names a shell would run something from: refused, and nothing printed that a
    // `| sh` could run.
    let touched = scratch.0.join("touched");
    let touch = format!("touch {}", touched.display());
    for dev in [
        format!("d0; {touch}"),
        format!("$({touch})"),
        format!("`{touch}`"),
        format!("d0\n{touch}"),
        "eth0;reboot".into(),
        "a b".into(),
        "x/y".into(),
        "/".into(),
        "sixteen-chars-xx".into(),
        "".into(),
    ] {
        let out = nicsched(&["tc", &matched, "--dev", &dev]);
        assert_eq!(out.status.code(), Some(2), "{dev:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("not an interface name"),
            "{dev:?}"
        );
        let sh = Command::new("sh")
            .args(["-e", "-c", &String::from_utf8_lossy(&out.stdout)])
            .output()
            .unwrap();
        assert!(sh.status.success() && !touched.exists(), "{dev:?}");
    }
    let out = nicsched(&["tc", &matched, "--dev", "eth0"]);
    assert!(out.status.success());
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(
        script.contains("htb rate 750mbit ceil 1gbit"),
        "a's share in tc's units: {script}"
    );
    assert!(script.contains("classid 1:fffe "), "{script}");
}

#[test]
fn lab_refuses_engine_costs_linux_htb_does_not_spend_before_claiming_out() {
    if !runnable(
        "lab_refuses_engine_costs_linux_htb_does_not_spend_before_claiming_out",
        &[],
    ) {
        return;
    }
    let scratch = Scratch::new("lab-cost");
    let costly = scratch.file(
        "costly.yaml",
        "policy:\n  link: { rate: 100Mbit }\n  tenants: [{ name: a }]\nduration: 1s\ntraffic:\n  - { name: heavy, tenant: a, kind: udp, rate: 10Mbit, cost: 2us }\n",
    );
    let out_dir = format!("{}/out", scratch.0.display());
    let out = nicsched(&["lab", &costly, "-e", "linux-htb", "--out", &out_dir, "-q"]);
    assert_eq!(out.status.code(), Some(2));
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(
        error.starts_with(&format!(
            "{costly}: the lab cannot run this scenario: traffic `heavy` has a `cost`"
        )),
        "{error}"
    );
    assert!(!std::path::Path::new(&out_dir).exists(), "nothing claimed");
}

#[test]
fn lab_refuses_transmit_rings_only_the_simulator_models() {
    if !runnable("lab_refuses_transmit_rings_only_the_simulator_models", &[]) {
        return;
    }
    let scratch = Scratch::new("lab-ring");
    for (key, words) in [
        (
            "completions: in-order",
            "tenant `a` has `completions: in-order`",
        ),
        ("napi_tx: true", "tenant `a` has `napi_tx: true`"),
    ] {
        let scenario = scratch.file(
            "ring.yaml",
            &format!(
                "policy:\n  link: {{ rate: 100Mbit }}\n  tenants: [{{ name: a, {key} }}]\nduration: 1s\ntraffic:\n  - {{ name: bulk, tenant: a, kind: bulk }}\n"
            ),
        );
        let out_dir = format!("{}/out", scratch.0.display());
        let out = nicsched(&["lab", &scenario, "--out", &out_dir, "-q"]);
        assert_eq!(out.status.code(), Some(2), "{key}");
        let error = String::from_utf8_lossy(&out.stderr);
        assert!(
            error.starts_with(&format!(
                "{scenario}: the lab cannot run this scenario: {words}"
            )) && error.contains("nicsched sim"),
            "{error}"
        );
        assert!(!std::path::Path::new(&out_dir).exists(), "nothing claimed");
        let sim = nicsched(&["check", &scenario]);
        assert!(sim.status.success(), "the simulator takes it: {sim:?}");
    }
}

#[test]
fn check_for_linux_htb_refuses_what_tc_refuses_with_the_same_words() {
    let scratch = Scratch::new("htb-limits");
    // One port more than u32's 2047 prios hold: 1024 both ways and the catch-all.
    let ports: Vec<String> = (1..=1024).map(|p| p.to_string()).collect();
    let wide = scratch.file(
        "wide.yaml",
        &format!(
            "link: {{ rate: 1Gbit }}\ntenants:\n  - name: wide\n    match: {{ src: 10.0.0.0/8 }}\n    apps:\n      - {{ name: ports, match: {{ ports: [{}] }} }}\n",
            ports.join(", ")
        ),
    );
    let tc = nicsched(&["tc", &wide, "--dev", "eth0"]);
    let check = nicsched(&["check", &wide, "-e", "linux-htb"]);
    let error = String::from_utf8_lossy(&tc.stderr);
    assert!(
        error.starts_with(&format!("{wide}: error: too large for Linux HTB: "))
            && error.contains("2049 u32 prios")
            && error.contains("at most 2047"),
        "{error}"
    );
    for out in [&tc, &check] {
        assert_eq!(out.status.code(), Some(2));
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    assert_eq!(check.stderr, tc.stderr);
    // Other enforcers have no such limit.
    assert!(nicsched(&["check", &wide, "-e", "htb"]).status.success());
}

/// Polls `condition` every 20 ms until it holds or `tries` run out.
fn poll(tries: u32, mut condition: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if condition() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

fn namespaces_of(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .map(str::to_string)
        .collect()
}

fn pids_in(ns: &str) -> Vec<u32> {
    let out = Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Whether `pid` runs (a zombie, ended but not yet reaped by whoever adopted it,
/// does not).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let (_, rest) = s.rsplit_once(')')?;
            rest.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

/// A `nicsched lab` run killed, and whatever it left removed, when dropped: the
/// test cleans up after itself even when an assertion fails.
struct KilledRun(std::process::Child);

impl Drop for KilledRun {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = nicsched(&["lab", "--cleanup"]);
    }
}

#[test]
fn a_killed_lab_takes_its_programs_along_and_cleanup_removes_its_namespaces() {
    if !runnable(
        "a_killed_lab_takes_its_programs_along_and_cleanup_removes_its_namespaces",
        &["iperf3", "ethtool"],
    ) {
        return;
    }
    let scratch = Scratch::new("killed");
    let scenario = scratch.file(
        "long.yaml",
        "name: killed\npolicy:\n  link: { rate: 100Mbit, queues: 2 }\n  tenants:\n    - { name: a, cores: [0] }\n    - { name: b, cores: [1] }\nduration: 60s\nenforcers: [fifo]\ntraffic:\n  - { tenant: a, kind: bulk, flows: 1 }\n  - { tenant: b, kind: bulk, flows: 1 }\n",
    );
    let out_dir = scratch.0.join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args(["lab", &scenario, "-q", "--out", out_dir.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut run = KilledRun(child);
    // The run's prefix is the owner record that names its pid.
    let mut prefix = None;
    let found = poll(1500, || {
        prefix = std::fs::read_dir("/run/nicsched")
            .into_iter()
            .flatten()
            .flatten()
            .find(|e| {
                std::fs::read_to_string(e.path())
                    .is_ok_and(|t| t.split_whitespace().next() == Some(&pid.to_string()))
            })
            .map(|e| e.file_name().to_string_lossy().into_owned());
        prefix.is_some()
    });
    assert!(found, "the run never recorded itself in /run/nicsched");
    let prefix = prefix.unwrap();
    // Its four namespaces, each tenant's iperf3 client and the sink's servers.
    let mut programs = Vec::new();
    let sending = poll(1500, || {
        let namespaces = namespaces_of(&prefix);
        programs = namespaces.iter().flat_map(|ns| pids_in(ns)).collect();
        namespaces.len() == 4
            && namespaces
                .iter()
                .filter(|ns| !ns.ends_with("-eng"))
                .all(|ns| !pids_in(ns).is_empty())
    });
    assert!(
        sending,
        "the run's programs never started: {:?}",
        namespaces_of(&prefix)
    );
    // SIGKILL: no handler, no destructor runs.
    run.0.kill().unwrap();
    run.0.wait().unwrap();
    assert!(
        poll(250, || programs.iter().all(|&p| !running(p))),
        "programs outlived the lab: {:?}",
        programs.iter().filter(|&&p| running(p)).collect::<Vec<_>>()
    );
    assert_eq!(
        namespaces_of(&prefix).len(),
        4,
        "a killed run leaves its namespaces for the cleanup"
    );

    let out = nicsched(&["lab", "--cleanup"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    for ns in ["t0", "t1", "sink", "eng"] {
        assert!(
            said.contains(&format!(
                "removed namespace {prefix}-{ns} (run {prefix} of pid {pid}"
            )),
            "{said}"
        );
    }
    assert!(namespaces_of(&prefix).is_empty());
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(!links.contains(&prefix), "{links}");
    assert!(!std::path::Path::new("/run/nicsched").join(&prefix).exists());
    assert!(programs.iter().all(|&p| !running(p)));
    // Nothing of it is left to clean.
    let again = nicsched(&["lab", "--cleanup"]);
    assert!(again.status.success());
    assert!(!String::from_utf8_lossy(&again.stderr).contains(&prefix));
}

/// A tmpfs of `size` at `dir` in a mount namespace of its own: what runs in it
/// (through nsenter) writes onto a disk that fills up, while the rest of the
/// machine never sees the mount. The namespace dies with its holder, killed on drop.
struct SmallDisk {
    holder: std::process::Child,
    dir: std::path::PathBuf,
}

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> SmallDisk {
        use std::io::BufRead;
        std::fs::create_dir_all(dir).unwrap();
        let mut holder = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg("mount -t tmpfs -o size=\"$1\" nicsched-test \"$2\" && echo mounted && exec cat")
            .args(["sh", size])
            .arg(dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("unshare runs");
        let mut said = String::new();
        std::io::BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut said)
            .unwrap();
        let disk = SmallDisk {
            holder,
            dir: dir.to_path_buf(),
        };
        assert_eq!(said, "mounted\n", "no tmpfs of {size} at {}", dir.display());
        disk
    }

    /// `program args` inside the namespace.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        Command::new("nsenter")
            .args(["-t", &self.holder.id().to_string(), "-m", "--", program])
            .args(args)
            .output()
            .expect("nsenter runs")
    }

    fn nicsched(&self, args: &[&str]) -> Output {
        self.run(env!("CARGO_BIN_EXE_nicsched"), args)
    }

    /// Every path on the disk, as `find` lists them.
    fn contents(&self) -> Vec<String> {
        let found = self.run("find", &[self.dir.to_str().unwrap(), "-mindepth", "1"]);
        assert!(found.status.success());
        String::from_utf8_lossy(&found.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// The file `stderr` says could not be written for lack of room.
fn file_without_room(stderr: &str) -> Option<&Path> {
    stderr
        .lines()
        .find_map(|line| line.strip_suffix(": No space left on device (os error 28)"))
        .map(Path::new)
}

#[test]
fn a_run_that_fills_the_disk_fails_naming_the_file_and_leaves_nothing_compare_takes() {
    let test = "a_run_that_fills_the_disk_fails_naming_the_file_and_leaves_nothing_compare_takes";
    if !runnable(test, &["unshare", "nsenter"]) {
        return;
    }
    let scratch = Scratch::new("full-disk");
    let scenario = scratch.file("short.yaml", SHORT);
    // Sizes against SHORT's files, written in this order per enforcer: summary.json,
    // the CSVs, the PNGs, then the overlay PNGs and report.html. In one page of 4 KiB
    // only summary.json fits; in 64 KiB the CSVs do too but not every plot; in
    // 540 KiB every enforcer's files and the overlays (about 505 kB with their
    // pages) but not report.html (69 kB).
    for (size, among) in [
        ("4k", &["timeseries.csv", "latency.csv"][..]),
        (
            "64k",
            &["throughput.png", "fairness.png", "latency_cdf.png"],
        ),
        ("540k", &["report.html", "overlay_latency_cdf.png"]),
    ] {
        let disk = SmallDisk::mount(&scratch.0.join(format!("disk-{size}")), size);
        let out = disk.dir.join("out");
        let run = disk.nicsched(&["sim", &scenario, "-q", "--out", out.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{size}: {stderr}");
        let file =
            file_without_room(&stderr).unwrap_or_else(|| panic!("{size}: no file named: {stderr}"));
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(among.contains(&name), "{size}: {stderr}");
        assert!(
            file.starts_with(&disk.dir) && file.to_string_lossy().contains("/.out.partial-"),
            "{size}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("the run is not in {}", out.display())),
            "{size}: {stderr}"
        );
        assert!(
            run.stdout.is_empty(),
            "{size}: no table of a run that failed"
        );
        assert_eq!(
            disk.contents(),
            Vec::<String>::new(),
            "{size}: the staging folder and the lock go"
        );
        for path in [&out, &disk.dir] {
            let compare = disk.nicsched(&["compare", path.to_str().unwrap()]);
            assert_eq!(compare.status.code(), Some(2), "{size}: {}", path.display());
        }
    }

    // A disk with room for one run (0.57 MB) but not two: the second, which needs its
    // own room before it replaces the first, fails and leaves the first whole.
    let disk = SmallDisk::mount(&scratch.0.join("disk-900k"), "900k");
    let out = disk.dir.join("out");
    let first = disk.nicsched(&["sim", &scenario, "-q", "--out", out.to_str().unwrap()]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let marker = disk.run("cat", &[out.join("nicsched-run.json").to_str().unwrap()]);
    let second = disk.nicsched(&[
        "sim",
        &scenario,
        "-q",
        "--seed",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(file_without_room(&stderr).is_some(), "{stderr}");
    let kept = disk.run("cat", &[out.join("nicsched-run.json").to_str().unwrap()]);
    assert_eq!(kept.stdout, marker.stdout, "the first run is as it was");
    let compare = disk.nicsched(&["compare", out.to_str().unwrap()]);
    assert!(
        compare.status.success(),
        "{}",
        String::from_utf8_lossy(&compare.stderr)
    );
}

#[test]
fn a_run_killed_at_its_file_size_limit_leaves_a_folder_compare_refuses_and_the_next_run_clears() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    // Below hash's fairness.png (67 kB), above every file SHORT writes before it
    // (at most 36 kB).
    const LIMIT_BYTES: u64 = 48 * 1024;
    let scratch = Scratch::new("fsize");
    let scenario = scratch.file("short.yaml", SHORT);
    let out = scratch.0.join("out");
    let mut command = Command::new(env!("CARGO_BIN_EXE_nicsched"));
    command.args(["sim", &scenario, "-q", "--out", out.to_str().unwrap()]);
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: LIMIT_BYTES,
                rlim_max: LIMIT_BYTES,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let killed = command.output().unwrap();
    assert_eq!(killed.status.signal(), Some(libc::SIGXFSZ), "{killed:?}");
    assert!(!out.exists());
    let staging: Vec<std::path::PathBuf> = std::fs::read_dir(&scratch.0)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().contains("/.out.partial-"))
        .collect();
    assert_eq!(staging.len(), 1, "{staging:?}");
    let staging = &staging[0];
    assert_eq!(
        std::fs::metadata(staging.join("hash").join("fairness.png"))
            .unwrap()
            .len(),
        LIMIT_BYTES,
        "cut at the limit"
    );
    for path in [
        out.clone(),
        staging.clone(),
        staging.join("hash"),
        staging.join("hash").join("summary.json"),
    ] {
        let compare = nicsched(&["compare", path.to_str().unwrap()]);
        assert_eq!(compare.status.code(), Some(2), "{}", path.display());
    }
    let compare = nicsched(&["compare", staging.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&compare.stderr)
            .contains("the folder of a run that did not finish"),
        "{}",
        String::from_utf8_lossy(&compare.stderr)
    );

    let next = nicsched(&["sim", &scenario, "-q", "--out", out.to_str().unwrap()]);
    assert!(
        next.status.success(),
        "{}",
        String::from_utf8_lossy(&next.stderr)
    );
    assert!(!staging.exists(), "the killed run's folder is cleared");
    assert!(
        nicsched(&["compare", out.to_str().unwrap()])
            .status
            .success()
    );
}

#[test]
fn a_second_run_into_a_busy_out_is_refused_before_it_runs() {
    let scratch = Scratch::new("busy");
    let scenario = scratch.file("short.yaml", SHORT);
    let out = scratch.0.join("out");
    // What a running `nicsched sim --out out` holds.
    let lock = std::fs::File::create(scratch.0.join(".out.lock")).unwrap();
    lock.try_lock().unwrap();
    let refused = nicsched(&["sim", &scenario, "-q", "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: another nicsched run is writing it",
            out.display()
        )),
        "{stderr}"
    );
    let mut left: Vec<String> = std::fs::read_dir(&scratch.0)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".out.lock", "short.yaml"], "nothing written");

    drop(lock);
    let run = nicsched(&["sim", &scenario, "-q", "--out", out.to_str().unwrap()]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(!scratch.0.join(".out.lock").exists());
}

#[test]
fn sim_names_a_policy_given_for_a_scenario_and_check_takes_all_enforcers() {
    let scratch = Scratch::new("policy-for-scenario");
    let policy = scratch.file(
        "p.yaml",
        "link: { rate: 1Gbit }\ntenants: [{ name: a }, { name: b }]\n",
    );
    let out = nicsched(&["sim", &policy, "-q"]);
    assert_eq!(out.status.code(), Some(2));
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(
        error.starts_with(&format!("{policy}: this is a policy, not a scenario")),
        "{error}"
    );

    let check = nicsched(&["check", &policy, "-e", "all"]);
    assert!(check.status.success(), "{check:?}");
    let text = String::from_utf8_lossy(&check.stdout);
    for name in sched::registry::names() {
        assert!(
            text.contains(&format!("enforcer {name}:")),
            "{name}: {text}"
        );
    }
}

#[test]
fn explain_gives_a_scenarios_ideal_phase_by_phase_for_its_traffic() {
    let scratch = Scratch::new("explain-phases");
    let scenario = scratch.file(
        "s.yaml",
        "policy:\n  link: { rate: 1Gbit }\n  tenants: [{ name: a, weight: 3 }, { name: b }]\nduration: 2s\ntraffic:\n  - { name: bulk-a, tenant: a, kind: bulk }\n  - { name: bulk-b, tenant: b, kind: bulk, start: 1s }\n",
    );
    let out = nicsched(&["explain", &scenario]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let from_0 = text.find("from 0ns: ideal allocation").expect(&text);
    let from_1 = text.find("from 1s: ideal allocation").expect(&text);
    assert!(from_0 < from_1, "{text}");
    // Alone, a takes the link; with b, a 3:1 share.
    assert!(text[from_0..from_1].contains("1Gbit  100.0%"), "{text}");
    assert!(text[from_1..].contains("750Mbit   75.0%"), "{text}");
    assert!(text[from_1..].contains("250Mbit   25.0%"), "{text}");
}

#[test]
fn bench_rounds_against_rte_sched_alternate_and_give_the_ratios_range() {
    let Some(_) = sched::bench::peer_binary() else {
        let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(
            !in_ci,
            "the rte_sched peer is not built (scripts/setup.sh builds it), and CI runs every test"
        );
        eprintln!("skipped: the rte_sched peer is not built (run scripts/setup.sh)");
        return;
    };
    let args = [
        "bench",
        "-e",
        "wheel",
        "--classes",
        "64",
        "--seconds",
        "0.05",
        "--rounds",
        "2",
        "--vs",
        "rte_sched",
    ];
    let out = nicsched(&[&args[..], &["--json"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let peer = json["peer_rounds_pairs_per_sec"].as_array().unwrap();
    assert_eq!(peer.len(), 2, "one peer run per round: {json}");
    let mean = peer.iter().map(|p| p.as_f64().unwrap()).sum::<f64>() / 2.0;
    assert_eq!(json["peer_pairs_per_sec"].as_f64(), Some(mean), "{json}");
    let ratio = json["ratio"].as_f64().unwrap();
    let mine = json["pairs_per_sec"].as_f64().unwrap();
    assert!((ratio - mine / mean).abs() <= ratio * 1e-12, "{json}");
    let (lowest, highest) = (
        json["ratio_lowest"].as_f64().unwrap(),
        json["ratio_highest"].as_f64().unwrap(),
    );
    assert!(0.0 < lowest && lowest <= highest, "{json}");
    let out = nicsched(&args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("wheel / rte_sched = ") && text.contains("(rounds from "),
        "{text}"
    );
    // The peer's line says its pipes never bind, beside classes that do.
    assert!(
        text.contains("each capped at its share of the link")
            && text.contains("(each pipe capped at the link rate)"),
        "{text}"
    );
}
