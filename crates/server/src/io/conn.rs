//! One client connection's core: its buffers and the serve cycle, on bytes. It
//! knows no socket: a driver hands it input and a [`Wire`] that moves its output
//! (a socket, [`crate::io::net::Stream`]; or an io_uring send,
//! [`crate::io::uring`]'s `Ring`). The requests themselves are the request step's
//! ([`crate::request`]).
//!
//! ```text
//!   fresh bytes (a ring's receive buffer) ─┐   (served in place when nothing is
//!   Wire::read ──► rbuf[rpos..rend] ───────┴─► Session::serve   buffered before them)
//!                                                   │
//!                                                 wbuf (Out: bytes + lent values)
//!                                                   │ Wire::send (one write, or
//!                                                   ▼ one writev/SENDMSG with leases)
//! ```
//!
//! A connection that sent `watch` becomes a log stream instead ([`Conn::drive`]'s
//! watch branch).
//!
//! Every request already buffered is served in one batch and all their replies are
//! handed to the wire at once: one send per batch, not per request. Memory per
//! connection is bounded: the read buffer holds at most one request beyond what
//! can be served (a value is at most `-I`, a get line at most
//! [`crate::startup::settings::MAX_GET_LINE`]), and while more than
//! [`OUTPUT_HIGH_WATER`] bytes of replies are unsent the connection neither serves
//! nor reads, so a client that never reads its replies cannot grow the server (a
//! driver that receives without asking stops once [`Conn::backlog`] passes its
//! limit).
//!
//! Large values may be lent by the store instead of copied ([`crate::out`]):
//! values of at least `-o value_lend_min` bytes, unless the driver says 0 (TLS: the
//! TLS layer encrypts from a buffer). Lent bytes count as unsent output, so a client
//! that never reads holds at most about [`OUTPUT_HIGH_WATER`] of leases.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use memcrab_proto::text::watch::{self as watch_reply, CloseReason};

use crate::admin::stats::read_buf_resized;
use crate::admin::watch::Watcher;
use crate::io::wire::{Wire, KEEP_BUFFER_BYTES};
use crate::out::Out;
use crate::request::{Session, Stop};
use crate::server::{ConnInfo, Ctx};

/// Read buffer size to start with, and to shrink back to (memcached's is 16 KiB).
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// Unsent reply bytes above which a connection stops reading and serving.
pub const OUTPUT_HIGH_WATER: usize = 256 * 1024;

/// What the driver does with a connection after driving it.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait for input, or for room to send.
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
    pub info: Arc<ConnInfo>,
    /// `rbuf[rpos..rend]` is received and not yet consumed; `rbuf.len()` is capacity.
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    /// The output from stream position `wpos` on is not yet handed to the wire
    /// (lent values included: positions count them).
    wbuf: Out,
    wpos: usize,
    /// The wire may have unread bytes (a readable event came and no short read or
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
    /// The last drive stopped with complete requests maybe left unserved (output
    /// over the limit, or the `-R` budget used): see [`Conn::backlog`].
    held: bool,
    /// The request state: protocol, authentication, a refused value being
    /// discarded, a suspended multi-get.
    session: Session,
    /// `watch`: the connection is a log stream.
    watcher: Option<Watcher>,
    /// Why it closes, should it close now (`watch connevents`' `reason`).
    close_reason: CloseReason,
    /// Some bytes were read (`stats conns`: a connection that has read nothing
    /// waits for a new command, one that has waits for a read).
    read_any: bool,
}

impl Drop for Conn {
    fn drop(&mut self) {
        read_buf_resized(self.rbuf.len(), 0);
    }
}

impl Conn {
    /// A connection whose output lends values of at least `lend_min` bytes (0: never).
    pub fn new(info: Arc<ConnInfo>, mut session: Session, lend_min: usize) -> Self {
        if let Some(p) = info.protocol {
            session.set_protocol(p);
        }
        Conn {
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
            held: false,
            session,
            watcher: None,
            close_reason: CloseReason::Error,
            read_any: false,
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

    /// The peer closed its side (or the wire failed): keep reading to the EOF.
    pub fn set_read_closed(&mut self) {
        self.may_read = true;
        self.read_closed = true;
    }

    /// Replies not yet sent: unhanded, or held by the wire.
    pub fn has_output(&self, wire: &impl Wire) -> bool {
        self.wpos < self.wbuf.len() || wire.holds_output()
    }

    /// Received bytes held back while the connection does not serve them (its
    /// output is over the limit, or it used its `-R` budget): a driver that
    /// receives without asking stops receiving past its limit, as a reading driver
    /// does not read then. (Otherwise what is buffered is at most one incomplete
    /// request, which must be let complete.)
    pub fn backlog(&self) -> usize {
        if self.held {
            self.rend - self.rpos
        } else {
            0
        }
    }

    /// A driver that receives without asking (io_uring) received `n` bytes: counted
    /// as read, and the connection is not idle, unless it is closing after `quit`
    /// (a reading driver would not read them).
    pub fn received(&mut self, cx: &Ctx<'_>, n: usize) {
        if !self.quit {
            self.note_read(cx, n);
        }
    }

    /// `n` bytes were read from the peer: counted, and the connection is not idle.
    #[inline]
    fn note_read(&mut self, cx: &Ctx<'_>, n: usize) {
        self.read_any = true;
        cx.counters.bytes_read.add(n as u64);
        self.info
            .last_cmd
            .store(cx.engine.clock().now(), Ordering::Relaxed);
    }

    /// Keeps received bytes to serve later (a watcher drops them: memcached ignores
    /// what a watcher sends). The caller counted them ([`Conn::received`]).
    pub fn keep(&mut self, bytes: &[u8]) {
        if self.watcher.is_some() || self.quit || bytes.is_empty() {
            return;
        }
        self.make_room(bytes.len());
        self.rbuf[self.rend..self.rend + bytes.len()].copy_from_slice(bytes);
        self.rend += bytes.len();
    }

    /// Runs the connection as far as it can go without blocking: serves `fresh`
    /// (bytes the driver received and the connection has not seen; in place when
    /// nothing is buffered before them) and what is buffered, hands the replies to
    /// `wire`, and reads from it while it has bytes.
    pub fn drive<W: Wire>(
        &mut self,
        wire: &mut W,
        fresh: &[u8],
        cx: &Ctx<'_>,
        reqs_per_event: usize,
    ) -> Next {
        cx.fd.set(self.info.fd);
        if self.watcher.is_some() {
            return self.drive_watch(wire, cx);
        }
        let mut budget = reqs_per_event;
        let mut fresh = fresh;
        self.held = false;
        loop {
            let stop = self.serve(cx, &mut budget, std::mem::take(&mut fresh));
            if stop == Stop::Close {
                if cx.server.shutting_down() {
                    self.close_reason = CloseReason::Shutdown;
                }
                return Next::Close;
            }
            if stop == Stop::Watch {
                return match self.drive_watch(wire, cx) {
                    Next::Wait => Next::Watching,
                    next => next,
                };
            }
            if self.has_output(wire) {
                match self.flush(wire, cx) {
                    Err(_) => return Next::Close,
                    Ok(()) if self.unsent() > OUTPUT_HIGH_WATER => {
                        self.held = true;
                        return Next::Wait;
                    }
                    Ok(()) => {}
                }
            }
            if self.quit {
                return if self.has_output(wire) {
                    Next::Wait
                } else {
                    Next::Close
                };
            }
            if budget == 0 {
                self.held = true;
                return Next::Yield;
            }
            if stop == Stop::Send {
                // The output drained below the limit: serve what is buffered (a
                // suspended multi-get, the rest of a pipeline) before waiting for
                // more input, which may never come.
                continue;
            }
            if self.eof {
                // Everything complete has been served; what is left can never complete.
                return if self.has_output(wire) {
                    Next::Wait
                } else {
                    Next::Close
                };
            }
            if !self.may_read {
                self.note_wait();
                return Next::Wait;
            }
            match self.fill(wire, cx) {
                Ok(true) => {}
                Ok(false) => {
                    self.note_wait();
                    return Next::Wait;
                }
                Err(_) => return Next::Close,
            }
        }
    }

    /// Waiting for input: says in `stats conns` what for (a connection that has
    /// read nothing yet stays at its first state, a new command).
    fn note_wait(&self) {
        if self.read_any {
            let state = self.session.waiting(&self.rbuf[self.rpos..self.rend]);
            self.info.state.store(state as u8, Ordering::Relaxed);
        }
    }

    /// Reply bytes not yet handed to the wire.
    fn unsent(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    /// Makes room for `n` more bytes at `rbuf[rend..]`: back to the start when all
    /// was consumed (releasing a grown buffer), else moving the unconsumed bytes
    /// down, and growing (at least doubling) only if that is not enough.
    fn make_room(&mut self, n: usize) {
        let before = self.rbuf.len();
        self.make_room_inner(n);
        read_buf_resized(before, self.rbuf.len());
    }

    fn make_room_inner(&mut self, n: usize) {
        if self.rpos == self.rend {
            self.rpos = 0;
            self.rend = 0;
            if self.rbuf.len() > KEEP_BUFFER_BYTES {
                self.rbuf = Vec::new();
            }
        }
        if self.rbuf.len() - self.rend < n && self.rpos > 0 {
            self.rbuf.copy_within(self.rpos..self.rend, 0);
            self.rend -= self.rpos;
            self.rpos = 0;
        }
        if self.rbuf.len() - self.rend < n {
            let grown = (self.rbuf.len() * 2)
                .max(self.rend + n)
                .max(READ_BUFFER_BYTES);
            self.rbuf.resize(grown, 0);
        }
    }

    /// Reads once. Returns whether bytes (or EOF) arrived.
    fn fill(&mut self, wire: &mut impl Wire, cx: &Ctx<'_>) -> io::Result<bool> {
        let before = self.rbuf.len();
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
        read_buf_resized(before, self.rbuf.len());
        let space = self.rbuf.len() - self.rend;
        loop {
            match wire.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    self.eof = true;
                    self.may_read = false;
                    self.close_reason = CloseReason::Normal;
                    return Ok(true);
                }
                Ok(n) => {
                    self.note_read(cx, n);
                    self.rend += n;
                    // A short read drained the socket: the next readable event says
                    // when more arrives. This saves the extra read that would only
                    // return WouldBlock. Not after a read-closed event: the EOF is
                    // still to be read, and no event will say so again.
                    if n < space && !self.read_closed {
                        self.may_read = false;
                    }
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

    /// Hands pending output to the wire.
    #[inline]
    fn flush(&mut self, wire: &mut impl Wire, cx: &Ctx<'_>) -> io::Result<()> {
        wire.send(&mut self.wbuf, &mut self.wpos, cx)
    }

    /// Flushes for shutdown. Returns whether everything was sent.
    pub fn flush_for_shutdown(&mut self, wire: &mut impl Wire, cx: &Ctx<'_>) -> bool {
        self.flush(wire, cx).is_ok_and(|()| !self.has_output(wire))
    }

    /// Serves `fresh`, then buffered requests, while the budget and the output
    /// buffer allow. `fresh` is served in place when nothing is buffered before
    /// it, and what it leaves is kept. (One call of `Session::serve`, so that it
    /// is inlined here; and this one is inlined in `drive`.)
    #[inline(always)]
    fn serve(&mut self, cx: &Ctx<'_>, budget: &mut usize, fresh: &[u8]) -> Stop {
        if self.quit {
            return Stop::Finish { quit: true };
        }
        let mut fresh = fresh;
        if !fresh.is_empty() && self.rpos < self.rend {
            self.keep(fresh);
            fresh = &[];
        }
        loop {
            let start = self.rpos;
            let in_place = !fresh.is_empty();
            let input = if in_place {
                fresh
            } else {
                &self.rbuf[self.rpos..self.rend]
            };
            let served = self.session.serve(
                input,
                cx,
                &mut self.wbuf,
                budget,
                self.wpos + OUTPUT_HIGH_WATER,
            );
            if in_place {
                self.keep(&fresh[served.consumed..]);
            } else {
                self.rpos += served.consumed;
            }
            self.note_finish(served.stop);
            if served.stop == Stop::Watch {
                let stands = if in_place {
                    self.start_watch(cx, fresh)
                } else {
                    self.start_watch_buffered(cx, start)
                };
                if !stands {
                    // Refused: serve on from what is buffered.
                    fresh = &[];
                    continue;
                }
            }
            return served.stop;
        }
    }

    /// [`Stop::Finish`]: close once the output is sent (`quit`: as memcached's
    /// `normal` close).
    #[inline]
    fn note_finish(&mut self, stop: Stop) {
        if let Stop::Finish { quit } = stop {
            self.quit = true;
            if quit {
                self.close_reason = CloseReason::Normal;
            }
        }
    }

    /// [`Conn::start_watch`] for a batch served from the read buffer from `start`.
    #[cold]
    #[inline(never)]
    fn start_watch_buffered(&mut self, cx: &Ctx<'_>, start: usize) -> bool {
        let input = std::mem::take(&mut self.rbuf);
        let ok = self.start_watch(cx, &input[start..self.rend]);
        self.rbuf = input;
        ok
    }

    /// After [`Stop::Watch`] (`input` is that batch's input): turns the connection
    /// into a log stream if the `watch` stands; false (with memcached's reply
    /// queued, and the connection serving on) when it does not. (The watch paths
    /// are kept out of line, off the request path.)
    #[cold]
    #[inline(never)]
    fn start_watch(&mut self, cx: &Ctx<'_>, input: &[u8]) -> bool {
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

    /// A `watch` stream: moves the log lines waiting for it to the wire (taking more
    /// only while less than [`OUTPUT_HIGH_WATER`] is unsent, so a watcher that does
    /// not read falls behind in the hub instead of growing here), and reads only to
    /// notice the client closing: memcached ignores what a watcher sends. The hub
    /// wakes the worker when lines arrive; a writable socket brings it back too.
    #[cold]
    #[inline(never)]
    fn drive_watch(&mut self, wire: &mut impl Wire, cx: &Ctx<'_>) -> Next {
        loop {
            let mut progress = false;
            if self.unsent() < OUTPUT_HIGH_WATER {
                if let Some(w) = &self.watcher {
                    progress |= w.drain_into(&mut self.wbuf);
                }
            }
            if self.has_output(wire) {
                let unsent = self.unsent();
                if self.flush(wire, cx).is_err() {
                    return Next::Close;
                }
                // Room was made: there may be more to take. (Stopping here would wait
                // for a writable edge that never comes, the socket having room, and
                // the hub wakes a watcher only after it drained.)
                progress |= self.unsent() < unsent;
            }
            if self.may_read {
                match self.discard_input(wire, cx) {
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
    fn discard_input(&mut self, wire: &mut impl Wire, cx: &Ctx<'_>) -> io::Result<bool> {
        let mut buf = [0u8; 4096];
        loop {
            match wire.read(&mut buf) {
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
