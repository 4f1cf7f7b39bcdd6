//! A worker thread's parts, whichever driver runs it (`io/epoll.rs` or
//! `io/uring/`), and what both drivers do alike: building the worker's [`Ctx`],
//! opening a connection handed over by the acceptor, registering a socket with the
//! worker's poll, closing a connection, the idle test, and UDP dispatch.
//!
//! ```text
//!   acceptor ──(channel + waker)──► worker 0 ── epoll or io_uring driver ──► Conn::drive
//!            ──────────────────────► worker 1 ── ...
//! ```
//!
//! Connections never move between workers, so a connection's buffers are touched by
//! one thread only; the engine is the only state workers share on the request path.
//! With `-U`, every worker also polls its own dup of each UDP socket (`udp`), and
//! whichever worker reads a datagram answers it.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

use memcrab_proto::text::watch::{CloseReason, Transport};
use mio::{Interest, Poll, Token};

use crate::exec::Ctx;
use crate::io::conn::Conn;
use crate::io::handoff::NewConn;
use crate::io::net::Stream;
use crate::io::udp::Port;
use crate::request::Session;
use crate::server::{ConnInfo, Server};

/// UDP sockets' tokens are `UDP_TOKENS + i`; connection slots never get this far.
pub const UDP_TOKENS: usize = usize::MAX / 2;
/// How long shutdown waits for replies in flight to drain.
pub const SHUTDOWN_FLUSH: Duration = Duration::from_millis(500);

/// What a worker thread is given: its number, its poll (the waker's, UDP's and,
/// under epoll, every connection's readiness), its end of the acceptor's channel.
pub struct Worker {
    pub id: usize,
    pub poll: Poll,
    pub rx: Receiver<NewConn>,
    pub server: Arc<Server>,
    /// This worker's handles on the UDP sockets (`-U`).
    pub udp: Vec<Port>,
}

impl Worker {
    /// The context this worker's requests run in.
    pub fn ctx<'a>(&self, server: &'a Server) -> Ctx<'a> {
        Ctx {
            server,
            engine: &*server.engine,
            counters: &server.counters[self.id],
            worker: self.id,
            fd: Cell::new(-1),
        }
    }

    /// Registers this worker's UDP sockets with its poll (as `UDP_TOKENS + i`);
    /// false, said once, if the kernel refused.
    pub fn watch_udp(&mut self, udp: &mut [Port]) -> bool {
        for (i, port) in udp.iter_mut().enumerate() {
            if let Err(e) = self.poll.registry().register(
                port.source(),
                Token(UDP_TOKENS + i),
                Interest::READABLE,
            ) {
                eprintln!(
                    "memcrab: worker {}: cannot watch a UDP socket: {e}",
                    self.id
                );
                return false;
            }
        }
        true
    }
}

/// A new connection's core: its session follows the settings, and it lends values
/// unless the stream is TLS (the TLS layer encrypts from a buffer).
pub fn open(server: &Server, info: Arc<ConnInfo>, tls: bool) -> Conn {
    let lend_min = if tls {
        0
    } else {
        server.settings.value_lend_min
    };
    Conn::new(info, Session::new(&server.settings), lend_min)
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

/// If `token` is a UDP socket's, queues that socket to be served (once) and says
/// so; false for a connection's token.
pub fn note_udp(token: usize, udp_ready: &mut Vec<usize>) -> bool {
    let Some(i) = token.checked_sub(UDP_TOKENS) else {
        return false;
    };
    if !udp_ready.contains(&i) {
        udp_ready.push(i);
    }
    true
}

/// Serves the UDP sockets queued in `udp_ready`, each up to its turn's quota;
/// those that used it stay queued.
pub fn serve_udp(udp_ready: &mut Vec<usize>, udp: &mut [Port], cx: &Ctx<'_>) {
    udp_ready.retain(|&i| udp.get_mut(i).is_some_and(|p| p.serve(cx)));
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

/// `-o idle_timeout`: whether a connection with nothing left to send has had no
/// command for longer than `idle_secs` at `now`. A watcher sends nothing: memcached's
/// idle timeout never closes one.
pub fn idle(conn: &Conn, has_output: bool, now: u32, idle_secs: u32) -> bool {
    !has_output
        && !conn.is_watching()
        && now.saturating_sub(conn.info.last_cmd.load(Ordering::Relaxed)) > idle_secs
}

/// Forgets a connection and then closes its socket (`wire` owns it); `reason` (None
/// at startup failures and shutdown, which memcached does not log) goes to `watch
/// connevents`.
pub fn close<W>(server: &Server, conn: Conn, wire: W, reason: Option<CloseReason>) {
    if let Some(reason) = reason {
        server
            .watch
            .conn_close(conn.info.peer, transport(&conn.info), reason, conn.info.fd);
    }
    server.conns.lock().remove(&conn.info.fd);
    server.curr_connections.fetch_sub(1, Ordering::Relaxed);
    drop(conn);
    drop(wire);
}
