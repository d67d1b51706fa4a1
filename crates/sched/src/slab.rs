//! A preallocated pool of packet descriptors with intrusive singly linked FIFOs over
//! it (PicNIC §5.4.2: a statically allocated descriptor pool). A FIFO is two `u32`
//! handles, so a class or a wheel slot costs 8 bytes whether or not it holds
//! packets, and enqueue/dequeue never allocate once the pool has reached its bound.

use crate::Packet;

/// End of a list, and "no entry".
pub(crate) const NIL: u32 = u32::MAX;

pub(crate) struct Slab {
    packets: Vec<Packet>,
    next: Vec<u32>,
    free_head: u32,
    capacity: usize,
    len: usize,
}

impl Slab {
    /// Reserves room for `capacity` packets up front; the vectors fill up to it and
    /// are then recycled through the free list, never reallocated.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        assert!(
            capacity < NIL as usize,
            "packet pool bound must fit a u32 handle"
        );
        Slab {
            packets: Vec::with_capacity(capacity),
            next: Vec::with_capacity(capacity),
            free_head: NIL,
            capacity,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len == self.capacity
    }

    /// Stores `packet` and returns its handle; `None` when the pool is exhausted.
    pub(crate) fn insert(&mut self, packet: Packet) -> Option<u32> {
        let index = if self.free_head != NIL {
            let index = self.free_head;
            self.free_head = self.next[index as usize];
            self.packets[index as usize] = packet;
            index
        } else if self.packets.len() < self.capacity {
            self.packets.push(packet);
            self.next.push(NIL);
            (self.packets.len() - 1) as u32
        } else {
            return None;
        };
        self.next[index as usize] = NIL;
        self.len += 1;
        Some(index)
    }

    pub(crate) fn get(&self, index: u32) -> &Packet {
        &self.packets[index as usize]
    }

    /// Frees `index` (already unlinked from its list) and returns its packet.
    pub(crate) fn remove(&mut self, index: u32) -> Packet {
        debug_assert!(self.len > 0);
        self.next[index as usize] = self.free_head;
        self.free_head = index;
        self.len -= 1;
        self.packets[index as usize]
    }
}

/// A FIFO of slab entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct List {
    pub(crate) head: u32,
    pub(crate) tail: u32,
}

impl List {
    pub(crate) const EMPTY: List = List {
        head: NIL,
        tail: NIL,
    };

    pub(crate) fn is_empty(&self) -> bool {
        self.head == NIL
    }

    pub(crate) fn push_back(&mut self, slab: &mut Slab, index: u32) {
        debug_assert_eq!(slab.next[index as usize], NIL);
        if self.tail == NIL {
            self.head = index;
        } else {
            slab.next[self.tail as usize] = index;
        }
        self.tail = index;
    }

    /// Unlinks the head without freeing it (to move it to another list).
    pub(crate) fn unlink_front(&mut self, slab: &mut Slab) -> Option<u32> {
        let index = self.head;
        if index == NIL {
            return None;
        }
        self.head = slab.next[index as usize];
        if self.head == NIL {
            self.tail = NIL;
        }
        slab.next[index as usize] = NIL;
        Some(index)
    }

    /// Unlinks and frees the head, returning its packet.
    pub(crate) fn pop_front(&mut self, slab: &mut Slab) -> Option<Packet> {
        let index = self.unlink_front(slab)?;
        Some(slab.remove(index))
    }
}
