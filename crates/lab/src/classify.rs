//! Frames to classes: parse an Ethernet frame once at the edge (anything short,
//! odd or not IPv4 is said so, never a panic), then map the IPv4 header to the
//! policy's tenant, app, flow and destination. The engine classifies at its tenant
//! ports (tenant by port), the sink meter at the end of the link (tenant by source
//! prefix), with the same rules, so every enforcer is measured alike.

use policy::{AppId, Policy, Proto, TenantId};
use sched::multiqueue::flow_hash;
use std::net::Ipv4Addr;

pub const ETHERNET_HEADER_BYTES: usize = 14;
/// Ethernet's shortest frame without its FCS: shorter ones are padded to it.
const ETHERNET_FRAME_BYTES_MIN: usize = 60;
const ETHERTYPE_IPV4: u16 = 0x0800;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParsedFrame {
    Ipv4(Ipv4Header),
    /// ARP, IPv6, anything else, of `len_bytes` past the Ethernet header: scheduled
    /// and measured as its tenant's traffic of no protocol the policy names.
    NotIpv4 {
        len_bytes: u32,
    },
    /// Too short, a bad IPv4 header, or a length that disagrees with the frame.
    Malformed,
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
        return ParsedFrame::Malformed;
    }
    if u16_at(frame, 12) != ETHERTYPE_IPV4 {
        return ParsedFrame::NotIpv4 {
            len_bytes: (wire_bytes - ETHERNET_HEADER_BYTES) as u32,
        };
    }
    let ip = &frame[ETHERNET_HEADER_BYTES..];
    let ip_wire_bytes = wire_bytes - ETHERNET_HEADER_BYTES;
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return ParsedFrame::Malformed;
    }
    let header_bytes = usize::from(ip[0] & 0x0f) * 4;
    let total_bytes = usize::from(u16_at(ip, 2));
    if header_bytes < 20 || total_bytes < header_bytes || total_bytes > ip_wire_bytes {
        return ParsedFrame::Malformed;
    }
    let proto = ip[9];
    let fragment_offset = u16_at(ip, 6) & 0x1fff;
    let (mut src_port, mut dst_port) = (0, 0);
    if (proto == PROTO_TCP || proto == PROTO_UDP) && fragment_offset == 0 {
        if total_bytes < header_bytes + 4 || ip.len() < header_bytes + 4 {
            return ParsedFrame::Malformed;
        }
        src_port = u16_at(ip, header_bytes);
        dst_port = u16_at(ip, header_bytes + 2);
    }
    // Frames shorter than Ethernet's minimum are padded up to it: there the
    // header's length is the packet's.
    let len_bytes = if wire_bytes > ETHERNET_FRAME_BYTES_MIN {
        ip_wire_bytes
    } else {
        total_bytes
    };
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
    /// Source prefix of each tenant, as the lab's topology addresses them.
    tenant_prefixes: Vec<Prefix>,
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
            tenant_prefixes,
            policy: policy.clone(),
            cores: policy.tenants.iter().map(|t| t.cores.clone()).collect(),
        }
    }

    /// The tenant whose prefix holds `src`, first in policy order.
    pub fn tenant_of_source(&self, src: Ipv4Addr) -> Option<TenantId> {
        self.tenant_prefixes
            .iter()
            .position(|p| p.contains(src))
            .map(|i| TenantId(i as u16))
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

    /// Classes of a frame of `tenant`; split classes by `split_by` use the flow or
    /// destination id the enforcer keys them on.
    pub fn classify(&self, tenant: TenantId, ip: &Ipv4Header) -> Class {
        let t = tenant.index();
        let proto = match ip.proto {
            PROTO_TCP => Some(Proto::Tcp),
            PROTO_UDP => Some(Proto::Udp),
            _ => None,
        };
        let app = self
            .policy
            .app_for_packet(tenant, proto, ip.src_port, ip.dst_port);
        let flow = mix(&[
            u32::from(ip.src),
            u32::from(ip.dst),
            u32::from(ip.proto),
            (u32::from(ip.src_port) << 16) | u32::from(ip.dst_port),
        ]);
        let destination = mix(&[u32::from(ip.dst)]);
        let cores = &self.cores[t];
        let core = cores[(flow_hash(flow) as usize) % cores.len()];
        Class {
            tenant,
            app,
            flow,
            destination,
            core,
        }
    }
}

/// Test frames: an Ethernet II + IPv4 + TCP/UDP frame with a valid IP header.
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
        assert_eq!(parse(&other), ParsedFrame::NotIpv4 { len_bytes: 1500 });
        let mut padded = test_frame([10, 0, 0, 1], [10, 0, 0, 2], PROTO_UDP, (1, 2), 0);
        padded.resize(60, 0);
        assert_eq!(
            ip(&padded).len_bytes,
            28,
            "Ethernet's padding is not charged"
        );
    }

    #[test]
    fn odd_frames_are_named_not_crashed_on() {
        assert_eq!(parse(&[]), ParsedFrame::Malformed);
        assert_eq!(parse(&[0; 13]), ParsedFrame::Malformed);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(
            parse(&arp),
            ParsedFrame::NotIpv4 {
                len_bytes: (arp.len() - 14) as u32
            }
        );
        let good = test_frame([10, 0, 1, 2], [10, 66, 0, 1], PROTO_TCP, (1, 2), 100);
        // Truncated: the IP total length says more than the frame holds.
        assert_eq!(parse(&good[..good.len() - 1]), ParsedFrame::Malformed);
        // Header length below 20 bytes.
        let mut bad = good.clone();
        bad[14] = 0x44;
        assert_eq!(parse(&bad), ParsedFrame::Malformed);
        // Not version 4.
        let mut v6 = good.clone();
        v6[14] = 0x65;
        assert_eq!(parse(&v6), ParsedFrame::Malformed);
        // Only the Ethernet header and part of an IP header.
        assert_eq!(parse(&good[..20]), ParsedFrame::Malformed);
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
            ParsedFrame::Malformed
        );
        assert_eq!(
            parse_captured(&good[..36], good.len()),
            ParsedFrame::Malformed
        );
        // A non-first fragment has no ports.
        let mut frag = good.clone();
        frag[14 + 6..14 + 8].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(ip(&frag).dst_port, 0);
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
}
