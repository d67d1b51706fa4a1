//! Leaf classes of a policy as dense indices, so that per-class state lives in flat
//! arrays. Every app is a class; an app with `split` gets one more class per key
//! (destination or flow) the first time the key is seen, up to a configured bound.

use crate::Packet;
use policy::{Policy, SplitBy};

/// Split classes by key: open addressing with linear probing over one flat array
/// 77% full when every class exists, so a lookup is two multiplies and usually one
/// cache line. Measured: std's HashMap (even with a cheap hasher) took ~30% of a
/// `wf2q` enqueue+dequeue at 100k classes.
#[derive(Clone, Debug)]
struct SplitTable {
    /// 12 bytes a slot, 1.3 slots per class: 15.6 bytes per class (linear probing at
    /// 77% load: 2.7 probes on average for a known key, within a line or two). Its
    /// length is not a power of two: rounding up to one cost up to 32 bytes per
    /// class, two thirds of SENIC's per-class budget.
    slots: Vec<Slot>,
}

/// A split key word that no class has: no app index reaches `u32::MAX`.
const EMPTY: u64 = u64::MAX;

/// One split class: `app` is `u32::MAX` in an empty slot.
#[derive(Clone, Copy, Debug)]
struct Slot {
    app: u32,
    key: u32,
    class: u32,
}

impl Slot {
    const EMPTY: Slot = Slot {
        app: u32::MAX,
        key: u32::MAX,
        class: 0,
    };

    fn word(&self) -> u64 {
        u64::from(self.app) << 32 | u64::from(self.key)
    }
}

/// Fibonacci hashing of a split key word: the top bits of the product are the
/// well-mixed ones.
fn mix(word: u64) -> u64 {
    (word ^ word >> 29).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Bits of the recent-departures cache's index: 256 entries of 16 bytes (4 KB)
/// stay in L1. A burst of 32 departures refilled together (`bench --burst 32`; the
/// simulator's bulk sends) overwrites about 2 of its own entries in 256 (6%) against 7 in
/// 64 (21%), each then a miss in the split table: `htb` at 1M classes, bursts of
/// 32, 0.51-0.53x of rte_sched to 0.56-0.58x; one pair at a time, no change. 4 KB
/// more per enforcer is 0.03 B per class at 100k classes (`valve` 47.98 of its 48).
const RECENT_BITS: u32 = 8;

impl SplitTable {
    fn with_capacity(entries: usize) -> Self {
        let size = (entries.max(1) * 13).div_ceil(10);
        SplitTable {
            slots: vec![Slot::EMPTY; size],
        }
    }

    fn slot_of(&self, mixed: u64) -> usize {
        // The top 32 bits of the hash scaled to the table's length (Lemire's
        // multiply-shift range reduction).
        (((mixed >> 32) * self.slots.len() as u64) >> 32) as usize
    }

    /// The class of `word` (hashed to `mixed`), or the empty slot where it would go.
    fn find(&self, word: u64, mixed: u64) -> Result<ClassId, usize> {
        let mut i = self.slot_of(mixed);
        loop {
            let slot = self.slots[i];
            let stored = slot.word();
            if stored == word {
                return Ok(ClassId(slot.class));
            }
            if stored == EMPTY {
                return Err(i);
            }
            i += 1;
            if i == self.slots.len() {
                i = 0;
            }
        }
    }
}

/// Index of a leaf class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClassId(pub u32);

impl ClassId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a leaf class stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassInfo {
    pub app: policy::AppId,
    /// The split key, for classes created by `split`.
    pub key: Option<u32>,
}

/// Maps packets to leaf classes. Classes `0..apps` are the apps themselves; split
/// classes follow in order of first appearance.
#[derive(Clone, Debug)]
pub struct Classes {
    split_by: Vec<Option<SplitBy>>,
    split: SplitTable,
    /// Split classes whose packets recently left, direct-mapped by key hash (Open
    /// vSwitch's exact-match cache in front of its classifier): a backlogged sender
    /// refills the class whose packet just left, and that lookup then hits L1
    /// instead of missing in a split table of megabytes. Entries never go stale,
    /// since a class keeps its key for good.
    recent: Box<[(u64, u32)]>,
    /// Apps and split classes so far (the next split class's id).
    len: usize,
    apps: usize,
    capacity: usize,
}

impl Classes {
    /// `capacity` bounds the number of classes (apps included); enforcers size their
    /// arrays by it so nothing grows on the hot path.
    pub fn new(policy: &Policy, capacity: usize) -> Self {
        let capacity = capacity.max(policy.apps.len());
        Classes {
            split_by: policy.apps.iter().map(|a| a.split.map(|s| s.by)).collect(),
            split: SplitTable::with_capacity(capacity - policy.apps.len()),
            recent: vec![(EMPTY, 0); 1 << RECENT_BITS].into_boxed_slice(),
            len: policy.apps.len(),
            apps: policy.apps.len(),
            capacity,
        }
    }

    /// The leaf class of `packet`, created if it is a new split key; `None` when the
    /// bound on classes is reached.
    #[inline]
    pub fn classify(&mut self, packet: &Packet) -> Option<ClassId> {
        let Some((word, mixed)) = self.split_word(packet) else {
            return Some(ClassId(packet.app.0));
        };
        let (cached, class) = self.recent[Self::recent_index(mixed)];
        if cached == word {
            return Some(ClassId(class));
        }
        self.classify_split(word, mixed)
    }

    /// The split key word of `packet` and its hash; `None` for an app without split.
    #[inline]
    fn split_word(&self, packet: &Packet) -> Option<(u64, u64)> {
        let key = match self.split_by[packet.app.index()]? {
            SplitBy::Destination => packet.destination,
            SplitBy::Flow => packet.flow,
        };
        let word = u64::from(packet.app.0) << 32 | u64::from(key);
        Some((word, mix(word)))
    }

    /// The classes of a burst of packets, looked up together: `found[i]` is the
    /// class [`Classes::classify`] would give `packets[i]`, or `None` where its
    /// split key has no class yet (classify makes it, in order, when the packet is
    /// offered). It first computes every packet's slots (its recent-departures
    /// entry and, where that misses, its split table slot) and touches them, so
    /// the burst's cache misses overlap instead of following one another, then
    /// resolves each. Nothing changes: a burst refused part way makes no class.
    pub fn lookup_burst(&self, packets: &[Packet], found: &mut Vec<Option<ClassId>>) {
        found.clear();
        let mut touched = 0u64;
        for packet in packets {
            let Some((word, mixed)) = self.split_word(packet) else {
                found.push(Some(ClassId(packet.app.0)));
                continue;
            };
            match self.recent[Self::recent_index(mixed)] {
                (cached, class) if cached == word => found.push(Some(ClassId(class))),
                _ => {
                    touched ^= self.split.slots[self.split.slot_of(mixed)].word();
                    found.push(None);
                }
            }
        }
        // The loads above only warm the cache; their values are kept so that they
        // are not optimised away.
        std::hint::black_box(touched);
        for (packet, class) in packets.iter().zip(found.iter_mut()) {
            if class.is_none()
                && let Some((word, mixed)) = self.split_word(packet)
            {
                *class = self.split.find(word, mixed).ok();
            }
        }
    }

    fn recent_index(mixed: u64) -> usize {
        (mixed >> (u64::BITS - RECENT_BITS)) as usize
    }

    /// Tells the map that a packet of `class` left, so the next packet of the same
    /// class (a backlogged sender's refill) is found in the recent-departures cache.
    #[inline]
    pub fn departed(&mut self, packet: &Packet, class: ClassId) {
        let Some((word, mixed)) = self.split_word(packet) else {
            return;
        };
        debug_assert_eq!(self.split.find(word, mixed), Ok(class));
        self.recent[Self::recent_index(mixed)] = (word, class.0);
    }

    fn classify_split(&mut self, word: u64, mixed: u64) -> Option<ClassId> {
        let empty_slot = match self.split.find(word, mixed) {
            Ok(class) => return Some(class),
            Err(slot) => slot,
        };
        if self.len >= self.capacity {
            return None;
        }
        let class = ClassId(self.len as u32);
        self.len += 1;
        self.split.slots[empty_slot] = Slot {
            app: (word >> 32) as u32,
            key: word as u32,
            class: class.0,
        };
        Some(class)
    }

    /// What `class` stands for. Off the packet path: a split class's key is found
    /// by scanning the table, so no per-class array is kept for it.
    pub fn info(&self, class: ClassId) -> ClassInfo {
        assert!(class.index() < self.len, "unknown class {class:?}");
        if class.index() < self.apps {
            return ClassInfo {
                app: policy::AppId(class.0),
                key: None,
            };
        }
        let slot = self
            .split
            .slots
            .iter()
            .find(|s| s.app != u32::MAX && s.class == class.0)
            .expect("every split class has a slot");
        ClassInfo {
            app: policy::AppId(slot.app),
            key: Some(slot.key),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{AppId, TenantId};

    fn packet(app: u32, destination: u32, flow: u32) -> Packet {
        Packet {
            len_bytes: 1500,
            tenant: TenantId(0),
            app: AppId(app),
            flow,
            destination,
            core: 0,
            arrival_ns: 0,
            handle: 0,
        }
    }

    #[test]
    fn split_keys_get_dense_stable_classes_up_to_the_bound() {
        let policy = policy::parse_policy(
            "link: { rate: 1Gbit }\ntenants:\n  - name: a\n    apps:\n      - { name: d, match: { proto: udp }, split: { by: destination, max_rate: 1Mbit } }\n      - { name: f, match: { proto: tcp }, split: { by: flow, max_rate: 1Mbit } }\n",
            "p.yaml",
        )
        .unwrap();
        // Apps d, f and the implicit default are classes 0..3.
        let mut classes = Classes::new(&policy, 3 + 1000);
        assert_eq!(classes.classify(&packet(2, 7, 7)), Some(ClassId(2)));
        for k in 0..500u32 {
            assert_eq!(
                classes.classify(&packet(0, k * 7919, 1)),
                Some(ClassId(3 + 2 * k))
            );
            assert_eq!(classes.classify(&packet(1, 5, k)), Some(ClassId(4 + 2 * k)));
        }
        assert_eq!(classes.len(), 1003);
        // Known keys still resolve at the bound; a new key does not.
        assert_eq!(
            classes.classify(&packet(0, 42 * 7919, 9)),
            Some(ClassId(3 + 84))
        );
        assert_eq!(classes.classify(&packet(1, 0, 499)), Some(ClassId(4 + 998)));
        assert_eq!(classes.classify(&packet(0, 1, 1)), None);
        assert_eq!(
            classes.info(ClassId(5)),
            ClassInfo {
                app: AppId(0),
                key: Some(7919)
            }
        );
    }
}
