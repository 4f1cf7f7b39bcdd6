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

use anyhow::{Context, Result};
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
            .args(&cfg.args)
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
