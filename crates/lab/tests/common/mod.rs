//! Helpers the lab's end-to-end tests share.

/// Fails if a namespace not in `before`, or any interface named like the lab's
/// (`nsl...`), is still there.
pub fn assert_nothing_left(before: &[String]) {
    let now = lab::lab_namespaces().expect("ip netns list");
    let new: Vec<&String> = now.iter().filter(|n| !before.contains(n)).collect();
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
