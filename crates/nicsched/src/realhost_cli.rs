//! `nicsched apply` and `nicsched watch`: their flags, and the wiring to `realhost`.

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
    /// prints.
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
    let (policy, commands) = match mechanism {
        realhost::Mechanism::Htb => compiled(&file, &args.dev)?,
    };
    let applied =
        realhost::apply(&args.dev, &file.display().to_string(), &commands).map_err(failure)?;
    let approximation = lab::htb_approximation(&policy);
    if args.json {
        run::output::print_json(&serde_json::json!({
            "applied": applied,
            "approximation": approximation,
        }));
    } else {
        println!(
            "{}: {} applied and read back: {} classes, {} filters as the policy asks{}; `nicsched apply --remove --dev {}` puts it back (recorded in {})",
            applied.dev,
            applied.mechanism.name(),
            applied.classes,
            applied.filters,
            if applied.replaced {
                " (replacing the last apply)"
            } else {
                ""
            },
            applied.dev,
            applied.record
        );
        for line in &approximation.approximate {
            eprintln!("  approximate: {line}");
        }
        for line in &approximation.ignored {
            eprintln!("  not enforced: {line}");
        }
    }
    Ok(())
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
