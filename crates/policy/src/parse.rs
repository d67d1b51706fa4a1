//! YAML to the validated model. The text is first read into a generic tree in which
//! every node keeps its position ([`Node`]); validation then walks that tree by hand,
//! so that each mistake is reported at the node that holds it (the key for an
//! unknown key, the value for a bad value, the second occurrence of a duplicate).
//!
//! An app's `max_rate` above its tenant's is accepted: the tenant's cap binds
//! anyway, and refusing it would force every app cap to be edited with the tenant's.

use crate::limits::{
    APPS_MAX, DATAGRAM_BYTES_MAX, DURATION_NS_MAX, ENGINE_CORES_MAX, ENGINE_COST_NS_MAX, FLOWS_MAX,
    INTERVAL_CELLS_MAX, INTERVALS_MAX, MESSAGE_BYTES_MAX, RATE_BPS_MAX, REQUESTS_PER_S_MAX,
    RETRIES_PER_PACKET, SENDER_RETRIES_PER_S, SIM_PACKETS_MAX, TENANTS_MAX,
    traffic_packets_estimate,
};
use crate::units::{self, UnitError};
use crate::{
    AnyScenario, App, AppId, CORE_INDEX_MAX, Cidr, Completions, CpuSharing, EngineCpu, Envelope,
    Link, Policy, PolicyError, Proto, Scenario, Split, SplitBy, Tenant, TenantId, Traffic,
    TrafficKind,
};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::options::DuplicateKeyPolicy;
use serde_saphyr::{Location, Spanned};
use std::fmt;
use std::net::IpAddr;
use std::path::Path;

mod hosts;

/// A YAML node; scalars keep the type the YAML core schema gave them.
#[derive(Debug)]
enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Node>, Spanned<Node>)>),
}

type Sp = Spanned<Node>;

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        Ok(i128::try_from(v).map_or(Node::Float(v as f64), Node::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Sp>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Sp>()? {
            entries.push((key, map.next_value::<Sp>()?));
        }
        Ok(Node::Map(entries))
    }
}

fn describe(node: &Node) -> &'static str {
    match node {
        Node::Null => "nothing",
        Node::Bool(_) => "a boolean",
        Node::Int(_) => "an integer",
        Node::Float(_) => "a number",
        Node::Str(_) => "a string",
        Node::Seq(_) => "a list",
        Node::Map(_) => "a mapping",
    }
}

/// What to do about a YAML error, by the parser's words for it.
fn yaml_hint(message: &str) -> &'static str {
    if message.contains("budget breached") {
        "a file is read into at most 250000 nodes, an alias counting its anchor's nodes each time it is used: no policy needs that many"
    } else if message.contains("recursion limit") {
        "lists and mappings nest a few levels deep in a policy; close the brackets"
    } else if message.contains("non-finite") {
        "write a finite number with its unit, e.g. `10Gbit`"
    } else if message.contains("tab") {
        "indent with spaces"
    } else {
        "see the YAML at this position: indent with spaces, close every bracket and quote"
    }
}

/// Reports mistakes of one file.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    file: &'a str,
}

type Res<T> = Result<T, PolicyError>;

impl Ctx<'_> {
    fn at(&self, loc: &Location, message: impl Into<String>, hint: Option<String>) -> PolicyError {
        PolicyError {
            file: self.file.to_owned(),
            line: u32::try_from(loc.line()).unwrap_or(u32::MAX).max(1),
            column: u32::try_from(loc.column()).unwrap_or(u32::MAX).max(1),
            message: message.into(),
            hint,
        }
    }

    fn err<T>(&self, node: &Sp, message: impl Into<String>, hint: Option<String>) -> Res<T> {
        Err(self.at(&node.referenced, message, hint))
    }

    fn unit_err(&self, node: &Sp, key: &str, e: UnitError) -> PolicyError {
        self.at(&node.referenced, format!("{key}: {}", e.message), e.hint)
    }

    /// Reads the text into a tree; YAML syntax errors keep the parser's position.
    fn read(&self, text: &str) -> Res<Sp> {
        if text
            .lines()
            .all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'))
        {
            return Err(PolicyError {
                file: self.file.to_owned(),
                line: 1,
                column: 1,
                message: "empty file".to_owned(),
                hint: Some("a policy needs at least `link: {rate: ...}` and `tenants:`".into()),
            });
        }
        // Duplicate keys are passed through so that they are reported in our words.
        let options = serde_saphyr::options! {
            duplicate_keys: DuplicateKeyPolicy::PassThrough,
            with_snippet: false,
            // YAML 1.1 reads `y`, `no`, `on` as booleans: fine names for apps.
            strict_booleans: true,
        };
        serde_saphyr::from_str_with_options::<Sp>(text, options).map_err(|e| {
            let (line, column) = e
                .location()
                .map_or((1, 1), |loc| (loc.line().max(1), loc.column().max(1)));
            let text = e.to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            let message = first
                .strip_prefix(&format!("line {line} column {column}: "))
                .unwrap_or(first);
            PolicyError {
                file: self.file.to_owned(),
                line: u32::try_from(line).unwrap_or(u32::MAX),
                column: u32::try_from(column).unwrap_or(u32::MAX),
                message: format!("not valid YAML: {message}"),
                hint: Some(yaml_hint(message).into()),
            }
        })
    }

    /// The entries of a mapping, checked against the keys it may hold.
    fn fields<'n>(&self, node: &'n Sp, what: &str, allowed: &[&str]) -> Res<Fields<'n>> {
        let Node::Map(entries) = &node.value else {
            return self.err(
                node,
                format!("{what} must be a mapping, found {}", describe(&node.value)),
                Some(format!("keys of {what}: {}", allowed.join(", "))),
            );
        };
        let mut fields = Fields {
            at: node,
            entries: Vec::new(),
        };
        for (key, value) in entries {
            let Node::Str(name) = &key.value else {
                return self.err(
                    key,
                    format!(
                        "keys of {what} must be names, found {}",
                        describe(&key.value)
                    ),
                    Some(format!("keys of {what}: {}", allowed.join(", "))),
                );
            };
            if !allowed.contains(&name.as_str()) {
                return self.err(
                    key,
                    format!("unknown key `{name}` in {what}"),
                    Some(format!("allowed keys: {}", allowed.join(", "))),
                );
            }
            if fields.entries.iter().any(|(k, _, _)| *k == name) {
                return self.err(
                    key,
                    format!("duplicate key `{name}` in {what}"),
                    Some("a key appears once in a mapping: remove one".into()),
                );
            }
            fields.entries.push((name.as_str(), key, value));
        }
        Ok(fields)
    }

    fn require<'n>(&self, fields: &Fields<'n>, key: &str, what: &str) -> Res<&'n Sp> {
        fields.get(key).ok_or_else(|| {
            self.at(
                &fields.at.referenced,
                format!("missing required key `{key}` in {what}"),
                Some(format!("add `{key}:` to {what}")),
            )
        })
    }

    fn integer(&self, node: &Sp, key: &str, min: u64, max: u64) -> Res<u64> {
        let value = match node.value {
            Node::Int(v) => Some(v),
            // YAML 1.1 leftovers such as `011` arrive as floats; whole ones are fine.
            Node::Float(v) if v.fract() == 0.0 && v.abs() < 1e30 => Some(v as i128),
            _ => None,
        };
        match value {
            Some(v) if (i128::from(min)..=i128::from(max)).contains(&v) => Ok(v as u64),
            Some(v) => self.err(
                node,
                format!("{key} {v} is out of range {min}..={max}"),
                Some(format!("write a whole number in {min}..={max}")),
            ),
            None => self.err(
                node,
                format!("{key} must be an integer, found {}", describe(&node.value)),
                Some(format!("write a whole number in {min}..={max}")),
            ),
        }
    }

    fn boolean(&self, node: &Sp, key: &str) -> Res<bool> {
        match node.value {
            Node::Bool(v) => Ok(v),
            ref other => self.err(
                node,
                format!("{key} must be true or false, found {}", describe(other)),
                Some(format!("write `{key}: true` or `{key}: false`")),
            ),
        }
    }

    fn string<'n>(&self, node: &'n Sp, key: &str) -> Res<&'n str> {
        match &node.value {
            Node::Str(s) => Ok(s),
            other => self.err(
                node,
                format!("{key} must be a string, found {}", describe(other)),
                Some("write a word, quoted if it could read as something else".into()),
            ),
        }
    }

    /// A name as written; `123` is read as an integer by YAML but is a fine name.
    fn name(&self, node: &Sp, key: &str) -> Res<String> {
        let name = match &node.value {
            Node::Str(s) => s.clone(),
            Node::Int(v) if *v >= 0 => v.to_string(),
            other => {
                return self.err(
                    node,
                    format!("{key} must be a name, found {}", describe(other)),
                    Some(NAME_HINT.into()),
                );
            }
        };
        if name.len() > NAME_BYTES_MAX {
            return self.err(
                node,
                format!("{key} of {} bytes is too long", name.len()),
                Some(NAME_HINT.into()),
            );
        }
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            return self.err(
                node,
                format!("invalid {key} `{name}`"),
                Some(NAME_HINT.into()),
            );
        }
        Ok(name)
    }

    /// The text of a scalar that must carry a unit; numbers are passed on so that the
    /// unit parser reports the missing unit.
    fn unit_text(&self, node: &Sp, key: &str) -> Res<String> {
        match &node.value {
            Node::Str(s) => Ok(s.clone()),
            Node::Int(v) => Ok(v.to_string()),
            Node::Float(v) => Ok(v.to_string()),
            other => self.err(
                node,
                format!(
                    "{key} must be a quantity with a unit, found {}",
                    describe(other)
                ),
                Some("write a number and its unit, e.g. `10Gbit`, `1500B` or `500ms`".into()),
            ),
        }
    }

    fn rate(&self, node: &Sp, key: &str) -> Res<u64> {
        let text = self.unit_text(node, key)?;
        let bps = units::rate_bps(&text).map_err(|e| self.unit_err(node, key, e))?;
        if bps > RATE_BPS_MAX {
            return self.err(
                node,
                format!(
                    "{key} {} is above the bound",
                    units::format_rate(bps as f64)
                ),
                Some(format!(
                    "rates are at most {} (RATE_BPS_MAX)",
                    units::format_rate(RATE_BPS_MAX as f64)
                )),
            );
        }
        Ok(bps)
    }

    fn positive_rate(&self, node: &Sp, key: &str) -> Res<u64> {
        match self.rate(node, key)? {
            0 => self.err(
                node,
                format!("{key} must be above 0"),
                Some("write a rate above 0, e.g. `10Mbit`; leave a cap out for none".into()),
            ),
            rate => Ok(rate),
        }
    }

    fn size(&self, node: &Sp, key: &str) -> Res<u64> {
        let text = self.unit_text(node, key)?;
        units::size_bytes(&text).map_err(|e| self.unit_err(node, key, e))
    }

    fn size_u32(&self, node: &Sp, key: &str, min: u64, max: u64) -> Res<u32> {
        let bytes = self.size(node, key)?;
        if !(min..=max).contains(&bytes) {
            return self.err(
                node,
                format!(
                    "{key} {} is out of range {}..={}",
                    units::format_size(bytes),
                    units::format_size(min),
                    units::format_size(max)
                ),
                Some(format!(
                    "write a size in {}..={}",
                    units::format_size(min),
                    units::format_size(max)
                )),
            );
        }
        Ok(bytes as u32)
    }

    fn time(&self, node: &Sp, key: &str) -> Res<u64> {
        let text = self.unit_text(node, key)?;
        units::time_ns(&text).map_err(|e| self.unit_err(node, key, e))
    }

    /// Engine work per packet, bounded so that a run's busy time fits in `u64`.
    fn engine_cost(&self, node: &Sp, key: &str) -> Res<u64> {
        let cost = self.time(node, key)?;
        if cost > ENGINE_COST_NS_MAX {
            return self.err(
                node,
                format!("{key} {} is above the bound", units::format_time(cost)),
                Some(format!(
                    "engine work per packet is at most {} (ENGINE_COST_NS_MAX)",
                    units::format_time(ENGINE_COST_NS_MAX)
                )),
            );
        }
        Ok(cost)
    }

    fn seq<'n>(&self, node: &'n Sp, key: &str) -> Res<&'n [Sp]> {
        match &node.value {
            Node::Seq(items) => Ok(items),
            other => self.err(
                node,
                format!("{key} must be a list, found {}", describe(other)),
                Some("write `[a, b]`, or one `- item` a line".into()),
            ),
        }
    }
}

struct Fields<'n> {
    at: &'n Sp,
    entries: Vec<(&'n str, &'n Sp, &'n Sp)>,
}

impl<'n> Fields<'n> {
    fn get(&self, key: &str) -> Option<&'n Sp> {
        self.entries
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|&(_, _, value)| value)
    }

    /// Where `key` itself was written, for a key that is wrong where it stands.
    fn key(&self, key: &str) -> Option<&'n Sp> {
        self.entries
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|&(_, key, _)| key)
    }
}

/// Names of tenants, apps, traffic and scenarios: they label table columns, files
/// and lab interfaces.
const NAME_BYTES_MAX: usize = 64;
const NAME_HINT: &str = "names have 1 to 64 characters of a-z, 0-9, `_` and `-`";

const POLICY_KEYS: &[&str] = &["link", "buffer", "tenants", "engine"];
const ENGINE_KEYS: &[&str] = &["cores", "cpu", "packet_cost"];
const LINK_KEYS: &[&str] = &["rate", "queues", "mtu"];
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
struct Draft<'n> {
    ctx: Ctx<'n>,
    link: Link,
    buffer_bytes: Option<u64>,
    engine: EngineCpu,
    tenants: Vec<Tenant>,
    apps: Vec<App>,
    /// Where each tenant's name was written, for names that must be unique
    /// beyond the policy (VMs across hosts).
    tenant_name_at: Vec<&'n Sp>,
    /// Where each tenant's `min_rate` and `ingress.min_rate` were written, for the
    /// guarantee checks.
    tenant_min_at: Vec<Option<&'n Sp>>,
    ingress_min_at: Vec<Option<&'n Sp>>,
    app_min_at: Vec<Option<&'n Sp>>,
    /// Whether each tenant named its cores (the others get every core of the host).
    cores_given: Vec<bool>,
}

fn link_fields(ctx: Ctx, fields: &Fields, link: &mut Link) -> Res<()> {
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

fn policy_draft<'n>(ctx: Ctx<'n>, root: &'n Sp) -> Res<Draft<'n>> {
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

    let mut cores = Vec::new();
    if let Some(cores_node) = fields.get("cores") {
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
    }

    let buffer_bytes = fields
        .get("buffer")
        .map(|node| ctx.size(node, "buffer"))
        .transpose()?;
    let (mut match_src, mut match_port) = (None, None);
    if let Some(match_node) = fields.get("match") {
        let m = ctx.fields(match_node, "tenant match", TENANT_MATCH_KEYS)?;
        if let Some(src) = m.get("src") {
            let prefix = cidr(ctx, src)?;
            // A frame is classified by its source alone: in overlapping prefixes it
            // would belong to two tenants, and one took all (99.3 Mbit/s against
            // a cap of 20, the other 0).
            let overlapped = draft
                .tenants
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
    }

    let mut ingress_min_at = None;
    let ingress = fields
        .get("ingress")
        .map(|node| {
            let envelope = ctx.fields(node, "ingress", INGRESS_KEYS)?;
            let (min_rate_bps, max_rate_bps) = rate_bounds(ctx, &envelope)?;
            ingress_min_at = envelope.get("min_rate");
            Ok(Envelope {
                min_rate_bps,
                max_rate_bps,
            })
        })
        .transpose()?;
    let completions = match fields.get("completions") {
        None => Completions::default(),
        Some(node) => match ctx.string(node, "completions")? {
            "in-order" => Completions::InOrder,
            "out-of-order" => Completions::OutOfOrder,
            other => {
                return ctx.err(
                    node,
                    format!("unknown completions `{other}`"),
                    Some("completions is `in-order` or `out-of-order`".into()),
                );
            }
        },
    };
    let napi_tx = match fields.get("napi_tx") {
        None => false,
        Some(node) => ctx.boolean(node, "napi_tx")?,
    };

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
    let apps = (first_app..draft.apps.len())
        .map(|i| AppId(i as u32))
        .collect();
    draft.cores_given.push(!cores.is_empty());
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
    let (mut match_proto, mut match_ports) = (None, Vec::new());
    if let Some(match_node) = fields.get("match") {
        let m = ctx.fields(match_node, "app match", APP_MATCH_KEYS)?;
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
    }
    let split = match fields.get("split") {
        Some(split_node) => {
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
            Some(Split { by, max_rate_bps })
        }
        None => None,
    };
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
    fn check_guarantees(&self, link_rate_at: Option<(Ctx, &Sp)>) -> Res<()> {
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

    fn finish(self) -> Policy {
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

fn read_file(path: &Path) -> Result<String, PolicyError> {
    std::fs::read_to_string(path).map_err(|e| PolicyError {
        file: path.display().to_string(),
        line: 1,
        column: 1,
        message: format!("cannot read the file: {e}"),
        hint: Some("a policy or scenario is a readable UTF-8 text file".into()),
    })
}

pub fn load_policy(path: &Path) -> Result<Policy, PolicyError> {
    parse_policy(&read_file(path)?, &path.display().to_string())
}

/// [`parse_scenario`] of the file at `path`.
pub fn load_scenario(path: &Path, known_enforcers: &[&str]) -> Result<Scenario, PolicyError> {
    let text = read_file(path)?;
    let base_dir = path.parent().unwrap_or(Path::new(""));
    parse_scenario(
        &text,
        &path.display().to_string(),
        base_dir,
        known_enforcers,
    )
}

/// [`parse_any_scenario`] of the file at `path`.
pub fn load_any_scenario(
    path: &Path,
    known_enforcers: &[&str],
) -> Result<AnyScenario, PolicyError> {
    let text = read_file(path)?;
    let base_dir = path.parent().unwrap_or(Path::new(""));
    parse_any_scenario(
        &text,
        &path.display().to_string(),
        base_dir,
        known_enforcers,
    )
}

const SCENARIO_KEYS: &[&str] = &[
    "name",
    "policy",
    "duration",
    "interval",
    "seed",
    "enforcers",
    "link",
    "traffic",
];
const TRAFFIC_KEYS: &[&str] = &[
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

const INTERVAL_NS_DEFAULT: u64 = 500_000_000;
const PACKET_BYTES_DEFAULT: u64 = 1470;
const MESSAGE_BYTES_DEFAULT: u64 = 64;

/// Parses and validates a scenario of one host; a `policy:` path is resolved against
/// `base_dir`. `known_enforcers` are the names its `enforcers` may list, from the
/// caller: the crates that implement them (`sched`'s registry, the lab) build on
/// this one.
pub fn parse_scenario(
    text: &str,
    file: &str,
    base_dir: &Path,
    known_enforcers: &[&str],
) -> Result<Scenario, PolicyError> {
    let ctx = Ctx { file };
    let root = ctx.read(text)?;
    if let Some(hosts_key) = hosts_key(ctx, &root)? {
        return ctx.err(
            hosts_key,
            "a scenario across hosts (`hosts:`), where a scenario of one host is expected",
            Some(
                "this takes a scenario with `policy:` (docs/scenario.md); scenarios with `hosts:` are in docs/hosts.md".into(),
            ),
        );
    }
    one_host_scenario(ctx, &root, base_dir, known_enforcers)
}

/// Parses and validates a scenario of one host (as [`parse_scenario`]) or, when its
/// top level has `hosts`, across several hosts (docs/hosts.md).
pub fn parse_any_scenario(
    text: &str,
    file: &str,
    base_dir: &Path,
    known_enforcers: &[&str],
) -> Result<AnyScenario, PolicyError> {
    let ctx = Ctx { file };
    let root = ctx.read(text)?;
    match hosts_key(ctx, &root)? {
        Some(_) => {
            hosts::hosts_scenario(ctx, &root, base_dir, known_enforcers).map(AnyScenario::Hosts)
        }
        None => one_host_scenario(ctx, &root, base_dir, known_enforcers).map(AnyScenario::OneHost),
    }
}

/// The `hosts` key of a scenario's top level, if it has one; a scenario with
/// `policy` beside it is refused, as it would be unclear which one runs.
fn hosts_key<'n>(ctx: Ctx, root: &'n Sp) -> Res<Option<&'n Sp>> {
    let Node::Map(entries) = &root.value else {
        return Ok(None);
    };
    let key = |name: &str| {
        entries
            .iter()
            .map(|(key, _)| key)
            .find(|key| matches!(&key.value, Node::Str(k) if k == name))
    };
    match (key("hosts"), key("policy")) {
        (Some(hosts), Some(_)) => ctx.err(
            hosts,
            "a scenario has `policy` (one host) or `hosts` (several), not both",
            Some("move the policy under a host of `hosts:`, or remove `hosts`".into()),
        ),
        (hosts, _) => Ok(hosts),
    }
}

fn one_host_scenario(
    ctx: Ctx,
    root: &Sp,
    base_dir: &Path,
    known_enforcers: &[&str],
) -> Res<Scenario> {
    let top = ctx.fields(root, "the scenario", SCENARIO_KEYS)?;
    let name = scenario_name(ctx, &top)?;
    let policy_node = ctx.require(&top, "policy", "the scenario")?;
    let policy = with_policy(ctx, policy_node, base_dir, |mut draft| {
        draft.check_guarantees(None)?;
        if let Some(link_node) = top.get("link") {
            let fields = ctx.fields(link_node, "link", LINK_KEYS)?;
            link_fields(ctx, &fields, &mut draft.link)?;
            let rate_at = fields.get("rate").unwrap_or(link_node);
            draft.check_guarantees(Some((ctx, rate_at)))?;
        }
        Ok(draft.finish())
    })?;
    let run = run_header(ctx, &top, known_enforcers, "tonic")?;

    let items = traffic_items(ctx, &top)?;
    let mut tally = TrafficTally::default();
    let mut traffic: Vec<Traffic> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let fields = ctx.fields(item, "traffic", TRAFFIC_KEYS)?;
        if let Some(to_key) = fields.key("to") {
            return ctx.err(
                to_key,
                "`to` names a receiving VM on another host, and this scenario has one host",
                Some(
                    "a scenario across hosts lists them under `hosts:` in place of `policy:` (docs/hosts.md)".into(),
                ),
            );
        }
        let tenant_node = ctx.require(&fields, "tenant", "traffic")?;
        let tenant_name = ctx.name(tenant_node, "tenant")?;
        let Some(tenant) = policy.tenant_by_name(&tenant_name) else {
            let names: Vec<&str> = policy.tenants.iter().map(|t| t.name.as_str()).collect();
            return ctx.err(
                tenant_node,
                format!("unknown tenant `{tenant_name}`"),
                Some(format!("tenants: {}", names.join(", "))),
            );
        };
        let entry = traffic_entry(ctx, &fields, &policy, tenant, run.duration_ns, index)?;
        tally.add(ctx, &fields, &policy, &entry)?;
        traffic.push(entry);
    }
    let classes = (policy.tenants.len() + policy.apps.len()) as u64;
    tally.check(ctx, &run, classes, items)?;

    Ok(Scenario {
        name,
        policy,
        duration_ns: run.duration_ns,
        interval_ns: run.interval_ns,
        seed: run.seed,
        enforcers: run.enforcers,
        traffic,
    })
}

/// A scenario's `name`, or its file's stem.
fn scenario_name(ctx: Ctx, top: &Fields) -> Res<String> {
    let Some(node) = top.get("name") else {
        return Ok(Path::new(ctx.file).file_stem().map_or_else(
            || "scenario".to_owned(),
            |s| s.to_string_lossy().into_owned(),
        ));
    };
    let name = ctx.unit_text(node, "name")?;
    // The name becomes a folder under the results: `.` and `..` would put
    // a run's results in the current folder or above it.
    if name.trim().is_empty()
        || name == "."
        || name == ".."
        || name.contains(['/', '\\'])
        || name.chars().any(char::is_control)
        || name.len() > NAME_BYTES_MAX
    {
        let shown: String = name.chars().take(NAME_BYTES_MAX).collect();
        return ctx.err(
            node,
            format!("invalid scenario name `{shown}`"),
            Some(format!(
                "the name becomes a folder: not empty, not `.` or `..`, no `/`, `\\` or control characters, at most {NAME_BYTES_MAX} bytes"
            )),
        );
    }
    Ok(name)
}

/// Reads the policy a scenario's `policy:` gives, a path relative to `base_dir` or
/// a mapping inline, and hands its draft to `finish`: errors inside a policy file
/// name that file, so the draft cannot outlive its text.
fn with_policy<T>(
    ctx: Ctx,
    node: &Sp,
    base_dir: &Path,
    finish: impl FnOnce(Draft<'_>) -> Res<T>,
) -> Res<T> {
    match &node.value {
        Node::Str(path) => {
            let full = base_dir.join(path);
            let policy_file = full.display().to_string();
            let policy_text = std::fs::read_to_string(&full).map_err(|e| {
                ctx.at(
                    &node.referenced,
                    format!("cannot read policy file {policy_file}: {e}"),
                    Some("a `policy:` path is relative to the scenario's folder".into()),
                )
            })?;
            let policy_ctx = Ctx { file: &policy_file };
            let policy_root = policy_ctx.read(&policy_text)?;
            finish(policy_draft(policy_ctx, &policy_root)?)
        }
        Node::Map(_) => finish(policy_draft(ctx, node)?),
        other => ctx.err(
            node,
            format!(
                "policy must be a path or a mapping, found {}",
                describe(other)
            ),
            Some("write a file name, or the policy's keys indented below `policy:`".into()),
        ),
    }
}

/// The keys of a scenario about its run as a whole, checked against their bounds.
struct RunHeader<'n> {
    duration_ns: u64,
    interval_ns: u64,
    intervals: u64,
    seed: u64,
    enforcers: Vec<String>,
    duration_at: &'n Sp,
    /// The node to blame for too many intervals: `interval`, else `duration`.
    intervals_at: &'n Sp,
}

fn run_header<'n>(
    ctx: Ctx,
    top: &Fields<'n>,
    known_enforcers: &[&str],
    default_enforcer: &str,
) -> Res<RunHeader<'n>> {
    let duration_node = ctx.require(top, "duration", "the scenario")?;
    let duration_ns = ctx.time(duration_node, "duration")?;
    if duration_ns == 0 {
        return ctx.err(
            duration_node,
            "duration must be above 0",
            Some("write e.g. `10s`".into()),
        );
    }
    if duration_ns > DURATION_NS_MAX {
        return ctx.err(
            duration_node,
            format!(
                "duration {} is above the bound",
                units::format_time(duration_ns)
            ),
            Some(format!(
                "a run lasts at most {} (DURATION_NS_MAX)",
                units::format_time(DURATION_NS_MAX)
            )),
        );
    }
    let interval_ns = match top.get("interval") {
        Some(node) => {
            let interval = ctx.time(node, "interval")?;
            if interval == 0 || interval > duration_ns {
                return ctx.err(
                    node,
                    format!(
                        "interval {} must be above 0 and at most the duration {}",
                        units::format_time(interval),
                        units::format_time(duration_ns)
                    ),
                    Some("write an interval above 0 and at most the duration, e.g. `500ms`".into()),
                );
            }
            interval
        }
        None if duration_ns < INTERVAL_NS_DEFAULT => {
            return ctx.err(
                duration_node,
                "duration is shorter than the default interval 500ms",
                Some("set `interval` to at most the duration".into()),
            );
        }
        None => INTERVAL_NS_DEFAULT,
    };
    let intervals_at = top.get("interval").unwrap_or(duration_node);
    let intervals = duration_ns.div_ceil(interval_ns);
    if intervals > INTERVALS_MAX {
        return ctx.err(
            intervals_at,
            format!(
                "{} of duration in intervals of {} make {intervals} intervals, above the bound",
                units::format_time(duration_ns),
                units::format_time(interval_ns)
            ),
            Some(format!(
                "a run has at most {INTERVALS_MAX} intervals (INTERVALS_MAX): lengthen `interval` to at least {}",
                units::format_time(duration_ns.div_ceil(INTERVALS_MAX))
            )),
        );
    }
    let seed = match top.get("seed") {
        Some(node) => ctx.integer(node, "seed", 0, u64::MAX)?,
        None => 1,
    };
    let enforcers = match top.get("enforcers") {
        Some(node) => listed_enforcers(ctx, node, known_enforcers, default_enforcer)?,
        None => vec![default_enforcer.to_owned()],
    };
    Ok(RunHeader {
        duration_ns,
        interval_ns,
        intervals,
        seed,
        enforcers,
        duration_at: duration_node,
        intervals_at,
    })
}

/// A scenario's `traffic`: a list of at least one entry.
fn traffic_items<'n>(ctx: Ctx, top: &Fields<'n>) -> Res<&'n [Sp]> {
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
struct TrafficTally {
    flows: u64,
    names: Vec<String>,
    /// The simulator's packets for each entry, in the sender's policy.
    estimates: Vec<f64>,
}

impl TrafficTally {
    fn add(&mut self, ctx: Ctx, fields: &Fields, policy: &Policy, entry: &Traffic) -> Res<()> {
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
    fn check(&self, ctx: Ctx, run: &RunHeader, classes: u64, items: &[Sp]) -> Res<()> {
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
                    "a simulated run costs at most {SIM_PACKETS_MAX:.0e} packets (SIM_PACKETS_MAX; refused senders retry {SENDER_RETRIES_PER_S} times a second, {RETRIES_PER_PACKET} retries to a packet): lower a rate, enlarge `size`, open fewer flows, guarantee an open-loop rpc's responses a min_rate, or shorten the traffic"
                )),
            );
        }
        Ok(())
    }
}

fn listed_enforcers(ctx: Ctx, node: &Sp, known: &[&str], default: &str) -> Res<Vec<String>> {
    let items = ctx.seq(node, "enforcers")?;
    if items.is_empty() {
        return ctx.err(
            node,
            "enforcers must not be empty",
            Some(format!("leave `enforcers` out for [{default}]")),
        );
    }
    let mut names = Vec::new();
    for item in items {
        let name = ctx.string(item, "enforcer")?;
        if !known.contains(&name) {
            return ctx.err(
                item,
                format!("unknown enforcer `{name}`"),
                Some(format!("enforcers: {}", known.join(", "))),
            );
        }
        if names.iter().any(|n| n == name) {
            return ctx.err(
                item,
                format!("enforcer `{name}` is listed twice"),
                Some("list each enforcer once".into()),
            );
        }
        names.push(name.to_owned());
    }
    Ok(names)
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
fn traffic_entry(
    ctx: Ctx,
    fields: &Fields,
    policy: &Policy,
    tenant: TenantId,
    duration_ns: u64,
    index: usize,
) -> Res<Traffic> {
    let tenant_name = &policy.tenant(tenant).name;
    let app = match fields.get("app") {
        Some(app_node) => {
            let app_name = ctx.name(app_node, "app")?;
            match policy.app_by_name(tenant, &app_name) {
                Some(app) => app,
                None => {
                    let names: Vec<&str> = policy
                        .tenant(tenant)
                        .apps
                        .iter()
                        .map(|&a| policy.app(a).name.as_str())
                        .collect();
                    return ctx.err(
                        app_node,
                        format!("tenant `{tenant_name}` has no app `{app_name}`"),
                        Some(format!("apps of `{tenant_name}`: {}", names.join(", "))),
                    );
                }
            }
        }
        None => policy.catch_all_app(tenant),
    };

    let kind_node = ctx.require(fields, "kind", "traffic")?;
    let kind_name = ctx.string(kind_node, "kind")?;
    let own_keys: &[&str] = match kind_name {
        "bulk" => &["flows"],
        "udp" | "poisson" => &["rate", "size", "flows"],
        "rpc" => &["request", "response", "concurrency", "rate"],
        other => {
            return ctx.err(
                kind_node,
                format!("unknown traffic kind `{other}`"),
                Some("kinds: bulk, udp, poisson, rpc".into()),
            );
        }
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
    let kind = match kind_name {
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
    };

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
            "{tenant_name}-{}-{kind_name}-{}",
            policy.app(app).name,
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
