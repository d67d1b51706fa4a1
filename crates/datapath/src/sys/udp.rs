//! UDP sockets for the engine benchmark: senders that push batches of datagrams with
//! one `sendmmsg` each, and the sink's socket that keeps the datagrams from turning
//! into ICMP "port unreachable" replies.

use std::io;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

/// Datagrams per `sendmmsg` call.
pub const SEND_BATCH: usize = 64;

/// One connected UDP socket per flow, each from its own ephemeral source port, so
/// that every flow is its own 5-tuple.
pub struct UdpSender {
    sockets: Vec<UdpSocket>,
}

impl UdpSender {
    /// `flows` sockets in the calling thread's namespace, each connected to `to`.
    pub fn connect(to: SocketAddrV4, flows: usize) -> io::Result<UdpSender> {
        let sockets = (0..flows.max(1))
            .map(|_| {
                let socket = UdpSocket::bind("0.0.0.0:0")?;
                socket.connect(to)?;
                Ok(socket)
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(UdpSender { sockets })
    }

    pub fn flows(&self) -> usize {
        self.sockets.len()
    }

    /// Sends up to [`SEND_BATCH`] copies of `payload` on flow `flow` with one
    /// `sendmmsg`, without blocking; returns how many datagrams the kernel took (0
    /// when the socket's buffer is full or the destination refused).
    pub fn send_batch(&self, flow: usize, payload: &[u8], count: usize) -> io::Result<usize> {
        let n = count.min(SEND_BATCH);
        // SAFETY: zeroed iovec/mmsghdr are valid; every iovec points at `payload`,
        // which the kernel only reads and which outlives the call.
        let sent = unsafe {
            let mut iovecs: [libc::iovec; SEND_BATCH] = std::mem::zeroed();
            let mut headers: [libc::mmsghdr; SEND_BATCH] = std::mem::zeroed();
            for i in 0..n {
                iovecs[i].iov_base = payload.as_ptr() as *mut libc::c_void;
                iovecs[i].iov_len = payload.len();
                headers[i].msg_hdr.msg_iov = &mut iovecs[i];
                headers[i].msg_hdr.msg_iovlen = 1;
            }
            libc::sendmmsg(
                self.sockets[flow].as_raw_fd(),
                headers.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if sent < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN)
                | Some(libc::ENOBUFS)
                | Some(libc::EINTR)
                | Some(libc::ECONNREFUSED) => Ok(0),
                _ => Err(e),
            };
        }
        Ok(sent as usize)
    }
}

/// A UDP socket bound to `at` in the calling thread's namespace, never read: the
/// datagrams that reach it fill its buffer and are dropped there, cheaply, instead
/// of each being answered with an ICMP error.
pub fn bind_sink(at: SocketAddrV4) -> io::Result<UdpSocket> {
    UdpSocket::bind(at)
}
