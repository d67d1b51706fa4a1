//! The run loop: senders post sends on their VM's transmit ring and offer them to
//! the enforcer, the link takes one frame at a time at the line rate, completions
//! and responses flow back to the senders.
//!
//! ## Completions and backpressure (PicNIC §5.4.3)
//!
//! Every send (a bulk flow's TSO send, a datagram, an rpc response) takes a
//! descriptor of its VM's ring (`ring`), held until the engine is done with the
//! packet and given back `tx_completion_delay_ns` later, in the order the tenant's
//! `completions` asks. A send that finds the ring full waits for a descriptor,
//! first come first served. What a socket learns from a completion is the guest
//! driver's business, the tenant's `napi_tx`:
//!
//! - with NAPI-TX, a socket is charged for a send until its completion, so every
//!   socket is backpressured: a bulk flow by TCP small queues, a datagram flow by
//!   its send buffer (`sndbuf_bytes`), which, once full, holds its next datagram
//!   back (the generator waits) until a completion makes room. A flood is slowed
//!   to what the engine passes, not dropped.
//! - without (the default), the driver orphans a datagram as it posts it, so a
//!   datagram socket is never held back: every datagram is offered to the engine,
//!   which refuses it beyond packet accounting's caps, and one sent while the ring
//!   is full is lost in the guest (`dropped_in_guest`). A bulk flow keeps TCP small
//!   queues, freed by its completions: a real guest without NAPI-TX orphans TCP's
//!   sends too and is held back by its congestion window instead, which the
//!   simulator does not model; either way, under in-order completions its sends
//!   wait behind a throttled flow's descriptors, and that is what throttles it.
//!
//! The ring (4096 descriptors) outnumbers what packet accounting lets one app hold,
//! so under out-of-order completions without NAPI-TX (a tenant that sets neither
//! key) it fills only when a tenant's apps together keep more packets in the engine
//! than that, and senders run as they did before the ring was modelled.

use crate::events::{Event, EventQueue};
use crate::host::HostModel;
use crate::responses::{self, Behind, Responder};
use crate::ring::{Fate, Post, TxRing};
use policy::wire::{UDP_HEADER_BYTES, bulk_send_bytes_capped, serialisation_ns, tcp_wire_bytes};
use policy::{AppId, Gaps, Pacing, Scenario, TenantId, TrafficKind};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use report::measure;
use report::{LatencyRecord, Mode, RunRecord};
use sched::cores::Cores;
use sched::{Enforcer, Frame, Packet};
use std::collections::VecDeque;

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
    /// sends (a bulk TSO send, a datagram, a response) on a link of `mtu_bytes`,
    /// its flows capped at `cap_bps` on their way out.
    pub(crate) fn of(kind: &TrafficKind, mtu_bytes: u32, cap_bps: u64) -> (SenderKind, u32) {
        match kind.pacing() {
            Pacing::Backlogged => (SenderKind::Bulk, bulk_send_bytes_capped(mtu_bytes, cap_bps)),
            Pacing::Datagrams {
                rate_bps,
                size_bytes,
                gaps,
            } => {
                let per_flow_bps = rate_bps as f64 / f64::from(kind.flows());
                (
                    SenderKind::Datagram {
                        gap_ns: f64::from(size_bytes) * 8.0 * 1e9 / per_flow_bps,
                        poisson: gaps == Gaps::Exponential,
                    },
                    size_bytes + UDP_HEADER_BYTES,
                )
            }
            Pacing::Requests {
                response_bytes,
                rate_per_s,
                ..
            } => {
                let sender = match rate_per_s {
                    None => SenderKind::RpcClosed,
                    Some(rate) => SenderKind::RpcOpen {
                        gap_ns: 1e9 * f64::from(kind.flows()) / rate,
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
    /// Sends charged to the socket until their completion: a bulk flow's admitted
    /// sends (TCP small queues), a backpressured datagram socket's datagrams.
    in_flight: u32,
    /// Datagram: sends its send buffer holds (`u32::MAX` where the socket is not
    /// backpressured).
    sndbuf_sends: u32,
    /// Datagram: one is due but its socket or its ring had no room; the gap to the
    /// next was drawn when it fell due.
    blocked_gap_ns: Option<u64>,
    /// Queued for a free descriptor of its VM's ring (an rpc: its first response).
    waiting: bool,
    /// Bulk: refused with nothing in flight, a retry is scheduled. Rpc: its first
    /// response was refused and is offered again later.
    retry_pending: bool,
    /// Rpc: the responses due behind one refused or waiting for a descriptor.
    behind: Behind,
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

/// A packet's handle: its tenant and its descriptor on the tenant's ring.
fn handle_of(tenant: TenantId, descriptor: u32) -> u64 {
    (u64::from(tenant.0) << 32) | u64::from(descriptor)
}

fn descriptor_of(handle: u64) -> (usize, u32) {
    ((handle >> 32) as usize, handle as u32)
}

/// What offering a send came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Posted {
    Admitted,
    Refused,
    RingFull,
}

/// One tenant's VM, as the engine sees it: its transmit ring, the sends waiting for
/// a descriptor, and the figures of both.
#[derive(Debug)]
struct Vm {
    ring: TxRing,
    waiting: VecDeque<Post>,
    /// When a `RingWake` is due for the sends waiting, if one is scheduled.
    wake_at_ns: Option<u64>,
    /// NAPI-TX: its sockets are charged for a send until its completion.
    napi_tx: bool,
    dropped_in_guest: u64,
    /// Packets the enforcer holds for the tenant, and their integral over time
    /// (packet-nanoseconds) up to `held_since_ns`, for the mean.
    held_packets: u64,
    held_packets_max: u64,
    held_area: u64,
    held_since_ns: u64,
}

impl Vm {
    fn held_changed(&mut self, now_ns: u64, by: i64) {
        self.held_area += self.held_packets * (now_ns - self.held_since_ns);
        self.held_since_ns = now_ns;
        self.held_packets = self.held_packets.wrapping_add_signed(by);
        self.held_packets_max = self.held_packets_max.max(self.held_packets);
    }
}

/// Polls in a row that find an enforcer ready yet silent past which the engine is
/// spinning (debug builds, so the tests catch it).
const READY_BUT_SILENT_MAX: u32 = 1000;

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
    /// Times in a row the enforcer sent nothing yet said it was ready at once.
    ready_but_silent: u32,
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
    /// send reaches the enforcer the moment it is offered. A send waits there as its
    /// packet's handle.
    cpu: Option<Cores<u64>>,
    /// Per tenant.
    vms: Vec<Vm>,
    /// Completions a packet's fate made due, reused so that no packet allocates.
    due: Vec<(Post, Fate)>,
    /// The sends of the burst being handed to the enforcer, kept to reuse its buffer.
    burst: Vec<Packet>,
}

/// Every traffic's senders, one per flow, each on a core of its tenant, and the
/// range of senders of each traffic. Thread placement and every random draw come
/// from the scenario's seed, so every enforcer of a run sees the same placement
/// and the same arrivals.
fn senders(scenario: &Scenario, host: &HostModel) -> (Vec<Sender>, Vec<std::ops::Range<u32>>) {
    let policy = &scenario.policy;
    let mtu = policy.link.mtu_bytes;
    let mut placement = ChaCha8Rng::seed_from_u64(scenario.seed);
    let mut senders = Vec::new();
    let mut traffic_senders = Vec::new();
    for (ti, t) in scenario.traffic.iter().enumerate() {
        let cores = &policy.tenant(t.tenant).cores;
        let first = senders.len() as u32;
        let flows = t.kind.flows();
        for _ in 0..flows {
            let (kind, send_bytes) = SenderKind::of(&t.kind, mtu, policy.flow_cap_bps(t.app));
            let sndbuf_sends =
                if policy.tenant(t.tenant).napi_tx && matches!(kind, SenderKind::Datagram { .. }) {
                    let truesize = u64::from(send_bytes + host.skb_overhead_bytes);
                    // Linux lets a send through while the buffer holds less than its size.
                    host.sndbuf_bytes.div_ceil(truesize).max(1) as u32
                } else {
                    u32::MAX
                };
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
                sndbuf_sends,
                blocked_gap_ns: None,
                waiting: false,
                retry_pending: false,
                behind: Behind::default(),
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
    (senders, traffic_senders)
}

/// The report class of each app, if it is reported.
fn app_classes(scenario: &Scenario) -> Vec<Option<usize>> {
    let classes = measure::report_classes(scenario);
    let mut app_class = vec![None; scenario.policy.apps.len()];
    for (c, a) in classes.iter().enumerate() {
        app_class[a.index()] = Some(c);
    }
    #[cfg(feature = "faults")]
    crate::faults::blind_meter(scenario, &mut app_class);
    app_class
}

/// The run's record before anything happened, with a latency histogram for each
/// traffic of requests, and where in it each traffic's is.
fn empty_run_record(
    scenario: &Scenario,
    enforcer_name: &str,
    host: &HostModel,
) -> (RunRecord, Vec<Option<usize>>) {
    let mut latency = Vec::new();
    let traffic_latency = scenario
        .traffic
        .iter()
        .map(|t| {
            t.kind.has_requests().then(|| {
                latency.push(LatencyRecord {
                    traffic: t.name.clone(),
                    histogram_ns: latency_histogram(),
                });
                latency.len() - 1
            })
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
    (record, traffic_latency)
}

/// Every traffic's start and stop.
fn traffic_events(scenario: &Scenario) -> EventQueue {
    let mut events = EventQueue::default();
    for (ti, t) in scenario.traffic.iter().enumerate() {
        events.schedule(t.start_ns, Event::TrafficStart { traffic: ti as u32 });
        events.schedule(t.stop_ns, Event::TrafficStop { traffic: ti as u32 });
    }
    events
}

/// The engine's cores, where the run asks for engine cost, on the cores the
/// enforcer's registry row gives it.
fn engine_cores(scenario: &Scenario, enforcer_name: &str, host: &HostModel) -> Option<Cores<u64>> {
    let policy = &scenario.policy;
    (policy.engine.packet_cost_ns > 0 || scenario.traffic.iter().any(|t| t.cost_ns > 0)).then(
        || {
            let mask = sched::registry::find(enforcer_name)
                .and_then(|e| e.core_mask())
                .map(|core_mask| core_mask(policy));
            Cores::new(policy, host.engine_queue_packets, mask)
        },
    )
}

/// Each tenant's VM: its transmit ring, nothing waiting, nothing held.
fn vms(policy: &policy::Policy, host: &HostModel) -> Vec<Vm> {
    policy
        .tenants
        .iter()
        .map(|t| Vm {
            ring: TxRing::new(t.completions, host.tx_ring_descriptors),
            waiting: VecDeque::new(),
            wake_at_ns: None,
            napi_tx: t.napi_tx,
            dropped_in_guest: 0,
            held_packets: 0,
            held_packets_max: 0,
            held_area: 0,
            held_since_ns: 0,
        })
        .collect()
}

impl Responder for Engine<'_> {
    fn holds(&self, sender: u32) -> bool {
        let s = &self.senders[sender as usize];
        s.retry_pending || s.waiting
    }

    /// A refused response is offered again later, as a blocked socket waits for
    /// buffer space; one that finds no free descriptor waits for one.
    fn send_response(&mut self, now: u64, sender: u32, issued_ns: u64) -> bool {
        match self.post(now, sender, issued_ns) {
            Posted::Admitted => true,
            Posted::Refused => {
                self.senders[sender as usize].retry_pending = true;
                self.events.schedule(
                    now + self.host.refused_retry_ns,
                    Event::RespondAgain { sender, issued_ns },
                );
                false
            }
            Posted::RingFull => {
                let tenant = self.senders[sender as usize].tenant;
                self.wait(now, tenant, sender, issued_ns);
                false
            }
        }
    }

    fn behind(&mut self, sender: u32) -> &mut Behind {
        &mut self.senders[sender as usize].behind
    }
}

impl<'a> Engine<'a> {
    pub fn new(
        scenario: &'a Scenario,
        enforcer_name: &str,
        enforcer: Box<dyn Enforcer>,
        host: HostModel,
    ) -> Self {
        let policy = &scenario.policy;
        let (senders, traffic_senders) = senders(scenario, &host);
        let app_class = app_classes(scenario);
        #[cfg(feature = "faults")]
        let enforcer = crate::faults::enforcer(scenario, enforcer);
        let (record, traffic_latency) = empty_run_record(scenario, enforcer_name, &host);
        Engine {
            scenario,
            events: traffic_events(scenario),
            senders,
            traffic_senders,
            on_wire: None,
            kick_at_ns: None,
            ready_but_silent: 0,
            record,
            app_class,
            traffic_latency,
            offered_bytes: vec![0; policy.tenants.len()],
            link_bytes: vec![0; policy.tenants.len()],
            cpu: engine_cores(scenario, enforcer_name, &host),
            vms: vms(policy, &host),
            due: Vec::new(),
            burst: Vec::new(),
            enforcer,
            host,
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
        self.record.backpressure = self
            .vms
            .iter_mut()
            .map(|vm| {
                vm.held_changed(end_ns, 0);
                report::Backpressure {
                    held_packets_mean: vm.held_area as f64 / end_ns.max(1) as f64,
                    held_packets_max: vm.held_packets_max,
                    ring_full_s: vm.ring.full_ns(end_ns) as f64 / 1e9,
                    dropped_in_guest: vm.dropped_in_guest,
                }
            })
            .collect();
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
        sched::drain_held(self.enforcer.as_mut(), end_ns, |frame| {
            held_bytes[frame.packet.tenant.index()] += u64::from(frame.bytes);
        });
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
            let ledgers = report::EngineLedger::of_cores(cpu);
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
            Event::TxCompletion { sender } => self.completion(now, sender),
            Event::RingWake { tenant } => {
                let t = usize::from(tenant);
                if self.vms[t].wake_at_ns == Some(now) {
                    self.vms[t].wake_at_ns = None;
                }
                self.serve_waiting(now, t);
            }
            Event::Retry { sender } => {
                self.senders[sender as usize].retry_pending = false;
                self.fill_bulk(now, sender);
            }
            Event::OpenLoopSend { sender } => self.open_loop_send(now, sender),
            Event::Respond { sender, issued_ns } => {
                responses::respond(self, now, sender, issued_ns)
            }
            Event::RespondAgain { sender, issued_ns } => {
                self.senders[sender as usize].retry_pending = false;
                responses::send_from(self, now, sender, issued_ns);
            }
            Event::Processed {
                handle,
                bytes,
                core,
            } => self.processed(now, handle, bytes, core),
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
        let gap_ns = (gap.round() as u64).max(1);
        if matches!(s.kind, SenderKind::RpcOpen { .. }) {
            self.events
                .schedule(now + gap_ns, Event::OpenLoopSend { sender });
            self.issue_request(now, sender);
        } else if self.vms[s.tenant.index()].napi_tx {
            s.blocked_gap_ns = Some(gap_ns);
            self.send_datagram(now, sender);
        } else {
            self.events
                .schedule(now + gap_ns, Event::OpenLoopSend { sender });
            // Nothing holds the socket back: a datagram the ring has no room for is
            // lost in the guest, one the enforcer refuses is counted against its tenant.
            let tenant = s.tenant;
            if self.post(now, sender, 0) == Posted::RingFull {
                self.vms[tenant.index()].dropped_in_guest += 1;
            }
        }
    }

    /// Sends a backpressured socket's due datagram if its send buffer and its ring
    /// have room, and times the next one from now; otherwise it stays due.
    fn send_datagram(&mut self, now: u64, sender: u32) {
        let s = &mut self.senders[sender as usize];
        let Some(gap_ns) = s.blocked_gap_ns else {
            return;
        };
        if !s.active {
            s.blocked_gap_ns = None;
            return;
        }
        if s.in_flight >= s.sndbuf_sends || s.waiting {
            return;
        }
        let tenant = s.tenant;
        if !self.vms[tenant.index()].ring.has_room(now) {
            self.wait(now, tenant, sender, 0);
            return;
        }
        s.blocked_gap_ns = None;
        s.in_flight += 1;
        self.events
            .schedule(now + gap_ns, Event::OpenLoopSend { sender });
        self.post(now, sender, 0);
    }

    fn fill_bulk(&mut self, now: u64, sender: u32) {
        loop {
            let s = &self.senders[sender as usize];
            if !s.active || s.in_flight >= s.tsq_sends || s.retry_pending || s.waiting {
                return;
            }
            if self.cpu.is_none() && self.on_wire.is_some() {
                self.post_burst(now, sender);
                return;
            }
            match self.post(now, sender, 0) {
                Posted::Admitted => self.senders[sender as usize].in_flight += 1,
                Posted::Refused => {
                    let s = &mut self.senders[sender as usize];
                    if s.in_flight == 0 {
                        s.retry_pending = true;
                        self.events
                            .schedule(now + self.host.refused_retry_ns, Event::Retry { sender });
                    }
                    return;
                }
                Posted::RingFull => {
                    let tenant = self.senders[sender as usize].tenant;
                    self.wait(now, tenant, sender, 0);
                    return;
                }
            }
        }
    }

    /// Posts every send `sender`'s socket may have in flight and hands them to the
    /// enforcer as one burst ([`sched::Enforcer::enqueue_burst`]), as
    /// [`Engine::fill_bulk`]'s sends one by one would be: with a frame on the wire
    /// and no engine cores in between, nothing is dequeued between them, and the
    /// socket stops at the first refused send, whose followers are taken back
    /// from the ring unseen.
    fn post_burst(&mut self, now: u64, sender: u32) {
        let s = &self.senders[sender as usize];
        let (tenant, bytes, room) = (s.tenant, s.send_bytes, s.tsq_sends - s.in_flight);
        let mut burst = std::mem::take(&mut self.burst);
        let mut ring_full = false;
        for _ in 0..room {
            let post = Post {
                sender,
                issued_ns: 0,
            };
            let Some(descriptor) = self.vms[tenant.index()].ring.post(now, post) else {
                ring_full = true;
                break;
            };
            burst.push(self.packet(now, sender, bytes, handle_of(tenant, descriptor)));
        }
        let refused = self.enforcer.enqueue_burst(now, &burst).err();
        let admitted = refused.map_or(burst.len(), |(i, _)| i);
        let offered = refused.map_or(admitted, |_| admitted + 1);
        self.offered_bytes[tenant.index()] += u64::from(bytes) * offered as u64;
        if admitted > 0 {
            self.vms[tenant.index()].held_changed(now, admitted as i64);
        }
        self.senders[sender as usize].in_flight += admitted as u32;
        if refused.is_some() {
            for packet in burst[offered..].iter().rev() {
                let (_, descriptor) = descriptor_of(packet.handle);
                self.vms[tenant.index()].ring.unpost(descriptor);
            }
            self.done(now, burst[admitted].handle, Fate::Refused);
            let s = &mut self.senders[sender as usize];
            if s.in_flight == 0 {
                s.retry_pending = true;
                self.events
                    .schedule(now + self.host.refused_retry_ns, Event::Retry { sender });
            }
        } else if ring_full {
            self.wait(now, tenant, sender, 0);
        }
        burst.clear();
        self.burst = burst;
    }

    /// Queues a send for a descriptor of `tenant`'s ring. A flow queues once: it
    /// sends what its socket allows when its turn comes.
    fn wait(&mut self, now: u64, tenant: TenantId, sender: u32, issued_ns: u64) {
        let s = &mut self.senders[sender as usize];
        debug_assert!(!s.waiting, "a sender waits for one descriptor at a time");
        s.waiting = true;
        self.vms[tenant.index()]
            .waiting
            .push_back(Post { sender, issued_ns });
        self.arm_wake(now, tenant.index());
    }

    /// Makes sure the sends waiting on `tenant`'s ring hear of its next free
    /// descriptor: a completion nobody's socket waits for is reaped without an event
    /// of its own.
    fn arm_wake(&mut self, now: u64, tenant: usize) {
        let vm = &mut self.vms[tenant];
        if vm.waiting.is_empty() {
            return;
        }
        if let Some(at) = vm.ring.next_reap_ns().map(|at| at.max(now))
            && vm.wake_at_ns.is_none_or(|w| at < w)
        {
            vm.wake_at_ns = Some(at);
            self.events.schedule(
                at,
                Event::RingWake {
                    tenant: tenant as u16,
                },
            );
        }
    }

    /// Hands free descriptors to the sends waiting for them, in the order they came.
    fn serve_waiting(&mut self, now: u64, tenant: usize) {
        while self.vms[tenant].ring.has_room(now) {
            let Some(post) = self.vms[tenant].waiting.pop_front() else {
                return;
            };
            let sender = post.sender;
            self.senders[sender as usize].waiting = false;
            match self.senders[sender as usize].kind {
                SenderKind::Bulk => self.fill_bulk(now, sender),
                SenderKind::Datagram { .. } => self.send_datagram(now, sender),
                SenderKind::RpcClosed | SenderKind::RpcOpen { .. } => {
                    responses::respond(self, now, sender, post.issued_ns)
                }
            }
        }
        self.arm_wake(now, tenant);
    }

    /// Posts one send of `sender` on its VM's ring and offers it to the engine.
    fn post(&mut self, now: u64, sender: u32, issued_ns: u64) -> Posted {
        let s = &self.senders[sender as usize];
        let (tenant, bytes) = (s.tenant, s.send_bytes);
        let Some(descriptor) = self.vms[tenant.index()]
            .ring
            .post(now, Post { sender, issued_ns })
        else {
            return Posted::RingFull;
        };
        let handle = handle_of(tenant, descriptor);
        if self.offer(now, sender, bytes, handle) {
            Posted::Admitted
        } else {
            self.done(now, handle, Fate::Refused);
            Posted::Refused
        }
    }

    /// The engine is done with a packet: the completions that makes due are reaped
    /// `tx_completion_delay_ns` later, and a socket that learns of its send then
    /// (a bulk flow's sent packet, a datagram under NAPI-TX) hears of it.
    fn done(&mut self, now: u64, handle: u64, fate: Fate) {
        let (tenant, descriptor) = descriptor_of(handle);
        let reap_at = now + self.host.tx_completion_delay_ns;
        let mut due = std::mem::take(&mut self.due);
        self.vms[tenant]
            .ring
            .done(reap_at, descriptor, fate, &mut due);
        for &(Post { sender, .. }, fate) in &due {
            let learns = match self.senders[sender as usize].kind {
                // A refused send was never in flight: the socket heard of it at once.
                SenderKind::Bulk => fate == Fate::Sent,
                SenderKind::Datagram { .. } => self.vms[tenant].napi_tx,
                SenderKind::RpcClosed | SenderKind::RpcOpen { .. } => false,
            };
            if learns {
                self.events
                    .schedule(reap_at, Event::TxCompletion { sender });
            }
        }
        due.clear();
        self.due = due;
        self.arm_wake(now, tenant);
    }

    /// A socket hears that one of its sends is gone: whoever waits for a
    /// descriptor goes first, then the socket sends what it may.
    fn completion(&mut self, now: u64, sender: u32) {
        self.serve_waiting(now, self.senders[sender as usize].tenant.index());
        match self.senders[sender as usize].kind {
            SenderKind::Bulk => {
                self.completed(now, sender);
                self.fill_bulk(now, sender);
            }
            SenderKind::Datagram { .. } => {
                self.senders[sender as usize].in_flight -= 1;
                self.send_datagram(now, sender);
            }
            SenderKind::RpcClosed | SenderKind::RpcOpen { .. } => {
                unreachable!("an rpc's socket hears of its response otherwise")
            }
        }
    }

    /// Offers one send to the engine: to its cores when the run asks for engine
    /// cost, else straight to the enforcer; true when admitted.
    fn offer(&mut self, now: u64, sender: u32, bytes: u32, handle: u64) -> bool {
        let Some(cpu) = &mut self.cpu else {
            return self.hand_to_enforcer(now, sender, bytes, handle);
        };
        let s = &self.senders[sender as usize];
        let cost_ns = self.scenario.policy.engine.packet_cost_ns
            + self.scenario.traffic[s.traffic as usize].cost_ns;
        let admitted = cpu.arrive(handle, sender, s.tenant, bytes, cost_ns).is_ok();
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
                    handle: send.item,
                    bytes: send.bytes,
                    core: send.core,
                },
            );
        }
    }

    /// A core processed a send: the enforcer gets it now. A sender whose send the
    /// enforcer refuses here learns of it as of a refused offer.
    fn processed(&mut self, now: u64, handle: u64, bytes: u32, core: u16) {
        let (tenant, descriptor) = descriptor_of(handle);
        let Post { sender, issued_ns } = self.vms[tenant].ring.post_of(descriptor);
        self.cpu
            .as_mut()
            .expect("only a run with engine cost has cores")
            .processed(TenantId(tenant as u16), bytes, core);
        if !self.hand_to_enforcer(now, sender, bytes, handle) {
            self.done(now, handle, Fate::Refused);
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
                    // Sent before any its connection holds: first in line again.
                    if s.retry_pending || s.waiting {
                        s.behind.put_first(issued_ns);
                    } else {
                        s.retry_pending = true;
                        self.events
                            .schedule(retry_at, Event::RespondAgain { sender, issued_ns });
                    }
                }
                // A refused datagram is dropped: counted by the enforcer against its tenant.
                SenderKind::Datagram { .. } => {}
            }
        }
        self.start_cores(now);
    }

    /// The packet of `sender`'s send of `bytes` arriving at `now`.
    fn packet(&self, now: u64, sender: u32, bytes: u32, handle: u64) -> Packet {
        let s = &self.senders[sender as usize];
        Packet {
            len_bytes: bytes,
            tenant: s.tenant,
            app: s.app,
            flow: s.flow,
            destination: s.flow,
            core: s.core,
            arrival_ns: now,
            handle,
        }
    }

    /// Hands one send to the enforcer; true when admitted.
    fn hand_to_enforcer(&mut self, now: u64, sender: u32, bytes: u32, handle: u64) -> bool {
        let packet = self.packet(now, sender, bytes, handle);
        self.offered_bytes[packet.tenant.index()] += u64::from(bytes);
        let admitted = self.enforcer.enqueue(now, packet).is_ok();
        if admitted {
            self.vms[packet.tenant.index()].held_changed(now, 1);
            if self.on_wire.is_none() {
                self.transmit(now);
            }
        }
        admitted
    }

    fn transmit(&mut self, now: u64) {
        debug_assert!(self.on_wire.is_none());
        if let Some(frame) = self.enforcer.dequeue(now) {
            self.ready_but_silent = 0;
            if frame.last {
                self.vms[frame.packet.tenant.index()].held_changed(now, -1);
            }
            let done = now + serialisation_ns(frame.bytes, self.scenario.policy.link.rate_bps);
            self.on_wire = Some(frame);
            self.events.schedule(done, Event::LinkFree);
        } else if let Some(at) = self.enforcer.next_ready_ns(now) {
            // A mechanism that sends nothing yet says it is ready at once has the
            // engine ask again a nanosecond later; once may be a tie it settles,
            // but fairnic did it for minutes of CPU.
            if at <= now {
                self.ready_but_silent += 1;
                debug_assert!(
                    self.ready_but_silent < READY_BUT_SILENT_MAX,
                    "{} sent nothing {READY_BUT_SILENT_MAX} times in a row up to {now} ns yet said it was ready at once",
                    self.record.enforcer
                );
            }
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
            let (tenant, descriptor) = descriptor_of(packet.handle);
            let Post { sender, issued_ns } = self.vms[tenant].ring.post_of(descriptor);
            let s = &self.senders[sender as usize];
            let traffic = &self.scenario.traffic[s.traffic as usize];
            // Pacing is judged past the first interval, once limiters are in steady state.
            if now >= traffic.start_ns + self.scenario.interval_ns {
                self.record.pacing[s.traffic as usize].flows[s.flow_in_traffic as usize]
                    .departure(now);
            }
            if matches!(s.kind, SenderKind::RpcClosed | SenderKind::RpcOpen { .. }) {
                self.events.schedule(
                    now + self.host.path.wire_delay_ns,
                    Event::ResponseReceived { sender, issued_ns },
                );
            }
            self.done(now, packet.handle, Fate::Sent);
        }
        self.transmit(now);
    }
}
