//! `memcrab-bench trace`: hit ratio against an oracle, on traces shaped like
//! Twitter's production clusters.
//!
//! ```text
//!   shape.rs  published figures ──▶ gen.rs  seeded trace ──┬─▶ write.rs  NAME.csv,
//!                                                          │   NAME.oracleGeneral.bin
//!                                                          │     └─▶ scripts/hitratio_sim.py
//!                                                          │         (libcachesim: LRU, S3-FIFO,
//!                                                          │          W-TinyLFU, Belady)
//!                                                          └─▶ replay.rs  each server at -m,
//!                                                              NAME.servers.tsv
//! ```
//!
//! - `shape.rs`: cluster52 and cluster25's published statistics, and the op type.
//! - `gen.rs`: the generator (how each figure is met, and what is assumed);
//!   `gen_tests.rs` its unit tests.
//! - `write.rs`: the libcachesim trace files.
//! - `replay.rs`: the look-aside replay against one server, its bookkeeping check
//!   and the probe of what the server holds at the end.
//!
//! Goals: the same requests in the same order for every server and every simulated
//! policy; miss ratios counted over the same reads (those after the warm-up).
//! Non-goals: speed (a hit ratio does not depend on timing; the replay is
//! pipelined only to be short).

pub(crate) mod gen;
pub(crate) mod replay;
pub(crate) mod shape;
pub(crate) mod write;

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::compare::Server;

/// `memcrab-bench trace`.
#[derive(Args, Clone)]
pub struct TraceArgs {
    /// Shapes to generate: cluster52, cluster25.
    #[arg(long, value_delimiter = ',', default_value = "cluster52,cluster25")]
    pub shapes: Vec<String>,
    /// Requests per trace.
    #[arg(long, default_value_t = 4_000_000)]
    pub requests: usize,
    /// Distinct keys the Zipf part draws from (one-hit wonders come on top); 0:
    /// the largest space whose tail keeps the published one-hit-wonder share.
    #[arg(long, default_value_t = 0)]
    pub keys: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Divide every published TTL by this (1: as published; the TTLs of both shapes
    /// are then hours or days, longer than any trace here).
    #[arg(long, default_value_t = 1)]
    pub ttl_divisor: u32,
    /// Send each batch no earlier than its trace time (for TTLs that expire within
    /// the trace: the trace lasts requests / the published request rate).
    #[arg(long)]
    pub paced: bool,
    /// Share of the trace that warms the cache; reads after it are counted.
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// `-m` appended to every server command.
    #[arg(long, default_value_t = 64)]
    pub mem_mb: u64,
    /// A server command line with `{port}`, `NAME=CMD`; repeat per server. None:
    /// only write the trace files.
    #[arg(long = "server-cmd")]
    pub server_cmds: Vec<String>,
    /// Where the trace files and NAME.servers.tsv go.
    #[arg(long, default_value = "target/trace")]
    pub out: PathBuf,
    /// Skip writing the libcachesim files.
    #[arg(long)]
    pub no_files: bool,
    /// CPUs the servers are pinned to.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub server_cpus: Vec<usize>,
    /// Fail unless every server's get_hits + get_misses over the counted window
    /// equal the trace's reads there, and its get_hits the replayer's hits.
    #[arg(long)]
    pub check: bool,
}

fn split_name(s: &str, i: usize) -> (String, String) {
    match s.split_once('=') {
        Some((n, c)) if !n.contains(' ') => (n.to_string(), c.to_string()),
        _ => (format!("server{i}"), s.to_string()),
    }
}

pub fn main(a: TraceArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (0.0..1.0).contains(&a.warmup),
        "--warmup is a share in [0, 1)"
    );
    std::fs::create_dir_all(&a.out).with_context(|| format!("mkdir {}", a.out.display()))?;
    for name in &a.shapes {
        let shape = shape::by_name(name).with_context(|| format!("unknown shape {name}"))?;
        let params = gen::Params {
            requests: a.requests,
            keys: a.keys,
            seed: a.seed,
            ttl_divisor: a.ttl_divisor,
        };
        let trace = gen::Trace::generate(shape, params)?;
        let st = trace.stats();
        let warmup = (trace.reqs.len() as f64 * a.warmup) as usize;
        let window_reads = trace.reqs[warmup..]
            .iter()
            .filter(|r| r.op.is_read())
            .count();
        println!("## {name}: trace figures against the published ones\n");
        println!("| figure | published | trace |\n|---|---|---|");
        println!(
            "| Zipf alpha, keys | {} | {} over {} keys (drawn) |",
            shape.zipf_alpha, shape.zipf_alpha, trace.zipf_keys
        );
        println!(
            "| one-hit-wonder share | {:.4} | {:.4} |",
            shape.one_hit_wonder_share, st.one_hit_wonder_share
        );
        println!(
            "| key bytes, mean | {} | {:.1} |",
            shape.key_bytes_mean, st.key_bytes_mean
        );
        println!(
            "| value bytes, mean | {} | {:.1} |",
            shape.value_bytes_mean, st.value_bytes_mean
        );
        println!(
            "| mean frequency | {} | {:.1} |",
            shape.mean_freq, st.mean_freq
        );
        println!(
            "| compulsory miss ratio | {:.4} | {:.4} |",
            shape.compulsory_miss_ratio,
            st.distinct as f64 / st.requests as f64
        );
        println!(
            "| production miss ratio | {} | |",
            shape.production_miss_ratio
        );
        println!(
            "| requests, reads, distinct keys (one-hit wonders added), working set | | {}, {}, {} ({}), {:.1} MB |",
            st.requests,
            st.reads,
            st.distinct,
            st.wonders_added,
            st.object_bytes_total as f64 / 1e6
        );
        println!();
        let mut tsv = format!(
            "# shape={name} requests={} warmup_index={warmup} window_reads={window_reads} mem_mb={} span_secs={}\n\
             server\tmiss_ratio\treads\tmisses\tserver_gets\tserver_hits\tcurr_items\t\
             resident_items\tresident_bytes\tcurr_items_mean\tcapacity_bytes\tevictions\texpired_unfetched\treclaimed\tcrawler_reclaimed\n",
            st.requests,
            a.mem_mb,
            trace.reqs.last().map_or(0, |r| r.time_secs)
        );
        if !a.no_files {
            write::csv(&trace, &a.out.join(format!("{name}.csv")))?;
            write::oracle_general(&trace, &a.out.join(format!("{name}.oracleGeneral.bin")))?;
        }
        if !a.server_cmds.is_empty() {
            println!(
                "| server (-m {}) | miss ratio | reads counted | misses | curr_items: end, mean | held at end: items, key+value MB | capacity MB | evictions | expired_unfetched | reclaimed | crawler_reclaimed | replay s |",
                a.mem_mb
            );
            println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
        }
        for (i, s) in a.server_cmds.iter().enumerate() {
            let (sname, cmd) = split_name(s, i);
            let server = Server::start(&format!("{cmd} -m {}", a.mem_mb), &a.server_cpus)?;
            let o = replay::replay(&trace, server.port, warmup, a.paced)
                .with_context(|| format!("replay against {sname}"))?;
            drop(server);
            println!(
                "| {sname} | {:.4} | {} | {} | {}, {:.0} | {}, {:.2} | {:.2} | {} | {} | {} | {} | {:.0} |",
                o.miss_ratio(),
                o.reads,
                o.misses,
                o.curr_items,
                o.curr_items_mean,
                o.resident_items,
                o.resident_bytes as f64 / 1e6,
                o.capacity_bytes() as f64 / 1e6,
                o.evictions,
                o.expired_unfetched,
                o.reclaimed,
                o.crawler_reclaimed,
                o.secs
            );
            let _ = writeln!(
                tsv,
                "{sname}\t{:.6}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.0}\t{}\t{}\t{}\t{}\t{}",
                o.miss_ratio(),
                o.reads,
                o.misses,
                o.server_gets,
                o.server_hits,
                o.curr_items,
                o.resident_items,
                o.resident_bytes,
                o.curr_items_mean,
                o.capacity_bytes(),
                o.evictions,
                o.expired_unfetched,
                o.reclaimed,
                o.crawler_reclaimed
            );
            if a.check {
                anyhow::ensure!(
                    o.reads == window_reads as u64,
                    "{sname}: replayed {} reads in the window, the trace has {window_reads}",
                    o.reads
                );
                anyhow::ensure!(
                    o.server_gets == o.reads && o.server_hits == o.reads - o.misses,
                    "{sname}: stats say {} gets and {} hits; the replayer counted {} reads and {} hits",
                    o.server_gets,
                    o.server_hits,
                    o.reads,
                    o.reads - o.misses
                );
            }
        }
        println!();
        std::fs::write(a.out.join(format!("{name}.servers.tsv")), tsv)?;
    }
    Ok(())
}
