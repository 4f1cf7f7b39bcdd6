//! `storage`'s items picture: items per MB of memory per item shape (bars, one group
//! per value size).

use anyhow::bail;

use super::bars::{bar_group, Bar, Group, HEAD};
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
