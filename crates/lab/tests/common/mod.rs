//! Helpers the lab's end-to-end tests share.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

/// Whether CI runs the tests (`CI` set and not `false`, as CI services and
/// `.ci/run` set it): what a test needs is then installed, and missing it is a
/// failure, not a reason to skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Whether `test` can run here: as root, with each of `programs` (a name and an
/// argument it answers without side effects, such as `--version`). When it cannot,
/// it fails in CI and, elsewhere, says why and is to pass without running.
pub fn runnable(test: &str, programs: &[(&str, &str)]) -> bool {
    let missing = if let Err(e) = lab::check_root() {
        Some(e.to_string())
    } else {
        programs
            .iter()
            .find(|(program, arg)| {
                std::process::Command::new(program)
                    .arg(arg)
                    .output()
                    .is_err()
            })
            .map(|(program, _)| {
                format!("`{program}` is missing (scripts/setup-lab.sh installs it)")
            })
    };
    match missing {
        None => true,
        Some(why) if in_ci() => panic!("{test}: {why}; CI must run every lab test"),
        Some(why) => {
            eprintln!("skipping {test}: {why}");
            false
        }
    }
}

/// Whether a lab name (`nslID…`, a namespace or an interface) is this process's:
/// the lab derives run ids from the pid (`(pid % 1000) * 10 + k`), so lab runs of
/// other processes on the same machine (another test binary, an operator) are not
/// mistaken for leftovers.
fn ours(name: &str) -> bool {
    let digits: String = name
        .strip_prefix("nsl")
        .unwrap_or("")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse::<u32>()
        .is_ok_and(|id| id / 10 == std::process::id() % 1000)
}

/// This process's lab namespaces.
pub fn our_namespaces() -> Vec<String> {
    lab::lab_namespaces()
        .expect("ip netns list")
        .into_iter()
        .filter(|n| ours(n))
        .collect()
}

/// Fails if a namespace of this process not in `before`, an interface of this
/// process's runs in this namespace, or a run's temporary directory
/// (`nicsched-lab-nsl…`, `nicsched-lab-bench-nsl…`) is still there: every test
/// that calls this gives its runs `--out` where it expects a log to be named.
pub fn assert_nothing_left(before: &[String]) {
    let temporary: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .expect("the temporary directory")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| {
            let run = name.strip_prefix("nicsched-lab-").unwrap_or("");
            ours(run.strip_prefix("bench-").unwrap_or(run))
        })
        .collect();
    assert!(
        temporary.is_empty(),
        "run directories left behind: {temporary:?}"
    );
    let new: Vec<String> = our_namespaces()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert!(new.is_empty(), "namespaces left behind: {new:?}");
    let links = std::process::Command::new("ip")
        .args(["-o", "link"])
        .output()
        .expect("ip link");
    for line in String::from_utf8_lossy(&links.stdout).lines() {
        let name = line.split(':').nth(1).unwrap_or("").trim();
        assert!(
            !(ours(name) && (name.contains('t') || name.ends_with("up") || name.ends_with("br"))),
            "interface left behind: {line}"
        );
    }
}

/// Per tenant: mean throughput and mean ideal over the steady intervals after the first second.
pub fn tenant_means(record: &report::RunRecord) -> Vec<(f64, f64)> {
    (0..record.tenants.len())
        .map(|t| {
            let steady: Vec<_> = record
                .intervals
                .iter()
                .filter(|i| i.steady && i.start_ns >= 1_000_000_000 && i.tenant_active(t))
                .collect();
            let n = steady.len().max(1) as f64;
            let got = steady
                .iter()
                .map(|i| record.tenant_throughput_bps(i, t))
                .sum::<f64>()
                / n;
            let ideal = steady.iter().map(|i| i.tenant_ideal_bps(t)).sum::<f64>() / n;
            (got, ideal)
        })
        .collect()
}

/// Lab runs of a case before a test gives up on the engine keeping up: `valve`
/// on an agreement case fell behind in two runs of three on an idle 2-core
/// machine (2.4% and 6.4% of the link lost while frames waited), and the rpc
/// round-trip case in three of three in one CI run, each time with the test's
/// own senders, sink and engine on the two cores; `wf2q` on an agreement case in
/// five of five in another (1.0-2.7% lost, 0.02-0.05% on the same machine idle).
pub const ATTEMPTS: usize = 8;

/// The first of up to [`ATTEMPTS`] records from `run` in which the engine kept
/// up with the link (its `engine` check passed), or `None`: on the 2-core
/// machine a burst of other work can leave the link idle while frames wait,
/// which lowers every tenant's figure and says nothing of the enforcer. A record
/// whose `engine` check fails has figures it does not vouch for, so a test never
/// judges them.
pub fn kept_up(
    what: &str,
    mut run: impl FnMut() -> report::RunRecord,
) -> Option<report::RunRecord> {
    (0..ATTEMPTS).find_map(|_| {
        let record = run();
        let engine = record.checks.iter().find(|c| c.name == "engine");
        if let Some(behind) = engine.filter(|c| !c.ok) {
            eprintln!("{what}: run again: {}", behind.detail);
            return None;
        }
        Some(record)
    })
}
