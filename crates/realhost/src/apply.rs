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

use std::path::{Path, PathBuf};

use policy::Policy;
use sched::multiqueue::{Pool, prioritised_apps, tonic_pools};
use serde::Serialize;

use crate::bpf::sys::{Link, Map, tcx_egress_programs};
use crate::bpf::tonic::{self, Tonic};
use crate::device::{self, Xps};
use crate::record::{self, Prior, Record};
use crate::{Error, Mechanism, tc};

/// What `apply` did.
#[derive(Clone, Debug, Serialize)]
pub struct Applied {
    pub dev: String,
    pub mechanism: Mechanism,
    /// HTB classes read back and found as the policy asks (0 for tonic).
    pub classes: usize,
    /// u32 filters read back and found as the policy asks (0 for tonic).
    pub filters: usize,
    /// Whether this apply replaced an earlier one on the device.
    pub replaced: bool,
    /// Where the device's prior state is recorded.
    pub record: String,
    /// tonic: what was read back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tonic: Option<TonicApplied>,
}

/// What a tonic apply put on the device, read back.
#[derive(Clone, Debug, Serialize)]
pub struct TonicApplied {
    pub tx_queues: u16,
    /// Each tenant's pool, in the policy's order.
    pub pools: Vec<PoolLine>,
    /// Tx queues whose XPS masks were cleared (0 where the kernel has none).
    pub xps_cleared: usize,
    /// Where the program's link and counters are pinned.
    pub pins: String,
    /// Whether `apply` mounted the BPF filesystem at /sys/fs/bpf.
    pub mounted_bpffs: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct PoolLine {
    pub tenant: String,
    pub first_queue: u16,
    pub last_queue: u16,
}

/// What `apply --remove` did.
#[derive(Clone, Debug, Serialize)]
pub struct Removed {
    pub dev: String,
    pub mechanism: Mechanism,
    /// The qdiscs the device has again, as recorded before the first apply.
    pub qdiscs: Vec<serde_json::Value>,
}

/// What `apply` puts on a device.
pub enum Plan {
    /// The `tc -batch` of [`lab::tc_commands`] for the device.
    Htb {
        commands: String,
    },
    Tonic(TonicPlan),
}

/// tonic on a device: `mq` and a `pfifo_fast` per Tx queue (`commands`, whose `#`
/// lines say what the program does), and the program, loaded.
pub struct TonicPlan {
    pub commands: String,
    /// The tenants' names, in the policy's order.
    pub tenants: Vec<String>,
    pub tx_queues: u16,
    pub pools: Vec<Pool>,
    tonic: Tonic,
}

/// tonic's `tc -batch` for `policy` (from the file `file`) on `dev`, `dev`'s Tx
/// queues and the tenants' pools. Refuses (status 2) a tenant without
/// `match.src`, a device tonic cannot use, and more tenants than Tx queues.
pub fn tonic_commands(
    policy: &Policy,
    file: &str,
    dev: &str,
) -> Result<(String, u16, Vec<Pool>), Error> {
    crate::enforce::unmatched(policy)
        .map_err(|(_, why)| Error::Input(format!("{file}: error: {why}")))?;
    let queues = device::tonic_tx_queues(dev)?;
    let weights: Vec<u32> = policy.tenants.iter().map(|t| t.weight).collect();
    let pools = tonic_pools(&weights, queues).ok_or_else(|| {
        Error::Input(format!(
            "{file}: error: {} tenants, and --dev {dev} has {queues} Tx queues: tonic gives each tenant a pool of its own (hint: --mechanism htb)",
            policy.tenants.len()
        ))
    })?;
    let prioritised = prioritised_apps(policy);
    let mut commands = format!("# nicsched tonic on {dev}: {queues} Tx queues\n");
    for (tenant, pool) in policy.tenants.iter().zip(&pools) {
        let src = tenant.match_src.expect("checked above");
        commands.push_str(&format!(
            "# tenant {} from {}/{}: queues {}-{}",
            tenant.name,
            src.addr,
            src.prefix_len,
            pool.start,
            pool.start + pool.len - 1
        ));
        let high: Vec<String> = tenant
            .apps
            .iter()
            .filter(|a| prioritised[a.index()])
            .map(|&a| {
                let app = policy.app(a);
                format!("{} {:?} {:?}", app.name, app.match_proto, app.match_ports)
            })
            .collect();
        if !high.is_empty() {
            commands.push_str(&format!("; prioritised: {}", high.join(", ")));
        }
        commands.push('\n');
    }
    commands.push_str(&format!("qdisc add dev {dev} root handle 1: mq\n"));
    for queue in 0..queues {
        commands.push_str(&format!(
            "qdisc replace dev {dev} parent 1:{:x} handle {:x}: pfifo_fast\n",
            queue + 1,
            queue + 2
        ));
    }
    Ok((commands, queues, pools))
}

impl TonicPlan {
    /// tonic for `policy` on `dev`: [`tonic_commands`], and the program loaded (the
    /// kernel's verifier has taken it before the device is touched).
    pub fn new(policy: &Policy, file: &str, dev: &str) -> Result<TonicPlan, Error> {
        let (commands, tx_queues, pools) = tonic_commands(policy, file, dev)?;
        let tonic = Tonic::load(policy, &pools, tx_queues, &prioritised_apps(policy))?;
        Ok(TonicPlan {
            commands,
            tenants: policy.tenants.iter().map(|t| t.name.clone()).collect(),
            tx_queues,
            pools,
            tonic,
        })
    }
}

impl Plan {
    fn mechanism(&self) -> Mechanism {
        match self {
            Plan::Htb { .. } => Mechanism::Htb,
            Plan::Tonic(_) => Mechanism::Tonic,
        }
    }

    fn commands(&self) -> &str {
        match self {
            Plan::Htb { commands } => commands,
            Plan::Tonic(plan) => &plan.commands,
        }
    }
}

fn ifindex(dev: &str) -> Result<u32, Error> {
    datapath::sys::packet::ifindex(dev)
        .map_err(|e| Error::Input(format!("--dev {dev}: {e} (hint: `ip link` lists them)")))
}

/// Applies `plan` from the policy file `policy` to `dev`, replacing nicsched's last
/// apply on `dev` if there was one (of either mechanism), and reads the result
/// back. On any failure `dev` is left as it was before.
pub fn apply(dev: &str, policy: &str, plan: Plan) -> Result<Applied, Error> {
    let mechanism = plan.mechanism();
    let current = tc::qdiscs(dev)?;
    let index = ifindex(dev)?;
    let previous = record::read(dev)?;
    let prior = match &previous {
        Some(previous) => previous.prior(),
        None if tc::is_kernel_default(&current) => Prior {
            qdiscs: current,
            xps: device::xps(dev)?,
            tcx_egress: tcx_egress_programs(index).map_err(|e| {
                Error::Failed(format!(
                    "{dev}: cannot list the programs at its tcx egress (Linux 6.6 or later): {e}"
                ))
            })?,
        },
        None => {
            return Err(Error::Input(format!(
                "--dev {dev}: its qdiscs are not the kernel's default ({}), and nicsched restores only that on --remove (hint: put them back with `tc qdisc del dev {dev} root`, or apply on another device)",
                kinds(&current)
            )));
        }
    };
    let mut record = Record::new(dev, mechanism, policy, prior, plan.commands());
    let mut tonic_applied = None;
    let mut mounted_bpffs = false;
    if let Plan::Tonic(tonic) = &plan {
        mounted_bpffs = device::ensure_bpffs()?;
        record.pins = Some(device::pins(dev).display().to_string());
        record.tx_queues = Some(tonic.tx_queues);
    }
    record::write(&record)?;
    let replaced = previous.is_some();
    // The last apply's program stays attached (held here) until this one is read
    // back, so that a rollback gives it back its pins.
    let retired = match previous.as_ref().and_then(|p| p.pins.as_deref()) {
        Some(pins) => Some(Retired::unpin(Path::new(pins))?),
        None => None,
    };
    let outcome = match &plan {
        Plan::Htb { commands } => configure(dev, commands)
            .and_then(|()| verify(dev, commands))
            .and_then(|numbers| {
                device::set_xps(dev, &record.prior_xps)?;
                Ok(numbers)
            }),
        Plan::Tonic(tonic) => {
            let pins = device::pins(dev);
            let expected_programs = record.prior_tcx_egress
                + 1
                + u32::from(retired.as_ref().is_some_and(|r| r.link.is_some()));
            configure_tonic(
                dev,
                index,
                tonic,
                &record.prior_xps,
                &pins,
                expected_programs,
            )
            .map(|xps_cleared| {
                tonic_applied = Some(TonicApplied {
                    tx_queues: tonic.tx_queues,
                    pools: tonic
                        .tenants
                        .iter()
                        .zip(&tonic.pools)
                        .map(|(tenant, pool)| PoolLine {
                            tenant: tenant.clone(),
                            first_queue: pool.start,
                            last_queue: pool.start + pool.len - 1,
                        })
                        .collect(),
                    xps_cleared,
                    pins: pins.display().to_string(),
                    mounted_bpffs,
                });
                (0, 0)
            })
        }
    };
    let outcome = outcome.and_then(|numbers| {
        if let Some(retired) = &retired {
            retired.detach()?;
        }
        let programs = tcx_egress_programs(index).map_err(|e| e.to_string())?;
        let want = record.prior_tcx_egress + u32::from(mechanism == Mechanism::Tonic);
        if programs != want {
            return Err(format!(
                "read back: {programs} programs at its tcx egress, where {want} were expected"
            ));
        }
        Ok(numbers)
    });
    match outcome {
        Ok((classes, filters)) => Ok(Applied {
            dev: dev.to_string(),
            mechanism,
            classes,
            filters,
            replaced,
            record: record::path(dev).display().to_string(),
            tonic: tonic_applied,
        }),
        Err(failed) => {
            let restored = roll_back(dev, &record, previous.as_ref(), retired);
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

/// The program of the last tonic apply, its pins removed and its link held here:
/// still attached until [`Retired::detach`], or pinned again by a rollback.
struct Retired {
    dir: PathBuf,
    link: Option<Link>,
    counters: Option<Map>,
}

impl Retired {
    fn unpin(dir: &Path) -> Result<Retired, Error> {
        let link_pin = dir.join(tonic::LINK_PIN);
        let counters_pin = dir.join(tonic::COUNTERS_PIN);
        // Absent pins (a BPF filesystem unmounted since) are nothing to retire.
        let link = Link::open_pinned(&link_pin).ok();
        let counters = Map::open_pinned(&counters_pin, 4, 16).ok();
        for pin in [&link_pin, &counters_pin] {
            remove_pin(pin).map_err(Error::Failed)?;
        }
        Ok(Retired {
            dir: dir.to_path_buf(),
            link,
            counters,
        })
    }

    fn detach(&self) -> Result<(), String> {
        match &self.link {
            Some(link) => link
                .detach()
                .map_err(|e| format!("cannot detach the last apply's program: {e}")),
            None => Ok(()),
        }
    }

    /// Pins the link and counters back where they were.
    fn repin(&self) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let pinned = |e: std::io::Error| format!("cannot pin again in {}: {e}", self.dir.display());
        if let Some(counters) = &self.counters {
            counters
                .pin(&self.dir.join(tonic::COUNTERS_PIN))
                .map_err(pinned)?;
        }
        if let Some(link) = &self.link {
            link.pin(&self.dir.join(tonic::LINK_PIN)).map_err(pinned)?;
        }
        Ok(())
    }
}

fn remove_pin(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("cannot remove {}: {e}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Detaches and unpins what a tonic apply pinned in `dir`, and removes `dir`.
fn unpin_tonic(dir: &Path) -> Result<(), String> {
    let retired = Retired::unpin(dir).map_err(|e| e.to_string())?;
    retired.detach()?;
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("cannot remove {}: {e}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// tonic's qdiscs, XPS off, the program attached and pinned in `pins`, all read
/// back (`programs`: how many programs its tcx egress has then). The Tx queues
/// whose XPS masks were cleared.
fn configure_tonic(
    dev: &str,
    index: u32,
    plan: &TonicPlan,
    prior_xps: &[Xps],
    pins: &Path,
    programs: u32,
) -> Result<usize, String> {
    configure(dev, &plan.commands)?;
    verify_tonic_qdiscs(dev, plan.tx_queues)?;
    device::set_xps(dev, &device::xps_off(prior_xps))?;
    let xps = device::xps(dev).map_err(|e| e.to_string())?;
    if !device::is_xps_off(&xps) {
        return Err(format!("read back: XPS masks still set: {xps:?}"));
    }
    std::fs::create_dir_all(pins).map_err(|e| format!("{}: {e}", pins.display()))?;
    plan.tonic
        .attach_pinned(index, pins)
        .map_err(|e| e.to_string())?;
    device::flush_route_caches()?;
    let attached = tcx_egress_programs(index).map_err(|e| e.to_string())?;
    if attached != programs {
        return Err(format!(
            "read back: {attached} programs at its tcx egress, where {programs} were expected"
        ));
    }
    Ok(xps
        .iter()
        .filter(|x| x.cpus.is_some() || x.rxqs.is_some())
        .count())
}

/// Reads `dev`'s qdiscs back: `mq` `1:` at the root and a `pfifo_fast` of handle
/// N+2 under each class `1:N+1`, and nothing else on its egress.
fn verify_tonic_qdiscs(dev: &str, queues: u16) -> Result<(), String> {
    let qdiscs = tc::qdiscs(dev).map_err(|e| e.to_string())?;
    let egress: Vec<&serde_json::Value> = qdiscs
        .iter()
        .filter(|q| !matches!(q["kind"].as_str(), Some("ingress" | "clsact")))
        .collect();
    let root_ok = egress
        .iter()
        .any(|q| q["kind"] == "mq" && q["handle"] == "1:" && q["root"] == true);
    let leaves_ok = (0..queues).all(|queue| {
        egress.iter().any(|q| {
            q["kind"] == "pfifo_fast"
                && q["handle"] == format!("{:x}:", queue + 2)
                && q["parent"] == format!("1:{:x}", queue + 1)
        })
    });
    if root_ok && leaves_ok && egress.len() == usize::from(queues) + 1 {
        Ok(())
    } else {
        Err(format!(
            "read back: its qdiscs are {}, where tonic asks for mq 1: and a pfifo_fast under each of its {queues} Tx queues",
            kinds(&qdiscs)
        ))
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

/// Puts `dev` back as it was before the apply `record` was: the last apply
/// (`previous`: its tree, its program, its XPS masks), or what was there before
/// nicsched and no record. What it put back, in words.
fn roll_back(
    dev: &str,
    record: &Record,
    previous: Option<&Record>,
    retired: Option<Retired>,
) -> Result<String, String> {
    if let Some(pins) = &record.pins {
        let pins = Path::new(pins);
        let mine = pins.join(tonic::LINK_PIN);
        // This apply's link, if it got as far as pinning it.
        if let Ok(link) = Link::open_pinned(&mine) {
            link.detach()
                .map_err(|e| format!("cannot detach this apply's program: {e}"))?;
        }
        remove_pin(&mine)?;
        remove_pin(&pins.join(tonic::COUNTERS_PIN))?;
    }
    delete_root(dev)?;
    match previous {
        Some(previous) => {
            tc::batch(&previous.commands)?;
            if previous.mechanism == Mechanism::Tonic {
                device::set_xps(dev, &device::xps_off(&previous.prior_xps))?;
            } else {
                device::set_xps(dev, &previous.prior_xps)?;
            }
            if let Some(retired) = retired {
                retired.repin()?;
            }
            record::write(previous).map_err(|e| e.to_string())?;
            Ok(format!(
                "the {} of its last apply ({})",
                previous.mechanism.name(),
                previous.policy
            ))
        }
        None => {
            device::set_xps(dev, &record.prior_xps)?;
            if let Some(pins) = &record.pins {
                let _ = std::fs::remove_dir(pins);
            }
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

/// `nicsched apply --remove --dev DEV`: the qdiscs, XPS masks and tcx programs
/// recorded before the first apply put back (a tonic program detached, its pins
/// removed), checked, and the record deleted. A device nicsched has not configured
/// is bad input.
pub fn remove(dev: &str) -> Result<Removed, Error> {
    let Some(record) = record::read(dev)? else {
        return Err(not_configured(dev));
    };
    let failed = |e: String| Error::Failed(format!("{dev}: {e}"));
    delete_root(dev).map_err(failed)?;
    if let Some(pins) = &record.pins {
        unpin_tonic(Path::new(pins)).map_err(failed)?;
    }
    device::set_xps(dev, &record.prior_xps).map_err(failed)?;
    let kept = format!("kept {}, for another try", record::path(dev).display());
    let qdiscs = tc::qdiscs(dev)?;
    if qdiscs != record.prior_qdiscs {
        return Err(Error::Failed(format!(
            "{dev}: after deleting nicsched's root qdisc the device has {}, not the {} recorded ({kept})",
            kinds(&qdiscs),
            kinds(&record.prior_qdiscs),
        )));
    }
    let xps = device::xps(dev)?;
    if xps != record.prior_xps {
        return Err(Error::Failed(format!(
            "{dev}: its XPS masks are {xps:?}, not the {:?} recorded ({kept})",
            record.prior_xps
        )));
    }
    let programs = tcx_egress_programs(ifindex(dev)?)
        .map_err(|e| failed(format!("cannot list the programs at its tcx egress: {e}")))?;
    if programs != record.prior_tcx_egress {
        return Err(Error::Failed(format!(
            "{dev}: {programs} programs at its tcx egress, not the {} recorded ({kept})",
            record.prior_tcx_egress
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
