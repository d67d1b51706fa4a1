//! `nicsched`: the command line. Only wiring: parsing lives in `policy`, mechanisms in
//! `sched`, the simulator in `sim`, figures in `report`.

use clap::{Parser, Subcommand};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use policy::{Policy, PolicyError, Scenario};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod jobs;
mod live;
mod output;
mod report_page;
mod sweep;

#[global_allocator]
static ALLOCATOR: sched::bench::CountingAllocator = sched::bench::CountingAllocator;

/// Exit status for a bad policy, scenario or command line (as clap uses for usage).
const EXIT_INPUT: u8 = 2;
const EXIT_FAILURE: u8 = 1;
/// Everything was written, but a run's self-checks failed: its figures are flagged.
const EXIT_CHECKS_FAILED: u8 = 3;
/// `compare --baseline`: a figure got worse than the baseline's beyond its threshold,
/// or something the baseline had is missing or silent.
const EXIT_REGRESSED: u8 = 4;
/// 128 + SIGINT, as a shell reports a command a signal stopped.
const EXIT_INTERRUPTED: u8 = 130;
/// The kernel's HTB compiled from the policy: there is no model of it to simulate.
const LAB_ONLY_ENFORCER: &str = lab::LINUX_HTB;
/// The lab's emulated link when the scenario's is faster: what one engine thread
/// forwards on a small machine.
const LAB_LINK_RATE_BPS_DEFAULT: u64 = 1_000_000_000;
/// The slowest emulated link of the lab: below it a full-sized frame takes longer
/// on the wire than TCP waits before it retransmits.
const LAB_LINK_RATE_BPS_MIN: u64 = 1_000_000;
/// `--queue-limit` and `--class-limit`: the engine holds room for every packet the
/// limits admit, per Tx queue or per app, so they size its memory.
const HOST_LIMIT_PACKETS_MAX: i64 = 65_536;
/// `bench --classes`: an enforcer holds a few hundred bytes per class (measured:
/// up to about 240), so a million stays well inside a gigabyte.
const BENCH_CLASSES_MAX: i64 = 1_000_000;
/// `--engine-threads` of `lab` and `lab-bench`.
const ENGINE_THREADS_MAX: i64 = 64;

/// `--seconds` of `bench` and `lab-bench`: a measurement, not a soak test.
const MEASURED_SECONDS_MAX: f64 = 600.0;
const LAB_BENCH_ROUNDS_MAX: i64 = 100;

fn lab_link_rate(text: &str) -> Result<u64, String> {
    let bps = policy::parse_rate(text)?;
    let max = policy::limits::RATE_BPS_MAX;
    if (LAB_LINK_RATE_BPS_MIN..=max).contains(&bps) {
        Ok(bps)
    } else {
        Err(format!(
            "{} is outside {}..={}",
            policy::format_rate(bps as f64),
            policy::format_rate(LAB_LINK_RATE_BPS_MIN as f64),
            policy::format_rate(max as f64)
        ))
    }
}

fn measured_seconds(text: &str) -> Result<f64, String> {
    seconds_up_to(text, MEASURED_SECONDS_MAX)
}

/// A flag's seconds: a number above 0 and at most `max`.
fn seconds_up_to(text: &str, max: f64) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= max => Ok(s),
        _ => Err(format!("seconds are a number above 0 and at most {max}")),
    }
}

#[derive(Parser)]
#[command(
    name = "nicsched",
    version,
    about = "Compare multi-tenant egress enforcement mechanisms on one policy",
    long_about = "nicsched enforces hierarchical multi-tenant policies (weights, priorities, \
guarantees, caps, buffer caps) on a host's egress link and compares enforcement \
mechanisms on the same traffic.\n\n\
Start with:\n  \
nicsched check scenarios/tonic/policy-equal.yaml --enforcer tonic\n  \
nicsched explain scenarios/tonic/policy-weighted-case1.yaml\n  \
nicsched sim scenarios/tonic/asymmetry-1-8.yaml\n\n\
Formats: docs/policy.md and docs/scenario.md in the repository (enforcers: docs/enforcers.md); \
examples in scenarios/."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a policy (or a scenario's policy) and say how enforcers render it.
    ///
    /// Exit status 0 when valid, 2 with `FILE:LINE:COLUMN: error: ...` when not.
    Check {
        /// Policy file, or a scenario file (its policy is checked).
        file: PathBuf,
        /// Enforcer(s) to explain the policy for; may repeat; `all` for every
        /// one. Default: tonic.
        #[arg(long = "enforcer", short = 'e', value_name = "NAME")]
        enforcers: Vec<String>,
        /// Print one JSON object instead of text (docs/json.md); errors stay
        /// text on stderr.
        #[arg(long)]
        json: bool,
    },
    /// Print the class tree and the ideal allocation for a set of active classes.
    Explain {
        /// Policy file, or a scenario file (its policy is explained).
        file: PathBuf,
        /// Backlogged classes: `tenant` (all its apps), `tenant/app`, `tenant/app*N`
        /// (N flows, for split apps), comma separated. Default: every app.
        #[arg(long, value_name = "LIST")]
        active: Option<String>,
        /// Print one JSON object instead of text (docs/json.md): the class tree
        /// and the ideal of each phase.
        #[arg(long)]
        json: bool,
    },
    /// Simulate a scenario under one or more enforcers and write the results.
    ///
    /// Writes DIR/ENFORCER/{summary.json,timeseries.csv,latency.csv,*.png},
    /// DIR/report.html and DIR/overlay_*.png (every enforcer on shared axes), and
    /// prints a comparison table. DIR gets a whole run or
    /// none: the files move in once all are written, listed in
    /// DIR/nicsched-run.json; while a run writes DIR, another is refused.
    Sim {
        /// Scenario file.
        scenario: PathBuf,
        /// Enforcer(s) to run; may repeat. Default: the scenario's `enforcers`.
        #[arg(long = "enforcer", short = 'e', value_name = "NAME")]
        enforcers: Vec<String>,
        /// Output directory. Default: results/SCENARIO-NAME.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Seed of the run (thread placement, random arrivals). Default: the scenario's.
        #[arg(long, value_name = "N")]
        seed: Option<u64>,
        /// No progress bars.
        #[arg(long, short = 'q')]
        quiet: bool,
        /// Enforcers simulated at once. Default: one per core.
        #[arg(long, short = 'j', value_name = "N",
              value_parser = clap::value_parser!(u16).range(1..=jobs::JOBS_MAX))]
        jobs: Option<u16>,
        /// Print one JSON object instead of the table (docs/json.md): where the
        /// results are and every run's summary.json. Progress and notes stay on
        /// stderr; the exit status is the same (3: a self-check failed).
        #[arg(long)]
        json: bool,
    },
    /// Simulate a scenario over a grid: values of its keys × seeds × enforcers.
    ///
    /// Each --set KEY=V1,V2,... sweeps one key of the scenario (a dotted path:
    /// `duration`, `policy.link.rate`, `policy.tenants.vm1.weight`, `traffic.0.rate`;
    /// a list is entered by index from 0 or by an entry's name); several --set make
    /// the cross product; two keys that reach one value, or a key no run takes (it
    /// changes nothing, or the scenario overrides it), are refused. Every value is
    /// checked by the scenario parser before anything runs. Writes DIR/sweep.csv
    /// (one row per run), DIR/sweep.json and PNGs against the first key of the
    /// fairness figures and of the tenants' shares and p99s that vary most (mean
    /// over seeds, bars from the lowest to the highest seed's), and prints the
    /// table. Exit status 3 when a run's
    /// self-checks failed (flagged in the table and sweep.csv).
    ///
    /// Example: `nicsched sweep scenarios/flowvalve/borrowing.yaml --set
    /// policy.tenants.vm2.weight=1,2,4 --seeds 1..3 -j 2`.
    Sweep {
        /// Scenario file (of one host).
        #[arg(required_unless_present = "merge")]
        scenario: Option<PathBuf>,
        /// KEY=V1,V2,...: a key of the scenario and the values it takes; may repeat.
        #[arg(
            long = "set",
            value_name = "KEY=V1,V2,...",
            required_unless_present = "merge"
        )]
        sets: Vec<String>,
        /// Seeds of each setting: FIRST..LAST (inclusive) or a list, e.g. 3,7.
        /// Default: the scenario's.
        #[arg(long, value_name = "SEEDS")]
        seeds: Option<String>,
        /// Enforcer(s) to run; may repeat; `all` for every one. Default: the
        /// scenario's `enforcers`.
        #[arg(long = "enforcer", short = 'e', value_name = "NAME")]
        enforcers: Vec<String>,
        /// Runs at once. Default: one per core.
        #[arg(long, short = 'j', value_name = "N",
              value_parser = clap::value_parser!(u16).range(1..=jobs::JOBS_MAX))]
        jobs: Option<u16>,
        /// Output directory. Default: results/SCENARIO-NAME-sweep.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// No progress bar.
        #[arg(long, short = 'q')]
        quiet: bool,
        /// Run only part K of N of the grid (K from 0; run i of the grid is part
        /// i mod N's) and write that part's folder to --out, for --merge. E.g. in
        /// a Slurm array job: --shard "$SLURM_ARRAY_TASK_ID/N".
        #[arg(long, value_name = "K/N", requires = "out",
              value_parser = sweep::shard::Part::parse)]
        shard: Option<sweep::shard::Part>,
        /// Join the folders of every part of one sweep (--shard K/N, K = 0..N-1)
        /// into the files the sweep run whole writes.
        #[arg(long, value_name = "DIR", num_args = 1..,
              conflicts_with_all = ["scenario", "sets", "seeds", "enforcers", "shard"])]
        merge: Vec<PathBuf>,
    },
    /// Run a scenario on real frames: tenants in network namespaces running iperf3
    /// and sockperf, every frame forwarded through the enforcer at an emulated line
    /// rate, or through the kernel's HTB for `linux-htb`. Needs root.
    ///
    /// Writes the same results as `sim` (with "mode": "lab"). Everything the run
    /// creates (namespaces, veths, qdiscs) is removed on success, failure and Ctrl-C;
    /// a run killed outright takes its programs with it, and the next run (or
    /// `--cleanup`) removes its namespaces. Install the programs first with
    /// scripts/setup-lab.sh.
    Lab {
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
        /// The host's qdisc limit per Tx queue, in packets, in front of the
        /// multiqueue NIC model (`fifo`, `hash`, `xps`, `tonic`, `tonic-band`): a
        /// packet that finds its queue full is dropped and counted against its
        /// tenant, as `txqueuelen` drops it on a host.
        #[arg(long, value_name = "PACKETS", default_value_t = lab::LAB_HOST_LIMITS.queue_packets,
              value_parser = clap::value_parser!(u32).range(1..=HOST_LIMIT_PACKETS_MAX))]
        queue_limit: u32,
        /// The packets each app (leaf class, its split classes together) may hold in
        /// the engine in front of the software schedulers (`wf2q`, `valve`, `htb`,
        /// `wheel`, `picnic`, `picnic-wc`, `picnic-bps`, `fairnic`), which replace the qdiscs: as HTB's leaves each have a
        /// qdisc of their own. A packet beyond it is dropped and counted against its tenant.
        /// Default: 128 on one host; across hosts the simulator's 1000, since a flood
        /// the wheel lets hold its horizon would fill 128 and refuse a TCP flow of
        /// the same app (docs/results/lab.md, "Where sim and lab agree").
        #[arg(long, visible_alias = "tenant-limit", value_name = "PACKETS",
              value_parser = clap::value_parser!(u32).range(1..=HOST_LIMIT_PACKETS_MAX))]
        class_limit: Option<u32>,
        /// Run the meter and the latency probes (sockperf, memcached) at normal
        /// priority. By default they run at SCHED_FIFO 10, so that on a machine
        /// with few cores they do not wait behind the bulk senders and latency
        /// follows the enforcer, not the CPU scheduler.
        #[arg(long)]
        no_realtime: bool,
        /// Threads of the engine: one receives, schedules and paces; the others
        /// send its frames on the uplink, each flow's on one of them (where the
        /// sink's receive is run, in the send). More than one pays where the engine
        /// has cores of its own.
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
    },
    /// Measure the lab's engine: frames per second it forwards under `fifo` and each
    /// enforcer, against the kernel forwarding the same frames, in one run. Needs root.
    ///
    /// Builds the lab's namespaces (a sender per tenant, the engine namespace, the
    /// sink), offers a fixed, saturating load of small UDP datagrams (one Rust
    /// thread per tenant, FLOWS connected sockets each, `sendmmsg` of 64 at a time,
    /// no pause), and forwards it once per path: the engine unpaced (no emulated
    /// link; the policy's rates scaled to 100 Gbit/s so no shaper holds a frame)
    /// under each enforcer, then a Linux bridge between the same veths (`kernel`,
    /// no qdisc) and the bridge with the policy compiled to HTB on the uplink
    /// (`linux-htb`). Everything is removed afterwards, also on failure and Ctrl-C.
    ///
    /// Reading the table: "forwarded kframes/s" counts frames the sink's interface
    /// received, per second of sending; "Mbit/s" their bytes (Ethernet header
    /// included); "vs kernel" = forwarded frames/s over `kernel`'s in the same run;
    /// "offered kframes/s" what the senders got into their kernel; "loss" = 1 −
    /// forwarded / offered (dropped in the veths' backlog, the engine's socket
    /// buffer or its per-tenant bound). The senders, the forwarder and the sink's
    /// receive share the machine's cores: the kernel paths forward inside the
    /// senders' own `sendmmsg` calls, the engine on a thread of its own, so the
    /// numbers compare forwarding costs on this machine, not NIC line rates.
    /// "loss-free kframes/s" is the highest rate forwarded with at most 0.1% loss
    /// under paced senders (`--search-steps`): the saturating offer makes senders
    /// spend cores on frames a forwarder of its own then drops, which the kernel
    /// paths never see.
    ///
    /// Example: `sudo nicsched lab-bench -e fifo -e tonic --seconds 3`.
    LabBench {
        /// Policy file, or a scenario file (its policy). Default: a built-in policy of
        /// two tenants, weights 1 and 3.
        file: Option<PathBuf>,
        /// Engine path(s) to run, one per enforcer; may repeat. `kernel` and
        /// `linux-htb` name the kernel paths. Default: fifo, tonic, wf2q, valve,
        /// htb, wheel. `kernel`, the base of "vs kernel", always runs; `linux-htb`
        /// runs by default or when named.
        #[arg(long = "enforcer", short = 'e', value_name = "NAME")]
        enforcers: Vec<String>,
        /// Seconds of load per path (per round).
        #[arg(long, value_name = "S", default_value_t = 3.0, value_parser = measured_seconds)]
        seconds: f64,
        /// Run every path this many times, round after round, adding up the counts;
        /// the table then shows each path's lowest and highest round. On a machine
        /// shared with other work, 3 or more make the paths' ratios trustworthy.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=LAB_BENCH_ROUNDS_MAX))]
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
        /// Threads of the engine on every engine path (as `nicsched lab
        /// --engine-threads`).
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
    },
    /// Print the policy compiled to Linux HTB for device DEV, a script for `sh -e`
    /// (its `tc` commands in one `tc -batch`): the same compilation `nicsched lab -e
    /// linux-htb` applies. The script replaces the device's root qdisc, so it may be
    /// applied again; every tenant needs a `match.src`, IPv4 or IPv6 (the filters
    /// classify by source address).
    Tc {
        /// Policy file, or a scenario file (its policy is compiled).
        file: PathBuf,
        /// The egress device the classes go on (an interface name: 1 to 15 of
        /// A-Z a-z 0-9 _ . : @ -).
        #[arg(long, value_name = "DEV")]
        dev: String,
    },
    /// Measure an enforcer's cost on this machine: enqueue+dequeue pairs per second
    /// on one core and bytes of state per class, on a two-level tree (16 tenants,
    /// classes split by destination) with the active classes backlogged.
    ///
    /// Sizes a host: `nicsched bench -e wf2q --classes 100000 --active 0.01`.
    /// With `--vs rte_sched`, DPDK's QoS scheduler runs the same load in the same
    /// run (build it first with scripts/setup.sh).
    ///
    /// With `--threads N`, the same load is then driven from N threads for as long
    /// again, and the speedup over the one-thread rate of the same run is reported.
    /// `fairnic` runs as FairNIC's distributed tokens: one engine core per thread,
    /// each with its own tenants' queues and local buckets, sharing only the
    /// overflow pool through atomics. Every other enforcer is single-threaded, as the
    /// lab's engine thread is: N producer threads prepare packets and hand them over
    /// in batches to the enforcer's own thread, which enqueues and dequeues (N + 1
    /// threads in all).
    Bench {
        /// Enforcer to measure.
        #[arg(long = "enforcer", short = 'e', value_name = "NAME")]
        enforcer: String,
        /// Number of classes (rounded up to a multiple of 16).
        #[arg(long, value_name = "N",
              value_parser = clap::value_parser!(u32).range(1..=BENCH_CLASSES_MAX))]
        classes: u32,
        /// Fraction of the classes that are backlogged.
        #[arg(long, value_name = "F", default_value_t = 1.0)]
        active: f64,
        /// Wall-clock seconds to measure for.
        #[arg(long, value_name = "S", default_value_t = 1.0, value_parser = measured_seconds)]
        seconds: f64,
        /// Also measure a peer scheduler in the same run: `rte_sched`.
        #[arg(long, value_name = "PEER")]
        vs: Option<String>,
        /// Threads driving the enforcer after the one-thread measurement (1: only
        /// that measurement). fairnic needs a backlogged class on every engine core:
        /// at most 16 threads (one per tenant of the tree).
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u16).range(1..=sched::bench::THREADS_MAX as i64))]
        threads: u16,
        /// Print one JSON object instead of a sentence.
        #[arg(long)]
        json: bool,
    },
    /// Put runs side by side: the simulator against the lab, one seed against
    /// another. One row per run: utilization, Jain's index, relative error, each
    /// tenant's Mbit/s against its ideal, and each latency traffic's p99.
    ///
    /// Example: `nicsched sim S.yaml --out r/sim; nicsched lab S.yaml --out r/lab;
    /// nicsched compare r/sim r/lab`.
    ///
    /// With `--baseline OLD`, each run is matched with OLD's run of the same
    /// scenario, enforcer and mode, and every figure is shown against it. A figure
    /// regresses when it got worse by more than its threshold: Jain's index
    /// (`jain`) down relative to the baseline, relative error (`rel_error`) up and
    /// utilization down in absolute fractions, a tenant's throughput
    /// (`throughput`) further from its ideal by that fraction of the ideal, a
    /// latency p99 (`p99`) or the drops (`drops`) up relative to the baseline.
    /// What the baseline had and NEW lacks regresses too: a run, tenant, app or
    /// traffic missing, or silent (0 bit/s, no request answered) where the
    /// baseline's was not, unless named with `--expect-missing`. Exit status 4
    /// when anything regressed; what only NEW has is listed, not judged
    /// (docs/json.md, "Against a baseline").
    ///
    /// Example: `nicsched sim S.yaml --out old; (change the policy or the code);
    /// nicsched sim S.yaml --out new; nicsched compare new --baseline old`.
    Compare {
        /// Results folders (the --out of sim or lab), run folders, or summary.json
        /// files, of complete runs only (checked against their nicsched-run.json).
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// Print a Markdown table (for docs and issues) instead of aligned text.
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
        /// Print one JSON object instead of the table (docs/json.md).
        #[arg(long)]
        json: bool,
        /// The runs to compare against, given as RESULTS are; may repeat.
        #[arg(long, value_name = "DIR")]
        baseline: Vec<PathBuf>,
        /// How much worse a figure may get before it regresses: `X` for every
        /// figure, `KIND=X` for one of jain, rel_error, utilization, throughput,
        /// p99, drops; may repeat, later ones win. Default: 0.05 for each.
        #[arg(long, value_name = "[KIND=]X", requires = "baseline")]
        threshold: Vec<String>,
        /// Something the baseline had that NEW may lack or leave silent, as the
        /// change intends: a tenant (and its apps), `TENANT/APP`, a traffic, or a
        /// run as `SCENARIO/ENFORCER/MODE`; may repeat. Anything else missing or
        /// silent is a regression.
        #[arg(long, value_name = "NAME", requires = "baseline")]
        expect_missing: Vec<String>,
    },
    /// Overlay runs on one report.html: sim and lab runs of a scenario, or two
    /// seeds, each enforcer's throughput against the ideal on shared axes.
    ///
    /// Example: `nicsched sim S.yaml --out r/sim; nicsched lab S.yaml --out r/lab;
    /// nicsched report r/sim r/lab --out r/sim-vs-lab.html`.
    Report {
        /// Results folders (the --out of sim or lab), run folders, or summary.json
        /// files, of complete runs only (checked against their nicsched-run.json).
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// The page to write: outside every run's folder, over no file but a page
        /// nicsched wrote. Default, for one results folder: FOLDER.html beside
        /// it; required for several.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// List the enforcers and the mechanism each implements.
    Enforcers {
        /// Print the Markdown table README.md carries.
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
        /// Print one JSON object whose `enforcers` lists one object per enforcer:
        /// name, from, mechanism, nic_model (it drives the multiqueue NIC model,
        /// behind a qdisc per Tx queue), lab_bench (lab-bench runs it by
        /// default), lab_only (docs/json.md).
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    // A reader that closes early (`nicsched sim ... | head`) ends the program quietly,
    // as it does any Unix filter, rather than making a print panic.
    // SAFETY: at the start of main, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Check {
            file,
            enforcers,
            json,
        } => check(&file, &enforcers, json),
        Command::Explain { file, active, json } => explain(&file, active.as_deref(), json),
        Command::Sim {
            scenario,
            enforcers,
            out,
            seed,
            jobs,
            quiet,
            json,
        } => simulate(
            &scenario,
            &enforcers,
            out,
            seed,
            jobs.map(usize::from),
            Printing { quiet, json },
        ),
        Command::Sweep {
            scenario: None,
            merge,
            jobs,
            out,
            quiet,
            ..
        } => sweep::shard::merge(merge, jobs.map(usize::from), out, quiet),
        Command::Sweep {
            scenario: Some(scenario),
            sets,
            seeds,
            enforcers,
            jobs,
            out,
            quiet,
            shard,
            merge: _,
        } => sweep::sweep(sweep::SweepArgs {
            scenario,
            sets,
            seeds,
            enforcers,
            jobs: jobs.map(usize::from),
            out,
            quiet,
            plan: sweep::shard::Plan::of(shard),
        }),
        Command::Lab { cleanup: true, .. } => lab_cleanup(),
        Command::Lab {
            scenario: Some(scenario),
            cleanup: false,
            enforcers,
            out,
            link_rate,
            keep,
            queue_limit,
            class_limit,
            no_realtime,
            engine_threads,
            interval,
            no_live,
            metrics_listen,
            quiet,
            json,
        } => run_lab(
            &scenario,
            &enforcers,
            out,
            LabAsked {
                link_rate,
                class_limit,
            },
            lab::LabOptions {
                keep,
                realtime: !no_realtime,
                qdisc: sched::HostLimits {
                    queue_packets: queue_limit,
                    class_packets: class_limit.unwrap_or(lab::LAB_HOST_LIMITS.class_packets),
                },
                engine_threads: usize::from(engine_threads),
                ..lab::LabOptions::default()
            },
            Printing { quiet, json },
            LiveAsked {
                interval,
                no_live,
                metrics_listen,
            },
        ),
        Command::Lab { scenario: None, .. } => Err(Failure::input(
            "nicsched lab: give a scenario file, or --cleanup",
        )),
        Command::LabBench {
            file,
            enforcers,
            seconds,
            rounds,
            size,
            flows,
            search_steps,
            engine_threads,
            out,
            json,
            quiet,
        } => lab_bench(
            file.as_deref(),
            &enforcers,
            seconds,
            rounds,
            size,
            flows,
            search_steps,
            usize::from(engine_threads),
            out,
            json,
            quiet,
        ),
        Command::Tc { file, dev } => load_policy_or_scenario(&file).and_then(|policy| {
            let script = lab::tc_script(&policy, &dev).map_err(|e| match e {
                lab::TcScriptError::Device(_) => Failure::input(e.to_string()),
                _ => htb_refusal(&file.display(), e),
            })?;
            print!("{script}");
            Ok(())
        }),
        Command::Bench {
            enforcer,
            classes,
            active,
            seconds,
            vs,
            threads,
            json,
        } => bench(
            &sched::bench::BenchConfig {
                enforcer,
                classes,
                active_fraction: active,
                seconds,
                threads: usize::from(threads),
            },
            vs.as_deref(),
            json,
        ),
        Command::Compare {
            results,
            markdown,
            json,
            baseline,
            threshold,
            expect_missing,
        } => compare(
            &results,
            &baseline,
            &threshold,
            &expect_missing,
            markdown,
            json,
        ),
        Command::Report { results, out } => report_page::report(&results, out),
        Command::Enforcers { markdown, json } => {
            let listed = listed_enforcers();
            if json {
                output::print_json(&serde_json::json!({ "enforcers": listed }));
            } else if markdown {
                print!("{}", enforcers_markdown(&listed));
            } else {
                print!("{}", enforcers_text(&listed));
            }
            Ok(())
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}

struct Failure {
    message: String,
    status: u8,
}

/// A line of `nicsched enforcers`.
#[derive(serde::Serialize)]
struct Listed {
    name: &'static str,
    from: &'static str,
    mechanism: &'static str,
    nic_model: bool,
    lab_bench: bool,
    lab_only: bool,
}

/// sched's registry, the kernel's HTB the lab runs included.
fn listed_enforcers() -> Vec<Listed> {
    sched::ENFORCERS
        .iter()
        .map(|e| Listed {
            name: e.name,
            from: e.from,
            mechanism: e.mechanism,
            nic_model: e.nic().is_some(),
            lab_bench: e.is_default(sched::registry::World::LabBench),
            lab_only: !e.is_built(),
        })
        .collect()
}

fn enforcers_text(listed: &[Listed]) -> String {
    listed
        .iter()
        .map(|e| {
            let lab_only = if e.lab_only { " (lab only)" } else { "" };
            format!("{:<11} {:<20} {}{lab_only}\n", e.name, e.from, e.mechanism)
        })
        .collect()
}

fn enforcers_markdown(listed: &[Listed]) -> String {
    let mut table = String::from(
        "| enforcer | from | mechanism | host queues in front of it | lab-bench runs it by default |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for e in listed {
        let mechanism = if e.lab_only {
            format!("{} (lab only)", e.mechanism)
        } else {
            e.mechanism.to_string()
        };
        let queues = match (e.lab_only, e.nic_model) {
            (true, _) => "the kernel's",
            (false, true) => "a qdisc per Tx queue (`--queue-limit`)",
            (false, false) => "one per app (`--class-limit`)",
        };
        let lab_bench = if e.lab_bench { "yes" } else { "no" };
        table += &format!(
            "| `{}` | {} | {mechanism} | {queues} | {lab_bench} |\n",
            e.name, e.from
        );
    }
    table
}

impl Failure {
    fn input(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            status: EXIT_INPUT,
        }
    }

    fn runtime(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            status: EXIT_FAILURE,
        }
    }

    /// A lab run's error; an interrupted run exits as a stopped command does.
    fn lab(context: &str, error: lab::LabError) -> Self {
        Failure {
            status: match error {
                lab::LabError::Interrupted => EXIT_INTERRUPTED,
                _ => EXIT_FAILURE,
            },
            message: format!("{context}: {error}"),
        }
    }
}

impl From<PolicyError> for Failure {
    fn from(error: PolicyError) -> Self {
        Failure::input(error.to_string())
    }
}

fn load_all_summaries(paths: &[PathBuf]) -> Result<Vec<report::Summary>, Failure> {
    let mut runs = Vec::new();
    for path in paths {
        runs.extend(report::load_summaries(path).map_err(|e| Failure::input(e.to_string()))?);
    }
    Ok(runs)
}

fn compare(
    results: &[PathBuf],
    baseline: &[PathBuf],
    thresholds: &[String],
    expect_missing: &[String],
    markdown: bool,
    json: bool,
) -> Result<(), Failure> {
    let runs = load_all_summaries(results)?;
    if baseline.is_empty() {
        if json {
            output::print_json(&output::Compared {
                runs: &runs,
                baseline: None,
            });
        } else {
            print!("{}", report::side_by_side(&runs, markdown));
        }
        return Ok(());
    }
    let mut limits = report::Thresholds::default();
    for setting in thresholds {
        limits
            .apply(setting)
            .map_err(|e| Failure::input(format!("--threshold {setting}: {e}")))?;
    }
    let baseline_runs = load_all_summaries(baseline)?;
    let compared = report::against_baseline(&runs, &baseline_runs, &limits, expect_missing);
    if compared.runs.is_empty() {
        return Err(Failure::input(
            "nicsched compare --baseline: no run matches a baseline run by scenario, enforcer and mode; give the --out of the same scenario's sim (or lab) for both",
        ));
    }
    if json {
        output::print_json(&output::Compared {
            runs: &runs,
            baseline: Some(&compared),
        });
    } else {
        print!("{}", compared.table(markdown));
    }
    if compared.regressed() {
        return Err(Failure {
            message: format!(
                "regressed against the baseline (worse beyond the threshold, or missing or silent; --expect-missing NAME for what is meant to be): {}",
                compared.regressions.join(", ")
            ),
            status: EXIT_REGRESSED,
        });
    }
    Ok(())
}

/// A file with a top-level `traffic` key is a scenario; anything else a policy.
fn looks_like_scenario(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .map(|text| text.lines().any(|l| l.starts_with("traffic:")))
        .unwrap_or(false)
}

/// A scenario for `sim` or `lab`; a policy given in its place is named as such,
/// not reported as a scenario with unknown keys.
fn load_scenario_to_run(path: &Path) -> Result<policy::AnyScenario, Failure> {
    policy::load_any_scenario(path, &lab::enforcer_names()).map_err(|error| {
        if !looks_like_scenario(path) && policy::load_policy(path).is_ok() {
            Failure::input(format!(
                "{}: this is a policy, not a scenario: a scenario gives a policy (`policy:` or `hosts:`), a `duration` and the `traffic` offered to it (docs/scenario.md); `nicsched explain {}` shows this policy's ideal",
                path.display(),
                path.display()
            ))
        } else {
            error.into()
        }
    })
}

/// `-e all` names every enforcer of the registry, and `linux-htb` where the
/// command runs it (`with_linux_htb`).
fn expand_all(enforcers: &[String], with_linux_htb: bool) -> Vec<String> {
    if !enforcers.iter().any(|name| name == "all") {
        return enforcers.to_vec();
    }
    sched::ENFORCERS
        .iter()
        .filter(|e| with_linux_htb || e.is_built())
        .map(|e| e.name.to_string())
        .collect()
}

fn load_policy_or_scenario(path: &Path) -> Result<Policy, Failure> {
    if looks_like_scenario(path) {
        Ok(policy::load_scenario(path, &lab::enforcer_names())?.policy)
    } else {
        Ok(policy::load_policy(path)?)
    }
}

/// A policy `nicsched tc` or the lab's `linux-htb` cannot compile, as `source: error: ...`.
fn htb_refusal(source: &dyn std::fmt::Display, error: lab::TcScriptError) -> Failure {
    Failure::input(format!("{source}: error: {error}"))
}

fn check(path: &Path, enforcers: &[String], json: bool) -> Result<(), Failure> {
    let checked = checked(path, enforcers)?;
    if json {
        output::print_json(&checked);
    } else {
        print!("{checked}");
    }
    Ok(())
}

fn checked(path: &Path, enforcers: &[String]) -> Result<output::Checked, Failure> {
    let file = path.display().to_string();
    if let Ok(policy::AnyScenario::Hosts(scenario)) =
        policy::load_any_scenario(path, &lab::enforcer_names())
    {
        // linux-htb runs on one host's link only.
        let enforcers = &expand_all(enforcers, false)[..];
        let names = if enforcers.is_empty() {
            &scenario.enforcers[..]
        } else {
            enforcers
        };
        for name in names {
            for host in &scenario.hosts {
                sched::build(name, &host.policy)
                    .map_err(|e| Failure::input(format!("host {}: {e}", host.name)))?;
            }
        }
        return Ok(output::Checked {
            file,
            across_hosts: true,
            subject: output::CheckedSubject::Hosts {
                hosts: scenario.hosts.len(),
                vms: scenario.vms().len(),
                traffic: scenario.traffic.len(),
            },
            enforcers: names
                .iter()
                .map(|name| output::CheckedEnforcer {
                    name: name.clone(),
                    approximation: None,
                    bounds: None,
                })
                .collect(),
        });
    }
    let enforcers = &expand_all(enforcers, true)[..];
    let policy = load_policy_or_scenario(path)?;
    let default = ["tonic".to_string()];
    let enforcers = if enforcers.is_empty() {
        &default[..]
    } else {
        enforcers
    };
    if enforcers.iter().any(|name| name == LAB_ONLY_ENFORCER) {
        lab::htb_limits(&policy).map_err(|e| htb_refusal(&path.display(), e))?;
    }
    let mut checked = Vec::new();
    for name in enforcers {
        let (approximation, bounds) = if name == LAB_ONLY_ENFORCER {
            (lab::htb_approximation(&policy), lab::htb_bounds(&policy))
        } else {
            let refused = |e: sched::BuildError| Failure::input(e.to_string());
            (
                sched::approximation(name, &policy).map_err(refused)?,
                sched::bounds(name, &policy).map_err(refused)?,
            )
        };
        checked.push(output::CheckedEnforcer {
            name: name.clone(),
            approximation: Some(approximation),
            bounds: Some(bounds),
        });
    }
    Ok(output::Checked {
        file,
        across_hosts: false,
        subject: output::CheckedSubject::OneHost {
            tenants: policy.tenants.len(),
            apps: policy.apps.len(),
            link_rate_bps: policy.link.rate_bps,
            queues: policy.link.queues,
        },
        enforcers: checked,
    })
}

fn explain(path: &Path, active: Option<&str>, json: bool) -> Result<(), Failure> {
    let explained = match policy::load_any_scenario(path, &lab::enforcer_names()) {
        Ok(policy::AnyScenario::Hosts(scenario)) => {
            // The rpc path of the simulator's host model bounds a closed-loop rpc's
            // demand, as in the figures of `nicsched sim`.
            let asked = report::hosts_asked_bps(&scenario, &sim::HostModel::default().path);
            output::Explained {
                file: path.display().to_string(),
                across_hosts: true,
                explanation: output::Explanation::Hosts(policy::explain_hosts(&scenario, &asked)),
            }
        }
        _ => output::Explained {
            file: path.display().to_string(),
            across_hosts: false,
            explanation: output::Explanation::OneHost(explanation(path, active)?),
        },
    };
    if json {
        output::print_json(&explained);
    } else {
        print!("{explained}");
    }
    Ok(())
}

/// The explanation of a one-host policy or scenario.
fn explanation(path: &Path, active: Option<&str>) -> Result<policy::Explanation, Failure> {
    if active.is_none() && looks_like_scenario(path) {
        let scenario = policy::load_scenario(path, &lab::enforcer_names())?;
        return Ok(explain_scenario(&scenario));
    }
    let policy = load_policy_or_scenario(path)?;
    let demands = match active {
        Some(list) => policy::parse_active(&policy, list)?,
        None => policy.apps.iter().map(|_| vec![f64::INFINITY]).collect(),
    };
    Ok(policy::explain(&policy, &demands))
}

/// The ideal of each phase of a one-host scenario: from each time a traffic
/// starts or stops, every running traffic's flows at what they ask, as the
/// figures of `nicsched sim` count it.
fn explain_scenario(scenario: &Scenario) -> policy::Explanation {
    let asked = report::measure::asked_demands_bps(scenario, &sim::HostModel::default().path);
    let mut times: Vec<u64> = scenario
        .traffic
        .iter()
        .flat_map(|t| [t.start_ns, t.stop_ns])
        .filter(|&t| t < scenario.duration_ns)
        .collect();
    times.sort_unstable();
    times.dedup();
    let phases: Vec<(u64, Vec<Vec<f64>>)> = times
        .into_iter()
        .map(|at| {
            let mut demands = vec![Vec::new(); scenario.policy.apps.len()];
            for (t, &bps) in scenario.traffic.iter().zip(&asked) {
                if t.start_ns <= at && at < t.stop_ns {
                    let flows = t.kind.flows() as usize;
                    demands[t.app.index()].extend(std::iter::repeat_n(bps, flows));
                }
            }
            (at, demands)
        })
        .filter(|(_, demands)| demands.iter().any(|d| !d.is_empty()))
        .collect();
    policy::explain_phases(&scenario.policy, &phases)
}

fn simulate(
    path: &Path,
    enforcers: &[String],
    out: Option<PathBuf>,
    seed: Option<u64>,
    jobs: Option<usize>,
    printing: Printing,
) -> Result<(), Failure> {
    let quiet = printing.quiet;
    let enforcers = &expand_all(enforcers, false)[..];
    let mut scenario: Scenario = match load_scenario_to_run(path)? {
        policy::AnyScenario::OneHost(scenario) => scenario,
        policy::AnyScenario::Hosts(scenario) => {
            return simulate_hosts(path, scenario, enforcers, out, seed, jobs, printing);
        }
    };
    if let Some(seed) = seed {
        scenario.seed = seed;
    }
    let enforcers: Vec<String> = if enforcers.is_empty() {
        // A scenario written for the lab may list the kernel's HTB; the others still run.
        let (lab_only, simulated): (Vec<String>, Vec<String>) = scenario
            .enforcers
            .iter()
            .cloned()
            .partition(|name| name == LAB_ONLY_ENFORCER);
        if !lab_only.is_empty() && !quiet {
            eprintln!(
                "note: `{LAB_ONLY_ENFORCER}` runs only in the lab (nicsched lab); simulating the others"
            );
        }
        simulated
    } else {
        enforcers.to_vec()
    };
    if enforcers.is_empty() {
        return Err(Failure::input(format!(
            "{}: no enforcer to simulate (`{LAB_ONLY_ENFORCER}` runs only in the lab); name one with --enforcer",
            path.display()
        )));
    }
    for name in &enforcers {
        if name == LAB_ONLY_ENFORCER {
            return Err(Failure::input(format!(
                "enforcer `{LAB_ONLY_ENFORCER}` is the kernel's own HTB and runs only in the lab (nicsched lab)"
            )));
        }
        sched::build(name, &scenario.policy).map_err(|e| Failure::input(e.to_string()))?;
    }
    let out = out.unwrap_or_else(|| PathBuf::from("results").join(&scenario.name));
    let out = report::OutDir::claim(&out, &[path]).map_err(Failure::input)?;
    let provenance = provenance(path, scenario.seed)?;

    let (_bars, runs_of) = simulation_bars(&enforcers, scenario.duration_ns, quiet);

    // Enforcers are independent runs: spread them over the cores.
    let results = jobs::map(
        &runs_of,
        jobs::threads(jobs, runs_of.len()),
        |(name, bar)| {
            let outcome = sim::run(&scenario, name, sim::HostModel::default(), &mut |ns| {
                bar.set_position(ns / 1_000_000)
            })
            .map_err(|e| e.to_string());
            bar.finish();
            outcome
        },
    );

    let mut runs = Vec::new();
    let mut records = Vec::new();
    for (record, (name, _)) in results.into_iter().zip(&runs_of) {
        let mut record = record.map_err(Failure::input)?;
        stamp(&mut record, &provenance);
        let dir = out.staging().join(name);
        let summary = report::write_run(&dir, &record).map_err(|e| unwritten(out.target(), e))?;
        if !quiet {
            eprintln!(
                "{name}: {} frames in {:.2} s wall ({:.2} M frames/s)",
                record.frames_sent,
                record.wall_s,
                record.frames_sent as f64 / record.wall_s.max(1e-9) / 1e6
            );
        }
        runs.push((summary, dir));
        records.push(record);
    }
    overlay(&out, &records)?;
    finish(out, runs, &provenance, printing.json)
}

/// How a command run reports: progress bars and notes on stderr unless `quiet`;
/// on stdout the table, or with `json` one JSON document.
#[derive(Clone, Copy)]
struct Printing {
    quiet: bool,
    json: bool,
}

/// One progress bar per enforcer to simulate, in ms of the scenario, drawn
/// together while they run at once (hidden with `quiet`).
fn simulation_bars(
    enforcers: &[String],
    duration_ns: u64,
    quiet: bool,
) -> (MultiProgress, Vec<(String, ProgressBar)>) {
    let bars = MultiProgress::new();
    if quiet {
        bars.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let style = ProgressStyle::with_template(
        "{prefix:>11} [{bar:30}] {pos:>6}/{len} ms simulated  {elapsed}",
    )
    .expect("constant template")
    .progress_chars("=> ");
    let runs = enforcers
        .iter()
        .map(|name| {
            let bar = bars.add(ProgressBar::new(duration_ns / 1_000_000));
            bar.set_style(style.clone());
            bar.set_prefix(name.clone());
            (name.clone(), bar)
        })
        .collect();
    (bars, runs)
}

/// `nicsched sim` on a scenario across hosts (hosts.md): one run per enforcer,
/// each host's egress under it, written as summary.json (`hosts`, `flows`,
/// `checks`) and timeseries.csv (one row per interval and traffic).
fn simulate_hosts(
    path: &Path,
    mut scenario: policy::HostsScenario,
    enforcers: &[String],
    out: Option<PathBuf>,
    seed: Option<u64>,
    jobs: Option<usize>,
    printing: Printing,
) -> Result<(), Failure> {
    let quiet = printing.quiet;
    if let Some(seed) = seed {
        scenario.seed = seed;
    }
    let enforcers = if enforcers.is_empty() {
        scenario.enforcers.clone()
    } else {
        enforcers.to_vec()
    };
    for name in &enforcers {
        if name == LAB_ONLY_ENFORCER {
            return Err(Failure::input(format!(
                "enforcer `{LAB_ONLY_ENFORCER}` runs only in the lab (nicsched lab)"
            )));
        }
        for host in &scenario.hosts {
            sched::build(name, &host.policy)
                .map_err(|e| Failure::input(format!("host {}: {e}", host.name)))?;
        }
    }
    let out = out.unwrap_or_else(|| PathBuf::from("results").join(&scenario.name));
    let out = report::OutDir::claim(&out, &[path]).map_err(Failure::input)?;
    let provenance = provenance(path, scenario.seed)?;
    let (_bars, runs_of) = simulation_bars(&enforcers, scenario.duration_ns, quiet);
    let records = jobs::map(
        &runs_of,
        jobs::threads(jobs, runs_of.len()),
        |(name, bar)| {
            let record = sim::run_hosts(&scenario, name, sim::HostModel::default(), &mut |ns| {
                bar.set_position(ns / 1_000_000)
            });
            bar.finish();
            record
        },
    );
    let mut results = HostsResults::default();
    for (record, name) in records.into_iter().zip(&enforcers) {
        let record = record.map_err(|e| Failure::input(e.to_string()))?;
        let (summary, rows) =
            report::summarise_hosts(&scenario, &record, &sim::HostModel::default().path);
        let run = HostsRunOut {
            summary,
            rows,
            provenance: provenance.clone(),
        };
        run.write(&out, name, &mut results)?;
    }
    finish_hosts(out, &scenario.name, &provenance, &results, printing.json)
}

/// One run across hosts, simulated or in the lab, with what it is written with.
struct HostsRunOut {
    summary: report::HostsSummary,
    rows: Vec<report::HostsRow>,
    provenance: report::Provenance,
}

impl HostsRunOut {
    /// Writes summary.json and timeseries.csv under the enforcer's folder and adds
    /// the run to `results`.
    fn write(
        self,
        out: &report::OutDir,
        name: &str,
        results: &mut HostsResults,
    ) -> Result<(), Failure> {
        let HostsRunOut {
            summary,
            rows,
            provenance,
        } = self;
        let dir = out.staging().join(name);
        let write = || -> std::io::Result<serde_json::Value> {
            std::fs::create_dir_all(&dir)?;
            let mut json = serde_json::to_value(&summary).map_err(std::io::Error::other)?;
            json["provenance"] =
                serde_json::to_value(&provenance).map_err(std::io::Error::other)?;
            std::fs::write(
                dir.join("summary.json"),
                serde_json::to_string_pretty(&json).map_err(std::io::Error::other)? + "\n",
            )?;
            report::write_hosts_timeseries(&dir.join(report::TIMESERIES_CSV), &rows)?;
            Ok(json)
        };
        let json = write().map_err(|e| unwritten(out.target(), e))?;
        for flow in &summary.flows {
            results.table.push(vec![
                name.to_string(),
                flow.name.clone(),
                format!("{}→{}", flow.from, flow.to),
                policy::format_rate(flow.throughput_bps),
                policy::format_rate(flow.ideal_bps),
                format!("{:.3}", flow.rel_error_mean),
            ]);
        }
        results.failed.extend(
            summary
                .checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| (format!("{name}/{}", c.name), c.detail.clone())),
        );
        results.summaries.push(json);
        results.runs.push((name.to_string(), rows));
        Ok(())
    }
}

/// The runs across hosts of one command, as they are written.
#[derive(Default)]
struct HostsResults {
    /// A row per flow of every run.
    table: Vec<Vec<String>>,
    /// `ENFORCER/CHECK` and its detail of every failed self-check.
    failed: Vec<(String, String)>,
    /// What each run's summary.json holds.
    summaries: Vec<serde_json::Value>,
    /// Each run's enforcer and timeseries rows.
    runs: Vec<(String, Vec<report::HostsRow>)>,
}

/// Writes the overlay PNG and report.html beside the runs across hosts of
/// `scenario`, moves them into `--out`, prints their table (or with `json` their
/// summaries) with every failed self-check beneath it, and fails with status 3
/// when one did.
fn finish_hosts(
    out: report::OutDir,
    scenario: &str,
    provenance: &report::Provenance,
    results: &HostsResults,
    json: bool,
) -> Result<(), Failure> {
    let HostsResults {
        table,
        failed,
        summaries,
        runs,
    } = results;
    report::write_hosts_overlay_plot(out.staging(), scenario, runs)
        .map_err(|e| unwritten(out.target(), e))?;
    let dirs: Vec<PathBuf> = runs
        .iter()
        .map(|(name, _)| out.staging().join(name))
        .collect();
    report::write_html(out.staging(), &dirs).map_err(|e| unwritten(out.target(), e))?;
    let target = out.target().to_path_buf();
    let out = out.commit(provenance).map_err(|e| unwritten(&target, e))?;
    if json {
        let failed_checks: Vec<String> = failed.iter().map(|(check, _)| check.clone()).collect();
        output::print_json(&output::Ran {
            results: out.display().to_string(),
            report: out.join(report::REPORT_HTML).display().to_string(),
            across_hosts: true,
            runs: summaries,
            failed_checks: &failed_checks,
        });
    } else {
        let header: Vec<String> = [
            "enforcer",
            "flow",
            "VMs",
            "throughput",
            "ideal",
            "rel_error",
        ]
        .map(String::from)
        .to_vec();
        println!("{}", report::aligned_table(&header, table, 3, false));
        println!(
            "results: {}  report: {}",
            out.display(),
            out.join(report::REPORT_HTML).display()
        );
    }
    if failed.is_empty() {
        Ok(())
    } else {
        for (check, detail) in failed {
            eprintln!("check failed: {check}: {detail}");
        }
        Err(Failure {
            message: "self-checks failed: the figures of those runs are flagged, not vouched for"
                .to_string(),
            status: EXIT_CHECKS_FAILED,
        })
    }
}

/// A file of the run that could not be written (`error` names it): the run fails
/// and, as its `OutDir` drops, the staging folder goes with everything written so far.
fn unwritten(target: &Path, error: std::io::Error) -> Failure {
    Failure::runtime(format!(
        "{error}\nthe run is not in {}, which only a whole run replaces",
        target.display()
    ))
}

/// What every run of this command shares in its provenance; each run adds its
/// seed and its world's settings.
fn provenance(scenario: &Path, seed: u64) -> Result<report::Provenance, Failure> {
    let bytes = std::fs::read(scenario)
        .map_err(|e| Failure::input(format!("{}: {e}", scenario.display())))?;
    Ok(provenance_of(&bytes, seed))
}

/// Provenance of a command whose scenario or policy is `bytes`.
fn provenance_of(bytes: &[u8], seed: u64) -> report::Provenance {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    report::Provenance {
        nicsched: env!("CARGO_PKG_VERSION").to_string(),
        commit: env!("NICSCHED_COMMIT").to_string(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        scenario_sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
        seed,
        kernel: proc_line("/proc/sys/kernel/osrelease"),
        host: proc_line("/proc/sys/kernel/hostname"),
        settings: Default::default(),
    }
}

/// One line the kernel reports about the machine, or `unknown` where it cannot be read.
fn proc_line(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|line| line.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

/// The command's provenance on a run, which keeps its own seed and settings.
fn stamp(record: &mut report::RunRecord, provenance: &report::Provenance) {
    record.provenance = report::Provenance {
        seed: record.provenance.seed,
        settings: std::mem::take(&mut record.provenance.settings),
        ..provenance.clone()
    };
}

/// The overlay plots of a scenario's runs, beside report.html.
fn overlay(out: &report::OutDir, records: &[report::RunRecord]) -> Result<(), Failure> {
    let records: Vec<&report::RunRecord> = records.iter().collect();
    report::write_overlay_plots(out.staging(), &records).map_err(|e| unwritten(out.target(), e))
}

/// Writes report.html beside the runs, moves the results into `--out`, prints the
/// table with every failed self-check beneath it, and fails with status 3 when one
/// did: everything is written, but those figures are not vouched for.
fn finish(
    out: report::OutDir,
    runs: Vec<(report::Summary, PathBuf)>,
    provenance: &report::Provenance,
    json: bool,
) -> Result<(), Failure> {
    let dirs: Vec<PathBuf> = runs.iter().map(|(_, dir)| dir.clone()).collect();
    report::write_html(out.staging(), &dirs).map_err(|e| unwritten(out.target(), e))?;
    let target = out.target().to_path_buf();
    let out = out.commit(provenance).map_err(|e| unwritten(&target, e))?;
    let summaries: Vec<report::Summary> = runs.into_iter().map(|(s, _)| s).collect();
    let failed: Vec<String> = summaries
        .iter()
        .flat_map(|s| {
            s.failed_checks()
                .map(|c| format!("{}/{}", s.enforcer, c.name))
        })
        .collect();
    if json {
        output::print_json(&output::Ran {
            results: out.display().to_string(),
            report: out.join(report::REPORT_HTML).display().to_string(),
            across_hosts: false,
            runs: &summaries,
            failed_checks: &failed,
        });
    } else {
        println!("{}", report::comparison_table(&summaries));
        println!(
            "results: {}  report: {}",
            out.display(),
            out.join(report::REPORT_HTML).display()
        );
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure {
            message: format!(
                "self-checks failed ({}): the figures of those runs are flagged, not vouched for",
                failed.join(", ")
            ),
            status: EXIT_CHECKS_FAILED,
        })
    }
}

/// One lab run's progress bar, in ms of the scenario, named by its enforcer.
fn lab_progress(enforcer: &str, duration_ns: u64, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(duration_ns / 1_000_000);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>11} [{bar:30}] {pos:>6}/{len} ms  {elapsed}")
            .expect("constant template")
            .progress_chars("=> "),
    );
    bar.set_prefix(enforcer.to_string());
    bar
}

/// The live view's flags of `nicsched lab`, as given.
struct LiveAsked {
    interval: Option<u64>,
    no_live: bool,
    metrics_listen: Option<std::net::SocketAddr>,
}

impl LiveAsked {
    /// Binds `--metrics-listen` (status 2 if it cannot) and serves from there;
    /// the live view of a run of `quiet` (lines only without it).
    fn start(self, quiet: bool) -> Result<live::LiveOptions, Failure> {
        let metrics = match self.metrics_listen {
            Some(addr) => {
                let listener = std::net::TcpListener::bind(addr).map_err(|e| {
                    Failure::input(format!(
                        "--metrics-listen {addr}: {e}; choose another port, or port 0 for a free one"
                    ))
                })?;
                let bound = listener
                    .local_addr()
                    .map_err(|e| Failure::runtime(format!("--metrics-listen {addr}: {e}")))?;
                let metrics = std::sync::Arc::new(live::Metrics::default());
                live::serve(listener, metrics.clone());
                eprintln!("metrics: http://{bound}/metrics");
                Some(metrics)
            }
            None => None,
        };
        Ok(live::LiveOptions {
            lines: !quiet && !self.no_live,
            line_every_ns: self.interval.unwrap_or(live::LINE_EVERY_NS_DEFAULT),
            metrics,
        })
    }

    /// The flag given for a live view that runs across hosts have not.
    fn across_hosts(&self) -> Option<&'static str> {
        if self.metrics_listen.is_some() {
            Some("--metrics-listen")
        } else if self.interval.is_some() {
            Some("--interval")
        } else {
            None
        }
    }
}

/// What `nicsched lab` was asked on its command line that depends on the world:
/// the link rate, and the per-app buffer (`--class-limit`; its default differs
/// across hosts).
struct LabAsked {
    link_rate: Option<u64>,
    class_limit: Option<u32>,
}

fn run_lab(
    path: &Path,
    enforcers: &[String],
    out: Option<PathBuf>,
    asked: LabAsked,
    mut options: lab::LabOptions,
    printing: Printing,
    live: LiveAsked,
) -> Result<(), Failure> {
    let quiet = printing.quiet;
    lab::check_root().map_err(|e| Failure::input(e.to_string()))?;
    let scenario: Scenario = match load_scenario_to_run(path)? {
        policy::AnyScenario::OneHost(scenario) => scenario,
        policy::AnyScenario::Hosts(scenario) => {
            if let Some(flag) = live.across_hosts() {
                return Err(Failure::input(format!(
                    "{}: {flag} watches one-host runs only; this scenario runs across hosts (`hosts:`): leave {flag} out",
                    path.display()
                )));
            }
            if asked.class_limit.is_none() {
                options.qdisc.class_packets = sched::HostLimits::LINUX.class_packets;
            }
            return lab_hosts(
                path,
                scenario,
                enforcers,
                out,
                asked.link_rate,
                options,
                printing,
            );
        }
    };
    let link_rate_bps = asked
        .link_rate
        .unwrap_or_else(|| scenario.policy.link.rate_bps.min(LAB_LINK_RATE_BPS_DEFAULT));
    let scenario = scenario.scaled_to_link_rate(link_rate_bps);
    lab::transmit_ring_supported(&scenario)
        .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    let enforcers: Vec<String> = if enforcers.is_empty() {
        scenario.enforcers.clone()
    } else {
        enforcers.to_vec()
    };
    for name in &enforcers {
        lab::engine_cpu_supported(&scenario, name)
            .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
        if name == LAB_ONLY_ENFORCER {
            lab::htb_limits(&scenario.policy).map_err(|e| htb_refusal(&path.display(), e))?;
        } else {
            sched::build(name, &scenario.policy).map_err(|e| Failure::input(e.to_string()))?;
        }
    }
    let out =
        out.unwrap_or_else(|| PathBuf::from("results").join(format!("{}-lab", scenario.name)));
    let live = live.start(quiet)?;
    let out = report::OutDir::claim(&out, &[path]).map_err(Failure::input)?;
    let provenance = provenance(path, scenario.seed)?;
    if !quiet {
        eprintln!(
            "lab: {} on a {} link, enforcers {}",
            scenario.name,
            policy::format_rate(link_rate_bps as f64),
            enforcers.join(", ")
        );
    }
    if live.lines {
        eprintln!("{}", live.header(scenario.interval_ns));
    }
    let options = lab::LabOptions {
        out: Some(out.staging().join("logs")),
        ..options
    };
    // Held across every enforcer's run: a signal during one run's teardown, or
    // between two runs, stops the next instead of being cleared by its own guard.
    let _signals = lab::StopSignals::install();
    let mut runs = Vec::new();
    let mut records = Vec::new();
    for name in &enforcers {
        if lab::interrupted() {
            return Err(Failure::lab(name, lab::LabError::Interrupted));
        }
        let bar = lab_progress(name, scenario.duration_ns, quiet);
        let mut watching = live::Watching::new(name, &bar, &live, &scenario);
        let record = lab::run(&scenario, name, &options, &mut watching)
            .map_err(|e| Failure::lab(name, e))?;
        bar.finish();
        watching.finished(&record);
        let mut record = record;
        stamp(&mut record, &provenance);
        let dir = out.staging().join(name);
        let summary = report::write_run(&dir, &record).map_err(|e| unwritten(out.target(), e))?;
        runs.push((summary, dir));
        records.push(record);
    }
    overlay(&out, &records)?;
    finish(out, runs, &provenance, printing.json)
}

/// The fastest host link of a lab run across hosts unless `--link-rate` says
/// otherwise: every host's engine, its VMs' senders and receivers share the
/// machine's cores, and on 2 cores three engines forwarded a few hundred Mbit/s
/// each (docs/hosts.md, "Lab across hosts").
const LAB_HOSTS_LINK_RATE_BPS_DEFAULT: u64 = 250_000_000;

/// `nicsched lab` on a scenario across hosts (hosts.md, "Lab"): the scenario
/// scaled so that its fastest link runs at `--link-rate`, one run per enforcer,
/// written as `nicsched sim` writes one.
fn lab_hosts(
    path: &Path,
    scenario: policy::HostsScenario,
    enforcers: &[String],
    out: Option<PathBuf>,
    link_rate: Option<u64>,
    options: lab::LabOptions,
    printing: Printing,
) -> Result<(), Failure> {
    let quiet = printing.quiet;
    let fastest = scenario.fastest_link_bps();
    let link_rate_bps = link_rate.unwrap_or_else(|| fastest.min(LAB_HOSTS_LINK_RATE_BPS_DEFAULT));
    let scenario = lab::hosts::scaled_to_link_rate(&scenario, link_rate_bps);
    let enforcers: Vec<String> = if enforcers.is_empty() {
        scenario.enforcers.clone()
    } else {
        enforcers.to_vec()
    };
    for name in &enforcers {
        lab::hosts::supported(&scenario, name)
            .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
        for host in &scenario.hosts {
            sched::build(name, &host.policy)
                .map_err(|e| Failure::input(format!("host {}: {e}", host.name)))?;
        }
    }
    let out =
        out.unwrap_or_else(|| PathBuf::from("results").join(format!("{}-lab", scenario.name)));
    let out = report::OutDir::claim(&out, &[path]).map_err(Failure::input)?;
    let provenance = provenance(path, scenario.seed)?;
    if !quiet {
        eprintln!(
            "lab: {} on {} host links at most, feedback every {}, enforcers {}",
            scenario.name,
            policy::format_rate(link_rate_bps as f64),
            policy::format_time(scenario.feedback.epoch_ns),
            enforcers.join(", ")
        );
    }
    let options = lab::LabOptions {
        out: Some(out.staging().join("logs")),
        // Already scaled above.
        link_rate_bps: None,
        ..options
    };
    let _signals = lab::StopSignals::install();
    let mut results = HostsResults::default();
    for name in &enforcers {
        if lab::interrupted() {
            return Err(Failure::lab(name, lab::LabError::Interrupted));
        }
        let bar = lab_progress(name, scenario.duration_ns, quiet);
        let run = lab::hosts::run(&scenario, name, &options, &mut |ns| {
            bar.set_position(ns / 1_000_000)
        })
        .map_err(|e| Failure::lab(name, e))?;
        bar.finish();
        let (mut summary, rows) =
            report::summarise_hosts(&scenario, &run.record, &report::measure::RpcPath::default());
        summary.checks.extend(run.checks);
        let run = HostsRunOut {
            summary,
            rows,
            provenance: report::Provenance {
                settings: run.settings,
                ..provenance.clone()
            },
        };
        run.write(&out, name, &mut results)?;
    }
    finish_hosts(out, &scenario.name, &provenance, &results, printing.json)
}

/// `nicsched lab --cleanup`: exits 1 if anything could not be removed.
fn lab_cleanup() -> Result<(), Failure> {
    lab::check_root().map_err(|e| Failure::input(e.to_string()))?;
    let done = lab::remove_leftovers(&mut |line| eprintln!("nicsched lab: {line}"))
        .map_err(|e| Failure::runtime(e.to_string()))?;
    for ns in &done.unowned {
        eprintln!(
            "nicsched lab: left alone: namespace {ns}, which no run owns (kept with --keep, or made by an older nicsched); delete it with: ip netns delete {ns}"
        );
    }
    if done.failed > 0 {
        return Err(Failure::runtime(format!(
            "nicsched lab: {} thing(s) could not be removed (see above)",
            done.failed
        )));
    }
    if done.removed == 0 {
        eprintln!("nicsched lab: nothing to clean");
    }
    Ok(())
}

/// The paths `nicsched lab-bench -e ...` runs: the named ones (the default engine
/// paths and both kernel paths when none is named), `kernel` always.
fn lab_bench_paths(named: &[String]) -> Vec<String> {
    if named.is_empty() {
        return lab::default_paths();
    }
    let mut paths: Vec<String> = Vec::new();
    for name in named {
        if !paths.contains(name) {
            paths.push(name.clone());
        }
    }
    if !paths.iter().any(|p| p == lab::KERNEL_FORWARDING) {
        let at = paths
            .iter()
            .position(|p| p == LAB_ONLY_ENFORCER)
            .unwrap_or(paths.len());
        paths.insert(at, lab::KERNEL_FORWARDING.to_string());
    }
    paths
}

#[allow(clippy::too_many_arguments)]
fn lab_bench(
    file: Option<&Path>,
    enforcers: &[String],
    seconds: f64,
    rounds: u32,
    size: u16,
    flows: u16,
    search_steps: u32,
    engine_threads: usize,
    out: Option<PathBuf>,
    json: bool,
    quiet: bool,
) -> Result<(), Failure> {
    // Claimed before the bench runs: a folder that cannot be its results' is
    // refused at once, as every other command's --out is.
    let inputs: Vec<&Path> = file.into_iter().collect();
    let out = out
        .map(|dir| report::OutDir::claim(&dir, &inputs).map_err(Failure::input))
        .transpose()?;
    lab::check_root().map_err(|e| Failure::input(e.to_string()))?;
    let (policy, label) = match file {
        Some(path) => (load_policy_or_scenario(path)?, path.display().to_string()),
        None => (
            lab::default_policy(),
            "built-in (2 tenants, weights 1:3)".to_string(),
        ),
    };
    let paths = lab_bench_paths(enforcers);
    let scaled = policy.scaled_to_link_rate(lab::BENCH_LINK_RATE_BPS);
    for name in paths
        .iter()
        .filter(|p| lab::PathKind::of(p) == lab::PathKind::Engine)
    {
        sched::build(name, &scaled).map_err(|e| Failure::input(e.to_string()))?;
    }
    if paths.iter().any(|p| p == LAB_ONLY_ENFORCER) {
        lab::htb_limits(&scaled).map_err(|e| htb_refusal(&label, e))?;
    }
    let options = lab::BenchOptions {
        paths: paths.clone(),
        seconds,
        rounds,
        payload_bytes: size,
        flows_per_tenant: flows,
        search_steps,
        engine_threads,
        ..lab::BenchOptions::default()
    };
    if !quiet {
        eprintln!(
            "lab-bench: {label}, {} tenant(s) x {flows} UDP flow(s), {size}-byte payloads, {seconds} s per path, {rounds} round(s), {engine_threads} engine thread(s): {}",
            policy.tenants.len(),
            paths.join(", ")
        );
    }
    let per_path_ms = (seconds * 1000.0).round() as u64;
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(
            per_path_ms
                * paths.len() as u64
                * u64::from(rounds)
                * u64::from(options.trials_per_path()),
        )
    };
    bar.set_style(
        ProgressStyle::with_template("[{bar:30}] {pos:>6}/{len} ms  {msg:<11} {elapsed}")
            .expect("constant template")
            .progress_chars("=> "),
    );
    let report = lab::run_bench(&policy, &label, &options, &mut |step, path, fraction| {
        bar.set_message(path.to_string());
        bar.set_position(step as u64 * per_path_ms + (fraction * per_path_ms as f64) as u64);
    })
    .map_err(|e| Failure::lab("lab-bench", e))?;
    bar.finish_and_clear();
    let value = report.to_json();
    let written = match out {
        Some(out) => {
            let staged = lab::json_path(out.staging());
            std::fs::write(
                &staged,
                serde_json::to_string_pretty(&value).expect("JSON values serialise") + "\n",
            )
            .map_err(|e| unwritten(out.target(), e))?;
            let target = out.target().to_path_buf();
            let provenance = match file {
                Some(path) => provenance(path, 0)?,
                None => provenance_of(b"built-in lab-bench policy", 0),
            };
            Some(out.commit(&provenance).map_err(|e| unwritten(&target, e))?)
        }
        None => None,
    };
    if json {
        println!("{value}");
    } else {
        print!("{}", report.table());
        if let Some(dir) = &written {
            println!("results: {}", lab::json_path(dir).display());
        }
    }
    Ok(())
}

fn bench(config: &sched::bench::BenchConfig, vs: Option<&str>, json: bool) -> Result<(), Failure> {
    let (enforcer, active) = (config.enforcer.as_str(), config.active_fraction);
    if !(active > 0.0 && active <= 1.0) {
        return Err(Failure::input(
            "--active must be in (0, 1], e.g. 0.01 for 1% of the classes",
        ));
    }
    if vs.is_some() && config.threads > 1 {
        return Err(Failure::input(
            "--vs runs its peer on one core only: compare with it without --threads",
        ));
    }
    let peer = match vs {
        None => None,
        Some("rte_sched") => Some(sched::bench::peer_binary().ok_or_else(|| {
            Failure::input(
                "the rte_sched peer is not built: run scripts/setup.sh (builds target/rte_sched_peer/) or set NICSCHED_RTE_SCHED_PEER",
            )
        })?),
        Some(other) => {
            return Err(Failure::input(format!("--vs {other}: the only peer is `rte_sched`")));
        }
    };
    sched::build(enforcer, &sched::bench::policy_for(16, 16))
        .map_err(|e| Failure::input(e.to_string()))?;
    sched::bench::check_threads(config).map_err(Failure::input)?;
    let bytes_per_class =
        sched::bench::bytes_per_class(enforcer, config.classes, &sched::bench::live_heap_bytes)
            .map_err(Failure::runtime)?;
    let result = sched::bench::run(config).map_err(Failure::runtime)?;
    let peer_result = match &peer {
        Some(path) => Some(
            sched::bench::run_peer(path, result.classes, active, config.seconds)
                .map_err(Failure::runtime)?,
        ),
        None => None,
    };
    let mut out = serde_json::json!({
        "enforcer": result.enforcer,
        "classes": result.classes,
        "active_classes": result.active_classes,
        "pairs": result.pairs,
        "seconds": result.seconds,
        "pairs_per_sec": result.pairs_per_sec,
        "ns_per_pair": result.ns_per_pair,
        "bytes_per_class": bytes_per_class,
        "threads": result.threads,
        "pairs_per_sec_1_thread": result.pairs_per_sec_1_thread,
        "speedup": result.speedup,
    });
    if let Some(p) = &peer_result {
        out["peer"] = "rte_sched".into();
        out["peer_pairs_per_sec"] = p.pairs_per_sec.into();
        out["peer_ns_per_pair"] = p.ns_per_pair.into();
        out["peer_queues"] = p.queues.into();
        out["ratio"] = (result.pairs_per_sec / p.pairs_per_sec).into();
    }
    if json {
        println!("{out}");
    } else if result.threads > 1 {
        println!(
            "{}: {} classes ({} backlogged): {:.2} M pairs/s on {} threads, {:.2}x the {:.2} M pairs/s of one thread, {:.0} bytes per class",
            result.enforcer,
            result.classes,
            result.active_classes,
            result.pairs_per_sec / 1e6,
            result.threads,
            result.speedup,
            result.pairs_per_sec_1_thread / 1e6,
            bytes_per_class
        );
    } else {
        println!(
            "{}: {} classes ({} backlogged): {:.2} M pairs/s ({:.1} ns per enqueue+dequeue), {:.0} bytes per class",
            result.enforcer,
            result.classes,
            result.active_classes,
            result.pairs_per_sec / 1e6,
            result.ns_per_pair,
            bytes_per_class
        );
        if let Some(p) = &peer_result {
            println!(
                "rte_sched: {} queues: {:.2} M pairs/s ({:.1} ns); {} / rte_sched = {:.2}x",
                p.queues,
                p.pairs_per_sec / 1e6,
                p.ns_per_pair,
                result.enforcer,
                result.pairs_per_sec / p.pairs_per_sec
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// The long help of `subcommand`, its whitespace runs as single spaces.
    fn help_of(subcommand: &str) -> String {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        let help = cli
            .find_subcommand_mut(subcommand)
            .unwrap()
            .render_long_help()
            .to_string();
        help.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn quoted(names: impl Iterator<Item = &'static str>) -> String {
        names
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    #[test]
    fn help_names_the_enforcers_the_registry_lists() {
        let nic_model = sched::ENFORCERS.iter().filter(|e| e.nic().is_some());
        let software = sched::ENFORCERS.iter().filter(|e| e.has_classes());
        let lab = help_of("lab");
        let queue_limit = format!("({})", quoted(nic_model.map(|e| e.name)));
        assert!(lab.contains(&queue_limit), "{queue_limit} in {lab}");
        let class_limit = format!("({})", quoted(software.map(|e| e.name)));
        assert!(lab.contains(&class_limit), "{class_limit} in {lab}");
        let defaults = lab::default_enforcers().collect::<Vec<_>>().join(", ");
        let lab_bench = help_of("lab-bench");
        assert!(
            lab_bench.contains(&format!("Default: {defaults}.")),
            "{defaults} in {lab_bench}"
        );
    }

    #[test]
    fn lab_bench_always_runs_kernel_forwarding_as_the_base() {
        assert_eq!(lab_bench_paths(&[]), lab::default_paths());
        assert_eq!(
            lab_bench_paths(&names(&["fifo"])),
            names(&["fifo", "kernel"])
        );
        assert_eq!(
            lab_bench_paths(&names(&["linux-htb", "tonic", "tonic"])),
            names(&["kernel", "linux-htb", "tonic"])
        );
        assert_eq!(
            lab_bench_paths(&names(&["kernel", "wf2q"])),
            names(&["kernel", "wf2q"])
        );
    }
}
