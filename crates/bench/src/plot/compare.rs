//! One workload's picture: on the left, each server's CPU-seconds per request as a
//! multiple of the first server's and of each floor's (a group of bars per
//! reference, the ratio printed beside each bar, a dashed line at 1x); on the
//! right, p50, p99 and p99.9 latency per server on a log scale.

use super::bars::{bar_group, check_workers, Bar, Group, HEAD};
use super::data::{ratio, Comparison};
use super::svg::{text_width, Anchor, Canvas, COLORS, FLOOR_COLOR};

/// Shortest bar length a group is given.
const MIN_BAR: f64 = 160.0;
const MARGIN: f64 = 12.0;
const GUTTER: f64 = 36.0;

/// The colour of row `i` of `c`.
pub(crate) fn color(c: &Comparison, i: usize) -> &'static str {
    if c.rows[i].floor {
        FLOOR_COLOR
    } else {
        COLORS[i % COLORS.len()]
    }
}

/// The CPU groups: one per reference (the first server, then each floor).
pub(crate) fn cpu_groups(c: &Comparison) -> Vec<Group> {
    c.references()
        .into_iter()
        .map(|base| {
            let ratios: Vec<f64> = c
                .rows
                .iter()
                .map(|r| ratio(r.cpu_s_per_mreq, base.cpu_s_per_mreq))
                .collect();
            let max = ratios.iter().copied().fold(1.0, f64::max);
            Group {
                heading: format!("server CPU per request, x {}", base.name),
                bars: c
                    .rows
                    .iter()
                    .zip(&ratios)
                    .enumerate()
                    .map(|(i, (r, &x))| Bar {
                        name: r.name.clone(),
                        color: color(c, i),
                        frac: x / max,
                        label: format!("{x:.2}x"),
                        class: "ratio",
                    })
                    .collect(),
                mark: Some(1.0 / max),
            }
        })
        .collect()
}

/// The latency groups, p50, p99 and p99.9, on one log scale from 1 us.
fn latency_groups(c: &Comparison) -> Vec<Group> {
    let max = c.rows.iter().map(|r| r.p999).fold(10.0, f64::max);
    let top = max.log10().ceil().max(1.0);
    /// A latency percentile of a row.
    type Pick = fn(&super::data::Row) -> f64;
    let pick: [(&str, Pick); 3] = [
        ("p50", |r| r.p50),
        ("p99", |r| r.p99),
        ("p99.9", |r| r.p999),
    ];
    pick.iter()
        .map(|(label, f)| Group {
            heading: format!("{label} latency, us (log scale)"),
            bars: c
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| Bar {
                    name: r.name.clone(),
                    color: color(c, i),
                    frac: f(r).max(1.0).log10() / top,
                    label: format!("{:.0} us", f(r)),
                    class: "latency",
                })
                .collect(),
            mark: None,
        })
        .collect()
}

/// Draws `groups` stacked from `y` at `x`, `w` wide; returns the y below them.
fn column(canvas: &mut Canvas, x: f64, mut y: f64, w: f64, groups: &[Group]) -> f64 {
    for g in groups {
        y = bar_group(canvas, x, y, w, g);
    }
    y
}

/// The picture of one workload, or an error when the servers ran different worker
/// counts.
pub fn comparison_svg(c: &Comparison) -> anyhow::Result<String> {
    let workers = check_workers(c)?;
    let left = cpu_groups(c);
    let right = latency_groups(c);
    let lw = left.iter().map(|g| g.width(MIN_BAR)).fold(0.0, f64::max);
    let rw = right.iter().map(|g| g.width(MIN_BAR)).fold(0.0, f64::max);
    let title = format!(
        "{}: CPU per request and latency, medians over rounds",
        c.workload
    );
    let floors = if c.rows.iter().any(|r| r.floor) {
        "; the floors are single-threaded"
    } else {
        ""
    };
    let sub = format!(
        "every server ran {workers} worker{}{floors}",
        if workers == 1 { "" } else { "s" }
    );
    let w = (MARGIN * 2.0 + lw + GUTTER + rw)
        .max(text_width(&title, 16.0) + MARGIN * 2.0)
        .max(text_width(&sub, HEAD) + MARGIN * 2.0);
    let mut canvas = Canvas::new();
    canvas.text(w / 2.0, 24.0, 16.0, Anchor::Middle, "title", true, &title);
    canvas.text(w / 2.0, 44.0, HEAD, Anchor::Middle, "subtitle", false, &sub);
    let top = 58.0;
    let yl = column(&mut canvas, MARGIN, top, lw, &left);
    let yr = column(&mut canvas, MARGIN + lw + GUTTER, top, rw, &right);
    Ok(canvas.finish(w, yl.max(yr) + MARGIN))
}
