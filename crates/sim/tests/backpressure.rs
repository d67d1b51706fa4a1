//! PicNIC §5.4.3 and Table 4: one VM, an unthrottled TCP bulk flow beside a UDP app
//! capped far below what it offers. With out-of-order completions and NAPI-TX the
//! guest's sockets are held back by their completions: the unthrottled flow gets
//! its ideal, the capped one its cap, and nothing is refused. With in-order
//! completions and no NAPI-TX the flood is never held back and every completion
//! waits behind the capped flow's: the engine holds the capped app at packet
//! accounting's cap, refuses the rest, and the unthrottled flow is throttled too.

use policy::wire::{UDP_HEADER_BYTES, bulk_send_bytes};
use proptest::prelude::*;
use report::{AppSummary, Backpressure, Summary, TenantSummary, summarize};
use std::path::{Path, PathBuf};

const LINK_BPS: f64 = 10e9;

fn run(scenario: &policy::Scenario, host: sim::HostModel) -> Summary {
    let record = sim::run(scenario, "picnic", host, &mut |_| {}).unwrap();
    let failed: Vec<_> = record.failed_checks().collect();
    assert!(failed.is_empty(), "{failed:?}");
    summarize(&record)
}

fn shipped(file: &str) -> policy::Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/picnic")
        .join(file);
    policy::load_scenario(&path, &sched::registry::names()).unwrap()
}

/// The VM of Table 4 with the guest given by `guest` (its tenant keys), its UDP
/// app capped at `cap_mbit` and offered `offered_mbit` of `size`-byte datagrams.
fn generated(guest: &[&str], cap_mbit: u32, offered_mbit: u32, size: u32) -> policy::Scenario {
    let guest = guest.join("\n      ");
    let text = format!(
        "policy:
  link: {{ rate: 10Gbit }}
  tenants:
    - name: vm
      {guest}
      apps:
        - {{ name: throttled, max_rate: {cap_mbit}Mbit, match: {{ proto: udp }} }}
        - {{ name: unthrottled, match: {{ proto: tcp }} }}
duration: 1s
interval: 100ms
traffic:
  - {{ tenant: vm, app: unthrottled, kind: bulk, flows: 1 }}
  - {{ tenant: vm, app: throttled, kind: udp, rate: {offered_mbit}Mbit, size: {size}B }}
"
    );
    policy::parse_scenario(&text, "s.yaml", Path::new("."), &sched::registry::names()).unwrap()
}

/// What Table 4 reports of one run.
struct Row<'a> {
    vm: &'a TenantSummary,
    throttled: &'a AppSummary,
    unthrottled: &'a AppSummary,
    backpressure: &'a Backpressure,
}

fn row(summary: &Summary) -> Row<'_> {
    let vm = &summary.tenants[0];
    let app = |name: &str| vm.apps.iter().find(|a| a.name == name).unwrap();
    Row {
        vm,
        throttled: app("throttled"),
        unthrottled: app("unthrottled"),
        backpressure: vm.backpressure.as_ref().expect("the simulator fills it"),
    }
}

/// The capped app leaves at its cap, give or take one datagram over the run (the
/// limit lets its first one go at once).
fn at_cap(row: &Row, cap_bps: f64, datagram_bytes: u32, duration_s: f64) -> bool {
    let slack_bps = f64::from(datagram_bytes) * 8.0 / duration_s;
    (row.throttled.throughput_bps - cap_bps).abs() <= 0.005 * cap_bps + slack_bps
}

/// What the enforcer can hold for the VM when every socket is backpressured: the
/// UDP socket's send buffer in datagrams and the bulk flow's largest TCP small
/// queues allowance, nothing more.
fn sockets_hold_packets(host: &sim::HostModel, datagram_bytes: u32) -> u64 {
    let truesize = u64::from(datagram_bytes + host.skb_overhead_bytes);
    let tsq_sends = host
        .tsq_bytes_max
        .div_ceil(u64::from(bulk_send_bytes(1500)));
    host.sndbuf_bytes.div_ceil(truesize) + tsq_sends
}

/// Out-of-order completions with NAPI-TX: the unthrottled flow at 95% of its ideal
/// or more, the capped one at its cap, no refusal, no datagram lost in the guest,
/// and the enforcer holds no more than the sockets let out.
fn holds_out_of_order(row: &Row, host: &sim::HostModel, cap_bps: f64, datagram_bytes: u32) {
    let b = row.backpressure;
    assert!(
        row.unthrottled.throughput_bps >= 0.95 * row.unthrottled.ideal_bps,
        "unthrottled at {} of {}",
        row.unthrottled.throughput_bps,
        row.unthrottled.ideal_bps
    );
    assert!(
        at_cap(row, cap_bps, datagram_bytes, 1.0),
        "throttled at {} against {cap_bps}",
        row.throttled.throughput_bps
    );
    assert_eq!(row.vm.drops, 0);
    assert_eq!(b.dropped_in_guest, 0);
    assert_eq!(b.ring_full_s, 0.0);
    assert!(
        b.held_packets_max <= sockets_hold_packets(host, datagram_bytes),
        "{b:?}"
    );
}

/// In-order completions without NAPI-TX: the unthrottled flow below 80% of its
/// ideal, the capped one still at its cap, its app holding packet accounting's cap
/// in the engine, refusals there and datagrams lost in the guest to a full ring.
fn holds_in_order(row: &Row, cap_bps: f64, datagram_bytes: u32) {
    let b = row.backpressure;
    assert!(
        row.unthrottled.throughput_bps < 0.8 * row.unthrottled.ideal_bps,
        "unthrottled at {} of {}",
        row.unthrottled.throughput_bps,
        row.unthrottled.ideal_bps
    );
    assert!(
        at_cap(row, cap_bps, datagram_bytes, 1.0),
        "throttled at {} against {cap_bps}",
        row.throttled.throughput_bps
    );
    assert!(row.vm.drops > 0);
    assert!(
        b.held_packets_max >= u64::from(sched::HostLimits::LINUX.class_packets),
        "{b:?}"
    );
    assert!(b.dropped_in_guest > 0 && b.ring_full_s > 0.0, "{b:?}");
}

#[test]
fn table4_out_of_order_with_napi_tx_keeps_the_unthrottled_flow_whole() {
    let host = sim::HostModel::default();
    let summary = run(&shipped("table4-out-of-order.yaml"), host);
    holds_out_of_order(&row(&summary), &host, 9e6, 1470 + UDP_HEADER_BYTES);
}

#[test]
fn table4_in_order_without_napi_tx_throttles_both_flows() {
    let summary = run(&shipped("table4-in-order.yaml"), sim::HostModel::default());
    holds_in_order(&row(&summary), 9e6, 1470 + UDP_HEADER_BYTES);
}

/// The two shipped files differ in the guest alone.
#[test]
fn table4_scenarios_differ_only_in_the_guest() {
    let (mut in_order, out_of_order) = (
        shipped("table4-in-order.yaml"),
        shipped("table4-out-of-order.yaml"),
    );
    let vm = &mut in_order.policy.tenants[0];
    assert_eq!(
        (vm.completions, vm.napi_tx),
        (policy::Completions::InOrder, false)
    );
    (vm.completions, vm.napi_tx) = (policy::Completions::OutOfOrder, true);
    in_order.name = out_of_order.name.clone();
    assert_eq!(in_order, out_of_order);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Table 4's two rows hold for other caps, floods, datagram sizes and rings, as
    /// long as the ring has more descriptors than packet accounting lets one app
    /// hold (PicNIC's premise, `HostModel::tx_ring_descriptors`).
    #[test]
    fn table4_holds_across_caps_floods_and_rings(
        cap_mbit in 5u32..100,
        flood_times in 20u32..200,
        size in prop::sample::select(vec![200u32, 512, 1000, 1470]),
        ring in 1024u32..8192,
    ) {
        let offered_mbit = (cap_mbit * flood_times).min(3000);
        let host = sim::HostModel { tx_ring_descriptors: ring, ..sim::HostModel::default() };
        let cap_bps = f64::from(cap_mbit) * 1e6;
        let datagram_bytes = size + UDP_HEADER_BYTES;
        eprintln!("cap {cap_mbit} Mbit/s, {offered_mbit} Mbit/s of {size} B, ring {ring}");

        let napi = run(
            &generated(&["completions: out-of-order", "napi_tx: true"], cap_mbit, offered_mbit, size),
            host,
        );
        let napi = row(&napi);
        holds_out_of_order(&napi, &host, cap_bps, datagram_bytes);
        prop_assert!(napi.unthrottled.ideal_bps > 0.99 * (LINK_BPS - cap_bps));

        let in_order = run(&generated(&["completions: in-order"], cap_mbit, offered_mbit, size), host);
        holds_in_order(&row(&in_order), cap_bps, datagram_bytes);
    }
}
