//! memcrab-bench: a load generator for memcached-compatible servers.
//!
//! ```text
//!   main ── resolves the workload, preloads, samples server CPU ──┐
//!     ├─ client thread 0: mio loop over conns 0..k   (load.rs)    │ merged HDR
//!     ├─ client thread 1: mio loop over conns k..2k               │ histograms,
//!     └─ ...                                                      ┘ counters
//! ```
//!
//! - `run` (run.rs) drives one or more servers with a named workload (W1–W5, see
//!   docs/benchmarks.md; workload.rs holds them, their knobs and the key and value
//!   generators) whose knobs can each be overridden, closed loop or open loop at
//!   `--rate` (load.rs, the client threads' loop), and reports throughput, hit ratio,
//!   errors, latency percentiles, its own CPU use and, given `--server-pid`, the
//!   server's CPU-seconds per million requests.
//! - `compare` (compare.rs) launches servers from command lines, pinned, runs the
//!   same workload on each in alternating rounds, and reports medians and ratios
//!   (summary.rs: the per-server medians that its table, JSON and chart print).
//! - `trace` generates traces shaped like Twitter's production clusters, replays
//!   them against servers and writes them for libcachesim (trace/).
//! - `storage` measures memory per item, items held and hit ratios (storage.rs),
//!   and miss ratio by cache size against libcachesim's policies (misscurve.rs).
//! - `textconn.rs` is the blocking text connection `storage` and `trace` replay
//!   requests over.
//! - `hotkeys` checks a server's `stats hotkeys` against the true Zipf top 16
//!   (hotkeys.rs).
//! - `compare --plot` and `storage --plot` draw what they measured, and `plot` draws
//!   several workloads' CPU per request in one picture from `compare --plot`'s
//!   figures (plot/).
//! - `floor` is a do-nothing responder: the machine's floor, on epoll (floor.rs) or
//!   io_uring (`--io uring`, floor_uring.rs).

mod compare;
mod floor;
mod floor_uring;
mod hotkeys;
mod load;
mod misscurve;
mod plot;
mod run;
mod storage;
mod summary;
mod textconn;
mod trace;
mod workload;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "memcrab-bench",
    version,
    about = "Measures memcached-compatible servers side by side"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Drive one or more running servers with a workload and report what was measured.
    Run(run::RunArgs),
    /// Launch servers from command lines and compare them on the same workload.
    Compare(compare::CompareArgs),
    /// Storage efficiency: bytes per item, hit ratio at equal memory, calcification.
    Storage(storage::StorageArgs),
    /// Hit ratio on traces shaped like Twitter's clusters, for an oracle's comparison.
    Trace(trace::TraceArgs),
    /// Draw several workloads' CPU per request in one picture from `compare --plot`'s
    /// `.tsv` figures.
    Plot(plot::PlotArgs),
    /// Check `stats hotkeys` against the true top 16 of Zipf loads (recall).
    Hotkeys(hotkeys::HotkeysArgs),
    /// Serve as a do-nothing responder (the machine's floor) until killed.
    Floor {
        /// Port to listen on (127.0.0.1).
        #[arg(long, default_value_t = 11311)]
        port: u16,
        /// The design: `epoll` (readiness, read and write per connection) or
        /// `uring` (memcrab's `-o io=uring` design).
        #[arg(long, default_value = "epoll")]
        io: String,
    },
}

fn warn_if_client_bound(r: &run::Report) {
    if r.client_cpu_pct > 90.0 {
        eprintln!(
            "WARNING: the load generator used {:.0}% of its {} core(s) and may be the bottleneck: \
             give it more with --threads and --client-cpus",
            r.client_cpu_pct, r.threads
        );
    }
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Run(a) => run::targets(&a.servers)
            .and_then(|t| run::execute(&t, &a.knobs, a.server_pid))
            .map(|reports| {
                for r in &reports {
                    warn_if_client_bound(r);
                }
                if a.knobs.json {
                    if let [one] = reports.as_slice() {
                        println!("{}", one.json());
                    } else {
                        let parts: Vec<String> = reports
                            .iter()
                            .map(|r| format!("\"{}\":{}", r.workload, r.json()))
                            .collect();
                        println!("{{{}}}", parts.join(","));
                    }
                } else {
                    for r in &reports {
                        print!("{}", r.table());
                    }
                }
            }),
        Cmd::Compare(a) => compare::main(a),
        Cmd::Storage(a) => storage::main(a),
        Cmd::Trace(a) => trace::main(a),
        Cmd::Hotkeys(a) => hotkeys::main(a),
        Cmd::Plot(a) => plot::main(a),
        Cmd::Floor { port, io } => {
            // Bound here for both designs, and said on stdout once it listens: a
            // script or test waits for that line instead of polling the port.
            let serve = match io.as_str() {
                "epoll" => floor::serve,
                "uring" => floor_uring::serve,
                other => {
                    eprintln!("memcrab-bench: floor --io {other}: epoll or uring");
                    std::process::exit(2);
                }
            };
            std::net::TcpListener::bind(("127.0.0.1", port))
                .map_err(anyhow::Error::from)
                .and_then(|l| {
                    use std::io::Write;
                    println!("listening on {}", l.local_addr()?);
                    std::io::stdout().flush()?;
                    serve(l)
                })
        }
    };
    if let Err(e) = result {
        eprintln!("memcrab-bench: {e:#}");
        std::process::exit(1);
    }
}
