//! Pictures of what `compare` and `storage` measured, as hand-written SVG: they need
//! no plotting library. Every bar chart is rows of horizontal bars, one row per
//! server, with its value printed in a column after the bars, so that no label needs
//! to be rotated or squeezed under another; widths come from measured labels. The
//! miss-ratio chart is lines over a log axis, its legend under the panels.
//!
//! - `svg.rs`: the canvas, text width estimates and label boxes.
//! - `bars.rs`: a group of labelled bars, and the check that every server ran the
//!   same worker count.
//! - `data.rs`: a comparison's figures (what a chart is drawn from) and their TSV
//!   form, written next to each picture and read back by `memcrab-bench plot`.
//! - `compare.rs`: one workload: server CPU per request as a multiple of the first
//!   server and of each floor, next to p50, p99 and p99.9 latency.
//! - `cpu.rs`: several workloads' CPU per request in one picture (`cpu.svg`).
//! - `storage.rs`: items per MB of resident memory per item shape.
//! - `miss.rs`: miss ratio by cache size, a panel per server with the policies
//!   libcachesim simulated at the bytes it held (lines, not bars).
//! - `tests.rs`: renders known figures and checks the XML, label boxes and ratios.
//!
//! Goals: a picture says what its table says, with equal worker counts on every side
//! (a chart refuses figures from servers that ran different worker counts), and no
//! two labels overlap. Non-goals: ticks on the bar charts (values are printed), fonts'
//! exact metrics (widths are estimated wide).

mod bars;
mod compare;
mod cpu;
mod data;
mod miss;
mod storage;
mod svg;
#[cfg(test)]
mod tests;

pub use compare::comparison_svg;
pub use cpu::cpu_svg;
pub use data::Comparison;
pub use miss::{miss_svg, MissCurve, MissPanel};
pub use storage::{items_svg, ItemsShape};

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

/// `memcrab-bench plot`.
#[derive(Args, Clone)]
pub struct PlotArgs {
    /// The figures `compare --plot` wrote next to each picture (`W1.tsv`...), one
    /// per workload, in the order to draw them.
    #[arg(long = "from", required = true, num_args = 1..)]
    pub from: Vec<PathBuf>,
    /// The picture to write.
    #[arg(long, default_value = "cpu.svg")]
    pub out: PathBuf,
}

/// `memcrab-bench plot`: one picture of CPU per request over several workloads.
pub fn main(a: PlotArgs) -> anyhow::Result<()> {
    let mut all = Vec::new();
    for p in &a.from {
        let text = std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?;
        all.push(Comparison::from_tsv(&text).with_context(|| format!("{}", p.display()))?);
    }
    let svg = cpu_svg(&all)?;
    std::fs::write(&a.out, svg).with_context(|| format!("--out {}", a.out.display()))
}
