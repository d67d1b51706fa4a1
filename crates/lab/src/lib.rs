//! # nicsched lab
//!
//! The same scenario as the simulator, on real frames: real programs (iperf3,
//! sockperf, memcached) and the lab's own senders (Poisson datagrams, memcached
//! GETs) in network namespaces, their frames forwarded through nicsched's
//! enforcers at an emulated line rate, measured at the far end of the link; or, for
//! `linux-htb`, through a Linux bridge and the kernel's HTB with the policy compiled
//! to `tc`. Both fill the same [`report::RunRecord`] as the simulator, in the
//! measurement frame of [`report::measure`].
//!
//! From the bottom up:
//! - the [`datapath`] crate: every call into the OS (`sys`), frame classification,
//!   the engine's forwarding loop, its cores and the host side of a frame across
//!   hosts; the lab uses its modules under their own names;
//! - `topology`: one namespace per tenant, a sink and an engine namespace, veths
//!   between them, addresses and neighbours; torn down when dropped;
//! - `meter`: per-class byte counts at the sink, each interval handed to the run's
//!   [`Watch`] once closed, with the engine's drops so far;
//! - `traffic`: the programs of each traffic kind; `generate`: the traffic the lab
//!   sends itself, where no packaged tool does (Poisson gaps, per-request memcached
//!   latency);
//! - `htb`: [`tc_script`], the policy as kernel HTB classes and u32 filters;
//! - `bench`: [`run_bench`], frames per second through the engine (unpaced) under
//!   each enforcer and through the kernel's bridge, with and without HTB;
//! - `hosts`: [`hosts::run`], a scenario across hosts: an engine per host, VMs
//!   behind them, a bridge between, PicNIC's feedback as UDP between the engines;
//! - `checks`: the lab's self-checks, the meter against the programs' counters;
//! - `faults` (feature `faults`, tests only): figures made wrong on purpose.
//!
//! It imports the datapath, `policy`, `sched` and `report`, never the simulator;
//! the datapath imports nothing of it.

mod bench;
mod checks;
mod crafted;
#[cfg(feature = "faults")]
mod faults;
mod generate;
pub mod hosts;
mod htb;
mod meter;
mod topology;
mod traffic;

// The datapath's modules, under the names the lab's own modules use.
use datapath::{classify, cores, engine, host_side, shards, sys};

pub use bench::{
    BENCH_LINK_RATE_BPS, BenchOptions, BenchReport, KERNEL_FORWARDING, PAYLOAD_BYTES_MAX, PathKind,
    PathResult, default_enforcers, default_paths, default_policy, engine_realtime_fits, json_path,
    run_bench,
};
pub use classify::{
    Class, Classifier, Ipv4Header, Ipv6Header, Malformed, ParsedFrame, Prefix, parse,
};
pub use crafted::CraftedFrames;
pub use engine::{CoreStats, EngineStats, LAB_HOST_LIMITS};
pub use htb::{
    TcScriptError, app_minor as htb_app_minor, approximation as htb_approximation,
    bounds as htb_bounds, htb_limits, leaf_quanta, tc_commands, tc_script,
    tenant_minor as htb_tenant_minor,
};
/// Stop signals (INT, TERM, HUP, QUIT) caught for as long as it is held; a command
/// that makes several runs holds one across them all, so that a signal between two
/// runs stops the next ([`interrupted`]).
pub use sys::signal::SignalGuard as StopSignals;
pub use sys::signal::interrupted;
pub use topology::Leftovers;
pub use traffic::Tools;

use policy::Scenario;
use report::measure;
use report::{LatencyRecord, Mode, RunRecord};
use std::net::{Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use sys::process::Process;

/// How long before time zero the programs of traffic starting at zero are launched.
const WARM_UP: Duration = Duration::from_millis(500);

/// Every enforcer the lab runs, and so every name a scenario may list: `sched`'s
/// registry, whose kernel rows (`linux-htb`) the lab runs with `tc` rather than
/// in its engine.
pub fn enforcer_names() -> Vec<&'static str> {
    sched::registry::names()
}

#[derive(Clone, Debug)]
pub struct LabOptions {
    /// Where the programs' logs go (iperf3, sockperf and memcached output, sockperf
    /// full logs).
    /// Default: a temporary folder, removed after a successful run and kept, with
    /// its path in the error, after a failed one.
    pub out: Option<PathBuf>,
    /// Leave the namespaces in place after the run, and print how to delete them.
    pub keep: bool,
    /// Emulated link rate instead of the scenario's (`link.rate`).
    pub link_rate_bps: Option<u64>,
    /// The host's qdisc limits, per Tx queue of the NIC model and per tenant.
    pub qdisc: sched::HostLimits,
    /// Run the meter and the programs whose latency is measured (sockperf,
    /// memcached and its load generator) at SCHED_FIFO, above the tenants' bulk
    /// senders: on a machine with fewer cores than the scenario has busy programs,
    /// latency then follows the enforcer rather than the CPU scheduler. The engine
    /// stays at normal priority: at SCHED_FIFO it took the CPU that iperf3's UDP
    /// senders needed (SENIC's Fig. 4 at 1 Gbit/s: 350 of 420 Mbit/s sent).
    pub realtime: bool,
    pub tools: Tools,
    /// Raw frames sent from tenants' namespaces for the whole run, beside the
    /// scenario's traffic: an adversarial tenant's, to see the engine hold them to
    /// the policy. Refused under `linux-htb`, whose kernel path is not nicsched's.
    pub crafted: Vec<CraftedFrames>,
    /// Threads of the engine. Under an enforcer that runs per core, each
    /// receives, classifies, schedules and sends its tenants' frames
    /// ([`datapath::shards`]); under any other, one receives, schedules and paces,
    /// the rest send ([`engine::EngineConfig::transmit_threads`]).
    pub engine_threads: usize,
}

impl LabOptions {
    /// The options that shape a run's figures, by name, for its provenance.
    pub fn settings(&self, link_rate_bps: u64) -> std::collections::BTreeMap<String, String> {
        [
            ("link_rate_bps", link_rate_bps.to_string()),
            ("queue_packets", self.qdisc.queue_packets.to_string()),
            ("class_packets", self.qdisc.class_packets.to_string()),
            ("realtime", self.realtime.to_string()),
            ("engine_threads", self.engine_threads.to_string()),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect()
    }
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            out: None,
            keep: false,
            link_rate_bps: None,
            qdisc: LAB_HOST_LIMITS,
            realtime: true,
            tools: Tools::default(),
            crafted: Vec::new(),
            engine_threads: 1,
        }
    }
}

#[derive(Debug)]
pub enum LabError {
    NotRoot,
    MissingTool {
        program: String,
    },
    Enforcer(sched::BuildError),
    Unsupported(String),
    /// Building the namespaces failed.
    Setup(String),
    /// The engine or the meter failed.
    Datapath(String),
    /// A traffic program failed.
    Tool {
        label: String,
        message: String,
        log: PathBuf,
    },
    Interrupted,
    Io(String),
}

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabError::NotRoot => write!(
                f,
                "the lab needs root: it creates network namespaces and veths and opens raw sockets; run it with sudo"
            ),
            LabError::MissingTool { program } => write!(
                f,
                "`{program}` is not installed; run scripts/setup-lab.sh (as root) to install the lab's programs"
            ),
            LabError::Enforcer(e) => write!(f, "{e}"),
            LabError::Unsupported(what) => write!(f, "the lab cannot run this scenario: {what}"),
            LabError::Setup(what) => write!(
                f,
                "building the lab's network failed: {what}; check that iproute2 and ethtool are installed (scripts/setup-lab.sh) and that network namespaces are allowed here"
            ),
            LabError::Datapath(what) => write!(f, "the lab's datapath failed: {what}"),
            LabError::Tool {
                label,
                message,
                log,
            } => write!(f, "{label}: {message}; its output is in {}", log.display()),
            LabError::Interrupted => write!(f, "interrupted; the lab's namespaces were removed"),
            LabError::Io(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for LabError {}

impl From<engine::TooLarge> for LabError {
    fn from(e: engine::TooLarge) -> LabError {
        LabError::Unsupported(e.0)
    }
}

/// Refuses, with a message saying so, unless the process runs as root.
pub fn check_root() -> Result<(), LabError> {
    if sys::is_root() {
        Ok(())
    } else {
        Err(LabError::NotRoot)
    }
}

/// Names of the namespaces of every lab run, for checking that none is left behind.
pub fn lab_namespaces() -> Result<Vec<String>, LabError> {
    Ok(sys::netns::list()
        .map_err(|e| LabError::Io(e.to_string()))?
        .into_iter()
        .filter(|n| n.starts_with("nsl") && n.contains('-'))
        .collect())
}

pub(crate) fn program_exists(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Removes what lab runs whose process is gone (killed outright, crashed) left
/// behind: the programs still running in their namespaces, the namespaces with their
/// veths, and their owner records. Runs of live processes are not touched, nor
/// namespaces no run owns ([`Leftovers::unowned`]: kept with `--keep`). `say` hears
/// one line per thing removed, or that could not be. Every run calls this first.
pub fn remove_leftovers(say: &mut dyn FnMut(String)) -> Result<Leftovers, LabError> {
    check_root()?;
    topology::remove_leftovers(say)
}

/// A run id unique among this process's runs and clear of the namespaces and owner
/// records already there.
pub(crate) fn run_id() -> Result<u32, LabError> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let setup = |e: std::io::Error| LabError::Setup(e.to_string());
    let existing = sys::netns::list().map_err(setup)?;
    let recorded = sys::owner::records().map_err(setup)?;
    for _ in 0..10 {
        let id = (sys::pid() % 1000) * 10 + NEXT.fetch_add(1, Ordering::Relaxed) % 10;
        let prefix = format!("nsl{id}");
        if !existing
            .iter()
            .any(|n| n.starts_with(&format!("{prefix}-")))
            && !recorded.iter().any(|(p, _)| *p == prefix)
        {
            return Ok(id);
        }
    }
    Err(LabError::Setup(
        "no free run prefix: namespaces of earlier runs are left (`ip netns list`)".into(),
    ))
}

/// Where a run's programs write their output: `--out`, or the run's own directory
/// under the temporary directory, which goes when the run ends (however it ends)
/// unless its error or a failed check names a file in it. A passing check may name
/// one too ("not compared: iperf3's server wrote no result to FILE", beside a
/// tenant's crafted flood), which is true of the run whether or not the file is
/// kept.
pub(crate) struct RunDir {
    pub(crate) path: PathBuf,
    /// `--out` is always kept.
    keep: bool,
}

impl RunDir {
    pub(crate) fn new(out: Option<&Path>, name: &str) -> RunDir {
        match out {
            Some(dir) => RunDir {
                path: dir.to_path_buf(),
                keep: true,
            },
            None => RunDir {
                path: std::env::temp_dir().join(name),
                keep: false,
            },
        }
    }

    /// Keeps the directory if `said` (an error, a failed check's detail) names a
    /// file in it, so that the file it names is there to read.
    pub(crate) fn keep_if_named(&mut self, said: &str) {
        let mut inside = self.path.to_string_lossy().into_owned();
        inside.push(std::path::MAIN_SEPARATOR);
        self.keep |= said.contains(&inside);
    }

    /// Keeps it if `outcome`'s error or one of its failed checks names a file in it.
    pub(crate) fn keep_if_named_in<T>(
        &mut self,
        outcome: &Result<T, LabError>,
        checks: impl Fn(&T) -> &[report::Check],
    ) {
        match outcome {
            Err(e) => self.keep_if_named(&e.to_string()),
            Ok(run) => checks(run)
                .iter()
                .filter(|c| !c.ok)
                .for_each(|c| self.keep_if_named(&c.detail)),
        }
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Threads in the engine and sink namespaces; stopped and joined when dropped, so
/// no thread holds a namespace alive past the topology.
struct Workers {
    /// Stops the engine; the meter stops after it, so that it counts every frame
    /// the engine sent.
    stop: Arc<AtomicBool>,
    meter_stop: Arc<AtomicBool>,
    engine: Option<JoinHandle<std::io::Result<EngineStats>>>,
    meter: Option<JoinHandle<std::io::Result<meter::Metered>>>,
    /// Senders of crafted frames, in the tenants' namespaces; they stop with the engine.
    crafted: Vec<JoinHandle<std::io::Result<()>>>,
}

impl Workers {
    fn join(&mut self) -> Result<(Option<EngineStats>, meter::Metered), LabError> {
        self.stop.store(true, Ordering::SeqCst);
        let fail = |what: &str, e: String| LabError::Datapath(format!("{what}: {e}"));
        for h in self.crafted.drain(..) {
            h.join()
                .map_err(|_| fail("crafted frames", "panicked".into()))?
                .map_err(|e| fail("crafted frames", e.to_string()))?;
        }
        let engine = match self.engine.take() {
            Some(h) => Some(
                h.join()
                    .map_err(|_| fail("engine", "panicked".into()))?
                    .map_err(|e| fail("engine", e.to_string()))?,
            ),
            None => None,
        };
        self.meter_stop.store(true, Ordering::SeqCst);
        let metered = self
            .meter
            .take()
            .expect("joined once")
            .join()
            .map_err(|_| fail("meter", "panicked".into()))?
            .map_err(|e| fail("meter", e.to_string()))?;
        Ok((engine, metered))
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.meter_stop.store(true, Ordering::SeqCst);
        for h in self.crafted.drain(..) {
            let _ = h.join();
        }
        if let Some(h) = self.engine.take() {
            let _ = h.join();
        }
        if let Some(h) = self.meter.take() {
            let _ = h.join();
        }
    }
}

/// Spawns a thread in namespace `ns` running `work`; waits until it says it is ready.
/// The error says why it never was.
fn spawn_in<T: Send + 'static>(
    name: &str,
    ns: String,
    work: impl FnOnce(Box<dyn FnOnce() + Send>) -> std::io::Result<T> + Send + 'static,
) -> Result<JoinHandle<std::io::Result<T>>, String> {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            sys::netns::enter(&ns)?;
            work(Box::new(move || {
                let _ = tx.send(());
            }))
        })
        .map_err(|e| e.to_string())?;
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(()) => Ok(handle),
        Err(_) => Err(match handle.join() {
            Ok(Err(e)) => e.to_string(),
            Ok(Ok(_)) => "ended before it was ready".into(),
            Err(_) => "panicked".into(),
        }),
    }
}

pub(crate) fn spawn_worker<T: Send + 'static>(
    name: &str,
    ns: String,
    work: impl FnOnce(Box<dyn FnOnce() + Send>) -> std::io::Result<T> + Send + 'static,
) -> Result<JoinHandle<std::io::Result<T>>, LabError> {
    spawn_in(name, ns, work).map_err(|why| LabError::Datapath(format!("{name}: {why}")))
}

/// A socket in the sink on UDP port `port` of every sink address that is never
/// read: datagrams to it are dropped by the sink's kernel once its buffer is full,
/// without the ICMP errors a closed port would send back across the engine.
fn udp_sink(ns: &str, port: u16) -> Result<UdpSocket, LabError> {
    spawn_worker("nicsched-udp-sink", ns.to_string(), move |ready| {
        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port))?;
        ready();
        Ok(socket)
    })?
    .join()
    .map_err(|_| LabError::Datapath("nicsched-udp-sink: panicked".into()))?
    .map_err(|e| LabError::Datapath(format!("UDP sink on port {port}: {e}")))
}

/// A running [`traffic::Generator`]; stopped and joined when dropped, so that no
/// thread outlives the namespace it sends in.
struct RunningGenerator {
    label: String,
    server_log: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<std::io::Result<generate::Tally>>>,
    /// What it counted, once joined.
    tally: generate::Tally,
}

impl RunningGenerator {
    /// `realtime`: a latency-measuring load runs at SCHED_FIFO, as the programs do.
    fn start(
        generator: &traffic::Generator,
        traffic: &str,
        realtime: bool,
    ) -> Result<Self, LabError> {
        let label = format!("{traffic} {}", generator.role());
        let stop = Arc::new(AtomicBool::new(false));
        let mut running = RunningGenerator {
            label,
            server_log: generator.server_log.clone(),
            stop: stop.clone(),
            handle: None,
            tally: generate::Tally::default(),
        };
        let load = generator.load.clone();
        let spawned = spawn_in(
            &running.label,
            generator.ns.clone(),
            move |ready| match &load {
                traffic::Load::Poisson(p) => generate::run_poisson(p, &stop, ready),
                traffic::Load::Memcached(m) => {
                    if realtime {
                        let _ = sys::set_realtime();
                    }
                    generate::run_memcached(m, &stop, ready)
                }
            },
        );
        match spawned {
            Ok(handle) => {
                running.handle = Some(handle);
                Ok(running)
            }
            Err(why) => Err(running.error(why)),
        }
    }

    fn error(&self, why: String) -> LabError {
        match &self.server_log {
            Some(log) => tool_error(&self.label, why, log),
            None => LabError::Datapath(format!("{}: {why}", self.label)),
        }
    }

    /// The error it ended with, if it has ended before being stopped.
    fn failure(&mut self) -> Option<LabError> {
        if self.handle.as_ref().is_some_and(JoinHandle::is_finished) {
            self.join().err()
        } else {
            None
        }
    }

    fn join(&mut self) -> Result<(), LabError> {
        if let Some(handle) = self.handle.take() {
            self.tally = handle
                .join()
                .map_err(|_| self.error("panicked".into()))?
                .map_err(|e| self.error(e.to_string()))?;
        }
        Ok(())
    }

    /// Stops it and hands back what it counted.
    fn finish(&mut self) -> Result<generate::Tally, LabError> {
        self.stop.store(true, Ordering::SeqCst);
        self.join()?;
        Ok(std::mem::take(&mut self.tally))
    }
}

impl Drop for RunningGenerator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn tool_error(label: &str, message: String, log: &Path) -> LabError {
    let tail = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = tail.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    let message = if tail.is_empty() {
        message
    } else {
        format!("{message} ({})", tail.join(" / "))
    };
    LabError::Tool {
        label: label.to_string(),
        message,
        log: log.to_path_buf(),
    }
}

/// Warns where the sockperf clients that pace an open-loop rpc
/// ([`traffic::spinning_clients`]) are half the machine's cores or more: the
/// engine and the other programs then wait for CPU. A scenario with four of them
/// (one rpc of concurrency 4) on 2 cores left the link idle while frames were
/// ready for 5.5% of a 200 Mbit/s run and 33-39% of a 100 Mbit/s one, the
/// engine's `sendmmsg` to the sink taking up to 2.8 ms at a time (most likely
/// the sink's deferred receive work run inside it); with memcached's generator
/// instead every check passed.
fn warn_of_spinning_clients(plans: &[traffic::TrafficPlan]) {
    let spinning = traffic::spinning_clients(plans);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if spinning > 0 && 2 * spinning >= cores {
        tracing::warn!(
            "the open-loop rpc traffic runs {spinning} sockperf client(s), and sockperf waits between requests at --mps by spinning, so each keeps one of this machine's {cores} cores busy: the engine and the other programs wait for CPU, and the `engine` check fails where the link lies idle (4 such clients on 2 cores lost 5.5-39% of the link) (hint: give the rpc's app port 11211, whose open loop memcached and the lab's own load generator run, sleeping between requests; or drop `rate` for a closed loop)"
        );
    }
}

fn start(command: &traffic::Command, label: &str, realtime: bool) -> Result<Process, LabError> {
    if let Some((path, contents)) = &command.input {
        std::fs::write(path, contents)
            .map_err(|e| LabError::Io(format!("{}: {e}", path.display())))?;
    }
    Process::spawn(
        &command.ns,
        &command.program,
        &command.args,
        &command.log,
        label,
        realtime && command.realtime,
    )
    .map_err(|e| LabError::Tool {
        label: label.to_string(),
        message: e.to_string(),
        log: command.log.clone(),
    })
}

/// What the caller of a run hears of it while it goes: the run hands over
/// numbers, the caller prints or serves them. A closure hears the progress only.
pub trait Watch {
    /// The time since traffic started, in ns, every 100 ms or so, and at the end.
    fn progress(&mut self, elapsed_ns: u64);
    /// An interval was measured ([`Measured`]); intervals come in order, each once.
    fn measured(&mut self, measured: Measured<'_>);
}

impl<F: FnMut(u64)> Watch for F {
    fn progress(&mut self, elapsed_ns: u64) {
        self(elapsed_ns)
    }

    fn measured(&mut self, _: Measured<'_>) {}
}

/// Interval `interval` of a running run, as the meter at the end of the link
/// counted it, once closed (`meter::LATE_NS` after its end, or when the run stops).
pub struct Measured<'a> {
    /// The run's record so far: its header, the ideal of every interval, and the
    /// bytes of the intervals measured up to `interval` (the later ones still 0),
    /// the bytes the run's figures get (but for a frame the kernel held longer
    /// than `meter::LATE_NS` past its interval's end).
    pub record: &'a RunRecord,
    pub interval: usize,
    /// Each tenant's drops so far, as the record counts them at the end; `None`
    /// where only the end of the run tells them (`linux-htb`: the kernel's
    /// counters).
    pub tenant_drops: Option<&'a [u64]>,
}

/// Runs `scenario` in the lab under `enforcer` (any of `sched::ENFORCERS`, or
/// `linux-htb`). `watch` hears its progress and each interval once measured.
pub fn run(
    scenario: &Scenario,
    enforcer: &str,
    options: &LabOptions,
    watch: &mut dyn Watch,
) -> Result<RunRecord, LabError> {
    run_with_engine_stats(scenario, enforcer, options, watch).map(|(record, _)| record)
}

/// Refuses what `enforcer` cannot do of the engine's CPU model (docs/policy.md,
/// `engine`): the kernel's HTB forwards on whatever cores the kernel picks and
/// spends no traffic's `cost`, so its figures would be judged against a CPU it
/// never spent. (`engine.packet_cost` is the simulator's stand-in for what the lab
/// measures, so it is not refused.)
pub fn engine_cpu_supported(scenario: &Scenario, enforcer: &str) -> Result<(), LabError> {
    if !sched::registry::in_kernel(enforcer) {
        return Ok(());
    }
    if let Some(traffic) = scenario.traffic.iter().find(|t| t.cost_ns > 0) {
        return Err(LabError::Unsupported(format!(
            "traffic `{}` has a `cost`, which linux-htb does not spend (the kernel forwards): run nicsched's engine (`-e wf2q`, `-e fairnic`, ...), or remove `cost`",
            traffic.name
        )));
    }
    if scenario.policy.engine.cores > 1 {
        return Err(LabError::Unsupported(format!(
            "`engine.cores: {}`: linux-htb forwards on the kernel's cores, not the engine's: run nicsched's engine, or remove `engine.cores`",
            scenario.policy.engine.cores
        )));
    }
    Ok(())
}

/// Refuses what the lab's VMs cannot do: a namespace's veth frees a send as it
/// posts it, so there is no transmit ring whose descriptors the engine holds
/// (`completions: in-order`) and no socket charged until its completion
/// (`napi_tx`). Those are the simulator's (docs/scenario.md, PicNIC's Table 4);
/// run in the lab, their figures would be those of the default instead.
pub fn transmit_ring_supported(scenario: &Scenario) -> Result<(), LabError> {
    transmit_ring_supported_in(&scenario.policy)
}

/// [`transmit_ring_supported`] for one host's policy.
fn transmit_ring_supported_in(policy: &policy::Policy) -> Result<(), LabError> {
    for tenant in &policy.tenants {
        if tenant.completions == policy::Completions::InOrder {
            return Err(LabError::Unsupported(format!(
                "tenant `{}` has `completions: in-order`, which only the simulator models (the lab's veths complete every send at once): run `nicsched sim`, or remove `completions`",
                tenant.name
            )));
        }
        if tenant.napi_tx {
            return Err(LabError::Unsupported(format!(
                "tenant `{}` has `napi_tx: true`, which only the simulator models (the lab's veths free every send at once): run `nicsched sim`, or remove `napi_tx`",
                tenant.name
            )));
        }
    }
    Ok(())
}

/// [`run`], with the engine's counters (none for `linux-htb`).
pub fn run_with_engine_stats(
    scenario: &Scenario,
    enforcer: &str,
    options: &LabOptions,
    watch: &mut dyn Watch,
) -> Result<(RunRecord, Option<EngineStats>), LabError> {
    let _signals = sys::signal::SignalGuard::install();
    if sys::signal::interrupted() {
        return Err(LabError::Interrupted);
    }
    engine_cpu_supported(scenario, enforcer)?;
    remove_leftovers(&mut |line| eprintln!("nicsched lab: {line}"))?;
    let started = Instant::now();
    let mut scenario = scenario.clone();
    if let Some(rate) = options.link_rate_bps {
        scenario.policy.link.rate_bps = rate;
    }
    let policy = &scenario.policy;
    let kernel_htb = sched::registry::in_kernel(enforcer);
    if kernel_htb && !options.crafted.is_empty() {
        return Err(LabError::Datapath(
            "crafted frames go through nicsched's engine, which linux-htb does not run".into(),
        ));
    }
    if let Some(c) = options
        .crafted
        .iter()
        .find(|c| c.tenant >= policy.tenants.len())
    {
        return Err(LabError::Datapath(format!(
            "crafted frames: no tenant {} in a policy of {}",
            c.tenant,
            policy.tenants.len()
        )));
    }
    if kernel_htb {
        htb_limits(policy).map_err(|e| LabError::Unsupported(e.to_string()))?;
    } else {
        // Built here to refuse early; the engine thread builds its own.
        sched::build(enforcer, policy).map_err(LabError::Enforcer)?;
        engine::HostBuffer::new(enforcer, policy, options.qdisc)?;
    }
    let mut plan = topology::Plan::new(policy, run_id()?)?;
    let mut dir = RunDir::new(
        options.out.as_deref(),
        &format!("nicsched-lab-{}", plan.prefix),
    );
    let plans = traffic::plan(&scenario, &mut plan, &options.tools, &dir.path)?;
    let mut needed = vec!["ip", "ethtool"];
    if kernel_htb {
        needed.push("tc");
    }
    for p in &plans {
        needed.extend(
            p.servers
                .iter()
                .chain(&p.clients)
                .map(|c| c.program.as_str()),
        );
    }
    if let Some(missing) = needed.iter().find(|p| !program_exists(p)) {
        return Err(LabError::MissingTool {
            program: missing.to_string(),
        });
    }
    std::fs::create_dir_all(&dir.path)
        .map_err(|e| LabError::Io(format!("cannot create {}: {e}", dir.path.display())))?;

    // Declared first, dropped last: the namespaces go after the threads and
    // programs inside them.
    let mut topology = topology::Topology::create(plan.clone(), kernel_htb)?;
    let outcome = run_in(
        &scenario, enforcer, options, &plan, &plans, &dir.path, watch,
    );
    dir.keep_if_named_in(&outcome, |(record, _)| &record.checks);
    if options.keep {
        let delete = topology.keep();
        eprintln!(
            "nicsched lab: namespaces kept for inspection ({}); delete them with: {delete}",
            plan.namespaces().join(", ")
        );
    }
    drop(topology);
    let (mut record, engine_stats) = outcome?;
    record.wall_s = started.elapsed().as_secs_f64();
    record.provenance.seed = scenario.seed;
    record.provenance.settings = options.settings(scenario.policy.link.rate_bps);
    Ok((record, engine_stats))
}

/// Runs the traffic of `plans` in the topology of `plan`, measured, and checks the
/// figures: the steps below, in order.
fn run_in(
    scenario: &Scenario,
    enforcer: &str,
    options: &LabOptions,
    plan: &topology::Plan,
    plans: &[traffic::TrafficPlan],
    dir: &Path,
    watch: &mut dyn Watch,
) -> Result<(RunRecord, Option<EngineStats>), LabError> {
    let mut measuring = start_measuring(scenario, enforcer, options, plan, plans, dir)?;
    let servers = start_servers(plans, &plan.sink_ns, options.realtime)?;
    let origin = measuring.origin.clone();
    let tallies = drive(
        scenario.duration_ns,
        plans,
        options.realtime,
        &origin,
        &mut |elapsed_ns| {
            watch.progress(elapsed_ns);
            measuring.pass_on(watch);
        },
    )?;
    servers.finish();
    let sink_udp_drops = udp_receive_buffer_drops(&plan.sink_ns);
    let (engine_stats, metered) = measuring.workers.join()?;
    // The meter handed over the last intervals as it stopped, the engine its last
    // drops.
    measuring.pass_on(watch);
    let htb_drops = if sched::registry::in_kernel(enforcer) {
        Some(htb_drops(&scenario.policy, plan)?)
    } else {
        None
    };
    let mut record = measuring.record;
    collect(scenario, plans, &mut record, &metered, &tallies);
    let tenants = scenario.policy.tenants.len();
    (record.tenant_drops, record.frames_sent) = match (&engine_stats, htb_drops) {
        // The cores' refusals are the tenant's engine_refused, not its drops, as in
        // the simulator.
        (Some(s), _) => (
            s.frames
                .iter()
                .enumerate()
                .map(|(t, f)| f.refused - s.cores.as_ref().map_or(0, |c| c.queue_refused[t]))
                .collect(),
            s.tx_frames,
        ),
        (None, drops) => (drops.unwrap_or_else(|| vec![0; tenants]), metered.frames),
    };
    record.tenant_frames = engine_stats
        .as_ref()
        .map(|s| s.frames.clone())
        .unwrap_or_default();
    if let Some((stats, cores)) = engine_stats
        .as_ref()
        .and_then(|s| Some((s, s.cores.as_ref()?)))
    {
        record.engine_cpu = (0..tenants)
            .map(|t| report::EngineCpuTenant {
                busy_ns: cores.tenant_busy_ns.iter().map(|core| core[t]).sum(),
                refused_packets: cores.queue_refused[t] + stats.frames[t].lost_at_port,
            })
            .collect();
    }
    let observed = checks::Observed {
        plans,
        metered: &metered,
        engine: engine_stats.as_ref(),
        tallies: &tallies,
        sink_udp_drops,
    };
    record.checks = checks::lab_checks(scenario, &mut record, &observed);
    Ok((record, engine_stats))
}

/// What a run is measured with, up before any traffic: its record (ideals filled
/// in, nothing measured), the meter and, unless the kernel forwards, the engine.
struct Measuring {
    record: RunRecord,
    workers: Workers,
    /// Time zero of the run, once traffic starts.
    origin: Arc<OnceLock<Instant>>,
    /// The intervals the meter closed, with their bytes per report class.
    measured: mpsc::Receiver<(usize, Vec<u64>)>,
    /// Each tenant's drops so far, as the engine publishes them (none under
    /// `linux-htb`).
    drops: Option<Arc<[AtomicU64]>>,
}

impl Measuring {
    /// Hands `watch` each interval the meter closed since the last call, in the
    /// record as the run's figures will have it.
    fn pass_on(&mut self, watch: &mut dyn Watch) {
        while let Ok((interval, class_bytes)) = self.measured.try_recv() {
            self.record.intervals[interval].class_bytes = class_bytes;
            let drops: Option<Vec<u64>> = self
                .drops
                .as_ref()
                .map(|d| d.iter().map(|t| t.load(Ordering::Relaxed)).collect());
            watch.measured(Measured {
                record: &self.record,
                interval,
                tenant_drops: drops.as_deref(),
            });
        }
    }
}

fn start_measuring(
    scenario: &Scenario,
    enforcer: &str,
    options: &LabOptions,
    plan: &topology::Plan,
    plans: &[traffic::TrafficPlan],
    dir: &Path,
) -> Result<Measuring, LabError> {
    let policy = &scenario.policy;
    let prefixes: Vec<Prefix> = plan.tenants.iter().map(|t| t.prefix).collect();
    let classifier = Classifier::new(policy, prefixes.clone());
    let kernel_htb = sched::registry::in_kernel(enforcer);
    if kernel_htb {
        apply_htb(policy, plan, &prefixes, dir)?;
    }
    let classes = measure::report_classes(scenario);
    let mut app_class = vec![None; policy.apps.len()];
    for (c, a) in classes.iter().enumerate() {
        app_class[a.index()] = Some(c);
    }
    let record = measure::empty_record(
        scenario,
        enforcer,
        Mode::Lab,
        &measure::asked_demands_bps(scenario, &measure::RpcPath::default()),
    );
    let origin = Arc::new(OnceLock::new());
    let mut workers = Workers {
        stop: Arc::new(AtomicBool::new(false)),
        meter_stop: Arc::new(AtomicBool::new(false)),
        engine: None,
        meter: None,
        crafted: Vec::new(),
    };
    let (measured_tx, measured) = mpsc::channel();
    let meter = meter::Meter {
        live: measured_tx,
        classifier: classifier.clone(),
        app_class,
        classes: classes.len(),
        interval_ns: scenario.interval_ns,
        intervals: record.intervals.len(),
        traffic: plans.iter().map(|p| p.frames.clone()).collect(),
        apps: policy.apps.len(),
        tenants: policy.tenants.len(),
        tenant_macs: plan.tenants.iter().map(|t| t.mac).collect(),
        #[cfg(feature = "faults")]
        drops_app: faults::meter_drops_app(scenario),
    };
    {
        let (stop, origin, realtime) =
            (workers.meter_stop.clone(), origin.clone(), options.realtime);
        workers.meter = Some(spawn_worker(
            "nicsched-meter",
            plan.sink_ns.clone(),
            move |ready| {
                if realtime {
                    let _ = sys::set_realtime();
                }
                meter.run("eth0", &origin, &stop, ready)
            },
        )?);
    }
    let drops: Option<Arc<[AtomicU64]>> = (!kernel_htb).then(|| {
        (0..policy.tenants.len())
            .map(|_| AtomicU64::new(0))
            .collect()
    });
    if let Some(drops) = drops.clone() {
        let stop = workers.stop.clone();
        let engine = spawn_engine(
            scenario, enforcer, options, plan, plans, classifier, drops, stop,
        );
        workers.engine = Some(engine?);
    }
    for crafted in &options.crafted {
        let tenant = &plan.tenants[crafted.tenant];
        let (crafted, stop, macs) = (
            crafted.clone(),
            workers.stop.clone(),
            (tenant.mac, plan.sink_mac),
        );
        workers.crafted.push(spawn_worker(
            "nicsched-crafted",
            tenant.ns.clone(),
            move |ready| crafted::send(&crafted, "eth0", macs, &stop, ready),
        )?);
    }
    Ok(Measuring {
        record,
        workers,
        origin,
        measured,
        drops,
    })
}

/// The engine thread in the engine's namespace: it builds the enforcer there
/// and forwards until `stop`, publishing each tenant's drops in `drops`.
#[allow(clippy::too_many_arguments)]
fn spawn_engine(
    scenario: &Scenario,
    enforcer: &str,
    options: &LabOptions,
    plan: &topology::Plan,
    plans: &[traffic::TrafficPlan],
    classifier: Classifier,
    drops: Arc<[AtomicU64]>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<std::io::Result<EngineStats>>, LabError> {
    let policy = &scenario.policy;
    let costs_ns: Vec<u64> = plans
        .iter()
        .map(|p| scenario.traffic[p.traffic].cost_ns)
        .collect();
    let frames: Vec<_> = plans.iter().map(|p| p.frames.clone()).collect();
    let cores = cores::CoreSetup::for_run(policy, enforcer, &costs_ns, &frames);
    let sharded = shards::ShardPlan::new(enforcer, policy, options.engine_threads, cores.is_some())
        .map_err(LabError::Unsupported)?;
    let mut buffer = engine::HostBuffer::new(enforcer, policy, options.qdisc)?;
    // Frames waiting for a core hold their slots too.
    buffer.slab_slots += cores.as_ref().map_or(0, |c| c.queued_max(policy));
    let config = engine::EngineConfig {
        ports: plan.tenants.iter().map(|t| t.port.clone()).collect(),
        tenant_macs: plan.tenants.iter().map(|t| t.mac).collect(),
        uplink: plan.uplink.clone(),
        link_rate_bps: Some(policy.link.rate_bps),
        buffer,
        transmit_threads: options.engine_threads.saturating_sub(1),
        cores,
    };
    let (name, policy) = (enforcer.to_string(), policy.clone());
    spawn_worker("nicsched-engine", plan.engine_ns.clone(), move |ready| {
        if let Some(sharded) = &sharded {
            return shards::run(sharded, config, classifier, Some(drops), &stop, ready);
        }
        let built = sched::build_with(&name, &policy, config.buffer.capacity)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        engine::Engine::new(config, classifier, &policy, built)?
            .publishing_drops(drops)
            .run(&stop, ready)
    })
}

/// The traffic's servers and the sink's UDP sockets; dropped (killed, closed)
/// before the workers and the topology.
struct Servers {
    /// Each with whether it ends by itself once its one test is over (iperf3).
    processes: Vec<(Process, bool)>,
    udp_sinks: Vec<UdpSocket>,
}

/// How long an iperf3 server may take to write its result once its client has
/// stopped: the client's last message crosses the engine behind its data.
const SERVER_RESULT_GRACE: Duration = Duration::from_secs(3);

fn start_servers(
    plans: &[traffic::TrafficPlan],
    sink_ns: &str,
    realtime: bool,
) -> Result<Servers, LabError> {
    warn_of_spinning_clients(plans);
    let mut servers = Servers {
        processes: Vec::new(),
        udp_sinks: Vec::new(),
    };
    for p in plans {
        let one_test = p.counted == traffic::Counted::Iperf3;
        for s in &p.servers {
            let process = start(s, &format!("{} server", p.label), realtime)?;
            servers.processes.push((process, one_test));
        }
        if let Some(port) = p.udp_sink_port {
            servers.udp_sinks.push(udp_sink(sink_ns, port)?);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    for ((s, _), command) in servers
        .processes
        .iter_mut()
        .zip(plans.iter().flat_map(|p| &p.servers))
    {
        if let Some(status) = s.poll() {
            return Err(tool_error(
                &s.label,
                format!("ended at start ({status})"),
                &command.log,
            ));
        }
    }
    Ok(servers)
}

impl Servers {
    /// Lets each iperf3 server write its result and end, then kills every server
    /// still running and closes the sink's sockets.
    fn finish(mut self) {
        for (process, one_test) in &mut self.processes {
            if *one_test {
                // Signal 0 sends nothing: this only waits for it to end.
                process.stop(0, SERVER_RESULT_GRACE);
            }
        }
    }
}

/// Each traffic's clients and generator while the run drives them.
struct Traffics<'a> {
    plans: &'a [traffic::TrafficPlan],
    realtime: bool,
    clients: Vec<Vec<Process>>,
    generators: Vec<Option<RunningGenerator>>,
    started: Vec<bool>,
    stopped: Vec<bool>,
}

impl<'a> Traffics<'a> {
    fn new(plans: &'a [traffic::TrafficPlan], realtime: bool) -> Self {
        Traffics {
            plans,
            realtime,
            clients: plans.iter().map(|_| Vec::new()).collect(),
            generators: plans.iter().map(|_| None).collect(),
            started: vec![false; plans.len()],
            stopped: vec![false; plans.len()],
        }
    }

    fn launch(&mut self, i: usize) -> Result<(), LabError> {
        let p = &self.plans[i];
        self.clients[i] = p
            .clients
            .iter()
            .map(|c| start(c, &format!("{} client", p.label), self.realtime))
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    /// Starts and stops traffic due at `now_ns`, and fails if a program did.
    fn tick(&mut self, now_ns: u64) -> Result<(), LabError> {
        for (i, p) in self.plans.iter().enumerate() {
            if !self.started[i] && now_ns >= p.start_ns {
                self.started[i] = true;
                // Traffic starting at zero had its clients launched in the warm-up.
                if p.start_ns > 0 {
                    self.launch(i)?;
                }
                if let Some(g) = &p.generator {
                    self.generators[i] = Some(RunningGenerator::start(g, &p.label, self.realtime)?);
                }
            }
            if self.started[i] && !self.stopped[i] && now_ns >= p.stop_ns {
                self.stopped[i] = true;
                for c in &mut self.clients[i] {
                    c.stop(libc_sigint(), Duration::from_secs(2));
                }
                if let Some(g) = &self.generators[i] {
                    g.stop.store(true, Ordering::SeqCst);
                }
            }
            if self.started[i] && !self.stopped[i] {
                if let Some(error) = self.generators[i]
                    .as_mut()
                    .and_then(RunningGenerator::failure)
                {
                    return Err(error);
                }
                for (c, command) in self.clients[i].iter_mut().zip(&p.clients) {
                    if let Some(status) = c.poll()
                        && !status.success()
                    {
                        return Err(tool_error(
                            &c.label,
                            format!("failed ({status})"),
                            &command.log,
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Stops every client and generator; what each generator counted, per traffic.
    fn finish(mut self) -> Result<Vec<Option<generate::Tally>>, LabError> {
        for c in self.clients.iter_mut().flatten() {
            c.stop(libc_sigint(), Duration::from_secs(2));
        }
        self.generators
            .iter_mut()
            .map(|g| g.as_mut().map(RunningGenerator::finish).transpose())
            .collect()
    }
}

/// Drives the traffic of `plans` from its warm-up to `duration_ns`; sets
/// `origin` at time zero. Returns what the lab's generators counted.
fn drive(
    duration_ns: u64,
    plans: &[traffic::TrafficPlan],
    realtime: bool,
    origin: &OnceLock<Instant>,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<Option<generate::Tally>>, LabError> {
    let mut traffics = Traffics::new(plans, realtime);
    // The clients of traffic that starts with the run are launched WARM_UP before
    // its time zero, so that it starts sending, not starting up, at zero: iperf3
    // takes 100-300 ms to open its streams (more with -P 64), which alone set the
    // first interval's Jain index (0.96 against 0.999 after it).
    for (i, _) in plans.iter().enumerate().filter(|(_, p)| p.start_ns == 0) {
        traffics.launch(i)?;
    }
    std::thread::sleep(WARM_UP);
    let t0 = Instant::now();
    let _ = origin.set(t0);
    let mut last_progress = 0;
    loop {
        if sys::signal::interrupted() {
            return Err(LabError::Interrupted);
        }
        let now_ns = t0.elapsed().as_nanos() as u64;
        if now_ns >= duration_ns {
            break;
        }
        traffics.tick(now_ns)?;
        if now_ns - last_progress >= 100_000_000 {
            progress(now_ns);
            last_progress = now_ns;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    progress(duration_ns);
    traffics.finish()
}

/// Datagrams the UDP sockets of namespace `ns` dropped for want of buffer
/// (`Udp: RcvbufErrors` of its `/proc/net/snmp`); `None` if it cannot be read.
fn udp_receive_buffer_drops(ns: &str) -> Option<u64> {
    let snmp = sys::netns::command("ip", &["netns", "exec", ns, "cat", "/proc/net/snmp"]).ok()?;
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let column = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(column)?.parse().ok()
}

/// The HTB classes' drops per tenant, from the kernel's counters.
fn htb_drops(policy: &policy::Policy, plan: &topology::Plan) -> Result<Vec<u64>, LabError> {
    let stats = sys::netns::command(
        "tc",
        &[
            "-netns",
            &plan.engine_ns,
            "-s",
            "class",
            "show",
            "dev",
            &plan.uplink,
        ],
    )
    .map_err(|e| LabError::Setup(format!("reading HTB's counters: {e}")))?;
    Ok(htb::tenant_drops(policy, &stats))
}

/// Fills `record` with what was measured: the metered bytes and the latency of
/// each request/response traffic (sockperf's logs, the memcached generator's).
fn collect(
    scenario: &Scenario,
    plans: &[traffic::TrafficPlan],
    record: &mut RunRecord,
    metered: &meter::Metered,
    tallies: &[Option<generate::Tally>],
) {
    for (interval, bytes) in record.intervals.iter_mut().zip(&metered.class_bytes) {
        interval.class_bytes.clone_from(bytes);
    }
    for (p, tally) in plans.iter().zip(tallies) {
        if !scenario.traffic[p.traffic].kind.has_requests() {
            continue;
        }
        let mut histogram = hdrhistogram::Histogram::new_with_bounds(1, 100_000_000_000, 3)
            .expect("constant bounds are valid");
        for log in &p.latency_logs {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            for rtt in traffic::sockperf_round_trips_ns(&text) {
                histogram.saturating_record(rtt.max(1));
            }
        }
        for &latency_ns in tally.iter().flat_map(|t| &t.latencies_ns) {
            histogram.saturating_record(latency_ns.max(1));
        }
        record.latency.push(LatencyRecord {
            traffic: p.label.clone(),
            histogram_ns: histogram,
        });
    }
    // Departure times of single flows are not metered in the lab: no pacing.
}

/// Compiles `policy` to HTB on the uplink of `plan` (the tenants matched by
/// `prefixes`) and applies it with `tc -batch`; `DIR/linux-htb.tc` keeps the batch
/// and `DIR/linux-htb.sh` the same as a script for `sh`.
fn apply_htb(
    policy: &policy::Policy,
    plan: &topology::Plan,
    prefixes: &[Prefix],
    dir: &Path,
) -> Result<(), LabError> {
    let prefixes: Vec<policy::Cidr> = prefixes
        .iter()
        .map(|p| policy::Cidr {
            addr: p.network().into(),
            prefix_len: p.len,
        })
        .collect();
    let batch = htb::tc_batch(policy, &plan.uplink, &prefixes)
        .map_err(|e| LabError::Unsupported(e.to_string()))?;
    let file = dir.join("linux-htb.tc");
    let shell = dir.join("linux-htb.sh");
    let script = htb::sh_script(&plan.uplink, &batch);
    for (path, text) in [(&shell, &script), (&file, &batch)] {
        std::fs::write(path, text).map_err(|e| LabError::Io(format!("{}: {e}", path.display())))?;
    }
    sys::netns::command(
        "tc",
        &[
            "-netns",
            &plan.engine_ns,
            "-batch",
            &file.display().to_string(),
        ],
    )
    .map_err(|e| LabError::Setup(e.to_string()))?;
    Ok(())
}

fn libc_sigint() -> i32 {
    sys::process::SIGINT
}
