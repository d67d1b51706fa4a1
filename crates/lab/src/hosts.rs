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
//! Each host's engine is the one-host engine ([`crate::engine`]): it schedules its
//! VMs' frames under the named enforcer onto its uplink at the host link's rate.
//! What enters a host from the fabric goes through [`HostSide::arrive`] instead of
//! the one-host engine's unscheduled return path: bounded by the link's rate (a
//! drop-tail queue of [`policy::INGRESS_QUEUE_BYTES`]) and each VM's ingress
//! envelope (a policer), dropping where exceeded, as the simulator does. Both are
//! virtual queues: a frame within them goes on at once rather than after its queue
//! time, since only whether it fits is in question.
//!
//! With feedback (`picnic`, `picnic-wc`, `picnic-bps`), each engine runs its host's
//! [`policy::pcc::HostPcc`] every `feedback.epoch` on the bytes it counted (and
//! what its enforcer held, [`policy::pcc::Backlog`]), sends
//! its receivers' rates to the sending hosts' engines as UDP datagrams over a
//! control veth on the same bridge, and applies what reaches it with
//! [`sched::Enforcer::set_destination_limit`]. Feedback takes however long the
//! datagram does (tens of µs), not the scenario's `feedback.delay`.
//! Only PCCB's bit rates travel so far: PCCP's packet rates
//! ([`policy::pcc::HostPcc::packet_epoch`]) need the engine's real capacity in
//! packets, which the lab measures rather than sets.

use crate::classify::{
    ETHERNET_HEADER_BYTES, Ipv4Header, ParsedFrame, Prefix, parse, payload_bytes,
};
use crate::sys::netns;
use crate::sys::packet::{RxFrame, RxRing, VNET_HDR_BYTES};
use crate::topology::{Topology, gso_max_bytes, mac_string};
use crate::traffic::{Counted, FrameMatch, PortSide, Tools, TrafficPlan};
use crate::{LabError, LabOptions};
use policy::pcc::{Backlog, Feedback, HostPcc, RateWindow};
use policy::wire::serialisation_ns;
use policy::{HostId, HostsScenario, TrafficKind, Vm};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// UDP port of every engine's feedback socket.
const FEEDBACK_PORT: u16 = 4790;
/// One rate in a feedback datagram: the traffic's index (u32) and its rate in
/// bit/s (f64), little-endian.
const FEEDBACK_ENTRY_BYTES: usize = 12;

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

/// What tells a traffic's frames apart, wherever they are seen.
#[derive(Clone, Copy, Debug)]
struct TrafficFrames {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    dst_port: u16,
}

impl TrafficFrames {
    fn matches(&self, ip: &Ipv4Header) -> bool {
        ip.src == self.src
            && ip.dst == self.dst
            && ip.proto == self.proto
            && ip.dst_port == self.dst_port
    }
}

/// What one host's engine counted, per traffic (index into the scenario's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostCounts {
    /// Per interval: bytes of this host's senders that left on its link.
    pub sent_bytes: Vec<Vec<u64>>,
    /// Per interval: bytes that reached this host's VMs.
    pub delivered_bytes: Vec<Vec<u64>>,
    /// Bytes that left, or reached a VM, before time zero or after the run.
    pub sent_outside_bytes: Vec<u64>,
    pub delivered_outside_bytes: Vec<u64>,
    pub offered_bytes: Vec<u64>,
    pub refused_bytes: Vec<u64>,
    /// Held by the enforcer when the engine stopped.
    pub held_bytes: Vec<u64>,
    /// Dropped entering this host: its link's queue or the VM's envelope.
    pub dropped_bytes: Vec<u64>,
    /// Transport payload delivered to this host's VMs over the whole run: what
    /// the programs count.
    pub delivered_payload_bytes: Vec<u64>,
    pub feedback_sent: u64,
    pub feedback_received: u64,
}

/// An engine's part in a run across hosts: what enters its host, the feedback,
/// and the counts per traffic.
pub(crate) struct HostSide {
    host: HostId,
    traffic: Vec<TrafficFrames>,
    /// Per traffic: when it runs (scenario time) and which host sends it.
    times: Vec<(u64, u64)>,
    sender: Vec<HostId>,
    /// Every VM and its MAC, by VM index.
    vm_order: Vec<Vm>,
    vm_macs: Vec<[u8; 6]>,
    /// Per port of the engine (this host's VMs in order): its VM's index.
    port_vm: Vec<u32>,
    /// Per port: the VM's ingress `max_rate`, and its policer's tokens (bytes) and
    /// when they were last topped up.
    ingress_max_bps: Vec<Option<u64>>,
    policer: Vec<(f64, u64)>,
    link_rate_bps: u64,
    /// When the ingress link's virtual queue empties.
    ingress_free_ns: u64,
    pcc: Option<HostPcc>,
    control: UdpSocket,
    /// Each host's feedback socket.
    peers: Vec<SocketAddrV4>,
    origin: Arc<OnceLock<Instant>>,
    /// Time zero on the engine's clock, once traffic starts.
    zero_ns: Option<u64>,
    clock: Option<Instant>,
    epoch_ns: u64,
    epoch_start_ns: u64,
    /// Per traffic: bytes this host sent and received, measured for feedback.
    sent: RateWindow,
    arrived: RateWindow,
    /// Per traffic: what the enforcer holds, waiting to leave.
    backlog: Backlog,
    /// The traffic of the frame in each slab slot (`usize::MAX`: none).
    slot_traffic: Vec<usize>,
    interval_ns: u64,
    duration_ns: u64,
    counts: HostCounts,
}

impl HostSide {
    /// Scenario time at engine time `now_ns`, once traffic has started.
    fn scenario_ns(&mut self, now_ns: u64) -> Option<u64> {
        if self.zero_ns.is_none()
            && let (Some(origin), Some(clock)) = (self.origin.get(), self.clock)
        {
            self.zero_ns = Some(origin.saturating_duration_since(clock).as_nanos() as u64);
        }
        now_ns.checked_sub(self.zero_ns?)
    }

    /// The interval of engine time `now_ns`; `None` outside the run.
    fn interval(&mut self, now_ns: u64) -> Option<usize> {
        let at = self.scenario_ns(now_ns)?;
        (at < self.duration_ns).then(|| report::measure::interval_of(at, self.interval_ns))
    }

    /// The engine's loop starts: its clock's zero.
    pub fn start(&mut self, clock: Instant, slab_slots: u32) {
        self.clock = Some(clock);
        self.slot_traffic = vec![usize::MAX; slab_slots as usize];
    }

    pub fn control_fd(&self) -> RawFd {
        self.control.as_raw_fd()
    }

    fn traffic_of(&self, ip: &Ipv4Header) -> Option<usize> {
        self.traffic.iter().position(|t| t.matches(ip))
    }

    /// A VM's frame reached the engine: its traffic, counted as offered, and the
    /// destination VM a limit names (`None`: not one of the scenario's VMs).
    pub fn offered(
        &mut self,
        ip: Option<&Ipv4Header>,
        dst_mac: &[u8],
    ) -> (Option<usize>, Option<u32>) {
        let traffic = ip.and_then(|ip| self.traffic_of(ip));
        if let (Some(f), Some(ip)) = (traffic, ip) {
            self.counts.offered_bytes[f] += u64::from(ip.len_bytes);
        }
        let destination = self.vm_macs.iter().position(|m| m[..] == *dst_mac);
        (traffic, destination.map(|v| v as u32))
    }

    /// The frame of `traffic` is held in `slot` (or was refused: `slot` None).
    pub fn stored(&mut self, traffic: Option<usize>, slot: Option<u32>, bytes: u32) {
        match slot {
            Some(slot) => {
                self.slot_traffic[slot as usize] = traffic.unwrap_or(usize::MAX);
                if let Some(f) = traffic {
                    self.backlog.queued(f, u64::from(bytes));
                }
            }
            None => self.refused(traffic, bytes),
        }
    }

    fn refused(&mut self, traffic: Option<usize>, bytes: u32) {
        if let Some(f) = traffic {
            self.counts.refused_bytes[f] += u64::from(bytes);
        }
    }

    fn slot(&self, slot: u64) -> Option<usize> {
        Some(self.slot_traffic[slot as usize]).filter(|&f| f != usize::MAX)
    }

    /// The enforcer refused the frame in `slot`.
    pub fn refused_slot(&mut self, slot: u64, bytes: u32) {
        let traffic = self.slot(slot);
        if let Some(f) = traffic {
            self.backlog.left(f, u64::from(bytes));
        }
        self.refused(traffic, bytes);
    }

    /// The frame in `slot` left on the link at `now_ns`.
    pub fn sent(&mut self, slot: u64, bytes: u32, now_ns: u64) {
        let Some(f) = self.slot(slot) else { return };
        let bytes = u64::from(bytes);
        self.backlog.left(f, bytes);
        // Before time zero nothing runs for the feedback (the programs' warm-up).
        if self.scenario_ns(now_ns).is_some() {
            self.sent.count(f, bytes);
        }
        match self.interval(now_ns) {
            Some(k) => self.counts.sent_bytes[f][k] += bytes,
            None => self.counts.sent_outside_bytes[f] += bytes,
        }
    }

    /// The frame in `slot`, counted as sent, never left: the uplink stayed busy
    /// until the engine stopped, after the run.
    pub fn unsent(&mut self, slot: u64, bytes: u32) {
        let Some(f) = self.slot(slot) else { return };
        let outside = &mut self.counts.sent_outside_bytes[f];
        *outside = outside.saturating_sub(u64::from(bytes));
        self.counts.held_bytes[f] += u64::from(bytes);
    }

    /// The frame in `slot` was still held when the engine stopped.
    pub fn held(&mut self, slot: u64, bytes: u32) {
        if let Some(f) = self.slot(slot) {
            self.counts.held_bytes[f] += u64::from(bytes);
        }
    }

    /// A frame from the fabric: to the port of the VM it is for, if it fits the
    /// host's link and the VM's envelope; frames for no VM here (the bridge
    /// floods until it has learnt where a VM is) are not this host's.
    pub fn arrive(
        &mut self,
        frame: RxFrame<'_>,
        ports: &[RxRing],
        now_ns: u64,
    ) -> std::io::Result<()> {
        let RxFrame {
            bytes: buf, len, ..
        } = frame;
        if len > buf.len() || len < VNET_HDR_BYTES + ETHERNET_HEADER_BYTES {
            return Ok(());
        }
        let frame = &buf[..len];
        let dst = &frame[VNET_HDR_BYTES..VNET_HDR_BYTES + 6];
        let Some(port) = self
            .port_vm
            .iter()
            .position(|&v| self.vm_macs[v as usize][..] == *dst)
        else {
            return Ok(());
        };
        let ethernet = &frame[VNET_HDR_BYTES..];
        let ip = match parse(ethernet) {
            ParsedFrame::Ipv4(ip) => Some(ip),
            _ => None,
        };
        let bytes = (len - VNET_HDR_BYTES - ETHERNET_HEADER_BYTES) as u64;
        let traffic = ip.as_ref().and_then(|ip| self.traffic_of(ip));
        if let Some(f) = traffic
            && self.scenario_ns(now_ns).is_some()
        {
            self.arrived.count(f, bytes);
        }
        let backlog_bytes =
            self.ingress_free_ns.saturating_sub(now_ns) as f64 * self.link_rate_bps as f64 / 8e9;
        let mut fits = backlog_bytes + bytes as f64 <= policy::INGRESS_QUEUE_BYTES as f64;
        // The frame goes on at once, but it is policed and counted when the
        // modelled link would have let it in, as the simulator does: counted on
        // arrival, a queue's worth of frames showed in one interval above the
        // link's rate.
        let mut leaves_ns = now_ns;
        if fits {
            self.ingress_free_ns = self.ingress_free_ns.max(now_ns)
                + serialisation_ns(bytes as u32, self.link_rate_bps);
            leaves_ns = self.ingress_free_ns;
            if let Some(max) = self.ingress_max_bps[port] {
                let (tokens, at) = self.policer[port];
                let tokens = (tokens + leaves_ns.saturating_sub(at) as f64 * max as f64 / 8e9)
                    .min(policy::INGRESS_BURST_BYTES as f64);
                fits = tokens >= bytes as f64;
                self.policer[port] = (
                    if fits { tokens - bytes as f64 } else { tokens },
                    leaves_ns.max(at),
                );
            }
        }
        if !fits {
            if let Some(f) = traffic {
                self.counts.dropped_bytes[f] += bytes;
            }
            return Ok(());
        }
        ports[port].socket().send(frame)?;
        if let (Some(f), Some(ip)) = (traffic, ip) {
            self.counts.delivered_payload_bytes[f] +=
                u64::from(payload_bytes(ethernet, &ip).unwrap_or(0));
            match self.interval(leaves_ns) {
                Some(k) => self.counts.delivered_bytes[f][k] += bytes,
                None => self.counts.delivered_outside_bytes[f] += bytes,
            }
        }
        Ok(())
    }

    /// How long the engine may sleep before the next epoch is due.
    pub fn wait_ns(&mut self, now_ns: u64) -> Option<u64> {
        self.pcc.as_ref()?;
        let at = self.scenario_ns(now_ns)?;
        Some(
            (self.epoch_start_ns + self.epoch_ns)
                .saturating_sub(at)
                .max(1_000),
        )
    }

    /// Runs an epoch if one is due and applies the rates that reached this host.
    pub fn tick(&mut self, now_ns: u64, enforcer: &mut dyn sched::Enforcer) -> std::io::Result<()> {
        if self.pcc.is_none() {
            return Ok(());
        }
        let mut changed = self.receive()?;
        if let Some(at) = self.scenario_ns(now_ns)
            && at >= self.epoch_start_ns + self.epoch_ns
        {
            // Rates over the time the epoch really took: the engine may wake late.
            let measured_ns = at - self.epoch_start_ns;
            let times = &self.times;
            let running_ns = |f: usize| at.saturating_sub(times[f].0);
            let sent = self.sent.end_epoch(measured_ns, running_ns);
            let arrived = self.arrived.end_epoch(measured_ns, running_ns);
            let backlogged = self.backlog.end_epoch();
            let running: Vec<bool> = self.times.iter().map(|&(a, b)| a <= at && at < b).collect();
            let pcc = self.pcc.as_mut().expect("checked above");
            let offers = pcc.epoch(&running, &sent, &arrived, &backlogged);
            let mut datagrams: Vec<Vec<u8>> = vec![Vec::new(); self.peers.len()];
            for (f, bps) in offers {
                let d = &mut datagrams[self.sender[f].index()];
                d.extend_from_slice(&(f as u32).to_le_bytes());
                d.extend_from_slice(&bps.to_le_bytes());
            }
            for (h, d) in datagrams.iter().enumerate().filter(|(_, d)| !d.is_empty()) {
                self.control.send_to(d, self.peers[h])?;
                self.counts.feedback_sent += 1;
            }
            self.epoch_start_ns = at;
            changed = true;
        }
        if changed {
            for limit in self.pcc.as_ref().expect("checked above").limits() {
                let to = self.vm_index(limit.to);
                enforcer.set_destination_limit(limit.from, to, limit.bps);
            }
        }
        Ok(())
    }

    /// The index a destination limit names `vm` by: its place among all VMs, as
    /// the engine's packets carry it.
    fn vm_index(&self, vm: Vm) -> u32 {
        self.vm_order
            .iter()
            .position(|&v| v == vm)
            .expect("a VM of the scenario") as u32
    }

    /// Takes the feedback datagrams waiting; whether any did.
    fn receive(&mut self) -> std::io::Result<bool> {
        let mut buf = [0u8; 65_536];
        let mut any = false;
        loop {
            match self.control.recv(&mut buf) {
                Ok(n) => {
                    self.counts.feedback_received += 1;
                    let pcc = self.pcc.as_mut().expect("only with feedback");
                    for entry in buf[..n].chunks_exact(FEEDBACK_ENTRY_BYTES) {
                        let f =
                            u32::from_le_bytes(entry[..4].try_into().expect("4 bytes")) as usize;
                        let bps = f64::from_le_bytes(entry[4..].try_into().expect("8 bytes"));
                        if f < self.sender.len() && self.sender[f] == self.host {
                            pcc.receive(f, bps);
                            any = true;
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(any),
                Err(e) => return Err(e),
            }
        }
    }

    pub fn finish(self) -> HostCounts {
        self.counts
    }
}

/// What an engine thread needs to build its [`HostSide`] inside its namespace.
#[derive(Clone, Debug)]
pub(crate) struct HostSideConfig {
    host: HostId,
    scenario: HostsScenario,
    plan: HostsPlan,
    traffic: Vec<TrafficFrames>,
    feedback: Feedback,
    origin: Arc<OnceLock<Instant>>,
}

impl HostSide {
    /// Opens the host's feedback socket; call in the host's namespace.
    pub fn new(config: HostSideConfig) -> std::io::Result<HostSide> {
        let HostSideConfig {
            host,
            scenario,
            plan,
            traffic,
            feedback,
            origin,
        } = config;
        let control = UdpSocket::bind(SocketAddrV4::new(
            plan.hosts[host.index()].control_addr,
            FEEDBACK_PORT,
        ))?;
        control.set_nonblocking(true)?;
        let port_vm: Vec<u32> = (0..plan.vms.len() as u32)
            .filter(|&v| plan.vms[v as usize].vm.host == host)
            .collect();
        let ingress_max_bps: Vec<Option<u64>> = port_vm
            .iter()
            .map(|&v| {
                scenario
                    .tenant(plan.vms[v as usize].vm)
                    .ingress
                    .and_then(|e| e.max_rate_bps)
            })
            .collect();
        let flows = scenario.traffic.len();
        let intervals = scenario.duration_ns.div_ceil(scenario.interval_ns) as usize;
        Ok(HostSide {
            host,
            traffic,
            times: scenario
                .traffic
                .iter()
                .map(|t| (t.traffic.start_ns, t.traffic.stop_ns))
                .collect(),
            sender: scenario.traffic.iter().map(|t| t.host).collect(),
            vm_order: plan.vms.iter().map(|v| v.vm).collect(),
            vm_macs: plan.vms.iter().map(|v| v.mac).collect(),
            policer: vec![(policy::INGRESS_BURST_BYTES as f64, 0); port_vm.len()],
            port_vm,
            ingress_max_bps,
            link_rate_bps: scenario.host(host).policy.link.rate_bps,
            ingress_free_ns: 0,
            pcc: (feedback != Feedback::None).then(|| HostPcc::new(&scenario, host, feedback)),
            control,
            peers: plan
                .hosts
                .iter()
                .map(|h| SocketAddrV4::new(h.control_addr, FEEDBACK_PORT))
                .collect(),
            origin,
            zero_ns: None,
            clock: None,
            epoch_ns: scenario.feedback.epoch_ns,
            epoch_start_ns: 0,
            sent: RateWindow::new(flows),
            arrived: RateWindow::new(flows),
            backlog: Backlog::new(flows),
            slot_traffic: Vec::new(),
            interval_ns: scenario.interval_ns,
            duration_ns: scenario.duration_ns,
            counts: HostCounts {
                sent_bytes: vec![vec![0; intervals]; flows],
                delivered_bytes: vec![vec![0; intervals]; flows],
                sent_outside_bytes: vec![0; flows],
                delivered_outside_bytes: vec![0; flows],
                offered_bytes: vec![0; flows],
                refused_bytes: vec![0; flows],
                held_bytes: vec![0; flows],
                dropped_bytes: vec![0; flows],
                delivered_payload_bytes: vec![0; flows],
                feedback_sent: 0,
                feedback_received: 0,
            },
        })
    }
}

/// Refuses, before anything runs, what the lab does not run across hosts: any
/// traffic but `bulk` and `udp`, `linux-htb`, a fabric's rate, and the transmit
/// rings only the simulator models.
pub fn supported(scenario: &HostsScenario, enforcer: &str) -> Result<(), LabError> {
    if enforcer == crate::LINUX_HTB {
        return Err(LabError::Unsupported(
            "linux-htb runs on one host's link; across hosts run nicsched's enforcers (`-e picnic`, `-e wheel`, ...)".into(),
        ));
    }
    if let Some(t) = scenario.traffic.iter().find(|t| {
        !matches!(
            t.traffic.kind,
            TrafficKind::Bulk { .. } | TrafficKind::Udp { .. }
        )
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
        if let TrafficKind::Udp { rate_bps, .. } = &mut t.traffic.kind {
            *rate_bps = scale(*rate_bps);
        }
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
        let (proto, extra) = match t.traffic.kind {
            TrafficKind::Bulk { .. } => (
                crate::classify::PROTO_TCP,
                vec!["-C".into(), "cubic".into()],
            ),
            TrafficKind::Udp {
                rate_bps,
                size_bytes,
                flows,
            } => (
                crate::classify::PROTO_UDP,
                vec![
                    "-u".into(),
                    "-b".into(),
                    format!("{}", (rate_bps / u64::from(flows)).max(1)),
                    "-l".into(),
                    size_bytes.to_string(),
                ],
            ),
            _ => unreachable!("refused by `supported`"),
        };
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
    let (dir, temporary) = match &options.out {
        Some(dir) => (dir.clone(), false),
        None => (
            std::env::temp_dir().join(format!("nicsched-lab-{}", plan.prefix)),
            true,
        ),
    };
    let (plans, frames) = plan_traffic(&scenario, &plan, &options.tools, &dir)?;
    for program in ["ip", "ethtool", options.tools.iperf3.as_str()] {
        if !crate::program_exists(program) {
            return Err(LabError::MissingTool {
                program: program.to_string(),
            });
        }
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| LabError::Io(format!("cannot create {}: {e}", dir.display())))?;
    let prefix = plan.prefix.clone();
    // Declared first, dropped last: the namespaces go after the threads and
    // programs inside them.
    let mut topology = Topology::create_with(plan.clone(), &prefix, build)?;
    let outcome = run_in(
        &scenario, enforcer, options, &plan, &plans, frames, &buffers, progress,
    );
    if options.keep {
        let delete = topology.keep();
        eprintln!("nicsched lab: namespaces kept for inspection; delete them with: {delete}");
    }
    drop(topology);
    let mut run = outcome?;
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
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
            plan: plan.clone(),
            traffic: frames.clone(),
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
    let sum = |f: &dyn Fn(&HostCounts) -> &Vec<u64>| -> Vec<u64> {
        (0..scenario.traffic.len())
            .map(|t| counts.iter().map(|c| f(c)[t]).sum())
            .collect()
    };
    let per_interval = |f: &dyn Fn(&HostCounts) -> &Vec<Vec<u64>>| -> Vec<Vec<u64>> {
        (0..scenario.traffic.len())
            .map(|t| {
                let intervals = f(&counts[0])[t].len();
                (0..intervals)
                    .map(|k| counts.iter().map(|c| f(c)[t][k]).sum())
                    .collect()
            })
            .collect()
    };
    let sent_bytes = per_interval(&|c| &c.sent_bytes);
    let delivered_bytes = per_interval(&|c| &c.delivered_bytes);
    let sent_outside_bytes = sum(&|c| &c.sent_outside_bytes);
    let delivered_outside_bytes = sum(&|c| &c.delivered_outside_bytes);
    let dropped_bytes = sum(&|c| &c.dropped_bytes);
    // What left a sender and never reached its receiver's engine by the end: on
    // the fabric, or lost in a kernel on the way (a full ring).
    let in_flight_bytes = (0..scenario.traffic.len())
        .map(|t| {
            let sent = sent_bytes[t].iter().sum::<u64>() + sent_outside_bytes[t];
            let arrived = delivered_bytes[t].iter().sum::<u64>()
                + delivered_outside_bytes[t]
                + dropped_bytes[t];
            sent.saturating_sub(arrived)
        })
        .collect();
    report::HostsRecord {
        enforcer: enforcer.to_string(),
        mode: report::Mode::Lab,
        sent_bytes,
        delivered_bytes,
        sent_outside_bytes,
        delivered_outside_bytes,
        offered_bytes: sum(&|c| &c.offered_bytes),
        refused_bytes: sum(&|c| &c.refused_bytes),
        queued_bytes: sum(&|c| &c.held_bytes),
        dropped_bytes,
        in_flight_bytes,
        latency: Vec::new(),
    }
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
        let count = match scenario.traffic[p.traffic].traffic.kind {
            TrafficKind::Bulk { .. } => crate::checks::iperf3_tcp_count(p),
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
