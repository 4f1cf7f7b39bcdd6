//! The meta commands, client side: request encoders and a reply parser.
//!
//! Flags are passed as the raw tokens a client wants (`b"v"`, `b"T30"`, `b"O123"`);
//! replies keep their flags as one slice, searched with [`MetaReply::flag`].

use crate::num::safe_strtoull;
use crate::text::client::data_block;

/// A reply that is not a meta reply (the text client's type: one for both clients).
pub use crate::text::client::Malformed;

/// What a meta reply line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// `HD`: success, no value.
    Hd,
    /// `VA <size>`: success with a value.
    Va,
    /// `EN`: miss (`mg`, `me`).
    En,
    /// `NS`: not stored.
    Ns,
    /// `EX`: CAS mismatch.
    Ex,
    /// `NF`: not found.
    Nf,
    /// `MN`: the `mn` marker.
    Mn,
    /// `ME <key> <k>=<v>*`: meta debug.
    Me,
}

/// One reply unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaReply<'a> {
    /// A status line with its flags (everything after the code, space-separated)
    /// and, for `VA`, the value.
    Status {
        code: Code,
        flags: &'a [u8],
        value: Option<&'a [u8]>,
    },
    /// `ERROR`, `CLIENT_ERROR ...` or `SERVER_ERROR ...`: the whole line.
    Error(&'a [u8]),
}

impl<'a> MetaReply<'a> {
    /// The argument of returned flag `f` (`c` → the CAS digits), if present.
    pub fn flag(&self, f: u8) -> Option<&'a [u8]> {
        match self {
            MetaReply::Status { flags, .. } => flags
                .split(|&b| b == b' ')
                .find(|t| t.first() == Some(&f))
                .map(|t| &t[1..]),
            MetaReply::Error(_) => None,
        }
    }

    /// The returned CAS (`c` flag).
    pub fn cas(&self) -> Option<u64> {
        self.flag(b'c').and_then(|c| safe_strtoull(c).ok())
    }
}

/// Parses one reply from the front of `buf`. `Ok(None)`: more bytes needed.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(MetaReply<'_>, usize)>, Malformed> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        return Ok(None);
    };
    let line = buf[..nl].strip_suffix(b"\r").ok_or(Malformed)?;
    let used = nl + 1;
    if line.starts_with(b"ERROR")
        || line.starts_with(b"CLIENT_ERROR")
        || line.starts_with(b"SERVER_ERROR")
    {
        return Ok(Some((MetaReply::Error(line), used)));
    }
    let (word, rest) = match memchr::memchr(b' ', line) {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &line[line.len()..]),
    };
    let code = match word {
        b"HD" => Code::Hd,
        b"VA" => Code::Va,
        b"EN" => Code::En,
        b"NS" => Code::Ns,
        b"EX" => Code::Ex,
        b"NF" => Code::Nf,
        b"MN" => Code::Mn,
        b"ME" => Code::Me,
        _ => return Err(Malformed),
    };
    if code != Code::Va {
        return Ok(Some((
            MetaReply::Status {
                code,
                flags: rest,
                value: None,
            },
            used,
        )));
    }
    let (size, flags) = match memchr::memchr(b' ', rest) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &rest[rest.len()..]),
    };
    let size = safe_strtoull(size)
        .ok()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(Malformed)?;
    let Some((value, end)) = data_block(buf, used, size)? else {
        return Ok(None);
    };
    Ok(Some((
        MetaReply::Status {
            code,
            flags,
            value: Some(value),
        },
        end,
    )))
}

fn line(out: &mut Vec<u8>, cmd: &[u8], key: &[u8], extra: Option<usize>, flags: &[&[u8]]) {
    out.extend_from_slice(cmd);
    out.push(b' ');
    out.extend_from_slice(key);
    if let Some(n) = extra {
        out.push(b' ');
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }
    for f in flags {
        out.push(b' ');
        out.extend_from_slice(f);
    }
    out.extend_from_slice(b"\r\n");
}

/// `mg <key> <flags>*`.
pub fn mg(out: &mut Vec<u8>, key: &[u8], flags: &[&[u8]]) {
    line(out, b"mg", key, None, flags);
}

/// `ms <key> <datalen> <flags>*` and the data block.
pub fn ms(out: &mut Vec<u8>, key: &[u8], data: &[u8], flags: &[&[u8]]) {
    line(out, b"ms", key, Some(data.len()), flags);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// `md <key> <flags>*`.
pub fn md(out: &mut Vec<u8>, key: &[u8], flags: &[&[u8]]) {
    line(out, b"md", key, None, flags);
}

/// `ma <key> <flags>*`.
pub fn ma(out: &mut Vec<u8>, key: &[u8], flags: &[&[u8]]) {
    line(out, b"ma", key, None, flags);
}

/// `me <key>`.
pub fn me(out: &mut Vec<u8>, key: &[u8]) {
    line(out, b"me", key, None, &[]);
}

/// `mn`.
pub fn mn(out: &mut Vec<u8>) {
    out.extend_from_slice(b"mn\r\n");
}
