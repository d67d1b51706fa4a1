//! `nicsched apply`, `nicsched watch` and `nicsched enforce`: their flags, and the
//! wiring to `realhost`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use run::Failure;
use run::scenario::load_policy_or_scenario;

use crate::commands::tc_refusal;
use crate::flags::seconds_up_to;
use crate::live;

/// The longest `watch --interval`: a day.
const WATCH_INTERVAL_S_MAX: f64 = 86_400.0;

#[derive(Args)]
pub(crate) struct ApplyArgs {
    /// Policy file, or a scenario file (its policy is applied). Not with --remove.
    #[arg(required_unless_present = "remove", conflicts_with = "remove")]
    file: Option<PathBuf>,
    /// The egress device (an interface name: 1 to 15 of A-Z a-z 0-9 _ . : @ -).
    #[arg(long, value_name = "DEV")]
    dev: String,
    /// How the kernel holds the policy: `htb`, the classes and filters `nicsched tc`
    /// prints; `tonic`, mq and a pfifo_fast per Tx queue with a BPF program at
    /// DEV's egress that puts each tenant's frames on its pool of Tx queues.
    #[arg(long, value_name = "NAME", default_value = realhost::Mechanism::Htb.name(),
          value_parser = clap::builder::PossibleValuesParser::new(realhost::Mechanism::NAMES))]
    mechanism: String,
    /// Put DEV back as it was before nicsched's first apply, and forget it.
    #[arg(long)]
    remove: bool,
    /// Print one JSON object instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub(crate) struct WatchArgs {
    /// The policy (or scenario) applied to DEV.
    file: PathBuf,
    /// The device `nicsched apply` configured.
    #[arg(long, value_name = "DEV")]
    dev: String,
    /// Seconds between lines.
    #[arg(long, value_name = "S", default_value = "1",
          value_parser = |s: &str| seconds_up_to(s, WATCH_INTERVAL_S_MAX))]
    interval: f64,
    /// Stop after N lines. Default: until stopped.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// One JSON object per line instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
    /// Serve each tenant's figures of the last interval as Prometheus metrics
    /// (OpenMetrics text) at http://ADDR/metrics, with the names `nicsched lab`
    /// serves: throughput and ideal (bit/s), bytes and drops so far, backlogged
    /// (docs/realhost.md). A loopback address only (127.0.0.1:PORT or [::1]:PORT;
    /// port 0 picks a free one): the metrics have no authentication. Prints
    /// `metrics: http://ADDR/metrics` on stderr.
    #[arg(long, value_name = "ADDR", value_parser = live::loopback_address)]
    metrics_listen: Option<std::net::SocketAddr>,
}

#[derive(Args)]
pub(crate) struct EnforceArgs {
    /// The policy (or scenario) to enforce; every tenant needs a `match.src`.
    file: PathBuf,
    /// The egress device whose tenants' frames go through the engine.
    #[arg(long, value_name = "DEV")]
    dev: String,
    /// The enforcer, one that runs in nicsched's engine (`nicsched enforcers`).
    #[arg(long = "enforcer", short = 'e', value_name = "NAME")]
    enforcer: String,
    /// The rate frames leave DEV at. Default: DEV's speed as its driver reports it.
    #[arg(long, value_name = "RATE", value_parser = crate::flags::lab_link_rate)]
    link_rate: Option<u64>,
    /// Seconds between two live lines: per tenant, its Mbit/s on DEV against its
    /// ideal for the demand that reached the engine, and its drops meanwhile.
    #[arg(long, value_name = "S", value_parser = live::line_every)]
    interval: Option<u64>,
    /// Serve the live figures as Prometheus metrics at http://ADDR/metrics (a
    /// loopback address only; port 0 picks a free one).
    #[arg(long, value_name = "ADDR", value_parser = live::loopback_address)]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Where summary.json goes when it stops. Default: results/enforce-DEV.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Each interval as one JSON object on a line of stdout, and the summary last.
    #[arg(long)]
    json: bool,
}

/// Refuses a policy with a tenant without `match.src` at that tenant's entry
/// (FILE:LINE:COLUMN), as `nicsched tc` does.
fn every_tenant_matched(file: &Path, policy: &policy::Policy) -> Result<(), Failure> {
    realhost::enforce::unmatched(policy).map_err(|(index, why)| {
        policy::tenant_error(file, index, why.clone(), None).map_or_else(
            || Failure::input(format!("{}: error: {why}", file.display())),
            Failure::from,
        )
    })
}

fn failure(error: realhost::Error) -> Failure {
    match error {
        realhost::Error::Input(message) => Failure::input(message),
        realhost::Error::Failed(message) => Failure::runtime(message),
    }
}

/// The policy at `file` and its `tc -batch` for `dev`.
fn compiled(file: &Path, dev: &str) -> Result<(policy::Policy, String), Failure> {
    let policy = load_policy_or_scenario(file)?;
    let commands = lab::tc_commands(&policy, dev).map_err(|e| tc_refusal(file, &policy, e))?;
    Ok((policy, commands))
}

pub(crate) fn apply(args: ApplyArgs) -> Result<(), Failure> {
    if args.remove {
        let removed = realhost::remove(&args.dev).map_err(failure)?;
        if args.json {
            run::output::print_json(&removed);
        } else {
            println!(
                "{}: nicsched's {} removed; the device has its qdiscs of before again",
                removed.dev,
                removed.mechanism.name()
            );
        }
        return Ok(());
    }
    let file = args.file.expect("clap requires FILE without --remove");
    let mechanism = realhost::Mechanism::from_name(&args.mechanism)
        .expect("clap takes only the names of built mechanisms");
    let (policy, plan) = match mechanism {
        realhost::Mechanism::Htb => {
            let (policy, commands) = compiled(&file, &args.dev)?;
            (policy, realhost::Plan::Htb { commands })
        }
        realhost::Mechanism::Tonic => {
            let policy = load_policy_or_scenario(&file)?;
            every_tenant_matched(&file, &policy)?;
            let plan = realhost::TonicPlan::new(&policy, &file.display().to_string(), &args.dev)
                .map_err(failure)?;
            (policy, realhost::Plan::Tonic(plan))
        }
    };
    let approximation = match &plan {
        realhost::Plan::Htb { .. } => lab::htb_approximation(&policy),
        realhost::Plan::Tonic(plan) => tonic_approximation(&policy, plan.tx_queues)?,
    };
    let applied = realhost::apply(&args.dev, &file.display().to_string(), plan).map_err(failure)?;
    if args.json {
        run::output::print_json(&serde_json::json!({
            "applied": applied,
            "approximation": approximation,
        }));
    } else {
        let what = match &applied.tonic {
            None => format!(
                "{} classes, {} filters as the policy asks",
                applied.classes, applied.filters
            ),
            Some(tonic) => format!(
                "mq and {} pfifo_fast, pools {}, XPS off on {} Tx queues, the program at its tcx egress pinned in {}{}",
                tonic.tx_queues,
                tonic
                    .pools
                    .iter()
                    .map(|p| format!("{} {}-{}", p.tenant, p.first_queue, p.last_queue))
                    .collect::<Vec<_>>()
                    .join(", "),
                tonic.xps_cleared,
                tonic.pins,
                if tonic.mounted_bpffs {
                    " (a BPF filesystem mounted at /sys/fs/bpf)"
                } else {
                    ""
                }
            ),
        };
        println!(
            "{}: {} applied and read back: {what}{}; `nicsched apply --remove --dev {}` puts it back (recorded in {})",
            applied.dev,
            applied.mechanism.name(),
            if applied.replaced {
                " (replacing the last apply)"
            } else {
                ""
            },
            applied.dev,
            applied.record
        );
        if applied.tonic.as_ref().is_some_and(|t| t.mounted_bpffs) {
            eprintln!(
                "warning: no BPF filesystem was mounted at /sys/fs/bpf, so apply mounted one: the program's pins live as long as this mount namespace, and `ip netns exec` makes one per command; where it ends, the program goes with it (mount bpffs where it lasts, as systemd does at boot)"
            );
        }
        for line in &approximation.approximate {
            eprintln!("  approximate: {line}");
        }
        for line in &approximation.ignored {
            eprintln!("  not enforced: {line}");
        }
    }
    Ok(())
}

/// What tonic holds of `policy` on a device of `tx_queues` Tx queues: what `nicsched
/// check -e tonic-band` says of the policy on a link of that many queues (the
/// pools `check -e tonic` prints, and the priority band the program gives).
fn tonic_approximation(
    policy: &policy::Policy,
    tx_queues: u16,
) -> Result<sched::Approximation, Failure> {
    let mut on_dev = policy.clone();
    on_dev.link.queues = tx_queues;
    // The program puts a prioritised app in a band, as the row of this driver does.
    let band = sched::ENFORCERS
        .iter()
        .find(|e| e.nic() == Some(sched::multiqueue::Driver::TonicBand))
        .expect("the registry has the banded TONIC row");
    sched::approximation(band.name, &on_dev).map_err(|e| Failure::runtime(e.to_string()))
}

pub(crate) fn watch(args: WatchArgs) -> Result<(), Failure> {
    let (policy, commands) = compiled(&args.file, &args.dev)?;
    let mut watch = realhost::Watch::start(policy, &args.dev, &commands).map_err(failure)?;
    let metrics = match args.metrics_listen {
        Some(addr) => {
            let metrics = std::sync::Arc::new(live::Metrics::watch());
            live::listen(addr, metrics.clone())?;
            Some(metrics)
        }
        None => None,
    };
    let interval = Duration::from_secs_f64(args.interval);
    let mut next = Instant::now();
    let mut printed = 0;
    while args.count.is_none_or(|count| printed < count) {
        next += interval;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let sample = watch.sample().map_err(failure)?;
        // Before the line: whoever reads a line finds its interval served.
        if let Some(metrics) = &metrics {
            metrics.watched(watch.mechanism().name(), &sample);
        }
        if args.json {
            println!(
                "{}",
                serde_json::to_string(&sample).expect("a sample serialises")
            );
        } else {
            println!("{sample}");
        }
        printed += 1;
    }
    Ok(())
}

/// How often `enforce` looks for a stop signal between two lines.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Runs until Ctrl-C or SIGTERM, printing a line per tenant and interval; then
/// detaches and writes the summary. Status 3 when a self-check failed.
pub(crate) fn enforce(args: EnforceArgs) -> Result<(), Failure> {
    crate::log_to_stderr();
    let result = enforcing(args);
    if let Err(failure) = &result {
        tracing::error!("refused or failed: {}", failure.message);
    }
    result
}

fn enforcing(args: EnforceArgs) -> Result<(), Failure> {
    let policy = load_policy_or_scenario(&args.file)?;
    every_tenant_matched(&args.file, &policy)?;
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("results").join(format!("enforce-{}", args.dev)));
    std::fs::create_dir_all(&out)
        .map_err(|e| Failure::input(format!("--out {}: {e}", out.display())))?;
    let metrics = match args.metrics_listen {
        Some(addr) => {
            let metrics = std::sync::Arc::new(live::Metrics::default());
            live::listen(addr, metrics.clone())?;
            Some(metrics)
        }
        None => None,
    };
    let signals = lab::StopSignals::install();
    let mut enforcing = realhost::enforce::start(&realhost::enforce::Request {
        policy: &policy,
        dev: &args.dev,
        enforcer: &args.enforcer,
        link_rate_bps: args.link_rate,
    })
    .map_err(failure)?;
    let every = Duration::from_nanos(args.interval.unwrap_or(live::LINE_EVERY_NS_DEFAULT));
    eprintln!(
        "enforce: {} on {} at {} (tap {}); every {}: each tenant's Mbit/s on {} against its ideal for what reached the engine, its drops meanwhile; Ctrl-C stops",
        args.enforcer,
        args.dev,
        policy::format_rate(enforcing.link_rate_bps() as f64),
        enforcing.tap(),
        policy::format_time(every.as_nanos() as u64),
        args.dev,
    );
    let mut next = Instant::now() + every;
    let mut line_from_ns = 0;
    while !lab::interrupted() {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(SIGNAL_POLL));
            continue;
        }
        next += every;
        let sample = enforcing.sample().map_err(failure)?;
        let end_ns = (sample.time_s * 1e9) as u64;
        let line = live::Line {
            start_ns: line_from_ns,
            end_ns,
            tenants: sample
                .tenants
                .iter()
                .map(|t| live::TenantFigures {
                    name: t.name.clone(),
                    measured_bps: t.throughput_bps,
                    ideal_bps: t.ideal_bps,
                    drops: Some(t.drops),
                })
                .collect(),
        };
        let seconds = (end_ns - line_from_ns) as f64 / 1e9;
        line_from_ns = end_ns;
        if let Some(metrics) = &metrics {
            let sent: Vec<u64> = sample
                .tenants
                .iter()
                .map(|t| (t.throughput_bps * seconds / 8.0).round() as u64)
                .collect();
            metrics.enforced(&args.enforcer, &line, &sent, end_ns);
        }
        if args.json {
            println!(
                "{}",
                serde_json::to_string(&sample).expect("a sample serialises")
            );
        }
        for text in line.text(&args.enforcer) {
            eprintln!("{text}");
        }
    }
    drop(signals);
    let summary = enforcing.stop("a stop signal").map_err(failure)?;
    let path = out.join("summary.json");
    write_summary(&path, &summary)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&summary).expect("a summary serialises")
        );
    }
    for check in &summary.checks {
        eprintln!(
            "check {}: {} ({})",
            check.name,
            if check.ok { "ok" } else { "FAILED" },
            check.detail
        );
    }
    eprintln!("summary: {}", path.display());
    if summary.ok {
        Ok(())
    } else {
        Err(Failure {
            message: format!("a self-check failed: see {}", path.display()),
            status: crate::EXIT_CHECKS_FAILED,
        })
    }
}

/// `summary` at `path`, written beside it and renamed over it: never half a file.
fn write_summary(path: &Path, summary: &realhost::enforce::Summary) -> Result<(), Failure> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let cannot = |e: &dyn std::fmt::Display| {
        Failure::runtime(format!("cannot write {}: {e}", path.display()))
    };
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| cannot(&e))?;
    serde_json::to_writer_pretty(&mut file, summary).map_err(|e| cannot(&e))?;
    file.persist(path).map_err(|e| cannot(&e))?;
    Ok(())
}
