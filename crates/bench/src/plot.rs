//! A small SVG chart for `compare --plot`: median throughput per server, and median
//! latency percentiles per server on a log scale. Written by hand: two bar charts
//! need no plotting library.

use std::fmt::Write as _;

use crate::summary::Summary;

const COLORS: &[&str] = &[
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub fn svg(workload: &str, sums: &[Summary]) -> String {
    let (w, h) = (900.0, 420.0);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"16\">{} — medians over rounds</text>",
        w / 2.0,
        esc(workload)
    );
    // Left: throughput bars.
    let (x0, y0, pw, ph) = (60.0, 60.0, 320.0, 300.0);
    let max_rps = sums.iter().map(|x| x.rps).fold(1.0, f64::max);
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"48\" text-anchor=\"middle\">requests/s</text>",
        x0 + pw / 2.0
    );
    let _ = write!(
        s,
        "<line x1=\"{x0}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>",
        y0 + ph,
        x0 + pw,
        y0 + ph
    );
    let bw = pw / sums.len().max(1) as f64;
    for (i, x) in sums.iter().enumerate() {
        let bh = x.rps / max_rps * ph;
        let bx = x0 + i as f64 * bw + bw * 0.15;
        let _ = write!(
            s,
            "<rect x=\"{bx:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{:.0}</text>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            y0 + ph - bh,
            bw * 0.7,
            COLORS[i % COLORS.len()],
            bx + bw * 0.35,
            y0 + ph - bh - 4.0,
            x.rps,
            bx + bw * 0.35,
            y0 + ph + 16.0,
            esc(&x.name)
        );
    }
    // Right: latency percentiles, log scale from 1 us.
    let (x1, pw2) = (480.0, 380.0);
    let max_lat = sums.iter().map(|x| x.p999).fold(10.0, f64::max);
    let top = max_lat.log10().ceil().max(1.0);
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"48\" text-anchor=\"middle\">latency (us, log scale)</text>",
        x1 + pw2 / 2.0
    );
    let _ = write!(
        s,
        "<line x1=\"{x1}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>",
        y0 + ph,
        x1 + pw2,
        y0 + ph
    );
    for d in 0..=top as i32 {
        let y = y0 + ph - f64::from(d) / top * ph;
        let _ = write!(
            s,
            "<line x1=\"{x1}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            x1 + pw2,
            x1 - 4.0,
            y + 4.0,
            10f64.powi(d)
        );
    }
    let labels = ["p50", "p90", "p99", "p99.9"];
    let gw = pw2 / labels.len() as f64;
    let bw2 = gw * 0.8 / sums.len().max(1) as f64;
    for (j, label) in labels.iter().enumerate() {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            x1 + j as f64 * gw + gw / 2.0,
            y0 + ph + 16.0
        );
        for (i, x) in sums.iter().enumerate() {
            let v = [x.p50, x.p90, x.p99, x.p999][j].max(1.0);
            let bh = v.log10() / top * ph;
            let bx = x1 + j as f64 * gw + gw * 0.1 + i as f64 * bw2;
            let _ = write!(
                s,
                "<rect x=\"{bx:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{} {label}: {v:.0} us</title></rect>",
                y0 + ph - bh,
                bw2 * 0.9,
                COLORS[i % COLORS.len()],
                esc(&x.name)
            );
        }
    }
    // Legend.
    for (i, x) in sums.iter().enumerate() {
        let lx = x1 + i as f64 * 110.0;
        let _ = write!(
            s,
            "<rect x=\"{lx}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            h - 22.0,
            COLORS[i % COLORS.len()],
            lx + 14.0,
            h - 13.0,
            esc(&x.name)
        );
    }
    s.push_str("</svg>\n");
    s
}
