//! `storage`'s pictures: items per MB of memory per item shape (bars, one group per
//! value size), and miss ratio by cache size (a line per server over `-m`).

use anyhow::bail;

use super::bars::{bar_group, Bar, Group, FONT, HEAD};
use super::data::ratio;
use super::svg::{text_width, Anchor, Canvas, COLORS};

const MIN_BAR: f64 = 180.0;
const MARGIN: f64 = 12.0;

/// One item shape's bytes per item, per server (the first is the baseline).
pub struct ItemsShape {
    pub value_bytes: usize,
    pub bytes_per_item: Vec<(String, f64)>,
}

/// Items per MB of resident memory, a group per item shape.
pub fn items_svg(shapes: &[ItemsShape], keys: &str) -> anyhow::Result<String> {
    if shapes.is_empty() {
        bail!("no item shapes to draw");
    }
    let groups: Vec<Group> = shapes
        .iter()
        .map(|s| {
            let per_mb: Vec<f64> = s
                .bytes_per_item
                .iter()
                .map(|(_, b)| ratio(1_048_576.0, *b))
                .collect();
            let max = per_mb.iter().copied().fold(0.0, f64::max);
            let base = per_mb.first().copied().unwrap_or(0.0);
            Group {
                heading: format!("{} B values: items per MB", s.value_bytes),
                bars: s
                    .bytes_per_item
                    .iter()
                    .zip(&per_mb)
                    .enumerate()
                    .map(|(i, ((name, _), &n))| Bar {
                        name: name.clone(),
                        color: COLORS[i % COLORS.len()],
                        frac: ratio(n, max),
                        label: format!("{n:.0} ({:.2}x)", ratio(n, base)),
                        class: "ratio",
                    })
                    .collect(),
                mark: (max > 0.0).then(|| base / max),
            }
        })
        .collect();
    let title = "Items per MB of resident memory (more is better)";
    let sub = format!("{keys}; (x): multiple of the first");
    let gw = groups.iter().map(|g| g.width(MIN_BAR)).fold(0.0, f64::max);
    let w = (gw + MARGIN * 2.0)
        .max(text_width(title, 16.0) + MARGIN * 2.0)
        .max(text_width(&sub, HEAD) + MARGIN * 2.0);
    let mut c = Canvas::new();
    c.text(w / 2.0, 24.0, 16.0, Anchor::Middle, "title", true, title);
    c.text(w / 2.0, 44.0, HEAD, Anchor::Middle, "subtitle", false, &sub);
    let mut y = 58.0;
    for g in &groups {
        y = bar_group(&mut c, MARGIN, y, w - MARGIN * 2.0, g);
    }
    Ok(c.finish(w, y + MARGIN))
}

/// One server's (or simulated policy's) miss ratio at each cache size.
pub struct MissCurve {
    pub name: String,
    /// Points: (`-m` in MB, miss ratio 0..1), by increasing size.
    pub points: Vec<(u64, f64)>,
}

/// Miss ratio (y, linear from 0) by cache size (x, log2), a line per curve and a
/// legend on the right.
pub fn miss_svg(curves: &[MissCurve], workload: &str) -> anyhow::Result<String> {
    let mut sizes: Vec<u64> = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let (Some(&lo), Some(&hi)) = (sizes.first(), sizes.last()) else {
        bail!("no points to draw");
    };
    let max_miss = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let y_top = ((max_miss * 10.0).ceil() / 10.0).clamp(0.1, 1.0);
    let title = "Miss ratio by cache size (less is better)";
    let legend_w = curves
        .iter()
        .map(|c| text_width(&c.name, FONT))
        .fold(0.0, f64::max)
        + 30.0;
    let (px, py, pw, ph) = (60.0, 70.0, 520.0, 300.0);
    let w = (px + pw + 20.0 + legend_w + MARGIN)
        .max(text_width(title, 16.0) + MARGIN * 2.0)
        .max(text_width(workload, HEAD) + MARGIN * 2.0);
    let h = py + ph + 56.0;
    let mut c = Canvas::new();
    c.text(w / 2.0, 24.0, 16.0, Anchor::Middle, "title", true, title);
    c.text(
        w / 2.0,
        44.0,
        HEAD,
        Anchor::Middle,
        "subtitle",
        false,
        workload,
    );
    let span = ((hi as f64).log2() - (lo as f64).log2()).max(1.0);
    let xat = |mb: u64| px + ((mb as f64).log2() - (lo as f64).log2()) / span * pw;
    let yat = |m: f64| py + ph - m / y_top * ph;
    c.line(px, py + ph, px + pw, py + ph, "#333", false);
    c.line(px, py, px, py + ph, "#333", false);
    for i in 0..=4 {
        let v = y_top * f64::from(i) / 4.0;
        c.line(px, yat(v), px + pw, yat(v), "#e4e4e4", false);
        c.text(
            px - 6.0,
            yat(v) + 4.0,
            FONT,
            Anchor::End,
            "tick",
            false,
            &format!("{v:.2}"),
        );
    }
    for &mb in &sizes {
        let label = format!("{mb} MB");
        let b = super::svg::TextBox::of(&label, FONT, xat(mb), py + ph + 22.0, Anchor::Middle);
        // A size too close to one already labelled keeps its point, not its label.
        if c.free(&b) && b.x >= 0.0 && b.x + b.w <= w {
            c.text(
                xat(mb),
                py + ph + 22.0,
                FONT,
                Anchor::Middle,
                "tick",
                false,
                &label,
            );
        }
    }
    c.text(
        px + pw / 2.0,
        py + ph + 42.0,
        FONT,
        Anchor::Middle,
        "axis",
        false,
        "-m (log scale)",
    );
    for (i, curve) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = curve
            .points
            .iter()
            .map(|&(m, r)| (xat(m), yat(r)))
            .collect();
        c.polyline(&pts, color, false);
        let ly = py + 10.0 + i as f64 * 20.0;
        let lx = px + pw + 20.0;
        c.line(lx, ly - 4.0, lx + 20.0, ly - 4.0, color, false);
        c.text(
            lx + 26.0,
            ly,
            FONT,
            Anchor::Start,
            "legend",
            false,
            &curve.name,
        );
    }
    Ok(c.finish(w, h.max(py + 20.0 * curves.len() as f64 + MARGIN)))
}
