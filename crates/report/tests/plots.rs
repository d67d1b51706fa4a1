//! The plots a researcher reads: the unit chosen from the data, the series drawn,
//! the ticks of the latency axis, and PNGs that decode at their stated size.

use std::fs;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use report::{
    ClassName, Interval, LatencyRecord, Mode, RunRecord, SweepLine, SweepPoint, app_panels,
    cdf_ticks_us, rate_unit, write_overlay_plots, write_run, write_sweep_plot,
};

/// A lab-sized run: tenant `web` with apps `api` and `static`, tenant `batch` with
/// one, 100 to 300 Mbit/s each, over two 1 s intervals, with a latency probe.
fn lab_run(enforcer: &str) -> RunRecord {
    let interval = |start_s: u64, mbps: [f64; 3]| Interval {
        start_ns: start_s * 1_000_000_000,
        end_ns: (start_s + 1) * 1_000_000_000,
        steady: true,
        class_bytes: mbps.iter().map(|m| (m * 1e6 / 8.0) as u64).collect(),
        class_ideal_bps: vec![100e6, 100e6, 300e6],
        class_active: vec![true; 3],
        tenant_ideal_bps: vec![200e6, 300e6],
        tenant_active: vec![true; 2],
    };
    let mut probe = Histogram::new(3).unwrap();
    for us in 1..=500 {
        probe.record(us * 1000).unwrap();
    }
    let class = |tenant: &str, app: &str| ClassName {
        tenant: tenant.into(),
        app: app.into(),
    };
    RunRecord {
        scenario: "lab-sized".into(),
        enforcer: enforcer.into(),
        mode: Mode::Lab,
        seed: 1,
        duration_ns: 2_000_000_000,
        interval_ns: 1_000_000_000,
        link_rate_bps: 500_000_000,
        tenants: vec!["web".into(), "batch".into()],
        classes: vec![
            class("web", "api"),
            class("web", "static"),
            class("batch", "default"),
        ],
        class_tenant: vec![0, 0, 1],
        intervals: vec![
            interval(0, [90.0, 110.0, 300.0]),
            interval(1, [100.0, 100.0, 290.0]),
        ],
        latency: vec![LatencyRecord {
            traffic: "web-probe".into(),
            histogram_ns: probe,
        }],
        pacing: Vec::new(),
        tenant_drops: vec![0, 0],
        tenant_frames: Vec::new(),
        engine_cpu: Vec::new(),
        backpressure: Vec::new(),
        frames_sent: 1000,
        checks: Vec::new(),
        provenance: Default::default(),
        wall_s: 2.0,
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!("report-plots-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Width and height of the PNG at `path`, decoded whole (a truncated file fails).
fn png_size(path: &Path) -> (u32, u32) {
    let decoder = png::Decoder::new(fs::File::open(path).unwrap());
    let mut reader = decoder
        .read_info()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader
        .next_frame(&mut pixels)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (frame.width, frame.height)
}

#[test]
fn the_unit_of_an_axis_comes_from_its_largest_value() {
    assert_eq!(rate_unit(300e6).name, "Mbit/s");
    assert_eq!(rate_unit(300e6).bps, 1e6);
    assert_eq!(rate_unit(9.4e9).name, "Gbit/s");
    assert_eq!(rate_unit(1e9).name, "Gbit/s");
    assert_eq!(rate_unit(999e6).name, "Mbit/s");
    assert_eq!(rate_unit(640e3).name, "kbit/s");
    assert_eq!(rate_unit(0.0).name, "kbit/s");
    assert_eq!(report::rate_text(300e6), "300.0 Mbit/s");
    assert_eq!(report::rate_text(2.5e9), "2.500 Gbit/s");
}

#[test]
fn a_tenant_of_several_apps_gets_its_apps_plotted() {
    let run = lab_run("tonic");
    let panels = app_panels(&run);
    assert_eq!(panels.len(), 1, "only `web` has more than one app");
    assert_eq!(run.tenants[panels[0].tenant], "web");
    let apps: Vec<&str> = panels[0]
        .classes
        .iter()
        .map(|&class| run.classes[class].app.as_str())
        .collect();
    assert_eq!(apps, ["api", "static"]);
}

#[test]
fn latency_ticks_are_one_two_five_of_each_decade() {
    assert_eq!(
        cdf_ticks_us(1.0, 1000.0),
        [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
    );
    // A narrow axis still gets several labels.
    let narrow = cdf_ticks_us(920.0, 2080.0);
    assert!(narrow.len() >= 3, "{narrow:?}");
    assert!(narrow.iter().all(|&us| (920.0..=2080.0).contains(&us)));
    // Six decades: too many for 1-2-5, so fewer per decade, never more than ten.
    let wide = cdf_ticks_us(0.01, 10_000.0);
    assert!(wide.len() <= 10 && wide.len() >= 4, "{wide:?}");
}

#[test]
fn each_run_folder_gets_its_plots_at_their_stated_size() {
    let temp = TempDir::new("run");
    write_run(&temp.0, &lab_run("tonic")).unwrap();
    assert_eq!(png_size(&temp.0.join("throughput.png")).0, 1000);
    assert_eq!(png_size(&temp.0.join("fairness.png")).0, 1000);
    assert_eq!(png_size(&temp.0.join("latency_cdf.png")).0, 1000);
    // One tenant of several apps: one panel.
    assert_eq!(png_size(&temp.0.join("throughput_apps.png")).0, 1000);

    // A run without a tenant of several apps leaves no apps plot behind, not
    // even one an earlier run wrote there.
    let mut single = lab_run("tonic");
    single.classes.truncate(1);
    single.classes.push(ClassName {
        tenant: "batch".into(),
        app: "default".into(),
    });
    single.class_tenant = vec![0, 1];
    for interval in &mut single.intervals {
        interval.class_bytes.truncate(2);
        interval.class_ideal_bps.truncate(2);
        interval.class_active.truncate(2);
    }
    write_run(&temp.0, &single).unwrap();
    assert!(!temp.0.join("throughput_apps.png").exists());
}

#[test]
fn overlays_hold_every_run_beside_the_report() {
    let temp = TempDir::new("overlay");
    let (a, b) = (lab_run("tonic"), lab_run("wf2q"));
    write_overlay_plots(&temp.0, &[&a, &b]).unwrap();
    // Panels of web, batch, web/api and web/static, two abreast.
    let (width, height) = png_size(&temp.0.join("overlay_throughput.png"));
    assert_eq!(width, 1400);
    assert!(height > 2 * 420, "two rows of panels: {height}");
    assert_eq!(png_size(&temp.0.join("overlay_fairness.png")).0, 1400);
    assert_eq!(png_size(&temp.0.join("overlay_latency_cdf.png")).0, 1400);
}

#[test]
fn a_sweep_figure_decodes_at_its_stated_size() {
    let temp = TempDir::new("sweep");
    fs::create_dir_all(&temp.0).unwrap();
    let path = temp.0.join("jain_mean.png");
    let point = |mean: f64| {
        Some(SweepPoint {
            mean,
            min: mean - 0.01,
            max: mean + 0.01,
        })
    };
    let lines = [
        SweepLine {
            name: "tonic".into(),
            points: vec![point(0.99), point(0.95), None],
        },
        SweepLine {
            name: "wf2q".into(),
            points: vec![point(1.0), point(0.99), point(0.98)],
        },
    ];
    let labels = ["1".to_string(), "2".into(), "4".into()];
    write_sweep_plot(
        &path,
        "Jain",
        "weight",
        &labels,
        "Jain's index",
        Some(1.05),
        &lines,
    )
    .unwrap();
    assert_eq!(png_size(&path).0, 1000);
}
