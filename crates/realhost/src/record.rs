//! What a device held before nicsched configured it, and what nicsched put there:
//! `/run/nicsched/DEV.json`, written before the device is touched (so that a
//! process killed halfway leaves a record `--remove` can act on), replaced whole
//! by a rename, and deleted once the device is back as it was.

use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{Error, Mechanism};

/// Where records live: `/run` is emptied at boot, as is what they describe.
pub const DIRECTORY: &str = "/run/nicsched";

/// Of the record's format.
const VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    pub dev: String,
    pub mechanism: Mechanism,
    /// The policy file applied, as it was named.
    pub policy: String,
    /// The device's qdiscs before nicsched's first apply, as `tc -j qdisc show`
    /// gives them less `refcnt` ([`crate::tc::qdiscs`]).
    pub prior_qdiscs: Vec<serde_json::Value>,
    /// The `tc -batch` commands applied (or being applied); for tonic, `#` lines
    /// before them say what its program does (pools, prioritised apps).
    pub commands: String,
    /// The device's XPS masks before nicsched's first apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prior_xps: Vec<crate::device::Xps>,
    /// Programs at the device's tcx egress before nicsched's first apply.
    #[serde(default)]
    pub prior_tcx_egress: u32,
    /// tonic: the directory in the BPF filesystem where its link and counters
    /// are pinned, and the device's Tx queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_queues: Option<u16>,
}

/// What a device held before nicsched's first apply, kept by every later apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Prior {
    pub qdiscs: Vec<serde_json::Value>,
    pub xps: Vec<crate::device::Xps>,
    pub tcx_egress: u32,
}

impl Record {
    pub fn new(
        dev: &str,
        mechanism: Mechanism,
        policy: &str,
        prior: Prior,
        commands: &str,
    ) -> Record {
        Record {
            version: VERSION,
            dev: dev.to_string(),
            mechanism,
            policy: policy.to_string(),
            prior_qdiscs: prior.qdiscs,
            commands: commands.to_string(),
            prior_xps: prior.xps,
            prior_tcx_egress: prior.tcx_egress,
            pins: None,
            tx_queues: None,
        }
    }

    pub fn prior(&self) -> Prior {
        Prior {
            qdiscs: self.prior_qdiscs.clone(),
            xps: self.prior_xps.clone(),
            tcx_egress: self.prior_tcx_egress,
        }
    }
}

/// The record of `dev`.
pub fn path(dev: &str) -> PathBuf {
    PathBuf::from(DIRECTORY).join(format!("{dev}.json"))
}

/// `dev`'s record, `None` if nicsched has not configured it.
pub fn read(dev: &str) -> Result<Option<Record>, Error> {
    let path = path(dev);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::Failed(format!("{}: {e}", path.display()))),
    };
    let record: Record = serde_json::from_str(&text).map_err(|e| {
        Error::Failed(format!(
            "{}: {e} (not a record nicsched wrote: restore the device by hand and delete it)",
            path.display()
        ))
    })?;
    Ok(Some(record))
}

/// Writes `record` in place of `dev`'s record, whole or not at all.
pub fn write(record: &Record) -> Result<(), Error> {
    let path = path(&record.dev);
    let failed = |e: std::io::Error| Error::Failed(format!("{}: {e}", path.display()));
    std::fs::create_dir_all(DIRECTORY).map_err(failed)?;
    let mut file = tempfile::NamedTempFile::new_in(DIRECTORY).map_err(failed)?;
    let text = serde_json::to_string_pretty(record).expect("a record serialises");
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.as_file().sync_all().map_err(failed)?;
    file.persist(&path).map_err(|e| failed(e.error))?;
    Ok(())
}

/// Deletes `dev`'s record.
pub fn delete(dev: &str) -> Result<(), Error> {
    let path = path(dev);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::Failed(format!("{}: {e}", path.display())))
        }
        _ => Ok(()),
    }
}
