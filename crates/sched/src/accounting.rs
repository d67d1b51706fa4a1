//! Packet accounting (PicNIC): bytes buffered per tenant and for the whole host,
//! each under its cap, and packets held per app (leaf class) under the host's
//! per-class queue limit. A packet that would exceed a cap is refused at admission
//! and counted against its own tenant, so a flood can only ever use up its own
//! buffer: the per-class packet limits add up to no more than the enforcer's
//! descriptor pool, so a neighbour's backlog, or a sibling app's, can never leave a
//! class without a descriptor.
//!
//! Within an app, its split classes share its limit by dynamic thresholds, as
//! shared-buffer switches share theirs (Choudhury and Hahne, α = 1): a split class
//! may hold at most as many packets as the app's queue has room left, so with n
//! of them backlogged each settles at 1/(n+1) of the limit and there is always
//! room for a class that holds none. Without that, split classes held at their
//! cap never emptied, filled the app's queue, and udp datagrams at constant gaps
//! that found it full kept finding it full: of 9 flows of 40.2 Mbit/s in classes
//! capped at 39.05 on a 300 Mbit/s link, arriving nanoseconds apart, 2-3 got
//! through and the link sent 98-121 Mbit/s under `htb`, `valve` and `wf2q`; with
//! 20 flows of 30 Mbit/s, 10 got 30 each and 10 nothing (`sched --test
//! split_admission`).

use crate::{Packet, Refusal};
use policy::{AppId, Policy, TenantId};

/// Packets one split class may hold: its count is 16 bits, beside its app's index
/// (`policy::limits::APPS_MAX` apps fit 16 bits too), so that the count costs no
/// byte of the 48 per class of issue 28. Only an app limit above it, where no
/// host limit is set, can reach it.
pub const SPLIT_CLASS_PACKETS_MAX: u16 = u16::MAX;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantCounters {
    pub admitted_packets: u64,
    pub admitted_bytes: u64,
    pub refused_packets: u64,
    pub refused_bytes: u64,
}

#[derive(Clone, Debug)]
pub struct Accounting {
    /// Each tenant's and each app's state in one record, so that admitting and
    /// releasing a packet reach one record of each (a vector per field was a
    /// bounds check and a base pointer per field on every packet).
    tenants: Vec<TenantBuffer>,
    apps: Vec<AppHeld>,
    class_packets_max: u32,
    host_buffered_bytes: u64,
    host_cap_bytes: u64,
    counters: Vec<TenantCounters>,
    /// Packets released so far, and turns of the link this tree did not take
    /// ([`Accounting::turn_elsewhere`]): the clock of [`AppHeld::empty_at`].
    releases: u64,
}

#[derive(Clone, Copy, Debug)]
struct TenantBuffer {
    buffered_bytes: u64,
    cap_bytes: u64,
}

#[derive(Clone, Copy, Debug)]
struct AppHeld {
    packets: u32,
    /// Whether a packet left while it held nothing since the last
    /// [`Accounting::take_app_hungry`].
    emptied: bool,
    /// [`Accounting::releases`] when it last held nothing after a release.
    empty_at: u64,
    /// Whether it held nothing at the last [`Accounting::take_app_hungry`].
    empty_at_take: bool,
    bytes: u64,
}

impl Accounting {
    /// `class_packets_max`: packets one app may hold at once, its split classes
    /// together (see [`crate::Capacity::class_packets_max`]).
    pub fn new(policy: &Policy, class_packets_max: u32) -> Self {
        Accounting {
            tenants: policy
                .tenants
                .iter()
                .map(|t| TenantBuffer {
                    buffered_bytes: 0,
                    cap_bytes: t.buffer_bytes.unwrap_or(u64::MAX),
                })
                .collect(),
            apps: vec![
                AppHeld {
                    packets: 0,
                    emptied: true,
                    empty_at: 0,
                    empty_at_take: true,
                    bytes: 0,
                };
                policy.apps.len()
            ],
            class_packets_max,
            host_buffered_bytes: 0,
            host_cap_bytes: policy.buffer_bytes.unwrap_or(u64::MAX),
            counters: vec![TenantCounters::default(); policy.tenants.len()],
            releases: 0,
        }
    }

    /// Admits `packet`, or refuses it and counts the refusal against its tenant.
    pub fn admit(&mut self, packet: &Packet) -> Result<(), Refusal> {
        self.admit_within(packet, self.class_packets_max)
    }

    /// [`Accounting::admit`] for a packet of a split class that holds
    /// `class_packets`: only while it holds fewer than the app's queue has room
    /// left (see the module docs), and fewer than [`SPLIT_CLASS_PACKETS_MAX`].
    pub fn admit_split(&mut self, packet: &Packet, class_packets: u16) -> Result<(), Refusal> {
        let within = if class_packets == SPLIT_CLASS_PACKETS_MAX {
            0
        } else {
            self.class_packets_max
                .saturating_sub(u32::from(class_packets))
        };
        self.admit_within(packet, within)
    }

    fn admit_within(&mut self, packet: &Packet, app_packets_max: u32) -> Result<(), Refusal> {
        let (t, a) = (packet.tenant.index(), packet.app.index());
        let bytes = u64::from(packet.len_bytes);
        let (tenant, app) = (&mut self.tenants[t], &mut self.apps[a]);
        let refusal = if app.packets >= app_packets_max {
            Some(Refusal::QueueFull)
        } else if tenant.buffered_bytes + bytes > tenant.cap_bytes {
            Some(Refusal::TenantBuffer)
        } else if self.host_buffered_bytes + bytes > self.host_cap_bytes {
            Some(Refusal::HostBuffer)
        } else {
            None
        };
        let counters = &mut self.counters[t];
        match refusal {
            Some(reason) => {
                counters.refused_packets += 1;
                counters.refused_bytes += bytes;
                Err(reason)
            }
            None => {
                counters.admitted_packets += 1;
                counters.admitted_bytes += bytes;
                if app.packets == 0 && self.releases > app.empty_at {
                    app.emptied = true;
                }
                tenant.buffered_bytes += bytes;
                app.packets += 1;
                app.bytes += bytes;
                self.host_buffered_bytes += bytes;
                Ok(())
            }
        }
    }

    /// Counts a refusal the enforcer decided itself (a full queue).
    pub fn refuse(&mut self, tenant: TenantId, bytes: u32) {
        let counters = &mut self.counters[tenant.index()];
        counters.refused_packets += 1;
        counters.refused_bytes += u64::from(bytes);
    }

    /// Returns buffer space when a packet (or its last frame) leaves.
    pub fn release(&mut self, packet: &Packet) {
        let (tenant, app) = (
            &mut self.tenants[packet.tenant.index()],
            &mut self.apps[packet.app.index()],
        );
        let bytes = u64::from(packet.len_bytes);
        debug_assert!(tenant.buffered_bytes >= bytes);
        debug_assert!(self.host_buffered_bytes >= bytes);
        debug_assert!(app.packets > 0);
        app.packets -= 1;
        app.bytes -= bytes;
        self.releases += 1;
        if app.packets == 0 {
            app.empty_at = self.releases;
        }
        tenant.buffered_bytes -= bytes;
        self.host_buffered_bytes -= bytes;
    }

    /// Counts a turn of the link that this tree's packets did not take (on an
    /// engine core of its own, the link went to another core's), as a release
    /// does: an app that emptied and got its next packet only after it held
    /// nothing through such a turn was idle, not between two sends of a TCP
    /// sender. Alone on its core, a 10 Mbit/s sender saw no release but its own,
    /// was counted hungry in two intervals of three, and its core's part of the
    /// link went unused (the other two tenants 34.8% under their ideal).
    pub fn turn_elsewhere(&mut self) {
        self.releases += 1;
    }

    pub fn counters(&self) -> &[TenantCounters] {
        &self.counters
    }

    pub fn buffered_bytes(&self, tenant: TenantId) -> u64 {
        self.tenants[tenant.index()].buffered_bytes
    }

    /// Bytes app `app` holds, its split classes together.
    pub fn app_buffered_bytes(&self, app: AppId) -> u64 {
        self.apps[app.index()].bytes
    }

    /// Whether app `app` held packets all along since the last call, save for
    /// instants: it went without only until it got its next packet, with no packet
    /// of any app leaving meanwhile (a TCP sender, whose next send waits for the
    /// completion of the one that emptied it, does that at each send), and not
    /// across two calls (where nothing else leaves, an instant would never end);
    /// starts a new watch.
    pub fn take_app_hungry(&mut self, app: AppId) -> bool {
        let releases = self.releases;
        let app = &mut self.apps[app.index()];
        let empty = app.packets == 0;
        let idle = empty && (releases > app.empty_at || app.empty_at_take);
        app.empty_at_take = empty;
        !std::mem::replace(&mut app.emptied, idle) && !idle
    }

    pub fn host_buffered_bytes(&self) -> u64 {
        self.host_buffered_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(app: u16) -> Packet {
        crate::testkit::tenant_packet(app, 1500)
    }

    /// Two tenants of one app each, their apps 0 and 1, each holding a packet.
    fn two_held() -> Accounting {
        let policy = policy::parse_policy(
            "link: { rate: 1Gbit }\ntenants: [{ name: a }, { name: b }]\n",
            "p.yaml",
        )
        .unwrap();
        let mut accounting = Accounting::new(&policy, 100);
        for app in [0, 1] {
            accounting.admit(&packet(app)).unwrap();
        }
        assert!(
            !accounting.take_app_hungry(AppId(0)),
            "an app is watched from its start, empty"
        );
        assert!(accounting.take_app_hungry(AppId(0)));
        accounting
    }

    /// Empty only until its next packet, with no packet leaving meanwhile: a TCP
    /// sender between a send and its completion. It stays hungry.
    #[test]
    fn an_app_empty_for_an_instant_stays_hungry() {
        let mut accounting = two_held();
        accounting.release(&packet(0));
        assert!(accounting.take_app_hungry(AppId(0)), "empty at the update");
        accounting.admit(&packet(0)).unwrap();
        assert!(
            accounting.take_app_hungry(AppId(0)),
            "refilled before a release"
        );
        accounting.release(&packet(0));
        assert!(accounting.take_app_hungry(AppId(0)), "empty at the update");
        assert!(
            !accounting.take_app_hungry(AppId(0)),
            "still empty at the next: no instant spans two updates"
        );
    }

    /// Empty while another app's packet left: it ran empty, whether it holds a
    /// packet again at the update or not.
    #[test]
    fn an_app_empty_while_a_packet_leaves_is_not_hungry() {
        let mut accounting = two_held();
        accounting.release(&packet(0));
        accounting.release(&packet(1));
        accounting.admit(&packet(0)).unwrap();
        assert!(
            !accounting.take_app_hungry(AppId(0)),
            "refilled after a release"
        );
        assert!(
            accounting.take_app_hungry(AppId(0)),
            "held since the last update"
        );
        accounting.release(&packet(0));
        accounting.admit(&packet(1)).unwrap();
        accounting.release(&packet(1));
        assert!(
            !accounting.take_app_hungry(AppId(0)),
            "still empty at the update"
        );
        assert!(
            !accounting.take_app_hungry(AppId(0)),
            "empty since the last update"
        );
    }
}
