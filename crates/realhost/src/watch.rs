//! `nicsched watch`: per tenant and interval, what the kernel's counters say it
//! sent, against the ideal for what the tenants asked.
//!
//! HTB counts each app's leaf class: bytes sent (Ethernet frames, as HTB counts
//! them against its rates), packets queued, dropped, and the times it was over its
//! ceil with packets waiting (`overlimits`). An app whose leaf held a backlog at
//! the end of the interval, or dropped or went over its ceil in it, was held back:
//! it asks for all it can get. Any other app asked for what it sent (a TCP sender
//! at its ceil may keep no backlog at the instant of a reading: the kernel's small
//! queues limit what one socket leaves in the qdisc, so the instant alone misses it). The ideal is
//! [`policy::ideal_allocation`] of those demands, the one `explain` prints.

use std::time::Instant;

use policy::Policy;
use serde::Serialize;

use crate::apply::not_configured;
use crate::{Error, Mechanism, record, tc};

/// A tonic apply's reader: its program's counters and the per-queue qdiscs.
mod tonic;

/// One interval.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Seconds since the watch began, at the end of the interval.
    pub time_s: f64,
    pub tenants: Vec<TenantLine>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TenantLine {
    pub name: String,
    pub throughput_bps: f64,
    pub ideal_bps: f64,
    pub backlogged: bool,
    /// What its apps' classes sent in the interval, in bytes, for counters that
    /// add intervals up exactly (`--metrics-listen`); not in `--json`'s line,
    /// which is the spec's.
    #[serde(skip)]
    pub bytes: u64,
    /// Packets its apps' classes dropped in the interval (`--metrics-listen`).
    #[serde(skip)]
    pub drops: u64,
}

/// Counters of one app's leaf.
#[derive(Clone, Copy, Default)]
struct Leaf {
    sent_bytes: u64,
    dropped: u64,
    overlimits: u64,
    backlog_packets: u64,
}

/// A watch of a device nicsched configured with a policy.
pub struct Watch {
    policy: Policy,
    dev: String,
    mechanism: Mechanism,
    /// Each app's leaf class, by app index.
    leaf_ids: Vec<String>,
    last: Vec<Leaf>,
    last_at: Instant,
    started: Instant,
    /// A tonic apply's reader, in place of the leaves'.
    tonic: Option<tonic::TonicWatch>,
}

impl Watch {
    /// Starts watching `dev`, which must carry what `apply` made of `policy`
    /// (`commands`, the policy's `tc -batch`): a device without a record, or with
    /// another policy's, is bad input.
    pub fn start(policy: Policy, dev: &str, commands: &str) -> Result<Watch, Error> {
        let Some(record) = record::read(dev)? else {
            return Err(not_configured(dev));
        };
        if record.mechanism == crate::Mechanism::Tonic {
            return Ok(Watch {
                dev: dev.to_string(),
                mechanism: record.mechanism,
                leaf_ids: Vec::new(),
                last: Vec::new(),
                last_at: Instant::now(),
                started: Instant::now(),
                tonic: Some(tonic::TonicWatch::start(policy.clone(), dev, &record)?),
                policy,
            });
        }
        if record.commands != commands {
            return Err(Error::Input(format!(
                "--dev {dev}: nicsched applied another policy there ({}) (hint: watch with that policy, or apply this one first)",
                record.policy
            )));
        }
        let leaf_ids = (0..policy.apps.len())
            .map(|a| format!("1:{:x}", lab::htb_app_minor(&policy, a)))
            .collect();
        let mut watch = Watch {
            policy,
            dev: dev.to_string(),
            mechanism: record.mechanism,
            leaf_ids,
            last: Vec::new(),
            last_at: Instant::now(),
            started: Instant::now(),
            tonic: None,
        };
        watch.last = watch.read()?;
        watch.last_at = Instant::now();
        watch.started = watch.last_at;
        Ok(watch)
    }

    /// The mechanism `apply` configured on the device.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Each app's leaf counters now.
    fn read(&self) -> Result<Vec<Leaf>, Error> {
        let classes = tc::classes(&self.dev).map_err(Error::Failed)?;
        self.leaf_ids
            .iter()
            .map(|id| {
                classes
                    .iter()
                    .find(|c| &c.id == id)
                    .map(|c| Leaf {
                        sent_bytes: c.sent_bytes,
                        dropped: c.dropped,
                        overlimits: c.overlimits,
                        backlog_packets: c.backlog_packets,
                    })
                    .ok_or_else(|| {
                        Error::Failed(format!(
                            "{}: class {id} is gone: the device was reconfigured behind nicsched (hint: apply again, or `nicsched apply --remove --dev {}`)",
                            self.dev, self.dev
                        ))
                    })
            })
            .collect()
    }

    /// The interval since the last sample (or the start), read now.
    pub fn sample(&mut self) -> Result<Sample, Error> {
        if let Some(tonic) = &mut self.tonic {
            return tonic.sample();
        }
        let now_counters = self.read()?;
        let now = Instant::now();
        let seconds = now.duration_since(self.last_at).as_secs_f64().max(1e-9);
        let policy = &self.policy;
        let mut app_bytes = Vec::with_capacity(policy.apps.len());
        let mut app_drops = Vec::with_capacity(policy.apps.len());
        let mut app_bps = Vec::with_capacity(policy.apps.len());
        let mut app_backlogged = Vec::with_capacity(policy.apps.len());
        for (now, last) in now_counters.iter().zip(&self.last) {
            // A counter below its last reading was reset (the class made again).
            let bytes = now.sent_bytes.saturating_sub(last.sent_bytes);
            app_bytes.push(bytes);
            app_drops.push(now.dropped.saturating_sub(last.dropped));
            app_bps.push(bytes as f64 * 8.0 / seconds);
            app_backlogged.push(
                now.backlog_packets > 0
                    || now.dropped > last.dropped
                    || now.overlimits > last.overlimits,
            );
        }
        let demands: Vec<Vec<f64>> = app_bps
            .iter()
            .zip(&app_backlogged)
            .map(|(&bps, &backlogged)| match (backlogged, bps > 0.0) {
                (true, _) => vec![f64::INFINITY],
                (false, true) => vec![bps],
                (false, false) => Vec::new(),
            })
            .collect();
        let ideal = policy::ideal_allocation(policy, &demands);
        let tenants = policy
            .tenants
            .iter()
            .enumerate()
            .map(|(t, tenant)| TenantLine {
                name: tenant.name.clone(),
                throughput_bps: tenant.apps.iter().map(|a| app_bps[a.index()]).sum(),
                ideal_bps: ideal.tenant_bps[t],
                backlogged: tenant.apps.iter().any(|a| app_backlogged[a.index()]),
                bytes: tenant.apps.iter().map(|a| app_bytes[a.index()]).sum(),
                drops: tenant.apps.iter().map(|a| app_drops[a.index()]).sum(),
            })
            .collect();
        self.last = now_counters;
        self.last_at = now;
        Ok(Sample {
            time_s: now.duration_since(self.started).as_secs_f64(),
            tenants,
        })
    }
}

impl std::fmt::Display for Sample {
    /// `  2.0s  a 66.1/66.7 Mbit/s*  b 33.0/33.3 Mbit/s*`: per tenant, measured
    /// and ideal, `*` when backlogged.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:6.1}s", self.time_s)?;
        for tenant in &self.tenants {
            write!(
                f,
                "  {} {:.1}/{:.1} Mbit/s{}",
                tenant.name,
                tenant.throughput_bps / 1e6,
                tenant.ideal_bps / 1e6,
                if tenant.backlogged { "*" } else { "" }
            )?;
        }
        Ok(())
    }
}
