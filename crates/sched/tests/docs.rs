//! Every list of enforcers in the docs is the registry's: each is written here as
//! the registry makes it, and a doc that says otherwise fails with the text to
//! paste in. (README.md's and docs/enforcers.md's tables are `nicsched enforcers
//! --markdown`'s, held by crates/nicsched/tests/cli.rs.)

use policy::pcc::Feedback;
use sched::registry::{self, Runs, World};
use sched::{ENFORCERS, EnforcerInfo};
use std::path::Path;

fn names(filter: impl Fn(&EnforcerInfo) -> bool) -> Vec<&'static str> {
    ENFORCERS
        .iter()
        .filter(|e| filter(e))
        .map(|e| e.name)
        .collect()
}

fn ticked(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| format!("`{n}`")).collect()
}

/// "`a`, `b`, `c`"
fn comma(names: &[&str]) -> String {
    ticked(names).join(", ")
}

/// "`a`, `b` and `c`"
fn prose(names: &[&str]) -> String {
    let ticked = ticked(names);
    match ticked.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A doc's text with its line breaks and runs of spaces as one space, as
/// Markdown reads them.
fn doc(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_kernel(e: &EnforcerInfo) -> bool {
    matches!(e.runs, Runs::Kernel)
}

/// (doc, the text the registry makes for one of its lists).
fn lists() -> Vec<(&'static str, String)> {
    let nic = names(|e| e.nic().is_some());
    let engine = names(EnforcerInfo::has_classes);
    let fed_back = names(|e| e.feedback != Feedback::None);
    let packet_rates = names(|e| e.feedback.packet_rates());
    let kernel = names(is_kernel);
    let one_host = registry::defaults(World::OneHost);
    vec![
        (
            "docs/enforcers.md",
            format!("## The multiqueue NIC model: {}", nic.join(", ")),
        ),
        (
            "docs/enforcers.md",
            format!(
                "| applies to | {}: the qdisc of each Tx queue, shared by whoever sends to it (the ring not counted) | {}: each app with its split classes",
                comma(&nic),
                comma(&engine)
            ),
        ),
        (
            "docs/enforcers.md",
            format!(
                "{} are the `wheel` on one host; their feedback across hosts (bandwidth, and for {} packet rate)",
                prose(&fed_back),
                prose(&packet_rates)
            ),
        ),
        (
            "docs/scenario.md",
            format!(
                "Enforcer names accepted in `enforcers`: {} ([enforcers.md](enforcers.md)). {} runs only in the lab",
                comma(&registry::names()),
                prose(&kernel)
            ),
        ),
        (
            "docs/scenario.md",
            format!(
                "| `enforcers` | list of names | `[{}]` |",
                one_host.join(", ")
            ),
        ),
        (
            "docs/hosts.md",
            format!(
                "| `enforcers` | list of names | `[{}]` |",
                registry::defaults(World::Hosts).join(", ")
            ),
        ),
        (
            "docs/json.md",
            format!(
                "(default {}; `-e all` every one, {} last)",
                prose(&one_host),
                prose(&kernel)
            ),
        ),
    ]
}

#[test]
fn every_list_of_enforcers_in_the_docs_is_the_registrys() {
    let stale: Vec<String> = lists()
        .into_iter()
        .filter(|(file, text)| !doc(file).contains(text.as_str()))
        .map(|(file, text)| format!("{file} should say:\n  {text}"))
        .collect();
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}

/// docs/enforcers.md's table of bounds names every row once.
#[test]
fn the_bounds_table_has_a_line_for_every_row() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/enforcers.md"),
    )
    .unwrap();
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("| enforcer | bounds |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let mut listed: Vec<&str> = table
        .iter()
        .flat_map(|line| {
            let cell = line.split('|').nth(1).unwrap_or("");
            cell.split(',').map(|n| n.trim().trim_matches('`'))
        })
        .collect();
    listed.sort_unstable();
    let mut rows = registry::names();
    rows.sort_unstable();
    assert_eq!(listed, rows, "docs/enforcers.md's bounds table: {table:#?}");
}
