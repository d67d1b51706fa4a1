//! `wf2q`'s queues of classes by tag (issue 28): FFS-bucketed lists over integer
//! ticks that move a bucket whose classes share one tick as a whole.
//!
//! The levels are [`WheelSlots`](crate::wheel::timing::WheelSlots)'s, with its
//! helpers: [`LEVELS`] of [`SLOTS`] buckets, a `u64` occupied bitmap per level found
//! with trailing-zero counts, a class of tick t in the bucket of the highest 6-bit
//! group in which t differs from the tick the queue stands at. So the order a class
//! leaves in is the wheel's: by tick (a tick already passed counts as the current
//! one), ties in the order the classes were filed. (A wheel files a tick's classes
//! at a level that only falls as it turns, and a bucket's classes move down ahead
//! of any filed later, so ties leave first in, first out.)
//!
//! What differs is the cost of moving a bucket down. WF2Q+ gives the classes of one
//! app with equal rates equal tags: `nicsched bench`'s million split classes share
//! one start tag and one finish tag per round, so a bucket holds up to a million
//! classes of one tick. The wheel walked each such list once per level, reading
//! every class's record for its link and its tick (its start tag sits beside its
//! head packet, a second miss): 9 to 10 moves per packet at 1M classes. Each bucket
//! here keeps the low bits of its tick while all its classes share it, and a
//! bucket that does moves as one splice of its list, O(1), in the same order as one
//! class at a time. A bucket of mixed ticks moves class by class, as the wheel's.
//!
//! ## Invariants (asserted in debug builds)
//!
//! - The queue's tick never goes back, and no class is filed before it.
//! - No class leaves before its tick.
//! - A bucket that says its classes share a tick holds only classes of that tick;
//!   moving it down puts each on a lower level.
//! - The count and the bitmaps agree: nothing held exactly when no bucket is
//!   occupied.

use crate::slab::NIL;
use crate::wheel::timing::{LEVELS, Links, SLOT_BITS, SLOTS, level_for, slot_for, slot_start};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Levels whose buckets may keep their shared tick: a bucket of level l holds ticks
/// that differ only in their low 6·l bits (the higher ones are the queue's tick's),
/// so for l <= 5 the low 30 bits tell ticks apart.
const SHARED_LEVELS: usize = 6;
const LOW_BITS: u32 = (SHARED_LEVELS as u32 - 1) * SLOT_BITS;
const LOW_MASK: u32 = (1 << LOW_BITS) - 1;
/// A bucket whose classes do not all share one tick (no tick's low bits are this).
const MIXED: u32 = u32::MAX;

const _: () = assert!(LOW_BITS < u32::BITS && LOW_MASK < MIXED);

#[derive(Clone, Copy)]
#[repr(C)]
struct Bucket {
    head: u32,
    tail: u32,
    /// The low [`LOW_BITS`] of the tick every class of the bucket has, or [`MIXED`].
    shared: u32,
}

const EMPTY: Bucket = Bucket {
    head: NIL,
    tail: NIL,
    shared: MIXED,
};

/// The buckets and bitmaps, with the classes' links kept by the caller ([`Links`]).
pub(crate) struct Buckets {
    /// Level by level, up to the highest level anything was filed at: a level
    /// holds ticks 64^level apart, and a queue whose classes are at most 2^24
    /// ticks ahead (4.3 s at 256 ns) needs 4 of the 11 (`bench`'s million classes
    /// of a 1 Gbit/s link are 120 ms ahead), so the rest would be 5.4 KB per queue
    /// nothing uses: 0.16 B per class at 100k classes, over the 48 of issue 28's
    /// bar.
    buckets: Vec<Bucket>,
    occupied: [u64; LEVELS],
    elapsed: u64,
    len: usize,
}

impl Buckets {
    /// An empty queue, holding no buckets until something is filed.
    pub(crate) fn new() -> Self {
        Buckets {
            buckets: Vec::new(),
            occupied: [0; LEVELS],
            elapsed: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Files `item` to leave at `tick`; a tick already passed leaves at once.
    #[inline]
    pub(crate) fn insert(&mut self, links: &mut impl Links, item: u32, tick: u64) {
        debug_assert_ne!(item, NIL, "NIL ends a bucket's list and is no item");
        let tick = tick.max(self.elapsed);
        let level = level_for(self.elapsed, tick);
        let index = level * SLOTS + slot_for(tick, level);
        if index >= self.buckets.len() {
            // Moves down only reach lower levels, which this keeps too.
            self.buckets.resize((level + 1) * SLOTS, EMPTY);
        }
        let bucket = &mut self.buckets[index];
        links.set_next(item, NIL);
        let shared = if level < SHARED_LEVELS {
            tick as u32 & LOW_MASK
        } else {
            MIXED
        };
        if bucket.tail == NIL {
            bucket.head = item;
            bucket.shared = shared;
        } else {
            links.set_next(bucket.tail, item);
            if bucket.shared != shared {
                bucket.shared = MIXED;
            }
        }
        bucket.tail = item;
        self.occupied[level] |= 1 << slot_for(tick, level);
        self.len += 1;
        debug_assert!(self.counts_agree());
    }

    /// Whether the count and the bitmaps agree.
    fn counts_agree(&self) -> bool {
        (self.len == 0) == self.occupied.iter().all(|&bits| bits == 0)
    }

    /// The lowest occupied level and its first occupied bucket.
    #[inline]
    fn first_occupied(&self) -> Option<(usize, usize)> {
        let level = self.occupied.iter().position(|&bits| bits != 0)?;
        Some((level, self.occupied[level].trailing_zeros() as usize))
    }

    /// A lower bound of the earliest class's tick: exact when that class is on level
    /// 0, else the start of its bucket.
    pub(crate) fn next_tick(&self) -> Option<u64> {
        let (level, slot) = self.first_occupied()?;
        Some(slot_start(self.elapsed, level, slot))
    }

    /// Removes and returns the earliest class if its tick is at most `now_tick`.
    #[inline]
    pub(crate) fn pop_expired(&mut self, links: &mut impl Links, now_tick: u64) -> Option<u32> {
        loop {
            let (level, slot) = self.first_occupied()?;
            let start = slot_start(self.elapsed, level, slot);
            if start > now_tick {
                return None;
            }
            debug_assert!(start >= self.elapsed, "the queue never turns back");
            self.elapsed = start;
            if level == 0 {
                let bucket = &mut self.buckets[slot];
                let item = bucket.head;
                bucket.head = links.next(item);
                if bucket.head == NIL {
                    bucket.tail = NIL;
                    self.occupied[0] &= !(1 << slot);
                }
                self.len -= 1;
                debug_assert!(links.tick(item) <= start, "no item leaves before its tick");
                debug_assert!(self.counts_agree());
                return Some(item);
            }
            self.move_down(links, level, slot);
        }
    }

    /// The earliest class and its tick if that is at most `now_tick`, left in the
    /// queue (moved down to level 0).
    #[inline]
    fn first_expired(&mut self, links: &mut impl Links, now_tick: u64) -> Option<(u32, u64)> {
        loop {
            let (level, slot) = self.first_occupied()?;
            let start = slot_start(self.elapsed, level, slot);
            if start > now_tick {
                return None;
            }
            self.elapsed = start;
            if level == 0 {
                return Some((self.buckets[slot].head, start));
            }
            self.move_down(links, level, slot);
        }
    }

    /// Every class of a higher-level bucket moves down, in order: as one list when
    /// they share a tick.
    #[inline(never)]
    fn move_down(&mut self, links: &mut impl Links, level: usize, slot: usize) {
        let index = level * SLOTS + slot;
        let from = std::mem::replace(&mut self.buckets[index], EMPTY);
        self.occupied[level] &= !(1 << slot);
        if from.shared == MIXED {
            let mut item = from.head;
            while item != NIL {
                let next = links.next(item);
                let tick = links.tick(item);
                debug_assert!(
                    level_for(self.elapsed, tick) < level,
                    "a move puts an item lower: its tick changed while it waited"
                );
                self.link_one(links, item, tick);
                item = next;
            }
            return;
        }
        // The bucket's start has its tick's bits from 6·level up, `shared` the rest.
        let below = (1u64 << (level as u32 * SLOT_BITS)) - 1;
        let tick = self.elapsed | (u64::from(from.shared) & below);
        debug_assert_eq!(
            tick,
            links.tick(from.head).max(self.elapsed),
            "a bucket that says its items share a tick holds only that tick"
        );
        let to_level = level_for(self.elapsed, tick);
        debug_assert!(to_level < level, "a move puts an item lower");
        let to_slot = slot_for(tick, to_level);
        let to = &mut self.buckets[to_level * SLOTS + to_slot];
        if to.tail == NIL {
            *to = from;
        } else {
            links.set_next(to.tail, from.head);
            to.tail = from.tail;
            if to.shared != from.shared {
                to.shared = MIXED;
            }
        }
        self.occupied[to_level] |= 1 << to_slot;
    }

    /// Files one class moved down from a bucket of mixed ticks.
    #[inline]
    fn link_one(&mut self, links: &mut impl Links, item: u32, tick: u64) {
        self.len -= 1;
        self.insert(links, item, tick);
    }
}

/// A [`Buckets`] with a run in front: classes filed in order of their ticks
/// (each at least the last one so filed) wait on one plain list, and only the
/// others in the buckets. WF2Q+ files a class by S = its last F, and serves classes
/// by F, so a band's start tags come mostly in order: `nicsched bench`'s million
/// classes of distinct phases were each moved 5 times through the ineligible
/// wheel's levels (S is one round, 2^30 byte-times at 1M classes, ahead of V),
/// each move a miss on the class's record and one on its head packet's S.
///
/// The order is the same as the buckets' alone, for ticks ahead of every `now_tick`
/// popped at: by tick, ties in filing order. A tie between the run and the buckets
/// goes to the run: the run's last tick only grows (it is kept when the run
/// empties), so every class of a tick filed on the run was filed before any of that
/// tick filed in the buckets. That needs every tick filed beyond every tick popped
/// at, which holds for S > V; not for the parked classes, whose cap tags an enqueue
/// may file behind the clock of the last dequeue, where a wheel files them at its
/// own tick (measured: the run there changed `senic/table3-n1-100Mbit`'s schedule).
pub(crate) struct Sorted {
    run_head: u32,
    run_tail: u32,
    run_len: usize,
    run_head_tick: u64,
    run_tail_tick: u64,
    /// The largest `now_tick` popped at: every tick filed lies beyond it.
    now: u64,
    rest: Buckets,
}

impl Sorted {
    pub(crate) fn new() -> Self {
        Sorted {
            run_head: NIL,
            run_tail: NIL,
            run_len: 0,
            run_head_tick: 0,
            run_tail_tick: 0,
            now: 0,
            rest: Buckets::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.run_len + self.rest.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Files `item` to leave at `tick`, which lies beyond every tick popped at.
    #[inline]
    pub(crate) fn insert(&mut self, links: &mut impl Links, item: u32, tick: u64) {
        debug_assert!(
            tick > self.now,
            "a class is filed beyond every tick popped at"
        );
        if tick < self.run_tail_tick {
            self.rest.insert(links, item, tick);
            return;
        }
        links.set_next(item, NIL);
        if self.run_head == NIL {
            self.run_head = item;
            self.run_head_tick = tick;
        } else {
            links.set_next(self.run_tail, item);
        }
        self.run_tail = item;
        self.run_tail_tick = tick;
        self.run_len += 1;
    }

    /// A lower bound of the earliest class's tick, exact when it is on the run.
    pub(crate) fn next_tick(&self) -> Option<u64> {
        let run = (self.run_head != NIL).then_some(self.run_head_tick);
        match (run, self.rest.next_tick()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Removes and returns the earliest class if its tick is at most `now_tick`.
    #[inline]
    pub(crate) fn pop_expired(&mut self, links: &mut impl Links, now_tick: u64) -> Option<u32> {
        self.now = self.now.max(now_tick);
        let run = self.run_head != NIL && self.run_head_tick <= now_tick;
        let rest = if self.rest.is_empty() {
            None
        } else {
            self.rest.first_expired(links, now_tick)
        };
        match rest {
            Some((_, tick)) if !run || tick < self.run_head_tick => {
                self.rest.pop_expired(links, now_tick)
            }
            _ if run => {
                let item = self.run_head;
                self.run_head = links.next(item);
                self.run_len -= 1;
                if self.run_head != NIL {
                    self.run_head_tick = links.tick(self.run_head);
                }
                Some(item)
            }
            _ => None,
        }
    }
}

/// A [`Buckets`] that keeps the order of classes filed behind its tick: WF2Q+
/// serves by F among eligible classes, and F does not come in order. A class with
/// a large F taken moves the buckets' tick there, and one that becomes eligible
/// afterwards with a smaller F (its S just reached by V) would be filed at that
/// tick, behind every class already there: a weight-10 tenant beside ten of weight
/// 1, whose equal F's shared a tick, waited behind nine of them each round and got
/// 444 of its 500 Mbit/s. Such classes wait in a heap by (tick, filing order)
/// instead, all of them ahead of the buckets', whose ticks are at least the one
/// they stand at. The heap holds only classes filed behind it, and keeps its room.
pub(crate) struct Ordered {
    buckets: Buckets,
    behind: BinaryHeap<Reverse<(u64, u64, u32)>>,
    filed: u64,
}

impl Ordered {
    pub(crate) fn new() -> Self {
        Ordered {
            buckets: Buckets::new(),
            behind: BinaryHeap::new(),
            filed: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.buckets.len() + self.behind.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buckets.is_empty() && self.behind.is_empty()
    }

    /// Files `item` to leave by `tick`, ties in filing order.
    #[inline]
    pub(crate) fn insert(&mut self, links: &mut impl Links, item: u32, tick: u64) {
        if tick < self.buckets.elapsed {
            self.behind.push(Reverse((tick, self.filed, item)));
            self.filed += 1;
        } else {
            self.buckets.insert(links, item, tick);
        }
    }

    /// Removes and returns the class of the smallest tick, ties in filing order.
    #[inline]
    pub(crate) fn pop(&mut self, links: &mut impl Links) -> Option<u32> {
        match self.behind.pop() {
            Some(Reverse((_, _, item))) => Some(item),
            None => self.buckets.pop_expired(links, u64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Links with the ticks kept beside them, as a class record would.
    struct Items {
        next: Vec<u32>,
        tick: Vec<u64>,
    }

    impl Links for Items {
        fn next(&self, item: u32) -> u32 {
            self.next[item as usize]
        }
        fn set_next(&mut self, item: u32, next: u32) {
            self.next[item as usize] = next;
        }
        fn tick(&self, item: u32) -> u64 {
            self.tick[item as usize]
        }
        fn set_tick(&mut self, _item: u32, _tick: u64) {}
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Files the next item this far ahead of the queue's tick (or behind it).
        Insert(i64),
        /// Pops what has expired this far ahead of the queue's tick.
        Pop(u64),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let ahead = prop_oneof![
            Just(0i64),
            -70i64..70,
            // Many items of few far ticks: buckets that move as one list.
            (0i64..4).prop_map(|k| k << 20),
            (0i64..3).prop_map(|k| (k << 32) + 5),
            any::<u32>().prop_map(i64::from),
        ];
        let op = prop_oneof![
            3 => ahead.prop_map(Op::Insert),
            1 => prop_oneof![Just(0u64), 0u64..5000, Just(u64::MAX / 2)].prop_map(Op::Pop),
        ];
        proptest::collection::vec(op, 1..400)
    }

    proptest! {
        /// Classes leave by tick, a passed tick counting as the queue's, ties in the
        /// order they were filed: exactly what a sorted map of (tick, filing order)
        /// gives, however the buckets moved.
        #[test]
        fn classes_leave_by_tick_then_in_filing_order(ops in ops()) {
            let mut queue = Buckets::new();
            let mut items = Items { next: Vec::new(), tick: Vec::new() };
            let mut model = BTreeMap::new();
            for op in ops {
                // The tick the queue stands at: where a passed tick is filed.
                let now = queue.elapsed;
                match op {
                    Op::Insert(ahead) => {
                        let item = items.tick.len() as u32;
                        let tick = now.saturating_add_signed(ahead);
                        items.next.push(NIL);
                        items.tick.push(tick);
                        queue.insert(&mut items, item, tick);
                        model.insert((tick.max(now), item), item);
                    }
                    Op::Pop(ahead) => {
                        let until = now.saturating_add(ahead);
                        loop {
                            let expected = model
                                .first_key_value()
                                .filter(|((tick, _), _)| *tick <= until)
                                .map(|(&key, &item)| (key, item));
                            let got = queue.pop_expired(&mut items, until);
                            prop_assert_eq!(got, expected.map(|(_, item)| item));
                            let Some((key, _)) = expected else { break };
                            model.remove(&key);
                        }
                        prop_assert!(queue.elapsed <= until);
                        prop_assert_eq!(queue.len(), model.len());
                        if let Some(((tick, _), _)) = model.first_key_value() {
                            prop_assert!(queue.elapsed <= *tick);
                            prop_assert!(queue.next_tick().unwrap() <= *tick);
                        }
                    }
                }
            }
        }
    }

    proptest! {
        /// The run in front changes nothing: classes filed beyond every tick popped
        /// at leave by tick, ties in filing order, whether they came in order (the
        /// run) or not (the buckets).
        #[test]
        fn a_run_in_front_keeps_the_order(
            ops in proptest::collection::vec(
                prop_oneof![
                    3 => prop_oneof![1u64..4, 1u64..200, (1u64..4).prop_map(|k| k << 30)]
                        .prop_map(|a| Op::Insert(a as i64)),
                    1 => prop_oneof![0u64..300, Just(1u64 << 32)].prop_map(Op::Pop),
                ],
                1..400,
            ),
            in_order in any::<bool>(),
        ) {
            let mut queue = Sorted::new();
            let mut items = Items { next: Vec::new(), tick: Vec::new() };
            let mut model = BTreeMap::new();
            let mut now = 0u64;
            let mut last = 0u64;
            for op in ops {
                match op {
                    Op::Insert(ahead) => {
                        let item = items.tick.len() as u32;
                        // Mostly rising ticks (the run), or each from the last pop.
                        let base = if in_order { last.max(now) } else { now };
                        let tick = base + ahead as u64;
                        last = tick;
                        items.next.push(NIL);
                        items.tick.push(tick);
                        queue.insert(&mut items, item, tick);
                        model.insert((tick, item), item);
                    }
                    Op::Pop(ahead) => {
                        now += ahead;
                        loop {
                            let expected = model
                                .first_key_value()
                                .filter(|((tick, _), _)| *tick <= now)
                                .map(|(&key, &item)| (key, item));
                            prop_assert_eq!(queue.pop_expired(&mut items, now), expected.map(|(_, item)| item));
                            let Some((key, _)) = expected else { break };
                            model.remove(&key);
                        }
                        prop_assert_eq!(queue.len(), model.len());
                        if let Some(((tick, _), _)) = model.first_key_value() {
                            prop_assert!(queue.next_tick().unwrap() <= *tick);
                        }
                    }
                }
            }
        }
    }

    proptest! {
        /// A class filed behind the queue's tick leaves by its own tick, not the
        /// queue's: the classes leave in exactly the order of a sorted map of (tick,
        /// filing order), whatever was taken before them. (The buckets alone file
        /// such a class at their tick, behind the classes already there.)
        #[test]
        fn classes_filed_behind_the_tick_keep_their_order(
            ops in proptest::collection::vec(
                prop_oneof![
                    3 => prop_oneof![-200i64..200, Just(0i64), (0i64..3).prop_map(|k| k << 24)]
                        .prop_map(Op::Insert),
                    2 => Just(Op::Pop(0)),
                ],
                1..400,
            ),
        ) {
            let mut queue = Ordered::new();
            let mut items = Items { next: Vec::new(), tick: Vec::new() };
            let mut model = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(ahead) => {
                        let item = items.tick.len() as u32;
                        let tick = queue.buckets.elapsed.saturating_add_signed(ahead);
                        items.next.push(NIL);
                        items.tick.push(tick);
                        queue.insert(&mut items, item, tick);
                        model.insert((tick, item), item);
                    }
                    Op::Pop(_) => {
                        let expected = model.pop_first().map(|(_, item)| item);
                        prop_assert_eq!(queue.pop(&mut items), expected);
                    }
                }
                prop_assert_eq!(queue.len(), model.len());
                prop_assert_eq!(queue.is_empty(), model.is_empty());
            }
        }
    }
}
