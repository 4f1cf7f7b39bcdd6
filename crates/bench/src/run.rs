//! `run`: drive servers with a workload and report what was measured.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;

use crate::load::{self, Target};
use crate::workload::{self, KeyDist, ValueSize, Workload};

/// `memcrab-bench run`.
#[derive(Args, Clone)]
pub struct RunArgs {
    /// Server address (host:port, or a unix socket path); repeat for several
    /// (connections are spread over them).
    #[arg(long = "server", required = true)]
    pub servers: Vec<String>,
    /// The server's pid, to report its CPU-seconds per million requests.
    #[arg(long)]
    pub server_pid: Option<u32>,
    #[command(flatten)]
    pub knobs: Knobs,
}

/// The workload and how to drive it; shared by `run` and `compare`.
#[derive(Args, Clone)]
pub struct Knobs {
    /// A standard workload (W1..W5); the flags below override its values.
    #[arg(long, default_value = "W1")]
    pub workload: String,
    /// Share of requests that are gets (0..1); the rest are sets.
    #[arg(long)]
    pub get_ratio: Option<f64>,
    /// Size of the key space.
    #[arg(long)]
    pub keys: Option<u64>,
    /// uniform, zipf:THETA or sequential.
    #[arg(long)]
    pub key_dist: Option<KeyDist>,
    /// Key length in bytes ("key:" and a zero-padded number).
    #[arg(long)]
    pub key_size: Option<usize>,
    /// Value size in bytes, fixed (100) or a uniform range (100-300).
    #[arg(long)]
    pub value_size: Option<ValueSize>,
    /// Keys per get.
    #[arg(long)]
    pub multiget: Option<usize>,
    /// Requests in flight per connection.
    #[arg(long)]
    pub pipeline: Option<usize>,
    /// Connections in all.
    #[arg(long)]
    pub conns: Option<usize>,
    /// Client threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Measured window (e.g. 10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Stop after this many measured requests instead of after --duration.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Unmeasured time before the window.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Open loop at this many requests per second in all (default: closed loop).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Store every key once before the run.
    #[arg(long)]
    pub preload: bool,
    /// CPUs to pin the client threads to, e.g. 1 or 2,3.
    #[arg(long, value_delimiter = ',')]
    pub client_cpus: Vec<usize>,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// `mixed` (the workload's get/set mix) or `sets-then-gets`: the classic memcached
    /// benchmark, N sets then N gets of the same keys (N = --requests, default
    /// --keys), each phase timed on its own.
    #[arg(long, default_value = "mixed")]
    pub mode: Mode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Mixed,
    SetsThenGets,
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.parse().map_err(|_| format!("bad duration \"{s}\""))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("bad duration \"{s}\""));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

fn resolve(a: &Knobs) -> anyhow::Result<Workload> {
    let mut w = workload::named(&a.workload)
        .with_context(|| format!("unknown workload \"{}\" (W1..W5)", a.workload))?;
    if let Some(v) = a.get_ratio {
        if !(0.0..=1.0).contains(&v) {
            bail!("--get-ratio must be within 0..1");
        }
        w.get_ratio = v;
    }
    if let Some(v) = a.keys {
        w.keys = v.max(1);
    }
    if let Some(v) = a.key_dist {
        w.key_dist = v;
    }
    if let Some(v) = a.key_size {
        w.key_size = v.clamp(5, 250);
    }
    if let Some(v) = a.value_size {
        w.value_size = v;
    }
    if let Some(v) = a.multiget {
        w.multiget = v.max(1);
    }
    if let Some(v) = a.pipeline {
        w.pipeline = v.max(1);
    }
    if let Some(v) = a.conns {
        w.conns = v.max(1);
    }
    Ok(w)
}

/// CPU seconds a process has used (utime + stime from /proc/PID/stat).
pub fn proc_cpu_secs(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("--server-pid {pid}"))?;
    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((ticks(11) + ticks(12)) / hz.max(1.0))
}

/// This process's CPU seconds (user + system, all threads).
fn self_cpu_secs() -> f64 {
    // SAFETY: getrusage writes only into the zeroed struct on our stack.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub fn pin_to(cpu: usize) {
    // SAFETY: the cpu_set_t is zeroed and filled on our stack; sched_setaffinity(0, ..)
    // applies to the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

pub struct Report {
    pub workload: String,
    pub w: Workload,
    pub threads: usize,
    pub requests: u64,
    pub window_s: f64,
    pub hits: u64,
    pub keys_requested: u64,
    pub gets: u64,
    pub sets: u64,
    pub errors: load::Errors,
    pub p: [u64; 5],
    pub client_cpu_pct: f64,
    /// The load generator's own CPU-seconds per million requests in the window.
    pub client_cpu_s_per_mreq: f64,
    pub server_cpu_s_per_mreq: Option<f64>,
}

/// Parses `--server` values.
pub fn targets(servers: &[String]) -> anyhow::Result<Vec<Target>> {
    servers.iter().map(|s| Target::parse(s)).collect()
}

/// Runs the knobs' workload against `targets`; `sets-then-gets` returns two reports.
pub fn execute(
    targets: &[Target],
    a: &Knobs,
    server_pid: Option<u32>,
) -> anyhow::Result<Vec<Report>> {
    let w = resolve(a)?;
    match a.mode {
        Mode::Mixed => Ok(vec![measure(targets, a, &w, server_pid, a.preload)?]),
        Mode::SetsThenGets => {
            let n = a.requests.unwrap_or(w.keys);
            let phase = |label: &str, get_ratio: f64| {
                Workload {
                    get_ratio,
                    keys: n,
                    key_dist: KeyDist::Sequential,
                    ..w.clone()
                }
                .labelled(label)
            };
            let sets = phase("sets", 0.0);
            let gets = phase("gets", 1.0);
            let mut k = a.clone();
            k.requests = Some(n);
            k.duration = Duration::from_secs(24 * 3600);
            k.warmup = Duration::ZERO;
            Ok(vec![
                measure(targets, &k, &sets, server_pid, false)?,
                measure(targets, &k, &gets, server_pid, false)?,
            ])
        }
    }
}

fn measure(
    targets: &[Target],
    a: &Knobs,
    w: &Workload,
    server_pid: Option<u32>,
    preload: bool,
) -> anyhow::Result<Report> {
    let w = w.clone();
    let threads = a.threads.clamp(1, w.conns);
    if preload {
        let per = w.keys.div_ceil(threads as u64);
        std::thread::scope(|s| -> anyhow::Result<()> {
            let hs: Vec<_> = (0..threads as u64)
                .map(|t| {
                    let (w, target) = (&w, &targets[t as usize % targets.len()]);
                    let first = t * per;
                    let count = per.min(w.keys.saturating_sub(first));
                    s.spawn(move || load::preload(target, w, first, count, t))
                })
                .collect();
            for h in hs {
                h.join()
                    .map_err(|_| anyhow::anyhow!("preload thread panicked"))??;
            }
            Ok(())
        })?;
    }
    // The monitor samples CPU when the window opens, then shows progress once a
    // second (a live line on a terminal, plain lines otherwise) until told to stop.
    // Relaxed, both: a display counter and a stop flag; the monitor's figures come
    // back through `join`, which orders them.
    let progress = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start_at = Instant::now() + a.warmup;
    let monitor = {
        let (progress, stop) = (Arc::clone(&progress), Arc::clone(&stop));
        std::thread::spawn(move || -> anyhow::Result<(f64, Option<f64>)> {
            std::thread::sleep(start_at.saturating_duration_since(Instant::now()));
            let self_before = self_cpu_secs();
            let server_before = server_pid.map(proc_cpu_secs).transpose()?;
            // SAFETY: isatty only inspects file descriptor 2.
            let tty = unsafe { libc::isatty(2) } == 1;
            let mut last = (Instant::now(), progress.load(Ordering::Relaxed));
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let now = Instant::now();
                if now.duration_since(last.0) < Duration::from_secs(1) {
                    continue;
                }
                let done = progress.load(Ordering::Relaxed);
                let rate = (done - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
                let secs = now.duration_since(start_at).as_secs_f64();
                if tty {
                    eprint!("\r\x1b[2K[{secs:5.1}s] {rate:>10.0} ops/s  {done} requests");
                } else {
                    eprintln!("[{secs:5.1}s] {rate:.0} ops/s, {done} requests");
                }
                last = (now, done);
            }
            if tty {
                eprint!("\r\x1b[2K");
            }
            Ok((self_before, server_before))
        })
    };
    let mut handles = Vec::new();
    let base = w.conns / threads;
    let mut first = 0;
    for t in 0..threads {
        let n = base + usize::from(t < w.conns % threads);
        // Requests split over threads in proportion to their connections; the
        // cumulative form makes the shares add up to exactly --requests.
        let conns_total = w.conns as u64;
        let share = a
            .requests
            .map(|r| r * (first + n) as u64 / conns_total - r * first as u64 / conns_total);
        let rate = a.rate.map(|r| r * n as f64 / w.conns as f64);
        let plan = load::Plan {
            targets: targets.to_vec(),
            workload: w.clone(),
            conns: n,
            first_conn: first,
            rate,
            warmup: a.warmup,
            duration: a.duration,
            progress: Arc::clone(&progress),
            requests: share,
            first_request: a.requests.map_or(0, |r| r * first as u64 / w.conns as u64),
            seed: a.seed.wrapping_add(t as u64 * 1_000_003),
        };
        first += n;
        let cpu = (!a.client_cpus.is_empty()).then(|| a.client_cpus[t % a.client_cpus.len()]);
        handles.push(std::thread::spawn(move || {
            if let Some(cpu) = cpu {
                pin_to(cpu);
            }
            load::run(plan)
        }));
    }
    let mut outs = Vec::new();
    for h in handles {
        outs.push(
            h.join()
                .map_err(|_| anyhow::anyhow!("client thread panicked"))??,
        );
    }
    let window_end = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let (self_before, server_before) = monitor
        .join()
        .map_err(|_| anyhow::anyhow!("monitor panicked"))??;
    let server_cpu = match (server_before, server_pid) {
        (Some(before), Some(pid)) => Some(proc_cpu_secs(pid)? - before),
        _ => None,
    };
    let client_cpu = self_cpu_secs() - self_before;
    let window_wall = window_end
        .saturating_duration_since(start_at)
        .as_secs_f64()
        .max(1e-9);
    let client_cpu_pct = client_cpu / (window_wall * threads as f64) * 100.0;

    let mut hist = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut errors = load::Errors::default();
    let (mut requests, mut hits, mut keys_requested, mut gets, mut sets) = (0, 0, 0, 0, 0);
    let mut window_s: f64 = 0.0;
    for o in &outs {
        hist.add(&o.latency_us)?;
        errors.add(&o.errors);
        requests += o.requests;
        hits += o.hits;
        keys_requested += o.keys_requested;
        gets += o.gets;
        sets += o.sets;
        window_s = window_s.max(o.window.as_secs_f64());
    }
    let q = |p: f64| hist.value_at_quantile(p);
    Ok(Report {
        workload: w
            .label
            .clone()
            .unwrap_or_else(|| a.workload.to_ascii_uppercase()),
        w,
        threads,
        requests,
        window_s,
        hits,
        keys_requested,
        gets,
        sets,
        errors,
        p: [q(0.5), q(0.9), q(0.99), q(0.999), hist.max()],
        client_cpu_pct,
        client_cpu_s_per_mreq: if requests > 0 {
            client_cpu / requests as f64 * 1e6
        } else {
            0.0
        },
        server_cpu_s_per_mreq: server_cpu.map(|c| {
            if requests > 0 {
                c / requests as f64 * 1e6
            } else {
                0.0
            }
        }),
    })
}

impl Report {
    pub fn throughput(&self) -> f64 {
        if self.window_s > 0.0 {
            self.requests as f64 / self.window_s
        } else {
            0.0
        }
    }

    pub fn hit_ratio(&self) -> f64 {
        if self.keys_requested > 0 {
            self.hits as f64 / self.keys_requested as f64
        } else {
            0.0
        }
    }

    pub fn json(&self) -> String {
        let e = &self.errors;
        let server = self
            .server_cpu_s_per_mreq
            .map(|v| format!("{v:.4}"))
            .unwrap_or_else(|| "null".into());
        format!(
            concat!(
                "{{\"workload\":\"{}\",\"requests\":{},\"gets\":{},\"sets\":{},\"window_s\":{:.3},",
                "\"throughput_rps\":{:.1},\"hit_ratio\":{:.6},\"keys_requested\":{},\"hits\":{},",
                "\"errors\":{},\"errors_by_kind\":{{\"server_error\":{},\"client_error\":{},\"error\":{},",
                "\"unexpected\":{},\"disconnects\":{}}},",
                "\"latency_us\":{{\"p50\":{},\"p90\":{},\"p99\":{},\"p999\":{},\"max\":{}}},",
                "\"client_threads\":{},\"client_cpu_pct\":{:.1},\"client_cpu_s_per_mreq\":{:.4},\"server_cpu_s_per_mreq\":{},",
                "\"pipeline\":{},\"multiget\":{},\"conns\":{}}}"
            ),
            self.workload,
            self.requests,
            self.gets,
            self.sets,
            self.window_s,
            self.throughput(),
            self.hit_ratio(),
            self.keys_requested,
            self.hits,
            e.total(),
            e.server_error,
            e.client_error,
            e.error,
            e.unexpected,
            e.disconnects,
            self.p[0],
            self.p[1],
            self.p[2],
            self.p[3],
            self.p[4],
            self.threads,
            self.client_cpu_pct,
            self.client_cpu_s_per_mreq,
            server,
            self.w.pipeline,
            self.w.multiget,
            self.w.conns,
        )
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        let w = &self.w;
        s += &format!(
            "workload {}: get ratio {:.2}, {} keys {:?}, values {}-{} B, multiget {}, pipeline {}, {} conns, {} client threads\n",
            self.workload, w.get_ratio, w.keys, w.key_dist, w.value_size.min, w.value_size.max, w.multiget, w.pipeline, w.conns, self.threads
        );
        s += &format!(
            "requests      {} in {:.2} s ({} gets, {} sets)\n",
            self.requests, self.window_s, self.gets, self.sets
        );
        s += &format!("throughput    {:.0} req/s\n", self.throughput());
        s += &format!("hit ratio     {:.4}\n", self.hit_ratio());
        s += &format!("errors        {}\n", self.errors.total());
        s += &format!(
            "latency (us)  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}\n",
            self.p[0], self.p[1], self.p[2], self.p[3], self.p[4]
        );
        s += &format!(
            "client CPU    {:.1}% of {} core(s)\n",
            self.client_cpu_pct, self.threads
        );
        if let Some(v) = self.server_cpu_s_per_mreq {
            s += &format!("server CPU    {v:.3} CPU-s per million requests\n");
        }
        s
    }
}
