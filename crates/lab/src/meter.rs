//! The meter at the end of the link: an AF_PACKET socket on the sink's `eth0`, in
//! the sink namespace, counting the IPv4 bytes (total length) of every frame that
//! arrives from a tenant, per report class and interval, with the same classifier
//! the engine uses. It sees the link the way a receiver does, whatever forwarded the
//! frames, so nicsched's engine and the kernel's HTB are measured alike. Each frame
//! counts in the interval of its kernel arrival stamp, not of the moment the meter
//! reads it, so a meter thread that waits for a core does not move bytes between
//! intervals.
//!
//! While the run goes it hands each interval over as it closes ([`Meter::live`]):
//! once its socket is empty at least [`LATE_NS`] after the interval's end, the
//! interval's bytes are those the run's figures get, unless the kernel held a frame
//! stamped in it for longer than that before the meter could read it.
//!
//! It also counts each traffic's frames, told apart by what the traffic plan chose
//! for them ([`FrameMatch`]), for the run's checks: the apps the classifier put
//! them in, and their payload over the whole run (warm-up and the tail after the
//! window included, as the programs count it).

use crate::classify::{
    Classifier, ETHERNET_HEADER_BYTES, FrameMatch, ParsedFrame, parse_captured, payload_bytes,
};
use crate::sys::packet::{BATCH, FRAME_BYTES_MAX, PacketSocket};
use policy::TenantId;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::Instant;

pub struct Meter {
    pub classifier: Classifier,
    /// Report class of each app, if it is reported.
    pub app_class: Vec<Option<usize>>,
    pub classes: usize,
    pub interval_ns: u64,
    pub intervals: usize,
    /// What marks each traffic's frames, in scenario order.
    pub traffic: Vec<FrameMatch>,
    pub apps: usize,
    pub tenants: usize,
    /// Each tenant's MAC address: how a frame that is not IPv4 is told to be its.
    pub tenant_macs: Vec<[u8; 6]>,
    /// Hears each interval's bytes per report class once it is closed, in order:
    /// `(interval, class_bytes)`.
    pub live: Sender<(usize, Vec<u64>)>,
    /// An app whose frames go uncounted ([`crate::faults`]).
    #[cfg(feature = "faults")]
    pub drops_app: Option<policy::AppId>,
}

#[derive(Clone, Debug, Default)]
pub struct Metered {
    /// Bytes per interval and report class.
    pub class_bytes: Vec<Vec<u64>>,
    /// Frames from tenants that arrived during the run.
    pub frames: u64,
    /// Per traffic, its L3 bytes inside the run's intervals by the app the
    /// classifier put them in (policy app index).
    pub traffic_app_bytes: Vec<Vec<u64>>,
    /// Per traffic, its transport payload from the meter's start to its stop, by
    /// the app the classifier put it in: what the programs count, in the place the
    /// report would give it.
    pub traffic_app_payload_bytes: Vec<Vec<u64>>,
    /// Per tenant, L3 bytes from the meter's start to its stop.
    pub tenant_bytes: Vec<u64>,
    /// Per tenant, of those, the bytes of frames no traffic of the scenario
    /// explains (raw frames, another program's, the programs' own control
    /// connections, ARP).
    pub undeclared_bytes: Vec<u64>,
}

const RCVBUF_BYTES: usize = 8 << 20;
const READ_EVERY: std::time::Duration = std::time::Duration::from_millis(1);
/// Bytes of each frame the meter copies: Ethernet, IPv4 with options, the TCP
/// header up to its data offset (the UDP header and the ports within it).
const SNAP_BYTES: usize = 14 + 60 + 20;
/// How long after an interval's end the meter waits before it hands the interval
/// over: the kernel stamps a frame as it enters the sink's receive backlog, which
/// the softirq may drain a little later on a busy machine.
pub const LATE_NS: u64 = 100_000_000;

impl Meter {
    /// Counts until `stop`, then reads what its socket still holds; counting into
    /// intervals starts when `origin` (time zero of the run) is set.
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
            traffic_app_bytes: vec![vec![0; self.apps]; self.traffic.len()],
            traffic_app_payload_bytes: vec![vec![0; self.apps]; self.traffic.len()],
            tenant_bytes: vec![0; self.tenants],
            undeclared_bytes: vec![0; self.tenants],
        };
        let mut bufs = vec![[0u8; FRAME_BYTES_MAX]; BATCH];
        let mut lens = [0usize; BATCH];
        let mut stamps_ns = [0u64; BATCH];
        // The run's time zero on the kernel's stamp clock (CLOCK_REALTIME).
        let mut origin_stamp_ns = None;
        // Intervals handed to `live` so far.
        let mut handed = 0;
        loop {
            // Read after `stop` is seen, so the frames that arrived before it all count.
            let stopping = stop.load(Ordering::Relaxed);
            let n = socket.recv_batch_stamped(&mut bufs, &mut lens, SNAP_BYTES, &mut stamps_ns)?;
            if n == 0 {
                if stopping {
                    self.hand_over(&out, self.intervals, &mut handed);
                    return Ok(out);
                }
                if let Some(origin) = origin.get() {
                    // The socket is empty: every frame stamped up to now has been
                    // counted, but for those still in the kernel's backlog.
                    let closed_ns = origin.elapsed().as_nanos() as u64;
                    let closed = closed_ns.saturating_sub(LATE_NS) / self.interval_ns.max(1);
                    self.hand_over(&out, closed as usize, &mut handed);
                }
                // Frames carry their arrival stamps, so reading them a millisecond
                // late changes nothing; waking for each one cost the tenants' senders
                // a share of a core at 50 000 frames/s. The socket holds 8 MB (64 ms
                // at 1 Gbit/s).
                std::thread::sleep(READ_EVERY);
                continue;
            }
            let origin_stamp_ns = origin.get().map(|origin| {
                *origin_stamp_ns.get_or_insert_with(|| {
                    crate::sys::clock::realtime_ns() - origin.elapsed().as_nanos() as u64
                })
            });
            let now_ns =
                origin_stamp_ns.map(|o| crate::sys::clock::realtime_ns().saturating_sub(o));
            for i in 0..n {
                let at_ns = match (stamps_ns[i], origin_stamp_ns) {
                    (_, None) => None,
                    (0, Some(_)) => now_ns,
                    (stamp, Some(o)) => stamp.checked_sub(o),
                };
                self.count(
                    &mut out,
                    &bufs[i][..lens[i].min(SNAP_BYTES)],
                    lens[i],
                    at_ns,
                );
            }
        }
    }

    /// Hands the intervals before `closed` not handed over yet to `live`. A
    /// listener gone away (the run's caller stopped watching) changes nothing.
    fn hand_over(&self, out: &Metered, closed: usize, handed: &mut usize) {
        let closed = closed.min(self.intervals);
        for k in *handed..closed {
            let _ = self.live.send((k, out.class_bytes[k].clone()));
        }
        *handed = closed.max(*handed);
    }

    /// Counts one frame of `wire_bytes` (its first bytes `captured`) that arrived
    /// at `at_ns` after time zero, or before it (`None`).
    fn count(&self, out: &mut Metered, captured: &[u8], wire_bytes: usize, at_ns: Option<u64>) {
        // The tenant whose port the frame came in by, known by the source
        // address it carries on the link (the engine forwards frames as they
        // are); else, for IPv4, by its source prefix (the kernel's forwarding
        // under `linux-htb` rewrites the former).
        let by_mac = self
            .tenant_macs
            .iter()
            .position(|m| captured.get(6..12) == Some(&m[..]))
            .map(|t| TenantId(t as u16));
        let (tenant, app, bytes, ip) = match parse_captured(captured, wire_bytes) {
            ParsedFrame::Ipv4(ip) => {
                let Some(tenant) = by_mac.or_else(|| self.classifier.tenant_of_source(ip.src))
                else {
                    return;
                };
                let app = self.classifier.classify(tenant, &ip).app;
                (tenant, app, ip.len_bytes, Some(ip))
            }
            ParsedFrame::Ipv6(ip) => {
                let Some(tenant) = by_mac else {
                    return;
                };
                let app = self.classifier.classify_ipv6(tenant, &ip).app;
                (tenant, app, ip.len_bytes, None)
            }
            // The engine forwards only what it scheduled: a frame from a tenant's
            // port that this capture of its headers cannot read (an IPv6 extension
            // chain past the snap length) is that tenant's bytes all the same.
            ParsedFrame::Other { .. } | ParsedFrame::Malformed(_) => {
                let Some(tenant) = by_mac else {
                    return;
                };
                let len_bytes = wire_bytes.saturating_sub(ETHERNET_HEADER_BYTES) as u32;
                (
                    tenant,
                    self.classifier.classify_other(tenant).app,
                    len_bytes,
                    None,
                )
            }
        };
        #[cfg(feature = "faults")]
        if self.drops_app == Some(app) {
            return;
        }
        let app = app.index();
        let bytes = u64::from(bytes);
        out.tenant_bytes[tenant.index()] += bytes;
        let traffic = ip.and_then(|ip| {
            let t = self.traffic.iter().position(|m| m.matches(tenant, &ip))?;
            out.traffic_app_payload_bytes[t][app] +=
                u64::from(payload_bytes(captured, &ip).unwrap_or(0));
            Some(t)
        });
        if traffic.is_none() {
            out.undeclared_bytes[tenant.index()] += bytes;
        }
        let Some(k) = at_ns
            .map(|at| report::measure::interval_of(at, self.interval_ns))
            .filter(|&k| k < self.intervals)
        else {
            return;
        };
        out.frames += 1;
        if let Some(c) = self.app_class[app] {
            out.class_bytes[k][c] += bytes;
        }
        if let Some(t) = traffic {
            out.traffic_app_bytes[t][app] += bytes;
        }
    }
}
