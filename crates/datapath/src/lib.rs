//! # nicsched datapath
//!
//! nicsched's enforcers on real frames: what runs per frame, and nothing of how a
//! run is set up. The lab (`crates/lab`) builds the namespaces, starts the traffic
//! and judges the figures; it hands this crate ports, a policy and an enforcer,
//! and gets counts back. Nothing here imports the lab or the simulator, so the
//! engine can be lifted onto a real host's device as it is.
//!
//! From the bottom up:
//! - [`sys`]: every call into the OS (namespaces, AF_PACKET sockets and their
//!   rings, processes, signals, clocks); nothing else touches libc;
//! - [`classify`]: Ethernet/IPv4/IPv6 parsing at the edge and the policy's
//!   classification of a frame to tenant, app, flow and destination; what tells a
//!   traffic's frames apart ([`classify::FrameMatch`]);
//! - [`cores`]: the engine's cores, threads that hold each frame for its traffic's
//!   cost before the enforcer sees it;
//! - [`host_side`]: what a host's engine does across hosts: the ingress link's
//!   queue and each VM's policer, PicNIC's feedback over UDP, counts per traffic;
//! - [`link`]: the emulated link's clock, which every engine thread sending on it
//!   shares without a lock;
//! - [`engine`]: the forwarding loop around an [`sched::Enforcer`], paced at the
//!   link rate, with its buffer standing for the host's qdiscs
//!   ([`engine::HostBuffer`]) and its counts ([`engine::EngineStats`]);
//! - [`shards`]: the engine on several threads, each with its tenants' ports and
//!   its shard of an enforcer that runs per core.

pub mod classify;
pub mod cores;
pub mod engine;
pub mod host_side;
pub mod link;
pub mod shards;
pub mod sys;
