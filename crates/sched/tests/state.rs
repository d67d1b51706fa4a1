//! State per class, measured as `nicsched bench` measures it (heap over classes,
//! every structure at capacity, the packet pool apart), through the counting global
//! allocator. The only test of its binary, so no other test allocates meanwhile.

use sched::bench::{CountingAllocator, bytes_per_class, live_heap_bytes};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// At the two sizes: at 100k classes a structure of fixed size weighs ten
/// times what it does at 1M (`wf2q`'s tag queues kept 11 levels of buckets each,
/// 48.05 B per class, until they kept only the levels in use).
#[test]
fn class_state_fits_senics_budget_at_scale() {
    // SENIC's ~40 B per rate limiter, plus the split table's 16 B that a NIC's
    // classifier would hold instead: 48 B.
    for classes in [1_000_000, 100_000] {
        for enforcer in ["wf2q", "wheel", "valve", "htb"] {
            let bytes = bytes_per_class(enforcer, classes, &live_heap_bytes).unwrap();
            assert!(
                bytes <= 48.0,
                "{enforcer}, {classes} classes: {bytes} bytes per class"
            );
        }
    }
}
