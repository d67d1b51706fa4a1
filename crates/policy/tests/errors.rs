//! One case per mistake policy.md asks to catch: each must point at the node that
//! holds it and say what is wrong.

use policy::parse_policy;

/// Parses `text`, expects an error at `line:column` whose message contains `fragment`.
#[track_caller]
fn fails(text: &str, line: u32, column: u32, fragment: &str) -> policy::PolicyError {
    let e = parse_policy(text, "p.yaml").expect_err("must be refused");
    let shown = e.to_string();
    assert_eq!((e.line, e.column), (line, column), "{shown}");
    assert!(
        shown.starts_with(&format!("p.yaml:{line}:{column}: error: ")),
        "{shown}"
    );
    assert!(shown.contains(fragment), "{shown:?} lacks {fragment:?}");
    assert!(!shown.contains('\n'), "{shown}");
    e
}

const LINK: &str = "link: {rate: 10Gbit}\n";

#[test]
fn unknown_key_names_the_allowed_ones() {
    let e = fails(
        "link: {rate: 10Gbit}\ntenants:\n  - name: a\n    wieght: 2\n",
        4,
        5,
        "unknown key `wieght`",
    );
    assert!(e.hint.unwrap().contains("weight"));
    fails(
        "link: {rate: 10Gbit, speed: 1}\ntenants: [{name: a}]\n",
        1,
        22,
        "unknown key `speed`",
    );
    fails("lnk: {rate: 10Gbit}\n", 1, 1, "unknown key `lnk`");
}

#[test]
fn duplicate_names() {
    fails(
        &format!("{LINK}tenants:\n  - name: a\n  - name: b\n  - name: a\n"),
        5,
        11,
        "duplicate tenant name `a`",
    );
    fails(
        &format!("{LINK}tenants:\n  - name: a\n    apps:\n      - name: x\n      - name: x\n"),
        6,
        15,
        "duplicate app name `x`",
    );
    fails(
        &format!("{LINK}tenants: []\nlink: {{rate: 1Gbit}}\n"),
        3,
        1,
        "duplicate key `link`",
    );
}

#[test]
fn bad_name() {
    fails(
        &format!("{LINK}tenants:\n  - name: Web\n"),
        3,
        11,
        "invalid tenant name `Web`",
    );
    fails(
        &format!("{LINK}tenants:\n  - name: a\n    apps: [{{name: 'a b'}}]\n"),
        4,
        19,
        "invalid app name",
    );
}

#[test]
fn weights() {
    fails(
        &format!("{LINK}tenants:\n  - name: a\n    weight: 0\n"),
        4,
        13,
        "weight must be at least 1",
    );
    fails(
        &format!("{LINK}tenants:\n  - name: a\n    weight: 1.5\n"),
        4,
        13,
        "weight must be an integer",
    );
    fails(
        &format!("{LINK}tenants:\n  - name: a\n    weight: -2\n"),
        4,
        13,
        "out of range",
    );
}

#[test]
fn min_above_max() {
    fails(
        &format!("{LINK}tenants:\n  - {{name: a, min_rate: 3Gbit, max_rate: 2Gbit}}\n"),
        3,
        25,
        "min_rate 3Gbit is above max_rate 2Gbit",
    );
}

#[test]
fn guarantees_exceed_the_link() {
    fails(
        &format!(
            "{LINK}tenants:\n  - {{name: a, min_rate: 6Gbit}}\n  - {{name: b, min_rate: 5Gbit}}\n"
        ),
        4,
        25,
        "above link.rate 10Gbit",
    );
}

#[test]
fn ingress_envelopes() {
    // The link bounds what enters the host too (hosts.md).
    let e = fails(
        &format!(
            "{LINK}tenants:\n  - {{name: a, ingress: {{min_rate: 6Gbit}}}}\n  - {{name: b, ingress: {{min_rate: 5Gbit}}}}\n"
        ),
        4,
        35,
        "the tenants' ingress min_rate add up to 11Gbit, above link.rate 10Gbit",
    );
    assert!(e.hint.unwrap().contains("enters the host"));
    // Egress guarantees alone are not ingress ones, and the reverse.
    parse_policy(
        &format!(
            "{LINK}tenants:\n  - {{name: a, min_rate: 6Gbit, ingress: {{min_rate: 4Gbit}}}}\n  - {{name: b, min_rate: 4Gbit, ingress: {{min_rate: 6Gbit, max_rate: 20Gbit}}}}\n"
        ),
        "p.yaml",
    )
    .unwrap();
    fails(
        &format!("{LINK}tenants:\n  - {{name: a, ingress: {{rate: 1Gbit}}}}\n"),
        3,
        25,
        "unknown key `rate` in ingress",
    );
    fails(
        &format!("{LINK}tenants:\n  - {{name: a, completions: fifo}}\n"),
        3,
        28,
        "unknown completions `fifo`",
    );
}

#[test]
fn app_guarantees_exceed_their_bound() {
    let apps = "    apps:\n      - {name: x, min_rate: 1Gbit, match: {ports: [1]}}\n      - {name: y, min_rate: 2Gbit}\n";
    fails(
        &format!("{LINK}tenants:\n  - name: a\n    min_rate: 2Gbit\n{apps}"),
        7,
        29,
        "above the tenant's min_rate 2Gbit",
    );
    fails(
        &format!("{LINK}tenants:\n  - name: a\n    max_rate: 2.5Gbit\n{apps}"),
        7,
        29,
        "above the tenant's max_rate 2.5Gbit",
    );
    fails(
        "link: {rate: 2Gbit}\ntenants:\n  - name: a\n    apps:\n      - {name: x, min_rate: 1Gbit, match: {ports: [1]}}\n      - {name: y, min_rate: 2Gbit}\n",
        6,
        29,
        "above link.rate 2Gbit",
    );
}

#[test]
fn app_cap_above_tenant_cap_is_allowed() {
    let p = parse_policy(
        &format!("{LINK}tenants:\n  - name: a\n    max_rate: 1Gbit\n    apps: [{{name: x, max_rate: 5Gbit}}]\n"),
        "p.yaml",
    )
    .unwrap();
    assert_eq!(p.apps[0].max_rate_bps, Some(5_000_000_000));
}

#[test]
fn bad_cidr_and_port() {
    fails(
        &format!("{LINK}tenants:\n  - {{name: a, match: {{src: 10.0.1/24}}}}\n"),
        3,
        28,
        "not a CIDR",
    );
    fails(
        &format!("{LINK}tenants:\n  - {{name: a, match: {{src: 10.0.1.0/33}}}}\n"),
        3,
        28,
        "prefix length",
    );
    fails(
        &format!(
            "{LINK}tenants:\n  - name: a\n    apps: [{{name: x, match: {{ports: [80, 70000]}}}}]\n"
        ),
        4,
        42,
        "invalid port",
    );
    fails(
        &format!("{LINK}tenants:\n  - name: a\n    apps: [{{name: x, match: {{ports: [0]}}}}]\n"),
        4,
        38,
        "invalid port",
    );
}

#[test]
fn units() {
    fails(
        "link: {rate: 10}\ntenants: [{name: a}]\n",
        1,
        14,
        "has no unit",
    );
    let e = fails(
        "link: {rate: 10Gbps}\ntenants: [{name: a}]\n",
        1,
        14,
        "`Gbps` is refused",
    );
    assert!(e.hint.unwrap().contains("factor-of-8"));
    fails(
        "link: {rate: 10Gb}\ntenants: [{name: a}]\n",
        1,
        14,
        "unknown rate unit `Gb`",
    );
    fails(
        "link: {rate: 10Gbit}\nbuffer: 16\ntenants: [{name: a}]\n",
        2,
        9,
        "has no unit",
    );
    fails(
        "link: {rate: 10Gbit, mtu: 1500}\ntenants: [{name: a}]\n",
        1,
        27,
        "has no unit",
    );
}

#[test]
fn core_index_too_high() {
    fails(
        &format!("{LINK}tenants:\n  - {{name: a, cores: [0, 4096]}}\n"),
        3,
        26,
        "out of range 0..=4095",
    );
    fails(
        &format!("{LINK}tenants:\n  - {{name: a, cores: [1, 1]}}\n"),
        3,
        26,
        "listed twice",
    );
    fails(
        &format!("{LINK}tenants:\n  - {{name: a, cores: []}}\n"),
        3,
        22,
        "must not be empty",
    );
}

#[test]
fn empty_file() {
    fails("", 1, 1, "empty file");
    fails("\n  # nothing here\n", 1, 1, "empty file");
}

#[test]
fn not_yaml() {
    fails("link: {rate: 10Gbit\ntenants: [", 2, 8, "not valid YAML");
    fails("a: b: c\n", 1, 5, "not valid YAML");
    fails("just text\n", 1, 1, "the policy must be a mapping");
}

#[test]
fn missing_required_keys() {
    fails(
        "tenants: [{name: a}]\n",
        1,
        1,
        "missing required key `link`",
    );
    fails(
        "link: {queues: 4}\ntenants: [{name: a}]\n",
        1,
        7,
        "missing required key `rate` in link",
    );
    fails(
        &format!("{LINK}tenants:\n  - weight: 2\n"),
        3,
        5,
        "missing required key `name` in tenant",
    );
    fails(LINK, 1, 1, "missing required key `tenants`");
    fails(
        &format!("{LINK}tenants: []\n"),
        2,
        10,
        "at least one tenant",
    );
}

#[test]
fn link_ranges() {
    fails(
        "link: {rate: 10Gbit, queues: 0}\ntenants: [{name: a}]\n",
        1,
        30,
        "out of range 1..=65535",
    );
    fails(
        "link: {rate: 10Gbit, mtu: 64B}\ntenants: [{name: a}]\n",
        1,
        27,
        "out of range 68B..=65535B",
    );
    fails(
        "link: {rate: 10Gbit, mtu: 70KB}\ntenants: [{name: a}]\n",
        1,
        27,
        "out of range",
    );
    fails(
        "link: {rate: 0Gbit}\ntenants: [{name: a}]\n",
        1,
        14,
        "above 0",
    );
}

#[test]
fn priority_proto_split() {
    fails(
        &format!("{LINK}tenants:\n  - {{name: a, priority: 8}}\n"),
        3,
        25,
        "priority 8 is out of range 0..=7",
    );
    fails(
        &format!("{LINK}tenants:\n  - name: a\n    apps: [{{name: x, match: {{proto: sctp}}}}]\n"),
        4,
        37,
        "unknown proto `sctp`",
    );
    fails(
        &format!(
            "{LINK}tenants:\n  - name: a\n    apps: [{{name: x, split: {{by: source, max_rate: 1Gbit}}}}]\n"
        ),
        4,
        34,
        "unknown split.by `source`",
    );
    fails(
        &format!("{LINK}tenants:\n  - name: a\n    apps: [{{name: x, split: {{by: flow}}}}]\n"),
        4,
        29,
        "missing required key `max_rate` in split",
    );
}

#[test]
fn completions_and_napi_tx() {
    fails(
        &format!("{LINK}tenants:\n  - {{name: a, completions: fifo}}\n"),
        3,
        28,
        "unknown completions `fifo`",
    );
    let e = fails(
        &format!("{LINK}tenants:\n  - {{name: a, napi_tx: yes}}\n"),
        3,
        24,
        "napi_tx must be true or false, found a string",
    );
    assert!(e.hint.unwrap().contains("napi_tx: true"));
}

#[test]
fn overlapping_source_prefixes() {
    fails(
        &format!(
            "{LINK}tenants:\n  - {{name: a, match: {{src: 10.92.0.0/16}}}}\n  - {{name: b, match: {{src: 10.92.1.0/24}}}}\n"
        ),
        4,
        28,
        "overlaps tenant `a`'s",
    );
    fails(
        &format!(
            "{LINK}tenants:\n  - {{name: a, match: {{src: 2001:db8:1::/48}}}}\n  - {{name: b, match: {{src: 2001:db8::/32}}}}\n"
        ),
        4,
        28,
        "overlaps tenant `a`'s",
    );
    let disjoint = format!(
        "{LINK}tenants:\n  - {{name: a, match: {{src: 10.92.0.0/24}}}}\n  - {{name: b, match: {{src: 10.92.1.0/24}}}}\n  - {{name: c, match: {{src: 2001:db8::/32}}}}\n"
    );
    assert!(parse_policy(&disjoint, "p.yaml").is_ok());
}

#[test]
fn a_guarantee_sum_is_reported_whole() {
    // Blamed where the running sum first passes the link, but the message gives
    // what all the guarantees add up to, not the running sum at that node.
    fails(
        "link: {rate: 500Mbit}\ntenants:\n  - {name: a, min_rate: 300Mbit}\n  - {name: b, min_rate: 300Mbit}\n  - {name: c, min_rate: 400Mbit}\n",
        4,
        25,
        "the tenants' min_rate add up to 1Gbit, above link.rate 500Mbit",
    );
    fails(
        "link: {rate: 1Gbit}\ntenants:\n  - name: a\n    min_rate: 100Mbit\n    apps:\n      - {name: x, min_rate: 80Mbit, match: {proto: udp}}\n      - {name: y, min_rate: 80Mbit, match: {proto: tcp}}\n      - {name: z, min_rate: 40Mbit}\n",
        7,
        29,
        "the apps' min_rate of tenant `a` add up to 200Mbit, above the tenant's min_rate 100Mbit",
    );
}
