//! The integration tests' harness: start the real `memcrab` binary, talk to it over
//! TCP or a unix socket, and assert exact reply bytes.
//!
//! ```text
//!   test ── Server::tcp(&["-m", "8"]) ──► memcrab -l 127.0.0.1:0 -m 8
//!             │  MEMCACHED_PORT_FILENAME=<dir>/port   (renamed into place once bound)
//!             ▼
//!           poll <dir>/port every 2 ms (10 s deadline) ──► "TCP INET: 40123"
//!             │
//!           Client ── send(b"get k\r\n") / expect(b"END\r\n") ──► exact bytes or panic
//!             │
//!           drop(Server) ──► SIGKILL if still running, wait, remove <dir>
//! ```
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

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long a reply may take before the test fails.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server may take to bind.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How often startup is polled.
const POLL_INTERVAL: Duration = Duration::from_millis(2);

/// A request whose reply proves the stream is in sync: a miss, `END\r\n`.
pub const MARKER: &[u8] = b"get nothing\r\n";
pub const MARKER_REPLY: &[u8] = b"END\r\n";

/// The binary under test: memcrab, or `MEMCRAB_TEST_SERVER` when set.
pub fn server_binary() -> PathBuf {
    std::env::var_os("MEMCRAB_TEST_SERVER")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_memcrab")))
}

/// Whether the tests are pointed at real memcached (see the module docs).
pub fn against_memcached() -> bool {
    server_binary()
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("memcached"))
}

/// Printable bytes for assertion messages.
pub fn show(b: &[u8]) -> String {
    const MAX: usize = 600;
    if b.len() > MAX {
        format!("\"{}\"... ({} bytes)", b[..MAX].escape_ascii(), b.len())
    } else {
        format!("\"{}\"", b.escape_ascii())
    }
}

/// Creates a fresh, empty directory `memcrab-<tag>-<pid>-<n>` under the system
/// temp dir (unique within this process) and returns its path.
pub fn scratch_dir(tag: &str) -> PathBuf {
    // Relaxed: the counter only has to hand out distinct numbers.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "memcrab-{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&path);
    fs::create_dir_all(&path).expect("create test temp dir");
    path
}

/// A scratch directory for one server, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let path = scratch_dir("it");
        if against_memcached() {
            // memcached drops to `nobody` before writing its port file / socket.
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o777))
                .expect("chmod test temp dir");
        }
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Where a server listens.
#[derive(Clone, Debug)]
pub enum Addr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// A running server process, killed (SIGKILL) on drop if it is still running.
pub struct Server {
    child: Child,
    pub addr: Addr,
    /// The UDP port from the port file's `UDP INET: <port>` line (`-U`).
    pub udp_port: Option<u16>,
    exited: Option<ExitStatus>,
    dir: TempDir,
}

impl Server {
    /// Starts the server on an ephemeral TCP port on 127.0.0.1 with extra `args`.
    pub fn tcp(args: &[&str]) -> Server {
        Server::tcp_env(args, &[])
    }

    /// As [`Server::tcp`], with extra environment variables for the server.
    pub fn tcp_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut full = vec!["-l", "127.0.0.1:0"];
        full.extend_from_slice(args);
        Server::listen_env(&full, env).0
    }

    /// Starts the server with `args` as they are (their own `-l`/`-p`) and returns
    /// it with its port file's text. Its `addr` is the first `TCP INET` port on
    /// 127.0.0.1, else the first `TCP INET6` port on ::1.
    pub fn listen(args: &[&str]) -> (Server, String) {
        Server::listen_env(args, &[])
    }

    fn listen_env(args: &[&str], env: &[(&str, &str)]) -> (Server, String) {
        Server::listen_hook(args, env, None)
    }

    /// As [`Server::tcp`], with `hook` run in the child between fork and exec (it
    /// must be async-signal-safe): to start the server under a seccomp filter, say.
    #[allow(dead_code)]
    pub fn tcp_pre_exec(args: &[&str], hook: fn() -> io::Result<()>) -> Server {
        let mut full = vec!["-l", "127.0.0.1:0"];
        full.extend_from_slice(args);
        Server::listen_hook(&full, &[], Some(hook)).0
    }

    fn listen_hook(
        args: &[&str],
        env: &[(&str, &str)],
        hook: Option<fn() -> io::Result<()>>,
    ) -> (Server, String) {
        let dir = TempDir::new();
        let port_file = dir.0.join("port");
        let mut child = spawn(&dir.0, args, Some(&port_file), env, hook);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let text = loop {
            // The server writes `<file>.lck` and renames it, so a file that exists
            // is complete.
            if let Ok(text) = fs::read_to_string(&port_file) {
                break text;
            }
            check_startup(&mut child, &dir.0, deadline, "write its port file");
            thread::sleep(POLL_INTERVAL);
        };
        let port = |prefix: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .and_then(|p| p.trim().parse::<u16>().ok())
        };
        let addr = match (port("TCP INET: "), port("TCP INET6: ")) {
            (Some(p), _) => SocketAddr::from(([127, 0, 0, 1], p)),
            (None, Some(p)) => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, p)),
            _ => panic!("no `TCP INET: <port>` line in port file: {text:?}"),
        };
        let server = Server {
            child,
            addr: Addr::Tcp(addr),
            udp_port: port("UDP INET: "),
            exited: None,
            dir,
        };
        (server, text)
    }

    /// Starts the server on a unix socket (`-s`) with extra `args`.
    pub fn unix(args: &[&str]) -> Server {
        let dir = TempDir::new();
        let sock = dir.0.join("sock");
        let sock_text = sock.to_str().expect("utf-8 temp path").to_string();
        let mut full = vec!["-s", sock_text.as_str()];
        full.extend_from_slice(args);
        let mut child = spawn(&dir.0, &full, None, &[], None);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if UnixStream::connect(&sock).is_ok() {
                break;
            }
            check_startup(&mut child, &dir.0, deadline, "accept on its unix socket");
            thread::sleep(POLL_INTERVAL);
        }
        Server {
            child,
            addr: Addr::Unix(sock),
            udp_port: None,
            exited: None,
            dir,
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
        self.child.id()
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
        if let Some(s) = self.exited {
            return s;
        }
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                self.exited = Some(s);
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "server (pid {}) still running {within:?} later",
                self.pid()
            );
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.exited.is_none() && self.child.try_wait().expect("try_wait").is_none()
    }

    /// Resident memory from /proc, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status =
            fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("read status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/<pid>/status")
    }

    /// Peak resident memory since the process started (VmHWM), in KiB.
    pub fn hwm_kib(&self) -> u64 {
        let status =
            fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("read status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/<pid>/status")
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        fs::read_to_string(self.dir.0.join("stderr")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.exited.is_none() {
            if let Ok(None) = self.child.try_wait() {
                let _ = self.child.kill();
            }
            let _ = self.child.wait();
        }
    }
}

fn spawn(
    dir: &Path,
    args: &[&str],
    port_file: Option<&Path>,
    env: &[(&str, &str)],
    hook: Option<fn() -> io::Result<()>>,
) -> Child {
    let bin = server_binary();
    let mut cmd = Command::new(&bin);
    if let Some(hook) = hook {
        use std::os::unix::process::CommandExt;
        // SAFETY: the callers' hooks are async-signal-safe (system calls only).
        unsafe { cmd.pre_exec(hook) };
    }
    cmd.args(user_args(args));
    cmd.args(args);
    cmd.env_remove("MEMCACHED_PORT_FILENAME");
    cmd.envs(env.iter().copied());
    if let Some(f) = port_file {
        cmd.env("MEMCACHED_PORT_FILENAME", f);
    }
    let stderr = fs::File::create(dir.join("stderr")).expect("create stderr file");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
    cmd.spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()))
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

/// Runs the binary with `args` to completion (10 s at most) and returns its output.
/// The `-u` a server started as root needs (both refuse root without it, and both
/// ignore it otherwise): `nobody` for memcached, which leaves root before it writes
/// the port file or socket; `root` for memcrab, so that it keeps writing as root.
/// None if `args` has its own `-u`.
pub fn user_args(args: &[&str]) -> &'static [&'static str] {
    if args.contains(&"-u") {
        &[]
    } else if against_memcached() {
        &["-u", "nobody"]
    } else {
        &["-u", "root"]
    }
}

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

/// The kernel's queues of the TCP socket bound to `local` and connected to `remote`,
/// from /proc/net/tcp or tcp6: (bytes written and not yet acknowledged, bytes
/// received and not yet read by the process that owns it). None if there is none.
/// Over loopback both ends are on this machine, so a test can see how much of what
/// it sent the server has read, and how much the server has written: observable
/// conditions to poll instead of sleeping.
pub fn tcp_queues(local: SocketAddr, remote: SocketAddr) -> Option<(u64, u64)> {
    let file = if local.is_ipv4() { "tcp" } else { "tcp6" };
    let text = fs::read_to_string(format!("/proc/net/{file}")).ok()?;
    text.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || proc_addr(f[1])? != local || proc_addr(f[2])? != remote {
            return None;
        }
        let (tx, rx) = f[4].split_once(':')?;
        Some((
            u64::from_str_radix(tx, 16).ok()?,
            u64::from_str_radix(rx, 16).ok()?,
        ))
    })
}

/// `0100007F:2BCB` (the address as the kernel's native-endian 32-bit words in hex,
/// then the port) as a socket address.
fn proc_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    for i in (0..ip.len()).step_by(8) {
        let word = u32::from_str_radix(ip.get(i..i + 8)?, 16).ok()?;
        bytes.extend_from_slice(&word.to_ne_bytes());
    }
    let ip = match bytes.len() {
        4 => std::net::IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
        16 => std::net::IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Polls `cond` every 2 ms until it holds; panics with `what` after `within`.
#[track_caller]
pub fn wait_until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        thread::sleep(POLL_INTERVAL);
    }
}

/// A TCP or unix stream.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }

    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            Stream::Unix(s) => s.set_write_timeout(t),
        }
    }

    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    pub fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Write),
            Stream::Unix(s) => s.shutdown(Shutdown::Write),
        }
    }

    /// The TCP peer's address (None for a unix socket).
    pub fn peer_tcp_addr(&self) -> Option<SocketAddr> {
        match self {
            Stream::Tcp(s) => s.peer_addr().ok(),
            Stream::Unix(_) => None,
        }
    }

    /// The local address text as memcached's `stats conns` prints a TCP peer.
    pub fn local_tcp_addr(&self) -> Option<SocketAddr> {
        match self {
            Stream::Tcp(s) => s.local_addr().ok(),
            Stream::Unix(_) => None,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What one read attempt found.
enum Fill {
    Data,
    Eof,
    Timeout,
    /// The server reset the connection.
    Reset,
}

/// One client connection with a read buffer and exact-reply assertions.
pub struct Client {
    pub stream: Stream,
    /// Received and not yet consumed.
    pending: Vec<u8>,
}

impl Client {
    pub fn new(stream: Stream) -> Client {
        Client {
            stream,
            pending: Vec::new(),
        }
    }

    /// Writes all of `bytes`.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("write {}: {e}", show(bytes)));
    }

    fn fill(&mut self, deadline: Instant) -> Fill {
        let now = Instant::now();
        if now >= deadline {
            return Fill::Timeout;
        }
        self.stream
            .set_read_timeout(Some(deadline - now))
            .expect("set_read_timeout");
        let mut buf = vec![0u8; 256 * 1024];
        match self.stream.read(&mut buf) {
            Ok(0) => Fill::Eof,
            Ok(n) => {
                self.pending.extend_from_slice(&buf[..n]);
                Fill::Data
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Fill::Timeout
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Fill::Data,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                ) =>
            {
                Fill::Reset
            }
            Err(e) => panic!("read: {e}"),
        }
    }

    /// Reads until at least `n` bytes are buffered; panics on EOF or timeout.
    fn want(&mut self, n: usize, what: &dyn Fn() -> String) {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        while self.pending.len() < n {
            match self.fill(deadline) {
                Fill::Data => {}
                Fill::Eof | Fill::Reset => panic!(
                    "connection closed while waiting for {}; received {}",
                    what(),
                    show(&self.pending)
                ),
                Fill::Timeout => panic!(
                    "no complete reply within {REPLY_TIMEOUT:?} waiting for {}; received {}",
                    what(),
                    show(&self.pending)
                ),
            }
        }
    }

    /// Asserts that the next bytes received are exactly `want`.
    #[track_caller]
    pub fn expect(&mut self, want: &[u8]) {
        self.want(want.len(), &|| show(want));
        if &self.pending[..want.len()] != want {
            // Collect a little more for the message.
            let _ = self.fill(Instant::now() + Duration::from_millis(100));
            panic!(
                "reply mismatch\n  expected: {}\n  received: {}",
                show(want),
                show(&self.pending)
            );
        }
        self.pending.drain(..want.len());
    }

    /// Sends `req` and asserts the reply is exactly `want`.
    #[track_caller]
    pub fn call(&mut self, req: &[u8], want: &[u8]) {
        self.send(req);
        self.expect(want);
    }

    /// Sends the marker request and expects only its reply: proves that nothing else
    /// (a reply under `noreply`, say) was sent before it.
    #[track_caller]
    pub fn sync(&mut self) {
        self.call(MARKER, MARKER_REPLY);
    }

    /// Waits until the server has read every byte sent so far on this TCP
    /// connection (its socket's receive queue is empty), so that what is sent next
    /// reaches it in a read of its own: a request split across writes is seen split,
    /// without sleeping between the writes.
    #[track_caller]
    pub fn wait_server_read(&self) {
        let local = self.stream.local_tcp_addr().expect("a TCP connection");
        let peer = self.stream.peer_tcp_addr().expect("a TCP connection");
        wait_until("the server to read what was sent", REPLY_TIMEOUT, || {
            tcp_queues(peer, local).is_some_and(|(_, unread)| unread == 0)
        });
    }

    /// Reads exactly `n` bytes.
    pub fn read_exact_bytes(&mut self, n: usize) -> Vec<u8> {
        self.want(n, &|| format!("{n} bytes"));
        self.pending.drain(..n).collect()
    }

    /// Reads one line, without its `\r\n`.
    pub fn read_line(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            if let Some(i) = self.pending.windows(2).position(|w| w == b"\r\n") {
                let line = self.pending[..i].to_vec();
                self.pending.drain(..i + 2);
                return line;
            }
            match self.fill(deadline) {
                Fill::Data => {}
                _ => panic!("no complete line; received {}", show(&self.pending)),
            }
        }
    }

    /// Reads one line ending in a bare `\n` (as `watch`'s log lines do), without it.
    pub fn read_line_lf(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            if let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
                let line = self.pending[..i].to_vec();
                self.pending.drain(..=i);
                return line;
            }
            match self.fill(deadline) {
                Fill::Data => {}
                _ => panic!("no complete line; received {}", show(&self.pending)),
            }
        }
    }

    /// Sends `stats[ sub]` and returns the `STAT` lines in order, up to `END`.
    pub fn stats_list(&mut self, sub: &str) -> Vec<(String, String)> {
        let req = if sub.is_empty() {
            "stats\r\n".to_string()
        } else {
            format!("stats {sub}\r\n")
        };
        self.send(req.as_bytes());
        let mut out = Vec::new();
        loop {
            let line = self.read_line();
            if line == b"END" {
                return out;
            }
            let text = String::from_utf8(line).expect("utf-8 stats line");
            let rest = text
                .strip_prefix("STAT ")
                .unwrap_or_else(|| panic!("not a STAT line: {text:?}"));
            let (name, value) = rest
                .split_once(' ')
                .unwrap_or_else(|| panic!("STAT line without a value: {text:?}"));
            out.push((name.to_string(), value.to_string()));
        }
    }

    /// `stats[ sub]` as a map.
    pub fn stats(&mut self, sub: &str) -> HashMap<String, String> {
        self.stats_list(sub).into_iter().collect()
    }

    /// One numeric general stat.
    pub fn stat(&mut self, name: &str) -> u64 {
        let s = self.stats("");
        let v = s
            .get(name)
            .unwrap_or_else(|| panic!("no STAT {name} in stats"));
        v.parse()
            .unwrap_or_else(|_| panic!("STAT {name} {v} is not a number"))
    }

    /// Asserts that the server closes the connection without sending anything more.
    #[track_caller]
    pub fn expect_closed(&mut self) {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            assert!(
                self.pending.is_empty(),
                "expected the connection to close, received {}",
                show(&self.pending)
            );
            match self.fill(deadline) {
                Fill::Eof | Fill::Reset => return,
                Fill::Data => {}
                Fill::Timeout => panic!("connection still open after {REPLY_TIMEOUT:?}"),
            }
        }
    }

    /// Waits up to `wait` for the server to close the connection: `true` if it did,
    /// `false` if it is still open. Panics if bytes arrive instead.
    pub fn poll_closed(&mut self, wait: Duration) -> bool {
        assert!(
            self.pending.is_empty(),
            "unread bytes {}",
            show(&self.pending)
        );
        match self.fill(Instant::now() + wait) {
            Fill::Eof | Fill::Reset => true,
            Fill::Timeout => false,
            Fill::Data => panic!(
                "expected nothing or a close, received {}",
                show(&self.pending)
            ),
        }
    }

    /// Reads everything until the server closes, for at most `within`. Returns the
    /// bytes and whether the close was seen.
    pub fn read_to_close(&mut self, within: Duration) -> (Vec<u8>, bool) {
        let deadline = Instant::now() + within;
        loop {
            match self.fill(deadline) {
                Fill::Data => {}
                Fill::Eof | Fill::Reset => return (std::mem::take(&mut self.pending), true),
                Fill::Timeout => return (std::mem::take(&mut self.pending), false),
            }
        }
    }

    /// `gets <key>`: the CAS unique of a stored key.
    pub fn gets_cas(&mut self, key: &str) -> u64 {
        self.send(format!("gets {key}\r\n").as_bytes());
        let line = String::from_utf8(self.read_line()).expect("utf-8");
        let parts: Vec<&str> = line.split(' ').collect();
        assert!(
            parts.len() == 5 && parts[0] == "VALUE" && parts[1] == key,
            "unexpected gets reply line {line:?}"
        );
        let len: usize = parts[3].parse().expect("length");
        let cas = parts[4]
            .parse()
            .unwrap_or_else(|_| panic!("cas unique {:?} is not a u64", parts[4]));
        self.read_exact_bytes(len + 2);
        self.expect(b"END\r\n");
        cas
    }
}

/// `VALUE <key> <flags> <len>\r\n<data>\r\n`.
pub fn value(key: &str, flags: u32, data: &[u8]) -> Vec<u8> {
    let mut v = format!("VALUE {key} {flags} {}\r\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

/// `<cmd> <key> <flags> <exptime> <len>\r\n<data>\r\n`: a storage request.
pub fn store(cmd: &str, key: &str, flags: u32, exptime: i64, data: &[u8]) -> Vec<u8> {
    let mut v = format!("{cmd} {key} {flags} {exptime} {}\r\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

/// Concatenates byte strings.
pub fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// xorshift64*: deterministic sizes, keys and noise for tests, without a
/// dependency (the seed picks the sequence; a seed of 0 stays 0).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
