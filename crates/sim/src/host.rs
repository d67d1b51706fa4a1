//! The host around the enforcer: how senders feed it and how long the parts of the
//! path outside the NIC take. Each constant stands for one Linux or hardware
//! mechanism; none is tuned to match a figure of a paper.

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostModel {
    /// TCP small queues: a bulk flow keeps at most max(`tsq_sends_min` sends, ~1 ms
    /// of data at its pacing rate) between its socket and the wire, capped by
    /// `tsq_bytes_max` (Linux: `2 * truesize`, `sk_pacing_rate >> 10`,
    /// `tcp_limit_output_bytes`). At the per-flow rates of a shared link the two-send
    /// floor binds; a lone fast flow keeps more in flight.
    pub tsq_sends_min: u32,
    pub tsq_bytes_max: u64,
    /// The interval over which a flow's delivery rate is measured for its TSQ limit,
    /// and the time of data TSQ lets it keep in flight.
    pub tsq_window_ns: u64,
    /// Pacing rate over delivery rate in congestion avoidance (`tcp_pacing_ca_ratio`).
    pub pacing_ratio: f64,
    /// From the last frame of a send leaving the wire to the socket learning of it:
    /// Tx completions are reaped in NAPI polls after interrupt moderation (ixgbe's
    /// default moderation is in the tens of microseconds).
    pub tx_completion_delay_ns: u64,
    /// The path an rpc's request and response cross outside the NIC.
    pub path: report::measure::RpcPath,
    /// A bulk sender refused by packet accounting with nothing in flight retries
    /// after this long (the socket's write space wait).
    pub refused_retry_ns: u64,
    /// The host's qdisc limits in front of the enforcer (`txqueuelen`): what an
    /// open-loop sender beyond its share may queue before its datagrams are dropped.
    pub limits: sched::HostLimits,
    /// Descriptors of a VM's transmit ring (`ring`), all its Tx queues together:
    /// virtio-net's default of 256 per queue times 16 queues. PicNIC §5.4.3 relies
    /// on the guest NIC having more descriptors than packet accounting lets a flow
    /// hold (here `limits.class_packets`, 1000), so that the engine's caps, not the
    /// ring, bound what a flood keeps in the engine, and a VM's flows do not run
    /// out of descriptors behind one throttled flow when completions are out of order.
    pub tx_ring_descriptors: u32,
    /// A datagram socket's send buffer (`net.core.wmem_default`). With NAPI-TX (a
    /// tenant's `napi_tx`) each datagram is charged to it, as Linux charges
    /// an skb's truesize, from the send until its Tx completion: a flow that has this
    /// much in the host blocks until a completion frees room.
    pub sndbuf_bytes: u64,
    /// What an skb costs its socket beyond its bytes (`SKB_TRUESIZE`: `sk_buff` and
    /// `skb_shared_info`, cache-aligned, on x86-64); kmalloc's rounding of the data
    /// is left out.
    pub skb_overhead_bytes: u32,
    /// Packets that may wait for an engine core (a NIC's receive ring of 1024
    /// descriptors): under `engine.cpu: weighted` each tenant has a queue this long,
    /// under `fifo` all tenants share one, as an engine without CPU isolation does.
    pub engine_queue_packets: u32,
}

/// See [`HostModel::tx_ring_descriptors`].
const TX_RING_DESCRIPTORS: u32 = 16 * 256;
const _: () = assert!(TX_RING_DESCRIPTORS > sched::HostLimits::LINUX.class_packets);

impl Default for HostModel {
    fn default() -> Self {
        HostModel {
            tsq_sends_min: 2,
            tsq_bytes_max: 1 << 20,
            tsq_window_ns: 1_000_000,
            pacing_ratio: 1.2,
            tx_completion_delay_ns: 20_000,
            path: report::measure::RpcPath::default(),
            // The bound on a scenario's work counts these retries (policy::limits).
            refused_retry_ns: (1e9 / policy::limits::SENDER_RETRIES_PER_S) as u64,
            limits: sched::HostLimits::LINUX,
            engine_queue_packets: sched::cores::QUEUE_PACKETS,
            tx_ring_descriptors: TX_RING_DESCRIPTORS,
            sndbuf_bytes: 212_992,
            skb_overhead_bytes: 576,
        }
    }
}

impl HostModel {
    /// The model's constants by name, for a run's provenance.
    pub fn settings(&self) -> std::collections::BTreeMap<String, String> {
        let mut settings = std::collections::BTreeMap::new();
        let mut set = |key: &str, value: String| {
            settings.insert(key.to_string(), value);
        };
        set("tsq_sends_min", self.tsq_sends_min.to_string());
        set("tsq_bytes_max", self.tsq_bytes_max.to_string());
        set("tsq_window_ns", self.tsq_window_ns.to_string());
        set("pacing_ratio", self.pacing_ratio.to_string());
        set(
            "tx_completion_delay_ns",
            self.tx_completion_delay_ns.to_string(),
        );
        set("wire_delay_ns", self.path.wire_delay_ns.to_string());
        set("server_delay_ns", self.path.server_delay_ns.to_string());
        set("refused_retry_ns", self.refused_retry_ns.to_string());
        set("queue_packets", self.limits.queue_packets.to_string());
        set("class_packets", self.limits.class_packets.to_string());
        set(
            "engine_queue_packets",
            self.engine_queue_packets.to_string(),
        );
        set("tx_ring_descriptors", self.tx_ring_descriptors.to_string());
        set("sndbuf_bytes", self.sndbuf_bytes.to_string());
        set("skb_overhead_bytes", self.skb_overhead_bytes.to_string());
        settings
    }
}
