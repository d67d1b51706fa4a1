//! A scenario's traffic: each entry's tenant, app, kind (the kinds and their keys
//! are [`crate::KINDS`]), time and cost, checked against how the lab will tell its
//! packets apart, and what all the entries add up to against a scenario's bounds.

use super::ctx::{Ctx, Fields, Res};
use super::scenario::RunHeader;
use super::yaml::{Node, Sp};
use crate::limits::{
    DATAGRAM_BYTES_MAX, FLOWS_MAX, INTERVAL_CELLS_MAX, MESSAGE_BYTES_MAX, REQUESTS_PER_S_MAX,
    RETRIES_PER_PACKET, SENDER_RETRIES_PER_S, SIM_PACKETS_MAX, traffic_packets_estimate,
};
use crate::units;
use crate::{AppId, KINDS, Policy, PolicyError, Proto, TenantId, Traffic, TrafficKind};

pub(super) const TRAFFIC_KEYS: &[&str] = &[
    "name",
    "tenant",
    "to",
    "app",
    "kind",
    "flows",
    "start",
    "stop",
    "rate",
    "size",
    "request",
    "response",
    "concurrency",
    "cost",
];
const COMMON_TRAFFIC_KEYS: &[&str] = &[
    "name", "tenant", "to", "app", "kind", "start", "stop", "cost",
];

const PACKET_BYTES_DEFAULT: u64 = 1470;
const MESSAGE_BYTES_DEFAULT: u64 = 64;

/// A scenario's `traffic`: a list of at least one entry.
pub(super) fn traffic_items<'n>(ctx: Ctx, top: &Fields<'n>) -> Res<&'n [Sp]> {
    let traffic_node = ctx.require(top, "traffic", "the scenario")?;
    let items = ctx.seq(traffic_node, "traffic")?;
    if items.is_empty() {
        return ctx.err(
            traffic_node,
            "a scenario needs at least one traffic",
            Some("list traffic as `- { tenant: t1, kind: bulk }`".into()),
        );
    }
    Ok(items)
}

/// What a scenario's traffic adds up to, entry by entry, against the bounds on
/// a scenario as a whole: flows, unique names, the simulator's packets.
#[derive(Default)]
pub(super) struct TrafficTally {
    flows: u64,
    names: Vec<String>,
    /// The simulator's packets for each entry, in the sender's policy.
    estimates: Vec<f64>,
}

impl TrafficTally {
    pub(super) fn add(
        &mut self,
        ctx: Ctx,
        fields: &Fields,
        policy: &Policy,
        entry: &Traffic,
    ) -> Res<()> {
        self.flows += u64::from(entry.kind.flows());
        if self.flows > FLOWS_MAX {
            return ctx.err(
                fields.at,
                format!(
                    "the traffic up to here opens {} flows, above the bound",
                    self.flows
                ),
                Some(format!(
                    "a scenario opens at most {FLOWS_MAX} flows over all its traffic (FLOWS_MAX; rpc counts its concurrency)"
                )),
            );
        }
        if self.names.contains(&entry.name) {
            return ctx.err(
                fields.get("name").unwrap_or(fields.at),
                format!("duplicate traffic name `{}`", entry.name),
                Some("give each traffic its own `name`".into()),
            );
        }
        self.names.push(entry.name.clone());
        self.estimates.push(traffic_packets_estimate(policy, entry));
        Ok(())
    }

    /// The bounds on the whole: the cells measured over `classes` (tenants and apps
    /// of every policy) and every flow, and the simulator's packets.
    pub(super) fn check(&self, ctx: Ctx, run: &RunHeader, classes: u64, items: &[Sp]) -> Res<()> {
        let cells = run.intervals * (classes + self.flows);
        if cells > INTERVAL_CELLS_MAX {
            return ctx.err(
                run.intervals_at,
                format!(
                    "{} intervals × {} classes and flows make {cells} cells to measure, above the bound",
                    run.intervals,
                    classes + self.flows
                ),
                Some(format!(
                    "intervals × (tenants + apps + flows) is at most {INTERVAL_CELLS_MAX} (INTERVAL_CELLS_MAX): lengthen `interval`"
                )),
            );
        }
        let packets: f64 = self.estimates.iter().sum();
        if packets > SIM_PACKETS_MAX {
            let (largest, _) = self
                .estimates
                .iter()
                .enumerate()
                .fold(
                    (0, 0.0),
                    |best, (i, &e)| if e > best.1 { (i, e) } else { best },
                );
            return ctx.err(
                &items[largest],
                format!(
                    "the traffic costs the simulator about {packets:.3e} packets over the run (this one {:.3e}), above the bound",
                    self.estimates[largest]
                ),
                Some(format!(
                    "a simulated run costs at most {SIM_PACKETS_MAX:.0e} packets (SIM_PACKETS_MAX; refused senders retry {SENDER_RETRIES_PER_S} times a second, {RETRIES_PER_PACKET} retries to a packet): lower a rate, enlarge `size`, open fewer flows, or shorten the traffic"
                )),
            );
        }
        Ok(())
    }
}

fn count(ctx: Ctx, fields: &Fields, key: &str) -> Res<u32> {
    match fields.get(key) {
        Some(node) => ctx
            .integer(node, key, 1, FLOWS_MAX)
            .map(|n| n as u32)
            .map_err(|e| PolicyError {
                hint: Some(format!(
                    "{key} is a whole number in 1..={FLOWS_MAX} (FLOWS_MAX, the bound on a scenario's flows)"
                )),
                ..e
            }),
        None => Ok(1),
    }
}

/// The port the lab gives a traffic of an app that lists none: iperf3's 5201 and
/// up, past every port an app of the policy matches (crates/lab/src/traffic.rs).
fn lab_port_without_app_ports(policy: &Policy) -> u16 {
    let mut port = 5201;
    while policy.apps.iter().any(|a| a.match_ports.contains(&port)) {
        port += 1;
    }
    port
}

/// Checks that the packets of a traffic given to `app` are classified to `app`
/// (policy.md: the simulator and the lab attribute every byte to the same app):
/// its protocol is one the app matches, and no earlier app takes any port the lab
/// may pick for it (one of the app's ports, or the first free port from 5201).
fn check_traffic_app(
    ctx: Ctx,
    policy: &Policy,
    tenant: TenantId,
    app_id: AppId,
    kind: &TrafficKind,
    at: &Sp,
) -> Res<()> {
    let app = policy.app(app_id);
    let proto = kind.proto(app);
    let proto_name = |p: Proto| match p {
        Proto::Tcp => "tcp",
        Proto::Udp => "udp",
    };
    if let Some(own) = app.match_proto
        && own != proto
    {
        return ctx.err(
            at,
            format!(
                "{} traffic is {}, but app `{}` matches only {}",
                kind.label(),
                proto_name(proto),
                app.name,
                proto_name(own)
            ),
            Some(
                "bulk and rpc run over TCP (rpc over UDP where its app matches udp), udp and poisson over UDP: give the traffic to an app of its protocol".into(),
            ),
        );
    }
    let ports = if app.match_ports.is_empty() {
        vec![lab_port_without_app_ports(policy)]
    } else {
        app.match_ports.clone()
    };
    for port in ports {
        // Source port 0: the client's ephemeral port, which no app lists.
        let taker = policy.app_for_packet(tenant, Some(proto), 0, port);
        if taker != app_id {
            return ctx.err(
                at,
                format!(
                    "{} traffic of app `{}` on {} port {port} would be taken by app `{}`, listed before it",
                    kind.label(),
                    app.name,
                    proto_name(proto),
                    policy.app(taker).name
                ),
                Some(format!(
                    "apps are matched in order and the first match wins; the lab sends an app's traffic to its ports, or to port {} when it lists none: narrow `{}`'s match or give the traffic to `{}`",
                    lab_port_without_app_ports(policy),
                    policy.app(taker).name,
                    policy.app(taker).name
                )),
            );
        }
    }
    Ok(())
}

/// The traffic entry `fields` of `tenant`, whom the caller found in `policy` (for
/// a scenario across hosts, the sender's): `to` is the caller's too.
pub(super) fn traffic_entry(
    ctx: Ctx,
    fields: &Fields,
    policy: &Policy,
    tenant: TenantId,
    duration_ns: u64,
    index: usize,
) -> Res<Traffic> {
    let app = traffic_app(ctx, fields, policy, tenant)?;
    let kind_node = ctx.require(fields, "kind", "traffic")?;
    let kind = traffic_kind(ctx, fields, kind_node)?;
    let (start_ns, stop_ns) = start_stop(ctx, fields, duration_ns)?;
    let cost_ns = match fields.get("cost") {
        Some(node) => ctx.engine_cost(node, "cost")?,
        None => 0,
    };
    check_traffic_app(
        ctx,
        policy,
        tenant,
        app,
        &kind,
        fields.get("app").unwrap_or(kind_node),
    )?;
    let name = match fields.get("name") {
        Some(node) => ctx.name(node, "traffic name")?,
        None => format!(
            "{}-{}-{}-{}",
            policy.tenant(tenant).name,
            policy.app(app).name,
            kind.label(),
            index + 1
        ),
    };
    Ok(Traffic {
        name,
        tenant,
        app,
        kind,
        start_ns,
        stop_ns,
        cost_ns,
    })
}

/// The app a traffic entry names among its tenant's, or the tenant's catch-all.
fn traffic_app(ctx: Ctx, fields: &Fields, policy: &Policy, tenant: TenantId) -> Res<AppId> {
    let Some(app_node) = fields.get("app") else {
        return Ok(policy.catch_all_app(tenant));
    };
    let app_name = ctx.name(app_node, "app")?;
    if let Some(app) = policy.app_by_name(tenant, &app_name) {
        return Ok(app);
    }
    let tenant_name = &policy.tenant(tenant).name;
    let names: Vec<&str> = policy
        .tenant(tenant)
        .apps
        .iter()
        .map(|&a| policy.app(a).name.as_str())
        .collect();
    ctx.err(
        app_node,
        format!("tenant `{tenant_name}` has no app `{app_name}`"),
        Some(format!("apps of `{tenant_name}`: {}", names.join(", "))),
    )
}

/// The kind of a traffic entry (`kind_node`), from the keys that kind takes; a key
/// of another kind is refused.
fn traffic_kind(ctx: Ctx, fields: &Fields, kind_node: &Sp) -> Res<TrafficKind> {
    let kind_name = ctx.string(kind_node, "kind")?;
    let Some(own_keys) = KINDS.iter().find(|k| k.name == kind_name).map(|k| k.keys) else {
        let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        return ctx.err(
            kind_node,
            format!("unknown traffic kind `{kind_name}`"),
            Some(format!("kinds: {}", names.join(", "))),
        );
    };
    if let Some((key, key_node, _)) = fields
        .entries
        .iter()
        .find(|(k, _, _)| !COMMON_TRAFFIC_KEYS.contains(k) && !own_keys.contains(k))
    {
        return ctx.err(
            key_node,
            format!("key `{key}` does not apply to {kind_name} traffic"),
            Some(format!("{kind_name} takes: {}", own_keys.join(", "))),
        );
    }

    let datagram = |ctx: Ctx| -> Res<(u64, u32, u32)> {
        let rate_node = ctx.require(fields, "rate", &format!("{kind_name} traffic"))?;
        let rate = ctx.positive_rate(rate_node, "rate")?;
        let size = match fields.get("size") {
            Some(node) => ctx.size_u32(node, "size", 1, DATAGRAM_BYTES_MAX)?,
            None => PACKET_BYTES_DEFAULT as u32,
        };
        Ok((rate, size, count(ctx, fields, "flows")?))
    };
    let message_size = |key: &str| match fields.get(key) {
        Some(node) => ctx.size_u32(node, key, 1, MESSAGE_BYTES_MAX),
        None => Ok(MESSAGE_BYTES_DEFAULT as u32),
    };
    Ok(match kind_name {
        "bulk" => TrafficKind::Bulk {
            flows: count(ctx, fields, "flows")?,
        },
        "udp" => {
            let (rate_bps, size_bytes, flows) = datagram(ctx)?;
            TrafficKind::Udp {
                rate_bps,
                size_bytes,
                flows,
            }
        }
        "poisson" => {
            let (rate_bps, size_bytes, flows) = datagram(ctx)?;
            TrafficKind::Poisson {
                rate_bps,
                size_bytes,
                flows,
            }
        }
        _ => TrafficKind::Rpc {
            request_bytes: message_size("request")?,
            response_bytes: message_size("response")?,
            concurrency: count(ctx, fields, "concurrency")?,
            rate_per_s: fields
                .get("rate")
                .map(|node| requests_per_s(ctx, node))
                .transpose()?,
        },
    })
}

/// When a traffic entry starts and stops: by default the whole run, and within it.
fn start_stop(ctx: Ctx, fields: &Fields, duration_ns: u64) -> Res<(u64, u64)> {
    let start_ns = match fields.get("start") {
        Some(node) => ctx.time(node, "start")?,
        None => 0,
    };
    let stop_ns = match fields.get("stop") {
        Some(node) => ctx.time(node, "stop")?,
        None => duration_ns,
    };
    if stop_ns > duration_ns || start_ns >= stop_ns {
        let at = fields
            .get(if stop_ns > duration_ns || fields.get("start").is_none() {
                "stop"
            } else {
                "start"
            })
            .unwrap_or(fields.at);
        return ctx.err(
            at,
            format!(
                "traffic runs from {} to {}: start must be before stop, and stop at most the duration {}",
                units::format_time(start_ns),
                units::format_time(stop_ns),
                units::format_time(duration_ns)
            ),
            Some("write start and stop within 0s..=duration, start first".into()),
        );
    }
    Ok((start_ns, stop_ns))
}

/// Requests per second: `1000`, `2.5e3` or `1000/s`.
fn requests_per_s(ctx: Ctx, node: &Sp) -> Res<f64> {
    let rate = match &node.value {
        Node::Int(v) => Some(*v as f64),
        Node::Float(v) => Some(*v),
        Node::Str(text) => text
            .trim()
            .strip_suffix("/s")
            .unwrap_or(text)
            .trim()
            .parse::<f64>()
            .ok(),
        _ => None,
    };
    match rate {
        Some(rate) if rate.is_finite() && rate > 0.0 && rate <= REQUESTS_PER_S_MAX => Ok(rate),
        Some(rate) if rate > REQUESTS_PER_S_MAX => ctx.err(
            node,
            format!("rpc rate {rate:e} requests per second is above the bound"),
            Some(format!(
                "an rpc traffic asks for at most {REQUESTS_PER_S_MAX:.0e} requests per second (REQUESTS_PER_S_MAX)"
            )),
        ),
        _ => ctx.err(
            node,
            "rpc rate must be a positive number of requests per second",
            Some("write e.g. `1000` or `1000/s`".into()),
        ),
    }
}
