//! YAML to the validated model. The text is first read into a generic tree in which
//! every node keeps its position ([`yaml::Node`]); validation then walks that tree by hand,
//! so that each mistake is reported at the node that holds it (the key for an
//! unknown key, the value for a bad value, the second occurrence of a duplicate).
//!
//! The layers, each in a module of its own, bottom up: `yaml` (the tree),
//! `ctx` (mistakes at a node, and the readers of a node's value), `policy`,
//! `traffic` (a scenario's entries), `scenario` (one host) and `hosts` (a
//! scenario across hosts).

mod ctx;
mod hosts;
mod policy;
mod scenario;
mod traffic;
mod yaml;

use crate::{AnyScenario, Policy, PolicyError, Scenario};
pub use policy::parse_policy;
pub use scenario::{parse_any_scenario, parse_scenario};
use std::path::Path;

fn read_file(path: &Path) -> Result<String, PolicyError> {
    std::fs::read_to_string(path).map_err(|e| PolicyError {
        file: path.display().to_string(),
        line: 1,
        column: 1,
        message: format!("cannot read the file: {e}"),
        hint: Some("a policy or scenario is a readable UTF-8 text file".into()),
    })
}

pub fn load_policy(path: &Path) -> Result<Policy, PolicyError> {
    parse_policy(&read_file(path)?, &path.display().to_string())
}

/// [`parse_scenario`] of the file at `path`.
pub fn load_scenario(path: &Path, known_enforcers: &[&str]) -> Result<Scenario, PolicyError> {
    let text = read_file(path)?;
    let base_dir = path.parent().unwrap_or(Path::new(""));
    parse_scenario(
        &text,
        &path.display().to_string(),
        base_dir,
        known_enforcers,
    )
}

/// [`parse_any_scenario`] of the file at `path`.
pub fn load_any_scenario(
    path: &Path,
    known_enforcers: &[&str],
) -> Result<AnyScenario, PolicyError> {
    let text = read_file(path)?;
    let base_dir = path.parent().unwrap_or(Path::new(""));
    parse_any_scenario(
        &text,
        &path.display().to_string(),
        base_dir,
        known_enforcers,
    )
}
