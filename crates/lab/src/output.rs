//! Writing a figure: `<out>/fig<N>.csv`, `.json`, `.png` and `.svg`.
//!
//! Charts are drawn with plotters. Text in the PNG goes through `ab_glyph` with DejaVu Sans
//! embedded from the `dejavu` crate and registered once as "sans-serif", so rendering needs no
//! system font library and looks the same on every host. Every panel has categorical x values
//! (algorithms, batch sizes, key kinds, skews, ...) and one line per series.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::{LabError, Point};

/// One line of a panel: a value (or a gap) per category.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// One chart.
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub cats: Vec<String>,
    pub series: Vec<Series>,
}

const FONT: &str = "sans-serif";

/// Line colours (Tableau 10: distinguishable, and none too light on white).
const COLORS: [(u8, u8, u8); 8] = [
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
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

/// An axis label: no float noise (0.6, not 0.6000000000000001), no needless decimals.
fn tick(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The finite values of a panel: (smallest positive, largest).
fn span(p: &Panel) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for &v in p.series.iter().flat_map(|s| s.values.iter().flatten()) {
        if v.is_finite() {
            if v > 0.0 {
                lo = lo.min(v);
            }
            hi = hi.max(v);
        }
    }
    (lo, hi)
}

/// One panel on a y axis `$y` (linear or log: plotters gives them different coordinate types,
/// hence a macro rather than a function).
macro_rules! draw_panel_with {
    ($area:expr, $p:expr, $y:expr, $n:expr) => {{
        let p: &Panel = $p;
        let n: usize = $n;
        let mut chart = ChartBuilder::on($area)
            .caption(&p.title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((0..n as i32 - 1).into_segmented(), $y)
            .map_err(chart_err)?;
        let cats = p.cats.clone();
        let fmt_x = move |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => usize::try_from(*i)
                .ok()
                .and_then(|i| cats.get(i))
                .cloned()
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        };
        chart
            .configure_mesh()
            .x_desc(&p.x_label)
            .y_desc(&p.y_label)
            .x_labels(n)
            .x_label_formatter(&fmt_x)
            .y_label_formatter(&|v: &f64| tick(*v))
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(chart_err)?;
        for (si, s) in p.series.iter().enumerate() {
            let (r, g, b) = COLORS[si % COLORS.len()];
            let color = RGBColor(r, g, b).to_rgba();
            let pts: Vec<(SegmentValue<i32>, f64)> = s
                .values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    v.filter(|v| v.is_finite())
                        .map(|v| (SegmentValue::CenterOf(i as i32), v))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(chart_err)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
                .map_err(chart_err)?;
        }
        if !p.series.is_empty() {
            chart
                .configure_series_labels()
                .label_font((FONT, 13))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(chart_err)?;
        }
    }};
}

/// A panel on a linear y axis from 0, or on a log axis when its positive values span more than
/// 10x (DESIGN.md: no point clipped or flattened); shares (precision, recall) stay linear.
fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Panel) -> Result<(), LabError>
where
    DB::ErrorType: 'static,
{
    let n = p.cats.len().max(1);
    let (lo, hi) = span(p);
    let share = p.y_label == "precision" || p.y_label == "recall";
    if !share && lo.is_finite() && hi > 10.0 * lo {
        // Room above for the legend: a log axis doubles the top.
        draw_panel_with!(area, p, (lo / 1.5..hi * 4.0).log_scale(), n);
    } else {
        let top = if hi > 0.0 { hi * 1.35 } else { 1.0 };
        draw_panel_with!(area, p, 0f64..top, n);
    }
    Ok(())
}

fn draw_all<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    panels: &[Panel],
) -> Result<(), LabError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(chart_err)?;
    let root = root.titled(title, (FONT, 22)).map_err(chart_err)?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for (a, p) in areas.iter().zip(panels) {
        draw_panel(a, p)?;
    }
    root.present().map_err(chart_err)?;
    Ok(())
}

/// Write the PNG and SVG of `panels` side by side.
pub fn write_charts(dir: &Path, stem: &str, title: &str, panels: &[Panel]) -> Result<(), LabError> {
    register_font()?;
    let size = (620 * panels.len().max(1) as u32, 480);
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    draw_all(
        BitMapBackend::new(&png, size).into_drawing_area(),
        title,
        panels,
    )?;
    draw_all(
        SVGBackend::new(&svg, size).into_drawing_area(),
        title,
        panels,
    )?;
    Ok(())
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
) -> Result<(), LabError> {
    fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
    write_csv(&dir.join(format!("{stem}.csv")), points)?;
    write_json(&dir.join(format!("{stem}.json")), points)?;
    write_charts(dir, stem, title, panels)
}

/// A point drawn by [`category_panels`]: its panel, series, category (label and order) and value.
pub trait Plotted {
    fn panel(&self) -> &str;
    fn series(&self) -> &str;
    fn x(&self) -> &str;
    fn x_value(&self) -> f64;
    fn value(&self) -> f64;
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
/// by `x_value`, one line per series; `text` gives a panel's title and axis labels.
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
                            name: p.series().to_string(),
                            values: vec![None; cats.len()],
                        });
                        series.last_mut().expect("pushed")
                    }
                };
                s.values[i] = Some(p.value());
            }
            let (title, x_label, y_label) = text(name);
            Panel {
                title,
                x_label,
                y_label,
                cats: cats.into_iter().map(|c| c.1.to_string()).collect(),
                series,
            }
        })
        .collect()
}
