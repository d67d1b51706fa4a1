//! What each kind of traffic is, in one place: its name and keys in a scenario,
//! how its senders pace themselves, which way its bytes cross the link, and how its
//! rates scale. The simulator's senders, the lab's programs, the ideal allocation
//! and the checks ask these questions of a kind rather than match on the kinds
//! themselves, so that a new kind is a variant here (and its parsing in
//! `parse/traffic.rs`) plus, only where its pacing is new, a generator in each
//! world.

use super::rate_scaled;
use super::{App, Proto};

#[derive(Clone, Debug, PartialEq)]
pub enum TrafficKind {
    /// Backlogged TCP-like flows.
    Bulk { flows: u32 },
    /// Open-loop constant-rate datagrams; `rate_bps` is the total over all flows.
    Udp {
        rate_bps: u64,
        size_bytes: u32,
        flows: u32,
    },
    /// Open-loop datagrams with exponential gaps; `rate_bps` is the total mean rate.
    Poisson {
        rate_bps: u64,
        size_bytes: u32,
        flows: u32,
    },
    /// Request/response; closed loop unless `rate_per_s` is set.
    Rpc {
        request_bytes: u32,
        response_bytes: u32,
        concurrency: u32,
        rate_per_s: Option<f64>,
    },
}

/// A kind's name in a scenario and the keys it takes beside those every traffic
/// takes (`name`, `tenant`, `app`, `start`, ...), in the order the docs list them.
pub struct KindKeys {
    pub name: &'static str,
    pub keys: &'static [&'static str],
}

/// Every kind a scenario may name.
pub const KINDS: &[KindKeys] = &[
    KindKeys {
        name: "bulk",
        keys: &["flows"],
    },
    KindKeys {
        name: "udp",
        keys: &["rate", "size", "flows"],
    },
    KindKeys {
        name: "poisson",
        keys: &["rate", "size", "flows"],
    },
    KindKeys {
        name: "rpc",
        keys: &["request", "response", "concurrency", "rate"],
    },
];

/// How a traffic's senders decide when to send: what each world's generator
/// implements, and what the ideal allocation takes as a flow's demand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// As fast as the path takes them: TCP flows, always backlogged.
    Backlogged,
    /// Open loop: datagrams of `size_bytes` of payload at `rate_bps` over all
    /// flows, whatever the link does with them.
    Datagrams {
        rate_bps: u64,
        size_bytes: u32,
        gaps: Gaps,
    },
    /// Requests of `request_bytes` into the tenant, each answered by a response of
    /// `response_bytes` out of it, on each connection: closed loop (the next
    /// request once the response is in) unless `rate_per_s` sets an open-loop rate
    /// over all connections, at exponential gaps.
    Requests {
        request_bytes: u32,
        response_bytes: u32,
        rate_per_s: Option<f64>,
    },
}

/// The gaps between an open-loop sender's datagrams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gaps {
    Constant,
    /// Exponential with the constant gap as their mean: Poisson arrivals.
    Exponential,
}

impl TrafficKind {
    pub fn label(&self) -> &'static str {
        match self {
            TrafficKind::Bulk { .. } => "bulk",
            TrafficKind::Udp { .. } => "udp",
            TrafficKind::Poisson { .. } => "poisson",
            TrafficKind::Rpc { .. } => "rpc",
        }
    }

    /// The transport the traffic runs on: bulk is TCP, udp and poisson are UDP, and
    /// rpc is TCP unless its app matches UDP (the lab then runs sockperf over UDP).
    pub fn proto(&self, app: &App) -> Proto {
        match self.pacing() {
            Pacing::Backlogged => Proto::Tcp,
            Pacing::Datagrams { .. } => Proto::Udp,
            Pacing::Requests { .. } => app.match_proto.unwrap_or(Proto::Tcp),
        }
    }

    /// Flows the traffic opens: each is its own 5-tuple and destination.
    pub fn flows(&self) -> u32 {
        match self {
            TrafficKind::Bulk { flows }
            | TrafficKind::Udp { flows, .. }
            | TrafficKind::Poisson { flows, .. } => *flows,
            TrafficKind::Rpc { concurrency, .. } => *concurrency,
        }
    }

    pub fn pacing(&self) -> Pacing {
        match *self {
            TrafficKind::Bulk { .. } => Pacing::Backlogged,
            TrafficKind::Udp {
                rate_bps,
                size_bytes,
                ..
            } => Pacing::Datagrams {
                rate_bps,
                size_bytes,
                gaps: Gaps::Constant,
            },
            TrafficKind::Poisson {
                rate_bps,
                size_bytes,
                ..
            } => Pacing::Datagrams {
                rate_bps,
                size_bytes,
                gaps: Gaps::Exponential,
            },
            TrafficKind::Rpc {
                request_bytes,
                response_bytes,
                rate_per_s,
                ..
            } => Pacing::Requests {
                request_bytes,
                response_bytes,
                rate_per_s,
            },
        }
    }

    /// Whether the tenant answers requests: its bytes on the link are responses,
    /// its flows' port on the link is their source, and their round trips are
    /// what is measured as latency.
    pub fn has_requests(&self) -> bool {
        matches!(self.pacing(), Pacing::Requests { .. })
    }

    /// The same traffic on a link `factor` times as fast: every rate it offers
    /// scaled by `factor` (a datagram rate to at least 1 bit/s), sizes and counts
    /// kept.
    pub fn scaled(&self, factor: f64) -> TrafficKind {
        let mut scaled = self.clone();
        match &mut scaled {
            TrafficKind::Udp { rate_bps, .. } | TrafficKind::Poisson { rate_bps, .. } => {
                *rate_bps = rate_scaled(*rate_bps, factor);
            }
            TrafficKind::Rpc { rate_per_s, .. } => {
                *rate_per_s = rate_per_s.map(|r| r * factor);
            }
            TrafficKind::Bulk { .. } => {}
        }
        scaled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> [TrafficKind; 4] {
        [
            TrafficKind::Bulk { flows: 2 },
            TrafficKind::Udp {
                rate_bps: 1_000_000,
                size_bytes: 1000,
                flows: 2,
            },
            TrafficKind::Poisson {
                rate_bps: 1_000_000,
                size_bytes: 1000,
                flows: 2,
            },
            TrafficKind::Rpc {
                request_bytes: 64,
                response_bytes: 64,
                concurrency: 2,
                rate_per_s: None,
            },
        ]
    }

    #[test]
    fn every_kind_is_listed_once_under_its_label() {
        let labels: Vec<&str> = every_kind().iter().map(TrafficKind::label).collect();
        let listed: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        assert_eq!(labels, listed);
    }

    #[test]
    fn only_rpc_answers_requests_and_only_bulk_is_backlogged() {
        let asked: Vec<(bool, bool)> = every_kind()
            .iter()
            .map(|k| (k.has_requests(), k.pacing() == Pacing::Backlogged))
            .collect();
        assert_eq!(
            asked,
            [(false, true), (false, false), (false, false), (true, false)]
        );
    }

    #[test]
    fn scaling_scales_rates_and_keeps_sizes_and_flows() {
        let udp = TrafficKind::Udp {
            rate_bps: 10,
            size_bytes: 1000,
            flows: 3,
        };
        assert_eq!(
            udp.scaled(0.01),
            TrafficKind::Udp {
                rate_bps: 1,
                size_bytes: 1000,
                flows: 3,
            }
        );
        let rpc = TrafficKind::Rpc {
            request_bytes: 64,
            response_bytes: 128,
            concurrency: 2,
            rate_per_s: Some(100.0),
        };
        assert_eq!(
            rpc.scaled(0.5).pacing(),
            Pacing::Requests {
                request_bytes: 64,
                response_bytes: 128,
                rate_per_s: Some(50.0),
            }
        );
        assert_eq!(TrafficKind::Bulk { flows: 4 }.scaled(0.5).flows(), 4);
    }
}
