//! The crates import each other as docs/architecture.md's crate table says, and no
//! more: the datapath neither the lab nor the simulator, the lab not the simulator.
//!
//! Cargo refuses a cycle between crates but not a new edge that breaks a layer
//! (the datapath importing `sim`, say). This reads each workspace crate's normal
//! dependencies from `cargo metadata` and holds them to the table's "imports"
//! column, so that the page a newcomer reads and the code agree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

type Imports = BTreeMap<String, BTreeSet<String>>;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Each workspace crate and the workspace crates it depends on (normal
/// dependencies only: a test may reach anything).
fn from_cargo() -> Imports {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let members: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    packages
        .iter()
        .map(|p| {
            let imports = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap())
                .filter(|name| members.contains(name))
                .map(String::from)
                .collect();
            (p["name"].as_str().unwrap().to_string(), imports)
        })
        .collect()
}

/// docs/architecture.md's crate table: each row's crate and its "imports" cell.
fn from_docs() -> Imports {
    let text = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    text.lines()
        .skip_while(|l| !l.starts_with("| crate | holds | imports |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells[1].trim_matches('`').to_string();
            let imports = cells[cells.len() - 2]
                .split(',')
                .map(|c| c.trim().trim_matches('`'))
                .filter(|c| !c.is_empty() && *c != "—")
                .map(String::from)
                .collect();
            (name, imports)
        })
        .collect()
}

#[test]
fn the_crates_import_what_the_architecture_page_says() {
    let docs = from_docs();
    assert!(
        docs.len() >= 8,
        "docs/architecture.md's crate table has {} rows: {docs:#?}",
        docs.len()
    );
    assert_eq!(
        from_cargo(),
        docs,
        "the workspace's crates (left, from cargo metadata) against docs/architecture.md's table (right): change the table or the dependency on purpose"
    );
}

#[test]
fn the_datapath_imports_nothing_that_runs_an_experiment() {
    let imports = from_cargo();
    for (layer, above) in [
        ("datapath", &["lab", "sim", "run", "nicsched"][..]),
        ("lab", &["sim", "run", "nicsched"][..]),
        ("sim", &["lab", "datapath", "run", "nicsched"][..]),
    ] {
        let found: Vec<&String> = imports[layer]
            .iter()
            .filter(|name| above.contains(&name.as_str()))
            .collect();
        assert!(found.is_empty(), "{layer} imports {found:?}");
    }
}
