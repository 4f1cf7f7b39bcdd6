//! A worker thread's parts, whichever driver runs it (`io/epoll.rs` or
//! `io/uring/`), and what both drivers do alike below the connection: building the
//! worker's [`Ctx`], a new connection's lending floor, registering a socket with
//! the worker's poll, noting an opened or closed connection, and the idle test.
//! Each driver holds its own connections ([`crate::io::conn::Conn`]) and UDP
//! sockets ([`crate::io::udp::Ports`]) and drives them itself.
//!
//! ```text
//!   acceptor ──(channel + waker)──► worker 0 ── epoll or io_uring driver ──► Conn::drive
//!            ──────────────────────► worker 1 ── ...
//! ```
//!
//! Connections never move between workers, so a connection's buffers are touched by
//! one thread only; the engine is the only state workers share on the request path.
//! With `-U`, every worker also polls its own dup of each UDP socket, and whichever
//! worker reads a datagram answers it.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

use memcrab_proto::text::watch::{CloseReason, Transport};
use mio::{Interest, Poll, Token};

use crate::io::handoff::NewConn;
use crate::io::net::Stream;
use crate::server::{ConnInfo, Ctx, Server};

/// How long shutdown waits for replies in flight to drain.
pub const SHUTDOWN_FLUSH: Duration = Duration::from_millis(500);

/// What a worker thread is given: its number, its poll (the waker's, UDP's and,
/// under epoll, every connection's readiness), its end of the acceptor's channel.
pub struct Worker {
    pub id: usize,
    pub poll: Poll,
    pub rx: Receiver<NewConn>,
    pub server: Arc<Server>,
}

impl Worker {
    /// The context this worker's requests run in.
    pub fn ctx<'a>(&self, server: &'a Server) -> Ctx<'a> {
        let obs = server
            .observe
            .any
            .then(|| server.observe.workers.get(self.id))
            .flatten();
        Ctx {
            server,
            engine: &*server.engine,
            counters: &server.counters[self.id],
            worker: self.id,
            fd: Cell::new(-1),
            obs,
            series: Cell::new(0),
            // The first keyed request is sampled (and draws the next gap).
            hot_left: Cell::new(1),
            rare: Cell::new(if obs.is_some_and(|w| !w.batched || !w.ticks.is_tsc()) {
                Ctx::RARE_WORKER
            } else {
                0
            }),
            clock: match obs {
                Some(w) if w.timed && w.ticks.is_tsc() => Ctx::CLOCK_TSC,
                Some(w) if w.timed => Ctx::CLOCK_MONOTONIC,
                _ => 0,
            },
        }
    }
}

/// The smallest value a new connection borrows from the store instead of copying
/// (`-o value_lend_min`); 0, never, over TLS (the TLS layer encrypts from a buffer).
pub fn lend_min(server: &Server, tls: bool) -> usize {
    if tls {
        0
    } else {
        server.settings.value_lend_min
    }
}

/// `watch connevents`: a connection was opened.
pub fn note_open(server: &Server, info: &ConnInfo) {
    server.watch.conn_new(info.peer, transport(info), info.fd);
}

/// The transport `watch connevents` names for a stream connection.
fn transport(info: &ConnInfo) -> Transport {
    if info.peer.is_some() {
        Transport::Tcp
    } else {
        Transport::Local
    }
}

/// Registers a stream with a worker's poll under slot `idx`'s token (readable and
/// writable, edge-triggered); false if the kernel refused.
pub fn watch(poll: &Poll, stream: &mut Stream, idx: usize) -> bool {
    poll.registry()
        .register(
            stream.source(),
            Token(idx),
            Interest::READABLE | Interest::WRITABLE,
        )
        .is_ok()
}

/// `-o idle_timeout`: whether a connection has had no command for longer than
/// `idle_secs` at `now`. One that is `busy` (it has output left to send, or is a
/// watcher, which sends nothing: memcached's idle timeout never closes one) is not
/// idle.
pub fn idle(info: &ConnInfo, busy: bool, now: u32, idle_secs: u32) -> bool {
    !busy && now.saturating_sub(info.last_cmd.load(Ordering::Relaxed)) > idle_secs
}

/// Forgets a connection the driver is closing: `watch connevents` hears why
/// (`reason`; None at startup failures and shutdown, which memcached does not
/// log), `stats conns` drops it and `curr_connections` goes down. The driver then
/// drops the connection and its socket, in that order.
pub fn forget(server: &Server, info: &ConnInfo, reason: Option<CloseReason>) {
    if let Some(reason) = reason {
        server
            .watch
            .conn_close(info.peer, transport(info), reason, info.fd);
    }
    server.conns.lock().remove(&info.fd);
    server.curr_connections.fetch_sub(1, Ordering::Relaxed);
}
