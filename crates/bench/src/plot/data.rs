//! A comparison's figures, what its pictures are drawn from, and their TSV form:
//! `compare --plot` writes `W1.tsv` beside `W1.svg`, and `memcrab-bench plot --from`
//! reads them back to draw several workloads in one picture.
//!
//! Tab-separated (shown here with spaces):
//! ```text
//! workload   W1
//! name       workers  floor  cpu_s_per_mreq  rps     p50_us  p90_us  p99_us  p999_us
//! memcached  1        no     6.693           150424  66      ...
//! ```
//! A `workers` of `-` is a server that did not report `stats` threads.

use anyhow::{bail, Context};

use crate::summary::Summary;

/// One server's medians.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    /// The workers it ran (`stats` threads), if it said.
    pub workers: Option<u32>,
    /// A do-nothing floor (`memcrab-bench floor`), not a server being compared.
    pub floor: bool,
    pub cpu_s_per_mreq: f64,
    pub rps: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
}

/// One workload's figures; the first row is the baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub workload: String,
    pub rows: Vec<Row>,
}

const HEADER: &str = "name\tworkers\tfloor\tcpu_s_per_mreq\trps\tp50_us\tp90_us\tp99_us\tp999_us";

impl Comparison {
    /// From `compare`'s summaries; the last `floors` of them are floors.
    pub fn from_summaries(workload: &str, sums: &[Summary], floors: usize) -> Comparison {
        let first_floor = sums.len().saturating_sub(floors);
        Comparison {
            workload: workload.to_string(),
            rows: sums
                .iter()
                .enumerate()
                .map(|(i, s)| Row {
                    name: s.name.clone(),
                    workers: s.threads,
                    floor: i >= first_floor,
                    cpu_s_per_mreq: s.cpu_s_per_mreq,
                    rps: s.rps,
                    p50: s.p50,
                    p90: s.p90,
                    p99: s.p99,
                    p999: s.p999,
                })
                .collect(),
        }
    }

    pub fn to_tsv(&self) -> String {
        let mut s = format!("workload\t{}\n{HEADER}\n", self.workload);
        for r in &self.rows {
            s += &format!(
                "{}\t{}\t{}\t{:.4}\t{:.1}\t{}\t{}\t{}\t{}\n",
                r.name,
                r.workers.map_or_else(|| "-".to_string(), |w| w.to_string()),
                if r.floor { "yes" } else { "no" },
                r.cpu_s_per_mreq,
                r.rps,
                r.p50,
                r.p90,
                r.p99,
                r.p999
            );
        }
        s
    }

    pub fn from_tsv(text: &str) -> anyhow::Result<Comparison> {
        let mut lines = text.lines();
        let workload = lines
            .next()
            .and_then(|l| l.strip_prefix("workload\t"))
            .context("first line is not `workload<TAB>NAME`")?
            .to_string();
        if lines.next() != Some(HEADER) {
            bail!("second line is not the header `{HEADER}`");
        }
        let mut rows = Vec::new();
        for (n, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
            let f: Vec<&str> = line.split('\t').collect();
            let [name, workers, floor, cpu, rps, p50, p90, p99, p999] = f[..] else {
                bail!("row {}: {} fields, not 9", n + 1, f.len());
            };
            let num = |s: &str| -> anyhow::Result<f64> {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .with_context(|| format!("row {}: bad number {s:?}", n + 1))
            };
            rows.push(Row {
                name: name.to_string(),
                workers: match workers {
                    "-" => None,
                    w => Some(
                        w.parse()
                            .with_context(|| format!("row {}: workers", n + 1))?,
                    ),
                },
                floor: match floor {
                    "yes" => true,
                    "no" => false,
                    other => bail!("row {}: floor {other:?}, not yes or no", n + 1),
                },
                cpu_s_per_mreq: num(cpu)?,
                rps: num(rps)?,
                p50: num(p50)?,
                p90: num(p90)?,
                p99: num(p99)?,
                p999: num(p999)?,
            });
        }
        if rows.is_empty() {
            bail!("no rows");
        }
        Ok(Comparison { workload, rows })
    }

    /// The baseline (the first server given) and the floors: what CPU is a
    /// multiple of.
    pub fn references(&self) -> Vec<&Row> {
        let mut refs: Vec<&Row> = self.rows.iter().take(1).collect();
        refs.extend(self.rows.iter().skip(1).filter(|r| r.floor));
        refs
    }
}

/// `a / b`, or 0 when `b` is not positive.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}
