//! The parallel `valve` (`valve::Shard` over `valve::SharedRates`, and
//! `valve::Sharded`, the shards in one object as the simulator runs them): each
//! tenant on one core, shards on threads lose and duplicate no packet, one core
//! claims each recomputation, and the link follows demand across cores one
//! recomputation late.

use policy::{AppId, Policy};
use sched::bench::{packet_of, policy_for};
use sched::cores::core_of;
use sched::testkit::{Source, drive_link};
use sched::update_interval_ns;
use sched::valve::{Shard, Sharded, SharedRates, core_mask};
use sched::{Capacity, Enforcer, Packet};
use std::collections::BTreeSet;
use std::sync::Arc;

fn parse(yaml: &str, cores: u16) -> Policy {
    let mut policy = policy::parse_policy(yaml, "threads.yaml").unwrap();
    policy.engine.cores = cores;
    policy
}

#[test]
fn each_tenant_runs_on_one_core_heaviest_first_on_the_lightest() {
    let policy = parse(
        "link: { rate: 1Gbit }\ntenants:\n  - { name: a, weight: 1 }\n  - { name: b, weight: 5 }\n  - { name: c, weight: 2 }\n  - { name: d, weight: 2 }\n",
        2,
    );
    // b (5) on core 0; c (2) and d (2) on core 1; a (1) on core 1 (4 < 5).
    assert_eq!(core_mask(&policy), [[1], [0], [1], [1]]);
    let equal = policy_for(64, 64);
    let mut cores = equal.clone();
    cores.engine.cores = 4;
    let mask = core_mask(&cores);
    assert!(mask.iter().enumerate().all(|(t, m)| m == &[(t % 4) as u16]));
    assert_eq!(core_mask(&equal), vec![vec![0]; 16]);
}

#[test]
fn shards_on_threads_send_every_packet_of_their_cores_once() {
    let threads = 4u16;
    let classes = 256;
    let mut policy = policy_for(classes, classes);
    policy.engine.cores = threads;
    let mask = core_mask(&policy);
    let shared = Arc::new(SharedRates::new(&policy));
    let capacity = Capacity {
        classes: 1024,
        packets: 4096,
        ..Capacity::default()
    };
    let rate = policy.link.rate_bps;
    let sent: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|core| {
                let (shared, mask) = (Arc::clone(&shared), &mask);
                scope.spawn(move || {
                    let mut shard = Shard::new(core, capacity, shared);
                    let mut mine = Vec::new();
                    for class in 0..classes {
                        let packet = packet_of(class, u64::from(class));
                        if core_of(mask, packet.tenant, packet.flow) == core {
                            shard.enqueue(0, packet).unwrap();
                            mine.push(u64::from(class));
                        }
                    }
                    let mut now = 0;
                    let mut out = Vec::new();
                    while shard.backlog_packets() > 0 {
                        match shard.dequeue(now) {
                            Some(frame) => {
                                out.push(frame.packet.handle);
                                now += policy::wire::serialisation_ns(frame.bytes, rate);
                            }
                            None => now = shard.next_ready_ns(now).unwrap().max(now + 1),
                        }
                    }
                    out.sort_unstable();
                    assert_eq!(out, mine, "core {core} sends what it was given, once");
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let all: BTreeSet<u64> = sent.iter().flatten().copied().collect();
    assert_eq!(all.len(), classes as usize);
    assert_eq!(sent.iter().map(Vec::len).sum::<usize>(), classes as usize);
}

/// Two tenants of weights 1 and 3 on two cores, `a` backlogged throughout and `b`
/// from `b_from_ns`: the bytes of each in the last `judged_ns`.
fn two_cores(b_from_ns: u64, run_ns: u64, judged_ns: u64) -> (u64, u64, u64) {
    let policy = parse(
        "link: { rate: 1Gbit }\ntenants:\n  - { name: a, weight: 1 }\n  - { name: b, weight: 3 }\n",
        2,
    );
    assert_eq!(core_mask(&policy), [[1], [0]]);
    let mut sharded = Sharded::new(&policy, Capacity::default());
    let source = |app| Source {
        app: AppId(app),
        len_bytes: 1500,
        flows: 4,
        depth: 8,
    };
    let head = drive_link(&policy, &mut sharded, &[source(0)], 0, b_from_ns);
    let both = [source(0), source(1)];
    drive_link(
        &policy,
        &mut sharded,
        &both,
        b_from_ns,
        run_ns - judged_ns - b_from_ns,
    );
    let judged = drive_link(&policy, &mut sharded, &both, run_ns - judged_ns, judged_ns);
    (head.app_bytes[0], judged.app_bytes[0], judged.app_bytes[1])
}

#[test]
fn the_link_follows_demand_across_cores_one_recomputation_late() {
    let dt = update_interval_ns(1_000_000_000);
    let link_bytes = |ns: u64| ns / 8;
    // a alone: its core holds the whole link once a recomputation saw b idle
    // (before that, the part b's weight promised it stays on b's core).
    let (a_alone, a, b) = two_cores(10 * dt, 30 * dt, 10 * dt);
    let alone_share = a_alone as f64 / link_bytes(10 * dt) as f64;
    assert!(
        alone_share > 0.85,
        "a alone got {alone_share:.3} of the link"
    );
    // Both backlogged: 1:3 within 2%.
    let total = (a + b) as f64;
    assert!(total > 0.98 * link_bytes(10 * dt) as f64, "{a} + {b}");
    let a_share = a as f64 / total;
    assert!(
        (a_share - 0.25).abs() < 0.02,
        "a got {a_share:.3}, its ideal 0.25"
    );
}

#[test]
fn one_core_claims_each_recomputation() {
    let mut policy = policy_for(64, 64);
    policy.engine.cores = 2;
    let shared = Arc::new(SharedRates::new(&policy));
    let mut shards: Vec<Shard> = (0..2)
        .map(|core| Shard::new(core, Capacity::default(), Arc::clone(&shared)))
        .collect();
    let dt = update_interval_ns(policy.link.rate_bps);
    for k in 1..=5u64 {
        // Both cores pass the same boundary, in either order, twice.
        for shard in shards.iter_mut().rev() {
            shard.dequeue(k * dt);
        }
        for shard in &mut shards {
            shard.dequeue(k * dt + 1);
        }
        assert_eq!(shared.recomputations(), k);
    }
}

#[test]
fn a_core_that_flushes_after_the_recomputation_keeps_its_apps_demand() {
    // a (100 Mbit/s, under its share) on core 1, b backlogged on core 0. On
    // threads either core's clock may pass a boundary first; here they take
    // turns. A recomputation claimed before core 1 flushed once counted a as
    // having sent nothing, and gave it a θ near 0 for an interval.
    let policy = parse(
        "link: { rate: 1Gbit }\ntenants:\n  - { name: a, weight: 1 }\n  - { name: b, weight: 3 }\n",
        2,
    );
    assert_eq!(core_mask(&policy), [[1], [0]]);
    let shared = Arc::new(SharedRates::new(&policy));
    let mut shards = [
        Shard::new(0, Capacity::default(), Arc::clone(&shared)),
        Shard::new(1, Capacity::default(), Arc::clone(&shared)),
    ];
    let dt = update_interval_ns(policy.link.rate_bps);
    let (step_ns, a_gap_ns) = (10_000, 120_000);
    let mut handle = 0;
    let mut a_due_ns = 0;
    let mut thetas = Vec::new();
    for now_ns in (0..40 * dt).step_by(step_ns as usize) {
        while shards[0].backlog_packets() < 4 {
            handle += 1;
            let p = Packet {
                handle,
                ..sched::testkit::tenant_packet(1, 1500)
            };
            assert!(shards[0].enqueue(now_ns, p).is_ok());
        }
        while a_due_ns <= now_ns {
            handle += 1;
            let p = Packet {
                handle,
                ..sched::testkit::tenant_packet(0, 1500)
            };
            assert!(shards[1].enqueue(now_ns, p).is_ok());
            a_due_ns += a_gap_ns;
        }
        let first = usize::from((now_ns / dt) % 2 == 1);
        let before = shared.recomputations();
        for core in [first, 1 - first] {
            while shards[core].dequeue(now_ns).is_some() {}
        }
        if shared.recomputations() != before && now_ns > 4 * dt {
            thetas.push(shared.tenant_rate_bps(policy::TenantId(0)));
        }
    }
    assert!(thetas.len() > 30, "{thetas:?}");
    assert!(
        thetas.iter().all(|&theta| theta > 90_000_000),
        "a's θ at each recomputation: {thetas:?}"
    );
}
