//! Every registered enforcer, built from its registry row on generated policies and
//! driven through one packet sequence: nothing is lost or made up, the backlog
//! drains, the counters agree with what was offered, and a second run is the same.

use policy::{AppId, Policy, parse_policy};
use proptest::prelude::*;
use sched::registry::Runs;
use sched::{Capacity, Enforcer, HostLimits, Packet, Refusal};

/// (weight, priority, max_rate Mbit/s, split: (by destination, max_rate Mbit/s)).
type AppSpec = (u32, u8, Option<u32>, Option<(bool, u32)>);

#[derive(Clone, Debug)]
struct TenantSpec {
    weight: u32,
    min_rate_mbit: Option<u32>,
    max_rate_mbit: Option<u32>,
    buffer_kib: Option<u32>,
    /// Apps matched by port, in order.
    apps: Vec<AppSpec>,
    /// An app without `match` after them, which replaces the implicit `default`.
    catch_all: Option<AppSpec>,
}

fn app_spec() -> impl Strategy<Value = AppSpec> {
    (
        1u32..5,
        0u8..3,
        proptest::option::of(50u32..2000),
        proptest::option::of((any::<bool>(), 5u32..500)),
    )
}

fn tenant_spec() -> impl Strategy<Value = TenantSpec> {
    (
        1u32..5,
        proptest::option::of(10u32..100),
        proptest::option::of(200u32..5000),
        proptest::option::of(16u32..256),
        proptest::collection::vec(app_spec(), 0..3),
        proptest::option::of(app_spec()),
    )
        .prop_map(
            |(weight, min_rate_mbit, max_rate_mbit, buffer_kib, apps, catch_all)| TenantSpec {
                weight,
                min_rate_mbit,
                max_rate_mbit,
                buffer_kib,
                apps,
                catch_all,
            },
        )
}

/// A policy of 1 to 4 tenants on a link with a Tx queue per tenant at least, as
/// TONIC's disjoint pools need, so that every enforcer runs it.
fn policy_strategy() -> impl Strategy<Value = Policy> {
    (
        proptest::collection::vec(tenant_spec(), 1..5),
        prop_oneof![Just(1u32), Just(10)],
        0u16..5,
        proptest::option::of(64u32..1024),
    )
        .prop_map(|(tenants, link_gbit, spare_queues, host_buffer_kib)| {
            let queues = tenants.len() as u16 + spare_queues;
            policy(&tenants, link_gbit, queues, host_buffer_kib)
        })
}

fn policy(tenants: &[TenantSpec], link_gbit: u32, queues: u16, buffer_kib: Option<u32>) -> Policy {
    let mut yaml = format!("link: {{ rate: {link_gbit}Gbit, queues: {queues} }}\n");
    if let Some(kib) = buffer_kib {
        yaml += &format!("buffer: {kib}KiB\n");
    }
    yaml += "tenants:\n";
    let app = |yaml: &mut String, name: &str, (weight, priority, max, split): AppSpec| {
        *yaml += &format!(
            "      - name: {name}\n        weight: {weight}\n        priority: {priority}\n"
        );
        if let Some(max) = max {
            *yaml += &format!("        max_rate: {max}Mbit\n");
        }
        if let Some((by_destination, max)) = split {
            let by = if by_destination {
                "destination"
            } else {
                "flow"
            };
            *yaml += &format!("        split: {{ by: {by}, max_rate: {max}Mbit }}\n");
        }
    };
    for (t, tenant) in tenants.iter().enumerate() {
        yaml += &format!("  - name: t{t}\n    weight: {}\n", tenant.weight);
        if let Some(min) = tenant.min_rate_mbit {
            yaml += &format!("    min_rate: {min}Mbit\n");
        }
        if let Some(max) = tenant.max_rate_mbit {
            yaml += &format!("    max_rate: {max}Mbit\n");
        }
        if let Some(kib) = tenant.buffer_kib {
            yaml += &format!("    buffer: {kib}KiB\n");
        }
        if tenant.apps.is_empty() && tenant.catch_all.is_none() {
            continue;
        }
        yaml += "    apps:\n";
        for (a, &spec) in tenant.apps.iter().enumerate() {
            app(&mut yaml, &format!("a{a}"), spec);
            yaml += &format!("        match: {{ ports: [{}] }}\n", 5001 + a);
        }
        if let Some(spec) = tenant.catch_all {
            app(&mut yaml, "rest", spec);
        }
    }
    parse_policy(&yaml, "generated.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

/// (time step ns, app, length, flow, core, dequeues after it).
type Op = (u64, usize, u32, u32, u16, u8);

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        (
            0u64..20_000,
            any::<usize>(),
            64u32..20_000,
            0u32..8,
            0u16..8,
            0u8..3,
        ),
        1..300,
    )
}

/// What an enforcer did with the sequence, in order.
#[derive(Clone, Debug, PartialEq)]
enum Event {
    Refused {
        handle: u64,
        reason: Refusal,
    },
    Frame {
        now_ns: u64,
        handle: u64,
        bytes: u32,
        last: bool,
    },
}

/// Small bounds, so that queue limits and buffer caps refuse packets too.
fn capacity(name: &str) -> Capacity {
    let limits = HostLimits {
        queue_packets: 16,
        class_packets: 16,
    };
    Capacity {
        classes: 256,
        packets: 512,
        ..Capacity::for_host(name, limits)
    }
}

/// Packets of the sequence still held, and the bytes of each already sent.
struct Held {
    packets: Vec<Option<(Packet, u32)>>,
    count: usize,
}

impl Held {
    fn frame(&mut self, frame: &sched::Frame) -> Result<(), TestCaseError> {
        let handle = frame.packet.handle as usize;
        let entry = self.packets.get_mut(handle).and_then(Option::as_mut);
        let Some((packet, sent)) = entry else {
            return Err(TestCaseError::fail(format!(
                "frame of packet {handle}, not held"
            )));
        };
        let packet = *packet;
        prop_assert_eq!(
            frame.packet,
            packet,
            "the descriptor comes back as it went in"
        );
        *sent += frame.bytes;
        if frame.last {
            prop_assert_eq!(*sent, packet.len_bytes, "packet {} sent whole", handle);
            self.packets[handle] = None;
            self.count -= 1;
        } else {
            prop_assert!(
                *sent < packet.len_bytes,
                "packet {} sent past its length",
                handle
            );
        }
        Ok(())
    }
}

fn dequeue(
    enforcer: &mut dyn Enforcer,
    now_ns: u64,
    held: &mut Held,
    events: &mut Vec<Event>,
) -> Result<bool, TestCaseError> {
    let Some(frame) = enforcer.dequeue(now_ns) else {
        return Ok(false);
    };
    held.frame(&frame)?;
    events.push(Event::Frame {
        now_ns,
        handle: frame.packet.handle,
        bytes: frame.bytes,
        last: frame.last,
    });
    Ok(true)
}

/// Offers `ops` to `enforcer`, then drains it, asking again when it says; checks
/// conservation throughout and returns what it did.
fn drive(
    policy: &Policy,
    enforcer: &mut dyn Enforcer,
    ops: &[Op],
) -> Result<Vec<Event>, TestCaseError> {
    let tenants = policy.tenants.len();
    let mut offered = vec![(0u64, 0u64, 0u64, 0u64); tenants];
    let mut held = Held {
        packets: vec![None; ops.len()],
        count: 0,
    };
    let mut events = Vec::new();
    let mut now = 0u64;
    for (handle, &(step, app, len_bytes, flow, core, dequeues)) in ops.iter().enumerate() {
        now += step;
        let app = AppId((app % policy.apps.len()) as u32);
        let packet = Packet {
            len_bytes,
            tenant: policy.app(app).tenant,
            app,
            flow,
            destination: flow,
            core,
            arrival_ns: now,
            handle: handle as u64,
        };
        let counts = &mut offered[packet.tenant.index()];
        match enforcer.enqueue(now, packet) {
            Ok(()) => {
                counts.0 += 1;
                counts.1 += u64::from(len_bytes);
                held.packets[handle] = Some((packet, 0));
                held.count += 1;
            }
            Err((returned, reason)) => {
                prop_assert_eq!(
                    returned,
                    packet,
                    "a refused packet comes back as it went in"
                );
                counts.2 += 1;
                counts.3 += u64::from(len_bytes);
                events.push(Event::Refused {
                    handle: handle as u64,
                    reason,
                });
            }
        }
        for _ in 0..dequeues {
            dequeue(enforcer, now, &mut held, &mut events)?;
        }
        prop_assert_eq!(enforcer.backlog_packets(), held.count);
    }
    let mut asks = 0;
    while held.count > 0 {
        if !dequeue(enforcer, now, &mut held, &mut events)? {
            let at = enforcer.next_ready_ns(now);
            prop_assert!(
                at.is_some(),
                "{} packets held, nothing to wait for",
                held.count
            );
            now = at.unwrap().max(now + 1);
        }
        prop_assert_eq!(enforcer.backlog_packets(), held.count);
        asks += 1;
        prop_assert!(asks < 1_000_000, "does not drain");
    }
    prop_assert_eq!(enforcer.dequeue(now), None);
    prop_assert_eq!(enforcer.next_ready_ns(now), None);
    let counters = enforcer.counters();
    prop_assert_eq!(counters.len(), tenants);
    for (t, (c, &(admitted, admitted_bytes, refused, refused_bytes))) in
        counters.iter().zip(&offered).enumerate()
    {
        prop_assert_eq!(
            (
                c.admitted_packets,
                c.admitted_bytes,
                c.refused_packets,
                c.refused_bytes
            ),
            (admitted, admitted_bytes, refused, refused_bytes),
            "tenant {}",
            t
        );
    }
    Ok(events)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_registered_enforcer_conserves_packets_and_repeats_itself(
        policy in policy_strategy(),
        ops in ops(),
    ) {
        for info in sched::registry::built() {
            let build = || sched::build_with(info.name, &policy, capacity(info.name));
            let mut first = build().map_err(|e| TestCaseError::fail(format!("{}: {e}", info.name)))?;
            let events = drive(&policy, first.as_mut(), &ops)
                .map_err(|e| TestCaseError::fail(format!("{}: {e}", info.name)))?;
            let mut second = build().unwrap();
            let again = drive(&policy, second.as_mut(), &ops).unwrap();
            prop_assert_eq!(events, again, "{} runs the same sequence twice the same", info.name);
            prop_assert_eq!(first.classes(), second.classes(), "{}", info.name);
            prop_assert_eq!(first.classes().is_some(), info.has_classes(), "{}", info.name);
        }
    }
}

#[test]
fn names_are_unique_and_build_and_check_find_every_row() {
    let policy = parse_policy("link: { rate: 1Gbit }\ntenants:\n  - name: a\n", "p.yaml").unwrap();
    for (i, info) in sched::ENFORCERS.iter().enumerate() {
        assert!(
            sched::ENFORCERS[..i].iter().all(|e| e.name != info.name),
            "{} listed twice",
            info.name
        );
        let expected = match info.runs {
            Runs::Nic(driver) => Some(sched::multiqueue::approximation(&policy, driver)),
            Runs::Engine(software) => Some((software.approximation)(&policy)),
            Runs::Kernel => None,
        };
        match expected {
            Some(approximation) => {
                assert!(sched::build(info.name, &policy).is_ok(), "{}", info.name);
                assert_eq!(
                    sched::approximation(info.name, &policy),
                    Ok(approximation),
                    "{}",
                    info.name
                );
            }
            None => {
                let refused = sched::build(info.name, &policy).err().unwrap();
                assert_eq!(refused, sched::BuildError::InKernel(info.name.into()));
                assert!(
                    refused.to_string().contains("runs only in the lab"),
                    "{refused}"
                );
            }
        }
    }
    let unknown = sched::build("cbq", &policy).err().unwrap();
    let known: Vec<&str> = sched::registry::built().map(|e| e.name).collect();
    let known = known.join(", ");
    assert_eq!(
        unknown.to_string(),
        format!("unknown enforcer `cbq` (known: {known})")
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `check`'s "worst-case tenant share error with every tenant backlogged" is a
    /// sentence the claims oracle (crates/sim/tests/claims.rs) holds only through
    /// a bound: every row that prints one states a bound on tenants' mean error
    /// with every tenant backlogged, at least as wide.
    #[test]
    fn every_stated_share_error_is_a_bound_the_oracle_holds(policy in policy_strategy()) {
        for info in sched::registry::built() {
            let Ok(said) = sched::approximation(info.name, &policy) else {
                continue;
            };
            let Some(error) = said.share_error_max else {
                continue;
            };
            let bounds = sched::bounds(info.name, &policy).unwrap();
            let held = bounds
                .iter()
                .any(|b| b.holds_share_error() && b.max >= error);
            prop_assert!(held, "{} states {:.2}% but bounds {:?}", info.name, error * 100.0, bounds);
        }
    }
}
