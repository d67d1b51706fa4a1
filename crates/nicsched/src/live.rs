//! The live view of `nicsched lab` (docs/live.md): while a run
//! goes, iperf3-style lines on stderr, one per tenant and a sum each reporting
//! interval, and with `--metrics-listen` the same figures as Prometheus metrics on
//! loopback. Both hear what the lab hands over ([`lab::Watch`]): the meter's bytes of
//! each measured interval, the ideal the record holds for it, the engine's drops so
//! far. Nothing here measures; a line's Mbit/s are the bytes the run's figures get.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use indicatif::ProgressBar;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use report::RunRecord;
use run::Failure;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use tokio::task::AbortHandle;

/// `--interval` when not given: iperf3's.
pub const LINE_EVERY_NS_DEFAULT: u64 = 1_000_000_000;
/// `--interval` at most, in seconds.
pub const LINE_EVERY_S_MAX: f64 = 3600.0;

/// What the live view of one `nicsched lab` command shows.
pub struct LiveOptions {
    /// Lines on stderr (not with `-q` or `--no-live`).
    pub lines: bool,
    /// `--interval`, in ns: rounded to a whole number of the scenario's intervals.
    pub line_every_ns: u64,
    /// `--metrics-listen`, bound before anything runs.
    pub metrics: Option<Arc<Metrics>>,
}

impl LiveOptions {
    /// Measurement intervals of `record_interval_ns` per line: the nearest whole
    /// number to `--interval`, at least one.
    pub fn intervals_per_line(&self, record_interval_ns: u64) -> usize {
        let per_line = (self.line_every_ns as f64 / record_interval_ns.max(1) as f64).round();
        (per_line as usize).max(1)
    }

    /// The line that says what the lines are, before the first run's.
    pub fn header(&self, record_interval_ns: u64) -> String {
        let per_line = self.intervals_per_line(record_interval_ns);
        format!(
            "live: every {} ({per_line} measured interval(s) of {}): each tenant's Mbit/s at the sink against its ideal, the engine's drops meanwhile; latency p99 after each run (sockperf and memcached report at their end)",
            policy::format_time(record_interval_ns * per_line as u64),
            policy::format_time(record_interval_ns),
        )
    }
}

/// `--interval SECONDS`.
pub fn line_every(text: &str) -> Result<u64, String> {
    crate::seconds_up_to(text, LINE_EVERY_S_MAX).map(|s| (s * 1e9).round() as u64)
}

/// `--metrics-listen ADDR`: a loopback address only, since anyone who reaches the
/// port reads the run, and nothing asks who they are.
pub fn loopback_address(text: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = text
        .parse()
        .map_err(|_| format!("`{text}` is not IP:PORT (e.g. 127.0.0.1:9464, [::1]:0)"))?;
    if addr.ip().is_loopback() {
        Ok(addr)
    } else {
        Err(format!(
            "{} is not a loopback address: the metrics have no authentication, so they are served on 127.0.0.1 or ::1 only (scrape from elsewhere through an SSH tunnel)",
            addr.ip()
        ))
    }
}

/// One tenant's figures over a line's intervals.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantFigures {
    pub name: String,
    pub measured_bps: f64,
    pub ideal_bps: f64,
    /// Dropped meanwhile; `None` where only the end of the run tells.
    pub drops: Option<u64>,
}

/// The figures of one line: intervals `[start_ns, end_ns)` of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub start_ns: u64,
    pub end_ns: u64,
    pub tenants: Vec<TenantFigures>,
}

impl Line {
    /// The figures of `intervals` of `record`, the rates weighted by each interval's
    /// length (the last of a run may be shorter); `drops` per tenant meanwhile.
    pub fn of(record: &RunRecord, intervals: Range<usize>, drops: Option<&[u64]>) -> Line {
        let measured = &record.intervals[intervals];
        let length_s: f64 = measured.iter().map(report::Interval::length_s).sum();
        let mean = |rate: &dyn Fn(&report::Interval) -> f64| {
            if length_s > 0.0 {
                measured.iter().map(|i| rate(i) * i.length_s()).sum::<f64>() / length_s
            } else {
                0.0
            }
        };
        Line {
            start_ns: measured.first().map_or(0, |i| i.start_ns),
            end_ns: measured.last().map_or(0, |i| i.end_ns),
            tenants: record
                .tenants
                .iter()
                .enumerate()
                .map(|(t, name)| TenantFigures {
                    name: name.clone(),
                    measured_bps: mean(&|i| record.tenant_throughput_bps(i, t)),
                    ideal_bps: mean(&|i| i.tenant_ideal_bps(t)),
                    drops: drops.map(|d| d[t]),
                })
                .collect(),
        }
    }

    /// One line per tenant and a `[sum]` line, iperf3's way:
    /// `ENFORCER  START-END s  TENANT  MBIT Mbit/s  ideal MBIT Mbit/s  drops N`
    /// (`drops -` where only the end of the run tells).
    pub fn text(&self, enforcer: &str) -> Vec<String> {
        let sum = TenantFigures {
            name: "[sum]".to_string(),
            measured_bps: self.tenants.iter().map(|t| t.measured_bps).sum(),
            ideal_bps: self.tenants.iter().map(|t| t.ideal_bps).sum(),
            drops: self.tenants.iter().map(|t| t.drops).sum(),
        };
        let width = self
            .tenants
            .iter()
            .chain([&sum])
            .map(|t| t.name.len())
            .max()
            .unwrap_or(0);
        let time = format!(
            "{:.2}-{:.2} s",
            self.start_ns as f64 / 1e9,
            self.end_ns as f64 / 1e9
        );
        self.tenants
            .iter()
            .chain([&sum])
            .map(|t| {
                format!(
                    "{enforcer} {time:>13}  {:<width$} {:>9.2} Mbit/s  ideal {:>9.2} Mbit/s  drops {}",
                    t.name,
                    t.measured_bps / 1e6,
                    t.ideal_bps / 1e6,
                    t.drops.map_or("-".to_string(), |d| d.to_string()),
                )
            })
            .collect()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabels {
    enforcer: String,
    tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    enforcer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TrafficLabels {
    enforcer: String,
    traffic: String,
}

type GaugeF64 = Gauge<f64, AtomicU64>;

/// The metrics `--metrics-listen` serves: per enforcer run so far in a `nicsched
/// lab` command (an enforcer's stay at their last values once its run is over),
/// or of the mechanism `nicsched watch` follows. The names are the same for both,
/// so that one dashboard reads either; what each figure is of, the help says.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    throughput_bps: Family<TenantLabels, GaugeF64>,
    ideal_bps: Family<TenantLabels, GaugeF64>,
    bytes: Family<TenantLabels, Counter>,
    drops: Family<TenantLabels, Counter>,
    backlogged: Family<TenantLabels, Gauge>,
    elapsed_s: Family<RunLabels, GaugeF64>,
    duration_s: Family<RunLabels, GaugeF64>,
    latency_p99_s: Family<TrafficLabels, GaugeF64>,
}

/// The content type of [`Metrics::encode`]: OpenMetrics text, which Prometheus reads.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the metrics every source serves are of, in their help's words.
struct Help {
    throughput: &'static str,
    ideal: &'static str,
    bytes: &'static str,
    drops: &'static str,
    elapsed: &'static str,
}

impl Metrics {
    /// The families every source sets, registered with `help`; the others,
    /// unregistered, are not served.
    fn registered(help: &Help) -> Metrics {
        let mut metrics = Metrics {
            registry: Registry::default(),
            throughput_bps: Family::default(),
            ideal_bps: Family::default(),
            bytes: Family::default(),
            drops: Family::default(),
            backlogged: Family::default(),
            elapsed_s: Family::default(),
            duration_s: Family::default(),
            latency_p99_s: Family::default(),
        };
        let registry = &mut metrics.registry;
        registry.register(
            "nicsched_tenant_throughput_bits_per_second",
            help.throughput,
            metrics.throughput_bps.clone(),
        );
        registry.register(
            "nicsched_tenant_ideal_bits_per_second",
            help.ideal,
            metrics.ideal_bps.clone(),
        );
        registry.register("nicsched_tenant_bytes", help.bytes, metrics.bytes.clone());
        registry.register("nicsched_tenant_drops", help.drops, metrics.drops.clone());
        registry.register(
            "nicsched_run_elapsed_seconds",
            help.elapsed,
            metrics.elapsed_s.clone(),
        );
        metrics
    }

    /// `nicsched watch`'s: each tenant's figures of the last interval from the
    /// kernel's counters, `enforcer` the mechanism watched.
    pub fn watch() -> Metrics {
        let mut metrics = Metrics::registered(&Help {
            throughput: "The tenant's throughput over the last interval (--interval): what its apps' classes sent, in Ethernet frames as the kernel counts them",
            ideal: "The tenant's ideal allocation over the last interval, for what the tenants asked in it",
            bytes: "Bytes the tenant's apps' classes sent since watch began (Ethernet frames)",
            drops: "Packets the tenant's apps' classes dropped since watch began",
            elapsed: "Seconds since watch began, at the end of the last interval",
        });
        metrics.registry.register(
            "nicsched_tenant_backlogged",
            "1 when the tenant was backlogged in the last interval (a class of its apps held a backlog at its end, or dropped or went over its ceil in it), else 0",
            metrics.backlogged.clone(),
        );
        metrics
    }
}

impl Default for Metrics {
    /// `nicsched lab`'s.
    fn default() -> Self {
        let mut metrics = Metrics::registered(&Help {
            throughput: "The tenant's L3 throughput at the sink over the last reporting interval (--interval)",
            ideal: "The tenant's ideal allocation over the last reporting interval",
            bytes: "L3 bytes of the tenant the sink received in the measured intervals so far",
            drops: "The tenant's frames the engine dropped so far (not served under linux-htb, whose drops the kernel tells after the run)",
            elapsed: "Seconds of the scenario run so far",
        });
        metrics.registry.register(
            "nicsched_run_duration_seconds",
            "Seconds the scenario runs",
            metrics.duration_s.clone(),
        );
        metrics.registry.register(
            "nicsched_latency_p99_seconds",
            "99th percentile of the traffic's request latency, once its run is over",
            metrics.latency_p99_s.clone(),
        );
        metrics
    }
}

impl Metrics {
    /// The exposition, in OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String does not fail");
        text
    }

    fn tenant(enforcer: &str, tenant: &str) -> TenantLabels {
        TenantLabels {
            enforcer: enforcer.to_string(),
            tenant: tenant.to_string(),
        }
    }

    fn run(enforcer: &str) -> RunLabels {
        RunLabels {
            enforcer: enforcer.to_string(),
        }
    }

    fn started(&self, enforcer: &str, duration_ns: u64) {
        self.duration_s
            .get_or_create(&Self::run(enforcer))
            .set(duration_ns as f64 / 1e9);
    }

    fn progress(&self, enforcer: &str, elapsed_ns: u64) {
        self.elapsed_s
            .get_or_create(&Self::run(enforcer))
            .set(elapsed_ns as f64 / 1e9);
    }

    /// Adds interval `k` of `record` and the drops since the last one.
    fn interval(&self, enforcer: &str, record: &RunRecord, k: usize, new_drops: Option<&[u64]>) {
        let interval = &record.intervals[k];
        for (t, name) in record.tenants.iter().enumerate() {
            let labels = Self::tenant(enforcer, name);
            let bytes: u64 = record
                .class_tenant
                .iter()
                .zip(&interval.class_bytes)
                .filter(|&(&owner, _)| owner == t)
                .map(|(_, &b)| b)
                .sum();
            self.bytes.get_or_create(&labels).inc_by(bytes);
            if let Some(drops) = new_drops {
                self.drops.get_or_create(&labels).inc_by(drops[t]);
            }
        }
    }

    fn line(&self, enforcer: &str, line: &Line) {
        for t in &line.tenants {
            let labels = Self::tenant(enforcer, &t.name);
            self.throughput_bps
                .get_or_create(&labels)
                .set(t.measured_bps);
            self.ideal_bps.get_or_create(&labels).set(t.ideal_bps);
        }
    }

    /// A line of `nicsched enforce`, `elapsed_ns` after it attached: the line's
    /// figures, and per tenant the bytes it sent meanwhile.
    pub fn enforced(&self, enforcer: &str, line: &Line, sent_bytes: &[u64], elapsed_ns: u64) {
        self.progress(enforcer, elapsed_ns);
        self.line(enforcer, line);
        for (t, bytes) in line.tenants.iter().zip(sent_bytes) {
            let labels = Self::tenant(enforcer, &t.name);
            self.bytes.get_or_create(&labels).inc_by(*bytes);
            self.drops
                .get_or_create(&labels)
                .inc_by(t.drops.unwrap_or(0));
        }
    }

    /// The latency of each traffic of `record`, once its run is over.
    fn finished(&self, record: &RunRecord) {
        for latency in &record.latency {
            self.latency_p99_s
                .get_or_create(&TrafficLabels {
                    enforcer: record.enforcer.clone(),
                    traffic: latency.traffic.clone(),
                })
                .set(report::latency_us_at(&latency.histogram_ns, 0.99) / 1e6);
        }
    }

    /// An interval of `nicsched watch` of `mechanism`: the gauges its figures,
    /// the counters advanced by its bytes and drops.
    pub fn watched(&self, mechanism: &str, sample: &realhost::Sample) {
        for tenant in &sample.tenants {
            let labels = Self::tenant(mechanism, &tenant.name);
            self.throughput_bps
                .get_or_create(&labels)
                .set(tenant.throughput_bps);
            self.ideal_bps.get_or_create(&labels).set(tenant.ideal_bps);
            self.bytes.get_or_create(&labels).inc_by(tenant.bytes);
            self.drops.get_or_create(&labels).inc_by(tenant.drops);
            self.backlogged
                .get_or_create(&labels)
                .set(i64::from(tenant.backlogged));
        }
        self.elapsed_s
            .get_or_create(&Self::run(mechanism))
            .set(sample.time_s);
    }
}

/// How long one connection to `--metrics-listen` may last, from its accept to the
/// last byte of its answer: Prometheus's default scrape timeout, past which nobody
/// waits for the answer anyway. A client that sends or reads slowly costs its own
/// connection for that long and no more.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);
/// Connections held at once. One more closes the one held longest, so that clients
/// that connect and say nothing never keep a scrape out, and a flood of them costs
/// the lab no file descriptors beyond these.
const CONNECTIONS_MAX: usize = 64;
/// The request head read at most; a scrape's is a few hundred bytes. hyper's least.
const REQUEST_BYTES_MAX: usize = 8192;
/// The wait before accepting again when accepting failed for want of resources
/// (file descriptors, memory), which an immediate retry would not find either.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// What one client may cost the endpoint.
#[derive(Clone, Copy, Debug)]
struct Limits {
    deadline: Duration,
    connections: usize,
}

/// `--metrics-listen ADDR`: binds ADDR (status 2 if it cannot) and serves
/// `metrics` there until the process exits, saying where on stderr.
pub fn listen(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<(), Failure> {
    let listener = TcpListener::bind(addr).map_err(|e| {
        Failure::input(format!(
            "--metrics-listen {addr}: {e}; choose another port, or port 0 for a free one"
        ))
    })?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::runtime(format!("--metrics-listen {addr}: {e}")))?;
    serve(listener, metrics);
    eprintln!("metrics: http://{bound}/metrics");
    Ok(())
}

/// Serves `metrics` on `listener` (GET /metrics) from a thread of its own until
/// the process exits.
fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    serve_within(
        listener,
        metrics,
        Limits {
            deadline: CONNECTION_DEADLINE,
            connections: CONNECTIONS_MAX,
        },
    );
}

fn serve_within(listener: TcpListener, metrics: Arc<Metrics>, limits: Limits) {
    std::thread::Builder::new()
        .name("nicsched-metrics".into())
        .spawn(move || {
            let served = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()
                .and_then(|runtime| runtime.block_on(accept(listener, metrics, limits)));
            if let Err(e) = served {
                eprintln!("metrics: no longer served: {e}");
            }
        })
        .expect("a thread can be started");
}

/// Accepts connections for ever, each answered by a task of its own within
/// `limits`.
async fn accept(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    limits: Limits,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let mut held: VecDeque<AbortHandle> = VecDeque::new();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) if is_the_clients(&e) => continue,
            Err(_) => {
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        held.retain(|connection| !connection.is_finished());
        if held.len() >= limits.connections
            && let Some(longest) = held.pop_front()
        {
            longest.abort();
        }
        let connection = tokio::spawn(answer_within(stream, metrics.clone(), limits.deadline));
        held.push_back(connection.abort_handle());
    }
}

/// An error of accepting that one client caused, gone with it.
fn is_the_clients(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
    )
}

/// One request on `stream`, answered, or the connection dropped (which closes it)
/// at `deadline`.
async fn answer_within(stream: tokio::net::TcpStream, metrics: Arc<Metrics>, deadline: Duration) {
    let connection = http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(REQUEST_BYTES_MAX)
        .serve_connection(
            TokioIo::new(stream),
            service_fn(move |request| {
                std::future::ready(Ok::<_, Infallible>(answer(&request, &metrics)))
            }),
        );
    // The connection's own errors (a client gone mid-request, a malformed head,
    // which hyper answered with 400) end that connection only.
    let _ = tokio::time::timeout(deadline, connection).await;
}

fn answer<B>(request: &Request<B>, metrics: &Metrics) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, METRICS_CONTENT_TYPE, metrics.encode()),
        (&Method::GET, _) => (
            StatusCode::NOT_FOUND,
            TEXT,
            "nicsched serves /metrics only\n".to_string(),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "GET /metrics\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(ALLOW, HeaderValue::from_static("GET"));
    }
    response
}

/// One enforcer's run watched: the progress bar, the lines printed above it, the
/// metrics.
pub struct Watching<'a> {
    enforcer: &'a str,
    bar: &'a ProgressBar,
    options: &'a LiveOptions,
    /// Measured intervals per line, and the first of the line being gathered.
    per_line: usize,
    line_from: usize,
    /// Each tenant's drops so far as of the last line and as of the last interval.
    drops_at_line: Vec<u64>,
    drops_at_interval: Vec<u64>,
}

impl<'a> Watching<'a> {
    pub fn new(
        enforcer: &'a str,
        bar: &'a ProgressBar,
        options: &'a LiveOptions,
        scenario: &policy::Scenario,
    ) -> Self {
        if let Some(metrics) = &options.metrics {
            metrics.started(enforcer, scenario.duration_ns);
        }
        let tenants = scenario.policy.tenants.len();
        Watching {
            enforcer,
            bar,
            options,
            per_line: options.intervals_per_line(scenario.interval_ns),
            line_from: 0,
            drops_at_line: vec![0; tenants],
            drops_at_interval: vec![0; tenants],
        }
    }

    /// After the run: each latency traffic's p99, which its programs reported at
    /// their end.
    pub fn finished(&self, record: &RunRecord) {
        if let Some(metrics) = &self.options.metrics {
            metrics.finished(record);
        }
        if self.options.lines {
            for latency in &record.latency {
                let p99_us = report::latency_us_at(&latency.histogram_ns, 0.99);
                self.bar.suspend(|| {
                    eprintln!(
                        "{} latency {}: p99 {p99_us:.1} us over the run",
                        self.enforcer, latency.traffic
                    )
                });
            }
        }
    }
}

fn since(now: &[u64], before: &mut [u64]) -> Vec<u64> {
    let delta = now
        .iter()
        .zip(before.iter())
        .map(|(n, b)| n.saturating_sub(*b))
        .collect();
    before.copy_from_slice(now);
    delta
}

impl lab::Watch for Watching<'_> {
    fn progress(&mut self, elapsed_ns: u64) {
        self.bar.set_position(elapsed_ns / 1_000_000);
        if let Some(metrics) = &self.options.metrics {
            metrics.progress(self.enforcer, elapsed_ns);
        }
    }

    fn measured(&mut self, measured: lab::Measured<'_>) {
        let (record, k) = (measured.record, measured.interval);
        if let Some(metrics) = &self.options.metrics {
            let new_drops = measured
                .tenant_drops
                .map(|d| since(d, &mut self.drops_at_interval));
            metrics.interval(self.enforcer, record, k, new_drops.as_deref());
        }
        let last = record.intervals.len();
        if k + 1 < last && k + 1 - self.line_from < self.per_line {
            return;
        }
        let drops = measured
            .tenant_drops
            .map(|d| since(d, &mut self.drops_at_line));
        let line = Line::of(record, self.line_from..k + 1, drops.as_deref());
        self.line_from = k + 1;
        if let Some(metrics) = &self.options.metrics {
            metrics.line(self.enforcer, &line);
        }
        if self.options.lines {
            self.bar.suspend(|| {
                for text in line.text(self.enforcer) {
                    eprintln!("{text}");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn record() -> RunRecord {
        let scenario = policy::parse_scenario(
            "name: live\npolicy:\n  link: { rate: 100Mbit }\n  tenants:\n    - { name: kvs, weight: 3 }\n    - { name: bulk, weight: 1 }\nduration: 1s\ninterval: 500ms\ntraffic:\n  - { tenant: kvs, kind: bulk, flows: 1 }\n  - { tenant: bulk, kind: bulk, flows: 1 }\n",
            "live.yaml",
            std::path::Path::new("."),
            &lab::enforcer_names(),
        )
        .unwrap();
        let demands =
            report::measure::asked_demands_bps(&scenario, &report::measure::RpcPath::default());
        let mut record =
            report::measure::empty_record(&scenario, "tonic", report::Mode::Lab, &demands);
        // 500 ms at 60 and 30 Mbit/s, then at 75 and 25.
        record.intervals[0].class_bytes = vec![3_750_000, 1_875_000];
        record.intervals[1].class_bytes = vec![4_687_500, 1_562_500];
        record
    }

    #[test]
    fn a_line_is_each_tenant_over_its_intervals_against_the_ideal_then_the_sum() {
        let record = record();
        let line = Line::of(&record, 0..2, Some(&[2, 0]));
        assert_eq!((line.start_ns, line.end_ns), (0, 1_000_000_000));
        assert_eq!(
            line.text("tonic"),
            [
                "tonic   0.00-1.00 s  kvs       67.50 Mbit/s  ideal     75.00 Mbit/s  drops 2",
                "tonic   0.00-1.00 s  bulk      27.50 Mbit/s  ideal     25.00 Mbit/s  drops 0",
                "tonic   0.00-1.00 s  [sum]     95.00 Mbit/s  ideal    100.00 Mbit/s  drops 2",
            ]
        );
        let unknown = Line::of(&record, 1..2, None);
        assert!(unknown.text("linux-htb")[0].ends_with("ideal     75.00 Mbit/s  drops -"));
        assert!(unknown.text("linux-htb")[0].contains(" 0.50-1.00 s  kvs       75.00 Mbit/s"));
    }

    #[test]
    fn lines_gather_whole_measured_intervals() {
        let options = |line_every_ns| LiveOptions {
            lines: true,
            line_every_ns,
            metrics: None,
        };
        assert_eq!(options(1_000_000_000).intervals_per_line(500_000_000), 2);
        assert_eq!(options(1_000_000_000).intervals_per_line(2_000_000_000), 1);
        assert_eq!(options(1_200_000_000).intervals_per_line(500_000_000), 2);
        assert_eq!(line_every("0.25"), Ok(250_000_000));
        assert!(line_every("0").is_err() && line_every("x").is_err());
    }

    #[test]
    fn metrics_listen_takes_loopback_addresses_only() {
        assert_eq!(
            loopback_address("127.0.0.1:0"),
            Ok("127.0.0.1:0".parse().unwrap())
        );
        assert!(loopback_address("[::1]:9464").is_ok());
        let refused = loopback_address("0.0.0.0:9464").unwrap_err();
        assert!(refused.contains("not a loopback address"), "{refused}");
        assert!(loopback_address("localhost").is_err());
    }

    /// The exposition, read strictly: every line a `# HELP`, `# TYPE` or a sample
    /// `name{labels} value`, and `# EOF` last.
    fn samples(text: &str) -> Vec<(String, f64)> {
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.last(), Some(&"# EOF"), "{text}");
        lines[..lines.len() - 1]
            .iter()
            .filter(|l| !l.starts_with("# HELP ") && !l.starts_with("# TYPE "))
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').expect("`series value`");
                (series.to_string(), value.parse().expect("a number"))
            })
            .collect()
    }

    #[test]
    fn metrics_carry_each_tenant_per_enforcer_in_prometheus_names() {
        let mut record = record();
        let mut histogram_ns = hdrhistogram::Histogram::new(3).unwrap();
        for ns in 1..=1000 {
            histogram_ns.record(ns * 1000).unwrap();
        }
        record.latency.push(report::LatencyRecord {
            traffic: "kvs-get".into(),
            histogram_ns,
        });
        let metrics = Metrics::default();
        metrics.started("tonic", 1_000_000_000);
        metrics.progress("tonic", 500_000_000);
        metrics.interval("tonic", &record, 0, Some(&[2, 0]));
        metrics.interval("tonic", &record, 1, Some(&[1, 0]));
        metrics.line("tonic", &Line::of(&record, 0..2, None));
        metrics.finished(&record);
        let samples = samples(&metrics.encode());
        let value = |series: &str| {
            samples
                .iter()
                .find(|(s, _)| s == series)
                .unwrap_or_else(|| panic!("{series} in {samples:?}"))
                .1
        };
        assert_eq!(
            value(r#"nicsched_tenant_throughput_bits_per_second{enforcer="tonic",tenant="kvs"}"#),
            67.5e6
        );
        assert_eq!(
            value(r#"nicsched_tenant_ideal_bits_per_second{enforcer="tonic",tenant="bulk"}"#),
            25e6
        );
        assert_eq!(
            value(r#"nicsched_tenant_bytes_total{enforcer="tonic",tenant="kvs"}"#),
            8_437_500.0
        );
        assert_eq!(
            value(r#"nicsched_tenant_drops_total{enforcer="tonic",tenant="kvs"}"#),
            3.0
        );
        assert_eq!(
            value(r#"nicsched_run_elapsed_seconds{enforcer="tonic"}"#),
            0.5
        );
        assert_eq!(
            value(r#"nicsched_run_duration_seconds{enforcer="tonic"}"#),
            1.0
        );
        // 990 of 1000 requests took at most 990 us (to hdrhistogram's 3 digits).
        let p99_s = value(r#"nicsched_latency_p99_seconds{enforcer="tonic",traffic="kvs-get"}"#);
        assert!((p99_s - 990e-6).abs() < 1e-6, "{p99_s}");
        let text = metrics.encode();
        assert!(
            text.contains("# TYPE nicsched_tenant_bytes counter\n")
                && text.contains("# TYPE nicsched_tenant_throughput_bits_per_second gauge\n"),
            "{text}"
        );
    }

    /// The endpoint of a run under way, served within `limits`.
    fn serving(limits: Limits) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(Metrics::default());
        metrics.started("tonic", 4_000_000_000);
        serve_within(listener, metrics, limits);
        addr
    }

    /// Long enough that no test sees a connection reach it.
    const NO_DEADLINE: Limits = Limits {
        deadline: Duration::from_secs(3600),
        connections: CONNECTIONS_MAX,
    };

    /// How long a test's client waits for an answer or a close before it fails:
    /// a server that never answers fails the test rather than hanging it.
    const HANG_GUARD: Duration = Duration::from_secs(120);

    fn connect(addr: SocketAddr) -> TcpStream {
        let stream = TcpStream::connect(addr).expect("the endpoint accepts");
        stream.set_read_timeout(Some(HANG_GUARD)).unwrap();
        stream
    }

    /// `method path` asked of `addr`: the status line, the head, the body.
    fn ask(addr: SocketAddr, method: &str, path: &str) -> (String, String, String) {
        let mut stream = connect(addr);
        // One write: `write!` sends its pieces one by one, and a server that
        // refuses a head past its bound may answer and close between two.
        let request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .expect("an answer, then the connection closed");
        let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
        let status = head.lines().next().unwrap().to_string();
        (status, head.to_lowercase(), body.to_string())
    }

    /// A scrape answered in full: 200, OpenMetrics, the run's metrics.
    fn assert_scraped(addr: SocketAddr) {
        let (status, head, body) = ask(addr, "GET", "/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            head.contains(&format!("content-type: {METRICS_CONTENT_TYPE}")),
            "{head}"
        );
        assert!(
            samples(&body).contains(&(
                "nicsched_run_duration_seconds{enforcer=\"tonic\"}".into(),
                4.0
            )),
            "{body}"
        );
    }

    /// Closed by the server: the end of the stream, or a reset where the server
    /// left what the client sent unread. Waits for it.
    fn closed_by_server(stream: &mut TcpStream) -> Vec<u8> {
        let mut got = Vec::new();
        match stream.read_to_end(&mut got) {
            Ok(_) => got,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => got,
            Err(e) => panic!("not closed: {e}"),
        }
    }

    /// Still open: nothing to read, and no end of the stream.
    fn still_open(stream: &TcpStream) -> bool {
        stream.set_nonblocking(true).unwrap();
        let open = matches!(
            (&*stream).read(&mut [0u8; 1]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        );
        stream.set_nonblocking(false).unwrap();
        open
    }

    #[test]
    fn the_endpoint_answers_get_metrics_only() {
        let addr = serving(NO_DEADLINE);
        assert_scraped(addr);
        let (status, head, body) = ask(addr, "GET", "/metrics/../x?y");
        assert_eq!(status, "HTTP/1.1 404 Not Found");
        assert!(
            head.contains("content-type: text/plain; charset=utf-8"),
            "{head}"
        );
        assert_eq!(body, "nicsched serves /metrics only\n");
        let (status, head, _) = ask(addr, "POST", "/metrics");
        assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
        assert!(head.contains("\r\nallow: get"), "{head}");
        // A query string is the scraper's business.
        let (status, head, _) = ask(addr, "GET", "/metrics?x=1");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(head.contains("\r\nconnection: close"), "{head}");
        assert_eq!(ask(addr, "GET", "not a path").0, "HTTP/1.1 400 Bad Request");
        let long = format!("/metrics?{}", "x".repeat(REQUEST_BYTES_MAX));
        assert_eq!(
            ask(addr, "GET", &long).0,
            "HTTP/1.1 431 Request Header Fields Too Large"
        );
    }

    /// A byte a second, the way that held the endpoint for hours when each read
    /// had a timeout of its own.
    #[test]
    fn a_scrape_is_answered_while_another_client_trickles_its_request() {
        let addr = serving(NO_DEADLINE);
        let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let whole = request.len();
        let (sent_some, scraped) = (std::sync::mpsc::channel(), std::sync::mpsc::channel());
        let trickler = std::thread::spawn(move || {
            let mut stream = connect(addr);
            for (n, byte) in request.bytes().enumerate() {
                stream.write_all(&[byte]).unwrap();
                if n + 1 == 2 {
                    sent_some.0.send(()).unwrap();
                }
                // The pace of the load, not a wait for anything.
                if scraped.1.recv_timeout(Duration::from_secs(1)).is_ok() {
                    return (n + 1, still_open(&stream));
                }
            }
            (whole, still_open(&stream))
        });
        sent_some.1.recv().unwrap();
        assert_scraped(addr);
        scraped.0.send(()).unwrap();
        let (sent, open) = trickler.join().unwrap();
        assert!(
            sent < whole,
            "the scrape was answered only once the trickler had sent its whole request"
        );
        assert!(open, "the trickler's connection was closed");
    }

    #[test]
    fn connections_that_say_nothing_past_the_bound_do_not_keep_a_scrape_out() {
        let addr = serving(NO_DEADLINE);
        let mut idle: Vec<TcpStream> = (0..200).map(|_| connect(addr)).collect();
        assert_scraped(addr);
        // The one held longest made room; the last one is still held.
        assert_eq!(closed_by_server(&mut idle[0]), b"");
        assert!(still_open(idle.last().unwrap()));
    }

    #[test]
    fn a_client_is_cut_off_at_the_deadline_though_it_keeps_sending() {
        let deadline = Duration::from_millis(250);
        let addr = serving(Limits {
            deadline,
            ..NO_DEADLINE
        });
        let request = format!(
            "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: a byte every tenth of the deadline\r\n\r\n"
        );
        let mut stream = connect(addr);
        let mut writer = stream.try_clone().unwrap();
        let trickler = std::thread::spawn(move || {
            for byte in request.bytes() {
                if writer.write_all(&[byte]).is_err() {
                    break;
                }
                // The pace of the load: no read ever waits a whole deadline.
                std::thread::sleep(deadline / 10);
            }
        });
        assert_eq!(
            String::from_utf8_lossy(&closed_by_server(&mut stream)),
            "",
            "answered"
        );
        drop(stream);
        trickler.join().unwrap();
        assert_scraped(addr);
    }
}
