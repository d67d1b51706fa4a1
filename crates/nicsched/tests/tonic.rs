//! `nicsched apply --mechanism tonic` as an operator runs it, on a "host" namespace
//! whose device is an 8-queue veth to a "sink" namespace: three tenants of
//! different pools send TCP and UDP from their own addresses; the kernel's
//! per-queue counters (the `pfifo_fast` under each Tx queue) hold exactly what the
//! program put on each queue, each tenant's frames only in its pool and spread
//! over it, a prioritised app's in the first band; `--remove` leaves the device's
//! qdiscs, XPS masks and tcx programs as they were.
//!
//! nicsched runs in one mount namespace that outlives each command (a process
//! kept in the host namespace by `ip netns exec`, entered with `nsenter`), as on a
//! host: the BPF filesystem it mounts and pins in stays between commands. Never
//! the machine's own interfaces. Needs root, iproute2, nsenter and iperf3; without
//! them it fails in CI and, elsewhere, says why and passes.

mod common;
mod schema;
mod shell;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use common::Scratch;
use realhost::bpf::tonic::{Layout, open_counters};
use shell::{ok, stderr};

const NICSCHED: &str = env!("CARGO_BIN_EXE_nicsched");
const QUEUES: usize = 8;

/// Pools on 8 queues: a 0-1, b 2, c 3-5; queues 6 and 7 are no one's.
const POLICY: &str = "link: { rate: 1Gbit }
tenants:
  - name: a
    weight: 2
    match: { src: 10.78.0.11/32 }
    apps:
      - { name: rpc, priority: 0, match: { proto: udp, ports: [6000] } }
      - { name: bulk, priority: 1 }
  - { name: b, weight: 1, match: { src: 10.78.0.12/32 } }
  - { name: c, weight: 3, match: { src: 10.78.0.13/32 } }
";
const POOLS: [std::ops::Range<usize>; 3] = [0..2, 2..3, 3..6];

struct Host {
    host: String,
    sink: String,
    dev: String,
    /// Keeps the host's mount namespace (and the BPF filesystem in it) alive.
    keeper: Child,
    children: Vec<Child>,
}

impl Host {
    fn new() -> Host {
        let pid = std::process::id();
        let (host, sink) = (
            format!("nicsched-tn-{pid}-host"),
            format!("nicsched-tn-{pid}-sink"),
        );
        let (dev, peer) = (format!("tn{pid}h"), format!("tn{pid}s"));
        for ns in [&host, &sink] {
            let _ = Command::new("ip").args(["netns", "delete", ns]).output();
            ok(&["ip", "netns", "add", ns]);
            // No frames of their own but the tests': no IPv6 neighbour discovery.
            for key in ["all", "default"] {
                ok(&[
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
                ]);
            }
        }
        let queues = QUEUES.to_string();
        ok(&[
            "ip",
            "link",
            "add",
            "name",
            &dev,
            "numtxqueues",
            &queues,
            "numrxqueues",
            &queues,
            "address",
            "02:00:00:00:00:01",
            "netns",
            &host,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
            "numtxqueues",
            &queues,
            "numrxqueues",
            &queues,
            "address",
            "02:00:00:00:00:02",
            "netns",
            &sink,
        ]);
        // A one-queue device beside it, for the refusal.
        ok(&[
            "ip",
            "-n",
            &host,
            "link",
            "add",
            "name",
            &format!("{dev}1"),
            "type",
            "veth",
            "peer",
            "name",
            &format!("{peer}1"),
        ]);
        for address in ["10.78.0.1", "10.78.0.11", "10.78.0.12", "10.78.0.13"] {
            ok(&[
                "ip",
                "-n",
                &host,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                &dev,
            ]);
            // Neighbours known for good: no ARP either way.
            ok(&[
                "ip",
                "-n",
                &sink,
                "neigh",
                "replace",
                address,
                "lladdr",
                "02:00:00:00:00:01",
                "dev",
                &peer,
                "nud",
                "permanent",
            ]);
        }
        ok(&[
            "ip",
            "-n",
            &sink,
            "addr",
            "add",
            "10.78.0.2/24",
            "dev",
            &peer,
        ]);
        ok(&[
            "ip",
            "-n",
            &host,
            "neigh",
            "replace",
            "10.78.0.2",
            "lladdr",
            "02:00:00:00:00:02",
            "dev",
            &dev,
            "nud",
            "permanent",
        ]);
        for (ns, d) in [(&host, &dev), (&sink, &peer)] {
            ok(&["ip", "-n", ns, "link", "set", d, "up"]);
            ok(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        let keeper = Command::new("ip")
            .args(["netns", "exec", &host, "sleep", "1000000"])
            .spawn()
            .unwrap();
        Host {
            host,
            sink,
            dev,
            keeper,
            children: Vec::new(),
        }
    }

    fn in_host(&self, command: &[&str]) -> String {
        let mut all = vec!["ip", "netns", "exec", &self.host];
        all.extend(command);
        String::from_utf8(ok(&all).stdout).unwrap()
    }

    /// `nicsched ARGS` in the host's network and mount namespaces.
    fn nicsched(&self, args: &[&str]) -> Output {
        Command::new("nsenter")
            .args(["-t", &self.keeper.id().to_string(), "-m", "-n", NICSCHED])
            .args(args)
            .env_remove("NICSCHED_FAULT")
            .output()
            .unwrap()
    }

    /// The host's mount namespace's `path`, seen from here.
    fn in_mounts(&self, path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{path}", self.keeper.id()))
    }

    fn qdiscs(&self) -> serde_json::Value {
        let mut qdiscs: serde_json::Value =
            serde_json::from_str(&self.in_host(&["tc", "-j", "qdisc", "show", "dev", &self.dev]))
                .unwrap();
        for qdisc in qdiscs.as_array_mut().unwrap() {
            qdisc.as_object_mut().unwrap().remove("refcnt");
        }
        qdiscs
    }

    /// Each Tx queue's XPS masks.
    fn xps(&self) -> String {
        self.in_host(&["sh", "-c", &format!(
            "cd /sys/class/net/{}/queues && for q in tx-*; do echo $q $(cat $q/xps_cpus $q/xps_rxqs); done",
            self.dev
        )])
    }

    /// (bytes, packets) the qdisc of each Tx queue sent.
    fn queue_counters(&self) -> Vec<(u64, u64)> {
        let qdiscs: Vec<serde_json::Value> = serde_json::from_str(
            &self.in_host(&["tc", "-s", "-j", "qdisc", "show", "dev", &self.dev]),
        )
        .unwrap();
        let mut counters = vec![(0, 0); QUEUES];
        for q in &qdiscs {
            let Some(minor) = q["parent"].as_str().and_then(|p| p.strip_prefix("1:")) else {
                continue;
            };
            let queue = usize::from_str_radix(minor, 16).unwrap() - 1;
            counters[queue] = (q["bytes"].as_u64().unwrap(), q["packets"].as_u64().unwrap());
        }
        counters
    }

    /// Programs at the device's tcx egress.
    fn tcx_programs(&self) -> u32 {
        let (host, dev) = (self.host.clone(), self.dev.clone());
        std::thread::spawn(move || {
            datapath::sys::netns::enter(&host).unwrap();
            let index = datapath::sys::packet::ifindex(&dev).unwrap();
            realhost::bpf::sys::tcx_egress_programs(index).unwrap()
        })
        .join()
        .unwrap()
    }

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

impl Drop for Host {
    fn drop(&mut self) {
        for child in self.children.iter_mut().chain([&mut self.keeper]) {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in [&self.host, &self.sink] {
            let _ = Command::new("ip").args(["netns", "delete", ns]).output();
        }
        let _ = std::fs::remove_file(format!("/run/nicsched/{}.json", self.dev));
    }
}

#[test]
fn tonic_puts_each_tenant_on_its_pool_prioritises_its_app_and_remove_restores() {
    if !common::runnable("realhost tonic", &["ip", "tc", "nsenter", "iperf3"]) {
        return;
    }
    let scratch = Scratch::new("realhost-tonic");
    let policy = scratch.file("policy.yaml", POLICY);
    let mut h = Host::new();
    let dev = h.dev.clone();
    // An operator's XPS mask, which tonic switches off and --remove puts back.
    h.in_host(&[
        "sh",
        "-c",
        &format!("echo 1 > /sys/class/net/{dev}/queues/tx-1/xps_cpus"),
    ]);
    let (prior_qdiscs, prior_xps) = (h.qdiscs(), h.xps());
    assert_eq!(h.tcx_programs(), 0);

    let unmatched = scratch.file(
        "unmatched.yaml",
        "link: { rate: 1Gbit }\ntenants:\n  - { name: a, match: { src: 10.78.0.11/32 } }\n  - { name: b }\n",
    );
    let refused = h.nicsched(&["apply", &unmatched, "--dev", &dev, "--mechanism", "tonic"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("unmatched.yaml:4:5: error: tenant `b` has no `match.src`"),
        "{}",
        stderr(&refused)
    );
    let one_queue = format!("{dev}1");
    let refused = h.nicsched(&[
        "apply",
        &policy,
        "--dev",
        &one_queue,
        "--mechanism",
        "tonic",
    ]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("1 Tx queue"),
        "{}",
        stderr(&refused)
    );
    assert!(
        stderr(&refused).contains("--mechanism htb"),
        "{}",
        stderr(&refused)
    );

    let applied = h.nicsched(&[
        "apply",
        &policy,
        "--dev",
        &dev,
        "--mechanism",
        "tonic",
        "--json",
    ]);
    assert!(applied.status.success(), "{}", stderr(&applied));
    let json: serde_json::Value = serde_json::from_slice(&applied.stdout).unwrap();
    schema::assert_valid("apply.schema.json", &json);
    let tonic = &json["applied"]["tonic"];
    assert_eq!(tonic["tx_queues"], 8, "{json}");
    for (t, pool) in POOLS.iter().enumerate() {
        assert_eq!(tonic["pools"][t]["first_queue"], pool.start, "{json}");
        assert_eq!(tonic["pools"][t]["last_queue"], pool.end - 1, "{json}");
    }
    // What `check -e tonic` says: weights 2:1:3 exactly as pools.
    let exact = json["approximation"]["exact"].to_string();
    assert!(exact.contains("a (weight 2) -> 2 queue(s) 0..1"), "{exact}");
    assert_eq!(h.tcx_programs(), 1);
    let masks = h.xps();
    let set = masks
        .lines()
        .flat_map(|line| line.split_whitespace().skip(1))
        .any(|mask| mask.chars().any(|c| c != '0' && c != ','));
    assert!(!set, "XPS off while applied: {masks}");
    assert!(prior_xps.contains("tx-1 1 "), "{prior_xps}");

    let before = h.queue_counters();
    for port in ["5301", "6000", "5302", "5303"] {
        let sink = h.sink.clone();
        h.spawn(&sink, &["iperf3", "-s", "-1", "-p", port]);
    }
    let host = h.host.clone();
    let listening = || {
        let ports =
            String::from_utf8(ok(&["ip", "netns", "exec", &h.sink, "ss", "-ltn"]).stdout).unwrap();
        ["5301", "6000", "5302", "5303"]
            .iter()
            .all(|p| ports.contains(&format!(":{p}")))
    };
    for _ in 0..200 {
        if listening() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let clients: Vec<Child> = [
        ("10.78.0.11", "5301", vec![]),
        ("10.78.0.11", "6000", vec!["-u", "-b", "20M"]),
        ("10.78.0.12", "5302", vec![]),
        ("10.78.0.13", "5303", vec!["-u", "-b", "30M", "-P", "3"]),
    ]
    .into_iter()
    .map(|(src, port, extra)| {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &host,
                "iperf3",
                "-c",
                "10.78.0.2",
                "-p",
                port,
                "-B",
                src,
                "-t",
                "2",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    })
    .collect();
    for mut client in clients {
        assert!(client.wait().unwrap().success(), "an iperf3 client failed");
    }

    let after = h.queue_counters();
    let counts = open_counters(
        &h.in_mounts(&format!("/sys/fs/bpf/nicsched/{dev}")),
        Layout {
            tenants: 3,
            queues: QUEUES as u32,
        },
    )
    .unwrap()
    .read()
    .unwrap();
    // The program counts the queue it chose; the kernel may keep a socket's
    // cached queue instead (docs/realhost.md), which is of the same pool.
    let kernel_sent = |queues: std::ops::Range<usize>| {
        queues.fold((0, 0), |(b, p), q| {
            (b + after[q].0 - before[q].0, p + after[q].1 - before[q].1)
        })
    };
    for (t, pool) in POOLS.iter().enumerate() {
        let program = counts.tenant(t);
        let kernel = kernel_sent(pool.clone());
        eprintln!(
            "tenant {t}: the kernel sent {kernel:?} on queues {pool:?} (by queue {:?}), the program put {:?} there (by queue {:?})",
            pool.clone()
                .map(|q| after[q].1 - before[q].1)
                .collect::<Vec<_>>(),
            (program.bytes, program.packets),
            pool.clone()
                .map(|q| counts.queues[t][q].packets)
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            kernel,
            (program.bytes, program.packets),
            "tenant {t}'s pool"
        );
    }
    assert_eq!(kernel_sent(6..8), (0, 0), "no one's queues");
    for (t, pool) in POOLS.iter().enumerate() {
        let total = counts.tenant(t).packets;
        assert!(total > 1000, "tenant {t} sent {total} packets");
        for queue in 0..QUEUES {
            let packets = counts.queues[t][queue].packets;
            if pool.contains(&queue) {
                // Spread over the pool: TCP per packet; each UDP socket keeps the
                // queue its first datagram got (docs/realhost.md).
                assert!(
                    packets > 0,
                    "tenant {t}: nothing on queue {queue} of its pool"
                );
            } else {
                assert_eq!(packets, 0, "tenant {t} on queue {queue}, outside its pool");
            }
        }
    }
    let a_tcp: Vec<u64> = POOLS[0]
        .clone()
        .map(|q| counts.queues[0][q].packets)
        .collect();
    assert!(
        a_tcp.iter().all(|&p| 3 * p > counts.tenant(0).packets),
        "a by queue: {a_tcp:?}"
    );
    // a's datagrams to port 6000 are its prioritised app's; nobody else's are.
    assert!(counts.bands[0][0].packets > 1000, "{:?}", counts.bands);
    assert!(counts.bands[0][1].packets > 1000, "{:?}", counts.bands);
    assert_eq!(
        (counts.bands[1][0].packets, counts.bands[2][0].packets),
        (0, 0)
    );

    let watched = h.nicsched(&[
        "watch",
        &policy,
        "--dev",
        &dev,
        "--json",
        "--count",
        "1",
        "--interval",
        "0.2",
    ]);
    assert!(watched.status.success(), "{}", stderr(&watched));
    let sample: serde_json::Value = serde_json::from_slice(&watched.stdout).unwrap();
    schema::assert_valid("watch.schema.json", &sample);
    assert_eq!(sample["tenants"].as_array().unwrap().len(), 3, "{sample}");

    // Twice is once.
    let again = h.nicsched(&[
        "apply",
        &policy,
        "--dev",
        &dev,
        "--mechanism",
        "tonic",
        "--json",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let json: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(json["applied"]["replaced"], true);
    assert_eq!(h.tcx_programs(), 1);

    let removed = h.nicsched(&["apply", "--remove", "--dev", &dev, "--json"]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    let json: serde_json::Value = serde_json::from_slice(&removed.stdout).unwrap();
    schema::assert_valid("apply-remove.schema.json", &json);
    assert_eq!(json["mechanism"], "tonic", "{json}");
    assert_eq!(h.qdiscs(), prior_qdiscs);
    assert_eq!(h.xps(), prior_xps);
    assert_eq!(h.tcx_programs(), 0);
    assert!(!h.in_mounts(&format!("/sys/fs/bpf/nicsched/{dev}")).exists());
    assert!(!PathBuf::from(format!("/run/nicsched/{dev}.json")).exists());
}
