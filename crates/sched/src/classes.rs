//! Leaf classes of a policy as dense indices, so that per-class state lives in flat
//! arrays. Every app is a class; an app with `split` gets one more class per key
//! (destination or flow) the first time the key is seen, up to a configured bound.

use crate::Packet;
use policy::{Policy, SplitBy};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiplicative hashing of small integer keys: one multiply per word, which is all
/// the spreading dense ids and IPv4 destinations need, where SipHash would cost more
/// than the rest of an enqueue.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub type IdBuildHasher = BuildHasherDefault<IdHasher>;

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
    split: HashMap<(u32, u32), ClassId, IdBuildHasher>,
    info: Vec<ClassInfo>,
    capacity: usize,
}

impl Classes {
    /// `capacity` bounds the number of classes (apps included); enforcers size their
    /// arrays by it so nothing grows on the hot path.
    pub fn new(policy: &Policy, capacity: usize) -> Self {
        let capacity = capacity.max(policy.apps.len());
        let mut info = Vec::with_capacity(capacity);
        info.extend((0..policy.apps.len()).map(|a| ClassInfo {
            app: policy::AppId(a as u32),
            key: None,
        }));
        Classes {
            split_by: policy.apps.iter().map(|a| a.split.map(|s| s.by)).collect(),
            split: HashMap::with_capacity_and_hasher(
                capacity - policy.apps.len(),
                IdBuildHasher::default(),
            ),
            info,
            capacity,
        }
    }

    /// The leaf class of `packet`, created if it is a new split key; `None` when the
    /// bound on classes is reached.
    pub fn classify(&mut self, packet: &Packet) -> Option<ClassId> {
        let app = packet.app;
        let key = match self.split_by[app.index()] {
            None => return Some(ClassId(app.0)),
            Some(SplitBy::Destination) => packet.destination,
            Some(SplitBy::Flow) => packet.flow,
        };
        if let Some(&class) = self.split.get(&(app.0, key)) {
            return Some(class);
        }
        if self.info.len() >= self.capacity {
            return None;
        }
        let class = ClassId(self.info.len() as u32);
        self.info.push(ClassInfo {
            app,
            key: Some(key),
        });
        self.split.insert((app.0, key), class);
        Some(class)
    }

    pub fn info(&self, class: ClassId) -> ClassInfo {
        self.info[class.index()]
    }

    pub fn len(&self) -> usize {
        self.info.len()
    }

    pub fn is_empty(&self) -> bool {
        self.info.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}
