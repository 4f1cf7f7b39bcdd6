//! memcached's meta commands (`mg ms md ma mn me`), server side: request parsing,
//! flag tokens, base64 keys and reply lines.
//!
//! The model is memcached 1.6.18's `proto_text.c` (`_meta_flag_preparse`,
//! `process_mget_command`, `process_mset_command`, `process_mdelete_command`,
//! `process_marithmetic_command`, `process_meta_command`): the same token limits, the
//! same order of checks, the same error strings (which differ between commands: `md`
//! and `ma` answer every flag error with `CLIENT_ERROR invalid or duplicate flag`,
//! `mg` and `ms` with the specific one).
//!
//! ```text
//!   "ms k 5 T10 F3 c\r\nhello\r\n"
//!    ──► Meta::Set { key: "k", flags: [T10 F3 c], data: "hello", mode: Set }
//!   "md k q O12\r\n" ──► Meta::Delete { key: "k", flags: [q O12] }
//! ```
//!
//! The text parser ([`crate::text::parse`]) dispatches every two-letter command
//! starting with `m` here; a meta request is `Request::Meta`. Keys and values
//! borrow from the input; a base64 key (`b`) is decoded into [`Key`]'s small inline
//! buffer. One deliberate extension over 1.6.18: the `E` flag (explicit new CAS,
//! newer protocol.txt) is accepted; 1.6.18 answers `CLIENT_ERROR invalid flag`.
//!
//! Errors memcached reports only after touching the item (`mg`/`ma` with an opaque
//! over 32 bytes) are left to the executor: [`Flags::opaque_too_long`].

use crate::num::{safe_strtol, safe_strtoul, safe_strtoull};
use crate::text::{item_size_ok, Config, KEY_MAX_LEN};

/// memcached's `MFLAG_MAX_OPAQUE_LENGTH`: the longest `O` token, the `O` included.
pub const OPAQUE_MAX_LEN: usize = 32;
/// memcached's `MFLAG_MAX_OPT_LENGTH`: a meta line may have at most this many tokens,
/// counting the command, the key and memcached's terminal pseudo-token.
pub const MAX_TOKENS: usize = 20;

/// The longest decoded base64 key: 250 base64 bytes hold at most 186 bytes.
pub const DECODED_KEY_MAX: usize = KEY_MAX_LEN / 4 * 3;

/// A buffer to decode a base64 key into (see [`Key::decode`]).
pub type KeyBuf = [u8; DECODED_KEY_MAX];

/// A request key: the token as sent, and whether it is base64 (`b` flag). The parser
/// has checked that a base64 key decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key<'a> {
    raw: &'a [u8],
    binary: bool,
}

impl<'a> Key<'a> {
    fn plain(raw: &'a [u8]) -> Self {
        Key { raw, binary: false }
    }

    /// A base64 key, if it decodes as memcached's `base64_decode` would.
    fn base64(raw: &'a [u8]) -> Option<Self> {
        base64_decode(raw, &mut [0; DECODED_KEY_MAX])?;
        Some(Key { raw, binary: true })
    }

    /// The key the item is stored under: the token, or its decoding into `buf`.
    pub fn decode<'b>(&'b self, buf: &'b mut KeyBuf) -> &'b [u8] {
        if !self.binary {
            return self.raw;
        }
        // The parser checked the decoding; an empty key would only ever miss.
        let n = base64_decode(self.raw, buf).unwrap_or(0);
        &buf[..n]
    }

    /// The token as sent.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Whether the key was sent base64-encoded (`b`); replies then echo it encoded.
    pub fn is_binary(&self) -> bool {
        self.binary
    }
}

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
    /// and its `\r\n`, perhaps not arrived yet) are discarded.
    SetTooLarge { key: Key<'a>, swallow: usize },
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
    /// `swallow` bytes after the line (an `ms` data block).
    Fail {
        reply: &'static [u8],
        swallow: usize,
    },
}

/// Error replies, exactly as memcached 1.6.18 writes them.
pub mod errors {
    pub const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
    pub const DUPLICATE_FLAG: &[u8] = b"CLIENT_ERROR duplicate flag\r\n";
    pub const INVALID_FLAG: &[u8] = b"CLIENT_ERROR invalid flag\r\n";
    pub const INVALID_OR_DUPLICATE_FLAG: &[u8] = b"CLIENT_ERROR invalid or duplicate flag\r\n";
    pub const BAD_TOKEN: &[u8] = b"CLIENT_ERROR bad token in command line format\r\n";
    pub const DECODING_KEY: &[u8] = b"CLIENT_ERROR error decoding key\r\n";
    pub const M_TOKEN_LENGTH: &[u8] = b"CLIENT_ERROR incorrect length for M token\r\n";
    pub const INITIAL_VALUE: &[u8] = b"CLIENT_ERROR invalid numeric initial value\r\n";
    pub const DELTA_VALUE: &[u8] = b"CLIENT_ERROR invalid numeric delta value\r\n";
    /// `mg`'s wording.
    pub const MG_TOO_MANY_FLAGS: &[u8] = b"CLIENT_ERROR options flags are too long\r\n";
    /// `ms`, `md` and `ma`'s wording.
    pub const TOO_MANY_FLAGS: &[u8] = b"CLIENT_ERROR options flags too long\r\n";
    pub const OPAQUE_TOO_LONG: &[u8] = b"CLIENT_ERROR opaque token too long\r\n";
    pub const MS_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ms M token\r\n";
    pub const MA_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ma M token\r\n";
    pub const BAD_DATA_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";
    pub const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
    pub const OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";
    pub const NON_NUMERIC: &[u8] =
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
    pub const DELTA_OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory\r\n";
}

/// The outcome of parsing a meta line.
pub(crate) enum Parsed<'a> {
    /// The request, and how many bytes after the line it used (an `ms` data block).
    Done(Result<Meta<'a>, ()>, usize),
    /// An `ms` whose data block has not fully arrived.
    NeedData,
}

/// Parses a meta command line. `toks` are the line's tokens (at most 23, as
/// memcached's tokenizer), `ntokens` memcached's count (tokens + terminal);
/// `after` is the input after the line. `Err(())` is memcached's plain `ERROR`.
pub(crate) fn parse<'a>(
    line: &'a [u8],
    toks: &[&'a [u8]],
    ntokens: usize,
    after: &'a [u8],
    cfg: &Config,
) -> Parsed<'a> {
    let fail = |reply: &'static [u8]| Parsed::Done(Ok(Meta::Fail { reply, swallow: 0 }), 0);
    let cmd = toks[0];
    let ok = |m: Meta<'a>| Parsed::Done(Ok(m), 0);
    match cmd[1] {
        b'n' => return ok(Meta::Noop),
        b'e' => {
            if ntokens < 3 || toks[1].len() > KEY_MAX_LEN {
                return fail(errors::BAD_FORMAT);
            }
            if ntokens >= 4 && toks[2] == b"b" {
                return match Key::base64(toks[1]) {
                    Some(key) => ok(Meta::Debug { key }),
                    None => fail(errors::BAD_FORMAT),
                };
            }
            return ok(Meta::Debug {
                key: Key::plain(toks[1]),
            });
        }
        b'g' | b's' | b'd' | b'a' => {}
        _ => return Parsed::Done(Err(()), 0),
    }
    if ntokens < 3 {
        return Parsed::Done(Err(()), 0);
    }
    if toks[1].len() > KEY_MAX_LEN {
        return fail(errors::BAD_FORMAT);
    }
    match cmd[1] {
        b'g' => {
            if ntokens > MAX_TOKENS {
                return fail(errors::MG_TOO_MANY_FLAGS);
            }
            match preparse(line, toks[1], &toks[2..]) {
                Ok((key, flags)) => ok(Meta::Get { key, flags }),
                Err(e) => fail(e),
            }
        }
        b'd' | b'a' => {
            if ntokens > MAX_TOKENS {
                return fail(errors::TOO_MANY_FLAGS);
            }
            let Ok((key, flags)) = preparse(line, toks[1], &toks[2..]) else {
                return fail(errors::INVALID_OR_DUPLICATE_FLAG);
            };
            if cmd[1] == b'd' {
                if flags.opaque_too_long() {
                    return fail(errors::OPAQUE_TOO_LONG);
                }
                return ok(Meta::Delete { key, flags });
            }
            let incr = match flags.mode {
                None | Some(b'I' | b'+') => true,
                Some(b'D' | b'-') => false,
                Some(_) => return fail(errors::MA_MODE),
            };
            ok(Meta::Arith { key, flags, incr })
        }
        _ => set(line, toks, ntokens, after, cfg),
    }
}

/// `process_mset_command` and then `complete_nread_ascii`.
fn set<'a>(
    line: &'a [u8],
    toks: &[&'a [u8]],
    ntokens: usize,
    after: &'a [u8],
    cfg: &Config,
) -> Parsed<'a> {
    let fail =
        |reply: &'static [u8], swallow: usize| Parsed::Done(Ok(Meta::Fail { reply, swallow }), 0);
    if ntokens == 3 {
        return fail(errors::BAD_FORMAT, 0);
    }
    if ntokens > MAX_TOKENS {
        return fail(errors::TOO_MANY_FLAGS, 0);
    }
    let vlen = match safe_strtol(toks[2]).map(usize::try_from) {
        Some(Ok(v)) if v <= i32::MAX as usize - 2 => v,
        _ => return fail(errors::BAD_FORMAT, 0),
    };
    let total = vlen + 2;
    let (key, flags) = match preparse(line, toks[1], &toks[3..]) {
        Ok(kf) => kf,
        Err(e) => return fail(e, total),
    };
    // memcached notes the opaque error, then checks the mode, whose error wins.
    let mode = match flags.mode {
        None | Some(b'S') => SetMode::Set,
        Some(b'E') => SetMode::Add,
        Some(b'A') => SetMode::Append,
        Some(b'P') => SetMode::Prepend,
        Some(b'R') => SetMode::Replace,
        Some(_) => return fail(errors::MS_MODE, total),
    };
    if flags.opaque_too_long() {
        return fail(errors::OPAQUE_TOO_LONG, total);
    }
    if !item_size_ok(
        key.decode(&mut [0; DECODED_KEY_MAX]).len(),
        flags.client_flags,
        vlen,
        cfg,
    ) {
        return Parsed::Done(
            Ok(Meta::SetTooLarge {
                key,
                swallow: total,
            }),
            0,
        );
    }
    if after.len() < total {
        return Parsed::NeedData;
    }
    if &after[vlen..total] != b"\r\n" {
        return Parsed::Done(Ok(Meta::SetBadChunk), total);
    }
    Parsed::Done(
        Ok(Meta::Set {
            key,
            flags,
            mode,
            data: &after[..vlen],
        }),
        total,
    )
}

/// memcached's `_meta_flag_preparse`: every flag token is checked in order; a
/// repeated (or non-ASCII) flag or an unknown one stops at once, other errors are
/// noted and the last noted message wins.
fn preparse<'a>(
    line: &'a [u8],
    key_tok: &'a [u8],
    toks: &[&'a [u8]],
) -> Result<(Key<'a>, Flags<'a>), &'static [u8]> {
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
                Some(k) => key = k,
                None => bad(Some(errors::DECODING_KEY)),
            },
            b'N' | b'T' | b'R' => match safe_strtol(arg) {
                Some(v) => match o {
                    b'N' => f.vivify = Some(v),
                    b'T' => f.ttl = Some(v),
                    _ => f.recache = Some(v),
                },
                None => bad(Some(errors::BAD_TOKEN)),
            },
            b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'l' | b'h' => {}
            b'v' => f.value = true,
            b'u' => f.no_bump = true,
            b'q' => f.quiet = true,
            b'F' => match safe_strtoul(arg) {
                Some(v) => f.client_flags = v,
                // memcached sets no message here: the last one (or the default).
                None => bad(None),
            },
            b'C' => match safe_strtoull(arg) {
                Some(v) => f.compare_cas = Some(v),
                None => bad(Some(errors::BAD_TOKEN)),
            },
            // Newer than 1.6.18 (which answers "invalid flag"): explicit new CAS.
            b'E' => match safe_strtoull(arg) {
                Some(v) => f.new_cas = Some(v),
                None => bad(Some(errors::BAD_TOKEN)),
            },
            b'M' => {
                if t.len() != 2 {
                    bad(Some(errors::M_TOKEN_LENGTH));
                } else {
                    f.mode = Some(t[1]);
                }
            }
            b'J' => match safe_strtoull(arg) {
                Some(v) => f.initial = v,
                None => bad(Some(errors::INITIAL_VALUE)),
            },
            b'D' => match safe_strtoull(arg) {
                Some(v) => f.delta = v,
                None => bad(Some(errors::DELTA_VALUE)),
            },
            b'I' => f.invalidate = true,
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

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// memcached's base64 alphabet value of a byte; `=` is 0 (padding is counted
/// separately); `None` for bytes it skips.
fn b64_value(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        b'=' => Some(0),
        _ => None,
    }
}

/// memcached's `base64_decode` (base64.c): bytes outside the alphabet are skipped,
/// the rest must come in whole blocks of four, a block with `=` padding ends the
/// input (one `=` drops a byte, two drop two, more is invalid). Returns the decoded
/// length, or `None` (memcached's 0) when the input is invalid, empty, or does not
/// fit in `out`.
pub fn base64_decode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let count = src.iter().filter(|&&b| b64_value(b).is_some()).count();
    if count == 0 || count % 4 != 0 || count / 4 * 3 > out.len() {
        return None;
    }
    let mut pos = 0;
    let mut block = [0u8; 4];
    let mut n = 0;
    let mut pad = 0;
    for &b in src {
        let Some(v) = b64_value(b) else { continue };
        if b == b'=' {
            pad += 1;
        }
        block[n] = v;
        n += 1;
        if n == 4 {
            out[pos] = (block[0] << 2) | (block[1] >> 4);
            out[pos + 1] = (block[1] << 4) | (block[2] >> 2);
            out[pos + 2] = (block[2] << 6) | block[3];
            pos += 3;
            n = 0;
            if pad > 0 {
                match pad {
                    1 => pos -= 1,
                    2 => pos -= 2,
                    _ => return None,
                }
                break;
            }
        }
    }
    (pos > 0).then_some(pos)
}

/// Standard base64 with `=` padding, as memcached's `base64_encode`.
pub fn base64_encode(src: &[u8], out: &mut Vec<u8>) {
    for c in src.chunks(3) {
        let b0 = c[0];
        let b1 = c.get(1).copied().unwrap_or(0);
        let b2 = c.get(2).copied().unwrap_or(0);
        out.push(B64[usize::from(b0 >> 2)]);
        out.push(B64[usize::from(((b0 & 0x03) << 4) | (b1 >> 4))]);
        if c.len() > 1 {
            out.push(B64[usize::from(((b1 & 0x0f) << 2) | (b2 >> 6))]);
        } else {
            out.push(b'=');
        }
        if c.len() > 2 {
            out.push(B64[usize::from(b2 & 0x3f)]);
        } else {
            out.push(b'=');
        }
    }
}

/// Reply pieces, exactly as memcached writes them.
pub mod reply {
    use super::{base64_encode, Key, KeyBuf};

    pub const MN: &[u8] = b"MN\r\n";
    pub const EN: &[u8] = b"EN\r\n";

    /// ` <flag><number>` (memcached's `META_CHAR` and an itoa).
    pub fn flag_num(out: &mut Vec<u8>, flag: u8, n: impl itoa::Integer) {
        let mut b = itoa::Buffer::new();
        out.push(b' ');
        out.push(flag);
        out.extend_from_slice(b.format(n).as_bytes());
    }

    /// ` <flag>` alone (`W`, `X`, `Z`).
    pub fn flag(out: &mut Vec<u8>, flag: u8) {
        out.push(b' ');
        out.push(flag);
    }

    /// ` <token>`: an opaque echoed as sent, `O` included.
    pub fn opaque(out: &mut Vec<u8>, tok: &[u8]) {
        out.push(b' ');
        out.extend_from_slice(tok);
    }

    /// ` k<key>`, base64-encoded and followed by ` b` for a binary key
    /// (memcached's `META_KEY`).
    pub fn key(out: &mut Vec<u8>, key: &Key<'_>) {
        out.extend_from_slice(b" k");
        if key.is_binary() {
            // Re-encoded from the decoded bytes, as memcached does.
            let mut buf: KeyBuf = [0; super::DECODED_KEY_MAX];
            base64_encode(key.decode(&mut buf), out);
            out.extend_from_slice(b" b");
        } else {
            out.extend_from_slice(key.raw());
        }
    }

    /// ` t<seconds left>` or ` t-1` for an item that never expires.
    pub fn ttl(out: &mut Vec<u8>, exptime: u32, now: u32) {
        if exptime == 0 {
            out.extend_from_slice(b" t-1");
        } else {
            // memcached prints `exptime - current_time` as unsigned.
            flag_num(out, b't', exptime.wrapping_sub(now));
        }
    }
}

/// The meta commands, client side: request encoders and a reply parser.
///
/// Flags are passed as the raw tokens a client wants (`b"v"`, `b"T30"`, `b"O123"`);
/// replies keep their flags as one slice, searched with [`MetaReply::flag`].
pub mod client {
    use crate::num::safe_strtoull;

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
            self.flag(b'c').and_then(safe_strtoull)
        }
    }

    /// A reply line that is not a meta reply.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Malformed;

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
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(Malformed)?;
        let end = used
            .checked_add(size)
            .and_then(|e| e.checked_add(2))
            .ok_or(Malformed)?;
        if buf.len() < end {
            return Ok(None);
        }
        if &buf[end - 2..end] != b"\r\n" {
            return Err(Malformed);
        }
        Ok(Some((
            MetaReply::Status {
                code,
                flags,
                value: Some(&buf[used..used + size]),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{parse as text_parse, Request};

    fn meta(input: &[u8]) -> (Meta<'_>, usize) {
        match text_parse(input, &Config::default()) {
            Some((Ok(Request::Meta(m)), n)) => (m, n),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
        }
    }

    fn fail(input: &[u8]) -> (&'static [u8], usize) {
        match meta(input).0 {
            Meta::Fail { reply, swallow } => (reply, swallow),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
        }
    }

    #[test]
    fn base64_round_trip_and_quirks() {
        let mut out = [0u8; 64];
        let n = base64_decode(b"Zm9vYmFy", &mut out).expect("ok");
        assert_eq!(&out[..n], b"foobar");
        let n = base64_decode(b"Zm9vYg==", &mut out).expect("ok");
        assert_eq!(&out[..n], b"foob");
        let n = base64_decode(b"Zm9vYmE=", &mut out).expect("ok");
        assert_eq!(&out[..n], b"fooba");
        // Bytes outside the alphabet are skipped.
        let n = base64_decode(b"Zm9v!YmFy", &mut out).expect("ok");
        assert_eq!(&out[..n], b"foobar");
        // A padded block ends the input.
        let n = base64_decode(b"Zg==Zm9v", &mut out).expect("ok");
        assert_eq!(&out[..n], b"f");
        assert_eq!(base64_decode(b"Zm9", &mut out), None);
        assert_eq!(base64_decode(b"", &mut out), None);
        assert_eq!(base64_decode(b"Z===", &mut out), None);
        assert_eq!(base64_decode(b"Zm9vYmFy", &mut out[..5]), None);
        for s in [&b""[..], b"f", b"fo", b"foo", b"\x00\xff\x10"] {
            let mut enc = Vec::new();
            base64_encode(s, &mut enc);
            if !s.is_empty() {
                let n = base64_decode(&enc, &mut out).expect("ok");
                assert_eq!(&out[..n], s);
            }
        }
        let mut enc = Vec::new();
        base64_encode(b"foob", &mut enc);
        assert_eq!(enc, b"Zm9vYg==");
    }

    #[test]
    fn commands() {
        let (m, n) = meta(b"mg foo v t c O123 k\r\n");
        assert_eq!(n, 21);
        let Meta::Get { key, flags } = m else {
            panic!()
        };
        assert_eq!(key.decode(&mut [0; DECODED_KEY_MAX]), b"foo");
        assert!(flags.value);
        let toks: Vec<&[u8]> = flags.tokens().collect();
        assert_eq!(toks, [&b"v"[..], b"t", b"c", b"O123", b"k"]);
        let (m, n) = meta(b"ms foo 2 T10 F5 MA\r\nhi\r\nmn\r\n");
        assert_eq!(n, 24);
        let Meta::Set {
            key,
            flags,
            mode,
            data,
        } = m
        else {
            panic!()
        };
        assert_eq!(
            (
                key.decode(&mut [0; DECODED_KEY_MAX]),
                mode,
                data,
                flags.ttl,
                flags.client_flags
            ),
            (&b"foo"[..], SetMode::Append, &b"hi"[..], Some(10), 5)
        );
        assert_eq!(meta(b"mn\r\n").0, Meta::Noop);
        assert_eq!(meta(b"mn extra\r\n").0, Meta::Noop);
        let Meta::Arith { incr, flags, .. } = meta(b"ma k MD D5 J7 N0\r\n").0 else {
            panic!()
        };
        assert_eq!(
            (incr, flags.delta, flags.initial, flags.vivify),
            (false, 5, 7, Some(0))
        );
        let Meta::Debug { key } = meta(b"me Zm9v b\r\n").0 else {
            panic!()
        };
        assert_eq!(key.decode(&mut [0; DECODED_KEY_MAX]), b"foo");
        let Meta::Get { key, .. } = meta(b"mg Zm9v b k\r\n").0 else {
            panic!()
        };
        assert!(key.is_binary());
        assert_eq!(key.decode(&mut [0; DECODED_KEY_MAX]), b"foo");
        // ms waits for its data block.
        assert!(text_parse(b"ms foo 5\r\nhel", &Config::default()).is_none());
        assert_eq!(meta(b"ms foo 2\r\nhiX\r\n"), (Meta::SetBadChunk, 14));
    }

    #[test]
    fn errors_as_memcached() {
        let cases: &[(&[u8], &[u8], usize)] = &[
            (b"mg foo x\r\n", errors::INVALID_FLAG, 0),
            (b"mg foo v v\r\n", errors::DUPLICATE_FLAG, 0),
            (b"md foo v v\r\n", errors::INVALID_OR_DUPLICATE_FLAG, 0),
            (b"ma foo x\r\n", errors::INVALID_OR_DUPLICATE_FLAG, 0),
            (b"mg foo Tx\r\n", errors::BAD_TOKEN, 0),
            (b"mg foo Fx\r\n", errors::BAD_FORMAT, 0),
            (b"mg foo Tx Fx\r\n", errors::BAD_TOKEN, 0),
            (b"mg foo MXY\r\n", errors::M_TOKEN_LENGTH, 0),
            (b"mg foo Jx\r\n", errors::INITIAL_VALUE, 0),
            (b"mg foo Dx\r\n", errors::DELTA_VALUE, 0),
            (b"mg Zm9 b\r\n", errors::DECODING_KEY, 0),
            (b"ma foo MX\r\n", errors::MA_MODE, 0),
            (b"ms foo 2 MX\r\n", errors::MS_MODE, 4),
            (b"ms foo 2 v v\r\n", errors::DUPLICATE_FLAG, 4),
            (b"ms foo 2 Tx\r\n", errors::BAD_TOKEN, 4),
            (b"ms foo\r\n", errors::BAD_FORMAT, 0),
            (b"ms foo x\r\n", errors::BAD_FORMAT, 0),
            (b"ms foo -1\r\n", errors::BAD_FORMAT, 0),
            (b"me\r\n", errors::BAD_FORMAT, 0),
            (b"me Zm9 b\r\n", errors::BAD_FORMAT, 0),
            (
                b"md foo O123456789012345678901234567890123\r\n",
                errors::OPAQUE_TOO_LONG,
                0,
            ),
            (
                b"ms foo 1 O123456789012345678901234567890123 MX\r\n",
                errors::MS_MODE,
                3,
            ),
            (
                b"ms foo 1 O123456789012345678901234567890123\r\n",
                errors::OPAQUE_TOO_LONG,
                3,
            ),
            (
                b"mg foo a b c d e f g h i j k l m n o p q r\r\n",
                errors::MG_TOO_MANY_FLAGS,
                0,
            ),
            (
                b"md foo a b c d e f g h i j k l m n o p q r\r\n",
                errors::TOO_MANY_FLAGS,
                0,
            ),
        ];
        for (input, reply, swallow) in cases {
            assert_eq!(
                fail(input),
                (*reply, *swallow),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        let long_key = [b"mg ".to_vec(), vec![b'a'; 251], b"\r\n".to_vec()].concat();
        assert_eq!(fail(&long_key), (errors::BAD_FORMAT, 0));
        for input in [&b"mg\r\n"[..], b"ms\r\n", b"mx foo\r\n", b"mgx foo\r\n"] {
            assert!(
                matches!(
                    text_parse(input, &Config::default()),
                    Some((Err(crate::text::Error::UnknownCommand), _))
                ),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    /// Random meta-ish lines never panic, and every answer consumes something.
    #[test]
    fn random_lines_never_panic() {
        let alphabet: &[u8] = b"mgsdane bkvqOTNRCDJMIEFcfhlstu0123456789=+/-\r\n\x00\x80 ";
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let cfg = Config {
            item_size_max: 64,
            ..Config::default()
        };
        for _ in 0..20_000 {
            let len = (next() % 60) as usize;
            let mut line = vec![b'm', alphabet[(next() % 7) as usize], b' '];
            line.extend((0..len).map(|_| alphabet[(next() as usize) % alphabet.len()]));
            line.extend_from_slice(b"\r\n");
            if let Some((_, used)) = text_parse(&line, &cfg) {
                assert!(used > 0 && used <= line.len());
            }
        }
    }

    #[test]
    fn client_round_trip() {
        use super::client::{self, Code, MetaReply};
        let mut out = Vec::new();
        client::ms(&mut out, b"k", b"hi", &[b"T30", b"c"]);
        client::mg(&mut out, b"k", &[b"v", b"c"]);
        client::md(&mut out, b"k", &[b"q"]);
        client::ma(&mut out, b"n", &[b"N0", b"J5"]);
        client::me(&mut out, b"k");
        client::mn(&mut out);
        assert_eq!(
            out,
            b"ms k 2 T30 c\r\nhi\r\nmg k v c\r\nmd k q\r\nma n N0 J5\r\nme k\r\nmn\r\n"
        );
        // What the server parser makes of it.
        let (m, n) = meta(&out);
        assert_eq!(n, 18);
        assert!(matches!(m, Meta::Set { .. }));
        let reply = b"VA 2 c77 t30\r\nhi\r\nHD c78\r\nEN\r\nCLIENT_ERROR bad\r\nMN\r\n";
        let (r, n) = client::parse_reply(reply).expect("ok").expect("complete");
        assert_eq!(
            r,
            MetaReply::Status {
                code: Code::Va,
                flags: b"c77 t30",
                value: Some(b"hi")
            }
        );
        assert_eq!((r.cas(), r.flag(b't')), (Some(77), Some(&b"30"[..])));
        assert_eq!(n, 18);
        let (r, m) = client::parse_reply(&reply[n..])
            .expect("ok")
            .expect("complete");
        assert_eq!(r.cas(), Some(78));
        let rest = &reply[n + m..];
        let (r, k) = client::parse_reply(rest).expect("ok").expect("complete");
        assert!(matches!(r, MetaReply::Status { code: Code::En, .. }));
        let (r, _) = client::parse_reply(&rest[k..])
            .expect("ok")
            .expect("complete");
        assert_eq!(r, MetaReply::Error(b"CLIENT_ERROR bad"));
        assert_eq!(client::parse_reply(b"VA 5\r\nab"), Ok(None));
        assert!(client::parse_reply(b"XX\r\n").is_err());
        assert!(client::parse_reply(b"VA 1\r\nabc").is_err());
    }

    #[test]
    fn too_large_is_swallowed() {
        let cfg = Config {
            item_size_max: 1024,
            ..Config::default()
        };
        let input = b"ms foo 2000 T0\r\n";
        match text_parse(input, &cfg) {
            Some((Ok(Request::Meta(Meta::SetTooLarge { key, swallow })), n)) => {
                assert_eq!(
                    (key.decode(&mut [0; DECODED_KEY_MAX]), swallow, n),
                    (&b"foo"[..], 2002, input.len())
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
