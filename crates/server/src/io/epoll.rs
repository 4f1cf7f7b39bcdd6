//! The epoll driver (`-o io=epoll`, and where io_uring is refused or fails): one
//! mio event loop per worker, serving the connections handed to it, each for its
//! whole life. Readiness says when a socket can be read or written; the
//! connection ([`Conn::drive`]) then reads, serves and writes through its
//! [`Stream`].
//!
//! ```text
//!   poll ──► events ──► Conn::drive(stream) ──► Wait | Watching | Yield | Close
//!     ▲ waker: new connections from the acceptor; watchers' new lines
//! ```

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use memcrab_proto::text::watch::CloseReason;
use mio::{Events, Poll};

use crate::io::conn::{Conn, Next};
use crate::io::handoff::{NewConn, WAKE};
use crate::io::net::Stream;
use crate::io::udp::Ports;
use crate::io::worker::{self, Worker, SHUTDOWN_FLUSH};
use crate::request::Session;
use crate::server::{Ctx, Server};

/// A connection and its socket.
struct Client {
    conn: Conn,
    stream: Stream,
}

impl Client {
    /// A connection the acceptor handed over; its session follows the settings.
    fn open(server: &Server, nc: NewConn) -> Client {
        let lend_min = worker::lend_min(server, nc.stream.is_tls());
        Client {
            conn: Conn::new(nc.info, Session::new(&server.settings), lend_min),
            stream: nc.stream,
        }
    }

    /// Closes it: the worker forgets it, then the connection and its socket go.
    fn close(self, server: &Server, reason: Option<CloseReason>) {
        worker::forget(server, &self.conn.info, reason);
    }

    /// `-o idle_timeout`'s test (see [`worker::idle`]).
    fn idle(&self, now: u32, idle_secs: u32) -> bool {
        let busy = self.conn.has_output(&self.stream) || self.conn.is_watching();
        worker::idle(&self.conn.info, busy, now, idle_secs)
    }
}

/// A worker's lists of connection slots that `drive` updates.
struct Queues<'a> {
    /// Slots free for new connections.
    free: &'a mut Vec<usize>,
    /// Connections to drive again this turn.
    ready: &'a mut VecDeque<usize>,
    /// Connections that are `watch` streams, driven whenever the waker fires.
    watchers: &'a mut Vec<usize>,
}

/// Runs worker `w` and its UDP sockets on epoll until shutdown (or until its poll
/// fails).
pub fn run(mut w: Worker, mut udp: Ports) {
    let server = std::sync::Arc::clone(&w.server);
    let cx = w.ctx(&server);
    let mut conns: Vec<Option<Client>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut ready: VecDeque<usize> = VecDeque::new();
    // The watch hub wakes this loop when lines arrive for these.
    let mut watchers: Vec<usize> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let reqs_per_event = server.settings.reqs_per_event;
    let idle_secs = server.settings.idle_timeout_secs;
    let mut last_idle_scan = Instant::now();
    if !udp.watch(&w.poll, w.id) {
        return;
    }

    let mut first_turn = true;
    loop {
        let timeout = if first_turn || !ready.is_empty() || udp.waiting() {
            Some(Duration::ZERO)
        } else if idle_secs > 0 {
            Some(Duration::from_secs(1))
        } else {
            None
        };
        if let Err(e) = w.poll.poll(&mut events, timeout) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            eprintln!("memcrab: worker {}: poll failed: {e}", w.id);
            return;
        }
        // The first turn takes what the acceptor handed over before this loop
        // began (a worker whose ring failed may have been woken for it already).
        let woken = std::mem::take(&mut first_turn) || events.iter().any(|ev| ev.token() == WAKE);
        if woken {
            ready.extend(watchers.iter().copied());
            while let Ok(nc) = w.rx.try_recv() {
                let idx = free.pop().unwrap_or_else(|| {
                    conns.push(None);
                    conns.len() - 1
                });
                let mut c = Client::open(&server, nc);
                if !worker::watch(&w.poll, &mut c.stream, idx) {
                    c.close(&server, None);
                    free.push(idx);
                    continue;
                }
                worker::note_open(&server, &c.conn.info);
                conns[idx] = Some(c);
                // Data may already be waiting; the edge may have passed.
                ready.push_back(idx);
            }
        }
        for ev in events.iter() {
            if ev.token() == WAKE {
                continue;
            }
            let idx = ev.token().0;
            if udp.note(idx) {
                continue;
            }
            let Some(c) = conns.get_mut(idx).and_then(Option::as_mut) else {
                continue;
            };
            c.conn.note_event(ev);
            let q = Queues {
                free: &mut free,
                ready: &mut ready,
                watchers: &mut watchers,
            };
            drive(&w.poll, &cx, &mut conns, q, idx, reqs_per_event);
        }
        for _ in 0..ready.len() {
            if let Some(idx) = ready.pop_front() {
                let q = Queues {
                    free: &mut free,
                    ready: &mut ready,
                    watchers: &mut watchers,
                };
                drive(&w.poll, &cx, &mut conns, q, idx, reqs_per_event);
            }
        }
        udp.serve(&cx);
        if server.shutting_down() {
            shutdown(&mut w.poll, &cx, &mut conns);
            return;
        }
        if idle_secs > 0 && last_idle_scan.elapsed() >= Duration::from_secs(1) {
            last_idle_scan = Instant::now();
            kick_idle(&w.poll, &cx, &mut conns, &mut free, idle_secs);
        }
    }
}

fn drive(
    poll: &Poll,
    cx: &Ctx<'_>,
    conns: &mut [Option<Client>],
    q: Queues<'_>,
    idx: usize,
    reqs_per_event: usize,
) {
    let Some(c) = conns.get_mut(idx).and_then(Option::as_mut) else {
        return;
    };
    match c.conn.drive(&mut c.stream, &[], cx, reqs_per_event) {
        Next::Wait => {}
        Next::Watching => q.watchers.push(idx),
        Next::Yield => {
            cx.counters.conn_yields.incr();
            q.ready.push_back(idx);
        }
        Next::Close => {
            if let Some(mut c) = conns[idx].take() {
                if c.conn.is_watching() {
                    q.watchers.retain(|&w| w != idx);
                }
                let _ = poll.registry().deregister(c.stream.source());
                let reason = c.conn.close_reason();
                c.close(cx.server, Some(reason));
                q.free.push(idx);
            }
        }
    }
}

/// `-o idle_timeout`: closes connections with no command for that long and
/// nothing left to send.
fn kick_idle(
    poll: &Poll,
    cx: &Ctx<'_>,
    conns: &mut [Option<Client>],
    free: &mut Vec<usize>,
    idle_secs: u32,
) {
    let now = cx.engine.clock().now();
    for (idx, slot) in conns.iter_mut().enumerate() {
        if slot.as_ref().is_some_and(|c| c.idle(now, idle_secs)) {
            if let Some(mut c) = slot.take() {
                let _ = poll.registry().deregister(c.stream.source());
                c.close(cx.server, Some(CloseReason::IdleTimeout));
                free.push(idx);
                cx.counters.idle_kicks.incr();
            }
        }
    }
}

/// Sends what each connection has pending, for up to [`SHUTDOWN_FLUSH`], then
/// drops them all.
fn shutdown(poll: &mut Poll, cx: &Ctx<'_>, conns: &mut [Option<Client>]) {
    let deadline = Instant::now() + SHUTDOWN_FLUSH;
    let mut events = Events::with_capacity(256);
    loop {
        let pending = conns
            .iter_mut()
            .flatten()
            .filter(|c| c.conn.has_output(&c.stream))
            .map(|c| !c.conn.flush_for_shutdown(&mut c.stream, cx))
            .filter(|&left| left)
            .count();
        let now = Instant::now();
        if pending == 0 || now >= deadline {
            break;
        }
        let _ = poll.poll(
            &mut events,
            Some((deadline - now).min(Duration::from_millis(20))),
        );
    }
    for slot in conns.iter_mut() {
        if let Some(c) = slot.take() {
            c.close(cx.server, None);
        }
    }
}
