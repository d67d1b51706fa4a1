//! `nicsched apply --mechanism htb`, `apply --remove` and `watch`, as an operator
//! runs them, on a "host" namespace whose device is a 4-queue veth to a "sink"
//! namespace: the read-back, the device put back exactly, a failure halfway rolled
//! back, and `watch --json` against what the sink received while two tenants send
//! TCP from their own addresses (the sink's TCP counters per source address: this
//! kernel has no tc actions to count with). Never the machine's own interfaces. Needs root,
//! iproute2, ethtool and iperf3; without them it fails in CI and, elsewhere, says
//! why and passes.

mod common;
mod schema;
mod shell;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::Scratch;
use shell::{ok, stderr};

const NICSCHED: &str = env!("CARGO_BIN_EXE_nicsched");

/// Two tenants, weights 2 and 1, on 100 Mbit/s; the second with an app matched
/// by port, so that filters other than a tenant's catch-all are read back.
const POLICY: &str = "link: { rate: 100Mbit }
tenants:
  - { name: gold, weight: 2, match: { src: 10.77.0.11/32 } }
  - name: bronze
    weight: 1
    match: { src: 10.77.0.12/32 }
    apps: [{ name: rpc, priority: 1, match: { proto: tcp, ports: [5999] } }, { name: bulk }]
";

/// The host and sink namespaces and the veth between them, deleted when dropped,
/// with nicsched's record of the device, also when the test fails.
struct Pair {
    host: String,
    sink: String,
    dev: String,
    peer: String,
    children: Vec<Child>,
}

impl Pair {
    fn new(tag: &str) -> Pair {
        let pid = std::process::id();
        let pair = Pair {
            host: format!("nicsched-rh-{pid}-{tag}-host"),
            sink: format!("nicsched-rh-{pid}-{tag}-sink"),
            dev: format!("rh{pid}{tag}h"),
            peer: format!("rh{pid}{tag}s"),
            children: Vec::new(),
        };
        for ns in [&pair.host, &pair.sink] {
            let _ = Command::new("ip").args(["netns", "delete", ns]).output();
            ok(&["ip", "netns", "add", ns]);
        }
        ok(&[
            "ip",
            "link",
            "add",
            &pair.dev,
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
            "netns",
            &pair.host,
            "type",
            "veth",
            "peer",
            "name",
            &pair.peer,
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
            "netns",
            &pair.sink,
        ]);
        for address in ["10.77.0.1/24", "10.77.0.11/24", "10.77.0.12/24"] {
            pair.host(&["ip", "addr", "add", address, "dev", &pair.dev]);
        }
        pair.sink(&["ip", "addr", "add", "10.77.0.2/24", "dev", &pair.peer]);
        // Each send one segment, one frame: what HTB counts is what the sink's TCP
        // counts, segment by segment.
        pair.host(&["ethtool", "-K", &pair.dev, "tso", "off", "gso", "off"]);
        for (ns, dev) in [(&pair.host, &pair.dev), (&pair.sink, &pair.peer)] {
            ok(&["ip", "netns", "exec", ns, "ip", "link", "set", dev, "up"]);
            ok(&["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
        }
        pair
    }

    fn host(&self, command: &[&str]) -> String {
        let mut all = vec!["ip", "netns", "exec", &self.host];
        all.extend(command);
        String::from_utf8(ok(&all).stdout).unwrap()
    }

    fn sink(&self, command: &[&str]) -> String {
        let mut all = vec!["ip", "netns", "exec", &self.sink];
        all.extend(command);
        String::from_utf8(ok(&all).stdout).unwrap()
    }

    /// `nicsched ARGS` in the host namespace, with `env` set.
    fn nicsched(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.host, NICSCHED])
            .args(args)
            .env_remove("NICSCHED_FAULT");
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().unwrap()
    }

    /// The device's qdiscs as the record keeps them: `tc -j qdisc show` less
    /// `refcnt`.
    fn qdiscs(&self) -> serde_json::Value {
        let mut qdiscs: serde_json::Value =
            serde_json::from_str(&self.host(&["tc", "-j", "qdisc", "show", "dev", &self.dev]))
                .unwrap();
        for qdisc in qdiscs.as_array_mut().unwrap() {
            qdisc.as_object_mut().unwrap().remove("refcnt");
        }
        qdiscs
    }

    /// The device's classes and filters with their parameters (no counters).
    fn tree(&self) -> String {
        self.host(&["tc", "-d", "class", "show", "dev", &self.dev])
            + &self.host(&["tc", "filter", "show", "dev", &self.dev])
    }

    fn record(&self) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/run/nicsched/{}.json", self.dev))
    }

    /// Bytes the sink's TCP received from each tenant's address, as the Ethernet
    /// frames HTB counted: each segment's payload (`bytes_received`) and its 66 bytes
    /// of headers (Ethernet 14, IPv4 20, TCP 32 with Linux's timestamps), over every
    /// connection from the address (`ss -ti`).
    fn sink_bytes(&self) -> [u64; 2] {
        let text = self.sink(&["ss", "-tinH", "state", "established"]);
        let mut bytes = [0; 2];
        let mut tenant = None;
        for line in text.lines() {
            if !line.starts_with(char::is_whitespace) {
                tenant = ["10.77.0.11]:", "10.77.0.12]:"]
                    .iter()
                    .position(|address| line.contains(address));
                continue;
            }
            let Some(t) = tenant else { continue };
            let counter = |key: &str| -> u64 {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(key))
                    .map_or(0, |n| n.parse().unwrap())
            };
            bytes[t] += counter("bytes_received:") + 66 * counter("segs_in:");
        }
        bytes
    }

    /// The exposition at http://`endpoint`/metrics in the host namespace, where
    /// `watch` serves it on loopback: bash's `/dev/tcp`, and the answer's body.
    fn scrape(&self, endpoint: &str) -> String {
        let (ip, port) = endpoint.rsplit_once(':').unwrap();
        let script = format!(
            "exec 3<>/dev/tcp/{ip}/{port} && printf 'GET /metrics HTTP/1.1\\r\\nHost: {endpoint}\\r\\n\\r\\n' >&3 && cat <&3"
        );
        let response = self.host(&["bash", "-c", &script]);
        let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        body.to_string()
    }

    /// Starts `command` in `ns`, stopped when the pair is dropped.
    fn spawn(&mut self, ns: &str, command: &[&str]) {
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(command)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.children.push(child);
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in [&self.host, &self.sink] {
            let _ = Command::new("ip").args(["netns", "delete", ns]).output();
        }
        let _ = std::fs::remove_file(self.record());
    }
}

/// Polls `done` every 50 ms, at most `tries` times.
fn poll(what: &str, tries: u32, mut done: impl FnMut() -> bool) {
    for _ in 0..tries {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: not after {tries} tries");
}

#[test]
fn apply_reads_back_remove_restores_and_a_failure_halfway_changes_nothing() {
    if !common::runnable("realhost apply", &["ip", "tc", "ethtool"]) {
        return;
    }
    let scratch = Scratch::new("realhost-apply");
    let policy = scratch.file("policy.yaml", POLICY);
    let pair = Pair::new("a");
    let dev = pair.dev.as_str();
    let prior = pair.qdiscs();

    let watched = pair.nicsched(&["watch", &policy, "--dev", dev, "--count", "1"], &[]);
    assert_eq!(watched.status.code(), Some(2), "{}", stderr(&watched));
    assert!(stderr(&watched).contains("nicsched has not configured it"));
    let removed = pair.nicsched(&["apply", "--remove", "--dev", dev], &[]);
    assert_eq!(removed.status.code(), Some(2), "{}", stderr(&removed));
    assert!(stderr(&removed).contains("hint:"));

    // Halfway through the first apply: the device as it was, no record.
    let faulty = [("NICSCHED_FAULT", "apply-fails-after=4")];
    let failed = pair.nicsched(&["apply", &policy, "--dev", dev], &faulty);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    assert!(
        stderr(&failed).contains("rolled back"),
        "{}",
        stderr(&failed)
    );
    assert_eq!(pair.qdiscs(), prior);
    assert!(!pair.record().exists());

    let applied = pair.nicsched(&["apply", &policy, "--dev", dev, "--json"], &[]);
    assert!(applied.status.success(), "{}", stderr(&applied));
    let json: serde_json::Value = serde_json::from_slice(&applied.stdout).unwrap();
    schema::assert_valid("apply.schema.json", &json);
    // The link, the unclassified, 2 tenants and 3 apps; gold's filter, bronze's
    // port both ways and its catch-all.
    assert_eq!(json["applied"]["classes"], 7);
    assert_eq!(json["applied"]["filters"], 4);
    assert_eq!(json["applied"]["replaced"], false);
    let tree = pair.tree();
    assert!(
        tree.contains("class htb 1:2 parent 1:1 rate 66666Kbit ceil 100Mbit"),
        "{tree}"
    );
    assert!(tree.contains("flowid 1:5"), "{tree}");

    // Again: the same tree, replacing the last.
    let again = pair.nicsched(&["apply", &policy, "--dev", dev, "--json"], &[]);
    assert!(again.status.success(), "{}", stderr(&again));
    let json: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    schema::assert_valid("apply.schema.json", &json);
    assert_eq!(json["applied"]["replaced"], true);
    assert_eq!(pair.tree(), tree);

    // Halfway through a second apply: the first's tree, and its record.
    let record = std::fs::read_to_string(pair.record()).unwrap();
    let failed = pair.nicsched(&["apply", &policy, "--dev", dev], &faulty);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    assert_eq!(pair.tree(), tree);
    assert_eq!(std::fs::read_to_string(pair.record()).unwrap(), record);

    let removed = pair.nicsched(&["apply", "--remove", "--dev", dev, "--json"], &[]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    let json: serde_json::Value = serde_json::from_slice(&removed.stdout).unwrap();
    schema::assert_valid("apply-remove.schema.json", &json);
    assert_eq!(json["qdiscs"], prior);
    assert_eq!(pair.qdiscs(), prior);
    assert!(!pair.record().exists());
}

#[test]
fn apply_refuses_a_tenant_without_an_address_and_a_device_someone_configured() {
    if !common::runnable("realhost refusals", &["ip", "tc", "ethtool"]) {
        return;
    }
    let scratch = Scratch::new("realhost-refusals");
    let unmatched = scratch.file(
        "policy.yaml",
        "link: { rate: 100Mbit }\ntenants:\n  - { name: a, match: { src: 10.77.0.11/32 } }\n  - { name: b }\n",
    );
    let pair = Pair::new("r");
    let refused = pair.nicsched(&["apply", &unmatched, "--dev", &pair.dev], &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains(&format!(
        "{unmatched}:4:5: error: tenant `b` has no `match.src`"
    )));

    pair.host(&[
        "tc", "qdisc", "add", "dev", &pair.dev, "root", "handle", "7:", "pfifo",
    ]);
    let policy = scratch.file("ok.yaml", POLICY);
    let refused = pair.nicsched(&["apply", &policy, "--dev", &pair.dev], &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("not the kernel's default"),
        "{}",
        stderr(&refused)
    );
    let qdiscs = pair.qdiscs();
    assert_eq!(qdiscs[0]["handle"], "7:", "{qdiscs}");
    assert!(!pair.record().exists());
}

#[test]
fn watch_tracks_the_sink_and_tenants_get_their_ideal() {
    if !common::runnable("realhost watch", &["ip", "tc", "ethtool", "iperf3"]) {
        return;
    }
    let scratch = Scratch::new("realhost-watch");
    let policy = scratch.file("policy.yaml", POLICY);
    let mut pair = Pair::new("w");
    let (host, sink, dev) = (pair.host.clone(), pair.sink.clone(), pair.dev.clone());
    let applied = pair.nicsched(&["apply", &policy, "--dev", &dev], &[]);
    assert!(applied.status.success(), "{}", stderr(&applied));

    for port in ["5301", "5302"] {
        pair.spawn(&sink, &["iperf3", "-s", "-p", port]);
    }
    poll("the sink's iperf3 servers listening", 200, || {
        let listening = pair.sink(&["ss", "-ltn"]);
        listening.contains(":5301") && listening.contains(":5302")
    });
    for (src, port) in [("10.77.0.11", "5301"), ("10.77.0.12", "5302")] {
        pair.spawn(
            &host,
            &[
                "iperf3",
                "-c",
                "10.77.0.2",
                "-p",
                port,
                "-B",
                src,
                "-t",
                "60",
            ],
        );
    }
    poll("both tenants sending", 200, || {
        pair.sink_bytes().iter().all(|&b| b > 1_000_000)
    });

    let mut watch = Command::new("ip")
        .args([
            "netns", "exec", &host, NICSCHED, "watch", &policy, "--dev", &dev,
        ])
        .args(["--json", "--count", "6", "--interval", "1"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut errors = BufReader::new(watch.stderr.take().unwrap()).lines();
    let announced = errors.next().unwrap().unwrap();
    let endpoint = announced
        .strip_prefix("metrics: http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("not where the metrics are: {announced}"))
        .to_string();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut samples = Vec::new();
    let mut sink_at = Vec::new();
    let mut scraped = None;
    for line in lines.by_ref() {
        // Read right after watch printed, as close to its reading as can be.
        sink_at.push(pair.sink_bytes());
        let sample = serde_json::from_str::<serde_json::Value>(&line.unwrap()).unwrap();
        schema::assert_valid("watch.schema.json", &sample);
        samples.push(sample);
        if samples.len() == 2 {
            scraped = Some(pair.scrape(&endpoint));
        }
    }
    let rest: Vec<String> = errors.map(Result::unwrap).collect();
    assert!(watch.wait().unwrap().success(), "{rest:?}");
    assert_eq!(samples.len(), 6);
    assert_metrics_are_a_line(&scraped.unwrap(), &samples);

    // Lines 2 to 6 against the sink between reading line 1 and line 6.
    for (t, name) in ["gold", "bronze"].iter().enumerate() {
        let mut watched_bytes = 0.0;
        for i in 1..samples.len() {
            let seconds =
                samples[i]["time_s"].as_f64().unwrap() - samples[i - 1]["time_s"].as_f64().unwrap();
            let tenant = &samples[i]["tenants"][t];
            assert_eq!(tenant["name"], *name);
            watched_bytes += tenant["throughput_bps"].as_f64().unwrap() * seconds / 8.0;
            assert_eq!(tenant["backlogged"], true, "{name} in {}", samples[i]);
            let (bps, ideal) = (
                tenant["throughput_bps"].as_f64().unwrap(),
                tenant["ideal_bps"].as_f64().unwrap(),
            );
            // `check -e linux-htb`'s worst-case tenant share error.
            assert!(
                (bps - ideal).abs() <= 0.05 * ideal,
                "{name}: {bps} bit/s against its ideal {ideal} in {}",
                samples[i]
            );
        }
        let sunk = (sink_at[samples.len() - 1][t] - sink_at[0][t]) as f64;
        eprintln!("{name}: watch {watched_bytes:.0} B, sink {sunk:.0} B");
        assert!(
            (watched_bytes - sunk).abs() <= 0.03 * sunk,
            "{name}: watch saw {watched_bytes} B, the sink {sunk} B"
        );
    }
    let removed = pair.nicsched(&["apply", "--remove", "--dev", &dev], &[]);
    assert!(removed.status.success(), "{}", stderr(&removed));
}

/// The series of an OpenMetrics exposition, each with its value; `# EOF` last.
fn series(exposition: &str) -> Vec<(String, f64)> {
    assert!(exposition.ends_with("# EOF\n"), "{exposition}");
    exposition
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("`series value`");
            (series.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

/// The metrics scraped are the figures of the `--json` line of the interval
/// they were set at (the one whose `time_s` the elapsed seconds are), exactly;
/// the bytes counters, every line's bytes up to it.
fn assert_metrics_are_a_line(exposition: &str, samples: &[serde_json::Value]) {
    let series = series(exposition);
    let value = |name: &str, labels: &str| {
        let key = format!("{name}{{{labels}}}");
        series
            .iter()
            .find(|(s, _)| *s == key)
            .unwrap_or_else(|| panic!("no {key} in {exposition}"))
            .1
    };
    assert!(
        exposition.contains("# TYPE nicsched_tenant_bytes counter\n")
            && !exposition.contains("nicsched_run_duration_seconds"),
        "{exposition}"
    );
    let elapsed = value("nicsched_run_elapsed_seconds", r#"enforcer="htb""#);
    let at = samples
        .iter()
        .position(|s| s["time_s"].as_f64() == Some(elapsed))
        .unwrap_or_else(|| panic!("no line at {elapsed} s: {samples:?}"));
    for (t, name) in ["gold", "bronze"].iter().enumerate() {
        let labels = format!(r#"enforcer="htb",tenant="{name}""#);
        let tenant = &samples[at]["tenants"][t];
        assert_eq!(
            value("nicsched_tenant_throughput_bits_per_second", &labels),
            tenant["throughput_bps"].as_f64().unwrap()
        );
        assert_eq!(
            value("nicsched_tenant_ideal_bits_per_second", &labels),
            tenant["ideal_bps"].as_f64().unwrap()
        );
        assert_eq!(
            value("nicsched_tenant_backlogged", &labels),
            if tenant["backlogged"] == true {
                1.0
            } else {
                0.0
            }
        );
        let mut since = 0.0;
        let mut lines_bytes = 0.0;
        for sample in &samples[..=at] {
            let time_s = sample["time_s"].as_f64().unwrap();
            lines_bytes +=
                sample["tenants"][t]["throughput_bps"].as_f64().unwrap() * (time_s - since) / 8.0;
            since = time_s;
        }
        let counted = value("nicsched_tenant_bytes_total", &labels);
        assert!(counted > 0.0, "{name}: {exposition}");
        // The lines' rates are the counted bytes over the interval, to f64's
        // rounding.
        assert!(
            (counted - lines_bytes).abs() <= 1e-9 * counted + 1.0,
            "{name}: {counted} bytes counted, the lines say {lines_bytes}"
        );
        assert!(value("nicsched_tenant_drops_total", &labels) >= 0.0);
    }
}
