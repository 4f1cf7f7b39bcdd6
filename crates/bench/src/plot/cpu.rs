//! Several workloads' CPU per request in one picture (`cpu.svg`, the README's): a
//! group per workload, two groups a line, each server's bar as long as its
//! CPU-seconds per request, labelled with its multiple of the first server's and
//! of each floor's.

use anyhow::bail;

use super::bars::{bar_group, check_workers, Bar, Group, HEAD};
use super::compare::color;
use super::data::{ratio, Comparison};
use super::svg::{text_width, Anchor, Canvas};

const MIN_BAR: f64 = 140.0;
const MARGIN: f64 = 12.0;
const GUTTER: f64 = 36.0;
/// Groups side by side.
const PER_LINE: usize = 2;

fn group(c: &Comparison) -> Group {
    let refs = c.references();
    let max = c.rows.iter().map(|r| r.cpu_s_per_mreq).fold(0.0, f64::max);
    let base = refs.first().map_or(0.0, |b| b.cpu_s_per_mreq);
    Group {
        heading: format!(
            "{} (x {})",
            c.workload,
            refs.iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(" | x ")
        ),
        bars: c
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| Bar {
                name: r.name.clone(),
                color: color(c, i),
                frac: ratio(r.cpu_s_per_mreq, max),
                label: refs
                    .iter()
                    .map(|b| format!("{:.2}x", ratio(r.cpu_s_per_mreq, b.cpu_s_per_mreq)))
                    .collect::<Vec<_>>()
                    .join(" | "),
                class: "ratios",
            })
            .collect(),
        mark: (max > 0.0).then(|| base / max),
    }
}

/// The picture, or an error when a workload's servers ran different worker counts
/// or the workloads' worker counts differ.
pub fn cpu_svg(all: &[Comparison]) -> anyhow::Result<String> {
    if all.is_empty() {
        bail!("no workloads to draw");
    }
    let mut workers = None;
    for c in all {
        let w = check_workers(c)?;
        if workers.is_some_and(|w0| w0 != w) {
            bail!(
                "{}: {w} worker(s), other workloads ran {workers:?}",
                c.workload
            );
        }
        workers = Some(w);
    }
    let workers = workers.unwrap_or(1);
    let groups: Vec<Group> = all.iter().map(group).collect();
    let gw = groups.iter().map(|g| g.width(MIN_BAR)).fold(0.0, f64::max);
    let cols = PER_LINE.min(groups.len());
    let title = "Server CPU per request, medians over rounds";
    let sub = format!(
        "bars: CPU-s per request (dashed: the first server's); figures: multiples of each \
         reference; every server ran {workers} worker{}",
        if workers == 1 { "" } else { "s" }
    );
    let w = (MARGIN * 2.0 + gw * cols as f64 + GUTTER * (cols as f64 - 1.0))
        .max(text_width(title, 16.0) + MARGIN * 2.0)
        .max(text_width(&sub, HEAD) + MARGIN * 2.0);
    let mut canvas = Canvas::new();
    canvas.text(w / 2.0, 24.0, 16.0, Anchor::Middle, "title", true, title);
    canvas.text(w / 2.0, 44.0, HEAD, Anchor::Middle, "subtitle", false, &sub);
    let mut y = 58.0;
    for line in groups.chunks(cols) {
        let mut bottom = y;
        for (j, g) in line.iter().enumerate() {
            let x = MARGIN + j as f64 * (gw + GUTTER);
            bottom = f64::max(bottom, bar_group(&mut canvas, x, y, gw, g));
        }
        y = bottom + 6.0;
    }
    Ok(canvas.finish(w, y + MARGIN))
}
