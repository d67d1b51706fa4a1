//! `nicsched sweep --shard K/N` and `--merge`: a grid run as parts, by hand and as
//! a Slurm job array with the merge as a job that depends on it, merges into the
//! very files the sweep run whole writes; parts that are not one whole sweep are
//! refused, and nothing is written.

#[allow(
    dead_code,
    reason = "only its scratch folder: a sweep needs neither root nor programs"
)]
mod common;

use common::Scratch;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nicsched");

/// Two tenants, 200 ms: a grid of 8 runs takes about a second of simulation.
const SCENARIO: &str = "name: shard-test
policy:
  link: { rate: 10Gbit }
  tenants:
    - { name: a, weight: 1 }
    - { name: b, weight: 2 }
duration: 200ms
interval: 50ms
enforcers: [wf2q]
traffic:
  - { tenant: a, kind: bulk, flows: 2 }
  - { tenant: b, kind: bulk, flows: 2 }
";

/// Weights × seeds × enforcers: 2 × 2 × 2 runs.
const GRID: &[&str] = &[
    "--set",
    "policy.tenants.b.weight=1,3",
    "--seeds",
    "1..2",
    "-e",
    "valve",
    "-e",
    "wf2q",
    "-q",
    "-j",
    "1",
];

fn nicsched(binary: &str, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .output()
        .expect("the binary runs")
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The sweep of `grid` on `scenario`, whole (`shard` None) or one part, into `out`.
fn sweep(scenario: &str, grid: &[&str], shard: Option<&str>, out: &Path) -> Output {
    let mut args = vec!["sweep", scenario];
    args.extend(grid);
    if let Some(shard) = shard {
        args.extend(["--shard", shard]);
    }
    args.extend(["--out", path(out)]);
    nicsched(BIN, &args)
}

fn merge(binary: &str, parts: &[&Path], out: &Path) -> Output {
    let mut args = vec!["sweep", "--merge"];
    args.extend(parts.iter().map(|p| path(p)));
    args.extend(["-q", "--out", path(out)]);
    nicsched(binary, &args)
}

fn ok(output: &Output, what: &str) {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Every file of two results folders is byte for byte the same, but the marker,
/// whose provenance names the command; and both have the same files.
fn same_results(whole: &Path, merged: &Path) {
    let names = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let files = names(whole);
    assert_eq!(files, names(merged));
    for must in [
        "sweep.csv",
        "sweep.json",
        "jain_mean.png",
        "nicsched-run.json",
    ] {
        assert!(files.iter().any(|f| f == must), "{must} in {files:?}");
    }
    for file in files.iter().filter(|f| *f != "nicsched-run.json") {
        let read = |dir: &Path| std::fs::read(dir.join(file)).unwrap();
        assert!(
            read(whole) == read(merged),
            "{file} differs between {} and {}",
            whole.display(),
            merged.display()
        );
    }
}

/// The table a sweep prints, without the line naming its folder.
fn table(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.starts_with("results: "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn parts_run_by_hand_merge_into_what_the_whole_sweep_writes() {
    let scratch = Scratch::new("shard-by-hand");
    let scenario = scratch.file("shard.yaml", SCENARIO);
    let dir = |name: &str| scratch.0.join(name);
    let whole = sweep(&scenario, GRID, None, &dir("whole"));
    ok(&whole, "the whole sweep");

    let mut parts = Vec::new();
    for k in 0..3 {
        let part = dir(&format!("part{k}"));
        let run = sweep(&scenario, GRID, Some(&format!("{k}/3")), &part);
        ok(&run, "a part");
        assert!(
            String::from_utf8_lossy(&run.stdout).contains(&format!(
                "part {k} of 3 (from 0): {} of the grid's 8 runs",
                if k < 2 { 3 } else { 2 }
            )),
            "{}",
            String::from_utf8_lossy(&run.stdout)
        );
        assert!(!part.join("sweep.csv").exists(), "a part is not a sweep");
        parts.push(part);
    }
    // In any order.
    let merged = merge(BIN, &[&parts[2], &parts[0], &parts[1]], &dir("merged"));
    ok(&merged, "the merge");
    same_results(&dir("whole"), &dir("merged"));
    assert_eq!(table(&merged), table(&whole));

    // More parts than runs: the empty ones merge too.
    let small = ["--set", "policy.tenants.b.weight=1,3", "-q"];
    ok(&sweep(&scenario, &small, None, &dir("small")), "small");
    let mut small_parts = Vec::new();
    for k in 0..3 {
        let part = dir(&format!("small{k}"));
        ok(
            &sweep(&scenario, &small, Some(&format!("{k}/3")), &part),
            "a small part",
        );
        small_parts.push(part);
    }
    let small_parts: Vec<&Path> = small_parts.iter().map(PathBuf::as_path).collect();
    ok(
        &merge(BIN, &small_parts, &dir("small-merged")),
        "the small merge",
    );
    same_results(&dir("small"), &dir("small-merged"));

    // What is not every part of one sweep, of one build, is refused, and nothing written.
    let refused = |parts: &[&Path], binary: &str, says: &str| {
        let out = dir("refused");
        let run = merge(binary, parts, &out);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{says}: {stderr}");
        assert!(stderr.contains(says), "{says}: {stderr}");
        assert!(!out.exists(), "{says}: nothing is written");
    };
    let (p0, p1, p2) = (parts[0].as_path(), parts[1].as_path(), parts[2].as_path());
    refused(&[p0, p1], BIN, "1 of the 3 parts missing: 2/3");
    refused(
        &[p0, p1, p2, p1],
        BIN,
        "are both part 1 of 3: give each part once",
    );
    refused(
        &[p0, small_parts[1], p2],
        BIN,
        "are parts of different sweeps",
    );
    refused(&[p0, &dir("part7"), p2], BIN, "no such folder");
    // A folder a part's shard is still writing into is not its --out yet; one
    // without a marker is not a finished part.
    let unfinished = dir("unfinished");
    std::fs::create_dir(&unfinished).unwrap();
    std::fs::copy(p1.join("part.json"), unfinished.join("part.json")).unwrap();
    refused(&[p0, &unfinished, p2], BIN, "not a finished part");

    // Another build: the same binary but for one byte at its end, which it
    // does not read.
    let other = scratch.0.join("other-nicsched");
    let mut bytes = std::fs::read(BIN).unwrap();
    bytes.push(0);
    std::fs::write(&other, bytes).unwrap();
    std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut args = vec!["sweep", &scenario];
    args.extend(GRID);
    let other_part = dir("other-part1");
    args.extend(["--shard", "1/3", "--out", path(&other_part)]);
    ok(&nicsched(path(&other), &args), "a part by another build");
    refused(
        &[p0, &other_part, p2],
        BIN,
        "run every part of a sweep with one build",
    );
    refused(
        &[p0, p1, p2],
        path(&other),
        "merge with the nicsched that ran them",
    );
    std::fs::remove_file(&other).unwrap();

    // The scenario edited after the parts ran: they are not of the sweep it makes now.
    std::fs::write(&scenario, SCENARIO.replace("200ms", "250ms")).unwrap();
    refused(&[p0, p1, p2], BIN, "has changed since the parts ran it");
}

/// The test binary is built with the simulator's faults (Cargo.toml): with one
/// of them every run fails its conservation check. A part says so and exits 3;
/// the merge flags the runs as the whole sweep does, and exits 3 with its words.
#[test]
fn runs_that_fail_their_checks_in_parts_are_flagged_as_in_the_whole_sweep() {
    let scratch = Scratch::new("shard-checks");
    let scenario = scratch.file("shard.yaml", SCENARIO);
    let dir = |name: &str| scratch.0.join(name);
    let faulty = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("NICSCHED_FAULT", "lose-packets")
            .output()
            .expect("the binary runs")
    };
    let small = |out: &Path, shard: Option<&str>| {
        let mut args = vec![
            "sweep",
            &scenario,
            "--set",
            "policy.tenants.b.weight=1,3",
            "-q",
        ];
        if let Some(shard) = shard {
            args.extend(["--shard", shard]);
        }
        args.extend(["--out", path(out)]);
        faulty(&args)
    };
    let whole = small(&dir("whole"), None);
    assert_eq!(whole.status.code(), Some(3));
    for k in 0..2 {
        let part = small(&dir(&format!("part{k}")), Some(&format!("{k}/2")));
        let stderr = String::from_utf8_lossy(&part.stderr);
        assert_eq!(part.status.code(), Some(3), "{stderr}");
        assert!(
            stderr.contains("self-checks failed in 1 of this part's runs"),
            "{stderr}"
        );
    }
    let merged = merge(BIN, &[&dir("part0"), &dir("part1")], &dir("merged"));
    assert_eq!(merged.status.code(), Some(3));
    assert_eq!(merged.stderr, whole.stderr);
    assert_eq!(table(&merged), table(&whole));
    same_results(&dir("whole"), &dir("merged"));
    let csv = std::fs::read_to_string(dir("merged").join("sweep.csv")).unwrap();
    assert!(
        csv.lines().skip(1).all(|row| row.ends_with("conservation")),
        "{csv}"
    );
}

/// Whether Slurm takes jobs here: in CI (`CI` set) it must; elsewhere the test
/// says why not and passes.
fn slurm_runs(test: &str) -> bool {
    let why = if Command::new("sbatch").arg("--version").output().is_err() {
        Some("`sbatch` is missing (scripts/setup-slurm.sh installs and starts a one-node Slurm)")
    } else if !Command::new("sinfo")
        .args(["--noheader", "--states=idle,mix,alloc", "--format=%n"])
        .output()
        .is_ok_and(|out| out.status.success() && !out.stdout.is_empty())
    {
        Some("no Slurm node takes jobs (scripts/setup-slurm.sh starts one)")
    } else {
        None
    };
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    match why {
        None => true,
        Some(why) if in_ci => panic!("{test}: {why}; CI must run the Slurm test"),
        Some(why) => {
            eprintln!("skipping {test}: {why}");
            false
        }
    }
}

/// `sbatch ARGS --wrap COMMAND`, waited for by polling it to a bound; on the
/// bound the job is cancelled and the test fails.
fn sbatch_waited(name: &str, args: &[&str], command: &str) -> Output {
    let bound = Duration::from_secs(300);
    let mut child = Command::new("sbatch")
        .args(["--parsable", "--wait", "--job-name", name])
        .args(args)
        .args(["--wrap", command])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sbatch runs");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = Command::new("scancel").args(["--name", name]).output();
            panic!("the Slurm job {name} did not end within {bound:?}: squeue shows why");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    child.wait_with_output().unwrap()
}

/// A shell word of `text`.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[test]
fn parts_run_as_a_slurm_job_array_merge_into_what_the_whole_sweep_writes() {
    let test = "parts_run_as_a_slurm_job_array_merge_into_what_the_whole_sweep_writes";
    if !slurm_runs(test) {
        return;
    }
    let scratch = Scratch::new("shard-slurm");
    let scenario = scratch.file("shard.yaml", SCENARIO);
    let dir = |name: &str| scratch.0.join(name);
    ok(
        &sweep(&scenario, GRID, None, &dir("whole")),
        "the whole sweep",
    );

    // As docs/scenario.md shows it: an array job, one task a part, the index
    // from SLURM_ARRAY_TASK_ID; then the merge, a job that waits for the array.
    let name = format!("nicsched-test-{}", std::process::id());
    let grid: Vec<String> = GRID.iter().map(|arg| quoted(arg)).collect();
    let part = |k: &str| format!("{}/part{k}", path(&scratch.0));
    let array = Command::new("sbatch")
        .args(["--parsable", "--job-name", &name, "--array=0-2"])
        .args(["--output", &format!("{}/slurm-%A_%a.out", path(&scratch.0))])
        .args([
            "--wrap",
            &format!(
                "{} sweep {} {} --shard \"$SLURM_ARRAY_TASK_ID/3\" --out {}\"$SLURM_ARRAY_TASK_ID\"",
                quoted(BIN),
                quoted(&scenario),
                grid.join(" "),
                quoted(&part(""))
            ),
        ])
        .output()
        .expect("sbatch runs");
    ok(&array, "sbatch --array");
    let job = String::from_utf8_lossy(&array.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let merged = dir("merged");
    let merge_job = sbatch_waited(
        &name,
        &[
            &format!("--dependency=afterany:{job}"),
            "--output",
            &format!("{}/slurm-merge.out", path(&scratch.0)),
        ],
        &format!(
            "{} sweep --merge {} {} {} -q --out {}",
            quoted(BIN),
            quoted(&part("0")),
            quoted(&part("1")),
            quoted(&part("2")),
            quoted(path(&merged))
        ),
    );
    let logs: String = std::fs::read_dir(&scratch.0)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "out"))
        .map(|p| format!("{}:\n{}", p.display(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    assert_eq!(merge_job.status.code(), Some(0), "the merge job: {logs}");
    same_results(&dir("whole"), &merged);
}
