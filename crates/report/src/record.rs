//! What a run (simulated or lab) hands to the report: raw bytes per interval and
//! class, the ideal for each interval, and latency histograms. Every figure is
//! derived from these, the same way for every enforcer and both worlds.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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

/// What became of the frames one tenant sent into the lab's engine, counted at the
/// engine's port before anything else looks at them: every frame is in exactly one
/// of these (or still held when the run ended).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantFrames {
    /// Taken by the enforcer, by what they carry.
    pub scheduled: ScheduledFrames,
    /// Refused by the enforcer's packet accounting or for want of a buffer.
    pub refused: u64,
    /// Dropped before the enforcer, by why.
    pub malformed: MalformedFrames,
    /// Dropped by the kernel at the engine's port before the engine read them:
    /// its receive ring was full (the engine fell behind).
    #[serde(default)]
    pub lost_at_port: u64,
}

impl TenantFrames {
    /// Every frame the tenant's port saw, whatever became of it.
    pub fn total(&self) -> u64 {
        let (s, m) = (&self.scheduled, &self.malformed);
        s.ipv4
            + s.ipv6
            + s.other
            + self.refused
            + m.runt
            + m.bad_header
            + m.length_beyond_frame
            + m.truncated_transport
            + m.oversize
            + self.lost_at_port
    }

    /// The counts of two runs together.
    pub fn merged(&self, other: &TenantFrames) -> TenantFrames {
        let (a, b) = (&self.malformed, &other.malformed);
        TenantFrames {
            scheduled: ScheduledFrames {
                ipv4: self.scheduled.ipv4 + other.scheduled.ipv4,
                ipv6: self.scheduled.ipv6 + other.scheduled.ipv6,
                other: self.scheduled.other + other.scheduled.other,
            },
            refused: self.refused + other.refused,
            lost_at_port: self.lost_at_port + other.lost_at_port,
            malformed: MalformedFrames {
                runt: a.runt + b.runt,
                bad_header: a.bad_header + b.bad_header,
                length_beyond_frame: a.length_beyond_frame + b.length_beyond_frame,
                truncated_transport: a.truncated_transport + b.truncated_transport,
                oversize: a.oversize + b.oversize,
            },
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledFrames {
    pub ipv4: u64,
    pub ipv6: u64,
    /// Any other ethertype (ARP, VLAN-tagged, raw): the tenant's catch-all app.
    pub other: u64,
}

/// Frames dropped as malformed, by kind (docs/scenario.md names each).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct MalformedFrames {
    pub runt: u64,
    pub bad_header: u64,
    pub length_beyond_frame: u64,
    pub truncated_transport: u64,
    pub oversize: u64,
}

/// One tenant (VM) between its sockets and the enforcer over a simulated run
/// (PicNIC §5.4.3): how much the enforcer held for it, how long its transmit ring
/// had no free descriptor, and what its guest lost for want of one. Refusals by the
/// enforcer are the tenant's `drops`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Backpressure {
    /// Packets the enforcer held for the tenant, averaged over the run's time.
    pub held_packets_mean: f64,
    pub held_packets_max: u64,
    /// Seconds the VM's transmit ring was full.
    pub ring_full_s: f64,
    /// Datagrams a socket the guest does not hold back sent while the ring was full.
    pub dropped_in_guest: u64,
}

/// One tenant at the engine's cores over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineCpuTenant {
    /// Core time its packets took, in nanoseconds.
    pub busy_ns: u64,
    /// Packets refused for want of room waiting for a core.
    pub refused_packets: u64,
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

impl Interval {
    /// The interval's real length: the last one of a run may be shorter than
    /// `RunRecord::interval_ns`, and a rate must be divided by the time it was measured over.
    pub fn length_s(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    pub fn end_s(&self) -> f64 {
        self.end_ns as f64 / 1e9
    }

    /// Throughput of class `class` in this interval; 0 for an empty interval rather than NaN,
    /// since nothing could be sent in it.
    pub fn class_throughput_bps(&self, class: usize) -> f64 {
        let length_s = self.length_s();
        match self.class_bytes.get(class) {
            Some(&bytes) if length_s > 0.0 => bytes as f64 * 8.0 / length_s,
            _ => 0.0,
        }
    }

    pub fn class_active(&self, class: usize) -> bool {
        self.class_active.get(class).copied().unwrap_or(false)
    }

    pub fn tenant_active(&self, tenant: usize) -> bool {
        self.tenant_active.get(tenant).copied().unwrap_or(false)
    }

    /// The ideal as a figure to compare with: 0 while the class is idle, whatever the
    /// record holds there.
    pub fn class_ideal_bps(&self, class: usize) -> f64 {
        if self.class_active(class) {
            self.class_ideal_bps.get(class).copied().unwrap_or(0.0)
        } else {
            0.0
        }
    }

    pub fn tenant_ideal_bps(&self, tenant: usize) -> f64 {
        if self.tenant_active(tenant) {
            self.tenant_ideal_bps.get(tenant).copied().unwrap_or(0.0)
        } else {
            0.0
        }
    }
}

/// Latency of one request/response traffic, in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyRecord {
    pub traffic: String,
    pub histogram_ns: Histogram<u64>,
}

/// Gaps between consecutive departures of one flow's packets, accumulated with
/// Welford's method so a long run needs no memory per packet.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GapStats {
    pub count: u64,
    pub mean_ns: f64,
    /// Sum of squared deviations from the mean.
    pub m2_ns2: f64,
    last_departure_ns: Option<u64>,
}

impl GapStats {
    /// A packet of the flow left at `now_ns`; the first one only starts the clock.
    pub fn departure(&mut self, now_ns: u64) {
        if let Some(last) = self.last_departure_ns {
            let gap = now_ns.saturating_sub(last) as f64;
            self.count += 1;
            let delta = gap - self.mean_ns;
            self.mean_ns += delta / self.count as f64;
            self.m2_ns2 += delta * (gap - self.mean_ns);
        }
        self.last_departure_ns = Some(now_ns);
    }

    /// Population standard deviation of the gaps.
    pub fn std_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            (self.m2_ns2 / self.count as f64).sqrt()
        }
    }
}

/// Inter-departure times of each flow of one traffic (SENIC's Table 3 measure of a
/// rate limiter's accuracy), after its first interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PacingRecord {
    pub traffic: String,
    pub flows: Vec<GapStats>,
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
    /// Per traffic (in scenario order): inter-departure times of its flows.
    pub pacing: Vec<PacingRecord>,
    /// Packets refused at admission, per tenant.
    pub tenant_drops: Vec<u64>,
    /// Per tenant, its frames by fate; empty where no engine of nicsched's counted
    /// them (the simulator, `linux-htb`).
    pub tenant_frames: Vec<TenantFrames>,
    /// Per tenant, what the engine's cores did with its packets; empty where no
    /// engine cost was asked (the CPU stage is then a pass-through).
    pub engine_cpu: Vec<EngineCpuTenant>,
    /// Per tenant, in the simulator; empty in the lab, whose VMs are namespaces
    /// without a transmit ring of nicsched's.
    pub backpressure: Vec<Backpressure>,
    /// Frames that left on the link over the whole run.
    pub frames_sent: u64,
    /// The run's self-checks, in the order they were made.
    pub checks: Vec<crate::Check>,
    pub provenance: crate::Provenance,
    /// Wall-clock seconds the run took; not part of summary.json, which must be
    /// byte-identical for the same seed.
    pub wall_s: f64,
}

impl RunRecord {
    /// The checks that failed.
    pub fn failed_checks(&self) -> impl Iterator<Item = &crate::Check> {
        self.checks.iter().filter(|c| !c.ok)
    }

    /// A tenant's throughput is the sum of its classes'.
    pub fn tenant_throughput_bps(&self, interval: &Interval, tenant: usize) -> f64 {
        self.class_tenant
            .iter()
            .enumerate()
            .filter(|&(_, &owner)| owner == tenant)
            .map(|(class, _)| interval.class_throughput_bps(class))
            .sum()
    }

    /// Whether every per-class and per-tenant vector has the length its index space
    /// says; the figures tolerate a mismatch, but it means the producer has a bug.
    pub fn is_well_formed(&self) -> bool {
        let classes = self.classes.len();
        let tenants = self.tenants.len();
        self.class_tenant.len() == classes
            && self.class_tenant.iter().all(|&tenant| tenant < tenants)
            && self.intervals.iter().all(|interval| {
                interval.class_bytes.len() == classes
                    && interval.class_ideal_bps.len() == classes
                    && interval.class_active.len() == classes
                    && interval.tenant_ideal_bps.len() == tenants
                    && interval.tenant_active.len() == tenants
            })
    }
}
