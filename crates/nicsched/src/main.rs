//! `nicsched`: the command line. Clap definitions and dispatch: what runs a scenario
//! lives in `run`, parsing in `policy`, mechanisms in `sched`, figures in `report`
//! (docs/architecture.md maps the crates). Beside them: the commands that run no
//! scenario (`commands`), the live view of a lab run (`live`), `report`
//! (`report_page`) and `sweep` with its shards (`sweep`, `shard`).

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod commands;
mod flags;
mod help;
mod lab_cli;
mod live;
mod realhost_cli;
mod report_page;
mod sweep;

// What sweep.rs, its shard.rs and report_page.rs take from the run layer.
pub(crate) use run::{EXIT_CHECKS_FAILED, Failure, jobs, provenance, unwritten};

use flags::*;

#[global_allocator]
static ALLOCATOR: sched::bench::CountingAllocator = sched::bench::CountingAllocator;

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
        #[arg(long = "enforcer", short = 'e', value_name = "NAME", help = help::check_enforcers())]
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
    Lab(lab_cli::LabArgs),
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
    /// senders' own `sendmmsg` calls, the engine on threads of its own, so the
    /// numbers compare forwarding costs on this machine, not NIC line rates. The
    /// engine's threads run at SCHED_FIFO, as `enforce` runs the engine, when they
    /// leave the machine a core (fewer engine threads than cores; the header says
    /// which): the senders then cannot take the engine's core from it.
    /// "loss-free kframes/s" is the highest rate forwarded with at most 0.1% loss
    /// under paced senders (`--search-steps`): the saturating offer makes senders
    /// spend cores on frames a forwarder of its own then drops, which the kernel
    /// paths never see.
    ///
    /// Example: `sudo nicsched lab-bench -e fifo -e tonic --seconds 3`.
    LabBench(lab_cli::LabBenchArgs),
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
    /// Apply a policy to device DEV of this host (the kernel holds it), read it
    /// back, and record what DEV had; `--remove` puts that back (docs/realhost.md).
    Apply(realhost_cli::ApplyArgs),
    /// Per tenant and interval, DEV's throughput from the kernel's counters
    /// against the ideal, for a device `nicsched apply` configured.
    Watch(realhost_cli::WatchArgs),
    /// Enforce a policy on DEV's egress with an enforcer of nicsched's engine, until
    /// Ctrl-C or SIGTERM: every tenant frame the host sends out of DEV goes through
    /// the engine and leaves paced at the link rate. Fail-open: when the process
    /// ends, however it ends, DEV is as it was and its traffic flows unshaped
    /// (docs/realhost.md).
    Enforce(realhost_cli::EnforceArgs),
    /// Measure an enforcer's cost on this machine: enqueue+dequeue pairs per second
    /// on one core and bytes of state per class, on a two-level tree (16 tenants,
    /// classes split by destination) with the active classes backlogged.
    ///
    /// Sizes a host: `nicsched bench -e wf2q --classes 100000 --active 0.01`.
    /// With `--vs rte_sched`, DPDK's QoS scheduler runs the same classes, each
    /// kept two packets deep, in the same run (build it first with
    /// scripts/setup.sh). Its pipes are capped at the link rate and never wait for
    /// credits, where by default each class here is capped at its share of the
    /// link and waits between its packets: give `--class-cap link` to run
    /// nicsched on the peer's load.
    ///
    /// With `--threads N`, the same load is then driven from N threads for as long
    /// again, and the speedup over the one-thread rate of the same run is reported.
    /// `valve` and `fairnic` run one shard per thread, as on N engine cores: each
    /// thread serves its own tenants' queues with local state, and the shards share
    /// only what they must through atomics (valve's rates, fairnic's overflow pool).
    /// Every other enforcer is single-threaded, as the lab's engine thread is: N
    /// producer threads prepare packets and hand them over in batches to the
    /// enforcer's own thread, which enqueues and dequeues (N + 1 threads in all).
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
        /// that measurement). valve and fairnic need a backlogged class on every
        /// engine core: at most 16 threads (one per tenant of the tree), fewer with
        /// a small --active.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u16).range(1..=sched::bench::THREADS_MAX as i64))]
        threads: u16,
        /// Frames taken at once, and refills handed back at once, with the
        /// enforcer's burst calls (1: one pair at a time, each departure refilled
        /// at once). rte_sched's peer always works in bursts of 32; give 32 to
        /// compare like for like.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u16).range(1..=sched::bench::BURST_MAX as i64))]
        burst: u16,
        /// What each class is capped at: `share`, its equal part of the link
        /// among the backlogged classes, so that every cap binds and the enforcer
        /// times each class's wait between two packets (SENIC's use); `link`, the
        /// link rate, so that no class ever waits and the enforcer only shares the
        /// link among them, as rte_sched's peer does with its pipes.
        #[arg(long, value_name = "CAP", default_value = "share", value_parser = class_cap)]
        class_cap: sched::bench::ClassCap,
        /// Measure this many times, round after round (the enforcer, then its
        /// `--vs` peer, in each), adding up the counts; the lines then give each
        /// one's lowest and highest round, and the ratio's. On a machine shared
        /// with other work give 3 or more, and read the ratio with its range: one
        /// round of each may catch a neighbour's load on one side only (a 2-vCPU
        /// VM moved one ratio from 0.79x to 1.46x within three rounds).
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u16).range(1..=BENCH_ROUNDS_MAX))]
        rounds: u16,
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

/// Sends the `tracing` events of the commands that emit them (`enforce`'s lines
/// of what it did, `lab`'s warnings) to stderr, where stdout stays the
/// command's output.
pub(crate) fn log_to_stderr() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
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
        } => run::scenario::check(&file, &enforcers, json),
        Command::Explain { file, active, json } => {
            run::scenario::explain(&file, active.as_deref(), json)
        }
        Command::Sim {
            scenario,
            enforcers,
            out,
            seed,
            jobs,
            quiet,
            json,
        } => run::sim_world::simulate(
            &scenario,
            &enforcers,
            out,
            seed,
            jobs.map(usize::from),
            run::Printing { quiet, json },
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
        Command::Lab(args) => args.run(),
        Command::LabBench(args) => args.run(),
        Command::Tc { file, dev } => commands::tc(&file, &dev),
        Command::Apply(args) => realhost_cli::apply(args),
        Command::Watch(args) => realhost_cli::watch(args),
        Command::Enforce(args) => realhost_cli::enforce(args),
        Command::Bench {
            enforcer,
            classes,
            active,
            seconds,
            vs,
            threads,
            burst,
            class_cap,
            rounds,
            json,
        } => commands::bench(
            &sched::bench::BenchConfig {
                enforcer,
                classes,
                active_fraction: active,
                seconds,
                threads: usize::from(threads),
                burst: usize::from(burst),
                class_cap,
            },
            vs.as_deref(),
            u32::from(rounds),
            json,
        ),
        Command::Compare {
            results,
            markdown,
            json,
            baseline,
            threshold,
            expect_missing,
        } => run::compare::compare(
            &results,
            &baseline,
            &threshold,
            &expect_missing,
            markdown,
            json,
        ),
        Command::Report { results, out } => report_page::report(&results, out),
        Command::Enforcers { markdown, json } => commands::enforcers(markdown, json),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let check = help_of("check");
        let one_host = sched::registry::defaults(sched::registry::World::OneHost).join(", ");
        assert!(check.contains(&format!("Default: {one_host}.")), "{check}");
        let per_core = sched::ENFORCERS
            .iter()
            .filter(|e| matches!(e.threads(), Some(sched::registry::Threads::PerCore { .. })))
            .map(|e| format!("`{}`", e.name))
            .collect::<Vec<_>>()
            .join(" and ");
        let bench = help_of("bench");
        let sharded = format!("{per_core} run one shard per thread");
        assert!(bench.contains(&sharded), "{sharded} in {bench}");
        let sharded = format!("Under {per_core} (the enforcers that run per core)");
        assert!(lab.contains(&sharded), "{sharded} in {lab}");
        let defaults = lab::default_enforcers().collect::<Vec<_>>().join(", ");
        let lab_bench = help_of("lab-bench");
        assert!(
            lab_bench.contains(&format!("Default: {defaults}.")),
            "{defaults} in {lab_bench}"
        );
        let sharded = format!("{per_core} get a thread per shard");
        assert!(lab_bench.contains(&sharded), "{sharded} in {lab_bench}");
    }
}
