//! memcached's meta commands (`mg ms md ma mn me`): request parsing and flag tokens,
//! the request [`Key`] and base64, reply pieces, and the client side.
//!
//! The model is memcached 1.6.45's `proto_parser.c` (`process_request`,
//! `_meta_flag_preparse`, `process_mget_cmd`, `process_mset_cmd_start`,
//! `process_mdelete_cmd`, `process_marithmetic_cmd`) and `proto_text.c`
//! (`process_meta_command`, `process_mset_command`): the same token limits, the same
//! order of checks, the same error strings (`ma` answers every flag error with
//! `CLIENT_ERROR invalid or duplicate flag`, the others with the specific one).
//!
//! ```text
//!   "ms k 5 T10 F3 c\r\nhello\r\n"
//!    ──► Meta::Set { key: "k", flags: [T10 F3 c], data: "hello", mode: Set }
//!   "md k q O12\r\n" ──► Meta::Delete { key: "k", flags: [q O12] }
//!   "mg k v !\r\n"   ──► Meta::Fail { "CLIENT_ERROR bad command line format" }
//! ```
//!
//! Meta commands are text commands: the text parser ([`super::parse`]) finds the
//! line and hands every two-letter command starting with `m` to this module's
//! `parse`, which splits it again as mcmc does; a meta request comes back as
//! `Request::Meta`. This module is a child of `text` and reads only what sits below
//! it there (mcmc's number converters in `token.rs`, `Config` in `config.rs`), never
//! the classic parser. Keys and values borrow from the input; a base64 key (`b`) is
//! decoded into a small buffer on the stack ([`KeyBuf`]). 1.6.45 against 1.6.18:
//! `E` (explicit new CAS, 1.6.27) and `x` (empty the value, 1.6.27) are flags; `F`
//! over 2^32-1 is refused where 1.6.18 wrapped it; a flag token that does not start
//! with a letter or digit refuses the line; `md` names its flag errors.
//!
//! Errors memcached reports only after touching the item (`mg`/`ma` with an opaque
//! over 32 bytes) are left to the executor: [`Flags::opaque_too_long`].
//!
//! The files, what each holds, and what it imports of this crate (`──►`):
//!
//! ```text
//!   mod.rs     meta::parse (returns Parsed), Meta, Flags, SetMode, the error lines
//!                  ──► tokens, key, text's token, config and reply, num,
//!                      memcrab_limits
//!   tokens.rs  the line split as mcmc splits it (MetaTokens); imports nothing
//!   key.rs     Key (plain or base64), base64 codec, NotBase64
//!                  ──► memcrab_limits (KEY_MAX_LEN)
//!   reply.rs   reply pieces (` c<cas>`, ` k<key>`, ` t<ttl>`)  ──► key
//!   client.rs  client side: request encoders, reply parser
//!                  ──► text's client (Malformed, data_block), num
//!   tests.rs   unit tests
//! ```

use super::config::{item_size_ok, Config};
use super::token::{tok_i32, tok_u64, TOK_U32_MAX_LEN, TOK_U64_MAX_LEN};
use crate::num::NotANumber;
use memcrab_limits::KEY_MAX_LEN;

pub mod client;
mod key;
pub mod reply;
#[cfg(test)]
mod tests;
mod tokens;

pub use key::{base64_decode, base64_encode, Key, KeyBuf, NotBase64, DECODED_KEY_MAX};
use tokens::MetaTokens;
pub use tokens::MAX_LINE_TOKENS;

/// memcached's `MFLAG_MAX_OPAQUE_LENGTH`: the longest `O` token, the `O` included.
pub const OPAQUE_MAX_LEN: usize = 32;
/// memcached's `MFLAG_MAX_OPT_LENGTH`: a meta line may have at most this many tokens,
/// the command and the key included (1.6.18 counted a terminal pseudo-token too, so
/// it allowed one flag fewer).
pub const MAX_TOKENS: usize = 20;

/// The parsed flags of a meta request, and its flag tokens in request order (replies
/// echo `O`, `k`, `c`, `t`... in the order they were asked for, and `T`/`N`/`R`
/// take effect in that order too).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Flags<'a> {
    /// From the first flag token to the end of the last one (tokens are split on
    /// spaces, so splitting this again yields them).
    span: &'a [u8],
    /// `q`: suppress the nominal reply (which one depends on the command).
    pub quiet: bool,
    /// `v`: return the value.
    pub value: bool,
    /// `u`: no LRU bump.
    pub no_bump: bool,
    /// `I`: invalidate (`md`), or store-if-stale (`ms` with `C`).
    pub invalidate: bool,
    /// `T<ttl>`, as sent.
    pub ttl: Option<i32>,
    /// `N<ttl>`: vivify on miss, as sent.
    pub vivify: Option<i32>,
    /// `R<ttl>`: recache threshold, as sent.
    pub recache: Option<i32>,
    /// `F<flags>` (0 when absent).
    pub client_flags: u32,
    /// `C<cas>`.
    pub compare_cas: Option<u64>,
    /// `E<cas>`: explicit new CAS (not in 1.6.18).
    pub new_cas: Option<u64>,
    /// `M<mode>`: the mode character.
    pub mode: Option<u8>,
    /// `J<initial>` (0 when absent).
    pub initial: u64,
    /// `D<delta>` (1 when absent).
    pub delta: u64,
    /// `x`: `md` empties the value and keeps the item (memcached 1.6.27); the other
    /// commands accept it and ignore it.
    pub remove_value: bool,
}

impl<'a> Flags<'a> {
    fn empty() -> Self {
        Flags {
            span: &[],
            quiet: false,
            value: false,
            no_bump: false,
            invalidate: false,
            ttl: None,
            vivify: None,
            recache: None,
            client_flags: 0,
            compare_cas: None,
            new_cas: None,
            mode: None,
            initial: 0,
            delta: 1,
            remove_value: false,
        }
    }

    /// The flag tokens in request order (each non-empty; the first byte is the flag).
    pub fn tokens(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.span.split(|&b| b == b' ').filter(|t| !t.is_empty())
    }

    /// Whether an `O` token is longer than [`OPAQUE_MAX_LEN`]: memcached answers
    /// `CLIENT_ERROR opaque token too long` (for `mg` and `ma` only after acting).
    pub fn opaque_too_long(&self) -> bool {
        self.tokens()
            .any(|t| t[0] == b'O' && t.len() > OPAQUE_MAX_LEN)
    }

    /// Whether flag `a` comes before flag `b` (both present).
    pub fn before(&self, a: u8, b: u8) -> bool {
        let pos = |f: u8| self.tokens().position(|t| t[0] == f);
        matches!((pos(a), pos(b)), (Some(x), Some(y)) if x < y)
    }

    /// Whether flag `f` was sent.
    pub fn has(&self, f: u8) -> bool {
        self.tokens().any(|t| t[0] == f)
    }
}

impl std::fmt::Debug for Flags<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tokens().map(String::from_utf8_lossy))
            .finish()
    }
}

/// `ms` modes (`M` flag): `S` set (default), `E` add, `A` append, `P` prepend,
/// `R` replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetMode {
    Set,
    Add,
    Append,
    Prepend,
    Replace,
}

/// A meta request. Every variant is answered; errors are [`Meta::Fail`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Meta<'a> {
    /// `mg <key> <flags>*`.
    Get { key: Key<'a>, flags: Flags<'a> },
    /// `ms <key> <datalen> <flags>*` with its data block complete and well formed.
    Set {
        key: Key<'a>,
        flags: Flags<'a>,
        mode: SetMode,
        data: &'a [u8],
    },
    /// `ms` whose value is over `-I`: `SERVER_ERROR object too large for cache`, the
    /// key's current item is removed (any mode), and `swallow` bytes (the data block
    /// and its `\r\n`, perhaps not arrived yet) are discarded. `mode` and `cas` (a `C`
    /// flag) say which command memcached's `watch mutations` names.
    SetTooLarge {
        key: Key<'a>,
        mode: SetMode,
        cas: bool,
        swallow: usize,
    },
    /// `ms` whose data block did not end in `\r\n`: `CLIENT_ERROR bad data chunk`
    /// (even under `q`); the block was consumed and counts as a set command.
    SetBadChunk,
    /// `md <key> <flags>*`.
    Delete { key: Key<'a>, flags: Flags<'a> },
    /// `ma <key> <flags>*`; `incr` from the `M` mode (`I`/`+` or `D`/`-`).
    Arith {
        key: Key<'a>,
        flags: Flags<'a>,
        incr: bool,
    },
    /// `mn`: `MN\r\n`.
    Noop,
    /// `me <key> [b]`.
    Debug { key: Key<'a> },
    /// A refused request: send `reply` (never suppressed by `q`), then discard
    /// `swallow` bytes after the line (an `ms` data block). `set_cmd`: an `ms` that
    /// memcached refused only after allocating its item (an opaque over 32 bytes),
    /// which counts as a set command (`cmd_set`).
    Fail {
        reply: &'static [u8],
        swallow: usize,
        set_cmd: bool,
    },
}

/// Error replies, exactly as memcached 1.6.18 writes them. The ones the classic
/// commands send too are [`text::reply`](super::reply)'s.
pub mod errors {
    pub use crate::text::reply::{
        BAD_FORMAT, DELTA_OUT_OF_MEMORY, NON_NUMERIC, OUT_OF_MEMORY, TOO_LARGE,
    };

    pub const DUPLICATE_FLAG: &[u8] = b"CLIENT_ERROR duplicate flag\r\n";
    pub const INVALID_FLAG: &[u8] = b"CLIENT_ERROR invalid flag\r\n";
    pub const INVALID_OR_DUPLICATE_FLAG: &[u8] = b"CLIENT_ERROR invalid or duplicate flag\r\n";
    pub const BAD_TOKEN: &[u8] = b"CLIENT_ERROR bad token in command line format\r\n";
    pub const DECODING_KEY: &[u8] = b"CLIENT_ERROR error decoding key\r\n";
    pub const INITIAL_VALUE: &[u8] = b"CLIENT_ERROR invalid numeric initial value\r\n";
    pub const DELTA_VALUE: &[u8] = b"CLIENT_ERROR invalid numeric delta value\r\n";
    /// Every command's wording since 1.6.45 (1.6.18's `ms`, `md` and `ma` wrote
    /// "options flags too long"); `ma` still answers [`INVALID_OR_DUPLICATE_FLAG`].
    pub const TOO_MANY_FLAGS: &[u8] = b"CLIENT_ERROR options flags are too long\r\n";
    pub const OPAQUE_TOO_LONG: &[u8] = b"CLIENT_ERROR opaque token too long\r\n";
    pub const MS_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ms M token\r\n";
    pub const MA_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ma M token\r\n";
    pub const BAD_DATA_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";
}

/// What [`parse`] made of a meta line, and what the text parser does with it.
pub(crate) enum Parsed<'a> {
    /// A meta request (a refused one is [`Meta::Fail`]) and how many bytes after the
    /// line it used (an `ms` data block; 0 for every other command): return it.
    Request(Meta<'a>, usize),
    /// Not a meta command memcached knows (`mx`): memcached's plain `ERROR`, as for
    /// any unknown command; only the line is consumed.
    UnknownCommand,
    /// An `ms` whose data block has not fully arrived: keep the bytes, wait for more.
    NeedData,
}

/// Parses a meta command line: `line` as the text parser found it (without its
/// `\r\n`; the command is two bytes and starts with `m`), `after` the input after
/// the line. The line is split again with mcmc's rules ([`MetaTokens`]), as 1.6.45's
/// `process_request` splits it; a line it refuses, or one without a key (`ms`: without
/// a length that `mcmc_tokto32` reads as 0 to `INT_MAX - 2`), answers `CLIENT_ERROR bad
/// command line format` and swallows nothing.
pub(crate) fn parse<'a>(line: &'a [u8], after: &'a [u8], cfg: &Config) -> Parsed<'a> {
    let fail = |reply: &'static [u8]| {
        Parsed::Request(
            Meta::Fail {
                reply,
                swallow: 0,
                set_cmd: false,
            },
            0,
        )
    };
    let ok = |m: Meta<'a>| Parsed::Request(m, 0);
    // memcached takes the command as the bytes before the first space: a line that
    // starts with a space has no command.
    let (cmd, mstart) = match line {
        [b'm', c, rest @ ..] if rest.first().is_none_or(|&b| b == b' ') => match c {
            b'n' => return ok(Meta::Noop),
            b'g' | b'd' | b'a' | b'e' => (*c, 2),
            b's' => (b's', 3),
            _ => return Parsed::UnknownCommand,
        },
        _ => return Parsed::UnknownCommand,
    };
    let t = match MetaTokens::new(line, mstart) {
        Ok(t) if t.len() >= mstart => t,
        _ => return fail(errors::BAD_FORMAT),
    };
    let toks = t.as_slice();
    match cmd {
        b'e' => debug(toks),
        b'g' => match preparse(line, &t, 2) {
            Ok((key, flags)) => ok(Meta::Get { key, flags }),
            Err(e) => fail(e),
        },
        b'd' => match preparse(line, &t, 2) {
            Ok((_, flags)) if flags.opaque_too_long() => fail(errors::OPAQUE_TOO_LONG),
            Ok((key, flags)) => ok(Meta::Delete { key, flags }),
            Err(e) => fail(e),
        },
        // `process_marithmetic_cmd` answers every flag error with one message.
        b'a' => match preparse(line, &t, 2) {
            Ok((key, flags)) => match flags.mode {
                None | Some(b'I' | b'+') => ok(Meta::Arith {
                    key,
                    flags,
                    incr: true,
                }),
                Some(b'D' | b'-') => ok(Meta::Arith {
                    key,
                    flags,
                    incr: false,
                }),
                Some(_) => fail(errors::MA_MODE),
            },
            Err(_) => fail(errors::INVALID_OR_DUPLICATE_FLAG),
        },
        _ => {
            // `_process_request_mset`: the length is read before anything else.
            match tok_i32(toks[2]).map(usize::try_from) {
                Ok(Ok(vlen)) if vlen <= i32::MAX as usize - 2 => set(line, &t, vlen, after, cfg),
                _ => fail(errors::BAD_FORMAT),
            }
        }
    }
}

/// `process_meta_command` (`me`): a key over 250 bytes is refused; the key is base64
/// when the third token is exactly `b` and a fourth token follows (memcached tests
/// `ntokens >= 4`).
fn debug<'a>(toks: &[&'a [u8]]) -> Parsed<'a> {
    let fail = Parsed::Request(
        Meta::Fail {
            reply: errors::BAD_FORMAT,
            swallow: 0,
            set_cmd: false,
        },
        0,
    );
    if toks[1].len() > KEY_MAX_LEN {
        return fail;
    }
    let key = if toks.len() >= 4 && toks[2] == b"b" {
        match Key::base64(toks[1]) {
            Ok(key) => key,
            Err(NotBase64) => return fail,
        }
    } else {
        Key::plain(toks[1])
    };
    Parsed::Request(Meta::Debug { key }, 0)
}

/// `process_mset_cmd_start` and `process_mset_command`, then `complete_nread_ascii`.
/// Every refusal after the line swallows the data block (`vlen` and its `\r\n`),
/// and they come in memcached's order: a flag error, the mode, the size, the opaque.
fn set<'a>(
    line: &'a [u8],
    t: &MetaTokens<'a>,
    vlen: usize,
    after: &'a [u8],
    cfg: &Config,
) -> Parsed<'a> {
    let total = vlen + 2;
    let refuse = |reply: &'static [u8], set_cmd: bool| {
        Parsed::Request(
            Meta::Fail {
                reply,
                swallow: total,
                set_cmd,
            },
            0,
        )
    };
    let fail = |reply: &'static [u8]| refuse(reply, false);
    let (key, flags) = match preparse(line, t, 3) {
        Ok(kf) => kf,
        Err(e) => return fail(e),
    };
    let mode = match flags.mode {
        None | Some(b'S') => SetMode::Set,
        Some(b'E') => SetMode::Add,
        Some(b'A') => SetMode::Append,
        Some(b'P') => SetMode::Prepend,
        Some(b'R') => SetMode::Replace,
        Some(_) => return fail(errors::MS_MODE),
    };
    if !item_size_ok(
        key.decode(&mut [0; DECODED_KEY_MAX]).len(),
        flags.client_flags,
        vlen,
        cfg,
    ) {
        return Parsed::Request(
            Meta::SetTooLarge {
                key,
                mode,
                cas: flags.compare_cas.is_some(),
                swallow: total,
            },
            0,
        );
    }
    if flags.opaque_too_long() {
        return refuse(errors::OPAQUE_TOO_LONG, true);
    }
    if after.len() < total {
        return Parsed::NeedData;
    }
    if &after[vlen..total] != b"\r\n" {
        return Parsed::Request(Meta::SetBadChunk, total);
    }
    Parsed::Request(
        Meta::Set {
            key,
            flags,
            mode,
            data: &after[..vlen],
        },
        total,
    )
}

/// memcached's `_meta_flag_preparse`, on the flag tokens from `start` on: a key
/// over 250 bytes or more than [`MAX_TOKENS`] tokens are refused first; then every
/// flag token is checked in order; a repeated flag or an unknown one stops at once,
/// other errors are noted and the last noted message wins.
fn preparse<'a>(
    line: &'a [u8],
    t: &MetaTokens<'a>,
    start: usize,
) -> Result<(Key<'a>, Flags<'a>), &'static [u8]> {
    let key_tok = t.as_slice()[1];
    if key_tok.len() > KEY_MAX_LEN {
        return Err(errors::BAD_FORMAT);
    }
    if t.len() > MAX_TOKENS {
        return Err(errors::TOO_MANY_FLAGS);
    }
    let toks = &t.as_slice()[start..];
    let mut f = Flags::empty();
    let mut key = Key::plain(key_tok);
    let mut seen = [false; 128];
    let mut err: Option<&'static [u8]> = None;
    let mut has_error = false;
    for &t in toks {
        let o = t[0];
        if o >= 127 || seen[usize::from(o)] {
            return Err(errors::DUPLICATE_FLAG);
        }
        seen[usize::from(o)] = true;
        let arg = &t[1..];
        let mut bad = |e: Option<&'static [u8]>| {
            has_error = true;
            if e.is_some() {
                err = e;
            }
        };
        match o {
            b'b' => match Key::base64(key_tok) {
                Ok(k) => key = k,
                Err(NotBase64) => bad(Some(errors::DECODING_KEY)),
            },
            b'N' | b'T' | b'R' => match tok_i32(arg) {
                Ok(v) => match o {
                    b'N' => f.vivify = Some(v),
                    b'T' => f.ttl = Some(v),
                    _ => f.recache = Some(v),
                },
                Err(NotANumber) => bad(Some(errors::BAD_TOKEN)),
            },
            b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'l' | b'h' => {}
            b'v' => f.value = true,
            b'u' => f.no_bump = true,
            b'q' => f.quiet = true,
            // 32-bit client flags, memcached's default build (1.6.22 made 64-bit
            // flags a build option, `--enable-large-client-flags`): 1.6.45 refuses a
            // value over 2^32-1 where 1.6.18 wrapped it.
            b'F' => match tok_u64(arg, TOK_U32_MAX_LEN).map(u32::try_from) {
                Ok(Ok(v)) => f.client_flags = v,
                // memcached sets no message here: the last one (or the default).
                Ok(Err(_)) | Err(NotANumber) => bad(None),
            },
            b'C' => match tok_u64(arg, TOK_U64_MAX_LEN) {
                Ok(v) => f.compare_cas = Some(v),
                Err(NotANumber) => bad(Some(errors::BAD_TOKEN)),
            },
            // Newer than 1.6.18 (which answers "invalid flag"): explicit new CAS.
            b'E' => match tok_u64(arg, TOK_U64_MAX_LEN) {
                Ok(v) => f.new_cas = Some(v),
                Err(NotANumber) => bad(Some(errors::BAD_TOKEN)),
            },
            // 1.6.45 reads the byte after `M` whatever the token's length (1.6.18
            // refused any but two bytes); a bare `M` reads the separator after it.
            b'M' => f.mode = Some(t.get(1).copied().unwrap_or(b' ')),
            b'J' => match tok_u64(arg, TOK_U64_MAX_LEN) {
                Ok(v) => f.initial = v,
                Err(NotANumber) => bad(Some(errors::INITIAL_VALUE)),
            },
            b'D' => match tok_u64(arg, TOK_U64_MAX_LEN) {
                Ok(v) => f.delta = v,
                Err(NotANumber) => bad(Some(errors::DELTA_VALUE)),
            },
            b'I' => f.invalidate = true,
            b'x' => f.remove_value = true,
            _ => return Err(errors::INVALID_FLAG),
        }
    }
    if let (Some(first), Some(last)) = (toks.first(), toks.last()) {
        f.span = span(line, first, last);
    }
    if has_error {
        return Err(err.unwrap_or(errors::BAD_FORMAT));
    }
    Ok((key, f))
}

/// The part of `line` from token `first` to the end of token `last` (both slices
/// of `line`).
fn span<'a>(line: &'a [u8], first: &[u8], last: &[u8]) -> &'a [u8] {
    let base = line.as_ptr() as usize;
    let start = (first.as_ptr() as usize).wrapping_sub(base);
    let end = (last.as_ptr() as usize + last.len()).wrapping_sub(base);
    line.get(start..end).unwrap_or(&[])
}
