//! Enqueue+dequeue pairs per second on one core for every software enforcer and
//! TONIC, at 1k to 1M classes of a two-level tree, all classes backlogged and sparse
//! (1% active), with DPDK's rte_sched on the same classes in the same run when
//! scripts/setup.sh has built its peer. Each class is capped at its share, so every
//! cap binds, where the peer's pipes never wait (`ClassCap`; `nicsched bench
//! --class-cap link --vs rte_sched` gives nicsched the peer's load). Prints bytes of
//! state per class (a counting allocator) and each enforcer's ratio to rte_sched.
//! Run: `cargo bench -p sched`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sched::bench::{
    BenchConfig, ClassCap, CountingAllocator, Harness, bytes_per_class, live_heap_bytes,
    peer_binary, run_peer,
};
use sched::multiqueue::Driver;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The registry's software schedulers, then TONIC for the multiqueue NIC model.
fn enforcers_measured() -> Vec<&'static str> {
    let software = sched::ENFORCERS.iter().filter(|e| e.has_classes());
    let tonic = sched::ENFORCERS
        .iter()
        .filter(|e| e.nic() == Some(Driver::Tonic));
    software.chain(tonic).map(|e| e.name).collect()
}
const CLASSES: [u32; 4] = [1_000, 10_000, 100_000, 1_000_000];
const ACTIVE: [f64; 2] = [1.0, 0.01];

fn enforcers(c: &mut Criterion) {
    let peer = peer_binary();
    if peer.is_none() {
        eprintln!("rte_sched peer not built (scripts/setup.sh): measuring nicsched alone");
    }
    for classes in CLASSES {
        for active in ACTIVE {
            let label = format!("{classes} classes, {}% active", active * 100.0);
            let mut group = c.benchmark_group(format!("pairs/{classes}/{active}"));
            group.sample_size(10);
            group.warm_up_time(Duration::from_millis(300));
            group.measurement_time(Duration::from_secs(1));
            group.throughput(Throughput::Elements(1));
            let mut rates = Vec::new();
            for enforcer in enforcers_measured() {
                let config = BenchConfig {
                    enforcer: enforcer.to_string(),
                    classes,
                    active_fraction: active,
                    seconds: 0.0,
                    threads: 1,
                    burst: 1,
                    class_cap: ClassCap::Share,
                };
                let mut harness = match Harness::new(&config) {
                    Ok(h) => h,
                    Err(e) => {
                        eprintln!("{label}: {enforcer}: {e}");
                        continue;
                    }
                };
                let mut measured = (0u64, Duration::ZERO);
                group.bench_function(enforcer, |b| {
                    b.iter_custom(|pairs| {
                        let started = Instant::now();
                        harness
                            .pairs(pairs)
                            .expect("the harness keeps classes backlogged");
                        let took = started.elapsed();
                        measured.0 += pairs;
                        measured.1 += took;
                        took
                    })
                });
                let rate = measured.0 as f64 / measured.1.as_secs_f64().max(1e-9);
                let bytes = if active == 1.0 {
                    bytes_per_class(enforcer, classes, &live_heap_bytes)
                        .map_or_else(|e| format!("? ({e})"), |b| format!("{b:.0}"))
                } else {
                    "-".to_string()
                };
                rates.push((enforcer, rate, bytes));
            }
            group.finish();
            let peer_rate = peer
                .as_deref()
                .map(|p| run_peer(p, classes, active, 1.0).map(|r| r.pairs_per_sec));
            println!("\n{label}:");
            match &peer_rate {
                Some(Ok(r)) => println!("  {:<6} {:>8.2} M pairs/s", "rte_sched", r / 1e6),
                Some(Err(e)) => println!("  rte_sched: {e}"),
                None => {}
            }
            for (enforcer, rate, bytes) in rates {
                let ratio = match &peer_rate {
                    Some(Ok(r)) => format!("{:.2}x rte_sched", rate / r),
                    _ => String::new(),
                };
                println!(
                    "  {enforcer:<9} {:>8.2} M pairs/s  {bytes:>8} B/class  {ratio}",
                    rate / 1e6
                );
            }
        }
    }
}

criterion_group!(benches, enforcers);
criterion_main!(benches);
