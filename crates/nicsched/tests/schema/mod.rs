//! The schemas of docs/schema, and documents held to them (JSON Schema 2020-12).

use serde_json::Value;
use std::path::Path;

/// The base every schema's `$id` is under (never fetched: each schema is
/// registered under it here).
pub const SCHEMA_BASE: &str = "https://nicsched.invalid/schema/";

/// Every schema of docs/schema, by file name.
pub fn schemas() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema");
    let mut found: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let schema: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (name, schema)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// The errors of `instance` against docs/schema/`name`, its references resolved
/// among the other schemas there.
pub fn errors(name: &str, instance: &Value) -> Vec<String> {
    let all = schemas();
    let mut registry = jsonschema::Registry::new();
    for (file, schema) in &all {
        registry = registry
            .add(format!("{SCHEMA_BASE}{file}"), schema.clone())
            .unwrap();
    }
    let registry = registry.prepare().unwrap();
    let schema = &all.iter().find(|(file, _)| file == name).unwrap().1;
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .with_registry(&registry)
        .build(schema)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

pub fn assert_valid(name: &str, instance: &Value) {
    let errors = errors(name, instance);
    assert!(
        errors.is_empty(),
        "{name}:\n{}\n{instance:#}",
        errors.join("\n")
    );
}
