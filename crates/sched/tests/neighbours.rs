//! A tenant's flood uses up its own room only: however long a neighbour is
//! overloaded, a tenant's packets still find a descriptor, under every software
//! scheduler. (Before the per-tenant bound, two tenants capped at 3 and 1.5 Gbit/s,
//! each offered 8 Gbit/s, shared one descriptor pool first come first served: once it
//! was full, the tenant whose queue drained slower took it over, and the other fell
//! to a third of its cap after 2-4 s.)

use policy::{AppId, TenantId};
use sched::{Capacity, Packet, Refusal};

const SOFTWARE_SCHEDULERS: [&str; 4] = ["wf2q", "valve", "htb", "wheel"];

fn packet(tenant: u16, handle: u64) -> Packet {
    Packet {
        len_bytes: 1500,
        tenant: TenantId(tenant),
        app: AppId(u32::from(tenant)),
        flow: u32::from(tenant),
        destination: 0,
        core: 0,
        arrival_ns: 0,
        handle,
    }
}

fn two_tenants() -> policy::Policy {
    policy::parse_policy(
        "link: { rate: 10Gbit }\ntenants:\n  - { name: a, max_rate: 3Gbit }\n  - { name: b, max_rate: 1500Mbit }\n",
        "p.yaml",
    )
    .unwrap()
}

#[test]
fn a_flood_is_refused_at_its_own_limit_and_the_neighbour_is_still_admitted() {
    let policy = two_tenants();
    let capacity = Capacity {
        packets: 64,
        tenant_packets: Some(10),
        ..Capacity::default()
    };
    for name in SOFTWARE_SCHEDULERS {
        let mut enforcer = sched::build_with(name, &policy, capacity).unwrap();
        for handle in 0..10 {
            assert!(enforcer.enqueue(0, packet(0, handle)).is_ok(), "{name}");
        }
        let refused = enforcer.enqueue(0, packet(0, 10)).unwrap_err();
        assert_eq!(refused.1, Refusal::QueueFull, "{name}");
        assert!(
            enforcer.enqueue(0, packet(1, 11)).is_ok(),
            "{name}: b admitted"
        );
        assert_eq!(enforcer.counters()[0].refused_packets, 1, "{name}");
        assert_eq!(enforcer.counters()[1].refused_packets, 0, "{name}");
        // A packet that leaves gives its tenant room again.
        let mut now = 0;
        let frame = loop {
            if let Some(frame) = enforcer.dequeue(now) {
                break frame;
            }
            now = enforcer
                .next_ready_ns(now)
                .expect("packets are held")
                .max(now + 1);
        };
        let tenant = frame.packet.tenant.0;
        assert!(enforcer.enqueue(now, packet(tenant, 12)).is_ok(), "{name}");
    }
}

#[test]
fn without_a_tenant_limit_each_tenant_gets_an_equal_part_of_the_pool() {
    let policy = two_tenants();
    let capacity = Capacity {
        packets: 8,
        ..Capacity::default()
    };
    assert_eq!(capacity.tenant_packets_max(2), 4);
    for name in SOFTWARE_SCHEDULERS {
        let mut enforcer = sched::build_with(name, &policy, capacity).unwrap();
        let admitted = (0..100)
            .filter(|&h| enforcer.enqueue(0, packet(0, h)).is_ok())
            .count();
        assert_eq!(admitted, 4, "{name}");
        assert!(enforcer.enqueue(0, packet(1, 100)).is_ok(), "{name}");
    }
}

#[test]
fn the_host_limits_go_where_a_host_has_them() {
    let limits = sched::HostLimits {
        queue_packets: 7,
        tenant_packets: 9,
    };
    for name in SOFTWARE_SCHEDULERS {
        let capacity = Capacity::for_host(name, limits);
        assert_eq!(capacity.tenant_packets, Some(9), "{name}");
        assert_eq!(capacity.qdisc_packets, None, "{name}");
    }
    for name in ["fifo", "hash", "xps", "tonic", "tonic-band"] {
        let capacity = Capacity::for_host(name, limits);
        assert_eq!(capacity.tenant_packets, None, "{name}");
        assert_eq!(capacity.qdisc_packets, Some(7), "{name}");
    }
}
