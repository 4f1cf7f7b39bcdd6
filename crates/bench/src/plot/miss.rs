//! `storage`'s miss-ratio picture: miss ratio by cache size, one panel per server.
//!
//! ```text
//!   title, workload lines
//!   ┌ memcached, and the policies ┐  ┌ memcrab, and the policies ┐
//!   │ miss ratio                  │  │ miss ratio                │
//!   │ ●━━●━━● this server (thick) │  │ ●━━●━━● this server       │
//!   │ ●──●──● the others (thin)   │  │ ●──●──● the others        │
//!   │ - - - - policies, simulated │  │ - - - - policies          │
//!   │ at the bytes it held        │  │ at the bytes it held      │
//!   └ -m, MiB (log scale) ────────┘  └───────────────────────────┘
//!   legend: every server (solid), every policy (dashed), in rows under the panels
//! ```
//!
//! A server's `-m` and the bytes it holds for keys and values differ by its own
//! overheads, so each panel draws the simulated policies at the key + value bytes
//! that panel's server held at each `-m`: what its policy did against theirs on the
//! same memory for data. Every server is drawn in every panel (the others thin), so
//! that the servers also compare at equal `-m`. All panels share one y scale, linear
//! from 0. The legend sits below the panels, where no data is.

use anyhow::bail;

use super::bars::{FONT, HEAD};
use super::svg::{text_width, Anchor, Canvas, TextBox};

const MARGIN: f64 = 12.0;
/// Room left of a panel's plot for its tick labels.
const LEFT: f64 = 48.0;
const MIN_PLOT_W: f64 = 300.0;
const PLOT_H: f64 = 260.0;
const GAP: f64 = 28.0;
/// Servers' colours, in the order given; then the policies', in theirs.
const SERVER_COLORS: &[&str] = &["#4e79a7", "#f28e2b", "#e15759", "#76b7b2"];
const POLICY_COLORS: &[&str] = &["#9c755f", "#59a14f", "#b07aa1", "#4d4d4d", "#edc948"];
/// y-axis tops to round the largest miss ratio up to: 4 ticks each, every tick a
/// round number that its label prints exactly.
const Y_TOPS: &[f64] = &[0.01, 0.02, 0.04, 0.08, 0.12, 0.16, 0.2, 0.4, 0.6, 0.8, 1.0];

/// One curve: a server's measured miss ratio, or a policy's simulated one.
#[derive(Clone, Debug)]
pub struct MissCurve {
    pub name: String,
    /// Points: (`-m` in MiB, miss ratio 0..1), by increasing size.
    pub points: Vec<(u64, f64)>,
}

/// One server's panel: what it measured at each `-m`, and each policy simulated at
/// the key + value bytes it held there (empty when nothing was simulated).
#[derive(Clone, Debug)]
pub struct MissPanel {
    pub server: MissCurve,
    pub policies: Vec<MissCurve>,
}

/// A y tick's label: two decimals when the step is a whole hundredth, else three.
fn tick(v: f64, step: f64) -> String {
    let hundredths = step * 100.0;
    if (hundredths - hundredths.round()).abs() < 1e-9 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn color(palette: &[&'static str], i: usize) -> &'static str {
    palette[i % palette.len()]
}

/// Miss ratio (y) by `-m` (x, log2), a panel per server; `workload` is printed
/// under the title, a line per `\n`.
pub fn miss_svg(panels: &[MissPanel], workload: &str) -> anyhow::Result<String> {
    let all = || {
        panels
            .iter()
            .flat_map(|p| std::iter::once(&p.server).chain(&p.policies))
    };
    let mut sizes: Vec<u64> = all().flat_map(|c| c.points.iter().map(|p| p.0)).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let (Some(&lo), Some(&hi)) = (sizes.first(), sizes.last()) else {
        bail!("no points to draw");
    };
    if lo == 0 {
        bail!("a cache size of 0 MiB");
    }
    let mut max_miss: f64 = 0.0;
    for c in all() {
        for &(_, m) in &c.points {
            if !(0.0..=1.0).contains(&m) {
                bail!("{}: miss ratio {m} is not in [0, 1]", c.name);
            }
            max_miss = max_miss.max(m);
        }
    }
    let y_top = Y_TOPS
        .iter()
        .copied()
        .find(|&t| t >= max_miss)
        .unwrap_or(1.0);
    // The policies' names, in first-seen order: one colour and one legend entry each.
    let mut policies: Vec<&str> = Vec::new();
    for p in panels {
        for c in &p.policies {
            if !policies.contains(&c.name.as_str()) {
                policies.push(&c.name);
            }
        }
    }
    let policy_color = |name: &str| {
        let i = policies.iter().position(|&n| n == name).unwrap_or(0);
        color(POLICY_COLORS, i)
    };

    let title = "Miss ratio by cache size (less is better)";
    let lines: Vec<&str> = workload.lines().filter(|l| !l.is_empty()).collect();
    let heading = |p: &MissPanel| {
        if p.policies.is_empty() {
            p.server.name.clone()
        } else {
            format!("{}, and the policies at the bytes it held", p.server.name)
        }
    };
    let pw = panels
        .iter()
        .map(|p| text_width(&heading(p), HEAD) - LEFT)
        .fold(MIN_PLOT_W, f64::max);
    let panel_w = LEFT + pw;
    let n = panels.len() as f64;
    let w = (MARGIN * 2.0 + n * panel_w + (n - 1.0) * GAP)
        .max(text_width(title, 16.0) + MARGIN * 2.0)
        .max(
            lines
                .iter()
                .map(|l| text_width(l, HEAD))
                .fold(0.0, f64::max)
                + MARGIN * 2.0,
        );
    let mut c = Canvas::new();
    c.text(w / 2.0, 24.0, 16.0, Anchor::Middle, "title", true, title);
    let mut y = 44.0;
    for l in &lines {
        c.text(w / 2.0, y, HEAD, Anchor::Middle, "subtitle", false, l);
        y += 18.0;
    }
    let head_y = y + 10.0;
    let py = head_y + 38.0;
    let span = ((hi as f64).log2() - (lo as f64).log2()).max(1.0);
    let yat = |m: f64| py + PLOT_H - m / y_top * PLOT_H;
    for (j, p) in panels.iter().enumerate() {
        let x0 = MARGIN + j as f64 * (panel_w + GAP);
        let px = x0 + LEFT;
        let xat = |mb: u64| px + ((mb as f64).log2() - (lo as f64).log2()) / span * pw;
        c.text(x0, head_y, HEAD, Anchor::Start, "panel", true, &heading(p));
        c.text(
            x0,
            py - 16.0,
            FONT,
            Anchor::Start,
            "axis",
            false,
            "miss ratio",
        );
        c.line(px, py + PLOT_H, px + pw, py + PLOT_H, "#333", false);
        c.line(px, py, px, py + PLOT_H, "#333", false);
        for i in 0..=4 {
            let v = y_top * f64::from(i) / 4.0;
            c.line(px, yat(v), px + pw, yat(v), "#e4e4e4", false);
            let label = tick(v, y_top / 4.0);
            c.text(
                px - 6.0,
                yat(v) + 4.0,
                FONT,
                Anchor::End,
                "tick",
                false,
                &label,
            );
        }
        for &mb in &sizes {
            let label = mb.to_string();
            let b = TextBox::of(&label, FONT, xat(mb), py + PLOT_H + 18.0, Anchor::Middle);
            // A size too close to one already labelled keeps its point, not its label.
            if c.free(&b) {
                c.text(
                    xat(mb),
                    py + PLOT_H + 18.0,
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
            py + PLOT_H + 36.0,
            FONT,
            Anchor::Middle,
            "axis",
            false,
            "-m, MiB (log scale)",
        );
        let pts = |curve: &MissCurve| -> Vec<(f64, f64)> {
            curve
                .points
                .iter()
                .map(|&(m, r)| (xat(m), yat(r)))
                .collect()
        };
        for curve in &p.policies {
            let name = format!("{} at {}'s bytes", curve.name, p.server.name);
            c.series(
                "series",
                &name,
                &pts(curve),
                policy_color(&curve.name),
                2.0,
                true,
                false,
            );
        }
        // The other servers thin, this panel's last and thick, over everything.
        for (k, other) in panels.iter().enumerate().filter(|&(k, _)| k != j) {
            let s = &other.server;
            c.series(
                "series",
                &s.name,
                &pts(s),
                color(SERVER_COLORS, k),
                1.5,
                false,
                true,
            );
        }
        c.series(
            "series",
            &p.server.name,
            &pts(&p.server),
            color(SERVER_COLORS, j),
            3.0,
            false,
            true,
        );
    }
    // The legend: every server, then every policy, in rows under the panels.
    let mut entries: Vec<(String, &str, bool)> = panels
        .iter()
        .enumerate()
        .map(|(j, p)| {
            (
                format!("{} (measured)", p.server.name),
                color(SERVER_COLORS, j),
                false,
            )
        })
        .collect();
    entries.extend(
        policies
            .iter()
            .map(|&n| (format!("{n} (libcachesim)"), policy_color(n), true)),
    );
    let (mut lx, mut ly) = (MARGIN, py + PLOT_H + 64.0);
    for (label, stroke, dashed) in &entries {
        let ew = 34.0 + text_width(label, FONT);
        if lx > MARGIN && lx + ew > w - MARGIN {
            lx = MARGIN;
            ly += 20.0;
        }
        c.series(
            "swatch",
            label,
            &[(lx, ly - 4.0), (lx + 28.0, ly - 4.0)],
            stroke,
            if *dashed { 2.0 } else { 3.0 },
            *dashed,
            false,
        );
        c.text(lx + 34.0, ly, FONT, Anchor::Start, "legend", false, label);
        lx += ew + 18.0;
    }
    Ok(c.finish(w, ly + MARGIN))
}
