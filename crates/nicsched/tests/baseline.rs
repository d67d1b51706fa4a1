//! `compare --baseline` fails closed on real runs: a change that silences a
//! traffic (an app put below another that floods the link starves its rpc under
//! wf2q)
//! exits 4 naming it, unless `--expect-missing` says it is meant to be.

#[allow(
    dead_code,
    reason = "only its scratch folder: a simulated run needs neither root nor programs"
)]
mod common;

use common::Scratch;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

const EXIT_REGRESSED: i32 = 4;

fn nicsched(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Tenant `a`'s app `bulk` floods the link at priority 0; its app `kvs` runs an
/// rpc traffic at `kvs_priority`: at 1 it is served only when `bulk` has nothing.
fn scenario(scratch: &Scratch, kvs_priority: u32) -> String {
    scratch.file(
        &format!("prio-{kvs_priority}.yaml"),
        &format!(
            "name: prio\npolicy:\n  link: {{ rate: 1Gbit, queues: 4 }}\n  tenants:\n    - name: a\n      cores: [0, 1]\n      apps:\n        - {{ name: kvs, priority: {kvs_priority}, match: {{ proto: tcp, ports: [11211] }} }}\n        - {{ name: bulk, priority: 0 }}\nduration: 200ms\ninterval: 50ms\ntraffic:\n  - {{ name: a-bulk, tenant: a, app: bulk, kind: udp, rate: 2Gbit }}\n  - {{ name: a-rpc, tenant: a, app: kvs, kind: rpc, response: 2KiB }}\n"
        ),
    )
}

fn sim_into(scenario: &str, dir: &Path) {
    let out = nicsched(&[
        "sim",
        scenario,
        "-e",
        "wf2q",
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
fn a_traffic_a_change_starves_fails_the_comparison_unless_expected() {
    let scratch = Scratch::new("baseline-starved");
    let (old, new) = (scratch.0.join("old"), scratch.0.join("new"));
    sim_into(&scenario(&scratch, 0), &old);
    sim_into(&scenario(&scratch, 1), &new);
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(new.join("wf2q").join("summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        summary["latency"]["a-rpc"]["count"], 0,
        "the scenario no longer starves a-rpc: {}",
        summary["latency"]
    );

    let args = [
        "compare",
        new.to_str().unwrap(),
        "--baseline",
        old.to_str().unwrap(),
    ];
    let out = nicsched(&args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(EXIT_REGRESSED), "{stdout}{stderr}");
    assert!(
        stderr.contains("prio/wf2q/sim latency.a-rpc.count"),
        "{stderr}"
    );
    assert!(
        stdout.contains(
            "prio/wf2q/sim latency.a-rpc.count: traffic a-rpc silent: no request answered"
        ),
        "{stdout}"
    );

    let out = nicsched(&[&args[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(EXIT_REGRESSED));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let missing = &json["baseline"]["runs"][0]["missing"];
    assert!(
        missing
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "a-rpc" && m["how"] == "silent" && m["expected"] == false),
        "{missing}"
    );

    // The starved traffic expected; whatever else got worse is still judged.
    let out = nicsched(
        &[
            &args[..],
            &[
                "--expect-missing",
                "a-rpc",
                "--expect-missing",
                "a/kvs",
                "--threshold",
                "1e12",
            ],
        ]
        .concat(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = nicsched(&[
        "compare",
        new.to_str().unwrap(),
        "--expect-missing",
        "a-rpc",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--expect-missing needs --baseline"
    );
}
