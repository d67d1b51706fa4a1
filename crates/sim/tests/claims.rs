//! The claims oracle: every registry row held, in the simulator, to every bound
//! `nicsched check` states for it (`sched::bounds`), on one-host scenarios generated
//! from the whole grammar, with the run's own checks and the ideal's totals besides.
//! A failure prints the scenario's seed and YAML (shrunk by proptest).
//!
//! CI runs `CASES_DEFAULT` cases; before a release, docs/results/claims.md gives the
//! longer run (`PROPTEST_CASES`) and the survey (`CLAIMS_SURVEY=1`: every bound
//! exceeded is printed rather than the first failed; `CLAIMS_ROWS=a,b` surveys only
//! those rows; `CLAIMS_LONGER=K` runs every case K times as many intervals, for what
//! shows only after seconds of overload). Every bound a row states is held: none is
//! skipped.

use policy::parse_scenario;
use proptest::prelude::*;
use report::{RunRecord, claims};
use std::fmt::Write as _;
use std::path::Path;

const CASES_DEFAULT: u32 = 48;

/// Flows in one generated case at most, about.
const FLOWS_PER_CASE: u32 = 120;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Bulk,
    Udp,
    Poisson,
    Rpc,
}

#[derive(Clone, Debug)]
struct App {
    weight: u32,
    priority: u8,
    /// Parts of the tenant's guarantee and of the link, for `min_rate`/`max_rate`.
    min_part: Option<f64>,
    max_part: Option<f64>,
    matched: bool,
    split: Option<f64>,
    kind: Kind,
    flows: u32,
    /// Part of the link a udp or poisson traffic offers; rpc's rate when open loop.
    load: f64,
    /// In intervals; `None`: the whole run.
    window: Option<(u32, u32)>,
    cost_ns: u64,
}

#[derive(Clone, Debug)]
struct Tenant {
    weight: u32,
    priority: u8,
    min_part: Option<f64>,
    max_part: Option<f64>,
    cores: Option<Vec<u16>>,
    apps: Vec<App>,
    /// Whether a declared app named `default` without `match` closes the list.
    catch_all: bool,
    /// Whether the last app is the implicit `default` (weight 1, priority 1, no
    /// rates), taking what no declared app's `match` does: every declared app
    /// then has one, priority 1 and a weight of at most 4. Scenarios written
    /// from the docs found `htb` giving such an app 1.3 kbit/s of an ideal 51.8
    /// Mbit/s beside a TCP sibling.
    unmatched: bool,
}

#[derive(Clone, Debug)]
struct Case {
    link_mbit: u64,
    queues: u16,
    engine_cores: u16,
    packet_cost_ns: u64,
    intervals: u32,
    interval_ms: u32,
    seed: u64,
    tenants: Vec<Tenant>,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => Just(Kind::Bulk),
        2 => Just(Kind::Udp),
        1 => Just(Kind::Poisson),
        1 => Just(Kind::Rpc),
    ]
}

fn app(backlogged: bool) -> impl Strategy<Value = App> {
    (
        (1u32..1000, prop_oneof![3 => Just(1u8), 1 => 0u8..8]),
        (
            proptest::option::weighted(0.2, 0.05f64..0.9),
            proptest::option::weighted(0.25, 0.02f64..1.5),
        ),
        (
            any::<bool>(),
            proptest::option::weighted(0.15, 0.05f64..0.6),
        ),
        (kind(), 1u32..20, 0.01f64..1.2),
        (
            proptest::option::weighted(0.3, (0u32..12, 1u32..12)),
            prop_oneof![6 => Just(0u64), 1 => 100u64..3000],
        ),
    )
        .prop_map(
            move |(
                (weight, priority),
                (min_part, max_part),
                (matched, split),
                (kind, flows, load),
                (window, cost_ns),
            )| {
                App {
                    weight,
                    priority,
                    min_part,
                    max_part,
                    matched,
                    split,
                    kind: if backlogged { Kind::Bulk } else { kind },
                    flows,
                    load,
                    window: if backlogged { None } else { window },
                    cost_ns: if backlogged { 0 } else { cost_ns },
                }
            },
        )
}

fn tenant(backlogged: bool) -> impl Strategy<Value = Tenant> {
    (
        (
            prop_oneof![2 => Just(1u32), 3 => 1u32..1001],
            prop_oneof![4 => Just(1u8), 1 => 0u8..8],
        ),
        (
            proptest::option::weighted(0.25, 0.05f64..1.0),
            proptest::option::weighted(0.25, 0.01f64..1.5),
        ),
        proptest::option::weighted(0.3, proptest::collection::btree_set(0u16..8, 1..4)),
        proptest::collection::vec(app(backlogged), 1..4),
        prop_oneof![3 => Just((true, false)), 2 => Just((false, false)), 2 => Just((false, true))],
    )
        .prop_map(
            |(
                (weight, priority),
                (min_part, max_part),
                cores,
                mut apps,
                (catch_all, unmatched),
            )| {
                let unmatched = unmatched && apps.len() > 1;
                if unmatched {
                    // Beside declared apps of weight 100 the default app's share is
                    // too small to judge, and beside another priority `htb` states
                    // no bound on apps.
                    for app in &mut apps {
                        app.weight = 1 + app.weight % 4;
                        app.priority = 1;
                    }
                    let last = apps.last_mut().expect("more than one app");
                    *last = App {
                        window: last.window,
                        cost_ns: last.cost_ns,
                        ..plain_app(last.kind, last.flows, last.load, false)
                    };
                }
                Tenant {
                    weight,
                    priority,
                    min_part,
                    max_part,
                    cores: cores.map(|c| c.into_iter().collect()),
                    apps,
                    catch_all,
                    unmatched,
                }
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    let backlogged = prop_oneof![Just(true), Just(false)];
    let count = prop_oneof![8 => 1usize..9, 1 => 9usize..100, 1 => 100usize..400];
    (backlogged, count)
        .prop_flat_map(|(backlogged, count)| {
            (
                (
                    if count > 8 {
                        Just(100u64).boxed()
                    } else {
                        prop_oneof![Just(100u64), Just(300), Just(1000)].boxed()
                    },
                    1u16..33,
                    1u16..12,
                    if backlogged {
                        Just(0u64).boxed()
                    } else {
                        prop_oneof![3 => Just(0u64), 1 => 50u64..500].boxed()
                    },
                ),
                (12u32..24, prop_oneof![Just(200u32), Just(250), Just(500)]),
                0u64..1_000_000,
                proptest::collection::vec(tenant(backlogged), count..=count),
            )
        })
        .prop_map(
            |(
                (link_mbit, queues, engine_cores, packet_cost_ns),
                (intervals, interval_ms),
                seed,
                mut tenants,
            )| {
                // Keeps a case's simulated work bounded whatever its tenant count.
                let flows_max = (FLOWS_PER_CASE / tenants.len() as u32 / 3).max(1);
                for app in tenants.iter_mut().flat_map(|t| t.apps.iter_mut()) {
                    app.flows = app.flows.min(flows_max);
                }
                Case {
                    link_mbit,
                    queues,
                    engine_cores,
                    packet_cost_ns,
                    intervals: intervals * longer(),
                    interval_ms,
                    seed,
                    tenants,
                }
            },
        )
}

/// An app of weight 1 and priority 1 with no rates, split, window or cost.
fn plain_app(kind: Kind, flows: u32, load: f64, matched: bool) -> App {
    App {
        weight: 1,
        priority: 1,
        min_part: None,
        max_part: None,
        matched,
        split: None,
        kind,
        flows,
        load,
        window: None,
        cost_ns: 0,
    }
}

/// A case of 16 queues, one engine core, no packet cost and intervals of 500 ms.
fn one_core_case(link_mbit: u64, intervals: u32, seed: u64, tenants: Vec<Tenant>) -> Case {
    Case {
        link_mbit,
        queues: 16,
        engine_cores: 1,
        packet_cost_ns: 0,
        intervals: intervals * longer(),
        interval_ms: 500,
        seed,
        tenants,
    }
}

/// A tenant of priority 1 with no rates or cores of its own.
fn plain_tenant(weight: u32, apps: Vec<App>) -> Tenant {
    Tenant {
        weight,
        priority: 1,
        min_part: None,
        max_part: None,
        cores: None,
        apps,
        catch_all: false,
        unmatched: false,
    }
}

/// One heavy tenant beside many light ones of weight 1, every tenant bulk: the
/// shape the cases above rarely draw (their weights are spread), where scenarios
/// written from the docs found `wf2q` 17.7% off its 1% (a weight-10 tenant beside
/// ten of weight 1, one flow each). Half the cases have at most 8 tenants, where
/// `htb` and `valve` state their share bounds, in intervals of a second, where
/// two sends' grain is a few percent of a light tenant's ideal: `htb` was 6.0%
/// off its 5% with weight 17 beside seven, one flow each at 1 Gbit/s (seed 79 of
/// the survey, where one case of five had 8 tenants or fewer and one of three
/// intervals of a second), and states no bound now where one tenant is more
/// than half the link.
fn heavy_case() -> impl Strategy<Value = Case> {
    let few = (
        prop_oneof![2u32..9, 9u32..33],
        2usize..8,
        (8u32..16, Just(1000u32)),
    );
    let many = (
        2u32..101,
        2usize..31,
        (8u32..16, prop_oneof![Just(250u32), Just(500), Just(1000)]),
    );
    (
        prop_oneof![few, many],
        1u32..5,
        prop_oneof![Just(100u64), Just(300), Just(1000)],
        0u64..1_000_000,
    )
        .prop_map(
            |((heavy, light, (intervals, interval_ms)), flows, link_mbit, seed)| {
                let tenant = |weight: u32| {
                    plain_tenant(weight, vec![plain_app(Kind::Bulk, flows, 1.0, false)])
                };
                let mut tenants = vec![tenant(heavy)];
                tenants.extend((0..light).map(|_| tenant(1)));
                Case {
                    interval_ms,
                    ..one_core_case(link_mbit, intervals, seed, tenants)
                }
            },
        )
}

/// Tenants whose declared apps each have a `match` and whose other traffic goes
/// to the implicit `default` app, all of one priority and none split, so that
/// `htb` states its share bounds: the shape where a scenario written from the
/// docs found `htb` giving the default app 1.3 kbit/s of an ideal 51.8 Mbit/s
/// beside a TCP sibling (it had no assured rate and lived on what its siblings
/// left). Half the cases are all bulk, for the bounds stated with every tenant
/// backlogged. Some declared apps are capped, so that a tenant's declared apps
/// may take less than its share without the default app.
fn default_case() -> impl Strategy<Value = Case> {
    let kind = |bulk: bool| if bulk { Kind::Bulk } else { Kind::Udp };
    let declared = (
        (any::<bool>(), 1u32..5, 1u32..5, 0.05f64..1.0),
        proptest::option::weighted(0.25, 0.02f64..0.3),
    )
        .prop_map(move |((bulk, flows, weight, load), max_part)| App {
            weight,
            max_part,
            ..plain_app(kind(bulk), flows, load, true)
        });
    let tenant = (
        1u32..9,
        proptest::collection::vec(declared, 1..3),
        proptest::option::weighted(0.7, (any::<bool>(), 1u32..4, 0.02f64..0.6)),
        proptest::option::weighted(0.2, 0.05f64..0.6),
    )
        .prop_map(move |(weight, mut apps, default, max_part)| {
            if let Some((bulk, flows, load)) = default {
                apps.push(plain_app(kind(bulk), flows, load, false));
            }
            Tenant {
                max_part,
                unmatched: default.is_some(),
                ..plain_tenant(weight, apps)
            }
        });
    (
        proptest::collection::vec(tenant, 2..7),
        any::<bool>(),
        prop_oneof![Just(100u64), Just(300), Just(1000)],
        (10u32..16, 0u64..1_000_000),
    )
        .prop_map(|(mut tenants, backlogged, link_mbit, (intervals, seed))| {
            if backlogged {
                for app in tenants.iter_mut().flat_map(|t| t.apps.iter_mut()) {
                    app.kind = Kind::Bulk;
                }
            }
            one_core_case(link_mbit, intervals, seed, tenants)
        })
}

/// A tenant capped at or below its share beside tenants of several apps each,
/// every tenant bulk: where `htb` gave a tenant of two apps 122.1 of a cap of
/// 131.2 Mbit/s (its idle `default` app's part of its rate is lent only while no
/// leaf has tokens of its own), so that `check` states no share bound for a
/// capped tenant of several apps, and does for one of a single app, declared or
/// not, which this holds it to. Its apps all have a `match` in half the cases,
/// so that its implicit `default` app is idle.
fn capped_case() -> impl Strategy<Value = Case> {
    let other = (
        1u32..9,
        proptest::collection::vec((1u32..5, 1u32..4), 1..4),
        proptest::option::weighted(0.5, 1u32..4),
    )
        .prop_map(|(weight, apps, default)| {
            let mut apps: Vec<App> = apps
                .into_iter()
                .map(|(flows, weight)| App {
                    weight,
                    ..plain_app(Kind::Bulk, flows, 1.0, true)
                })
                .collect();
            if let Some(flows) = default {
                apps.push(plain_app(Kind::Bulk, flows, 1.0, false));
            }
            Tenant {
                unmatched: default.is_some(),
                ..plain_tenant(weight, apps)
            }
        });
    (
        (1u32..9, 1u32..7, 0.3f64..1.0, (1usize..3, any::<bool>())),
        proptest::collection::vec(other, 1..8),
        prop_oneof![Just(100u64), Just(300), Just(1000)],
        (10u32..16, 0u64..1_000_000),
    )
        .prop_map(
            |(
                (weight, flows, cap, (apps, all_matched)),
                mut tenants,
                link_mbit,
                (intervals, seed),
            )| {
                let weights: u32 = weight + tenants.iter().map(|t| t.weight).sum::<u32>();
                let capped = Tenant {
                    max_part: Some(cap * f64::from(weight) / f64::from(weights)),
                    ..plain_tenant(
                        weight,
                        (0..apps)
                            .map(|a| plain_app(Kind::Bulk, flows, 1.0, all_matched || a + 1 < apps))
                            .collect(),
                    )
                };
                tenants.insert(0, capped);
                one_core_case(link_mbit, intervals, seed, tenants)
            },
        )
}

/// A steady sender under its share, often guaranteed, beside bulk and flooding
/// tenants on fewer engine cores than tenants, for seconds: the shape where a
/// scenario written from the docs found the parallel `valve` 9.5% over its
/// ideal against the 7% `check` states (the steady sender waited for turns
/// behind its core mates' TSO sends, was counted hungry and given its
/// guarantee, and its core mates sent what it did not use).
fn steady_case() -> impl Strategy<Value = Case> {
    let app = |kind: Kind, flows: u32, load: f64| plain_app(kind, flows, load, true);
    let other = (
        1u32..9,
        proptest::collection::vec((any::<bool>(), 1u32..5, 0.8f64..2.0, 1u32..4), 1..3),
    )
        .prop_map(move |(weight, apps)| {
            let apps = apps
                .into_iter()
                .map(|(bulk, flows, load, weight)| App {
                    weight,
                    ..if bulk {
                        app(Kind::Bulk, flows, 1.0)
                    } else {
                        app(Kind::Udp, flows.min(2), load)
                    }
                })
                .collect();
            plain_tenant(weight, apps)
        });
    (
        (
            1u32..7,
            proptest::option::weighted(0.7, 0.3f64..1.0),
            0.1f64..0.5,
        ),
        proptest::collection::vec(other, 2..6),
        (prop_oneof![Just(300u64), Just(1000)], 2u16..5),
        (10u32..20, 0u64..1_000_000),
    )
        .prop_map(
            move |(
                (weight, min_part, load),
                others,
                (link_mbit, engine_cores),
                (intervals, seed),
            )| {
                let mut tenants = vec![Tenant {
                    min_part,
                    ..plain_tenant(weight, vec![app(Kind::Udp, 1, load)])
                }];
                tenants.extend(others);
                Case {
                    link_mbit,
                    queues: 1,
                    engine_cores,
                    packet_cost_ns: 0,
                    intervals: intervals * longer(),
                    interval_ms: 500,
                    seed,
                    tenants,
                }
            },
        )
}

impl Tenant {
    fn app_name(&self, j: usize) -> String {
        if (self.catch_all || self.unmatched) && j + 1 == self.apps.len() {
            "default".to_string()
        } else {
            format!("a{j}")
        }
    }
}

fn kbit(bps: f64) -> String {
    format!("{}kbit", (bps / 1e3).round().max(1.0) as u64)
}

/// A guarantee in kbit, rounded down, so that guarantees that add up to at most
/// their parent's still do once written (hundreds of them rounded up did not).
fn kbit_floor(bps: f64) -> String {
    format!("{}kbit", (bps / 1e3).floor().max(1.0) as u64)
}

impl Case {
    fn link_bps(&self) -> f64 {
        self.link_mbit as f64 * 1e6
    }

    /// The tenants' guarantees: each at most an equal part of the link, so that they
    /// add up to at most the link (up to all of it with one tenant).
    fn tenant_min_bps(&self) -> Vec<Option<f64>> {
        let part = self.link_bps() * (1.0 - 1e-3) / self.tenants.len() as f64;
        self.tenants
            .iter()
            .map(|t| t.min_part.map(|p| p * part))
            .collect()
    }

    fn duration_ms(&self) -> u32 {
        self.intervals * self.interval_ms
    }

    fn yaml(&self) -> String {
        let link = self.link_bps();
        let mut text = format!(
            "name: claims\nseed: {}\nduration: {}ms\ninterval: {}ms\npolicy:\n  link: {{ rate: {}Mbit, queues: {} }}\n  engine: {{ cores: {}, packet_cost: {}ns }}\n  tenants:\n",
            self.seed,
            self.duration_ms(),
            self.interval_ms,
            self.link_mbit,
            self.queues,
            self.engine_cores,
            self.packet_cost_ns
        );
        let mins = self.tenant_min_bps();
        for (i, t) in self.tenants.iter().enumerate() {
            let _ = writeln!(
                text,
                "    - name: t{i}\n      weight: {}\n      priority: {}",
                t.weight, t.priority
            );
            let min = mins[i];
            if let Some(min) = min {
                let _ = writeln!(text, "      min_rate: {}", kbit_floor(min));
            }
            if let Some(part) = t.max_part {
                let max = (part * link).max(min.unwrap_or(0.0) + 1e3);
                let _ = writeln!(text, "      max_rate: {}", kbit(max));
            }
            if let Some(cores) = &t.cores {
                let list: Vec<String> = cores.iter().map(u16::to_string).collect();
                let _ = writeln!(text, "      cores: [{}]", list.join(", "));
            }
            let _ = writeln!(text, "      apps:");
            let app_mins: f64 = t.apps.iter().filter_map(|a| a.min_part).sum();
            let app_scale = if app_mins > 1.0 { 1.0 / app_mins } else { 1.0 };
            for (j, a) in t.apps.iter().enumerate() {
                if t.unmatched && j + 1 == t.apps.len() {
                    break;
                }
                let name = t.app_name(j);
                let _ = writeln!(
                    text,
                    "        - name: {name}\n          weight: {}\n          priority: {}",
                    a.weight, a.priority
                );
                let app_min = match (min, a.min_part) {
                    (Some(min), Some(part)) => Some(min * part * app_scale * (1.0 - 1e-3)),
                    _ => None,
                };
                if let Some(app_min) = app_min {
                    let _ = writeln!(text, "          min_rate: {}", kbit_floor(app_min));
                }
                if let Some(part) = a.max_part {
                    let max = (part * link).max(app_min.unwrap_or(0.0) + 1e3);
                    let _ = writeln!(text, "          max_rate: {}", kbit(max));
                }
                // Ports of their own keep every app reachable; the last one may
                // go without, and take the rest.
                let last = j + 1 == t.apps.len();
                if !last || (a.matched && !t.catch_all) {
                    let proto = match a.kind {
                        Kind::Bulk | Kind::Rpc => "tcp",
                        Kind::Udp | Kind::Poisson => "udp",
                    };
                    let _ = writeln!(
                        text,
                        "          match: {{ proto: {proto}, ports: [{}] }}",
                        5000 + j
                    );
                }
                if let Some(part) = a.split {
                    let _ = writeln!(
                        text,
                        "          split: {{ by: flow, max_rate: {} }}",
                        kbit(part * link)
                    );
                }
            }
        }
        text += "traffic:\n";
        for (i, t) in self.tenants.iter().enumerate() {
            for (j, a) in t.apps.iter().enumerate() {
                let name = t.app_name(j);
                let _ = write!(text, "  - {{ tenant: t{i}, app: {name}, ");
                // The offered load is spread over the tenants, so that some scenarios
                // overload the link and others leave room.
                let rate = kbit(a.load * link / self.tenants.len().min(4) as f64);
                let _ = match a.kind {
                    Kind::Bulk => write!(text, "kind: bulk, flows: {}", a.flows),
                    Kind::Udp => write!(text, "kind: udp, rate: {rate}, flows: {}", a.flows),
                    Kind::Poisson => write!(
                        text,
                        "kind: poisson, rate: {rate}, size: 200B, flows: {}",
                        a.flows
                    ),
                    Kind::Rpc => write!(
                        text,
                        "kind: rpc, request: 64B, response: 4KiB, concurrency: {}",
                        a.flows
                    ),
                };
                if let Some((from, length)) = a.window {
                    let (from, length) = (from * longer(), length * longer());
                    let from = from.min(self.intervals - 2);
                    let to = (from + length).min(self.intervals);
                    let _ = write!(
                        text,
                        ", start: {}ms, stop: {}ms",
                        from * self.interval_ms + self.interval_ms / 3,
                        to * self.interval_ms
                    );
                }
                if a.cost_ns > 0 {
                    let _ = write!(text, ", cost: {}ns", a.cost_ns);
                }
                text += " }\n";
            }
        }
        text
    }

    fn no_cost(&self) -> bool {
        self.packet_cost_ns == 0
            && self
                .tenants
                .iter()
                .all(|t| t.apps.iter().all(|a| a.cost_ns == 0))
    }
}

/// The ideal's totals in every interval: no tenant above its cap, the tenants
/// within the link, a tenant's apps adding up to it, and the link full whenever a
/// tenant is backlogged with no cap on its way and no engine cost.
fn ideal_totals(case: &Case, run: &RunRecord, policy: &policy::Policy) -> Result<(), String> {
    let link = run.link_rate_bps as f64;
    for (k, i) in run.intervals.iter().enumerate() {
        let total: f64 = (0..run.tenants.len()).map(|t| i.tenant_ideal_bps(t)).sum();
        if total > link * (1.0 + 1e-9) {
            return Err(format!(
                "interval {k}: ideals add up to {total} above the link {link}"
            ));
        }
        for (t, tenant) in policy.tenants.iter().enumerate() {
            let ideal = i.tenant_ideal_bps(t);
            let apps: f64 = (0..run.classes.len())
                .filter(|&c| run.class_tenant[c] == t)
                .map(|c| i.class_ideal_bps(c))
                .sum();
            if (apps - ideal).abs() > 1e-6 * link {
                return Err(format!(
                    "interval {k}: {}'s apps' ideals add up to {apps}, its own is {ideal}",
                    tenant.name
                ));
            }
            if tenant
                .max_rate_bps
                .is_some_and(|max| ideal > max as f64 * (1.0 + 1e-9))
            {
                return Err(format!(
                    "interval {k}: {} has an ideal {ideal} above its cap",
                    tenant.name
                ));
            }
        }
        let uncapped_bulk = case.no_cost()
            && case.tenants.iter().enumerate().any(|(t, spec)| {
                spec.max_part.is_none()
                    && spec.apps.iter().any(|a| {
                        a.kind == Kind::Bulk
                            && a.max_part.is_none()
                            && a.split.is_none()
                            && a.window.is_none()
                    })
                    && i.tenant_active(t)
            });
        if i.steady && uncapped_bulk && total < link * (1.0 - 1e-6) {
            return Err(format!(
                "interval {k}: a tenant is backlogged without a cap, yet the ideals add up to {total} of {link}"
            ));
        }
    }
    Ok(())
}

fn hold(case: &Case) -> Result<(), TestCaseError> {
    hold_rows(case, sched::registry::built())
}

fn hold_rows<'a>(
    case: &Case,
    rows: impl Iterator<Item = &'a sched::EnforcerInfo>,
) -> Result<(), TestCaseError> {
    let text = case.yaml();
    let scenario = parse_scenario(
        &text,
        "claims.yaml",
        Path::new("."),
        &sched::registry::names(),
    )
    .map_err(|e| {
        TestCaseError::fail(format!(
            "the generator wrote a scenario the parser refuses: {e}\n{text}"
        ))
    })?;
    let context = || format!("scenario seed {}:\n{text}", case.seed);
    // A survey that hangs names its case: the last one it started is on disk.
    if let Some(path) = std::env::var_os("CLAIMS_LAST").filter(|_| survey()) {
        std::fs::write(path, &text).expect("CLAIMS_LAST is writable");
    }
    for info in rows {
        if !surveyed(info.name) {
            continue;
        }
        let Ok(bounds) = sched::bounds(info.name, &scenario.policy) else {
            unreachable!("{} is a registry row", info.name)
        };
        let Ok(run) = sim::run(&scenario, info.name, sim::HostModel::default(), &mut |_| {}) else {
            // A row that cannot run the policy (tonic with too few queues) says so
            // at build; check says the same.
            continue;
        };
        // The run's `claims` check holds it to the bounds below, which this test
        // reports bound by bound (and, in a survey, all of them).
        let failed: Vec<_> = run
            .failed_checks()
            .filter(|c| c.name != "claims")
            .map(|c| format!("{}: {}", c.name, c.detail))
            .collect();
        prop_assert!(
            failed.is_empty(),
            "{}: checks failed: {failed:?}\n{}",
            info.name,
            context()
        );
        ideal_totals(case, &run, &scenario.policy)
            .map_err(|e| TestCaseError::fail(format!("{}: {e}\n{}", info.name, context())))?;
        for bound in bounds
            .iter()
            .filter(|b| claims::condition_holds(b.condition, &scenario))
        {
            if let Some((value, subject)) = claims::figure(&run, &scenario.policy, bound) {
                // A survey, for before a release: every bound exceeded, not only the first.
                if survey() {
                    if value > bound.max {
                        println!(
                            "EXCEEDED {} {subject} {value:.4} `{bound}` (scenario seed {})",
                            info.name, case.seed
                        );
                        println!("{text}");
                    }
                    continue;
                }
                prop_assert!(
                    value <= bound.max,
                    "{}: {subject}: {:.4} against the bound `{bound}`\n{}",
                    info.name,
                    value,
                    context()
                );
            }
        }
    }
    Ok(())
}

/// Every bound exceeded printed rather than the first failed.
fn survey() -> bool {
    std::env::var_os("CLAIMS_SURVEY").is_some()
}

/// Whether the survey runs `row`: all rows, or those `CLAIMS_ROWS` names (commas).
fn surveyed(row: &str) -> bool {
    std::env::var("CLAIMS_ROWS").map_or(true, |rows| !survey() || rows.split(',').any(|r| r == row))
}

/// `CLAIMS_LONGER`: how many times as many intervals each case runs (default 1).
fn longer() -> u32 {
    std::env::var("CLAIMS_LONGER")
        .ok()
        .and_then(|k| k.parse().ok())
        .filter(|&k| k >= 1)
        .unwrap_or(1)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES_DEFAULT)
}

/// The same cases on every CI run unless `PROPTEST_RNG_SEED` asks for others, so
/// that CI fails on a change, not on the draw.
fn rng_seed() -> proptest::test_runner::RngSeed {
    std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(proptest::test_runner::RngSeed::Fixed(CI_RNG_SEED))
}

const CI_RNG_SEED: u64 = 25;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 64,
        rng_seed: rng_seed(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_row_keeps_every_bound_check_states(case in case()) {
        hold(&case)?;
    }

    #[test]
    fn every_row_keeps_every_bound_beside_one_heavy_tenant(case in heavy_case()) {
        hold(&case)?;
    }

    #[test]
    fn every_row_keeps_every_bound_with_traffic_for_the_default_app(case in default_case()) {
        hold(&case)?;
    }

    #[test]
    fn every_row_keeps_every_bound_beside_a_tenant_capped_below_its_share(case in capped_case()) {
        hold(&case)?;
    }

    /// The parallel `valve` (a shard per engine core, rates recomputed from shared
    /// counters every ΔT) against the bounds `check` states for each core count,
    /// on the same scenario at 1, 2 and 4 engine cores.
    #[test]
    fn valve_keeps_its_bounds_on_one_two_and_four_cores(case in case()) {
        for cores in [1, 2, 4] {
            let case = Case { engine_cores: cores, ..case.clone() };
            hold_rows(&case, sched::registry::find("valve").into_iter())?;
        }
    }

    #[test]
    fn valve_keeps_its_bounds_beside_a_steady_sender_on_shared_cores(case in steady_case()) {
        hold_rows(&case, sched::registry::find("valve").into_iter())?;
    }
}

/// Nothing skipped silently: the rows that state no bound are named in the test's
/// output, and each is a multiqueue baseline that promises nothing of shares.
#[test]
fn rows_without_bounds_are_named() {
    let policy = policy::parse_policy(
        "link: { rate: 1Gbit }\ntenants:\n  - { name: a, weight: 3 }\n  - { name: b }\n",
        "p.yaml",
    )
    .unwrap();
    let unbounded: Vec<_> = sched::registry::built()
        .filter(|info| sched::bounds(info.name, &policy).unwrap().is_empty())
        .map(|info| info.name)
        .collect();
    println!("rows stating no bound (nothing of theirs is held): {unbounded:?}");
    // xps: flows may draw one core of their tenant's, whatever their number.
    assert_eq!(unbounded, ["fifo", "hash", "xps"]);
}

/// Every run holds itself to what `check` states of its enforcer: a `claims`
/// check. `fifo`'s frames reported as `htb` break `htb`'s share bound (weights
/// 1:3, every tenant backlogged: fifo halves the link); `htb` itself keeps it; a
/// udp tenant leaves the share bound's condition unmet, so only the cap bounds
/// are judged.
#[test]
fn every_run_holds_itself_to_what_check_states() {
    let text = |kind: &str| {
        format!(
            "policy:
  link: {{ rate: 1Gbit }}
  tenants: [{{ name: a }}, {{ name: b, weight: 3 }}]
duration: 2s
interval: 250ms
traffic:
  - {{ tenant: a, kind: bulk, flows: 2 }}
  - {{ tenant: b, {kind} }}
"
        )
    };
    let parse = |text: &str| {
        parse_scenario(text, "s.yaml", Path::new("."), &sched::registry::names()).unwrap()
    };
    let check_of = |run: &RunRecord| {
        run.checks
            .iter()
            .find(|c| c.name == "claims")
            .cloned()
            .expect("a claims check")
    };
    let backlogged = parse(&text("kind: bulk, flows: 2"));
    let fifo = sched::build("fifo", &backlogged.policy).unwrap();
    let posing = sim::run_enforcer(
        &backlogged,
        "htb",
        fifo,
        sim::HostModel::default(),
        &mut |_| {},
    );
    let broken = check_of(&posing);
    assert!(!broken.ok, "{broken:?}");
    assert!(broken.detail.contains("each tenant: mean"), "{broken:?}");
    assert_eq!(posing.failed_checks().count(), 1);

    let kept =
        check_of(&sim::run(&backlogged, "htb", sim::HostModel::default(), &mut |_| {}).unwrap());
    assert!(
        kept.ok && kept.detail.contains("tenants' mean error"),
        "{kept:?}"
    );

    let udp = parse(&text("kind: udp, rate: 900Mbit"));
    assert!(!claims::condition_holds(
        sched::Condition::EveryTenantBacklogged,
        &udp
    ));
    assert!(claims::condition_holds(
        sched::Condition::SteadySenders,
        &udp
    ));
    let unjudged =
        check_of(&sim::run(&udp, "htb", sim::HostModel::default(), &mut |_| {}).unwrap());
    assert!(
        unjudged.ok && unjudged.detail.starts_with("no bound"),
        "{unjudged:?}"
    );
}
