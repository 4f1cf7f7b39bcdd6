//! Starting the two servers: the same flags, each on a free loopback port.
//!
//! memcrab-testkit starts them (a normal dependency here, since the fuzzer's
//! binary starts servers at run time and is a dev tool, never published): each
//! gets `-l 127.0.0.1:0` and `MEMCACHED_PORT_FILENAME`, and the port is read from
//! the file it writes once bound (memcached's own mechanism, which memcrab
//! implements too): no port is guessed, so none can be taken first. The file is
//! polled every 2 ms; that is the only wait, and it is for process startup, not for
//! replies. As root both get `-u root` (memcached refuses root without `-u`; a
//! switch to the same user keeps the parent-death signal that kills a server whose
//! fuzzer died).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use memcrab_testkit::{Launch, Listen, User};

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

/// The oracle's release, as `memcached -V` prints it (`memcached 1.6.45`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release(pub u32, pub u32, pub u32);

impl Release {
    /// The release memcrab implements: what changed after 1.6.18 is sent only to an
    /// oracle this new (see `mask::AVOIDED`).
    pub const TODAY: Release = Release(1, 6, 45);

    /// Runs `bin -V`.
    pub fn of(bin: &Path) -> Result<Release> {
        let out = std::process::Command::new(bin)
            .arg("-V")
            .output()
            .with_context(|| format!("run {} -V", bin.display()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text
            .split_whitespace()
            .nth(1)
            .with_context(|| format!("{} -V printed {text:?}", bin.display()))?;
        let n: Vec<u32> = version
            .split(|c: char| !c.is_ascii_digit())
            .take(3)
            .map(|p| p.parse().unwrap_or(0))
            .collect();
        match n[..] {
            [a, b, c] => Ok(Release(a, b, c)),
            _ => bail!("{}: no release in {text:?}", bin.display()),
        }
    }

    /// Whether the oracle answers as memcrab's release does.
    pub fn today(self) -> bool {
        self >= Release::TODAY
    }

    /// memcached 1.6.24 reads `-o slab_chunk_max` in kilobytes (before: bytes).
    fn chunk_max_in_kb(self) -> bool {
        self >= Release(1, 6, 24)
    }
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
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
/// `mask::AVOIDED`). The small `-I` needs a slab_chunk_max no larger, which the
/// oracle's release reads in bytes or kilobytes.
pub fn configs(oracle: Release) -> Vec<Config> {
    let chunk_max = if oracle.chunk_max_in_kb() {
        "slab_chunk_max=1,no_lru_crawler,no_lru_maintainer"
    } else {
        "slab_chunk_max=1024,no_lru_crawler,no_lru_maintainer"
    };
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
                "-t", "1", "-m", "64", "-I", "1k", "-o", chunk_max, "-C", "-R", "3",
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
    if memcrab_testkit::is_root() {
        v.extend(["-u".to_string(), "root".to_string()]);
    }
    v
}

const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// A running server, killed on drop (testkit's, which also removes its scratch dir).
pub struct Server {
    pub addr: SocketAddr,
    _process: memcrab_testkit::Server,
}

impl Server {
    /// Starts `bin` with [`base_args`] and the configuration's flags, and reads
    /// its port. The kernel kills it if the fuzzer dies.
    pub fn start(bin: &Path, cfg: &Config, tag: &str) -> Result<Server> {
        let process = Launch::new(bin)
            .listen(Listen::AsGiven)
            .user(User::Never)
            .args(base_args())
            .args(cfg.args.iter().map(|a| {
                // memcrab reads slab_chunk_max in kilobytes, as memcached 1.6.24+,
                // whatever the oracle's release.
                match memcrab_testkit::is_memcached(bin) {
                    true => a.clone(),
                    false => a.replace("slab_chunk_max=1024,", "slab_chunk_max=1,"),
                }
            }))
            .die_with_parent()
            .startup_timeout(STARTUP_TIMEOUT)
            .tag(&format!("difffuzz-{tag}"))
            .start()?;
        let addr = process
            .tcp
            .with_context(|| format!("{}: no TCP port in its port file", bin.display()))?;
        Ok(Server {
            addr,
            _process: process,
        })
    }
}
