//! The values of flags that clap checks with a function: ranges with their reasons.

/// The slowest emulated link of the lab: below it a full-sized frame takes longer
/// on the wire than TCP waits before it retransmits.
pub(crate) const LAB_LINK_RATE_BPS_MIN: u64 = 1_000_000;
/// `--queue-limit` and `--class-limit`: the engine holds room for every packet the
/// limits admit, per Tx queue or per app, so they size its memory.
pub(crate) const HOST_LIMIT_PACKETS_MAX: i64 = 65_536;
/// `bench --classes`: an enforcer holds a few hundred bytes per class (measured:
/// up to about 240), so a million stays well inside a gigabyte.
pub(crate) const BENCH_CLASSES_MAX: i64 = 1_000_000;
/// `--engine-threads` of `lab` and `lab-bench`.
pub(crate) const ENGINE_THREADS_MAX: i64 = 64;

/// `--seconds` of `bench` and `lab-bench`: a measurement, not a soak test.
pub(crate) const MEASURED_SECONDS_MAX: f64 = 600.0;
/// `--rounds` of `bench` and `lab-bench`.
pub(crate) const BENCH_ROUNDS_MAX: i64 = 100;

pub(crate) fn lab_link_rate(text: &str) -> Result<u64, String> {
    let bps = policy::parse_rate(text)?;
    let max = policy::limits::RATE_BPS_MAX;
    if (LAB_LINK_RATE_BPS_MIN..=max).contains(&bps) {
        Ok(bps)
    } else {
        Err(format!(
            "{} is outside {}..={}",
            policy::format_rate(bps as f64),
            policy::format_rate(LAB_LINK_RATE_BPS_MIN as f64),
            policy::format_rate(max as f64)
        ))
    }
}

pub(crate) fn measured_seconds(text: &str) -> Result<f64, String> {
    seconds_up_to(text, MEASURED_SECONDS_MAX)
}

/// A flag's seconds: a number above 0 and at most `max`.
pub(crate) fn seconds_up_to(text: &str, max: f64) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= max => Ok(s),
        _ => Err(format!("seconds are a number above 0 and at most {max}")),
    }
}

/// `bench --class-cap`: what each class of the benchmark tree is capped at, by name.
pub(crate) fn class_cap(text: &str) -> Result<sched::bench::ClassCap, String> {
    let caps = sched::bench::ClassCap::ALL;
    caps.into_iter()
        .find(|cap| cap.name() == text)
        .ok_or_else(|| {
            let names: Vec<&str> = caps.iter().map(|cap| cap.name()).collect();
            format!("give one of: {}", names.join(", "))
        })
}
