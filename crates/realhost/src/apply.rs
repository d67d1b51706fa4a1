//! `nicsched apply`: a mechanism's configuration on a device in one transaction,
//! read back, and `--remove`.
//!
//! `tc -batch` is not a transaction: it stops at the first command the kernel
//! refuses and leaves the ones before it in place (`-force` only goes on past it).
//! So the transaction is made here: the device's prior state is recorded first
//! ([`crate::record`]), and any failure (of the batch, or of the read-back) is
//! undone by deleting the root qdisc, which takes every class, leaf qdisc and filter
//! below it, and putting back what was there before: the kernel's default qdisc, or
//! the tree of the apply this one replaces.

use serde::Serialize;

use crate::record::{self, Record};
use crate::{Error, Mechanism, tc};

/// What `apply` did.
#[derive(Clone, Debug, Serialize)]
pub struct Applied {
    pub dev: String,
    pub mechanism: Mechanism,
    /// HTB classes read back and found as the policy asks.
    pub classes: usize,
    /// u32 filters read back and found as the policy asks.
    pub filters: usize,
    /// Whether this apply replaced an earlier one on the device.
    pub replaced: bool,
    /// Where the device's prior state is recorded.
    pub record: String,
}

/// What `apply --remove` did.
#[derive(Clone, Debug, Serialize)]
pub struct Removed {
    pub dev: String,
    pub mechanism: Mechanism,
    /// The qdiscs the device has again, as recorded before the first apply.
    pub qdiscs: Vec<serde_json::Value>,
}

/// Applies `commands` (the `tc -batch` of [`lab::tc_commands`] for `dev`) from the
/// policy file `policy`, replacing nicsched's last apply on `dev` if there was one,
/// and reads the result back. On any failure `dev` is left as it was before.
pub fn apply(dev: &str, policy: &str, commands: &str) -> Result<Applied, Error> {
    let mechanism = Mechanism::Htb;
    let current = tc::qdiscs(dev)?;
    let previous = record::read(dev)?;
    let prior_qdiscs = match &previous {
        Some(previous) => previous.prior_qdiscs.clone(),
        None if tc::is_kernel_default(&current) => current,
        None => {
            return Err(Error::Input(format!(
                "--dev {dev}: its qdiscs are not the kernel's default ({}), and nicsched restores only that on --remove (hint: put them back with `tc qdisc del dev {dev} root`, or apply on another device)",
                kinds(&current)
            )));
        }
    };
    record::write(&Record::new(dev, mechanism, policy, prior_qdiscs, commands))?;
    let replaced = previous.is_some();
    let outcome = configure(dev, commands).and_then(|()| verify(dev, commands));
    match outcome {
        Ok((classes, filters)) => Ok(Applied {
            dev: dev.to_string(),
            mechanism,
            classes,
            filters,
            replaced,
            record: record::path(dev).display().to_string(),
        }),
        Err(failed) => {
            let restored = roll_back(dev, previous.as_ref());
            Err(Error::Failed(match restored {
                Ok(what) => format!("{dev}: {failed}; rolled back: {dev} has {what} again"),
                Err(e) => format!(
                    "{dev}: {failed}; and rolling back failed too: {e} (its prior state is in {}: `nicsched apply --remove --dev {dev}` tries again)",
                    record::path(dev).display()
                ),
            }))
        }
    }
}

/// The device without nicsched's root qdisc, then `commands`.
fn configure(dev: &str, commands: &str) -> Result<(), String> {
    delete_root(dev)?;
    tc::batch(&with_fault(commands))
}

/// Deletes `dev`'s root qdisc; the kernel's default one, which cannot be deleted,
/// is fine.
fn delete_root(dev: &str) -> Result<(), String> {
    match tc::run(&["qdisc", "del", "dev", dev, "root"]) {
        Err(e) if !e.contains("handle of zero") => Err(e),
        _ => Ok(()),
    }
}

/// Puts `dev` back as it was before this apply: the last apply's tree, or the
/// kernel's default qdisc and no record. What it put back, in words.
fn roll_back(dev: &str, previous: Option<&Record>) -> Result<String, String> {
    delete_root(dev)?;
    match previous {
        Some(previous) => {
            tc::batch(&previous.commands)?;
            record::write(previous).map_err(|e| e.to_string())?;
            Ok(format!("the tree of its last apply ({})", previous.policy))
        }
        None => {
            record::delete(dev).map_err(|e| e.to_string())?;
            Ok(format!(
                "the kernel's default qdisc ({})",
                tc::qdiscs(dev)
                    .map(|q| kinds(&q))
                    .unwrap_or_else(|e| e.to_string())
            ))
        }
    }
}

/// `commands` with a command the kernel refuses after the first N of them, where
/// a test asks for it with `NICSCHED_FAULT=apply-fails-after=N`.
#[cfg(feature = "faults")]
fn with_fault(commands: &str) -> String {
    let Some(n) = std::env::var("NICSCHED_FAULT")
        .ok()
        .and_then(|v| v.strip_prefix("apply-fails-after=")?.parse::<usize>().ok())
    else {
        return commands.to_string();
    };
    let mut out = String::new();
    let mut given = 0;
    for line in commands.lines() {
        if given == n {
            out.push_str("class add dev lo parent 1:ffff classid 1:ffff htb rate 1mbit\n");
        }
        out.push_str(line);
        out.push('\n');
        given += usize::from(!line.starts_with('#'));
    }
    out
}

#[cfg(not(feature = "faults"))]
fn with_fault(commands: &str) -> String {
    commands.to_string()
}

/// The kinds and handles of `qdiscs`, as `tc qdisc show` names them.
fn kinds(qdiscs: &[serde_json::Value]) -> String {
    qdiscs
        .iter()
        .map(|q| {
            format!(
                "{} {}",
                q["kind"].as_str().unwrap_or("?"),
                q["handle"].as_str().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// An HTB class `commands` add.
#[derive(Debug, PartialEq)]
struct ExpectedClass {
    id: String,
    /// `None` under the qdisc itself.
    parent: Option<String>,
    rate_bps: u64,
    ceil_bps: u64,
    prio: u32,
    quantum: Option<u32>,
    leaf: Option<String>,
}

/// The classes and filters `commands` add, as `tc` reads them back.
fn expected(commands: &str) -> (Vec<ExpectedClass>, Vec<tc::Filter>) {
    let mut classes: Vec<ExpectedClass> = Vec::new();
    let mut filters = Vec::new();
    for line in commands.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let value = |key: &str| tc::after(&words, key);
        let rate = |key: &str| {
            value(key)
                .and_then(tc::parse_rate)
                .map_or(0, |(bps, _)| bps)
        };
        match (words.first(), words.get(1)) {
            (Some(&"class"), Some(&"add")) => classes.push(ExpectedClass {
                id: value("classid").unwrap_or_default().to_string(),
                parent: value("parent").filter(|p| *p != "1:").map(str::to_string),
                rate_bps: rate("rate"),
                ceil_bps: rate("ceil"),
                prio: value("prio").and_then(|p| p.parse().ok()).unwrap_or(0),
                quantum: value("quantum").and_then(|q| q.parse().ok()),
                leaf: None,
            }),
            (Some(&"qdisc"), Some(&"add")) => {
                if let (Some(parent), Some(handle)) = (value("parent"), value("handle"))
                    && let Some(class) = classes.iter_mut().find(|c| c.id == parent)
                {
                    class.leaf = Some(handle.to_string());
                }
            }
            (Some(&"filter"), Some(&"add")) => filters.push(tc::Filter {
                protocol: value("protocol").unwrap_or_default().to_string(),
                prio: value("prio").and_then(|p| p.parse().ok()).unwrap_or(0),
                node: value("handle")
                    .and_then(|h| h.rsplit_once("::"))
                    .map_or("", |(_, node)| node)
                    .to_string(),
                flowid: value("flowid").unwrap_or_default().to_string(),
            }),
            _ => {}
        }
    }
    filters.sort();
    (classes, filters)
}

/// Whether a rate `tc` printed as `shown` is `bps`: `tc` keeps bytes per second
/// (up to 8 bits less) and prints them truncated to the unit it prints in.
fn same_rate(bps: u64, shown: Option<(u64, u64)>) -> bool {
    shown.is_some_and(|(shown, unit)| shown <= bps && bps < shown + unit + 8)
}

/// Reads `dev`'s classes and filters back and holds them to `commands`: every
/// class with its parent, rate and ceil (and a leaf's prio, quantum and qdisc),
/// every filter with its class, and nothing else. The numbers checked, or what
/// differs.
fn verify(dev: &str, commands: &str) -> Result<(usize, usize), String> {
    let (want_classes, want_filters) = expected(commands);
    let classes = tc::classes(dev)?;
    for want in &want_classes {
        let Some(got) = classes.iter().find(|c| c.id == want.id) else {
            return Err(format!("read back: class {} is missing", want.id));
        };
        let leaf_ok = want.leaf.is_none()
            || (got.leaf == want.leaf
                && got.prio == Some(want.prio)
                && got.quantum == want.quantum);
        if got.parent != want.parent
            || !same_rate(want.rate_bps, got.rate)
            || !same_rate(want.ceil_bps, got.ceil)
            || !leaf_ok
        {
            return Err(format!(
                "read back: class {} is {got:?}, and the policy asks for {want:?}",
                want.id
            ));
        }
    }
    if classes.len() != want_classes.len() {
        return Err(format!(
            "read back: {} classes, and the policy asks for {}",
            classes.len(),
            want_classes.len()
        ));
    }
    let filters = tc::filters(dev)?;
    if filters != want_filters {
        let missing = want_filters.iter().find(|f| !filters.contains(f));
        let extra = filters.iter().find(|f| !want_filters.contains(f));
        return Err(format!(
            "read back: {} filters where the policy asks for {} (first missing: {missing:?}; first not asked for: {extra:?})",
            filters.len(),
            want_filters.len()
        ));
    }
    Ok((want_classes.len(), want_filters.len()))
}

/// `nicsched apply --remove --dev DEV`: the qdiscs recorded before the first apply
/// put back, checked, and the record deleted. A device nicsched has not configured
/// is bad input.
pub fn remove(dev: &str) -> Result<Removed, Error> {
    let Some(record) = record::read(dev)? else {
        return Err(not_configured(dev));
    };
    delete_root(dev).map_err(|e| Error::Failed(format!("{dev}: {e}")))?;
    let qdiscs = tc::qdiscs(dev)?;
    if qdiscs != record.prior_qdiscs {
        return Err(Error::Failed(format!(
            "{dev}: after deleting nicsched's root qdisc the device has {}, not the {} recorded in {} (kept, for another try)",
            kinds(&qdiscs),
            kinds(&record.prior_qdiscs),
            record::path(dev).display()
        )));
    }
    record::delete(dev)?;
    Ok(Removed {
        dev: dev.to_string(),
        mechanism: record.mechanism,
        qdiscs,
    })
}

/// The refusal of a device without a record.
pub(crate) fn not_configured(dev: &str) -> Error {
    Error::Input(format!(
        "--dev {dev}: nicsched has not configured it (no {}) (hint: `nicsched apply POLICY --dev {dev} --mechanism htb` first)",
        record::path(dev).display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_say_what_to_read_back() {
        let commands = "# header\nqdisc add dev d root handle 1: htb default fffe\nclass add dev d parent 1: classid 1:1 htb rate 100mbit ceil 100mbit quantum 1514\nclass add dev d parent 1:1 classid 1:4 htb rate 333.333333mbit ceil 1gbit prio 1 quantum 6056\nqdisc add dev d parent 1:4 handle 4: pfifo limit 1000\nfilter add dev d parent 1: protocol ip prio 2 handle ::a u32 match ip src 10.0.0.1/32 flowid 1:4\n";
        let (classes, filters) = expected(commands);
        assert_eq!(classes.len(), 2);
        assert_eq!(classes[0].parent, None);
        assert_eq!(
            classes[1],
            ExpectedClass {
                id: "1:4".into(),
                parent: Some("1:1".into()),
                rate_bps: 333_333_333,
                ceil_bps: 1_000_000_000,
                prio: 1,
                quantum: Some(6056),
                leaf: Some("4:".into()),
            }
        );
        assert_eq!(
            filters,
            vec![tc::Filter {
                protocol: "ip".into(),
                prio: 2,
                node: "a".into(),
                flowid: "1:4".into()
            }]
        );
    }

    #[test]
    fn a_rate_is_the_one_tc_prints_truncated() {
        // 333.333333mbit is kept as 41666666 B/s and printed 333333Kbit.
        assert!(same_rate(333_333_333, tc::parse_rate("333333Kbit")));
        assert!(same_rate(70_000_000, tc::parse_rate("70Mbit")));
        assert!(!same_rate(70_000_000, tc::parse_rate("71Mbit")));
        assert!(!same_rate(70_000_000, tc::parse_rate("69998Kbit")));
        assert!(!same_rate(70_000_000, None));
    }
}
