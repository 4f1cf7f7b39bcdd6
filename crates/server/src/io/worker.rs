//! A worker thread: one mio event loop serving the connections handed to it, each
//! for its whole life.
//!
//! ```text
//!   acceptor ──(channel + waker)──► worker 0 ── poll ──► conn.drive() ...
//!            ──────────────────────► worker 1 ── poll ──► conn.drive() ...
//! ```
//!
//! Connections never move between workers, so a connection's buffers are touched by
//! one thread only; the engine is the only state workers share on the request path.
//! With `-U`, every worker also polls its own dup of each UDP socket (`udp`), and
//! whichever worker reads a datagram answers it.

use std::collections::VecDeque;
use std::io;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memcrab_proto::text::watch::{CloseReason, Transport};
use mio::{Events, Interest, Poll, Token};

use crate::exec::Ctx;
use crate::io::conn::{Conn, Next};
use crate::io::handoff::{NewConn, WAKE};
use crate::request::Session;
use crate::server::Server;

/// UDP sockets' tokens are `UDP_TOKENS + i`; connection slots never get this far.
pub const UDP_TOKENS: usize = usize::MAX / 2;
/// How long shutdown waits for replies in flight to drain.
const SHUTDOWN_FLUSH: Duration = Duration::from_millis(500);

/// A worker's lists of connection slots that `drive` updates.
struct Queues<'a> {
    /// Slots free for new connections.
    free: &'a mut Vec<usize>,
    /// Connections to drive again this turn.
    ready: &'a mut VecDeque<usize>,
    /// Connections that are `watch` streams, driven whenever the waker fires.
    watchers: &'a mut Vec<usize>,
}

pub struct Worker {
    pub id: usize,
    pub poll: Poll,
    pub rx: Receiver<NewConn>,
    pub server: Arc<Server>,
    /// This worker's handles on the UDP sockets (`-U`).
    pub udp: Vec<crate::io::udp::Port>,
}

impl Worker {
    pub fn run(mut self) {
        let server = Arc::clone(&self.server);
        let cx = Ctx {
            server: &server,
            engine: &*server.engine,
            counters: &server.counters[self.id],
            worker: self.id,
            fd: std::cell::Cell::new(-1),
        };
        let mut conns: Vec<Option<Conn>> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        let mut ready: VecDeque<usize> = VecDeque::new();
        // The watch hub wakes this loop when lines arrive for these.
        let mut watchers: Vec<usize> = Vec::new();
        let mut events = Events::with_capacity(1024);
        let reqs_per_event = server.settings.reqs_per_event;
        let idle_secs = server.settings.idle_timeout_secs;
        let mut last_idle_scan = Instant::now();
        // UDP sockets that used their turn's quota with datagrams maybe left.
        let mut udp_ready: Vec<usize> = Vec::new();
        let mut udp = std::mem::take(&mut self.udp);
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
                return;
            }
            // Datagrams may have arrived before the registration.
            udp_ready.push(i);
        }

        let mut first_turn = true;
        loop {
            let timeout = if first_turn || !ready.is_empty() || !udp_ready.is_empty() {
                Some(Duration::ZERO)
            } else if idle_secs > 0 {
                Some(Duration::from_secs(1))
            } else {
                None
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                eprintln!("memcrab: worker {}: poll failed: {e}", self.id);
                return;
            }
            // The first turn takes what the acceptor handed over before this loop
            // began (an io_uring worker that fell back to epoll may have been woken
            // for it already).
            let woken =
                std::mem::take(&mut first_turn) || events.iter().any(|ev| ev.token() == WAKE);
            if woken {
                ready.extend(watchers.iter().copied());
                while let Ok(nc) = self.rx.try_recv() {
                    let idx = free.pop().unwrap_or_else(|| {
                        conns.push(None);
                        conns.len() - 1
                    });
                    let session = Session::new(&server.settings);
                    let mut conn =
                        Conn::new(nc.stream, nc.info, session, server.settings.value_lend_min);
                    if !watch(&self.poll, &mut conn, idx) {
                        close(&server, conn, None);
                        free.push(idx);
                        continue;
                    }
                    server
                        .watch
                        .conn_new(conn.info.peer, transport(&conn), conn.info.fd);
                    conns[idx] = Some(conn);
                    // Data may already be waiting; the edge may have passed.
                    ready.push_back(idx);
                }
            }
            for ev in events.iter() {
                if ev.token() == WAKE {
                    continue;
                }
                let idx = ev.token().0;
                if note_udp(idx, &mut udp_ready) {
                    continue;
                }
                let Some(conn) = conns.get_mut(idx).and_then(Option::as_mut) else {
                    continue;
                };
                conn.note_event(ev);
                let q = Queues {
                    free: &mut free,
                    ready: &mut ready,
                    watchers: &mut watchers,
                };
                self.drive(&cx, &mut conns, q, idx, reqs_per_event);
            }
            for _ in 0..ready.len() {
                if let Some(idx) = ready.pop_front() {
                    let q = Queues {
                        free: &mut free,
                        ready: &mut ready,
                        watchers: &mut watchers,
                    };
                    self.drive(&cx, &mut conns, q, idx, reqs_per_event);
                }
            }
            udp_ready.retain(|&i| udp.get_mut(i).is_some_and(|p| p.serve(&cx)));
            if server.shutting_down() {
                self.shutdown(&cx, &mut conns);
                return;
            }
            if idle_secs > 0 && last_idle_scan.elapsed() >= Duration::from_secs(1) {
                last_idle_scan = Instant::now();
                self.kick_idle(&cx, &mut conns, &mut free, idle_secs);
            }
        }
    }

    fn drive(
        &self,
        cx: &Ctx<'_>,
        conns: &mut [Option<Conn>],
        q: Queues<'_>,
        idx: usize,
        reqs_per_event: usize,
    ) {
        let Some(conn) = conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        match conn.drive(cx, reqs_per_event) {
            Next::Wait => {}
            Next::Watching => q.watchers.push(idx),
            Next::Yield => {
                cx.counters.conn_yields.incr();
                q.ready.push_back(idx);
            }
            Next::Close => {
                if let Some(mut conn) = conns[idx].take() {
                    if conn.is_watching() {
                        q.watchers.retain(|&w| w != idx);
                    }
                    let _ = self.poll.registry().deregister(conn.stream().source());
                    let reason = conn.close_reason();
                    close(cx.server, conn, Some(reason));
                    q.free.push(idx);
                }
            }
        }
    }

    /// `-o idle_timeout`: closes connections with no command for that long and
    /// nothing left to send.
    fn kick_idle(
        &self,
        cx: &Ctx<'_>,
        conns: &mut [Option<Conn>],
        free: &mut Vec<usize>,
        idle_secs: u32,
    ) {
        let now = cx.engine.clock().now();
        for (idx, slot) in conns.iter_mut().enumerate() {
            // A watcher sends nothing: memcached's idle timeout never closes one.
            let idle = slot.as_ref().is_some_and(|c| {
                !c.has_output()
                    && !c.is_watching()
                    && now
                        .saturating_sub(c.info.last_cmd.load(std::sync::atomic::Ordering::Relaxed))
                        > idle_secs
            });
            if idle {
                if let Some(mut conn) = slot.take() {
                    let _ = self.poll.registry().deregister(conn.stream().source());
                    close(cx.server, conn, Some(CloseReason::IdleTimeout));
                    free.push(idx);
                    cx.counters.idle_kicks.incr();
                }
            }
        }
    }

    /// Sends what each connection has pending, for up to [`SHUTDOWN_FLUSH`], then
    /// drops them all.
    fn shutdown(&mut self, cx: &Ctx<'_>, conns: &mut [Option<Conn>]) {
        let deadline = Instant::now() + SHUTDOWN_FLUSH;
        let mut events = Events::with_capacity(256);
        loop {
            let pending = conns
                .iter_mut()
                .flatten()
                .filter(|c| c.has_output())
                .map(|c| !c.flush_for_shutdown(cx))
                .filter(|&left| left)
                .count();
            let now = Instant::now();
            if pending == 0 || now >= deadline {
                break;
            }
            let _ = self.poll.poll(
                &mut events,
                Some((deadline - now).min(Duration::from_millis(20))),
            );
        }
        for slot in conns.iter_mut() {
            if let Some(conn) = slot.take() {
                close(cx.server, conn, None);
            }
        }
    }
}

/// The transport `watch connevents` names for a stream connection.
pub fn transport(conn: &Conn) -> Transport {
    if conn.info.peer.is_some() {
        Transport::Tcp
    } else {
        Transport::Local
    }
}

/// Forgets a connection and closes its socket; `reason` (None at startup failures
/// and shutdown, which memcached does not log) goes to `watch connevents`.
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

/// Registers a connection's stream with a worker's poll under slot `idx`'s token
/// (readable and writable, edge-triggered); false if the kernel refused.
pub fn watch(poll: &Poll, conn: &mut Conn, idx: usize) -> bool {
    poll.registry()
        .register(
            conn.stream().source(),
            Token(idx),
            Interest::READABLE | Interest::WRITABLE,
        )
        .is_ok()
}

pub fn close(server: &Server, conn: Conn, reason: Option<CloseReason>) {
    if let Some(reason) = reason {
        server
            .watch
            .conn_close(conn.info.peer, transport(&conn), reason, conn.info.fd);
    }
    server.conns.lock().remove(&conn.info.fd);
    server
        .curr_connections
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    drop(conn);
}
