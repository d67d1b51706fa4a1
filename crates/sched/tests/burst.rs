//! Bursts are the calls one by one: every enforcer nicsched builds, driven through
//! a generated sequence of arrival bursts and link bursts twice, once with
//! `enqueue`/`dequeue` and once with `enqueue_burst`/`dequeue_burst` (and
//! `enqueue_all`), gives the same frames at the same times, the same refusals, the
//! same counters, backlog and classes, and names the same next time.

use policy::{AppId, Policy, parse_policy};
use proptest::prelude::*;
use sched::{Capacity, Enforcer, Frame, Packet, Refusal};

/// Policies that refuse (buffers, small class limits), split by destination and by
/// flow, cap, guarantee and prioritise, so every enforcer's paths are taken.
const POLICIES: &[&str] = &[
    "link: { rate: 1Gbit, queues: 4 }
buffer: 200KiB
tenants:
  - name: a
    weight: 2
    buffer: 64KiB
    apps:
      - { name: d, match: { ports: [5001] }, split: { by: destination, max_rate: 50Mbit } }
      - { name: f, match: { ports: [5002] }, priority: 2, split: { by: flow, max_rate: 200Mbit } }
  - name: b
    min_rate: 100Mbit
    max_rate: 600Mbit
  - name: c
    weight: 3
",
    "link: { rate: 10Gbit, queues: 3 }
tenants:
  - name: x
    max_rate: 2Gbit
    apps:
      - { name: p, match: { ports: [5001] }, weight: 3, max_rate: 1Gbit }
      - { name: q, weight: 1, split: { by: destination, max_rate: 300Mbit } }
  - name: y
    weight: 4
",
];

/// Small bounds, so that class limits, the descriptor pool and the bound on
/// classes refuse packets too.
fn capacity() -> Capacity {
    Capacity {
        classes: 24,
        packets: 64,
        qdisc_packets: Some(12),
        class_packets: Some(10),
    }
}

/// One step of a run: a burst of arrivals, or a burst of frames onto the link.
#[derive(Clone, Debug)]
enum Step {
    /// Packets (app, length, flow and destination key) arriving at once, after
    /// the clock moves on by the given ns; `all` hands them over with
    /// `enqueue_all` (going on past refusals), else with `enqueue_burst`
    /// (stopping at the first).
    Arrive {
        after_ns: u64,
        packets: Vec<(usize, u32, u32)>,
        all: bool,
    },
    /// Up to `max` frames.
    Send { max: usize },
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let arrive = (
        0u64..50_000,
        proptest::collection::vec((any::<usize>(), 64u32..20_000, 0u32..40), 0..40),
        any::<bool>(),
    )
        .prop_map(|(after_ns, packets, all)| Step::Arrive {
            after_ns,
            packets,
            all,
        });
    let send = (0usize..48).prop_map(|max| Step::Send { max });
    proptest::collection::vec(prop_oneof![arrive, send], 1..60)
}

/// What an enforcer did, in order, and what it reported after each step.
#[derive(Debug, Default, PartialEq)]
struct Trace {
    refused: Vec<(Packet, Refusal)>,
    frames: Vec<(u64, Frame)>,
    after_each_step: Vec<String>,
}

fn packet_of(policy: &Policy, (app, len, key): (usize, u32, u32), handle: u64) -> Packet {
    let app = AppId((app % policy.apps.len()) as u32);
    Packet {
        len_bytes: len,
        tenant: policy.app(app).tenant,
        app,
        flow: key,
        destination: key % 7,
        core: 0,
        arrival_ns: 0,
        handle,
    }
}

/// Runs `steps`, by bursts or one call at a time.
fn run(policy: &Policy, enforcer: &mut dyn Enforcer, steps: &[Step], bursts: bool) -> Trace {
    let rate = policy.link.rate_bps;
    let mut trace = Trace::default();
    let mut now = 0u64;
    let mut handle = 0u64;
    for step in steps {
        match step {
            Step::Arrive {
                after_ns,
                packets,
                all,
            } => {
                now += after_ns;
                let packets: Vec<Packet> = packets
                    .iter()
                    .map(|&p| {
                        handle += 1;
                        Packet {
                            arrival_ns: now,
                            ..packet_of(policy, p, handle)
                        }
                    })
                    .collect();
                match (bursts, all) {
                    (true, true) => sched::enqueue_all(enforcer, now, &packets, &mut trace.refused),
                    (true, false) => {
                        if let Err((i, why)) = enforcer.enqueue_burst(now, &packets) {
                            trace.refused.push((packets[i], why));
                        }
                    }
                    (false, all) => {
                        for &packet in &packets {
                            if let Err(refused) = enforcer.enqueue(now, packet) {
                                trace.refused.push(refused);
                                if !all {
                                    break;
                                }
                            }
                        }
                    }
                }
            }
            Step::Send { max } => {
                let start = now;
                if bursts {
                    let mut frames = Vec::new();
                    now = enforcer.dequeue_burst(now, rate, *max, &mut frames);
                    let mut at = start;
                    for frame in frames {
                        trace.frames.push((at, frame));
                        at += policy::wire::serialisation_ns(frame.bytes, rate);
                    }
                    assert_eq!(at, now, "the burst ends when its last frame is sent");
                } else {
                    for _ in 0..*max {
                        let Some(frame) = enforcer.dequeue(now) else {
                            break;
                        };
                        trace.frames.push((now, frame));
                        now += policy::wire::serialisation_ns(frame.bytes, rate);
                    }
                }
                if now == start
                    && let Some(at) = enforcer.next_ready_ns(now)
                {
                    now = at.max(now + 1);
                }
            }
        }
        trace.after_each_step.push(format!(
            "at {now}: backlog {}, classes {:?}, next {:?}, counters {:?}",
            enforcer.backlog_packets(),
            enforcer.classes(),
            enforcer.next_ready_ns(now),
            enforcer.counters()
        ));
    }
    trace
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn bursts_are_the_calls_one_by_one(which in 0..POLICIES.len(), steps in steps()) {
        let policy = parse_policy(POLICIES[which], "burst.yaml").unwrap();
        let mut compared = 0;
        for row in sched::registry::built() {
            let build = || sched::build_with(row.name, &policy, capacity());
            let (Ok(mut single), Ok(mut burst)) = (build(), build()) else {
                continue;
            };
            let one_by_one = run(&policy, single.as_mut(), &steps, false);
            let by_bursts = run(&policy, burst.as_mut(), &steps, true);
            prop_assert_eq!(one_by_one, by_bursts, "{}", row.name);
            compared += 1;
        }
        prop_assert!(compared > 0, "some enforcer runs the policy");
    }
}

/// The test above compares something: the runs it compares refuse packets and
/// send frames, and the sequences differ from enforcer to enforcer.
#[test]
fn the_runs_compared_refuse_and_send() {
    let policy = parse_policy(POLICIES[0], "burst.yaml").unwrap();
    let arrive = Step::Arrive {
        after_ns: 0,
        packets: (0..40).map(|i| (i, 9000, i as u32)).collect(),
        all: true,
    };
    // Shapers that start without tokens send nothing in the first burst; the
    // clock then moves to their next time.
    let send = Step::Send { max: 20 };
    let steps = [arrive, send.clone(), send.clone(), send];
    let mut built = 0;
    for row in sched::registry::built() {
        let Ok(mut enforcer) = sched::build_with(row.name, &policy, capacity()) else {
            continue;
        };
        let trace = run(&policy, enforcer.as_mut(), &steps, true);
        assert!(!trace.refused.is_empty(), "{}: {trace:?}", row.name);
        assert!(!trace.frames.is_empty(), "{}: {trace:?}", row.name);
        built += 1;
    }
    assert!(built >= 5, "{built} enforcers built");
}
