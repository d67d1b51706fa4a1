//! `nicsched report`: runs of any world overlaid on one report.html, read back
//! from their folders.

use std::path::{Path, PathBuf};

use crate::Failure;

/// Writes the page of the runs `results` names (complete runs only) to `out`, or,
/// for one results folder, to FOLDER.html beside it. The page stays outside every
/// run's folder: a file there would change a run its nicsched-run.json vouches for.
pub(crate) fn report(results: &[PathBuf], out: Option<PathBuf>) -> Result<(), Failure> {
    let mut runs = Vec::new();
    let mut roots = Vec::new();
    for path in results {
        runs.extend(report::runs::load_runs(path).map_err(|e| Failure::input(e.to_string()))?);
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
    if out.is_dir() {
        return Err(Failure::input(format!(
            "--out {}: a folder; give the page's file name, e.g. {}",
            out.display(),
            out.join("report.html").display()
        )));
    }
    if let Some(root) = roots.iter().find(|root| inside(&out, root)) {
        return Err(Failure::input(format!(
            "--out {}: inside the run folder {}, whose files its {} vouches for; give a path outside it, e.g. {}",
            out.display(),
            root.display(),
            report::RUN_MARKER,
            beside(root).display()
        )));
    }
    report::write_report(&out, &runs).map_err(|e| Failure::runtime(e.to_string()))?;
    println!("report: {}", out.display());
    Ok(())
}

/// FOLDER.html beside `root`.
fn beside(root: &Path) -> PathBuf {
    let mut name = root.file_name().unwrap_or_default().to_os_string();
    name.push(".html");
    root.with_file_name(name)
}

/// Whether `path`, which may not exist yet, would be written inside `root`
/// (canonical): judged by its nearest folder that exists.
fn inside(path: &Path, root: &Path) -> bool {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    absolute
        .ancestors()
        .skip(1)
        .find_map(|dir| dir.canonicalize().ok())
        .is_some_and(|dir| dir.starts_with(root))
}
