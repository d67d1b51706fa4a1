//! The host around the enforcer: how senders feed it and how long the parts of the
//! path outside the NIC take. Each constant stands for one Linux or hardware
//! mechanism; none is tuned to match a figure of a paper.

/// IPv4 (20 B) + TCP with timestamps (32 B).
pub const TCP_HEADER_BYTES: u32 = 52;
/// IPv4 (20 B) + UDP (8 B).
pub const UDP_HEADER_BYTES: u32 = 28;
/// Linux's GSO/TSO limit on one send.
pub const TSO_BYTES_MAX: u32 = 65_536;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostModel {
    /// TCP small queues: a bulk flow keeps at most max(`tsq_sends_min` sends, ~1 ms
    /// of data at its pacing rate) between its socket and the wire, capped by
    /// `tsq_bytes_max` (Linux: `2 * truesize`, `sk_pacing_rate >> 10`,
    /// `tcp_limit_output_bytes`). At the per-flow rates of a shared link the two-send
    /// floor binds; a lone fast flow keeps more in flight.
    pub tsq_sends_min: u32,
    pub tsq_bytes_max: u64,
    /// The interval over which a flow's delivery rate is measured for its TSQ limit,
    /// and the time of data TSQ lets it keep in flight.
    pub tsq_window_ns: u64,
    /// Pacing rate over delivery rate in congestion avoidance (`tcp_pacing_ca_ratio`).
    pub pacing_ratio: f64,
    /// From the last frame of a send leaving the wire to the socket learning of it:
    /// Tx completions are reaped in NAPI polls after interrupt moderation (ixgbe's
    /// default moderation is in the tens of microseconds).
    pub tx_completion_delay_ns: u64,
    /// One way between this host and its peer: propagation, one switch, and the
    /// receiving stack.
    pub wire_delay_ns: u64,
    /// A server's time from a request's arrival to its response's send.
    pub server_delay_ns: u64,
    /// A bulk sender refused by packet accounting with nothing in flight retries
    /// after this long (the socket's write space wait).
    pub refused_retry_ns: u64,
    /// The host's qdisc limits in front of the enforcer (`txqueuelen`): what an
    /// open-loop sender beyond its share may queue before its datagrams are dropped.
    pub limits: sched::HostLimits,
}

impl Default for HostModel {
    fn default() -> Self {
        HostModel {
            tsq_sends_min: 2,
            tsq_bytes_max: 1 << 20,
            tsq_window_ns: 1_000_000,
            pacing_ratio: 1.2,
            tx_completion_delay_ns: 20_000,
            wire_delay_ns: 10_000,
            server_delay_ns: 5_000,
            refused_retry_ns: 100_000,
            limits: sched::HostLimits::LINUX,
        }
    }
}

/// Bytes at L3 of a TCP send carrying `payload_bytes` as MSS-sized segments.
pub fn tcp_wire_bytes(payload_bytes: u32, mtu_bytes: u32) -> u32 {
    let mss = mtu_bytes - TCP_HEADER_BYTES;
    let segments = payload_bytes.div_ceil(mss).max(1);
    payload_bytes + segments * TCP_HEADER_BYTES
}

/// Bytes of one full-sized TSO send of a bulk flow: as many whole MTU-sized segments
/// as fit in the GSO limit.
pub fn bulk_send_bytes(mtu_bytes: u32) -> u32 {
    (TSO_BYTES_MAX / mtu_bytes).max(1) * mtu_bytes
}

/// Serialisation time of `bytes` at `rate_bps`, rounded up to whole nanoseconds.
pub fn serialisation_ns(bytes: u32, rate_bps: u64) -> u64 {
    (u64::from(bytes) * 8 * 1_000_000_000).div_ceil(rate_bps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_bytes_add_one_header_per_segment() {
        assert_eq!(tcp_wire_bytes(64, 1500), 116);
        assert_eq!(tcp_wire_bytes(1448, 1500), 1500);
        assert_eq!(tcp_wire_bytes(1449, 1500), 1449 + 104);
        assert_eq!(tcp_wire_bytes(16_384, 1500), 16_384 + 12 * 52);
        assert_eq!(bulk_send_bytes(1500), 43 * 1500);
        assert_eq!(bulk_send_bytes(9000), 7 * 9000);
    }

    #[test]
    fn serialisation_is_exact_at_round_rates() {
        assert_eq!(serialisation_ns(1500, 10_000_000_000), 1200);
        assert_eq!(serialisation_ns(1500, 1_000_000_000), 12_000);
        assert_eq!(serialisation_ns(1, 3_000_000_000), 3);
    }
}
