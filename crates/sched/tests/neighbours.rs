//! A class's flood uses up its own room only: however long a neighbour, or a sibling
//! app, is overloaded, a class's packets still find a descriptor, under every
//! software scheduler. (Before the per-tenant bound, two tenants capped at 3 and 1.5 Gbit/s,
//! each offered 8 Gbit/s, shared one descriptor pool first come first served: once it
//! was full, the tenant whose queue drained slower took it over, and the other fell
//! to a third of its cap after 2-4 s.)

use policy::{AppId, TenantId};
use sched::{Capacity, Packet, Refusal};

/// The registry's software schedulers: those with a queue per app.
fn software_schedulers() -> impl Iterator<Item = &'static str> {
    sched::ENFORCERS
        .iter()
        .filter(|e| e.has_classes())
        .map(|e| e.name)
}

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
        class_packets: Some(10),
        ..Capacity::default()
    };
    for name in software_schedulers() {
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
fn without_a_class_limit_each_app_gets_an_equal_part_of_the_pool() {
    let policy = two_tenants();
    let capacity = Capacity {
        packets: 8,
        ..Capacity::default()
    };
    assert_eq!(capacity.class_packets_max(2), 4);
    for name in software_schedulers() {
        let mut enforcer = sched::build_with(name, &policy, capacity).unwrap();
        let admitted = (0..100)
            .filter(|&h| enforcer.enqueue(0, packet(0, h)).is_ok())
            .count();
        assert_eq!(admitted, 4, "{name}");
        assert!(enforcer.enqueue(0, packet(1, 100)).is_ok(), "{name}");
    }
}

#[test]
fn a_flooded_app_leaves_room_for_its_sibling() {
    let policy = policy::parse_policy(
        "link: { rate: 1Gbit }\ntenants:\n  - name: a\n    apps:\n      - { name: bulk, weight: 1, match: { proto: udp, ports: [1] } }\n      - { name: kvs, weight: 3 }\n",
        "p.yaml",
    )
    .unwrap();
    let capacity = Capacity {
        class_packets: Some(4),
        ..Capacity::default()
    };
    for name in software_schedulers() {
        let mut enforcer = sched::build_with(name, &policy, capacity).unwrap();
        let of_app = |app: u32, handle: u64| Packet {
            app: AppId(app),
            ..packet(0, handle)
        };
        let admitted = (0..10)
            .filter(|&h| enforcer.enqueue(0, of_app(0, h)).is_ok())
            .count();
        assert_eq!(admitted, 4, "{name}");
        assert!(
            enforcer.enqueue(0, of_app(1, 10)).is_ok(),
            "{name}: kvs admitted"
        );
    }
}

#[test]
fn the_host_limits_go_where_a_host_has_them() {
    let limits = sched::HostLimits {
        queue_packets: 7,
        class_packets: 9,
    };
    for name in software_schedulers() {
        let capacity = Capacity::for_host(name, limits);
        assert_eq!(capacity.class_packets, Some(9), "{name}");
        assert_eq!(capacity.qdisc_packets, None, "{name}");
    }
    for nic_model in sched::ENFORCERS.iter().filter(|e| e.nic().is_some()) {
        let name = nic_model.name;
        let capacity = Capacity::for_host(name, limits);
        assert_eq!(capacity.class_packets, None, "{name}");
        assert_eq!(capacity.qdisc_packets, Some(7), "{name}");
    }
}
