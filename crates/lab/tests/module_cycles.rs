//! No crate of the workspace has an import cycle among its top-level modules.
//!
//! Cargo refuses cycles between crates but not between the modules of one, and a
//! cycle there is a layer that cannot be lifted out (issue 26: `checks` imported
//! `engine`, which imported `hosts`, which imported `checks`). This reads every
//! `crates/*/src/**/*.rs`, takes each path that names another top-level module of
//! the same crate (`crate::x`, `use crate::{x, y}`, `super::x` from a top-level
//! module, or an item the crate root re-exports from `x`), and fails naming the
//! first cycle it finds. The crate root itself is no node: it declares every module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn no_crate_has_a_module_import_cycle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    let mut cycles = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        checked += 1;
        let graph = module_graph(&src);
        if let Some(cycle) = find_cycle(&graph) {
            cycles.push(format!("{}: {}", src.display(), cycle.join(" -> ")));
        }
    }
    assert!(
        checked >= 6,
        "found only {checked} crates under {}",
        crates.display()
    );
    assert!(
        cycles.is_empty(),
        "module import cycles (break each by moving what both sides need below them):\n{}",
        cycles.join("\n")
    );
}

#[test]
fn a_cycle_through_grouped_and_super_paths_is_found() {
    let dir = tempfile_dir();
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\npub use c::Thing;\n"),
        ("a.rs", "use crate::{b::B, x};\n// use crate::c;\n"),
        (
            "b.rs",
            "fn f() { super::Thing::new(); }\n#[cfg(test)]\nmod tests { use super::*; }\n",
        ),
        ("c/mod.rs", "mod inner;\n"),
        (
            "c/inner.rs",
            "use crate::a::A;\nconst S: &str = \"crate::b\";\n",
        ),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let graph = module_graph(&dir);
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    std::fs::write(dir.join("c/inner.rs"), "const S: &str = \"crate::a\";\n").unwrap();
    assert_eq!(find_cycle(&module_graph(&dir)), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("module-cycles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Edges between the top-level modules of the crate whose sources are in `src`.
fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules = BTreeSet::new();
    for file in &files {
        if let Some(top) = module_path(src, file).first() {
            modules.insert(top.clone());
        }
    }
    let mut reexported = BTreeMap::new();
    for file in files.iter().filter(|f| module_path(src, f).is_empty()) {
        reexports(&code_only(&read(file)), &modules, &mut reexported);
    }
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for file in &files {
        let path = module_path(src, file);
        let Some(top) = path.first() else { continue };
        for target in references(&code_only(&read(file)), &path) {
            let target = reexported.get(&target).unwrap_or(&target);
            if target != top && modules.contains(target) {
                graph.get_mut(top).unwrap().insert(target.clone());
            }
        }
    }
    graph
}

fn read(file: &Path) -> String {
    std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// `src/a/b.rs` is `a::b`, `src/a/mod.rs` is `a`, `src/lib.rs` and `src/main.rs`
/// the root; a binary under `src/bin` is a root of its own.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut path: Vec<String> = relative
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    if path.first().is_some_and(|p| p == "bin") {
        return Vec::new();
    }
    if path.last().is_some_and(|p| p == "mod")
        || path.len() == 1 && ["lib", "main"].contains(&path[0].as_str())
    {
        path.pop();
    }
    path
}

/// `text` with comments, string and character literals blanked, so that only code
/// is searched; line breaks are kept.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if rest.starts_with(&['/', '*']) {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i..].starts_with(&['/', '*']) {
                    depth += 1;
                    i += 2;
                } else if chars[i..].starts_with(&['*', '/']) {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if chars[i] == 'r'
            && matches!(rest.get(1), Some('#' | '"'))
            && !ident_before(&chars, i)
        {
            let hashes = rest[1..].iter().take_while(|&&c| c == '#').count();
            if rest.get(1 + hashes) != Some(&'"') {
                out.push(chars[i]);
                i += 1;
                continue;
            }
            i += 2 + hashes;
            while i < chars.len()
                && !(chars[i] == '"'
                    && chars[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&c| c == '#')
                        .count()
                        == hashes)
            {
                i += 1;
            }
            i += 1 + hashes;
            out.push_str("\"\"");
        } else if chars[i] == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if chars[i] == '\'' && (rest.get(2) == Some(&'\'') || rest.get(1) == Some(&'\\')) {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The first segment after each `crate::` and `super::` in `code`, a file of
/// module `path`: what it names at the crate's top. Inline modules (`mod tests {`)
/// deepen the path that `super` climbs from.
fn references(code: &str, path: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    // The module path at each open brace: an inline module pushes its name.
    let mut scopes: Vec<Option<String>> = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            scopes.push(inline_module_before(&chars, i));
            i += 1;
            continue;
        }
        if c == '}' {
            scopes.pop();
            i += 1;
            continue;
        }
        if is_ident(c) && !ident_before(&chars, i) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if (word == "crate" || word == "super") && chars[i..].starts_with(&[':', ':']) {
                let mut here: Vec<String> = path.to_vec();
                here.extend(scopes.iter().flatten().cloned());
                let mut j = i + 2;
                if word == "crate" {
                    here.clear();
                } else {
                    here.pop();
                    while chars[j..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
                        here.pop();
                        j += 7;
                    }
                }
                if let Some(top) = here.first() {
                    found.push(top.clone());
                } else {
                    found.extend(first_segments(&chars, j));
                }
            }
            continue;
        }
        i += 1;
    }
    found
}

/// `Some(name)` if the brace at `open` opens `mod name {`.
fn inline_module_before(chars: &[char], open: usize) -> Option<String> {
    // `mod` and a name fit in the few characters before the brace.
    let before: String = chars[open.saturating_sub(120)..open].iter().collect();
    let mut words = before.split_whitespace().rev();
    let name = words.next()?;
    (words.next()? == "mod" && name.chars().all(is_ident)).then(|| name.to_string())
}

/// The first segment of the path at `at`, or of each path in a `{a, b::c}` group.
fn first_segments(chars: &[char], at: usize) -> Vec<String> {
    let ident =
        |from: usize| -> String { chars[from..].iter().take_while(|&&c| is_ident(c)).collect() };
    if chars.get(at) != Some(&'{') {
        return vec![ident(at)]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
    }
    let mut segments = Vec::new();
    let (mut depth, mut expect, mut i) = (0, true, at);
    while i < chars.len() {
        match chars[i] {
            '{' => {
                depth += 1;
                expect = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => expect = true,
            c if expect && depth == 1 && is_ident(c) => {
                let word = ident(i);
                i += word.len();
                segments.push(word);
                expect = false;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    segments
}

/// Names the crate root re-exports (`pub use module::{A, B as C}`), each with the
/// module it comes from.
fn reexports(code: &str, modules: &BTreeSet<String>, out: &mut BTreeMap<String, String>) {
    for statement in code.split(';') {
        let statement = statement.trim();
        let Some(rest) = statement
            .find("pub use ")
            .map(|at| statement[at + "pub use ".len()..].trim())
        else {
            continue;
        };
        let rest = rest.strip_prefix("crate::").unwrap_or(rest);
        let module: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        if !modules.contains(&module) {
            continue;
        }
        for name in rest
            .split(|c: char| !is_ident(c))
            .filter(|w| !w.is_empty())
            .skip(1)
        {
            out.entry(name.to_string())
                .or_insert_with(|| module.clone());
        }
    }
}

/// A cycle in `graph`, as the modules along it with the first repeated at the end.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    // 0: unvisited, 1: on the current path, 2: done.
    let mut state: BTreeMap<&str, u8> = BTreeMap::new();
    let mut stack: Vec<&str> = Vec::new();
    fn visit<'a>(
        node: &'a str,
        graph: &'a Graph,
        state: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        state.insert(node, 1);
        stack.push(node);
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|n| n == next).unwrap();
                    let mut cycle: Vec<String> =
                        stack[from..].iter().map(|n| n.to_string()).collect();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(cycle) = visit(next, graph, state, stack) {
                        return Some(cycle);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node, 2);
        None
    }
    for node in graph.keys() {
        if !state.contains_key(node.as_str())
            && let Some(cycle) = visit(node, graph, &mut state, &mut stack)
        {
            return Some(cycle);
        }
    }
    None
}
