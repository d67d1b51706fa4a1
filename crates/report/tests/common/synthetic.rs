//! A synthetic run as large as asked, for the tests and the benchmark of report
//! writing at scale: `tenants` tenants of `apps` apps each over `intervals`
//! intervals, every app's throughput swinging around an ideal that differs by
//! tenant and app, so that ranks and extremes are not ties.

use report::{ClassName, Interval, Mode, RunRecord};

pub fn many_apps(enforcer: &str, tenants: usize, apps: usize, intervals: usize) -> RunRecord {
    const INTERVAL_NS: u64 = 10_000_000;
    let classes = tenants * apps;
    let ideal = |c: usize| 1e6 * (1 + (c / apps) % 7) as f64 * (1 + c % 3) as f64;
    let tenant_ideal: Vec<f64> = (0..tenants)
        .map(|t| (t * apps..(t + 1) * apps).map(ideal).sum())
        .collect();
    let interval = |k: usize| {
        let length_s = INTERVAL_NS as f64 / 1e9;
        Interval {
            start_ns: k as u64 * INTERVAL_NS,
            end_ns: (k as u64 + 1) * INTERVAL_NS,
            steady: true,
            class_bytes: (0..classes)
                .map(|c| {
                    let swing = 0.5 + ((k * 7919 + c * 104_729) % 100) as f64 / 100.0;
                    (ideal(c) * swing * length_s / 8.0) as u64
                })
                .collect(),
            class_ideal_bps: (0..classes).map(ideal).collect(),
            class_active: vec![true; classes],
            tenant_ideal_bps: tenant_ideal.clone(),
            tenant_active: vec![true; tenants],
        }
    };
    RunRecord {
        scenario: "many-apps".into(),
        enforcer: enforcer.into(),
        mode: Mode::Sim,
        seed: 1,
        duration_ns: intervals as u64 * INTERVAL_NS,
        interval_ns: INTERVAL_NS,
        link_rate_bps: 10_000_000_000,
        tenants: (0..tenants).map(|t| format!("t{t}")).collect(),
        classes: (0..classes)
            .map(|c| ClassName {
                tenant: format!("t{}", c / apps),
                app: format!("a{}", c % apps),
            })
            .collect(),
        class_tenant: (0..classes).map(|c| c / apps).collect(),
        intervals: (0..intervals).map(interval).collect(),
        latency: Vec::new(),
        pacing: Vec::new(),
        tenant_drops: vec![0; tenants],
        tenant_frames: Vec::new(),
        engine_cpu: Vec::new(),
        backpressure: Vec::new(),
        frames_sent: 0,
        checks: Vec::new(),
        provenance: Default::default(),
        wall_s: 1.0,
    }
}
