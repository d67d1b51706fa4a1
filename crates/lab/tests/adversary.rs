//! An adversarial tenant: crafted frames of every kind the engine must not let past
//! its policy (other ethertypes, IPv6, IPv4 headers that lie about their length,
//! fragments, options, VLAN tags, malformed headers), at 12,000 frames/s from a
//! tenant capped at 10 Mbit/s on a 100 Mbit/s link. The sink's own interface counters
//! (the kernel's, read independently of nicsched's meter) must show the cap held, and
//! the engine must have seen the flood (scheduled, refused or dropped as malformed,
//! by kind). Needs root and iperf3; without them it fails in CI and, elsewhere, says
//! why and passes.

mod common;

use common::{assert_nothing_left, our_namespaces};
use lab::{CraftedFrames, LabOptions};
use std::process::Command;

const CAP_BPS: f64 = 10e6;
const FRAMES_PER_S: u32 = 12_000;
/// The bar: what the sink may see of a tenant capped at 10 Mbit/s.
const SINK_BPS_MAX: f64 = 14e6;

fn scenario() -> policy::Scenario {
    policy::parse_scenario(
        r#"
name: lab-adversary
policy:
  link: { rate: 100Mbit }
  tenants:
    - { name: evil, max_rate: 10Mbit }
duration: 2s
interval: 250ms
traffic:
  - { name: evil-udp, tenant: evil, kind: udp, rate: 2Mbit, flows: 1 }
"#,
        "adversary.yaml",
        std::path::Path::new("."),
        &lab::enforcer_names(),
    )
    .expect("valid scenario")
}

const ETHERNET: usize = 14;

fn ethernet(ethertype: u16, len: usize) -> Vec<u8> {
    let mut frame = vec![0u8; len];
    frame[12..14].copy_from_slice(&ethertype.to_be_bytes());
    frame
}

/// An IPv4 UDP frame of `len` bytes in all, header as given, length field honest.
fn ipv4_udp(len: usize, header_bytes: usize) -> Vec<u8> {
    let mut frame = ethernet(0x0800, len);
    let ip = &mut frame[ETHERNET..];
    ip[0] = 0x40 | (header_bytes / 4) as u8;
    ip[2..4].copy_from_slice(&((len - ETHERNET) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 99, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 99, 0, 2]);
    // IPv4 options: no-ops up to the header's end.
    ip[20..header_bytes].fill(1);
    ip[header_bytes + 2..header_bytes + 4].copy_from_slice(&9u16.to_be_bytes());
    frame
}

fn ipv6_udp(len: usize, extensions: &[u8]) -> Vec<u8> {
    let mut frame = ethernet(0x86dd, len);
    let ip = &mut frame[ETHERNET..];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&((len - ETHERNET - 40) as u16).to_be_bytes());
    ip[6] = extensions.first().copied().unwrap_or(17);
    ip[8] = 0x20;
    ip[24] = 0x20;
    let mut at = 40;
    for i in 0..extensions.len() {
        ip[at] = extensions.get(i + 1).copied().unwrap_or(17);
        at += 8;
    }
    ip[at + 2..at + 4].copy_from_slice(&9u16.to_be_bytes());
    frame
}

/// What the engine should do with a kind of frame.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fate {
    Scheduled,
    Malformed,
}

fn kinds() -> Vec<(&'static str, Vec<Vec<u8>>, Fate)> {
    let mut lying = ipv4_udp(1514, 20);
    lying[ETHERNET + 2..ETHERNET + 4].copy_from_slice(&28u16.to_be_bytes());
    let fragments = [0u16, 185, 370]
        .map(|offset| {
            let mut f = ipv4_udp(1514, 20);
            f[ETHERNET + 6..ETHERNET + 8].copy_from_slice(&(0x2000 | offset).to_be_bytes());
            f
        })
        .to_vec();
    let mut vlan = ethernet(0x8100, 1514);
    vlan[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
    vlan[18..].copy_from_slice(&ipv4_udp(1514 - 4, 20)[ETHERNET..]);
    let mut truncated = ipv4_udp(200, 20);
    truncated[ETHERNET + 2..ETHERNET + 4].copy_from_slice(&1500u16.to_be_bytes());
    let mut bad_version = ipv4_udp(1514, 20);
    bad_version[ETHERNET] = 0x65;
    vec![
        (
            "ethertype 0x88b5",
            vec![ethernet(0x88b5, 1514)],
            Fate::Scheduled,
        ),
        ("ipv6", vec![ipv6_udp(1514, &[])], Fate::Scheduled),
        (
            "ipv6 extension headers",
            vec![ipv6_udp(1514, &[0, 60])],
            Fate::Scheduled,
        ),
        ("ipv4 claiming 28 bytes", vec![lying], Fate::Scheduled),
        ("ipv4 fragments", fragments, Fate::Scheduled),
        ("ipv4 options", vec![ipv4_udp(1514, 60)], Fate::Scheduled),
        ("vlan-tagged ipv4", vec![vlan], Fate::Scheduled),
        (
            "ipv4 longer than its frame",
            vec![truncated],
            Fate::Malformed,
        ),
        ("ipv4 of version 6", vec![bad_version], Fate::Malformed),
    ]
}

/// Namespaces a run kept, deleted when dropped: also when an assertion fails.
struct Kept(Vec<String>);

impl Drop for Kept {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "delete", ns]).output();
        }
    }
}

/// L3 bytes the sink's `eth0` received (its kernel counters, less each frame's
/// Ethernet header), read in the kept sink namespace.
fn sink_l3_bytes(sink_ns: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", sink_ns, "cat", "/proc/net/dev"])
        .output()
        .expect("ip netns exec");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("eth0:"))
        .unwrap_or_else(|| panic!("no eth0 in the sink: {text}"));
    let numbers: Vec<u64> = line
        .split_once(':')
        .unwrap()
        .1
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    numbers[0] - ETHERNET as u64 * numbers[1]
}

#[test]
fn crafted_frames_of_every_kind_are_held_to_the_tenants_cap() {
    if !common::runnable(
        "crafted_frames_of_every_kind_are_held_to_the_tenants_cap",
        &[("iperf3", "--version"), ("ethtool", "--version")],
    ) {
        return;
    }
    let scenario = scenario();
    for (kind, frames, fate) in kinds() {
        let before = our_namespaces();
        let options = LabOptions {
            keep: true,
            crafted: vec![CraftedFrames {
                tenant: 0,
                frames,
                frames_per_s: FRAMES_PER_S,
            }],
            ..LabOptions::default()
        };
        let outcome = lab::run_with_engine_stats(&scenario, "wf2q", &options, &mut |_| {});
        let kept = Kept(
            our_namespaces()
                .into_iter()
                .filter(|n| !before.contains(n))
                .collect(),
        );
        let (record, stats) = outcome.unwrap_or_else(|e| panic!("{kind}: {e}"));
        let stats = stats.expect("wf2q runs in nicsched's engine");
        let sink_ns = kept
            .0
            .iter()
            .find(|n| n.ends_with("-sink"))
            .expect("the sink was kept");
        let sink_bps = sink_l3_bytes(sink_ns) as f64 * 8.0 / (stats.run_ns as f64 / 1e9);
        drop(kept);
        assert_nothing_left(&before);
        let summary = report::summarize(&record);
        let evil = &summary.tenants[0];
        let frames = &stats.frames[0];
        let flood = FRAMES_PER_S as f64 * stats.run_ns as f64 / 1e9;
        eprintln!(
            "{kind}: sink {sink_bps:.4e} bit/s, summary {:.4e} bit/s, frames {frames:?}",
            evil.throughput_bps
        );
        assert!(
            sink_bps <= SINK_BPS_MAX,
            "{kind}: {sink_bps:.4e} bit/s reached the sink past a cap of {CAP_BPS:e}"
        );
        assert_eq!(
            evil.frames.as_ref(),
            Some(frames),
            "{kind}: summary.json reports the engine's counts"
        );
        let m = &frames.malformed;
        let malformed =
            m.runt + m.bad_header + m.length_beyond_frame + m.truncated_transport + m.oversize;
        match fate {
            Fate::Scheduled => {
                // The flood was offered: the engine took or refused most of it.
                let seen = (frames.scheduled.ipv4
                    + frames.scheduled.ipv6
                    + frames.scheduled.other
                    + frames.refused) as f64;
                assert!(seen > 0.8 * flood, "{kind}: only {seen} of {flood} frames");
                assert!(
                    sink_bps > 0.9 * CAP_BPS,
                    "{kind}: the tenant is held to its cap, not below it ({sink_bps:.4e})"
                );
                let error = (evil.throughput_bps - sink_bps).abs() / sink_bps;
                assert!(
                    error <= 0.03,
                    "{kind}: summary {:.4e} against the sink's {sink_bps:.4e} bit/s",
                    evil.throughput_bps
                );
            }
            Fate::Malformed => {
                assert!(
                    malformed as f64 > 0.8 * flood,
                    "{kind}: {malformed} of {flood} frames dropped as malformed"
                );
                assert!(
                    sink_bps < 3e6,
                    "{kind}: only the declared 2 Mbit/s reaches the sink ({sink_bps:.4e})"
                );
            }
        }
    }
}
