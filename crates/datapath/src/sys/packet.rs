//! AF_PACKET sockets: whole Ethernet frames in and out of one interface of the
//! namespace the calling thread is in. Non-blocking; frames are read from a ring
//! shared with the kernel ([`RxRing`]) or in batches with `recvmmsg`, and sent in
//! batches with `sendmmsg`; the socket never sees the frames it (or any socket)
//! sends itself.
//!
//! A socket opened with a virtio-net header ([`RxRing::open_vnet`]) reads and
//! writes each frame behind a [`VNET_HDR_BYTES`]-byte `virtio_net_hdr` that carries
//! its segmentation offload (GSO) and partial checksum: a TCP send of up to 64 KiB
//! crosses the engine as one frame, as it crosses a host's qdiscs, instead of 45.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Frames read per `recvmmsg` call.
pub const BATCH: usize = 32;
/// Bytes of one receive buffer: a virtio-net header, Ethernet and VLAN headers and
/// the largest IPv4 packet (a 64 KiB GSO send), with room.
pub const FRAME_BYTES_MAX: usize = 65_536 + 128;
/// Bytes of the `virtio_net_hdr` in front of each frame of an [`RxRing::open_vnet`] socket.
pub const VNET_HDR_BYTES: usize = 10;

const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_VNET_HDR: libc::c_int = 15;
/// Control buffer per frame, in u64 words for alignment: one `SCM_TIMESTAMPNS`
/// (a cmsghdr and a timespec) with room.
const CONTROL_WORDS: usize = 8;

/// The `SCM_TIMESTAMPNS` of a received message, in ns, or 0 if it has none.
///
/// # Safety
/// `header` is a message filled by `recvmsg`/`recvmmsg`, its control buffer valid
/// for `msg_controllen` bytes.
unsafe fn arrival_ns(header: &libc::msghdr) -> u64 {
    // SAFETY: per this function's contract; CMSG_FIRSTHDR/NXTHDR stay within it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(header);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                return ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
            }
            cmsg = libc::CMSG_NXTHDR(header, cmsg);
        }
        0
    }
}

/// A send's error: `Ok` when it only says the device is busy (retry later).
fn busy_or_error(e: io::Error) -> io::Result<()> {
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(()),
        _ => Err(e),
    }
}

pub struct PacketSocket {
    fd: OwnedFd,
    ignores_outgoing: bool,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: the option value is a c_int that lives for the call.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Index of interface `name` in the calling thread's namespace.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::other("interface name with a NUL"))?;
    // SAFETY: a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface `{name}` in this namespace"),
        ))
    } else {
        Ok(index)
    }
}

impl PacketSocket {
    /// A socket bound to interface `name`, receiving every protocol, with a receive
    /// buffer of about `rcvbuf_bytes`, each frame stamped by the kernel when it
    /// arrived (`SO_TIMESTAMPNS`, read with [`PacketSocket::recv_batch_stamped`]): a
    /// reader that falls behind still knows when each frame came.
    pub fn open_stamped(name: &str, rcvbuf_bytes: usize) -> io::Result<PacketSocket> {
        let socket = Self::open_with(name, rcvbuf_bytes, false)?;
        set_int(socket.raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        Ok(socket)
    }

    /// A socket bound to interface `name` that sends frames as they are, with no
    /// header before them: a tenant's crafted frames.
    pub fn open_plain(name: &str, rcvbuf_bytes: usize) -> io::Result<PacketSocket> {
        Self::open_with(name, rcvbuf_bytes, false)
    }

    /// A socket on interface `name` that only sends, each frame behind a
    /// virtio-net header: it receives nothing, so the kernel queues it no copies.
    pub fn open_sender(name: &str) -> io::Result<PacketSocket> {
        Self::open_bound(name, 0, true, 0)
    }

    fn open_with(name: &str, rcvbuf_bytes: usize, vnet_hdr: bool) -> io::Result<PacketSocket> {
        Self::open_bound(name, rcvbuf_bytes, vnet_hdr, libc::ETH_P_ALL as u16)
    }

    /// `ethertype` 0: the socket receives nothing (the kernel reads each sent
    /// frame's protocol from its Ethernet header).
    fn open_bound(
        name: &str,
        rcvbuf_bytes: usize,
        vnet_hdr: bool,
        ethertype: u16,
    ) -> io::Result<PacketSocket> {
        let index = ifindex(name)?;
        let protocol = ethertype.to_be();
        // SAFETY: plain socket(2); the fd is owned right away.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::c_int::from(protocol),
            )
        })?;
        // SAFETY: raw is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let ignores_outgoing = set_int(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1).is_ok();
        // Frames we send go straight to the driver: the veth has no qdisc worth the
        // detour, and the pacing is ours.
        let _ = set_int(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1);
        if vnet_hdr {
            set_int(raw, libc::SOL_PACKET, PACKET_VNET_HDR, 1)?;
        }
        if rcvbuf_bytes > 0 {
            let rcvbuf = rcvbuf_bytes.min(i32::MAX as usize) as libc::c_int;
            if set_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, rcvbuf).is_err() {
                set_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, rcvbuf)?;
            }
        }
        let socket = PacketSocket {
            fd,
            ignores_outgoing,
        };
        socket.bind(index, ethertype)?;
        Ok(socket)
    }

    /// Binds the socket to interface `index`, receiving frames of `ethertype`
    /// (`ETH_P_ALL`: every frame; 0: none). Binding again replaces the binding.
    fn bind(&self, index: u32, ethertype: u16) -> io::Result<()> {
        // SAFETY: a zeroed sockaddr_ll is valid; we fill the fields bind needs.
        let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = ethertype.to_be();
        address.sll_ifindex = index as i32;
        // SAFETY: address is a sockaddr_ll of the size passed.
        check(unsafe {
            libc::bind(
                self.raw_fd(),
                (&address as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })
        .map(drop)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Frames the kernel dropped for this socket since the last call (its ring or
    /// buffer was full), which starts a new count (`PACKET_STATISTICS`).
    pub fn take_drops(&self) -> io::Result<u64> {
        let mut stats = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: stats is a tpacket_stats of the size passed, alive for the call.
        check(unsafe {
            libc::getsockopt(
                self.raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut stats as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        })?;
        Ok(u64::from(stats.tp_drops))
    }

    /// Reads up to `BATCH` frames into `bufs` without blocking, copying at most
    /// `snap_bytes` of each; `lens[i]` is the frame's real length (it may exceed
    /// what was copied). Returns how many of `bufs` hold a frame; frames this host
    /// sent are skipped. With `stamps_ns[i]` the kernel's arrival time of frame `i` in `CLOCK_REALTIME`
    /// nanoseconds (0 if the socket was not opened with [`PacketSocket::open_stamped`]).
    pub fn recv_batch_stamped(
        &self,
        bufs: &mut [[u8; FRAME_BYTES_MAX]],
        lens: &mut [usize],
        snap_bytes: usize,
        stamps_ns: &mut [u64],
    ) -> io::Result<usize> {
        self.recv_into(bufs, lens, snap_bytes, Some(stamps_ns))
    }

    fn recv_into(
        &self,
        bufs: &mut [[u8; FRAME_BYTES_MAX]],
        lens: &mut [usize],
        snap_bytes: usize,
        mut stamps_ns: Option<&mut [u64]>,
    ) -> io::Result<usize> {
        let mut n = bufs.len().min(lens.len()).min(BATCH);
        if let Some(stamps) = stamps_ns.as_deref() {
            n = n.min(stamps.len());
        }
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: zeroed iovec/mmsghdr/sockaddr_ll/control buffers are valid; every
        // pointer below points into arrays that outlive the recvmmsg call, and the
        // control messages are walked with the kernel's CMSG macros within msg_controllen.
        unsafe {
            let mut iovecs: [libc::iovec; BATCH] = std::mem::zeroed();
            let mut addresses: [libc::sockaddr_ll; BATCH] = std::mem::zeroed();
            let mut headers: [libc::mmsghdr; BATCH] = std::mem::zeroed();
            let mut controls: [[u64; CONTROL_WORDS]; BATCH] = [[0; CONTROL_WORDS]; BATCH];
            for i in 0..n {
                iovecs[i].iov_base = bufs[i].as_mut_ptr().cast();
                iovecs[i].iov_len = snap_bytes.min(FRAME_BYTES_MAX);
                headers[i].msg_hdr.msg_iov = &mut iovecs[i];
                headers[i].msg_hdr.msg_iovlen = 1;
                headers[i].msg_hdr.msg_name = (&mut addresses[i] as *mut libc::sockaddr_ll).cast();
                headers[i].msg_hdr.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
                if stamps_ns.is_some() {
                    headers[i].msg_hdr.msg_control = controls[i].as_mut_ptr().cast();
                    headers[i].msg_hdr.msg_controllen = size_of::<[u64; CONTROL_WORDS]>();
                }
            }
            let got = libc::recvmmsg(
                self.fd.as_raw_fd(),
                headers.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            );
            if got < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                    _ => Err(e),
                };
            }
            let got = got as usize;
            // Compact away frames we see only because they left through this port.
            let mut kept = 0;
            for i in 0..got {
                if !self.ignores_outgoing && addresses[i].sll_pkttype == libc::PACKET_OUTGOING {
                    continue;
                }
                if kept != i {
                    bufs.copy_within(i..i + 1, kept);
                }
                lens[kept] = headers[i].msg_len as usize;
                if let Some(stamps) = stamps_ns.as_deref_mut() {
                    stamps[kept] = arrival_ns(&headers[i].msg_hdr);
                }
                kept += 1;
            }
            Ok(kept)
        }
    }

    /// Sends whole frames in order with one system call (`sendmmsg`), at most
    /// [`BATCH`]; returns how many left, fewer when the device became busy (retry
    /// the rest later).
    pub fn send_batch<'a>(&self, frames: impl IntoIterator<Item = &'a [u8]>) -> io::Result<usize> {
        // SAFETY: zeroed iovec/mmsghdr are valid; every iovec points into a frame
        // borrowed for the call, and every header at its own iovec.
        unsafe {
            let mut iovecs: [libc::iovec; BATCH] = std::mem::zeroed();
            let mut headers: [libc::mmsghdr; BATCH] = std::mem::zeroed();
            let mut n = 0;
            for frame in frames.into_iter().take(BATCH) {
                iovecs[n].iov_base = frame.as_ptr().cast_mut().cast();
                iovecs[n].iov_len = frame.len();
                headers[n].msg_hdr.msg_iov = &mut iovecs[n];
                headers[n].msg_hdr.msg_iovlen = 1;
                n += 1;
            }
            if n == 0 {
                return Ok(0);
            }
            let sent = libc::sendmmsg(
                self.fd.as_raw_fd(),
                headers.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            );
            if sent < 0 {
                return busy_or_error(io::Error::last_os_error()).map(|()| 0);
            }
            Ok(sent as usize)
        }
    }

    /// Sends one whole frame. `Ok(false)`: the device is busy (retry later).
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
        // SAFETY: the buffer is valid for its length for the duration of the call.
        let rc = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            return busy_or_error(io::Error::last_os_error()).map(|()| false);
        }
        Ok(true)
    }
}

/// Bytes of one slot of an [`RxRing`]: a `tpacket2_hdr`, the address, a
/// virtio-net header and an MTU-sized Ethernet frame (VLAN tag included), with room.
/// Larger frames (GSO sends, jumbo frames) come whole through the socket instead.
const RING_SLOT_BYTES: usize = 2048;
/// Slots per ring block: one block is one contiguous kernel allocation.
const RING_BLOCK_BYTES: usize = 64 << 10;

/// A received frame: its bytes behind a virtio-net header, and its real length
/// (header included). `bytes` is shorter than `len` when the frame is larger than
/// [`FRAME_BYTES_MAX`], or when it was larger than a ring slot and the kernel had
/// no room to queue it whole (`cut_for_room`): either way not the whole frame.
pub struct RxFrame<'a> {
    pub bytes: &'a [u8],
    pub len: usize,
    pub cut_for_room: bool,
}

/// An AF_PACKET socket with a receive ring (`PACKET_RX_RING`, `TPACKET_V2`) shared
/// with the kernel: the kernel copies each frame into the next free slot in the
/// sender's own softirq, and reading it is a load from memory, with no system call,
/// no socket buffer and no skb to free on the reader's core (they were 35% of the
/// engine's time with `recvmmsg`). A frame larger than a slot also goes whole to
/// the socket's queue (`PACKET_COPY_THRESH`, `TP_STATUS_COPY` on its slot) and is
/// read from there, in its turn. Slots carry a `TPACKET_V2` status each, so a frame
/// is readable as soon as it is written (`TPACKET_V3`'s blocks are handed over
/// only when full or after a timeout of at least 1 ms: a latency probe's frame
/// would wait for it).
pub struct RxRing {
    socket: PacketSocket,
    area: std::ptr::NonNull<u8>,
    area_bytes: usize,
    slots: usize,
    next: usize,
    whole: Box<[u8]>,
}

// SAFETY: the ring's memory is owned by this value alone (the kernel writes only
// to slots it marks as its own); moving it to another thread moves that ownership.
unsafe impl Send for RxRing {}

impl RxRing {
    /// A socket bound to interface `name`, with a ring of
    /// about `ring_bytes` (at least one block) and a socket buffer of `rcvbuf_bytes`
    /// for the frames too large for a slot.
    pub fn open_vnet(name: &str, ring_bytes: usize, rcvbuf_bytes: usize) -> io::Result<RxRing> {
        // Receiving nothing until the ring is in place: a frame queued to the socket
        // before would be read as the whole of a later slot's frame.
        let socket = PacketSocket::open_bound(name, rcvbuf_bytes, true, 0)?;
        let fd = socket.raw_fd();
        set_int(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V2 as libc::c_int,
        )?;
        set_int(fd, libc::SOL_PACKET, libc::PACKET_COPY_THRESH, 1)?;
        let blocks = ring_bytes.div_ceil(RING_BLOCK_BYTES).max(1);
        let slots_per_block = RING_BLOCK_BYTES / RING_SLOT_BYTES;
        let request = libc::tpacket_req {
            tp_block_size: RING_BLOCK_BYTES as libc::c_uint,
            tp_block_nr: blocks as libc::c_uint,
            tp_frame_size: RING_SLOT_BYTES as libc::c_uint,
            tp_frame_nr: (blocks * slots_per_block) as libc::c_uint,
        };
        // SAFETY: the request is a tpacket_req of the size passed, alive for the call.
        check(unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_RX_RING,
                (&request as *const libc::tpacket_req).cast(),
                size_of::<libc::tpacket_req>() as libc::socklen_t,
            )
        })?;
        let area_bytes = blocks * RING_BLOCK_BYTES;
        // SAFETY: maps the ring the kernel just allocated for this socket; the
        // mapping is unmapped in Drop, before the socket closes.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                area_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if area == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ring = RxRing {
            socket,
            area: std::ptr::NonNull::new(area.cast()).expect("mmap succeeded"),
            area_bytes,
            slots: blocks * slots_per_block,
            next: 0,
            whole: vec![0; FRAME_BYTES_MAX].into_boxed_slice(),
        };
        ring.socket.bind(ifindex(name)?, libc::ETH_P_ALL as u16)?;
        Ok(ring)
    }

    pub fn socket(&self) -> &PacketSocket {
        &self.socket
    }

    /// Hands up to `max` waiting frames to `on_frame`, in arrival order, and returns
    /// how many it handed; frames this host sent are skipped. Never blocks.
    pub fn recv(&mut self, max: usize, mut on_frame: impl FnMut(RxFrame<'_>)) -> io::Result<usize> {
        use std::sync::atomic::{AtomicU32, Ordering};
        let mut handed = 0;
        while handed < max {
            // SAFETY: `next < slots`, so the slot lies inside the mapping; its
            // status word is 4-aligned (slots are 16-aligned) and shared with the
            // kernel, hence atomic; the kernel leaves a slot alone until its status
            // goes back to TP_STATUS_KERNEL, which happens only below, after the
            // last read of its bytes (Release).
            let slot = unsafe { self.area.as_ptr().add(self.next * RING_SLOT_BYTES) };
            let status = unsafe { &*slot.cast::<AtomicU32>() };
            let flags = status.load(Ordering::Acquire);
            if flags & libc::TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the slot is ours (TP_STATUS_USER) and starts with its header.
            let header = unsafe { std::ptr::read(slot.cast::<libc::tpacket2_hdr>()) };
            let address = unsafe {
                std::ptr::read_unaligned(
                    slot.add(libc::TPACKET_ALIGN(size_of::<libc::tpacket2_hdr>()))
                        .cast::<libc::sockaddr_ll>(),
                )
            };
            let outgoing =
                !self.socket.ignores_outgoing && address.sll_pkttype == libc::PACKET_OUTGOING;
            let result = if flags & libc::TP_STATUS_COPY != 0 {
                // The whole frame waits in the socket's queue, in its turn.
                self.recv_whole()
            } else {
                Ok(None)
            };
            if !outgoing {
                match result {
                    Ok(Some(len)) => on_frame(RxFrame {
                        bytes: &self.whole[..len.min(self.whole.len())],
                        len,
                        cut_for_room: false,
                    }),
                    Ok(None) => {
                        let mac = usize::from(header.tp_mac);
                        let start = mac.saturating_sub(VNET_HDR_BYTES);
                        let stored = header.tp_snaplen as usize;
                        // SAFETY: the kernel wrote `tp_snaplen` bytes at `tp_mac` and
                        // the virtio-net header just before it, inside the slot.
                        let bytes = unsafe {
                            std::slice::from_raw_parts(
                                slot.add(start),
                                (mac + stored).min(RING_SLOT_BYTES) - start,
                            )
                        };
                        let len = header.tp_len as usize + VNET_HDR_BYTES;
                        on_frame(RxFrame {
                            bytes,
                            len,
                            cut_for_room: bytes.len() < len,
                        });
                    }
                    Err(e) => {
                        status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
                        return Err(e);
                    }
                }
                handed += 1;
            }
            status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.next = (self.next + 1) % self.slots;
        }
        Ok(handed)
    }

    /// Reads the frame at the head of the socket's queue whole into `self.whole`;
    /// its length, or `None` if the queue was empty (the kernel had no room to
    /// queue it: only the slot's part of it exists).
    fn recv_whole(&mut self) -> io::Result<Option<usize>> {
        // SAFETY: the buffer is valid for its length for the duration of the call.
        let rc = unsafe {
            libc::recv(
                self.socket.raw_fd(),
                self.whole.as_mut_ptr().cast(),
                self.whole.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(rc as usize))
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open_vnet`, unmapped once.
        unsafe {
            libc::munmap(self.area.as_ptr().cast(), self.area_bytes);
        }
    }
}

/// Waits on a fixed set of sockets; built once, so waiting allocates nothing.
pub struct Poller {
    fds: Vec<libc::pollfd>,
}

impl Poller {
    pub fn new(fds: &[RawFd]) -> Poller {
        Poller {
            fds: fds
                .iter()
                .map(|&fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect(),
        }
    }

    /// Waits until a socket is readable or `timeout_ns` passes (`ppoll`, with
    /// nanosecond resolution).
    pub fn wait(&mut self, timeout_ns: u64) -> io::Result<()> {
        let timeout = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: fds and timeout live for the call; a null sigmask keeps ours.
        let rc = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                &timeout,
                std::ptr::null(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame behind an all-zero virtio-net header (no offload): to the
    /// loopback's MAC (zero, so it comes back in to this host), ethertype
    /// 0x88b5, `len` bytes in all after the header, numbered.
    fn frame(len: usize, mark: u8) -> Vec<u8> {
        let mut bytes = vec![0u8; VNET_HDR_BYTES + len];
        bytes[VNET_HDR_BYTES + 12..VNET_HDR_BYTES + 14].copy_from_slice(&[0x88, 0xb5]);
        for (i, b) in bytes[VNET_HDR_BYTES + 14..].iter_mut().enumerate() {
            *b = mark.wrapping_add(i as u8);
        }
        bytes
    }

    fn received(ring: &mut RxRing, max: usize) -> Vec<(Vec<u8>, usize, bool)> {
        let mut got = Vec::new();
        ring.recv(max, |f| {
            got.push((f.bytes[VNET_HDR_BYTES..].to_vec(), f.len, f.cut_for_room));
        })
        .unwrap();
        got
    }

    #[test]
    fn a_ring_hands_over_small_and_large_frames_whole_in_order_and_counts_what_it_dropped() {
        crate::sys::netns::in_new_namespace(|| {
            // One block: 32 slots of 2 KiB.
            let mut ring = RxRing::open_vnet("lo", RING_BLOCK_BYTES, 1 << 20).unwrap();
            let sender = PacketSocket::open_sender("lo").unwrap();
            // 100 B fits a slot; 3000 B and 60000 B do not and come through the
            // socket's queue, in their turn between the others.
            let frames = [
                frame(100, 1),
                frame(3000, 2),
                frame(60, 3),
                frame(60_000, 4),
            ];
            let sent = sender.send_batch(frames.iter().map(Vec::as_slice)).unwrap();
            assert_eq!(sent, 4);
            let got = received(&mut ring, 64);
            assert_eq!(got.len(), 4, "every frame, none twice");
            for ((bytes, len, cut), sent) in got.iter().zip(&frames) {
                assert_eq!(bytes, &sent[VNET_HDR_BYTES..]);
                assert_eq!(*len, sent.len());
                assert!(!cut);
            }
            assert!(received(&mut ring, 64).is_empty(), "nothing more");
            assert_eq!(ring.socket().take_drops().unwrap(), 0);

            // 100 frames into 32 slots, none read meanwhile: the ring keeps the
            // first 32 and the kernel counts the rest as dropped, once.
            let small: Vec<Vec<u8>> = (0..100).map(|i| frame(100, i as u8)).collect();
            let mut sent = 0;
            while sent < small.len() {
                sent += sender
                    .send_batch(small[sent..].iter().map(Vec::as_slice))
                    .unwrap();
            }
            let got = received(&mut ring, 1000);
            assert_eq!(got.len(), 32);
            for (i, (bytes, _, _)) in got.iter().enumerate() {
                assert_eq!(bytes, &small[i][VNET_HDR_BYTES..], "frame {i} in order");
            }
            assert_eq!(ring.socket().take_drops().unwrap(), 68);
            assert_eq!(ring.socket().take_drops().unwrap(), 0, "a new count");
            // The slots are the kernel's again: frames flow as before.
            sender.send_batch([frame(100, 9).as_slice()]).unwrap();
            assert_eq!(received(&mut ring, 64).len(), 1);
        });
    }
}
