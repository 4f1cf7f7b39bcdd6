//! The tests' side of a connection: a TCP or unix [`Stream`], a [`Client`] that
//! asserts exact reply bytes with a deadline on every read, the request and reply
//! builders (`value`, `store`, `cat`), the kernel's view of a TCP connection's
//! queues ([`tcp_queues`]) and a small deterministic [`Rng`]. It imports nothing
//! of `mod.rs`.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use memcrab_testkit::wait_until;

/// How long a reply may take before the test fails.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// A request whose reply proves the stream is in sync: a miss, `END\r\n`.
pub const MARKER: &[u8] = b"get nothing\r\n";
pub const MARKER_REPLY: &[u8] = b"END\r\n";

/// Printable bytes for assertion messages.
pub fn show(b: &[u8]) -> String {
    const MAX: usize = 600;
    if b.len() > MAX {
        format!("\"{}\"... ({} bytes)", b[..MAX].escape_ascii(), b.len())
    } else {
        format!("\"{}\"", b.escape_ascii())
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

    /// What was received and not yet consumed (for a caller that goes on reading
    /// `stream` itself).
    pub fn take_pending(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
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
