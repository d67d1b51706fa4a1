//! Traffic the lab makes itself, on threads inside a namespace, where no packaged
//! tool does what the scenario asks:
//!
//! - `poisson`: UDP datagrams with exponential gaps (iperf3 paces at a constant
//!   rate). Each flow is its own socket and its own seeded stream of gaps; one
//!   thread sends for all flows at absolute planned times, so neither late
//!   wake-ups nor the time spent sending shift the schedule, and the mean rate is
//!   the asked one whatever the machine's load.
//! - memcached GETs: memcached is the real server (in the tenant); this is the load
//!   generator (in the sink), `get KEY` on each connection, closed loop or open loop
//!   at a constant rate, with every request's latency (packaged generators report
//!   only aggregates).

use crate::sys::clock;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Datagrams due within this much of now go out in the same wake-up: a wake-up
/// costs more than a gap below it, and sending up to 20 µs early keeps the rate.
const BATCH_AHEAD_NS: u64 = 20_000;
/// Longest sleep, so that a stop is noticed during long gaps.
const STOP_CHECK_NS: u64 = 10_000_000;
/// Read timeout of the load generator's sockets, for the same reason.
const READ_TIMEOUT: Duration = Duration::from_millis(50);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A reply's first line is `VALUE KEY FLAGS BYTES`, with a key of at most 250 bytes.
const REPLY_LINE_BYTES_MAX: usize = 512;
/// memcached's limit on key length.
const KEY_BYTES_MAX: usize = 250;

/// Exponential gaps of mean `mean_ns` from a stream seeded by `seed`: the gaps of
/// a Poisson process.
pub struct PoissonGaps {
    rng: ChaCha8Rng,
    mean_ns: f64,
}

impl PoissonGaps {
    pub fn new(seed: u64, mean_ns: f64) -> PoissonGaps {
        PoissonGaps {
            rng: ChaCha8Rng::seed_from_u64(seed),
            mean_ns,
        }
    }

    /// The next gap, by inversion of a uniform draw in [0, 1).
    pub fn next_ns(&mut self) -> u64 {
        (-(1.0 - self.rng.random::<f64>()).ln() * self.mean_ns).round() as u64
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PoissonFlow {
    /// Where the flow's socket is bound (port chosen by the kernel).
    pub src: Ipv4Addr,
    pub dst: SocketAddrV4,
    pub seed: u64,
}

/// Datagrams of `payload_bytes` with exponential gaps of mean `mean_gap_ns`, per flow.
#[derive(Clone, Debug, PartialEq)]
pub struct PoissonLoad {
    pub flows: Vec<PoissonFlow>,
    pub payload_bytes: u32,
    pub mean_gap_ns: f64,
}

/// What a generator did by its own count, for the run's checks against the meter
/// and against what the scenario asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Datagrams the kernel took, and their payload bytes (poisson).
    pub sent_datagrams: u64,
    pub sent_bytes: u64,
    /// How long it sent: from its first planned send to its stop.
    pub active_ns: u64,
    /// Reply bytes read from memcached, the `STORED` of the item included.
    pub received_bytes: u64,
    /// Latency of every answered request (memcached).
    pub latencies_ns: Vec<u64>,
}

/// Sends `load` from the calling thread (in the tenant's namespace) until `stop`.
/// `ready` is called once the sockets are bound.
pub fn run_poisson(
    load: &PoissonLoad,
    stop: &AtomicBool,
    ready: impl FnOnce(),
) -> io::Result<Tally> {
    let sockets = load
        .flows
        .iter()
        .map(|f| {
            let socket = UdpSocket::bind((f.src, 0))?;
            socket.connect(f.dst)?;
            Ok(socket)
        })
        .collect::<io::Result<Vec<_>>>()?;
    let mut gaps: Vec<PoissonGaps> = load
        .flows
        .iter()
        .map(|f| PoissonGaps::new(f.seed, load.mean_gap_ns))
        .collect();
    let payload = vec![0u8; load.payload_bytes as usize];
    crate::sys::set_timer_slack_ns(1);
    ready();
    let start_ns = clock::now_ns();
    let mut due: BinaryHeap<Reverse<(u64, usize)>> = gaps
        .iter_mut()
        .enumerate()
        .map(|(i, g)| Reverse((start_ns + g.next_ns(), i)))
        .collect();
    let mut tally = Tally::default();
    while !stop.load(Ordering::Relaxed) {
        let Some(&Reverse((at_ns, flow))) = due.peek() else {
            break;
        };
        let now_ns = clock::now_ns();
        if at_ns > now_ns + BATCH_AHEAD_NS {
            clock::sleep_until_ns(at_ns.min(now_ns + STOP_CHECK_NS))?;
            continue;
        }
        match sockets[flow].send(&payload) {
            Ok(sent) => {
                tally.sent_datagrams += 1;
                tally.sent_bytes += sent as u64;
            }
            Err(e) if crate::sys::is_transient_send_error(&e) => {}
            Err(e) => return Err(e),
        }
        due.pop();
        due.push(Reverse((at_ns + gaps[flow].next_ns(), flow)));
    }
    tally.active_ns = clock::now_ns().saturating_sub(start_ns);
    Ok(tally)
}

/// The key of a memcached traffic's item: `get KEY\r\n` is `request_bytes` long
/// where memcached's key limit allows (7 to 256 bytes), so the request has the
/// scenario's size as well as the response.
pub fn memcached_key(traffic: usize, request_bytes: u32) -> String {
    let mut key = format!("nicsched-{traffic}");
    let wanted = (request_bytes as usize)
        .saturating_sub("get \r\n".len())
        .clamp(key.len(), KEY_BYTES_MAX);
    key.extend(std::iter::repeat_n('.', wanted - key.len()));
    key
}

/// GETs of one preloaded item of `item_bytes` on `connections` connections to
/// `server`: closed loop, or open loop at `rate_per_s` over all connections.
#[derive(Clone, Debug, PartialEq)]
pub struct MemcachedLoad {
    pub server: SocketAddrV4,
    pub key: String,
    pub item_bytes: u32,
    pub connections: u32,
    pub rate_per_s: Option<f64>,
}

/// What the first bytes of a GET reply hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// Not all of it yet.
    Incomplete,
    /// `VALUE KEY FLAGS BYTES\r\n`, the data, `\r\nEND\r\n`: `consumed` bytes in all.
    Value { consumed: usize, bytes: usize },
    /// `END\r\n` alone: the item is not there.
    Miss,
    /// Anything else (`SERVER_ERROR ...`, `ERROR`, a malformed header), as a line.
    Error(String),
}

/// Parses one GET reply from the front of `buf`, which may hold less (a reply split
/// over reads) or more (the next reply) than one reply.
pub fn parse_get_reply(buf: &[u8]) -> Reply {
    let Some(line_end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return if buf.len() > REPLY_LINE_BYTES_MAX {
            Reply::Error(format!(
                "no line end in the first {REPLY_LINE_BYTES_MAX} bytes"
            ))
        } else {
            Reply::Incomplete
        };
    };
    let line = String::from_utf8_lossy(&buf[..line_end]);
    if line == "END" {
        return Reply::Miss;
    }
    let fields: Vec<&str> = line.split(' ').collect();
    let bytes = match fields.as_slice() {
        ["VALUE", _key, _flags, bytes] | ["VALUE", _key, _flags, bytes, _] => bytes.parse().ok(),
        _ => None,
    };
    let Some(bytes) = bytes else {
        return Reply::Error(line.into_owned());
    };
    let data = line_end + 2;
    let consumed = data + bytes + "\r\nEND\r\n".len();
    if buf.len() < consumed {
        return Reply::Incomplete;
    }
    if &buf[data + bytes..consumed] != b"\r\nEND\r\n" {
        return Reply::Error(format!("{line}: the data is not followed by END"));
    }
    Reply::Value { consumed, bytes }
}

/// Stops every connection of a load generator once one fails, or when asked.
struct Halt<'a> {
    stop: &'a AtomicBool,
    failed: AtomicBool,
}

impl Halt<'_> {
    fn now(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.failed.load(Ordering::Relaxed)
    }

    fn check<T>(&self, result: io::Result<T>) -> io::Result<T> {
        if result.is_err() {
            self.failed.store(true, Ordering::Relaxed);
        }
        result
    }
}

/// Replies read from one connection.
struct Replies {
    buf: Vec<u8>,
    chunk: Vec<u8>,
    item_bytes: usize,
    /// Everything read, whole replies or not.
    read_bytes: u64,
}

impl Replies {
    fn new(item_bytes: u32) -> Replies {
        Replies {
            buf: Vec::new(),
            chunk: vec![0; 64 << 10],
            item_bytes: item_bytes as usize,
            read_bytes: 0,
        }
    }

    /// Reads until one whole reply with the item is in; `false` if halted first.
    fn next(&mut self, stream: &mut TcpStream, halt: &Halt) -> io::Result<bool> {
        loop {
            match parse_get_reply(&self.buf) {
                Reply::Value { consumed, bytes } if bytes == self.item_bytes => {
                    self.buf.drain(..consumed);
                    return Ok(true);
                }
                Reply::Value { bytes, .. } => {
                    return Err(io::Error::other(format!(
                        "memcached returned {bytes} B, the item has {} B",
                        self.item_bytes
                    )));
                }
                Reply::Miss => {
                    return Err(io::Error::other(
                        "memcached no longer has the item (evicted? give it more memory)",
                    ));
                }
                Reply::Error(line) => {
                    return Err(io::Error::other(format!("memcached answered `{line}`")));
                }
                Reply::Incomplete => {}
            }
            if halt.now() {
                return Ok(false);
            }
            match stream.read(&mut self.chunk) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "memcached closed the connection",
                    ));
                }
                Ok(n) => {
                    self.read_bytes += n as u64;
                    self.buf.extend_from_slice(&self.chunk[..n]);
                }
                Err(e) if is_retry(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Latencies one connection measured and the bytes it read.
type Answered = (Vec<u64>, u64);

/// A read that found nothing yet (the socket's timeout, or a signal): try again.
fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn connect(server: SocketAddrV4) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&server.into(), CONNECT_TIMEOUT).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot connect to memcached at {server}: {e}"),
        )
    })?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(CONNECT_TIMEOUT))?;
    Ok(stream)
}

/// Stores the item, so that every GET finds it; returns the bytes of the answer.
fn store(stream: &mut TcpStream, key: &str, item_bytes: u32) -> io::Result<u64> {
    let mut command = format!("set {key} 0 0 {item_bytes}\r\n").into_bytes();
    command.resize(command.len() + item_bytes as usize, b'x');
    command.extend_from_slice(b"\r\n");
    stream.write_all(&command)?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 256];
    while !answer.ends_with(b"\r\n") {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) if is_retry(&e) => {}
            Err(e) => return Err(e),
        }
    }
    if answer == b"STORED\r\n" {
        Ok(answer.len() as u64)
    } else {
        Err(io::Error::other(format!(
            "storing the item failed: memcached answered `{}`",
            String::from_utf8_lossy(&answer).trim_end()
        )))
    }
}

/// Runs `load` from the calling thread (in the sink's namespace) until `stop`;
/// returns the latency of every answered request in ns and the bytes read. `ready`
/// is called once every connection is up and the item is stored.
pub fn run_memcached(
    load: &MemcachedLoad,
    stop: &AtomicBool,
    ready: impl FnOnce(),
) -> io::Result<Tally> {
    let mut streams = (0..load.connections.max(1))
        .map(|_| connect(load.server))
        .collect::<io::Result<Vec<_>>>()?;
    let stored_bytes = store(&mut streams[0], &load.key, load.item_bytes)?;
    crate::sys::set_timer_slack_ns(1);
    ready();
    let request = format!("get {}\r\n", load.key).into_bytes();
    let halt = Halt {
        stop,
        failed: AtomicBool::new(false),
    };
    let connections = streams.len() as f64;
    std::thread::scope(|s| {
        let workers: Vec<_> = streams
            .into_iter()
            .enumerate()
            .map(|(c, stream)| {
                let (request, halt) = (&request, &halt);
                s.spawn(move || {
                    halt.check(match load.rate_per_s {
                        None => closed_loop(stream, request, load.item_bytes, halt),
                        Some(rate) => {
                            let gap_ns = 1e9 * connections / rate;
                            let phase_ns = gap_ns * c as f64 / connections;
                            open_loop(stream, request, load.item_bytes, gap_ns, phase_ns, halt)
                        }
                    })
                })
            })
            .collect();
        let mut tally = Tally {
            received_bytes: stored_bytes,
            ..Tally::default()
        };
        for worker in workers {
            let (latencies_ns, read_bytes) = worker
                .join()
                .map_err(|_| io::Error::other("a load generator connection panicked"))??;
            tally.latencies_ns.extend(latencies_ns);
            tally.received_bytes += read_bytes;
        }
        Ok(tally)
    })
}

/// One request at a time: latency from the send to the whole reply.
fn closed_loop(
    mut stream: TcpStream,
    request: &[u8],
    item_bytes: u32,
    halt: &Halt,
) -> io::Result<Answered> {
    let mut replies = Replies::new(item_bytes);
    let mut latencies_ns = Vec::new();
    while !halt.now() {
        let sent_ns = clock::now_ns();
        stream.write_all(request)?;
        if !replies.next(&mut stream, halt)? {
            break;
        }
        latencies_ns.push(clock::now_ns() - sent_ns);
    }
    Ok((latencies_ns, replies.read_bytes))
}

/// Requests at planned times `phase + k * gap`, whatever the replies do; latency
/// from the planned time to the whole reply, so a late sender counts against the
/// server rather than hiding its delay. memcached answers a connection's requests
/// in order, so the replies match the planned times first in, first out.
fn open_loop(
    mut stream: TcpStream,
    request: &[u8],
    item_bytes: u32,
    gap_ns: f64,
    phase_ns: f64,
    halt: &Halt,
) -> io::Result<Answered> {
    let reader = stream.try_clone()?;
    let (planned_tx, planned_rx) = mpsc::channel::<u64>();
    std::thread::scope(|s| {
        let replies =
            s.spawn(move || halt.check(open_loop_replies(reader, item_bytes, planned_rx, halt)));
        let sending = halt.check(open_loop_requests(
            &mut stream,
            request,
            gap_ns,
            phase_ns,
            &planned_tx,
            halt,
        ));
        let latencies_ns = replies
            .join()
            .map_err(|_| io::Error::other("a load generator reader panicked"))?;
        sending.and(latencies_ns)
    })
}

/// The sending half of [`open_loop`].
fn open_loop_requests(
    stream: &mut TcpStream,
    request: &[u8],
    gap_ns: f64,
    phase_ns: f64,
    planned: &mpsc::Sender<u64>,
    halt: &Halt,
) -> io::Result<()> {
    let start_ns = clock::now_ns();
    let mut sent = 0u64;
    while !halt.now() {
        let planned_ns = start_ns + (phase_ns + sent as f64 * gap_ns).round() as u64;
        let now_ns = clock::now_ns();
        if planned_ns > now_ns {
            clock::sleep_until_ns(planned_ns.min(now_ns + STOP_CHECK_NS))?;
            continue;
        }
        // Planned time first: the reply may come before `write_all` returns.
        let _ = planned.send(planned_ns);
        stream.write_all(request)?;
        sent += 1;
    }
    Ok(())
}

/// The reading half of [`open_loop`].
fn open_loop_replies(
    mut reader: TcpStream,
    item_bytes: u32,
    planned: mpsc::Receiver<u64>,
    halt: &Halt,
) -> io::Result<Answered> {
    let mut replies = Replies::new(item_bytes);
    let mut latencies_ns = Vec::new();
    while replies.next(&mut reader, halt)? {
        let planned_ns = planned
            .try_recv()
            .map_err(|_| io::Error::other("memcached answered a request never sent"))?;
        latencies_ns.push(clock::now_ns().saturating_sub(planned_ns));
    }
    Ok((latencies_ns, replies.read_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_gaps_are_exponential_with_the_mean_asked() {
        let mean_ns = 120_000.0;
        let mut gaps = PoissonGaps::new(7, mean_ns);
        let n = 200_000;
        let drawn: Vec<f64> = (0..n).map(|_| gaps.next_ns() as f64).collect();
        let mean = drawn.iter().sum::<f64>() / n as f64;
        let variance = drawn.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean / mean_ns - 1.0).abs() < 0.01, "mean {mean}");
        // An exponential's standard deviation equals its mean.
        assert!(
            (variance.sqrt() / mean - 1.0).abs() < 0.02,
            "sd {}",
            variance.sqrt()
        );
        // P(gap > t) = exp(-t / mean), at the mean and at three means.
        for (k, expected) in [(1.0, (-1.0f64).exp()), (3.0, (-3.0f64).exp())] {
            let above = drawn.iter().filter(|&&g| g > k * mean_ns).count() as f64 / n as f64;
            assert!(
                (above - expected).abs() < 0.005,
                "P(gap > {k} means) = {above}, expected {expected}"
            );
        }
        // The same seed gives the same gaps, another seed others.
        let mut again = PoissonGaps::new(7, mean_ns);
        assert!(drawn[..100].iter().all(|&g| g == again.next_ns() as f64));
        let mut other = PoissonGaps::new(8, mean_ns);
        assert!(drawn[..100].iter().any(|&g| g != other.next_ns() as f64));
    }

    #[test]
    fn keys_make_requests_of_the_asked_size() {
        for (request, key_bytes) in [(64, 58), (7, 10), (0, 10), (1000, 250)] {
            let key = memcached_key(3, request);
            assert_eq!(key.len(), key_bytes, "request {request}");
            assert!(key.starts_with("nicsched-3"));
            assert!(key.bytes().all(|b| b.is_ascii_graphic()), "{key}");
        }
        assert_eq!(format!("get {}\r\n", memcached_key(0, 64)).len(), 64);
        assert_ne!(memcached_key(1, 64), memcached_key(2, 64));
    }

    #[test]
    fn get_replies_parse_whole_split_and_back_to_back() {
        let reply = b"VALUE k 0 5\r\nhello\r\nEND\r\n";
        let whole = Reply::Value {
            consumed: reply.len(),
            bytes: 5,
        };
        assert_eq!(parse_get_reply(reply), whole);
        // Cut anywhere, it is incomplete; never an error or a wrong length.
        for cut in 0..reply.len() {
            assert_eq!(
                parse_get_reply(&reply[..cut]),
                Reply::Incomplete,
                "cut {cut}"
            );
        }
        // The next reply behind it is left for later.
        let mut two = reply.to_vec();
        two.extend_from_slice(reply);
        assert_eq!(parse_get_reply(&two), whole);
        // Data that holds \r\n and END is data: the length says where it ends.
        let tricky = b"VALUE k 0 7\r\nEND\r\n\r\n\r\nEND\r\n";
        assert_eq!(
            parse_get_reply(tricky),
            Reply::Value {
                consumed: tricky.len(),
                bytes: 7
            }
        );
        // With a CAS field (`gets`).
        assert!(matches!(
            parse_get_reply(b"VALUE k 0 1 99\r\nx\r\nEND\r\n"),
            Reply::Value { bytes: 1, .. }
        ));
        let empty = b"VALUE k 0 0\r\n\r\nEND\r\n";
        assert!(matches!(
            parse_get_reply(empty),
            Reply::Value { bytes: 0, .. }
        ));
    }

    #[test]
    fn misses_errors_and_garbage_are_named() {
        assert_eq!(parse_get_reply(b"END\r\n"), Reply::Miss);
        assert_eq!(
            parse_get_reply(b"SERVER_ERROR out of memory\r\n"),
            Reply::Error("SERVER_ERROR out of memory".into())
        );
        assert_eq!(parse_get_reply(b"ERROR\r\n"), Reply::Error("ERROR".into()));
        assert!(matches!(
            parse_get_reply(b"VALUE k 0 many\r\n"),
            Reply::Error(_)
        ));
        // The length disagrees with where END is.
        assert!(matches!(
            parse_get_reply(b"VALUE k 0 2\r\nhello\r\nEND\r\n"),
            Reply::Error(_)
        ));
        // A first line that never ends.
        assert!(matches!(parse_get_reply(&[b'V'; 600]), Reply::Error(_)));
        assert_eq!(parse_get_reply(&[b'V'; 100]), Reply::Incomplete);
    }
}
