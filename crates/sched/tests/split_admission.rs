//! Split classes of one app share its queue limit by dynamic thresholds
//! (sched::accounting's module docs): udp flows at constant gaps, even arriving
//! nanoseconds apart, each get their max-min fair part of the link, where with
//! plain tail drop on the app's limit the classes held at their cap kept the
//! queue full and the flows that found it full were locked out.

use policy::{AppId, Policy, TenantId, parse_policy};
use proptest::prelude::*;
use sched::{Capacity, Enforcer, HostLimits, Packet};

const LINK_BPS: u64 = 300_000_000;
const CAP_BPS: u64 = 39_052_000;
const LEN_BYTES: u32 = 1498;
const MEASURED_FROM_NS: u64 = 3_000_000_000;
const END_NS: u64 = 5_000_000_000;

fn policy(link_bps: u64, cap_bps: u64) -> Policy {
    parse_policy(
        &format!(
            "link: {{ rate: {link_bps}bit }}
tenants:
  - name: t0
    apps:
      - name: a1
        match: {{ proto: udp, ports: [5001] }}
        split: {{ by: flow, max_rate: {cap_bps}bit }}
"
        ),
        "p.yaml",
    )
    .unwrap()
}

fn wire_ns(bytes: u32, link_bps: u64) -> u64 {
    (u64::from(bytes) * 8 * 1_000_000_000).div_ceil(link_bps)
}

/// Udp flows at constant gaps into one split app, each its own class.
#[derive(Debug)]
struct Flows {
    link_bps: u64,
    cap_bps: u64,
    /// Each flow's rate, and when its first datagram arrives.
    flows: Vec<(u64, u64)>,
}

impl Flows {
    /// `count` flows of `flow_bps` on the 300 Mbit/s link with classes capped at
    /// 39.05, flow `f` starting at `f` × 7 ns: in step.
    fn in_step(count: u32, flow_bps: u64) -> Self {
        Flows {
            link_bps: LINK_BPS,
            cap_bps: CAP_BPS,
            flows: (0..u64::from(count)).map(|f| (flow_bps, f * 7)).collect(),
        }
    }

    /// Each flow's Mbit/s from 3 to 5 s behind the host's Linux queue limits.
    fn mbps(&self, enforcer: &str) -> Vec<f64> {
        let p = policy(self.link_bps, self.cap_bps);
        let capacity = Capacity::for_host(enforcer, HostLimits::LINUX);
        let mut e = sched::build_with(enforcer, &p, capacity).unwrap();
        let gaps: Vec<u64> = self
            .flows
            .iter()
            .map(|&(bps, _)| u64::from(LEN_BYTES) * 8 * 1_000_000_000 / bps)
            .collect();
        let mut arrivals: Vec<u64> = self.flows.iter().map(|&(_, first)| first).collect();
        let mut sent = vec![0u64; self.flows.len()];
        let mut link_free_ns = 0;
        let mut handle = 0;
        loop {
            let next_arrival = *arrivals.iter().min().unwrap();
            let now = if link_free_ns <= next_arrival {
                match e.next_ready_ns(link_free_ns) {
                    Some(ready) if ready <= next_arrival => ready.max(link_free_ns),
                    _ => next_arrival,
                }
            } else {
                next_arrival
            };
            if now >= END_NS {
                break;
            }
            for (flow, at) in arrivals.iter_mut().enumerate() {
                while *at <= now {
                    handle += 1;
                    let packet = Packet {
                        len_bytes: LEN_BYTES,
                        tenant: TenantId(0),
                        app: AppId(0),
                        flow: flow as u32,
                        destination: flow as u32,
                        core: 0,
                        arrival_ns: *at,
                        handle: (flow as u64) << 32 | handle,
                    };
                    // A refusal is what this test is about: the flow loses it.
                    let _ = e.enqueue(*at, packet);
                    *at += gaps[flow];
                }
            }
            if now >= link_free_ns
                && let Some(frame) = e.dequeue(now)
            {
                if now >= MEASURED_FROM_NS {
                    sent[(frame.packet.handle >> 32) as usize] += u64::from(frame.bytes);
                }
                link_free_ns = now + wire_ns(frame.bytes, self.link_bps);
            }
        }
        let seconds = (END_NS - MEASURED_FROM_NS) as f64 / 1e9;
        sent.iter()
            .map(|&bytes| bytes as f64 * 8.0 / seconds / 1e6)
            .collect()
    }

    /// Each flow's max-min fair part of the link, in Mbit/s, as the ideal gives
    /// it: its offer up to its cap, the rest water-filled.
    fn fair_mbps(&self) -> Vec<f64> {
        let wants: Vec<f64> = self
            .flows
            .iter()
            .map(|&(bps, _)| (bps.min(self.cap_bps)) as f64 / 1e6)
            .collect();
        let mut fair = vec![0.0; wants.len()];
        let mut left = self.link_bps as f64 / 1e6;
        let mut open: Vec<usize> = (0..wants.len()).collect();
        while !open.is_empty() {
            let each = left / open.len() as f64;
            let (done, rest): (Vec<usize>, Vec<usize>) =
                open.iter().partition(|&&f| wants[f] <= each);
            if done.is_empty() {
                for f in rest {
                    fair[f] = each;
                }
                break;
            }
            for f in done {
                fair[f] = wants[f];
                left -= wants[f];
            }
            open = rest;
        }
        fair
    }
}

fn assert_fair(enforcer: &str, flows: u32, flow_bps: u64) {
    let flows = Flows::in_step(flows, flow_bps);
    let got = flows.mbps(enforcer);
    let total: f64 = got.iter().sum();
    assert!(
        total > 0.995 * LINK_BPS as f64 / 1e6,
        "{enforcer}: the link sent {total:.1} Mbit/s, {got:.1?}"
    );
    for ((flow, mbps), fair) in got.iter().enumerate().zip(flows.fair_mbps()) {
        assert!(
            (mbps - fair).abs() < 0.05 * fair,
            "{enforcer}: flow {flow} got {mbps:.1} of {fair:.1} Mbit/s, {got:.1?}"
        );
    }
}

/// Seed 914333 of the claims survey, its flows in step: 9 of 40.2 Mbit/s, each
/// above its class's cap. Before, 2-3 flows got through and the link sent 98-121
/// Mbit/s of its 300.
#[test]
fn flows_above_their_split_cap_each_get_a_fair_part() {
    for enforcer in ["htb", "valve", "wf2q"] {
        assert_fair(enforcer, 9, 40_200_000);
        assert_fair(enforcer, 12, 40_200_000);
    }
}

/// Below their cap the flows locked each other out too: of 20 flows of 30
/// Mbit/s, 10 got 30 and 10 nothing, the link full.
#[test]
fn flows_below_their_split_cap_each_get_a_fair_part() {
    for enforcer in ["htb", "valve", "wf2q"] {
        assert_fair(enforcer, 20, 30_000_000);
    }
}

/// A split class is admitted while it holds fewer packets than the app's queue
/// has room left, so one that holds none gets in while there is any room.
#[test]
fn a_split_class_holding_packets_leaves_room_for_one_that_holds_none() {
    let p = policy(LINK_BPS, CAP_BPS);
    let capacity = Capacity {
        class_packets: Some(10),
        ..Capacity::default()
    };
    for enforcer in ["htb", "valve", "wf2q"] {
        let mut e: Box<dyn Enforcer> = sched::build_with(enforcer, &p, capacity).unwrap();
        let packet = |flow: u32| Packet {
            len_bytes: LEN_BYTES,
            tenant: TenantId(0),
            app: AppId(0),
            flow,
            destination: flow,
            core: 0,
            arrival_ns: 0,
            handle: u64::from(flow),
        };
        // One class alone may fill half of the 10: at 5 it holds the room left.
        let first: Vec<bool> = (0..7).map(|_| e.enqueue(0, packet(1)).is_ok()).collect();
        assert_eq!(
            first,
            [true, true, true, true, true, false, false],
            "{enforcer}"
        );
        // A second gets in, up to 3, against the 2 left then.
        let second: Vec<bool> = (0..4).map(|_| e.enqueue(0, packet(2)).is_ok()).collect();
        assert_eq!(second, [true, true, true, false], "{enforcer}");
        // A third gets one of the 2 left, whatever the others hold.
        assert!(e.enqueue(0, packet(3)).is_ok(), "{enforcer}");
        // Emptied, the queue has its room back: one class alone fills half again.
        let mut now_ns = 0;
        let mut sent = 0;
        while let Some(ready) = e.next_ready_ns(now_ns) {
            now_ns = ready;
            if let Some(frame) = e.dequeue(now_ns) {
                sent += 1;
                now_ns += wire_ns(frame.bytes, LINK_BPS);
            }
        }
        assert_eq!(sent, 9, "{enforcer}");
        let again: Vec<bool> = (0..7)
            .map(|_| e.enqueue(now_ns, packet(2)).is_ok())
            .collect();
        assert_eq!(
            again,
            [true, true, true, true, true, false, false],
            "{enforcer}"
        );
    }
}

fn arb_flows() -> impl Strategy<Value = Flows> {
    let link = prop::sample::select(vec![100_000_000u64, 300_000_000, 1_000_000_000]);
    let cap = 5_000_000u64..80_000_000;
    let flow = (5_000_000u64..120_000_000, any::<bool>(), 0u64..1_000_000);
    (link, cap, prop::collection::vec(flow, 2..24)).prop_map(|(link_bps, cap_bps, flows)| Flows {
        link_bps,
        cap_bps,
        flows: flows
            .into_iter()
            .enumerate()
            .map(|(f, (bps, in_step, first))| (bps, if in_step { f as u64 * 7 } else { first }))
            .collect(),
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever the flows' rates and phases: the link sends what the flows may
    /// (their offers up to their caps, at most the link), and each flow gets its
    /// max-min fair part within 1%. Over 200 cases (PROPTEST_CASES=200) flows got
    /// 99.91-100.09% of their parts, and the link at least 99.95% of what the
    /// flows may. With tail drop on the app's limit alone, the same cases sent as
    /// little as 34% of it, and flows got 6-244% of their parts, 41% of them
    /// under half; with one threshold for the classes together (n/(n+1) of the
    /// limit for n busy classes, a class holding none admitted up to it), 61-117%.
    #[test]
    fn udp_flows_of_a_split_app_get_their_fair_parts(flows in arb_flows()) {
        let fair = flows.fair_mbps();
        let may: f64 = fair.iter().sum();
        for enforcer in ["htb", "valve", "wf2q"] {
            let got = flows.mbps(enforcer);
            let total: f64 = got.iter().sum();
            prop_assert!(
                total > 0.995 * may,
                "{enforcer}: the link sent {total:.1} of {may:.1} Mbit/s, {got:.1?} against {fair:.1?}"
            );
            for (flow, (mbps, fair_mbps)) in got.iter().zip(&fair).enumerate() {
                prop_assert!(
                    (mbps - fair_mbps).abs() < 0.01 * fair_mbps,
                    "{enforcer}: flow {flow} got {mbps:.1} of {fair_mbps:.1} Mbit/s, {got:.1?} against {fair:.1?}"
                );
            }
        }
    }
}
