//! Sizes and times on the wire, written once for the simulator, the lab and the
//! figures: what a send of each traffic kind puts on the link, and how long a frame
//! takes to serialise.

/// IPv4 (20 B) + TCP with timestamps (32 B).
pub const TCP_HEADER_BYTES: u32 = 52;
/// IPv4 (20 B) + UDP (8 B).
pub const UDP_HEADER_BYTES: u32 = 28;
/// Linux's GSO/TSO limit on one send.
pub const TSO_BYTES_MAX: u32 = 65_536;

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

/// Linux's floor on the segments of a TSO send (`tcp_min_tso_segs`).
pub const TSO_SEGMENTS_MIN: u32 = 2;
/// The time of its pacing rate Linux puts in one TSO send (`sk_pacing_shift` of
/// 10: 1/1024 s).
pub const TSO_AUTOSIZE_NS: u64 = 1_000_000_000 >> 10;

/// Bytes of one TSO send of a bulk flow that can send at most `cap_bps`. Linux
/// sizes a send by the socket's pacing rate (`tcp_tso_autosize`): about 1 ms of
/// it in whole segments, at least [`TSO_SEGMENTS_MIN`], at most
/// [`bulk_send_bytes`]. A flow held to a cap delivers at the cap, and its pacing
/// rate follows its delivery rate, so its sends are what the cap carries in that
/// time. Sized by the link alone, a flow capped at 10 kbit/s sent 64 KB at once,
/// 52 s of its cap.
pub fn bulk_send_bytes_capped(mtu_bytes: u32, cap_bps: u64) -> u32 {
    let full = bulk_send_bytes(mtu_bytes) / mtu_bytes;
    let autosized = bytes_in(cap_bps, TSO_AUTOSIZE_NS) / u64::from(mtu_bytes);
    let segments = autosized.clamp(u64::from(TSO_SEGMENTS_MIN.min(full)), u64::from(full));
    segments as u32 * mtu_bytes
}

/// Bytes that `rate_bps` carries in `ns`, rounded down: the inverse of
/// [`serialisation_ns`].
pub fn bytes_in(rate_bps: u64, ns: u64) -> u64 {
    (u128::from(rate_bps) * u128::from(ns) / 8_000_000_000) as u64
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
        // ~1 ms of the cap in whole segments, two at least, a full send at most.
        assert_eq!(bulk_send_bytes_capped(1500, 10_000), 2 * 1500);
        assert_eq!(bulk_send_bytes_capped(1500, 100_000_000), 8 * 1500);
        assert_eq!(bulk_send_bytes_capped(1500, 1_000_000_000), 43 * 1500);
        assert_eq!(bulk_send_bytes_capped(1500, u64::MAX), 43 * 1500);
        assert_eq!(bulk_send_bytes_capped(65_536, 10_000), 65_536);
    }

    #[test]
    fn serialisation_is_exact_at_round_rates() {
        assert_eq!(serialisation_ns(1500, 10_000_000_000), 1200);
        assert_eq!(serialisation_ns(1500, 1_000_000_000), 12_000);
        assert_eq!(serialisation_ns(1500, 100_000_000), 120_000);
        assert_eq!(serialisation_ns(1, 3_000_000_000), 3);
    }
}
