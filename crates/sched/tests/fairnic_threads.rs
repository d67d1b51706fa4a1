//! FairNIC's threaded form (`fairnic::Shard` over `fairnic::SharedPools`): one
//! shard is the whole enforcer when there is one core; shards on threads lose and
//! duplicate no packet; the shared pool never hands out more than it was given,
//! whatever the threads' interleaving; a capped tenant on several cores stays
//! within its cap while stealing what an idle tenant's cores leave; and threads
//! that race for the link keep their tenants' shares.

use policy::{AppId, Policy, TenantId};
use sched::bench::{packet_of, policy_for};
use sched::cores::core_of;
use sched::fairnic::{Bucket, FairNic, Shard, SharedPool, SharedPools, UNITS_PER_BYTE, core_mask};
use sched::{Capacity, Enforcer, Packet};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A small deterministic generator (64-bit LCG, high bits), so failures replay.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn parse(yaml: &str, cores: u16) -> Policy {
    let mut policy = policy::parse_policy(yaml, "threads.yaml").unwrap();
    policy.engine.cores = cores;
    policy
}

fn packet(tenant: u16, flow: u32, len_bytes: u32, handle: u64) -> Packet {
    Packet {
        len_bytes,
        tenant: TenantId(tenant),
        app: AppId(u32::from(tenant)),
        flow,
        destination: 0,
        core: 0,
        arrival_ns: 0,
        handle,
    }
}

/// A shard for each of the policy's engine cores, over one set of shared pools,
/// each holding up to `packets` packets in 16 classes.
fn shards_over_one_pool(policy: &Policy, packets: usize) -> Vec<Shard> {
    let capacity = Capacity {
        classes: 16,
        packets,
        qdisc_packets: None,
        class_packets: None,
    };
    let pool = Arc::new(SharedPools::new(policy).unwrap());
    (0..policy.engine.cores)
        .map(|core| Shard::shard(policy, capacity, core, Arc::clone(&pool)))
        .collect()
}

fn serialisation_ns(bytes: u32, rate_bps: u64) -> u64 {
    policy::wire::serialisation_ns(bytes, rate_bps)
}

#[test]
fn one_shard_of_one_core_decides_as_the_whole_enforcer() {
    // c comes and goes for longer than its buckets take to fill (two periods of
    // 8.4 ms at 1 Gbit/s), so they spill and a and b compete for the pool: their
    // allowances grow while it suffices and shrink when it does not.
    let policy = parse(
        "link: { rate: 1Gbit }\ntenants:\n  - { name: a, weight: 1 }\n  - { name: b, weight: 2 }\n  - { name: c, weight: 3 }\n",
        1,
    );
    let capacity = Capacity {
        classes: 64,
        packets: 256,
        qdisc_packets: None,
        class_packets: None,
    };
    let mut whole = FairNic::new(&policy, capacity);
    let pool = Arc::new(SharedPools::new(&policy).unwrap());
    let mut shard = Shard::shard(&policy, capacity, 0, Arc::clone(&pool));
    let mut rng = Lcg(7);
    let mut now_ns = 0u64;
    let mut departures = 0;
    for handle in 0..40_000u64 {
        let c_on = (now_ns / 40_000_000).is_multiple_of(2);
        let tenant = rng.below(if c_on { 3 } else { 2 }) as u16;
        if rng.below(3) > 0 {
            let p = packet(
                tenant,
                rng.below(8) as u32,
                64 + rng.below(1437) as u32,
                handle,
            );
            assert_eq!(
                whole.enqueue(now_ns, p),
                shard.enqueue(now_ns, p),
                "{now_ns}"
            );
        }
        let frame = whole.dequeue(now_ns);
        assert_eq!(frame, shard.dequeue(now_ns), "{now_ns}");
        match frame {
            Some(f) => {
                departures += 1;
                now_ns += serialisation_ns(f.bytes, policy.link.rate_bps);
            }
            None => {
                let next = whole.next_ready_ns(now_ns);
                assert_eq!(next, shard.next_ready_ns(now_ns), "{now_ns}");
                now_ns = next.unwrap_or(now_ns).max(now_ns + 1 + rng.below(20_000));
            }
        }
    }
    assert!(departures > 10_000, "{departures}");
    assert!(now_ns > 200_000_000, "{now_ns}: c came and went");
    assert!(
        pool.link.snapshot().stamp_ns > 0,
        "the shard took from the pool"
    );
    assert_eq!(whole.counters(), shard.counters());
}

#[test]
fn shards_on_threads_send_every_packet_of_their_cores_once() {
    let threads = 3u16;
    let classes = 96u32;
    let mut policy = policy_for(classes, classes);
    policy.engine.cores = threads;
    let mask = core_mask(&policy);
    let capacity = Capacity {
        classes: 256,
        packets: 1024,
        qdisc_packets: None,
        class_packets: None,
    };
    let packets: Vec<Packet> = (0..classes * 4)
        .map(|i| packet_of(i % classes, u64::from(i)))
        .collect();
    let pool = Arc::new(SharedPools::new(&policy).unwrap());
    let sent: Vec<(Vec<u64>, Vec<u64>)> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..threads)
            .map(|core| {
                let (policy, pool, packets, mask) = (&policy, &pool, &packets, &mask);
                scope.spawn(move || {
                    let mut shard = Shard::shard(policy, capacity, core, Arc::clone(pool));
                    let mut mine = Vec::new();
                    // Every packet is offered to every shard: each takes its core's,
                    // and hands the others back as they were.
                    for &p in packets {
                        match shard.enqueue(0, p) {
                            Ok(()) => mine.push(p.handle),
                            Err((back, _)) => {
                                assert_eq!(back, p);
                                assert_ne!(core_of(mask, p.tenant, p.flow), core);
                            }
                        }
                    }
                    let mut left = Vec::new();
                    let mut now_ns = 0;
                    while shard.backlog_packets() > 0 {
                        match shard.dequeue(now_ns) {
                            Some(f) => {
                                assert!(f.last);
                                left.push(f.packet.handle);
                                now_ns += serialisation_ns(f.bytes, policy.link.rate_bps);
                            }
                            None => {
                                let next = shard
                                    .next_ready_ns(now_ns)
                                    .expect("held packets wait for time");
                                now_ns = next.max(now_ns + 1);
                            }
                        }
                    }
                    (mine, left)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut all = BTreeSet::new();
    for (core, (mine, mut left)) in sent.into_iter().enumerate() {
        assert!(!mine.is_empty(), "core {core} got packets");
        for handle in &mine {
            assert_eq!(
                usize::from({
                    let p = &packets[*handle as usize];
                    core_of(&mask, p.tenant, p.flow)
                }),
                core
            );
        }
        left.sort_unstable();
        let mut taken = mine.clone();
        taken.sort_unstable();
        assert_eq!(left, taken, "core {core} sends what it took, once each");
        for handle in mine {
            assert!(all.insert(handle), "packet {handle} taken by two cores");
        }
    }
    assert_eq!(all.len(), packets.len(), "every packet taken by its core");
}

/// Threads refill, take and absorb on one pool with their own clocks; what was
/// taken plus what is left is what time and spills put in, less what the cap
/// turned away.
fn hammer(cap: i128, seed: u64) -> (i128, i128, i128, Bucket) {
    let rate_bps = 8_000_000;
    let mut start = Bucket::new(rate_bps, 100_000);
    start.cap = cap;
    let pool = SharedPool::from_bucket(start).unwrap();
    let threads = 4;
    // Started together, so their operations overlap for as long as they run.
    let ready = std::sync::Barrier::new(threads);
    let totals: Vec<(i128, i128)> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..threads as u64)
            .map(|t| {
                let (pool, ready) = (&pool, &ready);
                scope.spawn(move || {
                    let mut rng = Lcg(seed * 31 + t);
                    let (mut taken, mut absorbed) = (0i128, 0i128);
                    let mut now_ns = 0u64;
                    ready.wait();
                    for _ in 0..200_000 {
                        now_ns += rng.below(200);
                        pool.refill(now_ns);
                        let len = 1 + rng.below(150) as u32;
                        if pool.take(len) {
                            taken += i128::from(len) * UNITS_PER_BYTE;
                        }
                        if rng.below(4) == 0 {
                            let spill = i128::from(rng.below(70)) * UNITS_PER_BYTE;
                            pool.absorb(spill);
                            absorbed += spill;
                        }
                    }
                    (taken, absorbed)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let taken = totals.iter().map(|t| t.0).sum();
    let absorbed = totals.iter().map(|t| t.1).sum();
    let end = pool.snapshot();
    let refilled = i128::from(rate_bps) * i128::from(end.stamp_ns);
    (taken, absorbed, refilled, end)
}

#[test]
fn the_shared_pool_hands_out_exactly_what_it_was_given_from_many_threads() {
    for seed in 0..8 {
        // A cap never reached: nothing is turned away, so the balance is exact.
        let (taken, absorbed, refilled, end) = hammer(i128::from(i64::MAX / 2), seed);
        assert!(taken > 0, "seed {seed}");
        assert_eq!(taken + end.tokens, refilled + absorbed, "seed {seed}");
        // A cap of 2 of the largest takes: some is turned away, never more handed out.
        let cap = 300 * UNITS_PER_BYTE;
        let (taken, absorbed, refilled, end) = hammer(cap, seed);
        assert!(taken > 0, "seed {seed}");
        assert!(taken + end.tokens <= refilled + absorbed, "seed {seed}");
        assert!(
            (0..=cap).contains(&end.tokens),
            "seed {seed}: {}",
            end.tokens
        );
    }
}

#[test]
fn a_capped_tenant_on_two_cores_steals_up_to_its_cap_and_no_more() {
    // a's base rate is its half of the link; its cap leaves 1 Gbit/s to steal from
    // what b's idle cores spill, a half of it on each of a's two cores.
    let policy = parse(
        "link: { rate: 10Gbit }\ntenants:\n  - { name: a, max_rate: 6Gbit }\n  - { name: b }\n",
        4,
    );
    assert_eq!(core_mask(&policy), vec![vec![0, 1], vec![2, 3]]);
    let mut shards = shards_over_one_pool(&policy, 64);
    // Flows 0 and 1 of a: one on each of its cores, each kept 4 packets deep.
    let mut handle = 0;
    for flow in 0..2u32 {
        for _ in 0..4 {
            handle += 1;
            let p = packet(0, flow, 1500, handle);
            assert!(shards[flow as usize].enqueue(0, p).is_ok());
        }
    }
    let run_ns = 200_000_000u64;
    let mut sent = 0u64;
    // Lockstep, 1 µs apart; b's shards hold nothing but are polled, as their
    // threads would be.
    for now_ns in (0..=run_ns).step_by(1_000) {
        for shard in &mut shards {
            while let Some(frame) = shard.dequeue(now_ns) {
                sent += u64::from(frame.bytes);
                let p = packet(0, frame.packet.flow, 1500, frame.packet.handle);
                assert!(shard.enqueue(now_ns, p).is_ok());
            }
        }
    }
    let bps = sent as f64 * 8e9 / run_ns as f64;
    // Slack for the start: two periods in each of a's local buckets, and a first
    // allowance per core (under 1% of the run each).
    assert!(bps <= 6.0e9 * 1.01, "{bps}");
    assert!(
        bps >= 5.9e9,
        "{bps}: a steals b's idle share through the shared pool"
    );
}

#[test]
fn shards_that_race_for_the_link_keep_each_tenant_to_its_share() {
    // Lab threads race for the link where the whole enforcer serves a lane with
    // tokens before any stealer: whenever the link frees, each thread takes a
    // frame, so two threads with frames split the link in turns whatever their
    // tenants' shares. Core 0's tenants (one and three) need 4/7 of the link,
    // more than those turns give them, so their lanes wait with full buckets
    // while core 1's tenants (two and four) send on stolen tokens; were those
    // buckets to spill, core 1 would steal them again and keep winning turns.
    let policy = parse(
        "link: { rate: 500Mbit }\ntenants:\n  - { name: one, weight: 1 }\n  - { name: two, weight: 2, max_rate: 150Mbit }\n  - { name: three, weight: 3 }\n  - { name: four, weight: 1 }\n",
        2,
    );
    assert_eq!(core_mask(&policy), vec![vec![0], vec![1], vec![0], vec![1]]);
    let mut shards = shards_over_one_pool(&policy, 256);
    // Idle for 100 ms first, as the lab's threads are before iperf3 connects:
    // the buckets fill and spill, so the pool starts full.
    let start_ns = 100_000_000u64;
    for now_ns in (0..start_ns).step_by(1_000_000) {
        for shard in &mut shards {
            assert!(shard.dequeue(now_ns).is_none());
        }
    }
    let core_of_tenant = [0, 1, 0, 1];
    let send_bytes = 65_000;
    let mut handle = 0;
    for (tenant, &core) in core_of_tenant.iter().enumerate() {
        for _ in 0..8 {
            handle += 1;
            let p = packet(tenant as u16, 0, send_bytes, handle);
            assert!(shards[core].enqueue(start_ns, p).is_ok());
        }
    }
    // What the buckets and pools held at the start is spent in the first second;
    // the shares are measured over the next four.
    let (measured_ns, run_ns) = (start_ns + 1_000_000_000, 4_000_000_000u64);
    let mut sent = [0u64; 4];
    let mut now_ns = start_ns;
    while now_ns < measured_ns + run_ns {
        let mut free_ns = now_ns;
        for (core, shard) in shards.iter_mut().enumerate() {
            if let Some(frame) = shard.dequeue(now_ns) {
                let tenant = frame.packet.tenant.index();
                if now_ns >= measured_ns {
                    sent[tenant] += u64::from(frame.bytes);
                }
                let p = packet(tenant as u16, 0, send_bytes, frame.packet.handle);
                assert!(shard.enqueue(now_ns, p).is_ok(), "core {core}");
                free_ns += serialisation_ns(frame.bytes, policy.link.rate_bps);
            }
        }
        now_ns = if free_ns > now_ns {
            free_ns
        } else {
            shards
                .iter()
                .filter_map(|shard| shard.next_ready_ns(now_ns))
                .min()
                .expect("backlogged shards wake")
                .max(now_ns + 1)
        };
    }
    let ideal_bps = [500e6 / 7.0, 1000e6 / 7.0, 1500e6 / 7.0, 500e6 / 7.0];
    for (tenant, (&bytes, ideal)) in sent.iter().zip(ideal_bps).enumerate() {
        let bps = bytes as f64 * 8e9 / run_ns as f64;
        assert!(
            (bps / ideal - 1.0).abs() < 0.01,
            "tenant {tenant}: {bps} bit/s against its share of {ideal}: {sent:?}"
        );
    }
}

#[test]
fn a_fast_thread_steals_only_its_tenants_part_of_what_an_idle_tenant_leaves() {
    // Thread 1 turns around in 1 µs and thread 0 in 20 µs, so whenever the link
    // frees thread 1 takes it first. `tail` (thread 0) is idle: its share goes to
    // `web` and `flood` by weight, 5:3. `flood` could take all of it while `web`
    // waits on its own tokens for a link that `flood`'s small sends keep busy;
    // the whole enforcer hands the pool to stealers only while no lane has tokens.
    let policy = parse(
        "link: { rate: 400Mbit }\ntenants:\n  - { name: web, weight: 5 }\n  - { name: flood, weight: 3 }\n  - { name: tail, weight: 1 }\n",
        2,
    );
    assert_eq!(core_mask(&policy), vec![vec![0], vec![1], vec![0]]);
    let mut shards = shards_over_one_pool(&policy, 256);
    let (core_of_tenant, send_bytes) = ([0, 1], [64_000, 700]);
    let mut handle = 0;
    for tenant in 0..2 {
        for _ in 0..32 {
            handle += 1;
            let p = packet(tenant as u16, 0, send_bytes[tenant], handle);
            assert!(shards[core_of_tenant[tenant]].enqueue(0, p).is_ok());
        }
    }
    let turnaround_ns = [20_000, 1_000];
    let (measured_ns, end_ns) = (1_000_000_000u64, 4_000_000_000u64);
    let mut clock = [0u64; 2];
    let mut free_ns = 0u64;
    let mut sent = [0u64; 2];
    loop {
        // The thread whose clock is earliest acts; thread 1 on a tie.
        let core = if clock[1] <= clock[0] { 1 } else { 0 };
        let now_ns = clock[core];
        if now_ns >= end_ns {
            break;
        }
        if free_ns > now_ns {
            clock[core] = free_ns;
            continue;
        }
        match shards[core].dequeue(now_ns) {
            Some(frame) => {
                let tenant = frame.packet.tenant.index();
                if now_ns >= measured_ns {
                    sent[tenant] += u64::from(frame.bytes);
                }
                let p = packet(tenant as u16, 0, send_bytes[tenant], frame.packet.handle);
                assert!(shards[core].enqueue(now_ns, p).is_ok());
                free_ns = now_ns + serialisation_ns(frame.bytes, policy.link.rate_bps);
                clock[core] = now_ns + turnaround_ns[core];
            }
            None => {
                let wake = shards[core].next_ready_ns(now_ns).unwrap_or(now_ns);
                clock[core] = wake.max(now_ns + turnaround_ns[core]);
            }
        }
    }
    let run_ns = end_ns - measured_ns;
    for (tenant, (&bytes, ideal)) in sent.iter().zip([250e6, 150e6]).enumerate() {
        let bps = bytes as f64 * 8e9 / run_ns as f64;
        assert!(
            (bps / ideal - 1.0).abs() < 0.03,
            "tenant {tenant}: {bps} bit/s against its share of {ideal}: {sent:?}"
        );
    }
}
