//! The text protocol, client side: request encoders and an incremental reply parser.
//!
//! A reply is parsed one unit at a time with [`parse_reply`]: a `VALUE` block (header
//! line and data), a `STAT` line, or a one-line status. The caller knows which units a
//! request expects (a get: values then `END`; stats: `STAT`s then `END`). Like the
//! server-side parser it borrows from the input and answers `Ok(None)` until a whole
//! unit has arrived.

use super::request::StoreCmd;
use crate::num::safe_strtoull;

/// One unit of a server reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply<'a> {
    /// `VALUE <key> <flags> <bytes> [<cas>]` and its data block.
    Value {
        key: &'a [u8],
        flags: u32,
        data: &'a [u8],
        cas: Option<u64>,
    },
    /// `STAT <name> <value>`.
    Stat {
        name: &'a [u8],
        value: &'a [u8],
    },
    End,
    Stored,
    NotStored,
    Exists,
    NotFound,
    Deleted,
    Touched,
    Ok,
    Reset,
    /// The reply to incr/decr.
    Number(u64),
    /// `VERSION <version>`.
    Version(&'a [u8]),
    /// `ERROR` (and memcached's `ERROR <text>` variants).
    Error(&'a [u8]),
    /// `CLIENT_ERROR <message>`.
    ClientError(&'a [u8]),
    /// `SERVER_ERROR <message>`.
    ServerError(&'a [u8]),
    /// Any other line (e.g. `MEMLIMIT_TOO_SMALL ...`), without its `\r\n`.
    Other(&'a [u8]),
}

/// A reply that is not what the protocol allows where it stands (the meta client's
/// too): the connection's replies can no longer be matched to its requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed;

/// The data block of `len` bytes that follows a reply line ending at `start` (a
/// `VALUE` or `VA` line), and where its `\r\n` ends. `Ok(None)`: not all here yet.
pub(crate) fn data_block(
    buf: &[u8],
    start: usize,
    len: usize,
) -> Result<Option<(&[u8], usize)>, Malformed> {
    let end = start
        .checked_add(len)
        .and_then(|e| e.checked_add(2))
        .ok_or(Malformed)?;
    if buf.len() < end {
        return Ok(None);
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Err(Malformed);
    }
    Ok(Some((&buf[start..end - 2], end)))
}

/// Parses one reply unit from the front of `buf`. `Ok(None)`: more bytes needed.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, Malformed> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        return Ok(None);
    };
    let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    let used = nl + 1;
    let (word, rest) = match memchr::memchr(b' ', line) {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &line[line.len()..]),
    };
    let reply = match word {
        b"VALUE" => {
            let mut t = rest.split(|&b| b == b' ').filter(|t| !t.is_empty());
            let key = t.next().ok_or(Malformed)?;
            let flags = safe_strtoull(t.next().ok_or(Malformed)?).map_err(|_| Malformed)?;
            let len = safe_strtoull(t.next().ok_or(Malformed)?).map_err(|_| Malformed)?;
            let cas = match t.next() {
                Some(c) => Some(safe_strtoull(c).map_err(|_| Malformed)?),
                None => None,
            };
            let len = usize::try_from(len).map_err(|_| Malformed)?;
            let flags = u32::try_from(flags).map_err(|_| Malformed)?;
            let Some((data, end)) = data_block(buf, used, len)? else {
                return Ok(None);
            };
            return Ok(Some((
                Reply::Value {
                    key,
                    flags,
                    data,
                    cas,
                },
                end,
            )));
        }
        b"STAT" => {
            let (name, value) = match memchr::memchr(b' ', rest) {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            Reply::Stat { name, value }
        }
        b"END" => Reply::End,
        b"STORED" => Reply::Stored,
        b"NOT_STORED" => Reply::NotStored,
        b"EXISTS" => Reply::Exists,
        b"NOT_FOUND" => Reply::NotFound,
        b"DELETED" => Reply::Deleted,
        b"TOUCHED" => Reply::Touched,
        b"OK" => Reply::Ok,
        b"RESET" => Reply::Reset,
        b"VERSION" => Reply::Version(rest),
        b"ERROR" | b"ERROR:" => Reply::Error(rest),
        b"CLIENT_ERROR" => Reply::ClientError(rest),
        b"SERVER_ERROR" => Reply::ServerError(rest),
        _ if !line.is_empty() && line.iter().all(u8::is_ascii_digit) => {
            Reply::Number(safe_strtoull(line).map_err(|_| Malformed)?)
        }
        _ => Reply::Other(line),
    };
    Ok(Some((reply, used)))
}

/// Request encoders. Each appends one request to `out`. Nothing is checked here: the
/// caller must pass valid keys (1–250 bytes, no spaces or control characters), at
/// least one key to `get`/`gat`, and `stats` arguments without CR or LF, or the
/// bytes will not mean what was intended (memcrab-client checks all of these).
pub mod encode {
    use super::StoreCmd;

    fn num(out: &mut Vec<u8>, n: impl itoa::Integer) {
        let mut b = itoa::Buffer::new();
        out.extend_from_slice(b.format(n).as_bytes());
    }

    fn noreply(out: &mut Vec<u8>, noreply: bool) {
        if noreply {
            out.extend_from_slice(b" noreply");
        }
        out.extend_from_slice(b"\r\n");
    }

    /// `get`/`gets` with one or more keys.
    pub fn get<'k>(out: &mut Vec<u8>, keys: impl IntoIterator<Item = &'k [u8]>, cas: bool) {
        out.extend_from_slice(if cas { b"gets" } else { b"get" });
        for k in keys {
            out.push(b' ');
            out.extend_from_slice(k);
        }
        out.extend_from_slice(b"\r\n");
    }

    /// `gat`/`gats`.
    pub fn gat<'k>(
        out: &mut Vec<u8>,
        exptime: i64,
        keys: impl IntoIterator<Item = &'k [u8]>,
        cas: bool,
    ) {
        out.extend_from_slice(if cas { b"gats " } else { b"gat " });
        num(out, exptime);
        for k in keys {
            out.push(b' ');
            out.extend_from_slice(k);
        }
        out.extend_from_slice(b"\r\n");
    }

    /// A storage command and its data block. `cas_unique` is used by `cas` only.
    #[allow(clippy::too_many_arguments)]
    pub fn store(
        out: &mut Vec<u8>,
        cmd: StoreCmd,
        key: &[u8],
        flags: u32,
        exptime: i64,
        data: &[u8],
        cas_unique: u64,
        nr: bool,
    ) {
        out.extend_from_slice(match cmd {
            StoreCmd::Set => b"set ".as_slice(),
            StoreCmd::Add => b"add ",
            StoreCmd::Replace => b"replace ",
            StoreCmd::Append => b"append ",
            StoreCmd::Prepend => b"prepend ",
            StoreCmd::Cas => b"cas ",
        });
        out.extend_from_slice(key);
        out.push(b' ');
        num(out, flags);
        out.push(b' ');
        num(out, exptime);
        out.push(b' ');
        num(out, data.len());
        if cmd == StoreCmd::Cas {
            out.push(b' ');
            num(out, cas_unique);
        }
        noreply(out, nr);
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    }

    pub fn delete(out: &mut Vec<u8>, key: &[u8], nr: bool) {
        out.extend_from_slice(b"delete ");
        out.extend_from_slice(key);
        noreply(out, nr);
    }

    /// `incr` (`incr == true`) or `decr`.
    pub fn arith(out: &mut Vec<u8>, key: &[u8], incr: bool, delta: u64, nr: bool) {
        out.extend_from_slice(if incr { b"incr " } else { b"decr " });
        out.extend_from_slice(key);
        out.push(b' ');
        num(out, delta);
        noreply(out, nr);
    }

    pub fn touch(out: &mut Vec<u8>, key: &[u8], exptime: i64, nr: bool) {
        out.extend_from_slice(b"touch ");
        out.extend_from_slice(key);
        out.push(b' ');
        num(out, exptime);
        noreply(out, nr);
    }

    /// `flush_all [delay] [noreply]`.
    pub fn flush_all(out: &mut Vec<u8>, delay: Option<i64>, nr: bool) {
        out.extend_from_slice(b"flush_all");
        if let Some(d) = delay {
            out.push(b' ');
            num(out, d);
        }
        noreply(out, nr);
    }

    /// `stats [args]`.
    pub fn stats(out: &mut Vec<u8>, args: Option<&[u8]>) {
        out.extend_from_slice(b"stats");
        if let Some(a) = args {
            out.push(b' ');
            out.extend_from_slice(a);
        }
        out.extend_from_slice(b"\r\n");
    }

    pub fn verbosity(out: &mut Vec<u8>, level: u32, nr: bool) {
        out.extend_from_slice(b"verbosity ");
        num(out, level);
        noreply(out, nr);
    }

    pub fn cache_memlimit(out: &mut Vec<u8>, megabytes: u32, nr: bool) {
        out.extend_from_slice(b"cache_memlimit ");
        num(out, megabytes);
        noreply(out, nr);
    }

    pub fn version(out: &mut Vec<u8>) {
        out.extend_from_slice(b"version\r\n");
    }

    pub fn quit(out: &mut Vec<u8>) {
        out.extend_from_slice(b"quit\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{parse, Config, Request};

    /// Every proper prefix of a complete unit is incomplete.
    fn full(input: &[u8]) -> (Reply<'_>, usize) {
        let got = parse_reply(input).expect("well formed").expect("complete");
        for cut in 0..got.1 {
            assert_eq!(parse_reply(&input[..cut]), Ok(None), "prefix {cut}");
        }
        got
    }

    #[test]
    fn reply_units() {
        let rows: &[(&[u8], Reply<'_>)] = &[
            (b"STORED\r\n", Reply::Stored),
            (b"NOT_STORED\r\n", Reply::NotStored),
            (b"EXISTS\r\n", Reply::Exists),
            (b"NOT_FOUND\r\n", Reply::NotFound),
            (b"DELETED\r\n", Reply::Deleted),
            (b"TOUCHED\r\n", Reply::Touched),
            (b"END\r\n", Reply::End),
            (b"OK\r\n", Reply::Ok),
            (b"42\r\n", Reply::Number(42)),
            (b"VERSION 1.6.18\r\n", Reply::Version(b"1.6.18")),
            (b"ERROR\r\n", Reply::Error(b"")),
            (
                b"CLIENT_ERROR bad data chunk\r\n",
                Reply::ClientError(b"bad data chunk"),
            ),
            (
                b"SERVER_ERROR out of memory\r\n",
                Reply::ServerError(b"out of memory"),
            ),
            (
                b"STAT pid 12\r\n",
                Reply::Stat {
                    name: b"pid",
                    value: b"12",
                },
            ),
            (
                b"VALUE k 5 3 99\r\nabc\r\n",
                Reply::Value {
                    key: b"k",
                    flags: 5,
                    data: b"abc",
                    cas: Some(99),
                },
            ),
            (
                b"VALUE k 0 4\r\na\r\nb\r\n",
                Reply::Value {
                    key: b"k",
                    flags: 0,
                    data: b"a\r\nb",
                    cas: None,
                },
            ),
        ];
        for (input, want) in rows {
            let (got, n) = full(input);
            assert_eq!(&got, want);
            assert_eq!(n, input.len());
        }
        assert_eq!(parse_reply(b"VALUE k 0 3\r\nabcd\r\n"), Err(Malformed));
        assert_eq!(parse_reply(b"VALUE k x 3\r\nabc\r\n"), Err(Malformed));
    }

    /// What the client encodes, the server parses back to the same request.
    #[test]
    fn encode_parse_round_trip() {
        let cfg = Config::default();
        let mut out = Vec::new();
        encode::store(
            &mut out,
            StoreCmd::Cas,
            b"key",
            7,
            -1,
            b"da\r\nta",
            123,
            true,
        );
        let (req, n) = parse(&out, &cfg).expect("complete");
        assert_eq!(n, out.len());
        assert_eq!(
            req,
            Ok(Request::Store {
                cmd: StoreCmd::Cas,
                key: b"key",
                flags: 7,
                exptime: -1,
                data: b"da\r\nta",
                cas_unique: 123,
                noreply: true
            })
        );
        out.clear();
        encode::arith(&mut out, b"n", false, u64::MAX, false);
        assert_eq!(
            parse(&out, &cfg).map(|p| p.0),
            Some(Ok(Request::Arith {
                key: b"n",
                delta: u64::MAX,
                incr: false,
                noreply: false
            }))
        );
        out.clear();
        encode::gat(&mut out, 10, [&b"a"[..], b"b"], true);
        match parse(&out, &cfg) {
            Some((
                Ok(Request::Get {
                    keys,
                    cas: true,
                    touch: Some(10),
                }),
                _,
            )) => {
                assert_eq!(keys.collect::<Vec<_>>(), vec![&b"a"[..], b"b"]);
            }
            other => panic!("{other:?}"),
        }
    }
}
