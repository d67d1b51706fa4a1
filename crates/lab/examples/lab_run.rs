//! Runs one scenario in the lab and writes its results, until `nicsched lab` does:
//!
//! ```sh
//! cargo run --release -p lab --example lab_run -- SCENARIO.yaml ENFORCER [LINK_RATE] [OUT_DIR]
//! ```
//!
//! LINK_RATE overrides the scenario's link (e.g. `1Gbit`); OUT_DIR (default
//! `results/lab/NAME/ENFORCER`) gets summary.json, timeseries.csv, latency.csv and
//! the plots, and `logs/` the programs' output.

use std::path::{Path, PathBuf};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: lab_run SCENARIO.yaml ENFORCER [LINK_RATE] [OUT_DIR]");
        std::process::exit(2);
    }
    let scenario = policy::load_scenario(Path::new(&args[0])).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let enforcer = &args[1];
    let link_rate_bps = args.get(2).map(|r| {
        policy::parse_rate(r).unwrap_or_else(|e| {
            eprintln!("{r}: {e}");
            std::process::exit(2);
        })
    });
    let out = args.get(3).map_or_else(
        || PathBuf::from(format!("results/lab/{}/{enforcer}", scenario.name)),
        PathBuf::from,
    );
    let options = lab::LabOptions {
        out: Some(out.join("logs")),
        link_rate_bps,
        ..lab::LabOptions::default()
    };
    let record = match lab::run(&scenario, enforcer, &options, &mut |ns| {
        eprint!("\r{:5.1} s", ns as f64 / 1e9);
    }) {
        Ok(record) => record,
        Err(e) => {
            eprintln!("\nnicsched lab: {e}");
            std::process::exit(1);
        }
    };
    eprintln!();
    let summary = report::write_run(&out, &record).unwrap_or_else(|e| {
        eprintln!("cannot write {}: {e}", out.display());
        std::process::exit(1);
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&summary).expect("a summary serialises")
    );
}
