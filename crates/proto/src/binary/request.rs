//! The validated request and [`decode`], `dispatch_bin_command`'s checks in its
//! order (drawn in the [module docs](super)).

use memcrab_limits::KEY_MAX_LEN;

use super::frame::Header;
use super::op;
use super::status;

/// memcached's `MAX_SASL_MECH_LEN`.
pub const MAX_SASL_MECH_LEN: usize = 32;
/// memcached's `ITEM_SIZE_MAX_UPPER_LIMIT` (1 GiB): `dispatch_bin_command` refuses
/// a longer declared body (1.6.45) before anything else reads it as a signed length.
pub const BODY_MAX_BYTES: u32 = 1024 * 1024 * 1024;
/// incr/decr's expiration that means "do not create".
pub const NO_CREATE: u32 = 0xffff_ffff;

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
    if bodylen > BODY_MAX_BYTES {
        return Err(Reject::Close(status::EINVAL));
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
