//! The tonic program as the kernel runs it (`BPF_PROG_TEST_RUN`, no device): each
//! frame of a tenant gets the band its app's priority asks for, by the policy's own
//! rule ([`policy::Policy::app_for_packet`]), and the next queue of its tenant's
//! pool, counted; a frame of no tenant is left as it came. Needs root (bpf(2));
//! without it, fails in CI and elsewhere says why and passes.

use policy::{Proto, TenantId};
use realhost::bpf::tonic::{Layout, PRIORITY_BEST_EFFORT, PRIORITY_HIGH, Tonic};
use sched::multiqueue::{prioritised_apps, tonic_pools};
use std::net::IpAddr;

const POLICY: &str = "link: { rate: 1Gbit, queues: 8 }
tenants:
  - name: a
    weight: 2
    match: { src: 10.9.0.0/24 }
    apps:
      - { name: rpc, priority: 0, match: { proto: tcp, ports: [5001, 6000] } }
      - { name: dns, priority: 0, match: { proto: udp, ports: [53] } }
      - { name: bulk, priority: 1 }
  - name: b
    weight: 1
    match: { src: \"2001:db8::/32\" }
    apps:
      - { name: web, priority: 1, match: { proto: tcp, ports: [80] } }
      - { name: ctl, priority: 0, match: { ports: [7000] } }
      - { name: rest, priority: 1 }
  - { name: c, weight: 3, match: { src: 10.8.0.0/24 } }
";

fn runnable() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var("CI").is_err(),
        "the tonic program's test needs root (bpf(2)); CI must run it"
    );
    eprintln!("skipping the tonic program's test: needs root (bpf(2))");
    false
}

/// An Ethernet frame from `src` of IP protocol `proto` with `ports` right after
/// an IPv4 header of `options` 4-byte words, or an IPv6 header.
fn frame(src: IpAddr, proto: u8, ports: (u16, u16), options: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    match src {
        IpAddr::V4(a) => {
            f.extend(0x0800u16.to_be_bytes());
            let header = 20 + 4 * options;
            let mut ip = vec![0u8; header];
            ip[0] = 0x40 | (header / 4) as u8;
            ip[2..4].copy_from_slice(&((header + 28) as u16).to_be_bytes());
            ip[8] = 64;
            ip[9] = proto;
            ip[12..16].copy_from_slice(&a.octets());
            ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
            f.extend(ip);
        }
        IpAddr::V6(a) => {
            f.extend(0x86ddu16.to_be_bytes());
            let mut ip = vec![0u8; 40];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&28u16.to_be_bytes());
            ip[6] = proto;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&a.octets());
            f.extend(ip);
        }
    }
    f.extend(ports.0.to_be_bytes());
    f.extend(ports.1.to_be_bytes());
    f.extend([0u8; 24]);
    f
}

#[test]
fn each_tenants_frame_gets_its_apps_band_and_the_next_queue_of_its_pool() {
    if !runnable() {
        return;
    }
    let policy = policy::parse_policy(POLICY, "tonic.yaml").expect("a policy");
    let weights: Vec<u32> = policy.tenants.iter().map(|t| t.weight).collect();
    let pools = tonic_pools(&weights, 8).unwrap();
    let prioritised = prioritised_apps(&policy);
    let tonic = Tonic::load(&policy, &pools, 8, &prioritised).expect("the kernel takes it");
    let program = tonic.program();

    let sources: [IpAddr; 3] = [
        "10.9.0.7".parse().unwrap(),
        "2001:db8::5".parse().unwrap(),
        "10.8.0.1".parse().unwrap(),
    ];
    let mut sent = [0u64; 3];
    let mut high = [0u64; 3];
    for (t, &src) in sources.iter().enumerate() {
        for proto in [6u8, 17, 1] {
            for ports in [
                (5001, 9),
                (9, 6000),
                (53, 9),
                (9, 53),
                (80, 9),
                (9, 7000),
                (9, 9),
            ] {
                for options in [0, 3] {
                    let policy_proto = match proto {
                        6 => Some(Proto::Tcp),
                        17 => Some(Proto::Udp),
                        _ => None,
                    };
                    let (sport, dport) = if policy_proto.is_some() {
                        ports
                    } else {
                        (0, 0)
                    };
                    let app = policy.app_for_packet(TenantId(t as u16), policy_proto, sport, dport);
                    let want = if prioritised[app.index()] {
                        PRIORITY_HIGH
                    } else {
                        PRIORITY_BEST_EFFORT
                    };
                    let (verdict, priority) = program
                        .test_run(&frame(src, proto, ports, options), 3)
                        .unwrap();
                    assert_eq!(verdict, -1, "every frame goes on (TCX_NEXT)");
                    assert_eq!(
                        priority,
                        want,
                        "tenant {t}, protocol {proto}, ports {ports:?}: app {}",
                        policy.app(app).name
                    );
                    sent[t] += 1;
                    high[t] += u64::from(want == PRIORITY_HIGH);
                }
            }
        }
    }
    let (verdict, priority) = program
        .test_run(&frame("10.7.0.1".parse().unwrap(), 6, (5001, 9), 0), 3)
        .unwrap();
    assert_eq!((verdict, priority), (-1, 3), "no tenant's: untouched");

    let counts = tonic.counters().unwrap();
    let layout = Layout {
        tenants: 3,
        queues: 8,
    };
    assert_eq!(counts.queues.len() as u32, layout.tenants);
    for (t, pool) in pools.iter().enumerate() {
        let packets: Vec<u64> = counts.queues[t].iter().map(|c| c.packets).collect();
        let per_queue = sent[t] / u64::from(pool.len);
        for (q, &n) in packets.iter().enumerate() {
            let in_pool = (pool.start..pool.start + pool.len).contains(&(q as u16));
            assert_eq!(
                n,
                if in_pool { per_queue } else { 0 },
                "tenant {t}'s frames by queue: {packets:?} (pool {pool:?})"
            );
        }
        assert_eq!(counts.tenant(t).packets, sent[t]);
        assert_eq!(
            [counts.bands[t][0].packets, counts.bands[t][1].packets],
            [high[t], sent[t] - high[t]]
        );
        assert!(counts.tenant(t).bytes >= 60 * sent[t]);
    }
    assert!(high[0] > 0 && high[1] > 0 && high[2] == 0);
}
