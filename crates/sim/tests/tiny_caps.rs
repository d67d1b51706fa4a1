//! A cap of a few kbit/s held over a run (issue 25, defect 9): on a 1 Gbit/s link a
//! bulk tenant capped at 10 kbit/s beside an uncapped bulk tenant, 0.5 s
//! intervals, 20 s. Every enforcer whose `check` calls caps exact keeps the capped
//! tenant within 10% above its cap over the run. A whole 64 KB TSO send is 2.6
//! times what the cap carries in 20 s, so one passed whole breaks it at once.
//! A capped flow's sends are two segments (3000 B, 2.4 s of the cap), and a
//! token bucket passes its burst plus the send that takes it below zero beyond
//! the cap's worth, so the capped tenant runs a little over its cap, never
//! under it by more than one send (12% of the run's 25000 B): 80% is the floor.

// Only `checked_run` of the shared helpers is used here.
mod common;

const CAP_BPS: f64 = 10_000.0;
const DURATION_S: f64 = 20.0;

fn scenario() -> String {
    format!(
        "policy:
  link: {{ rate: 1Gbit }}
  tenants:
    - {{ name: capped, max_rate: {CAP_BPS}bit }}
    - {{ name: free }}
duration: {DURATION_S}s
interval: 500ms
traffic:
  - {{ tenant: capped, kind: bulk }}
  - {{ tenant: free, kind: bulk }}
"
    )
}

/// The capped tenant's rate over the whole run, as a multiple of its cap.
fn capped_ratio(enforcer: &str) -> f64 {
    let record = common::checked_run(&scenario(), enforcer);
    let capped = record.tenants.iter().position(|t| t == "capped").unwrap();
    let bytes: u64 = record
        .intervals
        .iter()
        .flat_map(|i| i.class_bytes.iter().enumerate())
        .filter(|&(c, _)| record.class_tenant[c] == capped)
        .map(|(_, &b)| b)
        .sum();
    bytes as f64 * 8.0 / (CAP_BPS * DURATION_S)
}

#[test]
fn a_ten_kbit_cap_holds_over_the_run() {
    let enforcers = [
        "valve",
        "htb",
        "wf2q",
        "wheel",
        "picnic",
        "picnic-wc",
        "picnic-bps",
        "fairnic",
    ];
    let ratios: Vec<(&str, f64)> = enforcers.iter().map(|&e| (e, capped_ratio(e))).collect();
    eprintln!("{ratios:?}");
    for (enforcer, ratio) in ratios {
        assert!(
            (0.8..=1.1).contains(&ratio),
            "{enforcer}: the capped tenant sent {ratio:.3} times its cap"
        );
    }
}
