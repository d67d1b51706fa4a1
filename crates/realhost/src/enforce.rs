//! `nicsched enforce`: nicsched's engine in a device's egress path. A BPF program at
//! DEV's egress ([`crate::bpf::Redirect`], a tcx link the process owns) takes every
//! frame a tenant's `match.src` holds to a tap the process owns
//! ([`datapath::sys::tap`]); the engine reads the tap, schedules with an enforcer of
//! the registry that runs in the engine, and sends on DEV paced at the link rate,
//! past DEV's qdisc and its egress hook (`PACKET_QDISC_BYPASS`), so nothing is
//! taken twice. The link and the tap die with the process, however it ends: DEV
//! is then as it was, its traffic unshaped (fail-open).
//!
//! While it runs, [`Enforcing::sample`] gives per tenant and interval what left on
//! DEV against the ideal for the demand that reached the engine; [`Enforcing::stop`]
//! detaches, stops the engine and checks its counts ([`Summary`]).

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Instant;

use datapath::classify::Classifier;
use datapath::engine::{Engine, EngineConfig, EngineStats, HostBuffer, LAB_HOST_LIMITS, Published};
use datapath::sys::tap::Tap;
use policy::Policy;
use serde::Serialize;

use crate::Error;
use crate::bpf::Redirect;

/// Where a running `enforce` holds its device: one process per device.
const LOCK_DIR: &str = "/run/nicsched";
const ETHERNET_HEADER_BYTES: u64 = 14;

/// A tenant without `match.src` (its index, and why it is refused): the redirect
/// could not tell its frames from the host's own.
pub fn unmatched(policy: &Policy) -> Result<(), (usize, String)> {
    match policy.tenants.iter().position(|t| t.match_src.is_none()) {
        None => Ok(()),
        Some(index) => Err((
            index,
            format!(
                "tenant `{0}` has no `match.src`, so nicsched's BPF program cannot tell its frames from the host's own and would shape nothing of it (hint: add `match: {{ src: CIDR }}` to tenant {0}, the addresses its traffic leaves from)",
                policy.tenants[index].name
            ),
        )),
    }
}

/// The enforcers `enforce` runs: those of the registry that run in the engine.
pub fn engine_enforcers() -> impl Iterator<Item = &'static str> {
    sched::ENFORCERS
        .iter()
        .filter(|e| matches!(e.runs, sched::registry::Runs::Engine(_)))
        .map(|e| e.name)
}

fn refuse_enforcer(name: &str) -> Result<(), Error> {
    let runs = sched::registry::find(name).map(|e| e.runs);
    let why = match runs {
        Some(sched::registry::Runs::Engine(_)) => return Ok(()),
        Some(sched::registry::Runs::Nic(_)) => format!(
            "`{name}` is a queue selection in front of the multiqueue NIC model, which a real device's own queues replace"
        ),
        Some(sched::registry::Runs::Kernel) => format!(
            "`{name}` is the kernel's HTB, not nicsched's engine (hint: `nicsched apply --mechanism htb`)"
        ),
        None => format!("no enforcer `{name}`"),
    };
    Err(Error::Input(format!(
        "-e {name}: {why}; `enforce` runs the enforcers of nicsched's engine: {}",
        engine_enforcers().collect::<Vec<_>>().join(", ")
    )))
}

/// DEV's rate as the kernel reports it (`/sys/class/net/DEV/speed`, Mbit/s);
/// `None` where the driver does not know it.
fn device_rate_bps(dev: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{dev}/speed")).ok()?;
    let mbit: i64 = text.trim().parse().ok()?;
    (mbit > 0).then(|| mbit as u64 * 1_000_000)
}

fn device_number(dev: &str, what: &str) -> Result<u64, Error> {
    let path = format!("/sys/class/net/{dev}/{what}");
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| Error::Failed(format!("{dev}: cannot read {path}: the device is gone")))
}

/// DEV's transmit counters, as its driver counts them.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct DeviceCounts {
    pub tx_bytes: u64,
    pub tx_packets: u64,
}

impl DeviceCounts {
    fn read(dev: &str) -> Result<DeviceCounts, Error> {
        Ok(DeviceCounts {
            tx_bytes: device_number(dev, "statistics/tx_bytes")?,
            tx_packets: device_number(dev, "statistics/tx_packets")?,
        })
    }

    fn since(self, start: DeviceCounts) -> DeviceCounts {
        DeviceCounts {
            tx_bytes: self.tx_bytes.saturating_sub(start.tx_bytes),
            tx_packets: self.tx_packets.saturating_sub(start.tx_packets),
        }
    }
}

/// The lock of DEV, held while `enforce` runs on it: the kernel lets several tcx
/// links attach, so a second `enforce` would redirect the same frames twice.
fn lock(dev: &str) -> Result<(File, PathBuf), Error> {
    let path = PathBuf::from(LOCK_DIR).join(format!("{dev}.enforce"));
    std::fs::create_dir_all(LOCK_DIR)
        .map_err(|e| Error::Failed(format!("cannot create {LOCK_DIR}: {e}")))?;
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::Failed(format!("cannot open {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok((file, path)),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Input(format!(
            "--dev {dev}: another `nicsched enforce` runs on it (it holds {}); stop it first",
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::Failed(format!(
            "cannot lock {}: {e}",
            path.display()
        ))),
    }
}

/// What `enforce` is asked to do.
pub struct Request<'a> {
    pub policy: &'a Policy,
    pub dev: &'a str,
    pub enforcer: &'a str,
    /// `--link-rate`; `None`: DEV's speed.
    pub link_rate_bps: Option<u64>,
}

/// Counts published by the engine, as of one reading.
#[derive(Clone)]
struct Reading {
    at: Instant,
    tenant_sent_bytes: Vec<u64>,
    tenant_drops: Vec<u64>,
    app_offered_bytes: Vec<u64>,
    app_refused_bytes: Vec<u64>,
}

impl Reading {
    fn of(published: &Published) -> Reading {
        let load =
            |counts: &[AtomicU64]| counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        Reading {
            at: Instant::now(),
            tenant_sent_bytes: load(&published.tenant_sent_bytes),
            tenant_drops: load(&published.tenant_drops),
            app_offered_bytes: load(&published.app_offered_bytes),
            app_refused_bytes: load(&published.app_refused_bytes),
        }
    }
}

/// One tenant over one interval.
#[derive(Clone, Debug, Serialize)]
pub struct TenantInterval {
    pub name: String,
    /// L3 bytes of its frames that left on DEV, per second.
    pub throughput_bps: f64,
    /// Its ideal for the demands that reached the engine.
    pub ideal_bps: f64,
    /// Whether the engine refused some of its frames: it asked for more than it got.
    pub backlogged: bool,
    /// Its frames dropped in the interval.
    pub drops: u64,
}

/// One interval.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Seconds since the redirect was attached, at the end of the interval.
    pub time_s: f64,
    pub tenants: Vec<TenantInterval>,
}

/// One tenant over the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct TenantTotals {
    pub name: String,
    /// L3 bytes of its frames that reached the engine, and where they went:
    /// handed to the link, refused, still held when it stopped.
    pub offered_bytes: u64,
    pub sent_bytes: u64,
    pub refused_bytes: u64,
    pub held_bytes: u64,
    /// L3 bytes of its frames that left whole on DEV.
    pub dev_bytes: u64,
    pub drops: u64,
}

/// What `enforce` did, with its self-checks: summary.json.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub dev: String,
    pub enforcer: String,
    pub link_rate_bps: u64,
    pub duration_s: f64,
    pub tenants: Vec<TenantTotals>,
    /// Frames on the tap from no tenant's address (none arrive: the redirect takes
    /// only tenants' frames).
    pub unclassified_frames: u64,
    /// Frames the tap dropped before the engine read them: it fell behind.
    pub tap_dropped_frames: u64,
    /// What the engine sent on DEV, as Ethernet frames, against DEV's own counters
    /// over the run (which count the host's other traffic too).
    pub engine_tx_bytes: u64,
    pub engine_tx_frames: u64,
    pub device: DeviceCounts,
    pub checks: Vec<report::Check>,
    pub ok: bool,
}

/// `enforce` running on a device.
pub struct Enforcing {
    policy: Policy,
    dev: String,
    enforcer: String,
    link_rate_bps: u64,
    tap: String,
    redirect: Option<Redirect>,
    engine: Option<JoinHandle<std::io::Result<EngineStats>>>,
    stop: Arc<AtomicBool>,
    published: Arc<Published>,
    device_at_start: DeviceCounts,
    last: Reading,
    started: Instant,
    /// Held until the process ends: the lock of the device.
    _lock: File,
}

/// Starts enforcing `request`: the engine first, then the redirect to it. Bad
/// input (an enforcer the engine does not run, a device that does not exist or
/// that another `enforce` holds, no link rate) is [`Error::Input`].
pub fn start(request: &Request<'_>) -> Result<Enforcing, Error> {
    let Request {
        policy,
        dev,
        enforcer,
        link_rate_bps,
    } = *request;
    refuse_enforcer(enforcer)?;
    unmatched(policy).map_err(|(_, why)| Error::Input(why))?;
    let dev_index = datapath::sys::packet::ifindex(dev).map_err(|_| {
        Error::Input(format!(
            "--dev {dev}: no such device in this network namespace (hint: `ip link` lists them)"
        ))
    })?;
    let device_rate = device_rate_bps(dev);
    let link_rate_bps = match (link_rate_bps, device_rate) {
        (Some(asked), Some(speed)) if asked > speed => {
            return Err(Error::Input(format!(
                "--link-rate {}: above {dev}'s speed of {}; frames would wait in its queues unscheduled",
                policy::format_rate(asked as f64),
                policy::format_rate(speed as f64)
            )));
        }
        (Some(rate), _) | (None, Some(rate)) => rate,
        (None, None) => {
            return Err(Error::Input(format!(
                "--dev {dev}: its driver reports no speed (/sys/class/net/{dev}/speed), so the link rate is unknown (hint: give --link-rate, the rate the device sends at)"
            )));
        }
    };
    if link_rate_bps != policy.link.rate_bps {
        // Not refused: a rate below the policy's is how an operator tries a
        // policy on a slower device. But the figures compare against the policy.
        tracing::warn!(
            "the engine paces at {}, the policy's link.rate is {}: the enforcer and each line's ideal are built for the policy's rate (hint: write link.rate as the rate DEV sends at, or give that as --link-rate)",
            policy::format_rate(link_rate_bps as f64),
            policy::format_rate(policy.link.rate_bps as f64)
        );
    }
    let (lock, _) = lock(dev)?;
    let tap_name = format!("nse{dev_index}");
    let tap = Tap::create(&tap_name, dev).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) | Some(libc::EEXIST) => Error::Input(format!(
            "--dev {dev}: its tap {tap_name} exists already: another `nicsched enforce` runs on it"
        )),
        _ => Error::Failed(format!(
            "cannot create the tap {tap_name}: {e} (tun needs /dev/net/tun and CAP_NET_ADMIN)"
        )),
    })?;
    let tap_index = tap.index();
    let buffer = HostBuffer::new(enforcer, policy, LAB_HOST_LIMITS)
        .map_err(|e| Error::Input(format!("-e {enforcer}: {e}")))?;
    // Built here to refuse what it cannot build, and again in the engine's
    // thread, which an enforcer never leaves.
    sched::build_with(enforcer, policy, buffer.capacity)
        .map_err(|e| Error::Input(format!("-e {enforcer}: {e}")))?;
    let config = EngineConfig {
        ports: Vec::new(),
        tenant_macs: Vec::new(),
        uplink: dev.to_string(),
        link_rate_bps: Some(link_rate_bps),
        buffer,
        transmit_threads: 0,
        cores: None,
    };
    let published = Arc::new(Published::new(policy));
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready) = mpsc::channel();
    let (engine_stop, engine_published) = (stop.clone(), published.clone());
    let (engine_policy, name) = (policy.clone(), enforcer.to_string());
    let engine = std::thread::Builder::new()
        .name("nicsched-engine".into())
        .spawn(move || {
            // Before the tenants' senders for a core, as lab-bench runs its engine.
            if let Err(e) = datapath::sys::set_realtime() {
                tracing::warn!("the engine runs at normal priority: {e}");
            }
            let built = sched::build_with(&name, &engine_policy, config.buffer.capacity)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let classifier = Classifier::by_match_src(&engine_policy);
            Engine::new(config, classifier, &engine_policy, built)?
                .publishing(engine_published)
                .on_egress(tap)
                .run(&engine_stop, move || {
                    let _ = ready_tx.send(());
                })
        })
        .map_err(|e| Error::Failed(format!("cannot start the engine's thread: {e}")))?;
    let mut enforcing = Enforcing {
        policy: policy.clone(),
        dev: dev.to_string(),
        enforcer: enforcer.to_string(),
        link_rate_bps,
        tap: tap_name,
        redirect: None,
        engine: Some(engine),
        stop,
        last: Reading::of(&published),
        published,
        device_at_start: DeviceCounts::default(),
        started: Instant::now(),
        _lock: lock,
    };
    if ready.recv().is_err() {
        // The engine ended before it was ready: its error says why.
        return Err(enforcing.engine_ended());
    }
    enforcing.device_at_start = DeviceCounts::read(dev)?;
    let redirect = Redirect::attach(policy, dev_index, tap_index).map_err(|e| {
        Error::Input(format!(
            "--dev {dev}: the redirect cannot attach there: {e}"
        ))
    })?;
    enforcing.redirect = Some(redirect);
    enforcing.started = Instant::now();
    enforcing.last = Reading::of(&enforcing.published);
    tracing::info!(
        dev,
        enforcer,
        tap = enforcing.tap.as_str(),
        link_rate = policy::format_rate(link_rate_bps as f64).as_str(),
        "attached: {dev}'s tenant frames go through the engine"
    );
    Ok(enforcing)
}

impl Enforcing {
    pub fn link_rate_bps(&self) -> u64 {
        self.link_rate_bps
    }

    pub fn tap(&self) -> &str {
        &self.tap
    }

    /// The engine's thread ended on its own: why, as an error.
    fn engine_ended(&mut self) -> Error {
        self.redirect = None;
        let why = match self.engine.take().map(JoinHandle::join) {
            Some(Ok(Err(e)))
                if e.raw_os_error() == Some(libc::ENXIO)
                    || e.raw_os_error() == Some(libc::ENODEV) =>
            {
                format!("{} is gone", self.dev)
            }
            Some(Ok(Err(e))) => e.to_string(),
            Some(Ok(Ok(_))) => "it stopped".to_string(),
            Some(Err(_)) => "it panicked".to_string(),
            None => "it was stopped".to_string(),
        };
        tracing::error!(dev = self.dev.as_str(), "detached: the engine ended: {why}");
        Error::Failed(format!(
            "{}: the engine ended ({why}); the redirect is detached and the device's traffic flows unshaped",
            self.dev
        ))
    }

    /// The interval since the last sample (or the attach): per tenant, what left on
    /// DEV against the ideal for what reached the engine. An error when the engine
    /// ended (DEV deleted, say): the redirect is detached then.
    pub fn sample(&mut self) -> Result<Sample, Error> {
        if self.engine.as_ref().is_none_or(JoinHandle::is_finished) {
            return Err(self.engine_ended());
        }
        let now = Reading::of(&self.published);
        let seconds = now.at.duration_since(self.last.at).as_secs_f64().max(1e-9);
        let delta = |now: &[u64], last: &[u64], k: usize| now[k].saturating_sub(last[k]);
        let demands: Vec<Vec<f64>> = (0..self.policy.apps.len())
            .map(|a| {
                let offered = delta(&now.app_offered_bytes, &self.last.app_offered_bytes, a);
                let refused = delta(&now.app_refused_bytes, &self.last.app_refused_bytes, a);
                match (refused > 0, offered > 0) {
                    (true, _) => vec![f64::INFINITY],
                    (false, true) => vec![offered as f64 * 8.0 / seconds],
                    (false, false) => Vec::new(),
                }
            })
            .collect();
        let ideal = policy::ideal_allocation(&self.policy, &demands);
        let tenants = self
            .policy
            .tenants
            .iter()
            .enumerate()
            .map(|(t, tenant)| TenantInterval {
                name: tenant.name.clone(),
                throughput_bps: delta(&now.tenant_sent_bytes, &self.last.tenant_sent_bytes, t)
                    as f64
                    * 8.0
                    / seconds,
                ideal_bps: ideal.tenant_bps[t],
                backlogged: tenant
                    .apps
                    .iter()
                    .any(|a| demands[a.index()].first() == Some(&f64::INFINITY)),
                drops: delta(&now.tenant_drops, &self.last.tenant_drops, t),
            })
            .collect();
        self.last = now;
        Ok(Sample {
            time_s: self.last.at.duration_since(self.started).as_secs_f64(),
            tenants,
        })
    }

    /// Detaches the redirect (the host's traffic flows unshaped from here), stops
    /// the engine and checks its counts.
    pub fn stop(mut self, why: &str) -> Result<Summary, Error> {
        self.redirect = None;
        tracing::info!(
            dev = self.dev.as_str(),
            "detached ({why}): {}'s traffic flows unshaped",
            self.dev
        );
        // Read before the engine stops: the tap goes with it.
        let tap_dropped_frames = device_number(&self.tap, "statistics/tx_dropped").unwrap_or(0);
        self.stop.store(true, Ordering::Relaxed);
        let stats = match self.engine.take().map(JoinHandle::join) {
            Some(Ok(Ok(stats))) => stats,
            _ => return Err(self.engine_ended()),
        };
        let device = DeviceCounts::read(&self.dev)?.since(self.device_at_start);
        Ok(self.summary(stats, device, tap_dropped_frames))
    }

    fn summary(
        &self,
        stats: EngineStats,
        device: DeviceCounts,
        tap_dropped_frames: u64,
    ) -> Summary {
        let names: Vec<String> = self.policy.tenants.iter().map(|t| t.name.clone()).collect();
        let conservation = report::conservation(&names, &stats.ledgers);
        let engine_tx_frames = stats.tx_frames;
        let engine_tx_bytes =
            stats.uplink_bytes.iter().sum::<u64>() + ETHERNET_HEADER_BYTES * engine_tx_frames;
        // DEV counts the host's own traffic beside the engine's, and a NIC that
        // segments counts each segment's headers: it may count more, never less.
        let against_device = report::Check::new(
            "device-counters",
            engine_tx_bytes <= device.tx_bytes && engine_tx_frames <= device.tx_packets,
            format!(
                "the engine sent {engine_tx_bytes} B in {engine_tx_frames} frames on {}; the device counted {} B in {} frames ({} B beside the engine's)",
                self.dev,
                device.tx_bytes,
                device.tx_packets,
                device.tx_bytes as i128 - engine_tx_bytes as i128
            ),
        );
        let checks = vec![conservation, against_device];
        Summary {
            dev: self.dev.clone(),
            enforcer: self.enforcer.clone(),
            link_rate_bps: self.link_rate_bps,
            duration_s: self.started.elapsed().as_secs_f64(),
            tenants: names
                .into_iter()
                .enumerate()
                .map(|(t, name)| TenantTotals {
                    name,
                    offered_bytes: stats.ledgers[t].offered_bytes,
                    sent_bytes: stats.ledgers[t].sent_bytes,
                    refused_bytes: stats.ledgers[t].refused_bytes,
                    held_bytes: stats.ledgers[t].held_bytes,
                    dev_bytes: stats.uplink_bytes[t],
                    drops: stats.refused[t] + stats.buffer_drops[t],
                })
                .collect(),
            unclassified_frames: self.published.unclassified.load(Ordering::Relaxed),
            tap_dropped_frames,
            engine_tx_bytes,
            engine_tx_frames,
            device,
            ok: checks.iter().all(|c| c.ok),
            checks,
        }
    }
}

impl Drop for Enforcing {
    /// However `enforce` ends, the redirect goes before the engine: frames never
    /// wait for an engine that no longer reads them.
    fn drop(&mut self) {
        self.redirect = None;
        self.stop.store(true, Ordering::Relaxed);
        if let Some(engine) = self.engine.take() {
            let _ = engine.join();
        }
    }
}
