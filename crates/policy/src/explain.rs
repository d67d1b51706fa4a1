//! `nicsched explain`: the class tree of a policy and its ideal allocation for a
//! set of active tenants and apps, laid out for a terminal.

use crate::limits::EXPLAIN_FLOWS_MAX;
use crate::units::{format_rate, format_size};
use crate::{App, AppId, Policy, PolicyError, Proto, SplitBy, TenantId, ideal_allocation};
use serde::Serialize;

/// Reads `t1,t2/kvs,t3/batch*4` into per-app flow demands: a tenant alone makes each
/// of its apps backlogged with one flow, `/app` names one app, `*N` gives N
/// backlogged flows. Naming an app twice adds up its flows. Errors are located in
/// the list as if it were a one-line file called `--active`.
pub fn parse_active(policy: &Policy, list: &str) -> Result<Vec<Vec<f64>>, PolicyError> {
    let mut demands = vec![Vec::new(); policy.apps.len()];
    let mut total_flows = 0;
    let mut offset = 0;
    for raw in list.split(',') {
        let at = offset + raw.len() - raw.trim_start().len();
        offset += raw.len() + 1;
        let item = raw.trim();
        if item.is_empty() {
            continue;
        }
        let error = |message: String, hint: Option<String>| PolicyError {
            file: "--active".to_owned(),
            line: 1,
            column: u32::try_from(at + 1).unwrap_or(u32::MAX),
            message,
            hint,
        };
        let (path, flows) = match item.split_once('*') {
            Some((path, count)) => match count.trim().parse::<usize>() {
                Ok(n) if (1..=EXPLAIN_FLOWS_MAX).contains(&n) => (path.trim(), n),
                _ => {
                    return Err(error(
                        format!(
                            "`{item}`: the flow count after `*` must be a whole number in 1..={EXPLAIN_FLOWS_MAX}"
                        ),
                        Some("EXPLAIN_FLOWS_MAX bounds the flows of the whole list".into()),
                    ));
                }
            },
            None => (item, 1),
        };
        let (tenant_name, app_name) = match path.split_once('/') {
            Some((tenant, app)) => (tenant.trim(), Some(app.trim())),
            None => (path, None),
        };
        let Some(tenant) = policy.tenant_by_name(tenant_name) else {
            let names: Vec<&str> = policy.tenants.iter().map(|t| t.name.as_str()).collect();
            return Err(error(
                format!("unknown tenant `{tenant_name}` in `{item}`"),
                Some(format!("tenants: {}", names.join(", "))),
            ));
        };
        let apps = match app_name {
            Some(app_name) => match policy.app_by_name(tenant, app_name) {
                Some(app) => vec![app],
                None => {
                    return Err(error(
                        format!("tenant `{tenant_name}` has no app `{app_name}`"),
                        Some(format!("apps: {}", app_names(policy, tenant).join(", "))),
                    ));
                }
            },
            None => policy.tenant(tenant).apps.clone(),
        };
        total_flows += flows * apps.len();
        if total_flows > EXPLAIN_FLOWS_MAX {
            return Err(error(
                format!(
                    "the list up to `{item}` makes {total_flows} flows backlogged, above the bound"
                ),
                Some(format!(
                    "at most {EXPLAIN_FLOWS_MAX} flows over the whole list (EXPLAIN_FLOWS_MAX)"
                )),
            ));
        }
        for app in apps {
            demands[app.index()].extend(std::iter::repeat_n(f64::INFINITY, flows));
        }
    }
    Ok(demands)
}

fn app_names(policy: &Policy, tenant: TenantId) -> Vec<&str> {
    policy
        .tenant(tenant)
        .apps
        .iter()
        .map(|&a| policy.app(a).name.as_str())
        .collect()
}

fn limits(min_rate_bps: Option<u64>, max_rate_bps: Option<u64>) -> String {
    let min = min_rate_bps.map_or("-".to_owned(), |r| format_rate(r as f64));
    let max = max_rate_bps.map_or("-".to_owned(), |r| format_rate(r as f64));
    format!("min {min:>8}  max {max:>8}")
}

/// `0-3,8,10-11`: consecutive cores folded into ranges.
fn core_ranges(cores: &[u16]) -> String {
    let mut sorted = cores.to_vec();
    sorted.sort_unstable();
    let mut ranges: Vec<(u16, u16)> = Vec::new();
    for core in sorted {
        match ranges.last_mut() {
            Some((_, last)) if *last + 1 == core => *last = core,
            _ => ranges.push((core, core)),
        }
    }
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// What `nicsched explain` says about a policy: its class tree, then the ideal
/// allocation of each phase. The terminal text is its `Display`, `--json` its
/// serialisation, so the two never disagree.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Explanation {
    pub link: LinkClass,
    pub tenants: Vec<TenantClass>,
    pub phases: Vec<PhaseIdeal>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkClass {
    pub rate_bps: u64,
    pub queues: u16,
    pub mtu_bytes: u32,
    pub host_cores: u16,
    /// `engine.cores`: the cores that process tenants' packets, not the host's.
    pub engine_cores: u16,
    pub buffer_bytes: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantClass {
    pub name: String,
    pub weight: u32,
    pub priority: u8,
    pub min_rate_bps: Option<u64>,
    pub max_rate_bps: Option<u64>,
    pub cores: Vec<u16>,
    pub buffer_bytes: Option<u64>,
    /// `ADDRESS/PREFIX`.
    pub match_src: Option<String>,
    pub match_port: Option<String>,
    pub apps: Vec<AppClass>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppClass {
    pub name: String,
    pub weight: u32,
    pub priority: u8,
    pub min_rate_bps: Option<u64>,
    pub max_rate_bps: Option<u64>,
    /// `tcp` or `udp`.
    pub match_proto: Option<&'static str>,
    pub match_ports: Vec<u16>,
    pub split: Option<SplitClass>,
    /// Made by the parser to catch what no app of the tenant matches.
    pub implicit: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SplitClass {
    /// `destination` or `flow`.
    pub by: &'static str,
    pub max_rate_bps: u64,
}

/// The ideal allocation for one set of demands.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseIdeal {
    /// When the phase starts in the scenario; `None` for demands named with `--active`.
    pub from_s: Option<f64>,
    pub total_bps: f64,
    pub tenants: Vec<TenantIdeal>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantIdeal {
    pub name: String,
    pub ideal_bps: f64,
    /// Backlogged flows of its apps together.
    pub flows: usize,
    pub apps: Vec<AppIdeal>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppIdeal {
    pub name: String,
    pub ideal_bps: f64,
    pub flows: usize,
}

/// The class tree of `policy`, then its ideal allocation for the given demands.
pub fn explain(policy: &Policy, app_flow_demands_bps: &[Vec<f64>]) -> Explanation {
    Explanation {
        link: link_class(policy),
        tenants: tenant_classes(policy),
        phases: vec![phase_ideal(policy, None, app_flow_demands_bps)],
    }
}

/// The class tree of `policy`, then its ideal allocation in each phase of a
/// scenario: from each start time, for the demands of the traffic running then.
pub fn explain_phases(policy: &Policy, phases: &[(u64, Vec<Vec<f64>>)]) -> Explanation {
    Explanation {
        link: link_class(policy),
        tenants: tenant_classes(policy),
        phases: phases
            .iter()
            .map(|(from_ns, demands)| phase_ideal(policy, Some(*from_ns), demands))
            .collect(),
    }
}

fn link_class(policy: &Policy) -> LinkClass {
    LinkClass {
        rate_bps: policy.link.rate_bps,
        queues: policy.link.queues,
        mtu_bytes: policy.link.mtu_bytes,
        host_cores: policy.host_cores,
        engine_cores: policy.engine.cores,
        buffer_bytes: policy.buffer_bytes,
    }
}

fn tenant_classes(policy: &Policy) -> Vec<TenantClass> {
    policy
        .tenants
        .iter()
        .map(|tenant| TenantClass {
            name: tenant.name.clone(),
            weight: tenant.weight,
            priority: tenant.priority,
            min_rate_bps: tenant.min_rate_bps,
            max_rate_bps: tenant.max_rate_bps,
            cores: tenant.cores.clone(),
            buffer_bytes: tenant.buffer_bytes,
            match_src: tenant
                .match_src
                .map(|src| format!("{}/{}", src.addr, src.prefix_len)),
            match_port: tenant.match_port.clone(),
            apps: tenant
                .apps
                .iter()
                .map(|&a| app_class(policy.app(a)))
                .collect(),
        })
        .collect()
}

fn app_class(app: &App) -> AppClass {
    AppClass {
        name: app.name.clone(),
        weight: app.weight,
        priority: app.priority,
        min_rate_bps: app.min_rate_bps,
        max_rate_bps: app.max_rate_bps,
        match_proto: app.match_proto.map(|proto| match proto {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }),
        match_ports: app.match_ports.clone(),
        split: app.split.map(|split| SplitClass {
            by: match split.by {
                SplitBy::Destination => "destination",
                SplitBy::Flow => "flow",
            },
            max_rate_bps: split.max_rate_bps,
        }),
        implicit: app.implicit,
    }
}

fn phase_ideal(
    policy: &Policy,
    from_ns: Option<u64>,
    app_flow_demands_bps: &[Vec<f64>],
) -> PhaseIdeal {
    let allocation = ideal_allocation(policy, app_flow_demands_bps);
    let flows_of = |app: AppId| app_flow_demands_bps.get(app.index()).map_or(0, Vec::len);
    PhaseIdeal {
        from_s: from_ns.map(|ns| ns as f64 / 1e9),
        total_bps: allocation.tenant_bps.iter().sum(),
        tenants: policy
            .tenants
            .iter()
            .enumerate()
            .map(|(t, tenant)| TenantIdeal {
                name: tenant.name.clone(),
                ideal_bps: allocation.tenant_bps[t],
                flows: tenant.apps.iter().map(|&a| flows_of(a)).sum(),
                apps: tenant
                    .apps
                    .iter()
                    .map(|&a| AppIdeal {
                        name: policy.app(a).name.clone(),
                        ideal_bps: allocation.app_bps[a.index()],
                        flows: flows_of(a),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn tenant_details(link: &LinkClass, tenant: &TenantClass) -> String {
    let mut text = format!(
        "weight {:>3}  prio {}  {}  cores {}",
        tenant.weight,
        tenant.priority,
        limits(tenant.min_rate_bps, tenant.max_rate_bps),
        if tenant.cores.len() == usize::from(link.host_cores) {
            "all".to_owned()
        } else {
            core_ranges(&tenant.cores)
        }
    );
    if let Some(buffer) = tenant.buffer_bytes {
        text += &format!("  buffer {}", format_size(buffer));
    }
    if let Some(src) = &tenant.match_src {
        text += &format!("  match src {src}");
    }
    if let Some(port) = &tenant.match_port {
        text += &format!("  match port {port}");
    }
    text
}

fn app_details(app: &AppClass) -> String {
    let mut text = format!(
        "weight {:>3}  prio {}  {}",
        app.weight,
        app.priority,
        limits(app.min_rate_bps, app.max_rate_bps)
    );
    if let Some(proto) = app.match_proto {
        text += &format!("  match {proto}");
    }
    if !app.match_ports.is_empty() {
        let ports: Vec<String> = app.match_ports.iter().map(u16::to_string).collect();
        text += &format!(" ports {}", ports.join(","));
    }
    if let Some(split) = app.split {
        text += &format!(
            "  split by {}, each <= {}",
            split.by,
            format_rate(split.max_rate_bps as f64)
        );
    }
    if app.implicit {
        text += "  (implicit)";
    }
    text
}

fn flows_label(flows: usize) -> String {
    match flows {
        0 => "idle".to_owned(),
        1 => "1 flow".to_owned(),
        n => format!("{n} flows"),
    }
}

/// Tree glyphs: the branch to item `i` of `count`, and the rail beneath it.
fn branch(i: usize, count: usize) -> (&'static str, &'static str) {
    if i + 1 == count {
        ("└─ ", "   ")
    } else {
        ("├─ ", "│  ")
    }
}

impl Explanation {
    /// Labels are padded to one width so that the details line up as columns.
    fn label_width(&self) -> usize {
        self.tenants
            .iter()
            .map(|t| t.name.len() + 3)
            .chain(
                self.tenants
                    .iter()
                    .flat_map(|t| &t.apps)
                    .map(|a| a.name.len() + 6),
            )
            .max()
            .unwrap_or(0)
    }

    fn class_tree(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let link = &self.link;
        write!(
            out,
            "link {}  queues {}  mtu {}  host cores {}  engine cores {}",
            format_rate(link.rate_bps as f64),
            link.queues,
            format_size(u64::from(link.mtu_bytes)),
            link.host_cores,
            link.engine_cores
        )?;
        if let Some(buffer) = link.buffer_bytes {
            write!(out, "  buffer {}", format_size(buffer))?;
        }
        writeln!(out)?;
        let label_width = self.label_width();
        for (t, tenant) in self.tenants.iter().enumerate() {
            let (glyph, rail) = branch(t, self.tenants.len());
            let label = format!("{glyph}{}", tenant.name);
            writeln!(
                out,
                "{label:<label_width$}  {}",
                tenant_details(link, tenant)
            )?;
            for (i, app) in tenant.apps.iter().enumerate() {
                let (app_glyph, _) = branch(i, tenant.apps.len());
                let label = format!("{rail}{app_glyph}{}", app.name);
                writeln!(out, "{label:<label_width$}  {}", app_details(app))?;
            }
        }
        Ok(())
    }

    fn allocation(
        &self,
        phase: &PhaseIdeal,
        out: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        let label_width = self.label_width();
        let link_bps = self.link.rate_bps as f64;
        let share = |bps: f64| 100.0 * bps / link_bps;
        let heading = match phase.from_s {
            Some(from_s) => format!(
                "from {}: ideal allocation",
                crate::format_time((from_s * 1e9).round() as u64)
            ),
            None => "ideal allocation".to_owned(),
        };
        writeln!(
            out,
            "\n{heading}: {} of {} ({:.1}%)",
            format_rate(phase.total_bps),
            format_rate(link_bps),
            share(phase.total_bps)
        )?;
        for (t, tenant) in phase.tenants.iter().enumerate() {
            let (glyph, rail) = branch(t, phase.tenants.len());
            let label = format!("{glyph}{}", tenant.name);
            writeln!(
                out,
                "{label:<label_width$}  {:>10}  {:>5.1}%  {}",
                format_rate(tenant.ideal_bps),
                share(tenant.ideal_bps),
                flows_label(tenant.flows)
            )?;
            for (i, app) in tenant.apps.iter().enumerate() {
                let (app_glyph, _) = branch(i, tenant.apps.len());
                let label = format!("{rail}{app_glyph}{}", app.name);
                writeln!(
                    out,
                    "{label:<label_width$}  {:>10}  {:>5.1}%  {}",
                    format_rate(app.ideal_bps),
                    share(app.ideal_bps),
                    flows_label(app.flows)
                )?;
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Explanation {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.class_tree(out)?;
        for phase in &self.phases {
            self.allocation(phase, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_policy;

    const POLICY: &str = "link: {rate: 10Gbit}
tenants:
  - name: web
    weight: 3
    cores: [0, 1, 2]
    match: {src: 10.0.1.0/24}
    apps:
      - {name: kvs, priority: 0, match: {proto: tcp, ports: [11211]}}
      - name: batch
        match: {proto: tcp}
        max_rate: 4Gbit
        split: {by: destination, max_rate: 50Mbit}
  - name: db
";

    #[test]
    fn active_lists() {
        let p = parse_policy(POLICY, "p.yaml").unwrap();
        let d = parse_active(&p, "web/kvs, db, web/batch*3").unwrap();
        assert_eq!(d.len(), p.apps.len());
        assert_eq!(d[0].len(), 1);
        assert_eq!(d[1].len(), 3);
        assert!(d[2].is_empty());
        assert_eq!(d[3], vec![f64::INFINITY]);
        let e = parse_active(&p, "nope").unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("web, db"), "{e}");
        let e = parse_active(&p, "web, web/nope").unwrap_err();
        assert_eq!((e.file.as_str(), e.line, e.column), ("--active", 1, 6));
        assert!(e.to_string().contains("kvs, batch, default"), "{e}");
        // Each item within the bound, the list past it: refused before allocating.
        let e = parse_active(&p, "web/batch*600000,web/batch*600000").unwrap_err();
        assert_eq!(e.column, 18, "{e}");
        assert!(e.to_string().contains("EXPLAIN_FLOWS_MAX"), "{e}");
        assert!(parse_active(&p, "web/batch*1000001").is_err());
        assert_eq!(
            parse_active(&p, "web/batch*1000000").unwrap()[1].len(),
            1_000_000
        );
        assert!(parse_active(&p, "web*0").is_err());
        assert!(parse_active(&p, "web*x").is_err());
    }

    #[test]
    fn explains_tree_and_allocation() {
        let p = parse_policy(POLICY, "p.yaml").unwrap();
        let text = explain(&p, &parse_active(&p, "web/batch*10,db").unwrap()).to_string();
        assert!(
            text.starts_with("link 10Gbit  queues 16  mtu 1500B  host cores 3  engine cores 1"),
            "{text}"
        );
        assert!(text.contains("├─ web"), "{text}");
        assert!(text.contains("│  ├─ kvs"), "{text}");
        assert!(
            text.contains("split by destination, each <= 50Mbit"),
            "{text}"
        );
        assert!(text.contains("match src 10.0.1.0/24"), "{text}");
        assert!(text.contains("500Mbit"), "{text}");
        assert!(text.contains("9.5Gbit"), "{text}");
        assert!(text.contains("95.0%"), "{text}");
    }
}
