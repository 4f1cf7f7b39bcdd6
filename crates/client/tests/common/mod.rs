//! The client tests' harness: start real servers (the memcrab binary, and Debian's
//! memcached as the reference) on ephemeral ports with memcrab-testkit, and kill
//! them on drop.
//!
//! ```text
//!   Server::start(Kind::Memcrab, &[]) ──► testkit: memcrab -u root -l 127.0.0.1:0
//!       │  port read from MEMCACHED_PORT_FILENAME (testkit's crate docs)
//!       ▼
//!     Server { addr: ServerAddr::tcp("127.0.0.1", port) } ──► Connection
//! ```
//!
//! Nothing sleeps to wait for a server. Which binaries:
//! - memcrab: `$MEMCRAB_BIN`, else `target/release/memcrab` next to this test's own
//!   target directory (build it first: `cargo build --release -p memcrab-server`).
//! - memcached: `$MEMCRAB_TEST_MEMCACHED`, else `memcached` on `PATH`
//!   (`apt-get install memcached`); it also gets `-U 0`. Missing memcached fails
//!   the test unless `MEMCRAB_SKIP_MEMCACHED=1`.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use memcrab_client::{Connection, Options, ServerAddr};
use memcrab_testkit::{Launch, Listen, Scratch};

/// The tests' connect/read/write timeout: long enough for a slow CI machine, short
/// enough that a missing reply fails the test instead of hanging it.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Memcrab,
    Memcached,
}

/// The memcached binary, or `None` when it is absent and skipping is allowed.
pub fn memcached_bin() -> Option<PathBuf> {
    let found = memcrab_testkit::memcached_bin();
    if found.is_none() {
        assert!(
            std::env::var_os("MEMCRAB_SKIP_MEMCACHED").is_some(),
            "memcached is not installed (apt-get install memcached); \
             set MEMCRAB_SKIP_MEMCACHED=1 to skip the tests against it"
        );
        eprintln!("SKIPPED: memcached not installed and MEMCRAB_SKIP_MEMCACHED is set");
    }
    found
}

/// A scratch directory for a test's own files, removed on drop.
pub struct TempDir(pub PathBuf, Scratch);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let dir = Scratch::new(&format!("client-{tag}")).expect("create temp dir");
        TempDir(dir.path().to_path_buf(), dir)
    }
}

/// A running server, killed on drop.
pub struct Server {
    pub kind: Kind,
    pub addr: ServerAddr,
    process: memcrab_testkit::Server,
}

impl Server {
    /// Starts a server on an ephemeral TCP port on 127.0.0.1. `None` only for
    /// memcached when it is absent and `MEMCRAB_SKIP_MEMCACHED` is set.
    pub fn start(kind: Kind, args: &[&str]) -> Option<Server> {
        let process = launch(kind, args)?
            .start()
            .unwrap_or_else(|e| panic!("{e}"));
        Some(Server {
            kind,
            addr: ServerAddr::tcp("127.0.0.1", process.port()),
            process,
        })
    }

    /// Starts a server on a unix socket.
    pub fn start_unix(kind: Kind, args: &[&str]) -> Option<Server> {
        let process = launch(kind, args)?
            .listen(Listen::Unix)
            .start()
            .unwrap_or_else(|e| panic!("{e}"));
        let sock = process.unix.clone().expect("a unix socket");
        Some(Server {
            kind,
            addr: ServerAddr::Unix(sock),
            process,
        })
    }

    /// The address as text, for `Connection::connect`.
    pub fn addr_text(&self) -> String {
        match &self.addr {
            ServerAddr::Tcp { host, port } => format!("{host}:{port}"),
            ServerAddr::Unix(p) => p.display().to_string(),
        }
    }

    pub fn port(&self) -> u16 {
        match &self.addr {
            ServerAddr::Tcp { port, .. } => *port,
            ServerAddr::Unix(_) => panic!("not a TCP server"),
        }
    }

    /// A new connection with the tests' timeouts.
    pub fn connect(&self) -> Connection {
        Connection::open(&self.addr, &test_options()).expect("connect to the test server")
    }

    /// Kills the server now.
    pub fn kill(&mut self) {
        self.process.kill();
    }
}

pub fn test_options() -> Options {
    Options::default().with_timeout(Some(TEST_TIMEOUT))
}

/// memcrab with `-u root`, or memcached with `-u nobody -U 0` (no UDP); testkit
/// picks the `-u`, which each needs as root and ignores otherwise.
fn launch(kind: Kind, args: &[&str]) -> Option<Launch> {
    let launch = match kind {
        Kind::Memcrab => Launch::new(memcrab_testkit::memcrab_bin()),
        Kind::Memcached => Launch::new(memcached_bin()?).args(["-U", "0"]),
    };
    Some(launch.tag("client-srv").args(args.iter().copied()))
}

/// Runs the same test body against memcrab and against memcached, as two tests.
#[macro_export]
macro_rules! both {
    ($($(#[$meta:meta])* fn $name:ident($srv:ident: &Server) $body:block)*) => {
        $(
            $(#[$meta])*
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                fn run($srv: &Server) $body

                #[test]
                fn memcrab() {
                    let srv = Server::start(Kind::Memcrab, &[]).expect("memcrab starts");
                    run(&srv);
                }

                #[test]
                fn memcached() {
                    if let Some(srv) = Server::start(Kind::Memcached, &[]) {
                        run(&srv);
                    }
                }
            }
        )*
    };
}
