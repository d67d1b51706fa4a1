use crate::{Approximation, Enforcer, Frame, Packet, Refusal, TenantCounters};
use policy::Policy;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    Fifo,
    Hash,
    Xps,
    Tonic,
    TonicBand,
}

impl Driver {
    pub fn from_name(name: &str) -> Option<Driver> {
        match name {
            "fifo" => Some(Driver::Fifo),
            "hash" => Some(Driver::Hash),
            "xps" => Some(Driver::Xps),
            "tonic" => Some(Driver::Tonic),
            "tonic-band" => Some(Driver::TonicBand),
            _ => None,
        }
    }
}

pub struct MultiQueue;

impl MultiQueue {
    pub fn new(_policy: &Policy, _driver: Driver) -> Self {
        MultiQueue
    }
}

impl Enforcer for MultiQueue {
    fn enqueue(&mut self, _now_ns: u64, _packet: Packet) -> Result<(), (Packet, Refusal)> {
        unimplemented!()
    }
    fn dequeue(&mut self, _now_ns: u64) -> Option<Frame> {
        unimplemented!()
    }
    fn next_ready_ns(&self, _now_ns: u64) -> Option<u64> {
        None
    }
    fn backlog_packets(&self) -> usize {
        0
    }
    fn counters(&self) -> &[TenantCounters] {
        &[]
    }
}

pub fn approximation(_policy: &Policy, _driver: Driver) -> Approximation {
    Approximation::default()
}
