//! # nicsched policies
//!
//! A policy says how tenants share one host's egress link; a scenario adds the
//! traffic offered to it. This crate turns YAML into the validated [`Policy`] and
//! [`Scenario`] (parse once at the edge, nothing past it panics), and computes the
//! ideal (fluid) allocation every enforcer is judged against.
//!
//! From the bottom up:
//! - `units`: rates, sizes and times as operators write them (`10Gbit`, `64KiB`,
//!   `500ms`), and back;
//! - `model`: the validated policy and scenario, and each traffic kind
//!   (`model/kind.rs`); `hosts`: scenarios across hosts ([`HostsScenario`]);
//! - [`limits`]: every bound on what sizes memory or work, with its reason;
//! - `parse` and `error`: YAML to the model, each mistake located
//!   ([`PolicyError`]); [`load_any_scenario`] reads one host or across hosts;
//! - `ideal` and `ideal_hosts`: the ideal allocation ([`ideal_allocation`],
//!   [`ideal_across_hosts`]); `explain`: it laid out for `nicsched explain`;
//! - what both worlds share below them: [`wire`] (sizes and serialisation time
//!   on the wire), [`policer`] (the VM ingress policer), [`pcc`] (PicNIC's
//!   feedback rule), [`faults`] (`NICSCHED_FAULT`).
//!
//! It imports no other crate of the workspace; every one of them imports it.

mod error;
mod explain;
pub mod faults;
mod hosts;
mod ideal;
mod ideal_hosts;
pub mod limits;
mod model;
mod parse;
pub mod pcc;
pub mod policer;
mod units;
pub mod wire;

pub use error::PolicyError;
pub use explain::{
    AppClass, AppIdeal, Explanation, LinkClass, PhaseIdeal, SplitClass, TenantClass, TenantIdeal,
    explain, explain_phases, parse_active,
};
pub use hosts::*;
pub use ideal::{Allocation, ideal_allocation};
pub use ideal_hosts::{
    FlowIdeal, HostsExplanation, HostsPhaseIdeal, Resource, ResourceKind, Unit, explain_hosts,
    ideal_across_hosts, offers, resources,
};
pub use model::*;
pub use parse::{
    load_any_scenario, load_policy, load_scenario, parse_any_scenario, parse_policy,
    parse_scenario, tenant_error,
};
pub use units::{format_rate, format_size, format_time, parse_rate, parse_size, parse_time};
