//! PNG plots of one run. Rendered with an embedded font so that no system font
//! library is needed where the report is written (lab machines, CI containers).

use std::fs;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::figures::latency_us_at;
use crate::record::{LatencyRecord, RunRecord};
use crate::summary::interval_fairness;

/// DejaVu Sans, see assets/LICENSE-DejaVu.txt.
static FONT_TTF: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FONT: &str = "sans-serif";

const WIDTH_PX: u32 = 1000;
const HEIGHT_PX: u32 = 480;

fn register_font() -> io::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let registered = *REGISTERED
        .get_or_init(|| plotters::style::register_font(FONT, FontStyle::Normal, FONT_TTF).is_ok());
    if registered {
        Ok(())
    } else {
        Err(io::Error::other("the embedded font cannot be parsed"))
    }
}

fn plot_error(error: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("plot: {error}"))
}

/// Draws a `width` × `height` picture and writes it to `path` as a PNG. Encoded in
/// memory and written here, not by plotters' file target: that one flushes the
/// file's last bytes as it drops its writer, where an error (a full disk) is lost,
/// and leaves a truncated PNG behind as if it had been written.
fn write_png(
    path: &Path,
    (width, height): (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> io::Result<()>,
) -> io::Result<()> {
    let mut rgb = vec![0; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        draw(&root)?;
        root.present().map_err(plot_error)?;
    }
    let mut png = Vec::new();
    let mut encoder = png::Encoder::new(&mut png, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // What plotters' file target used (the image crate's defaults).
    encoder.set_compression(png::Compression::Fast);
    encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&rgb)?;
    writer.finish()?;
    fs::write(path, png)
}

/// Tableau's ten colours: distinct on screen and in print, unlike plotters' palette
/// whose yellow fades into the white background.
const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

fn colour(index: usize) -> RGBAColor {
    let (r, g, b) = PALETTE[index % PALETTE.len()];
    RGBColor(r, g, b).to_rgba()
}

/// An axis from 0 to the largest value with some headroom; never empty, since plotters
/// needs a range of positive width even when everything is 0.
fn axis_to(values: impl IntoIterator<Item = f64>, headroom: f64, at_least: f64) -> Range<f64> {
    let largest = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    0.0..(largest * headroom).max(at_least)
}

/// The time axis: the whole run, so that plots of the same scenario line up.
fn time_axis(run: &RunRecord) -> Range<f64> {
    let ends = run.intervals.iter().map(|interval| interval.end_s());
    axis_to(ends.chain([run.duration_ns as f64 / 1e9]), 1.0, 1e-3)
}

/// Points of a line, in chart coordinates.
type Curve = Vec<(f64, f64)>;

/// Values taken per interval: (interval index, time_s, value).
type Samples = Vec<(usize, f64, f64)>;

/// One named line of a panel.
struct Series<'a> {
    name: &'a str,
    colour: RGBAColor,
    samples: Samples,
}

/// Runs of consecutive intervals, so that lines stop where non-steady intervals were
/// left out instead of bridging them.
fn segments(samples: &[(usize, f64, f64)]) -> Vec<Curve> {
    let mut segments: Vec<Curve> = Vec::new();
    let mut previous: Option<usize> = None;
    for &(index, x, y) in samples {
        match segments.last_mut() {
            Some(segment) if previous.is_some_and(|p| p + 1 == index) => segment.push((x, y)),
            _ => segments.push(vec![(x, y)]),
        }
        previous = Some(index);
    }
    segments
}

/// Per-tenant throughput as steps over each interval, with each tenant's ideal dashed
/// in the same colour.
pub(crate) fn throughput(path: &Path, run: &RunRecord) -> io::Result<()> {
    register_font()?;
    let per_tenant: Vec<(Curve, Curve)> = (0..run.tenants.len())
        .map(|tenant| {
            let mut throughput = Vec::with_capacity(2 * run.intervals.len());
            let mut ideal = Vec::with_capacity(2 * run.intervals.len());
            for interval in &run.intervals {
                let start_s = interval.start_ns as f64 / 1e9;
                let throughput_gbps = run.tenant_throughput_bps(interval, tenant) / 1e9;
                let ideal_gbps = interval.tenant_ideal_bps(tenant) / 1e9;
                throughput.extend([
                    (start_s, throughput_gbps),
                    (interval.end_s(), throughput_gbps),
                ]);
                ideal.extend([(start_s, ideal_gbps), (interval.end_s(), ideal_gbps)]);
            }
            (throughput, ideal)
        })
        .collect();
    let y_axis = axis_to(
        per_tenant
            .iter()
            .flat_map(|(throughput, ideal)| throughput.iter().chain(ideal))
            .map(|&(_, gbps)| gbps),
        1.15,
        1e-3,
    );

    write_png(path, (WIDTH_PX, HEIGHT_PX), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!("{}: throughput per tenant (dashed: ideal)", run.enforcer),
                (FONT, 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(time_axis(run), y_axis)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("Gbit/s")
            .label_style((FONT, 14))
            .draw()
            .map_err(plot_error)?;
        for (tenant, (throughput, ideal)) in per_tenant.into_iter().enumerate() {
            let colour = colour(tenant);
            chart
                .draw_series(LineSeries::new(throughput, colour.stroke_width(2)))
                .map_err(plot_error)?
                .label(run.tenants[tenant].as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(DashedLineSeries::new(ideal, 6, 4, colour.stroke_width(1)))
                .map_err(plot_error)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
}

fn draw_legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    position: SeriesLabelPosition,
) -> io::Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(plot_error)
}

/// Jain's index per steady interval on top, each tenant's relative error below.
pub(crate) fn fairness(path: &Path, run: &RunRecord) -> io::Result<()> {
    register_font()?;
    let mut jain = Vec::new();
    let mut errors: Vec<Samples> = vec![Vec::new(); run.tenants.len()];
    for (index, interval) in run.intervals.iter().enumerate() {
        let Some(figures) = interval_fairness(run, interval) else {
            continue;
        };
        jain.push((index, interval.end_s(), figures.jain));
        for (tenant, error) in figures.rel_error {
            errors[tenant].push((index, interval.end_s(), error));
        }
    }

    write_png(path, (WIDTH_PX, 2 * HEIGHT_PX), |root| {
        let (upper, lower) = root.split_vertically(HEIGHT_PX);
        let jain_min = jain.iter().map(|&(_, _, j)| j).fold(1.0, f64::min);
        // Zoomed to where the values are: Jain's index of a good enforcer lives in the
        // last percent below 1, and a 0..1 axis would flatten it.
        let jain_span = ((1.0 - jain_min) * 1.5).max(0.01);
        let jain_axis = (1.0 - jain_span).max(0.0)..1.0 + jain_span / 20.0;
        draw_panel(
            &upper,
            run,
            &format!("{}: Jain's index of throughput / ideal", run.enforcer),
            "Jain's index",
            jain_axis,
            &[Series {
                name: "Jain",
                colour: colour(0),
                samples: jain,
            }],
        )?;
        let error_axis = axis_to(errors.iter().flatten().map(|&(_, _, e)| e), 1.15, 0.05);
        let tenants: Vec<Series> = errors
            .into_iter()
            .enumerate()
            .map(|(tenant, samples)| Series {
                name: &run.tenants[tenant],
                colour: colour(tenant),
                samples,
            })
            .collect();
        draw_panel(
            &lower,
            run,
            &format!("{}: relative error per tenant", run.enforcer),
            "|throughput - ideal| / ideal",
            error_axis,
            &tenants,
        )
    })
}

/// One panel of values taken over the steady intervals.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    run: &RunRecord,
    caption: &str,
    y_desc: &str,
    y_axis: Range<f64>,
    series: &[Series],
) -> io::Result<()> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(time_axis(run), y_axis)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_desc)
        .label_style((FONT, 14))
        .draw()
        .map_err(plot_error)?;
    for &Series {
        name,
        colour,
        ref samples,
    } in series
    {
        for segment in segments(samples) {
            chart
                .draw_series(LineSeries::new(segment, colour.stroke_width(2)).point_size(3))
                .map_err(plot_error)?;
        }
        // An empty series carries the legend entry once, whatever the segments.
        chart
            .draw_series(LineSeries::new(std::iter::empty(), colour.stroke_width(2)))
            .map_err(plot_error)?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// Whether `latency_cdf` has anything to draw.
pub(crate) fn has_latency(run: &RunRecord) -> bool {
    run.latency
        .iter()
        .any(|record| !record.histogram_ns.is_empty())
}

/// CDF of the latency of each rpc traffic, on a log axis since tails span decades.
pub(crate) fn latency_cdf(path: &Path, run: &RunRecord) -> io::Result<()> {
    register_font()?;
    let recorded: Vec<(usize, &LatencyRecord)> = run
        .latency
        .iter()
        .enumerate()
        .filter(|(_, record)| !record.histogram_ns.is_empty())
        .collect();
    let curves: Vec<Vec<(f64, f64)>> = recorded
        .iter()
        .map(|(_, record)| {
            let histogram = &record.histogram_ns;
            let mut curve = Vec::new();
            for step in histogram.iter_recorded() {
                let latency_us =
                    histogram.highest_equivalent(step.value_iterated_to()) as f64 / 1e3;
                if curve.is_empty() {
                    curve.push((latency_us, 0.0));
                }
                curve.push((latency_us, step.quantile_iterated_to()));
            }
            curve
        })
        .collect();
    // A log axis cannot reach 0: a latency under a nanosecond is drawn at 1 ns.
    let floor_us = 1e-3;
    let latencies = || curves.iter().flatten().map(|&(us, _)| us.max(floor_us));
    let lowest_us = latencies().fold(f64::INFINITY, f64::min);
    let highest_us = latencies().fold(floor_us, f64::max);
    let x_axis = if lowest_us < highest_us {
        lowest_us / 1.5..highest_us * 1.5
    } else {
        highest_us / 10.0..highest_us * 10.0
    };

    write_png(path, (WIDTH_PX, HEIGHT_PX), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(format!("{}: latency CDF", run.enforcer), (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x_axis.log_scale(), 0.0..1.0)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("latency (µs)")
            .y_desc("fraction of requests")
            .label_style((FONT, 14))
            .draw()
            .map_err(plot_error)?;
        for ((index, record), curve) in recorded.into_iter().zip(curves) {
            let colour = colour(index);
            let p99_us = latency_us_at(&record.histogram_ns, 0.99);
            let points = curve.into_iter().map(move |(us, q)| (us.max(floor_us), q));
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(plot_error)?
                .label(format!("{} (p99 {p99_us:.1} µs)", record.traffic))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
}
