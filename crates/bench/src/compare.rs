//! `compare`: launch servers from command lines, pinned to the server CPUs, and run
//! the same workload on each in alternating rounds (A B A B ...), so that drift in a
//! noisy machine hits every server alike. Reports per-metric medians, each server's
//! ratio to the first, and with `--floor` each server's CPU per request as a
//! multiple of the do-nothing responder's.
//!
//! Every process it starts is in its own process group and is killed by group on
//! every path: normal end, error, panic, and SIGINT/SIGTERM/SIGHUP.
//!
//! It starts servers itself rather than through memcrab-testkit (which the bench's
//! tests use): a `--server-cmd` is any command line, a shell's or another server's,
//! with a `{port}` to fill in and no port file to read, and it runs pinned, in a
//! process group of its own that signals must reach. Testkit starts a known binary
//! with flags and reads its port file.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;

use crate::load::Target;
use crate::plot;
use crate::run::{self, Knobs, Mode, Report};
use crate::summary::{summarize, Summary};

/// `memcrab-bench compare`.
#[derive(Args, Clone)]
pub struct CompareArgs {
    /// A server command line; `{port}` is replaced by a free port. Repeat for each
    /// server; the first is the baseline for ratios. `NAME=CMD` (NAME of letters,
    /// digits, `_` and `.`) names it in reports; otherwise the program's name does.
    #[arg(long = "server-cmd", required = true)]
    pub server_cmds: Vec<String>,
    /// Also measure the do-nothing responder and report CPU as a multiple of it.
    #[arg(long)]
    pub floor: bool,
    /// With `--floor`, also measure the io_uring floor (`floor --io uring`, named
    /// `floor-uring`); the `x floor` column stays relative to the epoll floor.
    #[arg(long)]
    pub floor_uring: bool,
    /// Rounds per server.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// CPUs the servers are pinned to.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub server_cpus: Vec<usize>,
    /// Draw the comparison: server CPU per request as a multiple of the first
    /// server's and of each floor's, next to p50/p99/p99.9 latency. A path ending in
    /// `.svg` is the picture; any other is a folder that gets `WORKLOAD.svg`. The
    /// figures go beside it as `.tsv`, for `memcrab-bench plot`. Refused when the
    /// servers run different worker counts.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub knobs: Knobs,
}

/// Process groups of the servers running now. Taken by the thread that starts or
/// reaps a server and by the signal thread and panic hook that kill them all; held
/// only to push, remove or walk the list, never while taking another lock.
static CHILDREN: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// The signal thread and panic hook are installed once per process.
static HANDLERS: Once = Once::new();

fn kill_group(pgid: i32) {
    // SAFETY: kill() with a negative pid signals that process group; it touches no
    // memory of ours.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

fn kill_all() {
    if let Ok(list) = CHILDREN.lock() {
        for &pgid in list.iter() {
            kill_group(pgid);
        }
    }
}

/// Kills the servers on SIGINT/SIGTERM/SIGHUP and on panic.
fn install_handlers() {
    HANDLERS.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            kill_all();
            default(info);
        }));
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            std::thread::spawn(move || {
                if signals.forever().next().is_some() {
                    kill_all();
                    std::process::exit(130);
                }
            });
        }
    });
}

/// A server started by `compare`; killed (its whole process group) when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) pid: u32,
    pub(crate) port: u16,
}

impl Server {
    pub(crate) fn start(cmd: &str, cpus: &[usize]) -> anyhow::Result<Server> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let line = cmd.replace("{port}", &port.to_string());
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg(format!("exec {line}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        // SAFETY: the cpu set is built before the fork; the closure runs in the child
        // between fork and exec and only makes the async-signal-safe
        // sched_setaffinity syscall.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &cpu in cpus {
            // SAFETY: CPU_SET writes one bit inside the set on our stack.
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        // SAFETY: see above; pre_exec's closure is async-signal-safe.
        unsafe {
            c.pre_exec(move || {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c
            .spawn()
            .with_context(|| format!("cannot start `{line}`"))?;
        let pid = child.id();
        if let Ok(mut list) = CHILDREN.lock() {
            list.push(pid as i32);
        }
        let mut s = Server { child, pid, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))).is_ok() {
                return Ok(s);
            }
            if let Some(status) = s.child.try_wait()? {
                bail!("`{line}` exited before listening: {status}");
            }
            if Instant::now() > deadline {
                bail!("`{line}` did not listen on port {port} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_group(self.pid as i32);
        let _ = self.child.wait();
        if let Ok(mut list) = CHILDREN.lock() {
            list.retain(|&p| p != self.pid as i32);
        }
    }
}

/// The `threads` line of the server's `stats`: the workers it really runs (a
/// memcrab pinned to one CPU runs one whatever `-t` says; memcached runs `-t`).
fn server_threads(port: u16) -> Option<u32> {
    use std::io::{Read, Write};
    let mut c = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    c.write_all(b"stats\r\n").ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"END\r\n") && !got.ends_with(b"ERROR\r\n") {
        let n = c.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got)
        .lines()
        .find_map(|l| l.strip_prefix("STAT threads ")?.trim().parse().ok())
}

pub fn main(a: CompareArgs) -> anyhow::Result<()> {
    if a.knobs.mode != Mode::Mixed {
        bail!("compare runs the mixed mode only; use `run --mode sets-then-gets` per server");
    }
    install_handlers();
    // Pin this thread first, so every client thread started later inherits it.
    if let Some(&cpu) = a.knobs.client_cpus.first() {
        run::pin_to(cpu);
    }
    let mut cmds: Vec<(String, String)> = a
        .server_cmds
        .iter()
        .map(|c| split_name(c))
        .map(|(name, c)| {
            if name.is_empty() {
                (default_name(&c), c)
            } else {
                (name, c)
            }
        })
        .collect();
    // Name duplicates apart (two memcrab builds, say).
    for i in 0..cmds.len() {
        let dup = cmds.iter().filter(|c| c.0 == cmds[i].0).count() > 1;
        if dup {
            cmds[i].0 = format!("{}#{}", cmds[i].0, i + 1);
        }
    }
    if a.floor {
        let me = std::env::current_exe()?.display().to_string();
        if a.floor_uring {
            cmds.push((
                "floor-uring".into(),
                format!("{me} floor --io uring --port {{port}}"),
            ));
        }
        cmds.push(("floor".into(), format!("{me} floor --port {{port}}")));
    }
    if cmds.len() < 2 && !a.floor {
        bail!("compare needs at least two --server-cmd (or one and --floor)");
    }
    let floors = if a.floor {
        1 + usize::from(a.floor_uring)
    } else {
        0
    };
    let mut results: Vec<Vec<Report>> = cmds.iter().map(|_| Vec::new()).collect();
    let mut threads: Vec<Option<u32>> = vec![None; cmds.len()];
    for round in 0..a.rounds {
        for (i, (name, cmd)) in cmds.iter().enumerate() {
            let server = Server::start(cmd, &a.server_cpus)?;
            if round == 0 {
                threads[i] = server_threads(server.port);
                if a.plot.is_some() && i < cmds.len() - floors {
                    same_workers(&cmds[..=i], &threads[..=i])?;
                }
            }
            let target = Target::Tcp(SocketAddr::from(([127, 0, 0, 1], server.port)));
            let mut reports = run::execute(&[target], &a.knobs, Some(server.pid))?;
            drop(server);
            let r = reports.remove(0);
            eprintln!(
                "round {} {name}: {:.0} req/s, {:.3} CPU-s/Mreq, hit {:.3}, p99 {} us, client CPU {:.0}%",
                round + 1,
                r.throughput(),
                r.server_cpu_s_per_mreq.unwrap_or(0.0),
                r.hit_ratio(),
                r.p[2],
                r.client_cpu_pct
            );
            results[i].push(r);
        }
    }
    let sums: Vec<Summary> = cmds
        .iter()
        .zip(&results)
        .zip(&threads)
        .map(|(((n, _), rs), &t)| summarize(n, t, rs))
        .collect();
    let floor_cpu = a
        .floor
        .then(|| sums.last().map(|s| s.cpu_s_per_mreq))
        .flatten();
    let workload = results[0]
        .first()
        .map(|r| r.workload.clone())
        .unwrap_or_default();
    if a.knobs.json {
        println!("{}", json(&workload, &cmds, &sums, floor_cpu));
    } else {
        print!("{}", table(&workload, &sums, floor_cpu));
    }
    if let Some(path) = &a.plot {
        let data = plot::Comparison::from_summaries(&workload, &sums, floors);
        let svg = plot::comparison_svg(&data)?;
        let svg_path = if path.extension().is_some_and(|e| e == "svg") {
            path.clone()
        } else {
            path.join(format!("{workload}.svg"))
        };
        std::fs::write(&svg_path, svg).with_context(|| format!("--plot {}", svg_path.display()))?;
        let tsv_path = svg_path.with_extension("tsv");
        std::fs::write(&tsv_path, data.to_tsv())
            .with_context(|| format!("--plot {}", tsv_path.display()))?;
    }
    Ok(())
}

/// Stops a `--plot` run early when the servers started so far (not the floors) run
/// different worker counts: the picture would be refused at the end.
fn same_workers(cmds: &[(String, String)], threads: &[Option<u32>]) -> anyhow::Result<()> {
    let known: Vec<(&str, u32)> = cmds
        .iter()
        .zip(threads)
        .filter_map(|((n, _), t)| t.map(|t| (n.as_str(), t)))
        .collect();
    if let Some((n, t)) = known.iter().find(|(_, t)| *t != known[0].1) {
        bail!(
            "--plot: {} runs {} worker(s) and {n} {t}; a picture needs equal worker counts \
             on every side (give every server the same -t, within its CPUs)",
            known[0].0,
            known[0].1
        );
    }
    Ok(())
}

/// A command's program name: `/usr/bin/memcached -p 1` → `memcached`.
/// `NAME=COMMAND` into its name and command; a command with no such prefix has an
/// empty name. A name is letters, digits, `_`, `.` and `-` (`memcrab-uring=...`).
fn split_name(c: &str) -> (String, String) {
    match c.split_once('=') {
        Some((name, cmd))
            if !name.is_empty()
                && !name.starts_with('-')
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')) =>
        {
            (name.to_string(), cmd.to_string())
        }
        _ => (String::new(), c.to_string()),
    }
}

fn default_name(cmd: &str) -> String {
    cmd.split_whitespace()
        .next()
        .and_then(|p| p.rsplit('/').next())
        .unwrap_or("server")
        .to_string()
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

fn table(workload: &str, sums: &[Summary], floor_cpu: Option<f64>) -> String {
    let base = &sums[0];
    let mut s = format!(
        "| {workload} | workers | requests/s | vs {b} | server CPU-s/Mreq | vs {b} | x floor | hit ratio | p50 us | p99 us | p99.9 us | client CPU | errors |\n",
        b = base.name
    );
    s += "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for x in sums {
        let fl = floor_cpu
            .map(|f| format!("{:.2}x", ratio(x.cpu_s_per_mreq, f)))
            .unwrap_or_else(|| "-".into());
        s += &format!(
            "| {} | {} | {:.0} | {:.2}x | {:.3} | {:.2}x | {} | {:.3} | {:.0} | {:.0} | {:.0} | {:.0}% | {} |\n",
            x.name,
            x.threads.map_or_else(|| "-".to_string(), |t| t.to_string()),
            x.rps,
            ratio(x.rps, base.rps),
            x.cpu_s_per_mreq,
            ratio(x.cpu_s_per_mreq, base.cpu_s_per_mreq),
            fl,
            x.hit_ratio,
            x.p50,
            x.p99,
            x.p999,
            x.client_cpu_pct,
            x.errors
        );
    }
    s
}

fn json(
    workload: &str,
    cmds: &[(String, String)],
    sums: &[Summary],
    floor_cpu: Option<f64>,
) -> String {
    let base = &sums[0];
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let servers: Vec<String> = sums
        .iter()
        .zip(cmds)
        .map(|(x, (_, cmd))| {
            let fl = floor_cpu
                .map(|f| format!("{:.4}", ratio(x.cpu_s_per_mreq, f)))
                .unwrap_or_else(|| "null".into());
            format!(
                concat!(
                    "{{\"name\":\"{}\",\"threads\":{},\"cmd\":\"{}\",\"throughput_rps\":{:.1},\"server_cpu_s_per_mreq\":{:.4},",
                    "\"hit_ratio\":{:.6},\"latency_us\":{{\"p50\":{},\"p90\":{},\"p99\":{},\"p999\":{}}},",
                    "\"client_cpu_pct\":{:.1},\"client_cpu_s_per_mreq\":{:.4},\"errors\":{},\"throughput_ratio\":{:.4},\"cpu_ratio\":{:.4},",
                    "\"cpu_floor_multiple\":{}}}"
                ),
                esc(&x.name),
                x.threads.map_or_else(|| "null".to_string(), |t| t.to_string()),
                esc(cmd),
                x.rps,
                x.cpu_s_per_mreq,
                x.hit_ratio,
                x.p50,
                x.p90,
                x.p99,
                x.p999,
                x.client_cpu_pct,
                x.client_cpu_s_per_mreq,
                x.errors,
                ratio(x.rps, base.rps),
                ratio(x.cpu_s_per_mreq, base.cpu_s_per_mreq),
                fl
            )
        })
        .collect();
    format!(
        "{{\"workload\":\"{}\",\"servers\":[{}]}}",
        esc(workload),
        servers.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::split_name;

    #[test]
    fn server_names_may_hold_dashes() {
        let cmd = "memcrab -u nobody -p {port}";
        assert_eq!(
            split_name(&format!("memcrab-uring={cmd}")),
            ("memcrab-uring".to_string(), cmd.to_string())
        );
        assert_eq!(
            split_name(&format!("memcached={cmd}")),
            ("memcached".to_string(), cmd.to_string())
        );
        assert_eq!(split_name(cmd), (String::new(), cmd.to_string()));
        // An option's `=` is not a name.
        let opt = "memcrab -o io=uring";
        assert_eq!(split_name(opt), (String::new(), opt.to_string()));
    }
}
