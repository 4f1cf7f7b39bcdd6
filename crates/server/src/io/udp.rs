//! memcached's UDP transport (`-U <port>`, off by default), as memcached 1.6.18
//! serves it.
//!
//! ```text
//!   one UDP socket per -l address, dup'ed into every worker's poll:
//!
//!   datagram ──recv_from──► rbuf (64 KiB, per socket per worker)
//!            ── 8-byte frame header stripped ──► Session::step, one request at a time
//!               (the same request step as TCP) ──► out ──► 1..n datagrams ──send_to──► sender
//! ```
//!
//! This file is a transport: what it adds to the request step is UDP's own policy,
//! the framing of requests and replies into datagrams described below.
//!
//! The frame (doc/protocol.txt, "UDP protocol"): every datagram starts with four
//! big-endian u16s: request id, sequence number, total datagrams in the message, and
//! a reserved 0. A reply echoes the request id and numbers its datagrams 0..n-1; each
//! datagram is at most [`MAX_DATAGRAM_BYTES`] including the header.
//!
//! Facts pinned against memcached 1.6.18 (see crates/server/tests/udp.rs):
//! - A datagram of 8 bytes or fewer is dropped; one whose header announces a total
//!   other than 1 is dropped without a reply (1.6 no longer answers "multi-packet
//!   request not supported"). The sequence number and reserved field of a request
//!   are not checked.
//! - Each datagram is its own unit: a request not complete in it (a `set` whose data
//!   is not all there) is dropped with the rest of the datagram, and nothing is
//!   remembered between datagrams. (memcached keeps the half-read state in the one
//!   socket's connection and eats the next datagram, whoever sends it; that is a
//!   bug we do not copy; nor its sticky `quit`, after which its UDP connection
//!   drops the rest of every datagram after the first write.)
//! - The first payload byte picks the protocol for the whole datagram: 0x80 is
//!   binary, anything else text (and meta), whatever `-B` says (memcached's
//!   `try_read_command_udp`).
//! - Every request's reply is its own message (its own sequence numbering). A text
//!   multi-get is sent as memcached's response objects are: one message per hit,
//!   `END` attached to the last key's message.
//! - memcached sends an empty reply object as a bare header whose total is 0 when it
//!   is the first reply object sent in a "write round" (it is folded into the
//!   previous send otherwise): `quit`, a multi-get whose first key misses, and a
//!   binary quiet request that says nothing. A round ends after `mn`, `quit`, a
//!   binary NOOP or error, every `-R` requests (each counted in `conn_yields`) and
//!   at the end of the datagram; a text get no longer ends one (1.6.35's get
//!   batches with what follows it, as every other command does). Text replies
//!   suppressed by `noreply` or meta quiet mode are never sent. [`Tx`] walks the
//!   same steps.
//! - A key dump (`lru_crawler metadump`/`mgdump`) gets no reply: memcached hands the
//!   UDP socket to its crawler thread, whose writes go nowhere; here the request is
//!   dropped, since a dump cannot be cut into one reply's datagrams.
//! - Replies go only to the datagram's source address. bytes_read/bytes_written
//!   count whole datagrams, headers included.
//!
//! Every worker polls its own dup of each socket, as memcached gives each worker
//! thread one: a datagram wakes them all, the first to read it answers and the
//! others find nothing (a wasted wakeup per burst, accepted for simplicity;
//! SO_REUSEPORT sockets per worker would avoid it). Nothing about a peer lives
//! past its datagram, so any worker may serve any datagram.
//!
//! Memory is bounded: each worker holds one 64 KiB receive buffer per UDP socket and
//! one reply buffer (a reply is at most one value, `-I`, or one `stats` text), and
//! nothing per peer. A datagram that cannot be sent at once (the socket's send
//! buffer is full) waits at most [`SEND_WAIT_MS`] for room, then the rest of that
//! reply is dropped: UDP gives no delivery guarantee, and a worker must not stall.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use memcrab_proto::binary as bin;
use memcrab_proto::text::admin::{Admin, CrawlKind};
use memcrab_proto::text::meta::Meta;
use memcrab_proto::text::{self, Request, KEY_MAX_LEN};
use mio::{Interest, Poll, Token};

use crate::exec::Flow;
use crate::out::Out;
use crate::request::{Done, Session};
use crate::server::{ConnInfo, Ctx, Server};
use crate::startup::settings::parse_config;

/// UDP sockets' poll tokens are `UDP_TOKENS + i`; connection slots never get this
/// far.
pub const UDP_TOKENS: usize = usize::MAX / 2;
/// The frame header's size (doc/protocol.txt).
pub const HEADER_BYTES: usize = 8;
/// The largest datagram sent, header included (memcached's UDP_MAX_PAYLOAD_SIZE).
pub const MAX_DATAGRAM_BYTES: usize = 1400;
/// Reply bytes per datagram (memcached's UDP_DATA_SIZE).
pub const DATA_BYTES: usize = MAX_DATAGRAM_BYTES - HEADER_BYTES;
/// The receive buffer (memcached's UDP_READ_BUFFER_SIZE); no UDP datagram is larger.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Datagrams served per readiness turn before the worker's connections get a turn.
const DATAGRAMS_PER_TURN: usize = 64;
/// How long a send waits for room in the socket's send buffer.
const SEND_WAIT_MS: i32 = 10;
/// A reply buffer larger than this is released after its datagram.
const KEEP_OUT_BYTES: usize = 256 * 1024;

/// One worker's handles on every UDP socket, polled as `UDP_TOKENS + i`, and which
/// of them to serve this turn: what a driver holds for UDP.
pub struct Ports {
    ports: Vec<Port>,
    /// Sockets that used their turn's quota with datagrams maybe left; after
    /// [`Ports::watch`] all of them, as datagrams may have come before it.
    ready: Vec<usize>,
}

impl Ports {
    /// Dups each of `socks` for one worker (see [`Port::new`]).
    pub fn new(server: &Server, socks: &[std::net::UdpSocket]) -> io::Result<Self> {
        let ports = socks
            .iter()
            .map(|s| Port::new(server, s))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Ports {
            ports,
            ready: Vec::new(),
        })
    }

    /// Registers every socket with worker `worker`'s poll and queues them all to be
    /// served; false, said once, if the kernel refused.
    pub fn watch(&mut self, poll: &Poll, worker: usize) -> bool {
        for (i, port) in self.ports.iter_mut().enumerate() {
            if let Err(e) =
                poll.registry()
                    .register(&mut port.sock, Token(UDP_TOKENS + i), Interest::READABLE)
            {
                eprintln!("memcrab: worker {worker}: cannot watch a UDP socket: {e}");
                return false;
            }
        }
        self.ready = (0..self.ports.len()).collect();
        true
    }

    /// Takes every socket off `poll` (a failed ring's worker goes on on epoll,
    /// which registers them again).
    pub fn unwatch(&mut self, poll: &Poll) {
        for port in &mut self.ports {
            let _ = poll.registry().deregister(&mut port.sock);
        }
    }

    /// If `token` is a UDP socket's, queues that socket to be served (once) and says
    /// so; false for a connection's token.
    pub fn note(&mut self, token: usize) -> bool {
        let Some(i) = token.checked_sub(UDP_TOKENS) else {
            return false;
        };
        if !self.ready.contains(&i) {
            self.ready.push(i);
        }
        true
    }

    /// Whether a socket waits to be served (the driver must not block).
    pub fn waiting(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Serves the queued sockets, each up to its turn's quota; those that used it
    /// stay queued.
    pub fn serve(&mut self, cx: &Ctx<'_>) {
        let ports = &mut self.ports;
        self.ready
            .retain(|&i| ports.get_mut(i).is_some_and(|p| p.serve(cx)));
    }
}

/// One worker's handle on one UDP socket (a dup of the bound socket; every worker
/// polls every UDP socket, as memcached gives each worker thread one).
struct Port {
    sock: mio::net::UdpSocket,
    info: Arc<ConnInfo>,
    rbuf: Box<[u8]>,
    /// Replies of one datagram; never lends (a datagram is built by copying).
    out: Out,
}

impl Port {
    /// Dups `sock` for one worker and lists it in `stats conns`.
    fn new(server: &Server, sock: &std::net::UdpSocket) -> io::Result<Self> {
        let sock = sock.try_clone()?;
        let fd = sock.as_raw_fd();
        let addr = sock
            .local_addr()
            .map(|a| format!("udp:{a}"))
            .unwrap_or_else(|_| "udp:?".into());
        let info = Arc::new(ConnInfo {
            fd,
            addr,
            listen_addr: None,
            last_cmd: std::sync::atomic::AtomicU32::new(server.engine.clock().now()),
            peer: None,
            state: std::sync::atomic::AtomicU8::new(crate::server::ConnState::Read as u8),
            protocol: None,
        });
        server.conns.lock().insert(fd, Arc::clone(&info));
        Ok(Port {
            sock: mio::net::UdpSocket::from_std(sock),
            info,
            rbuf: vec![0; READ_BUFFER_BYTES].into_boxed_slice(),
            out: Out::new(0),
        })
    }

    /// Serves datagrams until the socket is drained (returns false) or the turn's
    /// quota is used (returns true: call again soon, as no new edge will come).
    fn serve(&mut self, cx: &Ctx<'_>) -> bool {
        cx.fd.set(self.info.fd);
        for _ in 0..DATAGRAMS_PER_TURN {
            let (len, peer) = match self.sock.recv_from(&mut self.rbuf) {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Nothing a peer sends can make recv fail for good; an error is
                    // transient (e.g. ENOMEM). Give the others a turn.
                    if cx.server.verbosity.load(Ordering::Relaxed) > 0 {
                        eprintln!("memcrab: UDP recv failed: {e}");
                    }
                    return true;
                }
            };
            let Some(dgram) = self.rbuf.get(..len) else {
                continue;
            };
            // memcached reads `res > 8` bytes or ignores the datagram.
            if dgram.len() <= HEADER_BYTES {
                continue;
            }
            cx.counters.bytes_read.add(dgram.len() as u64);
            self.info
                .last_cmd
                .store(cx.engine.clock().now(), Ordering::Relaxed);
            let (header, payload) = dgram.split_at(HEADER_BYTES);
            // A request spanning several datagrams is not supported: dropped.
            if header[4..6] != [0u8, 1][..] {
                continue;
            }
            let mut tx = Tx {
                sock: &self.sock,
                peer,
                request_id: [header[0], header[1]],
                first_in_round: true,
                pending: false,
                nreqs: reqs_per_event(cx),
                cx,
            };
            serve_datagram(payload, cx, &mut self.out, &mut tx);
            self.out.clear();
            self.out.free_buffer_over(KEEP_OUT_BYTES);
            if cx.server.shutting_down() {
                return false;
            }
        }
        true
    }
}

/// Sends one datagram's replies to its sender, reproducing memcached's grouping of
/// reply objects into messages (see the module docs).
struct Tx<'a> {
    sock: &'a mio::net::UdpSocket,
    peer: SocketAddr,
    request_id: [u8; 2],
    /// No reply object has been sent (or folded) since the write round began.
    first_in_round: bool,
    /// A request was served since the last write (memcached: `resp_head` is set).
    pending: bool,
    /// memcached's `nreqs`: requests left before it yields (`-R`).
    nreqs: isize,
    cx: &'a Ctx<'a>,
}

impl Tx<'_> {
    /// A request's reply object. Empty means suppressed (`noreply`, quiet mode):
    /// memcached marks those objects "skip" and never sends them.
    fn reply(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.first_in_round = false;
        self.send_message(bytes);
    }

    /// An empty reply object that is not "skip" (`quit`, a multi-get's missing
    /// key): sent as a bare header with total 0 only when it opens a write round.
    fn empty(&mut self) {
        if self.first_in_round {
            self.first_in_round = false;
            self.send_message(&[]);
        }
    }

    /// memcached transmits what it has gathered (`conn_mwrite`).
    fn end_round(&mut self) {
        self.first_in_round = true;
        self.pending = false;
    }

    /// A request is done; `forces_write` if memcached writes at once after it
    /// (`mn`, `quit`, a binary NOOP or error), `more` if bytes follow it in
    /// the datagram. This walks memcached's `conn_new_cmd` state: every `-R`
    /// requests it writes what is pending and yields (`conn_yields`), and it writes
    /// before waiting for the next datagram.
    fn request_done(&mut self, forces_write: bool, more: bool) {
        self.pending = true;
        if forces_write {
            self.end_round();
        }
        loop {
            self.nreqs -= 1;
            if self.nreqs >= 0 && more {
                return;
            }
            if self.pending {
                self.end_round();
                continue;
            }
            if self.nreqs >= 0 {
                return;
            }
            self.cx.counters.conn_yields.incr();
            self.nreqs = reqs_per_event(self.cx);
            if !more {
                return;
            }
        }
    }

    /// The datagram ends in an incomplete request: memcached writes what is
    /// pending, then parses (and fails) once more.
    fn incomplete(&mut self) {
        if self.pending {
            self.end_round();
            self.nreqs -= 1;
            if self.nreqs < 0 {
                self.cx.counters.conn_yields.incr();
            }
        }
    }

    fn send_message(&mut self, msg: &[u8]) {
        // memcached caps the announced total at 65535 (and lets the sequence wrap).
        let total = u16::try_from(msg.len().div_ceil(DATA_BYTES)).unwrap_or(u16::MAX);
        let mut dgram = [0u8; MAX_DATAGRAM_BYTES];
        dgram[0..2].copy_from_slice(&self.request_id);
        dgram[4..6].copy_from_slice(&total.to_be_bytes());
        if msg.is_empty() {
            self.send_datagram(&dgram[..HEADER_BYTES]);
            return;
        }
        for (seq, chunk) in msg.chunks(DATA_BYTES).enumerate() {
            // Truncation is the wrap memcached's 16-bit counter does.
            dgram[2..4].copy_from_slice(&(seq as u16).to_be_bytes());
            let end = HEADER_BYTES + chunk.len();
            dgram[HEADER_BYTES..end].copy_from_slice(chunk);
            if !self.send_datagram(&dgram[..end]) {
                return;
            }
        }
    }

    /// Returns false when the datagram could not be sent (the rest of its message
    /// is then dropped).
    fn send_datagram(&mut self, d: &[u8]) -> bool {
        let mut waited = false;
        loop {
            match self.sock.send_to(d, self.peer) {
                Ok(n) => {
                    self.cx.counters.bytes_written.add(n as u64);
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && !waited => {
                    waited = true;
                    let mut pfd = libc::pollfd {
                        fd: self.sock.as_raw_fd(),
                        events: libc::POLLOUT,
                        revents: 0,
                    };
                    // SAFETY: pfd is one valid, initialized pollfd that lives across
                    // the call; poll only writes its revents.
                    unsafe { libc::poll(&mut pfd, 1, SEND_WAIT_MS) };
                }
                Err(e) => {
                    if self.cx.server.verbosity.load(Ordering::Relaxed) > 0 {
                        eprintln!("memcrab: UDP send to {} failed: {e}", self.peer);
                    }
                    return false;
                }
            }
        }
    }
}

/// `-R`, at least 1.
fn reqs_per_event(cx: &Ctx<'_>) -> isize {
    isize::try_from(cx.server.settings.reqs_per_event.max(1)).unwrap_or(isize::MAX)
}

/// What the datagram policy needs to know of a request before it runs.
enum Kind {
    /// A text get with this many keys, none over [`KEY_MAX_LEN`]: one message per hit.
    Get { keys: usize },
    /// Any other text request; `mn` makes memcached write out what it has.
    Text { is_mn: bool },
    /// A binary packet with this opcode.
    Binary { opcode: u8 },
}

/// Serves one datagram's payload through the request step, framing its replies as
/// memcached does (see the module docs and [`Tx`]).
fn serve_datagram(payload: &[u8], cx: &Ctx<'_>, out: &mut Out, tx: &mut Tx<'_>) {
    let binary = payload.first() == Some(&bin::REQ_MAGIC);
    // SASL and UDP exclude each other (settings), so this stays unauthenticated.
    let mut session = Session::datagram(&cx.server.settings, binary);
    let cfg = parse_config(&cx.server.settings);
    let mut pos = 0;
    while let Some(input) = payload.get(pos..).filter(|i| !i.is_empty()) {
        let kind = if binary {
            Kind::Binary {
                opcode: input.get(1).copied().unwrap_or_default(),
            }
        } else {
            match text::parse(input, &cfg) {
                // A key over 250 bytes makes memcached drop every object of this get
                // and send only the error: run it in one piece, so the executor does
                // the same.
                Some((Ok(Request::Get { keys, .. }), _))
                    if keys.clone().all(|k| k.len() <= KEY_MAX_LEN) =>
                {
                    Kind::Get { keys: keys.count() }
                }
                Some((Ok(Request::Meta(Meta::Noop)), _)) => Kind::Text { is_mn: true },
                Some((Ok(Request::Admin(Admin::Crawl { kind, .. })), consumed))
                    if kind != CrawlKind::Crawl =>
                {
                    // A key dump cannot stream over datagrams: dropped unanswered.
                    pos += consumed;
                    continue;
                }
                _ => Kind::Text { is_mn: false },
            }
        };
        if let Kind::Get { keys } = kind {
            match serve_get(&mut session, input, keys, cx, out, tx) {
                Some(consumed) => pos += consumed,
                None => return,
            }
            tx.request_done(false, pos < payload.len());
            continue;
        }
        out.clear();
        let Some(Done { consumed, flow, .. }) = session.step(input, cx, out, usize::MAX) else {
            // The rest of the request would have to come in another datagram.
            tx.incomplete();
            return;
        };
        pos += consumed;
        // Text replies suppressed by noreply or quiet mode are "skip" objects, never
        // sent; an empty binary reply (a quiet command) is an empty object.
        let answer = |tx: &mut Tx<'_>, out: &[u8]| {
            if binary && out.is_empty() {
                tx.empty();
            } else {
                tx.reply(out);
            }
        };
        let forces_write = match kind {
            Kind::Binary { opcode } => opcode == bin::op::NOOP || is_bin_error(out),
            Kind::Text { is_mn } => is_mn,
            Kind::Get { .. } => false,
        };
        match flow {
            Flow::Next | Flow::Suspend => answer(tx, out),
            Flow::Watch => {
                // A datagram cannot become a log stream: memcached never answers an
                // accepted UDP `watch`, nor what follows it in the datagram (its
                // refusals are answered).
                if session.accept_watch(input, cx, out).is_some() {
                    return;
                }
                answer(tx, out)
            }
            Flow::Swallow(n) => {
                // A refused value: memcached sends the error once the data has been
                // swallowed, which never happens if it is not in this datagram.
                if n > payload.len() - pos {
                    return;
                }
                tx.reply(out);
                pos += session.skip(&payload[pos..]);
                tx.request_done(false, pos < payload.len());
                continue;
            }
            // `quit` leaves an empty reply object that is not "skip" (binary quit
            // answers unless quiet).
            Flow::Quit => {
                if out.is_empty() {
                    tx.empty();
                } else {
                    tx.reply(out);
                }
                return;
            }
            // memcached closes a TCP connection here; a UDP one drops the rest
            // (sending a binary error reply first).
            Flow::Hangup => {
                tx.reply(out);
                return;
            }
            Flow::Close => return,
        }
        tx.request_done(forces_write, pos < payload.len());
    }
}

/// A text get over UDP: one message per hit, as memcached's one response object per
/// key, `END` on the last key's (see the module docs). Returns the bytes consumed,
/// or `None` if the datagram ends here.
fn serve_get(
    session: &mut Session,
    input: &[u8],
    keys: usize,
    cx: &Ctx<'_>,
    out: &mut Out,
    tx: &mut Tx<'_>,
) -> Option<usize> {
    let mut first = true;
    loop {
        out.clear();
        // With a limit of 0 the executor pauses after every key that produced output.
        let Some(Done { consumed, flow, .. }) = session.step(input, cx, out, 0) else {
            tx.incomplete();
            return None;
        };
        if flow == Flow::Suspend {
            // `resume` keys are done and only the last one hit: the first key
            // missed if there were more.
            if first && session.resume() > 1 {
                tx.empty();
            }
            tx.reply(out);
            first = false;
            continue;
        }
        // Without a pause no key hit before the last, so with two keys or more the
        // first missed.
        if first && keys >= 2 {
            tx.empty();
        }
        tx.reply(out);
        return Some(consumed);
    }
}

/// Whether a binary reply carries an error status (memcached's `write_bin_error`
/// writes at once).
fn is_bin_error(reply: &[u8]) -> bool {
    reply.get(6..8).is_some_and(|st| st != [0, 0])
}
