//! Helpers the lab's end-to-end tests share.

/// Whether namespace `name` is one this test process's runs would create: run ids
/// are `(pid % 1000) * 10 + k`, so other processes' lab runs (other test binaries,
/// other users of the machine) do not count.
fn ours(name: &str) -> bool {
    let base = (std::process::id() % 1000) * 10;
    (0..10).any(|k| name.starts_with(&format!("nsl{}-", base + k)))
}

/// Fails if a namespace of this process not in `before`, or any interface named
/// like the lab's (`nsl...`) in this namespace, is still there.
pub fn assert_nothing_left(before: &[String]) {
    let now = lab::lab_namespaces().expect("ip netns list");
    let new: Vec<&String> = now
        .iter()
        .filter(|n| ours(n) && !before.contains(n))
        .collect();
    assert!(new.is_empty(), "namespaces left behind: {new:?}");
    let links = std::process::Command::new("ip")
        .args(["-o", "link"])
        .output()
        .expect("ip link");
    let links = String::from_utf8_lossy(&links.stdout);
    for line in links.lines() {
        let name = line.split(':').nth(1).unwrap_or("").trim();
        assert!(
            !(name.starts_with("nsl")
                && (name.contains('t') || name.ends_with("up") || name.ends_with("br"))),
            "interface left behind: {line}"
        );
    }
}
