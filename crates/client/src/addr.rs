//! Server addresses and connection options.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::error::Error;

/// memcached's default TCP port (`MEMCACHED_DEFAULT_PORT`, libmemcached defaults.h).
pub const DEFAULT_PORT: u16 = 11211;

/// The default connect, read and write timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a server listens.
///
/// Parsed from text as libmemcached's server strings are: `host:port`, `host`
/// (port 11211), `[v6]:port`, a bare IPv6 literal (port 11211), or a unix socket
/// path (`/path/to/sock`, or `unix:` followed by a path). The host text is kept as
/// written, because ketama hashes it (see [`crate::Ring`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ServerAddr {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

impl ServerAddr {
    /// A TCP address.
    pub fn tcp(host: impl Into<String>, port: u16) -> ServerAddr {
        ServerAddr::Tcp {
            host: host.into(),
            port,
        }
    }
}

impl FromStr for ServerAddr {
    type Err = Error;

    fn from_str(s: &str) -> Result<ServerAddr, Error> {
        let bad = || Error::InvalidAddr(s.to_string());
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(bad());
            }
            return Ok(ServerAddr::Unix(PathBuf::from(path)));
        }
        if s.starts_with('/') {
            return Ok(ServerAddr::Unix(PathBuf::from(s)));
        }
        let port = |p: &str| p.parse::<u16>().map_err(|_| bad());
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (host, after) = rest.split_once(']').ok_or_else(bad)?;
            match after {
                "" => (host, DEFAULT_PORT),
                _ => (host, port(after.strip_prefix(':').ok_or_else(bad)?)?),
            }
        } else {
            match s.matches(':').count() {
                0 => (s, DEFAULT_PORT),
                1 => {
                    let (h, p) = s.split_once(':').ok_or_else(bad)?;
                    (h, port(p)?)
                }
                // An IPv6 literal without brackets cannot carry a port.
                _ => (s, DEFAULT_PORT),
            }
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad());
        }
        Ok(ServerAddr::tcp(host, port))
    }
}

impl fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerAddr::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            ServerAddr::Tcp { host, port } => write!(f, "{host}:{port}"),
            ServerAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// How a connection is opened and how long it waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The longest a TCP connect may take (per resolved address). Unix sockets
    /// connect at once or fail.
    pub connect_timeout: Option<Duration>,
    /// The longest wait for the next bytes of a reply; `None` waits forever.
    pub read_timeout: Option<Duration>,
    /// The longest a write may block; `None` waits forever.
    pub write_timeout: Option<Duration>,
    /// `TCP_NODELAY`: on by default, since requests are written whole.
    pub tcp_nodelay: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            connect_timeout: Some(DEFAULT_TIMEOUT),
            read_timeout: Some(DEFAULT_TIMEOUT),
            write_timeout: Some(DEFAULT_TIMEOUT),
            tcp_nodelay: true,
        }
    }
}

impl Options {
    /// Sets all three timeouts.
    pub fn with_timeout(mut self, t: Option<Duration>) -> Options {
        self.connect_timeout = t;
        self.read_timeout = t;
        self.write_timeout = t;
        self
    }

    /// std refuses a zero timeout; say so before connecting.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let zero = |t: Option<Duration>| t == Some(Duration::ZERO);
        if zero(self.connect_timeout) || zero(self.read_timeout) || zero(self.write_timeout) {
            return Err(Error::InvalidArgument(
                "a timeout must be non-zero (use None to wait forever)".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        let rows: &[(&str, ServerAddr)] = &[
            ("127.0.0.1:11212", ServerAddr::tcp("127.0.0.1", 11212)),
            ("localhost", ServerAddr::tcp("localhost", DEFAULT_PORT)),
            ("cache-1.example:1", ServerAddr::tcp("cache-1.example", 1)),
            ("[::1]:5000", ServerAddr::tcp("::1", 5000)),
            ("[::1]", ServerAddr::tcp("::1", DEFAULT_PORT)),
            ("fe80::1", ServerAddr::tcp("fe80::1", DEFAULT_PORT)),
            ("/tmp/mc.sock", ServerAddr::Unix("/tmp/mc.sock".into())),
            ("unix:rel.sock", ServerAddr::Unix("rel.sock".into())),
        ];
        for (text, want) in rows {
            assert_eq!(&text.parse::<ServerAddr>().expect(text), want, "{text}");
        }
        for bad in [
            "", ":11211", "h:", "h:x", "h:70000", "[::1", "[::1]x", "unix:", "a b:1",
        ] {
            assert!(
                bad.parse::<ServerAddr>().is_err(),
                "{bad:?} should not parse"
            );
        }
    }

    #[test]
    fn display_round_trips() {
        for text in ["127.0.0.1:11212", "[::1]:5000", "unix:/tmp/mc.sock"] {
            let a: ServerAddr = text.parse().expect(text);
            assert_eq!(a.to_string(), text);
            assert_eq!(a.to_string().parse::<ServerAddr>().expect(text), a);
        }
    }
}
