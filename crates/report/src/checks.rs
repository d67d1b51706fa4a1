//! A run's self-checks and provenance: what lets a reader trust its figures, or
//! tells them which ones not to. A figure nicsched cannot vouch for is flagged,
//! never printed as true: every run carries its checks into summary.json, the
//! terminal table and report.html, and a failed one makes the command exit 3.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One self-check of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    /// What was compared, with the numbers; for a failed check, what failed.
    pub detail: String,
}

impl Check {
    pub fn new(name: &str, ok: bool, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_string(),
            ok,
            detail: detail.into(),
        }
    }
}

/// Where a run's figures come from, so that anyone can run it again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// nicsched's version.
    pub nicsched: String,
    /// The commit it was built from, or `unknown`.
    pub commit: String,
    /// The command line of the run.
    pub command: String,
    pub scenario_sha256: String,
    pub seed: u64,
    /// The kernel release of the machine that ran it.
    pub kernel: String,
    /// The machine's host name: runs of one scenario on two machines differ.
    /// Empty in summaries written before it was recorded.
    #[serde(default)]
    pub host: String,
    /// The world's settings that shape the figures (host model, lab limits).
    pub settings: BTreeMap<String, String>,
}

/// Bytes of one tenant through a run, each counted where it happened: offered by its
/// senders, refused at admission, sent on the link, and still held when the run
/// ended (queued, or partly on the wire).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantLedger {
    pub offered_bytes: u64,
    pub refused_bytes: u64,
    pub sent_bytes: u64,
    pub held_bytes: u64,
}

/// Byte conservation per tenant, exact: offered = sent + refused + held. A
/// mechanism that loses or invents packets, or a count kept in the wrong place,
/// breaks it.
pub fn conservation(tenants: &[String], ledgers: &[TenantLedger]) -> Check {
    let mut broken = Vec::new();
    let mut offered_total = 0u64;
    for (name, l) in tenants.iter().zip(ledgers) {
        offered_total += l.offered_bytes;
        let accounted = l.sent_bytes + l.refused_bytes + l.held_bytes;
        if accounted != l.offered_bytes {
            broken.push(format!(
                "{name}: offered {} B != sent {} + refused {} + held {} B ({} B {})",
                l.offered_bytes,
                l.sent_bytes,
                l.refused_bytes,
                l.held_bytes,
                accounted.abs_diff(l.offered_bytes),
                if accounted < l.offered_bytes {
                    "lost"
                } else {
                    "invented"
                }
            ));
        }
    }
    if broken.is_empty() {
        Check::new(
            "conservation",
            true,
            format!(
                "every tenant: offered = sent + refused + held ({offered_total} B offered in all)"
            ),
        )
    } else {
        Check::new("conservation", false, broken.join("; "))
    }
}

/// Bytes of one tenant at the engine's cores: arrived from its senders, processed
/// (handed to the enforcer), refused for want of room waiting for a core, and still
/// waiting or on a core when the run ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineLedger {
    pub arrived_bytes: u64,
    pub processed_bytes: u64,
    pub refused_bytes: u64,
    pub waiting_bytes: u64,
}

impl EngineLedger {
    /// Each tenant's ledger at the engine's cores `cores` as a run ends: what they
    /// counted, and what still waits for a core or is on one.
    pub fn of_cores<T>(cores: &sched::cores::Cores<T>) -> Vec<EngineLedger> {
        cores
            .ledgers
            .iter()
            .zip(cores.waiting_bytes())
            .map(|(l, waiting_bytes)| EngineLedger {
                arrived_bytes: l.arrived_bytes,
                processed_bytes: l.processed_bytes,
                refused_bytes: l.refused_bytes,
                waiting_bytes,
            })
            .collect()
    }
}

/// The engine's cores lose and invent nothing, per tenant, exact: arrived =
/// processed + refused + waiting.
pub fn engine_conservation(tenants: &[String], ledgers: &[EngineLedger]) -> Check {
    let broken: Vec<String> = tenants
        .iter()
        .zip(ledgers)
        .filter(|(_, l)| l.processed_bytes + l.refused_bytes + l.waiting_bytes != l.arrived_bytes)
        .map(|(name, l)| {
            format!(
                "{name}: arrived {} B != processed {} + refused {} + waiting {} B",
                l.arrived_bytes, l.processed_bytes, l.refused_bytes, l.waiting_bytes
            )
        })
        .collect();
    if broken.is_empty() {
        let arrived: u64 = ledgers.iter().map(|l| l.arrived_bytes).sum();
        Check::new(
            "engine-conservation",
            true,
            format!(
                "every tenant: arrived at the engine's cores = processed + refused + waiting ({arrived} B arrived in all)"
            ),
        )
    } else {
        Check::new("engine-conservation", false, broken.join("; "))
    }
}

/// What the meter counted per tenant against what left on the link, within
/// `tolerance` (0 for exact): a meter that misses or misfiles bytes breaks it.
pub fn meter_against_link(
    tenants: &[String],
    metered_bytes: &[u64],
    link_bytes: &[u64],
    tolerance: f64,
) -> Check {
    let mut broken = Vec::new();
    for ((name, &metered), &sent) in tenants.iter().zip(metered_bytes).zip(link_bytes) {
        let off = metered.abs_diff(sent) as f64;
        if off > tolerance * sent as f64 {
            broken.push(format!("{name}: metered {metered} B, link {sent} B"));
        }
    }
    if broken.is_empty() {
        Check::new(
            "meter",
            true,
            "every tenant's metered bytes match the link's".to_string(),
        )
    } else {
        Check::new("meter", false, broken.join("; "))
    }
}

/// The unit a rate is written in, and an axis of rates labelled in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateUnit {
    /// Bit/s in one of the unit.
    pub bps: f64,
    pub name: &'static str,
}

/// The unit for `bps`, or for an axis whose largest value is `bps`: Gbit/s from
/// 1 Gbit/s, Mbit/s from 1 Mbit/s, kbit/s below. The one place a unit is chosen, so
/// that a table and a plot of the same run speak the same unit.
pub fn rate_unit(bps: f64) -> RateUnit {
    let (bps, name) = if bps >= 1e9 {
        (1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (1e6, "Mbit/s")
    } else {
        (1e3, "kbit/s")
    };
    RateUnit { bps, name }
}

/// A rate as people read it: Gbit/s, Mbit/s or kbit/s.
pub fn rate_text(bps: f64) -> String {
    let unit = rate_unit(bps);
    // A Gbit/s link is set to the Mbit/s: three decimals say that much.
    let decimals = if unit.bps >= 1e9 { 3 } else { 1 };
    format!("{:.decimals$} {}", bps / unit.bps, unit.name)
}

/// One open-loop generator for [`offered_demand`]: what it asked and what it
/// offered the enforcer (`None`: not measured), all its flows together, at L3.
pub struct OfferedLoad<'a> {
    pub traffic: &'a str,
    pub asked_bps: f64,
    pub offered_bps: Option<f64>,
    /// How far it may fall short before it counts as short.
    pub tolerance: f64,
}

/// `offered-demand` (scenario.md): each generator's offered load against what
/// it asked. Returns the check and, per load, whether it fell short: such a
/// generator is judged at what it offered.
pub fn offered_demand(loads: &[OfferedLoad]) -> (Check, Vec<bool>) {
    let (mut short, mut met) = (Vec::new(), Vec::new());
    let fell_short: Vec<bool> = loads
        .iter()
        .map(|load| {
            let Some(offered) = load.offered_bps else {
                return false;
            };
            let line = format!(
                "{} asked {}, offered {} (at L3, as it reached the enforcer)",
                load.traffic,
                rate_text(load.asked_bps),
                rate_text(offered)
            );
            let is_short = offered < (1.0 - load.tolerance) * load.asked_bps;
            if is_short {
                short.push(format!("{line}; the ideal uses the offered load"));
            } else {
                met.push(line);
            }
            is_short
        })
        .collect();
    let check = if !short.is_empty() {
        Check::new("offered-demand", false, short.join("; "))
    } else if met.is_empty() {
        Check::new(
            "offered-demand",
            true,
            "not compared: no open-loop generator (udp, poisson) in the scenario",
        )
    } else {
        Check::new("offered-demand", true, met.join("; "))
    };
    (check, fell_short)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    #[test]
    fn conservation_holds_only_when_every_byte_is_somewhere() {
        let good = TenantLedger {
            offered_bytes: 100,
            refused_bytes: 10,
            sent_bytes: 80,
            held_bytes: 10,
        };
        assert!(conservation(&names(), &[good, good]).ok);
        let lost = TenantLedger {
            sent_bytes: 79,
            ..good
        };
        let check = conservation(&names(), &[good, lost]);
        assert!(!check.ok);
        assert!(
            check.detail.starts_with("b: offered 100 B"),
            "{}",
            check.detail
        );
        assert!(check.detail.contains("1 B lost"), "{}", check.detail);
        let invented = TenantLedger {
            sent_bytes: 81,
            ..good
        };
        assert!(
            conservation(&names(), &[invented, good])
                .detail
                .contains("invented")
        );
    }

    #[test]
    fn the_meter_is_judged_per_tenant() {
        assert!(meter_against_link(&names(), &[100, 50], &[100, 50], 0.0).ok);
        let check = meter_against_link(&names(), &[100, 0], &[100, 50], 0.02);
        assert!(!check.ok);
        assert_eq!(check.detail, "b: metered 0 B, link 50 B");
        assert!(meter_against_link(&names(), &[99, 50], &[100, 50], 0.02).ok);
    }
}
