//! What a device says of itself in sysfs (`/sys/class/net/DEV`: its link type, its
//! Tx queues and their XPS masks), and the BPF filesystem nicsched pins in.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Error;

/// `ARPHRD_ETHER`, `/sys/class/net/DEV/type` of an Ethernet device.
const ETHERNET: u32 = 1;

/// Where the kernel's BPF filesystem is mounted by convention.
pub const BPFFS: &str = "/sys/fs/bpf";

fn sysfs(dev: &str) -> PathBuf {
    Path::new("/sys/class/net").join(dev)
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_string())
        .map_err(|e| Error::Failed(format!("{}: {e}", path.display())))
}

/// `dev`'s Tx queues, refusing (status 2) a device that is not Ethernet or has one
/// Tx queue: TONIC's pools are Tx queues.
pub fn tonic_tx_queues(dev: &str) -> Result<u16, Error> {
    let kind = read(&sysfs(dev).join("type"))?;
    if kind.parse::<u32>().ok() != Some(ETHERNET) {
        return Err(Error::Input(format!(
            "--dev {dev}: not an Ethernet device (its type is {kind}, Ethernet's is {ETHERNET}), and tonic's program reads Ethernet frames (hint: --mechanism htb)"
        )));
    }
    let queues = tx_queues(dev)?;
    if queues < 2 {
        return Err(Error::Input(format!(
            "--dev {dev}: {queues} Tx queue, and tonic gives each tenant a pool of Tx queues (hint: --mechanism htb, or more queues with `ethtool -L {dev} tx N` where the driver allows)"
        )));
    }
    u16::try_from(queues)
        .ok()
        .filter(|&q| q < 0xff00)
        .ok_or_else(|| {
            Error::Input(format!(
                "--dev {dev}: {queues} Tx queues, more than tonic numbers its qdiscs for (0xff00)"
            ))
        })
}

/// How many Tx queues `dev` has (`queues/tx-N`).
fn tx_queues(dev: &str) -> Result<usize, Error> {
    let dir = sysfs(dev).join("queues");
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        Error::Input(format!(
            "--dev {dev}: {}: {e} (hint: `ip link` lists this namespace's devices)",
            dir.display()
        ))
    })?;
    Ok(entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("tx-"))
        .count())
}

/// A Tx queue's XPS masks, as sysfs prints them; `None` where the kernel has no
/// such file (built without XPS, or a queue it does not map).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Xps {
    pub queue: usize,
    pub cpus: Option<String>,
    pub rxqs: Option<String>,
}

const XPS_FILES: [&str; 2] = ["xps_cpus", "xps_rxqs"];

impl Xps {
    fn files(&self) -> [&Option<String>; 2] {
        [&self.cpus, &self.rxqs]
    }
}

fn xps_path(dev: &str, queue: usize, file: &str) -> PathBuf {
    sysfs(dev)
        .join("queues")
        .join(format!("tx-{queue}"))
        .join(file)
}

/// `dev`'s XPS masks, queue by queue.
pub fn xps(dev: &str) -> Result<Vec<Xps>, Error> {
    (0..tx_queues(dev)?)
        .map(|queue| {
            let mask = |file: &str| {
                std::fs::read_to_string(xps_path(dev, queue, file))
                    .ok()
                    .map(|m| m.trim().to_string())
            };
            Ok(Xps {
                queue,
                cpus: mask(XPS_FILES[0]),
                rxqs: mask(XPS_FILES[1]),
            })
        })
        .collect()
}

/// Writes `masks` to `dev`'s queues, leaving a file whose mask is already that.
pub fn set_xps(dev: &str, masks: &[Xps]) -> Result<(), String> {
    let now = xps(dev).map_err(|e| e.to_string())?;
    for want in masks {
        let have = now.iter().find(|x| x.queue == want.queue);
        for (i, mask) in want.files().into_iter().enumerate() {
            let Some(mask) = mask else { continue };
            if have.is_some_and(|h| h.files()[i].as_ref() == Some(mask)) {
                continue;
            }
            let path = xps_path(dev, want.queue, XPS_FILES[i]);
            std::fs::write(&path, mask)
                .map_err(|e| format!("cannot write {mask} to {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// `masks` with every mask cleared: no CPU and no Rx queue picks a Tx queue.
pub fn xps_off(masks: &[Xps]) -> Vec<Xps> {
    let zero = |m: &Option<String>| m.as_ref().map(|_| "0".to_string());
    masks
        .iter()
        .map(|x| Xps {
            queue: x.queue,
            cpus: zero(&x.cpus),
            rxqs: zero(&x.rxqs),
        })
        .collect()
}

/// Whether every mask of `masks` is empty (`0`, `00000000,00000000`).
pub fn is_xps_off(masks: &[Xps]) -> bool {
    masks.iter().all(|x| {
        x.files()
            .into_iter()
            .flatten()
            .all(|m| m.chars().all(|c| c == '0' || c == ','))
    })
}

/// Makes every socket of this network namespace pick its Tx queue again at its
/// next send: a connected socket keeps the queue its first frame left on
/// (`sk_tx_queue_mapping`, used while the socket has frames in flight or, for
/// UDP, always) until its route is checked and found stale, which a flush of the
/// routing cache forces (it bumps the namespace's route generation). Without it a
/// socket connected before `apply` keeps a queue the kernel chose, maybe in
/// another tenant's pool.
pub fn flush_route_caches() -> Result<(), String> {
    for family in ["ipv4", "ipv6"] {
        let path = format!("/proc/sys/net/{family}/route/flush");
        match std::fs::write(&path, "1") {
            // A namespace without IPv6 has nothing to flush.
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("cannot flush the routing cache ({path}): {e}"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Mounts a BPF filesystem at [`BPFFS`] unless one is there: whether it mounted
/// one.
pub fn ensure_bpffs() -> Result<bool, Error> {
    let mounts = read(Path::new("/proc/self/mounts"))?;
    let mounted = mounts.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(1) == Some(&BPFFS) && fields.get(2) == Some(&"bpf")
    });
    if mounted {
        return Ok(false);
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (source, target, kind, options) = (c("bpf"), c(BPFFS), c("bpf"), c("mode=0700"));
    // SAFETY: every pointer is a NUL-terminated string alive for the call.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            kind.as_ptr(),
            0,
            options.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(Error::Failed(format!(
            "no BPF filesystem at {BPFFS}, and mounting one failed: {} (hint: `mount -t bpf bpf {BPFFS}`)",
            std::io::Error::last_os_error()
        )));
    }
    Ok(true)
}

/// Where an apply on `dev` pins its BPF objects.
pub fn pins(dev: &str) -> PathBuf {
    Path::new(BPFFS).join("nicsched").join(dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xps_off_clears_the_masks_there_are() {
        let masks = vec![Xps {
            queue: 0,
            cpus: Some("00000000,00000003".into()),
            rxqs: None,
        }];
        assert!(!is_xps_off(&masks));
        let off = xps_off(&masks);
        assert_eq!(off[0].cpus.as_deref(), Some("0"));
        assert_eq!(off[0].rxqs, None);
        assert!(is_xps_off(&off));
        assert!(is_xps_off(&[Xps {
            queue: 1,
            cpus: Some("00000000,00000000".into()),
            rxqs: Some("0".into()),
        }]));
    }
}
