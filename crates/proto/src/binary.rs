//! memcached's binary protocol (deprecated upstream since 1.6, still served by
//! 1.6.18): request framing and validation, response encoders, and client-side
//! request encoders for tests.
//!
//! Requests are parsed in place: [`frame`] looks only at the 24-byte header and
//! waits (`Frame::NeedMore`) until the extras and key are buffered, exactly as
//! memcached's `try_read_command_binary` does; nothing is allocated from a length
//! field. [`decode`] then applies `dispatch_bin_command`'s checks in its order:
//!
//! ```text
//!   magic != 0x80                      -> close, no reply
//!   keylen + extlen > bodylen          -> 0x81 "Unknown command", close after write
//!   SASL on, not authenticated         -> 0x20 "Auth failure.", close after write
//!   keylen > 250                       -> 0x04 "Invalid arguments", close after write
//!   per-opcode length rules violated   -> 0x04 "Invalid arguments", close after write
//!   unknown opcode (verbosity too)     -> 0x81 "Unknown command", swallow bodylen
//! ```
//!
//! Storage requests carry a value of `bodylen - keylen - extlen` bytes after the
//! key; the caller checks its size before waiting for it (memcached answers
//! "Too large." and swallows the value without buffering it).

use memcrab_limits::KEY_MAX_LEN;

/// Length of every request and response header.
pub const HEADER_LEN: usize = 24;
/// Request magic byte.
pub const REQ_MAGIC: u8 = 0x80;
/// Response magic byte.
pub const RES_MAGIC: u8 = 0x81;
/// memcached's `MAX_SASL_MECH_LEN`.
pub const MAX_SASL_MECH_LEN: usize = 32;
/// incr/decr's expiration that means "do not create".
pub const NO_CREATE: u32 = 0xffff_ffff;

/// Opcodes (protocol_binary.h).
pub mod op {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    pub const VERBOSITY: u8 = 0x1b;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const SASL_LIST_MECHS: u8 = 0x20;
    pub const SASL_AUTH: u8 = 0x21;
    pub const SASL_STEP: u8 = 0x22;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
}

/// Response statuses (protocol_binary.h).
pub mod status {
    pub const SUCCESS: u16 = 0x00;
    pub const KEY_ENOENT: u16 = 0x01;
    pub const KEY_EEXISTS: u16 = 0x02;
    pub const E2BIG: u16 = 0x03;
    pub const EINVAL: u16 = 0x04;
    pub const NOT_STORED: u16 = 0x05;
    pub const DELTA_BADVAL: u16 = 0x06;
    pub const AUTH_ERROR: u16 = 0x20;
    pub const AUTH_CONTINUE: u16 = 0x21;
    pub const UNKNOWN_COMMAND: u16 = 0x81;
    pub const ENOMEM: u16 = 0x82;

    /// memcached's `write_bin_error` default text for a status.
    pub fn text(status: u16) -> &'static [u8] {
        match status {
            ENOMEM => b"Out of memory",
            UNKNOWN_COMMAND => b"Unknown command",
            KEY_ENOENT => b"Not found",
            EINVAL => b"Invalid arguments",
            KEY_EEXISTS => b"Data exists for key.",
            E2BIG => b"Too large.",
            DELTA_BADVAL => b"Non-numeric server-side value for incr or decr",
            NOT_STORED => b"Not stored.",
            AUTH_ERROR => b"Auth failure.",
            _ => b"UNHANDLED ERROR",
        }
    }
}

/// A request header, fields in host order. `opaque` is kept as the raw bytes,
/// since memcached echoes it without conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub magic: u8,
    pub opcode: u8,
    pub keylen: u16,
    pub extlen: u8,
    pub datatype: u8,
    pub vbucket: u16,
    pub bodylen: u32,
    pub opaque: [u8; 4],
    pub cas: u64,
}

impl Header {
    /// Decodes a header from the first 24 bytes of `b`, if there are that many.
    pub fn parse(b: &[u8]) -> Option<Header> {
        let h: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        Some(Header {
            magic: h[0],
            opcode: h[1],
            keylen: u16::from_be_bytes([h[2], h[3]]),
            extlen: h[4],
            datatype: h[5],
            vbucket: u16::from_be_bytes([h[6], h[7]]),
            bodylen: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
            opaque: [h[12], h[13], h[14], h[15]],
            cas: u64::from_be_bytes([h[16], h[17], h[18], h[19], h[20], h[21], h[22], h[23]]),
        })
    }

    /// Header, extras and key: what memcached consumes before dispatching.
    pub fn prefix_len(&self) -> usize {
        HEADER_LEN + usize::from(self.extlen) + usize::from(self.keylen)
    }
}

/// What [`frame`] found at the start of the input.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Fewer bytes than the header, extras and key.
    NeedMore,
    /// The first byte is not the request magic: memcached closes at once.
    BadMagic,
    /// Header, extras and key are buffered (the value, if any, may not be).
    Packet(Header, &'a [u8], &'a [u8]),
}

/// Splits the header, extras and key off `input` without copying.
pub fn frame(input: &[u8]) -> Frame<'_> {
    let Some(header) = Header::parse(input) else {
        return Frame::NeedMore;
    };
    if header.magic != REQ_MAGIC {
        return Frame::BadMagic;
    }
    let ext_end = HEADER_LEN + usize::from(header.extlen);
    let key_end = ext_end + usize::from(header.keylen);
    match (input.get(HEADER_LEN..ext_end), input.get(ext_end..key_end)) {
        (Some(extras), Some(key)) => Frame::Packet(header, extras, key),
        _ => Frame::NeedMore,
    }
}

/// How a storage request treats an existing item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
}

/// A validated request. `quiet` is the opcode's quiet form; the response opcode is
/// always the request's own (see [`Header::opcode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// get/getq/getk/getkq (`touch: None`), touch, gat/gatq/gatk/gatkq.
    Get {
        key: &'a [u8],
        quiet: bool,
        with_key: bool,
        /// The new expiration (touch and gat*).
        touch: Option<u32>,
        /// `touch`: reply with the flags only.
        no_value: bool,
    },
    /// set/add/replace (and quiet forms) with flags and expiration; append/prepend
    /// (flags and expiration 0). The value is the `value_len` bytes after the key.
    Store {
        kind: StoreKind,
        key: &'a [u8],
        quiet: bool,
        flags: u32,
        exptime: u32,
        cas: u64,
        value_len: usize,
    },
    Delete {
        key: &'a [u8],
        quiet: bool,
        cas: u64,
    },
    Arith {
        key: &'a [u8],
        quiet: bool,
        incr: bool,
        delta: u64,
        initial: u64,
        /// [`NO_CREATE`] means a miss is not created.
        exptime: u32,
        cas: u64,
    },
    Quit {
        quiet: bool,
    },
    Flush {
        quiet: bool,
        /// The extra's expiration, 0 when absent.
        delay: u32,
    },
    Noop,
    Version,
    Stat {
        key: &'a [u8],
    },
    SaslListMechs,
    /// SASL auth (`step: false`) or step; the data is the `value_len` bytes after
    /// the mechanism name (the key).
    SaslAuth {
        step: bool,
        mech: &'a [u8],
        value_len: usize,
    },
}

/// A request memcached refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// Reply with this status (default text) and close after writing.
    Close(u16),
    /// Reply with this status (default text), then discard this many bytes.
    Swallow(u16, usize),
}

/// Validates a framed request as `dispatch_bin_command` does. `sasl` is `-S`;
/// `authenticated` is the connection's state (ignored without `sasl`).
pub fn decode<'a>(
    h: &Header,
    extras: &'a [u8],
    key: &'a [u8],
    sasl: bool,
    authenticated: bool,
) -> Result<Request<'a>, Reject> {
    let extlen = u32::from(h.extlen);
    let keylen = u32::from(h.keylen);
    let bodylen = h.bodylen;
    if keylen > bodylen || keylen + extlen > bodylen {
        return Err(Reject::Close(status::UNKNOWN_COMMAND));
    }
    if sasl
        && !authenticated
        && !matches!(
            h.opcode,
            op::SASL_LIST_MECHS | op::SASL_AUTH | op::SASL_STEP | op::VERSION
        )
    {
        return Err(Reject::Close(status::AUTH_ERROR));
    }
    if key.len() > KEY_MAX_LEN {
        return Err(Reject::Close(status::EINVAL));
    }
    let bad = Err(Reject::Close(status::EINVAL));
    let be32 = |at: usize| -> u32 {
        extras
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_be_bytes)
    };
    let be64 = |at: usize| -> u64 {
        extras
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_be_bytes)
    };
    let value_len = (bodylen - keylen - extlen) as usize;
    let quiet = matches!(
        h.opcode,
        op::SETQ
            | op::ADDQ
            | op::REPLACEQ
            | op::DELETEQ
            | op::INCREMENTQ
            | op::DECREMENTQ
            | op::QUITQ
            | op::FLUSHQ
            | op::APPENDQ
            | op::PREPENDQ
            | op::GETQ
            | op::GETKQ
            | op::GATQ
            | op::GATKQ
    );
    let empty = extlen == 0 && keylen == 0 && bodylen == 0;
    match h.opcode {
        op::VERSION if empty => Ok(Request::Version),
        op::FLUSH | op::FLUSHQ
            if keylen == 0 && bodylen == extlen && (extlen == 0 || extlen == 4) =>
        {
            Ok(Request::Flush {
                quiet,
                delay: be32(0),
            })
        }
        op::NOOP if empty => Ok(Request::Noop),
        op::SET | op::SETQ | op::ADD | op::ADDQ | op::REPLACE | op::REPLACEQ
            if extlen == 8 && keylen != 0 && bodylen >= keylen + 8 =>
        {
            let kind = match h.opcode {
                op::SET | op::SETQ => StoreKind::Set,
                op::ADD | op::ADDQ => StoreKind::Add,
                _ => StoreKind::Replace,
            };
            Ok(Request::Store {
                kind,
                key,
                quiet,
                flags: be32(0),
                exptime: be32(4),
                cas: h.cas,
                value_len,
            })
        }
        op::GET | op::GETQ | op::GETK | op::GETKQ
            if extlen == 0 && bodylen == keylen && keylen > 0 =>
        {
            Ok(Request::Get {
                key,
                quiet,
                with_key: matches!(h.opcode, op::GETK | op::GETKQ),
                touch: None,
                no_value: false,
            })
        }
        op::DELETE | op::DELETEQ if keylen > 0 && extlen == 0 && bodylen == keylen => {
            Ok(Request::Delete {
                key,
                quiet,
                cas: h.cas,
            })
        }
        op::INCREMENT | op::INCREMENTQ | op::DECREMENT | op::DECREMENTQ
            if keylen > 0 && extlen == 20 && bodylen == keylen + extlen =>
        {
            Ok(Request::Arith {
                key,
                quiet,
                incr: matches!(h.opcode, op::INCREMENT | op::INCREMENTQ),
                delta: be64(0),
                initial: be64(8),
                exptime: be32(16),
                cas: h.cas,
            })
        }
        op::APPEND | op::APPENDQ | op::PREPEND | op::PREPENDQ if keylen > 0 && extlen == 0 => {
            Ok(Request::Store {
                kind: if matches!(h.opcode, op::APPEND | op::APPENDQ) {
                    StoreKind::Append
                } else {
                    StoreKind::Prepend
                },
                key,
                quiet,
                flags: 0,
                exptime: 0,
                cas: h.cas,
                value_len,
            })
        }
        op::STAT if extlen == 0 => Ok(Request::Stat { key }),
        op::QUIT | op::QUITQ if empty => Ok(Request::Quit { quiet }),
        op::SASL_LIST_MECHS if empty => {
            if sasl {
                Ok(Request::SaslListMechs)
            } else {
                Err(Reject::Swallow(
                    status::UNKNOWN_COMMAND,
                    (bodylen - keylen) as usize,
                ))
            }
        }
        op::SASL_AUTH | op::SASL_STEP if extlen == 0 && keylen != 0 => {
            if !sasl {
                Err(Reject::Swallow(
                    status::UNKNOWN_COMMAND,
                    (bodylen - keylen) as usize,
                ))
            } else if key.len() > MAX_SASL_MECH_LEN {
                Err(Reject::Swallow(status::EINVAL, value_len))
            } else {
                Ok(Request::SaslAuth {
                    step: h.opcode == op::SASL_STEP,
                    mech: key,
                    value_len,
                })
            }
        }
        op::TOUCH | op::GAT | op::GATQ | op::GATK | op::GATKQ if extlen == 4 && keylen != 0 => {
            Ok(Request::Get {
                key,
                quiet,
                with_key: matches!(h.opcode, op::GATK | op::GATKQ),
                touch: Some(be32(0)),
                no_value: h.opcode == op::TOUCH,
            })
        }
        op::VERSION
        | op::FLUSH
        | op::FLUSHQ
        | op::NOOP
        | op::SET
        | op::SETQ
        | op::ADD
        | op::ADDQ
        | op::REPLACE
        | op::REPLACEQ
        | op::GET
        | op::GETQ
        | op::GETK
        | op::GETKQ
        | op::DELETE
        | op::DELETEQ
        | op::INCREMENT
        | op::INCREMENTQ
        | op::DECREMENT
        | op::DECREMENTQ
        | op::APPEND
        | op::APPENDQ
        | op::PREPEND
        | op::PREPENDQ
        | op::STAT
        | op::QUIT
        | op::QUITQ
        | op::SASL_LIST_MECHS
        | op::SASL_AUTH
        | op::SASL_STEP
        | op::TOUCH
        | op::GAT
        | op::GATQ
        | op::GATK
        | op::GATKQ => bad,
        // memcached swallows `bodylen` bytes after the key and extras it already
        // consumed (its quirk, kept).
        _ => Err(Reject::Swallow(status::UNKNOWN_COMMAND, bodylen as usize)),
    }
}

/// Writes a response header.
#[allow(clippy::too_many_arguments)]
pub fn header(
    out: &mut Vec<u8>,
    opcode: u8,
    status: u16,
    extlen: u8,
    keylen: u16,
    bodylen: u32,
    opaque: [u8; 4],
    cas: u64,
) {
    out.push(RES_MAGIC);
    out.push(opcode);
    out.extend_from_slice(&keylen.to_be_bytes());
    out.push(extlen);
    out.push(0);
    out.extend_from_slice(&status.to_be_bytes());
    out.extend_from_slice(&bodylen.to_be_bytes());
    out.extend_from_slice(&opaque);
    out.extend_from_slice(&cas.to_be_bytes());
}

/// A response with no extras and no key: `body` only.
pub fn simple(out: &mut Vec<u8>, h: &Header, status: u16, cas: u64, body: &[u8]) {
    header(
        out,
        h.opcode,
        status,
        0,
        0,
        body.len() as u32,
        h.opaque,
        cas,
    );
    out.extend_from_slice(body);
}

/// An error response with memcached's default text for `status` (CAS 0).
pub fn error(out: &mut Vec<u8>, h: &Header, status: u16) {
    simple(out, h, status, 0, status::text(status));
}

/// A get/gat/touch hit: flags extra, the key when asked, the value unless `None`.
pub fn hit(
    out: &mut Vec<u8>,
    h: &Header,
    cas: u64,
    flags: u32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    hit_head(out, h, cas, flags, key, value.map_or(0, <[u8]>::len));
    if let Some(v) = value {
        out.extend_from_slice(v);
    }
}

/// A hit's header, flags extra and key (when asked), for a caller that appends the
/// `vlen` bytes of value itself (a server sending them from the store's memory).
pub fn hit_head(
    out: &mut Vec<u8>,
    h: &Header,
    cas: u64,
    flags: u32,
    key: Option<&[u8]>,
    vlen: usize,
) {
    let klen = key.map_or(0, <[u8]>::len);
    header(
        out,
        h.opcode,
        status::SUCCESS,
        4,
        klen as u16,
        (4 + klen + vlen) as u32,
        h.opaque,
        cas,
    );
    out.extend_from_slice(&flags.to_be_bytes());
    if let Some(k) = key {
        out.extend_from_slice(k);
    }
}

/// A getk/gatk miss: status "not found" with the key as key and body.
pub fn miss_with_key(out: &mut Vec<u8>, h: &Header, key: &[u8]) {
    header(
        out,
        h.opcode,
        status::KEY_ENOENT,
        0,
        key.len() as u16,
        key.len() as u32,
        h.opaque,
        0,
    );
    out.extend_from_slice(key);
}

/// One stat packet (`key` empty and `value` empty: the terminator).
pub fn stat(out: &mut Vec<u8>, opaque: [u8; 4], key: &[u8], value: &[u8]) {
    header(
        out,
        op::STAT,
        status::SUCCESS,
        0,
        key.len() as u16,
        (key.len() + value.len()) as u32,
        opaque,
        0,
    );
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Client-side request encoding (tests and tools).
pub mod client {
    use super::{HEADER_LEN, REQ_MAGIC};

    /// A request with explicit lengths: `bodylen` need not match the body given,
    /// so tests can send inconsistent headers.
    #[allow(clippy::too_many_arguments)]
    pub fn raw(
        opcode: u8,
        keylen: u16,
        extlen: u8,
        bodylen: u32,
        opaque: u32,
        cas: u64,
        body: &[u8],
    ) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_LEN + body.len());
        v.push(REQ_MAGIC);
        v.push(opcode);
        v.extend_from_slice(&keylen.to_be_bytes());
        v.push(extlen);
        v.push(0);
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(&bodylen.to_be_bytes());
        v.extend_from_slice(&opaque.to_be_bytes());
        v.extend_from_slice(&cas.to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    /// A well-formed request from its parts.
    pub fn request(
        opcode: u8,
        extras: &[u8],
        key: &[u8],
        value: &[u8],
        opaque: u32,
        cas: u64,
    ) -> Vec<u8> {
        let mut body = Vec::with_capacity(extras.len() + key.len() + value.len());
        body.extend_from_slice(extras);
        body.extend_from_slice(key);
        body.extend_from_slice(value);
        raw(
            opcode,
            key.len() as u16,
            extras.len() as u8,
            body.len() as u32,
            opaque,
            cas,
            &body,
        )
    }

    /// set/add/replace extras: flags and expiration.
    pub fn store_extras(flags: u32, exptime: u32) -> Vec<u8> {
        let mut e = flags.to_be_bytes().to_vec();
        e.extend_from_slice(&exptime.to_be_bytes());
        e
    }

    /// incr/decr extras: delta, initial value, expiration.
    pub fn arith_extras(delta: u64, initial: u64, exptime: u32) -> Vec<u8> {
        let mut e = delta.to_be_bytes().to_vec();
        e.extend_from_slice(&initial.to_be_bytes());
        e.extend_from_slice(&exptime.to_be_bytes());
        e
    }

    /// A response split into its fields.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Response {
        pub opcode: u8,
        pub status: u16,
        pub opaque: u32,
        pub cas: u64,
        pub extras: Vec<u8>,
        pub key: Vec<u8>,
        pub value: Vec<u8>,
    }

    /// Parses one response from the front of `b`: the response and its length.
    pub fn parse_response(b: &[u8]) -> Option<(Response, usize)> {
        let h = super::Header::parse(b)?;
        let total = HEADER_LEN + h.bodylen as usize;
        let body = b.get(HEADER_LEN..total)?;
        let e = usize::from(h.extlen);
        let k = e + usize::from(h.keylen);
        Some((
            Response {
                opcode: h.opcode,
                status: h.vbucket,
                opaque: u32::from_be_bytes(h.opaque),
                cas: h.cas,
                extras: body.get(..e)?.to_vec(),
                key: body.get(e..k)?.to_vec(),
                value: body.get(k..)?.to_vec(),
            },
            total,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(b: &[u8], sasl: bool, authed: bool) -> Result<Request<'_>, Reject> {
        match frame(b) {
            Frame::Packet(header, extras, key) => decode(&header, extras, key, sasl, authed),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn framing_waits_for_key_and_extras() {
        let r = client::request(op::GET, &[], b"key", &[], 7, 0);
        for n in 0..r.len() {
            assert_eq!(frame(&r[..n]), Frame::NeedMore, "{n}");
        }
        assert!(matches!(frame(&r), Frame::Packet(..)));
        let mut bad = r.clone();
        bad[0] = b'g';
        assert_eq!(frame(&bad), Frame::BadMagic);
    }

    #[test]
    fn length_matrix() {
        // keylen > bodylen: unknown command, close.
        let r = client::raw(op::SET, 5, 8, 4, 0, 0, &[0; 13]);
        assert_eq!(
            dec(&r, false, false),
            Err(Reject::Close(status::UNKNOWN_COMMAND))
        );
        // keylen 251: EINVAL, close.
        let r = client::request(op::GET, &[], &[b'a'; 251], &[], 0, 0);
        assert_eq!(dec(&r, false, false), Err(Reject::Close(status::EINVAL)));
        // wrong extlen for set.
        let r = client::request(op::SET, &[0; 4], b"k", b"v", 0, 0);
        assert_eq!(dec(&r, false, false), Err(Reject::Close(status::EINVAL)));
        // unknown opcode: swallow bodylen.
        let r = client::raw(0x50, 0, 0, 9, 0, 0, &[]);
        assert_eq!(
            dec(&r, false, false),
            Err(Reject::Swallow(status::UNKNOWN_COMMAND, 9))
        );
        // SASL gate.
        let r = client::request(op::GET, &[], b"k", &[], 0, 0);
        assert_eq!(dec(&r, true, false), Err(Reject::Close(status::AUTH_ERROR)));
        assert!(dec(&r, true, true).is_ok());
        let r = client::request(op::VERSION, &[], &[], &[], 0, 0);
        assert_eq!(dec(&r, true, false), Ok(Request::Version));
    }

    #[test]
    fn store_fields() {
        let r = client::request(
            op::SETQ,
            &client::store_extras(5, 10),
            b"key",
            b"value",
            1,
            9,
        );
        assert_eq!(
            dec(&r, false, false),
            Ok(Request::Store {
                kind: StoreKind::Set,
                key: b"key",
                quiet: true,
                flags: 5,
                exptime: 10,
                cas: 9,
                value_len: 5
            })
        );
    }
}
