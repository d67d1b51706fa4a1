//! `nicsched explain`: the class tree of a policy and its ideal allocation for a
//! set of active tenants and apps, laid out for a terminal.

use crate::limits::EXPLAIN_FLOWS_MAX;
use crate::units::{format_rate, format_size};
use crate::{App, Policy, PolicyError, Proto, SplitBy, Tenant, TenantId, ideal_allocation};

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

fn tenant_details(policy: &Policy, tenant: &Tenant) -> String {
    let mut text = format!(
        "weight {:>3}  prio {}  {}  cores {}",
        tenant.weight,
        tenant.priority,
        limits(tenant.min_rate_bps, tenant.max_rate_bps),
        if tenant.cores.len() == usize::from(policy.host_cores) {
            "all".to_owned()
        } else {
            core_ranges(&tenant.cores)
        }
    );
    if let Some(buffer) = tenant.buffer_bytes {
        text += &format!("  buffer {}", format_size(buffer));
    }
    if let Some(src) = &tenant.match_src {
        text += &format!("  match src {}/{}", src.addr, src.prefix_len);
    }
    if let Some(port) = &tenant.match_port {
        text += &format!("  match port {port}");
    }
    text
}

fn app_details(app: &App) -> String {
    let mut text = format!(
        "weight {:>3}  prio {}  {}",
        app.weight,
        app.priority,
        limits(app.min_rate_bps, app.max_rate_bps)
    );
    if let Some(proto) = app.match_proto {
        text += match proto {
            Proto::Tcp => "  match tcp",
            Proto::Udp => "  match udp",
        };
    }
    if !app.match_ports.is_empty() {
        let ports: Vec<String> = app.match_ports.iter().map(u16::to_string).collect();
        text += &format!(" ports {}", ports.join(","));
    }
    if let Some(split) = app.split {
        let by = match split.by {
            SplitBy::Destination => "destination",
            SplitBy::Flow => "flow",
        };
        text += &format!(
            "  split by {by}, each <= {}",
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

/// The class tree of `policy`, then its ideal allocation for the given demands.
pub fn explain(policy: &Policy, app_flow_demands_bps: &[Vec<f64>]) -> String {
    let mut out = class_tree(policy);
    out += &allocation_text(policy, app_flow_demands_bps, "ideal allocation");
    out
}

/// The class tree of `policy`, then its ideal allocation in each phase of a
/// scenario: from each start time, for the demands of the traffic running then.
pub fn explain_phases(policy: &Policy, phases: &[(u64, Vec<Vec<f64>>)]) -> String {
    let mut out = class_tree(policy);
    for (from_ns, demands) in phases {
        out += &allocation_text(
            policy,
            demands,
            &format!("from {}: ideal allocation", crate::format_time(*from_ns)),
        );
    }
    out
}

/// Labels are padded to one width so that the details line up as columns.
fn label_width(policy: &Policy) -> usize {
    policy
        .tenants
        .iter()
        .map(|t| t.name.len() + 3)
        .chain(policy.apps.iter().map(|a| a.name.len() + 6))
        .max()
        .unwrap_or(0)
}

fn class_tree(policy: &Policy) -> String {
    let link = &policy.link;
    let mut out = format!(
        "link {}  queues {}  mtu {}  cores {}",
        format_rate(link.rate_bps as f64),
        link.queues,
        format_size(u64::from(link.mtu_bytes)),
        policy.host_cores
    );
    if let Some(buffer) = policy.buffer_bytes {
        out += &format!("  buffer {}", format_size(buffer));
    }
    out.push('\n');

    let label_width = label_width(policy);
    let last_tenant = policy.tenants.len().saturating_sub(1);
    for (t, tenant) in policy.tenants.iter().enumerate() {
        let (glyph, rail) = if t == last_tenant {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        let label = format!("{glyph}{}", tenant.name);
        out += &format!(
            "{label:<label_width$}  {}\n",
            tenant_details(policy, tenant)
        );
        let last_app = tenant.apps.len().saturating_sub(1);
        for (i, &app) in tenant.apps.iter().enumerate() {
            let app = policy.app(app);
            let app_glyph = if i == last_app { "└─ " } else { "├─ " };
            let label = format!("{rail}{app_glyph}{}", app.name);
            out += &format!("{label:<label_width$}  {}\n", app_details(app));
        }
    }
    out
}

fn allocation_text(policy: &Policy, app_flow_demands_bps: &[Vec<f64>], heading: &str) -> String {
    let link = &policy.link;
    let label_width = label_width(policy);
    let last_tenant = policy.tenants.len().saturating_sub(1);
    let mut out = String::new();
    let allocation = ideal_allocation(policy, app_flow_demands_bps);
    let link_bps = link.rate_bps as f64;
    let share = |bps: f64| 100.0 * bps / link_bps;
    let total: f64 = allocation.tenant_bps.iter().sum();
    out += &format!(
        "\n{heading}: {} of {} ({:.1}%)\n",
        format_rate(total),
        format_rate(link_bps),
        share(total)
    );
    let demands_of = |i: usize| app_flow_demands_bps.get(i).map_or(&[][..], |d| &d[..]);
    for (t, tenant) in policy.tenants.iter().enumerate() {
        let (glyph, rail) = if t == last_tenant {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        let flows: usize = tenant
            .apps
            .iter()
            .map(|a| demands_of(a.index()).len())
            .sum();
        let label = format!("{glyph}{}", tenant.name);
        out += &format!(
            "{label:<label_width$}  {:>10}  {:>5.1}%  {}\n",
            format_rate(allocation.tenant_bps[t]),
            share(allocation.tenant_bps[t]),
            flows_label(flows)
        );
        let last_app = tenant.apps.len().saturating_sub(1);
        for (i, &app) in tenant.apps.iter().enumerate() {
            let app_glyph = if i == last_app { "└─ " } else { "├─ " };
            let label = format!("{rail}{app_glyph}{}", policy.app(app).name);
            let bps = allocation.app_bps[app.index()];
            out += &format!(
                "{label:<label_width$}  {:>10}  {:>5.1}%  {}\n",
                format_rate(bps),
                share(bps),
                flows_label(demands_of(app.index()).len())
            );
        }
    }
    out
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
        let text = explain(&p, &parse_active(&p, "web/batch*10,db").unwrap());
        assert!(
            text.starts_with("link 10Gbit  queues 16  mtu 1500B  cores 3"),
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
