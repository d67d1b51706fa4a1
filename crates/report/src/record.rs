//! What a run (simulated or lab) hands to the report: raw bytes per interval and
//! class, the ideal for each interval, and latency histograms. Every figure is
//! derived from these, the same way for every enforcer and both worlds.

use hdrhistogram::Histogram;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Sim,
    Lab,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sim => "sim",
            Mode::Lab => "lab",
        }
    }
}

/// One class of the report: an app of a tenant.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassName {
    pub tenant: String,
    pub app: String,
}

#[derive(Clone, Debug)]
pub struct Interval {
    pub start_ns: u64,
    pub end_ns: u64,
    /// False when some traffic started or stopped strictly inside the interval:
    /// such intervals are left out of the fairness figures.
    pub steady: bool,
    /// Bytes that left on the link in this interval, per class (index as in `RunRecord::classes`).
    pub class_bytes: Vec<u64>,
    /// Ideal allocation for the traffic active in this interval, per class, bit/s.
    pub class_ideal_bps: Vec<f64>,
    /// Whether the class had active traffic in this interval.
    pub class_active: Vec<bool>,
    /// Ideal allocation per tenant, bit/s (index as in `RunRecord::tenants`).
    pub tenant_ideal_bps: Vec<f64>,
    pub tenant_active: Vec<bool>,
}

/// Latency of one request/response traffic, in nanoseconds.
#[derive(Clone, Debug)]
pub struct LatencyRecord {
    pub traffic: String,
    pub histogram_ns: Histogram<u64>,
}

#[derive(Clone, Debug)]
pub struct RunRecord {
    pub scenario: String,
    pub enforcer: String,
    pub mode: Mode,
    pub seed: u64,
    pub duration_ns: u64,
    pub interval_ns: u64,
    pub link_rate_bps: u64,
    pub tenants: Vec<String>,
    pub classes: Vec<ClassName>,
    /// Tenant index (into `tenants`) of each class.
    pub class_tenant: Vec<usize>,
    pub intervals: Vec<Interval>,
    pub latency: Vec<LatencyRecord>,
    /// Packets refused at admission, per tenant.
    pub tenant_drops: Vec<u64>,
    /// Frames that left on the link over the whole run.
    pub frames_sent: u64,
    /// Wall-clock seconds the run took; not part of summary.json, which must be
    /// byte-identical for the same seed.
    pub wall_s: f64,
}
