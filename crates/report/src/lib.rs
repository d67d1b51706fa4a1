//! # nicsched report
//!
//! Figures every enforcer is judged by, computed the same way for the simulator and
//! the lab: Jain's index of throughput over ideal, relative error against the ideal
//! allocation, latency percentiles; and the files a run leaves behind.
//!
//! From the bottom up:
//! - `record`: the `RunRecord` a run hands over, raw bytes and ideals per interval;
//! - [`measure`]: the measurement frame both worlds share: intervals, the classes
//!   traffic is reported in, each traffic's demand and the ideal per interval;
//! - `checks`: a run's self-checks (conservation, the meter) and its provenance;
//! - `figures`: the single definitions of Jain's index, relative error and latency
//!   quantiles;
//! - `summary`: `summarize` turns a record into the `Summary` of summary.json;
//! - `files` and `plot`: `write_run` leaves summary.json, timeseries.csv, latency.csv
//!   and the PNG plots in a run's folder; `OutDir` owns that folder for one run
//!   (locked, staged, marked complete with `nicsched-run.json` as it moves in);
//! - `table`: the enforcers of a scenario side by side as a terminal table
//!   (`comparison_table`);
//! - [`runs`] and `html`: runs read back from their folders' files (`read_run`,
//!   `load_runs`) and overlaid on one self-contained report.html (`write_html`,
//!   `write_report`), for sim, lab and `nicsched report` alike;
//! - `compare`: runs of one scenario from any world (sim, lab) side by side, read
//!   back from their summary.json (`load_summaries`, `side_by_side`), from complete
//!   runs only; `baseline`: runs against a baseline's, figure by figure, with the
//!   figures that got worse beyond a threshold (`against_baseline`);
//! - `hosts`: the figures of a run across hosts (`HostsRecord`,
//!   `summarise_hosts`).
//!
//! It imports only `policy` of the workspace: the simulator and the lab hand it
//! their records, and it imports neither.

mod baseline;
mod checks;
pub mod claims;
mod compare;
mod figures;
mod files;
mod hosts;
mod html;
pub mod measure;
mod path_error;
mod plot;
mod record;
pub mod runs;
mod summary;
mod table;

pub use baseline::{
    Absence, BaselineComparison, BaselineOnly, FigureDelta, FigureKind, Missing, MissingKind,
    OneSided, RunDelta, RunKey, THRESHOLD_DEFAULT, Thresholds, against_baseline,
};
pub use checks::{
    Check, EngineLedger, OfferedLoad, Provenance, RateUnit, TenantLedger, conservation,
    engine_conservation, meter_against_link, offered_demand, rate_text, rate_unit,
};
pub use compare::{load_summaries, side_by_side};
pub use figures::*;
pub use files::*;
pub use hosts::{
    HostsRecord, HostsRow, HostsSummary, asked_bps as hosts_asked_bps, summarise as summarise_hosts,
};
pub use html::*;
pub use plot::{
    AppPanel, OVERLAY_FAIRNESS_PNG, OVERLAY_LATENCY_CDF_PNG, OVERLAY_THROUGHPUT_PNG, SweepLine,
    SweepPoint, app_panels, cdf_ticks_us, write_hosts_overlay_plot, write_overlay_plots,
    write_sweep_plot,
};
pub use record::*;
pub use summary::{AppSummary, Fairness, PacingSummary, Summary, TenantSummary, summarize};
pub use table::{aligned_table, comparison_table, figure_cell, signed_figure_cell};
