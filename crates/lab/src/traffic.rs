//! The programs that make a scenario's traffic, one plan per traffic:
//!
//! - `bulk`: an iperf3 server in the sink, an iperf3 client in the tenant with
//!   `-P flows` TCP streams;
//! - `udp`: the same with `-u -b RATE/flows -l SIZE` (a constant rate per stream);
//! - `poisson`: the lab's own sender ([`crate::generate`]) in the tenant, one UDP
//!   socket per flow with exponential gaps seeded from the scenario's seed; the
//!   sink holds a socket on the port that takes the datagrams and never reads, so
//!   the sink's kernel drops them without answering;
//! - `rpc` of an app that matches TCP port 11211: memcached in the tenant (its
//!   replies cross the link under study) holding one item of `response` bytes, and
//!   the lab's GET load generator in the sink with `concurrency` connections; the
//!   key is as long as makes `get KEY` `request` bytes;
//! - any other `rpc`: a sockperf server in the tenant and `concurrency` sockperf
//!   ping-pong clients in the sink, each with a full log of send and receive times.
//!   sockperf echoes the message, so the request is as large as the response
//!   (`-m response`); `rate` becomes `--mps`.
//!
//! Ports: a traffic of an app that lists ports uses the first of them not taken by
//! another traffic; otherwise 5201 and up, skipping every port an app matches, so
//! the classifier sees each traffic as the app it belongs to. A `bulk` or `udp`
//! traffic whose app's ports are all taken (two traffics of one app, in turn or at
//! once) listens on the app's first port at a sink address of its own; an `rpc` or
//! `poisson` one is refused, since its server or sink socket cannot share the port.
//!
//! Destinations: every traffic goes to the sink's address, except `bulk`, `udp` and
//! `poisson` of an app split by destination: there each flow gets a sink address
//! of its own (and, for iperf3, a server and a one-stream client of its own), so
//! that the enforcer sees as many destination classes as the simulator does.

use crate::LabError;
use crate::classify::{FrameMatch, PortSide, ip_proto};
use crate::generate::{MemcachedLoad, PoissonFlow, PoissonLoad, memcached_key};
use crate::topology::{Plan, TenantNet};
use policy::{App, Gaps, Pacing, Proto, Scenario, SplitBy, Traffic, TrafficKind};
use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};

/// Programs the lab runs; a test may point one at a program that fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tools {
    pub iperf3: String,
    pub sockperf: String,
    pub memcached: String,
}

impl Default for Tools {
    fn default() -> Self {
        Tools {
            iperf3: "iperf3".into(),
            sockperf: "sockperf".into(),
            memcached: "memcached".into(),
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
    /// Runs at SCHED_FIFO: the programs whose latency is measured (sockperf,
    /// memcached), so that on a small machine their round trips measure the link
    /// and its enforcer, not a wait for a core behind the bulk senders.
    pub realtime: bool,
    /// A file the program reads, written (path, contents) just before it starts.
    pub input: Option<(PathBuf, String)>,
}

/// Traffic the lab makes on a thread of its own inside namespace `ns`.
#[derive(Clone, Debug, PartialEq)]
pub struct Generator {
    pub ns: String,
    pub load: Load,
    /// The log of the server it talks to, named when it fails.
    pub server_log: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Load {
    Poisson(PoissonLoad),
    Memcached(MemcachedLoad),
}

impl Generator {
    /// What it is, after the traffic's name in messages.
    pub fn role(&self) -> &'static str {
        match self.load {
            Load::Poisson(_) => "poisson sender",
            Load::Memcached(_) => "memcached load generator",
        }
    }
}

/// Where a traffic's own programs count what crossed the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// iperf3's JSON: its servers' logs (bytes received) and its clients' (sent).
    Iperf3,
    /// The sockperf clients' summaries, echoes of `message_bytes` each.
    Sockperf { message_bytes: u32 },
    /// The lab's own generator ([`crate::generate::Tally`]).
    Generator,
}

#[derive(Clone, Debug)]
pub struct TrafficPlan {
    pub traffic: usize,
    pub label: String,
    pub frames: FrameMatch,
    pub counted: Counted,
    pub servers: Vec<Command>,
    pub clients: Vec<Command>,
    /// Started with the clients, stopped with them.
    pub generator: Option<Generator>,
    /// A UDP port the sink takes datagrams on without reading them (poisson).
    pub udp_sink_port: Option<u16>,
    /// sockperf full logs to read latency from (rpc only).
    pub latency_logs: Vec<PathBuf>,
    pub start_ns: u64,
    pub stop_ns: u64,
}

/// How many of `plans`' clients pace an open-loop rpc with sockperf's `--mps`.
/// sockperf waits between requests by spinning, so each keeps a core busy for
/// the whole run (`sockperf ping-pong --mps=250` used 2.95 s of CPU in 3 s);
/// memcached's load generator, the lab's own, sleeps.
pub fn spinning_clients(plans: &[TrafficPlan]) -> usize {
    plans
        .iter()
        .flat_map(|p| &p.clients)
        .filter(|c| c.args.iter().any(|a| a.starts_with("--mps=")))
        .count()
}

/// Default first port for traffic whose app names none (iperf3's own default).
const PORT_BASE: u16 = 5201;
/// iperf3's limit on parallel streams.
pub const IPERF3_STREAMS_MAX: u32 = 128;
/// memcached's port: an rpc traffic of an app that matches it runs memcached.
pub const MEMCACHED_PORT: u16 = 11211;
/// The largest item memcached stores with its default `-I 1m` (1 MiB less its
/// own header and our key).
const MEMCACHED_ITEM_BYTES_MAX: u32 = 1_000_000;
/// Poisson flows at most: one socket each, well inside the default limit of 1024
/// open files.
const POISSON_FLOWS_MAX: u32 = 512;
/// Largest UDP payload of an IPv4 datagram.
const UDP_PAYLOAD_BYTES_MAX: u32 = 65_507;

/// Whether an rpc traffic of `app` runs memcached rather than sockperf.
pub fn serves_memcached(app: &App) -> bool {
    app.match_proto != Some(Proto::Udp) && app.match_ports.contains(&MEMCACHED_PORT)
}

/// The seed of flow `flow` of traffic `traffic`: one stream per flow, all from the
/// scenario's seed (splitmix64 of the three, so nearby indices give unrelated seeds).
pub fn flow_seed(seed: u64, traffic: usize, flow: u32) -> u64 {
    let mut z =
        seed ^ ((traffic as u64) << 32 | u64::from(flow)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn seconds_ceil(ns: u64) -> u64 {
    ns.div_ceil(1_000_000_000).max(1)
}

/// The program that makes a traffic in the lab: its kind's generator here, chosen
/// by how the kind paces itself, with what the program needs of the kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Program {
    /// iperf3: TCP streams (bulk), or datagrams at a constant rate (udp).
    Iperf3 { datagrams: Option<(u64, u32)> },
    /// The lab's own sender of datagrams at exponential gaps.
    PoissonSender { rate_bps: u64, size_bytes: u32 },
    /// memcached in the tenant, the lab's GET load generator in the sink.
    Memcached {
        request_bytes: u32,
        response_bytes: u32,
        rate_per_s: Option<f64>,
    },
    /// A sockperf server in the tenant, ping-pong clients in the sink.
    Sockperf {
        response_bytes: u32,
        rate_per_s: Option<f64>,
    },
}

impl Program {
    pub(crate) fn of(kind: &TrafficKind, app: &App) -> Program {
        match kind.pacing() {
            Pacing::Backlogged => Program::Iperf3 { datagrams: None },
            Pacing::Datagrams {
                rate_bps,
                size_bytes,
                gaps: Gaps::Constant,
            } => Program::Iperf3 {
                datagrams: Some((rate_bps, size_bytes)),
            },
            Pacing::Datagrams {
                rate_bps,
                size_bytes,
                gaps: Gaps::Exponential,
            } => Program::PoissonSender {
                rate_bps,
                size_bytes,
            },
            Pacing::Requests {
                request_bytes,
                response_bytes,
                rate_per_s,
            } if serves_memcached(app) => Program::Memcached {
                request_bytes,
                response_bytes,
                rate_per_s,
            },
            Pacing::Requests {
                response_bytes,
                rate_per_s,
                ..
            } => Program::Sockperf {
                response_bytes,
                rate_per_s,
            },
        }
    }

    /// Whether a traffic may listen on a port another traffic took, at a sink
    /// address of its own: an iperf3 server binds one address, while a request
    /// server in the tenant or the poisson sink's socket holds the port itself.
    fn shares_port(self) -> bool {
        matches!(self, Program::Iperf3 { .. })
    }

    fn counted(self) -> Counted {
        match self {
            Program::Iperf3 { .. } => Counted::Iperf3,
            Program::PoissonSender { .. } | Program::Memcached { .. } => Counted::Generator,
            Program::Sockperf { response_bytes, .. } => Counted::Sockperf {
                message_bytes: sockperf_message_bytes(response_bytes),
            },
        }
    }
}

/// The ports the plan gave out so far, and where the search for a free one for an
/// app that lists none goes on.
struct Ports {
    /// Every port an app matches: never given to a traffic of another app.
    reserved: BTreeSet<u16>,
    taken: BTreeSet<u16>,
    next_free: u16,
}

impl Ports {
    fn new(policy: &policy::Policy) -> Ports {
        Ports {
            reserved: policy
                .apps
                .iter()
                .flat_map(|a| a.match_ports.iter().copied())
                .collect(),
            taken: BTreeSet::new(),
            next_free: PORT_BASE,
        }
    }

    /// The port of traffic `t` of `app`, and the sink address of its own it needs
    /// when every port of its app is taken and it `may_share` one.
    fn take(
        &mut self,
        t: &Traffic,
        app: &App,
        may_share: bool,
        net: &mut Plan,
    ) -> Result<(u16, Option<Ipv4Addr>), LabError> {
        let mut own_address = None;
        let port = match app.match_ports.iter().find(|p| !self.taken.contains(p)) {
            Some(&p) => p,
            None if app.match_ports.is_empty() => {
                while self.reserved.contains(&self.next_free)
                    || self.taken.contains(&self.next_free)
                {
                    self.next_free += 1;
                }
                self.next_free
            }
            None if may_share => {
                let what = format!(
                    "traffic {} (every port of app {} is taken, so it needs a sink address of its own)",
                    t.name, app.name
                );
                own_address = Some(net.add_sink_address(&what)?);
                app.match_ports[0]
            }
            None => {
                return Err(LabError::Unsupported(format!(
                    "traffic {}: every port of app {} is taken by another traffic; give the app one more port",
                    t.name, app.name
                )));
            }
        };
        self.taken.insert(port);
        Ok((port, own_address))
    }
}

/// The sink addresses traffic `t` sends to: one per flow when they are split by
/// destination, else its own address or the sink's.
fn destinations(
    t: &Traffic,
    app: &App,
    split_by_destination: bool,
    own_address: Option<Ipv4Addr>,
    net: &mut Plan,
) -> Result<Vec<Ipv4Addr>, LabError> {
    if !split_by_destination {
        return Ok(vec![own_address.unwrap_or(net.sink_addr)]);
    }
    let flows = t.kind.flows();
    let what = format!(
        "traffic {} ({flows} flows of app {}, split by destination, each needs a sink address of its own)",
        t.name, app.name
    );
    (0..flows).map(|_| net.add_sink_address(&what)).collect()
}

/// The plan of every traffic of `scenario`; sink addresses for flows split by
/// destination are added to `net`, which is built after.
pub fn plan(
    scenario: &Scenario,
    net: &mut Plan,
    tools: &Tools,
    dir: &Path,
) -> Result<Vec<TrafficPlan>, LabError> {
    let mut ports = Ports::new(&scenario.policy);
    let mut plans = Vec::new();
    for (index, traffic) in scenario.traffic.iter().enumerate() {
        let app = scenario.policy.app(traffic.app);
        let program = Program::of(&traffic.kind, app);
        // Flows of requests all come from the sink's clients to the tenant's server.
        let split_by_destination =
            !traffic.kind.has_requests() && app.split.is_some_and(|s| s.by == SplitBy::Destination);
        let (port, own_address) = ports.take(
            traffic,
            app,
            program.shares_port() && !split_by_destination,
            net,
        )?;
        let destinations = destinations(traffic, app, split_by_destination, own_address, net)?;
        let planned = Planned {
            seed: scenario.seed,
            index,
            traffic,
            app,
            net,
            tools,
            dir,
            port,
            destinations,
        };
        let mut plan = planned.frames_and_counts(program);
        match program {
            Program::Iperf3 { datagrams } => planned.iperf3(&mut plan, datagrams)?,
            Program::PoissonSender {
                rate_bps,
                size_bytes,
            } => planned.poisson_sender(&mut plan, rate_bps, size_bytes)?,
            Program::Memcached {
                request_bytes,
                response_bytes,
                rate_per_s,
            } => planned.memcached(&mut plan, request_bytes, response_bytes, rate_per_s)?,
            Program::Sockperf {
                response_bytes,
                rate_per_s,
            } => planned.sockperf(&mut plan, response_bytes, rate_per_s),
        }
        plans.push(plan);
    }
    Ok(plans)
}

/// One traffic with its port and destinations chosen: what its programs are
/// planned from.
struct Planned<'a> {
    seed: u64,
    index: usize,
    traffic: &'a Traffic,
    app: &'a App,
    net: &'a Plan,
    tools: &'a Tools,
    dir: &'a Path,
    port: u16,
    destinations: Vec<Ipv4Addr>,
}

impl Planned<'_> {
    fn tenant(&self) -> &TenantNet {
        &self.net.tenants[self.traffic.tenant.index()]
    }

    /// Seconds its clients run: the traffic's time, rounded up, and one more.
    fn secs(&self) -> u64 {
        seconds_ceil(self.traffic.stop_ns - self.traffic.start_ns) + 1
    }

    fn log(&self, what: &str) -> PathBuf {
        self.dir.join(format!("{}.{what}.log", self.traffic.name))
    }

    /// The plan with what tells its frames on the link and where they are counted,
    /// and no program yet.
    fn frames_and_counts(&self, program: Program) -> TrafficPlan {
        let t = self.traffic;
        let proto = ip_proto(t.kind.proto(self.app));
        let (port, destinations) = if t.kind.has_requests() {
            (PortSide::Source(self.port), Vec::new())
        } else {
            (PortSide::Destination(self.port), self.destinations.clone())
        };
        TrafficPlan {
            traffic: self.index,
            label: t.name.clone(),
            frames: FrameMatch {
                tenant: t.tenant,
                proto,
                port,
                destinations,
            },
            counted: program.counted(),
            servers: Vec::new(),
            clients: Vec::new(),
            generator: None,
            udp_sink_port: None,
            latency_logs: Vec::new(),
            start_ns: t.start_ns,
            stop_ns: t.stop_ns,
        }
    }

    /// One iperf3 server and client per destination: the traffic's streams to the
    /// sink's address, or one stream to each address of a destination split;
    /// `datagrams` (rate over all flows, size) for udp.
    fn iperf3(
        &self,
        plan: &mut TrafficPlan,
        datagrams: Option<(u64, u32)>,
    ) -> Result<(), LabError> {
        let t = self.traffic;
        let flows = t.kind.flows();
        let extra = iperf3_options(flows, datagrams);
        let streams = flows / self.destinations.len() as u32;
        if streams > IPERF3_STREAMS_MAX {
            return Err(LabError::Unsupported(format!(
                "traffic {}: {streams} flows, iperf3 runs at most {IPERF3_STREAMS_MAX} streams",
                t.name
            )));
        }
        let tenant = self.tenant();
        for (k, dst) in self.destinations.iter().enumerate() {
            let tag = if self.destinations.len() > 1 {
                format!("{k}.")
            } else {
                String::new()
            };
            let (server, client) = iperf3_pair(
                self.tools,
                (&self.net.sink_ns, *dst, self.log(&format!("{tag}server"))),
                (&tenant.ns, tenant.addr, self.log(&format!("{tag}client"))),
                self.port,
                streams,
                self.secs(),
                &extra,
            );
            plan.servers.push(server);
            plan.clients.push(client);
        }
        Ok(())
    }

    /// The lab's poisson sender in the tenant, a socket per flow, each to its
    /// destination; the sink takes the datagrams on the port without reading them.
    fn poisson_sender(
        &self,
        plan: &mut TrafficPlan,
        rate_bps: u64,
        size_bytes: u32,
    ) -> Result<(), LabError> {
        let t = self.traffic;
        let flows = t.kind.flows();
        if flows > POISSON_FLOWS_MAX {
            return Err(LabError::Unsupported(format!(
                "traffic {}: {flows} flows, the lab's poisson sender opens a socket per flow and runs at most {POISSON_FLOWS_MAX}",
                t.name
            )));
        }
        if size_bytes > UDP_PAYLOAD_BYTES_MAX {
            return Err(LabError::Unsupported(format!(
                "traffic {}: datagrams of {size_bytes} B, UDP carries at most {UDP_PAYLOAD_BYTES_MAX} B",
                t.name
            )));
        }
        let tenant = self.tenant();
        let flow_rate_bps = rate_bps as f64 / f64::from(flows);
        plan.udp_sink_port = Some(self.port);
        plan.generator = Some(Generator {
            ns: tenant.ns.clone(),
            load: Load::Poisson(PoissonLoad {
                flows: (0..flows)
                    .map(|f| PoissonFlow {
                        src: tenant.addr,
                        dst: SocketAddrV4::new(
                            self.destinations[f as usize % self.destinations.len()],
                            self.port,
                        ),
                        seed: flow_seed(self.seed, self.index, f),
                    })
                    .collect(),
                payload_bytes: size_bytes,
                mean_gap_ns: f64::from(size_bytes) * 8e9 / flow_rate_bps,
            }),
            server_log: None,
        });
        Ok(())
    }

    /// memcached in the tenant holding one item of the response's size, and the
    /// lab's GET load generator in the sink.
    fn memcached(
        &self,
        plan: &mut TrafficPlan,
        request_bytes: u32,
        response_bytes: u32,
        rate_per_s: Option<f64>,
    ) -> Result<(), LabError> {
        if response_bytes > MEMCACHED_ITEM_BYTES_MAX {
            return Err(LabError::Unsupported(format!(
                "traffic {}: a memcached item of {response_bytes} B; the lab's memcached stores items of up to {MEMCACHED_ITEM_BYTES_MAX} B",
                self.traffic.name
            )));
        }
        let tenant = self.tenant();
        let addr = tenant.addr.to_string();
        let memcached_log = self.log("memcached");
        plan.servers.push(Command {
            ns: tenant.ns.clone(),
            program: self.tools.memcached.clone(),
            // No UDP port; 64 MiB holds the one item many times over;
            // root may run it only with `-u root`.
            args: [
                "-U",
                "0",
                "-u",
                "root",
                "-l",
                &addr,
                "-p",
                &self.port.to_string(),
                "-m",
                "64",
                "-t",
                "1",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            log: memcached_log.clone(),
            realtime: true,
            input: None,
        });
        plan.generator = Some(Generator {
            ns: self.net.sink_ns.clone(),
            load: Load::Memcached(MemcachedLoad {
                server: SocketAddrV4::new(tenant.addr, self.port),
                key: memcached_key(self.index, request_bytes),
                item_bytes: response_bytes,
                connections: self.traffic.kind.flows(),
                rate_per_s,
            }),
            server_log: Some(memcached_log),
        });
        Ok(())
    }

    /// A sockperf server in the tenant and a ping-pong client per connection in
    /// the sink, each keeping a full log of its round trips.
    fn sockperf(&self, plan: &mut TrafficPlan, response_bytes: u32, rate_per_s: Option<f64>) {
        let t = self.traffic;
        let tenant = self.tenant();
        let proto = match t.kind.proto(self.app) {
            Proto::Udp => "--udp",
            Proto::Tcp => "--tcp",
        };
        let addr = tenant.addr.to_string();
        // Given only an address, sockperf's server blocks in recvfrom on
        // the first TCP connection it accepts and leaves the others
        // unanswered until that one closes: a closed-loop rpc of
        // concurrency 4 ran on one connection. From a feed file it waits
        // on every connection with epoll.
        let feed = self.dir.join(format!("{}.sockperf.feed", t.name));
        let feed_line = format!(
            "{}:{addr}:{}\n",
            if proto == "--udp" { "U" } else { "T" },
            self.port
        );
        plan.servers.push(Command {
            ns: tenant.ns.clone(),
            program: self.tools.sockperf.clone(),
            args: ["server", "-f", &feed.display().to_string(), "-F", "epoll"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            log: self.log("server"),
            realtime: true,
            input: Some((feed, feed_line)),
        });
        let size = sockperf_message_bytes(response_bytes);
        let concurrency = t.kind.flows();
        for c in 0..concurrency {
            let full_log = self.dir.join(format!("{}.{c}.sockperf.csv", t.name));
            let mut args: Vec<String> = [
                "ping-pong",
                proto,
                "-i",
                &addr,
                "-p",
                &self.port.to_string(),
                "-m",
                &size.to_string(),
                "-t",
                &(self.secs() - 1).to_string(),
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
                ns: self.net.sink_ns.clone(),
                program: self.tools.sockperf.clone(),
                args,
                log: self.dir.join(format!("{}.{c}.client.log", t.name)),
                realtime: true,
                input: None,
            });
        }
    }
}

/// The iperf3 client's options for a traffic of `flows` flows: `datagrams` (rate
/// over all flows, size) for udp, TCP streams without.
pub(crate) fn iperf3_options(flows: u32, datagrams: Option<(u64, u32)>) -> Vec<String> {
    match datagrams {
        Some((rate_bps, size_bytes)) => vec![
            "-u".into(),
            "-b".into(),
            format!("{}", (rate_bps / u64::from(flows)).max(1)),
            "-l".into(),
            size_bytes.to_string(),
        ],
        // TCP as the papers' hosts and the simulator's senders run it, whatever
        // this host's default: CUBIC, Linux's own. (BBR, the default on some
        // hosts, cuts every flow to 4 packets for 200 ms every 10 s to probe
        // the RTT: a dip in every run at 10 s.) Set per socket: a namespace's
        // default can only name algorithms the host allows.
        None => vec!["-C".into(), "cubic".into()],
    }
}

/// An iperf3 server (namespace, address, log) for one test and its client sending
/// `streams` streams from its own address to the server's `port` for `secs`
/// seconds; `extra`: the client's further options (`-u -b ...`, `-C cubic`).
pub fn iperf3_pair(
    tools: &Tools,
    server: (&str, Ipv4Addr, PathBuf),
    client: (&str, Ipv4Addr, PathBuf),
    port: u16,
    streams: u32,
    secs: u64,
    extra: &[String],
) -> (Command, Command) {
    let args = |list: &[&str]| -> Vec<String> { list.iter().map(|a| a.to_string()).collect() };
    let (server_ns, server_addr, server_log) = server;
    let (client_ns, client_addr, client_log) = client;
    let (dst, port) = (server_addr.to_string(), port.to_string());
    let server = Command {
        ns: server_ns.to_string(),
        program: tools.iperf3.clone(),
        // One test, then it exits having written its JSON: the run waits for that
        // before it reads the bytes received.
        args: args(&["-s", "-1", "-J", "-i", "0", "-B", &dst, "-p", &port]),
        log: server_log,
        realtime: false,
        input: None,
    };
    let mut client_args = args(&[
        "-c",
        &dst,
        "-B",
        &client_addr.to_string(),
        "-p",
        &port,
        "-P",
        &streams.to_string(),
        "-t",
        &secs.to_string(),
        "-i",
        "0",
        "-J",
    ]);
    client_args.extend_from_slice(extra);
    let client = Command {
        ns: client_ns.to_string(),
        program: tools.iperf3.clone(),
        args: client_args,
        log: client_log,
        realtime: false,
        input: None,
    };
    (server, client)
}

/// sockperf's message size for a response of `response_bytes`: within what it sends.
fn sockperf_message_bytes(response_bytes: u32) -> u32 {
    response_bytes.clamp(14, 65_000)
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

/// What one iperf3 end counted, from its `-J` output: bytes received (a server's
/// `end.sum_received`), bytes and datagrams sent and the seconds it sent for (a
/// client's `end.sum_sent`, and for UDP `end.sum.packets`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Iperf3Result {
    pub received_bytes: u64,
    pub sent_bytes: u64,
    /// A TCP client's retransmitted segments times its MSS: at most the payload
    /// its TCP sent again, which crosses the link again. 0 where iperf3 reports
    /// neither (UDP, a server's log).
    pub retransmitted_bytes: u64,
    pub sent_datagrams: u64,
    pub sent_seconds: f64,
}

/// The first JSON object of an iperf3 log, whatever precedes it; `None` without one
/// (the program never got to write it) or without its `end`.
pub fn iperf3_result(log: &str) -> Option<Iperf3Result> {
    let json = &log[log.find('{')?..];
    let value: serde_json::Value = serde_json::Deserializer::from_str(json)
        .into_iter()
        .next()?
        .ok()?;
    let end = value.get("end")?;
    let u64_at = |path: &[&str]| {
        path.iter()
            .try_fold(end, |v, key| v.get(key))
            .and_then(serde_json::Value::as_u64)
    };
    Some(Iperf3Result {
        received_bytes: u64_at(&["sum_received", "bytes"])?,
        sent_bytes: u64_at(&["sum_sent", "bytes"])?,
        retransmitted_bytes: u64_at(&["sum_sent", "retransmits"])
            .unwrap_or(0)
            .saturating_mul(
                value
                    .get("start")
                    .and_then(|start| start.get("tcp_mss_default"))
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0),
            ),
        sent_datagrams: u64_at(&["sum", "packets"]).unwrap_or(0),
        sent_seconds: end.get("sum_sent")?.get("seconds")?.as_f64()?,
    })
}

/// Messages a sockperf ping-pong client received back, from its `[Total Run]`
/// summary; `None` when it wrote none.
pub fn sockperf_received_messages(log: &str) -> Option<u64> {
    sockperf_total_run(log).map(|run| run.received_messages)
}

/// A sockperf ping-pong client's `[Total Run]` summary: what it sent and received
/// from its first message (its warm-up included) to its end.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SockperfRun {
    pub run_seconds: f64,
    pub sent_messages: u64,
    pub received_messages: u64,
}

/// The `[Total Run]` summary of a sockperf client's log; nothing sent where it
/// says so (stopped in its warm-up, before its test began) or where its server
/// never answered (then no response of it crossed the link, which is what its
/// requests are counted for); `None` when it wrote none of these (it was killed).
pub fn sockperf_total_run(log: &str) -> Option<SockperfRun> {
    if log.contains("sockperf: No messages were sent")
        || log.contains("sockperf: No messages were received from the server")
    {
        return Some(SockperfRun {
            run_seconds: 0.0,
            sent_messages: 0,
            received_messages: 0,
        });
    }
    let line = log.lines().find(|l| l.contains("[Total Run]"))?;
    let field = |name: &str| {
        line.split(';')
            .find_map(|f| f.split("[Total Run]").last()?.trim().strip_prefix(name))
            .map(str::trim)
    };
    Some(SockperfRun {
        run_seconds: field("RunTime=")?
            .strip_suffix("sec")?
            .trim()
            .parse()
            .ok()?,
        sent_messages: field("SentMessages=")?.parse().ok()?,
        received_messages: field("ReceivedMessages=")?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{Ipv4Header, PROTO_TCP, PROTO_UDP};
    use policy::TenantId;

    #[test]
    fn reads_what_iperf3_and_sockperf_counted() {
        let server = r#"warning: something
{ "start": {}, "intervals": [],
  "end": { "sum_sent": { "seconds": 1.0, "bytes": 0 },
           "sum_received": { "seconds": 1.0, "bytes": 4876352, "packets": 78753 },
           "sum": { "bytes": 0, "packets": 78753 } },
  "error": "the client has terminated" }"#;
        let result = iperf3_result(server).unwrap();
        assert_eq!(result.received_bytes, 4_876_352);
        let client = r#"{ "end": { "sum_sent": { "seconds": 1.531127, "bytes": 5049920 },
            "sum_received": { "bytes": 0 }, "sum": { "packets": 78906 } } }"#;
        let result = iperf3_result(client).unwrap();
        assert_eq!(
            (
                result.sent_bytes,
                result.sent_datagrams,
                result.sent_seconds
            ),
            (5_049_920, 78_906, 1.531127)
        );
        let tcp_client = r#"{ "start": { "tcp_mss_default": 1448 },
            "end": { "sum_sent": { "seconds": 4.0, "bytes": 36100000, "retransmits": 2300 },
            "sum_received": { "bytes": 36000000 } } }"#;
        let result = iperf3_result(tcp_client).unwrap();
        assert_eq!(result.retransmitted_bytes, 2300 * 1448);
        assert_eq!(iperf3_result(client).unwrap().retransmitted_bytes, 0);
        assert_eq!(iperf3_result("iperf3: error - unable to connect"), None);
        assert_eq!(iperf3_result(r#"{"start": {}}"#), None);
        let sockperf = "sockperf: Test end (interrupted by timer)\n\
sockperf: [Total Run] RunTime=1.000 sec; Warm up time=400 msec; SentMessages=24157; ReceivedMessages=24156\n\
sockperf: [Valid Duration] RunTime=0.550 sec; SentMessages=13835; ReceivedMessages=13835\n";
        assert_eq!(sockperf_received_messages(sockperf), Some(24_156));
        assert_eq!(
            sockperf_total_run(sockperf),
            Some(SockperfRun {
                run_seconds: 1.0,
                sent_messages: 24_157,
                received_messages: 24_156,
            })
        );
        let never_began = "sockperf: Warmup stage (sending a few dummy messages)...\n\
sockperf: Test end (interrupted by user)\n\
sockperf: Test ended\n\
sockperf: No messages were sent\n";
        assert_eq!(
            sockperf_total_run(never_began).map(|run| run.sent_messages),
            Some(0)
        );
        let unanswered = "sockperf: Starting test...\n\
sockperf: Test end (interrupted by user)\n\
sockperf: No messages were received from the server. Is the server down?\n";
        assert_eq!(
            sockperf_total_run(unanswered).map(|run| run.received_messages),
            Some(0)
        );
        assert_eq!(
            sockperf_received_messages("sockperf: Test end (interrupted by user)\n"),
            None
        );
    }

    #[test]
    fn each_traffics_frames_are_told_apart() {
        let s = scenario(
            "policy:
  link: { rate: 1Gbit }
  tenants:
    - name: t1
      apps:
        - { name: probe, priority: 0, match: { proto: tcp, ports: [11111] } }
        - { name: batch }
duration: 4s
traffic:
  - { name: bulk, tenant: t1, app: batch, kind: bulk, flows: 4 }
  - { name: ping, tenant: t1, app: probe, kind: rpc }
  - { name: flood, tenant: t1, app: batch, kind: udp, rate: 1Gbit }
",
        );
        let mut net = Plan::new(&s.policy, 7).unwrap();
        let plans = plan(&s, &mut net, &Tools::default(), Path::new("/tmp")).unwrap();
        let frame = |proto, src_port, dst_port| Ipv4Header {
            len_bytes: 100,
            total_bytes: 100,
            src: net.tenants[0].addr,
            dst: net.sink_addr,
            proto,
            src_port,
            dst_port,
        };
        let owner = |ip: &Ipv4Header| -> Vec<&str> {
            plans
                .iter()
                .filter(|p| p.frames.matches(TenantId(0), ip))
                .map(|p| p.label.as_str())
                .collect()
        };
        assert_eq!(owner(&frame(PROTO_TCP, 40000, 5201)), ["bulk"]);
        assert_eq!(owner(&frame(PROTO_TCP, 11111, 40000)), ["ping"]);
        assert_eq!(owner(&frame(PROTO_UDP, 40000, 5202)), ["flood"]);
        // iperf3's control connection of the UDP traffic is TCP: no traffic's bytes.
        assert!(owner(&frame(PROTO_TCP, 40000, 5202)).is_empty());
        assert_eq!(plans[0].counted, Counted::Iperf3);
        assert_eq!(plans[1].counted, Counted::Sockperf { message_bytes: 64 });
    }

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
            &crate::enforcer_names(),
        )
        .unwrap();
        let mut net = Plan::new(&scenario.policy, 7).unwrap();
        let plans = plan(&scenario, &mut net, &Tools::default(), dir).unwrap();
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
        // The server waits on every connection (epoll) from a feed file naming
        // its address and port, written before it starts.
        let server = &plans[2].servers[0];
        let feed = dir.join("c.sockperf.feed");
        assert_eq!(
            server.args,
            ["server", "-f", &feed.display().to_string(), "-F", "epoll"]
        );
        assert_eq!(
            server.input,
            Some((feed, format!("T:{}:11111\n", net.tenants[1].addr)))
        );
        // udp: the rate per stream.
        assert!(
            plans[3].clients[0]
                .args
                .windows(2)
                .any(|w| w == ["-b", "5000000"])
        );
    }

    fn scenario(yaml: &str) -> Scenario {
        policy::parse_scenario(yaml, "s.yaml", Path::new("."), &crate::enforcer_names()).unwrap()
    }

    #[test]
    fn iperf3_traffics_of_an_app_without_a_free_port_get_a_sink_address_of_their_own() {
        let s = scenario(
            "policy:
  link: { rate: 1Gbit }
  tenants:
    - name: t1
      apps:
        - { name: kvs, match: { proto: tcp, ports: [11211] } }
        - { name: probe, match: { proto: tcp, ports: [11111] } }
duration: 4s
traffic:
  - { name: before, tenant: t1, app: kvs, kind: bulk, flows: 2, stop: 1s }
  - { name: after, tenant: t1, app: kvs, kind: bulk, flows: 2, start: 2s }
  - { name: ping, tenant: t1, app: probe, kind: rpc }
  - { name: pong, tenant: t1, app: probe, kind: rpc }
",
        );
        let mut net = Plan::new(&s.policy, 7).unwrap();
        let error = plan(&s, &mut net, &Tools::default(), Path::new("/tmp")).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("traffic pong: every port of app probe is taken"),
            "rpc servers cannot share a port: {error}"
        );
        let mut s = s;
        s.traffic.truncate(2);
        let mut net = Plan::new(&s.policy, 7).unwrap();
        let plans = plan(&s, &mut net, &Tools::default(), Path::new("/tmp")).unwrap();
        let (first, second) = (&plans[0].servers[0].args, &plans[1].servers[0].args);
        assert_eq!(
            first,
            &[
                "-s",
                "-1",
                "-J",
                "-i",
                "0",
                "-B",
                &net.sink_addr.to_string(),
                "-p",
                "11211"
            ]
        );
        assert_eq!(net.sink_extra.len(), 1);
        assert_eq!(
            second,
            &[
                "-s",
                "-1",
                "-J",
                "-i",
                "0",
                "-B",
                &net.sink_extra[0].to_string(),
                "-p",
                "11211"
            ]
        );
        assert!(
            plans[1].clients[0]
                .args
                .windows(2)
                .any(|w| w[0] == "-c" && w[1] == net.sink_extra[0].to_string())
        );
    }

    const KVS_POLICY: &str = r#"
policy:
  link: { rate: 1Gbit }
  tenants:
    - name: t1
    - name: t2
      apps:
        - name: kvs
          match: { proto: tcp, ports: [11211, 11212] }
        - name: probe
          match: { proto: tcp, ports: [11111] }
duration: 4s
seed: 9
"#;

    #[test]
    fn rpc_of_the_memcached_port_runs_memcached_and_the_load_generator() {
        let s = scenario(&format!(
            "{KVS_POLICY}traffic:
  - {{ name: m, tenant: t2, app: kvs, kind: rpc, request: 64B, response: 1KiB, concurrency: 3 }}
  - {{ name: n, tenant: t2, app: kvs, kind: rpc, response: 100B, rate: 500, start: 1s }}
  - {{ name: p, tenant: t2, app: probe, kind: rpc }}
"
        ));
        let mut net = Plan::new(&s.policy, 7).unwrap();
        let plans = plan(&s, &mut net, &Tools::default(), Path::new("/tmp/x")).unwrap();
        let m = &plans[0];
        assert_eq!(m.servers.len(), 1);
        assert!(m.clients.is_empty() && m.latency_logs.is_empty());
        let server = &m.servers[0];
        assert_eq!(server.program, "memcached");
        assert_eq!(server.ns, net.tenants[1].ns);
        assert_eq!(server.log, Path::new("/tmp/x/m.memcached.log"));
        let addr = net.tenants[1].addr.to_string();
        for pair in [["-l", &addr], ["-p", "11211"], ["-U", "0"], ["-u", "root"]] {
            assert!(server.args.windows(2).any(|w| w == pair), "{pair:?}");
        }
        let generator = m.generator.as_ref().unwrap();
        assert_eq!(generator.ns, net.sink_ns);
        assert_eq!(generator.server_log.as_deref(), Some(server.log.as_path()));
        let Load::Memcached(load) = &generator.load else {
            panic!("{generator:?}");
        };
        assert_eq!(load.server, SocketAddrV4::new(net.tenants[1].addr, 11211));
        assert_eq!((load.item_bytes, load.connections), (1024, 3));
        assert_eq!(load.rate_per_s, None);
        assert_eq!(format!("get {}\r\n", load.key).len(), 64);
        // The second traffic of the app takes its second port, open loop.
        let Load::Memcached(open) = &plans[1].generator.as_ref().unwrap().load else {
            panic!()
        };
        assert_eq!(open.server.port(), 11212);
        assert_eq!(open.rate_per_s, Some(500.0));
        assert_ne!(open.key, load.key);
        assert_eq!(plans[1].start_ns, 1_000_000_000);
        // Another port: sockperf as before.
        assert_eq!(plans[2].servers[0].program, "sockperf");
        assert!(plans[2].generator.is_none());
        // Nothing here spins: memcached's generator paces the open loop.
        assert_eq!(spinning_clients(&plans), 0);
        // memcached over UDP is not what the lab runs: sockperf.
        let udp = scenario(
            "policy:
  link: { rate: 1Gbit }
  tenants:
    - name: t
      apps: [{ name: kvs, match: { proto: udp, ports: [11211] } }]
duration: 1s
traffic: [{ name: u, tenant: t, app: kvs, kind: rpc }]
",
        );
        let mut net = Plan::new(&udp.policy, 7).unwrap();
        let plans = plan(&udp, &mut net, &Tools::default(), Path::new("/tmp")).unwrap();
        assert_eq!(plans[0].servers[0].program, "sockperf");
    }

    /// An open-loop rpc that sockperf runs spins a core per connection; a
    /// closed-loop one and memcached's open loop do not.
    #[test]
    fn open_loop_sockperf_clients_are_counted_as_spinning() {
        let s = scenario(&format!(
            "{KVS_POLICY}traffic:
  - {{ name: open, tenant: t2, app: probe, kind: rpc, concurrency: 3, rate: 300 }}
  - {{ name: closed, tenant: t1, kind: rpc, concurrency: 2 }}
  - {{ name: m, tenant: t2, app: kvs, kind: rpc, rate: 500, concurrency: 4 }}
"
        ));
        let mut net = Plan::new(&s.policy, 7).unwrap();
        let plans = plan(&s, &mut net, &Tools::default(), Path::new("/tmp/x")).unwrap();
        assert_eq!(spinning_clients(&plans), 3);
        assert_eq!(spinning_clients(&plans[1..]), 0);
    }

    #[test]
    fn items_past_memcacheds_limit_are_refused() {
        let s = scenario(&format!(
            "{KVS_POLICY}traffic:\n  - {{ name: m, tenant: t2, app: kvs, kind: rpc, response: 2MiB }}\n"
        ));
        let mut net = Plan::new(&s.policy, 7).unwrap();
        let error = plan(&s, &mut net, &Tools::default(), Path::new("/tmp")).unwrap_err();
        assert!(error.to_string().contains("1000000 B"), "{error}");
    }

    #[test]
    fn poisson_is_the_labs_own_sender_seeded_per_flow() {
        let s = scenario(
            "policy:
  link: { rate: 1Gbit }
  tenants: [{ name: t1 }, { name: t2 }]
duration: 4s
seed: 5
traffic:
  - { name: a, tenant: t1, kind: bulk }
  - { name: p, tenant: t2, kind: poisson, rate: 40Mbit, size: 1000B, flows: 4 }
",
        );
        let mut net = Plan::new(&s.policy, 7).unwrap();
        let plans = plan(&s, &mut net, &Tools::default(), Path::new("/tmp")).unwrap();
        let p = &plans[1];
        assert!(p.servers.is_empty() && p.clients.is_empty());
        // The ports rule: after the bulk traffic's 5201.
        assert_eq!(p.udp_sink_port, Some(5202));
        let generator = p.generator.as_ref().unwrap();
        assert_eq!(generator.ns, net.tenants[1].ns);
        let Load::Poisson(load) = &generator.load else {
            panic!("{generator:?}");
        };
        assert_eq!(load.payload_bytes, 1000);
        // 10 Mbit/s per flow of 1000 B datagrams: one each 800 us on average.
        assert!((load.mean_gap_ns - 800_000.0).abs() < 1e-6);
        assert_eq!(load.flows.len(), 4);
        for f in &load.flows {
            assert_eq!(f.src, net.tenants[1].addr);
            assert_eq!(f.dst, SocketAddrV4::new(net.sink_addr, 5202));
        }
        let seeds: BTreeSet<u64> = load.flows.iter().map(|f| f.seed).collect();
        assert_eq!(seeds.len(), 4, "a stream per flow");
        assert_eq!(load.flows[2].seed, flow_seed(5, 1, 2));
        assert_ne!(flow_seed(5, 1, 2), flow_seed(6, 1, 2));
        assert!(net.sink_extra.is_empty());
    }

    #[test]
    fn flows_split_by_destination_get_a_sink_address_and_iperf3_pair_each() {
        let s = scenario(
            "policy:
  link: { rate: 1Gbit }
  tenants:
    - name: t1
      apps:
        - { name: spread, match: { proto: tcp, ports: [6000] }, split: { by: destination, max_rate: 100Mbit } }
        - { name: burst, match: { proto: udp, ports: [6001] }, split: { by: destination, max_rate: 100Mbit } }
        - { name: each, match: { proto: tcp, ports: [6002] }, split: { by: flow, max_rate: 100Mbit } }
duration: 4s
traffic:
  - { name: b, tenant: t1, app: spread, kind: bulk, flows: 3 }
  - { name: p, tenant: t1, app: burst, kind: poisson, rate: 10Mbit, flows: 2 }
  - { name: f, tenant: t1, app: each, kind: bulk, flows: 4 }
",
        );
        let mut net = Plan::new(&s.policy, 7).unwrap();
        let plans = plan(&s, &mut net, &Tools::default(), Path::new("/tmp")).unwrap();
        assert_eq!(net.sink_extra.len(), 5);
        let b = &plans[0];
        assert_eq!((b.servers.len(), b.clients.len()), (3, 3));
        for (k, (server, client)) in b.servers.iter().zip(&b.clients).enumerate() {
            let dst = net.sink_extra[k].to_string();
            assert!(server.args.windows(2).any(|w| w == ["-B", dst.as_str()]));
            assert!(client.args.windows(2).any(|w| w == ["-c", dst.as_str()]));
            assert!(client.args.windows(2).any(|w| w == ["-P", "1"]));
            assert!(client.args.windows(2).any(|w| w == ["-p", "6000"]));
        }
        let logs: BTreeSet<_> = b.servers.iter().chain(&b.clients).map(|c| &c.log).collect();
        assert_eq!(logs.len(), 6, "a log each");
        let Load::Poisson(p) = &plans[1].generator.as_ref().unwrap().load else {
            panic!()
        };
        let dsts: Vec<_> = p.flows.iter().map(|f| *f.dst.ip()).collect();
        assert_eq!(dsts, net.sink_extra[3..5]);
        // Split by flow: one address, one client of four streams.
        let f = &plans[2];
        assert_eq!(f.clients.len(), 1);
        let sink = net.sink_addr.to_string();
        assert!(
            f.clients[0]
                .args
                .windows(2)
                .any(|w| w == ["-c", sink.as_str()])
        );
        assert!(f.clients[0].args.windows(2).any(|w| w == ["-P", "4"]));
    }

    #[test]
    fn too_many_destinations_are_refused_saying_why() {
        let s = scenario(
            "policy:
  link: { rate: 1Gbit }
  tenants:
    - name: t1
      apps: [{ name: spread, split: { by: destination, max_rate: 1Mbit } }]
duration: 4s
traffic:
  - { name: big, tenant: t1, app: spread, kind: bulk, flows: 65 }
",
        );
        let mut net = Plan::new(&s.policy, 7).unwrap();
        let error = plan(&s, &mut net, &Tools::default(), Path::new("/tmp"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("traffic big")
                && error.contains("split by destination")
                && error.contains("at most 64"),
            "{error}"
        );
    }
}
