//! Renders known figures and reads the SVG back with an XML parser: the document is
//! well-formed, every label's box lies inside the canvas, no two labels overlap,
//! the ratios printed are the data's, and unequal worker counts are refused.

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};

use super::data::Row;
use super::svg::{Anchor, TextBox};
use super::*;

/// A `<text>` read back from the SVG.
#[derive(Debug)]
struct Label {
    class: String,
    text: String,
    bbox: TextBox,
}

struct Doc {
    w: f64,
    h: f64,
    labels: Vec<Label>,
}

fn attr(e: &BytesStart, name: &str) -> Option<String> {
    e.attributes().flatten().find_map(|a| {
        (a.key.0 == name).then(|| {
            a.normalized_value(XmlVersion::Implicit1_0)
                .expect("attribute value")
                .into_owned()
        })
    })
}

fn num(e: &BytesStart, name: &str) -> f64 {
    attr(e, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("<{:?}> has no numeric {name}", e.name()))
}

/// Parses `svg` (panicking on malformed XML) and returns its size and labels.
fn parse(svg: &str) -> Doc {
    let mut r = Reader::from_str(svg);
    r.config_mut().check_end_names = true;
    let (mut w, mut h) = (0.0, 0.0);
    let mut labels = Vec::new();
    let mut open: Option<(BytesStart<'static>, String)> = None;
    let mut depth = 0i32;
    let mut roots = 0;
    loop {
        match r.read_event().expect("well-formed XML") {
            Event::Start(e) => {
                if depth == 0 {
                    roots += 1;
                    assert_eq!(e.name().0, "svg");
                    w = num(&e, "width");
                    h = num(&e, "height");
                }
                depth += 1;
                if e.name().0 == "text" {
                    open = Some((e.into_owned(), String::new()));
                }
            }
            Event::Empty(e) => {
                assert!(depth > 0, "element outside the root");
                assert_ne!(e.name().0, "text", "empty label");
            }
            Event::Text(t) => {
                if let Some((_, s)) = open.as_mut() {
                    s.push_str(&t[..]);
                }
            }
            Event::GeneralRef(g) => {
                let name = &g[..];
                let v = resolve_predefined_entity(name).expect("known entity");
                if let Some((_, s)) = open.as_mut() {
                    s.push_str(v);
                }
            }
            Event::End(e) => {
                depth -= 1;
                if e.name().0 == "text" {
                    let (start, text) = open.take().expect("text open");
                    let size = num(&start, "font-size");
                    let anchor = Anchor::parse(attr(&start, "text-anchor").as_deref());
                    let (x, y) = (num(&start, "x"), num(&start, "y"));
                    labels.push(Label {
                        class: attr(&start, "class").unwrap_or_default(),
                        bbox: TextBox::of(&text, size, x, y, anchor),
                        text,
                    });
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(depth, 0, "unclosed elements");
    assert_eq!(roots, 1, "one root element");
    assert!(w > 0.0 && h > 0.0);
    Doc { w, h, labels }
}

/// Every label inside the canvas, no two overlapping.
fn check_layout(doc: &Doc) {
    for l in &doc.labels {
        assert!(
            l.bbox.inside(doc.w, doc.h),
            "{:?} leaves the {}x{} canvas",
            l,
            doc.w,
            doc.h
        );
    }
    for (i, a) in doc.labels.iter().enumerate() {
        for b in &doc.labels[i + 1..] {
            assert!(!a.bbox.overlaps(&b.bbox), "{a:?} overlaps {b:?}");
        }
    }
}

fn row(name: &str, workers: Option<u32>, floor: bool, cpu: f64, p50: f64) -> Row {
    Row {
        name: name.into(),
        workers,
        floor,
        cpu_s_per_mreq: cpu,
        rps: 1e6 / cpu,
        p50,
        p90: p50 * 1.5,
        p99: p50 * 3.0,
        p999: p50 * 9.0,
    }
}

/// Four servers and two floors, one with a long name.
fn known() -> Comparison {
    Comparison {
        workload: "W2".into(),
        rows: vec![
            row("memcached", Some(1), false, 6.179, 4391.0),
            row("memcrab", Some(1), false, 0.679, 531.0),
            row("memcrab-uring", Some(1), false, 0.597, 480.0),
            row(
                "reference-engine-with-a-long-name",
                Some(1),
                false,
                1.033,
                795.0,
            ),
            row("floor-uring", None, true, 0.352, 301.0),
            row("floor", None, true, 0.401, 322.0),
        ],
    }
}

fn texts<'a>(doc: &'a Doc, class: &str) -> Vec<&'a str> {
    doc.labels
        .iter()
        .filter(|l| l.class == class)
        .map(|l| l.text.as_str())
        .collect()
}

#[test]
fn comparison_is_well_formed_and_labels_apart() {
    let c = known();
    let doc = parse(&comparison_svg(&c).expect("equal workers"));
    check_layout(&doc);
    // Every server is named in each of the 3 CPU groups and 3 latency groups.
    assert_eq!(texts(&doc, "name").len(), 6 * c.rows.len());
}

#[test]
fn comparison_prints_the_data_ratios() {
    let c = known();
    let doc = parse(&comparison_svg(&c).expect("equal workers"));
    let printed = texts(&doc, "ratio");
    // The references are the first server, then each floor in order.
    let refs = [&c.rows[0], &c.rows[4], &c.rows[5]];
    let mut want = Vec::new();
    for b in refs {
        for r in &c.rows {
            want.push(format!("{:.2}x", r.cpu_s_per_mreq / b.cpu_s_per_mreq));
        }
    }
    assert_eq!(printed, want);
    // Spot checks written out: memcrab against memcached and the epoll floor.
    assert_eq!(printed[1], "0.11x");
    assert_eq!(printed[2 * c.rows.len() + 1], "1.69x");
    let lat = texts(&doc, "latency");
    assert_eq!(&lat[..2], ["4391 us", "531 us"]);
}

#[test]
fn unequal_worker_counts_are_refused() {
    let mut c = known();
    c.rows[1].workers = Some(4);
    let e = comparison_svg(&c).expect_err("1 and 4 workers");
    assert!(format!("{e:#}").contains("memcrab ran 4"), "{e:#}");
    assert!(cpu_svg(&[c.clone()]).is_err());
    // A server that does not say is refused too; floors need not say.
    c.rows[1].workers = None;
    assert!(comparison_svg(&c).is_err());
    c.rows[1].workers = Some(1);
    assert!(comparison_svg(&c).is_ok());
    // Across workloads too.
    let mut other = known();
    for r in other.rows.iter_mut().filter(|r| !r.floor) {
        r.workers = Some(2);
    }
    assert!(cpu_svg(&[c, other]).is_err());
}

#[test]
fn cpu_picture_over_four_workloads() {
    let all: Vec<Comparison> = ["W1", "W2", "W3", "W4"]
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let mut c = known();
            c.workload = (*w).into();
            for r in &mut c.rows {
                r.cpu_s_per_mreq *= 1.0 + i as f64;
            }
            c
        })
        .collect();
    let doc = parse(&cpu_svg(&all).expect("equal workers"));
    check_layout(&doc);
    let printed = texts(&doc, "ratios");
    assert_eq!(printed.len(), 4 * all[0].rows.len());
    // memcrab in W1: x memcached, x floor-uring, x floor.
    assert_eq!(printed[1], "0.11x | 1.93x | 1.69x");
}

#[test]
fn tsv_round_trips() {
    let c = known();
    let back = Comparison::from_tsv(&c.to_tsv()).expect("parses");
    assert_eq!(back.workload, c.workload);
    assert_eq!(back.rows.len(), c.rows.len());
    for (a, b) in back.rows.iter().zip(&c.rows) {
        assert_eq!((&a.name, a.workers, a.floor), (&b.name, b.workers, b.floor));
        assert!((a.cpu_s_per_mreq - b.cpu_s_per_mreq).abs() < 1e-4);
        assert_eq!(a.p999, b.p999);
    }
    assert!(Comparison::from_tsv("workload\tW1\nname\n").is_err());
    assert!(Comparison::from_tsv("").is_err());
}

#[test]
fn storage_pictures_are_well_formed_and_labels_apart() {
    let shapes: Vec<ItemsShape> = [32usize, 100, 1000]
        .iter()
        .map(|&v| ItemsShape {
            value_bytes: v,
            bytes_per_item: vec![
                ("memcached".into(), v as f64 + 90.0),
                ("memcrab".into(), v as f64 + 40.0),
            ],
        })
        .collect();
    let doc = parse(&items_svg(&shapes, "1000000 items").expect("draws"));
    check_layout(&doc);
    // 1 MiB / 72 B and its multiple of memcached's 1 MiB / 122 B.
    assert_eq!(texts(&doc, "ratio")[1], "14564 (1.69x)");
}

/// Two servers' panels, each with four policies, at sizes close together on a log
/// axis (some tick labels must give way).
fn miss_panels() -> Vec<MissPanel> {
    let sizes = [2u64, 3, 4, 8, 16];
    let curve = |name: &str, base: f64| MissCurve {
        name: name.into(),
        points: sizes
            .iter()
            .map(|&m| (m, base / (m as f64).sqrt()))
            .collect(),
    };
    ["memcached", "memcrab"]
        .iter()
        .enumerate()
        .map(|(i, s)| MissPanel {
            server: curve(s, 0.12 - 0.02 * i as f64),
            policies: ["LRU", "S3-FIFO", "W-TinyLFU", "Belady"]
                .iter()
                .enumerate()
                .map(|(k, p)| curve(p, 0.11 - 0.02 * k as f64 - 0.01 * i as f64))
                .collect(),
        })
        .collect()
}

/// Every `<polyline>`'s class, `<title>` and whether it is dashed, in order.
fn polylines(svg: &str) -> Vec<(String, String, bool)> {
    let mut r = Reader::from_str(svg);
    let mut out = Vec::new();
    let mut open: Option<(String, bool)> = None;
    let mut in_title = false;
    let mut title = String::new();
    loop {
        match r.read_event().expect("well-formed XML") {
            Event::Start(e) if e.name().0 == "polyline" => {
                let dashed = attr(&e, "stroke-dasharray").is_some();
                open = Some((attr(&e, "class").unwrap_or_default(), dashed));
                title.clear();
            }
            Event::Start(e) if e.name().0 == "title" => in_title = true,
            Event::Text(t) if in_title => title.push_str(&t[..]),
            Event::GeneralRef(g) if in_title => {
                title.push_str(resolve_predefined_entity(&g[..]).expect("known entity"))
            }
            Event::End(e) if e.name().0 == "title" => in_title = false,
            Event::End(e) if e.name().0 == "polyline" => {
                let (class, dashed) = open.take().expect("polyline open");
                out.push((class, title.clone(), dashed));
            }
            Event::Empty(e) => assert_ne!(e.name().0, "polyline", "a polyline without a name"),
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

#[test]
fn miss_picture_draws_one_line_per_series_and_labels_them() {
    let panels = miss_panels();
    let svg = miss_svg(&panels, "cluster52, 2000000 requests\ndashed: libcachesim").expect("draws");
    let doc = parse(&svg);
    check_layout(&doc);
    let lines = polylines(&svg);
    // Each panel: both servers, solid, then its own four policies, dashed.
    let series: Vec<_> = lines.iter().filter(|l| l.0 == "series").collect();
    assert_eq!(series.len(), 2 * (2 + 4), "{series:?}");
    for server in ["memcached", "memcrab"] {
        let solid: Vec<_> = series.iter().filter(|l| l.1 == server).collect();
        assert_eq!(solid.len(), 2, "{server} in each panel");
        assert!(solid.iter().all(|l| !l.2), "servers are solid");
        for policy in ["LRU", "S3-FIFO", "W-TinyLFU", "Belady"] {
            let name = format!("{policy} at {server}'s bytes");
            let dashed: Vec<_> = series.iter().filter(|l| l.1 == name).collect();
            assert_eq!(dashed.len(), 1, "{name}");
            assert!(dashed[0].2, "{name} is dashed");
        }
    }
    // One legend entry per server and per policy, each with its swatch.
    let legend = texts(&doc, "legend");
    assert_eq!(
        legend,
        [
            "memcached (measured)",
            "memcrab (measured)",
            "LRU (libcachesim)",
            "S3-FIFO (libcachesim)",
            "W-TinyLFU (libcachesim)",
            "Belady (libcachesim)"
        ]
    );
    let swatches: Vec<_> = lines.iter().filter(|l| l.0 == "swatch").collect();
    assert_eq!(swatches.len(), legend.len());
    // Both axes are labelled in each panel, each panel is named.
    assert_eq!(
        texts(&doc, "axis")
            .iter()
            .filter(|t| **t == "miss ratio")
            .count(),
        2
    );
    assert_eq!(
        texts(&doc, "axis")
            .iter()
            .filter(|t| t.starts_with("-m, MiB"))
            .count(),
        2
    );
    assert_eq!(
        texts(&doc, "panel"),
        [
            "memcached, and the policies at the bytes it held",
            "memcrab, and the policies at the bytes it held"
        ]
    );
    // The legend lies under every plotted point.
    let lowest_plot = doc
        .labels
        .iter()
        .filter(|l| l.class == "tick")
        .map(|l| l.bbox.y + l.bbox.h)
        .fold(0.0, f64::max);
    assert!(doc
        .labels
        .iter()
        .filter(|l| l.class == "legend")
        .all(|l| l.bbox.y > lowest_plot));
    // The y ticks print their values exactly: the largest miss ratio here is
    // 0.12 / sqrt(2) = 0.085, so the axis tops at 0.12 in steps of 0.03.
    let ticks: Vec<&str> = texts(&doc, "tick")
        .into_iter()
        .filter(|t| t.starts_with("0."))
        .collect();
    assert_eq!(&ticks[..5], ["0.00", "0.03", "0.06", "0.09", "0.12"]);
    // Nothing simulated: the servers alone, no policy in the legend.
    let bare: Vec<MissPanel> = panels
        .iter()
        .map(|p| MissPanel {
            server: p.server.clone(),
            policies: Vec::new(),
        })
        .collect();
    let svg = miss_svg(&bare, "servers only").expect("draws");
    check_layout(&parse(&svg));
    assert_eq!(
        polylines(&svg).iter().filter(|l| l.0 == "series").count(),
        4
    );
    // Bad figures are refused, not drawn.
    let mut bad = panels.clone();
    bad[0].server.points[0].1 = f64::NAN;
    assert!(miss_svg(&bad, "").is_err());
    assert!(miss_svg(&[], "").is_err());
}
