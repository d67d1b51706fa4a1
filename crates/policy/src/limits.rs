//! The bounds on everything in a policy or scenario that sizes memory or work,
//! in one place. A file past one is refused by the parser with a located error
//! whose hint names the bound, before anything is allocated for it: a typo such
//! as `interval: 1ns` or `flows: 4294967295` must cost an error line, never an
//! abort, a panic or the machine's memory. docs/scenario.md and docs/hosts.md list
//! them.

use crate::{Pacing, Policy, Scenario, Traffic};

/// Tenants of a policy: each is a class with its own state in every enforcer.
pub const TENANTS_MAX: usize = 4096;
/// Apps of a policy, over all tenants, implicit `default` apps included; and of a
/// scenario across hosts, over all its hosts.
pub const APPS_MAX: usize = 65_536;
/// Hosts of a scenario across hosts: each has a policy, an engine and a link of its
/// own in the simulator, and a namespace and an engine in the lab.
pub const HOSTS_MAX: usize = 64;
/// VMs (tenants) over all hosts of a scenario: the ideal across hosts is one
/// allocation over all of them, so they are bounded as one policy's tenants are.
pub const VMS_MAX: usize = TENANTS_MAX;
/// Every rate (link, guarantees, caps, split limits, offered udp/poisson rates):
/// 10 Tbit/s, far past any NIC, so that rate × time stays well inside `u64`.
pub const RATE_BPS_MAX: u64 = 10_000_000_000_000;
/// A run's duration: 1000 s. The simulator carries issue times of requests in 40
/// bits of nanoseconds (about 1099 s).
pub const DURATION_NS_MAX: u64 = 1_000_000_000_000;
/// Engine work per packet (`engine.packet_cost`, a traffic's `cost`): 1 ms, so
/// that a core's busy time over a run stays well inside `u64`.
pub const ENGINE_COST_NS_MAX: u64 = 1_000_000;
/// Engine cores (`engine.cores`): as many as a host may have.
pub const ENGINE_CORES_MAX: u64 = crate::model::CORE_INDEX_MAX as u64 + 1;
/// Sampling intervals of one run (duration / interval): each holds a row per
/// class in every enforcer's record.
pub const INTERVALS_MAX: u64 = 100_000;
/// Intervals × (tenants + apps + flows): the measurement frame computes an ideal
/// allocation over every class and flow of every interval.
pub const INTERVAL_CELLS_MAX: u64 = 20_000_000;
/// Feedback epochs of one run across hosts (duration / `feedback.epoch`): in each,
/// every receiver computes and sends a rate for every VM sending to it. 10^7 is
/// 1000 s at 100 µs, a hundred times more than the default 1 ms over the longest run.
pub const FEEDBACK_EPOCHS_MAX: u64 = 10_000_000;
/// Flows of one scenario (bulk, udp and poisson `flows`, rpc `concurrency`),
/// summed over its traffic: each has a sender and statistics of its own.
pub const FLOWS_MAX: u64 = 100_000;
/// Largest datagram of udp and poisson traffic: the largest UDP payload over IPv4.
pub const DATAGRAM_BYTES_MAX: u64 = 65_507;
/// Largest rpc request or response: 64 MiB.
pub const MESSAGE_BYTES_MAX: u64 = 64 << 20;
/// Open-loop rpc requests per second of one traffic.
pub const REQUESTS_PER_S_MAX: f64 = 10_000_000.0;
/// The simulator's work for a run, in packets: packets offered over all traffic
/// and the whole duration (sum of packets/s × active seconds) plus the wake-ups of
/// refused senders, [`RETRIES_PER_PACKET`] to a packet; 2 × 10^9, about an hour of
/// simulation on one core, for one enforcer.
pub const SIM_PACKETS_MAX: f64 = 2e9;
/// A sender the enforcer refuses (a bulk flow with nothing in flight, a response
/// of an rpc) tries again this often: the simulator's `HostModel::refused_retry_ns`
/// is its inverse, so the estimate below counts what the simulator does.
pub const SENDER_RETRIES_PER_S: f64 = 10_000.0;
/// A retry costs the simulator about an eighth of what a packet costs (measured:
/// about 0.22 µs against 1.8 µs).
pub const RETRIES_PER_PACKET: f64 = 8.0;
/// Flows `nicsched explain --active` may make backlogged, over the whole list
/// (each is one split class of the ideal).
pub const EXPLAIN_FLOWS_MAX: usize = 1_000_000;

/// The simulator's work for a run, as [`SIM_PACKETS_MAX`] bounds it: the sum of
/// [`traffic_packets_estimate`] over its traffic.
pub fn sim_packets_estimate(scenario: &Scenario) -> f64 {
    scenario
        .traffic
        .iter()
        .map(|t| traffic_packets_estimate(&scenario.policy, t))
        .sum()
}

/// The simulator's work for one traffic over its active time, in packets. Packets:
/// udp and poisson at their rate in datagrams (in MTU-sized packets), open-loop rpc
/// at its request rate (a request and a response, each in MTU-sized packets), bulk
/// and closed-loop rpc at the line rate in MTU-sized packets (the link paces them).
/// Retries, at worst: every bulk flow and rpc connection refused all the time (an
/// rpc connection's responses wait behind its first refused one, as a TCP socket's
/// do, so only that one retries).
pub fn traffic_packets_estimate(policy: &Policy, traffic: &Traffic) -> f64 {
    let mtu = f64::from(policy.link.mtu_bytes);
    let packets = |bytes: u32| (f64::from(bytes) / mtu).ceil().max(1.0);
    let seconds = (traffic.stop_ns - traffic.start_ns) as f64 / 1e9;
    let line_rate_packets = policy.link.rate_bps as f64 / (8.0 * mtu);
    let (packets_per_s, retries) = match traffic.kind.pacing() {
        Pacing::Datagrams {
            rate_bps,
            size_bytes,
            ..
        } => (
            rate_bps as f64 / (8.0 * f64::from(size_bytes)) * packets(size_bytes),
            0.0,
        ),
        Pacing::Requests {
            request_bytes,
            response_bytes,
            rate_per_s: Some(rate),
        } => (
            rate * (packets(request_bytes) + packets(response_bytes)),
            f64::from(traffic.kind.flows()) * SENDER_RETRIES_PER_S * seconds,
        ),
        Pacing::Backlogged
        | Pacing::Requests {
            rate_per_s: None, ..
        } => (
            line_rate_packets,
            f64::from(traffic.kind.flows()) * SENDER_RETRIES_PER_S * seconds,
        ),
    };
    packets_per_s * seconds + retries / RETRIES_PER_PACKET
}
