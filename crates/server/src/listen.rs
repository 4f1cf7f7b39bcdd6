//! Listening sockets and the acceptor thread, which enforces `-c` and hands each new
//! connection to a worker in turn.

use std::io::{self, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use memcrab_proto::text::reply;
use mio::{Events, Interest, Poll, Token};
use socket2::{Domain, Socket, Type};

use crate::conn::Stream;
use crate::server::{ConnInfo, Server};
use crate::worker::{NewConn, WAKE};

pub enum Listener {
    Tcp(mio::net::TcpListener),
    Unix(mio::net::UnixListener),
}

impl Listener {
    fn fd(&self) -> i32 {
        match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l) => l.as_raw_fd(),
        }
    }

    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Listener::Tcp(l) => l,
            Listener::Unix(l) => l,
        }
    }

    pub fn local_addr_text(&self) -> String {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map(|a| format!("tcp:{a}"))
                .unwrap_or_else(|_| "tcp:?".into()),
            Listener::Unix(l) => l
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| format!("unix:{}", p.display())))
                .unwrap_or_else(|| "unix:?".into()),
        }
    }

    pub fn tcp_port(&self) -> Option<u16> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok().map(|a| a.port()),
            Listener::Unix(_) => None,
        }
    }
}

/// A socket of type `ty` for binding `addr` (TCP and UDP alike): address reuse on,
/// and an IPv6 socket IPv6-only.
pub fn new_socket(addr: &SocketAddr, ty: Type) -> io::Result<Socket> {
    let domain = if addr.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let sock = Socket::new(domain, ty, None)?;
    sock.set_reuse_address(true)?;
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    Ok(sock)
}

/// Binds what the settings ask for: the unix socket if `-s` is given (which, as in
/// memcached, disables TCP), else every `-l` address on `-p` (or its own `:port`).
pub fn bind(server: &Server) -> anyhow::Result<Vec<Listener>> {
    let s = &server.settings;
    if let Some(path) = &s.unix_socket {
        // memcached removes a stale socket file, but nothing else.
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            if meta.file_type().is_socket() {
                let _ = std::fs::remove_file(path);
            }
        }
        let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
        let addr = socket2::SockAddr::unix(path)?;
        sock.bind(&addr)
            .with_context(|| format!("-s: cannot bind unix socket {path}"))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(s.unix_mask & 0o777))
            .with_context(|| format!("-a: cannot set permissions of {path}"))?;
        sock.listen(s.backlog)?;
        sock.set_nonblocking(true)?;
        let std_listener: std::os::unix::net::UnixListener = sock.into();
        return Ok(vec![Listener::Unix(mio::net::UnixListener::from_std(
            std_listener,
        ))]);
    }
    if s.port == 0 && s.udp_port != 0 {
        // As memcached: `-p 0 -U <port>` serves UDP only.
        return Ok(Vec::new());
    }
    if s.port == 0 {
        bail!("-p 0 disables TCP (as in memcached) and no -s unix socket was given: nothing to listen on");
    }
    let mut out = Vec::new();
    for l in &s.listen {
        for addr in parse_listen(l, s.port)? {
            let sock = new_socket(&addr, Type::STREAM)?;
            sock.bind(&addr.into())
                .with_context(|| format!("-l/-p: cannot bind {addr}"))?;
            sock.listen(s.backlog)?;
            sock.set_nonblocking(true)?;
            let std_listener: std::net::TcpListener = sock.into();
            out.push(Listener::Tcp(mio::net::TcpListener::from_std(std_listener)));
        }
    }
    Ok(out)
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`, `*` (every interface), as memcached's
/// `-l` list entries.
pub(crate) fn parse_listen(entry: &str, default_port: u16) -> anyhow::Result<Vec<SocketAddr>> {
    let port_of = |p: &str| -> anyhow::Result<u16> {
        p.parse()
            .with_context(|| format!("-l: Invalid port number: \"{p}\""))
    };
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let Some((h, after)) = rest.split_once(']') else {
            bail!("-l: Invalid IPV6 address: \"{entry}\"");
        };
        match after.strip_prefix(':') {
            Some(p) => (h, port_of(p)?),
            None if after.is_empty() => (h, default_port),
            None => bail!("-l: Invalid IPV6 address: \"{entry}\""),
        }
    } else {
        match entry.split_once(':') {
            // More than one colon: an IPv6 address without a port.
            Some((h, p)) if !p.contains(':') => (h, port_of(p)?),
            _ => (entry, default_port),
        }
    };
    if host == "*" {
        return Ok(vec![
            SocketAddr::from(([0, 0, 0, 0], port)),
            SocketAddr::from(([0u16; 8], port)),
        ]);
    }
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("-l: cannot resolve \"{host}\""))?
        .collect();
    if addrs.is_empty() {
        bail!("-l: \"{host}\" resolves to no address");
    }
    Ok(addrs)
}

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
            loop {
                let accepted = match l {
                    Listener::Tcp(t) => t.accept().map(|(s, a)| {
                        let _ = s.set_nodelay(true);
                        (Stream::Tcp(s), format!("tcp:{a}"))
                    }),
                    Listener::Unix(u) => u
                        .accept()
                        .map(|(s, _)| (Stream::Unix(s), listen_addr.clone())),
                };
                let (mut stream, addr) = match accepted {
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
                    // As memcached: tell the client why, then close.
                    let _ = match &mut stream {
                        Stream::Tcp(s) => s.write(reply::TOO_MANY_CONNECTIONS),
                        Stream::Unix(s) => s.write(reply::TOO_MANY_CONNECTIONS),
                    };
                    server.rejected_connections.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                server.curr_connections.fetch_add(1, Ordering::Relaxed);
                server.total_connections.fetch_add(1, Ordering::Relaxed);
                let fd = match &stream {
                    Stream::Tcp(s) => s.as_raw_fd(),
                    Stream::Unix(s) => s.as_raw_fd(),
                };
                let info = Arc::new(ConnInfo {
                    fd,
                    addr,
                    listen_addr: Some(listen_addr.clone()),
                    last_cmd: AtomicU32::new(server.engine.clock().now()),
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
            }),
        );
    }
}
