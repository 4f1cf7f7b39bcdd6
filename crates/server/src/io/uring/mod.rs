//! The io_uring driver (`-o io=uring`, the default): the same connections and the
//! same [`Conn::drive`] as the epoll driver (`io/epoll.rs`), but the bytes move
//! through one ring per worker.
//!
//! ```text
//!   acceptor ─(channel + waker)─► worker ── one io_uring_enter per turn ──┐
//!     per connection: multishot RECV (provided buffer ring, bufring.rs)
//!                     ─► Conn::drive(fresh = the buffer) ─► Ring's out (ring.rs)
//!                     ─► SEND (all of a turn's, together)
//!     the worker's mio Poll (waker, UDP sockets, TLS connections): its epoll fd is
//!     one multishot POLL_ADD on the ring; when it fires, poll it without waiting
//! ```
//!
//! Files: `mod.rs` the loop and the slots; `ring.rs` a connection's wire (its
//! send, its receive's state); `bufring.rs` the ring's set-up and its provided
//! buffers.
//!
//! Connections still come from the acceptor thread (listen.rs) rather than a
//! multishot accept: it enforces `-c`, registers `stats conns`, wraps TLS, and
//! spreads connections over the workers, none of which a per-worker accept on a
//! shared listener would do as fairly. A plain TCP or unix connection gets a slot
//! in the ring's registered file table; its receive stays armed (multishot) and
//! its replies go out as one SEND per turn. TLS connections (`-Z`) are served by
//! readiness through the worker's nested epoll, through their [`Stream`], as the
//! epoll driver serves them, since rustls needs synchronous reads and writes. UDP
//! sockets likewise.
//!
//! A received buffer is held until the connection is driven later in the same turn
//! (so that all of a turn's input is served before its replies are sent, as one
//! send), and the connection serves the requests that lie whole in it in place:
//! no copy. Only what a buffer leaves (part of a request), or a second buffer for
//! the same connection in one turn, is copied into the connection's read buffer.
//! (Against the earlier copy of every byte into an inbox and again into the read
//! buffer: two `memcpy` calls a request fewer on W1–W4, and on W1 345 → 279 bytes
//! copied a request, on W3 2517 → 1992, counted by an LD_PRELOAD `memcpy` counter.)
//!
//! Lifetimes: a SEND points into the connection's `out` buffer, and the provided
//! buffers are the ring's. A connection that closes with a SEND under way parks its
//! buffer in its slot until that completes, and a slot is reused only when every
//! operation submitted for it (receive, send, file table update) has completed.
//!
//! A ring that fails at run time (`io_uring_enter` or a submit returning an error
//! other than a retry) is not fatal to the server: the driver logs it, closes the
//! connections it served (what a send in flight had sent is unknown, so none can
//! go on), keeps memory the kernel may still write or read (the provided buffers,
//! sends in flight) out of reuse by leaking it, and hands the worker and its UDP
//! sockets back to its caller (`main.rs`'s `drive`), which runs the epoll driver
//! for the connections the acceptor hands it next. The environment variable
//! `MEMCRAB_TEST_RING_FAIL_AFTER=N` makes the N+1th `io_uring_enter` of every
//! worker fail with EIO, so that tests can drive this path; nothing else reads it.

mod bufring;
mod ring;

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use memcrab_proto::text::watch::CloseReason;
use mio::Events;

pub use bufring::probe;
use bufring::{BufRing, BGID};
use ring::{Op, Plain, Ring, VecSend};

use crate::io::conn::{Conn, Next};
use crate::io::handoff::WAKE;
use crate::io::net::Stream;
use crate::io::udp::Ports;
use crate::io::worker::{self, Worker, SHUTDOWN_FLUSH};
use crate::out::Out;
use crate::request::Session;
use crate::server::{Ctx, Server};

/// What a file table update that empties a slot reads (the kernel reads it when
/// the SQE is issued; a static outlives that).
static CLOSED_FD: [RawFd; 1] = [-1];

fn user_data(op: Op, slot: usize, gen: u32) -> u64 {
    (u64::from(gen) << 32) | ((slot as u64 & 0xff_ffff) << 8) | op as u64
}

fn unpack(ud: u64) -> (u64, usize, u32) {
    (
        ud & 0xff,
        ((ud >> 8) & 0xff_ffff) as usize,
        (ud >> 32) as u32,
    )
}

const OP_RECV: u64 = Op::Recv as u64;
const OP_SEND: u64 = Op::Send as u64;
const OP_FILES: u64 = Op::Files as u64;
const OP_EPOLL: u64 = Op::Epoll as u64;

/// How a connection's bytes move: through the ring, or (TLS) by readiness
/// through the worker's nested epoll.
enum Link {
    Ring(Box<Ring>),
    Polled(Stream),
}

/// A connection and its link.
struct Client {
    conn: Conn,
    link: Link,
}

impl Client {
    fn has_output(&self) -> bool {
        match &self.link {
            Link::Ring(r) => self.conn.has_output(&**r),
            Link::Polled(s) => self.conn.has_output(s),
        }
    }

    /// Closes it: the worker forgets it, then the connection and its link go.
    fn close(self, server: &Server, reason: Option<CloseReason>) {
        worker::forget(server, &self.conn.info, reason);
    }
}

struct Slot {
    client: Option<Client>,
    /// Bumped when the slot takes a new connection: completions carry it.
    gen: u32,
    /// Operations submitted for this slot whose last completion has not come.
    inflight: u32,
    /// A received buffer (its id and length) held for the connection's drive
    /// this turn.
    held: Option<(u16, usize)>,
    /// A closed connection's output and its SENDMSG's iovecs (leases included),
    /// kept until its send completes.
    grave: (Out, VecSend),
    /// The connection is in the registered file table (at this slot's index).
    fixed: bool,
    /// Queued to be driven this turn.
    dirty: bool,
    /// Closed, waiting for `inflight` to reach 0 before reuse.
    closing: bool,
}

struct Loop<'a> {
    w: &'a mut Worker,
    cx: &'a Ctx<'a>,
    ring: IoUring,
    nfixed: u32,
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// Slots to drive this turn.
    dirty: Vec<usize>,
    /// Slots that used their `-R` budget: driven again next turn.
    ready: VecDeque<usize>,
    watchers: Vec<usize>,
    /// Set when the ring failed at run time: the loop ends and the worker goes on
    /// on epoll (see the module docs).
    failed: Option<io::Error>,
    /// `MEMCRAB_TEST_RING_FAIL_AFTER`: `io_uring_enter`s left before one fails.
    fail_after: Option<u64>,
}

/// Runs worker `w` and its UDP sockets on io_uring. Gives them back when the epoll
/// driver is to take them over: the ring could not be set up (`main` probed
/// already, so this is rare and said once per worker) or failed at run time (its
/// connections closed).
pub fn run(w: Worker, mut udp: Ports) -> Option<(Worker, Ports)> {
    let (ring, bufs, nfixed) = match bufring::setup(w.server.settings.max_connections) {
        Ok(x) => x,
        Err(e) => {
            eprintln!(
                "memcrab: worker {}: io_uring unavailable ({e}); using epoll",
                w.id
            );
            return Some((w, udp));
        }
    };
    let server = std::sync::Arc::clone(&w.server);
    let cx = w.ctx(&server);
    let mut w = w;
    // Declared after `bufs`, so dropped before it: the ring goes first.
    let mut bufs = bufs;
    let mut lp = Loop {
        w: &mut w,
        cx: &cx,
        ring,
        nfixed,
        slots: Vec::new(),
        free: Vec::new(),
        dirty: Vec::new(),
        ready: VecDeque::new(),
        watchers: Vec::new(),
        failed: None,
        fail_after: std::env::var("MEMCRAB_TEST_RING_FAIL_AFTER")
            .ok()
            .and_then(|v| v.parse().ok()),
    };
    lp.run(&mut bufs, &mut udp);
    let err = lp.failed.take()?;
    let closed = lp.abandon(&mut udp);
    drop(lp);
    // The kernel may still write a receive into a provided buffer until it has
    // cancelled everything the dropped ring had in flight: keep the buffers mapped.
    std::mem::forget(bufs);
    eprintln!(
        "memcrab: worker {}: io_uring failed at run time ({err}); closed its {closed} \
         connections on the ring, serving new ones on epoll",
        w.id
    );
    Some((w, udp))
}

impl Loop<'_> {
    fn run(&mut self, bufs: &mut BufRing, udp: &mut Ports) {
        let server = self.cx.server;
        let reqs_per_event = server.settings.reqs_per_event;
        let idle_secs = server.settings.idle_timeout_secs;
        let mut last_idle_scan = Instant::now();
        let mut events = Events::with_capacity(1024);
        if !udp.watch(&self.w.poll, self.w.id) {
            return;
        }
        let epoll_fd = self.w.poll.as_raw_fd();
        let mut epoll_armed = false;
        // Poll the nested epoll at once: the waker may have fired before the ring.
        let mut epoll_due = true;
        let mut cqes: Vec<(u64, i32, u32)> = Vec::with_capacity(256);
        loop {
            if self.failed.is_some() {
                return;
            }
            if !epoll_armed {
                let e = opcode::PollAdd::new(types::Fd(epoll_fd), libc::POLLIN as u32)
                    .multi(true)
                    .build()
                    .user_data(user_data(Op::Epoll, 0, 0));
                self.push(e);
                epoll_armed = true;
            }
            let busy =
                !self.dirty.is_empty() || !self.ready.is_empty() || udp.waiting() || epoll_due;
            let zero = types::Timespec::new();
            let second = types::Timespec::new().sec(1);
            let res = if let Some(0) = self.fail_after {
                Err(io::Error::from_raw_os_error(libc::EIO))
            } else if busy {
                let args = types::SubmitArgs::new().timespec(&zero);
                self.ring.submitter().submit_with_args(1, &args)
            } else if idle_secs > 0 {
                let args = types::SubmitArgs::new().timespec(&second);
                self.ring.submitter().submit_with_args(1, &args)
            } else {
                self.ring.submitter().submit_and_wait(1)
            };
            match res {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                    ) => {}
                Err(e) => self.failed = Some(e),
            }
            if let Some(n) = self.fail_after.as_mut() {
                *n = n.saturating_sub(1);
            }
            if self.failed.is_some() {
                return;
            }
            cqes.clear();
            cqes.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            for &(ud, res, flags) in &cqes {
                let (op, idx, gen) = unpack(ud);
                match op {
                    OP_RECV => self.on_recv(bufs, idx, gen, res, flags, true),
                    OP_SEND => self.on_send(idx, gen, res),
                    OP_FILES => self.op_done(idx),
                    OP_EPOLL => {
                        epoll_due = true;
                        if !cqueue::more(flags) {
                            epoll_armed = false;
                        }
                    }
                    _ => {}
                }
            }
            if epoll_due {
                epoll_due = false;
                match self.w.poll.poll(&mut events, Some(Duration::ZERO)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => epoll_due = true,
                    Err(e) => {
                        eprintln!("memcrab: worker {}: poll failed: {e}", self.w.id);
                        return;
                    }
                }
                // A full batch may have left events behind, and no new wakeup
                // would say so.
                if events.iter().count() == events.capacity() {
                    epoll_due = true;
                }
                for ev in events.iter() {
                    if ev.token() == WAKE {
                        self.ready.extend(self.watchers.iter().copied());
                        self.accept_new();
                        continue;
                    }
                    let idx = ev.token().0;
                    if udp.note(idx) {
                        continue;
                    }
                    let Some(c) = self.slots.get_mut(idx).and_then(|s| s.client.as_mut()) else {
                        continue;
                    };
                    c.conn.note_event(ev);
                    self.mark(idx);
                }
            }
            let mut dirty = std::mem::take(&mut self.dirty);
            for &idx in &dirty {
                if let Some(s) = self.slots.get_mut(idx) {
                    s.dirty = false;
                }
                self.drive(bufs, idx, reqs_per_event);
            }
            dirty.clear();
            self.dirty = dirty;
            for _ in 0..self.ready.len() {
                if let Some(idx) = self.ready.pop_front() {
                    self.drive(bufs, idx, reqs_per_event);
                }
            }
            bufs.publish();
            udp.serve(self.cx);
            if server.shutting_down() {
                self.shutdown(bufs);
                return;
            }
            if idle_secs > 0 && last_idle_scan.elapsed() >= Duration::from_secs(1) {
                last_idle_scan = Instant::now();
                self.kick_idle(idle_secs);
            }
        }
    }

    /// After a run-time failure (see the module docs): closes every connection,
    /// keeps what sends in flight may still read out of reuse (their bytes, their
    /// leases, which then never release their segments: at most the half of `-m`
    /// the lent bound allows, once, and held past `-m`/16 charged against `-m`; a
    /// SENDMSG's msghdr and iovecs), and takes the
    /// UDP sockets off the nested epoll (the epoll driver registers them again).
    /// Returns how many connections it closed.
    fn abandon(&mut self, udp: &mut Ports) -> usize {
        udp.unwatch(&self.w.poll);
        self.watchers.clear();
        let mut closed = 0;
        for idx in 0..self.slots.len() {
            let s = &mut self.slots[idx];
            std::mem::forget(std::mem::take(&mut s.grave));
            let Some(mut c) = s.client.take() else {
                continue;
            };
            match &mut c.link {
                Link::Ring(r) if r.sending => {
                    // As `close` parks them in the grave: the bytes (and leases) a
                    // send in flight reads, and a SENDMSG's msghdr and iovecs.
                    std::mem::forget((std::mem::take(&mut r.out), std::mem::take(&mut r.vec)));
                }
                Link::Ring(_) => {}
                Link::Polled(stream) => {
                    let _ = self.w.poll.registry().deregister(stream.source());
                }
            }
            c.close(self.cx.server, Some(CloseReason::Error));
            closed += 1;
        }
        closed
    }

    /// Queues an SQE, submitting first if the queue is full.
    fn push(&mut self, e: squeue::Entry) {
        loop {
            // SAFETY: every SQE pushed here points only at memory that outlives the
            // operation: a connection's `out` and, for a SENDMSG, its `vec` (the
            // msghdr and iovecs, pointing into `out`'s buffer and its leases' segment
            // memory, which the leases keep; all kept in the slot's grave if the
            // connection closes first), the static CLOSED_FD, or nothing.
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return;
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EBUSY | libc::EINTR | libc::EAGAIN)
                    ) => {}
                Err(e) => {
                    // The entry is dropped: the ring is given up (see `run`).
                    self.failed.get_or_insert(e);
                    return;
                }
            }
        }
    }

    fn mark(&mut self, idx: usize) {
        if let Some(s) = self.slots.get_mut(idx) {
            if !s.dirty {
                s.dirty = true;
                self.dirty.push(idx);
            }
        }
    }

    /// An operation for `idx` finished for good: a closing slot may be reused.
    fn op_done(&mut self, idx: usize) {
        let Some(s) = self.slots.get_mut(idx) else {
            return;
        };
        s.inflight = s.inflight.saturating_sub(1);
        if s.closing && s.inflight == 0 {
            s.closing = false;
            s.grave = Default::default();
            self.free.push(idx);
        }
    }

    /// A receive completion. Bytes for a live ring connection are held for its
    /// drive this turn when `hold` (and no buffer is held for it already), else
    /// copied into its read buffer now; the buffer goes back to the ring once
    /// they are served or copied.
    fn on_recv(
        &mut self,
        bufs: &mut BufRing,
        idx: usize,
        gen: u32,
        res: i32,
        flags: u32,
        hold: bool,
    ) {
        let more = cqueue::more(flags);
        let bid = cqueue::buffer_select(flags);
        let mut keep_buffer = false;
        let cx = self.cx;
        if let Some(s) = self.slots.get_mut(idx).filter(|s| s.gen == gen) {
            if let Some(Client {
                conn,
                link: Link::Ring(r),
            }) = s.client.as_mut()
            {
                let mut closed = false;
                if res > 0 {
                    if let Some(bid) = bid {
                        let len = res as usize;
                        conn.received(cx, len);
                        if hold && s.held.is_none() {
                            s.held = Some((bid, len));
                            keep_buffer = true;
                        } else {
                            if let Some((held, held_len)) = s.held.take() {
                                conn.keep(bufs.buf(held, held_len));
                                bufs.add(held);
                            }
                            conn.keep(bufs.buf(bid, len));
                        }
                    }
                } else if res == 0 {
                    r.end();
                    closed = true;
                } else if res != -libc::ENOBUFS && res != -libc::ECANCELED {
                    r.fail(-res);
                    closed = true;
                }
                if !more {
                    r.recv_ended();
                }
                if closed {
                    conn.set_read_closed();
                } else {
                    conn.set_readable();
                }
                self.mark(idx);
            }
        }
        if let Some(bid) = bid.filter(|_| !keep_buffer) {
            bufs.add(bid);
        }
        if !more {
            self.op_done(idx);
        }
    }

    fn on_send(&mut self, idx: usize, gen: u32, res: i32) {
        if let Some(s) = self.slots.get_mut(idx).filter(|s| s.gen == gen) {
            if let Some(Client {
                link: Link::Ring(r),
                ..
            }) = s.client.as_mut()
            {
                if res < 0 {
                    r.sending = false;
                    r.fail(-res);
                } else {
                    r.sent_bytes(res as usize);
                }
                self.mark(idx);
            }
        }
        self.op_done(idx);
    }

    /// Takes the connections the acceptor handed over.
    fn accept_new(&mut self) {
        let server = self.cx.server;
        while let Ok(nc) = self.w.rx.try_recv() {
            let idx = self.free.pop().unwrap_or_else(|| {
                self.slots.push(Slot {
                    client: None,
                    gen: 0,
                    inflight: 0,
                    held: None,
                    grave: Default::default(),
                    fixed: false,
                    dirty: false,
                    closing: false,
                });
                self.slots.len() - 1
            });
            let lend_min = worker::lend_min(server, nc.stream.is_tls());
            let conn = Conn::new(nc.info, Session::new(&server.settings), lend_min);
            let link = match nc.stream {
                Stream::Tcp(s) => Link::Ring(Box::new(Ring::new(Plain::Tcp(s)))),
                Stream::Unix(s) => Link::Ring(Box::new(Ring::new(Plain::Unix(s)))),
                mut tls => {
                    if !worker::watch(&self.w.poll, &mut tls, idx) {
                        let link = Link::Polled(tls);
                        Client { conn, link }.close(server, None);
                        self.free.push(idx);
                        continue;
                    }
                    Link::Polled(tls)
                }
            };
            if matches!(link, Link::Ring(_)) {
                let fd = conn.info.fd;
                let fixed = (idx as u32) < self.nfixed
                    && self
                        .ring
                        .submitter()
                        .register_files_update(idx as u32, &[fd])
                        .is_ok();
                self.slots[idx].fixed = fixed;
            }
            worker::note_open(server, &conn.info);
            let s = &mut self.slots[idx];
            s.gen = s.gen.wrapping_add(1);
            s.client = Some(Client { conn, link });
            // Arm its receive (and serve anything a TLS stream has already).
            self.mark(idx);
        }
    }

    /// Drives the connection in `idx`, with the buffer held for it (then given back
    /// to the ring), and submits what it needs.
    fn drive(&mut self, bufs: &mut BufRing, idx: usize, reqs_per_event: usize) {
        let Some(s) = self.slots.get_mut(idx) else {
            return;
        };
        let held = s.held.take();
        let Some(c) = s.client.as_mut() else {
            if let Some((bid, _)) = held {
                bufs.add(bid);
            }
            return;
        };
        let next = match &mut c.link {
            Link::Ring(r) => {
                let fresh = held.map_or(&[][..], |(bid, len)| bufs.buf(bid, len));
                c.conn.drive(&mut **r, fresh, self.cx, reqs_per_event)
            }
            Link::Polled(stream) => c.conn.drive(stream, &[], self.cx, reqs_per_event),
        };
        if let Some((bid, _)) = held {
            bufs.add(bid);
        }
        match next {
            Next::Wait => {}
            Next::Watching => self.watchers.push(idx),
            Next::Yield => {
                self.cx.counters.conn_yields.incr();
                self.ready.push_back(idx);
            }
            Next::Close => {
                let reason = c.conn.close_reason();
                self.close(idx, Some(reason));
                return;
            }
        }
        self.sync(idx);
    }

    /// Submits what a ring connection needs: a send for its output, its receive
    /// (re)armed, or cancelled while its backlog is over the limit.
    fn sync(&mut self, idx: usize) {
        let Some(s) = self.slots.get_mut(idx) else {
            return;
        };
        let (gen, fixed) = (s.gen, s.fixed);
        let Some(Client {
            conn,
            link: Link::Ring(r),
        }) = s.client.as_mut()
        else {
            return;
        };
        let (sqes, ops) = r.ops(idx, fixed, conn.backlog(), BGID, |op| {
            user_data(op, idx, gen)
        });
        s.inflight += ops;
        for e in sqes.into_iter().flatten() {
            self.push(e);
        }
    }

    /// Closes the connection in `idx`; the slot is reused once every operation
    /// submitted for it has completed.
    fn close(&mut self, idx: usize, reason: Option<CloseReason>) {
        let Some(s) = self.slots.get_mut(idx) else {
            return;
        };
        let Some(mut c) = s.client.take() else {
            return;
        };
        let gen = s.gen;
        let fixed = std::mem::take(&mut s.fixed);
        let mut sqes: Vec<squeue::Entry> = Vec::new();
        if c.conn.is_watching() {
            self.watchers.retain(|&w| w != idx);
        }
        match &mut c.link {
            Link::Ring(r) => {
                if r.recv_armed {
                    sqes.push(
                        opcode::AsyncCancel::new(user_data(Op::Recv, idx, gen))
                            .build()
                            .user_data(user_data(Op::Cancel, idx, gen)),
                    );
                }
                if r.sending {
                    s.grave = (std::mem::take(&mut r.out), std::mem::take(&mut r.vec));
                }
                if fixed {
                    s.inflight += 1;
                    sqes.push(
                        opcode::FilesUpdate::new(CLOSED_FD.as_ptr(), 1)
                            .offset(idx as i32)
                            .build()
                            .user_data(user_data(Op::Files, idx, gen)),
                    );
                }
            }
            Link::Polled(stream) => {
                let _ = self.w.poll.registry().deregister(stream.source());
            }
        }
        if s.inflight == 0 {
            self.free.push(idx);
        } else {
            s.closing = true;
        }
        for e in sqes {
            self.push(e);
        }
        c.close(self.cx.server, reason);
    }

    /// `-o idle_timeout`, as the epoll driver's.
    fn kick_idle(&mut self, idle_secs: u32) {
        let now = self.cx.engine.clock().now();
        for idx in 0..self.slots.len() {
            let idle = self.slots[idx].client.as_ref().is_some_and(|c| {
                let busy = c.has_output() || c.conn.is_watching();
                worker::idle(&c.conn.info, busy, now, idle_secs)
            });
            if idle {
                self.close(idx, Some(CloseReason::IdleTimeout));
                self.cx.counters.idle_kicks.incr();
            }
        }
    }

    /// Sends what each connection has pending, for up to [`SHUTDOWN_FLUSH`], then
    /// closes them all.
    fn shutdown(&mut self, bufs: &mut BufRing) {
        let deadline = Instant::now() + SHUTDOWN_FLUSH;
        loop {
            let mut pending = 0;
            for idx in 0..self.slots.len() {
                let Some(c) = self.slots[idx].client.as_mut() else {
                    continue;
                };
                if !c.has_output() {
                    continue;
                }
                let flushed = match &mut c.link {
                    Link::Ring(r) => c.conn.flush_for_shutdown(&mut **r, self.cx),
                    Link::Polled(stream) => c.conn.flush_for_shutdown(stream, self.cx),
                };
                if !flushed {
                    pending += 1;
                }
                self.sync(idx);
            }
            let now = Instant::now();
            if pending == 0 || now >= deadline {
                break;
            }
            let ts = types::Timespec::from((deadline - now).min(Duration::from_millis(20)));
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            let cqes: Vec<(u64, i32, u32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags()))
                .collect();
            for (ud, res, flags) in cqes {
                let (op, idx, gen) = unpack(ud);
                match op {
                    OP_RECV => self.on_recv(bufs, idx, gen, res, flags, false),
                    OP_SEND => self.on_send(idx, gen, res),
                    _ => {}
                }
            }
            bufs.publish();
        }
        for slot in &mut self.slots {
            if let Some(c) = slot.client.take() {
                c.close(self.cx.server, None);
            }
        }
    }
}
