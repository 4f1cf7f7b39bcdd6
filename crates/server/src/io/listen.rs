//! The acceptor thread: it polls the listening sockets (made by `net`), enforces
//! `-c`, wraps connections of TLS listeners (`-Z`; `-l btls:`/`mtls:` choose how
//! client certificates are asked) in a TLS stream (`tls`; the handshake runs on
//! the worker, in the connection's first reads), notes the protocol of a `-l
//! proto[...]:` listener in the connection's info (its session speaks it), and
//! hands each new connection to a worker in turn (`handoff`).

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use memcrab_proto::text::reply;
use mio::{Events, Interest, Poll, Token};

use crate::io::handoff::{NewConn, WAKE};
use crate::io::net::{Listener, Stream};
use crate::io::tls::TlsStream;
use crate::server::{ConnInfo, ConnState, Server};

/// The acceptor thread's loop.
pub fn accept_loop(
    mut listeners: Vec<Listener>,
    mut poll: Poll,
    workers: Vec<(Sender<NewConn>, Arc<mio::Waker>)>,
    server: Arc<Server>,
) {
    for (i, l) in listeners.iter_mut().enumerate() {
        if let Err(e) = poll
            .registry()
            .register(l.source(), Token(i), Interest::READABLE)
        {
            eprintln!("memcrab: cannot watch a listening socket: {e}");
            return;
        }
    }
    let mut events = Events::with_capacity(64);
    let mut next_worker = 0usize;
    // After EMFILE the pending connection stays queued and no new edge may come:
    // retry on a timer until accept works again.
    let mut retry: Option<Duration> = None;
    loop {
        if let Err(e) = poll.poll(&mut events, retry) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            eprintln!("memcrab: acceptor: poll failed: {e}");
            return;
        }
        if server.shutting_down() {
            return;
        }
        retry = None;
        let tokens: Vec<usize> = if events.is_empty() {
            (0..listeners.len()).collect()
        } else {
            events
                .iter()
                .filter(|e| e.token() != WAKE)
                .map(|e| e.token().0)
                .collect()
        };
        for i in tokens {
            let Some(l) = listeners.get(i) else { continue };
            let listen_addr = l.local_addr_text();
            let (tls, protocol) = match l {
                Listener::Tcp { tls, protocol, .. } => (
                    tls.and_then(|auth| server.tls.as_ref().map(|t| (t, auth))),
                    *protocol,
                ),
                Listener::Unix(_) => (None, None),
            };
            loop {
                let accepted = match l {
                    Listener::Tcp { sock, .. } => sock.accept().map(|(s, a)| {
                        let _ = s.set_nodelay(true);
                        (Stream::Tcp(s), format!("tcp:{a}"), Some(a))
                    }),
                    Listener::Unix(u) => u
                        .accept()
                        .map(|(s, _)| (Stream::Unix(s), listen_addr.clone(), None)),
                };
                let (mut stream, addr, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        if server.verbosity.load(Ordering::Relaxed) > 0 {
                            eprintln!("memcrab: accept failed: {e}");
                        }
                        retry = Some(Duration::from_millis(10));
                        break;
                    }
                };
                if server.curr_connections.load(Ordering::Relaxed)
                    >= server.settings.max_connections
                {
                    // As memcached: tell the client why (in plain text, before any
                    // TLS), then close.
                    let _ = stream.write(reply::TOO_MANY_CONNECTIONS);
                    server.rejected_connections.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let stream = match (tls, stream) {
                    (Some((tls, auth)), Stream::Tcp(tcp)) => {
                        match TlsStream::accept(tls, auth, tcp, &server.watch) {
                            Ok(t) => Stream::Tls(Box::new(t)),
                            Err(e) => {
                                if server.verbosity.load(Ordering::Relaxed) > 0 {
                                    eprintln!("memcrab: TLS accept failed: {e}");
                                }
                                continue;
                            }
                        }
                    }
                    (_, plain) => plain,
                };
                server.curr_connections.fetch_add(1, Ordering::Relaxed);
                server.total_connections.fetch_add(1, Ordering::Relaxed);
                let fd = stream.fd();
                let info = Arc::new(ConnInfo {
                    fd,
                    addr,
                    listen_addr: Some(listen_addr.clone()),
                    last_cmd: AtomicU32::new(server.engine.clock().now()),
                    peer,
                    state: AtomicU8::new(ConnState::NewCmd as u8),
                    protocol,
                });
                server.conns.lock().insert(fd, Arc::clone(&info));
                let (tx, waker) = &workers[next_worker % workers.len()];
                next_worker = next_worker.wrapping_add(1);
                if tx.send(NewConn { stream, info }).is_err() {
                    server.conns.lock().remove(&fd);
                    server.curr_connections.fetch_sub(1, Ordering::Relaxed);
                    continue;
                }
                let _ = waker.wake();
            }
        }
    }
}

/// Registers the listening sockets in `stats conns`.
pub fn register_listeners(server: &Server, listeners: &[Listener]) {
    let mut conns = server.conns.lock();
    for l in listeners {
        conns.insert(
            l.fd(),
            Arc::new(ConnInfo {
                fd: l.fd(),
                addr: l.local_addr_text(),
                listen_addr: None,
                last_cmd: AtomicU32::new(server.engine.clock().now()),
                peer: None,
                state: AtomicU8::new(ConnState::NewCmd as u8),
                protocol: None,
            }),
        );
    }
}
