//! `nicsched lab`'s live view: the interval lines on stderr and the metrics served
//! by `--metrics-listen`, read from a real lab run while it goes.

mod common;

use common::{Scratch, runnable};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};

fn nicsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args(args)
        .output()
        .expect("nicsched runs")
}

/// Two tenants of weights 3 and 1, one iperf3 flow each, on a link slow enough
/// for a loaded 2-core machine; 4 s of 500 ms intervals, 2 to a line.
const SCENARIO: &str = "name: live\npolicy:\n  link: { rate: 50Mbit, queues: 2 }\n  tenants:\n    - { name: kvs, weight: 3, cores: [0] }\n    - { name: bulk, weight: 1, cores: [1] }\nduration: 4s\ninterval: 500ms\nenforcers: [wf2q]\ntraffic:\n  - { tenant: kvs, kind: bulk, flows: 1 }\n  - { tenant: bulk, kind: bulk, flows: 1 }\n";

/// A lab run, killed and cleaned up after when dropped before it ended by itself:
/// the test leaves nothing behind when an assertion fails.
struct Run(Child);

impl Drop for Run {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
            let _ = nicsched(&["lab", "--cleanup"]);
        }
    }
}

/// One interval line: `ENFORCER START-END s TENANT MBIT Mbit/s ideal MBIT Mbit/s drops N`.
#[derive(Debug)]
struct IntervalLine {
    enforcer: String,
    tenant: String,
    mbit_per_s: f64,
    ideal_mbit_per_s: f64,
    drops: u64,
}

fn interval_line(line: &str) -> Option<IntervalLine> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words[..] {
        [
            enforcer,
            range,
            "s",
            tenant,
            mbit,
            "Mbit/s",
            "ideal",
            ideal,
            "Mbit/s",
            "drops",
            drops,
        ] if range.contains('-') => Some(IntervalLine {
            enforcer: enforcer.to_string(),
            tenant: tenant.to_string(),
            mbit_per_s: mbit.parse().ok()?,
            ideal_mbit_per_s: ideal.parse().ok()?,
            drops: drops.parse().ok()?,
        }),
        _ => None,
    }
}

/// GET `path` from `addr`: the status line and the body.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).expect("the metrics endpoint accepts");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The exposition read strictly: `# HELP` and `# TYPE` lines, samples
/// `name{labels} value`, `# EOF` last and only there.
fn samples(text: &str) -> Vec<(String, f64)> {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "{text}");
    let mut samples = Vec::new();
    for line in &lines[..lines.len() - 1] {
        if line.starts_with("# HELP ") || line.starts_with("# TYPE ") {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not `name{{labels}} value`: {line:?}"));
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "metric name {name:?}"
        );
        let labels = labels
            .strip_suffix('}')
            .unwrap_or_else(|| panic!("labels end in }}: {line:?}"));
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').expect("label=\"value\"");
            assert!(
                key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && value.starts_with('"')
                    && value.ends_with('"'),
                "label {pair:?} in {line:?}"
            );
        }
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("value of {line:?}"));
        samples.push((series.to_string(), value));
    }
    samples
}

#[test]
fn a_lab_run_prints_interval_lines_and_serves_its_metrics_while_it_goes() {
    if !runnable(
        "a_lab_run_prints_interval_lines_and_serves_its_metrics_while_it_goes",
        &["iperf3", "ethtool"],
    ) {
        return;
    }
    let scratch = Scratch::new("live");
    let scenario = scratch.file("live.yaml", SCENARIO);
    let out_dir = scratch.0.join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args([
            "lab",
            &scenario,
            "-e",
            "wf2q",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .args(["--out", out_dir.to_str().unwrap()])
        .stdin(Stdio::null())
        // The table and its failed checks: a few lines, read once the run is over.
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut run = Run(child);
    let mut stderr = BufReader::new(run.0.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    let mut next_line = || {
        let line = stderr.next()?.expect("stderr is text");
        said.push(line.clone());
        Some(line)
    };
    let addr = loop {
        let line = next_line().expect("a `metrics:` line before the run ends");
        if let Some(url) = line.strip_prefix("metrics: http://") {
            break url
                .strip_suffix("/metrics")
                .expect("the URL ends in /metrics")
                .to_string();
        }
    };
    let mut lines = Vec::new();
    while !lines.iter().any(|l: &IntervalLine| l.tenant == "[sum]") {
        let line = next_line().expect("an interval line before the run ends");
        lines.extend(interval_line(&line));
    }

    // The first line is out, and the metrics carry it.
    let (status, body) = get(&addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let samples = samples(&body);
    for tenant in ["kvs", "bulk"] {
        let series = format!(
            "nicsched_tenant_throughput_bits_per_second{{enforcer=\"wf2q\",tenant=\"{tenant}\"}}"
        );
        let value = samples
            .iter()
            .find(|(s, _)| *s == series)
            .unwrap_or_else(|| panic!("{series} in {body}"))
            .1;
        assert!(value > 0.0, "{series} {value}");
        let bytes = format!("nicsched_tenant_bytes_total{{enforcer=\"wf2q\",tenant=\"{tenant}\"}}");
        assert!(
            samples.iter().any(|(s, v)| *s == bytes && *v > 0.0),
            "{bytes} in {body}"
        );
    }
    assert!(
        samples
            .iter()
            .any(|(s, v)| s == "nicsched_run_elapsed_seconds{enforcer=\"wf2q\"}" && *v > 0.0),
        "{body}"
    );
    assert_eq!(get(&addr, "/").0, "HTTP/1.1 404 Not Found");

    while let Some(line) = next_line() {
        lines.extend(interval_line(&line));
    }
    let status = run.0.wait().unwrap();
    let mut table = String::new();
    run.0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut table)
        .unwrap();
    let said = said.join("\n");
    assert!(status.success(), "{status}\n{said}\n{table}");

    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("wf2q/summary.json")).unwrap())
            .unwrap();
    assert!(lines.iter().all(|l| l.enforcer == "wf2q"));
    for tenant in summary["tenants"].as_array().unwrap() {
        let name = tenant["name"].as_str().unwrap();
        let of_tenant: Vec<&IntervalLine> = lines.iter().filter(|l| l.tenant == name).collect();
        // 4 s of 500 ms intervals, 2 to a line.
        assert_eq!(of_tenant.len(), 4, "{name}\n{said}");
        // Every interval is steady with both tenants active, so the summary's mean
        // is the lines' mean, of the same meter's bytes: they differ by the
        // rounding of the printed Mbit/s (at most 0.005 each, so in the mean),
        // unless the kernel held a frame more than the meter's 100 ms grace
        // before the meter read it.
        let mean = of_tenant.iter().map(|l| l.mbit_per_s).sum::<f64>() / 4.0;
        let summary_mbit = tenant["throughput_bps"].as_f64().unwrap() / 1e6;
        assert!(
            (mean - summary_mbit).abs() <= 0.005 + 1e-9,
            "{name}: lines {mean} Mbit/s, summary {summary_mbit}\n{said}"
        );
        let ideal = of_tenant.iter().map(|l| l.ideal_mbit_per_s).sum::<f64>() / 4.0;
        let summary_ideal = tenant["ideal_bps"].as_f64().unwrap() / 1e6;
        assert!(
            (ideal - summary_ideal).abs() <= 0.005 + 1e-9,
            "{name}\n{said}"
        );
        // The last line comes once the engine stopped, with its final count.
        let drops: u64 = of_tenant.iter().map(|l| l.drops).sum();
        assert_eq!(drops, tenant["drops"].as_u64().unwrap(), "{name}\n{said}");
    }
}

#[test]
fn metrics_listen_refuses_what_it_cannot_serve_before_anything_runs() {
    let help = String::from_utf8(nicsched(&["lab", "--help"]).stdout).unwrap();
    for flag in [
        "--interval <SECONDS>",
        "--no-live",
        "--metrics-listen <ADDR>",
    ] {
        assert!(help.contains(flag), "{flag} in\n{help}");
    }
    let scratch = Scratch::new("live-refusals");
    let scenario = scratch.file("live.yaml", SCENARIO);
    for (addr, says) in [
        ("0.0.0.0:9464", "not a loopback address"),
        ("192.0.2.1:9464", "not a loopback address"),
        ("localhost", "is not IP:PORT"),
    ] {
        let out = nicsched(&["lab", &scenario, "--metrics-listen", addr]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{addr}: {said}");
        assert!(said.contains(says), "{addr}: {said}");
    }
    let out = nicsched(&["lab", &scenario, "--interval", "0"]);
    assert_eq!(out.status.code(), Some(2));

    if !runnable(
        "metrics_listen_refuses_what_it_cannot_serve_before_anything_runs",
        &[],
    ) {
        return;
    }
    // A port another program holds: refused before the run claims --out.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out_dir = scratch.0.join("out");
    let out = nicsched(&[
        "lab",
        &scenario,
        "--metrics-listen",
        &addr,
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&format!("--metrics-listen {addr}:")),
        "{said}"
    );
    assert!(!out_dir.exists());

    let across_hosts = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/picnic/lab-fig7b.yaml"
    );
    for flag in [
        &["--metrics-listen", "127.0.0.1:0"][..],
        &["--interval", "2"],
    ] {
        let out = nicsched(&[&["lab", across_hosts][..], flag].concat());
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(
            said.contains(&format!("{} watches one-host runs only", flag[0])),
            "{said}"
        );
    }
}
