//! Starting the two servers: the same flags, each on a free loopback port.
//!
//! A server is started with `-l 127.0.0.1:0` and `MEMCACHED_PORT_FILENAME`, and the
//! port is read from the file it writes once bound (memcached's own mechanism,
//! which memcrab implements too): no port is guessed, so none can be taken first.
//! The file is polled every 2 ms; that is the only wait, and it is for process
//! startup, not for replies. As root both get `-u root` (memcached refuses root
//! without `-u`; a switch to the same user keeps the parent-death signal that kills
//! a server whose fuzzer died).

use std::fs;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A server configuration both servers run with.
#[derive(Clone, Debug)]
pub struct Config {
    pub id: usize,
    pub args: Vec<String>,
    /// `-I` in bytes.
    pub item_max: usize,
    /// CAS on (no `-C`).
    pub cas: bool,
}

/// The configurations, by id: the default `-I` with memory to spare (values up to
/// 1 MB on a dozen keys would make either server evict at `-m 64`: memcached gives
/// every slab class in use a page of its own), and a small `-I` without CAS and a
/// small `-R` (more "too large" values, yields mid-pipeline).
///
/// Both turn off memcached's LRU maintainer and crawler threads (memcrab accepts
/// and ignores the options): they take item references at random moments, and
/// memcached rewrites an incremented number in place (padding it with spaces,
/// keeping the item's flags) only while nobody else holds the item, so with them
/// running `decr` answers the same but leaves `"9 "` or `"9"` at random (see
/// `mask::AVOIDED`).
pub fn configs() -> Vec<Config> {
    let c = |id, args: &[&str], item_max| Config {
        id,
        args: args.iter().map(|s| s.to_string()).collect(),
        item_max,
        cas: !args.contains(&"-C"),
    };
    vec![
        c(
            0,
            &[
                "-t",
                "1",
                "-m",
                "1024",
                "-I",
                "1m",
                "-o",
                "no_lru_crawler,no_lru_maintainer",
            ],
            1024 * 1024,
        ),
        c(
            1,
            &[
                "-t",
                "1",
                "-m",
                "64",
                "-I",
                "1k",
                "-o",
                "slab_chunk_max=1024,no_lru_crawler,no_lru_maintainer",
                "-C",
                "-R",
                "3",
            ],
            1024,
        ),
    ]
}

/// The flags a server gets besides the configuration's.
pub fn base_args() -> Vec<String> {
    let mut v: Vec<String> = ["-l", "127.0.0.1:0", "-U", "0"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if is_root() {
        v.extend(["-u".to_string(), "root".to_string()]);
    }
    v
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
const POLL_INTERVAL: Duration = Duration::from_millis(2);

/// A running server, killed on drop.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    dir: PathBuf,
}

impl Server {
    pub fn start(bin: &Path, cfg: &Config, tag: &str) -> Result<Server> {
        let dir = scratch_dir(tag)?;
        let port_file = dir.join("port");
        let log = fs::File::create(dir.join("stderr")).context("create the server's log")?;
        let mut cmd = Command::new(bin);
        cmd.args(base_args())
            .args(&cfg.args)
            .env("MEMCACHED_PORT_FILENAME", &port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        // SAFETY: the closure runs in the child between fork and exec and only
        // calls prctl, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            dir,
        };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            // The server writes `<file>.lck` and renames it: a file that exists is whole.
            if let Ok(text) = fs::read_to_string(&port_file) {
                let port = text
                    .lines()
                    .find_map(|l| l.strip_prefix("TCP INET: "))
                    .and_then(|p| p.trim().parse::<u16>().ok())
                    .with_context(|| format!("{}: no TCP port in {text:?}", bin.display()))?;
                server.addr.set_port(port);
                return Ok(server);
            }
            if let Some(status) = server.child.try_wait()? {
                let log = fs::read_to_string(server.dir.join("stderr")).unwrap_or_default();
                bail!("{} exited at startup ({status}): {log}", bin.display());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} did not write its port file in {STARTUP_TIMEOUT:?}",
                    bin.display()
                );
            }
            thread::sleep(POLL_INTERVAL);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn scratch_dir(tag: &str) -> Result<PathBuf> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // Relaxed: the counter only hands out distinct numbers.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "memcrab-difffuzz-{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&path);
    fs::create_dir_all(&path).with_context(|| format!("create {}", path.display()))?;
    Ok(path)
}
