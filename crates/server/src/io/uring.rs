//! A worker on io_uring (`-o io=uring`): the same connections, the same
//! [`Conn::drive`] and request step as the epoll worker ([`crate::io::worker`]), but the
//! bytes move through one ring per worker.
//!
//! ```text
//!   acceptor ─(channel + waker)─► worker ── one io_uring_enter per turn ──┐
//!     per connection: multishot RECV (provided buffer ring) ─► RingIo inbox
//!                     Conn::drive ─► RingIo out ─► SEND (all of a turn's, together)
//!     the worker's mio Poll (waker, UDP sockets, TLS connections): its epoll fd is
//!     one multishot POLL_ADD on the ring; when it fires, poll it without waiting
//! ```
//!
//! Connections still come from the acceptor thread (listen.rs) rather than a
//! multishot accept: it enforces `-c`, registers `stats conns`, wraps TLS, and
//! spreads connections over the workers, none of which a per-worker accept on a
//! shared listener would do as fairly. A plain TCP or unix connection gets a slot
//! in the ring's registered file table; its receive stays armed (multishot) and
//! its replies go out as one SEND per turn. TLS connections (`-Z`) are served by
//! readiness through the worker's nested epoll, as in the epoll worker, since
//! rustls needs synchronous reads and writes. UDP sockets likewise.
//!
//! Lifetimes: a SEND points into the connection's `out` buffer, and the provided
//! buffers are the ring's. A connection that closes with a SEND under way parks its
//! buffer in its slot until that completes, and a slot is reused only when every
//! operation submitted for it (receive, send, file table update) has completed.
//!
//! A ring that fails at run time (`io_uring_enter` or a submit returning an error
//! other than a retry) is not fatal to the server: the worker logs it, closes the
//! connections it served on the ring (what a send in flight had sent is unknown,
//! so none can go on), keeps memory the kernel may still write or read (the
//! provided buffers, sends in flight) out of reuse by leaking it, and goes on as
//! an epoll worker ([`Worker::run`]) for the connections the acceptor hands it
//! next. The environment variable `MEMCRAB_TEST_RING_FAIL_AFTER=N` makes the
//! N+1th `io_uring_enter` of every worker fail with EIO, so that tests can drive
//! this path; nothing else reads it.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use memcrab_proto::text::watch::CloseReason;
use mio::{Events, Interest, Token};

use crate::exec::Ctx;
use crate::io::conn::{Conn, Next};
use crate::io::handoff::WAKE;
use crate::io::net::Stream;
use crate::io::out::Out;
use crate::io::ringio::{Plain, RingIo, VecSend};
use crate::io::worker::{self, Worker, UDP_TOKENS};
use crate::request::Session;

/// Submission queue entries; the completion queue is four times as long.
const SQ_ENTRIES: u32 = 1024;
/// Provided receive buffers per worker, and their size: at most 1 MiB per worker,
/// of which small requests touch one page per buffer.
const BUFFERS: u16 = 128;
const BUFFER_BYTES: usize = 8 * 1024;
/// The provided buffer group's id.
const BGID: u16 = 0;
/// Registered file table slots asked for (fewer where `RLIMIT_NOFILE` is lower);
/// connections in slots past it use their plain descriptor.
const FIXED_FILES_MAX: u32 = 16 * 1024;
/// How long shutdown waits for replies in flight to drain (as the epoll worker).
const SHUTDOWN_FLUSH: Duration = Duration::from_millis(500);

/// What a completion is for: the low 8 bits of its user data.
const OP_RECV: u64 = 1;
const OP_SEND: u64 = 2;
const OP_CANCEL: u64 = 3;
const OP_FILES: u64 = 4;
const OP_EPOLL: u64 = 5;

/// What a file table update that empties a slot reads (the kernel reads it when
/// the SQE is issued; a static outlives that).
static CLOSED_FD: [RawFd; 1] = [-1];

fn user_data(op: u64, slot: usize, gen: u32) -> u64 {
    (u64::from(gen) << 32) | ((slot as u64 & 0xff_ffff) << 8) | op
}

fn unpack(ud: u64) -> (u64, usize, u32) {
    (
        ud & 0xff,
        ((ud >> 8) & 0xff_ffff) as usize,
        (ud >> 32) as u32,
    )
}

/// The provided buffer ring: `BUFFERS` entries the kernel picks receive buffers
/// from, and the buffers themselves, both in anonymous mappings owned here.
struct BufRing {
    entries: *mut types::BufRingEntry,
    entries_len: usize,
    bufs: *mut u8,
    bufs_len: usize,
    /// Our copy of the ring's tail (the kernel owns the head).
    tail: u16,
}

impl BufRing {
    fn new(ring: &IoUring) -> io::Result<BufRing> {
        let entries_len = usize::from(BUFFERS) * std::mem::size_of::<types::BufRingEntry>();
        let bufs_len = usize::from(BUFFERS) * BUFFER_BYTES;
        let entries = map(entries_len)?.cast::<types::BufRingEntry>();
        let bufs = match map(bufs_len) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: `entries` was mapped just above with this length.
                unsafe { libc::munmap(entries.cast(), entries_len) };
                return Err(e);
            }
        };
        let mut br = BufRing {
            entries,
            entries_len,
            bufs,
            bufs_len,
            tail: 0,
        };
        for bid in 0..BUFFERS {
            br.add(bid);
        }
        br.publish();
        // SAFETY: the entries' mapping is page aligned, BUFFERS long, and lives until
        // this BufRing is dropped, which the worker does only after the ring.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(br.entries as u64, BUFFERS, BGID, 0)?;
        }
        Ok(br)
    }

    /// Puts buffer `bid` back at the tail (seen by the kernel after `publish`).
    fn add(&mut self, bid: u16) {
        let i = usize::from(self.tail & (BUFFERS - 1));
        // SAFETY: i < BUFFERS, the number of entries mapped; the kernel reads only
        // entries between its head and the published tail, which this one is not.
        let e = unsafe { &mut *self.entries.add(i) };
        // SAFETY: bid < BUFFERS, so the offset is inside the buffers' mapping.
        e.set_addr(unsafe { self.bufs.add(usize::from(bid) * BUFFER_BYTES) } as u64);
        e.set_len(BUFFER_BYTES as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the buffers added so far visible to the kernel.
    fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's reserved field, inside
        // the mapping; the kernel reads it concurrently, hence the atomic store.
        let tail =
            unsafe { AtomicU16::from_ptr(types::BufRingEntry::tail(self.entries).cast_mut()) };
        // Release: the entries written by `add` are visible before the new tail.
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which a completion just handed us.
    fn buf(&self, bid: u16, len: usize) -> &[u8] {
        let bid = usize::from(bid) % usize::from(BUFFERS);
        let len = len.min(BUFFER_BYTES);
        // SAFETY: the range is inside the buffers' mapping; the kernel wrote it
        // before posting the completion and will not touch it again until the
        // buffer is put back with `add`, after the caller is done with the slice.
        unsafe { std::slice::from_raw_parts(self.bufs.add(bid * BUFFER_BYTES), len) }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: both were mapped with these lengths in `new`; the ring that used
        // them is gone (the worker drops it first).
        unsafe {
            libc::munmap(self.bufs.cast(), self.bufs_len);
            libc::munmap(self.entries.cast(), self.entries_len);
        }
    }
}

/// An anonymous, page-aligned, zeroed mapping.
fn map(len: usize) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing
    // touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// A ring with the features this worker needs: registered files, a provided
/// buffer ring, waits with a timeout. Also `main`'s probe for `-o io=uring`.
fn setup(max_conns: usize) -> io::Result<(IoUring, BufRing, u32)> {
    let ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(SQ_ENTRIES * 4)
        .build(SQ_ENTRIES)
        .or_else(|_| {
            IoUring::builder()
                .setup_cqsize(SQ_ENTRIES * 4)
                .build(SQ_ENTRIES)
        })?;
    if !ring.params().is_feature_ext_arg() || !ring.params().is_feature_nodrop() {
        return Err(io::Error::other("kernel lacks IORING_FEAT_EXT_ARG/NODROP"));
    }
    let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    let fixed = (max_conns as u64 + 64)
        .min(u64::from(FIXED_FILES_MAX))
        .min(nofile) as u32;
    ring.submitter().register_files_sparse(fixed)?;
    let bufs = BufRing::new(&ring)?;
    Ok((ring, bufs, fixed))
}

/// Whether io_uring works here; the error says why not.
pub fn probe(max_conns: usize) -> io::Result<()> {
    setup(max_conns).map(drop)
}

struct Slot {
    conn: Option<Conn>,
    /// Bumped when the slot takes a new connection: completions carry it.
    gen: u32,
    /// Operations submitted for this slot whose last completion has not come.
    inflight: u32,
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

/// The ring connection in `slot`, if it is one.
fn ring_io(conn: &mut Conn) -> Option<&mut RingIo> {
    match conn.stream() {
        Stream::Ring(r) => Some(r),
        _ => None,
    }
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

/// Runs worker `w` on io_uring; on the epoll loop instead if the ring cannot be set
/// up (`main` probed already, so this is rare and said once per worker).
pub fn run(w: Worker) {
    let (ring, bufs, nfixed) = match setup(w.server.settings.max_connections) {
        Ok(x) => x,
        Err(e) => {
            eprintln!(
                "memcrab: worker {}: io_uring unavailable ({e}); using epoll",
                w.id
            );
            return w.run();
        }
    };
    let server = std::sync::Arc::clone(&w.server);
    let cx = Ctx {
        server: &server,
        engine: &*server.engine,
        counters: &server.counters[w.id],
        worker: w.id,
        fd: std::cell::Cell::new(-1),
    };
    let mut w = w;
    let mut udp = std::mem::take(&mut w.udp);
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
    let Some(err) = lp.failed.take() else {
        return;
    };
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
    w.udp = udp;
    w.run();
}

impl Loop<'_> {
    fn run(&mut self, bufs: &mut BufRing, udp: &mut [crate::io::udp::Port]) {
        let server = self.cx.server;
        let reqs_per_event = server.settings.reqs_per_event;
        let idle_secs = server.settings.idle_timeout_secs;
        let mut last_idle_scan = Instant::now();
        let mut events = Events::with_capacity(1024);
        let mut udp_ready: Vec<usize> = Vec::new();
        for (i, port) in udp.iter_mut().enumerate() {
            if let Err(e) = self.w.poll.registry().register(
                port.source(),
                Token(UDP_TOKENS + i),
                Interest::READABLE,
            ) {
                eprintln!(
                    "memcrab: worker {}: cannot watch a UDP socket: {e}",
                    self.w.id
                );
                return;
            }
            udp_ready.push(i);
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
                    .user_data(user_data(OP_EPOLL, 0, 0));
                self.push(e);
                epoll_armed = true;
            }
            let busy = !self.dirty.is_empty()
                || !self.ready.is_empty()
                || !udp_ready.is_empty()
                || epoll_due;
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
                    OP_RECV => self.on_recv(bufs, idx, gen, res, flags),
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
            bufs.publish();
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
                    if worker::note_udp(idx, &mut udp_ready) {
                        continue;
                    }
                    let Some(conn) = self.slots.get_mut(idx).and_then(|s| s.conn.as_mut()) else {
                        continue;
                    };
                    conn.note_event(ev);
                    self.mark(idx);
                }
            }
            let mut dirty = std::mem::take(&mut self.dirty);
            for &idx in &dirty {
                if let Some(s) = self.slots.get_mut(idx) {
                    s.dirty = false;
                }
                self.drive(idx, reqs_per_event);
            }
            dirty.clear();
            self.dirty = dirty;
            for _ in 0..self.ready.len() {
                if let Some(idx) = self.ready.pop_front() {
                    self.drive(idx, reqs_per_event);
                }
            }
            udp_ready.retain(|&i| udp.get_mut(i).is_some_and(|p| p.serve(self.cx)));
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
    /// leases, which then never release their segments: at most the `-m`/16 the
    /// lease bound allows, once; a SENDMSG's msghdr and iovecs), and takes the
    /// UDP sockets off the nested epoll (the epoll worker registers them again).
    /// Returns how many connections it closed.
    fn abandon(&mut self, udp: &mut [crate::io::udp::Port]) -> usize {
        for port in udp.iter_mut() {
            let _ = self.w.poll.registry().deregister(port.source());
        }
        self.watchers.clear();
        let mut closed = 0;
        for idx in 0..self.slots.len() {
            let s = &mut self.slots[idx];
            std::mem::forget(std::mem::take(&mut s.grave));
            let Some(mut conn) = s.conn.take() else {
                continue;
            };
            if let Some(r) = ring_io(&mut conn) {
                if r.sending {
                    // As `close` parks them in the grave: the bytes (and leases) a
                    // send in flight reads, and a SENDMSG's msghdr and iovecs.
                    std::mem::forget((std::mem::take(&mut r.out), std::mem::take(&mut r.vec)));
                }
            } else {
                let _ = self.w.poll.registry().deregister(conn.stream().source());
            }
            worker::close(self.cx.server, conn, Some(CloseReason::Error));
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

    /// The connection in slot `idx`, if the slot still holds the one of generation
    /// `gen` that a completion was for.
    fn live(&mut self, idx: usize, gen: u32) -> Option<&mut Conn> {
        self.slots
            .get_mut(idx)
            .filter(|s| s.gen == gen)
            .and_then(|s| s.conn.as_mut())
    }

    fn on_recv(&mut self, bufs: &mut BufRing, idx: usize, gen: u32, res: i32, flags: u32) {
        let more = cqueue::more(flags);
        let bid = cqueue::buffer_select(flags);
        let live = self.live(idx, gen);
        if let Some(conn) = live {
            if let Some(r) = ring_io(conn) {
                let mut closed = false;
                if res > 0 {
                    if let Some(bid) = bid {
                        r.deliver(bufs.buf(bid, res as usize));
                    }
                } else if res == 0 {
                    r.deliver_eof();
                    closed = true;
                } else if res != -libc::ENOBUFS && res != -libc::ECANCELED {
                    r.fail(-res);
                    closed = true;
                }
                if !more {
                    r.recv_armed = false;
                    r.recv_cancelling = false;
                }
                if closed {
                    conn.set_read_closed();
                } else {
                    conn.set_readable();
                }
                self.mark(idx);
            }
        }
        if let Some(bid) = bid {
            bufs.add(bid);
        }
        if !more {
            self.op_done(idx);
        }
    }

    fn on_send(&mut self, idx: usize, gen: u32, res: i32) {
        let live = self.live(idx, gen);
        if let Some(conn) = live {
            if let Some(r) = ring_io(conn) {
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
                    conn: None,
                    gen: 0,
                    inflight: 0,
                    grave: Default::default(),
                    fixed: false,
                    dirty: false,
                    closing: false,
                });
                self.slots.len() - 1
            });
            let session = Session::new(&server.settings);
            let (stream, ring) = match nc.stream {
                Stream::Tcp(s) => (Stream::Ring(Box::new(RingIo::new(Plain::Tcp(s)))), true),
                Stream::Unix(s) => (Stream::Ring(Box::new(RingIo::new(Plain::Unix(s)))), true),
                other => (other, false),
            };
            let mut conn = Conn::new(stream, nc.info, session, server.settings.value_lend_min);
            let ok = if ring {
                let fd = conn.info.fd;
                let fixed = (idx as u32) < self.nfixed
                    && self
                        .ring
                        .submitter()
                        .register_files_update(idx as u32, &[fd])
                        .is_ok();
                self.slots[idx].fixed = fixed;
                true
            } else {
                worker::watch(&self.w.poll, &mut conn, idx)
            };
            if !ok {
                worker::close(server, conn, None);
                self.free.push(idx);
                continue;
            }
            server
                .watch
                .conn_new(conn.info.peer, worker::transport(&conn), conn.info.fd);
            let s = &mut self.slots[idx];
            s.gen = s.gen.wrapping_add(1);
            s.conn = Some(conn);
            // Arm its receive (and serve anything a TLS stream has already).
            self.mark(idx);
        }
    }

    fn drive(&mut self, idx: usize, reqs_per_event: usize) {
        let Some(conn) = self.slots.get_mut(idx).and_then(|s| s.conn.as_mut()) else {
            return;
        };
        match conn.drive(self.cx, reqs_per_event) {
            Next::Wait => {}
            Next::Watching => self.watchers.push(idx),
            Next::Yield => {
                self.cx.counters.conn_yields.incr();
                self.ready.push_back(idx);
            }
            Next::Close => {
                let reason = conn.close_reason();
                self.close(idx, Some(reason));
                return;
            }
        }
        self.sync(idx);
    }

    /// Submits what a ring connection needs: a send for its output, its receive
    /// (re)armed, or cancelled while its inbox is over the limit.
    fn sync(&mut self, idx: usize) {
        let Some(s) = self.slots.get_mut(idx) else {
            return;
        };
        let gen = s.gen;
        let fixed = s.fixed;
        let Some(conn) = s.conn.as_mut() else { return };
        let Some(r) = ring_io(conn) else { return };
        let fd = r.fd();
        let mut sqes: [Option<squeue::Entry>; 2] = [None, None];
        let mut ops = 0;
        if r.wants_send() && r.out.has_leases() {
            // Lent values: one SENDMSG over iovecs (they and the msghdr stay in `r`
            // until the completion; a close moves them to the grave).
            let msg = r.sendmsg();
            let e = if fixed {
                opcode::SendMsg::new(types::Fixed(idx as u32), msg)
                    .flags(libc::MSG_NOSIGNAL as u32)
                    .build()
            } else {
                opcode::SendMsg::new(types::Fd(fd), msg)
                    .flags(libc::MSG_NOSIGNAL as u32)
                    .build()
            };
            sqes[0] = Some(e.user_data(user_data(OP_SEND, idx, gen)));
            r.sending = true;
            ops += 1;
        } else if r.wants_send() {
            let buf = r.out.owned_from(r.sent).unwrap_or_default();
            let (ptr, len) = (buf.as_ptr(), buf.len().min(u32::MAX as usize) as u32);
            let e = if fixed {
                opcode::Send::new(types::Fixed(idx as u32), ptr, len)
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
            } else {
                opcode::Send::new(types::Fd(fd), ptr, len)
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
            };
            sqes[0] = Some(e.user_data(user_data(OP_SEND, idx, gen)));
            r.sending = true;
            ops += 1;
        }
        if r.wants_cancel() {
            r.recv_cancelling = true;
            sqes[1] = Some(
                opcode::AsyncCancel::new(user_data(OP_RECV, idx, gen))
                    .build()
                    .user_data(user_data(OP_CANCEL, idx, gen)),
            );
        } else if r.wants_recv() {
            let e = if fixed {
                opcode::RecvMulti::new(types::Fixed(idx as u32), BGID).build()
            } else {
                opcode::RecvMulti::new(types::Fd(fd), BGID).build()
            };
            sqes[1] = Some(e.user_data(user_data(OP_RECV, idx, gen)));
            r.recv_armed = true;
            ops += 1;
        }
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
        let Some(mut conn) = s.conn.take() else {
            return;
        };
        let gen = s.gen;
        let fixed = std::mem::take(&mut s.fixed);
        let mut sqes: Vec<squeue::Entry> = Vec::new();
        if conn.is_watching() {
            self.watchers.retain(|&w| w != idx);
        }
        if let Some(r) = ring_io(&mut conn) {
            if r.recv_armed {
                sqes.push(
                    opcode::AsyncCancel::new(user_data(OP_RECV, idx, gen))
                        .build()
                        .user_data(user_data(OP_CANCEL, idx, gen)),
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
                        .user_data(user_data(OP_FILES, idx, gen)),
                );
            }
        } else {
            let _ = self.w.poll.registry().deregister(conn.stream().source());
        }
        if s.inflight == 0 {
            self.free.push(idx);
        } else {
            s.closing = true;
        }
        for e in sqes {
            self.push(e);
        }
        worker::close(self.cx.server, conn, reason);
    }

    /// `-o idle_timeout`, as the epoll worker's.
    fn kick_idle(&mut self, idle_secs: u32) {
        let now = self.cx.engine.clock().now();
        for idx in 0..self.slots.len() {
            let idle = self.slots[idx].conn.as_ref().is_some_and(|c| {
                !c.has_output()
                    && !c.is_watching()
                    && now.saturating_sub(c.info.last_cmd.load(Ordering::Relaxed)) > idle_secs
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
                let Some(conn) = self.slots[idx].conn.as_mut() else {
                    continue;
                };
                if !conn.has_output() {
                    continue;
                }
                if !conn.flush_for_shutdown(self.cx) {
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
                    OP_RECV => self.on_recv(bufs, idx, gen, res, flags),
                    OP_SEND => self.on_send(idx, gen, res),
                    _ => {}
                }
            }
            bufs.publish();
        }
        for slot in &mut self.slots {
            if let Some(conn) = slot.conn.take() {
                worker::close(self.cx.server, conn, None);
            }
        }
    }
}
