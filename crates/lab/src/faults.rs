//! Figures made wrong on purpose, so that a test can see a run's self-checks catch
//! them. Built only with the feature `faults`, which nothing but the tests turns on;
//! a run takes the fault named in `NICSCHED_FAULT`:
//!
//! - `meter-drops-app=TENANT/APP`: the meter counts none of that app's frames.

use policy::{AppId, Scenario};

const VARIABLE: &str = "NICSCHED_FAULT";

/// The app whose frames the meter is to discard, if `NICSCHED_FAULT` names one. A
/// value the lab does not know panics: a test that misspelt its fault would
/// otherwise see an honest run.
pub fn meter_drops_app(scenario: &Scenario) -> Option<AppId> {
    let value = std::env::var(VARIABLE).ok()?;
    let Some(named) = value.strip_prefix("meter-drops-app=") else {
        panic!("{VARIABLE}={value}: the lab's only fault is meter-drops-app=TENANT/APP");
    };
    let policy = &scenario.policy;
    let app = named
        .split_once('/')
        .and_then(|(tenant, app)| policy.app_by_name(policy.tenant_by_name(tenant)?, app));
    Some(app.unwrap_or_else(|| panic!("{VARIABLE}={value}: no such app in the scenario")))
}
