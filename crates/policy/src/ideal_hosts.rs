//! The ideal allocation across hosts (hosts.md, docs/hosts.md "The ideal across
//! hosts"). Every capacity a VM-to-VM flow crosses is a [`Resource`]: the sender
//! host's link out, the receiver host's link in, the fabric, an app's `max_rate`.
//! At a resource the units of fairness are VMs: guarantees first, then weights,
//! each VM capped by its envelope there, and a VM's share is split equally among
//! the VMs at the other ends of its flows there, then each of those parts equally
//! among its flows (water-filled: a flow that wants less leaves the rest to its
//! siblings).
//!
//! A flow gets the least of what its resources offer it. What a resource offers a
//! flow is its fill with that flow wanting everything and every other flow wanting
//! what it gets now if it is held below this resource's offer by another resource,
//! else its demand. The ideal is the fixed point of that rule: every flow short of
//! its demand is held by a resource that is full (or its VM's envelope there),
//! where no VM gets more per weight than the flow's VM and no flow of its VM more
//! than it. It is what receivers and senders exchanging rates converge to, and the
//! `picnic-wc` variant runs the same rule on measured rates.

use crate::ideal::{Child, share};
use crate::{HostId, HostsScenario, Vm};

/// What bounds a resource's capacity; for reports and `explain`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceKind {
    /// A host's link, for what leaves it.
    Egress(HostId),
    /// A host's link, for what enters it.
    Ingress(HostId),
    Fabric,
    /// An app's `max_rate` (index into the sender host's policy apps).
    AppCap(HostId, u32),
}

/// A VM at a resource and the flows it has there.
#[derive(Clone, Debug, PartialEq)]
pub struct Unit {
    pub vm: Vm,
    pub min_rate_bps: f64,
    pub weight: f64,
    pub priority: u8,
    /// The VM's envelope at this resource (`f64::INFINITY`: none).
    pub cap_bps: f64,
    /// Indices into [`HostsScenario::traffic`].
    pub flows: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Resource {
    pub kind: ResourceKind,
    pub capacity_bps: f64,
    pub units: Vec<Unit>,
    /// Per traffic, the VM at the far end of it from this resource's units: the
    /// receiver where units send, the sender where they receive. A unit's share
    /// is split among its far VMs before their flows, so a VM gains nothing at a
    /// resource by opening more flows to the same VM.
    pub far: Vec<Vm>,
}

fn rate(bps: Option<u64>) -> f64 {
    bps.map_or(f64::INFINITY, |r| r as f64)
}

impl Resource {
    /// The resource's allocation to each of its flows, `(flow, bps)` in unit order,
    /// for the demands `demand_bps(flow)`.
    pub fn fill(&self, demand_bps: impl Fn(usize) -> f64) -> Vec<(usize, f64)> {
        let children: Vec<Child> = self
            .units
            .iter()
            .map(|u| Child {
                demand_bps: u
                    .flows
                    .iter()
                    .map(|&f| demand_bps(f))
                    .sum::<f64>()
                    .min(u.cap_bps),
                min_rate_bps: u.min_rate_bps,
                weight: u.weight,
                priority: u.priority,
            })
            .collect();
        let unit_bps = share(self.capacity_bps, &children);
        let equal = |demand_bps: f64| Child {
            demand_bps,
            min_rate_bps: 0.0,
            weight: 1.0,
            priority: 1,
        };
        let mut out = Vec::new();
        for (unit, &bps) in self.units.iter().zip(&unit_bps) {
            let mut fars: Vec<Vm> = unit.flows.iter().map(|&f| self.far[f]).collect();
            fars.sort();
            fars.dedup();
            let groups: Vec<Vec<usize>> = fars
                .iter()
                .map(|&far| {
                    unit.flows
                        .iter()
                        .copied()
                        .filter(|&f| self.far[f] == far)
                        .collect()
                })
                .collect();
            let group_bps = share(
                bps,
                &groups
                    .iter()
                    .map(|g| equal(g.iter().map(|&f| demand_bps(f)).sum()))
                    .collect::<Vec<_>>(),
            );
            let mut by_flow: Vec<(usize, f64)> = Vec::new();
            for (group, &bps) in groups.iter().zip(&group_bps) {
                let flows: Vec<Child> = group.iter().map(|&f| equal(demand_bps(f))).collect();
                by_flow.extend(group.iter().copied().zip(share(bps, &flows)));
            }
            // In the unit's flow order, as before the split by far VM.
            out.extend(unit.flows.iter().map(|&f| {
                *by_flow
                    .iter()
                    .find(|(g, _)| *g == f)
                    .expect("every flow is in its far VM's group")
            }));
        }
        out
    }

    /// What the resource offers `flow` if it wanted everything, the other flows
    /// wanting `demand_bps`.
    pub fn offer(&self, flow: usize, demand_bps: impl Fn(usize) -> f64) -> f64 {
        self.fill(|f| {
            if f == flow {
                f64::INFINITY
            } else {
                demand_bps(f)
            }
        })
        .into_iter()
        .find(|&(f, _)| f == flow)
        .map_or(f64::INFINITY, |(_, bps)| bps)
    }
}

/// The resources the active flows (`demand_bps[i] > 0`) cross, in a fixed order:
/// per host its egress then its ingress, then the fabric, then app caps.
pub fn resources(scenario: &HostsScenario, demand_bps: &[f64]) -> Vec<Resource> {
    let active = ActiveFlows {
        scenario,
        demand_bps,
    };
    let senders: Vec<Vm> = scenario.traffic.iter().map(|t| t.from()).collect();
    let receivers: Vec<Vm> = scenario.traffic.iter().map(|t| t.to).collect();
    let mut out = Vec::new();
    for (h, host) in scenario.hosts.iter().enumerate() {
        let host_id = HostId(h as u16);
        let link = host.policy.link.rate_bps as f64;
        let egress = active.units(
            |i| Some(scenario.traffic[i].from()).filter(|vm| vm.host == host_id),
            |vm, flows| egress_unit(scenario, vm, flows),
        );
        let ingress = active.units(
            |i| Some(scenario.traffic[i].to).filter(|vm| vm.host == host_id),
            |vm, flows| ingress_unit(scenario, vm, flows),
        );
        for (kind, units, far) in [
            (ResourceKind::Egress(host_id), egress, &receivers),
            (ResourceKind::Ingress(host_id), ingress, &senders),
        ] {
            if !units.is_empty() {
                out.push(Resource {
                    kind,
                    capacity_bps: link,
                    units,
                    far: far.clone(),
                });
            }
        }
    }
    out.extend(fabric(&active, &receivers));
    out.extend(app_caps(&active, &receivers));
    out
}

/// The flows of a scenario with a demand, in the scenario's order.
struct ActiveFlows<'a> {
    scenario: &'a HostsScenario,
    demand_bps: &'a [f64],
}

impl ActiveFlows<'_> {
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.scenario.traffic.len())
            .filter(|&i| self.demand_bps.get(i).is_some_and(|&d| d > 0.0))
    }

    /// The units at one resource: each VM that `side` puts there (`None`: the
    /// flow does not cross it), made by `unit` with its flows, in VM order.
    fn units(
        &self,
        side: impl Fn(usize) -> Option<Vm>,
        unit: impl Fn(Vm, Vec<usize>) -> Unit,
    ) -> Vec<Unit> {
        let mut units: Vec<Unit> = Vec::new();
        for i in self.iter() {
            let Some(vm) = side(i) else { continue };
            match units.iter_mut().find(|u| u.vm == vm) {
                Some(u) => u.flows.push(i),
                None => units.push(unit(vm, vec![i])),
            }
        }
        units.sort_by_key(|u| u.vm);
        units
    }
}

/// A sending VM at its host's link out: its tenant's guarantee, weight, priority and cap.
fn egress_unit(scenario: &HostsScenario, vm: Vm, flows: Vec<usize>) -> Unit {
    let t = scenario.tenant(vm);
    Unit {
        vm,
        min_rate_bps: t.min_rate_bps.unwrap_or(0) as f64,
        weight: f64::from(t.weight),
        priority: t.priority,
        cap_bps: rate(t.max_rate_bps),
        flows,
    }
}

/// A receiving VM at its host's link in: its ingress envelope's guarantee and
/// cap, its tenant's weight; priorities are the sender's, so all equal here.
fn ingress_unit(scenario: &HostsScenario, vm: Vm, flows: Vec<usize>) -> Unit {
    let t = scenario.tenant(vm);
    let envelope = t.ingress.unwrap_or_default();
    Unit {
        vm,
        min_rate_bps: envelope.min_rate_bps.unwrap_or(0) as f64,
        weight: f64::from(t.weight),
        priority: 1,
        cap_bps: rate(envelope.max_rate_bps),
        flows,
    }
}

/// The fabric, where the scenario gives it a rate and some flow is active:
/// sending VMs by weight alone.
fn fabric(active: &ActiveFlows, receivers: &[Vm]) -> Option<Resource> {
    let scenario = active.scenario;
    let fabric_bps = scenario.fabric_rate_bps?;
    let units = active.units(
        |i| Some(scenario.traffic[i].from()),
        |vm, flows| Unit {
            vm,
            min_rate_bps: 0.0,
            weight: f64::from(scenario.tenant(vm).weight),
            priority: 1,
            cap_bps: f64::INFINITY,
            flows,
        },
    );
    (!units.is_empty()).then(|| Resource {
        kind: ResourceKind::Fabric,
        capacity_bps: fabric_bps as f64,
        units,
        far: receivers.to_vec(),
    })
}

/// One resource per app with a `max_rate` that has active flows, in the order
/// its first flow comes: the app's flows as one unit, the cap its capacity.
fn app_caps(active: &ActiveFlows, receivers: &[Vm]) -> Vec<Resource> {
    let scenario = active.scenario;
    let mut capped: Vec<(HostId, u32, Vec<usize>)> = Vec::new();
    for i in active.iter() {
        let t = &scenario.traffic[i];
        let app = scenario.host(t.host).policy.app(t.traffic.app);
        if app.max_rate_bps.is_none() {
            continue;
        }
        match capped
            .iter_mut()
            .find(|(h, a, _)| *h == t.host && *a == t.traffic.app.0)
        {
            Some((_, _, flows)) => flows.push(i),
            None => capped.push((t.host, t.traffic.app.0, vec![i])),
        }
    }
    capped
        .into_iter()
        .map(|(host, app, flows)| {
            let vm = scenario.traffic[flows[0]].from();
            let policy = &scenario.host(host).policy;
            Resource {
                kind: ResourceKind::AppCap(host, app),
                capacity_bps: rate(policy.apps[app as usize].max_rate_bps),
                units: vec![Unit {
                    vm,
                    min_rate_bps: 0.0,
                    weight: 1.0,
                    priority: 1,
                    cap_bps: f64::INFINITY,
                    flows,
                }],
                far: receivers.to_vec(),
            }
        })
        .collect()
}

/// Relative move of every rate under which the rounds have reached the fixed point.
/// Far below what any figure shows, and above the float rounding the rounds carry:
/// where the fixed point repels moves away from it (in a direction that breaks a
/// symmetry, say), rounding grows by a few parts in a thousand per round, from
/// 1e-13 at 200 rounds to 1e-5 at 5000 in a case the oracle found.
const SETTLED: f64 = 1e-11;
/// Rounds before the rates closest to settled are taken. The averaged rounds
/// settle in tens to a few hundred rounds on every scenario tried (docs/hosts.md);
/// the cap only bounds the time a pathological case can take.
const ROUNDS_MAX: usize = 5_000;

/// One round of the rule at `resource`: its offer to each of its flows, the others
/// wanting what they get (`rate_bps`) if that is below this resource's last offer
/// (`offered_bps`), else their demand.
pub fn offers(
    resource: &Resource,
    demand_bps: &[f64],
    rate_bps: &[f64],
    offered_bps: &[f64],
    tolerance: f64,
) -> Vec<(usize, f64)> {
    let wants = |f: usize| {
        if rate_bps[f] < offered_bps[f] * (1.0 - tolerance) {
            rate_bps[f]
        } else {
            demand_bps[f]
        }
    };
    resource
        .units
        .iter()
        .flat_map(|u| u.flows.iter().copied())
        .map(|f| (f, resource.offer(f, wants)))
        .collect()
}

/// Each flow's least offer over its resources, and at most its demand, every other
/// flow wanting the least of its demand and `rate_bps`. The ideal is this map's
/// fixed point: a flow held below a resource's offer elsewhere wants its rate
/// there, and a flow held at the resource gets there what it wants, so it makes
/// no difference whether it wants its rate or its demand (water-filling gives the
/// same to everyone whether a child wants what it gets or more).
fn least_offers(resources: &[Resource], demand_bps: &[f64], rate_bps: &[f64]) -> Vec<f64> {
    let wants = |g: usize| demand_bps[g].min(rate_bps[g]);
    let mut out = demand_bps.to_vec();
    for resource in resources {
        for f in resource.units.iter().flat_map(|u| u.flows.iter().copied()) {
            out[f] = out[f].min(resource.offer(f, wants));
        }
    }
    out
}

/// The ideal rate of each traffic (index = [`HostsScenario::traffic`]) for
/// `demand_bps` (`f64::INFINITY` = backlogged, 0 = idle).
///
/// The map of [`least_offers`] reverses order (more for the others, less for a
/// flow), so its plain rounds swing between rates below the fixed point and
/// offers above it without settling. Each round therefore moves every rate
/// halfway to its least offer, all flows and resources at once: nothing depends
/// on the order of hosts, VMs or traffic, and a scenario that maps onto itself
/// by relabelling has an ideal that does too.
pub fn ideal_across_hosts(scenario: &HostsScenario, demand_bps: &[f64]) -> Vec<f64> {
    let demand: Vec<f64> = (0..scenario.traffic.len())
        .map(|i| {
            demand_bps
                .get(i)
                .copied()
                .filter(|d| *d > 0.0)
                .unwrap_or(0.0)
        })
        .collect();
    let resources = resources(scenario, &demand);
    // Every flow wanting its demand offers each flow the least it can get.
    let mut rate = least_offers(&resources, &demand, &demand);
    let mut best = (f64::INFINITY, rate.clone());
    for _ in 0..ROUNDS_MAX {
        let offered = least_offers(&resources, &demand, &rate);
        let next: Vec<f64> = rate
            .iter()
            .zip(&offered)
            .map(|(&r, &o)| if r == o { r } else { 0.5 * (r + o) })
            .collect();
        let moved = next
            .iter()
            .zip(&rate)
            .map(|(a, b)| (a - b).abs() / a.abs().max(1.0))
            .fold(0.0, f64::max);
        if moved < best.0 {
            best = (moved, rate);
        }
        rate = next;
        if moved <= SETTLED {
            break;
        }
    }
    let rate = best.1;
    // What the rounds leave above a capacity (float rounding, or a case that did
    // not settle): every resource shares itself among its flows wanting no more
    // than they have, all at once, and each flow keeps the least.
    let mut fitted = rate.clone();
    for resource in &resources {
        for (f, bps) in resource.fill(|f| rate[f]) {
            fitted[f] = fitted[f].min(bps);
        }
    }
    fitted
}

/// What `nicsched explain` says about a scenario across hosts: the ideal of each
/// flow in each phase of the scenario. The text is its `Display`, `--json` its
/// serialisation.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HostsExplanation {
    pub phases: Vec<HostsPhaseIdeal>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HostsPhaseIdeal {
    /// When the phase starts in the scenario.
    pub from_s: f64,
    /// The flows running in it.
    pub flows: Vec<FlowIdeal>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FlowIdeal {
    /// The traffic's name.
    pub name: String,
    /// Sending and receiving VM.
    pub from: String,
    pub to: String,
    pub ideal_bps: f64,
}

/// The ideal across hosts in each phase of `scenario`, each traffic asking `asked_bps`.
pub fn explain_hosts(scenario: &HostsScenario, asked_bps: &[f64]) -> HostsExplanation {
    let vm_name = |vm: Vm| scenario.tenant(vm).name.clone();
    let mut times: Vec<u64> = scenario
        .traffic
        .iter()
        .flat_map(|t| [t.traffic.start_ns, t.traffic.stop_ns])
        .filter(|&t| t < scenario.duration_ns)
        .collect();
    times.sort_unstable();
    times.dedup();
    let mut phases = Vec::new();
    for at in times {
        let demand: Vec<f64> = scenario
            .traffic
            .iter()
            .zip(asked_bps)
            .map(|(t, &asked)| {
                if t.traffic.start_ns > at || t.traffic.stop_ns <= at {
                    0.0
                } else {
                    asked
                }
            })
            .collect();
        if demand.iter().all(|&d| d == 0.0) {
            continue;
        }
        let rates = ideal_across_hosts(scenario, &demand);
        let flows = scenario
            .traffic
            .iter()
            .enumerate()
            .filter(|&(i, _)| demand[i] > 0.0)
            .map(|(i, t)| FlowIdeal {
                name: t.traffic.name.clone(),
                from: vm_name(t.from()),
                to: vm_name(t.to),
                ideal_bps: rates[i],
            })
            .collect();
        phases.push(HostsPhaseIdeal {
            from_s: at as f64 / 1e9,
            flows,
        });
    }
    HostsExplanation { phases }
}

impl std::fmt::Display for HostsExplanation {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::format_rate;
        out.write_str(
            "The ideal across hosts: every host link (out and in), the fabric and every app cap is a \
             capacity; at each, VMs are the units (guarantees, then weights, each capped by its \
             envelope there), a VM's share split equally among the VMs at the other ends of its \
             flows, each part equally among their flows; a flow gets the least its \
             capacities offer it, and a flow held below a capacity's offer by another leaves the \
             rest to the others (work conserving).\n\n",
        )?;
        for phase in &self.phases {
            writeln!(
                out,
                "from {}:",
                crate::format_time((phase.from_s * 1e9).round() as u64)
            )?;
            for flow in &phase.flows {
                writeln!(
                    out,
                    "  {:<16} {:>6} -> {:<6} {:>12}",
                    flow.name,
                    flow.from,
                    flow.to,
                    format_rate(flow.ideal_bps)
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Feedback, Host, HostsTraffic, TenantId, Traffic, TrafficKind, parse_policy};

    const GBIT: f64 = 1e9;

    /// Hosts of `link_gbit` with the VMs named, every VM with the envelope
    /// [4, 12] Gbit/s both ways (PicNIC Fig. 7a), and flows `(from, to)`.
    fn scenario(link_gbit: u32, hosts: &[&[&str]], flows: &[(&str, &str)]) -> HostsScenario {
        let hosts: Vec<Host> = hosts
            .iter()
            .enumerate()
            .map(|(h, vms)| {
                let tenants: String = vms
                    .iter()
                    .map(|vm| {
                        format!(
                            "  - {{ name: {vm}, min_rate: 4Gbit, max_rate: 12Gbit, \
                             ingress: {{ min_rate: 4Gbit, max_rate: 12Gbit }} }}\n"
                        )
                    })
                    .collect();
                let text = format!("link: {{ rate: {link_gbit}Gbit }}\ntenants:\n{tenants}");
                Host {
                    name: format!("h{}", h + 1),
                    policy: parse_policy(&text, "test").expect("valid policy"),
                }
            })
            .collect();
        let mut scenario = HostsScenario {
            name: "test".into(),
            hosts,
            fabric_rate_bps: None,
            feedback: Feedback::default(),
            duration_ns: 1_000_000_000,
            interval_ns: 100_000_000,
            seed: 1,
            enforcers: vec!["picnic".into()],
            traffic: Vec::new(),
        };
        for (from, to) in flows {
            let from_vm = scenario.vm_by_name(from).expect("sender");
            let to_vm = scenario.vm_by_name(to).expect("receiver");
            let policy = &scenario.host(from_vm.host).policy;
            let traffic = Traffic {
                name: format!("f-{from}{to}"),
                tenant: from_vm.tenant,
                app: policy.catch_all_app(TenantId(from_vm.tenant.0)),
                kind: TrafficKind::Bulk { flows: 1 },
                start_ns: 0,
                stop_ns: scenario.duration_ns,
                cost_ns: 0,
            };
            scenario.traffic.push(HostsTraffic {
                traffic,
                host: from_vm.host,
                to: to_vm,
            });
        }
        scenario
    }

    fn gbit(rates: &[f64]) -> Vec<f64> {
        rates
            .iter()
            .map(|r| (r / GBIT * 1000.0).round() / 1000.0)
            .collect()
    }

    const FIG7_HOSTS: &[&[&str]] = &[&["a"], &["b"], &["c", "d"]];
    const FIG7_FLOWS: &[(&str, &str)] = &[("a", "c"), ("b", "c"), ("b", "d"), ("a", "d")];

    #[test]
    fn fig7b_phases_are_the_work_conserving_max_min_rates() {
        let s = scenario(20, FIG7_HOSTS, FIG7_FLOWS);
        let phase = |active: usize| {
            let demand: Vec<f64> = (0..4)
                .map(|i| if i < active { f64::INFINITY } else { 0.0 })
                .collect();
            gbit(&ideal_across_hosts(&s, &demand))
        };
        assert_eq!(phase(1), [12.0, 0.0, 0.0, 0.0]);
        assert_eq!(phase(2), [6.0, 6.0, 0.0, 0.0]);
        // PicNIC's receivers give 5/5/7: h3's link split per VM although d can use
        // only 7 of its 10. Work conserving, c takes its envelope's 12.
        assert_eq!(phase(3), [6.0, 6.0, 6.0, 0.0]);
        assert_eq!(phase(4), [5.0, 5.0, 5.0, 5.0]);
    }

    #[test]
    fn a_receiving_vm_is_one_unit_however_many_vms_send_to_it() {
        // c receives from a and b, d from e only: h3's 20 split per VM, 10 each.
        let s = scenario(
            20,
            &[&["a"], &["b", "e"], &["c", "d"]],
            &[("a", "c"), ("b", "c"), ("e", "d")],
        );
        let rates = ideal_across_hosts(&s, &[f64::INFINITY; 3]);
        assert_eq!(gbit(&rates), [5.0, 5.0, 10.0]);
    }

    #[test]
    fn a_flow_held_elsewhere_leaves_its_share_to_the_others() {
        // h2's 20 gives b and e 10 each; b's 10 is split among the 10 VMs it sends
        // to, 1 to c. c and d split h3's 20 per VM, 10 each: a takes the 9 of c's
        // that b leaves.
        let xs = ["x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8"];
        let mut flows = vec![("a", "c"), ("b", "c")];
        flows.extend(xs.iter().map(|&x| ("b", x)));
        flows.push(("e", "d"));
        let s = scenario(
            20,
            &[
                &["a"],
                &["b", "e"],
                &["c", "d"],
                &xs[..3],
                &xs[3..6],
                &xs[6..],
            ],
            &flows,
        );
        let rates = gbit(&ideal_across_hosts(&s, &vec![f64::INFINITY; flows.len()]));
        assert_eq!(
            (rates[0], rates[1], rates[11]),
            (9.0, 1.0, 10.0),
            "{rates:?}"
        );
    }

    #[test]
    fn a_vm_gains_nothing_by_opening_more_flows_to_the_same_vm() {
        // c's envelope of 12 is split between the VMs sending to it, a and b, 6
        // each, however many flows b opens; b's three flows share its 6.
        let flows = [("a", "c"), ("b", "c"), ("b", "c"), ("b", "c")];
        let s = scenario(20, FIG7_HOSTS, &flows);
        let rates = gbit(&ideal_across_hosts(&s, &[f64::INFINITY; 4]));
        assert_eq!(rates, [6.0, 2.0, 2.0, 2.0]);
    }

    #[test]
    fn demand_below_the_share_is_met_and_the_rest_goes_to_others() {
        let s = scenario(20, FIG7_HOSTS, &[("a", "c"), ("b", "c")]);
        let rates = ideal_across_hosts(&s, &[2.0 * GBIT, f64::INFINITY]);
        assert_eq!(gbit(&rates), [2.0, 10.0]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// Any hosts, VMs, envelopes, weights and flows: the ideal fits every
        /// capacity and envelope, and a flow short of its demand is held by a full
        /// resource (or its VM's envelope there).
        #[test]
        fn the_ideal_is_feasible_and_work_conserving(
            vms_per_host in proptest::collection::vec(1usize..4, 2..5),
            links in proptest::collection::vec(1u32..40, 4),
            envelopes in proptest::collection::vec((0u32..4, 1u32..30, 1u32..30, 1u32..4), 12),
            pairs in proptest::collection::vec((0usize..12, 0usize..12, 0u32..3, 1u32..20), 1..12),
        ) {
            let mut hosts: Vec<Host> = Vec::new();
            let mut names = Vec::new();
            for (h, &vms) in vms_per_host.iter().enumerate() {
                let mut text = format!("link: {{ rate: {}Gbit }}\ntenants:\n", links[h]);
                for _ in 0..vms {
                    let (min, max, ingress_max, weight) = envelopes[names.len()];
                    let name = format!("v{}", names.len());
                    text += &format!(
                        "  - {{ name: {name}, weight: {weight}, min_rate: {}Mbit, max_rate: {max}Gbit, \
                         ingress: {{ max_rate: {ingress_max}Gbit }} }}\n",
                        min * 100
                    );
                    names.push((h, name));
                }
                let policy = match parse_policy(&text, "test") {
                    Ok(p) => p,
                    Err(_) => return Ok(()),
                };
                hosts.push(Host { name: format!("h{h}"), policy });
            }
            let mut s = scenario(20, &[&["x"], &["y"]], &[]);
            s.hosts = hosts;
            let mut demand = Vec::new();
            for &(from, to, kind, gbit) in &pairs {
                let (from, to) = (from % names.len(), to % names.len());
                if names[from].0 == names[to].0 {
                    continue;
                }
                let from_vm = s.vm_by_name(&names[from].1).expect("vm");
                let to_vm = s.vm_by_name(&names[to].1).expect("vm");
                let app = s.host(from_vm.host).policy.catch_all_app(from_vm.tenant);
                s.traffic.push(HostsTraffic {
                    traffic: Traffic {
                        name: format!("f{}", s.traffic.len()),
                        tenant: from_vm.tenant,
                        app,
                        kind: TrafficKind::Bulk { flows: 1 },
                        start_ns: 0,
                        stop_ns: 1,
                        cost_ns: 0,
                    },
                    host: from_vm.host,
                    to: to_vm,
                });
                demand.push(match kind { 0 => f64::INFINITY, 1 => 0.0, _ => f64::from(gbit) * 1e8 });
            }
            let rates = ideal_across_hosts(&s, &demand);
            let slack = 1e-6;
            for resource in resources(&s, &demand) {
                let used: f64 = resource.units.iter().flat_map(|u| &u.flows).map(|&f| rates[f]).sum();
                proptest::prop_assert!(used <= resource.capacity_bps * (1.0 + slack), "{resource:?} {rates:?}");
                for unit in &resource.units {
                    let unit_bps: f64 = unit.flows.iter().map(|&f| rates[f]).sum();
                    proptest::prop_assert!(unit_bps <= unit.cap_bps * (1.0 + slack));
                }
            }
            for (f, (&rate, &want)) in rates.iter().zip(&demand).enumerate() {
                proptest::prop_assert!(rate <= want * (1.0 + slack));
                if want == 0.0 || rate >= want * (1.0 - slack) {
                    continue;
                }
                let held = resources(&s, &demand).iter().filter(|r| r.units.iter().any(|u| u.flows.contains(&f))).any(|r| {
                    let used: f64 = r.units.iter().flat_map(|u| &u.flows).map(|&g| rates[g]).sum();
                    let unit = r.units.iter().find(|u| u.flows.contains(&f)).expect("carrier");
                    let unit_bps: f64 = unit.flows.iter().map(|&g| rates[g]).sum();
                    used >= r.capacity_bps * (1.0 - slack) || unit_bps >= unit.cap_bps * (1.0 - slack)
                });
                proptest::prop_assert!(held, "flow {f} at {rate} of {want} is held nowhere: {rates:?} {demand:?}");
            }
        }
    }
}
