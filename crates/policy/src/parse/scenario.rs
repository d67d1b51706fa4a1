//! A scenario of one host: its policy (a file or inline, the link overridden), the
//! keys about the run as a whole, and its traffic; the run's keys are shared with
//! scenarios across hosts (`hosts.rs`).

use super::ctx::{Ctx, Fields, NAME_BYTES_MAX, Res};
use super::hosts;
use super::policy::{Draft, LINK_KEYS, link_fields, policy_draft};
use super::traffic::{TRAFFIC_KEYS, TrafficTally, traffic_entry, traffic_items};
use super::yaml::{Node, Sp, describe};
use crate::limits::{DURATION_NS_MAX, INTERVALS_MAX};
use crate::units;
use crate::{AnyScenario, PolicyError, Scenario, Traffic};
use std::path::Path;

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
const INTERVAL_NS_DEFAULT: u64 = 500_000_000;

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
    let run = run_header(ctx, &top, known_enforcers)?;

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
pub(super) fn scenario_name(ctx: Ctx, top: &Fields) -> Res<String> {
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
pub(super) fn with_policy<T>(
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
pub(super) struct RunHeader<'n> {
    pub(super) duration_ns: u64,
    pub(super) interval_ns: u64,
    pub(super) intervals: u64,
    pub(super) seed: u64,
    pub(super) enforcers: Vec<String>,
    pub(super) duration_at: &'n Sp,
    /// The node to blame for too many intervals: `interval`, else `duration`.
    pub(super) intervals_at: &'n Sp,
}

pub(super) fn run_header<'n>(
    ctx: Ctx,
    top: &Fields<'n>,
    known_enforcers: &[&str],
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
        Some(node) => listed_enforcers(ctx, node, known_enforcers)?,
        // The defaults are the registry's, which this crate sits below: the run layer
        // asks it for the world the scenario runs in.
        None => Vec::new(),
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

fn listed_enforcers(ctx: Ctx, node: &Sp, known: &[&str]) -> Res<Vec<String>> {
    let items = ctx.seq(node, "enforcers")?;
    if items.is_empty() {
        return ctx.err(
            node,
            "enforcers must not be empty",
            Some("leave `enforcers` out to run the default (docs/scenario.md, `enforcers`)".into()),
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
