//! Scenarios across hosts (docs/hosts.md): the run's keys as one host's scenario
//! has them, a policy per host, and traffic from a VM on one host to a VM on
//! another. Everything a one-host scenario shares with it is read by the same
//! functions, so that the two kinds cannot drift apart.

use super::ctx::{Ctx, Fields, Res};
use super::scenario::{RunHeader, run_header, scenario_name, with_policy};
use super::traffic::{TRAFFIC_KEYS, TrafficTally, traffic_entry, traffic_items};
use super::yaml::Sp;
use crate::limits::{APPS_MAX, FEEDBACK_EPOCHS_MAX, HOSTS_MAX, VMS_MAX};
use crate::{Feedback, Host, HostId, HostsScenario, HostsTraffic, TenantId, Vm, units};
use std::collections::HashMap;
use std::path::Path;

const HOSTS_SCENARIO_KEYS: &[&str] = &[
    "name",
    "duration",
    "interval",
    "seed",
    "enforcers",
    "hosts",
    "fabric",
    "feedback",
    "traffic",
];
const HOST_KEYS: &[&str] = &["name", "policy"];
const FABRIC_KEYS: &[&str] = &["rate"];
const FEEDBACK_KEYS: &[&str] = &["epoch", "delay"];

pub(super) fn hosts_scenario(
    ctx: Ctx,
    root: &Sp,
    base_dir: &Path,
    known_enforcers: &[&str],
) -> Res<HostsScenario> {
    let top = ctx.fields(root, "the scenario", HOSTS_SCENARIO_KEYS)?;
    let name = scenario_name(ctx, &top)?;
    let hosts = hosts(ctx, &top, base_dir)?;
    let fabric_rate_bps = top
        .get("fabric")
        .map(|node| {
            let fields = ctx.fields(node, "fabric", FABRIC_KEYS)?;
            let rate = ctx.require(&fields, "rate", "fabric")?;
            ctx.positive_rate(rate, "fabric.rate")
        })
        .transpose()?;
    let run = run_header(ctx, &top, known_enforcers)?;
    let feedback = feedback(ctx, &top, &run)?;

    let vms: HashMap<&str, Vm> = hosts
        .iter()
        .enumerate()
        .flat_map(|(h, host)| {
            host.policy
                .tenants
                .iter()
                .enumerate()
                .map(move |(t, tenant)| {
                    let vm = Vm {
                        host: HostId(h as u16),
                        tenant: TenantId(t as u16),
                    };
                    (tenant.name.as_str(), vm)
                })
        })
        .collect();
    let items = traffic_items(ctx, &top)?;
    let mut tally = TrafficTally::default();
    let mut traffic = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let fields = ctx.fields(item, "traffic", TRAFFIC_KEYS)?;
        let from = vm(ctx, &hosts, &vms, &fields, "tenant", "tenant")?;
        let to = vm(ctx, &hosts, &vms, &fields, "to", "receiving VM")?;
        if to.host == from.host {
            let host = &hosts[from.host.index()];
            return ctx.err(
                fields.get("to").unwrap_or(fields.at),
                format!(
                    "`{}` is on host `{}`, as the sender `{}` is",
                    host.policy.tenant(to.tenant).name,
                    host.name,
                    host.policy.tenant(from.tenant).name
                ),
                Some(
                    "traffic within a host does not cross the fabric: send to a VM on another host"
                        .into(),
                ),
            );
        }
        let policy = &hosts[from.host.index()].policy;
        let entry = traffic_entry(ctx, &fields, policy, from.tenant, run.duration_ns, index)?;
        tally.add(ctx, &fields, policy, &entry)?;
        traffic.push(HostsTraffic {
            traffic: entry,
            host: from.host,
            to,
        });
    }
    let classes = hosts
        .iter()
        .map(|h| (h.policy.tenants.len() + h.policy.apps.len()) as u64)
        .sum();
    tally.check(ctx, &run, classes, items)?;

    Ok(HostsScenario {
        name,
        hosts,
        fabric_rate_bps,
        feedback,
        duration_ns: run.duration_ns,
        interval_ns: run.interval_ns,
        seed: run.seed,
        enforcers: run.enforcers,
        traffic,
    })
}

/// The hosts, each with its policy checked as a one-host scenario's is; VM names
/// are unique across hosts, since traffic names its sender and receiver by them.
fn hosts(ctx: Ctx, top: &Fields, base_dir: &Path) -> Res<Vec<Host>> {
    let hosts_node = ctx.require(top, "hosts", "the scenario")?;
    let items = ctx.seq(hosts_node, "hosts")?;
    if items.len() < 2 {
        return ctx.err(
            hosts_node,
            format!(
                "a scenario across hosts needs at least 2 hosts, found {}",
                items.len()
            ),
            Some(
                "a scenario of one host gives its policy under `policy:` in place of `hosts:` (docs/scenario.md)".into(),
            ),
        );
    }
    if items.len() > HOSTS_MAX {
        return ctx.err(
            hosts_node,
            format!("{} hosts, above the bound", items.len()),
            Some(format!(
                "a scenario has at most {HOSTS_MAX} hosts (HOSTS_MAX)"
            )),
        );
    }
    let mut hosts: Vec<Host> = Vec::new();
    let mut host_of_vm: HashMap<String, usize> = HashMap::new();
    let (mut vms, mut apps) = (0, 0);
    for item in items {
        let fields = ctx.fields(item, "host", HOST_KEYS)?;
        let name_node = ctx.require(&fields, "name", "host")?;
        let name = ctx.name(name_node, "host name")?;
        if hosts.iter().any(|h| h.name == name) {
            return ctx.err(
                name_node,
                format!("duplicate host name `{name}`"),
                Some("host names are unique in a scenario".into()),
            );
        }
        let policy_node = ctx.require(&fields, "policy", "host")?;
        let policy = with_policy(ctx, policy_node, base_dir, |draft| {
            draft.check_guarantees(None)?;
            for (tenant, at) in draft.tenants.iter().zip(&draft.tenant_name_at) {
                if let Some(&other) = host_of_vm.get(&tenant.name) {
                    return draft.ctx.err(
                        at,
                        format!(
                            "VM `{}` is on host `{}` too",
                            tenant.name, hosts[other].name
                        ),
                        Some(
                            "tenants are VMs, and VM names are unique across hosts: traffic names its sender and its receiver by them".into(),
                        ),
                    );
                }
            }
            Ok(draft.finish())
        })?;
        vms += policy.tenants.len();
        apps += policy.apps.len();
        if vms > VMS_MAX || apps > APPS_MAX {
            return ctx.err(
                policy_node,
                format!("the hosts up to here have {vms} VMs and {apps} apps, above the bound"),
                Some(format!(
                    "a scenario across hosts has at most {VMS_MAX} VMs (VMS_MAX) and {APPS_MAX} apps (APPS_MAX) over all its hosts"
                )),
            );
        }
        for tenant in &policy.tenants {
            host_of_vm.insert(tenant.name.clone(), hosts.len());
        }
        hosts.push(Host { name, policy });
    }
    Ok(hosts)
}

/// `feedback`: its epoch at most an interval, so that every interval measured
/// sees feedback, and its delay shorter than the run, so that feedback acts.
fn feedback(ctx: Ctx, top: &Fields, run: &RunHeader) -> Res<Feedback> {
    let mut feedback = Feedback::default();
    let fields = top
        .get("feedback")
        .map(|node| ctx.fields(node, "feedback", FEEDBACK_KEYS))
        .transpose()?;
    let epoch_node = fields.as_ref().and_then(|f| f.get("epoch"));
    let delay_node = fields.as_ref().and_then(|f| f.get("delay"));
    if let Some(node) = epoch_node {
        feedback.epoch_ns = ctx.time(node, "feedback.epoch")?;
    }
    if let Some(node) = delay_node {
        feedback.delay_ns = ctx.time(node, "feedback.delay")?;
    }
    let shown = |ns: u64, node: Option<&Sp>| {
        let time = units::format_time(ns);
        if node.is_some() {
            time
        } else {
            format!("{time} (the default)")
        }
    };
    if feedback.epoch_ns == 0 || feedback.epoch_ns > run.interval_ns {
        return ctx.err(
            epoch_node.unwrap_or(run.intervals_at),
            format!(
                "feedback.epoch {} must be above 0 and at most the interval {}",
                shown(feedback.epoch_ns, epoch_node),
                units::format_time(run.interval_ns)
            ),
            Some(
                "receivers feed rates back at least once an interval: write `feedback: { epoch: ... }` above 0 and at most `interval`".into(),
            ),
        );
    }
    let epochs = run.duration_ns / feedback.epoch_ns;
    if epochs > FEEDBACK_EPOCHS_MAX {
        return ctx.err(
            epoch_node.unwrap_or(run.intervals_at),
            format!(
                "{} of duration in feedback epochs of {} make {epochs} epochs, above the bound",
                units::format_time(run.duration_ns),
                units::format_time(feedback.epoch_ns)
            ),
            Some(format!(
                "a run has at most {FEEDBACK_EPOCHS_MAX} feedback epochs (FEEDBACK_EPOCHS_MAX): lengthen `feedback.epoch` to at least {}",
                units::format_time(run.duration_ns.div_ceil(FEEDBACK_EPOCHS_MAX))
            )),
        );
    }
    if feedback.delay_ns >= run.duration_ns {
        return ctx.err(
            delay_node.unwrap_or(run.duration_at),
            format!(
                "feedback.delay {} must be below the duration {}",
                shown(feedback.delay_ns, delay_node),
                units::format_time(run.duration_ns)
            ),
            Some(
                "feedback that arrives after the run never acts: write `feedback: { delay: ... }` below `duration`".into(),
            ),
        );
    }
    Ok(feedback)
}

/// The VM a traffic's `key` (`tenant` or `to`) names, on any host; `what` it is
/// names it in the error when there is none.
fn vm(
    ctx: Ctx,
    hosts: &[Host],
    vms: &HashMap<&str, Vm>,
    fields: &Fields,
    key: &str,
    what: &str,
) -> Res<Vm> {
    let node = ctx.require(fields, key, "traffic")?;
    let name = ctx.name(node, key)?;
    match vms.get(name.as_str()) {
        Some(&vm) => Ok(vm),
        None => {
            let names: Vec<&str> = hosts
                .iter()
                .flat_map(|h| h.policy.tenants.iter().map(|t| t.name.as_str()))
                .collect();
            ctx.err(
                node,
                format!("unknown {what} `{name}`"),
                Some(format!("VMs of the hosts: {}", names.join(", "))),
            )
        }
    }
}
