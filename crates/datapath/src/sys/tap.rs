//! A tap device owned by the process: what the host transmits on it is read, one
//! frame per `read(2)`, behind a [`VNET_HDR_BYTES`]-byte virtio-net header, as
//! [`crate::sys::packet::RxRing`] hands frames over. A real host's egress is
//! redirected here (`nicsched enforce`), so the engine reads every tenant's frames
//! from one device instead of a port per tenant.
//!
//! The device is not persistent: the kernel deletes it when the last descriptor
//! closes, however the process ends, SIGKILL included.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::sys::packet::{FRAME_BYTES_MAX, RxFrame, VNET_HDR_BYTES};

/// Frames the kernel queues for the reader before it drops (the device's
/// `txqueuelen`, tun's ring): a few ms of a 10 Gbit/s link's GSO sends, about what
/// the lab's ring and socket buffer hold per port, so that a reader descheduled
/// for a moment loses nothing.
const QUEUE_FRAMES: libc::c_int = 4096;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// An `ifreq` naming `name`, the rest zero.
fn request(name: &str) -> io::Result<libc::ifreq> {
    let c = CString::new(name).map_err(|_| io::Error::other("interface name with a NUL"))?;
    let bytes = c.as_bytes_with_nul();
    if bytes.len() > libc::IFNAMSIZ {
        return Err(io::Error::other(format!(
            "interface name `{name}` is longer than {} bytes",
            libc::IFNAMSIZ - 1
        )));
    }
    // SAFETY: an all-zero ifreq is a valid value (empty name, zero union).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, &from) in req.ifr_name.iter_mut().zip(bytes) {
        *to = from as libc::c_char;
    }
    Ok(req)
}

/// An `ioctl` on an interface through a throwaway datagram socket.
fn interface_ioctl(op: libc::Ioctl, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: plain socket(2); the fd is owned right away.
    let raw =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: raw is a fresh fd nobody else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: req is an ifreq that lives for the call, as the interface ioctls take.
    check(unsafe { libc::ioctl(socket.as_raw_fd(), op, req as *mut libc::ifreq) }).map(drop)
}

pub struct Tap {
    fd: OwnedFd,
    name: String,
    index: u32,
    buf: Box<[u8]>,
}

impl Tap {
    /// Creates tap `name` for the frames of device `like`: up, with no addresses
    /// and IPv6 off so that the host sends nothing of its own on it, `like`'s MTU,
    /// and checksum offload on but no segmentation offload: the kernel segments a
    /// GSO send on its way in, so every frame the engine reads is one the wire
    /// carries, and a tenant is charged each segment's headers as the wire does
    /// (whole 64 KiB sends were charged their headers once: 3.5% over a cap at
    /// MTU 1500, measured at the sink). It also spares the engine a send the
    /// device cannot take: a GSO frame sent past a qdisc (`PACKET_QDISC_BYPASS`)
    /// to a device without TSO is dropped, never segmented.
    /// Fails with `EBUSY` when another process holds a tap of that name.
    pub fn create(name: &str, like: &str) -> io::Result<Tap> {
        let path = c"/dev/net/tun";
        // SAFETY: a valid NUL-terminated path; the fd is owned right away.
        let raw = check(unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: raw is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = request(name)?;
        req.ifr_ifru.ifru_flags =
            (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short;
        // SAFETY: req is an ifreq that lives for the call.
        check(unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                libc::TUNSETIFF,
                &mut req as *mut libc::ifreq,
            )
        })?;
        let header = VNET_HDR_BYTES as libc::c_int;
        // SAFETY: TUNSETVNETHDRSZ reads one c_int that lives for the call.
        check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &header) })?;
        let offload = libc::TUN_F_CSUM;
        // SAFETY: TUNSETOFFLOAD takes its flags by value.
        check(unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                libc::TUNSETOFFLOAD,
                offload as libc::c_ulong,
            )
        })?;
        let index = crate::sys::packet::ifindex(name)?;
        disable_ipv6(name)?;
        let mut req = request(like)?;
        interface_ioctl(libc::SIOCGIFMTU, &mut req)?;
        // SAFETY: SIOCGIFMTU filled the mtu member.
        let mtu = unsafe { req.ifr_ifru.ifru_mtu };
        let mut req = request(name)?;
        req.ifr_ifru.ifru_mtu = mtu;
        interface_ioctl(libc::SIOCSIFMTU, &mut req)?;
        let mut req = request(name)?;
        req.ifr_ifru.ifru_metric = QUEUE_FRAMES;
        interface_ioctl(libc::SIOCSIFTXQLEN, &mut req)?;
        let mut req = request(name)?;
        interface_ioctl(libc::SIOCGIFFLAGS, &mut req)?;
        // SAFETY: SIOCGIFFLAGS filled the flags member.
        let flags = unsafe { req.ifr_ifru.ifru_flags };
        req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
        interface_ioctl(libc::SIOCSIFFLAGS, &mut req)?;
        Ok(Tap {
            fd,
            name: name.to_string(),
            index,
            buf: vec![0; FRAME_BYTES_MAX].into_boxed_slice(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Hands up to `max` waiting frames to `on_frame`, in the order the host sent
    /// them, and returns how many it handed. Never blocks.
    pub fn recv(&mut self, max: usize, mut on_frame: impl FnMut(RxFrame<'_>)) -> io::Result<usize> {
        let mut handed = 0;
        while handed < max {
            // SAFETY: the buffer is valid for its length for the duration of the call.
            let rc = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(handed),
                    _ => Err(e),
                };
            }
            let len = rc as usize;
            on_frame(RxFrame {
                bytes: &self.buf[..len],
                len,
                cut_for_room: false,
            });
            handed += 1;
        }
        Ok(handed)
    }
}

/// Turns IPv6 off on `name` before it comes up: no link-local address, no router
/// or neighbour solicitations of the host's own. Nothing to do on a kernel without
/// IPv6.
fn disable_ipv6(name: &str) -> io::Result<()> {
    let path = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
    match std::fs::write(&path, "1") {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}
