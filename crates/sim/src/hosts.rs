//! The simulator across hosts (hosts.md): each host's egress runs the enforcer and
//! its link; the fabric carries frames to the receiving host, whose link bounds
//! what enters it (a drop-tail queue) and whose VMs' ingress envelopes police
//! what reaches them. A host with an `engine.packet_cost` processes every frame
//! that crossed its link on its engine's cores (the one-host model's
//! [`Cores`]) before its VM sees it, dropping what finds the cores' queue full.
//! Bulk senders are TCP-like: a congestion window of sends,
//! halved on loss once per round trip, grown per acknowledgement, under TCP small
//! queues at the sender. With `picnic`, receivers feed VM-to-VM rates back every
//! epoch, after the feedback delay, and senders fold them into departure times;
//! a receiver whose engine is short of CPU feeds packet rates back too (PCCP).

use crate::engine::{SenderKind, latency_histogram};
use crate::events::EventQueue;
use crate::host::HostModel;
use crate::responses::{self, Behind, Responder};
use policy::pcc::{Backlog, Feedback, HostPcc, RateWindow};
use policy::wire::serialisation_ns;
use policy::{HostId, HostsScenario, INGRESS_QUEUE_BYTES, Vm};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use report::{HostsRecord, LatencyRecord};
use sched::cores::Cores;
use sched::{BuildError, Enforcer, Frame, Packet};
use std::collections::VecDeque;

/// A sender's window starts at this many sends and never falls below one.
const WINDOW_INITIAL: f64 = 4.0;

struct Sender {
    traffic: usize,
    kind: SenderKind,
    send_bytes: u32,
    active: bool,
    window: f64,
    in_flight: u32,
    at_host: u32,
    last_cut_ns: u64,
    slow_start: bool,
    /// Bulk: refused, a retry is scheduled. Rpc: its first response was refused
    /// and is offered again later.
    retry_pending: bool,
    /// Rpc: the responses due behind a refused one.
    behind: Behind,
    rng: ChaCha8Rng,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Start(usize),
    Stop(usize),
    LinkFree(u16),
    Kick(u16),
    Arrive {
        host: u16,
        frame: Frame,
    },
    IngressFree(u16),
    Processed {
        host: u16,
        frame: Frame,
        core: u16,
    },
    Ack {
        sender: u32,
        lost: bool,
        issued_ns: u64,
        last: bool,
    },
    Send(u32),
    Respond {
        sender: u32,
        issued_ns: u64,
    },
    RespondAgain {
        sender: u32,
        issued_ns: u64,
    },
    Epoch,
    Limit {
        host: u16,
        traffic: usize,
        bps: f64,
    },
    PacketLimit {
        host: u16,
        traffic: usize,
        packets_per_s: f64,
    },
}

struct Host {
    enforcer: Box<dyn Enforcer>,
    on_wire: Option<Frame>,
    kick_at: Option<u64>,
    ingress: VecDeque<Frame>,
    ingress_bytes: u64,
    ingress_busy: bool,
    /// The engine's cores, for what enters the host, where its policy gives
    /// `engine.packet_cost`; without it the engine never limits.
    cpu: Option<Cores<Frame>>,
    pcc: HostPcc,
}

struct Run<'a> {
    scenario: &'a HostsScenario,
    /// When the fabric (`fabric.rate`) is next free to forward a frame.
    fabric_free_ns: u64,
    model: HostModel,
    events: EventQueue<Ev>,
    hosts: Vec<Host>,
    senders: Vec<Sender>,
    vm_offset: Vec<u32>,
    /// Per VM: its ingress policer.
    policer: Vec<policy::policer::Policer>,
    record: HostsRecord,
    latency_of: Vec<Option<usize>>,
    /// Per traffic: bytes that left the sender, bytes that arrived at the
    /// receiver's host, measured for feedback.
    sent: RateWindow,
    /// What reached the senders' enforcers, refused or not.
    offered: RateWindow,
    arrived: RateWindow,
    /// Per traffic: what its sender's enforcer holds, waiting to leave.
    backlog: Backlog,
    /// Per traffic: frames that arrived at the receiver's host, for PCCP.
    arrived_packets: RateWindow,
    /// Each traffic's senders, contiguous.
    traffic_senders: Vec<std::ops::Range<u32>>,
}

/// Simulates `scenario` across its hosts under the enforcer called `enforcer`.
pub fn run_hosts(
    scenario: &HostsScenario,
    enforcer: &str,
    model: HostModel,
    progress: &mut dyn FnMut(u64),
) -> Result<HostsRecord, BuildError> {
    let feedback = sched::registry::feedback(enforcer);
    let hosts = build_hosts(scenario, enforcer, model, feedback)?;
    let (vm_offset, vms) = vm_offsets(scenario);
    let flows = scenario.traffic.len();
    let senders = Senders::of(scenario);
    let mut run = Run {
        scenario,
        fabric_free_ns: 0,
        model,
        events: first_events(scenario, feedback),
        hosts,
        senders: senders.senders,
        vm_offset,
        policer: vec![policy::policer::Policer::default(); vms as usize],
        record: HostsRecord {
            latency: senders.latency,
            ..HostsRecord::empty(scenario, enforcer, report::Mode::Sim)
        },
        latency_of: senders.latency_of,
        traffic_senders: senders.traffic_senders,
        sent: RateWindow::new(flows),
        offered: RateWindow::new(flows),
        arrived: RateWindow::new(flows),
        backlog: Backlog::new(flows),
        arrived_packets: RateWindow::packets(flows),
    };
    run.until_done(progress);
    run.finish();
    Ok(run.record)
}

/// Each host with its own enforcer built for its policy, its engine's cores and
/// its feedback state; fails as the enforcer's build does.
fn build_hosts(
    scenario: &HostsScenario,
    enforcer: &str,
    model: HostModel,
    feedback: Feedback,
) -> Result<Vec<Host>, BuildError> {
    let capacity = sched::Capacity::for_host(enforcer, model.limits);
    let mut hosts = Vec::new();
    for (h, host) in scenario.hosts.iter().enumerate() {
        hosts.push(Host {
            enforcer: sched::build_with(enforcer, &host.policy, capacity)?,
            on_wire: None,
            kick_at: None,
            ingress: VecDeque::new(),
            ingress_bytes: 0,
            ingress_busy: false,
            // Frames wait for the cores in the queues `engine.cpu` names: `fifo`
            // for a NIC's one receive queue in front of an engine that classifies
            // frames only once a core takes them.
            cpu: (host.policy.engine.packet_cost_ns > 0)
                .then(|| Cores::new(&host.policy, model.engine_queue_packets, None)),
            pcc: HostPcc::new(scenario, HostId(h as u16), feedback),
        });
    }
    Ok(hosts)
}

/// Where each host's VMs start in the flat per-VM tables, and how many VMs
/// there are in all.
fn vm_offsets(scenario: &HostsScenario) -> (Vec<u32>, u32) {
    let mut vm_offset = Vec::new();
    let mut vms = 0u32;
    for host in &scenario.hosts {
        vm_offset.push(vms);
        vms += host.policy.tenants.len() as u32;
    }
    (vm_offset, vms)
}

/// The senders of every traffic, and the latency records of those that ask requests.
struct Senders {
    senders: Vec<Sender>,
    latency: Vec<LatencyRecord>,
    latency_of: Vec<Option<usize>>,
    traffic_senders: Vec<std::ops::Range<u32>>,
}

impl Senders {
    /// One sender per flow of each traffic, each with its own random stream
    /// seeded from the scenario's seed and its index, so that a sender draws
    /// the same numbers whatever the others do.
    fn of(scenario: &HostsScenario) -> Senders {
        let mut out = Senders {
            senders: Vec::new(),
            latency: Vec::new(),
            latency_of: Vec::new(),
            traffic_senders: Vec::new(),
        };
        for (ti, t) in scenario.traffic.iter().enumerate() {
            let policy = &scenario.host(t.host).policy;
            let (kind, send_bytes) = SenderKind::of(
                &t.traffic.kind,
                policy.link.mtu_bytes,
                policy.flow_cap_bps(t.traffic.app),
            );
            out.latency_of.push(t.traffic.kind.has_requests().then(|| {
                out.latency.push(LatencyRecord {
                    traffic: t.traffic.name.clone(),
                    histogram_ns: latency_histogram(),
                });
                out.latency.len() - 1
            }));
            let first = out.senders.len() as u32;
            for _ in 0..t.traffic.kind.flows() {
                let index = out.senders.len() as u64;
                out.senders.push(Sender {
                    traffic: ti,
                    kind,
                    send_bytes,
                    active: false,
                    window: WINDOW_INITIAL,
                    in_flight: 0,
                    at_host: 0,
                    last_cut_ns: 0,
                    slow_start: true,
                    retry_pending: false,
                    behind: Behind::default(),
                    rng: ChaCha8Rng::seed_from_u64(
                        scenario.seed ^ (index + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    ),
                });
            }
            out.traffic_senders.push(first..out.senders.len() as u32);
        }
        out
    }
}

/// Each traffic's start and stop, and the first feedback epoch where the
/// enforcer feeds rates back.
fn first_events(scenario: &HostsScenario, feedback: Feedback) -> EventQueue<Ev> {
    let mut events = EventQueue::default();
    for (ti, t) in scenario.traffic.iter().enumerate() {
        events.schedule(t.traffic.start_ns, Ev::Start(ti));
        events.schedule(t.traffic.stop_ns, Ev::Stop(ti));
    }
    if feedback != Feedback::None {
        events.schedule(scenario.feedback.epoch_ns, Ev::Epoch);
    }
    events
}

/// A packet handle: the sender in the low 24 bits, the issue time above.
fn handle(sender: u32, issued_ns: u64) -> u64 {
    u64::from(sender) | issued_ns << 24
}

fn unhandle(handle: u64) -> (u32, u64) {
    ((handle & 0xff_ffff) as u32, handle >> 24)
}

impl Responder for Run<'_> {
    fn holds(&self, sender: u32) -> bool {
        self.senders[sender as usize].retry_pending
    }

    /// A response the server's host refuses is offered again later.
    fn send_response(&mut self, now: u64, sender: u32, issued_ns: u64) -> bool {
        if self.offer(now, sender, issued_ns) {
            return true;
        }
        self.senders[sender as usize].retry_pending = true;
        self.events.schedule(
            now + self.model.refused_retry_ns,
            Ev::RespondAgain { sender, issued_ns },
        );
        false
    }

    fn behind(&mut self, sender: u32) -> &mut Behind {
        &mut self.senders[sender as usize].behind
    }
}

impl Run<'_> {
    /// Handles events in time order until the scenario's end, reporting the
    /// simulated time about every hundredth of the run.
    fn until_done(&mut self, progress: &mut dyn FnMut(u64)) {
        let duration_ns = self.scenario.duration_ns;
        let mut next_progress = 0;
        while let Some((now, ev)) = self.events.pop() {
            if now >= duration_ns {
                break;
            }
            if now >= next_progress {
                progress(now);
                next_progress = now + duration_ns / 100;
            }
            self.handle(now, ev);
        }
        progress(duration_ns);
    }

    fn interval(&self, now: u64) -> usize {
        report::measure::interval_of(now, self.scenario.interval_ns)
            .min(self.record.sent_bytes[0].len() - 1)
    }

    fn handle(&mut self, now: u64, ev: Ev) {
        match ev {
            Ev::Start(t) => {
                for s in self.traffic_senders[t].clone() {
                    self.senders[s as usize].active = true;
                    match self.senders[s as usize].kind {
                        SenderKind::Bulk => self.fill(now, s),
                        SenderKind::RpcClosed => self.issue(now, s),
                        SenderKind::Datagram { .. } | SenderKind::RpcOpen { .. } => {
                            let phase = self.senders[s as usize].rng.random_range(0..1000);
                            self.events.schedule(now + phase, Ev::Send(s));
                        }
                    }
                }
            }
            Ev::Stop(t) => {
                for s in self.traffic_senders[t].clone() {
                    self.senders[s as usize].active = false;
                }
            }
            Ev::LinkFree(h) => self.frame_left(now, h),
            Ev::Kick(h) => {
                self.hosts[h as usize].kick_at = None;
                self.transmit(now, h);
            }
            Ev::Arrive { host, frame } => self.arrive(now, host, frame),
            Ev::IngressFree(h) => self.ingress_done(now, h),
            Ev::Processed { host, frame, core } => self.processed(now, host, frame, core),
            Ev::Ack {
                sender,
                lost,
                issued_ns,
                last,
            } => self.ack(now, sender, lost, issued_ns, last),
            Ev::Send(s) => self.open_loop(now, s),
            Ev::Respond { sender, issued_ns } => responses::respond(self, now, sender, issued_ns),
            Ev::RespondAgain { sender, issued_ns } => {
                self.senders[sender as usize].retry_pending = false;
                responses::send_from(self, now, sender, issued_ns);
            }
            Ev::Epoch => self.epoch(now),
            Ev::Limit { host, traffic, bps } => {
                self.hosts[host as usize].pcc.receive(traffic, bps);
                self.apply_limits(host);
            }
            Ev::PacketLimit {
                host,
                traffic,
                packets_per_s,
            } => {
                self.hosts[host as usize]
                    .pcc
                    .receive_packets(traffic, packets_per_s);
                self.apply_limits(host);
            }
        }
    }

    fn fill(&mut self, now: u64, s: u32) {
        loop {
            let sender = &self.senders[s as usize];
            if !sender.active
                || sender.retry_pending
                || f64::from(sender.in_flight) >= sender.window.floor()
                || sender.at_host >= self.model.tsq_sends_min
            {
                return;
            }
            if !self.offer(now, s, now) {
                let sender = &mut self.senders[s as usize];
                sender.retry_pending = true;
                self.events
                    .schedule(now + self.model.refused_retry_ns, Ev::Send(s));
                return;
            }
        }
    }

    fn issue(&mut self, now: u64, s: u32) {
        // The request crosses the fabric and the server answers.
        let at = now + self.model.path.wire_delay_ns + self.model.path.server_delay_ns;
        self.events.schedule(
            at,
            Ev::Respond {
                sender: s,
                issued_ns: now,
            },
        );
    }

    fn open_loop(&mut self, now: u64, s: u32) {
        let sender = &mut self.senders[s as usize];
        if sender.kind == SenderKind::Bulk {
            sender.retry_pending = false;
            self.fill(now, s);
            return;
        }
        if !sender.active {
            return;
        }
        let (gap, poisson) = match sender.kind {
            SenderKind::Datagram { gap_ns, poisson } => (gap_ns, poisson),
            SenderKind::RpcOpen { gap_ns } => (gap_ns, true),
            SenderKind::Bulk | SenderKind::RpcClosed => {
                unreachable!("closed-loop senders are not timed")
            }
        };
        let next = if poisson {
            let u: f64 = sender.rng.random_range(f64::EPSILON..1.0);
            -gap * u.ln()
        } else {
            gap
        };
        let next = now + next.max(1.0) as u64;
        match sender.kind {
            SenderKind::RpcOpen { .. } => self.issue(now, s),
            _ => {
                self.offer(now, s, now);
            }
        }
        self.events.schedule(next, Ev::Send(s));
    }

    /// Hands one send to the sender host's enforcer; false if refused.
    fn offer(&mut self, now: u64, s: u32, issued_ns: u64) -> bool {
        let sender = &self.senders[s as usize];
        let t = &self.scenario.traffic[sender.traffic];
        let bytes = sender.send_bytes;
        let packet = Packet {
            len_bytes: bytes,
            tenant: t.traffic.tenant,
            app: t.traffic.app,
            flow: s,
            destination: self.vm_index(t.to),
            core: 0,
            arrival_ns: now,
            handle: handle(s, issued_ns),
        };
        let traffic = sender.traffic;
        let h = t.host.0;
        self.record.offered_bytes[traffic] += u64::from(bytes);
        self.offered.count(traffic, u64::from(bytes));
        match self.hosts[h as usize].enforcer.enqueue(now, packet) {
            Ok(()) => {
                self.backlog.queued(traffic, u64::from(bytes));
                let sender = &mut self.senders[s as usize];
                sender.at_host += 1;
                sender.in_flight += 1;
                self.transmit(now, h);
                true
            }
            Err(_) => {
                self.record.refused_bytes[traffic] += u64::from(bytes);
                false
            }
        }
    }

    fn vm_index(&self, vm: Vm) -> u32 {
        self.vm_offset[vm.host.index()] + u32::from(vm.tenant.0)
    }

    fn transmit(&mut self, now: u64, h: u16) {
        let host = &mut self.hosts[h as usize];
        if host.on_wire.is_some() {
            return;
        }
        if let Some(frame) = host.enforcer.dequeue(now) {
            let (s, _) = unhandle(frame.packet.handle);
            let traffic = self.senders[s as usize].traffic;
            self.backlog.left(traffic, u64::from(frame.bytes));
            let rate = self.scenario.hosts[h as usize].policy.link.rate_bps;
            host.on_wire = Some(frame);
            self.events
                .schedule(now + serialisation_ns(frame.bytes, rate), Ev::LinkFree(h));
        } else if let Some(at) = host.enforcer.next_ready_ns(now)
            && host.kick_at.is_none_or(|k| at < k)
        {
            host.kick_at = Some(at);
            self.events.schedule(at.max(now + 1), Ev::Kick(h));
        }
    }

    fn frame_left(&mut self, now: u64, h: u16) {
        let frame = self.hosts[h as usize]
            .on_wire
            .take()
            .expect("a frame was on the wire");
        let (s, _) = unhandle(frame.packet.handle);
        let traffic = self.senders[s as usize].traffic;
        let k = self.interval(now);
        self.record.sent_bytes[traffic][k] += u64::from(frame.bytes);
        self.sent.count(traffic, u64::from(frame.bytes));
        if frame.last {
            self.senders[s as usize].at_host -= 1;
        }
        let to = self.scenario.traffic[traffic].to.host.0;
        let mut arrives_ns = now + self.model.path.wire_delay_ns;
        if let Some(rate) = self.scenario.fabric_rate_bps {
            // The fabric as one switch of `fabric.rate`: frames from every host
            // queue for it, and a frame that finds its buffer full is dropped.
            let backlog_bytes =
                self.fabric_free_ns.saturating_sub(arrives_ns) as f64 * rate as f64 / 8e9;
            if backlog_bytes + f64::from(frame.bytes) > policy::FABRIC_QUEUE_BYTES as f64 {
                self.record.dropped_bytes[traffic] += u64::from(frame.bytes);
                let (_, issued_ns) = unhandle(frame.packet.handle);
                self.lost(now, s, issued_ns, frame.last);
                self.transmit(now, h);
                if frame.last && self.senders[s as usize].kind == SenderKind::Bulk {
                    self.fill(now, s);
                }
                return;
            }
            self.fabric_free_ns =
                self.fabric_free_ns.max(arrives_ns) + serialisation_ns(frame.bytes, rate);
            arrives_ns = self.fabric_free_ns;
        }
        self.events
            .schedule(arrives_ns, Ev::Arrive { host: to, frame });
        self.transmit(now, h);
        if frame.last && self.senders[s as usize].kind == SenderKind::Bulk {
            self.fill(now, s);
        }
    }

    fn arrive(&mut self, now: u64, h: u16, frame: Frame) {
        let (s, issued_ns) = unhandle(frame.packet.handle);
        let traffic = self.senders[s as usize].traffic;
        self.arrived.count(traffic, u64::from(frame.bytes));
        self.arrived_packets
            .count(traffic, u64::from(self.wire_packets(h, frame.bytes)));
        let host = &mut self.hosts[h as usize];
        if host.ingress_bytes + u64::from(frame.bytes) > INGRESS_QUEUE_BYTES {
            self.record.dropped_bytes[traffic] += u64::from(frame.bytes);
            self.lost(now, s, issued_ns, frame.last);
            return;
        }
        host.ingress_bytes += u64::from(frame.bytes);
        host.ingress.push_back(frame);
        if !host.ingress_busy {
            self.start_ingress(now, h);
        }
    }

    fn start_ingress(&mut self, now: u64, h: u16) {
        let rate = self.scenario.hosts[h as usize].policy.link.rate_bps;
        let host = &mut self.hosts[h as usize];
        if let Some(frame) = host.ingress.front() {
            host.ingress_busy = true;
            self.events.schedule(
                now + serialisation_ns(frame.bytes, rate),
                Ev::IngressFree(h),
            );
        } else {
            host.ingress_busy = false;
        }
    }

    fn ingress_done(&mut self, now: u64, h: u16) {
        let host = &mut self.hosts[h as usize];
        let frame = host
            .ingress
            .pop_front()
            .expect("a frame was on the ingress link");
        host.ingress_bytes -= u64::from(frame.bytes);
        self.start_ingress(now, h);
        if self.hosts[h as usize].cpu.is_none() {
            self.deliver(now, frame);
            return;
        }
        let (s, issued_ns) = unhandle(frame.packet.handle);
        let traffic = self.senders[s as usize].traffic;
        let tenant = self.scenario.traffic[traffic].to.tenant;
        let cost_ns = self.scenario.hosts[h as usize].policy.engine.packet_cost_ns
            * u64::from(self.wire_packets(h, frame.bytes));
        let cpu = self.hosts[h as usize].cpu.as_mut().expect("checked above");
        if cpu.arrive(frame, s, tenant, frame.bytes, cost_ns).is_err() {
            // The receive queue is full: the NIC drops the frame, as the
            // receiver's link drops what overflows its queue.
            self.record.dropped_bytes[traffic] += u64::from(frame.bytes);
            self.lost(now, s, issued_ns, frame.last);
            return;
        }
        self.start_cores(now, h);
    }

    /// Frames the engine handles for `bytes` that crossed host `h`'s link: a TSO
    /// send arrives as one frame per MTU.
    fn wire_packets(&self, h: u16, bytes: u32) -> u32 {
        bytes.div_ceil(self.scenario.hosts[h as usize].policy.link.mtu_bytes.max(1))
    }

    /// Puts frames waiting at host `h`'s engine on its idle cores.
    fn start_cores(&mut self, now: u64, h: u16) {
        let cpu = self.hosts[h as usize]
            .cpu
            .as_mut()
            .expect("only a host with engine cost has cores");
        while let Some(waiting) = cpu.take() {
            self.events.schedule(
                now + waiting.cost_ns,
                Ev::Processed {
                    host: h,
                    frame: waiting.item,
                    core: waiting.core,
                },
            );
        }
    }

    /// A core of host `h`'s engine processed `frame`: only now may its VM have it.
    fn processed(&mut self, now: u64, h: u16, frame: Frame, core: u16) {
        let traffic = self.senders[unhandle(frame.packet.handle).0 as usize].traffic;
        let tenant = self.scenario.traffic[traffic].to.tenant;
        self.hosts[h as usize]
            .cpu
            .as_mut()
            .expect("only a host with engine cost has cores")
            .processed(tenant, frame.bytes, core);
        self.start_cores(now, h);
        self.deliver(now, frame);
    }

    /// A frame reaches its VM, through the VM's ingress policer.
    fn deliver(&mut self, now: u64, frame: Frame) {
        let (s, issued_ns) = unhandle(frame.packet.handle);
        let traffic = self.senders[s as usize].traffic;
        let to = self.scenario.traffic[traffic].to;
        if let Some(max) = self
            .scenario
            .tenant(to)
            .ingress
            .and_then(|e| e.max_rate_bps)
        {
            let vm = self.vm_index(to) as usize;
            if !self.policer[vm].admit(now, u64::from(frame.bytes), max) {
                self.record.dropped_bytes[traffic] += u64::from(frame.bytes);
                self.lost(now, s, issued_ns, frame.last);
                return;
            }
        }
        let k = self.interval(now);
        self.record.delivered_bytes[traffic][k] += u64::from(frame.bytes);
        if frame.last {
            self.events.schedule(
                now + self.model.path.wire_delay_ns,
                Ev::Ack {
                    sender: s,
                    lost: false,
                    issued_ns,
                    last: true,
                },
            );
        }
    }

    fn lost(&mut self, now: u64, s: u32, issued_ns: u64, last: bool) {
        self.events.schedule(
            now + self.model.path.wire_delay_ns,
            Ev::Ack {
                sender: s,
                lost: true,
                issued_ns,
                last,
            },
        );
    }

    fn ack(&mut self, now: u64, s: u32, lost: bool, issued_ns: u64, last: bool) {
        let rtt_ns = (now - issued_ns).max(2 * self.model.path.wire_delay_ns);
        let sender = &mut self.senders[s as usize];
        if lost && now.saturating_sub(sender.last_cut_ns) > rtt_ns {
            sender.window = (sender.window / 2.0).max(1.0);
            sender.last_cut_ns = now;
            sender.slow_start = false;
        }
        if !last {
            return;
        }
        sender.in_flight -= 1;
        if !lost {
            sender.window += if sender.slow_start {
                1.0
            } else {
                1.0 / sender.window
            };
        }
        match sender.kind {
            SenderKind::Bulk => self.fill(now, s),
            SenderKind::RpcClosed | SenderKind::RpcOpen { .. } => {
                if lost {
                    // A lost response is asked for again; its latency runs on.
                    self.events.schedule(
                        now,
                        Ev::Respond {
                            sender: s,
                            issued_ns,
                        },
                    );
                    return;
                }
                let traffic = sender.traffic;
                if let Some(l) = self.latency_of[traffic] {
                    let _ = self.record.latency[l]
                        .histogram_ns
                        .record((now - issued_ns).max(1));
                }
                if sender.kind == SenderKind::RpcClosed && sender.active {
                    self.issue(now, s);
                }
            }
            SenderKind::Datagram { .. } => {}
        }
    }

    /// Receivers compute rates for the VMs sending to them and send them back;
    /// senders recompute their own egress shares.
    fn epoch(&mut self, now: u64) {
        let epoch_ns = self.scenario.feedback.epoch_ns;
        let traffic = &self.scenario.traffic;
        let running_ns = |f: usize| now.saturating_sub(traffic[f].traffic.start_ns);
        let arrived = self.arrived.end_epoch(epoch_ns, running_ns);
        let sent = self.sent.end_epoch(epoch_ns, running_ns);
        let offered = self.offered.end_epoch(epoch_ns, running_ns);
        let arrived_packets = self.arrived_packets.end_epoch(epoch_ns, running_ns);
        let backlogged = self.backlog.end_epoch();
        let running: Vec<bool> = (0..self.scenario.traffic.len())
            .map(|f| {
                let t = &self.scenario.traffic[f].traffic;
                t.start_ns <= now && now < t.stop_ns
            })
            .collect();
        for h in 0..self.hosts.len() {
            for (traffic, bps) in
                self.hosts[h]
                    .pcc
                    .epoch(&running, &sent, &offered, &arrived, &backlogged)
            {
                let host = self.scenario.traffic[traffic].host.0;
                self.events.schedule(
                    now + self.scenario.feedback.delay_ns,
                    Ev::Limit { host, traffic, bps },
                );
            }
            for (traffic, packets_per_s) in
                self.hosts[h].pcc.packet_epoch(&running, &arrived_packets)
            {
                let host = self.scenario.traffic[traffic].host.0;
                self.events.schedule(
                    now + self.scenario.feedback.delay_ns,
                    Ev::PacketLimit {
                        host,
                        traffic,
                        packets_per_s,
                    },
                );
            }
            self.apply_limits(h as u16);
        }
        self.events
            .schedule(now + self.scenario.feedback.epoch_ns, Ev::Epoch);
    }

    fn apply_limits(&mut self, h: u16) {
        for limit in self.hosts[h as usize].pcc.limits() {
            let destination = self.vm_index(limit.to);
            let enforcer = &mut self.hosts[h as usize].enforcer;
            enforcer.set_destination_limit(limit.from, destination, limit.bps);
            enforcer.set_destination_packet_limit(limit.from, destination, limit.packets_per_s);
        }
    }

    /// What is left at the end: held by the senders' enforcers or on their wires,
    /// crossing the fabric, or queued at the receivers' links or engines.
    fn finish(&mut self) {
        let traffic_of = |senders: &[Sender], frame: &Frame| {
            senders[unhandle(frame.packet.handle).0 as usize].traffic
        };
        let queued = &mut self.record.queued_bytes;
        for host in &mut self.hosts {
            if let Some(frame) = host.on_wire.take() {
                queued[traffic_of(&self.senders, &frame)] += u64::from(frame.bytes);
            }
            sched::drain_held(host.enforcer.as_mut(), self.scenario.duration_ns, |frame| {
                queued[traffic_of(&self.senders, &frame)] += u64::from(frame.bytes);
            });
            let at_engine = host.cpu.iter_mut().flat_map(|cpu| cpu.drain());
            for frame in host
                .ingress
                .iter()
                .copied()
                .chain(at_engine.map(|w| w.item))
            {
                self.record.in_flight_bytes[traffic_of(&self.senders, &frame)] +=
                    u64::from(frame.bytes);
            }
        }
        while let Some((_, ev)) = self.events.pop() {
            if let Ev::Arrive { frame, .. } | Ev::Processed { frame, .. } = ev {
                self.record.in_flight_bytes[traffic_of(&self.senders, &frame)] +=
                    u64::from(frame.bytes);
            }
        }
    }
}
