//! The run loop: senders offer packets to the enforcer, the link takes one frame at a
//! time at the line rate, completions and responses flow back to the senders.

use crate::events::{Event, EventQueue};
use crate::host::HostModel;
use policy::wire::{UDP_HEADER_BYTES, bulk_send_bytes, serialisation_ns, tcp_wire_bytes};
use policy::{AppId, Scenario, TenantId, TrafficKind};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use report::measure;
use report::{LatencyRecord, Mode, RunRecord};
use sched::cores::Cores;
use sched::{Enforcer, Frame, Packet};

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum SenderKind {
    /// A backlogged TCP-like flow bounded by TCP small queues.
    Bulk,
    /// One flow of open-loop datagrams; `poisson` draws exponential gaps.
    Datagram { gap_ns: f64, poisson: bool },
    /// One rpc connection, closed loop: the next request goes out when the response is in.
    RpcClosed,
    /// One rpc connection, open loop: requests at exponential gaps of mean `gap_ns`.
    RpcOpen { gap_ns: f64 },
}

impl SenderKind {
    /// What each sender of a traffic of `kind` is, and the bytes of one of its
    /// sends (a bulk TSO send, a datagram, a response) on a link of `mtu_bytes`.
    pub(crate) fn of(kind: &TrafficKind, mtu_bytes: u32) -> (SenderKind, u32) {
        match *kind {
            TrafficKind::Bulk { .. } => (SenderKind::Bulk, bulk_send_bytes(mtu_bytes)),
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
                let per_flow_bps = rate_bps as f64 / f64::from(flows);
                (
                    SenderKind::Datagram {
                        gap_ns: f64::from(size_bytes) * 8.0 * 1e9 / per_flow_bps,
                        poisson: matches!(kind, TrafficKind::Poisson { .. }),
                    },
                    size_bytes + UDP_HEADER_BYTES,
                )
            }
            TrafficKind::Rpc {
                response_bytes,
                concurrency,
                rate_per_s,
                ..
            } => {
                let sender = match rate_per_s {
                    None => SenderKind::RpcClosed,
                    Some(rate) => SenderKind::RpcOpen {
                        gap_ns: 1e9 * f64::from(concurrency) / rate,
                    },
                };
                (sender, tcp_wire_bytes(response_bytes, mtu_bytes))
            }
        }
    }
}

#[derive(Debug)]
struct Sender {
    traffic: u32,
    /// Position among its traffic's flows.
    flow_in_traffic: u32,
    tenant: TenantId,
    app: AppId,
    flow: u32,
    core: u16,
    kind: SenderKind,
    /// Bytes of one send (a bulk TSO send, a datagram, a response).
    send_bytes: u32,
    active: bool,
    /// Bulk: sends between the socket and the completion.
    in_flight: u32,
    /// Bulk: refused with nothing in flight, a retry is scheduled.
    retry_pending: bool,
    /// Bulk: sends TSQ lets it keep in flight, from its measured delivery rate.
    tsq_sends: u32,
    /// Bulk: bytes completed since `window_start_ns`, for the delivery rate.
    window_bytes: u64,
    window_start_ns: u64,
    rng: ChaCha8Rng,
}

/// Histogram bounds: 1 ns to 100 s at three significant digits.
pub(crate) fn latency_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 100_000_000_000, 3)
        .expect("constant bounds are valid")
}

/// A send waiting for the engine's cores (`engine.packet_cost`, a traffic's `cost`).
#[derive(Clone, Copy, Debug)]
struct Sent {
    sender: u32,
    issued_ns: u64,
}

pub struct Engine<'a> {
    scenario: &'a Scenario,
    host: HostModel,
    enforcer: Box<dyn Enforcer>,
    events: EventQueue,
    senders: Vec<Sender>,
    /// First sender of each traffic; a traffic's senders are contiguous.
    traffic_senders: Vec<std::ops::Range<u32>>,
    /// The frame being serialised, if any.
    on_wire: Option<Frame>,
    kick_at_ns: Option<u64>,
    record: RunRecord,
    /// Report class of each app, if it is reported.
    app_class: Vec<Option<usize>>,
    /// Index into `record.latency` of each rpc traffic.
    traffic_latency: Vec<Option<usize>>,
    /// Per tenant: bytes offered to the enforcer and bytes that left on the link,
    /// counted here, apart from the enforcer's own counters, for the self-checks.
    offered_bytes: Vec<u64>,
    link_bytes: Vec<u64>,
    /// The engine's cores, where the run asks for engine cost; without it every
    /// send reaches the enforcer the moment it is offered.
    cpu: Option<Cores<Sent>>,
}

impl<'a> Engine<'a> {
    pub fn new(
        scenario: &'a Scenario,
        enforcer_name: &str,
        enforcer: Box<dyn Enforcer>,
        host: HostModel,
    ) -> Self {
        let policy = &scenario.policy;
        let mtu = policy.link.mtu_bytes;
        // Thread placement and every random draw come from the scenario's seed, so
        // every enforcer of a run sees the same placement and the same arrivals.
        let mut placement = ChaCha8Rng::seed_from_u64(scenario.seed);
        let mut senders = Vec::new();
        let mut traffic_senders = Vec::new();
        for (ti, t) in scenario.traffic.iter().enumerate() {
            let cores = &policy.tenant(t.tenant).cores;
            let first = senders.len() as u32;
            let flows = t.kind.flows();
            for _ in 0..flows {
                let (kind, send_bytes) = SenderKind::of(&t.kind, mtu);
                let index = senders.len() as u64;
                senders.push(Sender {
                    traffic: ti as u32,
                    flow_in_traffic: index as u32 - first,
                    tenant: t.tenant,
                    app: t.app,
                    flow: index as u32,
                    core: cores[placement.random_range(0..cores.len())],
                    kind,
                    send_bytes,
                    active: false,
                    in_flight: 0,
                    retry_pending: false,
                    tsq_sends: host.tsq_sends_min,
                    window_bytes: 0,
                    window_start_ns: 0,
                    rng: ChaCha8Rng::seed_from_u64(
                        scenario.seed ^ (index + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    ),
                });
            }
            traffic_senders.push(first..senders.len() as u32);
        }

        let classes = measure::report_classes(scenario);
        let mut app_class = vec![None; policy.apps.len()];
        for (c, a) in classes.iter().enumerate() {
            app_class[a.index()] = Some(c);
        }
        #[cfg(feature = "faults")]
        crate::faults::blind_meter(scenario, &mut app_class);
        #[cfg(feature = "faults")]
        let enforcer = crate::faults::enforcer(scenario, enforcer);
        let mut latency = Vec::new();
        let traffic_latency = scenario
            .traffic
            .iter()
            .map(|t| match t.kind {
                TrafficKind::Rpc { .. } => {
                    latency.push(LatencyRecord {
                        traffic: t.name.clone(),
                        histogram_ns: latency_histogram(),
                    });
                    Some(latency.len() - 1)
                }
                _ => None,
            })
            .collect();
        let record = RunRecord {
            latency,
            pacing: scenario
                .traffic
                .iter()
                .map(|t| report::PacingRecord {
                    traffic: t.name.clone(),
                    flows: vec![report::GapStats::default(); t.kind.flows() as usize],
                })
                .collect(),
            ..measure::empty_record(
                scenario,
                enforcer_name,
                Mode::Sim,
                &measure::asked_demands_bps(scenario, &host.path),
            )
        };

        let mut events = EventQueue::default();
        for (ti, t) in scenario.traffic.iter().enumerate() {
            events.schedule(t.start_ns, Event::TrafficStart { traffic: ti as u32 });
            events.schedule(t.stop_ns, Event::TrafficStop { traffic: ti as u32 });
        }
        Engine {
            scenario,
            host,
            enforcer,
            events,
            senders,
            traffic_senders,
            on_wire: None,
            kick_at_ns: None,
            record,
            app_class,
            traffic_latency,
            offered_bytes: vec![0; policy.tenants.len()],
            link_bytes: vec![0; policy.tenants.len()],
            cpu: (policy.engine.packet_cost_ns > 0
                || scenario.traffic.iter().any(|t| t.cost_ns > 0))
            .then(|| {
                let mask = sched::registry::find(enforcer_name)
                    .and_then(|e| e.core_mask)
                    .map(|core_mask| core_mask(policy));
                Cores::new(policy, host.engine_queue_packets, mask)
            }),
        }
    }

    /// Runs to the scenario's end; `progress` hears the simulated time now and then.
    pub fn run(mut self, progress: &mut dyn FnMut(u64)) -> RunRecord {
        let end_ns = self.scenario.duration_ns;
        let mut steps: u32 = 0;
        while let Some((now, event)) = self.events.pop() {
            if now > end_ns {
                break;
            }
            self.handle(now, event);
            steps = steps.wrapping_add(1);
            if steps.is_multiple_of(65_536) {
                progress(now);
            }
        }
        progress(end_ns);
        for (t, counters) in self.enforcer.counters().iter().enumerate() {
            self.record.tenant_drops[t] = counters.refused_packets;
        }
        if let Some(cpu) = &self.cpu {
            self.record.engine_cpu = cpu
                .busy_ns
                .iter()
                .zip(&cpu.refused_packets)
                .map(|(&busy_ns, &refused_packets)| report::EngineCpuTenant {
                    busy_ns,
                    refused_packets,
                })
                .collect();
        }
        self.record.checks = self.self_checks(end_ns);
        self.record
    }

    /// Byte conservation per tenant, exact, and the meter against the link. What the
    /// enforcer still holds at the end is drained in virtual time past the run (no
    /// figure sees it), so that a packet the enforcer lost shows up as lost rather
    /// than as held.
    fn self_checks(&mut self, end_ns: u64) -> Vec<report::Check> {
        let tenants = self.scenario.policy.tenants.len();
        let mut held_bytes = vec![0u64; tenants];
        if let Some(frame) = self.on_wire.take() {
            held_bytes[frame.packet.tenant.index()] += u64::from(frame.bytes);
        }
        // Every held packet leaves as at most one frame per MTU of a TSO send; a
        // mechanism that still holds packets after that many tries has lost its way.
        let mut tries = self.enforcer.backlog_packets() as u64
            * u64::from(policy::wire::TSO_BYTES_MAX / 64 + 1)
            + 1;
        let mut now = end_ns;
        while self.enforcer.backlog_packets() > 0 && tries > 0 {
            tries -= 1;
            match self.enforcer.dequeue(now) {
                Some(frame) => held_bytes[frame.packet.tenant.index()] += u64::from(frame.bytes),
                None => match self.enforcer.next_ready_ns(now) {
                    Some(at) => now = at.max(now + 1),
                    None => break,
                },
            }
        }
        let ledgers: Vec<report::TenantLedger> = (0..tenants)
            .map(|t| report::TenantLedger {
                offered_bytes: self.offered_bytes[t],
                refused_bytes: self.enforcer.counters()[t].refused_bytes,
                sent_bytes: self.link_bytes[t],
                held_bytes: held_bytes[t],
            })
            .collect();
        let mut metered = vec![0u64; tenants];
        for interval in &self.record.intervals {
            for (c, &bytes) in interval.class_bytes.iter().enumerate() {
                metered[self.record.class_tenant[c]] += bytes;
            }
        }
        let mut checks = vec![
            report::conservation(&self.record.tenants, &ledgers),
            report::meter_against_link(&self.record.tenants, &metered, &self.link_bytes, 0.0),
        ];
        if let Some(cpu) = &self.cpu {
            let ledgers: Vec<report::EngineLedger> = cpu
                .ledgers
                .iter()
                .zip(cpu.waiting_bytes())
                .map(|(l, waiting_bytes)| report::EngineLedger {
                    arrived_bytes: l.arrived_bytes,
                    processed_bytes: l.processed_bytes,
                    refused_bytes: l.refused_bytes,
                    waiting_bytes,
                })
                .collect();
            checks.push(report::engine_conservation(&self.record.tenants, &ledgers));
        }
        checks
    }

    fn handle(&mut self, now: u64, event: Event) {
        match event {
            Event::LinkFree => self.frame_sent(now),
            Event::Kick => {
                if self.kick_at_ns == Some(now) {
                    self.kick_at_ns = None;
                }
                // A frame on the wire polls the enforcer itself when it is done.
                if self.on_wire.is_none() {
                    self.transmit(now);
                }
            }
            Event::TrafficStart { traffic } => {
                for s in self.traffic_senders[traffic as usize].clone() {
                    self.senders[s as usize].active = true;
                    self.start_sender(now, s);
                }
            }
            Event::TrafficStop { traffic } => {
                for s in self.traffic_senders[traffic as usize].clone() {
                    self.senders[s as usize].active = false;
                }
            }
            Event::TxCompletion { sender } => {
                self.completed(now, sender);
                self.fill_bulk(now, sender);
            }
            Event::Retry { sender } => {
                self.senders[sender as usize].retry_pending = false;
                self.fill_bulk(now, sender);
            }
            Event::OpenLoopSend { sender } => self.open_loop_send(now, sender),
            Event::Respond { sender, issued_ns } => {
                let bytes = self.senders[sender as usize].send_bytes;
                if !self.offer(now, sender, bytes, issued_ns) {
                    // A refused response waits for buffer space like a blocked socket.
                    self.events.schedule(
                        now + self.host.refused_retry_ns,
                        Event::Respond { sender, issued_ns },
                    );
                }
            }
            Event::Processed {
                sender,
                bytes,
                issued_ns,
                core,
            } => self.processed(now, sender, bytes, issued_ns, core),
            Event::ResponseReceived { sender, issued_ns } => {
                let s = &self.senders[sender as usize];
                let traffic = s.traffic as usize;
                let latency_ns = (now - issued_ns).max(1);
                if let Some(l) = self.traffic_latency[traffic] {
                    self.record.latency[l]
                        .histogram_ns
                        .saturating_record(latency_ns);
                }
                if s.active && s.kind == SenderKind::RpcClosed {
                    self.issue_request(now, sender);
                }
            }
        }
    }

    /// A bulk send completed: update the delivery rate and, from it, the TSQ limit.
    fn completed(&mut self, now: u64, sender: u32) {
        let host = &self.host;
        let s = &mut self.senders[sender as usize];
        s.in_flight -= 1;
        s.window_bytes += u64::from(s.send_bytes);
        let elapsed_ns = now - s.window_start_ns;
        if elapsed_ns >= host.tsq_window_ns {
            let pacing_bps = host.pacing_ratio * s.window_bytes as f64 * 8e9 / elapsed_ns as f64;
            let limit_bytes =
                (pacing_bps / 8.0 * host.tsq_window_ns as f64 / 1e9).min(host.tsq_bytes_max as f64);
            s.tsq_sends =
                ((limit_bytes / f64::from(s.send_bytes)).ceil() as u32).max(host.tsq_sends_min);
            s.window_bytes = 0;
            s.window_start_ns = now;
        }
    }

    fn start_sender(&mut self, now: u64, sender: u32) {
        let s = &mut self.senders[sender as usize];
        s.window_start_ns = now;
        s.window_bytes = 0;
        match s.kind {
            SenderKind::Bulk => self.fill_bulk(now, sender),
            SenderKind::Datagram { gap_ns, .. } | SenderKind::RpcOpen { gap_ns } => {
                // Random phase, so that flows of one traffic do not send in lockstep.
                let phase = (s.rng.random::<f64>() * gap_ns) as u64;
                self.events
                    .schedule(now + phase, Event::OpenLoopSend { sender });
            }
            SenderKind::RpcClosed => self.issue_request(now, sender),
        }
    }

    fn issue_request(&mut self, now: u64, sender: u32) {
        let at = now + self.host.path.wire_delay_ns + self.host.path.server_delay_ns;
        self.events.schedule(
            at,
            Event::Respond {
                sender,
                issued_ns: now,
            },
        );
    }

    fn open_loop_send(&mut self, now: u64, sender: u32) {
        let s = &mut self.senders[sender as usize];
        if !s.active {
            return;
        }
        let (gap_ns, poisson) = match s.kind {
            SenderKind::Datagram { gap_ns, poisson } => (gap_ns, poisson),
            SenderKind::RpcOpen { gap_ns } => (gap_ns, true),
            SenderKind::Bulk | SenderKind::RpcClosed => unreachable!("closed-loop senders"),
        };
        let gap = if poisson {
            -(1.0 - s.rng.random::<f64>()).ln() * gap_ns
        } else {
            gap_ns
        };
        let next = now + (gap.round() as u64).max(1);
        let is_rpc = matches!(s.kind, SenderKind::RpcOpen { .. });
        let bytes = s.send_bytes;
        self.events.schedule(next, Event::OpenLoopSend { sender });
        if is_rpc {
            self.issue_request(now, sender);
        } else {
            // A refused datagram is dropped: counted by the enforcer against its tenant.
            self.offer(now, sender, bytes, 0);
        }
    }

    fn fill_bulk(&mut self, now: u64, sender: u32) {
        loop {
            let s = &self.senders[sender as usize];
            if !s.active || s.in_flight >= s.tsq_sends || s.retry_pending {
                return;
            }
            let bytes = s.send_bytes;
            if self.offer(now, sender, bytes, 0) {
                self.senders[sender as usize].in_flight += 1;
            } else {
                let s = &mut self.senders[sender as usize];
                if s.in_flight == 0 {
                    s.retry_pending = true;
                    self.events
                        .schedule(now + self.host.refused_retry_ns, Event::Retry { sender });
                }
                return;
            }
        }
    }

    /// Offers one send to the engine: to its cores when the run asks for engine
    /// cost, else straight to the enforcer; true when admitted.
    fn offer(&mut self, now: u64, sender: u32, bytes: u32, issued_ns: u64) -> bool {
        let Some(cpu) = &mut self.cpu else {
            return self.hand_to_enforcer(now, sender, bytes, issued_ns);
        };
        let s = &self.senders[sender as usize];
        let cost_ns = self.scenario.policy.engine.packet_cost_ns
            + self.scenario.traffic[s.traffic as usize].cost_ns;
        let sent = Sent { sender, issued_ns };
        let admitted = cpu.arrive(sent, sender, s.tenant, bytes, cost_ns).is_ok();
        if admitted {
            self.start_cores(now);
        }
        admitted
    }

    /// Puts waiting sends on the idle cores.
    fn start_cores(&mut self, now: u64) {
        let cpu = self
            .cpu
            .as_mut()
            .expect("only a run with engine cost has cores");
        while let Some(send) = cpu.take() {
            self.events.schedule(
                now + send.cost_ns,
                Event::Processed {
                    sender: send.item.sender,
                    bytes: send.bytes,
                    issued_ns: send.item.issued_ns,
                    core: send.core,
                },
            );
        }
    }

    /// A core processed a send: the enforcer gets it now. A sender whose send the
    /// enforcer refuses here learns of it as of a refused offer.
    fn processed(&mut self, now: u64, sender: u32, bytes: u32, issued_ns: u64, core: u16) {
        let tenant = self.senders[sender as usize].tenant;
        self.cpu
            .as_mut()
            .expect("only a run with engine cost has cores")
            .processed(tenant, bytes, core);
        if !self.hand_to_enforcer(now, sender, bytes, issued_ns) {
            let retry_at = now + self.host.refused_retry_ns;
            let s = &mut self.senders[sender as usize];
            match s.kind {
                SenderKind::Bulk => {
                    s.in_flight -= 1;
                    // With sends still in flight, their completions refill it.
                    if s.in_flight == 0 && !s.retry_pending {
                        s.retry_pending = true;
                        self.events.schedule(retry_at, Event::Retry { sender });
                    }
                }
                SenderKind::RpcClosed | SenderKind::RpcOpen { .. } => {
                    self.events
                        .schedule(retry_at, Event::Respond { sender, issued_ns });
                }
                // A refused datagram is dropped: counted by the enforcer against its tenant.
                SenderKind::Datagram { .. } => {}
            }
        }
        self.start_cores(now);
    }

    /// Hands one send to the enforcer; true when admitted.
    fn hand_to_enforcer(&mut self, now: u64, sender: u32, bytes: u32, issued_ns: u64) -> bool {
        let s = &self.senders[sender as usize];
        let packet = Packet {
            len_bytes: bytes,
            tenant: s.tenant,
            app: s.app,
            flow: s.flow,
            destination: s.flow,
            core: s.core,
            arrival_ns: now,
            handle: (u64::from(sender) << 40) | (issued_ns & ((1 << 40) - 1)),
        };
        self.offered_bytes[s.tenant.index()] += u64::from(bytes);
        let admitted = self.enforcer.enqueue(now, packet).is_ok();
        if admitted && self.on_wire.is_none() {
            self.transmit(now);
        }
        admitted
    }

    fn transmit(&mut self, now: u64) {
        debug_assert!(self.on_wire.is_none());
        if let Some(frame) = self.enforcer.dequeue(now) {
            let done = now + serialisation_ns(frame.bytes, self.scenario.policy.link.rate_bps);
            self.on_wire = Some(frame);
            self.events.schedule(done, Event::LinkFree);
        } else if let Some(at) = self.enforcer.next_ready_ns(now) {
            let at = at.max(now + 1);
            if self.kick_at_ns.is_none_or(|k| at < k) {
                self.kick_at_ns = Some(at);
                self.events.schedule(at, Event::Kick);
            }
        }
    }

    fn frame_sent(&mut self, now: u64) {
        let frame = self.on_wire.take().expect("LinkFree follows a frame");
        self.record.frames_sent += 1;
        let packet = frame.packet;
        self.link_bytes[packet.tenant.index()] += u64::from(frame.bytes);
        if let Some(c) = self.app_class[packet.app.index()] {
            let k = measure::interval_of(now, self.scenario.interval_ns);
            if let Some(interval) = self.record.intervals.get_mut(k) {
                interval.class_bytes[c] += u64::from(frame.bytes);
            }
        }
        if frame.last {
            let sender = (packet.handle >> 40) as u32;
            let s = &self.senders[sender as usize];
            let traffic = &self.scenario.traffic[s.traffic as usize];
            // Pacing is judged past the first interval, once limiters are in steady state.
            if now >= traffic.start_ns + self.scenario.interval_ns {
                self.record.pacing[s.traffic as usize].flows[s.flow_in_traffic as usize]
                    .departure(now);
            }
            match self.senders[sender as usize].kind {
                SenderKind::Bulk => self.events.schedule(
                    now + self.host.tx_completion_delay_ns,
                    Event::TxCompletion { sender },
                ),
                SenderKind::RpcClosed | SenderKind::RpcOpen { .. } => self.events.schedule(
                    now + self.host.path.wire_delay_ns,
                    Event::ResponseReceived {
                        sender,
                        issued_ns: packet.handle & ((1 << 40) - 1),
                    },
                ),
                SenderKind::Datagram { .. } => {}
            }
        }
        self.transmit(now);
    }
}
