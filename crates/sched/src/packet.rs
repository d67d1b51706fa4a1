use policy::{AppId, TenantId};

/// What an enforcer sees of a packet: a small copyable descriptor. The bytes stay
/// with the host, which finds them again by `handle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Bytes on the wire at L3 (a TSO send may be many MTUs long).
    pub len_bytes: u32,
    pub tenant: TenantId,
    pub app: AppId,
    /// Stable id of the packet's 5-tuple.
    pub flow: u32,
    /// Id of the destination (split classes by destination).
    pub destination: u32,
    /// Core whose thread sent the packet.
    pub core: u16,
    pub arrival_ns: u64,
    /// Opaque to the enforcer; the host's key to the packet's bytes.
    pub handle: u64,
}

/// One frame leaving on the link. A packet longer than the MTU leaves as several
/// frames (segmentation offload); `last` marks the frame that completes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub packet: Packet,
    pub bytes: u32,
    pub last: bool,
}

impl Frame {
    /// The whole packet as one frame, for enforcers that do not segment.
    pub fn whole(packet: Packet) -> Self {
        Frame {
            packet,
            bytes: packet.len_bytes,
            last: true,
        }
    }
}

/// Why a packet was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The tenant's `buffer` would be exceeded.
    TenantBuffer,
    /// The host's shared `buffer` would be exceeded.
    HostBuffer,
    /// A queue of the enforcer itself is full.
    QueueFull,
}
