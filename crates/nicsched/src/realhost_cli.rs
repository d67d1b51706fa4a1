//! `nicsched apply` and `nicsched watch`: their flags, and the wiring to `realhost`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use run::Failure;
use run::scenario::load_policy_or_scenario;

use crate::commands::tc_refusal;
use crate::flags::seconds_up_to;

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
    let commands = lab::tc_commands(&policy, dev).map_err(|e| tc_refusal(file, e))?;
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
    sched::approximation("tonic-band", &on_dev).map_err(|e| Failure::runtime(e.to_string()))
}

pub(crate) fn watch(args: WatchArgs) -> Result<(), Failure> {
    let (policy, commands) = compiled(&args.file, &args.dev)?;
    let mut watch = realhost::Watch::start(policy, &args.dev, &commands).map_err(failure)?;
    let interval = Duration::from_secs_f64(args.interval);
    let mut next = Instant::now();
    let mut printed = 0;
    while args.count.is_none_or(|count| printed < count) {
        next += interval;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let sample = watch.sample().map_err(failure)?;
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
