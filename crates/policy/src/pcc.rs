//! PicNIC's predictable congestion control (hosts.md), sans I/O: one host's side of
//! it, fed the bytes it measured per traffic over each epoch, handing back the
//! rates its receivers feed back and the VM-to-VM limits its senders apply. The
//! simulator across hosts and the lab's engines run this same rule; only how the
//! bytes are counted and how the rates travel differ (events after the feedback
//! delay there, UDP datagrams between engines here).
//!
//! Receivers split the host's ingress [`Resource`] among the running flows that
//! enter it; senders do the same on their egress. A sender's limit for a pair of
//! VMs is, summed over the pair's traffic, the least of the receiver's and its own
//! offer.
//!
//! PCCP, the packet-rate side: a receiver whose engine is short of CPU (more
//! packets offered per second than its cores process at `engine.packet_cost`)
//! splits its packet capacity among its receiving VMs and each VM's part among
//! the VMs sending to it, by the same rule and over the same epoch, and feeds
//! packet rates back beside the bit rates; senders apply them as VM-to-VM
//! packet-rate limits.

use crate::{HostId, HostsScenario, Resource, ResourceKind, TenantId, Vm};

/// How senders learn VM-to-VM rates; each row of `sched`'s registry says which its
/// enforcer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feedback {
    /// No feedback: the enforcer alone, TCP-like senders react to loss.
    None,
    /// PicNIC's receivers: a host's link split per active receiving VM by weight,
    /// each VM's share split among the VMs sending to it, whether or not a sender
    /// can use its part.
    PicNic,
    /// The same, but a sender that sends less than its part (held elsewhere)
    /// leaves the rest to the others: the rule of the ideal across hosts.
    WorkConserving,
    /// PicNIC's receivers for bandwidth only (PCCB without PCCP): the paper's
    /// "just BPS envelope" comparison, which leaves a receiver's engine CPU to
    /// whoever sends the most packets.
    BandwidthOnly,
}

impl Feedback {
    /// Whether receivers also feed packet rates back (PCCP).
    pub fn packet_rates(self) -> bool {
        matches!(self, Feedback::PicNic | Feedback::WorkConserving)
    }

    /// Whether a receiver splits its whole capacity whatever senders use of it.
    fn splits_whole(self) -> bool {
        matches!(self, Feedback::PicNic | Feedback::BandwidthOnly)
    }
}

/// A measured rate this far below what a resource last offered counts as held
/// elsewhere.
pub const HELD_TOLERANCE: f64 = 0.1;

/// Per traffic, the rate over a window of epochs long enough to hold several of
/// its bursts.
///
/// Measured over one 1 ms epoch, a TCP-like flow at 150 Mbit/s read 516 Mbit/s
/// in one epoch and nothing in the next three: its 64 KiB sends leave back to
/// back. Fed back, those swings moved every other flow's rate with them. The
/// window reaches back, epoch by epoch, until it holds [`RateWindow::BYTES`] of
/// the traffic, [`RateWindow::EPOCHS_MAX`] epochs, or the time the traffic has
/// run: a fast flow is still measured over one epoch, a slow one over as many as
/// it takes to be measured at all.
#[derive(Clone, Debug)]
pub struct RateWindow {
    /// Per epoch, newest first: its length and each traffic's units counted.
    epochs: std::collections::VecDeque<(u64, Vec<u64>)>,
    current: Vec<u64>,
    /// Units a window holds at least, unless it reaches its oldest epoch first.
    enough: u64,
    /// What one unit counts in the rate: 8 bits per byte, one per packet.
    rate_per_unit: f64,
}

impl RateWindow {
    /// Eight sends of 64 KiB.
    pub const BYTES: u64 = 8 * 64 * 1024;
    /// Enough packets that a flow's rate moves by under 2% with one more or
    /// less; a 1 kpps prober is still measured within 64 ms.
    pub const PACKETS: u64 = 64;
    pub const EPOCHS_MAX: usize = 64;

    /// Counts bytes, for rates in bit/s.
    pub fn new(traffic: usize) -> RateWindow {
        RateWindow {
            epochs: std::collections::VecDeque::with_capacity(Self::EPOCHS_MAX),
            current: vec![0; traffic],
            enough: Self::BYTES,
            rate_per_unit: 8.0,
        }
    }

    /// Counts packets, for rates in packets/s.
    pub fn packets(traffic: usize) -> RateWindow {
        RateWindow {
            enough: Self::PACKETS,
            rate_per_unit: 1.0,
            ..RateWindow::new(traffic)
        }
    }

    /// Counts `units` (bytes or packets, as the window was made) of `traffic`.
    pub fn count(&mut self, traffic: usize, units: u64) {
        self.current[traffic] += units;
    }

    /// Ends an epoch that lasted `epoch_ns` and returns each traffic's rate (in
    /// bit/s or packets/s) over its window; `running_ns(f)` is how long traffic
    /// `f` has run, so that one just started is not diluted by the time before it.
    pub fn end_epoch(&mut self, epoch_ns: u64, running_ns: impl Fn(usize) -> u64) -> Vec<f64> {
        let traffic = self.current.len();
        let done = std::mem::replace(&mut self.current, vec![0; traffic]);
        if self.epochs.len() == Self::EPOCHS_MAX {
            self.epochs.pop_back();
        }
        self.epochs.push_front((epoch_ns.max(1), done));
        (0..traffic)
            .map(|f| {
                let (mut units, mut span_ns) = (0u64, 0u64);
                for (ns, counted) in &self.epochs {
                    units += counted[f];
                    span_ns += ns;
                    if units >= self.enough || span_ns >= running_ns(f) {
                        break;
                    }
                }
                units as f64 * self.rate_per_unit * 1e9 / span_ns as f64
            })
            .collect()
    }
}

/// Per traffic, the bytes its sender's enforcer holds, waiting to leave, and
/// whether any waited all through an epoch: the sign that the host, not something beyond it, holds the traffic.
/// A sender that runs out between its bursts (a TCP flow held by losses
/// elsewhere) leaves nothing waiting at some moment of an epoch.
#[derive(Clone, Debug)]
pub struct Backlog {
    bytes: Vec<u64>,
    /// Per traffic: whether nothing waited at some moment of this epoch.
    emptied: Vec<bool>,
}

impl Backlog {
    pub fn new(traffic: usize) -> Backlog {
        Backlog {
            bytes: vec![0; traffic],
            emptied: vec![true; traffic],
        }
    }

    /// `bytes` of `traffic` began to wait at the host.
    pub fn queued(&mut self, traffic: usize, bytes: u64) {
        self.bytes[traffic] += bytes;
    }

    /// `bytes` of `traffic` left the host (or were given up on).
    pub fn left(&mut self, traffic: usize, bytes: u64) {
        let waiting = &mut self.bytes[traffic];
        *waiting = waiting.saturating_sub(bytes);
        if *waiting == 0 {
            self.emptied[traffic] = true;
        }
    }

    /// Ends an epoch: per traffic, whether something of it waited all through.
    pub fn end_epoch(&mut self) -> Vec<bool> {
        self.bytes
            .iter()
            .zip(&mut self.emptied)
            .map(|(&bytes, emptied)| {
                let throughout = bytes > 0 && !*emptied;
                *emptied = bytes == 0;
                throughout
            })
            .collect()
    }
}

/// A held flow's limit may exceed its measured rate by this much, so that a flow
/// held only for the moment (a TCP sender recovering from a loss) can grow back,
/// by this factor per epoch, into what the resource offers it.
pub const FEEDBACK_HEADROOM: f64 = 0.25;
/// However little it was measured at, a held flow may send this part of what the
/// resource offers it: a flow that has just started has been measured at nothing.
pub const FEEDBACK_PROBE: f64 = 0.25;

/// One epoch of work-conserving feedback at `resource` from measured rates
/// (`measured_bps`): for each flow, the offer [`crate::offers`] makes it (to be passed
/// back as `offered_bps` next epoch) and the limit to send it. A flow measured
/// below its offer by more than `tolerance` is held elsewhere: the others are
/// offered what it leaves at its measured rate, and its own limit is that rate
/// plus [`FEEDBACK_HEADROOM`] (at least [`FEEDBACK_PROBE`] of its offer). A flow
/// truly held elsewhere does not use the headroom, so nothing is left idle; one
/// held only for the moment overfills the resource by at most the headroom until
/// the next epoch. Given its whole offer instead, such a flow overfilled the
/// receiver's envelope the moment it sped up, was dropped, backed off, measured
/// low again and stayed held.
pub fn feedback_limits(
    resource: &Resource,
    measured_bps: &[f64],
    offered_bps: &[f64],
    tolerance: f64,
) -> Vec<(usize, f64, f64)> {
    let everything = vec![f64::INFINITY; measured_bps.len()];
    crate::offers(resource, &everything, measured_bps, offered_bps, tolerance)
        .into_iter()
        .map(|(f, offer)| {
            let held = measured_bps[f] < offered_bps[f] * (1.0 - tolerance);
            let limit = if held {
                let grown = measured_bps[f] * (1.0 + FEEDBACK_HEADROOM);
                offer.min(grown.max(FEEDBACK_PROBE * offer))
            } else {
                offer
            };
            (f, offer, limit)
        })
        .collect()
}

/// The part of its engine's packet capacity a receiver hands out under PCCP.
/// Handing out all of it, the queue that built while a flood was being detected
/// (a full 1024-frame receive queue, 3 ms at 333 kpps) never drained: every
/// frame waited behind it as long as the floods ran. At 90% the queue drains
/// within ten of its own lengths.
pub const ENGINE_SHARE: f64 = 0.9;

/// A VM-to-VM limit for the sender host's enforcer (`None`: unlimited).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub from: TenantId,
    pub to: Vm,
    pub bps: Option<u64>,
    pub packets_per_s: Option<u64>,
}

/// One host's side of the feedback: its egress and ingress resources and what
/// each last offered.
#[derive(Clone, Debug)]
pub struct HostPcc {
    feedback: Feedback,
    egress: Option<Resource>,
    ingress: Option<Resource>,
    /// What a resource last offered each traffic: egress then ingress.
    last_offer: [Vec<f64>; 2],
    /// Per traffic: the receiver's last offer, as it reached this host.
    receiver_offer: Vec<f64>,
    /// Per traffic: the limit this host's egress gives it.
    sender_limit: Vec<f64>,
    /// Per traffic: whether it ran at the last epoch.
    running: Vec<bool>,
    /// The VM pairs of this host's senders, each with its traffic, in traffic order.
    pairs: Vec<(Vm, Vm, Vec<usize>)>,
    /// Per traffic: whether its sender is open loop (datagrams at their own pace).
    open_loop: Vec<bool>,
    /// PCCP: the host's ingress as the packets/s its engine hands out
    /// ([`ENGINE_SHARE`] of what it processes), and what it processes; none
    /// without an `engine.packet_cost`, or under feedback without packet rates.
    engine: Option<(Resource, f64)>,
    /// Whether the engine was short of CPU at the last epoch.
    engine_contended: bool,
    /// Per traffic: the engine's last offer and the packet rate fed back for it.
    engine_offer: Vec<f64>,
    engine_limit: Vec<f64>,
    /// Per traffic: the receiver's last packet rate, as it reached this host.
    receiver_packets: Vec<f64>,
}

impl HostPcc {
    pub fn new(scenario: &HostsScenario, host: HostId, feedback: Feedback) -> HostPcc {
        let flows = scenario.traffic.len();
        let all = vec![f64::INFINITY; flows];
        let resources = crate::resources(scenario, &all);
        let find = |want: ResourceKind| resources.iter().find(|r| r.kind == want).cloned();
        let mut pairs: Vec<(Vm, Vm, Vec<usize>)> = Vec::new();
        for (f, t) in scenario
            .traffic
            .iter()
            .enumerate()
            .filter(|(_, t)| t.host == host)
        {
            match pairs
                .iter_mut()
                .find(|(a, b, _)| *a == t.from() && *b == t.to)
            {
                Some((_, _, traffic)) => traffic.push(f),
                None => pairs.push((t.from(), t.to, vec![f])),
            }
        }
        let ingress = find(ResourceKind::Ingress(host));
        let engine = scenario.host(host).policy.engine;
        let engine = ingress
            .clone()
            .filter(|_| feedback.packet_rates() && engine.packet_cost_ns > 0)
            .map(|mut resource| {
                let packets_per_s =
                    f64::from(engine.cores.max(1)) * 1e9 / engine.packet_cost_ns as f64;
                // A VM's guarantee and envelope are the same fraction of the
                // engine's packets as of the link's bits: the policy says how the
                // host is shared, not which resource runs short.
                let scale = ENGINE_SHARE * packets_per_s / resource.capacity_bps;
                resource.capacity_bps *= scale;
                for unit in &mut resource.units {
                    unit.min_rate_bps *= scale;
                    unit.cap_bps *= scale;
                }
                (resource, packets_per_s)
            });
        HostPcc {
            feedback,
            egress: find(ResourceKind::Egress(host)),
            ingress,
            last_offer: [vec![f64::INFINITY; flows], vec![f64::INFINITY; flows]],
            receiver_offer: vec![f64::INFINITY; flows],
            sender_limit: vec![f64::INFINITY; flows],
            running: vec![false; flows],
            pairs,
            open_loop: scenario
                .traffic
                .iter()
                .map(|t| matches!(t.traffic.kind.pacing(), crate::Pacing::Datagrams { .. }))
                .collect(),
            engine,
            engine_contended: false,
            engine_offer: vec![f64::INFINITY; flows],
            engine_limit: vec![f64::INFINITY; flows],
            receiver_packets: vec![f64::INFINITY; flows],
        }
    }

    /// One epoch: the rates measured per traffic over it, what left this host
    /// (`sent_bps`), what reached its enforcer, refused or not (`offered_bps`),
    /// and what arrived at it (`arrived_bps`), which traffic waited at this host
    /// to leave all through the epoch (`backlogged`, from [`Backlog`]), and
    /// which traffic runs. Only this host's entries are read. Returns this
    /// host's receivers' offers, in its ingress's unit order, each for the host
    /// that sends that traffic.
    pub fn epoch(
        &mut self,
        running: &[bool],
        sent_bps: &[f64],
        offered_bps: &[f64],
        arrived_bps: &[f64],
        backlogged: &[bool],
    ) -> Vec<(usize, f64)> {
        // A flow held at this host's own link counts as sending all it is
        // offered there. Read as held elsewhere, a bulk flow beside a flood on a
        // 500 Mbit/s host was offered only its measured rate and the flood the
        // rest; their limits added up to more than the link, the flow stayed
        // behind the flood's queue, and it took 1.5 s to reach its 275 Mbit/s cap.
        let held_here = self.held_at_host(running, sent_bps, offered_bps, backlogged);
        let sent_bps: Vec<f64> = sent_bps
            .iter()
            .zip(&held_here)
            .map(|(&bps, &here)| if here { f64::INFINITY } else { bps })
            .collect();
        self.running = running.to_vec();
        let mut feedback = Vec::new();
        for (side, rates) in [(0, &sent_bps[..]), (1, arrived_bps)] {
            let resource = if side == 0 {
                &self.egress
            } else {
                &self.ingress
            };
            let Some(resource) = resource else { continue };
            let mut resource = resource.clone();
            for unit in &mut resource.units {
                unit.flows.retain(|&f| running[f]);
            }
            resource.units.retain(|u| !u.flows.is_empty());
            let offers = if side == 1 && self.feedback.splits_whole() {
                resource
                    .fill(|_| f64::INFINITY)
                    .into_iter()
                    .map(|(f, bps)| (f, bps, bps))
                    .collect()
            } else {
                feedback_limits(&resource, rates, &self.last_offer[side], HELD_TOLERANCE)
            };
            for (f, offer, limit) in offers {
                self.last_offer[side][f] = offer;
                if side == 0 {
                    self.sender_limit[f] = limit;
                } else {
                    feedback.push((f, limit));
                }
            }
        }
        feedback
    }

    /// Per traffic, whether this host's link holds it: it would send more than
    /// it does, and its pair of VMs sent more than [`HELD_TOLERANCE`] below the
    /// limit this host applies to the pair, with no packet rate from the
    /// receiver. A pair sending at its limit is held by the limit, and so by
    /// whichever receiver or sender set it: the others on this link may have
    /// what it leaves. The pair, not the flow, since its flows share its limit
    /// as they share a socket: a bulk flow beside a flood to the same VM waits
    /// while the pair is at its limit.
    ///
    /// A closed-loop sender (TCP) would send more when it waited here all
    /// through the epoch. An open-loop one (`udp`, `poisson`) sends what it
    /// sends whatever happens to it, so when more reached the enforcer than
    /// left it: its queue grew or it was refused. Read by what waited, a 75
    /// Mbit/s UDP flow behind its neighbour's 64 KiB frames always had a
    /// datagram waiting, counted as sending all it was offered, and kept half
    /// its sender's envelope from a bulk flow (220 against 363.5 Mbit/s).
    fn held_at_host(
        &self,
        running: &[bool],
        sent_bps: &[f64],
        offered_bps: &[f64],
        backlogged: &[bool],
    ) -> Vec<bool> {
        let mut held = vec![false; running.len()];
        for (_, _, traffic) in &self.pairs {
            let running = || traffic.iter().copied().filter(|&f| running[f]);
            let sent: f64 = running().map(|f| sent_bps[f]).sum();
            if sent < (1.0 - HELD_TOLERANCE) * self.pair_bps(running())
                && !self.pair_packets_per_s(running()).is_finite()
            {
                for f in running() {
                    held[f] = if self.open_loop[f] {
                        offered_bps[f] > (1.0 + HELD_TOLERANCE) * sent_bps[f]
                    } else {
                        backlogged[f]
                    };
                }
            }
        }
        held
    }

    /// The bit rate this host applies to a pair of VMs running `traffic`.
    fn pair_bps(&self, traffic: impl Iterator<Item = usize>) -> f64 {
        traffic
            .map(|f| self.receiver_offer[f].min(self.sender_limit[f]))
            .sum()
    }

    /// The packet rate this host applies to a pair of VMs running `traffic`.
    fn pair_packets_per_s(&self, traffic: impl Iterator<Item = usize>) -> f64 {
        traffic.map(|f| self.receiver_packets[f]).sum()
    }

    /// A receiver's offer for `traffic`, sent by this host, reached it.
    pub fn receive(&mut self, traffic: usize, bps: f64) {
        self.receiver_offer[traffic] = bps;
    }

    /// PCCP's epoch at this host's engine, from the packet rates that arrived
    /// per traffic (`arrived_pps`, measured before any drop: the work offered).
    /// Returns a packet rate for each running traffic entering this host, for
    /// the host that sends it: its part of the engine's packets while the engine
    /// is short of CPU, `f64::INFINITY` (lifted) otherwise; nothing without
    /// PCCP. The engine counts as short while more is offered than it
    /// processes, and stays so while a sender presses on the rate it was given:
    /// limited senders offer no more than their parts, which add up to no more
    /// than the engine processes, and lifting their limits then would let the
    /// flood back for a round trip of feedback.
    pub fn packet_epoch(&mut self, running: &[bool], arrived_pps: &[f64]) -> Vec<(usize, f64)> {
        let Some((engine, packets_per_s)) = &self.engine else {
            return Vec::new();
        };
        let mut resource = engine.clone();
        for unit in &mut resource.units {
            unit.flows.retain(|&f| running[f]);
        }
        resource.units.retain(|u| !u.flows.is_empty());
        let flows: Vec<usize> = resource
            .units
            .iter()
            .flat_map(|u| u.flows.iter().copied())
            .collect();
        let offered: f64 = flows.iter().map(|&f| arrived_pps[f]).sum();
        let pressed = flows
            .iter()
            .any(|&f| arrived_pps[f] >= (1.0 - HELD_TOLERANCE) * self.engine_limit[f]);
        self.engine_contended = offered > *packets_per_s || (self.engine_contended && pressed);
        if !self.engine_contended {
            for &f in &flows {
                self.engine_offer[f] = f64::INFINITY;
                self.engine_limit[f] = f64::INFINITY;
            }
            return flows.into_iter().map(|f| (f, f64::INFINITY)).collect();
        }
        let offers: Vec<(usize, f64, f64)> = if self.feedback.splits_whole() {
            resource
                .fill(|_| f64::INFINITY)
                .into_iter()
                .map(|(f, pps)| (f, pps, pps))
                .collect()
        } else {
            feedback_limits(&resource, arrived_pps, &self.engine_offer, HELD_TOLERANCE)
        };
        offers
            .into_iter()
            .map(|(f, offer, limit)| {
                self.engine_offer[f] = offer;
                self.engine_limit[f] = limit;
                (f, limit)
            })
            .collect()
    }

    /// A receiver's packet rate for `traffic`, sent by this host, reached it.
    pub fn receive_packets(&mut self, traffic: usize, packets_per_s: f64) {
        self.receiver_packets[traffic] = packets_per_s;
    }

    /// Each VM-to-VM limit of this host's senders: the sum over the pair's
    /// traffic running at the last epoch of the least of the receiver's offer and
    /// the sender's limit; none for a pair with nothing running. Traffic not
    /// running has no offers: counted at its first, unlimited, one it lifted its
    /// pair's limit altogether. The packet rate is the sum of the receiver's
    /// packet rates, likewise.
    pub fn limits(&self) -> Vec<Limit> {
        let finite = |rate: f64| (rate.is_finite() && rate > 0.0).then(|| rate.max(1.0) as u64);
        self.pairs
            .iter()
            .map(|(from, to, traffic)| {
                let running = || traffic.iter().copied().filter(|&f| self.running[f]);
                Limit {
                    from: from.tenant,
                    to: *to,
                    bps: finite(self.pair_bps(running())),
                    packets_per_s: finite(self.pair_packets_per_s(running())),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AnyScenario, parse_any_scenario};

    fn scenario() -> HostsScenario {
        let yaml = r#"
duration: 1s
hosts:
  - name: h1
    policy: { link: { rate: 20Gbit }, tenants: [ { name: a, max_rate: 12Gbit } ] }
  - name: h2
    policy: { link: { rate: 20Gbit }, tenants: [ { name: b, max_rate: 12Gbit } ] }
  - name: h3
    policy:
      link: { rate: 20Gbit }
      tenants: [ { name: c, ingress: { max_rate: 12Gbit } } ]
traffic:
  - { name: a-c, tenant: a, to: c, kind: bulk }
  - { name: b-c, tenant: b, to: c, kind: bulk }
"#;
        match parse_any_scenario(yaml, "s.yaml", std::path::Path::new("."), &["picnic"]) {
            Ok(AnyScenario::Hosts(s)) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_receiver_splits_its_envelope_and_the_sender_applies_the_lesser_offer() {
        let s = scenario();
        let (h1, h3) = (HostId(0), HostId(2));
        let mut receiver = HostPcc::new(&s, h3, Feedback::PicNic);
        let mut sender = HostPcc::new(&s, h1, Feedback::PicNic);
        let running = [true, true];
        let none = [0.0, 0.0];
        let fed_back = receiver.epoch(&running, &none, &none, &none, &[false; 2]);
        assert_eq!(fed_back, vec![(0, 6e9), (1, 6e9)]);
        // Before any feedback the sender holds a→c to its own egress offer.
        sender.epoch(&running, &[12e9, 0.0], &[12e9, 0.0], &none, &[false; 2]);
        let limit = |p: &HostPcc| p.limits()[0].bps;
        assert_eq!(limit(&sender), Some(12_000_000_000));
        sender.receive(0, fed_back[0].1);
        assert_eq!(sender.limits()[0].from, s.traffic[0].traffic.tenant);
        assert_eq!(sender.limits()[0].to, s.traffic[0].to);
        assert_eq!(limit(&sender), Some(6_000_000_000));
    }

    #[test]
    fn an_engine_short_of_cpu_splits_its_packets_per_receiving_vm_until_senders_ease_off() {
        let yaml = r#"
duration: 1s
hosts:
  - name: h1
    policy: { link: { rate: 10Gbit }, tenants: [ { name: a }, { name: b } ] }
  - name: h2
    policy:
      link: { rate: 10Gbit }
      engine: { cores: 2, packet_cost: 2us }
      tenants: [ { name: c }, { name: d } ]
traffic:
  - { name: a-c, tenant: a, to: c, kind: udp, rate: 1Gbit, size: 256B }
  - { name: b-c, tenant: b, to: c, kind: udp, rate: 1Gbit, size: 256B }
  - { name: a-d, tenant: a, to: d, kind: udp, rate: 1Mbit, size: 256B }
"#;
        let s = match parse_any_scenario(yaml, "s.yaml", std::path::Path::new("."), &["picnic"]) {
            Ok(AnyScenario::Hosts(s)) => s,
            other => panic!("{other:?}"),
        };
        let h2 = HostId(1);
        let running = [true; 3];
        // Two cores at 2 µs: 1 Mpps, of which ENGINE_SHARE is handed out, half
        // to each receiving VM, c's half split between its two senders.
        let share = ENGINE_SHARE * 1e6;
        let mut receiver = HostPcc::new(&s, h2, Feedback::PicNic);
        let idle = receiver.packet_epoch(&running, &[300e3, 300e3, 1e3]);
        assert!(
            idle.iter().all(|&(_, pps)| pps == f64::INFINITY),
            "{idle:?}"
        );
        let flooded = receiver.packet_epoch(&running, &[800e3, 800e3, 1e3]);
        assert_eq!(
            flooded,
            vec![(0, share / 4.0), (1, share / 4.0), (2, share / 2.0)]
        );
        // Held at their rates, the floods offer less than the engine processes:
        // the limits stay while they press on them, and go once they ease off.
        let held = receiver.packet_epoch(&running, &[share / 4.0, share / 4.0, 1e3]);
        assert_eq!(held, flooded);
        let eased = receiver.packet_epoch(&running, &[1e3, 1e3, 1e3]);
        assert!(
            eased.iter().all(|&(_, pps)| pps == f64::INFINITY),
            "{eased:?}"
        );
        let mut bps_only = HostPcc::new(&s, h2, Feedback::BandwidthOnly);
        assert!(
            bps_only
                .packet_epoch(&running, &[800e3, 800e3, 1e3])
                .is_empty()
        );
        // The sender sums its pair's packet rates.
        let mut sender = HostPcc::new(&s, HostId(0), Feedback::PicNic);
        sender.epoch(&running, &[0.0; 3], &[0.0; 3], &[0.0; 3], &[false; 3]);
        for (f, pps) in flooded {
            sender.receive_packets(f, pps);
        }
        let to_d = sender
            .limits()
            .into_iter()
            .find(|l| l.to == s.traffic[2].to);
        assert_eq!(
            to_d.and_then(|l| l.packets_per_s),
            Some((share / 2.0) as u64)
        );
    }

    #[test]
    fn backlog_tells_what_waited_all_through_an_epoch() {
        let mut backlog = Backlog::new(2);
        backlog.queued(0, 1500);
        assert_eq!(backlog.end_epoch(), vec![false, false], "empty as it began");
        backlog.queued(0, 1500);
        backlog.left(0, 1500);
        assert_eq!(backlog.end_epoch(), vec![true, false]);
        backlog.left(0, 1500);
        backlog.queued(0, 1500);
        assert_eq!(backlog.end_epoch(), vec![false, false], "ran out once");
        assert_eq!(backlog.end_epoch(), vec![true, false]);
    }

    /// Two VMs of a 1 Gbit/s host, x sending bulk to p and y sending `y_kind`
    /// to q on a 10 Gbit/s host.
    fn two_pairs(y_kind: &str) -> HostsScenario {
        let yaml = format!(
            r#"
duration: 1s
hosts:
  - name: h1
    policy: {{ link: {{ rate: 1Gbit }}, tenants: [ {{ name: x }}, {{ name: y }} ] }}
  - name: h2
    policy: {{ link: {{ rate: 10Gbit }}, tenants: [ {{ name: p }}, {{ name: q }} ] }}
traffic:
  - {{ name: x-p, tenant: x, to: p, kind: bulk }}
  - {{ name: y-q, tenant: y, to: q, kind: {y_kind} }}
"#
        );
        match parse_any_scenario(&yaml, "s.yaml", std::path::Path::new("."), &["picnic"]) {
            Ok(AnyScenario::Hosts(s)) => s,
            other => panic!("{other:?}"),
        }
    }

    /// h1's limits after a second epoch in which x sent 900 Mbit/s and y 100,
    /// y's enforcer was offered `y_offered`, y waited at h1 all through the
    /// epoch or not (`waited`), after the receiver's offer for y (`received`),
    /// if any, reached h1.
    fn second_epoch(
        s: &HostsScenario,
        y_offered: f64,
        waited: bool,
        received: Option<f64>,
    ) -> Vec<u64> {
        let running = [true; 2];
        let none = [0.0; 2];
        let mut sender = HostPcc::new(s, HostId(0), Feedback::WorkConserving);
        sender.epoch(&running, &none, &none, &none, &[false; 2]);
        if let Some(bps) = received {
            sender.receive(1, bps);
        }
        let sent = [900e6, 100e6];
        sender.epoch(
            &running,
            &sent,
            &[900e6, y_offered],
            &none,
            &[false, waited],
        );
        sender
            .limits()
            .iter()
            .map(|l| l.bps.expect("limited"))
            .collect()
    }

    #[test]
    fn a_flow_held_at_its_own_link_is_offered_its_share_there() {
        let s = two_pairs("bulk");
        // Sent at a tenth with nothing waiting, y is held elsewhere: x may have
        // the rest, and y grows back from its rate.
        assert_eq!(
            second_epoch(&s, 100e6, false, None),
            vec![900_000_000, 125_000_000]
        );
        // Waiting below the limit h1 applies to it, y is held by h1's link:
        // the link is split between them.
        assert_eq!(
            second_epoch(&s, 100e6, true, None),
            vec![500_000_000, 500_000_000]
        );
        // Waiting at the receiver's offer, y is held by the receiver.
        assert_eq!(
            second_epoch(&s, 100e6, true, Some(100e6)),
            vec![900_000_000, 100_000_000]
        );
    }

    #[test]
    fn an_open_loop_flow_is_held_at_its_host_only_where_more_reached_it_than_left() {
        // y's datagrams wait at h1 all through the epoch either way.
        let s = two_pairs("udp, rate: 100Mbit");
        // All it offered left: y is held by its own demand, and x may have the
        // rest of the link.
        assert_eq!(
            second_epoch(&s, 100e6, true, None),
            vec![900_000_000, 125_000_000]
        );
        // Twice what left reached its enforcer: h1's link holds y.
        assert_eq!(
            second_epoch(&s, 200e6, true, None),
            vec![500_000_000, 500_000_000]
        );
    }

    #[test]
    fn only_bandwidth_feedback_leaves_packet_rates_out() {
        assert!(Feedback::PicNic.packet_rates());
        assert!(Feedback::WorkConserving.packet_rates());
        assert!(!Feedback::BandwidthOnly.packet_rates());
        assert!(!Feedback::None.packet_rates());
    }
}
