//! memcrab-difffuzz: a randomized differential fuzzer. It sends the same random,
//! stateful, pipelined command streams (text, meta and binary protocols, valid and
//! malformed, over several connections at once) to memcached and to memcrab and
//! reports the first reply that differs, with a trace that can be replayed and a
//! shrunk copy of it.
//!
//! ```text
//!   main ── run: seeds ──► Session (session.rs): memcached + memcrab (servers.rs)
//!     │        └─ per round: Gen (gen/) ─► Round (plan.rs) ─► both servers (exec.rs)
//!     │                ─► mask (mask.rs) + compare ─► Difference ─► shrink (shrink.rs)
//!     │                                                         └─► trace files (trace.rs)
//!     ├─ replay FILE: plays a trace on fresh servers
//!     └─ masks: prints what is not compared, and why (mask.rs)
//! ```
//!
//! Determinism: the streams depend only on the seed and on what the servers
//! answered while they agreed, so a seed replays the same conversation.

mod exec;
mod gen;
mod mask;
mod plan;
mod servers;
mod session;
mod shrink;
mod trace;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::gen::{Gen, GenConfig};
use crate::servers::{configs, Config, Release};
use crate::session::{first_differing_line, Difference, Opts, Session};
use crate::trace::Trace;

#[derive(Parser)]
#[command(
    name = "memcrab-difffuzz",
    version,
    about = "Differential fuzzing of memcrab against memcached"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct ServerArgs {
    /// The oracle (scripts/diff-fuzz passes memcached 1.6.45 where it is built,
    /// Debian's 1.6.18 with --debian). Its release (`-V`) decides what is sent.
    #[arg(long, default_value = "/usr/bin/memcached")]
    memcached: PathBuf,
    /// The server under test.
    #[arg(long, default_value = "target/release/memcrab")]
    memcrab: PathBuf,
    /// How long a segment's reply may take before it counts as a hang (ms).
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Connections per server.
    #[arg(long, default_value_t = 3)]
    conns: usize,
}

impl ServerArgs {
    fn opts(&self) -> Result<Opts> {
        Ok(Opts {
            oracle: Release::of(&self.memcached)?,
            memcached: self.memcached.clone(),
            memcrab: self.memcrab.clone(),
            timeout: Duration::from_millis(self.timeout_ms),
            nconns: self.conns.max(1),
        })
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Fuzz: seeds in turn, each a fresh pair of servers, until the time is up.
    Run {
        #[command(flatten)]
        servers: ServerArgs,
        /// Run these seeds (each for --rounds) instead of seeds for --seconds.
        #[arg(long, value_delimiter = ',')]
        seeds: Vec<u64>,
        /// The first seed (default: from the clock); later seeds count up.
        #[arg(long)]
        seed: Option<u64>,
        /// How long to fuzz (without --seeds).
        #[arg(long, default_value_t = 180)]
        seconds: u64,
        /// Rounds per seed.
        #[arg(long, default_value_t = 300)]
        rounds: usize,
        /// Server configurations to use (seed modulo their count picks one); see `configs`.
        #[arg(long, value_delimiter = ',', default_values_t = [0usize, 1])]
        configs: Vec<usize>,
        /// Where traces of differences go.
        #[arg(long, default_value = "target/difffuzz")]
        out: PathBuf,
        /// Time for shrinking each difference (0: no shrinking).
        #[arg(long, default_value_t = 60)]
        shrink_seconds: u64,
        /// Go on with the next seed after a difference (listing distinct ones at the end).
        #[arg(long)]
        keep_going: bool,
        /// Send meta commands only (text connections, no classic or binary requests).
        #[arg(long)]
        meta_only: bool,
    },
    /// Play a trace on fresh servers and report the first difference.
    Replay {
        #[command(flatten)]
        servers: ServerArgs,
        trace: PathBuf,
    },
    /// Shrink a trace that shows a difference; writes `<trace>.shrunk`.
    Shrink {
        #[command(flatten)]
        servers: ServerArgs,
        trace: PathBuf,
        /// Time for shrinking.
        #[arg(long, default_value_t = 120)]
        seconds: u64,
        /// Replays per candidate (more for differences that do not always show).
        #[arg(long, default_value_t = 1)]
        attempts: usize,
    },
    /// Print what is masked or never sent, and why.
    Masks,
    /// Print the server configurations.
    Configs,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("memcrab-difffuzz: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<bool> {
    match cli.cmd {
        Cmd::Run {
            servers,
            seeds,
            seed,
            seconds,
            rounds,
            configs: cfgs,
            out,
            shrink_seconds,
            keep_going,
            meta_only,
        } => {
            let opts = servers.opts()?;
            let all = configs(opts.oracle);
            let cfgs: Vec<Config> = cfgs
                .iter()
                .map(|&i| {
                    all.get(i)
                        .cloned()
                        .with_context(|| format!("no configuration {i}"))
                })
                .collect::<Result<_>>()?;
            let fuzz = Fuzz {
                opts,
                meta_only,
                cfgs,
                rounds,
                out,
                shrink: Duration::from_secs(shrink_seconds),
            };
            fuzz.run(seeds, seed, Duration::from_secs(seconds), keep_going)
        }
        Cmd::Replay { servers, trace } => {
            let opts = servers.opts()?;
            let (t, cfg) = load_trace(&trace, opts.oracle)?;
            println!(
                "replaying {} ({} rounds, config {})",
                trace.display(),
                t.rounds.len(),
                cfg.id
            );
            match shrink::replay(&opts, &cfg, &t.rounds)? {
                Some(d) => {
                    print!("{}", report(&d, None, &cfg));
                    Ok(false)
                }
                None => {
                    println!("no difference");
                    Ok(true)
                }
            }
        }
        Cmd::Shrink {
            servers,
            trace,
            seconds,
            attempts,
        } => {
            let opts = servers.opts()?;
            let (t, cfg) = load_trace(&trace, opts.oracle)?;
            let mut first = None;
            for _ in 0..attempts.max(1) {
                first = shrink::replay(&opts, &cfg, &t.rounds)?;
                if first.is_some() {
                    break;
                }
            }
            let Some(d) = first else {
                println!("no difference: nothing to shrink");
                return Ok(true);
            };
            println!("shrinking: {}", d.signature);
            let (small, tries) = shrink::shrink(
                &opts,
                &cfg,
                t.rounds,
                &d.signature,
                Duration::from_secs(seconds),
                attempts,
            );
            let small = Trace {
                config: t.config,
                rounds: small,
            };
            let note = match shrink::replay(&opts, &cfg, &small.rounds)? {
                Some(sd) => report(&sd, None, &cfg),
                None => "(the shrunk trace did not reproduce on its last replay)\n".to_string(),
            };
            let out = trace.with_extension("shrunk");
            let body = trace::write(
                &small,
                &format!("shrunk from {} in {tries} replays\n{note}", trace.display()),
            );
            std::fs::write(&out, &body)?;
            print!("{body}");
            println!("written to {}", out.display());
            Ok(false)
        }
        Cmd::Masks => {
            println!("Masked in replies (mask::MASKS):");
            for m in mask::MASKS {
                println!("- {}: {}. Why: {}.", m.what, m.rule, m.why);
            }
            println!("\nNever sent (mask::AVOIDED):");
            for a in mask::AVOIDED {
                println!("- {}: {}.", a.what, a.why);
            }
            Ok(true)
        }
        Cmd::Configs => {
            println!(
                "(for memcached {}; older than 1.6.24: slab_chunk_max=1024, in bytes)",
                Release::TODAY
            );
            for c in configs(Release::TODAY) {
                println!(
                    "{}: {} {}",
                    c.id,
                    servers::base_args().join(" "),
                    c.args.join(" ")
                );
            }
            Ok(true)
        }
    }
}

struct Fuzz {
    opts: Opts,
    meta_only: bool,
    cfgs: Vec<Config>,
    rounds: usize,
    out: PathBuf,
    shrink: Duration,
}

#[derive(Default)]
struct Totals {
    seeds: u64,
    rounds: u64,
    requests: u64,
    bytes: u64,
    kinds: BTreeMap<String, u64>,
}

impl Fuzz {
    fn run(
        &self,
        seeds: Vec<u64>,
        first: Option<u64>,
        time: Duration,
        keep_going: bool,
    ) -> Result<bool> {
        let start = Instant::now();
        let deadline = start + time;
        let fixed = !seeds.is_empty();
        let first = first.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() % 1_000_000)
                .unwrap_or(1)
        });
        let mut seeds = seeds.into_iter();
        let mut next = first;
        let mut totals = Totals::default();
        // Distinct differences: signature -> (seed, round, trace path).
        let mut found: BTreeMap<String, (u64, usize, PathBuf)> = BTreeMap::new();
        println!(
            "memcrab-difffuzz: memcached {} ({}), memcrab {}; {}",
            self.opts.memcached.display(),
            self.opts.oracle,
            self.opts.memcrab.display(),
            if fixed {
                format!("{} rounds per seed", self.rounds)
            } else {
                format!(
                    "from seed {first} for {}s, {} rounds per seed",
                    time.as_secs(),
                    self.rounds
                )
            }
        );
        loop {
            let seed = if fixed {
                match seeds.next() {
                    Some(s) => s,
                    None => break,
                }
            } else {
                if Instant::now() >= deadline {
                    break;
                }
                next += 1;
                next - 1
            };
            let cfg = &self.cfgs[(seed % self.cfgs.len() as u64) as usize];
            let seed_start = Instant::now();
            let result = self.seed(seed, cfg, (!fixed).then_some(deadline), &mut totals)?;
            totals.seeds += 1;
            match result {
                None => println!(
                    "seed {seed} (config {}): no difference ({:.1}s)",
                    cfg.id,
                    seed_start.elapsed().as_secs_f64()
                ),
                Some((d, path)) => {
                    let new = !found.contains_key(&d.signature);
                    found
                        .entry(d.signature.clone())
                        .or_insert((seed, d.round, path));
                    if !keep_going {
                        break;
                    }
                    if !new {
                        println!("(a difference seen before)");
                    }
                }
            }
        }
        self.summary(&totals, &found, start.elapsed());
        Ok(found.is_empty())
    }

    /// Runs one seed; on a difference reports it, shrinks it and writes traces.
    fn seed(
        &self,
        seed: u64,
        cfg: &Config,
        deadline: Option<Instant>,
        totals: &mut Totals,
    ) -> Result<Option<(Difference, PathBuf)>> {
        let mut session = Session::start(&self.opts, cfg)?;
        let mut gen = Gen::new(
            seed,
            GenConfig {
                item_max: cfg.item_max,
                cas: cfg.cas,
                nconns: self.opts.nconns,
                today: self.opts.oracle.today(),
                meta_only: self.meta_only,
            },
        );
        let mut history = Vec::new();
        for i in 0..self.rounds {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let round = gen.round(&session.view);
            totals.rounds += 1;
            totals.requests += round.requests() as u64;
            for req in round.conns.iter().flat_map(|c| c.segments.iter().flatten()) {
                *totals.kinds.entry(req.kind.clone()).or_default() += 1;
            }
            let diff = session.step(&round, i);
            history.push(round);
            if let Some(d) = diff {
                totals.bytes += session.bytes_sent;
                drop(session);
                return self.found(seed, cfg, d, history).map(Some);
            }
        }
        totals.bytes += session.bytes_sent;
        Ok(None)
    }

    fn found(
        &self,
        seed: u64,
        cfg: &Config,
        d: Difference,
        history: Vec<plan::Round>,
    ) -> Result<(Difference, PathBuf)> {
        let text = report(&d, Some(seed), cfg);
        print!("{text}");
        std::fs::create_dir_all(&self.out)
            .with_context(|| format!("create {}", self.out.display()))?;
        let full = Trace {
            config: cfg.id,
            rounds: history.clone(),
        };
        let full_path = self.out.join(format!("seed-{seed}-full.trace"));
        let full_body = trace::write(&full, &text);
        std::fs::write(&full_path, &full_body)?;
        println!(
            "full trace: {} (memcrab-difffuzz replay <file>)",
            full_path.display()
        );
        // Where no shrunk trace comes, the full one is the repro: print it (a CI
        // log may be all there is).
        let print_full = || {
            for line in full_body.lines().filter(|l| !l.starts_with('#')) {
                println!("  {}", clip(line, 400));
            }
        };
        if self.shrink.is_zero() {
            print_full();
            return Ok((d, full_path));
        }
        println!("shrinking for up to {}s ...", self.shrink.as_secs());
        let (small, tries) = shrink::shrink(&self.opts, cfg, history, &d.signature, self.shrink, 1);
        let small_trace = Trace {
            config: cfg.id,
            rounds: small,
        };
        let again = shrink::replay(&self.opts, cfg, &small_trace.rounds)?;
        let Some(sd) = again.filter(|x| x.signature == d.signature) else {
            println!("(shrinking did not keep the difference; the full trace is the repro)");
            print_full();
            return Ok((d, full_path));
        };
        let stext = report(&sd, Some(seed), cfg);
        let path = self.out.join(format!("seed-{seed}.trace"));
        let body = trace::write(
            &small_trace,
            &format!(
                "shrunk from {} in {tries} replays\n{stext}",
                full_path.display()
            ),
        );
        std::fs::write(&path, &body)?;
        println!(
            "shrunk in {tries} replays to {} rounds, {} requests: {}",
            small_trace.rounds.len(),
            small_trace
                .rounds
                .iter()
                .map(|r| r.requests())
                .sum::<usize>(),
            path.display()
        );
        for line in body.lines().filter(|l| !l.starts_with('#')) {
            println!("  {}", clip(line, 400));
        }
        print!("{stext}");
        Ok((sd, path))
    }

    fn summary(
        &self,
        t: &Totals,
        found: &BTreeMap<String, (u64, usize, PathBuf)>,
        elapsed: Duration,
    ) {
        let mut fam: BTreeMap<&str, u64> = BTreeMap::new();
        for (k, n) in &t.kinds {
            *fam.entry(k.split('.').next().unwrap_or("?")).or_default() += n;
        }
        let fams: Vec<String> = fam.iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!(
            "\nsummary: {} seeds, {} rounds, {} requests ({}; {} kinds), {:.1} MB sent per server, {:.1}s",
            t.seeds,
            t.rounds,
            t.requests,
            fams.join(", "),
            t.kinds.len(),
            t.bytes as f64 / 1e6,
            elapsed.as_secs_f64()
        );
        if found.is_empty() {
            println!("no differences");
        } else {
            println!("{} distinct difference(s):", found.len());
            for (sig, (seed, round, path)) in found {
                println!(
                    "- seed {seed} round {round}: {sig}\n  trace: {}",
                    path.display()
                );
            }
        }
    }
}

/// A trace file read back, with the configuration it was recorded under.
fn load_trace(path: &std::path::Path, oracle: Release) -> Result<(Trace, Config)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let t = trace::parse(&text)?;
    let cfg = configs(oracle)
        .get(t.config)
        .cloned()
        .with_context(|| format!("no configuration {}", t.config))?;
    Ok((t, cfg))
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} more bytes)", &s[..end], s.len() - end)
}

fn show_bytes(b: &[u8]) -> String {
    clip(&trace::quote(b), 1500)
}

/// A difference, for people.
fn report(d: &Difference, seed: Option<u64>, cfg: &Config) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "DIFFERENCE{}: config {} ({}), round {}, connection {} ({}), segment {}",
        seed.map(|x| format!(" seed {x}")).unwrap_or_default(),
        cfg.id,
        cfg.args.join(" "),
        d.round,
        d.conn,
        d.proto.name(),
        d.seg
    );
    let _ = writeln!(s, "  memcached {}", d.memcached.end.describe());
    let _ = writeln!(s, "  memcrab   {}", d.memcrab.end.describe());
    let _ = writeln!(
        s,
        "  the segment's requests ({{cas:N}}: the N-th CAS unique each server returned):"
    );
    for r in &d.requests {
        let _ = writeln!(s, "    {}", clip(&trace::request_text(r), 600));
    }
    let _ = writeln!(s, "  memcached replied: {}", show_bytes(&d.memcached.raw));
    let _ = writeln!(s, "  memcrab replied:   {}", show_bytes(&d.memcrab.raw));
    let (a, b) = first_differing_line(&d.memcached.masked, &d.memcrab.masked);
    let _ = writeln!(s, "  first differing line (masked):");
    let _ = writeln!(
        s,
        "    memcached: {}",
        clip(a.as_deref().unwrap_or("<nothing>"), 300)
    );
    let _ = writeln!(
        s,
        "    memcrab:   {}",
        clip(b.as_deref().unwrap_or("<nothing>"), 300)
    );
    let _ = writeln!(s, "  signature: {}", d.signature);
    s
}
