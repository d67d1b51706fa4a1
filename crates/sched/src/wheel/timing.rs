//! A hierarchical timing wheel over integer ticks (Varghese and Lauck's wheels, laid
//! out as Tokio's timer wheel): [`LEVELS`] levels of 64 slots, level l's slots each
//! span 64^l ticks, and one `u64` occupied bitmap per level, so finding the next
//! expiry is a find-first-set per level and nothing ever scans empty slots.
//!
//! The wheel sees only ticks; converting time to ticks is the caller's. Items are
//! small integer ids (packet or class handles) chained in intrusive FIFO lists, so
//! insert and remove are O(1) with no allocation after start-up.
//!
//! An item of tick t sits at the level of the highest 6-bit group in which t differs
//! from `elapsed` (the tick the wheel has advanced to), in the slot that group names.
//! So every item of a lower level expires before any item of a higher one, and within
//! a level slots are ordered by index. When `elapsed` reaches a higher-level slot, its
//! items cascade down, in their order, to lower levels: each item moves at most
//! [`LEVELS`] - 1 times, and items of one tick leave in insertion order (FIFO).
//!
//! ## Invariants (asserted in debug builds)
//!
//! - `elapsed` never goes back, and no item is filed before it.
//! - No item leaves before its tick: a popped item's tick is at most the slot's start.
//! - A cascade moves every item of the slot to a lower level. A caller that derives
//!   an item's tick from its own state ([`Links`]) must not change it while the item
//!   waits; one that did would break this first.
//! - The count and the bitmaps agree: the wheel holds nothing exactly when no slot is
//!   occupied.

use crate::slab::NIL;

/// Bits of tick resolved per level.
pub const SLOT_BITS: u32 = 6;
/// Slots per level: one `u64` occupied bitmap.
pub const SLOTS: usize = 1 << SLOT_BITS;
/// 11 levels of 6 bits cover every `u64` tick, so no item is ever clamped.
pub const LEVELS: usize = 11;

const _: () = assert!(LEVELS as u32 * SLOT_BITS >= u64::BITS);

/// The level an item of `tick` goes to while the wheel stands at `elapsed`.
pub fn level_for(elapsed: u64, tick: u64) -> usize {
    // OR-ing the slot mask makes equal ticks (and ticks of the same level-0 block)
    // land on level 0.
    let differing = (elapsed ^ tick) | (SLOTS as u64 - 1);
    ((u64::BITS - 1 - differing.leading_zeros()) / SLOT_BITS) as usize
}

/// The slot of `tick` within `level`.
pub fn slot_for(tick: u64, level: usize) -> usize {
    ((tick >> (level as u32 * SLOT_BITS)) & (SLOTS as u64 - 1)) as usize
}

/// The first tick of `slot` of `level`, for a wheel standing at `elapsed`.
pub fn slot_start(elapsed: u64, level: usize, slot: usize) -> u64 {
    let shift = level as u32 * SLOT_BITS;
    let above = shift + SLOT_BITS;
    let base = if above >= u64::BITS {
        0
    } else {
        elapsed >> above << above
    };
    base | (slot as u64) << shift
}

/// Where a wheel keeps its items' links: the next item of the same slot and the
/// item's tick. A caller that keeps per-item state anyway puts the link beside it
/// (`wf2q` keeps it in its 32-byte class record, shared by its two wheels since a
/// class waits on one at a time), so filing an item touches one cache line.
pub trait Links {
    fn next(&self, item: u32) -> u32;
    fn set_next(&mut self, item: u32, next: u32);
    fn tick(&self, item: u32) -> u64;
    fn set_tick(&mut self, item: u32, tick: u64);
}

/// An item's link when the wheel owns them, and the caller's tag for it: one
/// 16-byte record per item, the tag filling what would be its padding.
#[derive(Clone, Copy)]
struct Link {
    tick: u64,
    next: u32,
    tag: u32,
}

impl Links for Vec<Link> {
    fn next(&self, item: u32) -> u32 {
        self[item as usize].next
    }
    fn set_next(&mut self, item: u32, next: u32) {
        self[item as usize].next = next;
    }
    fn tick(&self, item: u32) -> u64 {
        self[item as usize].tick
    }
    fn set_tick(&mut self, item: u32, tick: u64) {
        self[item as usize].tick = tick;
    }
}

#[derive(Clone, Copy)]
struct Fifo {
    head: u32,
    tail: u32,
}

/// The wheel's slots and bitmaps, with the items' links kept by the caller
/// ([`Links`]); every method takes the links it works on.
pub struct WheelSlots {
    slots: Vec<Fifo>,
    occupied: [u64; LEVELS],
    elapsed: u64,
    len: usize,
}

impl Default for WheelSlots {
    fn default() -> Self {
        WheelSlots::new()
    }
}

impl WheelSlots {
    pub fn new() -> Self {
        WheelSlots {
            slots: vec![
                Fifo {
                    head: NIL,
                    tail: NIL
                };
                LEVELS * SLOTS
            ],
            occupied: [0; LEVELS],
            elapsed: 0,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Files `item` to expire at `tick`; a tick already passed expires at once.
    #[inline]
    pub fn insert(&mut self, links: &mut impl Links, item: u32, tick: u64) {
        debug_assert_ne!(item, NIL, "NIL ends a slot's list and is no item");
        let tick = tick.max(self.elapsed);
        links.set_tick(item, tick);
        self.link(links, item, tick);
        self.len += 1;
        debug_assert!(self.counts_agree());
    }

    /// Whether the count and the bitmaps agree: nothing held exactly when no slot
    /// is occupied.
    fn counts_agree(&self) -> bool {
        (self.len == 0) == self.occupied.iter().all(|&bits| bits == 0)
    }

    #[inline]
    fn link(&mut self, links: &mut impl Links, item: u32, tick: u64) {
        let level = level_for(self.elapsed, tick);
        let slot = slot_for(tick, level);
        let fifo = &mut self.slots[level * SLOTS + slot];
        links.set_next(item, NIL);
        if fifo.tail == NIL {
            fifo.head = item;
        } else {
            links.set_next(fifo.tail, item);
        }
        fifo.tail = item;
        self.occupied[level] |= 1 << slot;
    }

    /// The lowest occupied level and its first occupied slot.
    #[inline]
    fn first_occupied(&self) -> Option<(usize, usize)> {
        let level = self.occupied.iter().position(|&bits| bits != 0)?;
        Some((level, self.occupied[level].trailing_zeros() as usize))
    }

    /// A lower bound of the earliest item's tick: exact when that item is on level 0,
    /// else the start of its slot.
    pub fn next_tick(&self) -> Option<u64> {
        let (level, slot) = self.first_occupied()?;
        Some(slot_start(self.elapsed, level, slot))
    }

    /// The earliest item's tick, exactly: on a higher level, the first occupied
    /// slot's items are scanned (all of them expire before any other slot's).
    pub fn next_tick_exact(&self, links: &impl Links) -> Option<u64> {
        let (level, slot) = self.first_occupied()?;
        if level == 0 {
            return Some(slot_start(self.elapsed, 0, slot));
        }
        let mut item = self.slots[level * SLOTS + slot].head;
        let mut earliest = u64::MAX;
        while item != NIL {
            earliest = earliest.min(links.tick(item));
            item = links.next(item);
        }
        Some(earliest)
    }

    /// Removes and returns the earliest item if its tick is at most `now_tick`, with
    /// its tick.
    #[inline]
    pub fn pop_expired(&mut self, links: &mut impl Links, now_tick: u64) -> Option<(u32, u64)> {
        loop {
            let (level, slot) = self.first_occupied()?;
            let start = slot_start(self.elapsed, level, slot);
            if start > now_tick {
                return None;
            }
            debug_assert!(start >= self.elapsed, "the wheel never turns back");
            self.elapsed = start;
            let index = level * SLOTS + slot;
            if level == 0 {
                let fifo = &mut self.slots[index];
                let item = fifo.head;
                fifo.head = links.next(item);
                if fifo.head == NIL {
                    fifo.tail = NIL;
                    self.occupied[0] &= !(1 << slot);
                }
                self.len -= 1;
                let tick = links.tick(item);
                debug_assert!(tick <= start, "no item leaves before its tick");
                debug_assert!(self.counts_agree());
                return Some((item, tick));
            }
            self.cascade(links, level, slot);
        }
    }

    /// Every item of a higher-level slot moves down, in order.
    #[cold]
    #[inline(never)]
    fn cascade(&mut self, links: &mut impl Links, level: usize, slot: usize) {
        let index = level * SLOTS + slot;
        let mut item = self.slots[index].head;
        self.slots[index] = Fifo {
            head: NIL,
            tail: NIL,
        };
        self.occupied[level] &= !(1 << slot);
        while item != NIL {
            let next = links.next(item);
            let tick = links.tick(item);
            debug_assert!(
                level_for(self.elapsed, tick) < level,
                "a cascade moves an item down: its tick changed while it waited"
            );
            self.link(links, item, tick);
            item = next;
        }
    }
}

/// A wheel that keeps its items' links itself, for item ids `0..items`, each with
/// a 32-bit tag of the caller's beside its link.
pub struct TimingWheel {
    slots: WheelSlots,
    links: Vec<Link>,
}

impl TimingWheel {
    /// A wheel for item ids `0..items`.
    pub fn new(items: usize) -> Self {
        assert!(items < NIL as usize);
        TimingWheel {
            slots: WheelSlots::new(),
            links: vec![
                Link {
                    tick: 0,
                    next: NIL,
                    tag: 0
                };
                items
            ],
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Files `item` with `tag` to expire at `tick`; a tick already passed expires
    /// at once.
    #[inline]
    pub fn insert(&mut self, item: u32, tick: u64, tag: u32) {
        self.links[item as usize].tag = tag;
        self.slots.insert(&mut self.links, item, tick);
    }

    /// The tag `item` was last filed with.
    pub fn tag(&self, item: u32) -> u32 {
        self.links[item as usize].tag
    }

    /// A lower bound of the earliest item's tick: exact when that item is on level 0,
    /// else the start of its slot.
    pub fn next_tick(&self) -> Option<u64> {
        self.slots.next_tick()
    }

    /// The earliest item's tick, exactly ([`WheelSlots::next_tick_exact`]).
    pub fn next_tick_exact(&self) -> Option<u64> {
        self.slots.next_tick_exact(&self.links)
    }

    /// Removes and returns the earliest item if its tick is at most `now_tick`, with
    /// its tick.
    #[inline]
    pub fn pop_expired(&mut self, now_tick: u64) -> Option<(u32, u64)> {
        self.slots.pop_expired(&mut self.links, now_tick)
    }
}

#[cfg(all(test, debug_assertions))]
mod invariants {
    use super::*;

    #[test]
    #[should_panic(expected = "a cascade moves an item down")]
    fn a_tick_changed_while_its_item_waits_trips_the_cascade() {
        let mut wheel = TimingWheel::new(1);
        // On level 2, so the pop below cascades it.
        wheel.insert(0, 1 << 12, 0);
        wheel.links[0].tick = 1 << 20;
        wheel.pop_expired(u64::MAX);
    }
}
