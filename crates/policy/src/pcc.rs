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

use crate::{HostId, HostsScenario, Resource, ResourceKind, TenantId, Vm};

/// How senders learn VM-to-VM rates.
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
}

impl Feedback {
    /// The feedback an enforcer of the registry runs, by its name.
    pub fn of(enforcer: &str) -> Feedback {
        match enforcer {
            "picnic" => Feedback::PicNic,
            "picnic-wc" => Feedback::WorkConserving,
            _ => Feedback::None,
        }
    }
}

/// A measured rate this far below what a resource last offered counts as held
/// elsewhere (measurement over one epoch is noisy by a send or two).
pub const HELD_TOLERANCE: f64 = 0.1;

/// Rates per traffic from the bytes counted over one epoch of `epoch_ns`.
pub fn measured_bps(bytes: &[u64], epoch_ns: u64) -> Vec<f64> {
    let epoch_s = epoch_ns as f64 / 1e9;
    bytes.iter().map(|&b| b as f64 * 8.0 / epoch_s).collect()
}

/// A VM-to-VM limit for the sender host's enforcer (`None`: unlimited).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub from: TenantId,
    pub to: Vm,
    pub bps: Option<u64>,
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
    /// The VM pairs of this host's senders, each with its traffic, in traffic order.
    pairs: Vec<(Vm, Vm, Vec<usize>)>,
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
        HostPcc {
            feedback,
            egress: find(ResourceKind::Egress(host)),
            ingress: find(ResourceKind::Ingress(host)),
            last_offer: [vec![f64::INFINITY; flows], vec![f64::INFINITY; flows]],
            receiver_offer: vec![f64::INFINITY; flows],
            pairs,
        }
    }

    /// One epoch: the rates measured per traffic over it, what left this host
    /// (`sent_bps`) and what arrived at it (`arrived_bps`), and which traffic runs.
    /// Only this host's entries are read. Returns this host's receivers' offers, in
    /// its ingress's unit order, each for the host that sends that traffic.
    pub fn epoch(
        &mut self,
        running: &[bool],
        sent_bps: &[f64],
        arrived_bps: &[f64],
    ) -> Vec<(usize, f64)> {
        let infinite = vec![f64::INFINITY; running.len()];
        let mut feedback = Vec::new();
        for (side, rates) in [(0, sent_bps), (1, arrived_bps)] {
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
            let offers = if side == 1 && self.feedback == Feedback::PicNic {
                resource.fill(|_| f64::INFINITY)
            } else {
                crate::offers(
                    &resource,
                    &infinite,
                    rates,
                    &self.last_offer[side],
                    HELD_TOLERANCE,
                )
            };
            for (f, bps) in offers {
                self.last_offer[side][f] = bps;
                if side == 1 {
                    feedback.push((f, bps));
                }
            }
        }
        feedback
    }

    /// A receiver's offer for `traffic`, sent by this host, reached it.
    pub fn receive(&mut self, traffic: usize, bps: f64) {
        self.receiver_offer[traffic] = bps;
    }

    /// Each VM-to-VM limit of this host's senders: the sum over the pair's traffic
    /// of the least of the receiver's and the sender's offers.
    pub fn limits(&self) -> Vec<Limit> {
        self.pairs
            .iter()
            .map(|(from, to, traffic)| {
                let bps: f64 = traffic
                    .iter()
                    .map(|&f| self.receiver_offer[f].min(self.last_offer[0][f]))
                    .sum();
                Limit {
                    from: from.tenant,
                    to: *to,
                    bps: bps.is_finite().then(|| bps.max(1.0) as u64),
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
        let fed_back = receiver.epoch(&running, &none, &none);
        assert_eq!(fed_back, vec![(0, 6e9), (1, 6e9)]);
        // Before any feedback the sender holds a→c to its own egress offer.
        sender.epoch(&running, &[12e9, 0.0], &none);
        let limit = |p: &HostPcc| p.limits()[0].bps;
        assert_eq!(limit(&sender), Some(12_000_000_000));
        sender.receive(0, fed_back[0].1);
        assert_eq!(sender.limits()[0].from, s.traffic[0].traffic.tenant);
        assert_eq!(sender.limits()[0].to, s.traffic[0].to);
        assert_eq!(limit(&sender), Some(6_000_000_000));
    }

    #[test]
    fn feedback_follows_the_enforcers_name() {
        assert_eq!(Feedback::of("picnic"), Feedback::PicNic);
        assert_eq!(Feedback::of("picnic-wc"), Feedback::WorkConserving);
        assert_eq!(Feedback::of("wheel"), Feedback::None);
    }
}
