//! The validated form of a policy and a scenario. Everything here has passed
//! validation: names are unique, rates are consistent, every app belongs to a
//! tenant, every tenant has at least one app. Code past the parser relies on that
//! and never re-checks.

mod kind;

pub use kind::{Gaps, KINDS, KindKeys, Pacing, TrafficKind};
use std::net::IpAddr;

/// Index of a tenant in [`Policy::tenants`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TenantId(pub u16);

/// Index of an app in [`Policy::apps`] (flat over all tenants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AppId(pub u32);

impl TenantId {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl AppId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Highest core index a policy may name; Linux's `NR_CPUS` upper bound.
pub const CORE_INDEX_MAX: u16 = 4095;

#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub rate_bps: u64,
    pub queues: u16,
    pub mtu_bytes: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub link: Link,
    /// Shared cap on bytes buffered for the whole host.
    pub buffer_bytes: Option<u64>,
    pub tenants: Vec<Tenant>,
    /// Every app of every tenant, implicit `default` apps included, in tenant order.
    pub apps: Vec<App>,
    /// Cores of the host: one past the highest core any tenant names, or
    /// `link.queues` when no tenant names cores (one Tx queue per core, as XPS pairs them).
    pub host_cores: u16,
    pub engine: EngineCpu,
}

/// How the engine's cores process tenants' packets before the enforcer sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineCpu {
    pub cores: u16,
    pub cpu: CpuSharing,
    /// The engine's own work per packet (simulator); 0 leaves the CPU unlimited.
    pub packet_cost_ns: u64,
}

impl Default for EngineCpu {
    fn default() -> Self {
        EngineCpu {
            cores: 1,
            cpu: CpuSharing::Weighted,
            packet_cost_ns: 0,
        }
    }
}

/// How a free engine core picks the next waiting packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuSharing {
    /// Arrival order across tenants, from one queue: whoever sends most takes most.
    Fifo,
    /// By tenant weight: each tenant its own queue, CPU time shared by weight
    /// (PicNIC's CPU-fair queues).
    Weighted,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Tenant {
    pub name: String,
    pub weight: u32,
    pub priority: u8,
    pub min_rate_bps: Option<u64>,
    pub max_rate_bps: Option<u64>,
    /// Never empty: a tenant without `cores` gets every core of the host.
    pub cores: Vec<u16>,
    pub buffer_bytes: Option<u64>,
    pub match_src: Option<Cidr>,
    pub match_port: Option<String>,
    /// What the tenant (a VM) may receive, across hosts (hosts.md): `None` leaves
    /// its ingress bounded by its host's link alone.
    pub ingress: Option<Envelope>,
    /// How the engine tells the VM that a packet is gone (PicNIC §5.4.3).
    pub completions: Completions,
    /// Whether the VM's virtio driver frees a send when its completion comes back
    /// (Linux's NAPI-TX), so that its sockets are charged for a send until the
    /// engine is done with it and a full socket waits: backpressure from the engine
    /// to the guest's applications (PicNIC §5.4.3). `false`, the default: the driver
    /// frees a send as it posts it (`skb_orphan`), as the lab's veths do, and nothing
    /// holds a datagram socket back.
    pub napi_tx: bool,
    /// Never empty; in declaration order, the implicit `default` app last (a
    /// tenant whose apps include one without `match` has no implicit `default`).
    pub apps: Vec<AppId>,
}

/// A VM's bandwidth envelope for what it receives: `[min_rate, max_rate]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Envelope {
    pub min_rate_bps: Option<u64>,
    pub max_rate_bps: Option<u64>,
}

/// The order in which a VM's transmit descriptors are given back. A descriptor is
/// held until its packet leaves the engine (or is refused); `InOrder` frees them
/// in the order they were posted (virtio's in-order mode), so one throttled flow's
/// held descriptor holds back every later one of the VM; `OutOfOrder` frees each
/// as its own packet leaves. What a socket learns from a completion is
/// [`Tenant::napi_tx`]'s to say: PicNIC pairs out-of-order completions with NAPI-TX
/// (its Table 4 compares in-order without NAPI-TX against that pair).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Completions {
    InOrder,
    #[default]
    OutOfOrder,
}

#[derive(Clone, Debug, PartialEq)]
pub struct App {
    pub name: String,
    pub tenant: TenantId,
    pub weight: u32,
    pub priority: u8,
    pub min_rate_bps: Option<u64>,
    pub max_rate_bps: Option<u64>,
    pub match_proto: Option<Proto>,
    /// Source or destination port in this list matches; empty matches any port.
    pub match_ports: Vec<u16>,
    pub split: Option<Split>,
    /// True for the `default` app the policy did not declare.
    pub implicit: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitBy {
    Destination,
    Flow,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Split {
    pub by: SplitBy,
    pub max_rate_bps: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix_len: u8,
}

impl Cidr {
    /// Whether some address is in both prefixes (one contains the other).
    pub fn overlaps(&self, other: &Cidr) -> bool {
        let len = u32::from(self.prefix_len.min(other.prefix_len));
        match (self.addr, other.addr) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
                u32::from(a) & mask == u32::from(b) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
}

impl Policy {
    pub fn tenant(&self, id: TenantId) -> &Tenant {
        &self.tenants[id.index()]
    }

    pub fn app(&self, id: AppId) -> &App {
        &self.apps[id.index()]
    }

    pub fn tenant_by_name(&self, name: &str) -> Option<TenantId> {
        self.tenants
            .iter()
            .position(|t| t.name == name)
            .map(|i| TenantId(i as u16))
    }

    /// The most one flow of `app` can send out of the host: the lowest of its
    /// link's rate, its tenant's and app's `max_rate` and its split class's.
    pub fn flow_cap_bps(&self, app: AppId) -> u64 {
        let app = self.app(app);
        [
            self.tenant(app.tenant).max_rate_bps,
            app.max_rate_bps,
            app.split.map(|split| split.max_rate_bps),
        ]
        .into_iter()
        .flatten()
        .fold(self.link.rate_bps, u64::min)
    }

    /// The app named `name` of `tenant`.
    pub fn app_by_name(&self, tenant: TenantId, name: &str) -> Option<AppId> {
        self.tenant(tenant)
            .apps
            .iter()
            .copied()
            .find(|&a| self.app(a).name == name)
    }

    /// The same policy on a link of `rate_bps`: every rate (guarantees, caps, split
    /// limits) scaled by one factor, so that the ideal allocation keeps its shape.
    pub fn scaled_to_link_rate(&self, rate_bps: u64) -> Policy {
        let factor = rate_bps as f64 / self.link.rate_bps as f64;
        let scale = |bps: u64| rate_scaled(bps, factor);
        let mut policy = self.clone();
        policy.link.rate_bps = rate_bps;
        policy.engine.packet_cost_ns = cost_scaled(policy.engine.packet_cost_ns, factor);
        for t in &mut policy.tenants {
            t.min_rate_bps = t.min_rate_bps.map(scale);
            t.max_rate_bps = t.max_rate_bps.map(scale);
        }
        for a in &mut policy.apps {
            a.min_rate_bps = a.min_rate_bps.map(scale);
            a.max_rate_bps = a.max_rate_bps.map(scale);
            if let Some(split) = &mut a.split {
                split.max_rate_bps = scale(split.max_rate_bps);
            }
        }
        policy
    }

    /// The app that takes whatever no other app of `tenant` takes, and a traffic
    /// that names no app: the declared app without `match`, else the app named
    /// `default` (declared, or the implicit one validation adds).
    pub fn catch_all_app(&self, tenant: TenantId) -> AppId {
        let apps = &self.tenant(tenant).apps;
        apps.iter()
            .copied()
            .find(|&a| self.app(a).is_catch_all())
            .or_else(|| self.app_by_name(tenant, "default"))
            .expect("validation gives every tenant a catch-all or a default app")
    }

    /// The app of `tenant` a packet belongs to: its apps in order, the first whose
    /// rule takes the packet, else [`Policy::catch_all_app`]. The simulator's
    /// scenario validation and the lab's classifier both go through this, so the
    /// two worlds attribute every byte to the same app. `proto` is `None` for
    /// protocols other than TCP and UDP (their ports are 0).
    pub fn app_for_packet(
        &self,
        tenant: TenantId,
        proto: Option<Proto>,
        src_port: u16,
        dst_port: u16,
    ) -> AppId {
        self.tenant(tenant)
            .apps
            .iter()
            .copied()
            .find(|&a| self.app(a).takes(proto, src_port, dst_port))
            .unwrap_or_else(|| self.catch_all_app(tenant))
    }
}

impl App {
    /// An app without `match` takes every packet of its tenant.
    pub fn is_catch_all(&self) -> bool {
        self.match_proto.is_none() && self.match_ports.is_empty()
    }

    /// Whether the app's own rule takes a packet: the protocol, if named, agrees,
    /// and the source or the destination port is listed, if ports are listed.
    pub fn takes(&self, proto: Option<Proto>, src_port: u16, dst_port: u16) -> bool {
        if self.match_proto.is_some() && self.match_proto != proto {
            return false;
        }
        self.match_ports.is_empty()
            || self
                .match_ports
                .iter()
                .any(|&p| p == src_port || p == dst_port)
    }

    /// Whether every packet `later`'s rule takes is taken by this app's rule
    /// first, so that `later`, listed after it, could never match.
    pub fn shadows(&self, later: &App) -> bool {
        let proto_covered = self.match_proto.is_none() || self.match_proto == later.match_proto;
        let ports_covered = self.match_ports.is_empty()
            || (!later.match_ports.is_empty()
                && later
                    .match_ports
                    .iter()
                    .all(|p| self.match_ports.contains(p)));
        proto_covered && ports_covered
    }
}

/// A scenario: a policy plus the traffic offered to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    /// The policy with the scenario's `link` overrides applied.
    pub policy: Policy,
    pub duration_ns: u64,
    pub interval_ns: u64,
    pub seed: u64,
    pub enforcers: Vec<String>,
    pub traffic: Vec<Traffic>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Traffic {
    pub name: String,
    pub tenant: TenantId,
    pub app: AppId,
    pub kind: TrafficKind,
    pub start_ns: u64,
    pub stop_ns: u64,
    /// Engine work per packet beyond `engine.packet_cost` (FairNIC's antagonist).
    pub cost_ns: u64,
}

/// A rate on a link `factor` times as fast, at least 1 bit/s.
pub(crate) fn rate_scaled(bps: u64, factor: f64) -> u64 {
    ((bps as f64 * factor).round() as u64).max(1)
}

/// A per-packet cost on a link `factor` times as fast, where as many bytes come in
/// `1 / factor` as many packets: the same share of a core.
fn cost_scaled(cost_ns: u64, factor: f64) -> u64 {
    (cost_ns as f64 / factor).round() as u64
}

impl Scenario {
    /// The same scenario on a link of `rate_bps`: every rate of the policy
    /// (guarantees, caps, split limits) and of the offered traffic scaled by one
    /// factor, so that the ideal allocation keeps its shape. This is how a scenario
    /// written for a 10 Gbit/s host runs on a lab link of 1 Gbit/s. Packets keep
    /// their sizes, so there are fewer of them: the engine's costs per packet
    /// (`packet_cost`, a traffic's `cost`) grow by the inverse factor, so that the
    /// engine's cores stay as loaded as the scenario says.
    pub fn scaled_to_link_rate(&self, rate_bps: u64) -> Scenario {
        let factor = rate_bps as f64 / self.policy.link.rate_bps as f64;
        let mut scaled = self.clone();
        scaled.policy = self.policy.scaled_to_link_rate(rate_bps);
        for t in &mut scaled.traffic {
            t.cost_ns = cost_scaled(t.cost_ns, factor);
            t.kind = t.kind.scaled(factor);
        }
        scaled
    }
}
