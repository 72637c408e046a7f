//! Every figure of every `bench` rendered in `--quick` (issue 34, point 10), through the benches'
//! own code path (`run_*` writes the files), then each PNG decoded and checked as a reader would
//! look at it: at most 1600 px wide, a sane height, and every series of the legend with marks
//! of its colour inside a plot area. Where the series are and in which colour comes from the
//! PNG's `netsift-chart` text chunk (`lab::output::ChartKey`).

use std::path::{Path, PathBuf};

use lab::output::{ChartKey, CHART_KEY, MAX_WIDTH};
use lab::{InstaArgs, LabArgs, ReevalArgs, SvArgs};

fn out_dir(name: &str) -> PathBuf {
    let d = testkit::scratch("lab-charts").join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Pixels of exactly `rgb` in the rectangle `[x0, y0, x1, y1)` of an RGB image.
fn count(img: &[u8], width: u32, rect: [i32; 4], rgb: [u8; 3]) -> usize {
    let [x0, y0, x1, y1] = rect;
    let mut n = 0;
    for y in y0.max(0)..y1 {
        for x in x0.max(0)..x1.min(width as i32) {
            let i = (y as usize * width as usize + x as usize) * 3;
            if img.get(i..i + 3) == Some(&rgb[..]) {
                n += 1;
            }
        }
    }
    n
}

/// One PNG: its size, then every legend entry's marks.
fn check_png(path: &Path) {
    let what = path.display();
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut reader = png::Decoder::new(f).read_info().unwrap();
    let (width, height) = (reader.info().width, reader.info().height);
    assert!(width <= MAX_WIDTH, "{what}: {width} px wide");
    assert!((300..=2400).contains(&height), "{what}: {height} px high");
    let key: ChartKey = reader
        .info()
        .uncompressed_latin1_text
        .iter()
        .find(|t| t.keyword == CHART_KEY)
        .map(|t| serde_json::from_str(&t.text).unwrap())
        .unwrap_or_else(|| panic!("{what}: no {CHART_KEY} chunk"));
    assert_eq!((key.width, key.height), (width, height), "{what}");
    let mut img = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut img).unwrap();
    assert_eq!(frame.color_type, png::ColorType::Rgb, "{what}");
    assert!(!key.panels.is_empty(), "{what}: no panel");
    let mut letters: Vec<&str> = key.panels.iter().map(|p| &p.title[..3]).collect();
    letters.dedup();
    assert_eq!(
        letters.len(),
        key.panels.len(),
        "{what}: panel letters repeat"
    );
    for p in &key.panels {
        let [x0, y0, x1, y1] = p.plot;
        assert!(
            x0 >= 0 && y0 >= 0 && x1 as u32 <= width && y1 as u32 <= height && x0 < x1 && y0 < y1,
            "{what}: panel {} plots at {:?}",
            p.title,
            p.plot
        );
    }
    for name in &key.legend {
        let drawn: Vec<_> = key
            .panels
            .iter()
            .flat_map(|p| p.series.iter().map(move |s| (p, s)))
            .filter(|(_, s)| s.name == *name && s.marks > 0)
            .collect();
        assert!(
            !drawn.is_empty(),
            "{what}: {name} is in the legend but in no panel"
        );
        for (p, s) in drawn {
            let n = count(&img, width, p.plot, s.rgb);
            assert!(
                n >= 8,
                "{what}: {name} has {} values in panel {} but {n} pixels of its colour {:?}",
                s.marks,
                p.title,
                s.rgb
            );
        }
    }
}

fn check_dir(dir: &Path, stems: &[String]) {
    for stem in stems {
        check_png(&dir.join(format!("{stem}.png")));
    }
}

#[test]
fn agg_evict_quick_figures_are_readable() {
    let out = out_dir("agg-evict");
    let mut a = LabArgs::new(lab::Figure::All, &out);
    a.quick = true;
    a.packets = 100_000;
    lab::run_agg_evict(&a).unwrap();
    let stems: Vec<String> = lab::Figure::EACH
        .iter()
        .map(|f| format!("fig{f}"))
        .collect();
    check_dir(&out, &stems);
}

#[test]
fn sketchvisor_quick_figures_are_readable() {
    let out = out_dir("sketchvisor");
    let a = SvArgs {
        figure: lab::SvFigure::All,
        out: out.clone(),
        quick: true,
        progress: false,
        regime: lab::SvRegime::default(),
        nic_gbps: None,
    };
    lab::run_sketchvisor(&a).unwrap();
    let stems: Vec<String> = lab::SvFigure::EACH
        .iter()
        .map(|f| format!("fig{f}"))
        .collect();
    check_dir(&out, &stems);
}

#[test]
fn instameasure_quick_figures_are_readable() {
    let out = out_dir("instameasure");
    let a = InstaArgs {
        figure: lab::InstaFigure::All,
        out: out.clone(),
        quick: true,
        progress: false,
    };
    lab::run_instameasure(&a).unwrap();
    let stems: Vec<String> = lab::InstaFigure::EACH
        .iter()
        .map(|f| format!("fig{f}"))
        .collect();
    check_dir(&out, &stems);
}

#[test]
fn reeval_quick_figures_are_readable() {
    let out = out_dir("reeval");
    let a = ReevalArgs {
        figure: lab::ReevalFigure::All,
        out: out.clone(),
        quick: true,
        progress: false,
    };
    lab::run_reeval(&a).unwrap();
    let stems: Vec<String> = lab::ReevalFigure::EACH
        .iter()
        .map(|f| format!("fig{f}"))
        .collect();
    check_dir(&out, &stems);
}
