//! The client's errors.
//!
//! Two kinds, and the split matters to a caller: errors that leave the connection
//! usable (the server answered this request with an error, or the request was refused
//! before anything was sent) and errors after which the byte stream can no longer be
//! trusted (I/O, timeout, a reply that does not parse). After the second kind the
//! connection is marked broken and every later call answers [`Error::Broken`] until
//! [`Connection::reconnect`](crate::Connection::reconnect).

use std::io;

use memcrab_proto::text::KEY_MAX_LEN;

/// Everything a client call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O error other than a timeout. The connection is broken.
    #[error("I/O error: {0}")]
    Io(io::Error),
    /// A read or write waited longer than the connection's timeout. The connection is
    /// broken: the reply may still arrive and would be taken for the next one.
    #[error("timed out waiting for the server")]
    Timeout,
    /// The server closed the connection. The connection is broken.
    #[error("the server closed the connection")]
    Closed,
    /// An earlier error broke this connection; reconnect to go on.
    #[error("connection unusable after an earlier error; reconnect")]
    Broken,
    /// The key cannot be sent (checked before any I/O).
    #[error("invalid key: {0}")]
    InvalidKey(#[from] KeyError),
    /// Some other argument cannot be sent (checked before any I/O).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A server address that does not parse, or that does not resolve.
    #[error("invalid server address {0:?}")]
    InvalidAddr(String),
    /// A cluster without servers.
    #[error("no servers")]
    NoServers,
    /// `SERVER_ERROR <message>`: the server could not do it (too large, out of memory).
    #[error("SERVER_ERROR {0}")]
    ServerError(String),
    /// `CLIENT_ERROR <message>`: the server refused the request (e.g. incr on a
    /// non-numeric value).
    #[error("CLIENT_ERROR {0}")]
    ClientError(String),
    /// A plain `ERROR` (unknown command), with memcached's optional text.
    #[error("ERROR{}{msg}", if .0.is_empty() { "" } else { " " }, msg = .0)]
    Error(String),
    /// A one-line reply that this request does not produce (e.g. `NOT_STORED` to a
    /// `set`, `MEMLIMIT_TOO_SMALL ...` to `cache_memlimit`). The line was consumed;
    /// the connection stays usable.
    #[error("unexpected reply: {0}")]
    UnexpectedReply(String),
    /// Bytes that are not a reply, or a reply unit that cannot be part of the reply
    /// being read (`STORED` inside a get's values): the stream is out of sync. The
    /// connection is broken.
    #[error("malformed reply: {0}")]
    Malformed(String),
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether this error broke the connection it happened on.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Error::Io(_) | Error::Timeout | Error::Closed | Error::Broken | Error::Malformed(_)
        )
    }

    /// Maps a socket error: timeouts become [`Error::Timeout`].
    pub(crate) fn from_io(e: io::Error) -> Error {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout,
            _ => Error::Io(e),
        }
    }
}

/// Why a key was refused. memcached's rule (protocol.txt, "Keys"): at most
/// [`KEY_MAX_LEN`] bytes, no control characters or whitespace.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("empty key")]
    Empty,
    #[error("key is {len} bytes, longer than {KEY_MAX_LEN}")]
    TooLong { len: usize },
    #[error("byte {byte:#04x} at offset {at} is whitespace or a control character")]
    BadByte { at: usize, byte: u8 },
}

/// Checks a key against memcached's rule before anything is sent.
pub fn check_key(key: &[u8]) -> Result<(), KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if key.len() > KEY_MAX_LEN {
        return Err(KeyError::TooLong { len: key.len() });
    }
    // Space and every C0 control (tab, \r, \n, NUL) would split or end the command
    // line; DEL is a control character too. Bytes >= 0x80 (UTF-8) are fine.
    match key.iter().position(|&b| b <= b' ' || b == 0x7f) {
        Some(at) => Err(KeyError::BadByte { at, byte: key[at] }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        let long = [b'k'; KEY_MAX_LEN + 1];
        let rows: &[(&[u8], Result<(), KeyError>)] = &[
            (b"k", Ok(())),
            (&long[..KEY_MAX_LEN], Ok(())),
            ("ключ".as_bytes(), Ok(())),
            (b"a:b/c!~", Ok(())),
            (b"", Err(KeyError::Empty)),
            (&long, Err(KeyError::TooLong { len: 251 })),
            (b"a b", Err(KeyError::BadByte { at: 1, byte: b' ' })),
            (b"a\tb", Err(KeyError::BadByte { at: 1, byte: b'\t' })),
            (b"ab\r", Err(KeyError::BadByte { at: 2, byte: b'\r' })),
            (b"\nab", Err(KeyError::BadByte { at: 0, byte: b'\n' })),
            (b"a\0", Err(KeyError::BadByte { at: 1, byte: 0 })),
            (b"a\x7f", Err(KeyError::BadByte { at: 1, byte: 0x7f })),
        ];
        for (key, want) in rows {
            assert_eq!(
                &check_key(key),
                want,
                "{:?}",
                key.escape_ascii().to_string()
            );
        }
    }

    #[test]
    fn display() {
        assert_eq!(Error::Error(String::new()).to_string(), "ERROR");
        assert_eq!(Error::Error("x y".into()).to_string(), "ERROR x y");
        assert_eq!(
            Error::ServerError("object too large for cache".into()).to_string(),
            "SERVER_ERROR object too large for cache"
        );
        assert!(Error::Timeout.is_fatal());
        assert!(!Error::ClientError(String::new()).is_fatal());
    }
}
