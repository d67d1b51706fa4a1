//! `watch` of a tonic apply: per tenant and interval, the bytes its program
//! counted (Ethernet frames as the qdiscs count them), and whether its pool's
//! queues held a backlog at the end of the interval or dropped in it (the
//! `pfifo_fast` under each Tx queue, `tc -s qdisc show`).
//!
//! The program counts tenants, not apps; the ideal is [`policy::ideal_allocation`]
//! with each tenant's demand on its catch-all app: unbounded when it was
//! backlogged, else what it sent.

use std::path::Path;
use std::time::Instant;

use policy::{Policy, TenantId};
use sched::multiqueue::Pool;

use super::{Sample, TenantLine};
use crate::bpf::tonic::{Layout, PinnedCounters, open_counters};
use crate::record::Record;
use crate::{Error, tc};

pub(crate) struct TonicWatch {
    policy: Policy,
    dev: String,
    counters: PinnedCounters,
    pools: Vec<Pool>,
    last: Reading,
    last_at: Instant,
    started: Instant,
}

struct Reading {
    tenant_bytes: Vec<u64>,
    queues: Vec<tc::QueueStats>,
}

impl TonicWatch {
    /// Watches `dev`, whose `record` says tonic applied `policy` there.
    pub(crate) fn start(policy: Policy, dev: &str, record: &Record) -> Result<TonicWatch, Error> {
        let (commands, queues, pools) = crate::tonic_commands(&policy, &record.policy, dev)?;
        if commands != record.commands {
            return Err(Error::Input(format!(
                "--dev {dev}: nicsched applied another policy there ({}), or the device's Tx queues changed since (hint: watch with that policy, or apply this one first)",
                record.policy
            )));
        }
        let pins = record.pins.as_deref().unwrap_or_default();
        let layout = Layout {
            tenants: policy.tenants.len() as u32,
            queues: u32::from(queues),
        };
        let counters = open_counters(Path::new(pins), layout).map_err(|e| {
            Error::Failed(format!(
                "{dev}: the tonic program's counters pinned in {pins}: {e} (the program was removed behind nicsched; hint: apply again, or `nicsched apply --remove --dev {dev}`)"
            ))
        })?;
        let mut watch = TonicWatch {
            policy,
            dev: dev.to_string(),
            counters,
            pools,
            last: Reading {
                tenant_bytes: Vec::new(),
                queues: Vec::new(),
            },
            last_at: Instant::now(),
            started: Instant::now(),
        };
        watch.last = watch.read()?;
        watch.last_at = Instant::now();
        watch.started = watch.last_at;
        Ok(watch)
    }

    fn read(&self) -> Result<Reading, Error> {
        let counts = self.counters.read().map_err(|e| {
            Error::Failed(format!("{}: the tonic program's counters: {e}", self.dev))
        })?;
        Ok(Reading {
            tenant_bytes: (0..self.policy.tenants.len())
                .map(|t| counts.tenant(t).bytes)
                .collect(),
            queues: tc::queue_stats(&self.dev)?,
        })
    }

    pub(crate) fn sample(&mut self) -> Result<Sample, Error> {
        let now_reading = self.read()?;
        let now = Instant::now();
        let seconds = now.duration_since(self.last_at).as_secs_f64().max(1e-9);
        let mut bps = Vec::new();
        let mut sent = Vec::new();
        let mut drops = Vec::new();
        let mut backlogged = Vec::new();
        for (t, pool) in self.pools.iter().enumerate() {
            let bytes = now_reading.tenant_bytes[t].saturating_sub(self.last.tenant_bytes[t]);
            bps.push(bytes as f64 * 8.0 / seconds);
            sent.push(bytes);
            // A pool's queues are its tenant's alone, so their drops are its drops.
            drops.push(
                (pool.start..pool.start + pool.len)
                    .map(|q| {
                        let q = usize::from(q);
                        let now = now_reading.queues.iter().find(|s| s.queue == q);
                        let last = self.last.queues.iter().find(|s| s.queue == q);
                        now.map_or(0, |n| n.drops.saturating_sub(last.map_or(0, |l| l.drops)))
                    })
                    .sum::<u64>(),
            );
            let held = |queue: usize| {
                let now = now_reading.queues.iter().find(|s| s.queue == queue);
                let last = self.last.queues.iter().find(|s| s.queue == queue);
                now.is_some_and(|n| n.qlen > 0 || last.is_some_and(|l| n.drops > l.drops))
            };
            backlogged.push((pool.start..pool.start + pool.len).any(|q| held(usize::from(q))));
        }
        let mut demands = vec![Vec::new(); self.policy.apps.len()];
        for t in 0..self.policy.tenants.len() {
            let app = self.policy.catch_all_app(TenantId(t as u16));
            if backlogged[t] {
                demands[app.index()] = vec![f64::INFINITY];
            } else if bps[t] > 0.0 {
                demands[app.index()] = vec![bps[t]];
            }
        }
        let ideal = policy::ideal_allocation(&self.policy, &demands);
        let tenants = self
            .policy
            .tenants
            .iter()
            .enumerate()
            .map(|(t, tenant)| TenantLine {
                name: tenant.name.clone(),
                throughput_bps: bps[t],
                ideal_bps: ideal.tenant_bps[t],
                backlogged: backlogged[t],
                bytes: sent[t],
                drops: drops[t],
            })
            .collect();
        self.last = now_reading;
        self.last_at = now;
        Ok(Sample {
            time_s: now.duration_since(self.started).as_secs_f64(),
            tenants,
        })
    }
}
