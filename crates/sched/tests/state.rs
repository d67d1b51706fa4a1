//! State per class, measured as `nicsched bench` measures it (heap over classes,
//! every structure at capacity, the packet pool apart), through a counting global
//! allocator. The only test of its binary, so no other test allocates meanwhile.

use sched::bench::bytes_per_class;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; the counter only
// observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: a pointer this allocator returned, with its layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn class_state_fits_senics_budget_at_scale() {
    let live = || LIVE_BYTES.load(Ordering::Relaxed);
    let classes = 1_000_000;
    // SENIC's ~40 B per rate limiter, plus the split table's 16 B that a NIC's
    // classifier would hold instead: 48 B.
    for enforcer in ["wf2q", "wheel"] {
        let bytes = bytes_per_class(enforcer, classes, &live).unwrap();
        assert!(bytes <= 48.0, "{enforcer}: {bytes} bytes per class");
    }
    // The token trees keep a full HTB node per class (rates, buckets, rings,
    // deficits): 136 B measured; this bounds it from growing until they shrink.
    for enforcer in ["valve", "htb"] {
        let bytes = bytes_per_class(enforcer, classes, &live).unwrap();
        assert!(bytes <= 136.0, "{enforcer}: {bytes} bytes per class");
    }
}
