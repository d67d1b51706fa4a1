//! Frames to classes: parse an Ethernet frame once at the edge (anything short or
//! odd is named, never a panic), then map its IP header to the policy's tenant, app,
//! flow and destination. IPv4 and IPv6 are classified by the same rules (protocol and
//! ports); any other ethertype is its tenant's catch-all traffic. The engine
//! classifies at its tenant ports (tenant by port), the sink meter at the end of the
//! link (tenant by source MAC, else IPv4 source prefix), with the same rules, so every
//! enforcer is measured alike. A frame is charged the bytes it really carries past
//! its Ethernet header, whatever its headers claim.

use policy::{AppId, Cidr, Policy, Proto, TenantId};
use sched::multiqueue::flow_hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const ETHERNET_HEADER_BYTES: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const IPV6_HEADER_BYTES: usize = 40;
/// IPv6 extension headers walked to find the transport's ports; a chain longer than
/// any real stack sends makes the frame malformed rather than a loop an adversary
/// chooses the length of.
const IPV6_EXTENSION_HEADERS_MAX: usize = 8;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// The IP protocol number of a policy's transport.
pub fn ip_proto(proto: Proto) -> u8 {
    match proto {
        Proto::Tcp => PROTO_TCP,
        Proto::Udp => PROTO_UDP,
    }
}

/// What an IPv4 frame carries, as the classifier needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Header {
    /// The bytes the frame really carries past its Ethernet header: what the
    /// link's rate, the enforcer and the measurements charge, whatever the header
    /// claims (a 1514 B frame claiming 28 took 1500 B of the link, not 28).
    pub len_bytes: u32,
    /// The header's total length: what the programs at either end count.
    pub total_bytes: u32,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub proto: u8,
    /// Ports of TCP and UDP; 0 for other protocols and non-first fragments.
    pub src_port: u16,
    pub dst_port: u16,
}

/// What an IPv6 frame carries, as the classifier needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Header {
    /// The bytes the frame really carries past its Ethernet header.
    pub len_bytes: u32,
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    /// The transport after any extension headers.
    pub proto: u8,
    /// Ports of TCP and UDP; 0 for other protocols and non-first fragments.
    pub src_port: u16,
    pub dst_port: u16,
}

/// Why a frame was dropped before the enforcer: every kind is counted per tenant
/// and reported in summary.json.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Malformed {
    /// Shorter than its Ethernet header (or the virtio-net header before it).
    Runt,
    /// An IP header that is cut short, of the wrong version for its ethertype, or
    /// with a header length below 20 bytes.
    BadHeader,
    /// An IP length field that says more than the frame holds.
    LengthBeyondFrame,
    /// A TCP or UDP header whose ports are cut off, or an IPv6 extension header
    /// chain that runs past the frame or past [`IPV6_EXTENSION_HEADERS_MAX`].
    TruncatedTransport,
    /// Longer than the engine's receive buffer: longer than any frame a port with
    /// the lab's MTU and GSO can carry.
    Oversize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParsedFrame {
    Ipv4(Ipv4Header),
    Ipv6(Ipv6Header),
    /// ARP, VLAN-tagged, anything else, of `len_bytes` past the Ethernet header:
    /// scheduled and measured as its tenant's traffic of no protocol the policy names.
    Other {
        len_bytes: u32,
    },
    Malformed(Malformed),
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

/// Parses an Ethernet II frame.
pub fn parse(frame: &[u8]) -> ParsedFrame {
    parse_captured(frame, frame.len())
}

/// Parses the first bytes of a frame that was `wire_bytes` long (a capture cut
/// short on purpose, as the meter reads only headers).
pub fn parse_captured(frame: &[u8], wire_bytes: usize) -> ParsedFrame {
    if frame.len() < ETHERNET_HEADER_BYTES || wire_bytes < frame.len() {
        return ParsedFrame::Malformed(Malformed::Runt);
    }
    let ip = &frame[ETHERNET_HEADER_BYTES..];
    let len_bytes = wire_bytes - ETHERNET_HEADER_BYTES;
    match u16_at(frame, 12) {
        ETHERTYPE_IPV4 => parse_ipv4(ip, len_bytes),
        ETHERTYPE_IPV6 => parse_ipv6(ip, len_bytes),
        _ => ParsedFrame::Other {
            len_bytes: len_bytes as u32,
        },
    }
}

/// The ports of a TCP or UDP header at `at`, or what a frame too short for them is.
fn ports_at(ip: &[u8], at: usize, claimed_end: usize) -> Result<(u16, u16), Malformed> {
    if claimed_end < at + 4 || ip.len() < at + 4 {
        return Err(Malformed::TruncatedTransport);
    }
    Ok((u16_at(ip, at), u16_at(ip, at + 2)))
}

fn parse_ipv4(ip: &[u8], len_bytes: usize) -> ParsedFrame {
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return ParsedFrame::Malformed(Malformed::BadHeader);
    }
    let header_bytes = usize::from(ip[0] & 0x0f) * 4;
    let total_bytes = usize::from(u16_at(ip, 2));
    if header_bytes < 20 || total_bytes < header_bytes {
        return ParsedFrame::Malformed(Malformed::BadHeader);
    }
    if total_bytes > len_bytes {
        return ParsedFrame::Malformed(Malformed::LengthBeyondFrame);
    }
    let proto = ip[9];
    let fragment_offset = u16_at(ip, 6) & 0x1fff;
    let (mut src_port, mut dst_port) = (0, 0);
    if (proto == PROTO_TCP || proto == PROTO_UDP) && fragment_offset == 0 {
        match ports_at(ip, header_bytes, total_bytes) {
            Ok(ports) => (src_port, dst_port) = ports,
            Err(kind) => return ParsedFrame::Malformed(kind),
        }
    }
    ParsedFrame::Ipv4(Ipv4Header {
        len_bytes: len_bytes as u32,
        total_bytes: total_bytes as u32,
        src: Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
        dst: Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
        proto,
        src_port,
        dst_port,
    })
}

fn parse_ipv6(ip: &[u8], len_bytes: usize) -> ParsedFrame {
    if ip.len() < IPV6_HEADER_BYTES || ip[0] >> 4 != 6 {
        return ParsedFrame::Malformed(Malformed::BadHeader);
    }
    let end = IPV6_HEADER_BYTES + usize::from(u16_at(ip, 4));
    if end > len_bytes {
        return ParsedFrame::Malformed(Malformed::LengthBeyondFrame);
    }
    let (mut proto, mut at) = (ip[6], IPV6_HEADER_BYTES);
    let mut first_fragment = true;
    for _ in 0..=IPV6_EXTENSION_HEADERS_MAX {
        // Hop-by-hop, routing, fragment and destination options: the chains a stack
        // puts before the transport.
        let ext_bytes = match proto {
            0 | 43 | 60 if ip.len() >= at + 2 && end >= at + 2 => usize::from(ip[at + 1]) * 8 + 8,
            44 if ip.len() >= at + 8 && end >= at + 8 => {
                first_fragment = u16_at(ip, at + 2) >> 3 == 0;
                8
            }
            0 | 43 | 44 | 60 => return ParsedFrame::Malformed(Malformed::TruncatedTransport),
            _ => break,
        };
        proto = ip[at];
        at += ext_bytes;
    }
    if matches!(proto, 0 | 43 | 44 | 60) {
        return ParsedFrame::Malformed(Malformed::TruncatedTransport);
    }
    let (mut src_port, mut dst_port) = (0, 0);
    if (proto == PROTO_TCP || proto == PROTO_UDP) && first_fragment {
        match ports_at(ip, at, end) {
            Ok(ports) => (src_port, dst_port) = ports,
            Err(kind) => return ParsedFrame::Malformed(kind),
        }
    }
    let addr = |at: usize| {
        let bytes: [u8; 16] = ip[at..at + 16].try_into().expect("16 bytes");
        Ipv6Addr::from(bytes)
    };
    ParsedFrame::Ipv6(Ipv6Header {
        len_bytes: len_bytes as u32,
        src: addr(8),
        dst: addr(24),
        proto,
        src_port,
        dst_port,
    })
}

/// Bytes of a parsed IPv4 frame past its transport's header (`ip` is what
/// [`parse_captured`] made of `frame`, which holds at least the transport header's
/// first 13 bytes): the bytes the programs at either end count. For non-first
/// fragments and protocols other than TCP and UDP, what follows the IPv4 header.
/// `None` if the capture is too short to say.
pub fn payload_bytes(frame: &[u8], ip: &Ipv4Header) -> Option<u32> {
    let header = frame.get(ETHERNET_HEADER_BYTES..)?;
    let ip_header_bytes = u32::from(header.first()? & 0x0f) * 4;
    let first_fragment = u16_at(header, 6) & 0x1fff == 0;
    let transport_header_bytes = match ip.proto {
        PROTO_TCP if first_fragment => {
            u32::from(header.get(ip_header_bytes as usize + 12)? >> 4) * 4
        }
        PROTO_UDP if first_fragment => 8,
        _ => 0,
    };
    ip.total_bytes
        .checked_sub(ip_header_bytes + transport_header_bytes)
}

/// An IPv4 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Prefix {
    fn mask(self) -> u32 {
        if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.len.min(32)))
        }
    }

    pub fn contains(self, ip: Ipv4Addr) -> bool {
        (u32::from(ip) ^ u32::from(self.addr)) & self.mask() == 0
    }

    pub fn overlaps(self, other: Prefix) -> bool {
        let mask = self.mask() & other.mask();
        (u32::from(self.addr) ^ u32::from(other.addr)) & mask == 0
    }

    /// The network address (host bits cleared).
    pub fn network(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & self.mask())
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network(), self.len)
    }
}

/// The classes of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class {
    pub tenant: TenantId,
    pub app: AppId,
    /// Stable id of the 5-tuple.
    pub flow: u32,
    /// Stable id of the destination address.
    pub destination: u32,
    /// The tenant's core that the flow's sender is taken to run on (XPS).
    pub core: u16,
}

#[derive(Clone, Debug)]
pub struct Classifier {
    /// Source prefix of each tenant, as the lab's topology addresses them or a
    /// real host's `match.src` says; `None`: none in IPv4.
    tenant_prefixes: Vec<Option<Prefix>>,
    /// Each tenant's IPv6 source prefix, from its `match.src` ([`Classifier::by_match_src`]).
    tenant_prefixes_v6: Vec<Option<Cidr>>,
    /// The policy's own rules, so that frames go to the app the simulator gives
    /// their traffic ([`Policy::app_for_packet`]).
    policy: Policy,
    cores: Vec<Vec<u16>>,
}

/// A stable 32-bit id for a 5-tuple or an address.
fn mix(words: &[u32]) -> u32 {
    words.iter().fold(0x811c_9dc5u32, |h, &w| flow_hash(h ^ w))
}

impl Classifier {
    /// `tenant_prefixes[i]` is where tenant i's frames come from.
    pub fn new(policy: &Policy, tenant_prefixes: Vec<Prefix>) -> Classifier {
        assert_eq!(tenant_prefixes.len(), policy.tenants.len());
        Classifier {
            tenant_prefixes: tenant_prefixes.into_iter().map(Some).collect(),
            tenant_prefixes_v6: vec![None; policy.tenants.len()],
            policy: policy.clone(),
            cores: policy.tenants.iter().map(|t| t.cores.clone()).collect(),
        }
    }

    /// Tenants told by their `match.src`, IPv4 or IPv6, as on a real host where
    /// they send from their own addresses; a tenant without one has no frames.
    pub fn by_match_src(policy: &Policy) -> Classifier {
        let v4 = |c: &Cidr| match c.addr {
            IpAddr::V4(addr) => Some(Prefix {
                addr,
                len: c.prefix_len,
            }),
            IpAddr::V6(_) => None,
        };
        Classifier {
            tenant_prefixes: policy
                .tenants
                .iter()
                .map(|t| t.match_src.as_ref().and_then(v4))
                .collect(),
            tenant_prefixes_v6: policy
                .tenants
                .iter()
                .map(|t| t.match_src.filter(|c| c.addr.is_ipv6()))
                .collect(),
            policy: policy.clone(),
            cores: policy.tenants.iter().map(|t| t.cores.clone()).collect(),
        }
    }

    /// The tenant whose prefix holds `src`, first in policy order.
    pub fn tenant_of_source(&self, src: Ipv4Addr) -> Option<TenantId> {
        self.tenant_prefixes
            .iter()
            .position(|p| p.is_some_and(|p| p.contains(src)))
            .map(|i| TenantId(i as u16))
    }

    /// The tenant whose IPv6 prefix holds `src`, first in policy order.
    pub fn tenant_of_source_v6(&self, src: Ipv6Addr) -> Option<TenantId> {
        let holds = |c: &Cidr| {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(c.prefix_len.min(128)))
                .unwrap_or(0);
            matches!(c.addr, IpAddr::V6(net) if (net.to_bits() ^ src.to_bits()) & mask == 0)
        };
        self.tenant_prefixes_v6
            .iter()
            .position(|c| c.as_ref().is_some_and(holds))
            .map(|i| TenantId(i as u16))
    }

    /// The tenant of an Ethernet frame by its source address; `None` for a frame
    /// of no tenant's address, or neither IPv4 nor IPv6.
    pub fn tenant_of_frame(&self, frame: &[u8]) -> Option<TenantId> {
        match parse(frame) {
            ParsedFrame::Ipv4(ip) => self.tenant_of_source(ip.src),
            ParsedFrame::Ipv6(ip) => self.tenant_of_source_v6(ip.src),
            ParsedFrame::Other { .. } | ParsedFrame::Malformed(_) => None,
        }
    }

    /// The class of a frame of `tenant` that is not IPv4: its catch-all app (the
    /// one that takes a packet of no protocol the policy names), on its first core.
    pub fn classify_other(&self, tenant: TenantId) -> Class {
        Class {
            tenant,
            app: self.policy.app_for_packet(tenant, None, 0, 0),
            flow: 0,
            destination: 0,
            core: self.cores[tenant.index()][0],
        }
    }

    /// Classes of an IPv4 frame of `tenant`; split classes by `split_by` use the
    /// flow or destination id the enforcer keys them on.
    pub fn classify(&self, tenant: TenantId, ip: &Ipv4Header) -> Class {
        self.class_of(
            tenant,
            ip.proto,
            (ip.src_port, ip.dst_port),
            &[u32::from(ip.src), u32::from(ip.dst)],
            &[u32::from(ip.dst)],
        )
    }

    /// Classes of an IPv6 frame of `tenant`, by the rules IPv4 frames follow.
    pub fn classify_ipv6(&self, tenant: TenantId, ip: &Ipv6Header) -> Class {
        let words = |addr: Ipv6Addr| {
            let bits = addr.to_bits();
            [96, 64, 32, 0].map(|shift| (bits >> shift) as u32)
        };
        let (src, dst) = (words(ip.src), words(ip.dst));
        let mut addresses = [0u32; 8];
        addresses[..4].copy_from_slice(&src);
        addresses[4..].copy_from_slice(&dst);
        self.class_of(
            tenant,
            ip.proto,
            (ip.src_port, ip.dst_port),
            &addresses,
            &dst,
        )
    }

    fn class_of(
        &self,
        tenant: TenantId,
        proto: u8,
        (src_port, dst_port): (u16, u16),
        addresses: &[u32],
        destination: &[u32],
    ) -> Class {
        let policy_proto = match proto {
            PROTO_TCP => Some(Proto::Tcp),
            PROTO_UDP => Some(Proto::Udp),
            _ => None,
        };
        let app = self
            .policy
            .app_for_packet(tenant, policy_proto, src_port, dst_port);
        // Two IPv6 addresses and the rest of the 5-tuple, on the stack: this runs per frame.
        let mut words = [0u32; 10];
        let n = addresses.len();
        words[..n].copy_from_slice(addresses);
        words[n] = u32::from(proto);
        words[n + 1] = (u32::from(src_port) << 16) | u32::from(dst_port);
        let flow = mix(&words[..n + 2]);
        let cores = &self.cores[tenant.index()];
        Class {
            tenant,
            app,
            flow,
            destination: mix(destination),
            core: cores[(flow_hash(flow) as usize) % cores.len()],
        }
    }
}

/// Test frames: an Ethernet II + IPv4 + TCP/UDP frame with a valid IP header.
/// Which side of a traffic's frames on the link carries its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortSide {
    /// The tenant is the client: the port is the frames' destination.
    Destination(u16),
    /// The tenant serves: the port is the frames' source.
    Source(u16),
}

/// What tells a traffic's frames on the link (tenant to sink) from every other
/// traffic's: what the plan chose for it. No two traffics share all of it: a port
/// is taken once, and a traffic that shares its app's port has a sink address of
/// its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameMatch {
    pub tenant: TenantId,
    pub proto: u8,
    pub port: PortSide,
    /// The sink addresses its frames go to; empty: any (the tenant serves, and the
    /// sink's clients connect from its main address).
    pub destinations: Vec<Ipv4Addr>,
}

impl FrameMatch {
    pub fn matches(&self, tenant: TenantId, ip: &Ipv4Header) -> bool {
        tenant == self.tenant
            && ip.proto == self.proto
            && match self.port {
                PortSide::Destination(port) => ip.dst_port == port,
                PortSide::Source(port) => ip.src_port == port,
            }
            && (self.destinations.is_empty() || self.destinations.contains(&ip.dst))
    }
}

#[cfg(test)]
pub(crate) fn test_frame(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    ports: (u16, u16),
    payload: usize,
) -> Vec<u8> {
    let l4 = if proto == PROTO_TCP { 20 } else { 8 };
    let total = 20 + l4 + payload;
    let mut f = vec![0u8; ETHERNET_HEADER_BYTES + total];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let ip = &mut f[ETHERNET_HEADER_BYTES..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    ip[20..22].copy_from_slice(&ports.0.to_be_bytes());
    ip[22..24].copy_from_slice(&ports.1.to_be_bytes());
    f
}

/// Test frames: an Ethernet II + IPv6 frame whose `extensions` (each a next-header
/// number and its 8 bytes) come before a TCP or UDP header with `ports`.
#[cfg(test)]
pub(crate) fn test_frame_ipv6(
    extensions: &[u8],
    proto: u8,
    ports: (u16, u16),
    payload: usize,
) -> Vec<u8> {
    let l4 = if proto == PROTO_TCP { 20 } else { 8 };
    let ip_payload = extensions.len() * 8 + l4 + payload;
    let mut f = vec![0u8; ETHERNET_HEADER_BYTES + IPV6_HEADER_BYTES + ip_payload];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
    let ip = &mut f[ETHERNET_HEADER_BYTES..];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&(ip_payload as u16).to_be_bytes());
    ip[6] = extensions.first().copied().unwrap_or(proto);
    ip[8..24].copy_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
    ip[24..40].copy_from_slice(&"2001:db8::2".parse::<Ipv6Addr>().unwrap().octets());
    let mut at = IPV6_HEADER_BYTES;
    for (i, _) in extensions.iter().enumerate() {
        ip[at] = extensions.get(i + 1).copied().unwrap_or(proto);
        at += 8;
    }
    ip[at..at + 2].copy_from_slice(&ports.0.to_be_bytes());
    ip[at + 2..at + 4].copy_from_slice(&ports.1.to_be_bytes());
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_what_follows_the_transport_header() {
        let udp = test_frame([10, 0, 0, 1], [10, 0, 0, 2], PROTO_UDP, (1, 2), 64);
        let ParsedFrame::Ipv4(ip) = parse(&udp) else {
            panic!()
        };
        assert_eq!((ip.len_bytes, payload_bytes(&udp, &ip)), (92, Some(64)));
        let mut tcp = test_frame([10, 0, 0, 1], [10, 0, 0, 2], PROTO_TCP, (1, 2), 100);
        // A data offset of 8 words: 12 bytes of options inside the 100.
        tcp[ETHERNET_HEADER_BYTES + 20 + 12] = 8 << 4;
        let ParsedFrame::Ipv4(ip) = parse(&tcp) else {
            panic!()
        };
        assert_eq!(payload_bytes(&tcp, &ip), Some(88));
        assert_eq!(payload_bytes(&tcp[..ETHERNET_HEADER_BYTES + 30], &ip), None);
    }

    fn policy() -> Policy {
        policy::parse_policy(
            r#"
link: { rate: 1Gbit }
tenants:
  - name: t1
    match: { src: 10.0.1.0/24 }
    cores: [0, 1]
  - name: t2
    cores: [2, 3, 4]
    apps:
      - name: probe
        priority: 0
        match: { proto: tcp, ports: [11111] }
      - name: dns
        match: { proto: udp, ports: [53] }
      - name: bulk
        match: { proto: tcp, ports: [5201, 5202] }
"#,
            "p.yaml",
        )
        .expect("valid policy")
    }

    fn classifier(p: &Policy) -> Classifier {
        Classifier::new(
            p,
            vec![
                Prefix {
                    addr: Ipv4Addr::new(10, 0, 1, 0),
                    len: 24,
                },
                Prefix {
                    addr: Ipv4Addr::new(10, 66, 2, 0),
                    len: 24,
                },
            ],
        )
    }

    fn ip(frame: &[u8]) -> Ipv4Header {
        match parse(frame) {
            ParsedFrame::Ipv4(h) => h,
            other => panic!("expected IPv4, got {other:?}"),
        }
    }

    #[test]
    fn parses_tcp_and_udp_headers() {
        let f = test_frame(
            [10, 0, 1, 2],
            [10, 66, 0, 1],
            PROTO_TCP,
            (40000, 5201),
            1000,
        );
        let h = ip(&f);
        assert_eq!(h.len_bytes, 1040);
        assert_eq!(h.src, Ipv4Addr::new(10, 0, 1, 2));
        assert_eq!(h.dst, Ipv4Addr::new(10, 66, 0, 1));
        assert_eq!((h.proto, h.src_port, h.dst_port), (PROTO_TCP, 40000, 5201));
        let u = ip(&test_frame(
            [1, 2, 3, 4],
            [5, 6, 7, 8],
            PROTO_UDP,
            (53, 9999),
            10,
        ));
        assert_eq!(
            (u.len_bytes, u.proto, u.src_port, u.dst_port),
            (38, PROTO_UDP, 53, 9999)
        );
    }

    #[test]
    fn a_frame_is_charged_what_it_carries_not_what_its_header_claims() {
        let mut lying = test_frame([10, 0, 0, 1], [10, 0, 0, 2], PROTO_UDP, (5000, 5000), 1472);
        assert_eq!(lying.len(), 1514);
        lying[ETHERNET_HEADER_BYTES + 2..ETHERNET_HEADER_BYTES + 4]
            .copy_from_slice(&28u16.to_be_bytes());
        let h = ip(&lying);
        assert_eq!((h.len_bytes, h.total_bytes), (1500, 28));
        assert_eq!(
            payload_bytes(&lying, &h),
            Some(0),
            "programs count the claim"
        );
        let mut other = lying.clone();
        other[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        assert_eq!(parse(&other), ParsedFrame::Other { len_bytes: 1500 });
        // Padding past the header's claim is bytes on the wire all the same: a
        // tenant of 60 B frames claiming 20 takes 46 B of the link per frame.
        let mut padded = test_frame([10, 0, 0, 1], [10, 0, 0, 2], PROTO_UDP, (1, 2), 0);
        padded.resize(60, 0);
        assert_eq!(ip(&padded).len_bytes, 46);
    }

    #[test]
    fn odd_frames_are_named_not_crashed_on() {
        let malformed = ParsedFrame::Malformed;
        assert_eq!(parse(&[]), malformed(Malformed::Runt));
        assert_eq!(parse(&[0; 13]), malformed(Malformed::Runt));
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(
            parse(&arp),
            ParsedFrame::Other {
                len_bytes: (arp.len() - 14) as u32
            }
        );
        let good = test_frame([10, 0, 1, 2], [10, 66, 0, 1], PROTO_TCP, (1, 2), 100);
        // Truncated: the IP total length says more than the frame holds.
        assert_eq!(
            parse(&good[..good.len() - 1]),
            malformed(Malformed::LengthBeyondFrame)
        );
        // Header length below 20 bytes.
        let mut bad = good.clone();
        bad[14] = 0x44;
        assert_eq!(parse(&bad), malformed(Malformed::BadHeader));
        // Not version 4.
        let mut v6 = good.clone();
        v6[14] = 0x65;
        assert_eq!(parse(&v6), malformed(Malformed::BadHeader));
        // Only the Ethernet header and part of an IP header.
        assert_eq!(parse(&good[..20]), malformed(Malformed::BadHeader));
        // Every prefix of a good frame parses to something without panicking.
        for n in 0..good.len() {
            let _ = parse(&good[..n]);
        }
        // A capture of the headers only, of a frame that was whole on the wire.
        let h = ip(&good);
        assert_eq!(
            parse_captured(&good[..54], good.len()),
            ParsedFrame::Ipv4(h)
        );
        assert_eq!(
            parse_captured(&good[..54], good.len() - 1),
            malformed(Malformed::LengthBeyondFrame)
        );
        assert_eq!(
            parse_captured(&good[..36], good.len()),
            malformed(Malformed::TruncatedTransport)
        );
        // A non-first fragment has no ports.
        let mut frag = good.clone();
        frag[14 + 6..14 + 8].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(ip(&frag).dst_port, 0);
    }

    #[test]
    fn tenants_by_match_src_in_ipv4_and_ipv6_and_no_tenant_for_other_frames() {
        let p = policy::parse_policy(
            "link: { rate: 1Gbit }\ntenants:\n  - { name: v4, match: { src: 10.0.1.0/24 } }\n  - { name: v6, match: { src: '2001:db8::/120' } }\n  - { name: none }\n",
            "p.yaml",
        )
        .unwrap();
        let c = Classifier::by_match_src(&p);
        let v4 = test_frame([10, 0, 1, 7], [10, 0, 2, 1], PROTO_UDP, (1, 2), 10);
        assert_eq!(c.tenant_of_frame(&v4), Some(TenantId(0)));
        let other = test_frame([10, 0, 2, 7], [10, 0, 1, 1], PROTO_UDP, (1, 2), 10);
        assert_eq!(c.tenant_of_frame(&other), None);
        // test_frame_ipv6 sends from 2001:db8::1.
        let v6 = test_frame_ipv6(&[], PROTO_TCP, (1, 2), 10);
        assert_eq!(c.tenant_of_frame(&v6), Some(TenantId(1)));
        assert_eq!(
            c.tenant_of_source_v6("2001:db8::1:1".parse().unwrap()),
            None,
            "outside the /120"
        );
        let mut arp = v4.clone();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(c.tenant_of_frame(&arp), None);
        assert_eq!(c.tenant_of_frame(&v4[..10]), None, "a runt");
    }

    #[test]
    fn tenants_by_source_prefix_and_apps_by_first_match() {
        let p = policy();
        let c = classifier(&p);
        let t1 = TenantId(0);
        let t2 = TenantId(1);
        assert_eq!(c.tenant_of_source(Ipv4Addr::new(10, 0, 1, 9)), Some(t1));
        assert_eq!(c.tenant_of_source(Ipv4Addr::new(10, 66, 2, 2)), Some(t2));
        assert_eq!(c.tenant_of_source(Ipv4Addr::new(10, 66, 3, 2)), None);

        let app = |tenant, proto, ports| {
            let f = test_frame([10, 66, 2, 2], [10, 66, 0, 1], proto, ports, 10);
            p.app(c.classify(tenant, &ip(&f)).app).name.clone()
        };
        // Source or destination port matches.
        assert_eq!(app(t2, PROTO_TCP, (11111, 50000)), "probe");
        assert_eq!(app(t2, PROTO_TCP, (50000, 11111)), "probe");
        assert_eq!(app(t2, PROTO_TCP, (50000, 5202)), "bulk");
        // The protocol must agree.
        assert_eq!(app(t2, PROTO_UDP, (50000, 11111)), "default");
        assert_eq!(app(t2, PROTO_UDP, (53, 50000)), "dns");
        // First match wins: 11111 and 5201 both listed, probe comes first.
        assert_eq!(app(t2, PROTO_TCP, (11111, 5201)), "probe");
        assert_eq!(app(t2, PROTO_TCP, (1, 2)), "default");
        // A tenant without apps: everything to default.
        assert_eq!(app(t1, PROTO_TCP, (11111, 2)), "default");
    }

    #[test]
    fn an_app_without_match_takes_what_earlier_apps_leave() {
        // The lab once sent `batch`'s iperf3 streams to an implicit `default` while
        // the simulator gave them to `batch`: the meter saw 0 B of a 4-flow bulk.
        let p = policy::parse_policy(
            "link: { rate: 1Gbit }
tenants:
  - name: t
    apps:
      - { name: probe, priority: 0, match: { proto: tcp, ports: [11111] } }
      - { name: batch }
",
            "p.yaml",
        )
        .unwrap();
        let c = Classifier::new(
            &p,
            vec![Prefix {
                addr: Ipv4Addr::new(10, 66, 2, 0),
                len: 24,
            }],
        );
        let app = |proto, ports| {
            let f = test_frame([10, 66, 2, 2], [10, 66, 0, 1], proto, ports, 10);
            p.app(c.classify(TenantId(0), &ip(&f)).app).name.clone()
        };
        assert_eq!(app(PROTO_TCP, (40000, 5201)), "batch");
        assert_eq!(app(PROTO_UDP, (40000, 11111)), "batch");
        assert_eq!(app(PROTO_TCP, (40000, 11111)), "probe");
        assert!(p.apps.iter().all(|a| a.name != "default"));
    }

    #[test]
    fn flow_and_destination_ids_are_stable_and_cores_are_the_tenants() {
        let p = policy();
        let c = classifier(&p);
        let f = test_frame([10, 66, 2, 2], [10, 66, 0, 1], PROTO_TCP, (40000, 5201), 10);
        let g = test_frame(
            [10, 66, 2, 2],
            [10, 66, 0, 1],
            PROTO_TCP,
            (40001, 5201),
            999,
        );
        let a = c.classify(TenantId(1), &ip(&f));
        assert_eq!(a, c.classify(TenantId(1), &ip(&f)));
        let b = c.classify(TenantId(1), &ip(&g));
        assert_ne!(a.flow, b.flow);
        assert_eq!(a.destination, b.destination);
        let mut seen = std::collections::BTreeSet::new();
        for port in 0..200u16 {
            let f = test_frame(
                [10, 66, 2, 2],
                [10, 66, 0, 1],
                PROTO_TCP,
                (40000 + port, 5201),
                10,
            );
            let class = c.classify(TenantId(1), &ip(&f));
            assert!([2, 3, 4].contains(&class.core));
            seen.insert(class.core);
        }
        assert_eq!(seen.len(), 3, "flows spread over all the tenant's cores");
    }

    #[test]
    fn prefixes() {
        let a = Prefix {
            addr: Ipv4Addr::new(10, 0, 1, 7),
            len: 24,
        };
        assert_eq!(a.to_string(), "10.0.1.0/24");
        assert!(a.overlaps(Prefix {
            addr: Ipv4Addr::new(10, 0, 0, 0),
            len: 16
        }));
        assert!(!a.overlaps(Prefix {
            addr: Ipv4Addr::new(10, 0, 2, 0),
            len: 24
        }));
        assert!(
            Prefix {
                addr: Ipv4Addr::new(0, 0, 0, 0),
                len: 0
            }
            .contains(Ipv4Addr::new(1, 2, 3, 4))
        );
    }
    #[test]
    fn ipv6_is_classified_by_the_rules_ipv4_follows() {
        let p = policy();
        let c = classifier(&p);
        let tcp = test_frame_ipv6(&[], PROTO_TCP, (40000, 11111), 1000);
        let ParsedFrame::Ipv6(h) = parse(&tcp) else {
            panic!("{:?}", parse(&tcp))
        };
        assert_eq!(h.len_bytes, 40 + 20 + 1000);
        assert_eq!((h.proto, h.src_port, h.dst_port), (PROTO_TCP, 40000, 11111));
        let app = |frame: &[u8]| match parse(frame) {
            ParsedFrame::Ipv6(h) => p.app(c.classify_ipv6(TenantId(1), &h).app).name.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(app(&tcp), "probe");
        assert_eq!(app(&test_frame_ipv6(&[], PROTO_UDP, (53, 9), 10)), "dns");
        // Behind hop-by-hop and destination options, the ports still decide.
        assert_eq!(
            app(&test_frame_ipv6(&[0, 60], PROTO_TCP, (5202, 9), 10)),
            "bulk"
        );
        // A non-first fragment has no ports: the catch-all takes it.
        let mut fragment = test_frame_ipv6(&[44], PROTO_TCP, (5202, 9), 10);
        fragment[ETHERNET_HEADER_BYTES + 40 + 2..ETHERNET_HEADER_BYTES + 40 + 4]
            .copy_from_slice(&(100u16 << 3).to_be_bytes());
        assert_eq!(app(&fragment), "default");
        // A payload length past the frame, a chain longer than any stack sends,
        // and ports cut off are named.
        let mut lying = tcp.clone();
        lying[ETHERNET_HEADER_BYTES + 4..ETHERNET_HEADER_BYTES + 6]
            .copy_from_slice(&u16::MAX.to_be_bytes());
        assert_eq!(
            parse(&lying),
            ParsedFrame::Malformed(Malformed::LengthBeyondFrame)
        );
        let chain = test_frame_ipv6(&[60; 12], PROTO_UDP, (53, 9), 0);
        assert_eq!(
            parse(&chain),
            ParsedFrame::Malformed(Malformed::TruncatedTransport)
        );
        let short = &tcp[..ETHERNET_HEADER_BYTES + 40 + 2];
        assert_eq!(
            parse_captured(short, tcp.len()),
            ParsedFrame::Malformed(Malformed::TruncatedTransport)
        );
        let mut v4_in_v6 = tcp.clone();
        v4_in_v6[ETHERNET_HEADER_BYTES] = 0x45;
        assert_eq!(
            parse(&v4_in_v6),
            ParsedFrame::Malformed(Malformed::BadHeader)
        );
        for n in 0..tcp.len() {
            let _ = parse(&tcp[..n]);
        }
    }
}
