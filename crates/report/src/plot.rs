//! PNG plots of one run, of the runs of one scenario overlaid, and of a sweep.
//! Rendered with an embedded font so that no system font library is needed where
//! the report is written (lab machines, CI containers).
//!
//! Every figure has the same frame: a title, a legend strip naming every line
//! (the ideal included), then its panels in a grid on shared axes. Measured lines
//! are solid and wide, ideals dashed, thin and drawn last, so that a run that meets
//! its ideal exactly still shows both.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::checks::{RateUnit, rate_unit};
use crate::figures::latency_us_at;
use crate::hosts::HostsRow;
use crate::record::{LatencyRecord, RunRecord};
use crate::summary::interval_fairness;

/// DejaVu Sans, see assets/LICENSE-DejaVu.txt.
static FONT_TTF: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FONT: &str = "sans-serif";

const WIDTH_PX: u32 = 1000;
/// One panel's height; a figure is as tall as its panels need.
const PANEL_HEIGHT_PX: u32 = 420;
/// Overlays put panels two abreast, each wide enough for the same fonts.
const OVERLAY_WIDTH_PX: u32 = 1400;
/// Fonts for a figure shown at its pixel size: labels of at least 16 px at 1000 px wide.
const TITLE_FONT_PX: u32 = 26;
const CAPTION_FONT_PX: u32 = 22;
const LABEL_FONT_PX: u32 = 18;
const TITLE_HEIGHT_PX: u32 = 44;
const LEGEND_ROW_PX: u32 = 30;
/// A figure of more panels would be too small to read; the title says what was left out.
const PANELS_MAX: usize = 24;

pub const OVERLAY_THROUGHPUT_PNG: &str = "overlay_throughput.png";
pub const OVERLAY_FAIRNESS_PNG: &str = "overlay_fairness.png";
pub const OVERLAY_LATENCY_CDF_PNG: &str = "overlay_latency_cdf.png";

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
    draw: impl FnOnce(&Area<'_>) -> io::Result<()>,
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

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

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

fn colour(index: usize) -> RGBColor {
    let (r, g, b) = PALETTE[index % PALETTE.len()];
    RGBColor(r, g, b)
}

/// The ideal in overlays, where colours name enforcers.
const IDEAL_COLOUR: RGBColor = RGBColor(0, 0, 0);

/// An axis from 0 to the largest value with some headroom; never empty, since plotters
/// needs a range of positive width even when everything is 0.
fn axis_to(values: impl IntoIterator<Item = f64>, headroom: f64, at_least: f64) -> Range<f64> {
    let largest = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    0.0..(largest * headroom).max(at_least)
}

/// The time axis: the whole of the longest run, so that plots of the same scenario line up.
fn time_axis<'a>(runs: impl IntoIterator<Item = &'a RunRecord>) -> Range<f64> {
    let ends = runs.into_iter().flat_map(|run| {
        run.intervals
            .iter()
            .map(|interval| interval.end_s())
            .chain([run.duration_ns as f64 / 1e9])
    });
    axis_to(ends, 1.0, 1e-3)
}

/// The most points a line is drawn with, on report.html and in a PNG: two per
/// pixel column of a chart 1000 px wide, which is what a screen shows.
pub(crate) const POINTS_MAX: usize = 2000;

/// Values per interval thinned to at most [`POINTS_MAX`] points, as they come:
/// up to `POINTS_MAX` intervals every one is kept; past that, intervals are put
/// in buckets of equal count, and each bucket is drawn as its lowest and its
/// highest value, in the order they came, at its first and last interval. A
/// bucket is under a pixel wide, so the line touches the very pixels the whole
/// data would: a spike or an oscillation stays as wide as it was, where a mean
/// per bucket would smooth an enforcer that swings around its share into one
/// that looks fair. The CSVs keep every interval. `N` values share the points'
/// times (a throughput and its ideal).
#[derive(Clone, Debug)]
pub(crate) struct Thinned<const N: usize> {
    per_bucket: usize,
    bucket: Option<Bucket<N>>,
    x: Vec<f64>,
    values: [Vec<f64>; N],
}

/// One bucket so far: its number, first start and last end, and per value its
/// lowest and highest with the place each came in.
#[derive(Clone, Copy, Debug)]
struct Bucket<const N: usize> {
    number: usize,
    start: f64,
    end: f64,
    count: usize,
    low: [(f64, usize); N],
    high: [(f64, usize); N],
}

impl<const N: usize> Thinned<N> {
    /// For a series of `intervals` intervals.
    pub(crate) fn new(intervals: usize) -> Self {
        let buckets = POINTS_MAX / 2;
        Thinned {
            per_bucket: if intervals <= POINTS_MAX {
                1
            } else {
                intervals.div_ceil(buckets)
            },
            bucket: None,
            x: Vec::new(),
            values: std::array::from_fn(|_| Vec::new()),
        }
    }

    /// The values of interval `interval` (counted from 0, ascending), which spans
    /// `start` to `end` on the x axis: a rate drawn as a step spans its
    /// interval; one drawn as a point has `start` = `end`.
    pub(crate) fn push(&mut self, interval: usize, start: f64, end: f64, values: [f64; N]) {
        let number = interval / self.per_bucket;
        match &mut self.bucket {
            Some(bucket) if bucket.number == number => {
                bucket.end = end;
                for (i, &v) in values.iter().enumerate() {
                    if v < bucket.low[i].0 {
                        bucket.low[i] = (v, bucket.count);
                    }
                    if v > bucket.high[i].0 {
                        bucket.high[i] = (v, bucket.count);
                    }
                }
                bucket.count += 1;
            }
            _ => {
                self.flush();
                self.bucket = Some(Bucket {
                    number,
                    start,
                    end,
                    count: 1,
                    low: values.map(|v| (v, 0)),
                    high: values.map(|v| (v, 0)),
                });
            }
        }
    }

    fn flush(&mut self) {
        let Some(bucket) = self.bucket.take() else {
            return;
        };
        let (first, last): ([f64; N], [f64; N]) = if bucket.count == 1 {
            let values = bucket.low.map(|(v, _)| v);
            (values, values)
        } else {
            let mut first = [0.0; N];
            let mut last = [0.0; N];
            for i in 0..N {
                let (low, high) = (bucket.low[i], bucket.high[i]);
                (first[i], last[i]) = if low.1 <= high.1 {
                    (low.0, high.0)
                } else {
                    (high.0, low.0)
                };
            }
            (first, last)
        };
        self.x.push(bucket.start);
        for (values, v) in self.values.iter_mut().zip(first) {
            values.push(v);
        }
        if bucket.end != bucket.start {
            self.x.push(bucket.end);
            for (values, v) in self.values.iter_mut().zip(last) {
                values.push(v);
            }
        }
    }

    /// The points' x and, per value, its y.
    pub(crate) fn finish(mut self) -> (Vec<f64>, [Vec<f64>; N]) {
        self.flush();
        (self.x, self.values)
    }
}

/// The indexes of the (at most) `max` largest of `keys`, in index order: the
/// series drawn one by one where there are more than a figure can show. Ties go
/// to the earlier.
pub(crate) fn top(keys: &[f64], max: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    if keys.len() > max {
        order.sort_by(|&a, &b| keys[b].total_cmp(&keys[a]).then(a.cmp(&b)));
        order.truncate(max);
        order.sort_unstable();
    }
    order
}

/// Points of a line, in chart coordinates.
type Curve = Vec<(f64, f64)>;

/// Values taken per interval: (interval index, time_s, value).
type Samples = Vec<(usize, f64, f64)>;

/// How a line is drawn: what was measured solid and wide; what it is judged
/// against dashed and thin, on top.
#[derive(Clone, Copy, PartialEq)]
enum Stroke {
    Measured,
    Ideal,
    /// A value with its spread over seeds, in a sweep.
    Marked,
}

/// One named line of a figure; lines of one name share a legend entry.
struct Line {
    name: String,
    colour: RGBColor,
    stroke: Stroke,
    /// Pixels; see `nested_width`.
    width: u32,
    segments: Vec<Curve>,
}

/// The width of the `index`th of `count` lines that may coincide: the first the
/// widest, each later one narrower and drawn on top, so that equal lines show as
/// nested bands rather than hiding each other.
fn nested_width(index: usize, count: usize, thinnest: u32) -> u32 {
    let above = count.saturating_sub(index + 1).min(5) as u32;
    thinnest + 3 * above
}

/// A measured line in a lighter tint of its colour, so that its ideal, dashed in
/// the full colour on top of it, stays visible where the two coincide.
fn tint(colour: RGBColor) -> RGBColor {
    let lighter = |c: u8| c + ((255 - c) as f64 * 0.35) as u8;
    RGBColor(lighter(colour.0), lighter(colour.1), lighter(colour.2))
}

/// One panel of a figure: its lines on the figure's x axis and its own y axis.
struct Panel {
    caption: String,
    y_desc: String,
    y_axis: Range<f64>,
    lines: Vec<Line>,
}

/// What a figure's legend strip shows: every line's name once, in the order drawn.
fn legend_of<'a>(panels: impl IntoIterator<Item = &'a Panel>) -> Vec<(String, RGBColor, Stroke)> {
    let mut legend: Vec<(String, RGBColor, Stroke)> = Vec::new();
    for line in panels.into_iter().flat_map(|panel| &panel.lines) {
        if !legend.iter().any(|(name, _, _)| *name == line.name) {
            legend.push((line.name.clone(), line.colour, line.stroke));
        }
    }
    legend
}

const LEGEND_SAMPLE_PX: i32 = 36;
const LEGEND_GAP_PX: i32 = 28;

fn text_width_px(text: &str, size_px: u32) -> i32 {
    (FONT, size_px).into_font().box_size(text).map_or(
        text.chars().count() as i32 * size_px as i32 / 2,
        |(w, _)| w as i32,
    )
}

/// The legend strip's entries placed in rows: (row, x) of each.
fn legend_layout(legend: &[(String, RGBColor, Stroke)], width_px: u32) -> Vec<(u32, i32)> {
    let (mut row, mut x) = (0, 16);
    legend
        .iter()
        .map(|(name, _, _)| {
            let entry = LEGEND_SAMPLE_PX + 8 + text_width_px(name, LABEL_FONT_PX);
            if x > 16 && x + entry > width_px as i32 - 16 {
                row += 1;
                x = 16;
            }
            let at = (row, x);
            x += entry + LEGEND_GAP_PX;
            at
        })
        .collect()
}

fn legend_rows(legend: &[(String, RGBColor, Stroke)], width_px: u32) -> u32 {
    legend_layout(legend, width_px)
        .last()
        .map_or(0, |&(row, _)| row + 1)
}

fn draw_legend(
    area: &Area<'_>,
    legend: &[(String, RGBColor, Stroke)],
    width_px: u32,
) -> io::Result<()> {
    for ((name, colour, stroke), (row, x)) in legend.iter().zip(legend_layout(legend, width_px)) {
        let y = (row * LEGEND_ROW_PX + LEGEND_ROW_PX / 2) as i32;
        let sample = [(x, y), (x + LEGEND_SAMPLE_PX, y)];
        match stroke {
            Stroke::Measured => area.draw(&PathElement::new(sample, tint(*colour).stroke_width(5))),
            Stroke::Ideal => area.draw(&DashedPathElement::new(
                sample,
                7,
                4,
                colour.stroke_width(2),
            )),
            Stroke::Marked => area
                .draw(&PathElement::new(sample, colour.stroke_width(2)))
                .and_then(|()| {
                    area.draw(&Circle::new(
                        (x + LEGEND_SAMPLE_PX / 2, y),
                        4,
                        colour.filled(),
                    ))
                }),
        }
        .map_err(plot_error)?;
        area.draw(&Text::new(
            name.clone(),
            (x + LEGEND_SAMPLE_PX + 8, y - LABEL_FONT_PX as i32 / 2 - 1),
            (FONT, LABEL_FONT_PX),
        ))
        .map_err(plot_error)?;
    }
    Ok(())
}

/// A figure's frame: title and legend on top, then `panels` slots of `columns`
/// abreast. Returns the picture's size and draws through `draw_panel`.
fn figure(
    path: &Path,
    width_px: u32,
    title: &str,
    legend: &[(String, RGBColor, Stroke)],
    panels: usize,
    columns: usize,
    draw_panel: impl Fn(usize, &Area<'_>) -> io::Result<()>,
) -> io::Result<()> {
    register_font()?;
    let columns = columns.max(1);
    let rows = panels.div_ceil(columns).max(1);
    let legend_px = legend_rows(legend, width_px) * LEGEND_ROW_PX + 6;
    let height_px = TITLE_HEIGHT_PX + legend_px + rows as u32 * PANEL_HEIGHT_PX;
    write_png(path, (width_px, height_px), |root| {
        let (top, body) = root.split_vertically(TITLE_HEIGHT_PX);
        top.draw(&Text::new(
            title.to_string(),
            (16, (TITLE_HEIGHT_PX - TITLE_FONT_PX) as i32 / 2),
            (FONT, TITLE_FONT_PX),
        ))
        .map_err(plot_error)?;
        let (legend_area, grid) = body.split_vertically(legend_px);
        draw_legend(&legend_area, legend, width_px)?;
        let cells = grid.split_evenly((rows, columns));
        for (index, cell) in cells.iter().enumerate().take(panels) {
            draw_panel(index, cell)?;
        }
        Ok(())
    })
}

fn draw_line_panel(
    area: &Area<'_>,
    x_axis: Range<f64>,
    x_desc: &str,
    panel: &Panel,
) -> io::Result<()> {
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.caption, (FONT, CAPTION_FONT_PX))
        .margin(12)
        .x_label_area_size(52)
        .y_label_area_size(84)
        .build_cartesian_2d(x_axis, panel.y_axis.clone())
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(panel.y_desc.as_str())
        .x_labels(8)
        .y_labels(6)
        .x_label_formatter(&|v| tick_text(*v))
        .y_label_formatter(&|v| tick_text(*v))
        .label_style((FONT, LABEL_FONT_PX))
        .axis_desc_style((FONT, LABEL_FONT_PX))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(plot_error)?;
    draw_lines(&mut chart, &panel.lines)
}

fn draw_lines<X, Y>(
    chart: &mut ChartContext<'_, BitMapBackend<'_>, Cartesian2d<X, Y>>,
    lines: &[Line],
) -> io::Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    // Ideals last, on top of what they are compared with.
    let order = [Stroke::Measured, Stroke::Marked, Stroke::Ideal];
    for stroke in order {
        for line in lines.iter().filter(|line| line.stroke == stroke) {
            for segment in &line.segments {
                let points = segment.iter().copied();
                match stroke {
                    Stroke::Measured => chart
                        .draw_series(LineSeries::new(
                            points,
                            tint(line.colour).stroke_width(line.width),
                        ))
                        .map(|_| ()),
                    Stroke::Ideal => chart
                        .draw_series(DashedLineSeries::new(
                            points,
                            7,
                            4,
                            line.colour.stroke_width(line.width),
                        ))
                        .map(|_| ()),
                    Stroke::Marked => chart
                        .draw_series(
                            LineSeries::new(points, line.colour.stroke_width(line.width))
                                .point_size(line.width + 2),
                        )
                        .map(|_| ()),
                }
                .map_err(plot_error)?;
            }
        }
    }
    Ok(())
}

/// `(start, value)`, `(end, value)` of each interval: a rate holds over its
/// interval; thinned to what the figure shows ([`Thinned`]).
fn steps(run: &RunRecord, value: impl Fn(&crate::record::Interval) -> f64) -> Curve {
    let mut thinned = Thinned::<1>::new(run.intervals.len());
    for (index, interval) in run.intervals.iter().enumerate() {
        let start = interval.start_ns as f64 / 1e9;
        thinned.push(index, start, interval.end_s(), [value(interval)]);
    }
    let (x, [y]) = thinned.finish();
    x.into_iter().zip(y).collect()
}

/// The lines of `samples` (see [`segments`]), each thinned to what the figure
/// shows ([`Thinned`]) for a run of `intervals` intervals.
fn thinned_segments(samples: &[(usize, f64, f64)], intervals: usize) -> Vec<Curve> {
    let mut lines: Vec<Curve> = Vec::new();
    let mut thinned: Option<Thinned<1>> = None;
    let mut previous: Option<usize> = None;
    for &(index, x, y) in samples {
        if previous.is_none_or(|p| p + 1 != index) {
            lines.extend(thinned.take().map(finished_curve));
        }
        thinned
            .get_or_insert_with(|| Thinned::new(intervals))
            .push(index, x, x, [y]);
        previous = Some(index);
    }
    lines.extend(thinned.map(finished_curve));
    lines
}

fn finished_curve(thinned: Thinned<1>) -> Curve {
    let (x, [y]) = thinned.finish();
    x.into_iter().zip(y).collect()
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

/// The largest value of the panels' lines, in bit/s.
fn largest(lines: &[Line]) -> f64 {
    lines
        .iter()
        .flat_map(|line| line.segments.iter().flatten())
        .map(|&(_, y)| y)
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max)
}

/// Rates in bit/s rescaled to the unit chosen from the largest of them.
fn in_unit(panels: &mut [Panel]) -> RateUnit {
    let unit = rate_unit(
        panels
            .iter()
            .map(|panel| largest(&panel.lines))
            .fold(0.0, f64::max),
    );
    for panel in panels.iter_mut() {
        for point in panel
            .lines
            .iter_mut()
            .flat_map(|line| line.segments.iter_mut().flatten())
        {
            point.1 /= unit.bps;
        }
        let top = largest(&panel.lines);
        panel.y_desc = unit.name.to_string();
        panel.y_axis = 0.0..(top * 1.12).max(1e-3);
    }
    unit
}

/// Gives every panel the y axis of the tallest, so that panels compare at a glance.
fn share_y(panels: &mut [Panel]) {
    let top = panels
        .iter()
        .map(|panel| panel.y_axis.end)
        .fold(0.0, f64::max);
    for panel in panels {
        panel.y_axis = 0.0..top;
    }
}

/// A tenant whose apps get a throughput panel of their own: one with more than one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppPanel {
    /// Index into `RunRecord::tenants`.
    pub tenant: usize,
    /// Its classes (indexes into `RunRecord::classes`), one line each.
    pub classes: Vec<usize>,
}

/// The tenants whose apps are plotted (throughput_apps.png, and an overlay panel
/// per app): each tenant of more than one app, with its apps. A tenant of one app
/// is its app; its panel says it all.
pub fn app_panels(run: &RunRecord) -> Vec<AppPanel> {
    classes_of_tenants(run)
        .into_iter()
        .enumerate()
        .filter(|(_, classes)| classes.len() > 1)
        .map(|(tenant, classes)| AppPanel { tenant, classes })
        .collect()
}

/// Each tenant's classes, in one pass over the classes.
fn classes_of_tenants(run: &RunRecord) -> Vec<Vec<usize>> {
    let mut classes = vec![Vec::new(); run.tenants.len()];
    for (class, &tenant) in run.class_tenant.iter().enumerate() {
        if let Some(of) = classes.get_mut(tenant) {
            of.push(class);
        }
    }
    classes
}

/// The throughput of the classes `classes` in `interval`: a tenant's is its
/// classes' (`RunRecord::tenant_throughput_bps` without looking at every class).
fn classes_throughput_bps(interval: &crate::record::Interval, classes: &[usize]) -> f64 {
    classes
        .iter()
        .map(|&class| interval.class_throughput_bps(class))
        .sum()
}

/// Lines of one panel at most, past which those with the most traffic are
/// drawn and the title or caption says how many were left out: more lines
/// than the palette has colours could not be told apart.
const LINES_MAX: usize = 10;

/// The (at most) `max` of `count` series with the most traffic over `run`, in
/// their order: the larger of the sums of `throughput` and `ideal` over its
/// intervals.
fn busiest(
    run: &RunRecord,
    count: usize,
    max: usize,
    throughput: impl Fn(&crate::record::Interval, usize) -> f64,
    ideal: impl Fn(&crate::record::Interval, usize) -> f64,
) -> Vec<usize> {
    if count <= max {
        return (0..count).collect();
    }
    let mut sums = vec![(0.0, 0.0); count];
    for interval in &run.intervals {
        for (i, sum) in sums.iter_mut().enumerate() {
            sum.0 += throughput(interval, i);
            sum.1 += ideal(interval, i);
        }
    }
    let keys: Vec<f64> = sums.iter().map(|&(t, i): &(f64, f64)| t.max(i)).collect();
    top(&keys, max)
}

/// The tenants of `run` its per-tenant figures draw: those with the most traffic.
fn busiest_tenants(run: &RunRecord, classes: &[Vec<usize>]) -> Vec<usize> {
    busiest(
        run,
        run.tenants.len(),
        LINES_MAX,
        |interval, t| classes_throughput_bps(interval, &classes[t]),
        |interval, t| interval.tenant_ideal_bps(t),
    )
}

/// `, the N with the most traffic of ALL WHAT` where some were left out.
fn left_out(shown: usize, all: usize, what: &str) -> String {
    if shown < all {
        format!(", the {shown} with the most traffic of {all} {what}")
    } else {
        String::new()
    }
}

fn rate_panel(caption: String, lines: Vec<Line>) -> Panel {
    Panel {
        caption,
        y_desc: String::new(),
        y_axis: 0.0..1.0,
        lines,
    }
}

/// Throughput per tenant, each against its ideal (dashed, same colour).
pub(crate) fn throughput(path: &Path, run: &RunRecord) -> io::Result<()> {
    let classes = classes_of_tenants(run);
    let tenants = busiest_tenants(run, &classes);
    let mut lines = Vec::new();
    for (nth, &tenant) in tenants.iter().enumerate() {
        lines.push(Line {
            name: run.tenants[tenant].clone(),
            colour: colour(nth),
            stroke: Stroke::Measured,
            width: nested_width(nth, tenants.len(), 3),
            segments: vec![steps(run, |i| classes_throughput_bps(i, &classes[tenant]))],
        });
    }
    for (nth, &tenant) in tenants.iter().enumerate() {
        lines.push(Line {
            name: format!("{} ideal", run.tenants[tenant]),
            colour: colour(nth),
            stroke: Stroke::Ideal,
            width: 2,
            segments: vec![steps(run, |i| i.tenant_ideal_bps(tenant))],
        });
    }
    let mut panels = [rate_panel("per tenant".into(), lines)];
    in_unit(&mut panels);
    let title = format!(
        "{} ({}): throughput per tenant{}",
        run.enforcer,
        run.mode.as_str(),
        left_out(tenants.len(), run.tenants.len(), "tenants")
    );
    let x_axis = time_axis([run]);
    figure(
        path,
        WIDTH_PX,
        &title,
        &legend_of(&panels),
        1,
        1,
        |_, area| draw_line_panel(area, x_axis.clone(), "time (s)", &panels[0]),
    )
}

/// The apps of each tenant of several, a panel per tenant, on shared axes.
pub(crate) fn throughput_apps(path: &Path, run: &RunRecord) -> io::Result<()> {
    let all = app_panels(run);
    let chosen = busiest(
        run,
        all.len(),
        PANELS_MAX,
        |interval, p| classes_throughput_bps(interval, &all[p].classes),
        |interval, p| interval.tenant_ideal_bps(all[p].tenant),
    );
    let mut panels: Vec<Panel> = chosen
        .iter()
        .map(|&p| {
            let AppPanel { tenant, classes } = &all[p];
            let apps = classes.len();
            let classes: Vec<usize> = busiest(
                run,
                apps,
                LINES_MAX,
                |interval, c| interval.class_throughput_bps(classes[c]),
                |interval, c| interval.class_ideal_bps(classes[c]),
            )
            .into_iter()
            .map(|c| classes[c])
            .collect();
            let mut lines = Vec::new();
            for (stroke, suffix) in [(Stroke::Measured, ""), (Stroke::Ideal, " ideal")] {
                for (nth, &class) in classes.iter().enumerate() {
                    let points = if stroke == Stroke::Ideal {
                        steps(run, |i| i.class_ideal_bps(class))
                    } else {
                        steps(run, |i| i.class_throughput_bps(class))
                    };
                    let app = &run.classes[class];
                    lines.push(Line {
                        // Named with the tenant: two tenants may both have an app `bulk`.
                        name: format!("{}/{}{suffix}", app.tenant, app.app),
                        colour: colour(nth),
                        stroke,
                        width: if stroke == Stroke::Ideal {
                            2
                        } else {
                            nested_width(nth, classes.len(), 3)
                        },
                        segments: vec![points],
                    });
                }
            }
            let caption = format!("tenant {}", run.tenants[*tenant]);
            rate_panel(caption + &left_out(classes.len(), apps, "apps"), lines)
        })
        .collect();
    in_unit(&mut panels);
    share_y(&mut panels);
    let title = format!(
        "{} ({}): throughput per app{}",
        run.enforcer,
        run.mode.as_str(),
        left_out(panels.len(), all.len(), "tenants of several apps")
    );
    let x_axis = time_axis([run]);
    let columns = panels.len().min(2);
    let width = if columns > 1 {
        OVERLAY_WIDTH_PX
    } else {
        WIDTH_PX
    };
    // Each panel names its apps; the legend strip names them once for all panels.
    let legend = legend_of(&panels);
    figure(
        path,
        width,
        &title,
        &legend,
        panels.len(),
        columns,
        |index, area| draw_line_panel(area, x_axis.clone(), "time (s)", &panels[index]),
    )
}

/// The fairness of one run's steady intervals.
struct FairnessSamples {
    jain: Samples,
    /// The mean relative error over the tenants judged, as summary.json's mean.
    mean_error: Samples,
    /// The relative error of each tenant asked for, in that order.
    errors: Vec<Samples>,
}

/// Jain's index of every steady interval, the mean relative error, and the
/// relative error of each of `tenants`, of one run.
fn fairness_samples(run: &RunRecord, tenants: &[usize]) -> FairnessSamples {
    let mut asked: Vec<Option<usize>> = vec![None; run.tenants.len()];
    for (nth, &tenant) in tenants.iter().enumerate() {
        asked[tenant] = Some(nth);
    }
    let mut samples = FairnessSamples {
        jain: Vec::new(),
        mean_error: Vec::new(),
        errors: vec![Vec::new(); tenants.len()],
    };
    for (index, interval) in run.intervals.iter().enumerate() {
        let Some(figures) = interval_fairness(run, interval) else {
            continue;
        };
        let x = interval.end_s();
        samples.jain.push((index, x, figures.jain));
        let sum: f64 = figures.rel_error.iter().map(|&(_, e)| e).sum();
        let mean = sum / figures.rel_error.len() as f64;
        samples.mean_error.push((index, x, mean));
        for (tenant, error) in figures.rel_error {
            if let Some(nth) = asked.get(tenant).copied().flatten() {
                samples.errors[nth].push((index, x, error));
            }
        }
    }
    samples
}

/// Jain's index on a fixed 0..1 axis and relative error on 0..max(1, data), so
/// that the figures of two runs compare by eye.
fn jain_panel(caption: String, lines: Vec<Line>) -> Panel {
    Panel {
        caption,
        y_desc: "Jain's index".into(),
        y_axis: 0.0..1.05,
        lines,
    }
}

fn error_panel(caption: String, lines: Vec<Line>) -> Panel {
    let top = largest(&lines);
    Panel {
        caption,
        y_desc: "|throughput − ideal| / ideal".into(),
        y_axis: 0.0..(top * 1.1).max(1.0),
        lines,
    }
}

/// Jain's index per steady interval on top, each tenant's relative error below.
pub(crate) fn fairness(path: &Path, run: &RunRecord) -> io::Result<()> {
    let tenants = busiest_tenants(run, &classes_of_tenants(run));
    let samples = fairness_samples(run, &tenants);
    let intervals = run.intervals.len();
    let panels = [
        jain_panel(
            "Jain's index of throughput / ideal (steady intervals)".into(),
            vec![Line {
                name: "Jain's index".into(),
                colour: IDEAL_COLOUR,
                stroke: Stroke::Marked,
                width: 2,
                segments: thinned_segments(&samples.jain, intervals),
            }],
        ),
        error_panel(
            format!(
                "relative error per tenant{}",
                left_out(tenants.len(), run.tenants.len(), "tenants")
            ),
            samples
                .errors
                .iter()
                .zip(&tenants)
                .enumerate()
                .map(|(nth, (errors, &tenant))| Line {
                    name: run.tenants[tenant].clone(),
                    colour: colour(nth),
                    stroke: Stroke::Marked,
                    width: nested_width(nth, tenants.len(), 2),
                    segments: thinned_segments(errors, intervals),
                })
                .collect(),
        ),
    ];
    let title = format!("{} ({}): fairness", run.enforcer, run.mode.as_str());
    let x_axis = time_axis([run]);
    figure(
        path,
        WIDTH_PX,
        &title,
        &legend_of(&panels),
        2,
        1,
        |index, area| draw_line_panel(area, x_axis.clone(), "time (s)", &panels[index]),
    )
}

/// Whether `latency_cdf` has anything to draw.
pub(crate) fn has_latency(run: &RunRecord) -> bool {
    run.latency
        .iter()
        .any(|record| !record.histogram_ns.is_empty())
}

/// A log axis cannot reach 0: a latency under a nanosecond is drawn at 1 ns.
const LATENCY_FLOOR_US: f64 = 1e-3;

/// The CDF of one histogram as (latency µs, fraction at or below).
fn cdf(record: &LatencyRecord) -> Curve {
    let histogram = &record.histogram_ns;
    let mut curve = Vec::new();
    for step in histogram.iter_recorded() {
        let latency_us = (histogram.highest_equivalent(step.value_iterated_to()) as f64 / 1e3)
            .max(LATENCY_FLOOR_US);
        if curve.is_empty() {
            curve.push((latency_us, 0.0));
        }
        curve.push((latency_us, step.quantile_iterated_to()));
    }
    curve
}

/// Ticks of a log axis of microseconds from `low_us` to `high_us`: the densest of
/// 1, 1.2, 1.5, 2, 2.5, 3..9 of each decade (a narrow axis), every digit, 1, 2 and 5,
/// 1 and 3, or the decades alone, that is few enough to label without overlap.
pub fn cdf_ticks_us(low_us: f64, high_us: f64) -> Vec<f64> {
    const TICKS_MAX: usize = 10;
    let (first, last) = (low_us.log10().floor() as i32, high_us.log10().ceil() as i32);
    let ticks = |mantissas: &[f64]| -> Vec<f64> {
        (first..=last)
            .flat_map(|exponent| mantissas.iter().map(move |m| m * 10f64.powi(exponent)))
            .filter(|&us| us >= low_us && us <= high_us)
            .collect()
    };
    let finer = [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    let digits = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    [&finer[..], &digits, &[1.0, 2.0, 5.0], &[1.0, 3.0], &[1.0]]
        .into_iter()
        .map(ticks)
        .find(|ticks| ticks.len() <= TICKS_MAX)
        .unwrap_or_else(|| ticks(&[1.0]).into_iter().step_by(2).collect())
}

/// A tick's number without trailing zeros: `2`, `0.25`, `1500`.
fn tick_text(value: f64) -> String {
    crate::figures::trimmed(value, 4)
}

fn latency_axis(curves: &[&Curve]) -> Range<f64> {
    let latencies = || {
        curves
            .iter()
            .flat_map(|curve| curve.iter())
            .map(|&(us, _)| us)
    };
    let lowest_us = latencies().fold(f64::INFINITY, f64::min);
    let highest_us = latencies().fold(LATENCY_FLOOR_US, f64::max);
    if lowest_us < highest_us {
        lowest_us / 1.3..highest_us * 1.3
    } else {
        highest_us / 10.0..highest_us * 10.0
    }
}

fn draw_cdf_panel(area: &Area<'_>, x_axis: Range<f64>, panel: &Panel) -> io::Result<()> {
    let ticks = cdf_ticks_us(x_axis.start, x_axis.end);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.caption, (FONT, CAPTION_FONT_PX))
        .margin(12)
        .x_label_area_size(52)
        .y_label_area_size(84)
        .build_cartesian_2d(x_axis.log_scale().with_key_points(ticks), 0.0..1.0)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("latency (µs, log scale)")
        .y_desc("fraction of requests")
        .y_labels(6)
        .x_label_formatter(&|us| tick_text(*us))
        .label_style((FONT, LABEL_FONT_PX))
        .axis_desc_style((FONT, LABEL_FONT_PX))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(plot_error)?;
    draw_lines(&mut chart, &panel.lines)
}

/// CDF of the latency of each request/response traffic, one line each, on a log
/// axis since tails span decades.
pub(crate) fn latency_cdf(path: &Path, run: &RunRecord) -> io::Result<()> {
    let lines: Vec<Line> = run
        .latency
        .iter()
        .enumerate()
        .filter(|(_, record)| !record.histogram_ns.is_empty())
        .map(|(index, record)| Line {
            name: format!(
                "{} (p99 {:.1} µs)",
                record.traffic,
                latency_us_at(&record.histogram_ns, 0.99)
            ),
            colour: colour(index),
            stroke: Stroke::Measured,
            width: nested_width(index, run.latency.len(), 3),
            segments: vec![cdf(record)],
        })
        .collect();
    let x_axis = latency_axis(&lines.iter().flat_map(|l| &l.segments).collect::<Vec<_>>());
    let panel = Panel {
        caption: "per traffic".into(),
        y_desc: String::new(),
        y_axis: 0.0..1.0,
        lines,
    };
    let title = format!("{} ({}): latency CDF", run.enforcer, run.mode.as_str());
    figure(
        path,
        WIDTH_PX,
        &title,
        &legend_of([&panel]),
        1,
        1,
        |_, area| draw_cdf_panel(area, x_axis.clone(), &panel),
    )
}

/// How a run is named in an overlay: its enforcer, and its world where runs of
/// both are overlaid.
fn run_names(runs: &[&RunRecord]) -> Vec<String> {
    let mixed = runs.iter().any(|run| run.mode != runs[0].mode);
    runs.iter()
        .map(|run| {
            if mixed {
                format!("{} ({})", run.enforcer, run.mode.as_str())
            } else {
                run.enforcer.clone()
            }
        })
        .collect()
}

/// A panel of one quantity of every run: `measured` per run in its colour, and
/// the ideal of each run dashed black (named once: runs of one scenario share it).
fn overlay_rate_panel(
    caption: String,
    runs: &[&RunRecord],
    names: &[String],
    measured: impl Fn(usize, &crate::record::Interval) -> f64,
    ideal: impl Fn(usize, &crate::record::Interval) -> f64,
) -> Panel {
    let mut lines: Vec<Line> = runs
        .iter()
        .zip(names)
        .enumerate()
        .map(|(index, (run, name))| Line {
            name: name.clone(),
            colour: colour(index),
            stroke: Stroke::Measured,
            width: nested_width(index, runs.len(), 3),
            segments: vec![steps(run, |i| measured(index, i))],
        })
        .collect();
    lines.extend(runs.iter().enumerate().map(|(index, run)| Line {
        name: "ideal".into(),
        colour: IDEAL_COLOUR,
        stroke: Stroke::Ideal,
        width: 2,
        segments: vec![steps(run, |i| ideal(index, i))],
    }));
    rate_panel(caption, lines)
}

/// The overlays of the runs of one scenario, written into `dir` beside report.html:
/// overlay_throughput.png (a panel per tenant, and per app of a tenant of several,
/// every run and the ideal on shared axes), overlay_fairness.png (Jain's index and
/// the mean relative error of every run per steady interval) and
/// overlay_latency_cdf.png (a panel per request/response traffic, where a run
/// measured latency). Runs are matched by tenant and app name; a run without one
/// has no line in its panel.
pub fn write_overlay_plots(dir: &Path, runs: &[&RunRecord]) -> io::Result<()> {
    fs::create_dir_all(dir).map_err(crate::path_error::at(dir))?;
    let file = |name: &str, write: &dyn Fn(&Path) -> io::Result<()>| {
        let path = dir.join(name);
        write(&path).map_err(crate::path_error::at(&path))
    };
    if runs.is_empty() {
        return Ok(());
    }
    let names = run_names(runs);
    file(OVERLAY_THROUGHPUT_PNG, &|path| {
        overlay_throughput(path, runs, &names)
    })?;
    file(OVERLAY_FAIRNESS_PNG, &|path| {
        overlay_fairness(path, runs, &names)
    })?;
    if runs.iter().any(|run| has_latency(run)) {
        file(OVERLAY_LATENCY_CDF_PNG, &|path| {
            overlay_latency(path, runs, &names)
        })
    } else {
        file(
            OVERLAY_LATENCY_CDF_PNG,
            &|path| match fs::remove_file(path) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
                _ => Ok(()),
            },
        )
    }
}

/// The throughput of one flow of a run across hosts as steps: each row holds its
/// rate over the interval that ends at its `time_s`, the first of which ends at
/// the interval's length.
fn flow_steps(rows: &[HostsRow], flow: &str, value: impl Fn(&HostsRow) -> f64) -> Curve {
    let interval_s = rows
        .iter()
        .map(|row| row.time_s)
        .fold(f64::INFINITY, f64::min);
    let of_flow: Vec<&HostsRow> = rows.iter().filter(|row| row.flow == flow).collect();
    let mut thinned = Thinned::<1>::new(of_flow.len());
    for (index, row) in of_flow.into_iter().enumerate() {
        thinned.push(index, row.time_s - interval_s, row.time_s, [value(row)]);
    }
    finished_curve(thinned)
}

/// overlay_throughput.png of runs across hosts (hosts.md), written into `dir`
/// beside report.html: a panel per flow (VM to VM), every run (`runs`: its name and
/// its timeseries rows) and its ideal on shared axes. Runs are matched by flow name.
pub fn write_hosts_overlay_plot(
    dir: &Path,
    scenario: &str,
    runs: &[(String, Vec<HostsRow>)],
) -> io::Result<()> {
    let Some((_, first)) = runs.first() else {
        return Ok(());
    };
    let mut flows: Vec<&HostsRow> = Vec::new();
    let mut traffic: Vec<(f64, f64)> = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for row in first {
        let at = *seen.entry(row.flow.as_str()).or_insert_with(|| {
            flows.push(row);
            traffic.push((0.0, 0.0));
            flows.len() - 1
        });
        traffic[at].0 += row.throughput_bps;
        traffic[at].1 += row.ideal_bps;
    }
    let all = flows.len();
    let keys: Vec<f64> = traffic.iter().map(|&(t, i)| t.max(i)).collect();
    let flows: Vec<&HostsRow> = top(&keys, PANELS_MAX)
        .into_iter()
        .map(|f| flows[f])
        .collect();
    let mut panels: Vec<Panel> = flows
        .iter()
        .map(|flow| {
            let mut lines: Vec<Line> = runs
                .iter()
                .enumerate()
                .map(|(index, (name, rows))| Line {
                    name: name.clone(),
                    colour: colour(index),
                    stroke: Stroke::Measured,
                    width: nested_width(index, runs.len(), 3),
                    segments: vec![flow_steps(rows, &flow.flow, |r| r.throughput_bps)],
                })
                .collect();
            lines.extend(runs.iter().map(|(_, rows)| Line {
                name: "ideal".into(),
                colour: IDEAL_COLOUR,
                stroke: Stroke::Ideal,
                width: 2,
                segments: vec![flow_steps(rows, &flow.flow, |r| r.ideal_bps)],
            }));
            rate_panel(
                format!("flow {} ({}/{})", flow.flow, flow.host, flow.tenant),
                lines,
            )
        })
        .collect();
    in_unit(&mut panels);
    share_y(&mut panels);
    let title = format!(
        "{scenario}: throughput of every run (dashed: ideal){}",
        left_out(panels.len(), all, "flows")
    );
    let end_s = runs
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|row| row.time_s))
        .fold(0.0, f64::max);
    let x_axis = 0.0..end_s.max(1e-3);
    let path = dir.join(OVERLAY_THROUGHPUT_PNG);
    figure(
        &path,
        OVERLAY_WIDTH_PX,
        &title,
        &legend_of(&panels),
        panels.len(),
        panels.len().min(2),
        |index, area| draw_line_panel(area, x_axis.clone(), "time (s)", &panels[index]),
    )
    .map_err(crate::path_error::at(&path))
}

/// A run's tenants and classes by name, and each tenant's classes, to match
/// the runs of an overlay by name.
struct ByName<'a> {
    tenants: HashMap<&'a str, usize>,
    classes: HashMap<(&'a str, &'a str), usize>,
    of_tenant: Vec<Vec<usize>>,
}

impl<'a> ByName<'a> {
    fn of(run: &'a RunRecord) -> Self {
        ByName {
            tenants: run
                .tenants
                .iter()
                .enumerate()
                .map(|(t, name)| (name.as_str(), t))
                .collect(),
            classes: run
                .classes
                .iter()
                .enumerate()
                .map(|(c, name)| ((name.tenant.as_str(), name.app.as_str()), c))
                .collect(),
            of_tenant: classes_of_tenants(run),
        }
    }
}

/// One panel of overlay_throughput.png: a tenant, or a class (an app of a tenant
/// of several), of the first run.
#[derive(Clone, Copy)]
enum Overlaid {
    Tenant(usize),
    Class(usize),
}

fn overlay_throughput(path: &Path, runs: &[&RunRecord], names: &[String]) -> io::Result<()> {
    let first = runs[0];
    let by_name: Vec<ByName> = runs.iter().map(|run| ByName::of(run)).collect();
    let mut candidates: Vec<Overlaid> = (0..first.tenants.len()).map(Overlaid::Tenant).collect();
    for AppPanel { classes, .. } in app_panels(first) {
        candidates.extend(classes.into_iter().map(Overlaid::Class));
    }
    let chosen = busiest(
        first,
        candidates.len(),
        PANELS_MAX,
        |interval, p| match candidates[p] {
            Overlaid::Tenant(t) => classes_throughput_bps(interval, &by_name[0].of_tenant[t]),
            Overlaid::Class(c) => interval.class_throughput_bps(c),
        },
        |interval, p| match candidates[p] {
            Overlaid::Tenant(t) => interval.tenant_ideal_bps(t),
            Overlaid::Class(c) => interval.class_ideal_bps(c),
        },
    );
    let mut panels: Vec<Panel> = chosen
        .iter()
        .map(|&p| match candidates[p] {
            Overlaid::Tenant(t) => {
                let tenant = first.tenants[t].as_str();
                let at: Vec<Option<usize>> = by_name
                    .iter()
                    .map(|b| b.tenants.get(tenant).copied())
                    .collect();
                overlay_rate_panel(
                    format!("tenant {tenant}"),
                    runs,
                    names,
                    |r, i| {
                        at[r].map_or(0.0, |t| classes_throughput_bps(i, &by_name[r].of_tenant[t]))
                    },
                    |r, i| at[r].map_or(0.0, |t| i.tenant_ideal_bps(t)),
                )
            }
            Overlaid::Class(c) => {
                let name = &first.classes[c];
                let key = (name.tenant.as_str(), name.app.as_str());
                let at: Vec<Option<usize>> = by_name
                    .iter()
                    .map(|b| b.classes.get(&key).copied())
                    .collect();
                overlay_rate_panel(
                    format!("app {}/{}", name.tenant, name.app),
                    runs,
                    names,
                    |r, i| at[r].map_or(0.0, |c| i.class_throughput_bps(c)),
                    |r, i| at[r].map_or(0.0, |c| i.class_ideal_bps(c)),
                )
            }
        })
        .collect();
    in_unit(&mut panels);
    share_y(&mut panels);
    let title = format!(
        "{}: throughput of every run (dashed: ideal){}",
        first.scenario,
        left_out(panels.len(), candidates.len(), "panels")
    );
    let x_axis = time_axis(runs.iter().copied());
    let columns = panels.len().min(2);
    figure(
        path,
        OVERLAY_WIDTH_PX,
        &title,
        &legend_of(&panels),
        panels.len(),
        columns,
        |index, area| draw_line_panel(area, x_axis.clone(), "time (s)", &panels[index]),
    )
}

fn overlay_fairness(path: &Path, runs: &[&RunRecord], names: &[String]) -> io::Result<()> {
    let mut jain = Vec::new();
    let mut error = Vec::new();
    for (index, (run, name)) in runs.iter().zip(names).enumerate() {
        let samples = fairness_samples(run, &[]);
        let intervals = run.intervals.len();
        jain.push(Line {
            name: name.clone(),
            colour: colour(index),
            stroke: Stroke::Marked,
            width: nested_width(index, runs.len(), 2),
            segments: thinned_segments(&samples.jain, intervals),
        });
        error.push(Line {
            name: name.clone(),
            colour: colour(index),
            stroke: Stroke::Marked,
            width: nested_width(index, runs.len(), 2),
            segments: thinned_segments(&samples.mean_error, intervals),
        });
    }
    let panels = [
        jain_panel("Jain's index of throughput / ideal".into(), jain),
        error_panel("relative error, mean over tenants".into(), error),
    ];
    let title = format!(
        "{}: fairness of every run (steady intervals)",
        runs[0].scenario
    );
    let x_axis = time_axis(runs.iter().copied());
    figure(
        path,
        OVERLAY_WIDTH_PX,
        &title,
        &legend_of(&panels),
        2,
        1,
        |index, area| draw_line_panel(area, x_axis.clone(), "time (s)", &panels[index]),
    )
}

fn overlay_latency(path: &Path, runs: &[&RunRecord], names: &[String]) -> io::Result<()> {
    let mut traffics: Vec<&str> = Vec::new();
    for record in runs.iter().flat_map(|run| &run.latency) {
        if !record.histogram_ns.is_empty() && !traffics.contains(&record.traffic.as_str()) {
            traffics.push(&record.traffic);
        }
    }
    traffics.truncate(PANELS_MAX);
    let panels: Vec<Panel> = traffics
        .iter()
        .map(|&traffic| {
            let lines = runs
                .iter()
                .zip(names)
                .enumerate()
                .filter_map(|(index, (run, name))| {
                    let record = run
                        .latency
                        .iter()
                        .find(|r| r.traffic == traffic && !r.histogram_ns.is_empty())?;
                    Some(Line {
                        name: name.clone(),
                        colour: colour(index),
                        stroke: Stroke::Measured,
                        width: nested_width(index, runs.len(), 3),
                        segments: vec![cdf(record)],
                    })
                })
                .collect();
            Panel {
                caption: format!("traffic {traffic}"),
                y_desc: String::new(),
                y_axis: 0.0..1.0,
                lines,
            }
        })
        .collect();
    let x_axis = latency_axis(
        &panels
            .iter()
            .flat_map(|p| &p.lines)
            .flat_map(|l| &l.segments)
            .collect::<Vec<_>>(),
    );
    let title = format!("{}: latency CDF of every run", runs[0].scenario);
    let columns = panels.len().min(2);
    figure(
        path,
        OVERLAY_WIDTH_PX,
        &title,
        &legend_of(&panels),
        panels.len(),
        columns,
        |index, area| draw_cdf_panel(area, x_axis.clone(), &panels[index]),
    )
}

/// One line of a sweep's figure: per value of the swept key (in order), the mean
/// over seeds and the lowest and highest seed's; `None` where nothing was measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepLine {
    pub name: String,
    pub points: Vec<Option<SweepPoint>>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepPoint {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// How many of `labels`' texts fit side by side on an x axis in a figure
/// `width_px` wide, at least one.
fn labels_that_fit(labels: &[String], width_px: u32) -> usize {
    // The axis: the figure less its margins and the y labels' area; a glyph is
    // about 0.6 of the font's size wide, and labels keep a gap between them.
    let axis_px = f64::from(width_px.saturating_sub(2 * 12 + 84));
    let widest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(1);
    let label_px = widest as f64 * f64::from(LABEL_FONT_PX) * 0.6 + f64::from(LABEL_FONT_PX);
    ((axis_px / label_px) as usize).max(1)
}

/// One figure of a sweep against the swept key, whose values `x_labels` name in
/// order: a line per `lines` through the means, a bar over each point from the
/// lowest to the highest seed. `y_top`: the axis's top where the figure has a
/// fixed range (Jain's index); from the data otherwise.
pub fn write_sweep_plot(
    path: &Path,
    title: &str,
    x_desc: &str,
    x_labels: &[String],
    y_desc: &str,
    y_top: Option<f64>,
    lines: &[SweepLine],
) -> io::Result<()> {
    let top = y_top.unwrap_or_else(|| {
        let highest = lines
            .iter()
            .flat_map(|line| line.points.iter().flatten())
            .map(|point| point.max)
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        (highest * 1.12).max(1e-9)
    });
    let legend: Vec<(String, RGBColor, Stroke)> = lines
        .iter()
        .enumerate()
        .map(|(index, line)| (line.name.clone(), colour(index), Stroke::Marked))
        .collect();
    let count = x_labels.len().max(1);
    // Lines side by side around each value, so that their bars do not hide each other.
    let offset = |index: usize| {
        let spread = 0.3_f64.min(0.06 * lines.len() as f64);
        if lines.len() < 2 {
            0.0
        } else {
            -spread / 2.0 + spread * index as f64 / (lines.len() - 1) as f64
        }
    };
    figure(path, WIDTH_PX, title, &legend, 1, 1, |_, area| {
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(52)
            .y_label_area_size(84)
            .build_cartesian_2d(-0.5..count as f64 - 0.5, 0.0..top)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .y_labels(6)
            .y_label_formatter(&|v| tick_text(*v))
            // At most one tick per value, and no more than fit side by side:
            // plotters then puts them on the integers (every value's place, or
            // every 2nd, 5th, 10th... where the labels would overlap).
            .x_labels(count.min(labels_that_fit(x_labels, WIDTH_PX)))
            .x_label_formatter(&|x| {
                let index = x.round();
                if (x - index).abs() < 1e-6 && index >= 0.0 && (index as usize) < x_labels.len() {
                    x_labels[index as usize].clone()
                } else {
                    String::new()
                }
            })
            .label_style((FONT, LABEL_FONT_PX))
            .axis_desc_style((FONT, LABEL_FONT_PX))
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.12))
            .draw()
            .map_err(plot_error)?;
        for (index, line) in lines.iter().enumerate() {
            let colour = colour(index);
            let at = |x: usize| x as f64 + offset(index);
            let measured: Vec<(usize, f64, f64)> = line
                .points
                .iter()
                .enumerate()
                .filter_map(|(x, point)| point.map(|p| (x, at(x), p.mean)))
                .collect();
            for segment in segments(&measured) {
                chart
                    .draw_series(LineSeries::new(segment, colour.stroke_width(2)).point_size(5))
                    .map_err(plot_error)?;
            }
            chart
                .draw_series(line.points.iter().enumerate().filter_map(|(x, point)| {
                    point.map(|p| {
                        ErrorBar::new_vertical(
                            at(x),
                            p.min,
                            p.mean,
                            p.max,
                            colour.stroke_width(2),
                            12,
                        )
                    })
                }))
                .map_err(plot_error)?;
        }
        Ok(())
    })
}
