//! The client tests' harness: start real servers (the memcrab binary, and Debian's
//! memcached as the reference) on ephemeral ports, and kill them on drop.
//!
//! ```text
//!   Server::start(Kind::Memcrab, &[]) ──► memcrab -l 127.0.0.1:0
//!       │  MEMCACHED_PORT_FILENAME=<dir>/port  (written as .lck, renamed once bound)
//!       ▼
//!     poll <dir>/port every 2 ms (10 s deadline) ──► "TCP INET: 40123"
//!       │
//!     drop(Server) ──► SIGKILL, wait, remove <dir>
//! ```
//!
//! Nothing sleeps to wait for a server. Which binaries:
//! - memcrab: `$MEMCRAB_BIN`, else `target/release/memcrab` next to this test's own
//!   target directory (build it first: `cargo build --release -p memcrab-server`).
//! - memcached: `$MEMCRAB_TEST_MEMCACHED`, else `memcached` on `PATH`
//!   (`apt-get install memcached`). Missing memcached fails the test unless
//!   `MEMCRAB_SKIP_MEMCACHED=1`.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use memcrab_client::{Connection, Options, ServerAddr};

/// How long a server may take to bind.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How often startup is polled.
const POLL_INTERVAL: Duration = Duration::from_millis(2);
/// The tests' connect/read/write timeout: long enough for a slow CI machine, short
/// enough that a missing reply fails the test instead of hanging it.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Memcrab,
    Memcached,
}

/// The memcrab binary.
pub fn memcrab_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMCRAB_BIN").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    // This test runs from <target>/<profile>/deps/<name>-<hash>.
    let exe = std::env::current_exe().expect("current_exe");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("test binary under <target>/<profile>/deps");
    let bin = target.join("release").join("memcrab");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build --release -p memcrab-server` \
         (or point MEMCRAB_BIN at a memcrab binary)",
        bin.display()
    );
    bin
}

/// The memcached binary, or `None` when it is absent and skipping is allowed.
pub fn memcached_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MEMCRAB_TEST_MEMCACHED").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("memcached"))
            .find(|p| p.is_file())
    });
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

/// A scratch directory, removed on drop. World-writable: memcached drops to
/// `nobody` before it writes its port file or creates its socket.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "memcrab-client-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create temp dir");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o777)).expect("chmod temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A running server, killed on drop.
pub struct Server {
    pub kind: Kind,
    pub addr: ServerAddr,
    child: Child,
    dir: TempDir,
}

impl Server {
    /// Starts a server on an ephemeral TCP port on 127.0.0.1. `None` only for
    /// memcached when it is absent and `MEMCRAB_SKIP_MEMCACHED` is set.
    pub fn start(kind: Kind, args: &[&str]) -> Option<Server> {
        let dir = TempDir::new("srv");
        let port_file = dir.0.join("port");
        let mut full = vec!["-l", "127.0.0.1:0"];
        full.extend_from_slice(args);
        let mut child = spawn(kind, &dir.0, &full, Some(&port_file))?;
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let port = loop {
            if let Ok(text) = fs::read_to_string(&port_file) {
                break parse_port_file(&text);
            }
            check_startup(&mut child, &dir.0, deadline, "write its port file");
            thread::sleep(POLL_INTERVAL);
        };
        Some(Server {
            kind,
            addr: ServerAddr::tcp("127.0.0.1", port),
            child,
            dir,
        })
    }

    /// Starts a server on a unix socket.
    pub fn start_unix(kind: Kind, args: &[&str]) -> Option<Server> {
        let dir = TempDir::new("srv");
        let sock = dir.0.join("sock");
        let sock_text = sock.to_str().expect("utf-8 temp path").to_string();
        let mut full = vec!["-s", sock_text.as_str()];
        full.extend_from_slice(args);
        let mut child = spawn(kind, &dir.0, &full, None)?;
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while UnixStream::connect(&sock).is_err() {
            check_startup(&mut child, &dir.0, deadline, "accept on its unix socket");
            thread::sleep(POLL_INTERVAL);
        }
        Some(Server {
            kind,
            addr: ServerAddr::Unix(sock),
            child,
            dir,
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
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn test_options() -> Options {
    Options::default().with_timeout(Some(TEST_TIMEOUT))
}

fn spawn(kind: Kind, dir: &Path, args: &[&str], port_file: Option<&Path>) -> Option<Child> {
    let mut cmd = match kind {
        Kind::Memcrab => {
            let mut c = Command::new(memcrab_bin());
            // As memcached, memcrab refuses root without -u and ignores it otherwise.
            c.args(["-u", "root"]);
            c
        }
        Kind::Memcached => {
            let mut c = Command::new(memcached_bin()?);
            // Needed when running as root, ignored otherwise; no UDP.
            c.args(["-u", "nobody", "-U", "0"]);
            c
        }
    };
    cmd.args(args);
    cmd.env_remove("MEMCACHED_PORT_FILENAME");
    if let Some(f) = port_file {
        cmd.env("MEMCACHED_PORT_FILENAME", f);
    }
    let stderr = fs::File::create(dir.join("stderr")).expect("create stderr file");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
    Some(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("spawn {kind:?} {args:?}: {e}")),
    )
}

fn check_startup(child: &mut Child, dir: &Path, deadline: Instant, what: &str) {
    if let Some(status) = child.try_wait().expect("try_wait") {
        let err = fs::read_to_string(dir.join("stderr")).unwrap_or_default();
        panic!("server exited ({status}) before it could {what}; stderr: {err}");
    }
    if Instant::now() >= deadline {
        let _ = child.kill();
        let _ = child.wait();
        panic!("server did not {what} within {STARTUP_TIMEOUT:?}");
    }
}

fn parse_port_file(text: &str) -> u16 {
    text.lines()
        .find_map(|l| l.strip_prefix("TCP INET: "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `TCP INET: <port>` line in port file: {text:?}"))
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
