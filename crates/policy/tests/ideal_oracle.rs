//! The ideal's own oracle (issue 25): `policy::ideal_allocation` and
//! `policy::ideal_across_hosts` held, on generated policies and scenarios, to the
//! definitions of docs/policy.md and docs/hosts.md computed again here, written
//! separately from the crate's code: every level water-filled by bisection on
//! its water level, not by the crate's rounds of satisfying children. Beside the
//! agreement: caps, guarantees and envelopes respected, work conservation,
//! symmetry under relabelling. `PROPTEST_CASES` sets the cases of every property
//! (docs/policy.md, "The ideal's oracle").

use policy::{
    Feedback, Host, HostsScenario, HostsTraffic, Policy, Traffic, TrafficKind, ideal_across_hosts,
    ideal_allocation, parse_policy,
};
use proptest::prelude::*;
use proptest::sample::Index;

const INF: f64 = f64::INFINITY;

/// One child at a node of the definition.
#[derive(Clone, Copy, Debug)]
struct Kid {
    demand: f64,
    min: f64,
    weight: f64,
    priority: u8,
}

/// docs/policy.md "The ideal allocation", steps 1-2: guarantees up to the
/// demand (scaled down in proportion if they exceed `capacity`), then each
/// priority level in order water-filled by weight. The level is found by
/// bisection on the water height: an independent way to the same numbers.
fn water(capacity: f64, kids: &[Kid]) -> Vec<f64> {
    let mut got: Vec<f64> = kids.iter().map(|k| k.min.min(k.demand)).collect();
    let guaranteed: f64 = got.iter().sum();
    if guaranteed > capacity {
        return got.iter().map(|g| g * capacity / guaranteed).collect();
    }
    let mut left = capacity - guaranteed;
    let mut levels: Vec<u8> = kids.iter().map(|k| k.priority).collect();
    levels.sort_unstable();
    levels.dedup();
    for level in levels {
        let at: Vec<usize> = (0..kids.len())
            .filter(|&i| kids[i].priority == level)
            .collect();
        let want: f64 = at.iter().map(|&i| kids[i].demand - got[i]).sum();
        if want <= left {
            for &i in &at {
                got[i] = kids[i].demand;
            }
            left -= want;
            continue;
        }
        // Height h: each child gets min(its want, weight * h); the sum grows with h.
        let given = |h: f64| -> f64 {
            at.iter()
                .map(|&i| (kids[i].demand - got[i]).min(kids[i].weight * h))
                .sum()
        };
        let (mut lo, mut hi) = (0.0, 1.0);
        while given(hi) < left {
            hi *= 2.0;
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if given(mid) < left {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        for &i in &at {
            got[i] += (kids[i].demand - got[i]).min(kids[i].weight * hi);
        }
        return got;
    }
    got
}

fn rate(bps: Option<u64>) -> f64 {
    bps.map_or(INF, |r| r as f64)
}

// ---------------------------------------------------------------- one host

/// A generated tenant: weight, priority, guarantee (permille of its part of the
/// link), cap (Mbit/s), apps.
#[derive(Clone, Debug)]
struct TenantSpec {
    weight: u32,
    priority: u8,
    min_permille: Option<u32>,
    max_mbit: Option<u64>,
    apps: Vec<AppSpec>,
    /// The last app is a catch-all (no `match`).
    catch_all: bool,
}

#[derive(Clone, Debug)]
struct AppSpec {
    weight: u32,
    priority: u8,
    min_permille: Option<u32>,
    max_mbit: Option<u64>,
    split_mbit: Option<u64>,
}

fn app_spec() -> impl Strategy<Value = AppSpec> {
    (
        1u32..=1000,
        0u8..4,
        proptest::option::of(0u32..=1000),
        proptest::option::of(1u64..20_000),
        proptest::option::weighted(0.2, 1u64..3_000),
    )
        .prop_map(
            |(weight, priority, min_permille, max_mbit, split_mbit)| AppSpec {
                weight,
                priority,
                min_permille,
                max_mbit,
                split_mbit,
            },
        )
}

fn tenant_spec() -> impl Strategy<Value = TenantSpec> {
    (
        1u32..=1000,
        0u8..4,
        proptest::option::of(0u32..=1000),
        // Caps from far below a share to above the link.
        proptest::option::of(prop_oneof![1u64..200, 200u64..40_000]),
        proptest::collection::vec(app_spec(), 0..4),
        any::<bool>(),
    )
        .prop_map(
            |(weight, priority, min_permille, max_mbit, apps, catch_all)| TenantSpec {
                weight,
                priority,
                min_permille,
                max_mbit,
                catch_all: catch_all && !apps.is_empty(),
                apps,
            },
        )
}

/// The policy's YAML: guarantees scaled so that they fit the link (tenants) and
/// their tenant (apps), as policy.md's rules on rates ask.
fn policy_yaml(link_mbit: u64, tenants: &[(usize, &TenantSpec)]) -> String {
    let link = link_mbit * 1_000_000;
    let permille_sum: u64 = tenants
        .iter()
        .filter_map(|(_, t)| t.min_permille)
        .map(u64::from)
        .sum();
    let mut yaml = format!("link: {{rate: {link}bit}}\ntenants:\n");
    for &(id, t) in tenants {
        yaml += &format!(
            "- name: t{id}\n  weight: {}\n  priority: {}\n",
            t.weight, t.priority
        );
        let min = t
            .min_permille
            .map(|p| link * u64::from(p) / permille_sum.max(1000));
        let max = t.max_mbit.map(|m| (m * 1_000_000).max(min.unwrap_or(0)));
        if let Some(min) = min {
            yaml += &format!("  min_rate: {min}bit\n");
        }
        if let Some(max) = max {
            yaml += &format!("  max_rate: {max}bit\n");
        }
        if t.apps.is_empty() {
            continue;
        }
        let bound = min.or(max).unwrap_or(link);
        let apps = t.apps.len() as u64;
        yaml += "  apps:\n";
        for (a, app) in t.apps.iter().enumerate() {
            yaml += &format!(
                "  - {{name: a{a}, weight: {}, priority: {}",
                app.weight, app.priority
            );
            if !(t.catch_all && a + 1 == t.apps.len()) {
                yaml += &format!(", match: {{ports: [{}]}}", a + 1);
            }
            let app_min = app.min_permille.map(|p| bound / apps * u64::from(p) / 1000);
            if let Some(app_min) = app_min {
                yaml += &format!(", min_rate: {app_min}bit");
            }
            if let Some(m) = app.max_mbit {
                yaml += &format!(
                    ", max_rate: {}bit",
                    (m * 1_000_000).max(app_min.unwrap_or(0))
                );
            }
            if let Some(s) = app.split_mbit {
                yaml += &format!(", split: {{by: flow, max_rate: {s}Mbit}}");
            }
            yaml += "}\n";
        }
    }
    yaml
}

/// A generated one-host case: the link, the tenants, and per app of the parsed
/// policy its flows' demands (filled once the policy is parsed).
#[derive(Clone, Debug)]
struct OneHost {
    link_mbit: u64,
    tenants: Vec<TenantSpec>,
    /// Per tenant, per app in the tenant's order (implicit `default` last), flows.
    demands: Vec<Vec<Vec<f64>>>,
}

fn one_host(max_tenants: usize) -> impl Strategy<Value = OneHost> {
    (
        100u64..100_000,
        proptest::collection::vec(tenant_spec(), 1..=max_tenants),
    )
        .prop_flat_map(|(link_mbit, tenants)| {
            let link = link_mbit as f64 * 1e6;
            let demand = prop_oneof![Just(INF), Just(0.0), 0.0..1.2 * link];
            let per_tenant: Vec<_> = tenants
                .iter()
                .map(|t| {
                    // An implicit default app follows the declared ones when no app
                    // takes everything.
                    let apps =
                        t.apps.len().max(1) + usize::from(!t.apps.is_empty() && !t.catch_all);
                    proptest::collection::vec(proptest::collection::vec(demand.clone(), 0..4), apps)
                })
                .collect();
            (Just(link_mbit), Just(tenants), per_tenant)
        })
        .prop_map(|(link_mbit, tenants, demands)| OneHost {
            link_mbit,
            tenants,
            demands,
        })
}

impl OneHost {
    /// The policy with the tenants in `order`, and the demands by app index.
    fn build(&self, order: &[usize]) -> (Policy, Vec<Vec<f64>>) {
        let tenants: Vec<(usize, &TenantSpec)> =
            order.iter().map(|&i| (i, &self.tenants[i])).collect();
        let yaml = policy_yaml(self.link_mbit, &tenants);
        let policy = parse_policy(&yaml, "oracle.yaml")
            .unwrap_or_else(|e| panic!("generated policy refused: {e}\n{yaml}"));
        let mut demands = vec![Vec::new(); policy.apps.len()];
        for (t, &i) in order.iter().enumerate() {
            for (a, app) in policy.tenants[t].apps.iter().enumerate() {
                demands[app.index()] = self.demands[i][a].clone();
            }
        }
        (policy, demands)
    }
}

/// docs/policy.md's demands, bottom up: each app's (its flows, each capped by
/// `split.max_rate`, capped by the app's `max_rate`) and each tenant's.
fn demands_of(p: &Policy, demands: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
    let apps: Vec<f64> = p
        .apps
        .iter()
        .enumerate()
        .map(|(i, app)| {
            let split = app.split.map_or(INF, |s| s.max_rate_bps as f64);
            let sum: f64 = demands[i]
                .iter()
                .map(|&d| if d > 0.0 { d.min(split) } else { 0.0 })
                .sum();
            sum.min(rate(app.max_rate_bps))
        })
        .collect();
    let tenants = p
        .tenants
        .iter()
        .map(|t| {
            t.apps
                .iter()
                .map(|a| apps[a.index()])
                .sum::<f64>()
                .min(rate(t.max_rate_bps))
        })
        .collect();
    (apps, tenants)
}

/// docs/policy.md's ideal, computed from the definition alone.
fn one_host_oracle(p: &Policy, demands: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
    let (app_demand, tenant_demand) = demands_of(p, demands);
    let tenant_kids: Vec<Kid> = p
        .tenants
        .iter()
        .zip(&tenant_demand)
        .map(|(t, &demand)| Kid {
            demand,
            min: t.min_rate_bps.unwrap_or(0) as f64,
            weight: f64::from(t.weight),
            priority: t.priority,
        })
        .collect();
    let tenants = water(p.link.rate_bps as f64, &tenant_kids);
    let mut apps = vec![0.0; p.apps.len()];
    for (t, &c) in p.tenants.iter().zip(&tenants) {
        let kids: Vec<Kid> = t
            .apps
            .iter()
            .map(|&a| {
                let app = p.app(a);
                Kid {
                    demand: app_demand[a.index()],
                    min: app.min_rate_bps.unwrap_or(0) as f64,
                    weight: f64::from(app.weight),
                    priority: app.priority,
                }
            })
            .collect();
        for (a, bps) in t.apps.iter().zip(water(c, &kids)) {
            apps[a.index()] = bps;
        }
    }
    (tenants, apps)
}

fn check_one_host(case: &OneHost, order: &[usize]) -> Result<(), TestCaseError> {
    let identity: Vec<usize> = (0..case.tenants.len()).collect();
    let (p, demands) = case.build(&identity);
    let link = p.link.rate_bps as f64;
    let eps = 1e-7 * link;
    let got = ideal_allocation(&p, &demands);
    let (tenants, apps) = one_host_oracle(&p, &demands);
    let (app_demand, tenant_demand) = demands_of(&p, &demands);
    for (t, tenant) in p.tenants.iter().enumerate() {
        prop_assert!(
            (got.tenant_bps[t] - tenants[t]).abs() <= eps,
            "tenant {}: ideal {} oracle {}",
            tenant.name,
            got.tenant_bps[t],
            tenants[t]
        );
        prop_assert!(got.tenant_bps[t] <= rate(tenant.max_rate_bps) + eps);
        prop_assert!(got.tenant_bps[t] <= tenant_demand[t] + eps);
        let min = tenant.min_rate_bps.unwrap_or(0) as f64;
        prop_assert!(got.tenant_bps[t] >= min.min(tenant_demand[t]) - eps);
        // Its apps share exactly what it gets.
        let apps_bps: f64 = tenant.apps.iter().map(|a| got.app_bps[a.index()]).sum();
        prop_assert!((apps_bps - got.tenant_bps[t]).abs() <= eps);
    }
    for (i, app) in p.apps.iter().enumerate() {
        prop_assert!(
            (got.app_bps[i] - apps[i]).abs() <= eps,
            "app {}: ideal {} oracle {}",
            app.name,
            got.app_bps[i],
            apps[i]
        );
        prop_assert!(got.app_bps[i] <= rate(app.max_rate_bps) + eps);
        prop_assert!(got.app_bps[i] <= app_demand[i] + eps);
    }
    // Work conservation: the link is full, or every tenant takes all that its
    // demand and caps let it.
    let total: f64 = got.tenant_bps.iter().sum();
    prop_assert!(total <= link + eps);
    if total < link - eps {
        for (t, tenant) in p.tenants.iter().enumerate() {
            prop_assert!(
                got.tenant_bps[t] >= tenant_demand[t] - eps,
                "the link has room ({total} of {link}) but tenant {} gets {} of {}",
                tenant.name,
                got.tenant_bps[t],
                tenant_demand[t]
            );
        }
    }
    // Relabelling: the same tenants in another order get the same.
    let (q, q_demands) = case.build(order);
    let permuted = ideal_allocation(&q, &q_demands);
    for (t, &i) in order.iter().enumerate() {
        prop_assert!(
            (permuted.tenant_bps[t] - got.tenant_bps[i]).abs() <= eps,
            "tenant t{i} gets {} in the first order and {} in another",
            got.tenant_bps[i],
            permuted.tenant_bps[t]
        );
        for (a, b) in q.tenants[t].apps.iter().zip(&p.tenants[i].apps) {
            prop_assert!((permuted.app_bps[a.index()] - got.app_bps[b.index()]).abs() <= eps);
        }
    }
    Ok(())
}

fn shuffled(n: usize, keys: &[Index]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for (i, key) in keys.iter().enumerate().take(n) {
        order.swap(i, i + key.index(n - i));
    }
    order
}

proptest! {
    /// Up to ten tenants: every shape of policy, many cases.
    #[test]
    fn one_host_ideal_is_the_definition(
        case in one_host(10),
        keys in proptest::collection::vec(any::<Index>(), 10),
    ) {
        let order = shuffled(case.tenants.len(), &keys);
        check_one_host(&case, &order)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        ProptestConfig::default().cases.div_ceil(8)
    ))]

    /// Hundreds of tenants, fewer cases.
    #[test]
    fn one_host_ideal_with_hundreds_of_tenants(
        case in one_host(400),
        keys in proptest::collection::vec(any::<Index>(), 400),
    ) {
        let order = shuffled(case.tenants.len(), &keys);
        check_one_host(&case, &order)?;
    }
}

// ---------------------------------------------------------------- across hosts

#[derive(Clone, Debug)]
struct VmSpec {
    weight: u32,
    priority: u8,
    min_permille: Option<u32>,
    max_mbit: Option<u64>,
    ingress_min_permille: Option<u32>,
    ingress_max_mbit: Option<u64>,
    /// An app `c` (port 5000) capped at this.
    app_cap_mbit: Option<u64>,
}

#[derive(Clone, Debug)]
struct HostSpec {
    link_mbit: u64,
    /// VM ids: names `v{id}`, stable under relabelling.
    vms: Vec<(usize, VmSpec)>,
}

#[derive(Clone, Debug)]
struct FlowSpec {
    from: usize,
    to: usize,
    /// Sent by the VM's capped app `c` (when it has one).
    capped_app: bool,
    demand: f64,
}

#[derive(Clone, Debug)]
struct Hosts {
    hosts: Vec<HostSpec>,
    fabric_mbit: Option<u64>,
    flows: Vec<FlowSpec>,
}

fn vm_spec() -> impl Strategy<Value = VmSpec> {
    (
        (1u32..=1000, 0u8..3),
        proptest::option::of(0u32..=1000),
        proptest::option::of(prop_oneof![100u64..1_000, 1_000u64..40_000]),
        proptest::option::of(0u32..=1000),
        proptest::option::of(prop_oneof![100u64..1_000, 1_000u64..40_000]),
        proptest::option::weighted(0.3, 100u64..20_000),
    )
        .prop_map(
            |(
                (weight, priority),
                min_permille,
                max_mbit,
                ingress_min_permille,
                ingress_max_mbit,
                app_cap_mbit,
            )| VmSpec {
                weight,
                priority,
                min_permille,
                max_mbit,
                ingress_min_permille,
                ingress_max_mbit,
                app_cap_mbit,
            },
        )
}

fn demand_bps() -> impl Strategy<Value = f64> {
    prop_oneof![3 => Just(INF), 1 => Just(0.0), 2 => 1e6..20e9f64]
}

fn hosts_case() -> impl Strategy<Value = Hosts> {
    (
        proptest::collection::vec(
            (1_000u64..40_000, proptest::collection::vec(vm_spec(), 1..4)),
            2..6,
        ),
        proptest::option::weighted(0.2, 1_000u64..60_000),
        proptest::collection::vec(
            (any::<Index>(), any::<Index>(), any::<bool>(), demand_bps()),
            1..16,
        ),
    )
        .prop_map(|(hosts, fabric_mbit, flows)| {
            let mut id = 0;
            let hosts: Vec<HostSpec> = hosts
                .into_iter()
                .map(|(link_mbit, vms)| HostSpec {
                    link_mbit,
                    vms: vms
                        .into_iter()
                        .map(|vm| {
                            id += 1;
                            (id - 1, vm)
                        })
                        .collect(),
                })
                .collect();
            let host_of: Vec<usize> = hosts
                .iter()
                .enumerate()
                .flat_map(|(h, host)| host.vms.iter().map(move |_| h))
                .collect();
            let flows = flows
                .into_iter()
                .filter_map(|(from, to, capped_app, demand)| {
                    let (from, to) = (from.index(id), to.index(id));
                    (host_of[from] != host_of[to]).then_some(FlowSpec {
                        from,
                        to,
                        capped_app,
                        demand,
                    })
                })
                .collect();
            Hosts {
                hosts,
                fabric_mbit,
                flows,
            }
        })
}

fn host_yaml(host: &HostSpec) -> String {
    let link = host.link_mbit * 1_000_000;
    let sum = |f: fn(&VmSpec) -> Option<u32>| -> u64 {
        host.vms
            .iter()
            .filter_map(|(_, v)| f(v))
            .map(u64::from)
            .sum::<u64>()
            .max(1000)
    };
    let (out_sum, in_sum) = (sum(|v| v.min_permille), sum(|v| v.ingress_min_permille));
    let mut yaml = format!("link: {{rate: {link}bit}}\ntenants:\n");
    for (id, vm) in &host.vms {
        yaml += &format!(
            "- name: v{id}\n  weight: {}\n  priority: {}\n",
            vm.weight, vm.priority
        );
        let min = vm.min_permille.map(|p| link * u64::from(p) / out_sum);
        if let Some(min) = min {
            yaml += &format!("  min_rate: {min}bit\n");
        }
        if let Some(max) = vm.max_mbit {
            yaml += &format!(
                "  max_rate: {}bit\n",
                (max * 1_000_000).max(min.unwrap_or(0))
            );
        }
        let in_min = vm
            .ingress_min_permille
            .map(|p| link * u64::from(p) / in_sum);
        if in_min.is_some() || vm.ingress_max_mbit.is_some() {
            yaml += "  ingress: {";
            if let Some(m) = in_min {
                yaml += &format!("min_rate: {m}bit");
            }
            if let Some(max) = vm.ingress_max_mbit {
                if in_min.is_some() {
                    yaml += ", ";
                }
                yaml += &format!(
                    "max_rate: {}bit",
                    (max * 1_000_000).max(in_min.unwrap_or(0)).max(1)
                );
            }
            yaml += "}\n";
        }
        if let Some(cap) = vm.app_cap_mbit {
            // The app's cap within the tenant's bound on app guarantees is free:
            // the app has no guarantee.
            yaml += &format!(
                "  apps:\n  - {{name: c, match: {{ports: [5000]}}, max_rate: {cap}Mbit}}\n"
            );
        }
    }
    yaml
}

impl Hosts {
    fn vm(&self, id: usize) -> &VmSpec {
        self.hosts
            .iter()
            .flat_map(|h| &h.vms)
            .find(|(i, _)| *i == id)
            .map(|(_, v)| v)
            .expect("generated VM")
    }

    fn scenario(&self) -> HostsScenario {
        let hosts = self
            .hosts
            .iter()
            .enumerate()
            .map(|(h, host)| {
                let yaml = host_yaml(host);
                Host {
                    name: format!("h{h}"),
                    policy: parse_policy(&yaml, "oracle.yaml")
                        .unwrap_or_else(|e| panic!("generated policy refused: {e}\n{yaml}")),
                }
            })
            .collect();
        let mut s = HostsScenario {
            name: "oracle".into(),
            hosts,
            fabric_rate_bps: self.fabric_mbit.map(|m| m * 1_000_000),
            feedback: Feedback::default(),
            duration_ns: 1_000_000_000,
            interval_ns: 100_000_000,
            seed: 1,
            enforcers: vec!["picnic".into()],
            traffic: Vec::new(),
        };
        for (n, flow) in self.flows.iter().enumerate() {
            let from = s.vm_by_name(&format!("v{}", flow.from)).expect("sender");
            let to = s.vm_by_name(&format!("v{}", flow.to)).expect("receiver");
            let policy = &s.host(from.host).policy;
            let app = if flow.capped_app && self.vm(flow.from).app_cap_mbit.is_some() {
                policy.app_by_name(from.tenant, "c").expect("capped app")
            } else {
                policy.catch_all_app(from.tenant)
            };
            s.traffic.push(HostsTraffic {
                traffic: Traffic {
                    name: format!("f{n}"),
                    tenant: from.tenant,
                    app,
                    kind: TrafficKind::Bulk { flows: 1 },
                    start_ns: 0,
                    stop_ns: 1_000_000_000,
                    cost_ns: 0,
                },
                host: from.host,
                to,
            });
        }
        s
    }

    fn demands(&self) -> Vec<f64> {
        self.flows.iter().map(|f| f.demand).collect()
    }
}

/// A unit of docs/hosts.md "The ideal across hosts": a VM at a capacity.
#[derive(Debug)]
struct OracleUnit {
    kid: Kid,
    cap: f64,
    flows: Vec<usize>,
}

/// A capacity with its units; `far[f]`: the VM at the other end of flow f.
#[derive(Debug)]
struct Capacity {
    what: String,
    bps: f64,
    units: Vec<OracleUnit>,
    far: Vec<String>,
}

/// The capacities of docs/hosts.md, step 1 and 2, read from the scenario.
fn capacities(s: &HostsScenario, demand: &[f64]) -> Vec<Capacity> {
    let active: Vec<usize> = (0..s.traffic.len()).filter(|&f| demand[f] > 0.0).collect();
    let name = |vm| s.tenant(vm).name.clone();
    let senders: Vec<String> = s.traffic.iter().map(|t| name(t.from())).collect();
    let receivers: Vec<String> = s.traffic.iter().map(|t| name(t.to)).collect();
    let mut out = Vec::new();
    let group = |flows: &mut dyn Iterator<Item = usize>, key: &dyn Fn(usize) -> String| {
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for f in flows {
            match groups.iter_mut().find(|(k, _)| *k == key(f)) {
                Some((_, g)) => g.push(f),
                None => groups.push((key(f), vec![f])),
            }
        }
        groups
    };
    for (h, host) in s.hosts.iter().enumerate() {
        let link = host.policy.link.rate_bps as f64;
        let out_units = group(
            &mut active
                .iter()
                .copied()
                .filter(|&f| s.traffic[f].host.index() == h),
            &|f| senders[f].clone(),
        );
        let in_units = group(
            &mut active
                .iter()
                .copied()
                .filter(|&f| s.traffic[f].to.host.index() == h),
            &|f| receivers[f].clone(),
        );
        let tenant = |n: &str| {
            host.policy
                .tenants
                .iter()
                .find(|t| t.name == n)
                .expect("a VM of the host")
        };
        out.push(Capacity {
            what: format!("{} out", host.name),
            bps: link,
            units: out_units
                .into_iter()
                .map(|(vm, flows)| {
                    let t = tenant(&vm);
                    OracleUnit {
                        kid: Kid {
                            demand: 0.0,
                            min: t.min_rate_bps.unwrap_or(0) as f64,
                            weight: f64::from(t.weight),
                            priority: t.priority,
                        },
                        cap: rate(t.max_rate_bps),
                        flows,
                    }
                })
                .collect(),
            far: receivers.clone(),
        });
        out.push(Capacity {
            what: format!("{} in", host.name),
            bps: link,
            units: in_units
                .into_iter()
                .map(|(vm, flows)| {
                    let t = tenant(&vm);
                    let envelope = t.ingress.unwrap_or_default();
                    OracleUnit {
                        kid: Kid {
                            demand: 0.0,
                            min: envelope.min_rate_bps.unwrap_or(0) as f64,
                            weight: f64::from(t.weight),
                            priority: 0,
                        },
                        cap: rate(envelope.max_rate_bps),
                        flows,
                    }
                })
                .collect(),
            far: senders.clone(),
        });
    }
    if let Some(fabric) = s.fabric_rate_bps {
        out.push(Capacity {
            what: "fabric".into(),
            bps: fabric as f64,
            units: group(&mut active.iter().copied(), &|f| senders[f].clone())
                .into_iter()
                .map(|(_, flows)| OracleUnit {
                    kid: Kid {
                        demand: 0.0,
                        min: 0.0,
                        weight: f64::from(s.tenant(s.traffic[flows[0]].from()).weight),
                        priority: 0,
                    },
                    cap: INF,
                    flows,
                })
                .collect(),
            far: receivers.clone(),
        });
    }
    let app_key = |f: usize| format!("{}/{}", senders[f], s.traffic[f].traffic.app.index());
    for (key, flows) in group(&mut active.iter().copied(), &app_key) {
        let t = &s.traffic[flows[0]];
        let cap = rate(s.host(t.host).policy.app(t.traffic.app).max_rate_bps);
        if cap.is_finite() {
            out.push(Capacity {
                what: format!("app {key}"),
                bps: cap,
                units: vec![OracleUnit {
                    kid: Kid {
                        demand: 0.0,
                        min: 0.0,
                        weight: 1.0,
                        priority: 0,
                    },
                    cap: INF,
                    flows,
                }],
                far: receivers.clone(),
            });
        }
    }
    out.retain(|c| !c.units.is_empty());
    out
}

fn equal(demand: f64) -> Kid {
    Kid {
        demand,
        min: 0.0,
        weight: 1.0,
        priority: 0,
    }
}

impl Capacity {
    fn flows(&self) -> impl Iterator<Item = usize> + '_ {
        self.units.iter().flat_map(|u| u.flows.iter().copied())
    }

    /// Step 2: the capacity shared among its units, each unit's share among
    /// the VMs at the far ends of its flows, each part among their flows.
    fn fill(&self, wants: &dyn Fn(usize) -> f64) -> Vec<(usize, f64)> {
        let kids: Vec<Kid> = self
            .units
            .iter()
            .map(|u| Kid {
                demand: u.flows.iter().map(|&f| wants(f)).sum::<f64>().min(u.cap),
                ..u.kid
            })
            .collect();
        let mut out = Vec::new();
        for (unit, bps) in self.units.iter().zip(water(self.bps, &kids)) {
            let mut fars: Vec<&String> = unit.flows.iter().map(|&f| &self.far[f]).collect();
            fars.sort();
            fars.dedup();
            let parts: Vec<Vec<usize>> = fars
                .iter()
                .map(|&far| {
                    unit.flows
                        .iter()
                        .copied()
                        .filter(|&f| &self.far[f] == far)
                        .collect()
                })
                .collect();
            let part_kids: Vec<Kid> = parts
                .iter()
                .map(|p| equal(p.iter().map(|&f| wants(f)).sum()))
                .collect();
            for (part, part_bps) in parts.iter().zip(water(bps, &part_kids)) {
                let flow_kids: Vec<Kid> = part.iter().map(|&f| equal(wants(f))).collect();
                out.extend(part.iter().copied().zip(water(part_bps, &flow_kids)));
            }
        }
        out
    }

    /// Step 3: what the capacity offers `flow` wanting everything, the others
    /// wanting the least of their demand and their rate.
    fn offer(&self, flow: usize, demand: &[f64], rates: &[f64]) -> f64 {
        self.fill(&|f| {
            if f == flow {
                INF
            } else {
                demand[f].min(rates[f])
            }
        })
        .into_iter()
        .find(|&(f, _)| f == flow)
        .map_or(INF, |(_, bps)| bps)
    }

    fn used(&self, rates: &[f64]) -> f64 {
        self.flows().map(|f| rates[f]).sum()
    }
}

fn check_hosts(case: &Hosts, rates: &[f64]) -> Result<(), TestCaseError> {
    let s = case.scenario();
    let demand = case.demands();
    let caps = capacities(&s, &demand);
    let scale = s.fastest_link_bps() as f64;
    let eps = 1e-7 * scale;
    for c in &caps {
        let used = c.used(rates);
        prop_assert!(
            used <= c.bps + eps,
            "{} carries {used} of {}",
            c.what,
            c.bps
        );
        for u in &c.units {
            let unit: f64 = u.flows.iter().map(|&f| rates[f]).sum();
            prop_assert!(
                unit <= u.cap + eps,
                "{}: a VM gets {unit} above its envelope {}",
                c.what,
                u.cap
            );
        }
    }
    for (f, (&rate, &want)) in rates.iter().zip(&demand).enumerate() {
        prop_assert!(
            rate >= 0.0 && rate <= want + eps,
            "flow {f}: {rate} of {want}"
        );
        if want <= 0.0 {
            continue;
        }
        let on_path: Vec<&Capacity> = caps.iter().filter(|c| c.flows().any(|g| g == f)).collect();
        // Agreement with the definition: the least offer of its capacities.
        let least = on_path
            .iter()
            .map(|c| c.offer(f, &demand, rates))
            .fold(want, f64::min);
        prop_assert!(
            (rate - least).abs() <= 1e-6 * scale,
            "flow {f} gets {rate}, its capacities offer at least {least}: {rates:?}"
        );
        // Work conservation: a flow below its demand meets a full capacity or
        // its VM's envelope there.
        if rate < want - eps {
            let held = on_path.iter().any(|c| {
                let unit = c
                    .units
                    .iter()
                    .find(|u| u.flows.contains(&f))
                    .expect("carrier");
                let unit_bps: f64 = unit.flows.iter().map(|&g| rates[g]).sum();
                c.used(rates) >= c.bps - 1e-6 * scale || unit_bps >= unit.cap - 1e-6 * scale
            });
            prop_assert!(
                held,
                "flow {f} at {rate} of {want} while every capacity on its path has room: {rates:?}"
            );
        }
    }
    // Guarantees and envelopes' minimum: a VM gets at least its guarantee at a
    // capacity, or all its flows want there (held elsewhere or by demand).
    for c in &caps {
        for u in &c.units {
            let unit: f64 = u.flows.iter().map(|&f| rates[f]).sum();
            let wants: f64 = u
                .flows
                .iter()
                .map(|&f| {
                    caps.iter()
                        .filter(|other| !std::ptr::eq(*other, c) && other.flows().any(|g| g == f))
                        .map(|other| other.offer(f, &demand, rates))
                        .fold(demand[f], f64::min)
                })
                .sum();
            prop_assert!(
                unit >= u.kid.min.min(wants).min(u.cap) - 1e-6 * scale,
                "{}: a VM gets {unit} below its guarantee {} (it wants {wants})",
                c.what,
                u.kid.min
            );
        }
    }
    Ok(())
}

/// The case with hosts, each host's VMs and the flows in another order.
fn relabelled(case: &Hosts, keys: &[Index]) -> Hosts {
    let order = shuffled(case.hosts.len(), keys);
    let hosts = order
        .iter()
        .enumerate()
        .map(|(n, &h)| {
            let host = &case.hosts[h];
            let vms = shuffled(host.vms.len(), &keys[n..])
                .into_iter()
                .map(|v| host.vms[v].clone())
                .collect();
            HostSpec {
                link_mbit: host.link_mbit,
                vms,
            }
        })
        .collect();
    let flows = shuffled(case.flows.len(), keys)
        .into_iter()
        .map(|f| case.flows[f].clone())
        .collect();
    Hosts {
        hosts,
        fabric_mbit: case.fabric_mbit,
        flows,
    }
}

fn rates_by_flow(case: &Hosts) -> Vec<(usize, usize, bool, u64, f64)> {
    let rates = ideal_across_hosts(&case.scenario(), &case.demands());
    let mut out: Vec<_> = case
        .flows
        .iter()
        .zip(rates)
        .map(|(f, r)| (f.from, f.to, f.capped_app, f.demand.to_bits(), r))
        .collect();
    out.sort_by(|a, b| {
        (a.0, a.1, a.2, a.3)
            .cmp(&(b.0, b.1, b.2, b.3))
            .then(a.4.total_cmp(&b.4))
    });
    out
}

proptest! {
    /// Hosts, VMs, envelopes, weights, priorities, app caps, a fabric, flows:
    /// the ideal is the fixed point of docs/hosts.md's offers, computed here
    /// again, and fits every capacity, envelope and guarantee.
    #[test]
    fn hosts_ideal_is_the_definition(case in hosts_case()) {
        let rates = ideal_across_hosts(&case.scenario(), &case.demands());
        check_hosts(&case, &rates)?;
    }

    /// Relabelling hosts, VMs and flows relabels the ideal.
    #[test]
    fn hosts_ideal_is_symmetric_under_relabelling(
        case in hosts_case(),
        keys in proptest::collection::vec(any::<Index>(), 32),
    ) {
        let first = rates_by_flow(&case);
        let second = rates_by_flow(&relabelled(&case, &keys));
        let scale = case.hosts.iter().map(|h| h.link_mbit).max().unwrap_or(1) as f64 * 1e6;
        for (a, b) in first.iter().zip(&second) {
            prop_assert_eq!((a.0, a.1, a.2, a.3), (b.0, b.1, b.2, b.3));
            prop_assert!((a.4 - b.4).abs() <= 1e-7 * scale, "{first:?}\n{second:?}");
        }
    }

    /// Identical hosts and flows repeated from every host to the host `offset`
    /// after it: a scenario that rotation maps onto itself has an ideal that
    /// rotation maps onto itself (issue 25, defect 7).
    #[test]
    fn hosts_ideal_of_a_ring_is_a_ring(
        hosts in 2usize..6,
        link_mbit in 1_000u64..40_000,
        vms in proptest::collection::vec(vm_spec(), 1..4),
        template in proptest::collection::vec(
            (any::<Index>(), any::<Index>(), any::<Index>(), any::<bool>(), demand_bps()),
            1..5,
        ),
    ) {
        let per_host = vms.len();
        let case = Hosts {
            hosts: (0..hosts)
                .map(|h| HostSpec {
                    link_mbit,
                    vms: vms.iter().enumerate().map(|(v, vm)| (h * per_host + v, vm.clone())).collect(),
                })
                .collect(),
            fabric_mbit: None,
            flows: (0..hosts)
                .flat_map(|h| {
                    template.iter().map(move |(from, offset, to, capped_app, demand)| {
                        let to_host = (h + 1 + offset.index(hosts - 1)) % hosts;
                        FlowSpec {
                            from: h * per_host + from.index(per_host),
                            to: to_host * per_host + to.index(per_host),
                            capped_app: *capped_app,
                            demand: *demand,
                        }
                    })
                })
                .collect(),
        };
        let rates = ideal_across_hosts(&case.scenario(), &case.demands());
        let scale = link_mbit as f64 * 1e6;
        let k = template.len();
        for f in k..rates.len() {
            prop_assert!(
                (rates[f] - rates[f % k]).abs() <= 1e-7 * scale,
                "flow {f} gets {} and its image on the first host {}: {rates:?}",
                rates[f],
                rates[f % k]
            );
        }
        check_hosts(&case, &rates)?;
    }
}

/// Issue 25, defect 7: four 10 Gbit/s hosts, each with VM `a` (min 1, max 6,
/// ingress [1, 5]) and `b` (weight 3, max 8, ingress [2, 7]), bulk flows that
/// host i -> i+1 maps onto themselves. The ideal gave symmetric flows different
/// rates, and flows below free capacity on their whole path.
#[test]
fn defect_7_symmetric_hosts_have_a_symmetric_work_conserving_ideal() {
    let a = VmSpec {
        weight: 1,
        priority: 1,
        min_permille: Some(100),
        max_mbit: Some(6_000),
        ingress_min_permille: Some(100),
        ingress_max_mbit: Some(5_000),
        app_cap_mbit: None,
    };
    let b = VmSpec {
        weight: 3,
        min_permille: None,
        max_mbit: Some(8_000),
        ingress_min_permille: Some(200),
        ingress_max_mbit: Some(7_000),
        ..a.clone()
    };
    let hosts: Vec<HostSpec> = (0..4)
        .map(|h| HostSpec {
            link_mbit: 10_000,
            vms: vec![(2 * h, a.clone()), (2 * h + 1, b.clone())],
        })
        .collect();
    // Every VM to every VM of the next host, and to every VM of all other hosts.
    let templates: [&[usize]; 2] = [&[1], &[1, 2, 3]];
    for offsets in templates {
        let mut flows = Vec::new();
        for &offset in offsets {
            for from in 0..2 {
                for to in 0..2 {
                    for h in 0..4 {
                        flows.push(FlowSpec {
                            from: 2 * h + from,
                            to: 2 * ((h + offset) % 4) + to,
                            capped_app: false,
                            demand: INF,
                        });
                    }
                }
            }
        }
        let case = Hosts {
            hosts: hosts.clone(),
            fabric_mbit: None,
            flows,
        };
        let s = case.scenario();
        let rates = ideal_across_hosts(&s, &case.demands());
        for (f, chunk) in rates.chunks(4).enumerate() {
            for &r in chunk {
                assert!(
                    (r - chunk[0]).abs() <= 1.0,
                    "offsets {offsets:?}: flow group {f} differs between hosts: {chunk:?}"
                );
            }
        }
        check_hosts(&case, &rates).expect("the ideal of docs/hosts.md");
    }
}

/// docs/hosts.md "Where capacities disagree": p from A to X, q from B to Y, h1's
/// link weighing A and B 1:1, h2's weighing X and Y 3:1. Every split from 5/5
/// to 7.5/2.5 is a fixed point; the ideal is one of them, the same whichever
/// order the file lists hosts, VMs and flows in.
#[test]
fn where_capacities_disagree_the_ideal_is_one_of_the_fixed_points() {
    let vm = |weight| VmSpec {
        weight,
        priority: 1,
        min_permille: None,
        max_mbit: None,
        ingress_min_permille: None,
        ingress_max_mbit: None,
        app_cap_mbit: None,
    };
    let flow = |from, to| FlowSpec {
        from,
        to,
        capped_app: false,
        demand: INF,
    };
    let case = Hosts {
        hosts: vec![
            HostSpec {
                link_mbit: 10_000,
                vms: vec![(0, vm(1)), (1, vm(1))],
            },
            HostSpec {
                link_mbit: 10_000,
                vms: vec![(2, vm(3)), (3, vm(1))],
            },
        ],
        fabric_mbit: None,
        flows: vec![flow(0, 2), flow(1, 3)],
    };
    let rates = ideal_across_hosts(&case.scenario(), &case.demands());
    check_hosts(&case, &rates).expect("a fixed point of docs/hosts.md");
    assert!(
        (5e9..=7.5e9).contains(&rates[0]) && (rates[0] + rates[1] - 10e9).abs() < 1.0,
        "{rates:?}"
    );
    eprintln!("where capacities disagree: {rates:?}");
    let swapped = Hosts {
        hosts: case
            .hosts
            .iter()
            .rev()
            .map(|h| HostSpec {
                link_mbit: h.link_mbit,
                vms: h.vms.iter().rev().cloned().collect(),
            })
            .collect(),
        fabric_mbit: None,
        flows: case.flows.iter().rev().cloned().collect(),
    };
    let again = ideal_across_hosts(&swapped.scenario(), &swapped.demands());
    assert!(
        (again[1] - rates[0]).abs() < 1.0 && (again[0] - rates[1]).abs() < 1.0,
        "{rates:?} {again:?}"
    );
}
