//! What the text parser returns: [`Request`]s, the [`Error`]s memcached rejects a line
//! with, and the [`Action`] each error asks of the connection. Imports only
//! [`super::meta`] (a meta request is a [`Request::Meta`]) and [`super::admin`] (an
//! admin request is a [`Request::Admin`]).

use super::admin::Admin;
use super::meta::Meta;

/// The storage commands (protocol.txt "Storage commands").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreCmd {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

/// A parsed request. Slices borrow from the buffer given to [`parse`](super::parse).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`/`gets`; `gat`/`gats` when `touch` is `Some(exptime)`. (1.6.45 dropped
    /// `bget`: it answers `ERROR`.)
    Get {
        keys: Keys<'a>,
        cas: bool,
        touch: Option<i32>,
    },
    /// A storage command with its data block complete and well formed.
    Store {
        cmd: StoreCmd,
        key: &'a [u8],
        flags: u32,
        exptime: i32,
        data: &'a [u8],
        cas_unique: u64,
        noreply: bool,
    },
    /// A storage command whose value is over `-I`. memcached answers
    /// `SERVER_ERROR object too large for cache`, drops an existing value on `set`,
    /// and swallows `swallow` bytes (the data block and its `\r\n`), which may not have
    /// arrived yet: `consumed` covers the command line only.
    TooLarge {
        cmd: StoreCmd,
        key: &'a [u8],
        swallow: usize,
        noreply: bool,
    },
    Delete {
        key: &'a [u8],
        noreply: bool,
    },
    /// `incr` (`incr == true`) or `decr`.
    Arith {
        key: &'a [u8],
        delta: u64,
        incr: bool,
        noreply: bool,
    },
    Touch {
        key: &'a [u8],
        exptime: i32,
        noreply: bool,
    },
    /// `stats [sub [arg]]`.
    Stats {
        sub: Option<&'a [u8]>,
        arg: Option<&'a [u8]>,
    },
    /// `flush_all [delay] [noreply]`; `delay == 0` flushes now, `None` is a delay
    /// that did not parse (`CLIENT_ERROR invalid exptime argument`, once `-F` has
    /// been checked and the command counted).
    FlushAll {
        delay: Option<i32>,
        noreply: bool,
    },
    Version,
    Verbosity {
        level: u32,
        noreply: bool,
    },
    Quit,
    /// `shutdown [graceful]`. memcached checks `-A` before the mode, so an invalid
    /// mode is a request too and the server decides the reply.
    Shutdown {
        mode: ShutdownMode,
        noreply: bool,
    },
    /// `cache_memlimit <megabytes>`; the server checks the range.
    CacheMemlimit {
        megabytes: u32,
        noreply: bool,
    },
    /// A meta command (`mg ms md ma mn me`), see [`super::meta`].
    Meta(Meta<'a>),
    /// `refresh_certs [noreply]`: reload the TLS certificates (any other tokens
    /// are ignored, as in memcached).
    RefreshCerts {
        noreply: bool,
    },
    /// An admin command (`lru_crawler`, `slabs`, `lru`), see [`super::admin`].
    Admin(Admin),
}

/// The argument of `shutdown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownMode {
    Now,
    Graceful,
    /// Anything else: `CLIENT_ERROR invalid shutdown mode` when shutdown is enabled.
    Invalid,
}

/// A request line memcached rejects, and how it rejects it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Unknown command or wrong token count: `ERROR`.
    UnknownCommand,
    /// `CLIENT_ERROR bad command line format`.
    BadFormat { noreply: bool },
    /// A storage command refused once its length was read: `CLIENT_ERROR bad
    /// command line format`, and its data block (`swallow` bytes, which may not have
    /// arrived yet: `consumed` covers the command line only) is discarded.
    BadStoreLine { noreply: bool, swallow: usize },
    /// `CLIENT_ERROR invalid exptime argument`.
    InvalidExptime { noreply: bool },
    /// `CLIENT_ERROR invalid numeric delta argument`.
    InvalidDelta { noreply: bool },
    /// The data block did not end in `\r\n`: `CLIENT_ERROR bad data chunk`. The
    /// declared length plus two bytes were consumed; what follows is parsed as the next
    /// command, as in memcached.
    BadDataChunk { noreply: bool },
    /// A plain `ERROR` that `noreply` silences: a bad argument to `cache_memlimit`,
    /// `slabs automove`, or `lru` (whose every reply honours `noreply`).
    Rejected { noreply: bool },
    /// Over [`LINE_MAX_NO_NEWLINE`](super::LINE_MAX_NO_NEWLINE) bytes without a newline
    /// and not a get: close.
    LineTooLong,
    /// A line ending in an `HTTP/...` token: memcached closes without a reply.
    Http,
}

/// What the connection does after an [`Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this reply (nothing when `None`, i.e. under `noreply`) and go on.
    Reply(Option<&'static [u8]>),
    /// Send this reply (if any), then discard this many bytes of input.
    Swallow(Option<&'static [u8]>, usize),
    /// Close the connection without a reply.
    Close,
}

impl Error {
    /// The one place that maps a protocol error to its wire reply and what follows.
    pub fn action(&self) -> Action {
        let (reply, noreply): (&'static [u8], bool) = match *self {
            Error::UnknownCommand => (b"ERROR\r\n", false),
            Error::BadFormat { noreply } => (b"CLIENT_ERROR bad command line format\r\n", noreply),
            Error::BadStoreLine { noreply, swallow } => {
                return Action::Swallow(
                    (!noreply).then_some(b"CLIENT_ERROR bad command line format\r\n"),
                    swallow,
                )
            }
            Error::InvalidExptime { noreply } => {
                (b"CLIENT_ERROR invalid exptime argument\r\n", noreply)
            }
            Error::InvalidDelta { noreply } => {
                (b"CLIENT_ERROR invalid numeric delta argument\r\n", noreply)
            }
            Error::BadDataChunk { noreply } => (b"CLIENT_ERROR bad data chunk\r\n", noreply),
            Error::Rejected { noreply } => (b"ERROR\r\n", noreply),
            Error::LineTooLong | Error::Http => return Action::Close,
        };
        Action::Reply(if noreply { None } else { Some(reply) })
    }
}

/// The keys of a multi-key get: every space-separated token, in order. Keys longer
/// than [`KEY_MAX_LEN`](memcrab_limits::KEY_MAX_LEN) are yielded too; memcached serves
/// the keys before one and then answers `CLIENT_ERROR bad command line format`, so
/// the caller decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys<'a> {
    rest: &'a [u8],
}

impl<'a> Keys<'a> {
    pub fn new(rest: &'a [u8]) -> Self {
        Keys { rest }
    }
}

impl<'a> Iterator for Keys<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|&b| b != b' ')?;
        let rest = &self.rest[start..];
        let end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
        self.rest = &rest[end..];
        Some(&rest[..end])
    }
}

/// The outcome of one [`parse`](super::parse) call that found a complete request (or
/// a complete error): what it was, and how many input bytes it used.
pub type Parsed<'a> = (Result<Request<'a>, Error>, usize);
