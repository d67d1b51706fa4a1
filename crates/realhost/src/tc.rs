//! Every `tc` the crate runs, and the reading of what it prints.
//!
//! Qdiscs are read as JSON (`tc -j qdisc show`). Classes and filters are read as
//! text: iproute2 6.1 prints HTB classes as text even under `-j`, and u32 filters'
//! JSON repeats its `match` key, which no JSON reader keeps. The text is the one the
//! lab already reads for drops.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::Error;

/// Runs `tc ARGS`; its stdout, or what it said on stderr.
pub fn run(args: &[&str]) -> Result<String, String> {
    let output = Command::new("tc")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run tc: {e} (install iproute2)"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "`tc {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Runs `commands` as one `tc -batch`, which stops at the first command the kernel
/// refuses and fails (it names the line).
pub fn batch(commands: &str) -> Result<(), String> {
    let mut child = Command::new("tc")
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run tc: {e} (install iproute2)"))?;
    let written = child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(commands.as_bytes());
    let output = child
        .wait_with_output()
        .map_err(|e| format!("tc -batch: {e}"))?;
    if output.status.success() && written.is_ok() {
        Ok(())
    } else {
        Err(format!(
            "tc -batch failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// `dev`'s qdiscs as `tc -j qdisc show` gives them, less each one's `refcnt` (a
/// count of references the kernel holds, which changes with what hangs below it).
/// A device this namespace lacks is bad input.
pub fn qdiscs(dev: &str) -> Result<Vec<serde_json::Value>, Error> {
    let shown = run(&["-j", "qdisc", "show", "dev", dev]).map_err(|e| {
        if e.contains("Cannot find device") {
            Error::Input(format!(
                "--dev {dev}: no such device in this network namespace (hint: `ip link` lists them)"
            ))
        } else {
            Error::Failed(e)
        }
    })?;
    let mut qdiscs: Vec<serde_json::Value> = serde_json::from_str(&shown)
        .map_err(|e| Error::Failed(format!("tc -j qdisc show dev {dev}: {e}")))?;
    for qdisc in &mut qdiscs {
        if let Some(fields) = qdisc.as_object_mut() {
            fields.remove("refcnt");
        }
    }
    Ok(qdiscs)
}

/// The counters of the qdisc under each Tx queue of an `mq` root (`1:N`, N from
/// 1): as `tc -s -j qdisc show` gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// The Tx queue, from 0.
    pub queue: usize,
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    /// Packets waiting.
    pub qlen: u64,
}

/// `dev`'s per-Tx-queue qdisc counters under its `mq` root `1:`, by queue.
pub fn queue_stats(dev: &str) -> Result<Vec<QueueStats>, Error> {
    let shown = run(&["-s", "-j", "qdisc", "show", "dev", dev]).map_err(Error::Failed)?;
    let qdiscs: Vec<serde_json::Value> = serde_json::from_str(&shown)
        .map_err(|e| Error::Failed(format!("tc -s -j qdisc show dev {dev}: {e}")))?;
    Ok(parse_queue_stats(&qdiscs))
}

fn parse_queue_stats(qdiscs: &[serde_json::Value]) -> Vec<QueueStats> {
    let mut stats: Vec<QueueStats> = qdiscs
        .iter()
        .filter_map(|q| {
            let minor = q["parent"].as_str()?.strip_prefix("1:")?;
            let queue = usize::from_str_radix(minor, 16).ok()?.checked_sub(1)?;
            let counter = |key: &str| q[key].as_u64().unwrap_or(0);
            Some(QueueStats {
                queue,
                bytes: counter("bytes"),
                packets: counter("packets"),
                drops: counter("drops"),
                qlen: counter("qlen"),
            })
        })
        .collect();
    stats.sort_by_key(|s| s.queue);
    stats
}

/// Whether `qdiscs` are the kernel's own choice for the device's egress: every qdisc
/// but ingress and clsact has handle `0:`, which only the kernel gives (a qdisc
/// anyone adds gets a handle of its own, `8001:` if none is asked for), so deleting
/// the root qdisc brings them back.
pub fn is_kernel_default(qdiscs: &[serde_json::Value]) -> bool {
    qdiscs
        .iter()
        .all(|q| matches!(q["kind"].as_str(), Some("ingress" | "clsact")) || q["handle"] == "0:")
}

/// A class as `tc -d -s class show` prints it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Class {
    /// `1:4`.
    pub id: String,
    /// Its parent class, `None` at the root.
    pub parent: Option<String>,
    /// The handle of the qdisc below a leaf.
    pub leaf: Option<String>,
    /// Printed for leaves only.
    pub prio: Option<u32>,
    pub quantum: Option<u32>,
    /// As printed: (bits per second, the unit it was printed in).
    pub rate: Option<(u64, u64)>,
    pub ceil: Option<(u64, u64)>,
    pub sent_bytes: u64,
    pub dropped: u64,
    /// Times HTB found the class over its ceil with packets to send.
    pub overlimits: u64,
    pub backlog_packets: u64,
}

/// A `tc` rate: its bits per second, and the unit it is written in (`333333Kbit`:
/// 333333000 and 1000; `tc` prints a rate in the largest unit that divides it, or
/// below 1000 of one, truncating).
pub fn parse_rate(text: &str) -> Option<(u64, u64)> {
    let lower = text.to_ascii_lowercase();
    let number = lower.strip_suffix("bit")?;
    let (number, unit) = [
        ("k", 1_000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
        ("t", 1_000_000_000_000),
    ]
    .into_iter()
    .find_map(|(suffix, unit)| number.strip_suffix(suffix).map(|n| (n, unit)))
    .unwrap_or((number, 1));
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value >= 0.0).then(|| ((value * unit as f64).round() as u64, unit))
}

/// The classes of `tc -d -s class show dev DEV`'s output, in its order.
pub fn parse_classes(text: &str) -> Vec<Class> {
    let mut classes: Vec<Class> = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first() {
            Some(&"class") => {
                let mut class = Class {
                    id: words.get(2).unwrap_or(&"").to_string(),
                    ..Class::default()
                };
                let value = |key: &str| after(&words, key);
                class.parent = value("parent").map(str::to_string);
                class.leaf = value("leaf").map(str::to_string);
                class.prio = value("prio").and_then(|p| p.parse().ok());
                class.quantum = value("quantum").and_then(|q| q.parse().ok());
                class.rate = value("rate").and_then(parse_rate);
                class.ceil = value("ceil").and_then(parse_rate);
                classes.push(class);
            }
            Some(&"Sent") => {
                if let Some(class) = classes.last_mut() {
                    class.sent_bytes = words.get(1).and_then(|b| b.parse().ok()).unwrap_or(0);
                    let counter = |key: &str| {
                        line.split_once(key)
                            .and_then(|(_, n)| n.split(|c: char| !c.is_ascii_digit()).next())
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(0)
                    };
                    class.dropped = counter("(dropped ");
                    class.overlimits = counter("overlimits ");
                }
            }
            Some(&"backlog") => {
                if let Some(class) = classes.last_mut() {
                    class.backlog_packets = words
                        .get(2)
                        .and_then(|p| p.strip_suffix('p'))
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(0);
                }
            }
            _ => {}
        }
    }
    classes
}

/// `dev`'s classes, details and counters.
pub fn classes(dev: &str) -> Result<Vec<Class>, String> {
    run(&["-d", "-s", "class", "show", "dev", dev]).map(|text| parse_classes(&text))
}

/// A u32 filter with a handle of its own: its protocol, prio, node (the `T` of
/// `::T`, hexadecimal) and class.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Filter {
    pub protocol: String,
    pub prio: u32,
    pub node: String,
    pub flowid: String,
}

/// The filters of `tc filter show dev DEV`'s output that send to a class (the
/// The word after `key` in a line of `tc`'s output or input, which is how `tc`
/// writes a parameter's value (`rate 100Mbit`, `classid 1:10`).
pub(crate) fn after<'a>(words: &[&'a str], key: &str) -> Option<&'a str> {
    words
        .iter()
        .position(|w| *w == key)
        .and_then(|i| words.get(i + 1))
        .copied()
}

/// hash tables u32 makes for itself are left out), sorted.
pub fn parse_filters(text: &str) -> Vec<Filter> {
    let mut filters: Vec<Filter> = text
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let value = |key: &str| after(&words, key);
            Some(Filter {
                protocol: value("protocol")?.to_string(),
                prio: value("pref")?.parse().ok()?,
                node: value("fh")?.rsplit_once("::")?.1.to_string(),
                // `*flowid` where the class is under the filter's own qdisc.
                flowid: value("flowid").or_else(|| value("*flowid"))?.to_string(),
            })
        })
        .collect();
    filters.sort();
    filters
}

/// `dev`'s filters at its root qdisc `1:`.
pub fn filters(dev: &str) -> Result<Vec<Filter>, String> {
    run(&["filter", "show", "dev", dev, "parent", "1:"]).map(|text| parse_filters(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_read_in_the_unit_printed() {
        assert_eq!(parse_rate("70Mbit"), Some((70_000_000, 1_000_000)));
        assert_eq!(parse_rate("333333Kbit"), Some((333_333_000, 1_000)));
        assert_eq!(parse_rate("333.333333mbit"), Some((333_333_333, 1_000_000)));
        assert_eq!(parse_rate("8kbit"), Some((8_000, 1_000)));
        assert_eq!(parse_rate("999bit"), Some((999, 1)));
        assert_eq!(parse_rate("fast"), None);
    }

    #[test]
    fn classes_and_their_counters_are_read() {
        let text = "class htb 1:1 root rate 100Mbit ceil 100Mbit linklayer ethernet burst 1600b/1 mpu 0b cburst 1600b/1 mpu 0b level 7 \n Sent 70 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\nclass htb 1:5 parent 1:3 leaf 5: prio 1 quantum 1514 rate 15Mbit ceil 30Mbit linklayer ethernet burst 1597b/1 mpu 0b cburst 1593b/1 mpu 0b level 0 \n Sent 123456 bytes 90 pkt (dropped 7, overlimits 3 requeues 0) \n backlog 3028b 2p requeues 0\n";
        let classes = parse_classes(text);
        assert_eq!(classes.len(), 2);
        assert_eq!(classes[0].id, "1:1");
        assert_eq!(classes[0].parent, None);
        assert_eq!(classes[0].sent_bytes, 70);
        let leaf = &classes[1];
        assert_eq!(leaf.parent.as_deref(), Some("1:3"));
        assert_eq!(leaf.leaf.as_deref(), Some("5:"));
        assert_eq!((leaf.prio, leaf.quantum), (Some(1), Some(1514)));
        assert_eq!(leaf.rate, Some((15_000_000, 1_000_000)));
        assert_eq!(leaf.ceil, Some((30_000_000, 1_000_000)));
        assert_eq!(
            (
                leaf.sent_bytes,
                leaf.dropped,
                leaf.overlimits,
                leaf.backlog_packets
            ),
            (123456, 7, 3, 2)
        );
    }

    #[test]
    fn only_filters_with_a_class_are_read() {
        let text = "filter protocol ip pref 1 u32 chain 0 \nfilter protocol ip pref 1 u32 chain 0 fh 800: ht divisor 1 \nfilter protocol ip pref 1 u32 chain 0 fh 800::1 order 1 key ht 800 bkt 0 *flowid 1:4 not_in_hw \n  match 0a090001/ffffffff at 12\nfilter protocol ipv6 pref 3 u32 chain 0 fh 802::a order 10 key ht 802 bkt 0 flowid 1:6 not_in_hw \n";
        assert_eq!(
            parse_filters(text),
            vec![
                Filter {
                    protocol: "ip".into(),
                    prio: 1,
                    node: "1".into(),
                    flowid: "1:4".into()
                },
                Filter {
                    protocol: "ipv6".into(),
                    prio: 3,
                    node: "a".into(),
                    flowid: "1:6".into()
                },
            ]
        );
    }

    #[test]
    fn per_queue_counters_are_read_under_mq() {
        let qdiscs: Vec<serde_json::Value> = serde_json::from_str(
            r#"[{"kind":"mq","handle":"1:","root":true,"bytes":9,"packets":1,"drops":0,"qlen":0},{"kind":"pfifo_fast","handle":"b:","parent":"1:a","bytes":1514,"packets":1,"drops":2,"qlen":3},{"kind":"pfifo_fast","handle":"2:","parent":"1:1","bytes":70,"packets":1,"drops":0,"qlen":0}]"#,
        )
        .unwrap();
        let stats = parse_queue_stats(&qdiscs);
        assert_eq!(
            stats,
            vec![
                QueueStats {
                    queue: 0,
                    bytes: 70,
                    packets: 1,
                    drops: 0,
                    qlen: 0
                },
                QueueStats {
                    queue: 9,
                    bytes: 1514,
                    packets: 1,
                    drops: 2,
                    qlen: 3
                },
            ]
        );
    }

    #[test]
    fn only_the_kernels_own_qdiscs_are_default() {
        let default: Vec<serde_json::Value> = serde_json::from_str(
            r#"[{"kind":"mq","handle":"0:","root":true},{"kind":"pfifo_fast","handle":"0:","parent":":1"},{"kind":"clsact","handle":"ffff:","parent":"ffff:fff1"}]"#,
        )
        .unwrap();
        assert!(is_kernel_default(&default));
        let configured: Vec<serde_json::Value> =
            serde_json::from_str(r#"[{"kind":"fq","handle":"8001:","root":true}]"#).unwrap();
        assert!(!is_kernel_default(&configured));
    }
}
