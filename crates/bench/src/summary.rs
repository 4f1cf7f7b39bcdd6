//! `compare`'s per-server summary: the median of each metric over the rounds, which
//! the table, the JSON and the SVG chart ([`crate::plot`]) all print.

use crate::run::Report;

/// Medians over rounds for one server.
pub struct Summary {
    pub name: String,
    /// The worker threads the server says it runs (`stats`' `threads`), if it says.
    pub threads: Option<u32>,
    pub rps: f64,
    pub cpu_s_per_mreq: f64,
    pub hit_ratio: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub client_cpu_pct: f64,
    pub client_cpu_s_per_mreq: f64,
    pub errors: u64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub fn summarize(name: &str, threads: Option<u32>, rs: &[Report]) -> Summary {
    let m = |f: &dyn Fn(&Report) -> f64| median(rs.iter().map(f).collect());
    Summary {
        name: name.to_string(),
        threads,
        rps: m(&|r| r.throughput()),
        cpu_s_per_mreq: m(&|r| r.server_cpu_s_per_mreq.unwrap_or(0.0)),
        hit_ratio: m(&|r| r.hit_ratio()),
        p50: m(&|r| r.p[0] as f64),
        p90: m(&|r| r.p[1] as f64),
        p99: m(&|r| r.p[2] as f64),
        p999: m(&|r| r.p[3] as f64),
        client_cpu_pct: m(&|r| r.client_cpu_pct),
        client_cpu_s_per_mreq: m(&|r| r.client_cpu_s_per_mreq),
        errors: rs.iter().map(|r| r.errors.total()).sum(),
    }
}
