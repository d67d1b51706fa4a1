//! The redirect program on a device in a namespace of the test's own: the kernel
//! accepts what nicsched assembles, a tenant's frames leave on the other device,
//! the rest on their own, and the program is gone when its link is dropped.

use datapath::sys::netns::{in_new_namespace, rx_counters};
use datapath::sys::packet::ifindex;
use realhost::bpf::Redirect;
use realhost::bpf::sys::tcx_egress_programs;
use std::net::UdpSocket;

fn sh(command: &str) {
    let status = std::process::Command::new("sh")
        .args(["-ec", command])
        .status()
        .expect("sh runs");
    assert!(status.success(), "{command}");
}

fn rx_packets(dev: &str) -> u64 {
    rx_counters(dev).expect("the device's counters").packets
}

fn send(from: &str, to: &str, frames: usize) {
    let socket = UdpSocket::bind((from, 0)).expect("bind to the source");
    for _ in 0..frames {
        socket.send_to(b"nicsched", (to, 9)).expect("send");
    }
}

#[test]
fn a_tenants_frames_are_redirected_the_rest_pass_and_nothing_stays_after_the_link() {
    in_new_namespace(|| {
        // Nothing but the test's frames on the devices: no IPv6 of their own.
        std::fs::write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1").unwrap();
        sh("ip link add v0 type veth peer name v1
            ip link add c0 type veth peer name c1
            for d in v0 v1 c0 c1; do ip link set $d up; done
            ip addr add 10.9.0.1/24 dev v0
            ip addr add 10.8.0.1/24 dev v0
            ip neigh add 10.9.0.2 lladdr 02:00:00:00:00:02 dev v0
            ip neigh add 10.8.0.2 lladdr 02:00:00:00:00:02 dev v0");
        let policy = policy::parse_policy(
            "link: { rate: 1Gbit }\ntenants:\n  - { name: a, match: { src: 10.9.0.0/24 } }\n  - { name: b, match: { src: \"2001:db8::/32\" } }\n",
            "test.yaml",
        )
        .expect("a policy");
        let v0 = ifindex("v0").unwrap();
        let redirect = Redirect::attach(&policy, v0, ifindex("c0").unwrap()).expect("attached");
        assert_eq!(tcx_egress_programs(v0).unwrap(), 1);
        let (v1, c1) = (rx_packets("v1"), rx_packets("c1"));
        send("10.9.0.1", "10.9.0.2", 37);
        send("10.8.0.1", "10.8.0.2", 23);
        assert_eq!(rx_packets("c1") - c1, 37, "the tenant's frames, redirected");
        assert_eq!(rx_packets("v1") - v1, 23, "the others, on their way");
        drop(redirect);
        assert_eq!(tcx_egress_programs(v0).unwrap(), 0);
        let v1 = rx_packets("v1");
        send("10.9.0.1", "10.9.0.2", 5);
        assert_eq!(
            rx_packets("v1") - v1,
            5,
            "unshaped again once the link is gone"
        );
    });
}
