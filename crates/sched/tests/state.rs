//! State per class, measured as `nicsched bench` measures it (heap over classes,
//! every structure at capacity, the packet pool apart), through the counting global
//! allocator. The only test of its binary, so no other test allocates meanwhile.

use sched::bench::{CountingAllocator, bytes_per_class, live_heap_bytes};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn class_state_fits_senics_budget_at_scale() {
    let classes = 1_000_000;
    // SENIC's ~40 B per rate limiter, plus the split table's 16 B that a NIC's
    // classifier would hold instead: 48 B.
    for enforcer in ["wf2q", "wheel", "valve", "htb"] {
        let bytes = bytes_per_class(enforcer, classes, &live_heap_bytes).unwrap();
        assert!(bytes <= 48.0, "{enforcer}: {bytes} bytes per class");
    }
}
