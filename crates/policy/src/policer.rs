//! The VM ingress policer of both worlds: a token bucket of
//! [`INGRESS_BURST_BYTES`](crate::INGRESS_BURST_BYTES) filled at a VM's
//! `ingress.max_rate`, sans I/O. The simulator polices a frame when it reaches its
//! VM, the lab when the modelled ingress link would have let it in; both ask this
//! bucket, so that a frame passes or drops alike in each.

use crate::INGRESS_BURST_BYTES;

/// One VM's bucket: its tokens (bytes) and when they were last topped up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policer {
    tokens: f64,
    at_ns: u64,
}

impl Default for Policer {
    /// Full, as after a quiet spell.
    fn default() -> Self {
        Policer {
            tokens: INGRESS_BURST_BYTES as f64,
            at_ns: 0,
        }
    }
}

impl Policer {
    /// Whether `bytes` arriving at `now_ns` fit the envelope of `max_bps`; takes
    /// their tokens if so. A time before the last one tops up nothing.
    pub fn admit(&mut self, now_ns: u64, bytes: u64, max_bps: u64) -> bool {
        let bytes = bytes as f64;
        let tokens = (self.tokens
            + now_ns.saturating_sub(self.at_ns) as f64 * max_bps as f64 / 8e9)
            .min(INGRESS_BURST_BYTES as f64);
        let fits = tokens >= bytes;
        self.tokens = if fits { tokens - bytes } else { tokens };
        self.at_ns = self.at_ns.max(now_ns);
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_a_burst_then_the_rate() {
        let mut p = Policer::default();
        // 1 Gbit/s: 125 bytes per µs.
        let max = 1_000_000_000;
        assert!(p.admit(0, INGRESS_BURST_BYTES, max));
        assert!(!p.admit(0, 1, max), "the burst is spent");
        assert!(!p.admit(1_000, 126, max), "1 µs brings 125 bytes");
        assert!(p.admit(1_000, 125, max));
        assert!(!p.admit(500, 1, max), "an earlier time tops up nothing");
        assert!(p.admit(10_000_000, INGRESS_BURST_BYTES, max), "full again");
        assert!(!p.admit(10_000_000, 1, max));
    }
}
