//! No enforcer is chosen by name outside the registry: a string literal equal to a
//! registry row's name, anywhere in `crates/*/src` but `registry.rs` and test code
//! (`#[cfg(test)]`, `#[test]`), is a place that should read the row instead.

use proc_macro2::{TokenStream, TokenTree};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Literals that spell a row's name but mean something else: (file, literal, what).
const NOT_ENFORCERS: &[(&str, &str, &str)] = &[
    (
        "crates/policy/src/parse/policy.rs",
        "fifo",
        "`engine.cpu: fifo`, the way cores are shared (policy::CpuSharing::Fifo)",
    ),
    (
        "crates/realhost/src/lib.rs",
        "htb",
        "`apply --mechanism htb`, the kernel's HTB configured on a device (realhost::Mechanism::Htb), not sched's row",
    ),
    (
        "crates/realhost/src/lib.rs",
        "tonic",
        "`apply --mechanism tonic`, TONIC's queues and program on a device (realhost::Mechanism::Tonic), not sched's row",
    ),
];

/// One literal found: where, and what it says.
#[derive(Debug)]
struct Found {
    file: String,
    line: usize,
    literal: String,
}

struct Scan<'a> {
    file: &'a str,
    names: &'a [&'static str],
    found: Vec<Found>,
}

impl Scan<'_> {
    fn literal(&mut self, literal: &syn::LitStr) {
        let value = literal.value();
        if self.names.contains(&value.as_str()) {
            self.found.push(Found {
                file: self.file.to_string(),
                line: literal.span().start().line,
                literal: value,
            });
        }
    }

    /// Macro arguments and attribute lists are not parsed as Rust: every string
    /// literal among their tokens counts.
    fn tokens(&mut self, tokens: TokenStream) {
        for token in tokens {
            match token {
                TokenTree::Group(group) => self.tokens(group.stream()),
                TokenTree::Literal(literal) => {
                    if let syn::Lit::Str(literal) = syn::Lit::new(literal) {
                        self.literal(&literal);
                    }
                }
                TokenTree::Ident(_) | TokenTree::Punct(_) => {}
            }
        }
    }
}

/// Whether `attrs` mark test code: `#[test]` or `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("test")
            || (attr.path().is_ident("cfg")
                && attr
                    .meta
                    .require_list()
                    .is_ok_and(|list| list.tokens.to_string() == "test"))
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

impl<'ast> Visit<'ast> for Scan<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        if !is_test(&function.attrs) {
            syn::visit::visit_impl_item_fn(self, function);
        }
    }

    fn visit_lit_str(&mut self, literal: &'ast syn::LitStr) {
        self.literal(literal);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
    }

    fn visit_meta_list(&mut self, list: &'ast syn::MetaList) {
        self.tokens(list.tokens.clone());
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// Every enforcer-name literal in the workspace's `crates/*/src`, test code and
/// the registry aside.
fn name_literals() -> Vec<Found> {
    let root = workspace();
    let names = sched::registry::names();
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    assert!(!files.is_empty(), "no sources under {}", root.display());
    let mut found = Vec::new();
    for path in files {
        let file = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if file == "crates/sched/src/registry.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut scan = Scan {
            file: &file,
            names: &names,
            found: Vec::new(),
        };
        scan.visit_file(&ast);
        found.extend(scan.found);
    }
    found
}

fn listed(list: &[(&str, &str, &str)], found: &Found) -> bool {
    list.iter()
        .any(|(file, literal, _)| found.file == *file && found.literal == *literal)
}

#[test]
fn no_enforcer_name_literal_outside_the_registry_and_tests() {
    let found = name_literals();
    let unlisted: Vec<String> = found
        .iter()
        .filter(|f| !listed(NOT_ENFORCERS, f))
        .map(|f| format!("{}:{}: \"{}\"", f.file, f.line, f.literal))
        .collect();
    assert!(
        unlisted.is_empty(),
        "enforcer names chosen outside crates/sched/src/registry.rs; read the row instead (registry::find, its runs, feedback, threads, defaults):\n{}",
        unlisted.join("\n")
    );
    let stale: Vec<String> = NOT_ENFORCERS
        .iter()
        .filter(|(file, literal, _)| {
            !found
                .iter()
                .any(|f| f.file == *file && f.literal == *literal)
        })
        .map(|(file, literal, _)| format!("{file}: \"{literal}\""))
        .collect();
    assert!(
        stale.is_empty(),
        "gone, so remove from NOT_ENFORCERS in {}:\n{}",
        file!(),
        stale.join("\n")
    );
}

/// The scan itself: a literal in code counts, one in a macro's arguments counts,
/// one in test code does not.
#[test]
fn the_scan_sees_literals_in_code_and_macros_but_not_in_tests() {
    let text = r#"
        fn chosen(name: &str) -> bool { name == "wheel" }
        fn said() -> String { format!("{}", "fairnic") }
        #[cfg(test)]
        mod tests { fn t() { let _ = "tonic"; } }
        #[test]
        fn t() { let _ = "valve"; }
        fn other() -> &'static str { "wheels" }
    "#;
    let names = sched::registry::names();
    let mut scan = Scan {
        file: "x.rs",
        names: &names,
        found: Vec::new(),
    };
    scan.visit_file(&syn::parse_file(text).unwrap());
    let found: Vec<(usize, &str)> = scan
        .found
        .iter()
        .map(|f| (f.line, f.literal.as_str()))
        .collect();
    assert_eq!(found, vec![(2, "wheel"), (3, "fairnic")]);
}
