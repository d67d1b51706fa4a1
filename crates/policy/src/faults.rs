//! The faults a test may inject through `NICSCHED_FAULT`, read in one place for
//! both worlds: figures made wrong on purpose, so that a test can see a run's
//! self-checks catch them. The simulator and the lab act on them only when built
//! with their feature `faults`, which nothing but the tests turns on.
//!
//! - `lose-packets`: the enforcer loses every 100th frame it hands the link;
//! - `meter-drops-app=TENANT/APP`: the meter counts none of that app's bytes.

use crate::{AppId, Scenario};

/// The environment variable a test names its fault in.
pub const VARIABLE: &str = "NICSCHED_FAULT";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    LosePackets,
    MeterDropsApp(AppId),
}

/// The fault `NICSCHED_FAULT` names for `scenario`, if it names one. A value that
/// names none, or an app the scenario lacks, panics: a test that misspelt its fault
/// would otherwise see an honest run.
pub fn from_env(scenario: &Scenario) -> Option<Fault> {
    let value = std::env::var(VARIABLE).ok()?;
    Some(parse(&value, scenario).unwrap_or_else(|e| panic!("{VARIABLE}={value}: {e}")))
}

/// The fault `value` names in `scenario`.
pub fn parse(value: &str, scenario: &Scenario) -> Result<Fault, String> {
    if value == "lose-packets" {
        return Ok(Fault::LosePackets);
    }
    let Some(named) = value.strip_prefix("meter-drops-app=") else {
        return Err("the faults are lose-packets and meter-drops-app=TENANT/APP".into());
    };
    let policy = &scenario.policy;
    named
        .split_once('/')
        .and_then(|(tenant, app)| policy.app_by_name(policy.tenant_by_name(tenant)?, app))
        .map(Fault::MeterDropsApp)
        .ok_or_else(|| "no such app in the scenario".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn scenario() -> Scenario {
        crate::parse_scenario(
            "policy:
  link: { rate: 1Gbit }
  tenants:
    - name: t
      apps: [{ name: rpc, match: { proto: tcp, ports: [11111] } }, { name: bulk }]
duration: 1s
traffic:
  - { name: bulk, tenant: t, app: bulk, kind: bulk, flows: 1 }
",
            "s.yaml",
            Path::new("."),
            &[],
        )
        .unwrap()
    }

    #[test]
    fn names_each_fault_and_refuses_what_is_none() {
        let s = scenario();
        assert_eq!(parse("lose-packets", &s), Ok(Fault::LosePackets));
        let bulk = s
            .policy
            .app_by_name(s.policy.tenant_by_name("t").unwrap(), "bulk");
        assert_eq!(
            parse("meter-drops-app=t/bulk", &s),
            Ok(Fault::MeterDropsApp(bulk.unwrap()))
        );
        for wrong in ["meter-drops-app=t/none", "meter-drops-app=t", "lose-packet"] {
            assert!(parse(wrong, &s).is_err(), "{wrong}");
        }
    }
}
