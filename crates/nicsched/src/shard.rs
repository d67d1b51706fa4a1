//! `nicsched sweep --shard K/N` and `nicsched sweep --merge DIR...`: one sweep's
//! grid run as parts on several machines (a Slurm job array, a Kubernetes indexed
//! job), then joined into exactly the sweep.csv, sweep.json, plots and table the
//! sweep run whole writes (docs/scenario.md, "Sweeps on a cluster").
//!
//! Run `i` of the grid, in the sweep's order, belongs to part `i mod N`: any N
//! works, parts differ by at most one run, and an N above the grid's runs leaves
//! empty parts, which merge as the others do. Each part parses and validates the
//! whole grid, as the whole sweep does before it runs anything, so that every part
//! has the same columns and refuses what the whole sweep refuses.
//!
//! A part's folder is a run's folder (claimed, staged and marked as `--out` always
//! is) holding `part.json`, which grid (a hash of the scenario's bytes and its
//! policy file's, the keys and values, the seeds and enforcers), which build (the
//! version, the commit and a hash of the binary) and which part it is, with each
//! run's drops and failed checks; and `figures.f64`, the figures of its runs as the
//! sweep's scratch file holds them, so that the merge reads back the very bits the
//! runs computed (NaN included), which no decimal text promises. The merge checks
//! that the parts are one grid's, one build's (this one's), each once and all
//! there, and that the scenario still reads as it did; then the sweep validates the
//! grid again and writes its files from the parts' figures instead of running.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest;

use super::{Fold, POINTS_MAX, Sweep, SweepArgs, io_at, yaml_options};
use crate::{EXIT_CHECKS_FAILED, Failure, unwritten};

/// A part's record of itself, beside its figures.
const PART_JSON: &str = "part.json";
/// Each run's figures, in the order of `part.json`'s runs: `f64`s, little-endian.
const FIGURES: &str = "figures.f64";

/// Parts of one sweep at most: more than the runs of the largest grid would only
/// add empty ones.
const PARTS_MAX: usize = POINTS_MAX;

/// Part `index` of `count`, from 0.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Part {
    index: usize,
    count: usize,
}

impl Part {
    /// `--shard K/N`.
    pub(crate) fn parse(text: &str) -> Result<Part, String> {
        let usage = || {
            format!(
                "`{text}`: give K/N, the part K (from 0) of N, e.g. --shard 0/4 ... --shard 3/4; from a Slurm array job, --shard \"$SLURM_ARRAY_TASK_ID/N\""
            )
        };
        let (index, count) = text.split_once('/').ok_or_else(usage)?;
        let number = |n: &str| n.trim().parse::<usize>().map_err(|_| usage());
        let (index, count) = (number(index)?, number(count)?);
        if count == 0 || count > PARTS_MAX {
            return Err(format!(
                "`{text}`: N is the number of parts, from 1 to {PARTS_MAX} (the most runs a sweep has)"
            ));
        }
        if index >= count {
            return Err(format!(
                "`{text}`: parts are numbered from 0 to N-1 = {}",
                count - 1
            ));
        }
        Ok(Part { index, count })
    }

    /// The runs of a grid of `runs` this part runs.
    fn runs(self, runs: usize) -> impl Iterator<Item = usize> {
        (self.index..runs).step_by(self.count)
    }
}

/// What a sweep does with its grid.
pub(crate) enum Plan {
    /// Runs all of it.
    Whole,
    /// Runs one part and writes that part's folder.
    Part(Part),
    /// Runs nothing: takes every run's figures from the parts' folders.
    Merge(Vec<Found>),
}

impl Plan {
    pub(crate) fn of(shard: Option<Part>) -> Plan {
        shard.map_or(Plan::Whole, Plan::Part)
    }
}

/// The runs of a grid of `runs` this sweep runs.
pub(super) fn points(plan: &Plan, runs: usize) -> Vec<usize> {
    match plan {
        Plan::Whole => (0..runs).collect(),
        Plan::Part(part) => part.runs(runs).collect(),
        Plan::Merge(_) => Vec::new(),
    }
}

/// What the sweep reads, which its `--out` may not be nor hold: its scenario, and
/// the parts it merges.
pub(super) fn inputs<'p>(scenario: &'p Path, plan: &'p Plan) -> Vec<&'p Path> {
    let parts: &[Found] = match plan {
        Plan::Merge(parts) => parts,
        _ => &[],
    };
    std::iter::once(scenario)
        .chain(parts.iter().map(|found| found.dir.as_path()))
        .collect()
}

/// `part.json`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    grid: GridId,
    build: Build,
    part: Part,
    /// Runs of the whole grid.
    grid_runs: usize,
    /// This part's runs, in the grid's order.
    runs: Vec<Ran>,
}

/// Which grid: what the sweep was given, and a hash of it with the bytes of what
/// it read, so that a scenario edited between two parts makes another grid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GridId {
    /// SHA-256 of the scenario's bytes, its policy file's (where `policy:` names
    /// one), the `--set`s as given, the seeds and the enforcers.
    sha256: String,
    /// Where the part read the scenario (absolute): the merge reads it there.
    scenario: PathBuf,
    sets: Vec<String>,
    seeds: Vec<u64>,
    enforcers: Vec<String>,
}

impl GridId {
    fn of(
        scenario: &Path,
        sets: &[String],
        seeds: &[u64],
        enforcers: &[String],
    ) -> Result<GridId, Failure> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|e| Failure::input(format!("{}: {e}", path.display())))
        };
        let bytes = read(scenario)?;
        let policy_file = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| {
                serde_saphyr::from_str_with_options::<Value>(text, yaml_options()).ok()
            })
            .and_then(|tree| tree.get("policy")?.as_str().map(PathBuf::from));
        let policy = match policy_file {
            Some(file) => Some(read(
                &scenario.parent().unwrap_or(Path::new("")).join(file),
            )?),
            None => None,
        };
        let hashed = serde_json::json!({
            "scenario": hex(&sha2::Sha256::digest(&bytes)),
            "policy": policy.map(|bytes| hex(&sha2::Sha256::digest(bytes))),
            "sets": sets,
            "seeds": seeds,
            "enforcers": enforcers,
        });
        Ok(GridId {
            sha256: hex(&sha2::Sha256::digest(hashed.to_string())),
            scenario: std::path::absolute(scenario)
                .map_err(|e| Failure::input(format!("{}: {e}", scenario.display())))?,
            sets: sets.to_vec(),
            seeds: seeds.to_vec(),
            enforcers: enforcers.to_vec(),
        })
    }
}

/// Which build ran a part: figures from two builds need not be one grid's.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Build {
    nicsched: String,
    commit: String,
    /// SHA-256 of the executable: a commit with uncommitted changes (`-dirty`)
    /// names no one build.
    binary_sha256: String,
}

impl Build {
    fn this() -> Result<Build, Failure> {
        // The running binary, even if its file has been replaced since it started.
        let path = Path::new("/proc/self/exe");
        let failed = |e| Failure::runtime(format!("{}: {e}", path.display()));
        let mut file = File::open(path).map_err(failed)?;
        let mut hasher = sha2::Sha256::new();
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            match file.read(&mut buffer).map_err(failed)? {
                0 => break,
                read => hasher.update(&buffer[..read]),
            }
        }
        Ok(Build {
            nicsched: env!("CARGO_PKG_VERSION").to_string(),
            commit: run::COMMIT.to_string(),
            binary_sha256: hex(&hasher.finalize()),
        })
    }

    fn said(&self) -> String {
        format!(
            "nicsched {} (commit {}, binary sha256 {})",
            self.nicsched,
            self.commit,
            &self.binary_sha256[..12.min(self.binary_sha256.len())]
        )
    }
}

/// One run of a part: what its figures do not hold.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ran {
    run: usize,
    drops: u64,
    checks_failed: Vec<String>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A finished part's folder and its record.
pub(crate) struct Found {
    dir: PathBuf,
    record: Record,
}

/// Writes part `part`'s folder from the runs it ran (their figures in `scratch`,
/// the rest in `fold`) and moves it into `--out`; fails with status 3 where one
/// of its runs failed a self-check, as the sweep does.
pub(super) fn write_part(
    args: &SweepArgs,
    sweep: &Sweep,
    part: Part,
    out: report::OutDir,
    scratch: &Path,
    fold: &Fold,
    provenance: &report::Provenance,
) -> Result<(), Failure> {
    let record = Record {
        grid: GridId::of(&args.scenario, &args.sets, sweep.seeds, sweep.enforcers)?,
        build: Build::this()?,
        part,
        grid_runs: sweep.runs,
        runs: part
            .runs(sweep.runs)
            .map(|run| Ran {
                run,
                drops: fold.drops[run],
                checks_failed: fold.failed.get(&run).cloned().unwrap_or_default(),
            })
            .collect(),
    };
    let target = out.target().to_path_buf();
    let figures = out.staging().join(FIGURES);
    (|| -> std::io::Result<()> {
        let from = File::open(scratch).map_err(|e| io_at(scratch, e))?;
        let mut to = BufWriter::new(File::create(&figures).map_err(|e| io_at(&figures, e))?);
        let record_bytes = sweep.record_bytes();
        let mut bytes = vec![0u8; record_bytes];
        for ran in &record.runs {
            from.read_exact_at(&mut bytes, (ran.run * record_bytes) as u64)
                .map_err(|e| io_at(scratch, e))?;
            to.write_all(&bytes).map_err(|e| io_at(&figures, e))?;
        }
        to.flush().map_err(|e| io_at(&figures, e))?;
        std::fs::remove_file(scratch).map_err(|e| io_at(scratch, e))?;
        let json = out.staging().join(PART_JSON);
        let text = serde_json::to_string_pretty(&record).expect("a part's record serializes");
        std::fs::write(&json, text + "\n").map_err(|e| io_at(&json, e))
    })()
    .map_err(|e| unwritten(&target, e))?;
    let written = out.commit(provenance).map_err(|e| unwritten(&target, e))?;
    println!(
        "part {} of {} (from 0): {} of the grid's {} runs; merge every part with nicsched sweep --merge",
        part.index,
        part.count,
        record.runs.len(),
        sweep.runs
    );
    println!("results: {}", written.display());
    let failed = record
        .runs
        .iter()
        .filter(|ran| !ran.checks_failed.is_empty())
        .count();
    if failed == 0 {
        return Ok(());
    }
    Err(Failure {
        message: format!(
            "self-checks failed in {failed} of this part's runs: the merge lists them and flags them in sweep.csv (checks_failed)"
        ),
        status: EXIT_CHECKS_FAILED,
    })
}

/// `nicsched sweep --merge DIR...`: checks that `dirs` are every part of one grid,
/// run by this build, and writes the whole sweep's files from them into `out`
/// (default: where the whole sweep writes, results/NAME-sweep).
pub(crate) fn merge(
    dirs: Vec<PathBuf>,
    jobs: Option<usize>,
    out: Option<PathBuf>,
    quiet: bool,
) -> Result<(), Failure> {
    let mut parts = dirs.into_iter().map(read).collect::<Result<Vec<_>, _>>()?;
    let Some(first) = parts.first() else {
        return Err(Failure::input(
            "--merge: give the folders of every part of the sweep",
        ));
    };
    for found in &parts[1..] {
        let (a, b) = (&first.record, &found.record);
        if b.grid.sha256 != a.grid.sha256 {
            return Err(Failure::input(format!(
                "--merge: {} and {} are parts of different sweeps ({}; {}): merge the parts of one sweep",
                first.dir.display(),
                found.dir.display(),
                grid_said(&a.grid),
                grid_said(&b.grid)
            )));
        }
        if b.build != a.build {
            return Err(Failure::input(format!(
                "--merge: {} was run by {} and {} by {}: run every part of a sweep with one build",
                first.dir.display(),
                a.build.said(),
                found.dir.display(),
                b.build.said()
            )));
        }
        if (b.part.count, b.grid_runs) != (a.part.count, a.grid_runs) {
            return Err(Failure::input(format!(
                "--merge: {} is a part of {} and {} a part of {}: run every part with one N in --shard K/N",
                first.dir.display(),
                a.part.count,
                found.dir.display(),
                b.part.count
            )));
        }
    }
    let this = Build::this()?;
    if first.record.build != this {
        return Err(Failure::input(format!(
            "--merge: the parts were run by {}, and this is {}: merge with the nicsched that ran them",
            first.record.build.said(),
            this.said()
        )));
    }
    parts.sort_by_key(|found| found.record.part.index);
    if let Some(twice) = parts
        .windows(2)
        .find(|pair| pair[0].record.part.index == pair[1].record.part.index)
    {
        return Err(Failure::input(format!(
            "--merge: {} and {} are both part {} of {}: give each part once",
            twice[0].dir.display(),
            twice[1].dir.display(),
            twice[0].record.part.index,
            twice[0].record.part.count
        )));
    }
    let count = parts[0].record.part.count;
    if parts.len() < count {
        let given: Vec<usize> = parts.iter().map(|found| found.record.part.index).collect();
        let missing: Vec<String> = (0..count)
            .filter(|index| !given.contains(index))
            .map(|index| format!("{index}/{count}"))
            .collect();
        return Err(Failure::input(format!(
            "--merge: {} of the {count} parts missing: {}; run `nicsched sweep ... --shard K/N` for each and give every part's folder",
            missing.len(),
            some_of(&missing)
        )));
    }
    let grid = parts[0].record.grid.clone();
    let now = GridId::of(&grid.scenario, &grid.sets, &grid.seeds, &grid.enforcers)?;
    if now.sha256 != grid.sha256 {
        return Err(Failure::input(format!(
            "--merge: {} (or its policy file) has changed since the parts ran it: the parts are not of the sweep it would make now; run the parts again, or put the scenario back as it was",
            grid.scenario.display()
        )));
    }
    let seeds: Vec<String> = grid.seeds.iter().map(u64::to_string).collect();
    super::sweep(SweepArgs {
        scenario: grid.scenario,
        sets: grid.sets,
        seeds: Some(seeds.join(",")),
        enforcers: grid.enforcers,
        jobs,
        out,
        quiet,
        plan: Plan::Merge(parts),
    })
}

/// The first few of `items`, and how many there are.
fn some_of(items: &[String]) -> String {
    const SHOWN: usize = 8;
    if items.len() <= SHOWN {
        items.join(", ")
    } else {
        format!("{}, … ({} in all)", items[..SHOWN].join(", "), items.len())
    }
}

fn grid_said(grid: &GridId) -> String {
    format!(
        "{} with {}, grid sha256 {}",
        grid.scenario.display(),
        grid.sets
            .iter()
            .map(|set| format!("--set {}", super::shown(set)))
            .collect::<Vec<_>>()
            .join(" "),
        &grid.sha256[..12.min(grid.sha256.len())]
    )
}

/// The part in `dir`, which must be a finished part's folder.
fn read(dir: PathBuf) -> Result<Found, Failure> {
    let shown = dir.display();
    if !dir.is_dir() {
        return Err(Failure::input(format!(
            "--merge: {shown}: no such folder: a part's folder appears when its shard has finished; wait for it, or run it (nicsched sweep ... --shard K/N --out {shown})"
        )));
    }
    if !dir.join(report::RUN_MARKER).exists() {
        return Err(Failure::input(format!(
            "--merge: {shown}: not a finished part (no {}, which a part's shard writes as it finishes); give the --out of a `nicsched sweep --shard K/N` that has finished",
            report::RUN_MARKER
        )));
    }
    let files =
        report::complete_run_paths(&dir).map_err(|e| Failure::input(format!("--merge: {e}")))?;
    if ![PART_JSON, FIGURES]
        .iter()
        .all(|name| files.iter().any(|file| file == name))
    {
        return Err(Failure::input(format!(
            "--merge: {shown}: a nicsched run, but not a sweep's part (it has no {PART_JSON} and {FIGURES}); give the folders of `nicsched sweep --shard K/N`"
        )));
    }
    let json = dir.join(PART_JSON);
    let record: Record = std::fs::read_to_string(&json)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
        .map_err(|e| {
            Failure::input(format!(
                "--merge: {}: not a sweep part's record ({e}); run the part again",
                json.display()
            ))
        })?;
    let runs: Vec<usize> = record.runs.iter().map(|ran| ran.run).collect();
    let part = record.part;
    if part.index >= part.count
        || part.count > PARTS_MAX
        || !runs.iter().copied().eq(part.runs(record.grid_runs))
    {
        return Err(Failure::input(format!(
            "--merge: {}: its runs are not those of a part {}/{} of {} runs; run the part again",
            json.display(),
            part.index,
            part.count,
            record.grid_runs
        )));
    }
    Ok(Found { dir, record })
}

/// Every run's figures from the parts, written into `file` (the sweep's scratch
/// file, at `scratch`) at the run's place, and folded as the runs fold theirs.
pub(super) fn replay(
    sweep: &Sweep,
    parts: &[Found],
    file: &File,
    scratch: &Path,
    target: &Path,
) -> Result<Fold, Failure> {
    let record_bytes = sweep.record_bytes();
    let candidates = sweep.candidates();
    let mut fold = Fold::new(candidates.len(), sweep.runs);
    for found in parts {
        let figures = found.dir.join(FIGURES);
        let runs = &found.record.runs;
        let bytes = std::fs::metadata(&figures)
            .map_err(|e| Failure::input(format!("--merge: {}: {e}", figures.display())))?
            .len();
        if found.record.grid_runs != sweep.runs || bytes != (runs.len() * record_bytes) as u64 {
            return Err(Failure::input(format!(
                "--merge: {}: {bytes} bytes, not the figures of {} runs of this grid's {} columns; run the part again",
                figures.display(),
                runs.len(),
                record_bytes / 8
            )));
        }
        let mut from = BufReader::new(
            File::open(&figures)
                .map_err(|e| Failure::input(format!("--merge: {}: {e}", figures.display())))?,
        );
        let mut bytes = vec![0u8; record_bytes];
        for ran in runs {
            from.read_exact(&mut bytes)
                .map_err(|e| Failure::input(format!("--merge: {}: {e}", figures.display())))?;
            file.write_all_at(&bytes, (ran.run * record_bytes) as u64)
                .map_err(|e| unwritten(target, io_at(scratch, e)))?;
            let row: Vec<f64> = bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("chunks of 8")))
                .collect();
            fold.add(
                ran.run,
                &row,
                ran.drops,
                ran.checks_failed.clone(),
                &candidates,
                sweep.columns.tenants.len(),
            );
        }
    }
    Ok(fold)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn every_run_is_in_exactly_one_part_for_any_count() {
        for runs in [0, 1, 7, 12] {
            for count in 1..=runs + 3 {
                let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
                for index in 0..count {
                    for run in (Part { index, count }).runs(runs) {
                        *seen.entry(run).or_default() += 1;
                    }
                }
                assert_eq!(seen.len(), runs, "{runs} runs in {count} parts");
                assert!(seen.values().all(|&times| times == 1));
            }
        }
    }

    #[test]
    fn shard_is_k_of_n_from_zero() {
        assert_eq!(Part::parse("2/3"), Ok(Part { index: 2, count: 3 }));
        for bad in ["3/3", "0/0", "1", "a/3", "-1/3", "0/10001", ""] {
            assert!(Part::parse(bad).is_err(), "{bad}");
        }
    }
}
