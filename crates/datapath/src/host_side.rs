//! The host side of a frame across hosts (hosts.md, "Lab"): what one host's engine
//! does beyond the one-host engine's forwarding, called from its loop.
//!
//! What enters a host from the fabric goes through [`HostSide::arrive`] instead of
//! the one-host engine's unscheduled return path: bounded by the link's rate (a
//! drop-tail queue of [`policy::INGRESS_QUEUE_BYTES`]) and each VM's ingress
//! envelope (a policer), dropping where exceeded, as the simulator does. Both are
//! virtual queues: a frame within them goes on at once rather than after its queue
//! time, since only whether it fits is in question.
//!
//! With feedback (`picnic`, `picnic-wc`, `picnic-bps`), the host side runs its
//! host's [`policy::pcc::HostPcc`] every `feedback.epoch` on the bytes it counted
//! (and what its enforcer held, [`policy::pcc::Backlog`]), sends its receivers'
//! rates to the sending hosts' engines as UDP datagrams on its feedback socket, and
//! applies what reaches it with [`sched::Enforcer::set_destination_limit`].
//! Feedback takes however long the datagram does (tens of µs), not the scenario's
//! `feedback.delay`. Only PCCB's bit rates travel so far: PCCP's packet rates
//! ([`policy::pcc::HostPcc::packet_epoch`]) need the engine's real capacity in
//! packets, which the lab measures rather than sets.
//!
//! It knows nothing of how the hosts are built: [`HostSideConfig`] carries the
//! addresses and MACs it needs.

use crate::classify::{ETHERNET_HEADER_BYTES, Ipv4Header, ParsedFrame, parse, payload_bytes};
use crate::sys::packet::{RxFrame, RxRing, VNET_HDR_BYTES};
use policy::pcc::{Backlog, Feedback, HostPcc, RateWindow};
use policy::policer::Policer;
use policy::wire::serialisation_ns;
use policy::{HostId, HostsScenario, Vm};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// UDP port of every engine's feedback socket.
pub const FEEDBACK_PORT: u16 = 4790;
/// One rate in a feedback datagram: the traffic's index (u32) and its rate in
/// bit/s (f64), little-endian.
const FEEDBACK_ENTRY_BYTES: usize = 12;

/// What tells a traffic's frames apart, wherever they are seen.
#[derive(Clone, Copy, Debug)]
pub struct TrafficFrames {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub proto: u8,
    pub dst_port: u16,
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
#[derive(Clone, Debug, PartialEq)]
pub struct HostCounts {
    /// This host's side of the run's record: what its senders offered, had
    /// refused, sent (in the run's intervals or outside them) and left held
    /// (`queued_bytes`), and what reached its VMs or was dropped entering the
    /// host. What was in flight is the run's, of every host's counts together.
    pub record: report::HostsRecord,
    /// Transport payload delivered to this host's VMs over the whole run: what
    /// the programs count.
    pub delivered_payload_bytes: Vec<u64>,
    pub feedback_sent: u64,
    pub feedback_received: u64,
}

/// An engine's part in a run across hosts: what enters its host, the feedback,
/// and the counts per traffic.
pub struct HostSide {
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
    /// Per port: the VM's ingress `max_rate`, and its policer.
    ingress_max_bps: Vec<Option<u64>>,
    policer: Vec<Policer>,
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
    /// Per traffic: bytes this host sent, offered its enforcer (refused or not)
    /// and received, measured for feedback.
    sent: RateWindow,
    offered: RateWindow,
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
            self.counts.record.offered_bytes[f] += u64::from(ip.len_bytes);
            // Before time zero nothing runs for the feedback (the programs' warm-up).
            if self.zero_ns.is_some() {
                self.offered.count(f, u64::from(ip.len_bytes));
            }
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
            self.counts.record.refused_bytes[f] += u64::from(bytes);
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
            Some(k) => self.counts.record.sent_bytes[f][k] += bytes,
            None => self.counts.record.sent_outside_bytes[f] += bytes,
        }
    }

    /// The frame in `slot`, counted as sent, never left: the uplink stayed busy
    /// until the engine stopped, after the run.
    pub fn unsent(&mut self, slot: u64, bytes: u32) {
        let Some(f) = self.slot(slot) else { return };
        let outside = &mut self.counts.record.sent_outside_bytes[f];
        *outside = outside.saturating_sub(u64::from(bytes));
        self.counts.record.queued_bytes[f] += u64::from(bytes);
    }

    /// The frame in `slot` was still held when the engine stopped.
    pub fn held(&mut self, slot: u64, bytes: u32) {
        if let Some(f) = self.slot(slot) {
            self.counts.record.queued_bytes[f] += u64::from(bytes);
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
                fits = self.policer[port].admit(leaves_ns, bytes, max);
            }
        }
        if !fits {
            if let Some(f) = traffic {
                self.counts.record.dropped_bytes[f] += bytes;
            }
            return Ok(());
        }
        ports[port].socket().send(frame)?;
        if let (Some(f), Some(ip)) = (traffic, ip) {
            self.counts.delivered_payload_bytes[f] +=
                u64::from(payload_bytes(ethernet, &ip).unwrap_or(0));
            match self.interval(leaves_ns) {
                Some(k) => self.counts.record.delivered_bytes[f][k] += bytes,
                None => self.counts.record.delivered_outside_bytes[f] += bytes,
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
            let offered = self.offered.end_epoch(measured_ns, running_ns);
            let arrived = self.arrived.end_epoch(measured_ns, running_ns);
            let backlogged = self.backlog.end_epoch();
            let running: Vec<bool> = self.times.iter().map(|&(a, b)| a <= at && at < b).collect();
            let pcc = self.pcc.as_mut().expect("checked above");
            let offers = pcc.epoch(&running, &sent, &offered, &arrived, &backlogged);
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
pub struct HostSideConfig {
    pub host: HostId,
    pub scenario: HostsScenario,
    /// Each host's feedback address, by host index.
    pub control_addrs: Vec<Ipv4Addr>,
    /// Every VM and its MAC, in [`HostsScenario::vms`] order: the index a
    /// destination limit names it by.
    pub vms: Vec<(Vm, [u8; 6])>,
    pub traffic: Vec<TrafficFrames>,
    /// The enforcer's name, for this host's record.
    pub enforcer: String,
    pub feedback: Feedback,
    /// Set at the run's time zero by whoever drives the traffic.
    pub origin: Arc<OnceLock<Instant>>,
}

impl HostSide {
    /// Opens the host's feedback socket; call in the host's namespace.
    pub fn new(config: HostSideConfig) -> std::io::Result<HostSide> {
        let HostSideConfig {
            host,
            scenario,
            control_addrs,
            vms,
            traffic,
            enforcer,
            feedback,
            origin,
        } = config;
        let control = UdpSocket::bind(SocketAddrV4::new(
            control_addrs[host.index()],
            FEEDBACK_PORT,
        ))?;
        control.set_nonblocking(true)?;
        let port_vm: Vec<u32> = (0..vms.len() as u32)
            .filter(|&v| vms[v as usize].0.host == host)
            .collect();
        let ingress_max_bps: Vec<Option<u64>> = port_vm
            .iter()
            .map(|&v| {
                scenario
                    .tenant(vms[v as usize].0)
                    .ingress
                    .and_then(|e| e.max_rate_bps)
            })
            .collect();
        let flows = scenario.traffic.len();
        Ok(HostSide {
            host,
            traffic,
            times: scenario
                .traffic
                .iter()
                .map(|t| (t.traffic.start_ns, t.traffic.stop_ns))
                .collect(),
            sender: scenario.traffic.iter().map(|t| t.host).collect(),
            vm_order: vms.iter().map(|&(vm, _)| vm).collect(),
            vm_macs: vms.iter().map(|&(_, mac)| mac).collect(),
            policer: vec![Policer::default(); port_vm.len()],
            port_vm,
            ingress_max_bps,
            link_rate_bps: scenario.host(host).policy.link.rate_bps,
            ingress_free_ns: 0,
            pcc: (feedback != Feedback::None).then(|| HostPcc::new(&scenario, host, feedback)),
            control,
            peers: control_addrs
                .iter()
                .map(|&addr| SocketAddrV4::new(addr, FEEDBACK_PORT))
                .collect(),
            origin,
            zero_ns: None,
            clock: None,
            epoch_ns: scenario.feedback.epoch_ns,
            epoch_start_ns: 0,
            sent: RateWindow::new(flows),
            offered: RateWindow::new(flows),
            arrived: RateWindow::new(flows),
            backlog: Backlog::new(flows),
            slot_traffic: Vec::new(),
            interval_ns: scenario.interval_ns,
            duration_ns: scenario.duration_ns,
            counts: HostCounts {
                record: report::HostsRecord::empty(&scenario, &enforcer, report::Mode::Lab),
                delivered_payload_bytes: vec![0; flows],
                feedback_sent: 0,
                feedback_received: 0,
            },
        })
    }
}
