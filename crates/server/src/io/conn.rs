//! One client connection over a stream (TCP or unix): its buffers and the read →
//! serve → write cycle. The requests themselves are the request step's
//! ([`crate::request`]); this file only moves bytes.
//!
//! ```text
//!   socket ──read──► rbuf[rpos..rend] ──Session::serve──► wbuf ──write (one)──► socket
//!                                                          (Out: bytes + lent values;
//!                                                           writev when it holds leases)
//! ```
//!
//! A connection that sent `watch` becomes a log stream instead ([`Conn::drive_watch`]).
//!
//! Every request already buffered is served in one batch and all their replies are
//! written with a single `write`: one send per batch, not per request. Memory per
//! connection is bounded: the read buffer holds at most one request (a value is at
//! most `-I`, a get line at most [`crate::startup::settings::MAX_GET_LINE`]), and while more
//! than [`OUTPUT_HIGH_WATER`] bytes of replies are unsent the connection neither
//! serves nor reads, so a client that never reads its replies cannot grow the server.
//!
//! Large values may be lent by the store instead of copied ([`crate::io::out`]): on a
//! plain TCP or unix stream, values of at least `-o value_lend_min` bytes; the
//! output is then sent with one `writev` of up to `IOV_MAX` pieces per call, and a
//! lease is released once the kernel took its last byte. Lent bytes count as unsent
//! output, so a client that never reads holds at most about [`OUTPUT_HIGH_WATER`]
//! of leases. TLS streams always copy (the TLS layer encrypts from a buffer).

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use memcrab_proto::text::watch::{self as watch_reply, CloseReason};

use crate::admin::watch::Watcher;
use crate::exec::Ctx;
use crate::io::net::Stream;
use crate::io::out::Out;
use crate::request::{Session, Stop};
use crate::server::ConnInfo;

/// Read buffer size to start with, and to shrink back to (memcached's is 16 KiB).
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// Buffers larger than this are released when they empty.
const KEEP_BUFFER_BYTES: usize = 256 * 1024;
/// Unsent reply bytes above which a connection stops reading and serving.
pub const OUTPUT_HIGH_WATER: usize = 256 * 1024;

/// What the worker should do with a connection after driving it.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait for the socket to become readable or writable.
    Wait,
    /// As `Wait`, and the connection has just become a `watch` stream: drive it
    /// whenever the worker's waker fires (the watch hub wakes it for new lines).
    Watching,
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
    /// The output from stream position `wpos` on is not yet sent (lent values
    /// included: positions count them).
    wbuf: Out,
    wpos: usize,
    /// The socket may have unread bytes (a readable event came and no short read or
    /// `WouldBlock` has been seen since).
    may_read: bool,
    /// The peer closed its side; serve what is buffered, then close.
    eof: bool,
    /// A readiness event said the peer closed its side: read until the EOF even
    /// after a short read. The data and the FIN often come in one edge-triggered
    /// event, and no further event comes for a FIN already reported.
    read_closed: bool,
    /// `quit`: close once the pending output is written.
    quit: bool,
    /// The request state: protocol, authentication, a refused value being
    /// discarded, a suspended multi-get.
    session: Session,
    /// `watch`: the connection is a log stream (see [`Conn::drive_watch`]).
    watcher: Option<Watcher>,
    /// Why it closes, should it close now (`watch connevents`' `reason`).
    close_reason: CloseReason,
}

impl Conn {
    /// A connection whose output lends values of at least `lend_min` bytes (0: never;
    /// a TLS stream never lends).
    pub fn new(stream: Stream, info: Arc<ConnInfo>, session: Session, lend_min: usize) -> Self {
        let lend_min = match stream {
            Stream::Tls(_) => 0,
            _ => lend_min,
        };
        Conn {
            stream,
            info,
            rbuf: Vec::new(),
            rpos: 0,
            rend: 0,
            wbuf: Out::new(lend_min),
            wpos: 0,
            may_read: true,
            eof: false,
            read_closed: false,
            quit: false,
            session,
            watcher: None,
            close_reason: CloseReason::Error,
        }
    }

    /// Whether the connection is a `watch` stream.
    pub fn is_watching(&self) -> bool {
        self.watcher.is_some()
    }

    /// Why the connection is closing, as memcached names it: `normal` after the
    /// client's EOF or `quit`, `shutdown` after the `shutdown` command, `error` for
    /// anything else (a protocol error, an I/O error, a watcher).
    pub fn close_reason(&self) -> CloseReason {
        self.close_reason
    }

    pub fn stream(&mut self) -> &mut Stream {
        &mut self.stream
    }

    /// What a readiness event says of the socket: closed for reading (or failed),
    /// or readable.
    pub fn note_event(&mut self, ev: &mio::event::Event) {
        if ev.is_read_closed() || ev.is_error() {
            self.set_read_closed();
        } else if ev.is_readable() {
            self.set_readable();
        }
    }

    pub fn set_readable(&mut self) {
        self.may_read = true;
    }

    /// The peer closed its side (the event's read-closed flag): keep reading to the
    /// EOF.
    pub fn set_read_closed(&mut self) {
        self.may_read = true;
        self.read_closed = true;
    }

    /// Replies not yet sent, or (TLS) records the stream holds for the socket.
    pub fn has_output(&self) -> bool {
        self.wpos < self.wbuf.len() || self.stream.has_pending_output()
    }

    /// Runs the connection as far as it can go without blocking.
    pub fn drive(&mut self, cx: &Ctx<'_>, reqs_per_event: usize) -> Next {
        cx.fd.set(self.info.fd);
        if self.watcher.is_some() {
            return self.drive_watch(cx);
        }
        let mut budget = reqs_per_event;
        loop {
            let stop = self.serve(cx, &mut budget);
            if stop == Stop::Close {
                if cx.server.shutting_down() {
                    self.close_reason = CloseReason::Shutdown;
                }
                return Next::Close;
            }
            if stop == Stop::Watch {
                return match self.drive_watch(cx) {
                    Next::Wait => Next::Watching,
                    next => next,
                };
            }
            if self.has_output() {
                match self.flush(cx) {
                    Err(_) => return Next::Close,
                    Ok(()) if self.unsent() > OUTPUT_HIGH_WATER => return Next::Wait,
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
            if stop == Stop::OutputFull {
                // The output drained below the limit: serve what is buffered (a
                // suspended multi-get, the rest of a pipeline) before waiting for
                // more input, which may never come.
                continue;
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

    /// Reply bytes not yet sent.
    fn unsent(&self) -> usize {
        self.wbuf.len() - self.wpos
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
                    self.close_reason = CloseReason::Normal;
                    return Ok(true);
                }
                Ok(n) => {
                    cx.counters.bytes_read.add(n as u64);
                    self.rend += n;
                    // A short read drained the socket: the next readable event says
                    // when more arrives. This saves the extra read that would only
                    // return WouldBlock. Not after a read-closed event: the EOF is
                    // still to be read, and no event will say so again.
                    if n < space && !self.read_closed {
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
    /// Over io_uring it hands the output to the ring's send, by swapping buffers
    /// when no send is under way (the worker submits it at the end of its turn).
    fn flush(&mut self, cx: &Ctx<'_>) -> io::Result<()> {
        if let Stream::Ring(r) = &mut self.stream {
            if self.wpos == 0 {
                let n = self.wbuf.len();
                if r.give(&mut self.wbuf)? {
                    cx.counters.bytes_written.add(n as u64);
                }
                return Ok(());
            }
        }
        while self.wpos < self.wbuf.len() {
            let wrote = match self.wbuf.owned_from(self.wpos) {
                Some(bytes) => self.stream.write(bytes),
                None => {
                    let mut slices = Vec::new();
                    self.wbuf.io_slices(self.wpos, &mut slices);
                    self.stream.write_vectored(&slices)
                }
            };
            match wrote {
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
        self.stream.flush()?;
        if self.wpos == self.wbuf.len() {
            self.wpos = 0;
            self.wbuf.clear();
            self.wbuf.free_buffer_over(KEEP_BUFFER_BYTES);
        } else {
            self.wbuf.release_sent(self.wpos);
        }
        Ok(())
    }

    /// Flushes for shutdown. Returns whether everything was sent.
    pub fn flush_for_shutdown(&mut self, cx: &Ctx<'_>) -> bool {
        self.flush(cx).is_ok_and(|()| !self.has_output())
    }

    /// Serves buffered requests while the budget and the output buffer allow.
    fn serve(&mut self, cx: &Ctx<'_>, budget: &mut usize) -> Stop {
        if self.quit {
            return Stop::Quit;
        }
        loop {
            let start = self.rpos;
            let served = self.session.serve(
                &self.rbuf[self.rpos..self.rend],
                cx,
                &mut self.wbuf,
                budget,
                self.wpos + OUTPUT_HIGH_WATER,
            );
            self.rpos += served.consumed;
            match served.stop {
                Stop::Quit => {
                    self.quit = true;
                    self.close_reason = CloseReason::Normal;
                }
                Stop::Hangup => self.quit = true,
                Stop::Watch if !self.start_watch(cx, start) => continue,
                _ => {}
            }
            return served.stop;
        }
    }

    /// After [`Stop::Watch`] (the batch began at `start`): turns the connection into
    /// a log stream if the `watch` stands; false (with memcached's reply queued, and
    /// the connection serving on) when it does not. (The watch paths are kept out of
    /// line, off the request path.)
    #[cold]
    #[inline(never)]
    fn start_watch(&mut self, cx: &Ctx<'_>, start: usize) -> bool {
        let input = &self.rbuf[start..self.rend];
        let Some(events) = self.session.accept_watch(input, cx, &mut self.wbuf) else {
            return false;
        };
        let Some(waker) = cx.server.worker_waker(cx.worker) else {
            self.wbuf.extend_from_slice(watch_reply::FAILED);
            return false;
        };
        let Some(watcher) = cx.server.watch.watch(events, waker) else {
            self.wbuf.extend_from_slice(watch_reply::TOO_MANY);
            return false;
        };
        self.watcher = Some(watcher);
        // What the client sent after `watch` is never served, as in memcached.
        self.rpos = self.rend;
        true
    }

    /// A `watch` stream: moves the log lines waiting for it to the socket (taking more
    /// only while less than [`OUTPUT_HIGH_WATER`] is unsent, so a watcher that does
    /// not read falls behind in the hub instead of growing here), and reads only to
    /// notice the client closing: memcached ignores what a watcher sends. The hub
    /// wakes the worker when lines arrive; a writable socket brings it back too.
    #[cold]
    #[inline(never)]
    fn drive_watch(&mut self, cx: &Ctx<'_>) -> Next {
        loop {
            let mut progress = false;
            if self.unsent() < OUTPUT_HIGH_WATER {
                if let Some(w) = &self.watcher {
                    progress |= w.drain_into(&mut self.wbuf);
                }
            }
            if self.has_output() {
                let unsent = self.unsent();
                if self.flush(cx).is_err() {
                    return Next::Close;
                }
                // Room was made: there may be more to take. (Stopping here would wait
                // for a writable edge that never comes, the socket having room, and
                // the hub wakes a watcher only after it drained.)
                progress |= self.unsent() < unsent;
            }
            if self.may_read {
                match self.discard_input(cx) {
                    Ok(read) => progress |= read,
                    // memcached closes a watcher as `error`, whatever ended it.
                    Err(_) => {
                        self.close_reason = CloseReason::Error;
                        return Next::Close;
                    }
                }
            }
            if !progress {
                return Next::Wait;
            }
        }
    }

    /// Reads and drops what a watcher sent: Ok(true) when bytes came, an error at
    /// EOF. (Not `fill`, to keep that inlined in the request path.)
    fn discard_input(&mut self, cx: &Ctx<'_>) -> io::Result<bool> {
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    cx.counters.bytes_read.add(n as u64);
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
}
