//! Plays rounds against one server: opens the connections, writes each
//! connection's segments in the round's interleaved order, and collects every
//! connection's replies per segment, each cut at its sentinel's reply.
//!
//! ```text
//!   order: 0 2 0 0 1 2 ...       conn 0: [seg 0 writes][seg 1 writes]
//!     │                                    └ first write of seg 1 waits for seg 0's sentinel reply
//!     ▼
//!   write (non-blocking) ── poll: every connection of the round is read meanwhile
//! ```
//!
//! Nothing sleeps: a segment is over when its sentinel's reply has arrived, the
//! server closed the connection, or (a hang) the reply timeout passed. Everything
//! read from the server is kept byte for byte; `mask` reads it afterwards.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::mask::CasMap;
use crate::plan::{interleave, segment_writes, sentinel_opaque, Proto, Round};

/// How a segment's reply ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The sentinel's reply arrived (it is the last thing in the bytes).
    Sentinel,
    /// The server closed the connection (EOF or reset) first.
    Closed,
    /// Neither within the reply timeout.
    Timeout,
    /// Not sent: the connection ended in an earlier segment.
    NotRun,
}

impl End {
    pub fn describe(self) -> &'static str {
        match self {
            End::Sentinel => "answered the sentinel (connection open)",
            End::Closed => "closed the connection",
            End::Timeout => "did not answer within the reply timeout",
            End::NotRun => "was not sent (connection already gone)",
        }
    }
}

#[derive(Clone, Debug)]
pub struct SegReply {
    pub bytes: Vec<u8>,
    pub end: End,
}

/// One connection's replies in a round, per segment.
#[derive(Clone, Debug)]
pub struct ConnReply {
    pub segs: Vec<SegReply>,
}

struct Live {
    sock: TcpStream,
    proto: Proto,
    /// Everything read and not yet handed out; `buf[start..]` is the current segment's.
    buf: Vec<u8>,
    start: usize,
    /// Where the sentinel scan goes on (a line or packet start, at or after `start`).
    scan: usize,
    /// A binary reply that is not a response packet: the scan cannot go on.
    garbage: bool,
    eof: bool,
    /// A write failed or could not progress: stop writing.
    stalled: bool,
}

/// Throwaway connections [`Target::scrub`] opens at once: more than the free
/// descriptors below a closed one can be (a round has at most a few connections).
const SCRUB_CONNS: usize = 8;

/// One server: its address, its connections and the CAS uniques it has returned.
pub struct Target {
    addr: SocketAddr,
    conns: Vec<Option<Live>>,
    pub cas: CasMap,
    timeout: Duration,
}

impl Target {
    pub fn new(addr: SocketAddr, nconns: usize, timeout: Duration) -> Target {
        Target {
            addr,
            conns: (0..nconns).map(|_| None).collect(),
            cas: CasMap::default(),
            timeout,
        }
    }

    /// Plays one round; the replies come in `round.conns` order.
    pub fn run_round(&mut self, round: &Round) -> Vec<ConnReply> {
        let n = round.conns.len();
        let mut replies: Vec<ConnReply> = round
            .conns
            .iter()
            .map(|_| ConnReply { segs: Vec::new() })
            .collect();
        for cr in &round.conns {
            if cr.conn >= self.conns.len() {
                self.conns.resize_with(cr.conn + 1, || None);
            }
            let reopen = cr.fresh
                || self.conns[cr.conn]
                    .as_ref()
                    .is_none_or(|l| l.proto != cr.proto);
            if reopen {
                self.conns[cr.conn] = self.connect(cr.proto);
            }
        }
        // Each connection's writes, tagged with their segment.
        let writes: Vec<Vec<(usize, Vec<u8>)>> = round
            .conns
            .iter()
            .map(|cr| {
                cr.segments
                    .iter()
                    .enumerate()
                    .flat_map(|(s, reqs)| {
                        segment_writes(reqs, cr.proto, s, self.cas.values())
                            .into_iter()
                            .map(move |w| (s, w))
                    })
                    .collect()
            })
            .collect();
        let counts: Vec<usize> = writes.iter().map(Vec::len).collect();
        let mut next = vec![0usize; n];
        let mut dead = vec![false; n];
        for i in interleave(&counts, round.order_seed) {
            if dead[i] {
                continue;
            }
            let (seg, ref bytes) = writes[i][next[i]];
            let first_of_seg = next[i] == 0 || writes[i][next[i] - 1].0 != seg;
            next[i] += 1;
            if first_of_seg && seg > 0 && !self.finish_segment(round, i, &mut replies[i]) {
                dead[i] = true;
                continue;
            }
            self.write_all(round, i, bytes);
        }
        for (i, cr) in round.conns.iter().enumerate() {
            if !dead[i] && !cr.segments.is_empty() {
                self.finish_segment(round, i, &mut replies[i]);
            }
            while replies[i].segs.len() < cr.segments.len() {
                replies[i].segs.push(SegReply {
                    bytes: Vec::new(),
                    end: End::NotRun,
                });
            }
            if let Some(l) = self.conns[cr.conn].as_mut() {
                l.buf.drain(..l.start);
                l.scan -= l.start;
                l.start = 0;
            }
        }
        replies
    }

    fn connect(&self, proto: Proto) -> Option<Live> {
        let sock = TcpStream::connect_timeout(&self.addr, self.timeout).ok()?;
        sock.set_nodelay(true).ok()?;
        sock.set_nonblocking(true).ok()?;
        Some(Live {
            sock,
            proto,
            buf: Vec::new(),
            start: 0,
            scan: 0,
            garbage: false,
            eof: false,
            stalled: false,
        })
    }

    /// Waits for the end of connection `i`'s next segment and records its reply.
    /// Returns whether the connection is still usable.
    fn finish_segment(&mut self, round: &Round, i: usize, reply: &mut ConnReply) -> bool {
        let conn = round.conns[i].conn;
        let seg = reply.segs.len();
        let deadline = Instant::now() + self.timeout;
        let end = loop {
            let Some(l) = self.conns[conn].as_mut() else {
                break End::Closed;
            };
            if let Some(e) = scan_sentinel(l, seg) {
                let bytes = l.buf[l.start..e].to_vec();
                l.start = e;
                l.scan = e;
                reply.segs.push(SegReply {
                    bytes,
                    end: End::Sentinel,
                });
                return true;
            }
            if l.eof {
                break End::Closed;
            }
            if l.stalled || Instant::now() >= deadline {
                break End::Timeout;
            }
            self.pump(round, None, deadline);
        };
        let gone = self.conns[conn].take();
        if end == End::Closed && gone.as_ref().is_some_and(|l| l.proto == Proto::Binary) {
            self.scrub();
        }
        let bytes = gone.map(|l| l.buf[l.start..].to_vec()).unwrap_or_default();
        reply.segs.push(SegReply { bytes, end });
        false
    }

    /// After the server closed a binary connection: throwaway binary connections,
    /// held open together so that they take the lowest free descriptors (the one
    /// just closed among them), are each answered one NOOP. memcached keeps a
    /// binary connection's last store unique (`c->cas`) until it reads the next
    /// header, and a connection that later reuses the descriptor stores its first
    /// text item under that unique again (see AVOIDED); reading a header clears it.
    /// Both servers get the same.
    fn scrub(&self) {
        let mut held = Vec::new();
        for _ in 0..SCRUB_CONNS {
            let Ok(s) = TcpStream::connect_timeout(&self.addr, self.timeout) else {
                break;
            };
            held.push(s);
        }
        let mut noop = [0u8; 24];
        noop[0] = 0x80;
        noop[1] = 0x0a;
        for s in &mut held {
            let _ = s.set_read_timeout(Some(self.timeout));
            let mut reply = [0u8; 24];
            if s.write_all(&noop).is_ok() {
                let _ = s.read_exact(&mut reply);
            }
        }
    }

    /// Writes `bytes` on connection `i`, reading every connection meanwhile.
    fn write_all(&mut self, round: &Round, i: usize, bytes: &[u8]) {
        let conn = round.conns[i].conn;
        let deadline = Instant::now() + self.timeout;
        let mut off = 0;
        while off < bytes.len() {
            let Some(l) = self.conns[conn].as_mut() else {
                return;
            };
            if l.eof || l.stalled {
                return;
            }
            match l.sock.write(&bytes[off..]) {
                Ok(0) => l.stalled = true,
                Ok(k) => off += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        l.stalled = true;
                    } else {
                        self.pump(round, Some(conn), deadline);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // EPIPE / ECONNRESET: the server closed; what it sent is still read.
                Err(_) => {
                    l.stalled = true;
                    read_available(l);
                    // A reset may come before the EOF is seen; nothing more will arrive.
                    l.eof = true;
                }
            }
        }
    }

    /// Polls the round's connections (for output too on `writer`) until something
    /// happens or `deadline`, and reads whatever arrived.
    fn pump(&mut self, round: &Round, writer: Option<usize>, deadline: Instant) {
        let mut fds = Vec::new();
        let mut which = Vec::new();
        for cr in &round.conns {
            if let Some(l) = self.conns[cr.conn].as_ref() {
                if !l.eof && !which.contains(&cr.conn) {
                    let mut events = libc::POLLIN;
                    if writer == Some(cr.conn) {
                        events |= libc::POLLOUT;
                    }
                    fds.push(libc::pollfd {
                        fd: l.sock.as_raw_fd(),
                        events,
                        revents: 0,
                    });
                    which.push(cr.conn);
                }
            }
        }
        if fds.is_empty() {
            return;
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        let ms = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `fds` is a live, exclusively borrowed array of `fds.len()` pollfd
        // structs for the whole call; poll only writes their `revents`.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if rc <= 0 {
            return;
        }
        for (fd, conn) in fds.iter().zip(which) {
            if fd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                if let Some(l) = self.conns[conn].as_mut() {
                    read_available(l);
                }
            }
        }
    }
}

/// Reads until the socket would block; EOF and errors end the connection.
fn read_available(l: &mut Live) {
    let mut tmp = [0u8; 64 * 1024];
    loop {
        match l.sock.read(&mut tmp) {
            Ok(0) => {
                l.eof = true;
                return;
            }
            Ok(k) => l.buf.extend_from_slice(&tmp[..k]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                l.eof = true;
                return;
            }
        }
    }
}

/// Where the reply to segment `seg`'s sentinel ends, once it has arrived.
fn scan_sentinel(l: &mut Live, seg: usize) -> Option<usize> {
    match l.proto {
        Proto::Text => loop {
            let nl = memchr(b'\n', &l.buf[l.scan..])? + l.scan;
            let line_start = l.scan;
            l.scan = nl + 1;
            if l.buf[line_start..].starts_with(b"VERSION ") {
                return Some(nl + 1);
            }
        },
        Proto::Binary => loop {
            if l.garbage {
                return None;
            }
            let h = l.buf.get(l.scan..l.scan + 24)?;
            if h[0] != memcrab_proto::binary::RES_MAGIC {
                l.garbage = true;
                return None;
            }
            let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
            let opaque = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
            let is_sentinel =
                h[1] == memcrab_proto::binary::op::NOOP && opaque == sentinel_opaque(seg);
            let end = l.scan + 24 + body;
            if end > l.buf.len() {
                return None;
            }
            l.scan = end;
            if is_sentinel {
                return Some(end);
            }
        },
    }
}

fn memchr(b: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == b)
}
