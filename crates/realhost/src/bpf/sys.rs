//! The bpf(2) commands nicsched uses, on file descriptors it owns: maps, programs
//! loaded from [`Insn`]s, tcx links, and pins in the BPF filesystem.
//!
//! The kernel headers of a distribution lag the kernel (Debian 12's have no tcx),
//! so each command's attribute is written here as the kernel's ABI defines it; the
//! ABI only grows, and a field the kernel does not know must be zero.

use super::asm::Insn;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

const MAP_CREATE: u32 = 0;
const MAP_LOOKUP_ELEM: u32 = 1;
const MAP_UPDATE_ELEM: u32 = 2;
const PROG_LOAD: u32 = 5;
const OBJ_PIN: u32 = 6;
const OBJ_GET: u32 = 7;
const PROG_TEST_RUN: u32 = 10;
const PROG_QUERY: u32 = 16;
const LINK_CREATE: u32 = 28;
const LINK_DETACH: u32 = 34;

const PROG_TYPE_SCHED_CLS: u32 = 3;
const ATTACH_TCX_EGRESS: u32 = 47;

/// The map types nicsched's programs use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    /// Fixed-size values by index, preallocated: counters.
    Array = 2,
    /// One value per CPU and index: counters no two CPUs write to.
    PerCpuArray = 6,
    /// Longest-prefix match: a key is a prefix length (host order) and an address.
    LpmTrie = 11,
}

/// `BPF_F_NO_PREALLOC`, which a trie requires.
const NO_PREALLOC: u32 = 1;

#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
struct ElemAttr {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
}

#[repr(C)]
struct ObjAttr {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
}

#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    relative_fd: u32,
    pad: u32,
    expected_revision: u64,
}

#[repr(C)]
struct ProgQueryAttr {
    target_ifindex: u32,
    attach_type: u32,
    query_flags: u32,
    attach_flags: u32,
    prog_ids: u64,
    prog_cnt: u32,
    pad: u32,
}

fn bpf<T>(command: u32, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is the attribute the command reads, `#[repr(C)]` as the
    // kernel lays it out, of the size passed, alive for the call; the pointers in it
    // point at memory alive for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            (attr as *mut T).cast::<libc::c_void>(),
            size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: the kernel just returned this descriptor to this process; nobody
    // else owns it.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// The kernel keeps names of up to 15 bytes of `[A-Za-z0-9_.]`.
fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0; 16];
    for (o, b) in out.iter_mut().zip(
        name.bytes()
            .filter(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.')
            .take(15),
    ) {
        *o = b;
    }
    out
}

fn path_cstring(path: &Path) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

/// Pins `fd` at `path` in a BPF filesystem: it outlives the process until the file
/// is removed.
fn pin(fd: RawFd, path: &Path) -> io::Result<()> {
    let name = path_cstring(path)?;
    let mut attr = ObjAttr {
        pathname: name.as_ptr() as u64,
        bpf_fd: fd as u32,
        file_flags: 0,
    };
    bpf(OBJ_PIN, &mut attr).map(drop)
}

fn pinned(path: &Path) -> io::Result<OwnedFd> {
    let name = path_cstring(path)?;
    let mut attr = ObjAttr {
        pathname: name.as_ptr() as u64,
        bpf_fd: 0,
        file_flags: 0,
    };
    bpf(OBJ_GET, &mut attr).map(owned)
}

/// A BPF map, alive while this value or a program using it is.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    key_bytes: u32,
    value_bytes: u32,
}

impl Map {
    pub fn create(
        kind: MapKind,
        name: &str,
        key_bytes: u32,
        value_bytes: u32,
        max_entries: u32,
    ) -> io::Result<Map> {
        let mut attr = MapCreateAttr {
            map_type: kind as u32,
            key_size: key_bytes,
            value_size: value_bytes,
            max_entries,
            map_flags: if kind == MapKind::LpmTrie {
                NO_PREALLOC
            } else {
                0
            },
            inner_map_fd: 0,
            numa_node: 0,
            map_name: object_name(name),
        };
        let fd = owned(bpf(MAP_CREATE, &mut attr)?);
        Ok(Map {
            fd,
            key_bytes,
            value_bytes,
        })
    }

    /// The map pinned at `path`, whose keys and values have the sizes given.
    pub fn open_pinned(path: &Path, key_bytes: u32, value_bytes: u32) -> io::Result<Map> {
        Ok(Map {
            fd: pinned(path)?,
            key_bytes,
            value_bytes,
        })
    }

    pub fn pin(&self, path: &Path) -> io::Result<()> {
        pin(self.fd.as_raw_fd(), path)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        assert_eq!(
            key.len(),
            self.key_bytes as usize,
            "a key of the map's size"
        );
        assert_eq!(
            value.len(),
            self.value_bytes as usize,
            "a value of the map's size"
        );
        let mut attr = ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            pad: 0,
            key: key.as_ptr() as u64,
            value: value.as_ptr() as u64,
            flags: 0,
        };
        bpf(MAP_UPDATE_ELEM, &mut attr).map(drop)
    }

    /// Reads the value at `key` into `value`: false when there is none. A per-CPU
    /// map's value is one per possible CPU, each padded to 8 bytes, and `value` must
    /// hold them all.
    pub fn lookup(&self, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
        assert_eq!(
            key.len(),
            self.key_bytes as usize,
            "a key of the map's size"
        );
        assert!(
            value.len() >= self.value_bytes as usize,
            "room for a value of the map's size"
        );
        let mut attr = ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            pad: 0,
            key: key.as_ptr() as u64,
            value: value.as_mut_ptr() as u64,
            flags: 0,
        };
        match bpf(MAP_LOOKUP_ELEM, &mut attr) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Why the kernel refused a program: its errno and the verifier's log.
#[derive(Debug)]
pub struct LoadError {
    pub error: io::Error,
    pub log: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the kernel refused the BPF program: {}", self.error)?;
        if !self.log.is_empty() {
            write!(f, "\nverifier log:\n{}", self.log.trim_end())?;
        }
        Ok(())
    }
}

/// A traffic-control (`sched_cls`) program, loaded.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
}

impl Program {
    /// Loads `insns` as a tc program. Without a log first (the kernel's fast path);
    /// on a refusal, once more with the verifier's log, which says why.
    pub fn load_tc(name: &str, insns: &[Insn]) -> Result<Program, LoadError> {
        let load = |log: &mut [u8]| {
            // The kernel's own notion: whether the program may call GPL-only
            // helpers. It calls none, and nicsched is MIT or Apache-2.0.
            let license = c"Dual MIT/GPL";
            let mut attr = ProgLoadAttr {
                prog_type: PROG_TYPE_SCHED_CLS,
                insn_cnt: insns.len() as u32,
                insns: insns.as_ptr() as u64,
                license: license.as_ptr() as u64,
                log_level: u32::from(!log.is_empty()),
                log_size: log.len() as u32,
                log_buf: if log.is_empty() {
                    0
                } else {
                    log.as_mut_ptr() as u64
                },
                kern_version: 0,
                prog_flags: 0,
                prog_name: object_name(name),
                prog_ifindex: 0,
                expected_attach_type: 0,
            };
            bpf(PROG_LOAD, &mut attr).map(owned)
        };
        load(&mut []).map(|fd| Program { fd }).or_else(|_| {
            let mut log = vec![0u8; 1 << 20];
            match load(&mut log) {
                Ok(fd) => Ok(Program { fd }),
                Err(error) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    Err(LoadError {
                        error,
                        log: String::from_utf8_lossy(&log[..end]).into_owned(),
                    })
                }
            }
        })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Runs the program once on `frame` (an Ethernet frame, as a tc program sees
    /// one) of skb->priority `priority`, without a device (`BPF_PROG_TEST_RUN`):
    /// its return value, and the `priority` it left. Maps it updates are updated.
    pub fn test_run(&self, frame: &[u8], priority: u32) -> io::Result<(i32, u32)> {
        // `struct __sk_buff` as far as `hwtstamp`: the kernel takes only a context
        // of its own size or less, zero but for the fields it lets a test set.
        let mut context = [0u8; 192];
        context[32..36].copy_from_slice(&priority.to_ne_bytes());
        let mut out = vec![0u8; frame.len() + 256];
        let mut attr = TestRunAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            retval: 0,
            data_size_in: frame.len() as u32,
            data_size_out: out.len() as u32,
            data_in: frame.as_ptr() as u64,
            data_out: out.as_mut_ptr() as u64,
            repeat: 1,
            duration: 0,
            ctx_size_in: context.len() as u32,
            ctx_size_out: context.len() as u32,
            ctx_in: context.as_ptr() as u64,
            ctx_out: context.as_mut_ptr() as u64,
        };
        bpf(PROG_TEST_RUN, &mut attr)?;
        let priority = u32::from_ne_bytes(context[32..36].try_into().expect("4 bytes"));
        Ok((attr.retval as i32, priority))
    }
}

/// How many CPUs the kernel may ever bring up: a per-CPU map's value is one per
/// possible CPU (`/sys/devices/system/cpu/possible`, `0-3` or `0,2-5`).
pub fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_cpu_list(text.trim()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "/sys/devices/system/cpu/possible: `{}` is not a CPU list",
                text.trim()
            ),
        )
    })
}

/// The number of CPUs up to the highest one a list such as `0-3,6` names.
fn parse_cpu_list(text: &str) -> Option<usize> {
    text.split(',')
        .map(|range| {
            let last = range.rsplit('-').next()?;
            last.trim().parse::<usize>().ok()
        })
        .try_fold(0, |most, last| Some(most.max(last? + 1)))
}

/// A program attached to a device through a BPF link: it stays attached while the
/// link's descriptor is open (in this process, or pinned), and the kernel detaches
/// it when the last reference goes, however the process ends.
#[derive(Debug)]
pub struct Link {
    fd: OwnedFd,
}

impl Link {
    /// Attaches `program` at the egress of the device with index `ifindex` (tcx,
    /// Linux 6.6 and later), after any program already there.
    pub fn tcx_egress(program: &Program, ifindex: u32) -> io::Result<Link> {
        let mut attr = LinkCreateAttr {
            prog_fd: program.raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: ATTACH_TCX_EGRESS,
            flags: 0,
            relative_fd: 0,
            pad: 0,
            expected_revision: 0,
        };
        bpf(LINK_CREATE, &mut attr).map(|fd| Link { fd: owned(fd) })
    }

    /// The link pinned at `path`.
    pub fn open_pinned(path: &Path) -> io::Result<Link> {
        pinned(path).map(|fd| Link { fd })
    }

    /// Keeps the program attached after this process ends, until `path` is removed.
    pub fn pin(&self, path: &Path) -> io::Result<()> {
        pin(self.fd.as_raw_fd(), path)
    }

    /// Detaches the program now (`BPF_LINK_DETACH`): removing a link's pin only
    /// lets the kernel detach it later, from a work queue, once the last reference
    /// is gone.
    pub fn detach(&self) -> io::Result<()> {
        let mut link_fd = self.fd.as_raw_fd() as u32;
        bpf(LINK_DETACH, &mut link_fd).map(drop)
    }
}

/// How many programs are attached at the egress of device `ifindex` through tcx.
pub fn tcx_egress_programs(ifindex: u32) -> io::Result<u32> {
    let mut attr = ProgQueryAttr {
        target_ifindex: ifindex,
        attach_type: ATTACH_TCX_EGRESS,
        query_flags: 0,
        attach_flags: 0,
        prog_ids: 0,
        prog_cnt: 0,
        pad: 0,
    };
    bpf(PROG_QUERY, &mut attr)?;
    Ok(attr.prog_cnt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_have_the_kernels_layout() {
        // Offsets from the kernel's `union bpf_attr`.
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::offset_of!(MapCreateAttr, map_name), 28);
        assert_eq!(std::mem::offset_of!(ElemAttr, flags), 24);
        assert_eq!(std::mem::offset_of!(ObjAttr, file_flags), 12);
        assert_eq!(std::mem::offset_of!(LinkCreateAttr, relative_fd), 16);
        assert_eq!(std::mem::offset_of!(LinkCreateAttr, expected_revision), 24);
        assert_eq!(std::mem::offset_of!(ProgQueryAttr, prog_cnt), 24);
        assert_eq!(std::mem::offset_of!(TestRunAttr, ctx_out), 56);
    }

    #[test]
    fn cpu_lists_count_up_to_the_highest_cpu() {
        assert_eq!(parse_cpu_list("0-3"), Some(4));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0,2-5"), Some(6));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn object_names_keep_what_the_kernel_allows() {
        assert_eq!(
            &object_name("nicsched-tenants_v4")[..],
            b"nicschedtenants\0"
        );
        assert_eq!(&object_name("ns.q")[..5], b"ns.q\0");
    }
}
