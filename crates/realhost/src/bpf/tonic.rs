//! TONIC without a kernel module: the program `apply --mechanism tonic` attaches at
//! a device's egress, and the counters it keeps.
//!
//! Per frame of a tenant (its source in the tenant's `match.src`):
//! - Algorithm 1: the next Tx queue of the tenant's pool, round robin per frame
//!   (a per-tenant position every CPU fetch-adds), written to `skb->queue_mapping`
//!   as queue + 1, which the kernel's queue selection takes as the frame's queue
//!   where nothing of its own (XPS, a socket's cached queue) decides first
//!   (docs/realhost.md says what this kernel does);
//! - Algorithms 2-3 in `tonic-band`'s form: a prioritised app's frame gets
//!   `skb->priority` `TC_PRIO_INTERACTIVE`, which `pfifo_fast` serves first (band
//!   0), every other frame of a tenant `TC_PRIO_BESTEFFORT` (band 1); the app is
//!   the one [`Policy::app_for_packet`] gives the frame's protocol and ports;
//! - bytes (as the qdiscs count them: Ethernet frames, each segment's headers of a
//!   large send) and packets per tenant and queue, and per tenant and band, in a
//!   per-CPU array `watch` reads through its pin.
//!
//! Frames of no tenant go on untouched. Every frame goes on to the next program
//! (`TCX_NEXT`): the program only marks frames, it never takes one.

use std::path::Path;

use super::asm::{Alu, Asm, Cond, Helper, Label, Reg, Size};
use super::sys::{self, Link, Map, MapKind, Program};
use super::tenants::{STACK_BYTES, TenantMaps, skb};
use crate::Error;
use policy::{AppId, Policy, TenantId};
use sched::multiqueue::Pool;

/// `TCX_NEXT`: the frame goes on to the next program, then the qdisc.
const NEXT: i32 = -1;
/// `TC_PRIO_INTERACTIVE`: `pfifo_fast`'s band 0, served before the others.
pub const PRIORITY_HIGH: u32 = 6;
/// `TC_PRIO_BESTEFFORT`: `pfifo_fast`'s band 1.
pub const PRIORITY_BEST_EFFORT: u32 = 0;

/// `struct __sk_buff` fields the program reads besides [`skb`]'s.
const SKB_WIRE_LEN: i16 = 160;
const SKB_GSO_SEGS: i16 = 164;

const ETHERNET_HEADER_BYTES: i32 = 14;
const ETH_P_IP: i32 = 0x0800_u16.to_be() as i32;
const ETH_P_IPV6: i32 = 0x86dd_u16.to_be() as i32;
const IPV6_HEADER_BYTES: i32 = 40;
/// An IPv4 header's flags and fragment offset as a native-order load of its two
/// bytes sees them: the offset's 13 bits (nonzero: a later fragment, no ports).
const IPV4_FRAGMENT_OFFSET: i32 = u16::from_ne_bytes([0x1f, 0xff]) as i32;
const PROTO_TCP: i32 = 6;
const PROTO_UDP: i32 = 17;

/// The program's own stack, below what [`TenantMaps::emit_tenant_of_source`] uses.
const KEY_AT: i16 = -STACK_BYTES - 4;
const PORTS_AT: i16 = KEY_AT - 4;
const HEADER_AT: i16 = PORTS_AT - 16;

/// Each counter: bytes then packets, `u64`s.
const COUNTER_BYTES: u32 = 16;
/// The pools map's value: the tenant's next position (`u64`, fetch-added), its
/// pool's first queue and its length (`u32`s).
const POOL_BYTES: u32 = 16;

/// The biggest program nicsched builds: a jump reaches 32767 instructions.
const INSNS_MAX: usize = 30_000;

/// Where the counters of a tenant's queue and band are in the counters map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub tenants: u32,
    pub queues: u32,
}

impl Layout {
    pub fn queue_key(self, tenant: u32, queue: u32) -> u32 {
        tenant * self.queues + queue
    }

    /// Band 0 is the prioritised apps', 1 the rest.
    pub fn band_key(self, tenant: u32, band: u32) -> u32 {
        self.tenants * self.queues + tenant * 2 + band
    }

    fn entries(self) -> u32 {
        self.tenants * self.queues + self.tenants * 2
    }
}

/// The program and its maps, loaded and not attached.
#[derive(Debug)]
pub struct Tonic {
    program: Program,
    counters: Map,
    layout: Layout,
    _tenants: TenantMaps,
    _pools: Map,
}

/// Where a tonic apply pins its link and counters under a directory.
pub const LINK_PIN: &str = "link";
pub const COUNTERS_PIN: &str = "counters";

impl Tonic {
    /// The program for `policy` on a device of `queues` Tx queues, each tenant on
    /// its pool of `pools` (the policy's order), loaded and checked by the kernel's
    /// verifier.
    pub fn load(
        policy: &Policy,
        pools: &[Pool],
        queues: u16,
        prioritised: &[bool],
    ) -> Result<Tonic, Error> {
        let kernel =
            |what: &str, e: &dyn std::fmt::Display| Error::Failed(format!("cannot {what}: {e}"));
        let layout = Layout {
            tenants: policy.tenants.len() as u32,
            queues: u32::from(queues),
        };
        let tenants = TenantMaps::of(policy)
            .map_err(|e| kernel("create the BPF maps of the tenants' prefixes", &e))?;
        let pool_map = Map::create(
            MapKind::Array,
            "nicsched_pools",
            4,
            POOL_BYTES,
            layout.tenants.max(1),
        )
        .map_err(|e| kernel("create the BPF map of the tenants' pools", &e))?;
        for (t, pool) in pools.iter().enumerate() {
            let mut value = [0u8; POOL_BYTES as usize];
            value[8..12].copy_from_slice(&u32::from(pool.start).to_ne_bytes());
            value[12..16].copy_from_slice(&u32::from(pool.len).to_ne_bytes());
            pool_map
                .update(&(t as u32).to_ne_bytes(), &value)
                .map_err(|e| kernel("fill the BPF map of the tenants' pools", &e))?;
        }
        let counters = Map::create(
            MapKind::PerCpuArray,
            "nicsched_count",
            4,
            COUNTER_BYTES,
            layout.entries().max(1),
        )
        .map_err(|e| kernel("create the BPF map of the counters", &e))?;
        let insns = assemble(policy, prioritised, &tenants, &pool_map, &counters, layout)?;
        let program = Program::load_tc("nicsched_tonic", &insns)
            .map_err(|e| kernel("load the tonic program", &e))?;
        Ok(Tonic {
            program,
            counters,
            layout,
            _tenants: tenants,
            _pools: pool_map,
        })
    }

    /// Attaches the program at the egress of device `ifindex` and pins the link and
    /// the counters in `dir` (which must exist, in a BPF filesystem): attached
    /// until the link's pin is removed.
    pub fn attach_pinned(&self, ifindex: u32, dir: &Path) -> Result<(), Error> {
        let link = Link::tcx_egress(&self.program, ifindex).map_err(|e| {
            Error::Failed(format!(
                "cannot attach the tonic program at the device's egress (tcx needs Linux 6.6 or later): {e}"
            ))
        })?;
        let pinned = |what: &str, path: &Path, e: std::io::Error| {
            Error::Failed(format!("cannot pin the {what} at {}: {e}", path.display()))
        };
        let counters = dir.join(COUNTERS_PIN);
        self.counters
            .pin(&counters)
            .map_err(|e| pinned("counters", &counters, e))?;
        let at = dir.join(LINK_PIN);
        link.pin(&at).map_err(|e| pinned("link", &at, e))
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The counters, read from the map this value holds.
    pub fn counters(&self) -> std::io::Result<Counts> {
        read_counts(&self.counters, self.layout)
    }
}

/// Bytes and packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    pub bytes: u64,
    pub packets: u64,
}

/// What the program counted since it was loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts {
    /// By tenant, then Tx queue.
    pub queues: Vec<Vec<Count>>,
    /// By tenant, then band (0: prioritised apps, 1: the rest).
    pub bands: Vec<[Count; 2]>,
}

impl Counts {
    pub fn tenant(&self, t: usize) -> Count {
        self.queues[t]
            .iter()
            .fold(Count::default(), |sum, c| Count {
                bytes: sum.bytes + c.bytes,
                packets: sum.packets + c.packets,
            })
    }
}

/// The counters pinned at `dir` by a tonic apply of `layout`.
pub fn open_counters(dir: &Path, layout: Layout) -> std::io::Result<PinnedCounters> {
    Ok(PinnedCounters {
        map: Map::open_pinned(&dir.join(COUNTERS_PIN), 4, COUNTER_BYTES)?,
        layout,
    })
}

/// A tonic apply's counters, through their pin.
#[derive(Debug)]
pub struct PinnedCounters {
    map: Map,
    layout: Layout,
}

impl PinnedCounters {
    pub fn read(&self) -> std::io::Result<Counts> {
        read_counts(&self.map, self.layout)
    }
}

fn read_counts(map: &Map, layout: Layout) -> std::io::Result<Counts> {
    let cpus = sys::possible_cpus()?;
    let mut value = vec![0u8; cpus * COUNTER_BYTES as usize];
    let mut read = |key: u32| -> std::io::Result<Count> {
        map.lookup(&key.to_ne_bytes(), &mut value)?;
        let word = |at: usize| u64::from_ne_bytes(value[at..at + 8].try_into().expect("8 bytes"));
        Ok((0..cpus).fold(Count::default(), |sum, cpu| {
            let at = cpu * COUNTER_BYTES as usize;
            Count {
                bytes: sum.bytes.wrapping_add(word(at)),
                packets: sum.packets.wrapping_add(word(at + 8)),
            }
        }))
    };
    let mut counts = Counts {
        queues: Vec::new(),
        bands: Vec::new(),
    };
    for t in 0..layout.tenants {
        counts.queues.push(
            (0..layout.queues)
                .map(|q| read(layout.queue_key(t, q)))
                .collect::<std::io::Result<_>>()?,
        );
        counts
            .bands
            .push([read(layout.band_key(t, 0))?, read(layout.band_key(t, 1))?]);
    }
    Ok(counts)
}

/// The program's instructions.
fn assemble(
    policy: &Policy,
    prioritised: &[bool],
    tenants: &TenantMaps,
    pools: &Map,
    counters: &Map,
    layout: Layout,
) -> Result<Vec<super::asm::Insn>, Error> {
    let mut asm = Asm::new();
    let next = asm.label();
    asm.alu_reg(Alu::Mov, Reg::R6, Reg::R1);
    tenants.emit_tenant_of_source(&mut asm, next);

    // Algorithm 1: R9 = the pool's start + (its position, fetch-added) mod its length.
    asm.store(Size::W, Reg::R10, KEY_AT, Reg::R7);
    asm.load_map(Reg::R1, pools.raw_fd());
    asm.alu_reg(Alu::Mov, Reg::R2, Reg::R10);
    asm.alu_imm(Alu::Add, Reg::R2, i32::from(KEY_AT));
    asm.call(Helper::MapLookupElem);
    asm.jump_imm(Cond::Eq, Reg::R0, 0, next);
    asm.alu_imm(Alu::Mov, Reg::R9, 1);
    asm.atomic_fetch_add(Reg::R0, 0, Reg::R9);
    asm.load(Size::W, Reg::R1, Reg::R0, 12);
    asm.jump_imm(Cond::Eq, Reg::R1, 0, next);
    asm.alu_reg(Alu::Mod, Reg::R9, Reg::R1);
    asm.load(Size::W, Reg::R1, Reg::R0, 8);
    asm.alu_reg(Alu::Add, Reg::R9, Reg::R1);
    asm.alu_reg(Alu::Mov, Reg::R1, Reg::R9);
    asm.alu_imm(Alu::Add, Reg::R1, 1);
    asm.store(Size::W, Reg::R6, skb::QUEUE_MAPPING, Reg::R1);
    // The tenant's counter of that queue.
    asm.alu_reg(Alu::Mov, Reg::R1, Reg::R7);
    asm.alu_imm(Alu::Mul, Reg::R1, layout.queues as i32);
    asm.alu_reg(Alu::Add, Reg::R1, Reg::R9);
    emit_count(&mut asm, counters, Reg::R1);

    // Algorithms 2-3, a band: R8 = 0 for a prioritised app's frame, else 1.
    let high = asm.label();
    let low = asm.label();
    let banded = asm.label();
    if prioritised.iter().any(|&p| p) {
        emit_app_band(&mut asm, policy, prioritised, high, low);
    } else {
        asm.goto(low);
    }
    asm.bind(high);
    asm.alu_imm(Alu::Mov, Reg::R8, 0);
    asm.alu_imm(Alu::Mov, Reg::R1, PRIORITY_HIGH as i32);
    asm.goto(banded);
    asm.bind(low);
    asm.alu_imm(Alu::Mov, Reg::R8, 1);
    asm.alu_imm(Alu::Mov, Reg::R1, PRIORITY_BEST_EFFORT as i32);
    asm.bind(banded);
    asm.store(Size::W, Reg::R6, skb::PRIORITY, Reg::R1);
    asm.alu_reg(Alu::Mov, Reg::R1, Reg::R7);
    asm.alu_imm(Alu::Mul, Reg::R1, 2);
    asm.alu_reg(Alu::Add, Reg::R1, Reg::R8);
    asm.alu_imm(Alu::Add, Reg::R1, (layout.tenants * layout.queues) as i32);
    emit_count(&mut asm, counters, Reg::R1);

    asm.bind(next);
    asm.alu_imm(Alu::Mov, Reg::R0, NEXT);
    asm.exit();
    if asm.len() > INSNS_MAX {
        return Err(Error::Input(format!(
            "the tonic program for this policy would take {} instructions, more than the {INSNS_MAX} nicsched builds (hint: list fewer ports in the prioritised tenants' apps)",
            asm.len()
        )));
    }
    Ok(asm.finish())
}

/// Adds the frame's bytes and packets to the counter whose key is in `key` (not
/// R0), if the map has it. Uses R0-R5.
fn emit_count(asm: &mut Asm, counters: &Map, key: Reg) {
    let done = asm.label();
    let one = asm.label();
    asm.store(Size::W, Reg::R10, KEY_AT, key);
    asm.load_map(Reg::R1, counters.raw_fd());
    asm.alu_reg(Alu::Mov, Reg::R2, Reg::R10);
    asm.alu_imm(Alu::Add, Reg::R2, i32::from(KEY_AT));
    asm.call(Helper::MapLookupElem);
    asm.jump_imm(Cond::Eq, Reg::R0, 0, done);
    asm.load(Size::W, Reg::R1, Reg::R6, SKB_WIRE_LEN);
    asm.load(Size::DW, Reg::R2, Reg::R0, 0);
    asm.alu_reg(Alu::Add, Reg::R2, Reg::R1);
    asm.store(Size::DW, Reg::R0, 0, Reg::R2);
    // A large send counts its segments, as the qdiscs do.
    asm.load(Size::W, Reg::R1, Reg::R6, SKB_GSO_SEGS);
    asm.jump_imm(Cond::Ne, Reg::R1, 0, one);
    asm.alu_imm(Alu::Mov, Reg::R1, 1);
    asm.bind(one);
    asm.load(Size::DW, Reg::R2, Reg::R0, 8);
    asm.alu_reg(Alu::Add, Reg::R2, Reg::R1);
    asm.store(Size::DW, Reg::R0, 8, Reg::R2);
    asm.bind(done);
}

/// Jumps to `high` when the frame's app (by [`Policy::app_for_packet`]'s rule:
/// the tenant's apps in order, the first whose protocol agrees and whose ports
/// list the frame's source or destination port, else the catch-all) is
/// prioritised, else to `low`. Ports are read for TCP and UDP, from an IPv4
/// header of any length (not from later fragments) or right after an IPv6 header
/// (no extension headers, as `nicsched tc`'s filters); another protocol's are 0.
/// Tenant index in R7; uses R0-R5 and R8.
fn emit_app_band(asm: &mut Asm, policy: &Policy, prioritised: &[bool], high: Label, low: Label) {
    let classify = asm.label();
    let ipv6 = asm.label();
    let ports = asm.label();
    let load_ports = asm.label();
    asm.store_imm(Size::W, Reg::R10, PORTS_AT, 0);
    asm.alu_imm(Alu::Mov, Reg::R8, 0);
    asm.load(Size::W, Reg::R2, Reg::R6, skb::PROTOCOL);
    asm.jump_imm(Cond::Eq, Reg::R2, ETH_P_IPV6, ipv6);
    asm.jump_imm(Cond::Ne, Reg::R2, ETH_P_IP, classify);
    emit_load(asm, ETHERNET_HEADER_BYTES, 10, classify);
    asm.load(Size::B, Reg::R8, Reg::R10, HEADER_AT + 9);
    asm.load(Size::H, Reg::R2, Reg::R10, HEADER_AT + 6);
    asm.alu_imm(Alu::And, Reg::R2, IPV4_FRAGMENT_OFFSET);
    asm.jump_imm(Cond::Ne, Reg::R2, 0, classify);
    asm.load(Size::B, Reg::R2, Reg::R10, HEADER_AT);
    asm.alu_imm(Alu::And, Reg::R2, 0x0f);
    asm.alu_imm(Alu::Lsh, Reg::R2, 2);
    asm.alu_imm(Alu::Add, Reg::R2, ETHERNET_HEADER_BYTES);
    asm.goto(ports);
    asm.bind(ipv6);
    emit_load(asm, ETHERNET_HEADER_BYTES, 8, classify);
    asm.load(Size::B, Reg::R8, Reg::R10, HEADER_AT + 6);
    asm.alu_imm(Alu::Mov, Reg::R2, ETHERNET_HEADER_BYTES + IPV6_HEADER_BYTES);
    asm.bind(ports);
    asm.jump_imm(Cond::Eq, Reg::R8, PROTO_TCP, load_ports);
    asm.jump_imm(Cond::Ne, Reg::R8, PROTO_UDP, classify);
    asm.bind(load_ports);
    // The offset is in R2; a frame too short for its ports leaves them zero.
    asm.alu_reg(Alu::Mov, Reg::R1, Reg::R6);
    asm.alu_reg(Alu::Mov, Reg::R3, Reg::R10);
    asm.alu_imm(Alu::Add, Reg::R3, i32::from(PORTS_AT));
    asm.alu_imm(Alu::Mov, Reg::R4, 4);
    asm.call(Helper::SkbLoadBytes);
    asm.bind(classify);
    // R8: the IP protocol (0 if none); R3, R4: source and destination port, in
    // network order as a native load reads them.
    asm.load(Size::H, Reg::R3, Reg::R10, PORTS_AT);
    asm.load(Size::H, Reg::R4, Reg::R10, PORTS_AT + 2);
    let verdict = |app: AppId| if prioritised[app.index()] { high } else { low };
    for (t, tenant) in policy.tenants.iter().enumerate() {
        if !tenant.apps.iter().any(|a| prioritised[a.index()]) {
            continue;
        }
        let other_tenant = asm.label();
        asm.jump_imm(Cond::Ne, Reg::R7, t as i32, other_tenant);
        for &a in &tenant.apps {
            let app = policy.app(a);
            if app.is_catch_all() {
                break;
            }
            let other_app = asm.label();
            if let Some(proto) = app.match_proto {
                let number = datapath::classify::ip_proto(proto);
                asm.jump_imm(Cond::Ne, Reg::R8, i32::from(number), other_app);
            }
            if app.match_ports.is_empty() {
                asm.goto(verdict(a));
            } else {
                for &port in &app.match_ports {
                    let wire = i32::from(u16::from_ne_bytes(port.to_be_bytes()));
                    asm.jump_imm(Cond::Eq, Reg::R3, wire, verdict(a));
                    asm.jump_imm(Cond::Eq, Reg::R4, wire, verdict(a));
                }
                asm.goto(other_app);
            }
            asm.bind(other_app);
        }
        asm.goto(verdict(policy.catch_all_app(TenantId(t as u16))));
        asm.bind(other_tenant);
    }
    asm.goto(low);
}

/// `bytes` of the frame at `offset` to [`HEADER_AT`]; to `failed` if it is shorter.
fn emit_load(asm: &mut Asm, offset: i32, bytes: i32, failed: Label) {
    asm.alu_reg(Alu::Mov, Reg::R1, Reg::R6);
    asm.alu_imm(Alu::Mov, Reg::R2, offset);
    asm.alu_reg(Alu::Mov, Reg::R3, Reg::R10);
    asm.alu_imm(Alu::Add, Reg::R3, i32::from(HEADER_AT));
    asm.alu_imm(Alu::Mov, Reg::R4, bytes);
    asm.call(Helper::SkbLoadBytes);
    asm.jump_imm(Cond::Ne, Reg::R0, 0, failed);
}
