//! A minimal link for exercising an enforcer in tests and benchmarks without the
//! simulator: backlogged sources keep every listed app supplied with packets, and a
//! link of `rate_bps` takes one frame at a time. Exact and deterministic.

use crate::{Enforcer, Packet};
use policy::{AppId, Policy};

/// One backlogged source: packets of `len_bytes` for `app`, on `flows` flows (and as
/// many destinations), kept `depth` packets deep in the enforcer.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    pub app: AppId,
    pub len_bytes: u32,
    pub flows: u32,
    pub depth: u32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkRun {
    /// Bytes sent per app (index = AppId).
    pub app_bytes: Vec<u64>,
    /// Departure time and app of every frame, in order.
    pub departures: Vec<(u64, AppId)>,
    pub refused: u64,
}

/// A packet of `len_bytes` of tenant `tenant`'s app `tenant` (a policy of one app
/// per tenant), on flow `tenant`, for unit tests that drive an enforcer by hand.
pub fn tenant_packet(tenant: u16, len_bytes: u32) -> Packet {
    Packet {
        len_bytes,
        tenant: policy::TenantId(tenant),
        app: AppId(u32::from(tenant)),
        flow: u32::from(tenant),
        destination: 0,
        core: 0,
        arrival_ns: 0,
        handle: 0,
    }
}

/// Runs a saturated link for `duration_ns`, starting at `start_ns`.
pub fn drive_link(
    policy: &Policy,
    enforcer: &mut dyn Enforcer,
    sources: &[Source],
    start_ns: u64,
    duration_ns: u64,
) -> LinkRun {
    let rate_bps = policy.link.rate_bps;
    let mut run = LinkRun {
        app_bytes: vec![0; policy.apps.len()],
        ..LinkRun::default()
    };
    let mut queued: Vec<u32> = vec![0; sources.len()];
    let mut next_flow: Vec<u32> = vec![0; sources.len()];
    let source_of_handle = |handle: u64| (handle >> 32) as usize;
    let mut now = start_ns;
    let end = start_ns + duration_ns;
    while now < end {
        for (i, s) in sources.iter().enumerate() {
            while queued[i] < s.depth {
                let flow = next_flow[i];
                next_flow[i] = (flow + 1) % s.flows.max(1);
                let packet = Packet {
                    len_bytes: s.len_bytes,
                    tenant: policy.app(s.app).tenant,
                    app: s.app,
                    flow: (i as u32) << 20 | flow,
                    destination: (i as u32) << 20 | flow,
                    core: 0,
                    arrival_ns: now,
                    handle: (i as u64) << 32 | u64::from(flow),
                };
                if enforcer.enqueue(now, packet).is_err() {
                    run.refused += 1;
                    break;
                }
                queued[i] += 1;
            }
        }
        match enforcer.dequeue(now) {
            Some(frame) => {
                let app = frame.packet.app;
                run.app_bytes[app.index()] += u64::from(frame.bytes);
                run.departures.push((now, app));
                if frame.last {
                    queued[source_of_handle(frame.packet.handle)] -= 1;
                }
                now += policy::wire::serialisation_ns(frame.bytes, rate_bps);
            }
            None => match enforcer.next_ready_ns(now) {
                Some(at) => now = at.max(now + 1),
                None => break,
            },
        }
    }
    run
}
