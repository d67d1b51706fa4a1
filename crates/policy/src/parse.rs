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
use ctx::Ctx;
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

/// A mistake of tenant `index` of the policy at `path` (a policy, or a scenario of
/// one host) that only a consumer of the parsed policy finds, such as a mechanism
/// that cannot hold the tenant: located at the tenant's entry of `tenants`, in the
/// file that writes it (the scenario, or the policy file its `policy:` names).
/// `None` where the file no longer parses or has no such tenant.
pub fn tenant_error(
    path: &Path,
    index: usize,
    message: String,
    hint: Option<String>,
) -> Option<PolicyError> {
    let text = read_file(path).ok()?;
    let file = path.display().to_string();
    let ctx = Ctx { file: &file };
    let root = ctx.read(&text).ok()?;
    let at_entry = |draft: policy::Draft<'_>| {
        Ok(draft
            .tenant_at
            .get(index)
            .map(|entry| draft.ctx.at(&entry.referenced, message, hint)))
    };
    let scenario_policy = match &root.value {
        yaml::Node::Map(entries) => entries
            .iter()
            .find(|(key, _)| matches!(&key.value, yaml::Node::Str(k) if k == "policy"))
            .map(|(_, value)| value),
        _ => None,
    };
    let located = match scenario_policy {
        Some(node) => {
            scenario::with_policy(ctx, node, path.parent().unwrap_or(Path::new("")), at_entry)
        }
        None => policy::policy_draft(ctx, &root).and_then(at_entry),
    };
    located.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("nicsched-policy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_tenant_is_located_at_its_entry_in_the_file_that_writes_it() {
        let dir = scratch("tenant-at");
        let policy = dir.join("policy.yaml");
        std::fs::write(
            &policy,
            "link: { rate: 1Gbit }\ntenants:\n  - { name: a }\n  - name: b\n    weight: 2\n",
        )
        .unwrap();
        let error = tenant_error(&policy, 1, "no way".into(), Some("a hint".into())).unwrap();
        assert_eq!(
            error.to_string(),
            format!("{}:4:5: error: no way (hint: a hint)", policy.display())
        );
        assert_eq!(
            tenant_error(&policy, 0, String::new(), None).unwrap().line,
            3
        );
        assert!(tenant_error(&policy, 2, String::new(), None).is_none());

        let by_path = dir.join("by-path.yaml");
        std::fs::write(
            &by_path,
            "duration: 1s\npolicy: policy.yaml\ntraffic:\n  - { tenant: a, kind: bulk }\n",
        )
        .unwrap();
        let error = tenant_error(&by_path, 1, String::new(), None).unwrap();
        assert_eq!(
            (error.file.as_str(), error.line),
            (policy.to_str().unwrap(), 4)
        );

        let inline = dir.join("inline.yaml");
        std::fs::write(
            &inline,
            "duration: 1s\npolicy:\n  link: { rate: 1Gbit }\n  tenants:\n    - { name: a }\n    - { name: b }\ntraffic:\n  - { tenant: a, kind: bulk }\n",
        )
        .unwrap();
        let error = tenant_error(&inline, 1, String::new(), None).unwrap();
        assert_eq!(
            (error.file.as_str(), error.line, error.column),
            (inline.to_str().unwrap(), 6, 7)
        );
        std::fs::write(&inline, "not: [a policy").unwrap();
        assert!(tenant_error(&inline, 0, String::new(), None).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
