//! The commands beside the runs of a scenario: `enforcers`, `lab --cleanup`,
//! `lab-bench` and `bench`; and the live view's flags of `nicsched lab`.

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use run::Failure;
use run::enforcers::is_lab_only;
use run::scenario::{htb_refusal, load_policy_or_scenario};
use run::{provenance, provenance_of, unwritten};

use crate::live;

/// `nicsched enforcers`: sched's registry and the kernel's HTB, as text, a
/// Markdown table or JSON.
pub(crate) fn enforcers(markdown: bool, json: bool) -> Result<(), Failure> {
    let listed = listed_enforcers();
    if json {
        run::output::print_json(&serde_json::json!({ "enforcers": listed }));
    } else if markdown {
        print!("{}", enforcers_markdown(&listed));
    } else {
        print!("{}", enforcers_text(&listed));
    }
    Ok(())
}

/// `nicsched tc`: the tc script of the policy (or scenario's policy) at `file`
/// for device `dev`.
pub(crate) fn tc(file: &Path, dev: &str) -> Result<(), Failure> {
    let policy = load_policy_or_scenario(file)?;
    let script = lab::tc_script(&policy, dev).map_err(|e| tc_refusal(file, &policy, e))?;
    print!("{script}");
    Ok(())
}

/// Why `policy`, read from `file`, does not compile to HTB on a device: a bad
/// `--dev`; a tenant without `match.src`, at its entry in the file
/// (`FILE:LINE:COLUMN: error: ...`); or the policy's `FILE: error: ...` (status 2
/// each).
pub(crate) fn tc_refusal(
    file: &Path,
    policy: &policy::Policy,
    error: lab::TcScriptError,
) -> Failure {
    match &error {
        lab::TcScriptError::Device(_) => Failure::input(error.to_string()),
        lab::TcScriptError::Unmatched { tenant, .. } => policy
            .tenants
            .iter()
            .position(|t| &t.name == tenant)
            .and_then(|index| policy::tenant_error(file, index, error.to_string(), None))
            .map_or_else(|| htb_refusal(&file.display(), error), Failure::from),
        lab::TcScriptError::TooLarge(_) => htb_refusal(&file.display(), error),
    }
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

/// The live view's flags of `nicsched lab`, as given; once started, the view.
pub(crate) struct LiveAsked {
    pub(crate) interval: Option<u64>,
    pub(crate) no_live: bool,
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
    pub(crate) started: Option<live::LiveOptions>,
}

impl run::lab_world::Live for LiveAsked {
    /// Binds `--metrics-listen` (status 2 if it cannot) and serves from there;
    /// the live view of a run of `quiet` (lines only without it).
    fn start(&mut self, quiet: bool) -> Result<(), Failure> {
        let metrics = match self.metrics_listen {
            Some(addr) => {
                let metrics = std::sync::Arc::new(live::Metrics::default());
                live::listen(addr, metrics.clone())?;
                Some(metrics)
            }
            None => None,
        };
        self.started = Some(live::LiveOptions {
            lines: !quiet && !self.no_live,
            line_every_ns: self.interval.unwrap_or(live::LINE_EVERY_NS_DEFAULT),
            metrics,
        });
        Ok(())
    }

    fn header(&self, interval_ns: u64) -> Option<String> {
        let live = self.started.as_ref().filter(|live| live.lines)?;
        Some(live.header(interval_ns))
    }

    fn watch(
        &self,
        enforcer: &str,
        bar: &ProgressBar,
        scenario: &policy::Scenario,
        run: &mut dyn FnMut(&mut dyn lab::Watch) -> Result<report::RunRecord, lab::LabError>,
    ) -> Result<report::RunRecord, lab::LabError> {
        let Some(live) = &self.started else {
            return run(&mut |ns| bar.set_position(ns / 1_000_000));
        };
        let mut watching = live::Watching::new(enforcer, bar, live, scenario);
        let record = run(&mut watching)?;
        bar.finish();
        watching.finished(&record);
        Ok(record)
    }

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

/// `nicsched lab --cleanup`: exits 1 if anything could not be removed.
pub(crate) fn lab_cleanup() -> Result<(), Failure> {
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
            .position(|p| is_lab_only(p))
            .unwrap_or(paths.len());
        paths.insert(at, lab::KERNEL_FORWARDING.to_string());
    }
    paths
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn lab_bench(
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
    if paths.iter().any(|p| is_lab_only(p)) {
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
        engine_realtime: lab::engine_realtime_fits(engine_threads),
        ..lab::BenchOptions::default()
    };
    if !quiet {
        let priority = if options.engine_realtime {
            "SCHED_FIFO"
        } else {
            "normal priority"
        };
        eprintln!(
            "lab-bench: {label}, {} tenant(s) x {flows} UDP flow(s), {size}-byte payloads, {seconds} s per path, {rounds} round(s), {engine_threads} engine thread(s) at {priority}: {}",
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

pub(crate) fn bench(
    config: &sched::bench::BenchConfig,
    vs: Option<&str>,
    rounds: u32,
    json: bool,
) -> Result<(), Failure> {
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
    let parts = 1 + u64::from(peer.is_some());
    let bar = ProgressBar::new(u64::from(rounds) * parts);
    bar.set_style(
        ProgressStyle::with_template("[{bar:30}] round {pos}/{len}  {msg:<9} {elapsed}")
            .expect("constant template")
            .progress_chars("=> "),
    );
    if rounds == 1 {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut results = Vec::new();
    let mut peer_results = Vec::new();
    for _ in 0..rounds {
        bar.set_message(enforcer.to_string());
        results.push(sched::bench::run(config).map_err(Failure::runtime)?);
        bar.inc(1);
        if let Some(path) = &peer {
            bar.set_message("rte_sched");
            let classes = results[0].classes;
            peer_results.push(
                sched::bench::run_peer(path, classes, active, config.seconds)
                    .map_err(Failure::runtime)?,
            );
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let result = sched::bench::add_rounds(&results).expect("at least one round");
    let rates = || results.iter().map(|r| r.pairs_per_sec);
    let (lowest, highest) = sched::bench::spread(rates()).unwrap_or_default();
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
        "burst": result.burst,
        "pairs_per_sec_1_thread": result.pairs_per_sec_1_thread,
        "speedup": result.speedup,
        "rounds": rounds,
        "rounds_pairs_per_sec": rates().collect::<Vec<_>>(),
        "class_cap": config.class_cap.name(),
    });
    let peer_result = sched::bench::add_peer_rounds(&peer_results);
    let round_ratios = || {
        results
            .iter()
            .zip(&peer_results)
            .map(|(r, p)| r.pairs_per_sec / p.pairs_per_sec)
    };
    if let Some(p) = &peer_result {
        let (ratio_lowest, ratio_highest) =
            sched::bench::spread(round_ratios()).unwrap_or_default();
        out["peer"] = "rte_sched".into();
        out["peer_pairs_per_sec"] = p.pairs_per_sec.into();
        out["peer_ns_per_pair"] = p.ns_per_pair.into();
        out["peer_queues"] = p.queues.into();
        out["peer_rounds_pairs_per_sec"] = peer_results
            .iter()
            .map(|p| p.pairs_per_sec)
            .collect::<Vec<_>>()
            .into();
        out["ratio"] = (result.pairs_per_sec / p.pairs_per_sec).into();
        out["ratio_lowest"] = ratio_lowest.into();
        out["ratio_highest"] = ratio_highest.into();
    }
    if json {
        println!("{out}");
        return Ok(());
    }
    let of_rounds = |lowest: f64, highest: f64| {
        if rounds == 1 {
            String::new()
        } else {
            format!(
                ", {rounds} rounds from {:.2} to {:.2}",
                lowest / 1e6,
                highest / 1e6
            )
        }
    };
    let capped = match config.class_cap {
        sched::bench::ClassCap::Share => "each capped at its share of the link",
        sched::bench::ClassCap::Link => "each capped at the link rate",
    };
    if result.threads > 1 {
        println!(
            "{}: {} classes ({} backlogged, {capped}): {:.2} M pairs/s on {} threads{}, {:.2}x the {:.2} M pairs/s of one thread, {:.0} bytes per class",
            result.enforcer,
            result.classes,
            result.active_classes,
            result.pairs_per_sec / 1e6,
            result.threads,
            of_rounds(lowest, highest),
            result.speedup,
            result.pairs_per_sec_1_thread / 1e6,
            bytes_per_class
        );
        return Ok(());
    }
    println!(
        "{}: {} classes ({} backlogged, {capped}): {:.2} M pairs/s ({:.1} ns per enqueue+dequeue){}, {:.0} bytes per class",
        result.enforcer,
        result.classes,
        result.active_classes,
        result.pairs_per_sec / 1e6,
        result.ns_per_pair,
        of_rounds(lowest, highest),
        bytes_per_class
    );
    if let Some(p) = &peer_result {
        let rates = peer_results.iter().map(|p| p.pairs_per_sec);
        let (peer_lowest, peer_highest) = sched::bench::spread(rates).unwrap_or_default();
        let ratios = match sched::bench::spread(round_ratios()) {
            Some((lo, hi)) if rounds > 1 => format!(" (rounds from {lo:.2}x to {hi:.2}x)"),
            _ => String::new(),
        };
        println!(
            "rte_sched: {} queues (each pipe capped at the link rate): {:.2} M pairs/s ({:.1} ns){}; {} / rte_sched = {:.2}x{ratios}",
            p.queues,
            p.pairs_per_sec / 1e6,
            p.ns_per_pair,
            of_rounds(peer_lowest, peer_highest),
            result.enforcer,
            result.pairs_per_sec / p.pairs_per_sec
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
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
