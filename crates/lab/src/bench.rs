//! The engine benchmark (`nicsched lab-bench`): how many frames per second the
//! engine forwards, under `fifo` and each enforcer, against the kernel forwarding the
//! same frames on the same topology, with and without HTB, in one run.
//!
//! - **Topology**: the lab's ([`crate::topology`]), built once. The engine paths run
//!   first, on bare ports; then a Linux bridge joins the ports (`kernel`: plain kernel
//!   forwarding, no qdisc on the uplink) and last the policy's HTB goes on the uplink
//!   (`linux-htb`). The bridge is told the sink's MAC (a static fdb entry): nothing
//!   comes back from the sink to teach it, and it would flood every frame.
//! - **Load**: one sender thread per tenant, in the tenant's namespace, with
//!   `flows_per_tenant` connected UDP sockets (one source port each) pushing
//!   datagrams of `payload_bytes` to one sink port with `sendmmsg`, 64 at a time,
//!   round robin over the flows, without pause: a fixed, saturating offer. The
//!   sink's socket is never read (it only keeps the datagrams from being answered
//!   with ICMP errors).
//! - **Engine**: unpaced (`EngineConfig::link_rate_bps: None`) and the policy scaled
//!   to [`BENCH_LINK_RATE_BPS`] (every guarantee and cap by the same factor), so
//!   neither the link nor a shaper holds a frame back: the engine forwards as fast
//!   as it can.
//! - **Counts**: offered = datagrams the senders' `sendmmsg` calls took; delivered
//!   = frames and bytes the sink's `eth0` received (the kernel's interface counters,
//!   read before the senders start and after the last frame has drained); lost =
//!   offered − delivered, wherever it happened (veth backlog, the engine's socket
//!   buffer, its per-tenant bound). Rates are counts over the senders' sending time.
//!   The CPU time of the engine thread and of the senders (`CLOCK_THREAD_CPUTIME_ID`)
//!   gives the engine's CPU per forwarded frame, which a shared machine's load moves
//!   far less than frames per second.
//!   With several rounds, every path runs once per round (the bridge is deleted
//!   and built again between rounds) and the counts add up, so that the load of
//!   whatever else runs on the machine falls on every path alike.

use crate::engine::{Engine, EngineConfig, EngineStats, HostBuffer, LAB_HOST_LIMITS};
use crate::sys::netns::{self, RxCounters};
use crate::sys::udp::{self, SEND_BATCH, UdpSender};
use crate::topology::{self, Topology, mac_string};
use crate::{Classifier, LabError, Prefix, sys};
use policy::Policy;
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The path name of plain kernel forwarding: the bridge, no qdisc.
pub const KERNEL_FORWARDING: &str = "kernel";
/// The policy's link rate in the benchmark: far above what the engine forwards on
/// any machine the lab runs on, so no enforcer's shaper ever holds a frame back.
pub const BENCH_LINK_RATE_BPS: u64 = 100_000_000_000;
/// The sink's UDP port.
const SINK_PORT: u16 = 9000;
/// Bytes around a UDP payload on the wire: UDP, IPv4 without options, Ethernet.
const HEADER_BYTES: u32 = 8 + 20 + 14;
/// The largest payload that fits one 1500-byte IPv4 packet.
pub const PAYLOAD_BYTES_MAX: u16 = 1472;
/// After the senders stop: how long the sink's counter must stand still to count as
/// drained, and the longest wait for it.
const DRAIN_QUIET: Duration = Duration::from_millis(50);
const DRAIN_MAX: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Paths in the order they are reported: enforcer names, [`KERNEL_FORWARDING`],
    /// the kernel's enforcers. The engine paths run first, then `kernel`, then
    /// `linux-htb`.
    pub paths: Vec<String>,
    /// How long the senders offer load on each path, per round.
    pub seconds: f64,
    /// Times every path runs, round after round (all paths in each), so that a
    /// change in the machine's load falls on every path alike. Counts add up.
    pub rounds: u32,
    /// UDP payload of every datagram.
    pub payload_bytes: u16,
    pub flows_per_tenant: u16,
    /// The host's qdisc limits (as in `nicsched lab`).
    pub qdisc: sched::HostLimits,
    /// Paced trials per path and round that look for its loss-free rate after the
    /// saturating one ([`loss_free_rate`]); 0: none.
    pub search_steps: u32,
    /// The loss a paced trial may show and still count as loss-free.
    pub loss_tolerance: f64,
    /// Threads of the engine ([`crate::LabOptions::engine_threads`]).
    pub engine_threads: usize,
    /// The engine's threads run at SCHED_FIFO ([`sys::set_realtime`]), as `nicsched
    /// enforce` runs its engine: a forwarder of its own is given its cores, as the
    /// kernel paths' forwarding is never preempted by the senders whose system
    /// calls it runs in. At normal priority the saturating senders took 1.4 of 2
    /// cores and left the engine 0.6, and it dropped 60-70% of what they sent.
    /// [`engine_realtime_fits`] says when it is worth it.
    pub engine_realtime: bool,
}

/// Whether `engine_threads` at SCHED_FIFO leave the senders and the sink a core:
/// with as many busy real-time threads as cores the senders starve (2 on 2 cores
/// forwarded a quarter of the kernel's rate, against 0.4x at normal priority).
pub fn engine_realtime_fits(engine_threads: usize) -> bool {
    std::thread::available_parallelism().is_ok_and(|cores| engine_threads < cores.get())
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            paths: default_paths(),
            seconds: 3.0,
            rounds: 1,
            payload_bytes: 64,
            flows_per_tenant: 4,
            qdisc: LAB_HOST_LIMITS,
            search_steps: 4,
            loss_tolerance: LOSS_TOLERANCE,
            engine_threads: 1,
            engine_realtime: engine_realtime_fits(1),
        }
    }
}

impl BenchOptions {
    /// Trials each path runs per round: the saturating one and the search's.
    pub fn trials_per_path(&self) -> u32 {
        1 + self.search_steps
    }
}

/// Loss a loss-free trial may show: 0.1%, a few frames per second at these rates,
/// so that one burst while the machine runs something else does not count as the
/// path's limit.
pub const LOSS_TOLERANCE: f64 = 0.001;

/// The highest rate a path forwards without loss (RFC 2544's throughput, within
/// `options.loss_tolerance`), found by bisection between what it forwarded when
/// saturated (the first probe) and what was offered then, with `trial(rate)`
/// running the path with senders paced at `rate` frames/s. A path that lost
/// nothing when saturated forwards its saturated rate loss-free. Under a
/// saturating offer a forwarder that is not the senders' own system call (the
/// engine) sees the senders spend the machine's cores on frames it will drop;
/// paced, they spend only what it forwards.
pub fn loss_free_rate(
    saturated: &PathResult,
    options: &BenchOptions,
    mut trial: impl FnMut(f64) -> Result<PathResult, LabError>,
) -> Result<f64, LabError> {
    if saturated.loss() <= options.loss_tolerance {
        return Ok(saturated.frames_per_s());
    }
    // Probes that passed and failed bound the search; the answer is the best
    // rate a passing trial delivered (paced senders may fall short of a probe).
    let (mut low, mut high) = (0.0_f64, saturated.offered_frames_per_s());
    let mut passed = 0.0_f64;
    let mut probe = saturated.frames_per_s();
    for _ in 0..options.search_steps {
        let result = trial(probe)?;
        if result.loss() <= options.loss_tolerance {
            passed = passed.max(result.frames_per_s());
            low = probe;
        } else {
            high = probe;
        }
        probe = (low + high) / 2.0;
    }
    Ok(passed)
}

/// The engine paths `nicsched lab-bench` runs when none is named: the registry's
/// engine's and NIC model's defaults for `lab-bench`.
pub fn default_enforcers() -> impl Iterator<Item = &'static str> {
    sched::registry::built()
        .filter(|e| e.is_default(sched::registry::World::LabBench))
        .map(|e| e.name)
}

/// Every default engine path, then `kernel`, then the registry's kernel
/// enforcers `lab-bench` runs by default (`linux-htb`).
pub fn default_paths() -> Vec<String> {
    let in_kernel = sched::ENFORCERS.iter().filter(|e| {
        sched::registry::in_kernel(e.name) && e.is_default(sched::registry::World::LabBench)
    });
    default_enforcers()
        .chain([KERNEL_FORWARDING])
        .chain(in_kernel.map(|e| e.name))
        .map(str::to_string)
        .collect()
}

/// What forwards the frames on a path; also the order paths run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathKind {
    Engine,
    Kernel,
    KernelHtb,
}

impl PathKind {
    pub fn of(path: &str) -> PathKind {
        match path {
            KERNEL_FORWARDING => PathKind::Kernel,
            _ if sched::registry::in_kernel(path) => PathKind::KernelHtb,
            _ => PathKind::Engine,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            PathKind::Engine => "engine",
            PathKind::Kernel => "kernel",
            PathKind::KernelHtb => "kernel+htb",
        }
    }
}

/// The counts of one path.
#[derive(Clone, Debug, PartialEq)]
pub struct PathResult {
    pub path: String,
    /// How long the senders sent, over all rounds.
    pub seconds: f64,
    /// Forwarded frames/s of each round.
    pub round_frames_per_s: Vec<f64>,
    /// Datagrams the senders' kernel took.
    pub offered_frames: u64,
    /// Frames the sink's `eth0` received, and their bytes (Ethernet header included).
    pub delivered_frames: u64,
    pub delivered_bytes: u64,
    /// The engine's own counters, over all rounds (engine paths only).
    pub engine: Option<EngineStats>,
    /// CPU time of the engine thread and of all sender threads together, over all
    /// rounds (what the kernel charged to them: softirq work, such as forwarding
    /// inside a `send`, usually included).
    pub engine_cpu_s: f64,
    pub senders_cpu_s: f64,
    /// Per round, the highest rate forwarded loss-free ([`loss_free_rate`]); empty
    /// when no search ran.
    pub round_loss_free_frames_per_s: Vec<f64>,
}

impl PathResult {
    /// This path's counts with those of another round of it added.
    pub fn merged(mut self, round: PathResult) -> PathResult {
        debug_assert_eq!(self.path, round.path);
        self.seconds += round.seconds;
        self.round_frames_per_s.extend(round.round_frames_per_s);
        self.offered_frames += round.offered_frames;
        self.delivered_frames += round.delivered_frames;
        self.delivered_bytes += round.delivered_bytes;
        self.engine_cpu_s += round.engine_cpu_s;
        self.senders_cpu_s += round.senders_cpu_s;
        self.round_loss_free_frames_per_s
            .extend(round.round_loss_free_frames_per_s);
        self.engine = match (self.engine, round.engine) {
            (Some(mut a), Some(b)) => {
                a.add_counts(&b);
                a.run_ns += b.run_ns;
                a.split_classes = a.split_classes.max(b.split_classes);
                a.cores = None;
                a.hosts = None;
                Some(a)
            }
            (a, b) => a.or(b),
        };
        self
    }

    /// Lowest and highest forwarded frames/s of a round.
    pub fn round_range(&self) -> (f64, f64) {
        self.round_frames_per_s
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(lo, hi), &r| {
                (lo.min(r), hi.max(r))
            })
    }

    pub fn kind(&self) -> PathKind {
        PathKind::of(&self.path)
    }

    fn per_second(&self, count: u64) -> f64 {
        if self.seconds > 0.0 {
            count as f64 / self.seconds
        } else {
            0.0
        }
    }

    pub fn frames_per_s(&self) -> f64 {
        self.per_second(self.delivered_frames)
    }

    /// The loss-free rate, averaged over rounds; `None` when no search ran.
    pub fn loss_free_frames_per_s(&self) -> Option<f64> {
        let rounds = &self.round_loss_free_frames_per_s;
        (!rounds.is_empty()).then(|| rounds.iter().sum::<f64>() / rounds.len() as f64)
    }

    pub fn mbit_per_s(&self) -> f64 {
        self.per_second(self.delivered_bytes) * 8.0 / 1e6
    }

    pub fn offered_frames_per_s(&self) -> f64 {
        self.per_second(self.offered_frames)
    }

    /// Cores the engine thread used on average while the senders sent.
    pub fn engine_cores(&self) -> f64 {
        self.per_second_f(self.engine_cpu_s)
    }

    /// CPU time of the engine thread per forwarded frame, in µs.
    pub fn engine_us_per_frame(&self) -> f64 {
        if self.delivered_frames == 0 {
            0.0
        } else {
            self.engine_cpu_s * 1e6 / self.delivered_frames as f64
        }
    }

    /// Cores the sender threads used together.
    pub fn senders_cores(&self) -> f64 {
        self.per_second_f(self.senders_cpu_s)
    }

    fn per_second_f(&self, x: f64) -> f64 {
        if self.seconds > 0.0 {
            x / self.seconds
        } else {
            0.0
        }
    }

    pub fn lost_frames(&self) -> u64 {
        self.offered_frames.saturating_sub(self.delivered_frames)
    }

    /// Lost over offered, 0 when nothing was offered.
    pub fn loss(&self) -> f64 {
        if self.offered_frames == 0 {
            0.0
        } else {
            self.lost_frames() as f64 / self.offered_frames as f64
        }
    }
}

/// One benchmark run: every path on the same topology and load.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// What the policy is (its file, or "built-in").
    pub policy: String,
    pub tenants: usize,
    pub flows_per_tenant: u16,
    pub payload_bytes: u16,
    pub seconds_per_path: f64,
    pub rounds: u32,
    /// Paced trials per path and round of the loss-free search, and its tolerance.
    pub search_steps: u32,
    pub loss_tolerance: f64,
    pub engine_threads: usize,
    /// The engine ran at SCHED_FIFO ([`BenchOptions::engine_realtime`]).
    pub engine_realtime: bool,
    pub paths: Vec<PathResult>,
}

impl BenchReport {
    /// Bytes of each offered frame on the wire (Ethernet header, no FCS).
    pub fn frame_bytes(&self) -> u32 {
        u32::from(self.payload_bytes) + HEADER_BYTES
    }

    /// Plain kernel forwarding in this run, if it ran.
    pub fn kernel(&self) -> Option<&PathResult> {
        self.paths.iter().find(|p| p.kind() == PathKind::Kernel)
    }

    /// `path`'s forwarded frames/s over plain kernel forwarding's in the same run.
    pub fn ratio_to_kernel(&self, path: &PathResult) -> Option<f64> {
        let kernel = self.kernel()?.frames_per_s();
        (kernel > 0.0).then(|| path.frames_per_s() / kernel)
    }

    /// `path`'s loss-free rate over plain kernel forwarding's in the same run.
    pub fn loss_free_ratio_to_kernel(&self, path: &PathResult) -> Option<f64> {
        let kernel = self.kernel()?.loss_free_frames_per_s()?;
        (kernel > 0.0).then_some(path.loss_free_frames_per_s()? / kernel)
    }

    /// A table in the style of the other commands': one row per path.
    pub fn table(&self) -> String {
        let rounds = self.rounds > 1;
        let mut header: Vec<String> = [
            "path",
            "forwarded kframes/s",
            "Mbit/s",
            "vs kernel",
            "offered kframes/s",
            "loss",
            "sender cores",
            "engine cores",
            "engine µs/frame",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if rounds {
            header.insert(2, "rounds min-max".to_string());
        }
        let searched = self
            .paths
            .iter()
            .any(|p| p.loss_free_frames_per_s().is_some());
        if searched {
            header.extend(["loss-free kframes/s".to_string(), "vs kernel".to_string()]);
        }
        let rows: Vec<Vec<String>> = self
            .paths
            .iter()
            .map(|p| {
                let mut row = vec![
                    p.path.clone(),
                    format!("{:.1}", p.frames_per_s() / 1e3),
                    format!("{:.1}", p.mbit_per_s()),
                    self.ratio_to_kernel(p)
                        .map_or_else(|| "-".to_string(), |r| format!("{r:.2}x")),
                    format!("{:.1}", p.offered_frames_per_s() / 1e3),
                    format!("{:.1} %", p.loss() * 100.0),
                    format!("{:.2}", p.senders_cores()),
                ];
                if p.kind() == PathKind::Engine {
                    row.push(format!("{:.2}", p.engine_cores()));
                    row.push(format!("{:.2}", p.engine_us_per_frame()));
                } else {
                    row.extend(["-".to_string(), "-".to_string()]);
                }
                if rounds {
                    let (lo, hi) = p.round_range();
                    row.insert(2, format!("{:.1}-{:.1}", lo / 1e3, hi / 1e3));
                }
                if searched {
                    row.push(
                        p.loss_free_frames_per_s()
                            .map_or_else(|| "-".to_string(), |r| format!("{:.1}", r / 1e3)),
                    );
                    row.push(
                        self.loss_free_ratio_to_kernel(p)
                            .map_or_else(|| "-".to_string(), |r| format!("{r:.2}x")),
                    );
                }
                row
            })
            .collect();
        report::aligned_table(&header, &rows, 1, true)
    }

    pub fn to_json(&self) -> serde_json::Value {
        let paths: Vec<serde_json::Value> = self
            .paths
            .iter()
            .map(|p| {
                let engine = p.engine.as_ref().map(|e| {
                    serde_json::json!({
                        "rx_frames": e.rx_frames,
                        "tx_frames": e.tx_frames,
                        "buffer_drops": e.buffer_drops.iter().sum::<u64>(),
                        "refused": e.refused.iter().sum::<u64>(),
                        "send_busy": e.send_busy,
                        "loops": e.loops,
                        "held_waits": e.held_waits,
                    })
                });
                serde_json::json!({
                    "path": p.path,
                    "kind": p.kind().label(),
                    "seconds": p.seconds,
                    "offered_frames": p.offered_frames,
                    "delivered_frames": p.delivered_frames,
                    "delivered_bytes": p.delivered_bytes,
                    "lost_frames": p.lost_frames(),
                    "loss": p.loss(),
                    "frames_per_s": p.frames_per_s(),
                    "mbit_per_s": p.mbit_per_s(),
                    "offered_frames_per_s": p.offered_frames_per_s(),
                    "ratio_to_kernel": self.ratio_to_kernel(p),
                    "round_frames_per_s": p.round_frames_per_s,
                    "engine_cpu_s": p.engine_cpu_s,
                    "senders_cpu_s": p.senders_cpu_s,
                    "engine_us_per_frame": p.engine_us_per_frame(),
                    "loss_free_frames_per_s": p.loss_free_frames_per_s(),
                    "round_loss_free_frames_per_s": p.round_loss_free_frames_per_s,
                    "loss_free_ratio_to_kernel": self.loss_free_ratio_to_kernel(p),
                    "engine": engine,
                })
            })
            .collect();
        serde_json::json!({
            "policy": self.policy,
            "tenants": self.tenants,
            "flows_per_tenant": self.flows_per_tenant,
            "payload_bytes": self.payload_bytes,
            "frame_bytes": self.frame_bytes(),
            "seconds_per_path": self.seconds_per_path,
            "rounds": self.rounds,
            "search_steps": self.search_steps,
            "engine_threads": self.engine_threads,
            "engine_realtime": self.engine_realtime,
            "loss_tolerance": self.loss_tolerance,
            "paths": paths,
        })
    }
}

/// The policy `nicsched lab-bench` runs when given none: two tenants of weights 1
/// and 3 (every enforcer has two classes to arbitrate).
pub fn default_policy() -> Policy {
    policy::parse_policy(
        "link: { rate: 10Gbit, queues: 4 }\n\
         tenants:\n  \
           - { name: t1, weight: 1, cores: [0, 1] }\n  \
           - { name: t2, weight: 3, cores: [2, 3] }\n",
        "built-in",
    )
    .expect("the built-in policy is valid")
}

/// Threads that run until `stop`; stopped and joined when dropped, so none outlives
/// the namespaces it entered.
struct Threads<T> {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<std::io::Result<T>>>,
}

impl<T> Threads<T> {
    fn new() -> Self {
        Threads {
            stop: Arc::new(AtomicBool::new(false)),
            handles: Vec::new(),
        }
    }

    fn join(mut self, what: &str) -> Result<Vec<T>, LabError> {
        self.stop.store(true, Ordering::SeqCst);
        self.handles
            .drain(..)
            .map(|h| {
                h.join()
                    .map_err(|_| LabError::Datapath(format!("{what}: panicked")))?
                    .map_err(|e| LabError::Datapath(format!("{what}: {e}")))
            })
            .collect()
    }
}

impl<T> Drop for Threads<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Runs `work` on a short-lived thread inside namespace `ns`.
fn in_ns<T: Send + 'static>(
    ns: &str,
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, LabError> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        netns::enter(&ns)?;
        work()
    })
    .join()
    .map_err(|_| LabError::Datapath("a namespace helper thread panicked".into()))?
    .map_err(|e| LabError::Datapath(e.to_string()))
}

fn sink_counters(plan: &topology::Plan) -> Result<RxCounters, LabError> {
    in_ns(&plan.sink_ns, || netns::rx_counters("eth0"))
}

/// Runs every path of `options` on `policy` (`label` names it in the report).
/// `progress` hears the index of the path running (in run order), its name and the
/// fraction of its time done.
pub fn run_bench(
    policy: &Policy,
    label: &str,
    options: &BenchOptions,
    progress: &mut dyn FnMut(usize, &str, f64),
) -> Result<BenchReport, LabError> {
    crate::check_root()?;
    if !(options.seconds.is_finite() && options.seconds > 0.0) {
        return Err(LabError::Unsupported(
            "the seconds per path must be positive".into(),
        ));
    }
    if options.payload_bytes == 0 || options.payload_bytes > PAYLOAD_BYTES_MAX {
        return Err(LabError::Unsupported(format!(
            "a payload of {} bytes: it must be 1 to {PAYLOAD_BYTES_MAX} (one unfragmented IPv4 packet)",
            options.payload_bytes
        )));
    }
    if options.paths.is_empty() || options.flows_per_tenant == 0 {
        return Err(LabError::Unsupported(
            "nothing to run: name at least one path and one flow per tenant".into(),
        ));
    }
    let policy = policy.scaled_to_link_rate(BENCH_LINK_RATE_BPS);
    for path in options
        .paths
        .iter()
        .filter(|p| PathKind::of(p) == PathKind::Engine)
    {
        sched::build(path, &policy).map_err(LabError::Enforcer)?;
    }
    let mut needed = vec!["ip", "ethtool"];
    if options
        .paths
        .iter()
        .any(|p| PathKind::of(p) != PathKind::Engine)
    {
        needed.push("bridge");
    }
    if options.paths.iter().any(|p| sched::registry::in_kernel(p)) {
        crate::htb_limits(&policy).map_err(|e| LabError::Unsupported(e.to_string()))?;
        needed.push("tc");
    }
    if let Some(missing) = needed.iter().find(|p| !crate::program_exists(p)) {
        return Err(LabError::MissingTool {
            program: missing.to_string(),
        });
    }

    let plan = topology::Plan::new(&policy, crate::run_id()?)?;
    let mut dir = crate::RunDir::new(None, &format!("nicsched-lab-bench-{}", plan.prefix));
    std::fs::create_dir_all(&dir.path)
        .map_err(|e| LabError::Io(format!("cannot create {}: {e}", dir.path.display())))?;
    let _signals = sys::signal::SignalGuard::install();
    let mut topology = Topology::create(plan.clone(), false)?;
    let outcome = bench_in(&mut topology, &policy, options, &dir.path, progress);
    dir.keep_if_named_in(&outcome, |_| &[]);
    drop(topology);
    Ok(BenchReport {
        policy: label.to_string(),
        tenants: policy.tenants.len(),
        flows_per_tenant: options.flows_per_tenant,
        payload_bytes: options.payload_bytes,
        seconds_per_path: options.seconds,
        rounds: options.rounds.max(1),
        search_steps: options.search_steps,
        loss_tolerance: options.loss_tolerance,
        engine_threads: options.engine_threads,
        engine_realtime: options.engine_realtime,
        paths: outcome?,
    })
}

fn bench_in(
    topology: &mut Topology,
    policy: &Policy,
    options: &BenchOptions,
    dir: &std::path::Path,
    progress: &mut dyn FnMut(usize, &str, f64),
) -> Result<Vec<PathResult>, LabError> {
    let plan = topology.plan.clone();
    let prefixes: Vec<Prefix> = plan.tenants.iter().map(|t| t.prefix).collect();
    let classifier = Classifier::new(policy, prefixes.clone());
    let sink = SocketAddrV4::new(plan.sink_addr, SINK_PORT);
    let _sink_socket = in_ns(&plan.sink_ns, move || udp::bind_sink(sink))?;

    let mut order: Vec<usize> = (0..options.paths.len()).collect();
    order.sort_by_key(|&i| PathKind::of(&options.paths[i]));
    let mut results: Vec<Option<PathResult>> = vec![None; options.paths.len()];
    let mut step = 0;
    for round in 0..options.rounds.max(1) {
        let mut bridged = false;
        let mut htb = false;
        if round > 0
            && order
                .iter()
                .any(|&i| PathKind::of(&options.paths[i]) != PathKind::Engine)
        {
            topology.remove_bridge()?;
        }
        for &i in &order {
            let path = &options.paths[i];
            let kind = PathKind::of(path);
            if kind != PathKind::Engine && !bridged {
                topology.add_bridge()?;
                netns::exec_in(
                    &plan.engine_ns,
                    "bridge",
                    &[
                        "fdb",
                        "replace",
                        &mac_string(plan.sink_mac),
                        "dev",
                        &plan.uplink,
                        "master",
                        "static",
                    ],
                )
                .map_err(|e| LabError::Setup(e.to_string()))?;
                bridged = true;
            }
            if kind == PathKind::KernelHtb && !htb {
                crate::apply_htb(policy, &plan, &prefixes, dir)?;
                htb = true;
            }
            let mut trial = |offered: Option<f64>, step: usize| {
                run_path(
                    &plan,
                    policy,
                    &classifier,
                    path,
                    options,
                    sink,
                    offered,
                    &mut |fraction| progress(step, path, fraction),
                )
            };
            let first = step;
            let mut result = trial(None, first)?;
            if options.search_steps > 0 {
                let mut probe = first;
                let rate = loss_free_rate(&result, options, |rate| {
                    probe += 1;
                    trial(Some(rate), probe)
                })?;
                result.round_loss_free_frames_per_s.push(rate);
            }
            // Progress counts every trial a path may take, run or not.
            step = first + options.trials_per_path() as usize;
            results[i] = Some(match results[i].take() {
                None => result,
                Some(sum) => sum.merged(result),
            });
        }
    }
    Ok(results
        .into_iter()
        .map(|r| r.expect("every path ran"))
        .collect())
}

#[allow(clippy::too_many_arguments)]
fn run_path(
    plan: &topology::Plan,
    policy: &Policy,
    classifier: &Classifier,
    path: &str,
    options: &BenchOptions,
    sink: SocketAddrV4,
    offered_frames_per_s: Option<f64>,
    progress: &mut dyn FnMut(f64),
) -> Result<PathResult, LabError> {
    let tenants = plan.tenants.len().max(1) as f64;
    // Each sender's pause between two batches of SEND_BATCH datagrams; none
    // (saturating) without a rate.
    let batch_gap_ns =
        offered_frames_per_s.map(|rate| (SEND_BATCH as f64 * tenants * 1e9 / rate.max(1.0)) as u64);
    // Declared first, dropped last: the engine drains what the senders left.
    let engine = spawn_engine(plan, policy, classifier, path, options)?;
    let go = Arc::new(AtomicBool::new(false));
    let senders = spawn_senders(plan, options, sink, batch_gap_ns, &go)?;

    let before = sink_counters(plan)?;
    let t0 = Instant::now();
    go.store(true, Ordering::Release);
    wait_for(t0, options.seconds, progress)?;
    senders.stop.store(true, Ordering::SeqCst);
    let seconds = t0.elapsed().as_secs_f64();
    let sent = senders.join("sender")?;
    let offered_frames: u64 = sent.iter().map(|s| s.0).sum();
    let senders_cpu_ns: u64 = sent.iter().map(|s| s.1).sum();
    progress(1.0);

    let after = sink_counters_drained(plan)?;
    let (engine, engine_cpu_ns) = match engine.join("engine")?.pop() {
        Some((stats, cpu_ns)) => (Some(stats), cpu_ns),
        None => (None, 0),
    };
    let delivered_frames = after.packets - before.packets;
    Ok(PathResult {
        path: path.to_string(),
        seconds,
        round_frames_per_s: vec![delivered_frames as f64 / seconds],
        offered_frames,
        delivered_frames,
        delivered_bytes: after.bytes - before.bytes,
        engine,
        engine_cpu_s: engine_cpu_ns as f64 / 1e9,
        senders_cpu_s: senders_cpu_ns as f64 / 1e9,
        round_loss_free_frames_per_s: Vec::new(),
    })
}

/// nicsched's engine running enforcer `path` in the engine's namespace, for the
/// engine's path; no thread for the kernel's paths. Each thread returns the
/// engine's stats and the CPU time it took.
fn spawn_engine(
    plan: &topology::Plan,
    policy: &Policy,
    classifier: &Classifier,
    path: &str,
    options: &BenchOptions,
) -> Result<Threads<(EngineStats, u64)>, LabError> {
    let mut engine = Threads::new();
    if PathKind::of(path) != PathKind::Engine {
        return Ok(engine);
    }
    let sharded = crate::shards::ShardPlan::new(path, policy, options.engine_threads, false)
        .map_err(LabError::Unsupported)?;
    let config = EngineConfig {
        ports: plan.tenants.iter().map(|t| t.port.clone()).collect(),
        tenant_macs: plan.tenants.iter().map(|t| t.mac).collect(),
        uplink: plan.uplink.clone(),
        link_rate_bps: None,
        buffer: HostBuffer::new(path, policy, options.qdisc)?,
        transmit_threads: options.engine_threads.saturating_sub(1),
        // The benchmark measures the engine's own forwarding, no modelled cost.
        cores: None,
    };
    let (stop, name, policy, classifier, realtime) = (
        engine.stop.clone(),
        path.to_string(),
        policy.clone(),
        classifier.clone(),
        options.engine_realtime,
    );
    engine.handles.push(crate::spawn_worker(
        "nicsched-engine",
        plan.engine_ns.clone(),
        move |ready| {
            // Threads it starts (shards, transmit threads) inherit the policy.
            if realtime && let Err(e) = sys::set_realtime() {
                eprintln!("nicsched lab-bench: the engine runs at normal priority: {e}");
            }
            let cpu_ns = sys::clock::thread_cpu_ns();
            let stats = match &sharded {
                Some(sharded) => {
                    crate::shards::run(sharded, config, classifier, None, &stop, ready)?
                }
                None => {
                    let built = sched::build_with(&name, &policy, config.buffer.capacity)
                        .map_err(|e| std::io::Error::other(e.to_string()))?;
                    Engine::new(config, classifier, &policy, built)?.run(&stop, ready)?
                }
            };
            let cpu_ns =
                sys::clock::thread_cpu_ns() - cpu_ns + stats.transmit_cpu_ns + stats.shard_cpu_ns;
            Ok((stats, cpu_ns))
        },
    )?);
    Ok(engine)
}

/// A UDP sender in each tenant's namespace, ready and waiting for `go`, then
/// sending batches to `sink` (every `batch_gap_ns`, or back to back) until
/// stopped. Each thread returns the datagrams it sent and the CPU time it took.
fn spawn_senders(
    plan: &topology::Plan,
    options: &BenchOptions,
    sink: SocketAddrV4,
    batch_gap_ns: Option<u64>,
    go: &Arc<AtomicBool>,
) -> Result<Threads<(u64, u64)>, LabError> {
    let mut senders = Threads::new();
    for (t, tenant) in plan.tenants.iter().enumerate() {
        let (stop, go) = (senders.stop.clone(), go.clone());
        let (flows, payload_bytes) = (
            usize::from(options.flows_per_tenant),
            usize::from(options.payload_bytes),
        );
        senders.handles.push(crate::spawn_worker(
            &format!("nicsched-send{t}"),
            tenant.ns.clone(),
            move |ready| {
                let sender = UdpSender::connect(sink, flows)?;
                let payload = vec![0u8; payload_bytes];
                ready();
                while !go.load(Ordering::Acquire) {
                    if stop.load(Ordering::Relaxed) {
                        return Ok((0, 0));
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
                let cpu_ns = sys::clock::thread_cpu_ns();
                let mut sent = 0u64;
                let mut flow = 0;
                let mut next_ns = sys::clock::now_ns();
                while !stop.load(Ordering::Relaxed) {
                    if let Some(gap_ns) = batch_gap_ns {
                        sys::clock::sleep_until_ns(next_ns)?;
                        // A sender that fell behind (it waited for a core) does not
                        // make up for more than a few batches at once.
                        next_ns =
                            (next_ns + gap_ns).max(sys::clock::now_ns().saturating_sub(4 * gap_ns));
                    }
                    sent += sender.send_batch(flow, &payload, SEND_BATCH)? as u64;
                    flow = (flow + 1) % sender.flows();
                }
                Ok((sent, sys::clock::thread_cpu_ns() - cpu_ns))
            },
        )?);
    }
    Ok(senders)
}

/// Waits until `seconds` after `t0`, telling `progress` the fraction gone by;
/// an interrupt ends the wait as an error.
fn wait_for(t0: Instant, seconds: f64, progress: &mut dyn FnMut(f64)) -> Result<(), LabError> {
    let duration = Duration::from_secs_f64(seconds);
    loop {
        if sys::signal::interrupted() {
            return Err(LabError::Interrupted);
        }
        let elapsed = t0.elapsed();
        if elapsed >= duration {
            return Ok(());
        }
        progress(elapsed.as_secs_f64() / seconds);
        std::thread::sleep((duration - elapsed).min(Duration::from_millis(50)));
    }
}

/// The sink's counters once nothing more arrives (or after `DRAIN_MAX`): what is
/// still queued on its way (socket buffers, the engine) is delivered, not lost.
fn sink_counters_drained(plan: &topology::Plan) -> Result<RxCounters, LabError> {
    let drain_started = Instant::now();
    let mut after = sink_counters(plan)?;
    loop {
        std::thread::sleep(DRAIN_QUIET);
        let now = sink_counters(plan)?;
        let quiet = now.packets == after.packets;
        after = now;
        if quiet || drain_started.elapsed() >= DRAIN_MAX {
            return Ok(after);
        }
    }
}

/// Where `nicsched lab-bench --out DIR` writes its JSON.
pub fn json_path(dir: &std::path::Path) -> PathBuf {
    dir.join("lab-bench.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(path: &str, offered: u64, delivered: u64) -> PathResult {
        PathResult {
            path: path.to_string(),
            seconds: 2.0,
            round_frames_per_s: vec![delivered as f64 / 2.0],
            offered_frames: offered,
            delivered_frames: delivered,
            delivered_bytes: delivered * 106,
            engine: None,
            engine_cpu_s: 0.0,
            senders_cpu_s: 3.0,
            round_loss_free_frames_per_s: Vec::new(),
        }
    }

    fn report() -> BenchReport {
        BenchReport {
            policy: "built-in".into(),
            tenants: 2,
            flows_per_tenant: 4,
            payload_bytes: 64,
            seconds_per_path: 2.0,
            rounds: 1,
            search_steps: 0,
            loss_tolerance: LOSS_TOLERANCE,
            engine_threads: 1,
            engine_realtime: true,
            paths: vec![
                result("fifo", 2_000_000, 500_000),
                result(KERNEL_FORWARDING, 1_000_000, 1_000_000),
                result("linux-htb", 1_000_000, 800_000),
            ],
        }
    }

    /// A forwarder of `capacity` frames/s that, saturated, is offered `offered`
    /// and forwards only `saturated` (the senders take its cores), for one second.
    fn model_trial(capacity: f64, rate: f64) -> PathResult {
        let offered = rate.round() as u64;
        result(
            "engine",
            offered,
            (rate.min(capacity).round() as u64).min(offered),
        )
    }

    #[test]
    fn the_engine_is_real_time_only_where_it_leaves_a_core() {
        let cores = std::thread::available_parallelism().unwrap().get();
        assert!(
            !engine_realtime_fits(cores),
            "{cores} real-time threads on {cores} cores"
        );
        assert!(!engine_realtime_fits(cores + 1));
        assert_eq!(engine_realtime_fits(cores - 1), cores > 1);
        assert_eq!(BenchOptions::default().engine_realtime, cores > 1);
    }

    #[test]
    fn loss_free_search_bisects_towards_capacity_between_saturated_and_offered() {
        let options = BenchOptions {
            search_steps: 6,
            ..BenchOptions::default()
        };
        // Saturated: 1.2 M offered over 2 s, 200 k/s forwarded; paced, it
        // forwards up to 450 k/s without loss.
        let saturated = result("engine", 2_400_000, 400_000);
        let mut probes = Vec::new();
        let rate = loss_free_rate(&saturated, &options, |rate| {
            probes.push(rate);
            // Paced trials of two seconds, as `result` counts them.
            Ok(model_trial(900_000.0, rate * 2.0))
        })
        .unwrap();
        assert_eq!(probes.len(), 6);
        assert_eq!(
            probes[0], 200_000.0,
            "the first probe is the saturated rate"
        );
        assert!(probes.iter().all(|&p| p <= 1_200_000.0));
        // Six halvings of [200k, 1.2M]: within 1M/64 of the capacity, below it.
        assert!(
            rate <= 450_000.0 && rate > 450_000.0 - 1_000_000.0 / 32.0,
            "{rate}"
        );
    }

    #[test]
    fn loss_free_search_runs_no_trial_for_a_path_that_lost_nothing() {
        let options = BenchOptions::default();
        let saturated = result(KERNEL_FORWARDING, 1_000_000, 999_500);
        let rate = loss_free_rate(&saturated, &options, |_| panic!("no trial")).unwrap();
        assert_eq!(rate, 499_750.0);
    }

    #[test]
    fn loss_free_search_finds_nothing_when_every_probe_loses() {
        let options = BenchOptions::default();
        let saturated = result("engine", 1_000_000, 100_000);
        let rate = loss_free_rate(&saturated, &options, |rate| {
            Ok(model_trial(0.0, rate * 2.0))
        })
        .unwrap();
        assert_eq!(rate, 0.0);
    }

    #[test]
    fn rates_loss_and_ratio_to_kernel() {
        let r = report();
        assert_eq!(r.frame_bytes(), 106);
        let fifo = &r.paths[0];
        assert_eq!(fifo.frames_per_s(), 250_000.0);
        assert_eq!(fifo.offered_frames_per_s(), 1_000_000.0);
        assert_eq!(fifo.mbit_per_s(), 250_000.0 * 106.0 * 8.0 / 1e6);
        assert_eq!(fifo.lost_frames(), 1_500_000);
        assert_eq!(fifo.loss(), 0.75);
        let mut busy = fifo.clone();
        busy.engine_cpu_s = 1.0;
        assert_eq!(busy.engine_cores(), 0.5);
        assert_eq!(busy.engine_us_per_frame(), 2.0);
        assert_eq!(fifo.senders_cores(), 1.5);
        assert_eq!(r.ratio_to_kernel(fifo), Some(0.5));
        assert_eq!(r.ratio_to_kernel(&r.paths[1]), Some(1.0));
        assert_eq!(r.ratio_to_kernel(&r.paths[2]), Some(0.8));
        // No kernel path, or a kernel path that forwarded nothing: no ratio.
        let mut alone = r.clone();
        alone.paths.remove(1);
        assert_eq!(alone.ratio_to_kernel(&alone.paths[0]), None);
        let mut dead = r.clone();
        dead.paths[1].delivered_frames = 0;
        assert_eq!(dead.ratio_to_kernel(&dead.paths[0]), None);
        // Nothing offered: no loss, and never more lost than offered.
        assert_eq!(result("x", 0, 0).loss(), 0.0);
        assert_eq!(result("x", 5, 7).lost_frames(), 0);
    }

    #[test]
    fn table_has_a_row_per_path_in_order() {
        let table = report().table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[0].starts_with("path"));
        assert!(lines[0].contains("forwarded kframes/s") && lines[0].ends_with("engine µs/frame"));
        assert!(lines[1].chars().all(|c| c == '-'));
        assert!(lines[2].starts_with("fifo"), "{table}");
        assert!(lines[2].contains("250.0") && lines[2].contains("0.50x"));
        let cells = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(
            cells(lines[2])[5..],
            ["75.0", "%", "1.50", "0.00", "0.00"],
            "{table}"
        );
        assert!(lines[3].starts_with("kernel") && lines[3].contains("1.00x"));
        assert!(lines[4].starts_with("linux-htb"));
        assert_eq!(
            cells(lines[4])[5..],
            ["20.0", "%", "1.50", "-", "-"],
            "{table}"
        );
        // Columns line up: every row as long as the header.
        let width = |l: &str| l.chars().count();
        assert!(lines.iter().all(|l| width(l) <= width(lines[1])));
    }

    #[test]
    fn rounds_add_up_and_keep_their_spread() {
        let mut r = report();
        let two = result("fifo", 2_000_000, 500_000).merged(result("fifo", 2_000_000, 300_000));
        assert_eq!(two.seconds, 4.0);
        assert_eq!(two.delivered_frames, 800_000);
        assert_eq!(two.frames_per_s(), 200_000.0);
        assert_eq!(two.round_range(), (150_000.0, 250_000.0));
        r.paths[0] = two;
        r.rounds = 2;
        let table = r.table();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("rounds min-max"), "{table}");
        assert!(lines[2].contains("150.0-250.0"), "{table}");
        assert_eq!(r.to_json()["paths"][0]["round_frames_per_s"][1], 150_000.0);
    }

    #[test]
    fn json_carries_every_count_and_the_ratio() {
        let json = report().to_json();
        assert_eq!(json["frame_bytes"], 106);
        assert_eq!(json["tenants"], 2);
        let paths = json["paths"].as_array().unwrap();
        assert_eq!(paths.len(), 3);
        assert_eq!(paths[0]["path"], "fifo");
        assert_eq!(paths[0]["kind"], "engine");
        assert_eq!(paths[0]["offered_frames"], 2_000_000);
        assert_eq!(paths[0]["delivered_frames"], 500_000);
        assert_eq!(paths[0]["lost_frames"], 1_500_000);
        assert_eq!(paths[0]["frames_per_s"], 250_000.0);
        assert_eq!(paths[0]["ratio_to_kernel"], 0.5);
        assert!(paths[0]["engine"].is_null());
        assert_eq!(paths[1]["kind"], "kernel");
        assert_eq!(paths[2]["kind"], "kernel+htb");
    }

    #[test]
    fn engine_paths_run_before_the_kernel_and_htb_last() {
        let engines = default_enforcers().count();
        let mut kinds: Vec<PathKind> = default_paths().iter().map(|p| PathKind::of(p)).collect();
        assert!(kinds[..engines].iter().all(|&k| k == PathKind::Engine));
        kinds.reverse();
        kinds.sort();
        assert_eq!(kinds.last(), Some(&PathKind::KernelHtb));
        assert_eq!(kinds[engines], PathKind::Kernel);
    }

    #[test]
    fn the_default_policy_builds_every_default_enforcer() {
        let policy = default_policy().scaled_to_link_rate(BENCH_LINK_RATE_BPS);
        assert_eq!(policy.tenants.len(), 2);
        for name in default_enforcers() {
            sched::build(name, &policy).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
