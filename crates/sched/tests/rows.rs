//! What each registry row says beyond its builder: where it runs, what its hosts
//! feed back, how it runs on several threads, and where it is a default.

use policy::pcc::Feedback;
use policy::{AnyScenario, parse_any_scenario, parse_policy};
use sched::registry::{self, Runs, Threads, World};
use std::path::Path;

const ONE_HOST: &str = "policy:
  link: { rate: 1Gbit }
  tenants: [{ name: a }]
duration: 1s
traffic: [{ tenant: a, kind: bulk }]
";

const HOSTS: &str = "duration: 1s
hosts:
  - { name: h1, policy: { link: { rate: 1Gbit }, tenants: [{ name: a }] } }
  - { name: h2, policy: { link: { rate: 1Gbit }, tenants: [{ name: b }] } }
traffic: [{ tenant: a, to: b, kind: bulk }]
";

fn parsed(text: &str) -> AnyScenario {
    parse_any_scenario(text, "s.yaml", Path::new("."), &registry::names()).unwrap()
}

/// The parser sits below `sched` and cannot read the registry: a scenario that
/// names no enforcer names none, and the run layer asks the registry
/// (crates/run/src/enforcers.rs, whose tests hold what it chooses).
#[test]
fn a_scenario_naming_no_enforcer_leaves_the_choice_to_the_registry() {
    let AnyScenario::OneHost(one) = parsed(ONE_HOST) else {
        panic!("one host")
    };
    assert!(one.enforcers.is_empty(), "{:?}", one.enforcers);
    let AnyScenario::Hosts(hosts) = parsed(HOSTS) else {
        panic!("across hosts")
    };
    assert!(hosts.enforcers.is_empty(), "{:?}", hosts.enforcers);
}

#[test]
fn every_world_has_a_default_and_the_simulators_worlds_can_build_theirs() {
    for world in [World::OneHost, World::Hosts, World::LabBench] {
        assert!(!registry::defaults(world).is_empty(), "{world:?}");
    }
    for world in [World::OneHost, World::Hosts] {
        for name in registry::defaults(world) {
            assert!(
                registry::find(name).unwrap().is_built(),
                "{world:?}: {name}"
            );
        }
    }
}

#[test]
fn only_the_engines_rows_feed_back_across_hosts() {
    for info in sched::ENFORCERS {
        if info.feedback != Feedback::None {
            assert!(matches!(info.runs, Runs::Engine(_)), "{}", info.name);
        }
        assert_eq!(
            registry::feedback(info.name),
            info.feedback,
            "{}",
            info.name
        );
    }
    assert_eq!(registry::feedback("nosuch"), Feedback::None);
    let kinds: Vec<Feedback> = sched::ENFORCERS.iter().map(|e| e.feedback).collect();
    for feedback in [
        Feedback::PicNic,
        Feedback::WorkConserving,
        Feedback::BandwidthOnly,
    ] {
        assert_eq!(
            kinds.iter().filter(|&&k| k == feedback).count(),
            1,
            "one row runs {feedback:?}"
        );
    }
}

#[test]
fn where_a_row_runs_says_what_it_has() {
    for info in sched::ENFORCERS {
        match info.runs {
            Runs::Nic(driver) => {
                assert_eq!(info.nic(), Some(driver));
                assert!(matches!(info.threads(), Some(Threads::HandOff)));
                assert!(info.is_built() && !info.has_classes());
            }
            Runs::Engine(software) => {
                assert_eq!(info.nic(), None);
                let per_core = |t: Threads| matches!(t, Threads::PerCore { .. });
                assert_eq!(
                    info.threads().map(per_core),
                    Some(per_core(software.threads))
                );
                assert!(info.is_built() && info.has_classes());
            }
            Runs::Kernel => {
                assert_eq!(info.nic(), None);
                assert!(info.threads().is_none() && info.core_mask().is_none());
                assert!(!info.is_built() && !info.has_classes());
                assert_eq!(info.feedback, Feedback::None, "{}", info.name);
            }
        }
        assert_eq!(
            registry::in_kernel(info.name),
            !info.is_built(),
            "{}",
            info.name
        );
    }
    assert!(
        sched::ENFORCERS
            .iter()
            .any(|e| matches!(e.runs, Runs::Kernel)),
        "the kernel's HTB is a row"
    );
    assert!(!registry::in_kernel("nosuch"));
}

#[test]
fn a_row_run_per_core_shards_its_enforcer_over_the_cores_of_its_mask() {
    let policy = parse_policy(
        "link: { rate: 1Gbit }\nengine: { cores: 4 }\ntenants: [{ name: a, weight: 1 }, { name: b, weight: 3 }]\n",
        "p.yaml",
    )
    .unwrap();
    let mut per_core = 0;
    for info in sched::ENFORCERS {
        let Some(Threads::PerCore { mask, shards }) = info.threads() else {
            continue;
        };
        per_core += 1;
        let masks = mask(&policy);
        assert_eq!(info.core_mask().map(|m| m(&policy)), Some(masks.clone()));
        assert_eq!(masks.len(), policy.tenants.len(), "{}", info.name);
        let shard = shards(&policy).unwrap();
        for core in 0..policy.engine.cores {
            let enforcer = shard(core, sched::Capacity::default());
            assert_eq!(enforcer.backlog_packets(), 0, "{} core {core}", info.name);
        }
    }
    assert!(per_core > 0, "some row runs per core");
}
