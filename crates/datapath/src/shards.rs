//! The engine on several threads, each with its own tenants, as a NIC's receive
//! side scaling spreads queues over cores (`--engine-threads N` under an enforcer
//! that runs per core).
//!
//! An enforcer whose registry row is [`Threads::PerCore`] (`valve`, `fairnic`)
//! has a shard per engine core over state the shards share with atomics, and a
//! core mask that puts each tenant on its cores. Here each core with a tenant is
//! an engine thread ([`crate::engine::Engine::as_shard`]) that owns those tenants'
//! ports, its own slab and classifier, its own shard of the enforcer, and a socket
//! of its own on the uplink; the threads share only the link's clock
//! ([`crate::link`]), the enforcer's shared state and the tenants' published
//! drops (each thread writes its own tenants'). The mask is the registry's for
//! the policy with `engine.cores` set to the thread count, so `nicsched sim` of
//! that policy with `engine: { cores: N }` puts the same tenants on the same
//! cores (`valve`'s same shards; `fairnic`'s whole enforcer, its lanes per core).
//!
//! Every other enforcer ([`Threads::HandOff`]) keeps one scheduling thread,
//! with the other threads sending its frames: `wf2q` orders every tenant's
//! packets by one virtual time, and a tree's sharing across tenants (`htb`'s
//! borrowing, `wheel`'s departure times on one timing wheel) needs one view of
//! all of them.
//!
//! The first thread also reads the uplink and sends what comes back to each
//! tenant's port. The run's counts are the threads' added up: each counts only
//! its tenants' frames, so per-tenant figures, conservation and drops hold as on
//! one thread.

use crate::classify::Classifier;
use crate::engine::{Engine, EngineConfig, EngineStats, ShardPart};
use crate::link::LinkClock;
use policy::{Policy, TenantId};
use sched::registry::{Shards, Threads};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How an enforcer runs on the engine's threads: which thread reads which
/// tenants' ports, and how its shards are built.
#[derive(Clone)]
pub struct ShardPlan {
    /// The policy as the shards see it: `engine.cores` is the thread count.
    policy: Policy,
    /// Per thread, its engine core and the tenants whose ports it reads; cores
    /// the mask gives no tenant have no thread.
    parts: Vec<(u16, Vec<TenantId>)>,
    shards: Shards,
}

impl ShardPlan {
    /// `Ok(None)` when `enforcer` does not run per core, or on one thread: its
    /// engine keeps one scheduling thread. `models_cores`: the run holds frames
    /// on modelled engine cores ([`crate::cores`]), which have threads of their
    /// own. `Err` says what to change.
    pub fn new(
        enforcer: &str,
        policy: &Policy,
        threads: usize,
        models_cores: bool,
    ) -> Result<Option<ShardPlan>, String> {
        let Some(Threads::PerCore { mask, shards }) =
            sched::registry::find(enforcer).and_then(|e| e.threads())
        else {
            return Ok(None);
        };
        if threads <= 1 {
            return Ok(None);
        }
        if models_cores {
            return Err(format!(
                "--engine-threads {threads}: `{enforcer}` would run a shard per engine thread, and the scenario models the engine's cores (`engine.cores`, or a traffic's `cost`), which run on threads of their own; give --engine-threads 1, or leave the cores out of the scenario"
            ));
        }
        let mut policy = policy.clone();
        policy.engine.cores = u16::try_from(threads)
            .map_err(|_| format!("--engine-threads {threads}: at most {} threads", u16::MAX))?;
        let mask = mask(&policy);
        let mut parts: Vec<(u16, Vec<TenantId>)> = Vec::new();
        for (t, cores) in mask.iter().enumerate() {
            let &[core] = cores.as_slice() else {
                return Err(format!(
                    "--engine-threads {threads}: `{enforcer}` puts tenant `{}` on {} engine cores, and an engine thread reads a tenant's port alone; give at most {} threads (one per tenant)",
                    policy.tenants[t].name,
                    cores.len(),
                    policy.tenants.len()
                ));
            };
            match parts.iter_mut().find(|(c, _)| *c == core) {
                Some((_, tenants)) => tenants.push(TenantId(t as u16)),
                None => parts.push((core, vec![TenantId(t as u16)])),
            }
        }
        parts.sort_by_key(|(core, _)| *core);
        Ok(Some(ShardPlan {
            policy,
            parts,
            shards,
        }))
    }

    /// Engine threads that have tenants: the threads the run starts.
    pub fn threads(&self) -> usize {
        self.parts.len()
    }
}

/// Runs the engine on the plan's threads, this one the first, until `stop`;
/// `ready` is called once every thread's sockets are open. Stops them all when
/// one fails. Each thread publishes its tenants' drops in `drops`.
pub fn run(
    plan: &ShardPlan,
    config: EngineConfig,
    classifier: Classifier,
    drops: Option<Arc<[AtomicU64]>>,
    stop: &AtomicBool,
    ready: impl FnOnce(),
) -> std::io::Result<EngineStats> {
    let shard = (plan.shards)(&plan.policy).map_err(std::io::Error::other)?;
    let link = Arc::new(LinkClock::new());
    let config = EngineConfig {
        transmit_threads: 0,
        ..config
    };
    // Built on its own thread: an enforcer stays on the thread that built it.
    let engine = |k: usize| {
        let (core, tenants) = &plan.parts[k];
        let enforcer = shard(*core, config.buffer.capacity);
        let part = ShardPart {
            tenants: tenants.clone(),
            reads_uplink: k == 0,
        };
        let engine = Engine::new(config.clone(), classifier.clone(), &plan.policy, enforcer)?
            .as_shard(part, Arc::clone(&link));
        std::io::Result::Ok(match &drops {
            Some(drops) => engine.publishing_drops(Arc::clone(drops)),
            None => engine,
        })
    };
    let failed = |e: std::io::Error| {
        stop.store(true, Ordering::Relaxed);
        e
    };
    std::thread::scope(|scope| {
        let (opened_tx, opened) = std::sync::mpsc::channel();
        let mut others = Vec::new();
        for k in 1..plan.parts.len() {
            let (opened_tx, engine) = (opened_tx.clone(), &engine);
            let spawned = std::thread::Builder::new()
                .name(format!("nicsched-engine{k}"))
                .spawn_scoped(scope, move || {
                    let cpu_ns = crate::sys::clock::thread_cpu_ns();
                    let stats = engine(k)
                        .and_then(|engine| {
                            engine.run(stop, move || {
                                // The first thread counts the others open; one
                                // that fails drops this unsent, which counts too.
                                let _ = opened_tx.send(());
                            })
                        })
                        .map_err(failed)?;
                    Ok((stats, crate::sys::clock::thread_cpu_ns() - cpu_ns))
                });
            // Threads already started stop with the others.
            others.push(spawned.map_err(failed)?);
        }
        drop(opened_tx);
        let waiting = others.len();
        let first = engine(0)
            .and_then(|engine| {
                engine.run(stop, || {
                    for _ in 0..waiting {
                        if opened.recv().is_err() {
                            break;
                        }
                    }
                    ready();
                })
            })
            .map_err(failed);
        let mut results = Vec::with_capacity(others.len());
        for handle in others {
            results.push(
                handle
                    .join()
                    .map_err(|_| std::io::Error::other("an engine thread panicked"))
                    .and_then(|r| r),
            );
        }
        let mut total = first?;
        for result in results {
            let (stats, cpu_ns) = result?;
            add_thread(&mut total, &stats, cpu_ns);
        }
        Ok(total)
    })
}

/// Adds another thread's counts to the run's: its counts and CPU time; the run
/// lasted as long as its longest thread; the split classes are each on one
/// thread's shard.
fn add_thread(total: &mut EngineStats, thread: &EngineStats, cpu_ns: u64) {
    total.add_counts(thread);
    total.shard_cpu_ns += cpu_ns;
    total.run_ns = total.run_ns.max(thread.run_ns);
    total.split_classes = match (total.split_classes, thread.split_classes) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        policy::parse_policy(
            "link: { rate: 400Mbit }\ntenants: [{ name: a, weight: 3 }, { name: b, weight: 2 }, { name: c, weight: 1 }]\n",
            "p.yaml",
        )
        .unwrap()
    }

    fn sharded() -> Vec<&'static str> {
        sched::registry::ENFORCERS
            .iter()
            .filter(|e| matches!(e.threads(), Some(Threads::PerCore { .. })))
            .map(|e| e.name)
            .collect()
    }

    #[test]
    fn per_core_enforcers_put_every_tenant_on_one_thread_by_the_registrys_mask() {
        let policy = policy();
        let names = sharded();
        assert!(!names.is_empty(), "some enforcer runs per core");
        for name in names {
            let plan = ShardPlan::new(name, &policy, 2, false).unwrap().unwrap();
            let mut seen: Vec<TenantId> = plan.parts.iter().flat_map(|(_, t)| t.clone()).collect();
            seen.sort();
            assert_eq!(seen, [TenantId(0), TenantId(1), TenantId(2)], "{name}");
            assert_eq!(plan.threads(), 2, "{name}: both threads have a tenant");
            // The simulator's shards for engine.cores 2 are the same.
            let Some(Threads::PerCore { mask, .. }) =
                sched::registry::find(name).and_then(|e| e.threads())
            else {
                unreachable!()
            };
            let mut sim = policy.clone();
            sim.engine.cores = 2;
            for (core, tenants) in &plan.parts {
                for t in tenants {
                    assert_eq!(mask(&sim)[t.index()], [*core], "{name}");
                }
            }
        }
    }

    #[test]
    fn one_thread_or_a_hand_off_enforcer_keeps_the_single_scheduling_thread() {
        let policy = policy();
        for name in sharded() {
            assert!(ShardPlan::new(name, &policy, 1, false).unwrap().is_none());
        }
        for e in sched::registry::ENFORCERS {
            if matches!(e.threads(), Some(Threads::HandOff) | None) {
                assert!(
                    ShardPlan::new(e.name, &policy, 4, false).unwrap().is_none(),
                    "{}",
                    e.name
                );
            }
        }
    }

    #[test]
    fn modelled_cores_and_a_tenant_on_several_threads_are_refused_saying_what_to_give() {
        let policy = policy();
        for name in sharded() {
            let why = ShardPlan::new(name, &policy, 2, true).err().unwrap();
            assert!(why.contains("--engine-threads 1"), "{why}");
        }
        // fairnic gives the 3-weight tenant of three two of four cores.
        let why = ShardPlan::new("fairnic", &policy, 4, false).err();
        assert!(why.is_some_and(|w| w.contains("at most 3 threads")));
    }

    #[test]
    fn a_threads_counts_add_to_the_runs() {
        let tenants = 2;
        let one = |bytes: u64| EngineStats {
            frames: vec![report::TenantFrames::default(); tenants],
            buffer_drops: vec![1, 0],
            refused: vec![0, 2],
            ledgers: vec![
                report::TenantLedger {
                    offered_bytes: bytes,
                    sent_bytes: bytes,
                    ..Default::default()
                };
                tenants
            ],
            uplink_bytes: vec![bytes, 0],
            tx_bytes: bytes,
            run_ns: bytes,
            split_classes: Some(1),
            ..EngineStats::default()
        };
        let mut total = one(10);
        add_thread(&mut total, &one(30), 5);
        assert_eq!(total.tx_bytes, 40);
        assert_eq!(total.uplink_bytes, [40, 0]);
        assert_eq!(total.buffer_drops, [2, 0]);
        assert_eq!(total.refused, [0, 4]);
        assert_eq!(total.ledgers[1].offered_bytes, 40);
        assert_eq!(total.shard_cpu_ns, 5);
        assert_eq!(total.run_ns, 30, "the longest thread's");
        assert_eq!(total.split_classes, Some(2));
    }
}
