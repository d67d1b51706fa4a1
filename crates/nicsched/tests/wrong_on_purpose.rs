//! Runs whose figures are made wrong on purpose: the binary the tests run is built
//! with the faults of `sim` and `lab` (see Cargo.toml), and `NICSCHED_FAULT` picks
//! one. Each such run must fail the self-check that stands for those figures, name
//! it beside the table, flag it in summary.json and report.html, and exit 3; the
//! same run without the fault passes every check, so the failure is the fault's.

mod common;

use common::{Scratch, runnable};
use std::path::Path;
use std::process::Command;

const EXIT_CHECKS_FAILED: i32 = 3;

/// A short run, one tenant with two apps: a bulk sender and a flood beside an rpc.
const SIM_SCENARIO: &str = "name: wrong
policy:
  link: { rate: 1Gbit, queues: 4 }
  tenants:
    - name: a
      cores: [0, 1]
      apps:
        - { name: web, match: { proto: tcp, ports: [8080] } }
        - { name: batch }
    - { name: b, cores: [2, 3] }
duration: 300ms
interval: 100ms
enforcers: [wf2q]
traffic:
  - { name: a-web, tenant: a, app: web, kind: rpc, response: 2KiB }
  - { name: a-batch, tenant: a, app: batch, kind: bulk, flows: 2 }
  - { name: b-udp, tenant: b, kind: udp, rate: 400Mbit, size: 1400B, flows: 2 }
";

/// What one `nicsched` command left: its status, its output and the run's files.
struct Outcome {
    status: Option<i32>,
    stdout: String,
    stderr: String,
    summary: report::Summary,
    html: String,
}

impl Outcome {
    fn failed(&self) -> Vec<&str> {
        self.summary
            .failed_checks()
            .map(|c| c.name.as_str())
            .collect()
    }

    fn check(&self, name: &str) -> &report::Check {
        self.summary
            .checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name} check among {:?}", self.summary.checks))
    }

    /// Asserts that the run exited 3 with exactly the checks `names` failed, each
    /// named beside the table, on stderr and in report.html. A lab run may also fail
    /// `engine`, which flags a machine too busy to keep the link fed: CI's two cores
    /// building in parallel did, and that is the check doing its work, not the one
    /// under test.
    fn assert_failed(&self, names: &[&str]) {
        assert_eq!(
            self.status,
            Some(EXIT_CHECKS_FAILED),
            "{}\n{}",
            self.stdout,
            self.stderr
        );
        let failed: Vec<&str> = self
            .failed()
            .into_iter()
            .filter(|&name| !(name == "engine" && self.summary.mode == report::Mode::Lab))
            .collect();
        assert_eq!(failed, names, "{:?}", self.summary.checks);
        let enforcer = &self.summary.enforcer;
        for name in names {
            let detail = &self.check(name).detail;
            assert!(
                self.stdout
                    .contains(&format!("FAILED {enforcer}: {name}: {detail}")),
                "{}",
                self.stdout
            );
            assert!(
                self.stderr.contains(&format!("{enforcer}/{name}")),
                "{}",
                self.stderr
            );
            assert!(
                self.html
                    .contains(&format!("<li class=\"failed\">✗ {name}: ")),
                "report.html does not list {name} as failed"
            );
        }
        let label = format!("{}/{enforcer}", self.summary.mode.as_str());
        assert!(
            self.html
                .contains(&format!("Self-checks failed for {label}:")),
            "report.html carries no warning"
        );
        assert!(
            self.html.contains("<tr class=\"failed\">"),
            "report.html's summary does not mark the run"
        );
    }

    fn assert_passed(&self) {
        assert_eq!(self.status, Some(0), "{}\n{}", self.stdout, self.stderr);
        assert!(!self.summary.checks.is_empty());
        assert_eq!(self.failed(), Vec::<&str>::new());
        assert!(!self.html.contains("Self-checks failed"));
    }
}

/// `nicsched <command> <scenario>` under `enforcer` into `out`, the figures made
/// wrong by `fault` or honest.
fn run(command: &str, scenario: &str, enforcer: &str, out: &Path, fault: Option<&str>) -> Outcome {
    let mut nicsched = Command::new(env!("CARGO_BIN_EXE_nicsched"));
    match fault {
        Some(fault) => nicsched.env("NICSCHED_FAULT", fault),
        None => nicsched.env_remove("NICSCHED_FAULT"),
    };
    let output = nicsched
        .args([command, scenario, "-e", enforcer, "-q", "--out"])
        .arg(out)
        .output()
        .expect("the binary runs");
    let read = |path: &Path| {
        std::fs::read_to_string(path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}\n{}",
                path.display(),
                String::from_utf8_lossy(&output.stderr)
            )
        })
    };
    let summary = read(&out.join(enforcer).join(report::SUMMARY_JSON));
    Outcome {
        status: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        summary: serde_json::from_str(&summary).expect("summary.json reads back"),
        html: read(&out.join(report::REPORT_HTML)),
    }
}

#[test]
fn an_enforcer_that_loses_packets_fails_conservation_and_exits_3() {
    let scratch = Scratch::new("lossy");
    let scenario = scratch.file("wrong.yaml", SIM_SCENARIO);
    let honest = run("sim", &scenario, "wf2q", &scratch.0.join("honest"), None);
    honest.assert_passed();
    assert!(honest.check("conservation").ok);

    let lossy = run(
        "sim",
        &scenario,
        "wf2q",
        &scratch.0.join("lossy"),
        Some("lose-packets"),
    );
    lossy.assert_failed(&["conservation"]);
    let detail = &lossy.check("conservation").detail;
    assert!(detail.contains("B lost"), "{detail}");
    // The meter and the link saw the same frames: the loss is the enforcer's.
    assert!(lossy.check("meter").ok);
}

#[test]
fn a_simulated_meter_that_drops_an_app_fails_against_the_link_and_exits_3() {
    let scratch = Scratch::new("sim-meter");
    let scenario = scratch.file("wrong.yaml", SIM_SCENARIO);
    let honest = run("sim", &scenario, "valve", &scratch.0.join("honest"), None);
    honest.assert_passed();
    assert!(honest.check("meter").ok);

    let blind = run(
        "sim",
        &scenario,
        "valve",
        &scratch.0.join("blind"),
        Some("meter-drops-app=a/batch"),
    );
    blind.assert_failed(&["meter"]);
    // a/batch's bytes are missing from a, and only from a.
    let detail = &blind.check("meter").detail;
    assert!(detail.starts_with("a: metered "), "{detail}");
    assert!(!detail.contains("b: "), "{detail}");
    assert!(blind.check("conservation").ok);
}

#[test]
fn a_lab_meter_that_drops_an_app_fails_against_the_programs_and_exits_3() {
    if !runnable(
        "a_lab_meter_that_drops_an_app_fails_against_the_programs_and_exits_3",
        &["iperf3", "ethtool"],
    ) {
        return;
    }
    let scratch = Scratch::new("lab-meter");
    // Two bulk tenants on a slow link: nothing open-loop whose generator could fall
    // short on a loaded machine, so every check but the meter's stands.
    let scenario = scratch.file(
        "wrong.yaml",
        "name: wrong-lab
policy:
  link: { rate: 200Mbit, queues: 2 }
  tenants:
    - { name: a, cores: [0] }
    - { name: b, cores: [1] }
duration: 2s
interval: 500ms
traffic:
  - { name: a-bulk, tenant: a, kind: bulk, flows: 1 }
  - { name: b-bulk, tenant: b, kind: bulk, flows: 1 }
",
    );
    let blind = run(
        "lab",
        &scenario,
        "wf2q",
        &scratch.0.join("blind"),
        Some("meter-drops-app=a/default"),
    );
    // Both checks of the meter see it: against iperf3's count of a-bulk, and
    // against what the engine put on the link for a.
    blind.assert_failed(&["meter-vs-programs", "meter"]);
    let programs = &blind.check("meter-vs-programs").detail;
    assert!(
        programs
            .starts_with("a-bulk (a/default): payload at the sink 0 B, iperf3 servers received"),
        "{programs}"
    );
    assert!(
        programs.contains("; b-bulk (b/default): payload at the sink"),
        "{programs}"
    );
    let meter = &blind.check("meter").detail;
    assert!(meter.starts_with("a: metered 0 B, link "), "{meter}");
}
