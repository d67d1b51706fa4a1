//! `nicsched report`: runs of any world overlaid on one report.html, read back
//! from their folders.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::Failure;

/// Writes the page of the runs `results` names (complete runs only) to `out`, or,
/// for one results folder, to FOLDER.html beside it, and prints their table with
/// every failed self-check beneath it. The page is written only where nothing but
/// an earlier page would be lost: outside every run's folder (a file there would
/// change a run its nicsched-run.json vouches for) and every input, over no file
/// but a page nicsched wrote.
pub(crate) fn report(results: &[PathBuf], out: Option<PathBuf>) -> Result<(), Failure> {
    let mut runs = Vec::new();
    let mut roots = Vec::new();
    let mut summaries = Vec::new();
    for path in results {
        let loaded = report::runs::load_runs(path).map_err(|e| Failure::input(e.to_string()))?;
        // Runs across hosts have no row in the table of one host's enforcers.
        if loaded.iter().all(|run| !run.across_hosts) {
            summaries.push((
                path,
                report::load_summaries(path).map_err(|e| Failure::input(e.to_string()))?,
            ));
        }
        runs.extend(loaded);
        // load_runs found the marker, so the path resolves and has one above it.
        let found = path
            .canonicalize()
            .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
        if let Some(root) = found
            .ancestors()
            .find(|dir| dir.join(report::RUN_MARKER).is_file())
        {
            roots.push(root.to_path_buf());
        }
    }
    let out = match (out, roots.as_slice()) {
        (Some(out), _) => out,
        (None, [root]) => beside(root),
        (None, _) => {
            return Err(Failure::input(
                "nicsched report: give --out FILE for the page of several results folders",
            ));
        }
    };
    let page = writable_page(&out, &roots).map_err(Failure::input)?;
    write_page(&page, &runs).map_err(|e| Failure::runtime(e.to_string()))?;
    for (path, summaries) in &summaries {
        println!(
            "{}:\n{}",
            path.display(),
            report::comparison_table(summaries)
        );
    }
    println!("report: {}", out.display());
    Ok(())
}

/// Where the page named `out` is written, through its links; or why not there:
/// a folder, a path inside a run's folder or an input, or a file that is not a
/// page nicsched wrote or that is one of the runs' files under another name.
fn writable_page(out: &Path, roots: &[PathBuf]) -> Result<PathBuf, String> {
    let page = report::resolved(out)?;
    if page.is_dir() {
        return Err(format!(
            "--out {}: a folder; give the page's file name, e.g. {}",
            out.display(),
            out.join(report::REPORT_HTML).display()
        ));
    }
    let roots: Vec<&Path> = roots.iter().map(PathBuf::as_path).collect();
    let inputs = report::Inputs::new(&roots)?;
    report::refuse_unasked(out, &page, &inputs).map_err(|e| format!("--out {e}"))?;
    let found = match fs::symlink_metadata(&page) {
        Ok(found) => found,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(page),
        Err(e) => return Err(format!("--out {}: {e}", out.display())),
    };
    let refused = |what: &str| {
        format!(
            "--out {}: {what}; nothing was written: give the path of a new file or of a page nicsched wrote",
            out.display()
        )
    };
    if !found.is_file() {
        return Err(refused("not a file"));
    }
    if inputs.holds_file(&found) {
        return Err(refused("a hard link to a file of a run it reads"));
    }
    match report::is_report_page(&page) {
        Ok(true) => Ok(page),
        Ok(false) => Err(refused(&format!(
            "a file nicsched did not write (a page it wrote has {} in its head)",
            report::REPORT_PAGE_MARK
        ))),
        Err(e) => Err(format!("--out {}: {e}", out.display())),
    }
}

/// Writes the page of `runs` beside `page` and moves it over `page`, so that no
/// link is written through and an interrupted write leaves the earlier page.
fn write_page(page: &Path, runs: &[report::runs::Run]) -> io::Result<()> {
    let folder = page.parent().expect("a resolved path has a folder");
    fs::create_dir_all(folder)?;
    let staged = tempfile::Builder::new()
        .prefix(".nicsched-report-")
        .suffix(".html")
        .permissions(fs::Permissions::from_mode(0o666))
        .tempfile_in(folder)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", folder.display())))?;
    report::write_report(staged.path(), runs)?;
    staged
        .persist(page)
        .map(drop)
        .map_err(|e| io::Error::new(e.error.kind(), format!("{}: {}", page.display(), e.error)))
}

/// FOLDER.html beside `root`.
fn beside(root: &Path) -> PathBuf {
    let mut name = root.file_name().unwrap_or_default().to_os_string();
    name.push(".html");
    root.with_file_name(name)
}
