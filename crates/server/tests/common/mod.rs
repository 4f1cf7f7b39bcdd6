//! The integration tests' harness: start the real `memcrab` binary (with
//! memcrab-testkit), talk to it over TCP or a unix socket, and assert exact reply
//! bytes.
//!
//! ```text
//!   test ── Server::tcp(&["-m", "8"]) ──► testkit: memcrab -l 127.0.0.1:0 -m 8
//!             │  port read from MEMCACHED_PORT_FILENAME (testkit's crate docs)
//!             ▼
//!           Client ── send(b"get k\r\n") / expect(b"END\r\n") ──► exact bytes or panic
//!             │
//!           drop(Server) ──► SIGKILL if still running, wait, remove <dir>
//! ```
//!
//! Files: `mod.rs` (this file: which binary, `Server`, `run_cli`, scratch dirs)
//! and `client.rs` below it (`Stream`, `Client` with its exact-reply assertions,
//! `REPLY_TIMEOUT`, the sync marker, request builders, `tcp_queues`, `Rng`); tests
//! name both through `common::`.
//!
//! Nothing here sleeps to wait for the server: startup is the port file (memcached's
//! own mechanism, so the same harness can start memcached) or, for a unix socket, the
//! first successful connect. Every read has a deadline, so a missing reply fails the
//! test instead of hanging it.
//!
//! `MEMCRAB_TEST_SERVER=/usr/bin/memcached cargo test --test commands` runs the same
//! assertions against memcached itself (adding `-u nobody`; memcrab gets `-u root`
//! when run as root), which is how the expected bytes were checked. `scripts/test`
//! does this for the protocol suites (commands, meta, binary, udp, auth) and
//! reliability.rs (which gates memcrab's own promises); server.rs
//! and memory.rs test memcrab's own command line and memory bound and are not
//! expected to pass against memcached.
//!
//! `MEMCRAB_IO=epoll` (or `uring`) in the environment picks memcrab's transport for
//! every server a suite starts (the server reads it as the default of `-o io=`);
//! `scripts/test` runs the suites once more on the transport that is not the
//! default.

#![allow(dead_code)]

mod client;

use std::fs;
use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use memcrab_testkit::{Launch, Listen, Scratch, POLL_INTERVAL};

pub use client::*;
/// Polls a condition every 2 ms until it holds (testkit's; the suites call it from here).
#[allow(unused_imports)]
pub use memcrab_testkit::wait_until;

/// The binary under test: memcrab, or `MEMCRAB_TEST_SERVER` when set.
pub fn server_binary() -> PathBuf {
    std::env::var_os("MEMCRAB_TEST_SERVER")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_memcrab")))
}

/// Whether the tests are pointed at real memcached (see the module docs).
pub fn against_memcached() -> bool {
    memcrab_testkit::is_memcached(&server_binary())
}

/// Sends a key dump request (`lru_crawler metadump|mgdump ...`) and returns its
/// first line as read up to its `\n` (`OK\r`, say). memcached answers `BUSY` while a
/// crawl of its own runs (one starts soon after the server, and its LRU maintainer
/// starts others): then the request is sent again once `lru_crawler_running` is 0.
/// memcrab never answers `BUSY`.
pub fn start_dump(c: &mut Client, req: &[u8]) -> Vec<u8> {
    loop {
        c.send(req);
        let first = c.read_line_lf();
        if !(first.starts_with(b"BUSY") && against_memcached()) {
            return first;
        }
        wait_until("memcached's crawl to end", REPLY_TIMEOUT, || {
            c.stat("lru_crawler_running") == 0
        });
    }
}

/// Creates a fresh, empty directory `memcrab-<tag>-<pid>-<n>` under the system
/// temp dir (unique within this process) and returns its path.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let path = Scratch::fresh_path(tag);
    let _ = fs::remove_dir_all(&path);
    fs::create_dir_all(&path).expect("create test temp dir");
    path
}

/// Where a server listens.
#[derive(Clone, Debug)]
pub enum Addr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// A running server process, killed (SIGKILL) on drop if it is still running.
pub struct Server {
    process: memcrab_testkit::Server,
    pub addr: Addr,
    /// The UDP port from the port file's `UDP INET: <port>` line (`-U`).
    pub udp_port: Option<u16>,
}

impl Server {
    /// Starts the server on an ephemeral TCP port on 127.0.0.1 with extra `args`.
    pub fn tcp(args: &[&str]) -> Server {
        Server::tcp_env(args, &[])
    }

    /// As [`Server::tcp`], with extra environment variables for the server.
    pub fn tcp_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        let launch = env.iter().fold(launch(args), |l, (k, v)| l.env(k, v));
        Server::start(launch)
    }

    /// Starts the server with `args` as they are (their own `-l`/`-p`) and returns
    /// it with its port file's text. Its `addr` is the first `TCP INET` port on
    /// 127.0.0.1, else the first `TCP INET6` port on ::1.
    pub fn listen(args: &[&str]) -> (Server, String) {
        let server = Server::start(launch(args).listen(Listen::AsGiven));
        let text = server.process.port_text.clone();
        (server, text)
    }

    /// As [`Server::tcp`], with `hook` run in the child between fork and exec (it
    /// must be async-signal-safe): to start the server under a seccomp filter, say.
    pub fn tcp_pre_exec(args: &[&str], hook: fn() -> io::Result<()>) -> Server {
        Server::start(launch(args).pre_exec(hook))
    }

    /// Starts the server on a unix socket (`-s`) with extra `args`.
    pub fn unix(args: &[&str]) -> Server {
        Server::start(launch(args).listen(Listen::Unix))
    }

    fn start(launch: Launch) -> Server {
        let process = launch.start().unwrap_or_else(|e| panic!("{e}"));
        let addr = match (&process.tcp, &process.unix) {
            (Some(a), _) => Addr::Tcp(*a),
            (None, Some(p)) => Addr::Unix(p.clone()),
            (None, None) => panic!("the server listens nowhere"),
        };
        Server {
            udp_port: process.udp_port,
            process,
            addr,
        }
    }

    /// The TCP port (panics for a unix-socket server).
    pub fn port(&self) -> u16 {
        match &self.addr {
            Addr::Tcp(a) => a.port(),
            Addr::Unix(_) => panic!("not a TCP server"),
        }
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// A new connection.
    pub fn connect(&self) -> Client {
        Client::new(self.raw_connect().expect("connect to the server"))
    }

    /// A new connection, or the error.
    pub fn raw_connect(&self) -> io::Result<Stream> {
        match &self.addr {
            Addr::Tcp(a) => TcpStream::connect_timeout(a, REPLY_TIMEOUT).map(|s| {
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
            Addr::Unix(p) => UnixStream::connect(p).map(Stream::Unix),
        }
    }

    /// Sends a signal with `kill(1)`, e.g. `"TERM"`.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {} failed", self.pid());
    }

    /// Waits for the process to exit; panics if it is still running after `within`.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        self.process.wait_exit(within)
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.process.running()
    }

    /// Resident memory from /proc, in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.proc_status_kib("VmRSS:")
    }

    /// Peak resident memory since the process started (VmHWM), in KiB.
    pub fn hwm_kib(&self) -> u64 {
        self.proc_status_kib("VmHWM:")
    }

    fn proc_status_kib(&self, field: &str) -> u64 {
        let status =
            fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("read status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"))
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.process.stderr()
    }
}

/// The binary under test with `args`; the scratch dirs are `memcrab-it-*`.
fn launch(args: &[&str]) -> Launch {
    Launch::new(server_binary())
        .tag("it")
        .args(args.iter().copied())
}

/// The `-u` a server started as root needs (both refuse root without it, and both
/// ignore it otherwise): `nobody` for memcached, which leaves root before it writes
/// the port file or socket; `root` for memcrab, so that it keeps writing as root.
/// None if `args` has its own `-u`.
pub fn user_args(args: &[&str]) -> Vec<std::ffi::OsString> {
    Launch::new(server_binary())
        .args(args.iter().copied())
        .user_args()
}

/// Runs the binary with `args` to completion (10 s at most) and returns its output.
pub fn run_cli(args: &[&str]) -> Output {
    let bin = server_binary();
    let mut child = Command::new(&bin)
        .args(user_args(args))
        .args(args)
        .env_remove("MEMCACHED_PORT_FILENAME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} {args:?} still running after 10 s", bin.display());
        }
        thread::sleep(POLL_INTERVAL);
    };
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_end(&mut stdout);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_end(&mut stderr);
    }
    Output {
        status,
        stdout,
        stderr,
    }
}
