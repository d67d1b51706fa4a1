//! `linux-htb`: the policy compiled to the kernel's HTB, for the lab to run the same
//! scenario with no nicsched code in the path.
//!
//! - `1:` the HTB qdisc; `1:1` the link (rate = ceil = link rate);
//! - from `1:2`, one class per tenant in the policy's order: rate = its share of the
//!   ideal allocation with every app of every tenant backlogged (guarantees
//!   included, so weights become rates); ceil = `max_rate`, else the link; `prio` =
//!   its priority (HTB lends spare bandwidth to lower `prio` first); quantum =
//!   weight x (MTU + 14 B), which the kernel keeps but never reads (below);
//! - right after the tenants' classes, one leaf per app in the policy's order, under
//!   its tenant, the same way one level down, each with a `pfifo` of 1000 packets
//!   whose handle is the leaf's minor (`1:9` queues in `9:`). HTB lends by the
//!   quantum of leaves alone: a parent's children take turns, and a child's turn is
//!   one quantum of the leaf it reaches, so a tenant of two apps of quantum q would
//!   take 2q a round against one app's q. A leaf's quantum is therefore its part of
//!   the whole tree's weight, tenant weight x app weight / the tenant's apps'
//!   weights ([`leaf_quanta`]), scaled so the smallest is one frame;
//! - `1:fffe` the qdisc's `default`: what no filter matches (ARP, other hosts'
//!   traffic) shares the link at the lowest `prio` instead of leaving unshaped by
//!   HTB's direct queue;
//! - u32 filters, per tenant in its first-match order: its source prefix and, per
//!   app, its protocol and each of its ports as `sport` and as `dport` (a port
//!   matches either way); then the prefix alone, to the tenant's `default` app. An
//!   IPv4 prefix gets `protocol ip` filters (`match ip`), an IPv6 one `protocol
//!   ipv6` filters (`match ip6`). Protocol and port matches assume IPv4 headers
//!   without options and IPv6 headers without extension headers.
//!
//! A tenant's n-th filter has `prio` n (an IPv6 tenant's, n after the IPv4 ones, as
//! a prio holds one protocol) and the u32 handle `::T`, T its tenant's number from 1.
//! Tenants' prefixes are disjoint (policy validation), so filters of different
//! tenants never take the same packet and may share a prio: the kernel keeps one
//! u32 hash table per prio, and at most 2047 on a qdisc.
//!
//! [`htb_limits`] refuses a policy whose numbers would not fit: tenants and apps
//! together above 65532 (class minors are 16 bits, `1:1` and `1:fffe` are taken and
//! `ffff:` is the handle of the ingress qdisc a device may have), more than 4095
//! tenants (u32 numbers a prio's filters with 12 bits) or more than 2047 prios.
//!
//! Rates are at least 8 kbit/s: HTB needs a rate for every class, and a class the
//! ideal gives nothing (a lower priority level) borrows everything it sends. They are
//! written in `tc`'s own units (`540mbit`, `333.333333mbit`), exact to the bit.
//!
//! [`tc_script`] is for a real host: it refuses a tenant it cannot classify (u32
//! filters see addresses, not the interface a tenant's `match.port` names) and an
//! interface name `tc` would not take, and starts by deleting the device's root qdisc,
//! so applying it twice, or after another policy's, leaves exactly this tree (HTB
//! cannot `replace` itself: the kernel refuses to change an HTB qdisc in place). The
//! tree is added by one `tc -batch` reading the rest of the script, which stops at
//! the first command the kernel refuses.
//! HTB counts Ethernet frames (L2, 14 B more per frame than the L3 bytes nicsched's
//! link counts) and each GSO send's per-segment headers: in the lab it runs 3-4%
//! below the L3 rates it is given (3.0-3.3% with every tenant backlogged at 300
//! Mbit/s).

use policy::{Cidr, Policy, TenantId, ideal_allocation};

const RATE_FLOOR_BPS: f64 = 8_000.0;
const LEAF_PACKETS: u32 = 1000;
const LINK_MINOR: u32 = 1;
/// The minor of the class of what no filter matches, the qdisc's `default`.
const UNCLASSIFIED_MINOR: u32 = 0xfffe;
/// Tenants' and apps' classes lie between [`LINK_MINOR`] and [`UNCLASSIFIED_MINOR`].
const CLASSES_MAX: usize = (UNCLASSIFIED_MINOR - LINK_MINOR - 1) as usize;
/// A u32 filter's node number in its prio's hash table, 12 bits and 0 for "pick
/// one": each tenant's number.
const U32_NODES_MAX: usize = 0xfff;
/// The kernel numbers the hash tables of a qdisc's u32 filters `800:` to `ffe:`,
/// one per prio (measured: the 2048th prio fails with "Filter already exists").
const U32_PRIOS_MAX: usize = 0x7ff;
/// `IFNAMSIZ` less its NUL.
const DEVICE_NAME_BYTES_MAX: usize = 15;

/// The minor of tenant `t`'s class (`1:` it): where a real host reads its counters.
pub fn tenant_minor(t: usize) -> u32 {
    LINK_MINOR + 1 + t as u32
}

/// The minor of app `a`'s leaf class, whose `pfifo` holds its backlog and drops.
pub fn app_minor(policy: &Policy, a: usize) -> u32 {
    tenant_minor(policy.tenants.len()) + a as u32
}

/// A rate in `tc`'s units (SI, in bits), at least [`RATE_FLOOR_BPS`], rounded to
/// the bit and written exactly: `8kbit`, `540mbit`, `333.333333mbit`.
fn rate(bps: f64) -> String {
    let bits = bps.max(RATE_FLOOR_BPS).round() as u64;
    let (factor, unit) = [
        (1_000_000_000u64, "gbit"),
        (1_000_000, "mbit"),
        (1_000, "kbit"),
    ]
    .into_iter()
    .find(|&(factor, _)| bits >= factor)
    .unwrap_or((1, "bit"));
    let (whole, fraction) = (bits / factor, bits % factor);
    if fraction == 0 {
        return format!("{whole}{unit}");
    }
    let digits = factor.ilog10() as usize;
    let fraction = format!("{fraction:0digits$}");
    format!("{whole}.{}{unit}", fraction.trim_end_matches('0'))
}

/// Why [`tc_script`] refuses a policy or a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcScriptError {
    /// Not a name the kernel gives an interface, or one a shell would split.
    Device(String),
    /// A tenant without `match.src`: no filter could send its traffic to its class.
    Unmatched { tenant: String, has_port: bool },
    /// A number the script would write past what HTB or u32 can hold.
    TooLarge(String),
}

impl std::fmt::Display for TcScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TcScriptError::Device(dev) => write!(
                f,
                "--dev {dev:?}: not an interface name (1 to {DEVICE_NAME_BYTES_MAX} of A-Z a-z 0-9 _ . : @ -)"
            ),
            TcScriptError::Unmatched { tenant, has_port } => write!(
                f,
                "tenant `{tenant}` has no `match.src`{}, so no u32 filter can put its traffic in its class and the script would shape nothing of it (hint: add `match: {{ src: CIDR }}` to tenant {tenant}, the addresses its traffic leaves from)",
                if *has_port {
                    " (its `match.port` names an interface, which filters on the egress device do not see)"
                } else {
                    ""
                }
            ),
            TcScriptError::TooLarge(what) => write!(f, "too large for Linux HTB: {what}"),
        }
    }
}

impl std::error::Error for TcScriptError {}

/// Whether `dev` is a name an interface can have that needs no quoting in a shell.
fn is_device_name(dev: &str) -> bool {
    (1..=DEVICE_NAME_BYTES_MAX).contains(&dev.len())
        && dev != "."
        && dev != ".."
        && dev
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:@-".contains(&b))
}

/// One u32 filter of a tenant, its source prefix aside.
struct Rule {
    /// The IP protocol number.
    proto: Option<u8>,
    /// `sport` or `dport`, and the port.
    port: Option<(&'static str, u16)>,
    app: usize,
}

/// Tenant `t`'s filters in its first-match order: per app, its protocol with each
/// port both ways, or its protocol alone; the tenant's catch-all last.
fn rules(policy: &Policy, t: usize) -> Vec<Rule> {
    let tenant = &policy.tenants[t];
    let mut rules = Vec::new();
    for &a in &tenant.apps {
        let app = policy.app(a);
        let proto = app.match_proto.map(crate::classify::ip_proto);
        // Without ports or protocol, the app is the catch-all, the last rule.
        if app.match_ports.is_empty() && proto.is_some() {
            rules.push(Rule {
                proto,
                port: None,
                app: a.index(),
            });
        }
        for &port in &app.match_ports {
            for side in ["sport", "dport"] {
                rules.push(Rule {
                    proto,
                    port: Some((side, port)),
                    app: a.index(),
                });
            }
        }
    }
    rules.push(Rule {
        proto: None,
        port: None,
        app: policy.catch_all_app(TenantId(t as u16)).index(),
    });
    rules
}

/// The prios the filters of the IPv4 and of the IPv6 tenants take (`v6[t]`: whether
/// tenant `t`'s prefix is IPv6), or why some number of the script would not fit.
fn prios(policy: &Policy, v6: &[bool]) -> Result<[usize; 2], TcScriptError> {
    let (tenants, apps) = (policy.tenants.len(), policy.apps.len());
    if tenants + apps > CLASSES_MAX {
        return Err(TcScriptError::TooLarge(format!(
            "{tenants} tenants and {apps} apps need {} HTB classes, and its 16-bit class numbers leave room for {CLASSES_MAX}",
            tenants + apps
        )));
    }
    if tenants > U32_NODES_MAX {
        return Err(TcScriptError::TooLarge(format!(
            "{tenants} tenants, and u32 numbers a prio's filters, one per tenant, with 12 bits: room for {U32_NODES_MAX}"
        )));
    }
    // Per family, the most filters a tenant has, and that tenant.
    let mut widest = [(0, 0); 2];
    for (t, &v6) in v6.iter().enumerate() {
        let filters = rules(policy, t).len();
        let family = &mut widest[usize::from(v6)];
        if filters > family.0 {
            *family = (filters, t);
        }
    }
    let prios = widest[0].0 + widest[1].0;
    if prios > U32_PRIOS_MAX {
        let most = widest
            .iter()
            .zip(["IPv4", "IPv6"])
            .filter(|((filters, _), _)| *filters > 0)
            .map(|(&(filters, t), family)| {
                format!("`{}` has {filters} ({family})", policy.tenants[t].name)
            })
            .collect::<Vec<_>>()
            .join(", ");
        return Err(TcScriptError::TooLarge(format!(
            "{prios} u32 prios, and the kernel keeps at most {U32_PRIOS_MAX} on a qdisc: a tenant's filters take a prio each (two per port of its apps, one per app matching a protocol alone, one for the rest), the tenants of an IP version sharing them, and {most} (hint: list fewer ports)"
        )));
    }
    Ok([widest[0].0, widest[1].0])
}

/// Whether every number [`tc_script`] and the lab's `linux-htb` would write for
/// `policy` fits: HTB's class numbers and u32's filter numbers and prios (module
/// docs). Where the policy names no prefix for a tenant the lab gives it an IPv4
/// one, as counted here.
pub fn htb_limits(policy: &Policy) -> Result<(), TcScriptError> {
    let v6: Vec<bool> = policy
        .tenants
        .iter()
        .map(|t| t.match_src.is_some_and(|c| c.addr.is_ipv6()))
        .collect();
    prios(policy, &v6).map(|_| ())
}

/// The policy as a script for `sh -e` on device `dev` of a real host
/// ([`sh_script`]): the device's root qdisc deleted, then the tree of the module docs
/// added. Tenants are matched by their `match.src`; a policy with a tenant without one is
/// refused, as are one past [`htb_limits`] and a `dev` that is not an interface name.
pub fn tc_script(policy: &Policy, dev: &str) -> Result<String, TcScriptError> {
    Ok(sh_script(dev, &tc_commands(policy, dev)?))
}

/// The tree of [`tc_script`] alone, as the commands of one `tc -batch` for a
/// device with no root qdisc of nicsched's (`nicsched apply`), refused as
/// [`tc_script`] refuses.
pub fn tc_commands(policy: &Policy, dev: &str) -> Result<String, TcScriptError> {
    if !is_device_name(dev) {
        return Err(TcScriptError::Device(dev.to_string()));
    }
    // Before the prefixes, so that `nicsched check -e linux-htb`, which checks only
    // the limits, refuses a policy too large for both with the same words.
    htb_limits(policy)?;
    let prefixes = policy
        .tenants
        .iter()
        .map(|t| {
            t.match_src.ok_or_else(|| TcScriptError::Unmatched {
                tenant: t.name.clone(),
                has_port: t.match_port.is_some(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    tc_batch(policy, dev, &prefixes)
}

/// `batch`, the commands of [`tc_batch`] on `dev`, as a script for `sh -e`: the
/// device's root qdisc deleted, then one `tc -batch` for the whole tree, which stops
/// at its first failing command and fails, so the script stops there too. One `tc`
/// process per command took 49 s for 3000 tenants where the batch takes 3.
pub(crate) fn sh_script(dev: &str, batch: &str) -> String {
    let (header, commands) = batch.split_once('\n').expect("the batch has a header");
    // No root qdisc of its own (a fresh device) is fine: hence `|| true`. No line
    // of the batch is `EOF`: each is a comment or starts with `qdisc`, `class` or
    // `filter`.
    format!(
        "{header}\ntc qdisc del dev {dev} root 2>/dev/null || true\ntc -batch - <<'EOF'\n{commands}EOF\n"
    )
}

/// What the kernel's HTB, given [`tc_batch`]'s tree, holds of `policy`
/// (`nicsched check -e linux-htb`).
pub fn approximation(policy: &Policy) -> sched::Approximation {
    let mut approximate = vec![
        "weights: every class is assured its ideal with everything backlogged (its HTB rate), and what an idle class leaves is lent round-robin by leaves' quanta, each leaf's its part of the tree's weight; a tenant with some of its apps idle borrows by its backlogged apps' part only".to_string(),
        "rates counted in Ethernet frames and GSO sends' per-segment headers (14 B and more per frame than nicsched's L3 bytes): in the lab every class runs 3-4% below its rate (3.0-3.3% measured with every tenant backlogged at 300 Mbit/s)".to_string(),
        "bursts: tc's default burst, rate / HZ + MTU, of each class".to_string(),
    ];
    let withheld = sched::htb::share_bound_withheld(policy);
    approximate.extend(withheld.iter().map(|&reason| match reason {
        sched::htb::Withheld::HeavyTenant => HEAVY_TENANT.to_string(),
        reason => reason.words().to_string(),
    }));
    approximate.extend(policy.tenants.iter().filter(|t| t.match_src.is_none()).map(|t| {
        format!(
            "{}: no match.src, so u32 filters cannot single its traffic out on a real host (the lab gives it an address of its own)",
            t.name
        )
    }));
    let mut ignored = Vec::new();
    if policy.buffer_bytes.is_some() || policy.tenants.iter().any(|t| t.buffer_bytes.is_some()) {
        ignored.push(format!(
            "buffer caps: each leaf queues in a pfifo of {LEAF_PACKETS} packets"
        ));
    }
    ignored.extend(policy.apps.iter().filter(|a| a.split.is_some()).map(|a| {
        format!(
            "{}/{}: split (per-destination limits): its leaf is one class",
            policy.tenant(a.tenant).name,
            a.name
        )
    }));
    sched::Approximation {
        exact: vec![
            "max_rate of tenants and apps (HTB ceil)".to_string(),
            "priorities: HTB lends to the lowest prio first, and the assured rates follow the ideal's priority by subtraction".to_string(),
            "guarantees with everything backlogged (HTB rate at least min_rate)".to_string(),
        ],
        approximate,
        ignored,
        // All backlogged every class sends at its assured rate, the ideal, counted
        // with Ethernet headers: 14 B in a 1514 B frame, and HTB's clock.
        // 2% of HTB's own error (the engine's `htb`, same semantics) plus the 3-4%
        // its L2 counting leaves every class below its L3 rate.
        share_error_max: withheld.is_empty().then_some(SHARE_ERROR_MAX),
    }
}

/// What `check -e linux-htb` says where one tenant of four or more is above half
/// the link ([`sched::htb::Withheld::HeavyTenant`]). Measured in the lab with
/// `nicsched lab FILE -e linux-htb --json`, 10 s, every tenant one bulk flow
/// (iperf3): the kernel loses less than `htb` does, its TCP sends not falling
/// into step as the simulator's do, but it loses, and so close to the bound that
/// the bound is not stated.
const HEAVY_TENANT: &str = "tenants' shares with every tenant backlogged where, among four tenants or more, one's share is more than half the link: no bound, as it can fall behind its rate while it waits behind its neighbours' sends and lose what tc's burst cannot hold (in the lab at 1 Gbit/s, weight 17 beside seven of weight 1: 677.1 of 708.3 Mbit/s, 4.4% under where its neighbours were 3.3% under, as every class is for HTB's Ethernet bytes; `htb` in the simulator, whose sends fall into step, 3.6% under and its neighbours 8.7% over)";

/// Worst tenant share error with every tenant backlogged: see [`approximation`].
const SHARE_ERROR_MAX: f64 = 0.05;

/// What [`approximation`] says, in numbers: held in the lab on generated cases
/// (`lab --test agreement linux_htb_keeps_what_check_states_on_generated_scenarios`),
/// not by the simulator's claims oracle, which runs only registry rows.
pub fn bounds(policy: &Policy) -> Vec<sched::Bound> {
    let shares = sched::htb::share_bound_withheld(policy)
        .is_empty()
        .then_some(sched::Bound {
            subject: sched::Subject::Tenant,
            figure: sched::Figure::RelErrorMean {
                grain: sched::Grain {
                    sends: 2,
                    ideal_ns: 0,
                },
            },
            max: SHARE_ERROR_MAX,
            condition: sched::Condition::EveryAppBackloggedFewTenants,
        });
    shares
        .into_iter()
        .chain([
            sched::Bound::over_cap(sched::Subject::Tenant, 0),
            sched::Bound::over_cap(sched::Subject::App, 0),
        ])
        .collect()
}

/// Each app's leaf quantum, by app index: its part of the tree's weight (tenant
/// weight x app weight / the weights of the tenant's apps), in Ethernet frames of
/// the link's MTU with the smallest part one frame, at most
/// [`sched::htb::QUANTUM_BYTES_MAX`] (a tree whose parts differ more is scaled down,
/// to a byte at the least). A tenant's implicit `default` app beside declared ones
/// carries only what no rule matches: it takes no part of its tenant's weight, and
/// the smallest quantum.
pub fn leaf_quanta(policy: &Policy) -> Vec<u32> {
    let counted = |app: &policy::App| !app.implicit || policy.tenant(app.tenant).apps.len() == 1;
    let part: Vec<Option<f64>> = policy
        .apps
        .iter()
        .map(|app| {
            let tenant = policy.tenant(app.tenant);
            let weights: f64 = tenant
                .apps
                .iter()
                .map(|&a| policy.app(a))
                .filter(|a| counted(a))
                .map(|a| f64::from(a.weight))
                .sum();
            counted(app).then(|| f64::from(tenant.weight) * f64::from(app.weight) / weights)
        })
        .collect();
    let smallest = part.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    let largest = part.iter().flatten().copied().fold(0.0, f64::max);
    let frame = f64::from(policy.link.mtu_bytes + 14);
    let max = sched::htb::QUANTUM_BYTES_MAX as f64;
    let bytes_per_part = (frame / smallest).min(max / largest);
    part.iter()
        .map(|p| (p.unwrap_or(smallest) * bytes_per_part).round().max(1.0) as u32)
        .collect()
}

/// The tree of [`tc_script`] as `tc -batch` commands, for a device that has no root
/// qdisc of its own yet (the lab's, just made), each tenant matched by the source
/// prefix given (the lab assigns one where the policy has none).
pub(crate) fn tc_batch(
    policy: &Policy,
    dev: &str,
    prefixes: &[Cidr],
) -> Result<String, TcScriptError> {
    let v6: Vec<bool> = prefixes.iter().map(|p| p.addr.is_ipv6()).collect();
    let [v4_prios, _] = prios(policy, &v6)?;
    let link_bps = policy.link.rate_bps as f64;
    let all_backlogged: Vec<Vec<f64>> = vec![vec![f64::INFINITY]; policy.apps.len()];
    let ideal = ideal_allocation(policy, &all_backlogged);
    let quantum = |weight: u32| sched::htb::quantum_bytes(policy.link.mtu_bytes, weight);
    let leaf_quantum = leaf_quanta(policy);
    let mut s = String::new();
    s.push_str(&format!(
        "# nicsched policy as Linux HTB on {dev}: link {}, {} tenants, {} apps\n",
        policy::format_rate(link_bps),
        policy.tenants.len(),
        policy.apps.len()
    ));
    s.push_str(&format!(
        "qdisc add dev {dev} root handle 1: htb default {UNCLASSIFIED_MINOR:x}\n"
    ));
    s.push_str(&format!(
        "class add dev {dev} parent 1: classid 1:{LINK_MINOR:x} htb rate {r} ceil {r} quantum {q}\n",
        r = rate(link_bps),
        q = quantum(1)
    ));
    s.push_str(&format!(
        "class add dev {dev} parent 1:{LINK_MINOR:x} classid 1:{UNCLASSIFIED_MINOR:x} htb rate {} ceil {} prio 7 quantum {}\n",
        rate(0.0),
        rate(link_bps),
        quantum(1)
    ));
    s.push_str(&format!(
        "qdisc add dev {dev} parent 1:{m:x} handle {m:x}: pfifo limit {LEAF_PACKETS}\n",
        m = UNCLASSIFIED_MINOR
    ));
    for (t, tenant) in policy.tenants.iter().enumerate() {
        let tenant_bps = ideal.tenant_bps[t].max(tenant.min_rate_bps.unwrap_or(0) as f64);
        let ceil = tenant
            .max_rate_bps
            .map_or(link_bps, |m| m as f64)
            .max(tenant_bps);
        s.push_str(&format!(
            "# tenant {}: weight {}, priority {}\n",
            tenant.name, tenant.weight, tenant.priority
        ));
        s.push_str(&format!(
            "class add dev {dev} parent 1:{LINK_MINOR:x} classid 1:{:x} htb rate {} ceil {} prio {} quantum {}\n",
            tenant_minor(t),
            rate(tenant_bps),
            rate(ceil),
            tenant.priority.min(7),
            quantum(tenant.weight)
        ));
        for &a in &tenant.apps {
            let app = policy.app(a);
            let app_bps = ideal.app_bps[a.index()].max(app.min_rate_bps.unwrap_or(0) as f64);
            let ceil = app.max_rate_bps.map_or(ceil, |m| m as f64).max(app_bps);
            s.push_str(&format!(
                "class add dev {dev} parent 1:{:x} classid 1:{:x} htb rate {} ceil {} prio {} quantum {}\n",
                tenant_minor(t),
                app_minor(policy, a.index()),
                rate(app_bps),
                rate(ceil),
                app.priority.min(7),
                leaf_quantum[a.index()]
            ));
            s.push_str(&format!(
                "qdisc add dev {dev} parent 1:{m:x} handle {m:x}: pfifo limit {LEAF_PACKETS}\n",
                m = app_minor(policy, a.index())
            ));
        }
    }
    for (t, prefix) in prefixes.iter().enumerate() {
        let (protocol, ip, first_prio) = if v6[t] {
            ("ipv6", "ip6", v4_prios + 1)
        } else {
            ("ip", "ip", 1)
        };
        for (n, rule) in rules(policy, t).iter().enumerate() {
            let mut matches = format!("match {ip} src {}/{}", prefix.addr, prefix.prefix_len);
            if let Some(proto) = rule.proto {
                matches.push_str(&format!(" match {ip} protocol {proto} 0xff"));
            }
            if let Some((side, port)) = rule.port {
                matches.push_str(&format!(" match {ip} {side} {port} 0xffff"));
            }
            s.push_str(&format!(
                "filter add dev {dev} parent 1: protocol {protocol} prio {} handle ::{:x} u32 {matches} flowid 1:{:x}\n",
                first_prio + n,
                t + 1,
                app_minor(policy, rule.app)
            ));
        }
    }
    Ok(s)
}

/// Packets HTB dropped per tenant, from `tc -s class show` of the device the
/// [`tc_script`] of `policy` was applied to: the drops of each app's leaf class
/// (its `pfifo` overflowing), added up by tenant. Lines of other classes are skipped.
pub(crate) fn tenant_drops(policy: &Policy, tc_stats: &str) -> Vec<u64> {
    let mut drops = vec![0; policy.tenants.len()];
    let mut app = None;
    for line in tc_stats.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("class htb 1:") {
            app = rest
                .split_whitespace()
                .next()
                .and_then(|minor| u32::from_str_radix(minor, 16).ok())
                .and_then(|minor| minor.checked_sub(app_minor(policy, 0)))
                .map(|a| a as usize)
                .filter(|&a| a < policy.apps.len());
        } else if let (Some(a), Some(rest)) = (app, line.strip_prefix("Sent ")) {
            let dropped = rest
                .split_once("(dropped ")
                .and_then(|(_, d)| d.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|d| d.parse::<u64>().ok());
            if let Some(dropped) = dropped {
                drops[policy.apps[a].tenant.index()] += dropped;
            }
            app = None;
        }
    }
    drops
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{AppId, Proto};

    fn policy() -> Policy {
        policy::parse_policy(
            r#"
link: { rate: 1Gbit }
tenants:
  - name: t1
    weight: 1
    match: { src: 10.0.1.0/24 }
  - name: t2
    weight: 3
    max_rate: 800Mbit
    match: { src: 10.0.2.0/24 }
    apps:
      - name: probe
        priority: 0
        match: { proto: tcp, ports: [11111] }
      - name: bulk
        max_rate: 500Mbit
        match: { proto: tcp, ports: [5201] }
  - name: t3
    min_rate: 100Mbit
    match: { src: 10.0.3.0/24 }
"#,
            "p.yaml",
        )
        .unwrap()
    }

    #[test]
    fn drops_are_read_from_the_app_leaves_and_added_up_by_tenant() {
        let policy = policy();
        let app = |tenant: &str, name: &str| {
            let t = policy
                .tenants
                .iter()
                .position(|t| t.name == tenant)
                .unwrap();
            policy
                .apps
                .iter()
                .position(|a| a.tenant.index() == t && a.name == name)
                .unwrap()
        };
        let class = |minor: u32, dropped: u64| {
            format!(
                "class htb 1:{minor:x} parent 1:1 leaf 8001: prio 0 rate 1Mbit ceil 1Mbit burst 1600b cburst 1600b \n \
                 Sent 1000 bytes 10 pkt (dropped {dropped}, overlimits 3 requeues 0) \n \
                 backlog 0b 0p requeues 0\n\n"
            )
        };
        let stats = [
            class(1, 100),
            class(tenant_minor(1), 9),
            class(app_minor(&policy, app("t1", "default")), 5),
            class(app_minor(&policy, app("t2", "probe")), 7),
            class(app_minor(&policy, app("t2", "bulk")), 11),
            class(app_minor(&policy, app("t3", "default")), 0),
        ]
        .concat();
        assert_eq!(tenant_drops(&policy, &stats), vec![5, 18, 0]);
        assert_eq!(
            tenant_drops(&policy, "garbage\nSent nothing"),
            vec![0, 0, 0]
        );
    }

    /// The commands `sh -e` runs for `script`, each as a `tc` command line: the
    /// delete, then the lines of the `tc -batch` here-document, comments left out.
    fn commands(script: &str) -> Vec<String> {
        let lines: Vec<&str> = script.lines().collect();
        let [header, delete, batch, inner @ .., end] = &lines[..] else {
            panic!("{script}")
        };
        assert!(header.starts_with("# nicsched policy as Linux HTB on "));
        assert_eq!(*batch, "tc -batch - <<'EOF'");
        assert_eq!(*end, "EOF");
        assert!(!inner.contains(&"EOF"), "the here-document ends early");
        std::iter::once(delete.to_string())
            .chain(
                inner
                    .iter()
                    .filter(|l| !l.starts_with('#'))
                    .map(|l| format!("tc {l}")),
            )
            .collect()
    }

    #[test]
    fn a_leaf_quantum_is_its_part_of_the_whole_trees_weight() {
        // t1 (weight 1) lends through one leaf, t2 (weight 3) through two of its
        // three: HTB's turns go by leaves' quanta, so t2's two leaves hold 3/2 of
        // a frame each, and its implicit default, idle beside declared apps, the
        // smallest; t3's one leaf holds its tenant's whole weight.
        let p = policy();
        assert_eq!(leaf_quanta(&p), vec![1514, 2271, 2271, 1514, 1514]);
        let names: Vec<&str> = p.apps.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["default", "probe", "bulk", "default", "default"]);
        // Weights past what one quantum's range holds are scaled down together.
        let wide = policy::parse_policy(
            "link: {rate: 1Gbit}\ntenants:\n  - {name: a, weight: 1}\n  - {name: b, weight: 1000}\n",
            "p.yaml",
        )
        .unwrap();
        assert_eq!(leaf_quanta(&wide), vec![200, 200_000]);
    }

    #[test]
    fn compiles_the_tree_rates_and_filters() {
        let script = tc_script(&policy(), "up0").unwrap();
        let lines = commands(&script);
        assert_eq!(lines[0], "tc qdisc del dev up0 root 2>/dev/null || true");
        assert_eq!(
            lines[1],
            "tc qdisc add dev up0 root handle 1: htb default fffe"
        );
        assert_eq!(
            lines[2],
            "tc class add dev up0 parent 1: classid 1:1 htb rate 1gbit ceil 1gbit quantum 1514"
        );
        // What no filter matches has a class of its own, the qdisc's default.
        assert_eq!(
            lines[3],
            "tc class add dev up0 parent 1:1 classid 1:fffe htb rate 8kbit ceil 1gbit prio 7 quantum 1514"
        );
        // All backlogged: t3 gets its 100M guarantee, then 1:3:1 weights of the 900M.
        assert!(
            script.contains(
                "parent 1:1 classid 1:2 htb rate 180mbit ceil 1gbit prio 1 quantum 1514\n"
            )
        );
        assert!(script.contains(
            "parent 1:1 classid 1:3 htb rate 540mbit ceil 800mbit prio 1 quantum 4542\n"
        ));
        assert!(script.contains("parent 1:1 classid 1:4 htb rate 280mbit ceil 1gbit"));
        // The apps' leaves follow the tenants' classes. t2's: probe (priority 0) takes
        // the tenant's whole rate when backlogged; bulk and default borrow.
        assert!(script.contains(
            "parent 1:3 classid 1:6 htb rate 540mbit ceil 800mbit prio 0 quantum 2271\n"
        ));
        assert!(script.contains("parent 1:3 classid 1:7 htb rate 8kbit ceil 500mbit prio 1"));
        assert!(
            lines.contains(&"tc qdisc add dev up0 parent 1:6 handle 6: pfifo limit 1000".into())
        );
        // Per tenant, filters in first-match order, both port directions, then the
        // tenant's catch-all; the tenant's number is the handle.
        let filters: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with("tc filter"))
            .collect();
        assert_eq!(
            filters,
            [
                "tc filter add dev up0 parent 1: protocol ip prio 1 handle ::1 u32 match ip src 10.0.1.0/24 flowid 1:5",
                "tc filter add dev up0 parent 1: protocol ip prio 1 handle ::2 u32 match ip src 10.0.2.0/24 match ip protocol 6 0xff match ip sport 11111 0xffff flowid 1:6",
                "tc filter add dev up0 parent 1: protocol ip prio 2 handle ::2 u32 match ip src 10.0.2.0/24 match ip protocol 6 0xff match ip dport 11111 0xffff flowid 1:6",
                "tc filter add dev up0 parent 1: protocol ip prio 3 handle ::2 u32 match ip src 10.0.2.0/24 match ip protocol 6 0xff match ip sport 5201 0xffff flowid 1:7",
                "tc filter add dev up0 parent 1: protocol ip prio 4 handle ::2 u32 match ip src 10.0.2.0/24 match ip protocol 6 0xff match ip dport 5201 0xffff flowid 1:7",
                "tc filter add dev up0 parent 1: protocol ip prio 5 handle ::2 u32 match ip src 10.0.2.0/24 flowid 1:8",
                "tc filter add dev up0 parent 1: protocol ip prio 1 handle ::3 u32 match ip src 10.0.3.0/24 flowid 1:9",
            ]
        );
    }

    /// A rate as `tc` reads it: a decimal number and an SI unit of bits.
    fn parse_tc_rate(text: &str) -> f64 {
        let at = text.find(|c: char| c.is_ascii_alphabetic()).unwrap();
        let factor = match &text[at..] {
            "bit" => 1.0,
            "kbit" => 1e3,
            "mbit" => 1e6,
            "gbit" => 1e9,
            unit => panic!("unit {unit} in {text}"),
        };
        text[..at].parse::<f64>().unwrap() * factor
    }

    #[test]
    fn rates_are_in_tcs_units_and_exact_to_the_bit() {
        for (bps, text) in [
            (0.0, "8kbit"),
            (8_000.4, "8kbit"),
            (12_345.0, "12.345kbit"),
            (540e6, "540mbit"),
            (1e9 / 3.0, "333.333333mbit"),
            (1e9, "1gbit"),
            (12.5e9, "12.5gbit"),
            (1_000_000_001.0, "1.000000001gbit"),
        ] {
            assert_eq!(rate(bps), text);
            // tc multiplies in floating point too: exact to the bit once rounded.
            assert_eq!(
                parse_tc_rate(text).round(),
                bps.max(RATE_FLOOR_BPS).round(),
                "{text}"
            );
        }
    }

    /// Reads the printed script as `tc` would and checks that it is whole: every
    /// class hangs under one made before it, every leaf has its queue, the qdisc's
    /// default and every filter's flowid name a class, rates parse back to the
    /// ideal, and nothing but `tc` runs.
    #[test]
    fn the_printed_script_names_only_classes_it_creates() {
        let policy = policy();
        let script = tc_script(&policy, "eth0.7").unwrap();
        let mut classes = vec!["1:".to_string()];
        let mut leaves = Vec::new();
        let mut default = None;
        let mut flowids = Vec::new();
        for line in commands(&script) {
            let words: Vec<&str> = line.split_whitespace().collect();
            let after = |key: &str| {
                let at = words.iter().position(|w| *w == key).unwrap();
                words[at + 1].to_string()
            };
            assert_eq!(words[0], "tc", "{line}");
            assert_eq!(after("dev"), "eth0.7", "{line}");
            match (words[1], words[2]) {
                ("qdisc", "del") => assert_eq!(classes.len(), 1, "deleted first"),
                ("qdisc", "add") if words.contains(&"root") => default = Some(after("default")),
                ("qdisc", "add") => leaves.push(after("parent")),
                ("class", "add") => {
                    assert!(classes.contains(&after("parent")), "{line}");
                    let rate = parse_tc_rate(&after("rate"));
                    let ceil = parse_tc_rate(&after("ceil"));
                    assert!(RATE_FLOOR_BPS <= rate && rate <= ceil, "{line}");
                    classes.push(after("classid"));
                }
                ("filter", "add") => flowids.push(after("flowid")),
                _ => panic!("unexpected command: {line}"),
            }
        }
        let default = format!("1:{}", default.expect("a root qdisc"));
        assert!(classes.contains(&default), "default {default} is a class");
        assert!(leaves.contains(&default), "and has its queue");
        for a in 0..policy.apps.len() {
            let leaf = format!("1:{:x}", app_minor(&policy, a));
            assert!(classes.contains(&leaf) && leaves.contains(&leaf), "{leaf}");
        }
        assert!(flowids.iter().all(|f| classes.contains(f)), "{flowids:?}");
        // One class per tenant and app, the link and the default.
        assert_eq!(
            classes.len() - 1,
            policy.tenants.len() + policy.apps.len() + 2
        );
    }

    #[test]
    fn ipv6_tenants_get_ipv6_filters_at_prios_after_the_ipv4_ones() {
        let mixed = policy::parse_policy(
            r#"
link: { rate: 1Gbit }
tenants:
  - name: v6
    match: { src: 2001:db8:1::/48 }
    apps:
      - { name: dns, match: { proto: udp, ports: [53] } }
      - { name: ssh, match: { proto: tcp } }
  - { name: v4, match: { src: 10.0.0.0/8 } }
  - { name: host, match: { src: 2001:db8:2::1 } }
"#,
            "p.yaml",
        )
        .unwrap();
        let script = tc_script(&mixed, "eth0").unwrap();
        let filters: Vec<String> = commands(&script)
            .into_iter()
            .filter(|l| l.starts_with("tc filter"))
            .collect();
        // Tenants 1:2-1:4; v6's apps 1:5-1:7, v4's default 1:8, host's 1:9. The IPv4
        // tenants' filters take prio 1 alone, so the IPv6 ones start at 2.
        assert_eq!(
            filters,
            [
                "tc filter add dev eth0 parent 1: protocol ipv6 prio 2 handle ::1 u32 match ip6 src 2001:db8:1::/48 match ip6 protocol 17 0xff match ip6 sport 53 0xffff flowid 1:5",
                "tc filter add dev eth0 parent 1: protocol ipv6 prio 3 handle ::1 u32 match ip6 src 2001:db8:1::/48 match ip6 protocol 17 0xff match ip6 dport 53 0xffff flowid 1:5",
                "tc filter add dev eth0 parent 1: protocol ipv6 prio 4 handle ::1 u32 match ip6 src 2001:db8:1::/48 match ip6 protocol 6 0xff flowid 1:6",
                "tc filter add dev eth0 parent 1: protocol ipv6 prio 5 handle ::1 u32 match ip6 src 2001:db8:1::/48 flowid 1:7",
                "tc filter add dev eth0 parent 1: protocol ip prio 1 handle ::2 u32 match ip src 10.0.0.0/8 flowid 1:8",
                "tc filter add dev eth0 parent 1: protocol ipv6 prio 2 handle ::3 u32 match ip6 src 2001:db8:2::1/128 flowid 1:9",
            ]
        );
    }

    /// A policy of `tenants` tenants, every third with an IPv6 prefix and every
    /// tenth with `apps` apps of `ports` ports each (besides its `default`).
    fn many(tenants: usize, apps: usize, ports: usize) -> Policy {
        let mut yaml = String::from("link: { rate: 10Gbit }\ntenants:\n");
        for t in 0..tenants {
            let src = if t % 3 == 0 {
                format!("2001:db8:{t:x}::/48")
            } else {
                format!("10.{}.{}.0/24", t / 256, t % 256)
            };
            yaml.push_str(&format!("  - name: t{t}\n    match: {{ src: {src} }}\n"));
            if t % 10 == 0 && apps > 0 {
                yaml.push_str("    apps:\n");
                for a in 0..apps {
                    let list: Vec<String> = (0..ports)
                        .map(|p| (1000 + a * ports + p).to_string())
                        .collect();
                    yaml.push_str(&format!(
                        "      - {{ name: a{a}, match: {{ proto: tcp, ports: [{}] }} }}\n",
                        list.join(", ")
                    ));
                }
            }
        }
        policy::parse_policy(&yaml, "many.yaml").unwrap()
    }

    /// The value after `key` in a command of the script.
    fn after<'a>(line: &'a str, key: &str) -> &'a str {
        let mut words = line.split_whitespace();
        words.find(|w| *w == key);
        words.next().unwrap_or_else(|| panic!("no {key} in {line}"))
    }

    #[test]
    fn thousands_of_tenants_get_distinct_ids_that_fit() {
        let policy = many(3900, 2, 3);
        assert_eq!(htb_limits(&policy), Ok(()));
        let script = tc_script(&policy, "eth0").unwrap();
        let minor = |classid: &str| {
            let minor = classid.strip_prefix("1:").unwrap();
            u32::from_str_radix(minor, 16).unwrap()
        };
        let mut classes = std::collections::HashSet::new();
        let mut filters = std::collections::HashSet::new();
        let commands = commands(&script);
        // Each class once: none of the tenants' or apps' is the link's or the default's.
        for line in &commands {
            if line.starts_with("tc class add") {
                let classid = minor(after(line, "classid"));
                assert!((1..=0xffff).contains(&classid), "{line}");
                assert!(classes.insert(classid), "twice: {line}");
            } else if line.starts_with("tc filter add") {
                let prio: u32 = after(line, "prio").parse().unwrap();
                let node = after(line, "handle").strip_prefix("::").unwrap();
                let node = u32::from_str_radix(node, 16).unwrap();
                assert!((1..=U32_PRIOS_MAX as u32).contains(&prio), "{line}");
                assert!((1..=U32_NODES_MAX as u32).contains(&node), "{line}");
                let key = (after(line, "protocol"), prio, node);
                assert!(filters.insert(key), "twice: {line}");
                assert!(classes.contains(&minor(after(line, "flowid"))), "{line}");
            }
        }
        // The link, the default, and a class per tenant and per app: 390 tenants have
        // 2 apps and a default.
        assert_eq!(classes.len(), 2 + 3900 + 3900 + 390 * 2);
        assert!(classes.contains(&UNCLASSIFIED_MINOR));
        // 3900 catch-alls and 2 x 3 ports x 2 directions for 390 tenants.
        assert_eq!(filters.len(), 3900 + 390 * 12);
    }

    #[test]
    fn policies_past_htbs_or_u32s_numbers_are_refused_saying_which() {
        let too_large = |policy: &Policy, words: &[&str]| {
            let error = htb_limits(policy).unwrap_err();
            assert!(matches!(error, TcScriptError::TooLarge(_)), "{error:?}");
            let text = error.to_string();
            assert!(words.iter().all(|w| text.contains(w)), "{text}");
            assert_eq!(tc_script(policy, "eth0"), Err(error));
        };
        // One tenant past u32's 12-bit filter numbers (the policy's own bound is 4096).
        too_large(&many(4096, 0, 0), &["4096 tenants", "room for 4095"]);
        // The classes: 4000 tenants, 400 of them with 145 apps and a default. A policy
        // file cannot hold that many apps (YAML is read into at most 250000 nodes):
        // they are added here.
        let mut classes = many(4000, 0, 0);
        for t in 0..400 {
            for a in 0..145 {
                let mut app = classes.app(classes.tenants[t].apps[0]).clone();
                app.name = format!("a{a}");
                app.match_proto = Some(Proto::Udp);
                app.implicit = false;
                classes.tenants[t]
                    .apps
                    .insert(a, AppId(classes.apps.len() as u32));
                classes.apps.push(app);
            }
        }
        assert_eq!(classes.apps.len(), 3600 + 400 * 146);
        too_large(
            &classes,
            &[
                "4000 tenants and 62000 apps",
                "66000 HTB classes",
                "room for 65532",
            ],
        );
        // The prios: a tenant's filters, one prio each, 1023 ports both ways and its
        // catch-all fit in 2047; one port more does not.
        assert_eq!(htb_limits(&many(1, 1, 1023)), Ok(()));
        too_large(
            &many(1, 1, 1024),
            &["2049 u32 prios", "at most 2047", "`t0` has 2049 (IPv6)"],
        );
    }

    #[test]
    fn tenants_without_a_source_prefix_and_odd_device_names_are_refused() {
        let unmatched = policy::parse_policy(
            "link: { rate: 1Gbit }\ntenants:\n  - { name: a, match: { src: 10.0.0.0/8 } }\n  - { name: b, match: { port: veth3 } }\n",
            "p.yaml",
        )
        .unwrap();
        let error = tc_script(&unmatched, "eth0").unwrap_err();
        assert_eq!(
            error,
            TcScriptError::Unmatched {
                tenant: "b".into(),
                has_port: true
            }
        );
        let text = error.to_string();
        assert!(
            text.contains("`b`") && text.contains("hint: add `match: { src: CIDR }`"),
            "{text}"
        );
        for dev in [
            "",
            "sixteen-chars-xx",
            "eth0;reboot",
            "a b",
            "a/b",
            "$(x)",
            "'x'",
            "\"x\"",
            ".",
            "..",
            "é",
        ] {
            assert_eq!(
                tc_script(&policy(), dev),
                Err(TcScriptError::Device(dev.into())),
                "{dev:?}"
            );
        }
        for dev in [
            "eth0",
            "enp3s0f1.100",
            "veth_a-b:1",
            "bond0@x",
            "fifteen-chars-x",
        ] {
            assert!(tc_script(&policy(), dev).is_ok(), "{dev}");
        }
    }
}
