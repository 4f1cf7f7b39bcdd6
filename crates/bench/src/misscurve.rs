//! `memcrab-bench storage --experiments misscurve`: miss ratio by cache size, each
//! server next to the policies an oracle simulates on the memory it held for data.
//!
//! One workload feeds the servers and the simulator with the same requests: a
//! cluster52-shaped trace from `memcrab-bench trace`'s generator (crate::trace,
//! seed 1, published TTLs), replayed look-aside against every server at every `-m`
//! (crate::trace's replay: the first half warms, the reads of the second half are
//! counted, and each server's own `get_hits`/`get_misses` must agree), then
//! simulated by `scripts/hitratio_sim.py --curve` (PyPI's libcachesim: LRU, S3-FIFO,
//! W-TinyLFU, Belady) at the key + value bytes each server held at each `-m`, as
//! `scripts/bench-hitratio` defines that capacity.
//!
//! ```text
//!   generate ──▶ DIR/cluster52.csv, DIR/cluster52.oracleGeneral.bin ──────┐
//!      └─▶ replay: each -m × each server ──▶ DIR/misscurve.tsv ───▶ hitratio_sim.py --curve
//!                                                                        │
//!   table (stdout), PLOT/storage-miss.svg (crate::plot) ◀── DIR/misscurve.sims.tsv
//! ```
//!
//! Goals: the servers and the policies see the same requests and are counted over
//! the same reads. Non-goals: speed (the replay is pipelined only to be short).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context};
use clap::Args;

use crate::compare::Server;
use crate::plot::{self, MissCurve, MissPanel};
use crate::trace::{gen, replay, shape, write};

/// The trace shape: the cluster the twitter/cache-trace README recommends for
/// miss-ratio studies.
const SHAPE: &str = "cluster52";
const SEED: u64 = 1;

/// `misscurve`'s options (flattened into `storage`'s).
#[derive(Args, Clone)]
pub struct MissCurveArgs {
    /// misscurve: the `-m` sizes in MiB.
    #[arg(long = "miss-sizes", value_delimiter = ',', default_value = "2,4,8,16")]
    pub sizes: Vec<u64>,
    /// misscurve: requests in the cluster52 trace (--quick: a quarter of them).
    #[arg(long = "miss-requests", default_value_t = 2_000_000)]
    pub requests: usize,
    /// misscurve: where the trace files and the figures go.
    #[arg(long = "miss-dir", default_value = "target/misscurve")]
    pub dir: PathBuf,
    /// misscurve: the Python that has libcachesim (`none`: draw the servers only).
    #[arg(
        long = "miss-python",
        default_value = "target/hitratio-venv/bin/python"
    )]
    pub python: String,
    /// misscurve: the simulator script.
    #[arg(long = "miss-sim", default_value = "scripts/hitratio_sim.py")]
    pub sim: PathBuf,
    /// misscurve: print and draw the figures an earlier run left in --miss-dir
    /// (misscurve.tsv, misscurve.sims.tsv) instead of replaying and simulating.
    #[arg(long = "miss-replot")]
    pub replot: bool,
}

/// What `storage` hands `misscurve`.
pub struct Run<'a> {
    pub miss: &'a MissCurveArgs,
    /// `--quick`: a quarter of the requests.
    pub quick: bool,
    pub server_cpus: &'a [usize],
    /// `--plot`: the folder for storage-miss.svg.
    pub plot: Option<&'a Path>,
    /// Each server's name and command line (with `{port}`; `-m` is appended).
    pub servers: Vec<(String, String)>,
}

/// One server at one size.
struct Measured {
    mem_mb: u64,
    server: String,
    miss: f64,
    reads: u64,
    capacity_bytes: u64,
    items_mean: f64,
}

/// One policy simulated at one server's capacity at one size.
struct Simulated {
    mem_mb: u64,
    server: String,
    policy: String,
    miss: f64,
}

/// Replays (or, with `--miss-replot`, reads back), simulates, prints the table and
/// draws the picture.
pub fn miss_curve(a: &Run) -> anyhow::Result<()> {
    let m = a.miss;
    ensure!(!m.sizes.is_empty(), "--miss-sizes is empty");
    let requests = if a.quick { m.requests / 4 } else { m.requests };
    let shape = shape::by_name(SHAPE).context("cluster52 shape")?;
    let trace = gen::Trace::generate(
        shape,
        gen::Params {
            requests,
            keys: 0,
            seed: SEED,
            ttl_divisor: 1,
        },
    )?;
    let warmup = trace.reqs.len() / 2;
    let window_reads = trace.reqs[warmup..]
        .iter()
        .filter(|r| r.op.is_read())
        .count() as u64;
    let st = trace.stats();
    let tsv_path = m.dir.join("misscurve.tsv");
    let (measured, sims) = if m.replot {
        let text = std::fs::read_to_string(&tsv_path)
            .with_context(|| format!("{}", tsv_path.display()))?;
        let measured = parse_measured(&text, trace.reqs.len(), window_reads)
            .with_context(|| format!("{}", tsv_path.display()))?;
        // A run drawn without the simulator left no simulated figures.
        let sims = if m.dir.join("misscurve.sims.tsv").exists() {
            read_sims(m)?
        } else {
            Vec::new()
        };
        (measured, sims)
    } else {
        let measured = measure(a, &trace, warmup, window_reads)?;
        let sims = if m.python == "none" {
            Vec::new()
        } else {
            simulate(m)?;
            read_sims(m)?
        };
        (measured, sims)
    };
    let mut policies: Vec<String> = Vec::new();
    for s in &sims {
        if !policies.contains(&s.policy) {
            policies.push(s.policy.clone());
        }
    }
    let sim = |mem_mb: u64, server: &str, policy: &str| {
        sims.iter()
            .find(|s| s.mem_mb == mem_mb && s.server == server && s.policy == policy)
            .map(|s| s.miss)
    };

    println!("\n### Miss ratio by cache size, against the oracle's policies\n");
    println!(
        "A {SHAPE}-shaped trace (`memcrab-bench trace`'s generator, seed {SEED}): {} \
         requests, {} distinct keys, {:.1} MB of key + value; the first half warms, the \
         {window_reads} reads of the second half are counted. Each server is replayed \
         look-aside at each `-m`; each policy is simulated (libcachesim) at the key + \
         value bytes that server held there.\n",
        st.requests,
        st.distinct,
        st.object_bytes_total as f64 / 1e6
    );
    print!("| -m | server | key+value MB held | miss ratio |");
    for p in &policies {
        print!(" {p} |");
    }
    if policies.iter().any(|p| p == "S3-FIFO") {
        print!(" vs S3-FIFO |");
    }
    println!();
    let cols = 4 + policies.len() + usize::from(policies.iter().any(|p| p == "S3-FIFO"));
    println!("|{}", "---|".repeat(cols));
    for r in &measured {
        print!(
            "| {} | {} | {:.2} | {:.4} |",
            r.mem_mb,
            r.server,
            r.capacity_bytes as f64 / 1e6,
            r.miss
        );
        for p in &policies {
            match sim(r.mem_mb, &r.server, p) {
                Some(v) => print!(" {v:.4} |"),
                None => print!(" |"),
            }
        }
        if let Some(s3) = sim(r.mem_mb, &r.server, "S3-FIFO") {
            print!(" {:+.1}% |", (r.miss / s3 - 1.0) * 100.0);
        }
        println!();
    }

    if let Some(dir) = a.plot {
        // The servers and sizes of the figures (a replot draws what was measured).
        let mut names: Vec<&str> = Vec::new();
        for r in &measured {
            if !names.contains(&r.server.as_str()) {
                names.push(&r.server);
            }
        }
        let panels: Vec<MissPanel> = names
            .iter()
            .map(|&name| {
                let rows = || measured.iter().filter(move |r| r.server == name);
                MissPanel {
                    server: MissCurve {
                        name: name.to_string(),
                        points: rows().map(|r| (r.mem_mb, r.miss)).collect(),
                    },
                    policies: policies
                        .iter()
                        .map(|p| MissCurve {
                            name: p.clone(),
                            points: rows()
                                .filter_map(|r| sim(r.mem_mb, name, p).map(|v| (r.mem_mb, v)))
                                .collect(),
                        })
                        .collect(),
                }
            })
            .collect();
        let what = format!(
            "{SHAPE}-shaped trace (memcrab-bench trace), {} requests, the last {} counted; \
             look-aside replay\n\
             dashed: libcachesim at the key + value bytes the panel's server held at each -m",
            st.requests,
            st.requests - warmup
        );
        let path = dir.join("storage-miss.svg");
        std::fs::write(&path, plot::miss_svg(&panels, &what)?)
            .with_context(|| format!("--plot {}", path.display()))?;
    }
    Ok(())
}

/// Writes the trace files, replays the trace against every server at every size,
/// and writes what each held and missed to DIR/misscurve.tsv.
fn measure(
    a: &Run,
    trace: &gen::Trace,
    warmup: usize,
    window_reads: u64,
) -> anyhow::Result<Vec<Measured>> {
    let m = a.miss;
    std::fs::create_dir_all(&m.dir).with_context(|| format!("mkdir {}", m.dir.display()))?;
    write::csv(trace, &m.dir.join(format!("{SHAPE}.csv")))?;
    write::oracle_general(trace, &m.dir.join(format!("{SHAPE}.oracleGeneral.bin")))?;

    let mut measured = Vec::new();
    for &mem_mb in &m.sizes {
        for (name, cmd) in &a.servers {
            let server = Server::start(&format!("{cmd} -m {mem_mb}"), a.server_cpus)?;
            let o = replay::replay(trace, server.port, warmup, false)
                .with_context(|| format!("replay against {} at -m {mem_mb}", name))?;
            drop(server);
            // The replay's own check (`trace --check`): the server counted what we did.
            ensure!(
                o.reads == window_reads
                    && o.server_gets == o.reads
                    && o.server_hits == o.reads - o.misses,
                "{} at -m {mem_mb}: {} reads of {window_reads} replayed; stats say {} gets \
                 and {} hits, the replay {} misses",
                name,
                o.reads,
                o.server_gets,
                o.server_hits,
                o.misses
            );
            eprintln!(
                "misscurve {} -m {mem_mb}: miss {:.4}, {:.2} MB held, {:.0} s",
                name,
                o.miss_ratio(),
                o.capacity_bytes() as f64 / 1e6,
                o.secs
            );
            measured.push(Measured {
                mem_mb,
                server: name.clone(),
                miss: o.miss_ratio(),
                reads: o.reads,
                capacity_bytes: o.capacity_bytes(),
                items_mean: o.curr_items_mean,
            });
        }
    }
    let mut tsv = format!(
        "# shape={SHAPE} requests={} warmup_index={warmup} window_reads={window_reads} span_secs={}\n\
         {MEASURED_HEADER}\n",
        trace.reqs.len(),
        trace.reqs.last().map_or(0, |r| r.time_secs)
    );
    for r in &measured {
        let _ = writeln!(
            tsv,
            "{}\t{}\t{:.6}\t{}\t{}\t{:.0}",
            r.mem_mb, r.server, r.miss, r.reads, r.capacity_bytes, r.items_mean
        );
    }
    let tsv_path = m.dir.join("misscurve.tsv");
    std::fs::write(&tsv_path, tsv).with_context(|| format!("{}", tsv_path.display()))?;
    Ok(measured)
}

const MEASURED_HEADER: &str = "mem_mb\tserver\tmiss_ratio\treads\tcapacity_bytes\tcurr_items_mean";

/// DIR/misscurve.tsv back, checked against the trace it claims to be from.
fn parse_measured(text: &str, requests: usize, window_reads: u64) -> anyhow::Result<Vec<Measured>> {
    let mut lines = text.lines();
    let head = lines.next().unwrap_or_default();
    for want in [
        format!("requests={requests} "),
        format!("window_reads={window_reads} "),
    ] {
        ensure!(
            head.contains(&want),
            "not this trace's figures: {head:?} lacks {want:?}"
        );
    }
    if lines.next() != Some(MEASURED_HEADER) {
        bail!("the second line is not `{MEASURED_HEADER}`");
    }
    let mut out = Vec::new();
    for (n, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let [mem_mb, server, miss, reads, capacity, items] = f[..] else {
            bail!("row {}: {} fields, not 6", n + 1, f.len());
        };
        let bad = |what: &str| format!("row {}: {what}", n + 1);
        out.push(Measured {
            mem_mb: mem_mb.parse().with_context(|| bad("-m"))?,
            server: server.to_string(),
            miss: miss
                .parse()
                .ok()
                .filter(|v: &f64| (0.0..=1.0).contains(v))
                .with_context(|| bad("miss ratio"))?,
            reads: reads.parse().with_context(|| bad("reads"))?,
            capacity_bytes: capacity.parse().with_context(|| bad("capacity"))?,
            items_mean: items.parse().with_context(|| bad("curr_items_mean"))?,
        });
    }
    ensure!(!out.is_empty(), "no rows");
    Ok(out)
}

/// Runs `hitratio_sim.py --curve` on the files written.
fn simulate(m: &MissCurveArgs) -> anyhow::Result<()> {
    let status = Command::new(&m.python)
        .arg(&m.sim)
        .arg("--curve")
        .arg(&m.dir)
        .status()
        .with_context(|| format!("cannot run {} {}", m.python, m.sim.display()))?;
    ensure!(status.success(), "{} --curve failed", m.sim.display());
    Ok(())
}

/// DIR/misscurve.sims.tsv, as `hitratio_sim.py --curve` wrote it.
fn read_sims(m: &MissCurveArgs) -> anyhow::Result<Vec<Simulated>> {
    let path = m.dir.join("misscurve.sims.tsv");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    parse_sims(&text).with_context(|| format!("{}", path.display()))
}

const SIMS_HEADER: &str = "mem_mb\tserver\tpolicy\tcapacity_bytes\tmiss_ratio";

/// `hitratio_sim.py --curve`'s figures: a header, then one row per policy per
/// server per size.
fn parse_sims(text: &str) -> anyhow::Result<Vec<Simulated>> {
    let mut lines = text.lines();
    if lines.next() != Some(SIMS_HEADER) {
        bail!("the first line is not `{SIMS_HEADER}`");
    }
    let mut out = Vec::new();
    for (n, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let [mem_mb, server, policy, _capacity, miss] = f[..] else {
            bail!("row {}: {} fields, not 5", n + 1, f.len());
        };
        let miss: f64 = miss
            .parse()
            .ok()
            .filter(|v: &f64| (0.0..=1.0).contains(v))
            .with_context(|| format!("row {}: miss ratio {miss:?}", n + 1))?;
        out.push(Simulated {
            mem_mb: mem_mb
                .parse()
                .with_context(|| format!("row {}: -m {mem_mb:?}", n + 1))?,
            server: server.to_string(),
            policy: policy.to_string(),
            miss,
        });
    }
    ensure!(!out.is_empty(), "no rows");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sims_parse_and_refuse_bad_rows() {
        let good = format!("{SIMS_HEADER}\n4\tmemcrab\tS3-FIFO\t3000000\t0.0412\n");
        let s = parse_sims(&good).expect("parses");
        assert_eq!(
            (s[0].mem_mb, s[0].server.as_str(), s[0].policy.as_str()),
            (4, "memcrab", "S3-FIFO")
        );
        assert_eq!(s[0].miss, 0.0412);
        for bad in [
            String::new(),
            format!("{SIMS_HEADER}\n"),
            format!("{SIMS_HEADER}\n4\tmemcrab\tS3-FIFO\t1\n"),
            format!("{SIMS_HEADER}\n4\tmemcrab\tS3-FIFO\t1\t1.5\n"),
            format!("{SIMS_HEADER}\nx\tmemcrab\tS3-FIFO\t1\t0.1\n"),
        ] {
            assert!(parse_sims(&bad).is_err(), "{bad:?}");
        }
    }
}
