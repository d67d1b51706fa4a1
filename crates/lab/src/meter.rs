//! The meter at the end of the link: an AF_PACKET socket on the sink's `eth0`, in
//! the sink namespace, counting the IPv4 bytes (total length) of every frame that
//! arrives from a tenant, per report class and interval, with the same classifier
//! the engine uses. It sees the link the way a receiver does, whatever forwarded the
//! frames, so nicsched's engine and the kernel's HTB are measured alike. Each frame
//! counts in the interval of its kernel arrival stamp, not of the moment the meter
//! reads it, so a meter thread that waits for a core does not move bytes between
//! intervals.

use crate::classify::{Classifier, ParsedFrame, parse_captured};
use crate::sys::packet::{BATCH, FRAME_BYTES_MAX, PacketSocket};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

pub struct Meter {
    pub classifier: Classifier,
    /// Report class of each app, if it is reported.
    pub app_class: Vec<Option<usize>>,
    pub classes: usize,
    pub interval_ns: u64,
    pub intervals: usize,
}

#[derive(Clone, Debug, Default)]
pub struct Metered {
    /// Bytes per interval and report class.
    pub class_bytes: Vec<Vec<u64>>,
    /// Frames from tenants that arrived during the run.
    pub frames: u64,
}

const RCVBUF_BYTES: usize = 8 << 20;
const READ_EVERY: std::time::Duration = std::time::Duration::from_millis(1);
/// Bytes of each frame the meter copies: Ethernet, IPv4 with options, the ports.
const SNAP_BYTES: usize = 14 + 60 + 4;

impl Meter {
    /// Counts until `stop`; counting starts when `origin` (time zero of the run) is set.
    pub fn run(
        self,
        dev: &str,
        origin: &OnceLock<Instant>,
        stop: &AtomicBool,
        ready: impl FnOnce(),
    ) -> std::io::Result<Metered> {
        let socket = PacketSocket::open_stamped(dev, RCVBUF_BYTES)?;
        ready();
        let mut out = Metered {
            class_bytes: vec![vec![0; self.classes]; self.intervals],
            frames: 0,
        };
        let mut bufs = vec![[0u8; FRAME_BYTES_MAX]; BATCH];
        let mut lens = [0usize; BATCH];
        let mut stamps_ns = [0u64; BATCH];
        // The run's time zero on the kernel's stamp clock (CLOCK_REALTIME).
        let mut origin_stamp_ns = None;
        while !stop.load(Ordering::Relaxed) {
            let n = socket.recv_batch_stamped(&mut bufs, &mut lens, SNAP_BYTES, &mut stamps_ns)?;
            if n == 0 {
                // Frames carry their arrival stamps, so reading them a millisecond
                // late changes nothing; waking for each one cost the tenants' senders
                // a share of a core at 50 000 frames/s. The socket holds 8 MB (64 ms
                // at 1 Gbit/s).
                std::thread::sleep(READ_EVERY);
                continue;
            }
            let Some(origin) = origin.get() else {
                continue;
            };
            let now_ns = origin.elapsed().as_nanos() as u64;
            let origin_stamp_ns =
                *origin_stamp_ns.get_or_insert_with(|| crate::sys::clock::realtime_ns() - now_ns);
            for i in 0..n {
                let at_ns = match stamps_ns[i] {
                    0 => now_ns,
                    stamp if stamp < origin_stamp_ns => continue,
                    stamp => stamp - origin_stamp_ns,
                };
                let k = report::measure::interval_of(at_ns, self.interval_ns);
                let captured = &bufs[i][..lens[i].min(SNAP_BYTES)];
                let ParsedFrame::Ipv4(ip) = parse_captured(captured, lens[i]) else {
                    continue;
                };
                let Some(tenant) = self.classifier.tenant_of_source(ip.src) else {
                    continue;
                };
                if k >= self.intervals {
                    continue;
                }
                out.frames += 1;
                let class = self.classifier.classify(tenant, &ip);
                if let Some(c) = self.app_class[class.app.index()] {
                    out.class_bytes[k][c] += u64::from(ip.len_bytes);
                }
            }
        }
        Ok(out)
    }
}
