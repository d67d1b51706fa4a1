//! `nicsched lab` and `nicsched lab-bench`: their flags, and the call into the
//! run layer (or the lab's benchmark) each makes of them.

use std::path::PathBuf;

use crate::flags::*;
use crate::{Failure, commands, help, live};

#[derive(clap::Args)]
pub(crate) struct LabArgs {
    /// Scenario file.
    #[arg(required_unless_present = "cleanup")]
    scenario: Option<PathBuf>,
    /// Only remove what dead lab runs left behind (their namespaces, veths and
    /// the programs still running in them), one line per thing removed, and exit.
    /// Every run does this first; namespaces kept with --keep are left alone.
    #[arg(long, conflicts_with = "scenario")]
    cleanup: bool,
    /// Enforcer(s) to run, one after the other; may repeat. `linux-htb` runs the
    /// kernel's HTB compiled from the policy. Default: the scenario's `enforcers`.
    #[arg(long = "enforcer", short = 'e', value_name = "NAME")]
    enforcers: Vec<String>,
    /// Output directory. Default: results/SCENARIO-NAME-lab.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Emulated link rate; every rate of the scenario is scaled by the same
    /// factor so the ideal keeps its shape. Default: 1Gbit, or the scenario's
    /// link rate when that is lower. Across hosts: the fastest host link's,
    /// default 250Mbit (docs/hosts.md, "Lab across hosts").
    #[arg(long, value_name = "RATE", value_parser = lab_link_rate)]
    link_rate: Option<u64>,
    /// Leave the namespaces in place after the run (prints how to remove them).
    #[arg(long)]
    keep: bool,
    #[arg(long, value_name = "PACKETS", help = help::queue_limit(), default_value_t = lab::LAB_HOST_LIMITS.queue_packets,
          value_parser = clap::value_parser!(u32).range(1..=HOST_LIMIT_PACKETS_MAX))]
    queue_limit: u32,
    #[arg(long, visible_alias = "tenant-limit", value_name = "PACKETS", help = help::class_limit(),
          value_parser = clap::value_parser!(u32).range(1..=HOST_LIMIT_PACKETS_MAX))]
    class_limit: Option<u32>,
    /// Run the meter and the latency probes (sockperf, memcached) at normal
    /// priority. By default they run at SCHED_FIFO 10, so that on a machine
    /// with few cores they do not wait behind the bulk senders and latency
    /// follows the enforcer, not the CPU scheduler.
    #[arg(long)]
    no_realtime: bool,
    /// Threads of the engine. Under `valve` and `fairnic` (the enforcers that
    /// run per core) each thread receives, classifies, schedules and sends its
    /// own tenants' frames, tenants spread over threads by the enforcer's core
    /// mask for `engine.cores` N (as `nicsched sim` with `engine: { cores: N }`),
    /// the link's pacing shared without a lock. The others are not split by
    /// tenant (`wf2q` orders every tenant by one virtual time, `htb`'s borrowing
    /// needs one view of all tenants, `wheel` has no per-core form yet): one thread
    /// receives, schedules and paces, the rest send its frames on the uplink,
    /// each flow's on one of them. More than one pays where the engine has cores
    /// of its own.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=ENGINE_THREADS_MAX))]
    engine_threads: u16,
    /// Seconds between two live lines: while a run goes, one line per tenant
    /// and a `[sum]` line on stderr, iperf3's way: the time range, its Mbit/s at
    /// the sink (the meter's bytes, as the results count them), its ideal, the
    /// engine's drops meanwhile (`-` under linux-htb). Rounded to a whole number
    /// of the scenario's intervals. Latency p99 comes after each run (sockperf
    /// and memcached report at their end). One-host scenarios only.
    #[arg(long, value_name = "SECONDS", value_parser = live::line_every)]
    interval: Option<u64>,
    /// No live lines (the progress bar stays, unless -q).
    #[arg(long)]
    no_live: bool,
    /// Serve the live figures as Prometheus metrics (OpenMetrics text) at
    /// http://ADDR/metrics while the command runs: per enforcer and tenant,
    /// throughput and ideal of the last line, bytes and drops so far; the run's
    /// progress; latency p99 after each run. A loopback address only
    /// (127.0.0.1:9464, [::1]:9464); port 0 picks a free one, printed as
    /// `metrics: http://ADDR/metrics`. One-host scenarios only.
    #[arg(long, value_name = "ADDR", value_parser = live::loopback_address)]
    metrics_listen: Option<std::net::SocketAddr>,
    /// No progress bars, no live lines.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Print one JSON object instead of the table, as `sim --json` does.
    #[arg(long, conflicts_with = "cleanup")]
    json: bool,
}

#[derive(clap::Args)]
pub(crate) struct LabBenchArgs {
    /// Policy file, or a scenario file (its policy). Default: a built-in policy of
    /// two tenants, weights 1 and 3.
    file: Option<PathBuf>,
    #[arg(long = "enforcer", short = 'e', value_name = "NAME", help = help::lab_bench_enforcers())]
    enforcers: Vec<String>,
    /// Seconds of load per path (per round).
    #[arg(long, value_name = "S", default_value_t = 3.0, value_parser = measured_seconds)]
    seconds: f64,
    /// Run every path this many times, round after round, adding up the counts;
    /// the table then shows each path's lowest and highest round. On a machine
    /// shared with other work give 3 or more, so that its load falls on every
    /// path alike, and read each ratio with its paths' ranges.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=BENCH_ROUNDS_MAX))]
    rounds: u32,
    /// UDP payload of each datagram, in bytes (64 B payload = 106 B frames).
    #[arg(long, value_name = "BYTES", default_value_t = 64,
          value_parser = clap::value_parser!(u16).range(1..=i64::from(lab::PAYLOAD_BYTES_MAX)))]
    size: u16,
    /// UDP flows (source ports) per tenant.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..))]
    flows: u16,
    /// Paced trials per path and round that look for the highest rate it
    /// forwards with at most 0.1% loss (RFC 2544's throughput), by bisection
    /// between its saturated forwarding rate and the saturating offer; a path
    /// that lost nothing saturated needs none. 0: no search (the loss-free
    /// columns are left out).
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(0..=16))]
    search_steps: u32,
    /// Threads of the engine on every engine path, as `nicsched lab
    /// --engine-threads`: `valve` and `fairnic` get a thread per shard, each
    /// receiving and scheduling its tenants; the others one scheduling thread
    /// and N-1 that send. At SCHED_FIFO only while N is below the machine's
    /// cores.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=ENGINE_THREADS_MAX))]
    engine_threads: u16,
    /// Also write the result as DIR/lab-bench.json.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long, short = 'q')]
    quiet: bool,
}

impl LabArgs {
    pub(crate) fn run(self) -> Result<(), Failure> {
        crate::log_to_stderr();
        if self.cleanup {
            return commands::lab_cleanup();
        }
        let Some(scenario) = self.scenario else {
            return Err(Failure::input(
                "nicsched lab: give a scenario file, or --cleanup",
            ));
        };
        run::lab_world::lab(
            &scenario,
            &self.enforcers,
            self.out,
            run::lab_world::LabAsked {
                link_rate: self.link_rate,
                class_limit: self.class_limit,
            },
            lab::LabOptions {
                keep: self.keep,
                realtime: !self.no_realtime,
                qdisc: sched::HostLimits {
                    queue_packets: self.queue_limit,
                    class_packets: self
                        .class_limit
                        .unwrap_or(lab::LAB_HOST_LIMITS.class_packets),
                },
                engine_threads: usize::from(self.engine_threads),
                ..lab::LabOptions::default()
            },
            run::Printing {
                quiet: self.quiet,
                json: self.json,
            },
            &mut commands::LiveAsked {
                interval: self.interval,
                no_live: self.no_live,
                metrics_listen: self.metrics_listen,
                started: None,
            },
        )
    }
}

impl LabBenchArgs {
    pub(crate) fn run(self) -> Result<(), Failure> {
        commands::lab_bench(
            self.file.as_deref(),
            &self.enforcers,
            self.seconds,
            self.rounds,
            self.size,
            self.flows,
            self.search_steps,
            usize::from(self.engine_threads),
            self.out,
            self.json,
            self.quiet,
        )
    }
}
