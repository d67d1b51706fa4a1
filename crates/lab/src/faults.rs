//! Figures made wrong on purpose, so that a test can see a run's self-checks catch
//! them. Built only with the feature `faults`, which nothing but the tests turns on;
//! a run takes the fault named in `NICSCHED_FAULT` ([`policy::faults`]), of which
//! the lab knows one:
//!
//! - `meter-drops-app=TENANT/APP`: the meter counts none of that app's frames.

use policy::faults::{Fault, VARIABLE, from_env};
use policy::{AppId, Scenario};

/// The app whose frames the meter is to discard, if `NICSCHED_FAULT` names one. A
/// fault the lab does not inject panics: a test that named it would otherwise see
/// an honest run.
pub fn meter_drops_app(scenario: &Scenario) -> Option<AppId> {
    match from_env(scenario)? {
        Fault::MeterDropsApp(app) => Some(app),
        Fault::LosePackets => {
            panic!("{VARIABLE}: the lab's only fault is meter-drops-app=TENANT/APP")
        }
    }
}
