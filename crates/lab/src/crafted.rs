//! Crafted frames from a tenant's namespace: what an adversarial tenant sends past
//! its programs (other ethertypes, IPv6, headers that lie about their length,
//! fragments, options, VLAN tags, truncated headers), written straight to its
//! interface beside the scenario's traffic. The engine must hold every one to the
//! tenant's policy or drop it as malformed; a run with crafted frames shows whether
//! it does.

use crate::sys::clock::{now_ns, sleep_until_ns};
use crate::sys::packet::PacketSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Frames one tenant sends, in turn, at a steady rate for the whole run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CraftedFrames {
    /// Index of the tenant in the policy.
    pub tenant: usize,
    /// Whole Ethernet frames; their MAC addresses are replaced by the tenant's and
    /// the sink's, so that they cross the engine as the tenant's traffic does.
    pub frames: Vec<Vec<u8>>,
    pub frames_per_s: u32,
}

/// Frames sent per wake-up at most: a sender that fell behind catches up in bursts
/// of this size rather than one burst of everything it owes.
const BURST_FRAMES: u64 = 64;

/// Sends `crafted` on `interface` (of the calling thread's namespace) until `stop`.
pub(crate) fn send(
    crafted: &CraftedFrames,
    interface: &str,
    macs: ([u8; 6], [u8; 6]),
    stop: &Arc<AtomicBool>,
    ready: impl FnOnce(),
) -> std::io::Result<()> {
    let socket = PacketSocket::open_plain(interface, 1 << 16)?;
    let frames: Vec<Vec<u8>> = crafted
        .frames
        .iter()
        .map(|frame| {
            let mut frame = frame.clone();
            let (tenant, sink) = macs;
            if frame.len() >= 12 {
                frame[..6].copy_from_slice(&sink);
                frame[6..12].copy_from_slice(&tenant);
            }
            frame
        })
        .collect();
    ready();
    if frames.is_empty() || crafted.frames_per_s == 0 {
        return Ok(());
    }
    let gap_ns = 1_000_000_000 / u64::from(crafted.frames_per_s);
    let start_ns = now_ns();
    let mut due = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let owed = ((now_ns() - start_ns) / gap_ns + 1).min(due + BURST_FRAMES);
        while due < owed {
            let frame = &frames[(due % frames.len() as u64) as usize];
            // A frame the interface is too busy for is one the tenant did not send:
            // the engine's counts say what arrived.
            socket.send(frame)?;
            due += 1;
        }
        sleep_until_ns(start_ns + due * gap_ns)?;
    }
    Ok(())
}
