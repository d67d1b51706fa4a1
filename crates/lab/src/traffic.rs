//! The programs that make a scenario's traffic, one plan per traffic:
//!
//! - `bulk`: an iperf3 server in the sink, an iperf3 client in the tenant with
//!   `-P flows` TCP streams;
//! - `udp`: the same with `-u -b RATE/flows -l SIZE` (a constant rate per stream);
//! - `poisson`: approximated by `udp` (iperf3 paces at a constant rate, it has no
//!   exponential gaps);
//! - `rpc`: a sockperf server in the tenant (its response crosses the link under
//!   study) and `concurrency` sockperf ping-pong clients in the sink, each with a
//!   full log of send and receive times. sockperf echoes the message, so the request
//!   is as large as the response (`-m response`); `rate` becomes `--mps`.
//!
//! Ports: a traffic of an app that lists ports uses the first of them not taken by
//! another traffic; otherwise 5201 and up, skipping every port an app matches, so
//! the classifier sees each traffic as the app it belongs to.

use crate::LabError;
use crate::topology::Plan;
use policy::{Proto, Scenario, TrafficKind};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Programs the lab runs; a test may point one at a program that fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tools {
    pub iperf3: String,
    pub sockperf: String,
}

impl Default for Tools {
    fn default() -> Self {
        Tools {
            iperf3: "iperf3".into(),
            sockperf: "sockperf".into(),
        }
    }
}

/// One program to start in a namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub ns: String,
    pub program: String,
    pub args: Vec<String>,
    pub log: PathBuf,
}

#[derive(Clone, Debug)]
pub struct TrafficPlan {
    pub traffic: usize,
    pub label: String,
    pub servers: Vec<Command>,
    pub clients: Vec<Command>,
    /// sockperf full logs to read latency from (rpc only).
    pub latency_logs: Vec<PathBuf>,
    pub start_ns: u64,
    pub stop_ns: u64,
}

/// Default first port for traffic whose app names none (iperf3's own default).
const PORT_BASE: u16 = 5201;
/// iperf3's limit on parallel streams.
const IPERF3_STREAMS_MAX: u32 = 128;

fn seconds_ceil(ns: u64) -> u64 {
    ns.div_ceil(1_000_000_000).max(1)
}

pub fn plan(
    scenario: &Scenario,
    net: &Plan,
    tools: &Tools,
    dir: &Path,
) -> Result<Vec<TrafficPlan>, LabError> {
    let policy = &scenario.policy;
    let reserved: BTreeSet<u16> = policy
        .apps
        .iter()
        .flat_map(|a| a.match_ports.iter().copied())
        .collect();
    let mut taken: BTreeSet<u16> = BTreeSet::new();
    let mut next_free = PORT_BASE;
    let sink = net.sink_addr.to_string();
    let mut plans = Vec::new();
    for (i, t) in scenario.traffic.iter().enumerate() {
        let app = policy.app(t.app);
        let port = match app.match_ports.iter().find(|p| !taken.contains(p)) {
            Some(&p) => p,
            None if app.match_ports.is_empty() => {
                while reserved.contains(&next_free) || taken.contains(&next_free) {
                    next_free += 1;
                }
                next_free
            }
            None => {
                return Err(LabError::Unsupported(format!(
                    "traffic {}: every port of app {} is taken by another traffic; give the app one more port",
                    t.name, app.name
                )));
            }
        };
        taken.insert(port);
        let tenant = &net.tenants[t.tenant.index()];
        let secs = seconds_ceil(t.stop_ns - t.start_ns) + 1;
        let log = |what: &str| dir.join(format!("{}.{what}.log", t.name));
        let mut plan = TrafficPlan {
            traffic: i,
            label: t.name.clone(),
            servers: Vec::new(),
            clients: Vec::new(),
            latency_logs: Vec::new(),
            start_ns: t.start_ns,
            stop_ns: t.stop_ns,
        };
        let iperf_server = Command {
            ns: net.sink_ns.clone(),
            program: tools.iperf3.clone(),
            args: vec![
                "-s".into(),
                "-B".into(),
                sink.clone(),
                "-p".into(),
                port.to_string(),
            ],
            log: log("server"),
        };
        let iperf_client = |flows: u32, extra: Vec<String>| -> Result<Command, LabError> {
            if flows > IPERF3_STREAMS_MAX {
                return Err(LabError::Unsupported(format!(
                    "traffic {}: {flows} flows, iperf3 runs at most {IPERF3_STREAMS_MAX} streams",
                    t.name
                )));
            }
            let mut args: Vec<String> = [
                "-c",
                &sink,
                "-B",
                &tenant.addr.to_string(),
                "-p",
                &port.to_string(),
                "-P",
                &flows.to_string(),
                "-t",
                &secs.to_string(),
                "-i",
                "0",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(extra);
            Ok(Command {
                ns: tenant.ns.clone(),
                program: tools.iperf3.clone(),
                args,
                log: log("client"),
            })
        };
        match t.kind {
            TrafficKind::Bulk { flows } => {
                plan.servers.push(iperf_server);
                plan.clients.push(iperf_client(flows, Vec::new())?);
            }
            TrafficKind::Udp {
                rate_bps,
                size_bytes,
                flows,
            }
            | TrafficKind::Poisson {
                rate_bps,
                size_bytes,
                flows,
            } => {
                plan.servers.push(iperf_server);
                let extra = vec![
                    "-u".into(),
                    "-b".into(),
                    format!("{}", (rate_bps / u64::from(flows)).max(1)),
                    "-l".into(),
                    size_bytes.to_string(),
                ];
                plan.clients.push(iperf_client(flows, extra)?);
            }
            TrafficKind::Rpc {
                response_bytes,
                concurrency,
                rate_per_s,
                ..
            } => {
                let proto = if app.match_proto == Some(Proto::Udp) {
                    "--udp"
                } else {
                    "--tcp"
                };
                let addr = tenant.addr.to_string();
                plan.servers.push(Command {
                    ns: tenant.ns.clone(),
                    program: tools.sockperf.clone(),
                    args: ["server", proto, "-i", &addr, "-p", &port.to_string()]
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                    log: log("server"),
                });
                let size = response_bytes.clamp(14, 65_000);
                for c in 0..concurrency {
                    let full_log = dir.join(format!("{}.{c}.sockperf.csv", t.name));
                    let mut args: Vec<String> = [
                        "ping-pong",
                        proto,
                        "-i",
                        &addr,
                        "-p",
                        &port.to_string(),
                        "-m",
                        &size.to_string(),
                        "-t",
                        &(secs - 1).to_string(),
                    ]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                    if let Some(rate) = rate_per_s {
                        args.push(format!(
                            "--mps={}",
                            (rate / f64::from(concurrency)).ceil().max(1.0)
                        ));
                    }
                    args.push("--full-log".into());
                    args.push(full_log.display().to_string());
                    plan.latency_logs.push(full_log);
                    plan.clients.push(Command {
                        ns: net.sink_ns.clone(),
                        program: tools.sockperf.clone(),
                        args,
                        log: dir.join(format!("{}.{c}.client.log", t.name)),
                    });
                }
            }
        }
        plans.push(plan);
    }
    Ok(plans)
}

/// Round trips of a sockperf `--full-log`, in nanoseconds: receive time minus send
/// time of every `packet, txTime(sec), rxTime(sec), latency(usec)` row.
pub fn sockperf_round_trips_ns(log: &str) -> Vec<u64> {
    log.lines()
        .filter_map(|line| {
            let mut fields = line.split(',').map(str::trim);
            fields.next()?.parse::<u64>().ok()?;
            let tx: f64 = fields.next()?.parse().ok()?;
            let rx: f64 = fields.next()?.parse().ok()?;
            (rx >= tx).then(|| ((rx - tx) * 1e9).round() as u64)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sockperf_full_logs() {
        let log = "------------------------------\n\
sockperf: ---> percentile 50.000 =   30.925\n\
packet, txTime(sec), rxTime(sec), latency(usec)\n\
0, 2.411002485, 2.411068323, 32.919\n\
1, 2.411068353, 2.411135452, 33.549\n\
------------------------------\n";
        assert_eq!(sockperf_round_trips_ns(log), vec![65_838, 67_099]);
    }

    #[test]
    fn ports_follow_apps_and_avoid_theirs() {
        let dir = Path::new("/tmp");
        let scenario = policy::parse_scenario(
            r#"
policy:
  link: { rate: 1Gbit }
  tenants:
    - name: t1
    - name: t2
      apps:
        - name: probe
          priority: 0
          match: { proto: tcp, ports: [11111] }
        - name: bulk
          match: { proto: tcp, ports: [5201] }
duration: 5s
traffic:
  - { name: a, tenant: t1, kind: bulk, flows: 2 }
  - { name: b, tenant: t2, app: bulk, kind: bulk, flows: 3 }
  - { name: c, tenant: t2, app: probe, kind: rpc, response: 64B, concurrency: 2 }
  - { name: d, tenant: t1, kind: udp, rate: 10Mbit, flows: 2, size: 1000B }
"#,
            "s.yaml",
            Path::new("."),
        )
        .unwrap();
        let net = Plan::new(&scenario.policy, 7).unwrap();
        let plans = plan(&scenario, &net, &Tools::default(), dir).unwrap();
        let port_of = |c: &Command| {
            let i = c.args.iter().position(|a| a == "-p").unwrap();
            c.args[i + 1].clone()
        };
        assert_eq!(port_of(&plans[0].clients[0]), "5202");
        assert_eq!(port_of(&plans[1].clients[0]), "5201");
        assert_eq!(port_of(&plans[2].clients[0]), "11111");
        assert_eq!(port_of(&plans[3].clients[0]), "5203");
        assert_eq!(plans[0].clients[0].ns, net.tenants[0].ns);
        assert_eq!(plans[0].servers[0].ns, net.sink_ns);
        assert!(
            plans[0].clients[0]
                .args
                .windows(2)
                .any(|w| w == ["-P", "2"])
        );
        // rpc: server in the tenant, one client per connection in the sink.
        assert_eq!(plans[2].servers[0].ns, net.tenants[1].ns);
        assert_eq!(plans[2].clients.len(), 2);
        assert_eq!(plans[2].clients[0].ns, net.sink_ns);
        assert_eq!(plans[2].latency_logs.len(), 2);
        // udp: the rate per stream.
        assert!(
            plans[3].clients[0]
                .args
                .windows(2)
                .any(|w| w == ["-b", "5000000"])
        );
    }
}
