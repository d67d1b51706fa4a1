//! report.html and the PNGs of a run of many apps and many intervals stay the
//! size of what a screen shows: a bounded number of charts and panels, each
//! line thinned to a bounded number of points, and the page says what it left
//! out. The whole data stays in the CSVs.

mod common;

use std::fs;
use std::path::PathBuf;

use common::synthetic::many_apps;
use report::{write_html, write_overlay_plots, write_run};
use serde_json::Value;

struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!("report-many-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// What report.html's script draws: the JSON the page carries.
fn page_data(html: &str) -> Value {
    let start = "<script type=\"application/json\" id=\"report-data\">";
    let from = html.find(start).expect("the page carries its data") + start.len();
    let to = from + html[from..].find("</script>").unwrap();
    serde_json::from_str(&html[from..to]).unwrap()
}

fn png_height(path: &std::path::Path) -> u32 {
    let decoder = png::Decoder::new(fs::File::open(path).unwrap());
    decoder.read_info().unwrap().info().height
}

/// The charts bounded to 24 of a kind plus one of the rest, the points of each
/// line to 2,000, for 60 tenants of 3 apps over 2,500 intervals and two runs.
#[test]
fn a_page_of_many_apps_and_intervals_draws_a_bounded_number_of_series_and_points() {
    let temp = TempDir::new("page");
    let (tenants, apps, intervals) = (60, 3, 2_500);
    let records = [
        many_apps("wf2q", tenants, apps, intervals),
        many_apps("htb", tenants, apps, intervals),
    ];
    let dirs: Vec<PathBuf> = records
        .iter()
        .map(|run| {
            let dir = temp.0.join(&run.enforcer);
            write_run(&dir, run).unwrap();
            dir
        })
        .collect();
    write_overlay_plots(&temp.0, &records.iter().collect::<Vec<_>>()).unwrap();
    let html = fs::read_to_string(write_html(&temp.0, &dirs).unwrap()).unwrap();

    let data = page_data(&html);
    let charts = data["charts"].as_array().unwrap();
    let titled = |prefix: &str| {
        charts
            .iter()
            .filter(|c| c["title"].as_str().unwrap().starts_with(prefix))
            .count()
    };
    assert_eq!(titled("tenant "), 24);
    assert_eq!(titled("tenants: the other 36 together"), 1);
    assert_eq!(titled("app "), 24);
    assert_eq!(titled("apps: the other 156 together"), 1);
    for chart in charts {
        let x = chart["x"].as_array().unwrap().len();
        // The thinned points of the two runs share their times; the time axis
        // adds its two ends.
        assert!(x <= 2_000 + 2, "{}: {x} points", chart["title"]);
        for series in chart["series"].as_array().unwrap() {
            assert_eq!(series["values"].as_array().unwrap().len(), x);
        }
    }
    // Every throughput chart holds both runs and the ideal.
    for chart in charts.iter().filter(|c| c["unit"] != "") {
        assert_eq!(
            chart["series"].as_array().unwrap().len(),
            3,
            "{}",
            chart["title"]
        );
    }
    assert!(html.contains("of 60 tenants, the 24 with the most traffic have a chart each and the other 36 one chart together"));
    assert!(html.contains("Runs of more than 2000 intervals (the longest here has 2500)"));
    assert!(html.len() < 4 << 20, "the page has {} bytes", html.len());

    // The busiest tenant (t6, t13, ...: weight 7) has a chart; t0 (weight 1) not.
    assert!(html.contains("<figcaption>tenant t6</figcaption>"));
    assert!(!html.contains("<figcaption>tenant t0</figcaption>"));

    // The PNGs: ten tenants' lines, 24 panels at most, whatever the run holds.
    let wf2q = &dirs[0];
    let legend_rows_max = 12 * 30;
    assert!(png_height(&wf2q.join("throughput.png")) <= 44 + legend_rows_max + 420);
    assert!(png_height(&wf2q.join("throughput_apps.png")) <= 44 + 2 * legend_rows_max + 12 * 420);
    assert!(png_height(&wf2q.join("fairness.png")) <= 44 + legend_rows_max + 2 * 420);
    assert!(png_height(&temp.0.join("overlay_throughput.png")) <= 44 + 30 + 6 + 12 * 420);
    // The CSV keeps every row.
    let rows = fs::read_to_string(wf2q.join("timeseries.csv"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(rows, 1 + tenants * apps * intervals);
}
