//! A frame's tenant, told in the kernel by its source address: the tenants'
//! `match.src` prefixes in two longest-prefix-match maps (IPv4, IPv6), and the
//! instructions that look a frame's source up in them.

use super::asm::{Alu, Asm, Cond, Helper, Label, Reg, Size};
use super::sys::{Map, MapKind};
use policy::{Cidr, Policy};
use std::net::IpAddr;

/// Offsets of the fields of `struct __sk_buff` (the program's context) that
/// nicsched's programs read or write.
pub mod skb {
    /// The frame's protocol: its ethertype, in network order.
    pub const PROTOCOL: i16 = 16;
    /// The Tx queue plus one (0: the kernel picks), writable at tc egress.
    pub const QUEUE_MAPPING: i16 = 12;
    /// What `pfifo_fast` maps to a band (`TC_PRIO_*`), writable at tc egress.
    pub const PRIORITY: i16 = 32;
    pub const LEN: i16 = 0;
}

/// The tc verdict that lets a frame go on (`TC_ACT_OK`, tcx's `TCX_PASS`).
pub const PASS: i32 = 0;

const ETHERNET_HEADER_BYTES: i32 = 14;
/// Ethertypes as `skb->protocol` holds them: in network order, read as a
/// little-endian word.
const ETH_P_IP: i32 = 0x0800_u16.to_be() as i32;
const ETH_P_IPV6: i32 = 0x86dd_u16.to_be() as i32;
const IPV4_SOURCE_OFFSET: i32 = ETHERNET_HEADER_BYTES + 12;
const IPV6_SOURCE_OFFSET: i32 = ETHERNET_HEADER_BYTES + 8;
/// The lookup key on the stack, `struct bpf_lpm_trie_key`: a prefix length in
/// host order, then the address.
const KEY_AT: i16 = -24;
const KEY_ADDRESS_AT: i16 = KEY_AT + 4;
/// Stack bytes below the frame pointer that [`TenantMaps::emit_tenant_of_source`]
/// uses; a program's own values go below.
pub const STACK_BYTES: i16 = -KEY_AT;

/// The tenants' prefixes, each naming its tenant's index (a `u32` value).
#[derive(Debug)]
pub struct TenantMaps {
    v4: Map,
    v6: Map,
}

fn key(cidr: Cidr) -> Vec<u8> {
    let mut key = u32::from(cidr.prefix_len).to_ne_bytes().to_vec();
    match cidr.addr {
        IpAddr::V4(a) => key.extend(a.octets()),
        IpAddr::V6(a) => key.extend(a.octets()),
    }
    key
}

impl TenantMaps {
    /// Maps for the policy's tenants; a tenant without `match.src` is in neither
    /// (the commands refuse such a policy before they get here).
    pub fn of(policy: &Policy) -> std::io::Result<TenantMaps> {
        let entries = policy.tenants.len().max(1) as u32;
        let maps = TenantMaps {
            v4: Map::create(MapKind::LpmTrie, "nicsched_src4", 8, 4, entries)?,
            v6: Map::create(MapKind::LpmTrie, "nicsched_src6", 20, 4, entries)?,
        };
        for (index, tenant) in policy.tenants.iter().enumerate() {
            let Some(cidr) = tenant.match_src else {
                continue;
            };
            let map = if cidr.addr.is_ipv4() {
                &maps.v4
            } else {
                &maps.v6
            };
            map.update(&key(cidr), &(index as u32).to_ne_bytes())?;
        }
        Ok(maps)
    }

    /// Instructions that, with the program's context in R6, put the frame's tenant
    /// index in R7 and go on; or jump to `none` when the frame is no tenant's (not
    /// IPv4 or IPv6, too short for its source address, or from an address no
    /// tenant's prefix holds). Uses [`STACK_BYTES`] of stack and R0-R5.
    pub fn emit_tenant_of_source(&self, asm: &mut Asm, none: Label) {
        let ipv6 = asm.label();
        let look_up = asm.label();
        asm.load(Size::W, Reg::R2, Reg::R6, skb::PROTOCOL);
        asm.jump_imm(Cond::Eq, Reg::R2, ETH_P_IPV6, ipv6);
        asm.jump_imm(Cond::Ne, Reg::R2, ETH_P_IP, none);
        self.emit_key(asm, IPV4_SOURCE_OFFSET, 4, none);
        asm.load_map(Reg::R1, self.v4.raw_fd());
        asm.goto(look_up);
        asm.bind(ipv6);
        self.emit_key(asm, IPV6_SOURCE_OFFSET, 16, none);
        asm.load_map(Reg::R1, self.v6.raw_fd());
        asm.bind(look_up);
        asm.alu_reg(Alu::Mov, Reg::R2, Reg::R10);
        asm.alu_imm(Alu::Add, Reg::R2, i32::from(KEY_AT));
        asm.call(Helper::MapLookupElem);
        asm.jump_imm(Cond::Eq, Reg::R0, 0, none);
        asm.load(Size::W, Reg::R7, Reg::R0, 0);
    }

    /// The key of an address of `bytes` bytes at `offset` in the frame.
    fn emit_key(&self, asm: &mut Asm, offset: i32, bytes: i32, none: Label) {
        asm.alu_reg(Alu::Mov, Reg::R1, Reg::R6);
        asm.alu_imm(Alu::Mov, Reg::R2, offset);
        asm.alu_reg(Alu::Mov, Reg::R3, Reg::R10);
        asm.alu_imm(Alu::Add, Reg::R3, i32::from(KEY_ADDRESS_AT));
        asm.alu_imm(Alu::Mov, Reg::R4, bytes);
        asm.call(Helper::SkbLoadBytes);
        asm.jump_imm(Cond::Ne, Reg::R0, 0, none);
        asm.store_imm(Size::W, Reg::R10, KEY_AT, bytes * 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_a_host_order_length_then_the_address() {
        let v4: Cidr = Cidr {
            addr: "10.1.2.0".parse().unwrap(),
            prefix_len: 24,
        };
        let mut expected = 24u32.to_ne_bytes().to_vec();
        expected.extend([10, 1, 2, 0]);
        assert_eq!(key(v4), expected);
        let v6 = Cidr {
            addr: "2001:db8::".parse().unwrap(),
            prefix_len: 48,
        };
        assert_eq!(key(v6).len(), 20);
        assert_eq!(&key(v6)[4..6], &[0x20, 0x01]);
    }
}
