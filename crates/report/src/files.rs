//! The files one run leaves in its folder: summary.json, the two CSVs and the plots;
//! and the folder itself, owned by one run at a time and marked when complete.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checks::Provenance;
use crate::figures::{latency_quantiles, latency_us_at};
pub(crate) use crate::path_error::at;
use crate::plot;
use crate::record::RunRecord;
use crate::summary::{Summary, summarize};

pub const SUMMARY_JSON: &str = "summary.json";
pub const TIMESERIES_CSV: &str = "timeseries.csv";
pub const LATENCY_CSV: &str = "latency.csv";
pub const THROUGHPUT_PNG: &str = "throughput.png";
pub const THROUGHPUT_APPS_PNG: &str = "throughput_apps.png";
pub const FAIRNESS_PNG: &str = "fairness.png";
pub const LATENCY_CDF_PNG: &str = "latency_cdf.png";

pub const TIMESERIES_HEADER: &str = "time_s,tenant,app,throughput_bps,ideal_bps";
/// timeseries.csv of a run across hosts (hosts.md): one row per interval and flow.
pub const HOSTS_TIMESERIES_HEADER: &str = "time_s,host,tenant,app,flow,throughput_bps,ideal_bps";
pub const LATENCY_HEADER: &str = "traffic,quantile,latency_us";

/// Writes every file of one run into `dir` (created if needed) and returns its
/// summary. An error names the file it happened at.
pub fn write_run(dir: &Path, run: &RunRecord) -> io::Result<Summary> {
    fs::create_dir_all(dir).map_err(at(dir))?;
    let summary = summarize(run);
    let file = |name: &str, write: &dyn Fn(&Path) -> io::Result<()>| {
        let path = dir.join(name);
        write(&path).map_err(at(&path))
    };
    file(SUMMARY_JSON, &|path| {
        fs::write(path, summary.to_json() + "\n")
    })?;
    file(TIMESERIES_CSV, &|path| write_timeseries(path, run))?;
    file(LATENCY_CSV, &|path| write_latency(path, run))?;
    file(THROUGHPUT_PNG, &|path| plot::throughput(path, run))?;
    // A plot left by an earlier run into the same folder would end up in report.html.
    let remove = |path: &Path| match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    };
    if plot::app_panels(run).is_empty() {
        file(THROUGHPUT_APPS_PNG, &remove)?;
    } else {
        file(THROUGHPUT_APPS_PNG, &|path| {
            plot::throughput_apps(path, run)
        })?;
    }
    file(FAIRNESS_PNG, &|path| plot::fairness(path, run))?;
    if plot::has_latency(run) {
        file(LATENCY_CDF_PNG, &|path| plot::latency_cdf(path, run))?;
    } else {
        file(LATENCY_CDF_PNG, &remove)?;
    }
    Ok(summary)
}

fn write_timeseries(path: &Path, run: &RunRecord) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    writeln!(out, "{TIMESERIES_HEADER}")?;
    for interval in &run.intervals {
        for (class, name) in run.classes.iter().enumerate() {
            writeln!(
                out,
                "{},{},{},{},{}",
                interval.end_s(),
                csv_field(&name.tenant),
                csv_field(&name.app),
                interval.class_throughput_bps(class),
                interval.class_ideal_bps(class),
            )?;
        }
    }
    out.flush()
}

fn write_latency(path: &Path, run: &RunRecord) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    writeln!(out, "{LATENCY_HEADER}")?;
    let quantiles = latency_quantiles();
    for record in &run.latency {
        let traffic = csv_field(&record.traffic);
        for &quantile in &quantiles {
            let latency_us = latency_us_at(&record.histogram_ns, quantile);
            writeln!(out, "{traffic},{quantile},{latency_us}")?;
        }
    }
    out.flush()
}

/// Writes timeseries.csv of a run across hosts: a row per interval and flow.
pub fn write_hosts_timeseries(path: &Path, rows: &[crate::hosts::HostsRow]) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path).map_err(at(path))?);
    let mut write = || -> io::Result<()> {
        writeln!(out, "{HOSTS_TIMESERIES_HEADER}")?;
        for r in rows {
            writeln!(
                out,
                "{},{},{},{},{},{:.0},{:.0}",
                r.time_s,
                csv_field(&r.host),
                csv_field(&r.tenant),
                csv_field(&r.app),
                csv_field(&r.flow),
                r.throughput_bps,
                r.ideal_bps
            )?;
        }
        out.flush()
    };
    write().map_err(at(path))
}

/// Names come from scenario files and may hold anything; quote them the RFC 4180 way
/// when they would break the row.
pub fn csv_field(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// The file that marks a folder as a complete nicsched run's, written last: the
/// command's provenance and every other file of the run with its size, so that a
/// reader can tell a whole run from what a failed or interrupted one left.
pub const RUN_MARKER: &str = "nicsched-run.json";

/// What [`RUN_MARKER`] holds: the provenance's keys, and `files`.
#[derive(Serialize)]
struct Marker<'a> {
    #[serde(flatten)]
    provenance: &'a Provenance,
    files: Vec<RunFile>,
}

/// One file of a run as its marker lists it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunFile {
    /// Relative to the run's folder, with `/` between folders.
    pub path: String,
    pub bytes: u64,
}

/// The files of the complete run in `root` (a folder holding [`RUN_MARKER`]), or
/// what makes it incomplete: a file its marker lists that is missing, or not the
/// size it was written at.
pub(crate) fn complete_run_files(root: &Path) -> io::Result<Vec<RunFile>> {
    #[derive(Deserialize)]
    struct Listed {
        files: Option<Vec<RunFile>>,
    }
    let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidData, message);
    let marker = root.join(RUN_MARKER);
    let text = fs::read_to_string(&marker).map_err(at(&marker))?;
    let listed: Listed = serde_json::from_str(&text).map_err(|e| {
        invalid(format!(
            "{}: not a nicsched run's marker ({e}); run it again",
            marker.display()
        ))
    })?;
    let files = listed.files.ok_or_else(|| {
        invalid(format!(
            "{}: written by an older nicsched, which did not list the run's files, so whether the run is complete cannot be told; run it again",
            marker.display()
        ))
    })?;
    let problems: Vec<String> = files
        .iter()
        .filter_map(|file| listed_file_problem(root, file))
        .collect();
    if problems.is_empty() {
        return Ok(files);
    }
    Err(invalid(format!(
        "{}: an incomplete nicsched run: {} ({RUN_MARKER} lists what the run wrote); run it again, or copy the whole folder",
        root.display(),
        some_of(&problems)
    )))
}

/// The files of the complete run in `root`, by their path relative to it, or
/// what makes it incomplete (as [`complete_run_files`] says).
pub fn complete_run_paths(root: &Path) -> io::Result<Vec<String>> {
    Ok(complete_run_files(root)?
        .into_iter()
        .map(|file| file.path)
        .collect())
}

/// What is wrong with `file` of the run in `root` as its marker lists it: a path
/// that leaves the run, or a file missing or not the size it was written at.
fn listed_file_problem(root: &Path, file: &RunFile) -> Option<String> {
    let relative = Path::new(&file.path);
    let inside = relative.components().next().is_some()
        && relative
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if !inside {
        return Some(format!("{:?} is not a path inside the run", file.path));
    }
    match fs::symlink_metadata(root.join(relative)) {
        Ok(found) if found.is_file() && found.len() == file.bytes => None,
        Ok(found) if found.is_file() => Some(format!(
            "{} has {} bytes, written with {}",
            file.path,
            found.len(),
            file.bytes
        )),
        Ok(_) => Some(format!("{} is not a file", file.path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Some(format!("{} is missing", file.path)),
        Err(e) => Some(format!("{}: {e}", file.path)),
    }
}

/// The first few of `problems`, and how many more there are.
fn some_of(problems: &[String]) -> String {
    let mut said = problems[..problems.len().min(SHOWN)].join(", ");
    if problems.len() > SHOWN {
        said.push_str(&format!(" and {} more", problems.len() - SHOWN));
    }
    said
}

/// The NAME of the `--out` whose run writes, or wrote, in the folder named
/// `folder`: `.NAME.partial-PID` while it runs, `.NAME.partial-PID.old` for the
/// earlier run it replaces as it commits. Neither is ever a complete run.
pub(crate) fn staged_for(folder: &str) -> Option<&str> {
    let rest = folder.strip_prefix('.')?;
    let rest = rest.strip_suffix(".old").unwrap_or(rest);
    let (name, pid) = rest.rsplit_once(".partial-")?;
    let is_pid = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
    (is_pid && !name.is_empty()).then_some(name)
}

/// `.NAME.lock` beside a run's `--out`, locked by the run that owns it for as long
/// as it does. The kernel releases a killed run's lock; a run that ends removes
/// the file while it still holds it.
#[derive(Debug)]
struct OutLock {
    path: PathBuf,
    _file: File,
}

impl OutLock {
    fn take(target: &Path, name: &str) -> Result<OutLock, String> {
        let path = target.with_file_name(format!(".{name}.lock"));
        let failed = |e: io::Error| format!("{}: {e}", path.display());
        // The lock is an empty file a run removes as it ends; anything else there
        // is someone's, and removing it would lose it.
        match fs::symlink_metadata(&path) {
            Ok(found) if !found.is_file() || found.len() > 0 => {
                return Err(format!(
                    "{}: nicsched locks {} with an empty file of this name, but this is not one; move it away, or give --out another name",
                    path.display(),
                    target.display()
                ));
            }
            _ => {}
        }
        loop {
            let file = File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(failed)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(format!(
                        "{}: another nicsched run is writing it (it holds {}); wait for that run to end, or give another --out",
                        target.display(),
                        path.display()
                    ));
                }
                Err(fs::TryLockError::Error(e)) => return Err(failed(e)),
            }
            // A run that ended may have removed the file between our open and our
            // lock; a lock on a removed file guards nothing, so take the one now there.
            let held = file.metadata().map_err(failed)?;
            match fs::metadata(&path) {
                Ok(now) if (now.dev(), now.ino()) == (held.dev(), held.ino()) => {
                    return Ok(OutLock {
                        path: path.clone(),
                        _file: file,
                    });
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(failed(e)),
            }
        }
    }
}

impl Drop for OutLock {
    fn drop(&mut self) {
        // Removed while still locked (the file closes after this), so no other run
        // holds a lock on it; one that opened it meanwhile sees it gone and retries.
        let _ = fs::remove_file(&self.path);
    }
}

/// A run's `--out`, owned for the run: its files are written beside the folder,
/// in a staging folder of its own, and only a run that finished moves them in,
/// replacing an earlier nicsched run whole (never leaving another run's enforcer
/// folders beside its own). An existing folder is replaced only when it proves
/// to be a whole earlier run: its [`RUN_MARKER`] a complete record (provenance
/// with the nicsched that wrote it, every file with its size) and nothing in the
/// folder that the marker does not list. Any other folder is refused before
/// anything runs, and so is a folder another run owns: the lock beside it is
/// held until the `OutDir` is dropped. Dropped uncommitted, the staging folder goes.
#[derive(Debug)]
pub struct OutDir {
    target: PathBuf,
    staging: PathBuf,
    committed: bool,
    // Last: released after the staging folder is gone.
    _lock: OutLock,
}

impl OutDir {
    /// Claims `target` for a run that reads `inputs` (its scenario), or says why
    /// it cannot be that run's folder: a path that is, holds or lies inside an
    /// input, one inside another run's folder, a folder that is not wholly an
    /// earlier nicsched run's (see [`OutDir`]), one another run owns. Nothing is
    /// removed from a folder that is refused. A symbolic link named as `target`
    /// is followed: the run replaces the folder it names, not the link.
    pub fn claim(target: &Path, inputs: &[&Path]) -> Result<OutDir, String> {
        let resolved = resolved(target)?;
        let inputs = Inputs::new(inputs)?;
        refuse_unasked(target, &resolved, &inputs)?;
        let target = if fs::symlink_metadata(target).is_ok_and(|m| m.file_type().is_symlink()) {
            resolved.as_path()
        } else {
            target
        };
        let name = target
            .file_name()
            .ok_or_else(|| format!("{}: not a folder a run can own", target.display()))?
            .to_string_lossy()
            .into_owned();
        if staged_for(&name).is_some() {
            return Err(format!(
                "{}: nicsched keeps names like this for the folders unfinished runs write in; give --out another name",
                target.display()
            ));
        }
        let parent = match target.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        let lock = OutLock::take(target, &name)?;
        clear_killed_runs_leftovers(parent, &name, target)?;
        match fs::symlink_metadata(target) {
            Ok(found) if found.is_dir() => replaceable(target, &inputs)?,
            Ok(_) => return Err(format!("{}: not a folder", target.display())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", target.display())),
        }
        let staging = target.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        fs::create_dir(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
        Ok(OutDir {
            target: target.to_path_buf(),
            staging,
            committed: false,
            _lock: lock,
        })
    }

    /// Where the run writes its files until it commits.
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    /// Where the files will be once committed.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Marks the staging folder as a complete run's ([`RUN_MARKER`]: `provenance`
    /// and every file written) and moves it in place of the target. An error names
    /// the file or folder it happened at; the target is then as it was.
    pub fn commit(mut self, provenance: &Provenance) -> io::Result<PathBuf> {
        // A folder the marker cannot list would make the run's folder hold
        // something unlisted, which the next claim refuses.
        remove_empty_folders(&self.staging)?;
        let mut files = Vec::new();
        list_files(&self.staging, &self.staging, &mut files)?;
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let marker = self.staging.join(RUN_MARKER);
        let text = serde_json::to_string_pretty(&Marker { provenance, files })
            .expect("the marker serializes");
        fs::write(&marker, text + "\n").map_err(at(&marker))?;
        let moving = |from: &Path, to: &Path| {
            fs::rename(from, to).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("moving {} to {}: {e}", from.display(), to.display()),
                )
            })
        };
        if self.target.exists() {
            let mut aside = self.staging.clone().into_os_string();
            aside.push(".old");
            let aside = PathBuf::from(aside);
            moving(&self.target, &aside)?;
            if let Err(error) = moving(&self.staging, &self.target) {
                return Err(match moving(&aside, &self.target) {
                    Ok(()) => error,
                    Err(back) => io::Error::new(
                        error.kind(),
                        format!(
                            "{error}; {back} (the next run into {} puts it back)",
                            self.target.display()
                        ),
                    ),
                });
            }
            self.committed = true;
            // The run is in place; should the earlier one not go, the next claim
            // of this folder removes it.
            let _ = fs::remove_dir_all(&aside);
        } else {
            moving(&self.staging, &self.target)?;
            self.committed = true;
        }
        Ok(self.target.clone())
    }
}

/// The folders beside `target` that only the holder of its lock writes in, so
/// that any there now were left by a killed run: its staging folder goes, and an
/// earlier run it had set aside to put its own in place goes back where it was.
fn clear_killed_runs_leftovers(parent: &Path, name: &str, target: &Path) -> Result<(), String> {
    for entry in fs::read_dir(parent)
        .map_err(|e| format!("{}: {e}", parent.display()))?
        .flatten()
    {
        let Some(folder) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        // Only a run's folder is a run's leftover: a link or file of that name is
        // someone else's.
        if staged_for(&folder) != Some(name) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if folder.ends_with(".old") && !target.exists() {
            fs::rename(entry.path(), target).map_err(|e| {
                format!(
                    "{}: an earlier run a killed run had set aside; it could not be put back in {}: {e}",
                    entry.path().display(),
                    target.display()
                )
            })?;
        } else {
            fs::remove_dir_all(entry.path())
                .map_err(|e| format!("{}: left by a killed run: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// `path` as the file system reaches it: absolute, through every symbolic link of
/// the part that exists (its last component's too), and the part that does not
/// exist yet as written, a `..` there dropping the name before it. A link to
/// nothing is refused: what a write through it creates is not where it says.
pub fn resolved(path: &Path) -> Result<PathBuf, String> {
    let failed = |e: io::Error| format!("{}: {e}", path.display());
    let absolute = std::path::absolute(path).map_err(failed)?;
    let components: Vec<Component> = absolute.components().collect();
    let mut exists = components.len();
    while exists > 1 {
        let prefix: PathBuf = components[..exists].iter().collect();
        if fs::symlink_metadata(&prefix).is_ok() {
            break;
        }
        exists -= 1;
    }
    let prefix: PathBuf = components[..exists].iter().collect();
    let mut found = prefix.canonicalize().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            format!(
                "{}: {} is a symbolic link to nothing; give the path it should name",
                path.display(),
                prefix.display()
            )
        } else {
            failed(e)
        }
    })?;
    for component in &components[exists..] {
        match component {
            Component::ParentDir => {
                found.pop();
            }
            Component::CurDir => {}
            other => found.push(other),
        }
    }
    Ok(found)
}

/// What a command reads: its scenario, or the runs `report` draws. Nothing it
/// writes may be one of them, hold one or lie inside one, nor be a hard link to
/// one of their files.
#[derive(Debug, Default)]
pub struct Inputs {
    /// Canonical.
    paths: Vec<PathBuf>,
    /// (device, inode) of every file among them.
    files: HashSet<(u64, u64)>,
}

impl Inputs {
    pub fn new(paths: &[&Path]) -> Result<Inputs, String> {
        let mut inputs = Inputs::default();
        for path in paths {
            let found = path
                .canonicalize()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            inputs.add_files(&found)?;
            inputs.paths.push(found);
        }
        Ok(inputs)
    }

    fn add_files(&mut self, path: &Path) -> Result<(), String> {
        let failed = |e: io::Error| format!("{}: {e}", path.display());
        let metadata = fs::symlink_metadata(path).map_err(failed)?;
        if metadata.is_dir() {
            for entry in fs::read_dir(path).map_err(failed)? {
                self.add_files(&entry.map_err(failed)?.path())?;
            }
        } else if metadata.is_file() {
            self.files.insert((metadata.dev(), metadata.ino()));
        }
        Ok(())
    }

    /// Whether `found` (as `symlink_metadata` gives it) is one of the inputs'
    /// files under another name: a hard link, which a write would go through.
    pub fn holds_file(&self, found: &fs::Metadata) -> bool {
        found.is_file() && self.files.contains(&(found.dev(), found.ino()))
    }
}

/// Refuses `path`, `resolved` as [`resolved`] gives it, as somewhere to write when
/// it lies inside a run's folder (one holding [`RUN_MARKER`]) or the folder an
/// unfinished run writes in, or is, holds or lies inside one of `inputs`: none of
/// that is nicsched's to change unless asked to replace that very folder.
pub fn refuse_unasked(path: &Path, resolved: &Path, inputs: &Inputs) -> Result<(), String> {
    for dir in resolved.ancestors().skip(1) {
        if fs::symlink_metadata(dir.join(RUN_MARKER)).is_ok() {
            return Err(format!(
                "{}: inside the run folder {}, whose files its {RUN_MARKER} vouches for; give a path outside it",
                path.display(),
                dir.display()
            ));
        }
        let name = dir.file_name().and_then(|name| name.to_str());
        if name.and_then(staged_for).is_some() {
            return Err(format!(
                "{}: inside {}, the folder of a run that did not finish; give a path outside it",
                path.display(),
                dir.display()
            ));
        }
    }
    for input in &inputs.paths {
        let relation = if resolved == input {
            "is"
        } else if resolved.starts_with(input) {
            "lies inside"
        } else if input.starts_with(resolved) {
            "holds"
        } else {
            continue;
        };
        return Err(format!(
            "{}: {relation} {}, which this command reads; give a path of its own",
            path.display(),
            input.display()
        ));
    }
    Ok(())
}

/// Whether the existing folder `target` may be replaced whole: it is empty, or an
/// earlier run's and nothing else. Refused, it says what it found there.
fn replaceable(target: &Path, inputs: &Inputs) -> Result<(), String> {
    let refuse = |found: String| {
        Err(format!(
            "{}: {found}; nothing was removed: give --out a new or empty folder, or one an earlier nicsched run wrote and nobody changed",
            target.display()
        ))
    };
    let marker = target.join(RUN_MARKER);
    if let Err(e) = fs::symlink_metadata(&marker) {
        if e.kind() != io::ErrorKind::NotFound {
            return Err(format!("{}: {e}", marker.display()));
        }
        let mut found = Vec::new();
        let more = walk(target, target, &mut |relative, _| {
            found.push(relative.to_string());
            found.len() < SHOWN
        })?;
        if found.is_empty() {
            return Ok(());
        }
        return refuse(format!(
            "holds what no nicsched run made (no {RUN_MARKER}): {}{}",
            found.join(", "),
            if more { " and more" } else { "" }
        ));
    }
    let files = match marker_record(&marker) {
        Ok(files) => files,
        Err(why) => return refuse(why),
    };
    let listed: HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let folders: HashSet<&str> = files
        .iter()
        .flat_map(|f| f.path.match_indices('/').map(|(at, _)| &f.path[..at]))
        .collect();
    let mut problems = Vec::new();
    let more = walk(target, target, &mut |relative, found| {
        let kind = found.file_type();
        let problem = if relative == RUN_MARKER && kind.is_file() {
            None
        } else if kind.is_dir() {
            (!folders.contains(relative)).then(|| format!("{relative}/, a folder it does not list"))
        } else if !kind.is_file() {
            Some(format!("{relative}, which is not a file a run writes"))
        } else if !listed.contains(relative) {
            Some(format!("{relative}, a file it does not list"))
        } else if inputs.holds_file(found) {
            Some(format!(
                "{relative}, a hard link to a file this command reads"
            ))
        } else {
            None
        };
        problems.extend(problem);
        problems.len() < SHOWN
    })?;
    if !more {
        problems.extend(
            files
                .iter()
                .filter_map(|file| listed_file_problem(target, file))
                .take(SHOWN - problems.len()),
        );
    }
    if problems.is_empty() {
        return Ok(());
    }
    refuse(format!(
        "not as its {RUN_MARKER} says an earlier run left it: {}{}",
        problems.join(", "),
        if more { " and more" } else { "" }
    ))
}

/// How many of the things wrong with a folder an error names.
const SHOWN: usize = 5;

/// Calls `visit` with every entry under `dir` by its path relative to `root`
/// (`/` between folders), each folder before what it holds, for as long as
/// `visit` says to go on. Whether it was stopped with entries left.
fn walk(
    root: &Path,
    dir: &Path,
    visit: &mut dyn FnMut(&str, &fs::Metadata) -> bool,
) -> Result<bool, String> {
    let failed = |e: io::Error| format!("{}: {e}", dir.display());
    for entry in fs::read_dir(dir).map_err(failed)? {
        let path = entry.map_err(failed)?.path();
        let found = fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let relative = path
            .strip_prefix(root)
            .expect("read_dir lists what is under its folder")
            .to_string_lossy()
            .into_owned();
        if !visit(&relative, &found) {
            return Ok(true);
        }
        if found.is_dir() && walk(root, &path, visit)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The files `marker` lists, once it proves to be a whole record of a run as
/// [`OutDir::commit`] writes it (the provenance, with the nicsched that wrote it,
/// and every file with its size, each once and inside the run); or what it is
/// instead.
fn marker_record(marker: &Path) -> Result<Vec<RunFile>, String> {
    #[derive(Serialize, Deserialize)]
    struct Record {
        #[serde(flatten)]
        provenance: Provenance,
        files: Vec<RunFile>,
    }
    let found = fs::symlink_metadata(marker).map_err(|e| format!("{RUN_MARKER}: {e}"))?;
    if !found.is_file() {
        return Err(format!("its {RUN_MARKER} is not a file"));
    }
    let text = fs::read_to_string(marker).map_err(|e| format!("{RUN_MARKER}: {e}"))?;
    let not_a_record = |why: String| format!("its {RUN_MARKER} is not a record of a run ({why})");
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| not_a_record(e.to_string()))?;
    let record: Record =
        serde_json::from_value(value.clone()).map_err(|e| not_a_record(e.to_string()))?;
    let written = serde_json::to_value(&record).expect("a record serializes");
    let unknown: Vec<&str> = value
        .as_object()
        .into_iter()
        .flat_map(|keys| keys.keys())
        .filter(|key| written.get(key.as_str()).is_none())
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(not_a_record(format!(
            "keys nicsched does not write: {}",
            unknown.join(", ")
        )));
    }
    let provenance = &record.provenance;
    if provenance.nicsched.is_empty() {
        return Err(not_a_record("no nicsched version".to_string()));
    }
    let is_sha256 = provenance.scenario_sha256.len() == 64
        && provenance
            .scenario_sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !is_sha256 {
        return Err(not_a_record("scenario_sha256 is not a SHA-256".to_string()));
    }
    let mut paths = HashSet::new();
    for file in &record.files {
        let relative = Path::new(&file.path);
        let inside = relative.components().next().is_some()
            && relative
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        if !inside || file.path == RUN_MARKER {
            return Err(not_a_record(format!(
                "{:?} is not a file of a run",
                file.path
            )));
        }
        if !paths.insert(file.path.as_str()) {
            return Err(not_a_record(format!("{} is listed twice", file.path)));
        }
    }
    Ok(record.files)
}

/// Removes every folder under `dir` that holds no file at any depth; whether
/// `dir` holds one.
fn remove_empty_folders(dir: &Path) -> io::Result<bool> {
    let mut holds = false;
    for entry in fs::read_dir(dir).map_err(at(dir))? {
        let entry = entry.map_err(at(dir))?;
        let path = entry.path();
        let folder = entry.file_type().map_err(at(&path))?.is_dir();
        if !folder || remove_empty_folders(&path)? {
            holds = true;
        } else {
            fs::remove_dir(&path).map_err(at(&path))?;
        }
    }
    Ok(holds)
}

/// Every file under `dir`, by its path relative to `root`, with its size.
fn list_files(root: &Path, dir: &Path, files: &mut Vec<RunFile>) -> io::Result<()> {
    for entry in fs::read_dir(dir).map_err(at(dir))? {
        let path = entry.map_err(at(dir))?.path();
        let metadata = fs::symlink_metadata(&path).map_err(at(&path))?;
        if metadata.is_dir() {
            list_files(root, &path, files)?;
            continue;
        }
        let relative = path
            .strip_prefix(root)
            .expect("read_dir lists what is under its folder")
            .to_str()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: a name that is not UTF-8", path.display()),
                )
            })?;
        files.push(RunFile {
            path: relative.to_string(),
            bytes: metadata.len(),
        });
    }
    Ok(())
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if !self.committed {
            // On a full disk too: removing needs no room.
            let _ = fs::remove_dir_all(&self.staging);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A folder of its own under the system's temp folder, removed when dropped.
    pub(crate) struct TempDir(pub PathBuf);

    impl TempDir {
        pub(crate) fn new(test: &str) -> Self {
            let path = std::env::temp_dir().join(format!("report-{test}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// A provenance as a run records it.
    pub(crate) fn provenance() -> Provenance {
        Provenance {
            nicsched: "0.1.0".to_string(),
            scenario_sha256: "ab".repeat(32),
            ..Provenance::default()
        }
    }

    /// Commits a run holding `files` (path in the run, contents) to `target`, as
    /// `nicsched sim` does.
    pub(crate) fn committed_run(target: &Path, files: &[(&str, &str)]) {
        let out = OutDir::claim(target, &[]).unwrap();
        for (path, text) in files {
            let path = out.staging().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        out.commit(&provenance()).unwrap();
    }

    #[test]
    fn a_second_claim_is_refused_while_the_first_holds_the_folder() {
        let temp = TempDir::new("lock");
        let target = temp.0.join("out");
        let lock = temp.0.join(".out.lock");
        let first = OutDir::claim(&target, &[]).unwrap();
        assert!(lock.is_file());
        let refused = OutDir::claim(&target, &[]).unwrap_err();
        assert!(
            refused.starts_with(&format!(
                "{}: another nicsched run is writing it",
                target.display()
            )),
            "{refused}"
        );
        assert!(first.staging().is_dir(), "the refusal touched nothing");
        drop(first);
        assert!(!lock.exists(), "a run that ends takes its lock file along");
        let second = OutDir::claim(&target, &[]).unwrap();
        second.commit(&provenance()).unwrap();
        assert!(
            OutDir::claim(&target, &[]).is_ok(),
            "a committed run lets go"
        );
    }

    #[test]
    fn staging_names_tell_their_folder_and_cannot_be_an_out() {
        assert_eq!(staged_for(".out.partial-12"), Some("out"));
        assert_eq!(staged_for(".out.partial-12.old"), Some("out"));
        assert_eq!(staged_for(".a.partial-1.partial-5"), Some("a.partial-1"));
        for name in [
            "out",
            ".out",
            ".out.partial-",
            ".out.partial-1x",
            "..partial-3",
        ] {
            assert_eq!(staged_for(name), None, "{name}");
        }
        let temp = TempDir::new("staging-name");
        let refused = OutDir::claim(&temp.0.join(".out.partial-3"), &[]).unwrap_err();
        assert!(refused.contains("give --out another name"), "{refused}");
    }

    #[test]
    fn a_claim_clears_what_killed_runs_left_and_only_that() {
        let temp = TempDir::new("leftovers");
        let target = temp.0.join("out");
        let leftover = temp.0.join(".out.partial-999999");
        let another_outs = [
            temp.0.join(".other.partial-5"),
            temp.0.join(".out.partial-1.partial-2"),
        ];
        for dir in another_outs.iter().chain([&leftover]) {
            fs::create_dir_all(dir.join("tonic")).unwrap();
            fs::write(dir.join("tonic").join(SUMMARY_JSON), "{}").unwrap();
        }
        // Killed between moving the earlier run aside and its own in place.
        let aside = temp.0.join(".out.partial-7.old");
        committed_run(&temp.0.join("earlier"), &[("tonic/summary.json", "{}")]);
        fs::rename(temp.0.join("earlier"), &aside).unwrap();

        let out = OutDir::claim(&target, &[]).unwrap();
        assert!(!leftover.exists());
        assert!(!aside.exists());
        assert!(target.join(RUN_MARKER).is_file(), "the earlier run is back");
        for dir in &another_outs {
            assert!(dir.is_dir(), "{} belongs to another --out", dir.display());
        }
        drop(out);
    }

    #[test]
    fn the_marker_lists_every_file_of_the_run_with_its_size() {
        let temp = TempDir::new("marker");
        let target = temp.0.join("out");
        committed_run(
            &target,
            &[
                ("tonic/summary.json", "{}"),
                ("report.html", "<html>"),
                ("logs/tonic/iperf3.json", ""),
            ],
        );
        let marker: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(target.join(RUN_MARKER)).unwrap()).unwrap();
        assert_eq!(marker["seed"], 0, "the provenance's keys are kept");
        assert_eq!(
            marker["files"],
            serde_json::json!([
                {"path": "logs/tonic/iperf3.json", "bytes": 0},
                {"path": "report.html", "bytes": 6},
                {"path": "tonic/summary.json", "bytes": 2},
            ])
        );
        assert_eq!(complete_run_files(&target).unwrap().len(), 3);
    }
}
