//! Sockets: the makers of every listening socket (TCP and unix listeners, UDP
//! sockets) from `-l`/`-p`/`-s`/`-U`, and the stream a connection reads and writes
//! through readiness (plain, or TLS from [`crate::io::tls`]; `stream.rs` makes it a
//! connection's wire). Nothing here knows about requests.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;

use anyhow::{bail, Context};
use socket2::{Domain, Socket, Type};

use crate::io::tls::TlsStream;
use crate::startup::service::{Failure, EX_OSERR};
use crate::startup::settings::{bind_port, ListenEntry, ListenPrefix, Protocol, Settings};
use crate::startup::tls::ClientAuth;

/// The send buffer asked for (memcached's maximize_sndbuf also asks for as much as
/// the kernel grants; Linux caps it at net.core.wmem_max).
const SEND_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// A TCP, unix or TLS-over-TCP stream. `read` and `write` move plaintext; a TLS
/// stream may also hold encrypted output the socket has not taken yet
/// ([`Stream::has_pending_output`], sent by [`Stream::flush`]).
pub enum Stream {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    /// Always inlined: the request path's read, a three-way dispatch.
    #[inline(always)]
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }

    /// Always inlined, as `read`: the request path's write (a call here cost 30
    /// instructions a request once `write_vectored` joined it).
    #[inline(always)]
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    /// Writes the slices in order, as far as the socket takes them (one `writev` on a
    /// plain stream; TLS takes the first slice only: its connections never lend,
    /// see `out.rs`).
    pub fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(bufs),
            Stream::Unix(s) => s.write_vectored(bufs),
            Stream::Tls(_) => match bufs.first() {
                Some(b) => self.write(b),
                None => Ok(0),
            },
        }
    }

    /// Sends output the stream itself buffered (TLS records), as far as the socket
    /// takes it; a full socket is not an error.
    pub fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tls(s) => s.flush(),
            Stream::Tcp(_) | Stream::Unix(_) => Ok(()),
        }
    }

    /// Whether the stream holds output the socket has not taken (TLS records).
    pub fn has_pending_output(&self) -> bool {
        match self {
            Stream::Tls(s) => s.has_pending_output(),
            Stream::Tcp(_) | Stream::Unix(_) => false,
        }
    }

    /// Whether the stream is TLS (whose connections never lend values).
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    pub fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
            Stream::Tls(s) => s.tcp_mut(),
        }
    }

    pub fn fd(&self) -> i32 {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(s) => s.tcp().as_raw_fd(),
        }
    }
}

/// A listening socket the acceptor polls.
pub enum Listener {
    /// `tls`: its connections speak TLS (`-Z`, and not `-l notls:`), asking client
    /// certificates as the listener's kind says (`-l btls:`, `-l mtls:`).
    Tcp {
        sock: mio::net::TcpListener,
        tls: Option<ClientAuth>,
        /// `-l proto[...]:`: the protocol its connections speak instead of `-B`'s.
        protocol: Option<Protocol>,
    },
    Unix(mio::net::UnixListener),
}

impl Listener {
    pub fn fd(&self) -> i32 {
        match self {
            Listener::Tcp { sock, .. } => sock.as_raw_fd(),
            Listener::Unix(l) => l.as_raw_fd(),
        }
    }

    pub fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Listener::Tcp { sock, .. } => sock,
            Listener::Unix(l) => l,
        }
    }

    pub fn local_addr_text(&self) -> String {
        match self {
            Listener::Tcp { sock: l, .. } => l
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
            Listener::Tcp { sock, .. } => sock.local_addr().ok().map(|a| a.port()),
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
pub fn bind(s: &Settings) -> anyhow::Result<Vec<Listener>> {
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
        // memcached starts all the same, listening on nothing.
        eprintln!(
            "memcrab: warning: -p 0 turns TCP off and no -U or -s was given: nothing to listen on"
        );
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for i in 0..s.listen.len() {
        let (entry, tls) = listen_entry(s, i)?;
        for addr in parse_listen(entry.addr, bind_port(s.port))? {
            let sock = new_socket(&addr, Type::STREAM)?;
            sock.bind(&addr.into())
                .with_context(|| format!("-l/-p: cannot bind {addr}"))?;
            sock.listen(s.backlog)?;
            sock.set_nonblocking(true)?;
            let std_listener: std::net::TcpListener = sock.into();
            out.push(Listener::Tcp {
                sock: mio::net::TcpListener::from_std(std_listener),
                tls,
                protocol: entry.protocol,
            });
        }
    }
    Ok(out)
}

/// The `i`th `-l` entry as memcached's `server_sockets` reads it (its TLS prefix
/// first), and its TLS kind. A bad entry stops startup as memcached does: its
/// message, then `failed to listen on one of interface(s) <the -l list>: Success`,
/// exit status 71.
fn listen_entry(s: &Settings, i: usize) -> anyhow::Result<(ListenEntry<'_>, Option<ClientAuth>)> {
    let l = &s.listen[i];
    let tls = listener_tls(s, ListenPrefix::split(l).0)?;
    let first = s
        .listen
        .first()
        .filter(|_| i > 0)
        .map(|f| ListenEntry::parse(f, false, None).map_or(f.as_str(), |e| &f[..e.cut]));
    let entry = ListenEntry::parse(l, s.auth_file.is_some(), first).map_err(|m| Failure {
        code: EX_OSERR,
        msg: format!(
            "{m}\nfailed to listen on one of interface(s) {}: Success",
            s.inter
        ),
    })?;
    Ok((entry, tls))
}

/// The TLS kind of a listener whose `-l` entry has `prefix` (`None`: plain). Without
/// `-Z` a prefix stops startup as memcached's `server_sockets` does (for TCP and for
/// UDP): its message, then its caller's `failed to listen on one of interface(s)
/// <the -l list>: Success` (errno is 0), exit status 71.
fn listener_tls(s: &Settings, prefix: Option<ListenPrefix>) -> anyhow::Result<Option<ClientAuth>> {
    if !s.tls.enabled {
        return match prefix {
            None => Ok(None),
            Some(p) => Err(Failure {
                code: EX_OSERR,
                msg: format!(
                    "{}\nfailed to listen on one of interface(s) {}: Success",
                    p.without_tls_message(),
                    s.inter
                ),
            }
            .into()),
        };
    }
    Ok(match prefix {
        None => Some(ClientAuth::Default),
        Some(ListenPrefix::NoTls) => None,
        Some(ListenPrefix::Btls) => Some(ClientAuth::Basic),
        Some(ListenPrefix::Mtls) => Some(ClientAuth::Mutual),
    })
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`, `*` (every interface), as memcached's
/// `-l` list entries.
pub fn parse_listen(entry: &str, default_port: u16) -> anyhow::Result<Vec<SocketAddr>> {
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

/// Binds one UDP socket per `-l` address, as memcached's `server_sockets`: an
/// address's own `:port` wins over `-U` (so `-l 127.0.0.1:0 -U 1` gets an ephemeral
/// UDP port). With `-s` or `-U 0` there is no UDP.
pub fn bind_udp(s: &Settings) -> anyhow::Result<Vec<std::net::UdpSocket>> {
    if s.udp_port == 0 || s.unix_socket.is_some() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for i in 0..s.listen.len() {
        let (entry, _) = listen_entry(s, i)?;
        for addr in parse_listen(entry.addr, bind_port(s.udp_port))? {
            let sock = new_socket(&addr, Type::DGRAM)?;
            // Best effort: the kernel clamps it.
            let _ = sock.set_send_buffer_size(SEND_BUFFER_BYTES);
            sock.bind(&addr.into())
                .with_context(|| format!("-U: cannot bind UDP {addr}"))?;
            sock.set_nonblocking(true)?;
            out.push(sock.into());
        }
    }
    if out.is_empty() {
        bail!("-U: no address to bind");
    }
    Ok(out)
}
