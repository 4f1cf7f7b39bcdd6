//! One client connection: its buffers and the read → parse → execute → write cycle.
//!
//! ```text
//!   socket ──read──► rbuf[rpos..rend] ──parse/execute (loop)──► wbuf ──write (one)──► socket
//! ```
//!
//! Every request already buffered is parsed and executed in one loop and all their
//! replies are written with a single `write`: one send per batch, not per request.
//! Memory per connection is bounded: the read buffer holds at most one request (a
//! value is at most `-I`, a get line at most [`MAX_GET_LINE`]), and while more than
//! [`OUTPUT_HIGH_WATER`] bytes of replies are unsent the connection neither parses
//! nor reads, so a client that never reads its replies cannot grow the server.

use std::io::{self, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use memcrab_proto::binary::{self as bin, Frame, Reject};
use memcrab_proto::text::{self, Action, Request};

use crate::binary::SaslState;
use crate::exec::{self, Ctx, Flow};
use crate::server::ConnInfo;
use crate::settings::Protocol;

/// Read buffer size to start with, and to shrink back to (memcached's is 16 KiB).
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// Buffers larger than this are released when they empty.
const KEEP_BUFFER_BYTES: usize = 256 * 1024;
/// Unsent reply bytes above which a connection stops reading and parsing.
pub const OUTPUT_HIGH_WATER: usize = 256 * 1024;
/// Longest get line buffered (memcached has no limit).
pub const MAX_GET_LINE: usize = 1024 * 1024;

/// The request parsers' limits under the server's settings (TCP and UDP alike).
pub fn parse_config(settings: &crate::settings::Settings) -> text::Config {
    text::Config {
        item_size_max: settings.item_size_max,
        use_cas: settings.use_cas,
        max_get_line: MAX_GET_LINE,
    }
}

/// Consumes what is buffered (`rend - *rpos` bytes from `*rpos`) of the `*swallow`
/// bytes the connection still discards; true once none are left to discard.
#[inline]
fn skip_swallowed(swallow: &mut usize, rpos: &mut usize, rend: usize) -> bool {
    let n = (*swallow).min(rend - *rpos);
    *rpos += n;
    *swallow -= n;
    *swallow == 0
}

/// A TCP or unix stream.
pub enum Stream {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
}

impl Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    pub fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
        }
    }
}

/// What the worker should do with a connection after driving it.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait for the socket to become readable or writable.
    Wait,
    /// It used its `-R` budget with requests still buffered: drive it again soon.
    Yield,
    /// Close it.
    Close,
}

pub struct Conn {
    stream: Stream,
    pub info: Arc<ConnInfo>,
    /// `rbuf[rpos..rend]` is received and not yet consumed; `rbuf.len()` is capacity.
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    /// `wbuf[wpos..]` is reply bytes not yet sent.
    wbuf: Vec<u8>,
    wpos: usize,
    /// Bytes of a refused data block still to discard.
    swallow: usize,
    /// Keys of a suspended multi-get already answered.
    resume: usize,
    /// The socket may have unread bytes (a readable event came and no short read or
    /// `WouldBlock` has been seen since).
    may_read: bool,
    /// The peer closed its side; serve what is buffered, then close.
    eof: bool,
    /// `quit`: close once the pending output is written.
    quit: bool,
    /// Which protocol this connection speaks (decided on its first bytes).
    proto: Proto,
    /// Binary protocol SASL state (`-S`).
    sasl: SaslState,
    /// `-Y`: the length (with `\r\n`) of an auth token block announced by a `set`
    /// line and not yet consumed.
    auth_pending: Option<usize>,
}

/// A connection's protocol, as memcached's `c->protocol`/`try_read_command`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    /// Not yet looked at the settings.
    Unset,
    /// `-B auto`: the first byte decides.
    Negotiate,
    Ascii,
    /// `-Y`: only the authentication `set` until it succeeds.
    AsciiAuth,
    Binary,
}

/// memcached's `try_read_command_asciiauth` closes a connection whose first line
/// has no newline within this many bytes.
const AUTH_LINE_MAX: usize = 2048;

impl Conn {
    pub fn new(stream: Stream, info: Arc<ConnInfo>) -> Self {
        Conn {
            stream,
            info,
            rbuf: Vec::new(),
            rpos: 0,
            rend: 0,
            wbuf: Vec::new(),
            wpos: 0,
            swallow: 0,
            resume: 0,
            may_read: true,
            eof: false,
            quit: false,
            proto: Proto::Unset,
            sasl: SaslState::default(),
            auth_pending: None,
        }
    }

    pub fn stream(&mut self) -> &mut Stream {
        &mut self.stream
    }

    pub fn set_readable(&mut self) {
        self.may_read = true;
    }

    pub fn has_output(&self) -> bool {
        self.wpos < self.wbuf.len()
    }

    /// Runs the connection as far as it can go without blocking.
    pub fn drive(&mut self, cx: &Ctx<'_>, reqs_per_event: usize) -> Next {
        let mut budget = reqs_per_event;
        loop {
            if self.process(cx, &mut budget).is_err() {
                return Next::Close;
            }
            if self.has_output() {
                match self.flush(cx) {
                    Err(_) => return Next::Close,
                    Ok(()) if self.wbuf.len() - self.wpos > OUTPUT_HIGH_WATER => return Next::Wait,
                    Ok(()) => {}
                }
            }
            if self.quit {
                return if self.has_output() {
                    Next::Wait
                } else {
                    Next::Close
                };
            }
            if budget == 0 {
                return Next::Yield;
            }
            if self.eof {
                // Everything complete has been served; what is left can never complete.
                return if self.has_output() {
                    Next::Wait
                } else {
                    Next::Close
                };
            }
            if !self.may_read {
                return Next::Wait;
            }
            match self.fill(cx) {
                Ok(true) => {}
                Ok(false) => return Next::Wait,
                Err(_) => return Next::Close,
            }
        }
    }

    /// Reads once. Returns whether bytes (or EOF) arrived.
    fn fill(&mut self, cx: &Ctx<'_>) -> io::Result<bool> {
        if self.rpos == self.rend {
            self.rpos = 0;
            self.rend = 0;
            if self.rbuf.len() > KEEP_BUFFER_BYTES {
                self.rbuf = Vec::new();
            }
        }
        if self.rbuf.is_empty() {
            self.rbuf = vec![0; READ_BUFFER_BYTES];
        }
        if self.rbuf.len() - self.rend < READ_BUFFER_BYTES / 4 {
            if self.rpos > 0 {
                self.rbuf.copy_within(self.rpos..self.rend, 0);
                self.rend -= self.rpos;
                self.rpos = 0;
            }
            if self.rbuf.len() - self.rend < READ_BUFFER_BYTES / 4 {
                let grown = self.rbuf.len() * 2;
                self.rbuf.resize(grown, 0);
            }
        }
        let space = self.rbuf.len() - self.rend;
        loop {
            match self.stream.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    self.eof = true;
                    self.may_read = false;
                    return Ok(true);
                }
                Ok(n) => {
                    cx.counters.bytes_read.add(n as u64);
                    self.rend += n;
                    // A short read drained the socket: the next readable event says
                    // when more arrives. This saves the extra read that would only
                    // return WouldBlock.
                    if n < space {
                        self.may_read = false;
                    }
                    self.info
                        .last_cmd
                        .store(cx.engine.clock().now(), Ordering::Relaxed);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.may_read = false;
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes pending output once (more if the kernel takes it all and more is left).
    fn flush(&mut self, cx: &Ctx<'_>) -> io::Result<()> {
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    cx.counters.bytes_written.add(n as u64);
                    self.wpos += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wpos = 0;
            self.wbuf.clear();
            if self.wbuf.capacity() > KEEP_BUFFER_BYTES {
                self.wbuf = Vec::new();
            }
        }
        Ok(())
    }

    /// Flushes for shutdown. Returns whether everything was sent.
    pub fn flush_for_shutdown(&mut self, cx: &Ctx<'_>) -> bool {
        self.flush(cx).is_ok_and(|()| !self.has_output())
    }

    /// Parses and executes buffered requests while the budget and the output buffer
    /// allow. `Err` means close now.
    fn process(&mut self, cx: &Ctx<'_>, budget: &mut usize) -> Result<(), ()> {
        match self.proto {
            Proto::Ascii => self.process_text(cx, budget),
            Proto::Binary => self.process_binary(cx, budget),
            Proto::Unset => {
                let s = &cx.server.settings;
                self.proto = match s.protocol {
                    Protocol::Auto => Proto::Negotiate,
                    Protocol::Binary => Proto::Binary,
                    Protocol::Ascii if s.auth_file.is_some() => Proto::AsciiAuth,
                    Protocol::Ascii => Proto::Ascii,
                };
                self.process(cx, budget)
            }
            Proto::Negotiate => {
                if self.rpos == self.rend {
                    return Ok(());
                }
                self.proto = if self.rbuf[self.rpos] == bin::REQ_MAGIC {
                    Proto::Binary
                } else {
                    Proto::Ascii
                };
                self.process(cx, budget)
            }
            Proto::AsciiAuth => {
                self.process_ascii_auth(cx, budget)?;
                if self.proto == Proto::Ascii {
                    self.process_text(cx, budget)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// memcached's `try_read_command_asciiauth` (`-Y`): before authentication only
    /// `set <key> <flags> <exptime> <bytes>` followed by `<user> <password>` is
    /// served; every other line answers `CLIENT_ERROR unauthenticated`.
    fn process_ascii_auth(&mut self, cx: &Ctx<'_>, budget: &mut usize) -> Result<(), ()> {
        // memcached reuses one response object until it transmits (when it needs
        // more bytes), so an unsent reply of this mode is replaced by the next one.
        let mut last: Option<usize> = None;
        while *budget > 0 && !self.quit && self.proto == Proto::AsciiAuth {
            let input = &self.rbuf[self.rpos..self.rend];
            let need = match self.auth_pending {
                Some(n) => n,
                None => {
                    if input.len() < 2 {
                        break;
                    }
                    let Some(el) = input.iter().position(|&b| b == b'\n') else {
                        if input.len() > AUTH_LINE_MAX {
                            return Err(());
                        }
                        break;
                    };
                    *budget -= 1;
                    let line = &input[..el];
                    let tokens = auth_tokens(line);
                    let size = (tokens.len() >= 5 && tokens[0] == b"set")
                        .then(|| memcrab_proto::num::safe_strtoul(tokens[4]).ok())
                        .flatten();
                    self.rpos += el + 1;
                    match size {
                        None => {
                            auth_reply(
                                &mut self.wbuf,
                                &mut last,
                                b"CLIENT_ERROR unauthenticated\r\n",
                            );
                            continue;
                        }
                        // Deliberate difference: memcached would buffer up to 4 GB.
                        Some(n) if n as usize > cx.server.settings.item_size_max => {
                            return Err(());
                        }
                        Some(n) => {
                            self.auth_pending = Some(n as usize + 2);
                            n as usize + 2
                        }
                    }
                }
            };
            let input = &self.rbuf[self.rpos..self.rend];
            if input.len() < need {
                break;
            }
            let cont = &input[..need];
            self.auth_pending = None;
            self.rpos += need;
            let Some(payload) = cont.strip_suffix(b"\r\n") else {
                auth_reply(
                    &mut self.wbuf,
                    &mut last,
                    b"CLIENT_ERROR bad command line termination\r\n",
                );
                continue;
            };
            let tokens = auth_tokens(payload);
            if tokens.len() < 2 {
                auth_reply(
                    &mut self.wbuf,
                    &mut last,
                    b"CLIENT_ERROR bad authentication token format\r\n",
                );
                continue;
            }
            let ok = cx
                .server
                .settings
                .users
                .as_deref()
                .is_some_and(|u| u.check(tokens[0], tokens[1]));
            cx.counters.auth_cmds.incr();
            if ok {
                auth_reply(&mut self.wbuf, &mut last, b"STORED\r\n");
                self.proto = Proto::Ascii;
            } else {
                cx.counters.auth_errors.incr();
                auth_reply(
                    &mut self.wbuf,
                    &mut last,
                    b"CLIENT_ERROR authentication failure\r\n",
                );
            }
        }
        Ok(())
    }

    /// Binary packets (`try_read_command_binary` and `dispatch_bin_command`).
    fn process_binary(&mut self, cx: &Ctx<'_>, budget: &mut usize) -> Result<(), ()> {
        let settings = &cx.server.settings;
        let cfg = parse_config(settings);
        while *budget > 0 && self.wbuf.len() - self.wpos <= OUTPUT_HIGH_WATER && !self.quit {
            if self.swallow > 0 {
                if !skip_swallowed(&mut self.swallow, &mut self.rpos, self.rend) {
                    break;
                }
                continue;
            }
            let input = &self.rbuf[self.rpos..self.rend];
            let (header, extras, key) = match bin::frame(input) {
                Frame::NeedMore => break,
                // memcached closes at once, dropping replies not yet sent.
                Frame::BadMagic => return Err(()),
                Frame::Packet(header, extras, key) => (header, extras, key),
            };
            let prefix = header.prefix_len();
            let decoded = bin::decode(&header, extras, key, settings.sasl, self.sasl.authenticated)
                .and_then(|req| crate::binary::with_value_len(req, &cfg, cx));
            let (req, value_len) = match decoded {
                Ok(r) => r,
                Err(Reject::Close(st)) => {
                    *budget -= 1;
                    bin::error(&mut self.wbuf, &header, st);
                    self.quit = true;
                    self.rpos = self.rend;
                    return Ok(());
                }
                Err(Reject::Swallow(st, n)) => {
                    *budget -= 1;
                    bin::error(&mut self.wbuf, &header, st);
                    self.rpos += prefix;
                    self.swallow = n;
                    continue;
                }
            };
            let Some(value) = input.get(prefix..prefix + value_len) else {
                break;
            };
            *budget -= 1;
            let flow =
                crate::binary::execute(&header, req, value, cx, &mut self.wbuf, &mut self.sasl);
            self.rpos += prefix + value_len;
            match flow {
                Flow::Next | Flow::Suspend => {}
                Flow::Swallow(n) => self.swallow = n,
                Flow::Quit => {
                    self.quit = true;
                    self.rpos = self.rend;
                }
                Flow::Close => return Err(()),
            }
        }
        Ok(())
    }

    /// Text-protocol requests.
    fn process_text(&mut self, cx: &Ctx<'_>, budget: &mut usize) -> Result<(), ()> {
        let cfg = parse_config(&cx.server.settings);
        // Pipelined requests overlap their cache misses: while request i executes,
        // request i+1 (parsed one step earlier, its index bucket prefetched then)
        // has its item prefetched, and request i+2 is parsed and its bucket
        // prefetched. `next1`/`next2` are those parsed requests, in order, starting
        // where the current one ends; anything but `Flow::Next` drops them (they are
        // parsed again, from the right place, on the next turn).
        let mut next1: Option<text::Parsed<'_>> = None;
        let mut next2: Option<text::Parsed<'_>> = None;
        while *budget > 0 && self.wbuf.len() - self.wpos <= OUTPUT_HIGH_WATER && !self.quit {
            if self.swallow > 0 {
                (next1, next2) = (None, None);
                if !skip_swallowed(&mut self.swallow, &mut self.rpos, self.rend) {
                    break;
                }
                continue;
            }
            let (parsed, consumed) = match next1.take() {
                Some(p) => p,
                None => {
                    let input = &self.rbuf[self.rpos..self.rend];
                    if input.is_empty() {
                        break;
                    }
                    let Some(p) = text::parse(input, &cfg) else {
                        break;
                    };
                    p
                }
            };
            next1 = next2.take();
            *budget -= 1;
            if *budget > 0 && lookahead(&parsed) {
                let mut end = self.rpos + consumed;
                match &next1 {
                    Some((Ok(req), used)) => {
                        prefetch(cx, req, false);
                        end += used;
                    }
                    Some(_) => {}
                    None => {
                        next1 = parse_ahead(&self.rbuf[end..self.rend], &cfg, cx);
                        end += next1.as_ref().map_or(0, |n| n.1);
                    }
                }
                if *budget > 1 && next1.as_ref().is_some_and(|n| lookahead(&n.0)) {
                    next2 = parse_ahead(&self.rbuf[end..self.rend], &cfg, cx);
                }
            }
            match parsed {
                Ok(req) => match exec::execute(
                    req,
                    cx,
                    &mut self.wbuf,
                    &mut self.resume,
                    OUTPUT_HIGH_WATER,
                ) {
                    Flow::Next => {}
                    Flow::Swallow(n) => {
                        (next1, next2) = (None, None);
                        self.swallow = n;
                    }
                    Flow::Quit => self.quit = true,
                    Flow::Close => return Err(()),
                    Flow::Suspend => break,
                },
                Err(e) => match e.action() {
                    Action::Reply(Some(r)) => self.wbuf.extend_from_slice(r),
                    Action::Reply(None) => {}
                    // Replies to earlier requests still go out, as memcached's do;
                    // nothing after this line is read.
                    Action::Close => {
                        self.quit = true;
                        self.rpos = self.rend;
                        return Ok(());
                    }
                },
            }
            self.rpos += consumed;
        }
        Ok(())
    }
}

/// Whether to look past a request: only gets and complete stores, the requests
/// that pipelines are made of (anything else may change how what follows parses).
fn lookahead(parsed: &Result<Request<'_>, text::Error>) -> bool {
    matches!(parsed, Ok(Request::Get { .. } | Request::Store { .. }))
}

/// Parses the request at the front of `input` (if complete) and starts loading its
/// key's index bucket.
fn parse_ahead<'a>(input: &'a [u8], cfg: &text::Config, cx: &Ctx<'_>) -> Option<text::Parsed<'a>> {
    if input.is_empty() {
        return None;
    }
    let p = text::parse(input, cfg);
    if let Some((Ok(req), _)) = &p {
        prefetch(cx, req, true);
    }
    p
}

/// Starts loading a pipelined request's (first) key: its index bucket, or, once
/// that is cached, its item (gets only: a set does not read the old item).
fn prefetch(cx: &Ctx<'_>, req: &Request<'_>, index: bool) {
    let key = match req {
        Request::Get { keys, .. } => keys.clone().next(),
        Request::Store { key, .. } if index => Some(*key),
        _ => None,
    };
    match key {
        Some(k) if index => cx.engine.prefetch_index(k),
        Some(k) => cx.engine.prefetch_item(k),
        None => {}
    }
}

/// memcached's `tokenize_command` on a line (split on spaces, empty tokens skipped,
/// the text ends at a NUL), as far as the auth handshake needs it.
fn auth_tokens(line: &[u8]) -> Vec<&[u8]> {
    let line = match line.iter().position(|&b| b == 0) {
        Some(n) => &line[..n],
        None => line,
    };
    line.split(|&b| b == b' ')
        .filter(|t| !t.is_empty())
        .take(text::MAX_TOKENS - 1)
        .collect()
}

/// Appends an auth-mode reply, replacing the previous one of this batch (see
/// `process_ascii_auth`).
fn auth_reply(wbuf: &mut Vec<u8>, last: &mut Option<usize>, reply: &[u8]) {
    if let Some(start) = *last {
        wbuf.truncate(start);
    }
    *last = Some(wbuf.len());
    wbuf.extend_from_slice(reply);
}
