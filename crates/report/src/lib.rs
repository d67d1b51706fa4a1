//! # nicsched report
//!
//! Figures every enforcer is judged by, computed the same way for the simulator and
//! the lab: Jain's index of throughput over ideal, relative error against the ideal
//! allocation, latency percentiles; and the files a run leaves behind.

mod record;

pub use record::*;
