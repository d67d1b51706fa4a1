//! Hostile paths to write to (docs/scenario.md, "Results"): folders with a forged,
//! partial or tampered marker or with files no run wrote, links into what a
//! command reads, folders of runs it was not asked to replace. Each is refused
//! with status 2, saying what was found, and every file, folder and link that was
//! there before is there after, byte for byte.

// Its `runnable` is for tests that need root or programs; these need neither.
#[allow(dead_code)]
mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::Scratch;
use sha2::{Digest, Sha256};

/// One enforcer for 200 ms: a run in well under a second.
const SHORT: &str = "name: short\npolicy:\n  link: { rate: 1Gbit, queues: 4 }\n  tenants:\n    - { name: a, cores: [0, 1] }\n    - { name: b, cores: [2, 3] }\nduration: 200ms\ninterval: 50ms\nenforcers: [tonic]\ntraffic:\n  - { tenant: a, kind: bulk, flows: 2 }\n  - { tenant: b, kind: rpc, response: 2KiB }\n";

fn nicsched(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nicsched"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("the binary runs")
}

fn succeeded(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// What one path under a tree is: a folder, a file's size and SHA-256, or where a
/// link points.
#[derive(Debug, PartialEq)]
enum Found {
    Folder,
    File { bytes: u64, sha256: Vec<u8> },
    Link(PathBuf),
}

/// Every path under `root` with what it is.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Found> {
    fn walk(root: &Path, dir: &Path, found: &mut BTreeMap<PathBuf, Found>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let metadata = fs::symlink_metadata(&path).unwrap();
            let relative = path.strip_prefix(root).unwrap().to_path_buf();
            if metadata.is_symlink() {
                found.insert(relative, Found::Link(fs::read_link(&path).unwrap()));
            } else if metadata.is_dir() {
                found.insert(relative, Found::Folder);
                walk(root, &path, found);
            } else {
                let sha256 = Sha256::digest(fs::read(&path).unwrap()).to_vec();
                found.insert(
                    relative,
                    Found::File {
                        bytes: metadata.len(),
                        sha256,
                    },
                );
            }
        }
    }
    let mut found = BTreeMap::new();
    walk(root, root, &mut found);
    found
}

/// A scratch folder holding the scenario `s.yaml` and a complete run of it in
/// `runs/base`.
struct World {
    scratch: Scratch,
}

impl World {
    fn new(name: &str) -> World {
        let world = World {
            scratch: Scratch::new(&format!("paths-{name}")),
        };
        world.scratch.file("s.yaml", SHORT);
        fs::create_dir(world.path("runs")).unwrap();
        world.sim("runs/base");
        world
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.scratch.0.join(relative)
    }

    fn run(&self, args: &[&str]) -> Output {
        nicsched(&self.scratch.0, args)
    }

    fn sim(&self, out: &str) {
        succeeded(
            &self.run(&["sim", "s.yaml", "-q", "--out", out]),
            &format!("sim --out {out}"),
        );
    }

    /// A byte-for-byte copy of the run in `runs/base` at `to`.
    fn copy_of_base(&self, to: &str) -> PathBuf {
        let to = self.path(to);
        let copied = Command::new("cp")
            .arg("-a")
            .arg(self.path("runs/base"))
            .arg(&to)
            .status()
            .unwrap();
        assert!(copied.success());
        to
    }

    /// Runs `args`, and asserts that it exits with status 2 saying `said`, and
    /// that everything in the world is as it was.
    fn refused(&self, args: &[&str], said: &str) {
        let before = snapshot(&self.scratch.0);
        let output = self.run(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(said),
            "{args:?}: expected {said:?} in: {stderr}"
        );
        let after = snapshot(&self.scratch.0);
        assert_eq!(before, after, "{args:?} changed the world: {stderr}");
    }
}

/// The marker of the run in `dir` as JSON, to tamper with.
fn marker(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(dir.join("nicsched-run.json")).unwrap()).unwrap()
}

fn write_marker(dir: &Path, marker: &serde_json::Value) {
    fs::write(
        dir.join("nicsched-run.json"),
        serde_json::to_string_pretty(marker).unwrap(),
    )
    .unwrap();
}

#[test]
fn a_folder_whose_marker_is_forged_partial_or_of_another_shape_is_refused_untouched() {
    let world = World::new("forged");
    // The case: a project with a `{}` marker.
    let project = world.path("proj");
    fs::create_dir_all(project.join("src")).unwrap();
    fs::write(project.join("src/main.rs"), "fn main(){}\n").unwrap();
    fs::write(project.join("nicsched-run.json"), "{}\n").unwrap();
    world.refused(
        &["sim", "s.yaml", "--out", "proj"],
        "its nicsched-run.json is not a record of a run",
    );

    // Files listed, but no provenance: not the record a run writes.
    let partial = world.copy_of_base("partial");
    let files = marker(&partial)["files"].clone();
    write_marker(&partial, &serde_json::json!({ "files": files }));
    world.refused(
        &["sim", "s.yaml", "--out", "partial"],
        "its nicsched-run.json is not a record of a run (missing field",
    );

    // A whole record, but without the nicsched that wrote it.
    let anonymous = world.copy_of_base("anonymous");
    let mut record = marker(&anonymous);
    record["nicsched"] = "".into();
    write_marker(&anonymous, &record);
    world.refused(
        &["sim", "s.yaml", "--out", "anonymous"],
        "no nicsched version",
    );

    // A record with a key nicsched does not write.
    let extended = world.copy_of_base("extended");
    let mut record = marker(&extended);
    record["mine"] = "keep".into();
    write_marker(&extended, &record);
    world.refused(
        &["sim", "s.yaml", "--out", "extended"],
        "keys nicsched does not write: mine",
    );

    // Another of nicsched's files named as the marker.
    let other_shape = world.copy_of_base("other-shape");
    fs::copy(
        other_shape.join("tonic/summary.json"),
        other_shape.join("nicsched-run.json"),
    )
    .unwrap();
    world.refused(
        &["sim", "s.yaml", "--out", "other-shape"],
        "is not a record of a run",
    );

    // A file listed twice, or one outside the run.
    for (name, path) in [("twice", "tonic/summary.json"), ("outside", "../s.yaml")] {
        let folder = world.copy_of_base(name);
        let mut record = marker(&folder);
        let bytes = record["files"][0]["bytes"].clone();
        record["files"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({ "path": path, "bytes": bytes }));
        write_marker(&folder, &record);
        world.refused(
            &["sim", "s.yaml", "--out", name],
            "is not a record of a run",
        );
    }

    // A folder of files and no marker at all.
    let plain = world.path("plain");
    fs::create_dir(&plain).unwrap();
    fs::write(plain.join("notes.txt"), "mine").unwrap();
    world.refused(
        &["sim", "s.yaml", "--out", "plain"],
        "holds what no nicsched run made (no nicsched-run.json): notes.txt",
    );
}

#[test]
fn a_run_folder_holding_what_its_marker_does_not_list_is_refused_untouched() {
    let world = World::new("extra");
    let notes = world.copy_of_base("notes");
    fs::write(notes.join("notes.txt"), "what I saw").unwrap();
    world.refused(
        &["sim", "s.yaml", "--out", "notes"],
        "notes.txt, a file it does not list",
    );

    let source = world.copy_of_base("source");
    fs::create_dir_all(source.join("src")).unwrap();
    fs::write(source.join("src/main.rs"), "fn main(){}\n").unwrap();
    world.refused(
        &["sim", "s.yaml", "--out", "source"],
        "src/, a folder it does not list",
    );

    // Empty, a folder is still someone's.
    let empty = world.copy_of_base("empty-folder");
    fs::create_dir(empty.join("later")).unwrap();
    world.refused(
        &["sim", "s.yaml", "--out", "empty-folder"],
        "later/, a folder it does not list",
    );

    // A file of the run's name in a listed folder, but a link.
    let linked = world.copy_of_base("linked");
    fs::remove_file(linked.join("tonic/latency.csv")).unwrap();
    symlink("../../s.yaml", linked.join("tonic/latency.csv")).unwrap();
    world.refused(
        &["sim", "s.yaml", "--out", "linked"],
        "tonic/latency.csv, which is not a file a run writes",
    );

    // The scenario hard-linked in place of a file the marker lists, at its size.
    let hard = world.copy_of_base("hard");
    let listed = "tonic/latency.csv";
    fs::remove_file(hard.join(listed)).unwrap();
    fs::hard_link(world.path("s.yaml"), hard.join(listed)).unwrap();
    let mut record = marker(&hard);
    for file in record["files"].as_array_mut().unwrap() {
        if file["path"] == listed {
            file["bytes"] = SHORT.len().into();
        }
    }
    write_marker(&hard, &record);
    world.refused(
        &["sim", "s.yaml", "--out", "hard"],
        "tonic/latency.csv, a hard link to a file this command reads",
    );
}

#[test]
fn a_run_folder_whose_sizes_disagree_with_its_marker_is_refused_untouched() {
    let world = World::new("sizes");
    let tampered = world.copy_of_base("tampered");
    let mut record = marker(&tampered);
    let written = record["files"][0]["bytes"].as_u64().unwrap();
    let path = record["files"][0]["path"].as_str().unwrap().to_string();
    record["files"][0]["bytes"] = (written + 1).into();
    write_marker(&tampered, &record);
    world.refused(
        &["sim", "s.yaml", "--out", "tampered"],
        &format!("{path} has {written} bytes, written with {}", written + 1),
    );

    // A file the user edited after the run.
    let edited = world.copy_of_base("edited");
    let summary = edited.join("tonic/summary.json");
    let mut text = fs::read_to_string(&summary).unwrap();
    text.push_str("\n// checked by hand\n");
    fs::write(&summary, &text).unwrap();
    world.refused(
        &["sim", "s.yaml", "--out", "edited"],
        "tonic/summary.json has",
    );

    // A listed file gone.
    let cut = world.copy_of_base("cut");
    fs::remove_file(cut.join("tonic/timeseries.csv")).unwrap();
    world.refused(
        &["sim", "s.yaml", "--out", "cut"],
        "tonic/timeseries.csv is missing",
    );
}

#[test]
fn an_out_that_is_an_input_holds_one_lies_in_a_run_or_is_a_foreign_file_is_refused() {
    let world = World::new("inputs");
    world.copy_of_base("runs/other");
    let scenario = world.path("s.yaml").canonicalize().unwrap();
    let scenario = scenario.display();
    world.refused(
        &["sim", "s.yaml", "--out", "."],
        &format!(".: holds {scenario}, which this command reads"),
    );
    symlink("s.yaml", world.path("to-scenario")).unwrap();
    world.refused(
        &["sim", "s.yaml", "--out", "to-scenario"],
        &format!("to-scenario: is {scenario}, which this command reads"),
    );
    // Inside a run nobody asked to replace, directly or through a link.
    let other = world.path("runs/other").canonicalize().unwrap();
    let inside = format!("inside the run folder {}", other.display());
    world.refused(&["sim", "s.yaml", "--out", "runs/other/tonic"], &inside);
    world.refused(&["sim", "s.yaml", "--out", "runs/other/new"], &inside);
    symlink("runs/other", world.path("to-other")).unwrap();
    world.refused(&["sim", "s.yaml", "--out", "to-other/new"], &inside);
    // A file of someone's.
    world.scratch.file("notes.txt", "mine");
    world.refused(
        &["sim", "s.yaml", "--out", "notes.txt"],
        "notes.txt: not a folder",
    );
    // Beside a folder, the name nicsched locks it with, holding someone's file.
    world.scratch.file(".mine.lock", "mine");
    world.refused(
        &["sim", "s.yaml", "--out", "mine"],
        ".mine.lock: nicsched locks",
    );
    // lab-bench claims its --out as sim does, before it needs root or runs.
    world.refused(
        &["lab-bench", "s.yaml", "--out", "."],
        &format!(".: holds {scenario}, which this command reads"),
    );
    world.refused(&["lab-bench", "--out", "runs/other/new"], &inside);
    // sweep claims its --out as sim does.
    world.refused(
        &[
            "sweep",
            "s.yaml",
            "--set",
            "duration=100ms,150ms",
            "--out",
            ".",
        ],
        "which this command reads",
    );
}

#[test]
fn report_writes_no_page_over_an_input_into_a_run_or_over_a_foreign_file() {
    let world = World::new("report");
    world.copy_of_base("runs/other");
    let base = world.path("runs/base").canonicalize().unwrap();
    let other = world.path("runs/other").canonicalize().unwrap();
    fn report(out: &str) -> [&str; 4] {
        ["report", "runs/base", "--out", out]
    }

    world.refused(&report("s.yaml"), "a file nicsched did not write");
    world.scratch.file("notes.html", "<html>mine</html>");
    world.refused(&report("notes.html"), "a file nicsched did not write");
    world.refused(
        &report("runs/other/tonic/summary.json"),
        &format!("inside the run folder {}", other.display()),
    );
    world.refused(
        &report("runs/other/page.html"),
        &format!("inside the run folder {}", other.display()),
    );
    world.refused(
        &report("runs/base/page.html"),
        &format!("inside the run folder {}", base.display()),
    );
    // Links named as the page, into the input run.
    symlink("runs/base", world.path("to-base")).unwrap();
    world.refused(
        &report("to-base/page.html"),
        &format!("inside the run folder {}", base.display()),
    );
    symlink(
        "runs/base/tonic/summary.json",
        world.path("summary-link.html"),
    )
    .unwrap();
    world.refused(
        &report("summary-link.html"),
        &format!("inside the run folder {}", base.display()),
    );
    // A page nicsched wrote inside the run (its report.html), through a link.
    symlink("runs/base/report.html", world.path("page-link.html")).unwrap();
    world.refused(
        &report("page-link.html"),
        &format!("inside the run folder {}", base.display()),
    );
    // Hard links to the input's files: its summary.json, and its own page.
    fs::hard_link(
        world.path("runs/base/tonic/summary.json"),
        world.path("hard.json"),
    )
    .unwrap();
    world.refused(
        &report("hard.json"),
        "a hard link to a file of a run it reads",
    );
    fs::hard_link(world.path("runs/base/report.html"), world.path("hard.html")).unwrap();
    world.refused(
        &report("hard.html"),
        "a hard link to a file of a run it reads",
    );
    // Both runs as input: the page may not go inside either.
    world.refused(
        &[
            "report",
            "runs/base",
            "runs/other/tonic",
            "--out",
            "runs/other/x.html",
        ],
        &format!("inside the run folder {}", other.display()),
    );
}

#[test]
fn a_run_replaces_its_own_earlier_run_and_a_report_its_own_page() {
    let world = World::new("again");
    let before = marker(&world.path("runs/base"));
    // Left behind by a killed run into the same --out.
    let leftover = world.path("runs/.base.partial-999999");
    fs::create_dir_all(leftover.join("tonic")).unwrap();
    world.sim("runs/base");
    assert!(!leftover.exists(), "the killed run's staging folder went");
    let after = marker(&world.path("runs/base"));
    assert_eq!(before["files"], after["files"].clone());
    assert_eq!(
        fs::read_dir(world.path("runs")).unwrap().count(),
        1,
        "no lock, staging folder or earlier run left beside it"
    );

    // Through a link, the folder it names is replaced and the link stays.
    symlink("runs/base", world.path("latest")).unwrap();
    world.sim("latest");
    assert!(
        fs::symlink_metadata(world.path("latest"))
            .unwrap()
            .is_symlink()
    );
    assert!(world.path("runs/base/nicsched-run.json").is_file());

    let page = world.path("pages/base.html");
    for time in ["first", "second"] {
        let output = world.run(&["report", "runs/base", "--out", "pages/base.html"]);
        succeeded(&output, &format!("report, {time} time"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("rel_error_mean"), "the table: {stdout}");
        assert!(stdout.contains("\ntonic "), "a row per enforcer: {stdout}");
    }
    assert!(
        fs::read_to_string(&page)
            .unwrap()
            .contains("<meta name=\"generator\" content=\"nicsched report\">")
    );
    assert_eq!(
        fs::read_dir(world.path("pages")).unwrap().count(),
        1,
        "no staged page left beside it"
    );
    // A link to the page is kept, and the page it names replaced.
    symlink("pages/base.html", world.path("page-link.html")).unwrap();
    fs::write(&page, fs::read_to_string(&page).unwrap() + "<!-- old -->").unwrap();
    succeeded(
        &world.run(&["report", "runs/base", "--out", "page-link.html"]),
        "report through a link",
    );
    assert!(
        fs::symlink_metadata(world.path("page-link.html"))
            .unwrap()
            .is_symlink()
    );
    assert!(!fs::read_to_string(&page).unwrap().contains("<!-- old -->"));
    // The run the pages were drawn from is still complete.
    succeeded(
        &world.run(&["compare", "runs/base"]),
        "compare after report",
    );
}

#[test]
fn report_prints_the_table_and_each_failed_check() {
    let world = World::new("failed");
    // A check the run failed, as a run whose figures were wrong records it.
    let failed = world.copy_of_base("failed");
    let summary_path = failed.join("tonic/summary.json");
    let mut summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&summary_path).unwrap()).unwrap();
    summary["checks"][0]["ok"] = false.into();
    summary["checks"][0]["detail"] = "made wrong by the test".into();
    let name = summary["checks"][0]["name"].as_str().unwrap().to_string();
    let text = serde_json::to_string_pretty(&summary).unwrap() + "\n";
    fs::write(&summary_path, &text).unwrap();
    let mut record = marker(&failed);
    for file in record["files"].as_array_mut().unwrap() {
        if file["path"] == "tonic/summary.json" {
            file["bytes"] = text.len().into();
        }
    }
    write_marker(&failed, &record);

    let output = world.run(&["report", "failed", "--out", "failed.html"]);
    succeeded(&output, "report");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("FAILED {name}")),
        "the checks cell: {stdout}"
    );
    assert!(
        stdout.contains(&format!("FAILED tonic: {name}: made wrong by the test")),
        "a line per failed check: {stdout}"
    );
}
