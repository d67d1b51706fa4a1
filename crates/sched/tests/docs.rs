//! Every list of enforcers in the docs is the registry's: each is written here as
//! the registry makes it, and a doc that says otherwise fails. A new row needs no
//! edit of these lists by hand: `NICSCHED_BLESS=1 cargo test -p sched --test docs`
//! rewrites every stale one in place. (README.md's table is `nicsched enforcers
//! --markdown`'s, held, and blessed the same way, by crates/nicsched/tests/cli.rs.)

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

/// What a doc says around a list, and the list the registry makes.
enum Part {
    Said(&'static str),
    Listed(String),
}
use Part::{Listed, Said};

/// (doc, the sentence the registry makes for one of its lists, in parts: it
/// begins with what the doc says, so that a stale one can be found and rewritten).
fn lists() -> Vec<(&'static str, Vec<Part>)> {
    let nic = names(|e| e.nic().is_some());
    let engine = names(EnforcerInfo::has_classes);
    let fed_back = names(|e| e.feedback != Feedback::None);
    let packet_rates = names(|e| e.feedback.packet_rates());
    let kernel = names(is_kernel);
    let one_host = registry::defaults(World::OneHost);
    vec![
        (
            "docs/enforcers.md",
            vec![
                Said("## The multiqueue NIC model: "),
                Listed(nic.join(", ")),
            ],
        ),
        (
            "docs/enforcers.md",
            vec![
                Said("| applies to | "),
                Listed(comma(&nic)),
                Said(
                    ": the qdisc of each Tx queue, shared by whoever sends to it (the ring not counted) | ",
                ),
                Listed(comma(&engine)),
                Said(": each app with its split classes"),
            ],
        ),
        (
            "docs/enforcers.md",
            vec![
                Listed(prose(&fed_back)),
                Said(
                    " are the `wheel` on one host; their feedback across hosts (bandwidth, and for ",
                ),
                Listed(prose(&packet_rates)),
                Said(" packet rate)"),
            ],
        ),
        (
            "docs/scenario.md",
            vec![
                Said("Enforcer names accepted in `enforcers`: "),
                Listed(comma(&registry::names())),
                Said(" ([enforcers.md](enforcers.md)). "),
                Listed(prose(&kernel)),
                Said(" runs only in the lab"),
            ],
        ),
        (
            "docs/scenario.md",
            vec![
                Said("| `enforcers` | list of names | `["),
                Listed(one_host.join(", ")),
                Said("]` |"),
            ],
        ),
        (
            "docs/hosts.md",
            vec![
                Said("| `enforcers` | list of names | `["),
                Listed(registry::defaults(World::Hosts).join(", ")),
                Said("]` | enforcers to run, each on the egress"),
            ],
        ),
        (
            "docs/json.md",
            vec![
                Said("(default "),
                Listed(prose(&one_host)),
                Said("; `-e all` every one, "),
                Listed(prose(&kernel)),
                Said(" last)"),
            ],
        ),
    ]
}

fn sentence(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|part| match part {
            Said(text) => *text,
            Listed(text) => text.as_str(),
        })
        .collect()
}

/// The bytes of `text` that `parts` spans with its lists as they are written
/// there now: from the first thing said to the last, or to the line's end
/// where a list ends the sentence (from its paragraph's start where a list
/// begins it); line breaks count as spaces.
fn stale_span(text: &str, parts: &[Part]) -> Option<(usize, usize)> {
    let said: Vec<&str> = parts
        .iter()
        .filter_map(|part| match part {
            Said(text) => Some(*text),
            Listed(_) => None,
        })
        .collect();
    let (first, rest) = said.split_first()?;
    let anywhere = |from: usize, phrase: &str| -> Option<(usize, usize)> {
        let words: Vec<&str> = phrase.split_whitespace().collect();
        let mut at = from;
        while let Some(found) = text[at..].find(words[0]).map(|i| at + i) {
            let mut end = found + words[0].len();
            let whole = words[1..].iter().all(|word| {
                let gap = text[end..].len() - text[end..].trim_start().len();
                let matched = text[end + gap..].starts_with(word) && (gap > 0);
                end += gap + word.len();
                matched
            });
            if whole {
                return Some((found, end));
            }
            at = found + 1;
        }
        None
    };
    let (start, mut end) = anywhere(0, first)?;
    // A list may begin the sentence, at the start of its paragraph.
    let start = match parts.first() {
        Some(Listed(_)) => text[..start].rfind("\n\n").map_or(0, |i| i + 2),
        _ => start,
    };
    for phrase in rest {
        end = anywhere(end, phrase)?.1;
    }
    if let Some(Listed(_)) = parts.last() {
        end += text[end..].find('\n').unwrap_or(text.len() - end);
    }
    Some((start, end))
}

#[test]
fn every_list_of_enforcers_in_the_docs_is_the_registrys() {
    let bless = std::env::var_os("NICSCHED_BLESS").is_some();
    let mut stale = Vec::new();
    for (file, parts) in lists() {
        let sentence = sentence(&parts);
        if doc(file).contains(sentence.as_str()) {
            continue;
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(file);
        let mut text = std::fs::read_to_string(&path).unwrap();
        match stale_span(&text, &parts) {
            Some((start, end)) if bless => {
                text.replace_range(start..end, &sentence);
                std::fs::write(&path, text).unwrap();
            }
            Some(_) => stale.push(format!(
                "{file} should say:\n  {sentence}\n(NICSCHED_BLESS=1 rewrites it)"
            )),
            None => stale.push(format!(
                "{file} lost the sentence that should say:\n  {sentence}"
            )),
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}

/// Blessing finds a stale list, wrapped over lines, and leaves the rest.
#[test]
fn a_stale_list_is_found_across_line_breaks() {
    let parts = [
        Said("accepted: "),
        Listed("`a`, `b`, `c`".into()),
        Said(" (see"),
    ];
    let text = "Intro.\nNames accepted: `a`,\n`b` (see there).\n";
    let (start, end) = stale_span(text, &parts).unwrap();
    assert_eq!(&text[start..end], "accepted: `a`,\n`b` (see");
    let header = [Said("## Model: "), Listed("a, b".into())];
    let text = "x\n## Model: a\n\nbody\n";
    let (start, end) = stale_span(text, &header).unwrap();
    assert_eq!(&text[start..end], "## Model: a");
    let leading = [Listed("`a`".into()), Said(" are the")];
    let text = "x\n\n`b` and\n`c` are the wheel\n";
    let (start, end) = stale_span(text, &leading).unwrap();
    assert_eq!(&text[start..end], "`b` and\n`c` are the");
    assert_eq!(stale_span("nothing here", &parts), None);
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
