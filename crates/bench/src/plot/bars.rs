//! A group of horizontal bars under a heading, one row per server, each value printed
//! in a column after the bars; and the check that the servers drawn ran the same
//! worker count.

use anyhow::{bail, Context};

use super::data::Comparison;
use super::svg::{text_width, Anchor, Canvas};

/// Font size of names and values.
pub(crate) const FONT: f64 = 12.0;
/// Font size of a group's heading.
pub(crate) const HEAD: f64 = 13.0;
/// Height of one bar's row.
const ROW: f64 = 18.0;
/// Space between a name or a bar and the next label.
const PAD: f64 = 6.0;

/// One bar: a server's value in a group.
pub(crate) struct Bar {
    pub name: String,
    pub color: &'static str,
    /// The bar's length as a share of the group's longest.
    pub frac: f64,
    /// The value printed beside the bar.
    pub label: String,
    /// Class of the value's `<text>` (for readers and tests), may be empty.
    pub class: &'static str,
}

/// A group of bars under a heading, drawn by [`bar_group`].
pub(crate) struct Group {
    pub heading: String,
    pub bars: Vec<Bar>,
    /// Where to draw a dashed reference line (a share of the bar length), if any.
    pub mark: Option<f64>,
}

impl Group {
    /// The width the group needs with bars at least `bar_w` long.
    pub(crate) fn width(&self, bar_w: f64) -> f64 {
        let heading = text_width(&self.heading, HEAD);
        heading.max(self.name_w() + bar_w + self.value_w())
    }

    fn name_w(&self) -> f64 {
        self.bars
            .iter()
            .map(|b| text_width(&b.name, FONT))
            .fold(0.0, f64::max)
            + PAD
    }

    fn value_w(&self) -> f64 {
        self.bars
            .iter()
            .map(|b| text_width(&b.label, FONT))
            .fold(0.0, f64::max)
            + PAD
    }
}

/// Draws `g` with its top-left at (`x`, `y`), `w` wide; returns the y below it.
pub(crate) fn bar_group(c: &mut Canvas, x: f64, y: f64, w: f64, g: &Group) -> f64 {
    c.text(
        x,
        y + HEAD,
        HEAD,
        Anchor::Start,
        "heading",
        true,
        &g.heading,
    );
    let name_w = g.name_w();
    let bar_x = x + name_w;
    let bar_w = (w - name_w - g.value_w()).max(1.0);
    let top = y + HEAD * 1.6;
    for (i, b) in g.bars.iter().enumerate() {
        let row = top + i as f64 * ROW;
        c.text(
            bar_x - PAD,
            row + 13.0,
            FONT,
            Anchor::End,
            "name",
            false,
            &b.name,
        );
        let len = b.frac.clamp(0.0, 1.0) * bar_w;
        c.rect(
            bar_x,
            row + 3.0,
            len,
            ROW - 5.0,
            b.color,
            &format!("{}: {}", b.name, b.label),
        );
        // In a column after the longest bar: a label beside each bar's end would
        // cross the reference line of the shorter bars.
        c.text(
            bar_x + bar_w + PAD / 2.0,
            row + 13.0,
            FONT,
            Anchor::Start,
            b.class,
            false,
            &b.label,
        );
    }
    let bottom = top + ROW * g.bars.len() as f64;
    if let Some(m) = g.mark {
        let mx = bar_x + m.clamp(0.0, 1.0) * bar_w;
        c.line(mx, top, mx, bottom, "#555", true);
    }
    c.line(bar_x, top, bar_x, bottom, "#333", false);
    bottom + 8.0
}

/// Refuses figures whose servers (not the floors) ran different worker counts, or
/// did not say how many they ran.
pub fn check_workers(c: &Comparison) -> anyhow::Result<u32> {
    let mut seen: Option<(u32, &str)> = None;
    for r in c.rows.iter().filter(|r| !r.floor) {
        let Some(w) = r.workers else {
            bail!(
                "{}: {} did not report its worker count (`stats` threads); a picture needs \
                 equal worker counts on every side",
                c.workload,
                r.name
            );
        };
        match seen {
            None => seen = Some((w, &r.name)),
            Some((w0, n0)) if w0 != w => bail!(
                "{}: {n0} ran {w0} worker(s) and {} ran {w}; a picture needs equal worker \
                 counts on every side (give every server the same -t, within its CPUs)",
                c.workload,
                r.name
            ),
            Some(_) => {}
        }
    }
    seen.map(|s| s.0)
        .with_context(|| format!("{}: no server to draw", c.workload))
}
