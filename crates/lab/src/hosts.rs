//! The lab across hosts (hosts.md, "Lab"): one engine namespace per host, joined
//! to the others by a fabric namespace holding a Linux bridge, and one namespace
//! per VM behind its host's engine.
//!
//! ```text
//!  VM a [eth0] ──veth── [Pv0]  host h0 ns   [Pu0] ──veth── [f0] ┐
//!                              (engine)     [Pc0] ──veth── [g0] ┤ fabric ns
//!  VM c [eth0] ──veth── [Pv2]  host h2 ns   [Pu2] ──veth── [f2] ┤ (bridge br0)
//!  VM d [eth0] ──veth── [Pv3]  (engine)     [Pc2] ──veth── [g2] ┘
//! ```
//!
//! (`P` is the run's prefix, `nsl<id>`; `Pu` the uplink the engine forwards on,
//! `Pc` the control veth its feedback socket is bound to.) VMs address each other
//! in one /16 with static neighbours, so no ARP crosses an engine.
//!
//! Each host's engine is the one-host engine ([`crate::engine`]) with a
//! [`HostSide`]: it schedules its VMs' frames under the named enforcer onto its
//! uplink at the host link's rate, polices what enters its host, and exchanges
//! PicNIC's feedback over a control veth on the same bridge. This module builds the
//! hosts, plans their traffic, runs them and turns their counts into a record.

use crate::classify::Prefix;
use crate::classify::{FrameMatch, PortSide};
pub use crate::host_side::HostCounts;
use crate::host_side::{HostSide, HostSideConfig, TrafficFrames};
use crate::sys::netns;
use crate::topology::{Topology, gso_max_bytes, mac_string};
use crate::traffic::{Counted, Program, Tools, TrafficPlan};
use crate::{LabError, LabOptions};
use policy::{HostId, HostsScenario, Pacing, Vm};
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Names and addresses of a run across hosts.
#[derive(Clone, Debug)]
pub(crate) struct HostsPlan {
    pub prefix: String,
    pub fabric_ns: String,
    pub hosts: Vec<HostNet>,
    /// Every VM, in [`HostsScenario::vms`] order: the index a destination limit
    /// names it by.
    pub vms: Vec<VmNet>,
    pub gso_max_bytes: u32,
}

#[derive(Clone, Debug)]
pub(crate) struct HostNet {
    pub ns: String,
    pub uplink: String,
    /// The host's end of its control veth, with `control_addr`.
    pub control: String,
    pub control_addr: Ipv4Addr,
}

#[derive(Clone, Debug)]
pub(crate) struct VmNet {
    pub vm: Vm,
    pub ns: String,
    /// The host engine's end of the VM's veth.
    pub port: String,
    pub addr: Ipv4Addr,
    pub mac: [u8; 6],
}

impl HostsPlan {
    pub fn new(scenario: &HostsScenario, id: u32) -> Result<HostsPlan, LabError> {
        let prefix = format!("nsl{}", id % 10_000);
        let vms = scenario.vms();
        if vms.len() > 250 {
            return Err(LabError::Unsupported(format!(
                "the lab builds one namespace per VM and handles up to 250; this scenario has {}",
                vms.len()
            )));
        }
        let b = 66 + (id % 100) as u8;
        let hosts = (0..scenario.hosts.len())
            .map(|h| HostNet {
                ns: format!("{prefix}-h{h}"),
                uplink: format!("{prefix}u{h}"),
                control: format!("{prefix}c{h}"),
                control_addr: Ipv4Addr::new(10, b, 255, h as u8 + 1),
            })
            .collect();
        let vms = vms
            .into_iter()
            .enumerate()
            .map(|(v, vm)| VmNet {
                vm,
                ns: format!("{prefix}-v{v}"),
                port: format!("{prefix}v{v}"),
                addr: Ipv4Addr::new(10, b, v as u8 + 1, 2),
                mac: [0x02, 0x6c, 0x01, 0x00, v as u8, 0x02],
            })
            .collect();
        let slowest = scenario
            .hosts
            .iter()
            .map(|h| h.policy.link.rate_bps)
            .min()
            .unwrap_or(0);
        Ok(HostsPlan {
            fabric_ns: format!("{prefix}-fab"),
            hosts,
            vms,
            gso_max_bytes: gso_max_bytes(slowest),
            prefix,
        })
    }

    fn host_vms(&self, host: HostId) -> impl Iterator<Item = &VmNet> {
        self.vms.iter().filter(move |v| v.vm.host == host)
    }
}

/// Builds the fabric, the hosts and the VMs of `topology.plan`.
fn build(topology: &mut Topology<HostsPlan>) -> std::io::Result<()> {
    let plan = topology.plan.clone();
    let fab = plan.fabric_ns.as_str();
    topology.add_ns(fab)?;
    let bridge = "br0";
    netns::ip(&[
        "-n",
        fab,
        "link",
        "add",
        bridge,
        "type",
        "bridge",
        "stp_state",
        "0",
        "forward_delay",
        "0",
        "mcast_snooping",
        "0",
    ])?;
    netns::ip(&["-n", fab, "link", "set", bridge, "up"])?;
    for (h, host) in plan.hosts.iter().enumerate() {
        topology.add_ns(&host.ns)?;
        for (dev, peer) in [
            (&host.uplink, format!("f{h}")),
            (&host.control, format!("g{h}")),
        ] {
            netns::ip(&[
                "-n", &host.ns, "link", "add", dev, "type", "veth", "peer", "name", &peer, "netns",
                fab,
            ])?;
            Topology::<HostsPlan>::offloads(&host.ns, dev)?;
            Topology::<HostsPlan>::offloads(fab, &peer)?;
            netns::ip(&["-n", fab, "link", "set", &peer, "master", bridge])?;
            netns::ip(&["-n", fab, "link", "set", &peer, "up"])?;
            netns::ip(&["-n", &host.ns, "link", "set", dev, "up"])?;
        }
        netns::ip(&[
            "-n",
            &host.ns,
            "addr",
            "add",
            &format!("{}/16", host.control_addr),
            "dev",
            &host.control,
        ])?;
    }
    for v in &plan.vms {
        let host_ns = &plan.hosts[v.vm.host.index()].ns;
        topology.add_ns(&v.ns)?;
        netns::ip(&[
            "-n",
            host_ns,
            "link",
            "add",
            &v.port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "address",
            &mac_string(v.mac),
            "netns",
            &v.ns,
        ])?;
        Topology::<HostsPlan>::offloads(host_ns, &v.port)?;
        Topology::<HostsPlan>::offloads(&v.ns, "eth0")?;
        let mut lines = vec![
            format!("addr add {}/16 dev eth0", v.addr),
            format!("link set eth0 gso_max_size {}", plan.gso_max_bytes),
            "link set eth0 up".to_string(),
        ];
        // Static neighbours: no ARP crosses the engines.
        for other in plan.vms.iter().filter(|o| o.vm != v.vm) {
            lines.push(format!(
                "neigh replace {} lladdr {} dev eth0 nud permanent",
                other.addr,
                mac_string(other.mac)
            ));
        }
        netns::ip_batch(&v.ns, &lines)?;
        netns::ip(&["-n", host_ns, "link", "set", &v.port, "up"])?;
    }
    Ok(())
}

/// Refuses, before anything runs, what the lab does not run across hosts: any
/// traffic but `bulk` and `udp`, `linux-htb`, a fabric's rate, and the transmit
/// rings only the simulator models.
pub fn supported(scenario: &HostsScenario, enforcer: &str) -> Result<(), LabError> {
    if sched::registry::in_kernel(enforcer) {
        return Err(LabError::Unsupported(
            "linux-htb runs on one host's link; across hosts run nicsched's enforcers (`-e picnic`, `-e wheel`, ...)".into(),
        ));
    }
    if let Some(t) = scenario.traffic.iter().find(|t| {
        let app = scenario.host(t.host).policy.app(t.traffic.app);
        !matches!(Program::of(&t.traffic.kind, app), Program::Iperf3 { .. })
    }) {
        return Err(LabError::Unsupported(format!(
            "traffic `{}` is `{}`, and across hosts the lab runs `bulk` and `udp` only: run it in the simulator (`nicsched sim`), or make it bulk or udp",
            t.traffic.name,
            t.traffic.kind.label()
        )));
    }
    if let Some(rate) = scenario.fabric_rate_bps {
        return Err(LabError::Unsupported(format!(
            "`fabric: {{ rate: {} }}`: the lab's fabric is a bridge that does not limit; only the simulator models a fabric's rate: run `nicsched sim`, or remove `fabric`",
            policy::format_rate(rate as f64)
        )));
    }
    for host in &scenario.hosts {
        crate::transmit_ring_supported_in(&host.policy)?;
    }
    if let Some(t) = scenario
        .traffic
        .iter()
        .find(|t| t.traffic.kind.flows() > crate::traffic::IPERF3_STREAMS_MAX)
    {
        return Err(LabError::Unsupported(format!(
            "traffic `{}`: {} flows, iperf3 runs at most {} streams",
            t.traffic.name,
            t.traffic.kind.flows(),
            crate::traffic::IPERF3_STREAMS_MAX
        )));
    }
    Ok(())
}

/// Every rate of `scenario` scaled so that its fastest host link runs at
/// `rate_bps`: links, envelopes both ways, apps, the fabric and udp rates alike,
/// so that every bottleneck stays where it was.
pub fn scaled_to_link_rate(scenario: &HostsScenario, rate_bps: u64) -> HostsScenario {
    let fastest = scenario.fastest_link_bps();
    let factor = rate_bps as f64 / fastest as f64;
    let scale = |bps: u64| ((bps as f64 * factor).round() as u64).max(1);
    let mut scaled = scenario.clone();
    for host in &mut scaled.hosts {
        let rate = scale(host.policy.link.rate_bps);
        host.policy = host.policy.scaled_to_link_rate(rate);
        for t in &mut host.policy.tenants {
            if let Some(e) = &mut t.ingress {
                e.min_rate_bps = e.min_rate_bps.map(scale);
                e.max_rate_bps = e.max_rate_bps.map(scale);
            }
        }
    }
    scaled.fabric_rate_bps = scaled.fabric_rate_bps.map(scale);
    for t in &mut scaled.traffic {
        t.traffic.kind = t.traffic.kind.scaled(factor);
    }
    scaled
}

/// Default first port of the traffic's iperf3 servers.
const PORT_BASE: u16 = 5201;

/// Each traffic's iperf3 server in the receiving VM and client in the sending one.
fn plan_traffic(
    scenario: &HostsScenario,
    plan: &HostsPlan,
    tools: &Tools,
    dir: &Path,
) -> Result<(Vec<TrafficPlan>, Vec<TrafficFrames>), LabError> {
    let reserved: Vec<u16> = scenario
        .hosts
        .iter()
        .flat_map(|h| {
            h.policy
                .apps
                .iter()
                .flat_map(|a| a.match_ports.iter().copied())
        })
        .collect();
    let mut taken = Vec::new();
    let mut next = PORT_BASE;
    let mut plans = Vec::new();
    let mut frames = Vec::new();
    let vm_net = |vm: Vm| {
        plan.vms
            .iter()
            .find(|v| v.vm == vm)
            .expect("every VM has a namespace")
    };
    for (i, t) in scenario.traffic.iter().enumerate() {
        let app = scenario.host(t.host).policy.app(t.traffic.app);
        let port = match app.match_ports.iter().find(|p| !taken.contains(*p)) {
            Some(&p) => p,
            None if app.match_ports.is_empty() => {
                while reserved.contains(&next) || taken.contains(&next) {
                    next += 1;
                }
                next
            }
            None => {
                return Err(LabError::Unsupported(format!(
                    "traffic {}: every port of app {} is taken by another traffic; give the app one more port",
                    t.traffic.name, app.name
                )));
            }
        };
        taken.push(port);
        let (from, to) = (vm_net(t.from()), vm_net(t.to));
        let Program::Iperf3 { datagrams } = Program::of(&t.traffic.kind, app) else {
            unreachable!("refused by `supported`")
        };
        let proto = crate::classify::ip_proto(t.traffic.kind.proto(app));
        let extra = crate::traffic::iperf3_options(t.traffic.kind.flows(), datagrams);
        let secs = (t.traffic.stop_ns - t.traffic.start_ns)
            .div_ceil(1_000_000_000)
            .max(1)
            + 1;
        let log = |what: &str| dir.join(format!("{}.{what}.log", t.traffic.name));
        let (server, client) = crate::traffic::iperf3_pair(
            tools,
            (&to.ns, to.addr, log("server")),
            (&from.ns, from.addr, log("client")),
            port,
            t.traffic.kind.flows(),
            secs,
            &extra,
        );
        plans.push(TrafficPlan {
            traffic: i,
            label: t.traffic.name.clone(),
            frames: FrameMatch {
                tenant: t.traffic.tenant,
                proto,
                port: PortSide::Destination(port),
                destinations: vec![to.addr],
            },
            counted: Counted::Iperf3,
            servers: vec![server],
            clients: vec![client],
            generator: None,
            udp_sink_port: None,
            latency_logs: Vec::new(),
            start_ns: t.traffic.start_ns,
            stop_ns: t.traffic.stop_ns,
        });
        frames.push(TrafficFrames {
            src: from.addr,
            dst: to.addr,
            proto,
            dst_port: port,
        });
    }
    Ok((plans, frames))
}

/// What a run across hosts hands back: the record [`report::summarise_hosts`]
/// reads, the lab's own checks, and the settings that shaped it.
pub struct HostsRun {
    pub record: report::HostsRecord,
    pub checks: Vec<report::Check>,
    pub settings: std::collections::BTreeMap<String, String>,
}

/// The engines, one per host; stopped and joined when dropped, so no thread
/// holds a namespace alive past the topology.
struct Engines {
    stop: Arc<std::sync::atomic::AtomicBool>,
    handles: Vec<std::thread::JoinHandle<std::io::Result<crate::EngineStats>>>,
}

impl Engines {
    fn join(&mut self) -> Result<Vec<crate::EngineStats>, LabError> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.handles
            .drain(..)
            .map(|h| {
                h.join()
                    .map_err(|_| LabError::Datapath("engine: panicked".into()))?
                    .map_err(|e| LabError::Datapath(format!("engine: {e}")))
            })
            .collect()
    }
}

impl Drop for Engines {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Runs `scenario` across its hosts in the lab under `enforcer` on every host.
/// `progress` hears the time since traffic started, in ns.
pub fn run(
    scenario: &HostsScenario,
    enforcer: &str,
    options: &LabOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<HostsRun, LabError> {
    let _signals = crate::sys::signal::SignalGuard::install();
    if crate::sys::signal::interrupted() {
        return Err(LabError::Interrupted);
    }
    supported(scenario, enforcer)?;
    if options.engine_threads > 1 {
        return Err(LabError::Unsupported(format!(
            "{} engine threads: across hosts each host's engine runs one, which keeps the counts per traffic; leave out --engine-threads",
            options.engine_threads
        )));
    }
    if !options.crafted.is_empty() {
        return Err(LabError::Unsupported(
            "crafted frames are sent on one host's link; across hosts there is none".into(),
        ));
    }
    crate::remove_leftovers(&mut |line| eprintln!("nicsched lab: {line}"))?;
    let scenario = match options.link_rate_bps {
        Some(rate) => scaled_to_link_rate(scenario, rate),
        None => scenario.clone(),
    };
    let mut buffers = Vec::new();
    for host in &scenario.hosts {
        sched::build(enforcer, &host.policy).map_err(LabError::Enforcer)?;
        buffers.push(crate::engine::HostBuffer::new(
            enforcer,
            &host.policy,
            options.qdisc,
        )?);
    }
    let plan = HostsPlan::new(&scenario, crate::run_id()?)?;
    let mut dir = crate::RunDir::new(
        options.out.as_deref(),
        &format!("nicsched-lab-{}", plan.prefix),
    );
    let (plans, frames) = plan_traffic(&scenario, &plan, &options.tools, &dir.path)?;
    for program in ["ip", "ethtool", options.tools.iperf3.as_str()] {
        if !crate::program_exists(program) {
            return Err(LabError::MissingTool {
                program: program.to_string(),
            });
        }
    }
    std::fs::create_dir_all(&dir.path)
        .map_err(|e| LabError::Io(format!("cannot create {}: {e}", dir.path.display())))?;
    let prefix = plan.prefix.clone();
    // Declared first, dropped last: the namespaces go after the threads and
    // programs inside them.
    let mut topology = Topology::create_with(plan.clone(), &prefix, build)?;
    let outcome = run_in(
        &scenario, enforcer, options, &plan, &plans, frames, &buffers, progress,
    );
    dir.keep_if_named_in(&outcome, |run| &run.checks);
    if options.keep {
        let delete = topology.keep();
        eprintln!("nicsched lab: namespaces kept for inspection; delete them with: {delete}");
    }
    drop(topology);
    let mut run = outcome?;
    let fastest = scenario.fastest_link_bps();
    run.settings.extend(options.settings(fastest));
    run.settings.insert(
        "feedback_epoch_ns".into(),
        scenario.feedback.epoch_ns.to_string(),
    );
    run.settings.insert(
        "feedback_delay".into(),
        "UDP datagrams between the engines, not the scenario's feedback.delay".into(),
    );
    run.settings.insert(
        "host_link_rates_bps".into(),
        scenario
            .hosts
            .iter()
            .map(|h| format!("{}={}", h.name, h.policy.link.rate_bps))
            .collect::<Vec<_>>()
            .join(","),
    );
    Ok(run)
}

#[allow(clippy::too_many_arguments)]
fn run_in(
    scenario: &HostsScenario,
    enforcer: &str,
    options: &LabOptions,
    plan: &HostsPlan,
    plans: &[TrafficPlan],
    frames: Vec<TrafficFrames>,
    buffers: &[crate::engine::HostBuffer],
    progress: &mut dyn FnMut(u64),
) -> Result<HostsRun, LabError> {
    let origin = Arc::new(OnceLock::new());
    let mut engines = Engines {
        stop: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        handles: Vec::new(),
    };
    let feedback = sched::registry::feedback(enforcer);
    for (h, host) in scenario.hosts.iter().enumerate() {
        let host_id = HostId(h as u16);
        let vms: Vec<&VmNet> = plan.host_vms(host_id).collect();
        let prefixes = vms
            .iter()
            .map(|v| Prefix {
                addr: v.addr,
                len: 32,
            })
            .collect();
        let classifier = crate::Classifier::new(&host.policy, prefixes);
        let config = crate::engine::EngineConfig {
            ports: vms.iter().map(|v| v.port.clone()).collect(),
            tenant_macs: vms.iter().map(|v| v.mac).collect(),
            uplink: plan.hosts[h].uplink.clone(),
            link_rate_bps: Some(host.policy.link.rate_bps),
            buffer: buffers[h],
            // The transmit threads count what they sent apart from the engine's
            // loop, where the counts per traffic are kept: one thread.
            transmit_threads: 0,
            cores: None,
        };
        let side = HostSideConfig {
            host: host_id,
            scenario: scenario.clone(),
            control_addrs: plan.hosts.iter().map(|h| h.control_addr).collect(),
            vms: plan.vms.iter().map(|v| (v.vm, v.mac)).collect(),
            traffic: frames.clone(),
            enforcer: enforcer.to_string(),
            feedback,
            origin: origin.clone(),
        };
        let stop = engines.stop.clone();
        let (name, policy) = (enforcer.to_string(), host.policy.clone());
        engines.handles.push(crate::spawn_worker(
            &format!("nicsched-engine-{}", host.name),
            plan.hosts[h].ns.clone(),
            move |ready| {
                let built = sched::build_with(&name, &policy, config.buffer.capacity)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                crate::engine::Engine::new(config, classifier, &policy, built)?
                    .across_hosts(HostSide::new(side)?)
                    .run(&stop, ready)
            },
        )?);
    }
    let servers = crate::start_servers(plans, "", options.realtime)?;
    crate::drive(
        scenario.duration_ns,
        plans,
        options.realtime,
        &origin,
        progress,
    )?;
    servers.finish();
    let stats = engines.join()?;
    let counts: Vec<HostCounts> = stats
        .into_iter()
        .map(|s| s.hosts.expect("every engine runs across hosts"))
        .collect();
    let record = record(scenario, enforcer, &counts);
    let checks = checks(scenario, plans, &counts);
    let settings = [
        (
            "feedback_datagrams_sent",
            counts.iter().map(|c| c.feedback_sent).sum::<u64>(),
        ),
        (
            "feedback_datagrams_received",
            counts.iter().map(|c| c.feedback_received).sum::<u64>(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Ok(HostsRun {
        record,
        checks,
        settings,
    })
}

/// The hosts' counts as one record: each traffic's sending side from its sender's
/// engine, its receiving side from its receiver's.
fn record(scenario: &HostsScenario, enforcer: &str, counts: &[HostCounts]) -> report::HostsRecord {
    let mut all = report::HostsRecord::empty(scenario, enforcer, report::Mode::Lab);
    for host in counts {
        all.add_counts(&host.record);
    }
    // What left a sender and never reached its receiver's engine by the end: on
    // the fabric, or lost in a kernel on the way (a full ring).
    for t in 0..scenario.traffic.len() {
        let sent = all.sent_bytes[t].iter().sum::<u64>() + all.sent_outside_bytes[t];
        let arrived = all.delivered_bytes[t].iter().sum::<u64>()
            + all.delivered_outside_bytes[t]
            + all.dropped_bytes[t];
        all.in_flight_bytes[t] = sent.saturating_sub(arrived);
    }
    all
}

/// The lab's own checks: what the receiving engines delivered against what the
/// iperf3 servers say they received.
fn checks(
    scenario: &HostsScenario,
    plans: &[TrafficPlan],
    counts: &[HostCounts],
) -> Vec<report::Check> {
    let mut bad = Vec::new();
    for p in plans {
        let metered: u64 = counts
            .iter()
            .map(|c| c.delivered_payload_bytes[p.traffic])
            .sum();
        let count = match scenario.traffic[p.traffic].traffic.kind.pacing() {
            Pacing::Backlogged => crate::checks::iperf3_tcp_count(p),
            _ => crate::checks::iperf3_count(p),
        };
        let name = &scenario.traffic[p.traffic].traffic.name;
        match count.agrees(metered) {
            Some(true) => {}
            Some(false) => bad.push(format!(
                "{name}: payload delivered {}, {}",
                crate::checks::bytes_text(metered),
                count.text()
            )),
            None => bad.push(format!("{}: {}", p.label, count.text())),
        }
    }
    vec![report::Check {
        name: "meter-vs-programs".into(),
        ok: bad.is_empty(),
        detail: if bad.is_empty() {
            format!(
                "every traffic's payload delivered within {:.0}% of what its iperf3 programs counted (TCP: between what the servers read and what the clients wrote)",
                crate::checks::TOLERANCE * 100.0
            )
        } else {
            bad.join("; ")
        },
    }]
}
