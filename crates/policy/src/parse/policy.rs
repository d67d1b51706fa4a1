//! A policy: its link, engine, tenants and their apps, read into a [`Draft`] that a
//! scenario may still give another link, then checked (guarantees within the link)
//! and finished.
//!
//! An app's `max_rate` above its tenant's is accepted: the tenant's cap binds
//! anyway, and refusing it would force every app cap to be edited with the tenant's.

use super::ctx::{Ctx, Fields, Res};
use super::yaml::{Node, Sp};
use crate::limits::{APPS_MAX, ENGINE_CORES_MAX, TENANTS_MAX};
use crate::units;
use crate::{
    App, AppId, CORE_INDEX_MAX, Cidr, Completions, CpuSharing, EngineCpu, Envelope, Link, Policy,
    PolicyError, Proto, Split, SplitBy, Tenant, TenantId,
};
use std::net::IpAddr;

const POLICY_KEYS: &[&str] = &["link", "buffer", "tenants", "engine"];
const ENGINE_KEYS: &[&str] = &["cores", "cpu", "packet_cost"];
pub(super) const LINK_KEYS: &[&str] = &["rate", "queues", "mtu"];
const TENANT_KEYS: &[&str] = &[
    "name",
    "weight",
    "priority",
    "min_rate",
    "max_rate",
    "cores",
    "buffer",
    "match",
    "apps",
    "ingress",
    "completions",
    "napi_tx",
];
const TENANT_MATCH_KEYS: &[&str] = &["src", "port"];
const INGRESS_KEYS: &[&str] = &["min_rate", "max_rate"];
const APP_KEYS: &[&str] = &[
    "name", "priority", "weight", "min_rate", "max_rate", "match", "split",
];
const APP_MATCH_KEYS: &[&str] = &["proto", "ports"];
const SPLIT_KEYS: &[&str] = &["by", "max_rate"];

const PRIORITY_MAX: u64 = 7;
const MTU_BYTES_MIN: u64 = 68;
const MTU_BYTES_MAX: u64 = 65535;

/// A policy read from YAML before the link is final: a scenario may still override
/// the link, which changes the default cores and the bound on guarantees.
pub(super) struct Draft<'n> {
    pub(super) ctx: Ctx<'n>,
    pub(super) link: Link,
    pub(super) buffer_bytes: Option<u64>,
    pub(super) engine: EngineCpu,
    pub(super) tenants: Vec<Tenant>,
    pub(super) apps: Vec<App>,
    /// Where each tenant's entry of `tenants` was written, for what a consumer
    /// of the parsed policy refuses of the tenant ([`crate::tenant_error`]).
    pub(super) tenant_at: Vec<&'n Sp>,
    /// Where each tenant's name was written, for names that must be unique
    /// beyond the policy (VMs across hosts).
    pub(super) tenant_name_at: Vec<&'n Sp>,
    /// Where each tenant's `min_rate` and `ingress.min_rate` were written, for the
    /// guarantee checks.
    pub(super) tenant_min_at: Vec<Option<&'n Sp>>,
    pub(super) ingress_min_at: Vec<Option<&'n Sp>>,
    pub(super) app_min_at: Vec<Option<&'n Sp>>,
    /// Whether each tenant named its cores (the others get every core of the host).
    pub(super) cores_given: Vec<bool>,
}

pub(super) fn link_fields(ctx: Ctx, fields: &Fields, link: &mut Link) -> Res<()> {
    if let Some(node) = fields.get("rate") {
        link.rate_bps = ctx.positive_rate(node, "link.rate")?;
    }
    if let Some(node) = fields.get("queues") {
        link.queues = ctx.integer(node, "link.queues", 1, u64::from(u16::MAX))? as u16;
    }
    if let Some(node) = fields.get("mtu") {
        link.mtu_bytes = ctx.size_u32(node, "link.mtu", MTU_BYTES_MIN, MTU_BYTES_MAX)?;
    }
    Ok(())
}

pub(super) fn policy_draft<'n>(ctx: Ctx<'n>, root: &'n Sp) -> Res<Draft<'n>> {
    let top = ctx.fields(root, "the policy", POLICY_KEYS)?;
    let link_node = ctx.require(&top, "link", "the policy")?;
    let link_fields_ = ctx.fields(link_node, "link", LINK_KEYS)?;
    ctx.require(&link_fields_, "rate", "link")?;
    let mut link = Link {
        rate_bps: 0,
        queues: 16,
        mtu_bytes: 1500,
    };
    link_fields(ctx, &link_fields_, &mut link)?;
    let buffer_bytes = top
        .get("buffer")
        .map(|node| ctx.size(node, "buffer"))
        .transpose()?;
    let engine = match top.get("engine") {
        Some(node) => engine(ctx, node)?,
        None => EngineCpu::default(),
    };

    let tenants_node = ctx.require(&top, "tenants", "the policy")?;
    let tenant_nodes = ctx.seq(tenants_node, "tenants")?;
    if tenant_nodes.is_empty() {
        return ctx.err(
            tenants_node,
            "a policy needs at least one tenant",
            Some("list tenants as `- name: t1`".into()),
        );
    }
    if tenant_nodes.len() > TENANTS_MAX {
        return ctx.err(
            tenants_node,
            format!("{} tenants, above the bound", tenant_nodes.len()),
            Some(format!(
                "a policy has at most {TENANTS_MAX} tenants (TENANTS_MAX)"
            )),
        );
    }
    let mut draft = Draft {
        ctx,
        link,
        buffer_bytes,
        engine,
        tenants: Vec::new(),
        apps: Vec::new(),
        tenant_at: Vec::new(),
        tenant_name_at: Vec::new(),
        tenant_min_at: Vec::new(),
        ingress_min_at: Vec::new(),
        app_min_at: Vec::new(),
        cores_given: Vec::new(),
    };
    for node in tenant_nodes {
        tenant(&mut draft, node)?;
    }
    Ok(draft)
}

fn engine(ctx: Ctx, node: &Sp) -> Res<EngineCpu> {
    let fields = ctx.fields(node, "engine", ENGINE_KEYS)?;
    let mut engine = EngineCpu::default();
    if let Some(node) = fields.get("cores") {
        engine.cores = ctx.integer(node, "engine.cores", 1, ENGINE_CORES_MAX)? as u16;
    }
    if let Some(node) = fields.get("cpu") {
        engine.cpu = match ctx.string(node, "engine.cpu")? {
            "fifo" => CpuSharing::Fifo,
            "weighted" => CpuSharing::Weighted,
            other => {
                return ctx.err(
                    node,
                    format!("unknown engine.cpu `{other}`"),
                    Some("engine.cpu is `fifo` or `weighted`".into()),
                );
            }
        };
    }
    if let Some(node) = fields.get("packet_cost") {
        engine.packet_cost_ns = ctx.engine_cost(node, "engine.packet_cost")?;
    }
    Ok(engine)
}

/// Reads `min_rate` and `max_rate` and checks that the first is below the second.
fn rate_bounds(ctx: Ctx, fields: &Fields) -> Res<(Option<u64>, Option<u64>)> {
    let min = fields
        .get("min_rate")
        .map(|node| ctx.rate(node, "min_rate"))
        .transpose()?;
    let max = fields
        .get("max_rate")
        .map(|node| ctx.positive_rate(node, "max_rate"))
        .transpose()?;
    if let (Some(min), Some(max)) = (min, max)
        && min > max
    {
        return ctx.err(
            fields.get("min_rate").unwrap_or(fields.at),
            format!(
                "min_rate {} is above max_rate {}",
                units::format_rate(min as f64),
                units::format_rate(max as f64)
            ),
            Some("lower min_rate or raise max_rate".into()),
        );
    }
    Ok((min, max))
}

fn weight_priority(ctx: Ctx, fields: &Fields) -> Res<(u32, u8)> {
    let weight = match fields.get("weight") {
        Some(node) => match node.value {
            Node::Int(0) => {
                return ctx.err(
                    node,
                    "weight must be at least 1",
                    Some("a weight of 0 would never be served; use max_rate to limit".into()),
                );
            }
            _ => ctx.integer(node, "weight", 1, u64::from(u32::MAX))? as u32,
        },
        None => 1,
    };
    let priority = match fields.get("priority") {
        Some(node) => ctx.integer(node, "priority", 0, PRIORITY_MAX)? as u8,
        None => 1,
    };
    Ok((weight, priority))
}

fn tenant<'n>(draft: &mut Draft<'n>, node: &'n Sp) -> Res<()> {
    let ctx = draft.ctx;
    let fields = ctx.fields(node, "tenant", TENANT_KEYS)?;
    let name_node = ctx.require(&fields, "name", "tenant")?;
    let name = ctx.name(name_node, "tenant name")?;
    if draft.tenants.iter().any(|t| t.name == name) {
        return ctx.err(
            name_node,
            format!("duplicate tenant name `{name}`"),
            Some("tenant names are unique in a policy".into()),
        );
    }
    let (weight, priority) = weight_priority(ctx, &fields)?;
    let (min_rate_bps, max_rate_bps) = rate_bounds(ctx, &fields)?;
    let cores = tenant_cores(ctx, &fields)?;
    let buffer_bytes = fields
        .get("buffer")
        .map(|node| ctx.size(node, "buffer"))
        .transpose()?;
    let (match_src, match_port) = match fields.get("match") {
        Some(match_node) => tenant_match(ctx, &draft.tenants, match_node)?,
        None => (None, None),
    };
    let (ingress, ingress_min_at) = match fields.get("ingress") {
        Some(node) => {
            let envelope = ctx.fields(node, "ingress", INGRESS_KEYS)?;
            let (min_rate_bps, max_rate_bps) = rate_bounds(ctx, &envelope)?;
            let ingress = Envelope {
                min_rate_bps,
                max_rate_bps,
            };
            (Some(ingress), envelope.get("min_rate"))
        }
        None => (None, None),
    };
    let completions = match fields.get("completions") {
        None => Completions::default(),
        Some(node) => completions(ctx, node)?,
    };
    let napi_tx = match fields.get("napi_tx") {
        None => false,
        Some(node) => ctx.boolean(node, "napi_tx")?,
    };
    let apps = tenant_apps(draft, &fields, node)?;
    draft.cores_given.push(!cores.is_empty());
    draft.tenant_at.push(node);
    draft.tenant_name_at.push(name_node);
    draft.tenant_min_at.push(fields.get("min_rate"));
    draft.ingress_min_at.push(ingress_min_at);
    draft.tenants.push(Tenant {
        name,
        weight,
        priority,
        min_rate_bps,
        max_rate_bps,
        cores,
        buffer_bytes,
        match_src,
        match_port,
        ingress,
        completions,
        napi_tx,
        apps,
    });
    Ok(())
}

/// A tenant's `cores`: each core once; empty when it names none.
fn tenant_cores(ctx: Ctx, fields: &Fields) -> Res<Vec<u16>> {
    let mut cores = Vec::new();
    let Some(cores_node) = fields.get("cores") else {
        return Ok(cores);
    };
    let items = ctx.seq(cores_node, "cores")?;
    if items.is_empty() {
        return ctx.err(
            cores_node,
            "cores must not be empty",
            Some("leave `cores` out to use every core".into()),
        );
    }
    for item in items {
        let core = ctx.integer(item, "core index", 0, u64::from(CORE_INDEX_MAX))? as u16;
        if cores.contains(&core) {
            return ctx.err(
                item,
                format!("core {core} is listed twice"),
                Some("list each core once".into()),
            );
        }
        cores.push(core);
    }
    Ok(cores)
}

/// A tenant's `match`: its source prefix, disjoint from every `earlier` tenant's,
/// and its interface.
fn tenant_match(
    ctx: Ctx,
    earlier: &[Tenant],
    match_node: &Sp,
) -> Res<(Option<Cidr>, Option<String>)> {
    let m = ctx.fields(match_node, "tenant match", TENANT_MATCH_KEYS)?;
    let (mut match_src, mut match_port) = (None, None);
    if let Some(src) = m.get("src") {
        let prefix = cidr(ctx, src)?;
        // A frame is classified by its source alone: in overlapping prefixes it
        // would belong to two tenants, and one took all (99.3 Mbit/s against
        // a cap of 20, the other 0).
        let overlapped = earlier
            .iter()
            .find(|t| t.match_src.is_some_and(|other| other.overlaps(&prefix)));
        if let Some(other) = overlapped {
            return ctx.err(
                src,
                format!("match.src overlaps tenant `{}`'s", other.name),
                Some(
                    "tenants' source prefixes must be disjoint: a frame belongs to one tenant"
                        .into(),
                ),
            );
        }
        match_src = Some(prefix);
    }
    if let Some(port) = m.get("port") {
        let port_name = ctx.string(port, "match.port")?;
        if port_name.is_empty() || port_name.len() > 15 || port_name.contains(['/', ' ']) {
            return ctx.err(
                port,
                format!("`{port_name}` is not an interface name"),
                Some("interface names have 1 to 15 characters, no `/` or space".into()),
            );
        }
        match_port = Some(port_name.to_owned());
    }
    Ok((match_src, match_port))
}

fn completions(ctx: Ctx, node: &Sp) -> Res<Completions> {
    match ctx.string(node, "completions")? {
        "in-order" => Ok(Completions::InOrder),
        "out-of-order" => Ok(Completions::OutOfOrder),
        other => ctx.err(
            node,
            format!("unknown completions `{other}`"),
            Some("completions is `in-order` or `out-of-order`".into()),
        ),
    }
}

/// The apps of the tenant about to be added to `draft` (its `fields`, at `node`):
/// those it lists, and an implicit `default` when none of them takes what the
/// others leave.
fn tenant_apps<'n>(draft: &mut Draft<'n>, fields: &Fields<'n>, node: &'n Sp) -> Res<Vec<AppId>> {
    let ctx = draft.ctx;
    let tenant_id = TenantId(draft.tenants.len() as u16);
    let first_app = draft.apps.len();
    if let Some(apps_node) = fields.get("apps") {
        let app_nodes = ctx.seq(apps_node, "apps")?;
        if first_app + app_nodes.len() > APPS_MAX {
            return ctx.err(
                apps_node,
                format!(
                    "{} apps in the policy, above the bound",
                    first_app + app_nodes.len()
                ),
                Some(format!("a policy has at most {APPS_MAX} apps (APPS_MAX)")),
            );
        }
        for app_node in app_nodes {
            app(draft, tenant_id, first_app, app_node)?;
        }
    }
    let own_apps = &draft.apps[first_app..];
    if !own_apps
        .iter()
        .any(|a| a.name == "default" || a.is_catch_all())
    {
        draft.apps.push(App {
            name: "default".to_owned(),
            tenant: tenant_id,
            weight: 1,
            priority: 1,
            min_rate_bps: None,
            max_rate_bps: None,
            match_proto: None,
            match_ports: Vec::new(),
            split: None,
            implicit: true,
        });
        draft.app_min_at.push(None);
    }
    if draft.apps.len() > APPS_MAX {
        return ctx.err(
            node,
            "the implicit `default` app takes the policy past its bound on apps",
            Some(format!("a policy has at most {APPS_MAX} apps (APPS_MAX)")),
        );
    }
    Ok((first_app..draft.apps.len())
        .map(|i| AppId(i as u32))
        .collect())
}

fn app<'n>(draft: &mut Draft<'n>, tenant: TenantId, first_app: usize, node: &'n Sp) -> Res<()> {
    let ctx = draft.ctx;
    let fields = ctx.fields(node, "app", APP_KEYS)?;
    let name_node = ctx.require(&fields, "name", "app")?;
    let name = ctx.name(name_node, "app name")?;
    if draft.apps[first_app..].iter().any(|a| a.name == name) {
        return ctx.err(
            name_node,
            format!("duplicate app name `{name}`"),
            Some("app names are unique within their tenant".into()),
        );
    }
    let (weight, priority) = weight_priority(ctx, &fields)?;
    let (min_rate_bps, max_rate_bps) = rate_bounds(ctx, &fields)?;
    let (match_proto, match_ports) = match fields.get("match") {
        Some(match_node) => app_match(ctx, match_node)?,
        None => (None, Vec::new()),
    };
    let split = fields
        .get("split")
        .map(|node| app_split(ctx, node))
        .transpose()?;
    let app = App {
        name,
        tenant,
        weight,
        priority,
        min_rate_bps,
        max_rate_bps,
        match_proto,
        match_ports,
        split,
        implicit: false,
    };
    // A declared `default` still takes what no rule took, unless a catch-all does.
    let unreachable = draft.apps[first_app..]
        .iter()
        .find(|earlier| earlier.shadows(&app) && (earlier.is_catch_all() || app.name != "default"));
    if let Some(earlier) = unreachable {
        let why = if earlier.is_catch_all() {
            format!(
                "app `{}` before it has no `match` and takes every packet",
                earlier.name
            )
        } else {
            format!(
                "app `{}` before it takes every packet its `match` takes",
                earlier.name
            )
        };
        return ctx.err(
            fields.get("match").unwrap_or(name_node),
            format!("app `{}` can never match: {why}", app.name),
            Some(
                "apps are matched in order and the first match wins: move the app above, or narrow the earlier one's match".into(),
            ),
        );
    }
    draft.app_min_at.push(fields.get("min_rate"));
    draft.apps.push(app);
    Ok(())
}

/// An app's `match`: its protocol and ports.
fn app_match(ctx: Ctx, match_node: &Sp) -> Res<(Option<Proto>, Vec<u16>)> {
    let m = ctx.fields(match_node, "app match", APP_MATCH_KEYS)?;
    let (mut match_proto, mut match_ports) = (None, Vec::new());
    if let Some(proto) = m.get("proto") {
        match_proto = Some(match ctx.string(proto, "match.proto")? {
            "tcp" => Proto::Tcp,
            "udp" => Proto::Udp,
            other => {
                return ctx.err(
                    proto,
                    format!("unknown proto `{other}`"),
                    Some("proto is tcp or udp".into()),
                );
            }
        });
    }
    if let Some(ports) = m.get("ports") {
        for port in ctx.seq(ports, "match.ports")? {
            let port_number = match &port.value {
                Node::Str(text) => text
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|p| (1..=65535).contains(p)),
                Node::Int(p) if (1..=65535).contains(p) => Some(*p as u64),
                _ => None,
            };
            let Some(port_number) = port_number else {
                return ctx.err(
                    port,
                    "invalid port",
                    Some("ports are integers in 1..=65535".into()),
                );
            };
            match_ports.push(port_number as u16);
        }
    }
    Ok((match_proto, match_ports))
}

/// An app's `split`: by what, and each part's cap.
fn app_split(ctx: Ctx, split_node: &Sp) -> Res<Split> {
    let s = ctx.fields(split_node, "split", SPLIT_KEYS)?;
    let by_node = ctx.require(&s, "by", "split")?;
    let by = match ctx.string(by_node, "split.by")? {
        "destination" => SplitBy::Destination,
        "flow" => SplitBy::Flow,
        other => {
            return ctx.err(
                by_node,
                format!("unknown split.by `{other}`"),
                Some("split.by is destination or flow".into()),
            );
        }
    };
    let max_node = ctx.require(&s, "max_rate", "split")?;
    let max_rate_bps = ctx.positive_rate(max_node, "split.max_rate")?;
    Ok(Split { by, max_rate_bps })
}

fn cidr(ctx: Ctx, node: &Sp) -> Res<Cidr> {
    let text = ctx.string(node, "match.src")?;
    let bad = |why: &str| {
        ctx.err(
            node,
            format!("`{text}` is not a CIDR: {why}"),
            Some("write an address and a prefix length, e.g. 10.0.1.0/24".into()),
        )
    };
    let (addr_text, prefix_text) = text.split_once('/').unwrap_or((text, ""));
    let Ok(addr) = addr_text.trim().parse::<IpAddr>() else {
        return bad("bad address");
    };
    let prefix_max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix_len = if prefix_text.is_empty() && !text.contains('/') {
        prefix_max
    } else {
        match prefix_text.trim().parse::<u8>() {
            Ok(len) if len <= prefix_max => len,
            _ => return bad("bad prefix length"),
        }
    };
    Ok(Cidr { addr, prefix_len })
}

impl Draft<'_> {
    /// Checks the guarantees against the link; `link_rate_at` is where a scenario
    /// overrode the rate, if it did, since that is then the node to blame.
    pub(super) fn check_guarantees(&self, link_rate_at: Option<(Ctx, &Sp)>) -> Res<()> {
        let link_rate = self.link.rate_bps;
        let blame = |own: &Sp, message: String, hint: String| match link_rate_at {
            Some((ctx, rate_node)) => ctx.err(
                rate_node,
                format!("{message} (in {})", self.ctx.file),
                Some(hint),
            ),
            None => self.ctx.err(own, message, Some(hint)),
        };
        // The link bounds what enters the host as well as what leaves it
        // (hosts.md), so ingress guarantees must fit in it as egress ones do.
        let egress_min: fn(&Tenant) -> Option<u64> = |t| t.min_rate_bps;
        let ingress_min: fn(&Tenant) -> Option<u64> = |t| t.ingress.and_then(|e| e.min_rate_bps);
        let directions = [
            (
                "min_rate",
                egress_min,
                &self.tenant_min_at,
                "guarantees must fit in the link together",
            ),
            (
                "ingress min_rate",
                ingress_min,
                &self.ingress_min_at,
                "ingress guarantees must fit in the link together: it bounds what enters the host too",
            ),
        ];
        for (key, min_of, min_at, hint) in directions {
            // The message gives the whole sum; the span, the guarantee that first
            // takes the running sum past the link.
            let total: u128 = self
                .tenants
                .iter()
                .map(|tenant| u128::from(min_of(tenant).unwrap_or(0)))
                .sum();
            let mut sum: u128 = 0;
            for (tenant, at) in self.tenants.iter().zip(min_at) {
                sum += u128::from(min_of(tenant).unwrap_or(0));
                if sum > u128::from(link_rate)
                    && let Some(at) = at
                {
                    return blame(
                        at,
                        format!(
                            "the tenants' {key} add up to {}, above link.rate {}",
                            units::format_rate(total as f64),
                            units::format_rate(link_rate as f64)
                        ),
                        hint.into(),
                    );
                }
            }
        }
        for tenant in &self.tenants {
            let (bound, bound_name) = match (tenant.min_rate_bps, tenant.max_rate_bps) {
                (Some(min), _) => (min, "the tenant's min_rate"),
                (None, Some(max)) => (max, "the tenant's max_rate"),
                (None, None) => (link_rate, "link.rate"),
            };
            let app_min = |app: &crate::model::AppId| {
                u128::from(self.apps[app.index()].min_rate_bps.unwrap_or(0))
            };
            let total: u128 = tenant.apps.iter().map(app_min).sum();
            let mut sum: u128 = 0;
            for app in &tenant.apps {
                sum += app_min(app);
                if sum > u128::from(bound)
                    && let Some(at) = self.app_min_at[app.index()]
                {
                    return blame(
                        at,
                        format!(
                            "the apps' min_rate of tenant `{}` add up to {}, above {bound_name} {}",
                            tenant.name,
                            units::format_rate(total as f64),
                            units::format_rate(bound as f64)
                        ),
                        "an app's guarantee comes out of its tenant's".into(),
                    );
                }
            }
        }
        Ok(())
    }

    pub(super) fn finish(self) -> Policy {
        let named_max = self
            .tenants
            .iter()
            .flat_map(|t| t.cores.iter().copied())
            .max();
        // Every core index is at most CORE_INDEX_MAX, so one past it fits in u16.
        let host_cores = named_max.map_or(self.link.queues, |c| c + 1);
        let mut tenants = self.tenants;
        for (tenant, given) in tenants.iter_mut().zip(&self.cores_given) {
            if !given {
                tenant.cores = (0..host_cores).collect();
            }
        }
        Policy {
            link: self.link,
            buffer_bytes: self.buffer_bytes,
            tenants,
            apps: self.apps,
            host_cores,
            engine: self.engine,
        }
    }
}

/// Parses and validates a policy; `file` names it in error messages.
pub fn parse_policy(text: &str, file: &str) -> Result<Policy, PolicyError> {
    let ctx = Ctx { file };
    let root = ctx.read(text)?;
    let draft = policy_draft(ctx, &root)?;
    draft.check_guarantees(None)?;
    Ok(draft.finish())
}
