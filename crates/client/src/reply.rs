//! Reading replies: the connection's read buffer, and whole responses assembled from
//! memcrab-proto's reply units.
//!
//! ```text
//!   buf: [ consumed | VALUE k 0 3\r\nabc\r\nEND\r\nSTORED\r\n | free ... ]
//!        0          start                                     end        buf.len()
//!                   └─ parse_reply ─┘ one unit at a time; `None` = read more
//! ```
//!
//! A unit is copied out (keys and values become owned `Vec`s) only once it has fully
//! arrived; the bytes stay in the one buffer until then. The buffer grows to hold the
//! largest unit seen and is shrunk back when idle if that made it large.

use std::fmt;

use memcrab_proto::text::client::{parse_reply, Malformed, Reply};

use crate::error::{Error, Result};
use crate::request::Expect;
use crate::stream::Stream;

/// The buffer's starting size and the least free space a read is given.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// An idle buffer that grew past this (a large value went through) is shrunk back.
pub(crate) const RETAIN_MAX_BYTES: usize = 1024 * 1024;

/// One item from a `VALUE` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub flags: u32,
    /// The CAS unique: `Some` from `gets`/`gats`, `None` from `get`/`gat`.
    pub cas: Option<u64>,
}

/// A whole response to one request, as a [`Pipeline`](crate::Pipeline) returns it.
/// [`Connection`](crate::Connection)'s methods turn these into typed results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// The hits of a `get`/`gets`/`gat`/`gats`, in the server's order; misses are
    /// absent.
    Values(Vec<Item>),
    /// `STAT <name> <value>` lines in order. Other lines of a `stats` reply (such as
    /// `ITEM ...` from `stats cachedump`) are split at their first space.
    Stats(Vec<(String, String)>),
    Stored,
    NotStored,
    Exists,
    NotFound,
    Deleted,
    Touched,
    Ok,
    /// The reply to `stats reset`.
    Reset,
    /// The new value after `incr`/`decr`.
    Number(u64),
    /// `VERSION <text>`.
    Version(String),
    /// A `noreply` request in a pipeline: nothing was read for it.
    NoReply,
}

impl fmt::Display for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Response::Values(v) => write!(f, "{} VALUE block(s) and END", v.len()),
            Response::Stats(s) => write!(f, "{} STAT line(s) and END", s.len()),
            Response::Stored => f.write_str("STORED"),
            Response::NotStored => f.write_str("NOT_STORED"),
            Response::Exists => f.write_str("EXISTS"),
            Response::NotFound => f.write_str("NOT_FOUND"),
            Response::Deleted => f.write_str("DELETED"),
            Response::Touched => f.write_str("TOUCHED"),
            Response::Ok => f.write_str("OK"),
            Response::Reset => f.write_str("RESET"),
            Response::Number(n) => write!(f, "{n}"),
            Response::Version(v) => write!(f, "VERSION {v}"),
            Response::NoReply => f.write_str("(noreply)"),
        }
    }
}

/// What a `cas` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CasOutcome {
    /// `STORED`: the item was unchanged since the `gets`, and now holds the new value.
    Stored,
    /// `EXISTS`: someone changed the item since the `gets`.
    Exists,
    /// `NOT_FOUND`: the item is gone.
    NotFound,
}

/// A reply unit, owned.
enum Unit {
    Value(Item),
    Stat(String, String),
    End,
    Status(Response),
    Failed(Error),
    Other(String),
}

impl Unit {
    fn from_reply(r: Reply<'_>) -> Unit {
        match r {
            Reply::Value {
                key,
                flags,
                data,
                cas,
            } => Unit::Value(Item {
                key: key.to_vec(),
                value: data.to_vec(),
                flags,
                cas,
            }),
            Reply::Stat { name, value } => Unit::Stat(text(name), text(value)),
            Reply::End => Unit::End,
            Reply::Stored => Unit::Status(Response::Stored),
            Reply::NotStored => Unit::Status(Response::NotStored),
            Reply::Exists => Unit::Status(Response::Exists),
            Reply::NotFound => Unit::Status(Response::NotFound),
            Reply::Deleted => Unit::Status(Response::Deleted),
            Reply::Touched => Unit::Status(Response::Touched),
            Reply::Ok => Unit::Status(Response::Ok),
            Reply::Reset => Unit::Status(Response::Reset),
            Reply::Number(n) => Unit::Status(Response::Number(n)),
            Reply::Version(v) => Unit::Status(Response::Version(text(v))),
            Reply::Error(m) => Unit::Failed(Error::Error(text(m))),
            Reply::ClientError(m) => Unit::Failed(Error::ClientError(text(m))),
            Reply::ServerError(m) => Unit::Failed(Error::ServerError(text(m))),
            Reply::Other(line) => Unit::Other(text(line)),
        }
    }

    /// For the message when a unit arrives where it cannot be.
    fn describe(self) -> String {
        match self {
            Unit::Value(i) => format!("VALUE {}", i.key.escape_ascii()),
            Unit::Stat(n, v) => format!("STAT {n} {v}"),
            Unit::End => "END".into(),
            Unit::Status(r) => r.to_string(),
            Unit::Failed(e) => e.to_string(),
            Unit::Other(line) => line,
        }
    }
}

/// A unit that cannot be part of the reply being read: the stream is out of sync.
fn out_of_place(u: Unit, reply_to: &str) -> Error {
    Error::Malformed(format!("{:?} in the reply to a {reply_to}", u.describe()))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The connection's read buffer: bytes `[start, end)` are received and not yet
/// consumed.
pub(crate) struct ReadBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl ReadBuf {
    pub(crate) fn new() -> ReadBuf {
        ReadBuf {
            buf: vec![0; READ_CHUNK_BYTES],
            start: 0,
            end: 0,
        }
    }

    /// Bytes received and not consumed.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Reads one whole response of the given shape.
    ///
    /// The outer error means the stream cannot be trusted any more (I/O, timeout,
    /// bytes that are not a reply, or a unit that cannot belong to this response);
    /// the inner one is the server's answer to this request, with the stream in sync.
    pub(crate) fn read_response(
        &mut self,
        stream: &Stream,
        expect: Expect,
    ) -> Result<Result<Response>> {
        let out = match expect {
            Expect::Values => self.read_values(stream)?,
            Expect::Stats => self.read_stats(stream)?,
            Expect::Status => match self.next_unit(stream)? {
                Unit::Status(r) => Ok(r),
                Unit::Failed(e) => Err(e),
                // A line of its own (e.g. `MEMLIMIT_TOO_SMALL ...`): in sync.
                Unit::Other(line) => Err(Error::UnexpectedReply(line)),
                u => return Err(out_of_place(u, "status line")),
            },
        };
        self.idle();
        Ok(out)
    }

    fn read_values(&mut self, stream: &Stream) -> Result<Result<Response>> {
        let mut items = Vec::new();
        loop {
            match self.next_unit(stream)? {
                Unit::Value(item) => items.push(item),
                Unit::End => return Ok(Ok(Response::Values(items))),
                // memcached ends a get with an error line instead of END (e.g.
                // `CLIENT_ERROR bad command line format` after a too-long key).
                Unit::Failed(e) => return Ok(Err(e)),
                u => return Err(out_of_place(u, "get")),
            }
        }
    }

    fn read_stats(&mut self, stream: &Stream) -> Result<Result<Response>> {
        let mut stats = Vec::new();
        loop {
            match self.next_unit(stream)? {
                Unit::Stat(name, value) => stats.push((name, value)),
                Unit::Other(line) => {
                    let (name, value) = line.split_once(' ').unwrap_or((&line, ""));
                    stats.push((name.to_string(), value.to_string()));
                }
                Unit::End => return Ok(Ok(Response::Stats(stats))),
                // `stats reset` answers RESET, `stats detail on|off` answers OK.
                Unit::Status(r @ (Response::Reset | Response::Ok)) if stats.is_empty() => {
                    return Ok(Ok(r))
                }
                Unit::Failed(e) => return Ok(Err(e)),
                u => return Err(out_of_place(u, "stats")),
            }
        }
    }

    /// The next unit, reading until it has arrived whole.
    fn next_unit(&mut self, stream: &Stream) -> Result<Unit> {
        loop {
            match parse_reply(&self.buf[self.start..self.end]) {
                Ok(Some((reply, used))) => {
                    let unit = Unit::from_reply(reply);
                    self.start += used;
                    return Ok(unit);
                }
                Ok(None) => self.fill(stream)?,
                Err(Malformed) => {
                    let pending = self.pending();
                    let shown = &pending[..pending.len().min(80)];
                    return Err(Error::Malformed(shown.escape_ascii().to_string()));
                }
            }
        }
    }

    /// One read from the socket into the free space, making room first.
    fn fill(&mut self, stream: &Stream) -> Result<()> {
        if self.buf.len() - self.end < READ_CHUNK_BYTES / 2 {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < READ_CHUNK_BYTES / 2 {
                let len = (self.buf.len() * 2).max(self.end + READ_CHUNK_BYTES);
                self.buf.resize(len, 0);
            }
        }
        loop {
            match stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(Error::Closed),
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::from_io(e)),
            }
        }
    }

    /// Between responses: rewind when empty, and give back memory a large value took.
    fn idle(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > RETAIN_MAX_BYTES {
                self.buf.truncate(READ_CHUNK_BYTES);
                self.buf.shrink_to_fit();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    use super::*;

    type Outcome = std::result::Result<Result<Response>, Error>;

    /// Feeds `input` to a fresh buffer (all at once, then one byte per write, then
    /// the peer closes) and reads one response of shape `expect` from it each time.
    fn read(expect: Expect, input: &[u8]) -> Vec<Outcome> {
        let mut outcomes = Vec::new();
        for chunk in [input.len().max(1), 1] {
            let (mine, mut theirs) = UnixStream::pair().expect("socketpair");
            mine.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            let input = input.to_vec();
            let writer = std::thread::spawn(move || {
                for part in input.chunks(chunk) {
                    theirs.write_all(part).expect("write");
                }
                // Then close: a response cut short ends in EOF.
            });
            let stream = Stream::Unix(mine);
            let mut rb = ReadBuf::new();
            let got = rb.read_response(&stream, expect);
            writer.join().expect("writer");
            if got.is_ok() {
                assert!(rb.pending().is_empty(), "a whole response was consumed");
            }
            outcomes.push(got);
        }
        outcomes
    }

    fn item(key: &str, value: &[u8], flags: u32, cas: Option<u64>) -> Item {
        Item {
            key: key.as_bytes().to_vec(),
            value: value.to_vec(),
            flags,
            cas,
        }
    }

    #[test]
    fn responses() {
        let rows: Vec<(Expect, &[u8], Response)> = vec![
            (Expect::Values, b"END\r\n", Response::Values(vec![])),
            (
                Expect::Values,
                b"VALUE a 1 3\r\nx\r\n\r\nVALUE b 2 0 77\r\n\r\nEND\r\n",
                Response::Values(vec![
                    item("a", b"x\r\n", 1, None),
                    item("b", b"", 2, Some(77)),
                ]),
            ),
            (
                Expect::Stats,
                b"STAT pid 1\r\nSTAT version 1.6.18 x\r\nITEM k [1 b; 0 s]\r\nEND\r\n",
                Response::Stats(vec![
                    ("pid".into(), "1".into()),
                    ("version".into(), "1.6.18 x".into()),
                    ("ITEM".into(), "k [1 b; 0 s]".into()),
                ]),
            ),
            (Expect::Stats, b"RESET\r\n", Response::Reset),
            (Expect::Stats, b"OK\r\n", Response::Ok),
            (Expect::Status, b"STORED\r\n", Response::Stored),
            (Expect::Status, b"NOT_STORED\r\n", Response::NotStored),
            (Expect::Status, b"EXISTS\r\n", Response::Exists),
            (Expect::Status, b"NOT_FOUND\r\n", Response::NotFound),
            (Expect::Status, b"DELETED\r\n", Response::Deleted),
            (Expect::Status, b"TOUCHED\r\n", Response::Touched),
            (Expect::Status, b"OK\r\n", Response::Ok),
            (
                Expect::Status,
                b"18446744073709551615\r\n",
                Response::Number(u64::MAX),
            ),
            (
                Expect::Status,
                b"VERSION 1.6.18\r\n",
                Response::Version("1.6.18".into()),
            ),
        ];
        for (expect, input, want) in rows {
            for got in read(expect, input) {
                match got {
                    Ok(Ok(r)) => assert_eq!(r, want, "{}", input.escape_ascii()),
                    other => panic!("{}: {other:?}", input.escape_ascii()),
                }
            }
        }
    }

    #[test]
    fn errors() {
        // (shape, input, is the error the server's answer (in sync)?, check)
        type Check = fn(&Error) -> bool;
        let rows: Vec<(Expect, &[u8], bool, Check)> = vec![
            (
                Expect::Status,
                b"ERROR\r\n",
                true,
                |e| matches!(e, Error::Error(m) if m.is_empty()),
            ),
            (
                Expect::Status,
                b"ERROR Too many open connections\r\n",
                true,
                |e| matches!(e, Error::Error(m) if m == "Too many open connections"),
            ),
            (
                Expect::Status,
                b"CLIENT_ERROR bad data chunk\r\n",
                true,
                |e| matches!(e, Error::ClientError(m) if m == "bad data chunk"),
            ),
            (
                Expect::Values,
                b"SERVER_ERROR out of memory\r\n",
                true,
                |e| matches!(e, Error::ServerError(m) if m == "out of memory"),
            ),
            (
                Expect::Values,
                b"VALUE a 0 1\r\nx\r\nCLIENT_ERROR bad command line format\r\n",
                true,
                |e| matches!(e, Error::ClientError(_)),
            ),
            (
                Expect::Status,
                b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n",
                true,
                |e| matches!(e, Error::UnexpectedReply(m) if m.starts_with("MEMLIMIT_TOO_SMALL")),
            ),
            (Expect::Values, b"STORED\r\n", false, |e| {
                matches!(e, Error::Malformed(_))
            }),
            (Expect::Values, b"STAT a b\r\n", false, |e| {
                matches!(e, Error::Malformed(_))
            }),
            (Expect::Stats, b"VALUE a 0 1\r\nx\r\nEND\r\n", false, |e| {
                matches!(e, Error::Malformed(_))
            }),
            (Expect::Status, b"END\r\n", false, |e| {
                matches!(e, Error::Malformed(_))
            }),
            (Expect::Values, b"VALUE a 0 1\r\nxy\r\n", false, |e| {
                matches!(e, Error::Malformed(_))
            }),
            (Expect::Values, b"VALUE a 0 5\r\nxy", false, |e| {
                matches!(e, Error::Closed)
            }),
            (Expect::Status, b"", false, |e| matches!(e, Error::Closed)),
        ];
        for (expect, input, in_sync, check) in rows {
            for got in read(expect, input) {
                let e = match got {
                    Ok(Err(e)) if in_sync => e,
                    Err(e) if !in_sync => e,
                    other => panic!("{}: {other:?}", input.escape_ascii()),
                };
                assert!(check(&e), "{}: {e:?}", input.escape_ascii());
            }
        }
    }

    /// A value larger than the buffer grows it; once idle, the buffer shrinks back.
    #[test]
    fn large_values_grow_then_release_the_buffer() {
        let value = vec![7u8; 3 * RETAIN_MAX_BYTES];
        let mut input = format!("VALUE big 0 {}\r\n", value.len()).into_bytes();
        input.extend_from_slice(&value);
        input.extend_from_slice(b"\r\nEND\r\n");
        let (mine, mut theirs) = UnixStream::pair().expect("socketpair");
        let writer = std::thread::spawn(move || theirs.write_all(&input).map(|()| theirs));
        let stream = Stream::Unix(mine);
        let mut rb = ReadBuf::new();
        let got = rb.read_response(&stream, Expect::Values).expect("read");
        let _theirs = writer.join().expect("writer").expect("write");
        assert_eq!(
            got.expect("values"),
            Response::Values(vec![item("big", &value, 0, None)])
        );
        assert_eq!(rb.buf.len(), READ_CHUNK_BYTES);
    }
}
