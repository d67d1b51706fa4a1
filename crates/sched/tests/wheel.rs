//! `wheel` (Carousel/PicNIC): the timing wheel's slot math and order, limits
//! consolidated into one departure time, and packet accounting.

use policy::{AppId, Policy, TenantId, parse_policy};
use sched::testkit::{Source, drive_link};
use sched::wheel::timing::{LEVELS, SLOT_BITS, TimingWheel, level_for, slot_for, slot_start};
use sched::wheel::{Config, Wheel};
use sched::{Enforcer, Packet, Refusal};

fn policy(yaml: &str) -> Policy {
    parse_policy(yaml, "p.yaml").unwrap()
}

fn rate_bps(bytes: u64, duration_ns: u64) -> f64 {
    bytes as f64 * 8e9 / duration_ns as f64
}

fn backlogged(app: u32) -> Source {
    Source {
        app: AppId(app),
        len_bytes: 1500,
        flows: 1,
        depth: 16,
    }
}

/// Every tick around every power of two, against the definition: the level is the
/// 6-bit group of the highest bit in which tick and elapsed differ.
#[test]
fn slot_math_at_power_of_two_boundaries() {
    let mut ticks = vec![0u64, 1, u64::MAX];
    for bit in 0..64 {
        let p = 1u64 << bit;
        ticks.extend([p - 1, p, p + 1]);
    }
    for &elapsed in &ticks {
        for &tick in ticks.iter().filter(|&&t| t >= elapsed) {
            let level = level_for(elapsed, tick);
            let expected = match (elapsed ^ tick).checked_ilog2() {
                None => 0,
                Some(bit) => (bit / SLOT_BITS) as usize,
            };
            assert_eq!(level, expected, "elapsed {elapsed:#x} tick {tick:#x}");
            assert!(level < LEVELS);
            let slot = slot_for(tick, level);
            assert_eq!(slot as u64, (tick >> (SLOT_BITS * level as u32)) & 63);
            // The slot's start is at or before the tick and after elapsed's block.
            let start = slot_start(elapsed, level, slot);
            assert!(start <= tick, "{start:#x} > {tick:#x}");
            assert!(level == 0 || start > elapsed, "{start:#x} <= {elapsed:#x}");
        }
    }
    assert_eq!(level_for(63, 64), 1);
    assert_eq!(level_for(64, 127), 0);
    assert_eq!(level_for(4095, 4096), 2);
    assert_eq!(level_for(0, 1 << 63), 10);
    assert_eq!(slot_start(70, 1, 3), 192);
}

#[test]
fn wheel_releases_in_tick_order_fifo_within_a_tick_with_their_tags() {
    let mut ticks: Vec<u64> = Vec::new();
    for bit in [0u32, 5, 6, 7, 11, 12, 13, 17, 18, 24, 30, 36, 40] {
        let p = 1u64 << bit;
        ticks.extend([p + 1, p - 1, p, p]);
    }
    let mut wheel = TimingWheel::new(ticks.len());
    for (item, &tick) in ticks.iter().enumerate() {
        wheel.insert(item as u32, tick, !(item as u32));
    }
    let mut expected: Vec<(u64, u32)> = ticks
        .iter()
        .enumerate()
        .map(|(i, &t)| (t, i as u32))
        .collect();
    expected.sort(); // by tick, then by insertion
    let mut got = Vec::new();
    while let Some(next) = wheel.next_tick() {
        match wheel.pop_expired(next) {
            Some((item, tick)) => {
                assert!(next <= tick);
                assert_eq!(wheel.tag(item), !item, "the tag it was filed with");
                got.push((tick, item));
            }
            None => assert!(wheel.next_tick().unwrap() > next, "no progress"),
        }
    }
    assert_eq!(got, expected);
    assert!(wheel.is_empty());
}

#[test]
fn wheel_holds_what_is_not_due() {
    let mut wheel = TimingWheel::new(4);
    wheel.insert(0, 1000, 0);
    wheel.insert(1, 100, 0);
    assert_eq!(wheel.pop_expired(99), None);
    assert_eq!(wheel.pop_expired(100), Some((1, 100)));
    assert_eq!(wheel.pop_expired(999), None);
    // Inserted after the wheel moved: a past tick expires at once.
    wheel.insert(2, 5, 0);
    assert_eq!(wheel.pop_expired(999).map(|(item, _)| item), Some(2));
    assert_eq!(wheel.pop_expired(5000), Some((0, 1000)));
    assert_eq!(wheel.next_tick(), None);
}

#[test]
fn a_limited_class_gets_its_rate() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - name: t
    apps:
      - { name: capped, max_rate: 3.3Gbit, match: { ports: [5001] } }
",
    );
    let mut wheel = sched::build("wheel", &p).unwrap();
    let duration_ns = 50_000_000;
    let run = drive_link(&p, wheel.as_mut(), &[backlogged(0)], 0, duration_ns);
    let got = rate_bps(run.app_bytes[0], duration_ns);
    assert!((got / 3.3e9 - 1.0).abs() < 1e-3, "{got}");
    // Never early: no gap shorter than the limit's spacing minus a tick.
    let spacing_ns = 1500.0 * 8.0 / 3.3;
    for w in run.departures.windows(2) {
        assert!((w[1].0 - w[0].0) as f64 > spacing_ns - 256.0, "{w:?}");
    }
}

#[test]
fn nested_limits_give_the_lower() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - name: loose
    max_rate: 5Gbit
    apps:
      - { name: tight, max_rate: 2Gbit, match: { ports: [5001] } }
  - name: tight
    max_rate: 3Gbit
    apps:
      - { name: a, max_rate: 4Gbit, match: { ports: [5001] } }
      - { name: b, max_rate: 4Gbit, match: { ports: [5002] } }
",
    );
    let mut wheel = sched::build("wheel", &p).unwrap();
    let duration_ns = 50_000_000;
    let tight_app = p.app_by_name(TenantId(0), "tight").unwrap();
    let a = p.app_by_name(TenantId(1), "a").unwrap();
    let b = p.app_by_name(TenantId(1), "b").unwrap();
    let run = drive_link(
        &p,
        wheel.as_mut(),
        &[backlogged(tight_app.0), backlogged(a.0), backlogged(b.0)],
        0,
        duration_ns,
    );
    let app = |id: AppId| rate_bps(run.app_bytes[id.index()], duration_ns);
    assert!(
        (app(tight_app) / 2e9 - 1.0).abs() < 1e-3,
        "{}",
        app(tight_app)
    );
    let tenant = app(a) + app(b);
    assert!((tenant / 3e9 - 1.0).abs() < 1e-3, "{tenant}");
}

#[test]
fn split_classes_are_limited_each() {
    let p = policy(
        "
link: { rate: 10Gbit }
tenants:
  - name: t
    apps:
      - name: bulk
        match: { ports: [5001] }
        split: { by: destination, max_rate: 500Mbit }
",
    );
    let mut wheel = sched::build("wheel", &p).unwrap();
    let duration_ns = 50_000_000;
    let sources: Vec<Source> = (0..4).map(|_| backlogged(0)).collect();
    let run = drive_link(&p, wheel.as_mut(), &sources, 0, duration_ns);
    let got = rate_bps(run.app_bytes[0], duration_ns);
    assert!((got / 2e9 - 1.0).abs() < 1e-3, "{got}");
}

fn packet(p: &Policy, tenant: u16, handle: u64, len_bytes: u32) -> Packet {
    Packet {
        len_bytes,
        tenant: TenantId(tenant),
        app: p.catch_all_app(TenantId(tenant)),
        flow: 0,
        destination: 0,
        core: 0,
        arrival_ns: 0,
        handle,
    }
}

#[test]
fn unlimited_traffic_leaves_at_once_in_arrival_order() {
    let p = policy("link: { rate: 10Gbit }\ntenants:\n  - { name: a }\n  - { name: b }\n");
    let mut wheel = sched::build("wheel", &p).unwrap();
    let now = 1_000_123;
    for handle in 0..10 {
        wheel
            .enqueue(now, packet(&p, (handle % 2) as u16, handle, 1500))
            .unwrap();
    }
    let order: Vec<u64> = std::iter::from_fn(|| wheel.dequeue(now))
        .map(|f| f.packet.handle)
        .collect();
    assert_eq!(order, (0..10).collect::<Vec<_>>());
    assert_eq!(wheel.next_ready_ns(now), None);
}

#[test]
fn accounting_refuses_past_the_caps() {
    let p = policy(
        "
link: { rate: 1Gbit }
buffer: 7500B
tenants:
  - { name: flood, buffer: 4500B, max_rate: 10Mbit }
  - { name: other }
",
    );
    let mut wheel = sched::build("wheel", &p).unwrap();
    for handle in 0..3 {
        wheel.enqueue(0, packet(&p, 0, handle, 1500)).unwrap();
    }
    let (back, reason) = wheel.enqueue(0, packet(&p, 0, 3, 1500)).unwrap_err();
    assert_eq!((back.handle, reason), (3, Refusal::TenantBuffer));
    wheel.enqueue(0, packet(&p, 1, 4, 1500)).unwrap();
    wheel.enqueue(0, packet(&p, 1, 5, 1500)).unwrap();
    let (_, reason) = wheel.enqueue(0, packet(&p, 1, 6, 1500)).unwrap_err();
    assert_eq!(reason, Refusal::HostBuffer);
    assert_eq!(wheel.counters()[0].refused_packets, 1);
    assert_eq!(wheel.counters()[1].refused_packets, 1);
    // The flooding tenant's first packet leaves now; its buffer is returned.
    let frame = wheel.dequeue(0).unwrap();
    assert_eq!(frame.packet.handle, 0);
    wheel.enqueue(0, packet(&p, 0, 7, 1500)).unwrap();
    assert_eq!(wheel.backlog_packets(), 5);
}

/// A split class is made when its first packet is classified, before admission; one
/// whose first packet was refused once left the next new class without its
/// departure time (an index out of bounds).
#[test]
fn a_split_class_made_by_a_refused_packet_does_not_upset_the_next() {
    let p = policy(
        "link: { rate: 1Gbit }
buffer: 2000B
tenants:
  - name: a
    apps:
      - { name: spread, split: { by: destination, max_rate: 100Mbit } }
",
    );
    let mut wheel = sched::build("wheel", &p).unwrap();
    let to = |destination: u32, handle: u64| Packet {
        destination,
        ..packet(&p, 0, handle, 1500)
    };
    wheel.enqueue(0, to(0, 0)).unwrap();
    let (_, reason) = wheel.enqueue(0, to(1, 1)).unwrap_err();
    assert_eq!(reason, Refusal::HostBuffer);
    assert_eq!(wheel.dequeue(0).unwrap().packet.handle, 0);
    wheel.enqueue(0, to(2, 2)).unwrap();
    wheel.enqueue(0, to(1, 3)).unwrap_err();
    assert_eq!(wheel.dequeue(0).unwrap().packet.handle, 2);
    assert_eq!(wheel.classes(), Some(4));
}

#[test]
fn a_full_descriptor_pool_refuses_with_queue_full() {
    let p = policy("link: { rate: 1Gbit }\ntenants:\n  - { name: a }\n");
    let config = Config {
        packets_max: 1,
        ..Config::default()
    };
    let mut wheel = Wheel::new(&p, config).unwrap();
    wheel.enqueue(0, packet(&p, 0, 0, 100)).unwrap();
    let (_, reason) = wheel.enqueue(0, packet(&p, 0, 1, 100)).unwrap_err();
    assert_eq!(reason, Refusal::QueueFull);
}

mod invariants {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a sorted reference: items leave by tick, FIFO within a tick,
        /// never before their tick, whatever the interleaving of inserts and pops.
        #[test]
        fn wheel_matches_a_sorted_reference(
            ops in proptest::collection::vec((0u64..1 << 20, 0u64..1 << 14, 0u8..4), 1..400),
        ) {
            let mut wheel = TimingWheel::new(ops.len());
            let mut reference: Vec<(u64, u32)> = Vec::new();
            let mut now = 0u64;
            for (item, &(delay, step, pops)) in ops.iter().enumerate() {
                let tick = now + delay;
                wheel.insert(item as u32, tick, 0);
                reference.push((tick, item as u32));
                now += step;
                for _ in 0..pops {
                    reference.sort();
                    let due = reference.first().filter(|r| r.0 <= now).copied();
                    let got = wheel.pop_expired(now).map(|(item, tick)| (tick, item));
                    prop_assert_eq!(got, due);
                    if due.is_some() {
                        reference.remove(0);
                    }
                }
            }
            reference.sort();
            for expected in reference {
                let at = wheel.next_tick().unwrap();
                prop_assert!(at <= expected.0);
                prop_assert_eq!(wheel.next_tick_exact(), Some(expected.0));
                let got = wheel.pop_expired(expected.0).map(|(item, tick)| (tick, item));
                prop_assert_eq!(got, Some(expected));
            }
            prop_assert!(wheel.is_empty());
        }
    }
}
