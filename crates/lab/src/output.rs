//! Writing a figure: `<out>/fig<N>.csv`, `.json`, `.png` and `.svg`.
//!
//! Charts are drawn with plotters. Text goes through `ab_glyph` with DejaVu Sans embedded from
//! the `dejavu` crate and registered once as "sans-serif", so rendering needs no system font
//! library and looks the same on every host.
//!
//! Every figure of every `bench` is drawn here, by [`write_charts`], with the rules of DESIGN.md's
//! house style (issue 34, point 10), so that no figure is patched on its own:
//!
//! * panels in a grid of at most [`MAX_COLUMNS`] columns of [`PANEL_W`] px (a figure is at most
//!   [`MAX_WIDTH`] px wide), each titled with its own letter, (a), (b), ... in order;
//! * a categorical x axis ([`XAxis::Categories`]: algorithms, key kinds) gets grouped bars; a
//!   numeric one ([`XAxis::Numeric`]: batch sizes, bytes, skews) lines with markers, on a log
//!   scale when its values span more than 10x; tick labels that would overlap are rotated;
//! * the y axis: linear 0-1 (or 0-100 for a percentage) for precision, recall, F1, shares and
//!   scores; otherwise log when the positive values span more than 10x, with ticks labelled
//!   like 1e-4 (never "0"), and linear from 0 otherwise. A value of exactly 0 is drawn as a
//!   downward triangle on the axis floor (a bar of height 0, or log 0, would be invisible), and
//!   the caption says so;
//! * one colour per series across all the panels of a figure (by name; a "p99" series is the
//!   darker shade of its "avg"), the paper's values ([`Series::paper`]) in the colour of the
//!   series they compare with but hollow (bars, markers) and dashed (lines);
//! * one legend for the figure, below the panels (never over data);
//! * error bars from [`Series::spread`] (min..max of repeated measurements);
//! * a caption line saying when the run was `--quick`, when the machine was loaded (the
//!   1-minute load average above the number of cores when the chart is written: see
//!   [`machine_load`]), and what the markers mean.
//!
//! The PNG carries a `netsift-chart` text chunk: a JSON [`ChartKey`] with each panel's plot
//! area in pixels and each series' colour and number of drawn values, so that a test can check,
//! from the file alone, that every series of the legend has visible marks (tests/charts.rs).

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::{Deserialize, Serialize};

use crate::{LabError, Point};

/// How a panel's x axis is drawn.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum XAxis {
    /// Unordered or unrelated categories (algorithms, key kinds, kernels): grouped bars.
    #[default]
    Categories,
    /// A quantity, one value per category (in the categories' order): lines with markers, the
    /// categories as tick labels at their values.
    Numeric(Vec<f64>),
}

/// One series of a panel: a value (or a gap) per category.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
    /// Per value, the (min, max) of repeated measurements of it, drawn as an error bar (empty,
    /// or `None` for a value measured once).
    pub spread: Vec<Option<(f64, f64)>>,
    /// The paper's values: hollow and dashed, in the colour of the series they compare with.
    pub paper: bool,
}

impl Series {
    pub fn new(name: impl Into<String>, values: Vec<Option<f64>>) -> Series {
        Series {
            name: name.into(),
            values,
            ..Series::default()
        }
    }
}

/// One chart.
#[derive(Clone, Debug, Default)]
pub struct Panel {
    /// The title without its letter (a leading "(x) " is dropped: [`write_charts`] letters the
    /// panels of a figure in order).
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub cats: Vec<String>,
    pub x: XAxis,
    pub series: Vec<Series>,
}

/// What the PNG's `netsift-chart` text chunk holds (module docs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChartKey {
    pub width: u32,
    pub height: u32,
    pub panels: Vec<PanelKey>,
    /// The legend's entries, in order.
    pub legend: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PanelKey {
    pub title: String,
    /// The plotting area in pixels: x0, y0, x1, y1 (exclusive).
    pub plot: [i32; 4],
    pub series: Vec<SeriesKey>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SeriesKey {
    pub name: String,
    pub rgb: [u8; 3],
    pub paper: bool,
    /// Values drawn (finite ones, zeros included).
    pub marks: usize,
}

/// The text chunk's keyword.
pub const CHART_KEY: &str = "netsift-chart";

const FONT: &str = "sans-serif";
/// A panel's size, px.
pub const PANEL_W: u32 = 520;
pub const PANEL_H: u32 = 400;
pub const MAX_COLUMNS: usize = 3;
pub const MAX_WIDTH: u32 = 1600;

/// Series colours (Tableau 10: distinguishable, and none too light on white).
const COLORS: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

fn register_font() -> Result<(), LabError> {
    static ONCE: Once = Once::new();
    let mut res = Ok(());
    ONCE.call_once(|| {
        res = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| LabError::Chart("embedded DejaVu Sans font rejected".into()));
    });
    res
}

fn chart_err<E: std::fmt::Debug>(e: E) -> LabError {
    LabError::Chart(format!("{e:?}"))
}

/// An axis label: no float noise (0.6, not 0.6000000000000001), no needless decimals, and
/// small or large values as 1e-4 / 2.5e6 (a log axis's 0.0001 never prints as "0").
fn tick(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if !(1e-2..1e5).contains(&a) {
        let s = format!("{v:.2e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = if m.contains('.') {
            m.trim_end_matches('0').trim_end_matches('.')
        } else {
            m
        };
        format!("{m}e{e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A panel's title with letter `i`: (a), (b), ... (a title's own leading "(x) " is replaced).
fn lettered(title: &str, i: usize) -> String {
    let b = title.as_bytes();
    let rest = if b.len() >= 4 && b[0] == b'(' && b[2] == b')' && b[3] == b' ' {
        &title[4..]
    } else {
        title
    };
    let letter = (b'a' + (i % 26) as u8) as char;
    format!("({letter}) {rest}").trim_end().to_string()
}

/// The name a series shares its colour by: the paper's "X (paper)" / "paper: X" compare with
/// X, and "X p99" is drawn in the darker shade of "X avg".
fn colour_key(name: &str) -> (&str, bool) {
    let n = name.strip_prefix("paper: ").unwrap_or(name);
    let n = n.strip_suffix(" (paper)").unwrap_or(n);
    if let Some(base) = n.strip_suffix(" p99") {
        return (base, true);
    }
    (n.strip_suffix(" avg").unwrap_or(n), false)
}

fn shade((r, g, b): (u8, u8, u8), f: f64) -> (u8, u8, u8) {
    let s = |c: u8| (f64::from(c) * f).round() as u8;
    (s(r), s(g), s(b))
}

/// Colours of every series name of a figure: one per [`colour_key`], in order of appearance.
fn colours(panels: &[Panel]) -> Vec<(String, (u8, u8, u8))> {
    let mut keys: Vec<&str> = Vec::new();
    let mut out: Vec<(String, (u8, u8, u8))> = Vec::new();
    for s in panels.iter().flat_map(|p| &p.series) {
        if out.iter().any(|o| o.0 == s.name) {
            continue;
        }
        let (mut k, p99) = colour_key(&s.name);
        if s.paper {
            // "paper: FlowRegulator (Atom)" compares with "FlowRegulator".
            let ours = panels
                .iter()
                .flat_map(|p| &p.series)
                .filter(|o| !o.paper)
                .map(|o| colour_key(&o.name).0)
                .filter(|o| k.starts_with(o))
                .max_by_key(|o| o.len());
            if let Some(o) = ours {
                k = o;
            }
        }
        let i = keys.iter().position(|&x| x == k).unwrap_or_else(|| {
            keys.push(k);
            keys.len() - 1
        });
        // Past ten keys, darker rounds of the palette (still one colour per key).
        let base = shade(
            COLORS[i % COLORS.len()],
            0.7f64.powi((i / COLORS.len()) as i32),
        );
        let c = if p99 { shade(base, 0.55) } else { base };
        out.push((s.name.clone(), c));
    }
    out
}

/// A y axis, in axis space (log10 of the value on a log axis).
#[derive(Clone, Copy, Debug)]
enum YScale {
    Linear { lo: f64, hi: f64 },
    Log { lo: f64, hi: f64 },
}

impl YScale {
    fn range(self) -> (f64, f64) {
        match self {
            YScale::Linear { lo, hi } | YScale::Log { lo, hi } => (lo, hi),
        }
    }

    /// Where `v` is drawn; `None`: at the floor (0 on a log axis).
    fn at(self, v: f64) -> Option<f64> {
        match self {
            YScale::Linear { .. } => Some(v),
            YScale::Log { .. } => (v > 0.0).then(|| v.log10()),
        }
    }

    fn floor(self) -> f64 {
        match self {
            YScale::Linear { lo, .. } => lo.max(0.0).min(self.range().1),
            YScale::Log { lo, .. } => lo,
        }
    }

    fn ticks(self) -> Vec<f64> {
        match self {
            YScale::Linear { lo, hi } => {
                let raw = (hi - lo) / 5.0;
                let mag = 10f64.powf(raw.log10().floor());
                let step = [1.0, 2.0, 2.5, 5.0, 10.0]
                    .iter()
                    .map(|m| m * mag)
                    .find(|&s| s >= raw)
                    .unwrap_or(10.0 * mag);
                let mut t = (lo / step).ceil() * step;
                let mut v = Vec::new();
                while t <= hi + step * 1e-9 {
                    v.push(t);
                    t += step;
                }
                v
            }
            YScale::Log { lo, hi } => {
                let decades: Vec<f64> = (lo.ceil() as i32..=hi.floor() as i32)
                    .map(f64::from)
                    .collect();
                if decades.len() >= 3 {
                    return decades;
                }
                // Under three decades: 1, 2, 5 of each.
                let mut v = Vec::new();
                for d in lo.floor() as i32..=hi.ceil() as i32 {
                    for m in [1.0f64, 2.0, 5.0] {
                        let t = f64::from(d) + m.log10();
                        if t >= lo && t <= hi {
                            v.push(t);
                        }
                    }
                }
                v
            }
        }
    }

    fn label(self, t: f64) -> String {
        match self {
            YScale::Linear { .. } => tick(t),
            YScale::Log { .. } => tick(10f64.powf(t)),
        }
    }
}

/// Precision, recall, F1, shares and scores: a linear 0-1 axis (0-100 for a percentage).
fn is_share(y_label: &str) -> bool {
    let l = y_label.to_lowercase();
    ["precision", "recall", "f1", "share", "score", "%"]
        .iter()
        .any(|w| l.contains(w))
}

fn nice_top(hi: f64) -> f64 {
    if hi <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(hi.log10().floor());
    [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|&t| t >= hi * 1.05)
        .unwrap_or(hi * 1.1)
}

fn y_scale(p: &Panel) -> YScale {
    let mut vals: Vec<f64> = Vec::new();
    for s in &p.series {
        vals.extend(s.values.iter().flatten().filter(|v| v.is_finite()));
        for &(a, b) in s.spread.iter().flatten() {
            vals.extend([a, b].into_iter().filter(|v| v.is_finite()));
        }
    }
    let hi = vals.iter().copied().fold(0.0f64, f64::max);
    let lo = vals.iter().copied().fold(0.0f64, f64::min);
    let min_pos = vals
        .iter()
        .copied()
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min);
    if is_share(&p.y_label) && lo >= 0.0 {
        let top = if hi <= 1.0 {
            1.0
        } else if p.y_label.contains('%') && hi <= 100.0 {
            100.0
        } else {
            nice_top(hi)
        };
        // A little headroom so that markers at 1 (or 100%) are not cut by the frame.
        return YScale::Linear {
            lo: 0.0,
            hi: top * 1.04,
        };
    }
    if lo >= 0.0 && min_pos.is_finite() && hi > 10.0 * min_pos {
        // Some room below the smallest value for the floor's zero markers and bars' ends.
        let (a, b) = (min_pos.log10(), hi.log10());
        return YScale::Log {
            lo: (a - 0.05).floor(),
            hi: b + 0.08 * (b - a).max(1.0),
        };
    }
    let lo = if lo < 0.0 { -nice_top(-lo) } else { 0.0 };
    YScale::Linear {
        lo,
        hi: nice_top(hi),
    }
}

/// Positions of a panel's categories on the x axis, and its range.
fn x_positions(p: &Panel) -> (Vec<f64>, f64, f64, bool) {
    let n = p.cats.len().max(1);
    match &p.x {
        XAxis::Numeric(xs) if xs.len() == p.cats.len() && !xs.is_empty() => {
            let (mn, mx) = xs
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            let log = mn > 0.0 && mx > 10.0 * mn;
            let pos: Vec<f64> = xs
                .iter()
                .map(|&x| if log { x.log10() } else { x })
                .collect();
            let (a, b) = if log {
                (mn.log10(), mx.log10())
            } else {
                (mn, mx)
            };
            let pad = if b > a { (b - a) * 0.08 } else { 0.5 };
            (pos, a - pad, b + pad, true)
        }
        _ => (
            (0..n).map(|i| i as f64 + 0.5).collect(),
            0.0,
            n as f64,
            false,
        ),
    }
}

/// A linear f64 axis whose ticks are exactly `keys` (the categories' positions; the y scale's
/// 1-2-5 or decade ticks): plotters' own key points would fall between categories.
#[derive(Clone)]
struct Keyed {
    lo: f64,
    hi: f64,
    keys: Vec<f64>,
}

impl plotters::coord::ranged1d::Ranged for Keyed {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = (v - self.lo) / (self.hi - self.lo).max(f64::MIN_POSITIVE);
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// A chart's caption and the panels' notes (what the markers mean).
#[derive(Default)]
struct Notes {
    zero: bool,
    spread: bool,
}

/// The 1-minute load average and the cores, when the machine is loaded (more runnable tasks
/// than cores: the timings shared their CPUs). Linux's /proc/loadavg; elsewhere never loaded.
pub fn machine_load() -> Option<(f64, usize)> {
    let s = fs::read_to_string("/proc/loadavg").ok()?;
    let load: f64 = s.split_whitespace().next()?.parse().ok()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (load > cores as f64).then_some((load, cores))
}

/// One panel; returns its key (plot area, series colours and marks).
/// A series' colour in a figure's palette (black for a name it does not hold).
fn colour_in(colours: &[(String, (u8, u8, u8))], name: &str) -> RGBColor {
    let (r, g, b) = colours
        .iter()
        .find(|c| c.0 == name)
        .map_or((0, 0, 0), |c| c.1);
    RGBColor(r, g, b)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    index: usize,
    colours: &[(String, (u8, u8, u8))],
    notes: &mut Notes,
) -> Result<PanelKey, LabError>
where
    DB::ErrorType: 'static,
{
    let title = lettered(&p.title, index);
    let y = y_scale(p);
    let (ylo, yhi) = y.range();
    let (pos, xlo, xhi, numeric) = x_positions(p);
    // Tick labels that would overlap are rotated (the plot is about the area less the y labels
    // and margins wide).
    let label_style: TextStyle = (FONT, 12).into_font().into();
    let (aw, _) = area.dim_in_pixel();
    let plot_w = f64::from(aw.saturating_sub(64 + 24).max(50));
    let px = |d: f64| d / (xhi - xlo).max(1e-9) * plot_w;
    let mut sorted = pos.clone();
    sorted.sort_by(f64::total_cmp);
    let gap = sorted
        .windows(2)
        .map(|w| px(w[1] - w[0]))
        .fold(if numeric { plot_w } else { px(1.0) }, f64::min);
    let mut widest = 0u32;
    for c in &p.cats {
        let (w, _) = area
            .estimate_text_size(c, &label_style)
            .map_err(chart_err)?;
        widest = widest.max(w);
    }
    let rotate = f64::from(widest) + 8.0 > gap;
    let x_area = if rotate { (widest + 30).min(170) } else { 44 };
    let mut chart = ChartBuilder::on(area)
        .caption(&title, (FONT, 16))
        .margin(10)
        .x_label_area_size(x_area)
        .y_label_area_size(64)
        .build_cartesian_2d(
            Keyed {
                lo: xlo,
                hi: xhi,
                keys: pos.clone(),
            },
            Keyed {
                lo: ylo,
                hi: yhi,
                keys: y.ticks(),
            },
        )
        .map_err(chart_err)?;
    // Rotated labels are drawn below (plotters centres a rotated tick label on the axis).
    let cats = if rotate { Vec::new() } else { p.cats.clone() };
    let cpos = pos.clone();
    let fmt_x = move |v: &f64| {
        cpos.iter()
            .position(|c| (c - v).abs() < 1e-9)
            .and_then(|i| cats.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let fmt_y = move |v: &f64| y.label(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(&p.x_label)
        .y_desc(&p.y_label)
        .x_labels(pos.len() + 1)
        .y_labels(64)
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&fmt_y)
        .x_label_style(label_style.clone())
        .y_label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(WHITE.mix(0.0));
    if !numeric {
        mesh.disable_x_mesh();
    }
    mesh.draw().map_err(chart_err)?;
    if rotate {
        // Reading downwards from just below the axis, centred on the tick.
        let style = label_style
            .transform(FontTransform::Rotate90)
            .pos(Pos::new(HPos::Left, VPos::Center));
        let base = area.get_base_pixel();
        for (c, &x) in p.cats.iter().zip(&pos) {
            let (px, py) = chart.backend_coord(&(x, ylo));
            area.draw(&Text::new(
                c.clone(),
                (px - base.0, py - base.1 + 6),
                style.clone(),
            ))
            .map_err(chart_err)?;
        }
    }

    let colour_of = |name: &str| colour_in(colours, name);
    let floor = y.floor();
    let k = p.series.len().max(1) as f64;
    let mut key = PanelKey {
        title,
        plot: [0; 4],
        series: Vec::new(),
    };
    for (j, s) in p.series.iter().enumerate() {
        let c = colour_of(&s.name);
        let marks = s.values.iter().flatten().filter(|v| v.is_finite()).count();
        // Where value i is drawn: x (the bar's centre for categories) and y (None: at the floor).
        let bar = |i: usize| {
            let x0 = i as f64 + 0.1 + j as f64 * 0.8 / k;
            (x0, x0 + 0.8 / k)
        };
        // Lines: series j's markers dodged by 4 px, so that equal values of several series
        // (an Ideal and a recovery both at recall 1) all stay visible.
        let dodge = (j as f64 - (k - 1.0) / 2.0) * 4.0 / px(1.0).max(1e-9);
        let xs = |i: usize| {
            if numeric {
                pos.get(i).copied().unwrap_or(0.0) + dodge
            } else {
                let (a, b) = bar(i);
                (a + b) / 2.0
            }
        };
        let vals: Vec<(usize, Option<f64>)> = s
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.filter(|v| v.is_finite()).map(|v| (i, y.at(v))))
            .collect();
        let zeros: Vec<(f64, f64)> = vals
            .iter()
            .filter(|(_, v)| v.is_none() || *v == Some(floor) && !numeric)
            .map(|&(i, _)| (xs(i), floor))
            .collect();
        let stroke = c.stroke_width(2);
        if numeric {
            let line: Vec<(f64, f64)> = vals
                .iter()
                .filter_map(|&(i, v)| v.map(|v| (xs(i), v)))
                .collect();
            if s.paper {
                chart
                    .draw_series(DashedLineSeries::new(line.clone(), 7, 5, stroke))
                    .map_err(chart_err)?;
            } else {
                chart
                    .draw_series(LineSeries::new(line.clone(), stroke))
                    .map_err(chart_err)?;
            }
            let style = if s.paper { stroke } else { c.filled() };
            chart
                .draw_series(line.into_iter().map(|pt| Circle::new(pt, 5, style)))
                .map_err(chart_err)?;
        } else {
            for &(i, v) in &vals {
                let Some(v) = v else { continue };
                let (x0, x1) = bar(i);
                let r = [(x0, floor), (x1, v)];
                if s.paper {
                    chart
                        .draw_series([Rectangle::new(r, WHITE.filled()), Rectangle::new(r, stroke)])
                        .map_err(chart_err)?;
                } else {
                    chart
                        .draw_series([Rectangle::new(r, c.filled())])
                        .map_err(chart_err)?;
                }
            }
        }
        // A zero: a triangle pointing down at the floor, above it so that it is never clipped.
        if !zeros.is_empty() {
            notes.zero = true;
            let fill = if s.paper { stroke } else { c.filled() };
            chart
                .draw_series(zeros.into_iter().map(|pt| {
                    EmptyElement::at(pt)
                        + Polygon::new(vec![(0, -1), (-6, -11), (6, -11)], fill)
                        + PathElement::new(vec![(0, -1), (-6, -11), (6, -11), (0, -1)], stroke)
                }))
                .map_err(chart_err)?;
        }
        // Error bars: min..max of the repetitions.
        let bars: Vec<PathElement<(f64, f64)>> = s
            .spread
            .iter()
            .enumerate()
            .filter_map(|(i, sp)| {
                let (a, b) = (*sp)?;
                let x = xs(i);
                let (a, b) = (y.at(a).unwrap_or(floor), y.at(b).unwrap_or(floor));
                let w = if numeric {
                    (xhi - xlo) * 0.012
                } else {
                    0.2 / k
                };
                Some([
                    PathElement::new(vec![(x, a), (x, b)], BLACK.stroke_width(2)),
                    PathElement::new(vec![(x - w, a), (x + w, a)], BLACK.stroke_width(2)),
                    PathElement::new(vec![(x - w, b), (x + w, b)], BLACK.stroke_width(2)),
                ])
            })
            .flatten()
            .collect();
        if !bars.is_empty() {
            notes.spread = true;
            chart.draw_series(bars).map_err(chart_err)?;
        }
        key.series.push(SeriesKey {
            name: s.name.clone(),
            rgb: [c.0, c.1, c.2],
            paper: s.paper,
            marks,
        });
    }
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    key.plot = [xr.start, yr.start, xr.end, yr.end];
    Ok(key)
}

/// The legend's entries: every series with a value, once, in order of appearance.
fn legend_entries(panels: &[Panel]) -> Vec<(&str, bool)> {
    let mut v: Vec<(&str, bool)> = Vec::new();
    for s in panels.iter().flat_map(|p| &p.series) {
        let drawn = s.values.iter().flatten().any(|v| v.is_finite());
        if drawn && !v.iter().any(|e| e.0 == s.name) {
            v.push((&s.name, s.paper));
        }
    }
    v
}

/// Legend rows of `width` px: entries are a swatch (18 px), their text and a gap.
fn legend_rows(entries: &[(&str, bool)], width: u32) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = vec![Vec::new()];
    let mut used = 0u32;
    for (i, e) in entries.iter().enumerate() {
        let w = 18 + 8 + (e.0.chars().count() as u32) * 8 + 24;
        if used + w > width.saturating_sub(40) && !rows.last().is_some_and(Vec::is_empty) {
            rows.push(Vec::new());
            used = 0;
        }
        used += w;
        if let Some(r) = rows.last_mut() {
            r.push(i);
        }
    }
    rows
}

/// The figure's size and its layout: (columns, rows, legend rows, caption lines).
struct Layout {
    cols: usize,
    rows: usize,
    width: u32,
    height: u32,
    legend: Vec<Vec<usize>>,
}

const TITLE_H: u32 = 40;
const LEGEND_ROW_H: u32 = 22;
const CAPTION_H: u32 = 20;
const CAPTION_LINES: usize = 3;

fn layout(panels: &[Panel], entries: &[(&str, bool)]) -> Layout {
    let n = panels.len().max(1);
    // Four panels as 2 x 2; otherwise rows of at most three.
    let cols = if n == 4 { 2 } else { n.min(MAX_COLUMNS) };
    let rows = n.div_ceil(cols);
    let width = (PANEL_W * cols as u32).clamp(PANEL_W, MAX_WIDTH);
    let legend = legend_rows(entries, width);
    let height = TITLE_H
        + PANEL_H * rows as u32
        + LEGEND_ROW_H * legend.len() as u32
        + 10
        + CAPTION_H * CAPTION_LINES as u32;
    Layout {
        cols,
        rows,
        width,
        height,
        legend,
    }
}

/// The caption's parts joined by "; " into lines of `width` px (about 7 px a character), at
/// most [`CAPTION_LINES`] (the rest joins the last line).
fn caption_lines(parts: &[String], width: u32) -> Vec<String> {
    let room = (width.saturating_sub(60) / 7) as usize;
    let mut lines: Vec<String> = Vec::new();
    for part in parts {
        let full = lines.len() >= CAPTION_LINES;
        match lines.last_mut() {
            Some(l) if l.len() + 2 + part.len() <= room || full => {
                l.push_str("; ");
                l.push_str(part);
            }
            _ => lines.push(part.clone()),
        }
    }
    lines
}

fn draw_all<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    panels: &[Panel],
    quick: bool,
) -> Result<ChartKey, LabError>
where
    DB::ErrorType: 'static,
{
    let entries = legend_entries(panels);
    let lay = layout(panels, &entries);
    let colours = colours(panels);
    root.fill(&WHITE).map_err(chart_err)?;
    let root = root.titled(title, (FONT, 20)).map_err(chart_err)?;
    let grid_h = PANEL_H * lay.rows as u32;
    let (grid, below) = root.split_vertically(grid_h);
    let areas = grid.split_evenly((lay.rows, lay.cols));
    let mut notes = Notes::default();
    let mut keys = Vec::new();
    for (i, (a, p)) in areas.iter().zip(panels).enumerate() {
        keys.push(draw_panel(a, p, i, &colours, &mut notes)?);
    }
    // The legend, below the panels: swatch (filled: ours; hollow: the paper's) and name.
    let colour_of = |name: &str| colour_in(&colours, name);
    let text: TextStyle = (FONT, 13).into_font().into();
    for (r, row) in lay.legend.iter().enumerate() {
        let mut x = 40i32;
        let y = 8 + (r as u32 * LEGEND_ROW_H) as i32;
        for &i in row {
            let (name, paper) = entries[i];
            let c = colour_of(name);
            let sw = [(x, y + 2), (x + 18, y + 14)];
            if paper {
                below
                    .draw(&Rectangle::new(sw, c.stroke_width(2)))
                    .map_err(chart_err)?;
            } else {
                below
                    .draw(&Rectangle::new(sw, c.filled()))
                    .map_err(chart_err)?;
            }
            below
                .draw(&Text::new(name.to_string(), (x + 26, y + 1), text.clone()))
                .map_err(chart_err)?;
            x += 18 + 8 + (name.chars().count() as i32) * 8 + 24;
        }
    }
    let mut caption: Vec<String> = Vec::new();
    if quick {
        caption.push("quick mode (--quick): small traces, few points".into());
    }
    if let Some((load, cores)) = machine_load() {
        caption.push(format!(
            "loaded machine: load average {load:.1} on {cores} cores"
        ));
    }
    if entries.iter().any(|e| e.1) {
        caption.push("hollow / dashed: the paper's values".into());
    }
    if notes.zero {
        caption.push("\u{25bc} at the axis floor: a value of 0".into());
    }
    if notes.spread {
        caption.push("error bars: min..max of repeated runs".into());
    }
    let cy = 10 + (lay.legend.len() as u32 * LEGEND_ROW_H) as i32;
    let cap_style: TextStyle = (FONT, 13).into_font().color(&BLACK.mix(0.75));
    for (i, line) in caption_lines(&caption, lay.width).iter().enumerate() {
        below
            .draw(&Text::new(
                line.clone(),
                (40, cy + i as i32 * CAPTION_H as i32),
                cap_style.clone(),
            ))
            .map_err(chart_err)?;
    }
    root.present().map_err(chart_err)?;
    Ok(ChartKey {
        width: lay.width,
        height: lay.height,
        panels: keys,
        legend: entries.iter().map(|e| e.0.to_string()).collect(),
    })
}

/// Write the PNG (with its [`ChartKey`] chunk) and SVG of `panels`, in a grid; `quick`: the
/// run was `--quick` (the caption says so).
pub fn write_charts(
    dir: &Path,
    stem: &str,
    title: &str,
    panels: &[Panel],
    quick: bool,
) -> Result<(), LabError> {
    register_font()?;
    let lay = layout(panels, &legend_entries(panels));
    let size = (lay.width, lay.height);
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    let mut buf = vec![0u8; size.0 as usize * size.1 as usize * 3];
    let key = draw_all(
        BitMapBackend::with_buffer(&mut buf, size).into_drawing_area(),
        title,
        panels,
        quick,
    )?;
    write_png(&png, size, &buf, &key)?;
    draw_all(
        SVGBackend::new(&svg, size).into_drawing_area(),
        title,
        panels,
        quick,
    )?;
    Ok(())
}

/// An RGB PNG with the chart's key as a text chunk.
fn write_png(path: &Path, size: (u32, u32), rgb: &[u8], key: &ChartKey) -> Result<(), LabError> {
    let f = fs::File::create(path).map_err(|e| LabError::io(path, e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(f), size.0, size.1);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    // tEXt is Latin-1: anything else in a series name goes as a JSON \u escape.
    let json: String = serde_json::to_string(key)?
        .chars()
        .map(|c| {
            if c.is_ascii() {
                c.to_string()
            } else {
                let mut b = [0u16; 2];
                c.encode_utf16(&mut b)
                    .iter()
                    .map(|u| format!("\\u{u:04x}"))
                    .collect()
            }
        })
        .collect();
    enc.add_text_chunk(CHART_KEY.into(), json)
        .map_err(chart_err)?;
    let mut w = enc.write_header().map_err(chart_err)?;
    w.write_image_data(rgb).map_err(chart_err)?;
    w.finish().map_err(chart_err)
}

/// A CSV field, quoted when it holds a comma, quote or newline.
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(|v| format!("{v}")).unwrap_or_default()
}

/// A figure's point as a CSV row: its header (the same fields, in the same order, as the point's
/// JSON) and its fields. Every bench's points are written by [`write_rows`].
pub trait Row: serde::Serialize {
    const HEADER: &'static str;
    fn row(&self) -> Vec<String>;
}

/// The CSV header: the same fields, in the same order, as [`Point`]'s JSON.
pub const CSV_HEADER: &str = "figure,algorithm,accel,key,batch,arrays,policy,simd,skew,order,mpps,ns_avg,ns_p99,evicted_share,limit_mpps,unique_share,params,packets,agg_mode,through_share,switches";

impl Row for Point {
    const HEADER: &'static str = CSV_HEADER;
    fn row(&self) -> Vec<String> {
        let p = self;
        vec![
            csv_field(&p.figure),
            csv_field(&p.algorithm),
            csv_field(&p.accel),
            csv_field(&p.key),
            p.batch.to_string(),
            p.arrays.to_string(),
            csv_field(&p.policy),
            csv_field(&p.simd),
            opt(p.skew),
            csv_field(&p.order),
            format!("{}", p.mpps),
            format!("{}", p.ns_avg),
            format!("{}", p.ns_p99),
            opt(p.evicted_share),
            opt(p.limit_mpps),
            opt(p.unique_share),
            csv_field(&p.params),
            p.packets.to_string(),
            csv_field(&p.agg_mode),
            opt(p.through_share),
            p.switches.map_or(String::new(), |s| s.to_string()),
        ]
    }
}

pub fn write_csv<P: Row>(path: &Path, points: &[P]) -> Result<(), LabError> {
    let mut s = String::with_capacity(128 * (points.len() + 1));
    s.push_str(P::HEADER);
    s.push('\n');
    for p in points {
        s.push_str(&p.row().join(","));
        s.push('\n');
    }
    fs::write(path, s).map_err(|e| LabError::io(path, e))
}

pub fn write_json<P: Row>(path: &Path, points: &[P]) -> Result<(), LabError> {
    let mut f = fs::File::create(path).map_err(|e| LabError::io(path, e))?;
    serde_json::to_writer_pretty(&mut f, points)?;
    f.write_all(b"\n").map_err(|e| LabError::io(path, e))
}

/// Write all four files of one figure: `<stem>.csv`, `.json`, `.png`, `.svg`.
pub fn write_figure<P: Row>(
    dir: &Path,
    stem: &str,
    title: &str,
    points: &[P],
    panels: &[Panel],
    quick: bool,
) -> Result<(), LabError> {
    fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
    write_csv(&dir.join(format!("{stem}.csv")), points)?;
    write_json(&dir.join(format!("{stem}.json")), points)?;
    write_charts(dir, stem, title, panels, quick)
}

/// A point drawn by [`category_panels`]: its panel, series, category (label and order) and value.
pub trait Plotted {
    fn panel(&self) -> &str;
    fn series(&self) -> &str;
    fn x(&self) -> &str;
    fn x_value(&self) -> f64;
    fn value(&self) -> f64;
    /// A value the paper states (drawn hollow / dashed).
    fn paper(&self) -> bool {
        false
    }
}

/// [`Plotted`] for a paper-figure point type whose fields include `figure`, `panel`, `series`,
/// `source`, `x`, `unit` (strings) and `x_value`, `value` (f64), and `labeled_row`: those eight
/// as the first columns of its CSV row (the instameasure and sketchvisor figures share them).
macro_rules! labeled_point {
    ($t:ty) => {
        impl $crate::output::Plotted for $t {
            fn panel(&self) -> &str {
                &self.panel
            }
            fn series(&self) -> &str {
                &self.series
            }
            fn x(&self) -> &str {
                &self.x
            }
            fn x_value(&self) -> f64 {
                self.x_value
            }
            fn value(&self) -> f64 {
                self.value
            }
            fn paper(&self) -> bool {
                self.source == "paper"
            }
        }

        impl $t {
            /// The CSV columns every labeled point starts with.
            fn labeled_row(&self) -> Vec<String> {
                use $crate::output::csv_field;
                vec![
                    csv_field(&self.figure),
                    csv_field(&self.panel),
                    csv_field(&self.series),
                    csv_field(&self.source),
                    csv_field(&self.x),
                    self.x_value.to_string(),
                    self.value.to_string(),
                    csv_field(&self.unit),
                ]
            }
        }
    };
}
pub(crate) use labeled_point;

/// One panel per `panel` value (in order of first appearance, those `shown`), categories sorted
/// by `x_value`, one series per series name; `text` gives a panel's title and axis labels.
/// The x axis is numeric when every category's label starts with its `x_value` (a quantity:
/// "8 KB", "16 hosts", "32") and categorical otherwise (sketches, algorithms: `x_value` is only
/// their order).
pub fn category_panels<P: Plotted>(
    points: &[P],
    shown: impl Fn(&str) -> bool,
    text: impl Fn(&str) -> (String, String, String),
) -> Vec<Panel> {
    let mut names: Vec<&str> = Vec::new();
    for p in points {
        if shown(p.panel()) && !names.contains(&p.panel()) {
            names.push(p.panel());
        }
    }
    names
        .into_iter()
        .map(|name| {
            let ps: Vec<&P> = points.iter().filter(|p| p.panel() == name).collect();
            let mut cats: Vec<(f64, &str)> = Vec::new();
            for p in &ps {
                if !cats.iter().any(|c| c.1 == p.x()) {
                    cats.push((p.x_value(), p.x()));
                }
            }
            cats.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut series: Vec<Series> = Vec::new();
            for p in &ps {
                let i = cats.iter().position(|c| c.1 == p.x()).unwrap_or(0);
                let s = match series.iter().position(|s| s.name == p.series()) {
                    Some(s) => &mut series[s],
                    None => {
                        series.push(Series {
                            paper: p.paper(),
                            ..Series::new(p.series(), vec![None; cats.len()])
                        });
                        series.last_mut().expect("pushed")
                    }
                };
                s.values[i] = Some(p.value());
            }
            let (title, x_label, y_label) = text(name);
            let quantity = cats.iter().all(|&(v, label)| {
                let lead: String = label
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
                    .collect();
                lead.parse::<f64>().is_ok_and(|l| l == v)
            });
            Panel {
                title,
                x_label,
                y_label,
                x: if quantity {
                    XAxis::Numeric(cats.iter().map(|c| c.0).collect())
                } else {
                    XAxis::Categories
                },
                cats: cats.into_iter().map(|c| c.1.to_string()).collect(),
                series,
            }
        })
        .collect()
}
