//! The request line, as memcached reads it before it looks at the command: where the
//! line ends (`try_read_command_ascii`, proto_text.c) and how it splits into tokens
//! (mcmc's `mcmc_tokenize`, which memcached 1.6.45's parser uses; 1.6.18's
//! `tokenize_command` split the same way).
//!
//! The classic parser ([`super::parse`]) and the meta parser ([`super::meta`]) both
//! work on what this file produces; it imports nothing of `text`. The strict number
//! converters of memcached 1.6.45 (mcmc's `mcmc_toktou32`/`64`, `mcmc_tokto32`) are
//! here too, for the meta flags and admin arguments that 1.6.45 reads with them.
//!
//! ```text
//!   buf:  "  set k 0 0 5\r\nhello\r\n..."
//!   find_line ──► Found::Line { line: "  set k 0 0 5", consumed: 15 }
//!   Tokens::new ──► ["set", "k", "0", "0", "5"], ntokens() == 6
//! ```

use crate::num::NotANumber;

/// Tokens memcached looks at per tokenizer pass (`MAX_TOKENS`, proto_text.c),
/// including the terminal pseudo-token.
pub const MAX_TOKENS: usize = 24;
/// Bytes without a newline after which memcached closes a connection unless the line
/// is a `get`/`gets` (`try_read_command_ascii`).
pub const LINE_MAX_NO_NEWLINE: usize = 2048;
/// memcached's read buffer (`READ_BUFFER_SIZE`, memcached.h): the longest line,
/// newline included, that it can find whole. Only a get line may be longer.
pub const READ_BUFFER_SIZE: usize = 16384;
/// Leading spaces tolerated before a long get line (`try_read_command_ascii`).
const LONG_LINE_MAX_LEADING_SPACES: usize = 100;

/// What is at the front of the read buffer.
pub(crate) enum Found<'a> {
    /// A complete line: its text (the `\r` before the `\n` dropped when the line has
    /// more than one byte; a NUL is a byte like any other, as memcached 1.6.45's
    /// parser reads lengths, not C strings) and the bytes it takes, newline included.
    Line { line: &'a [u8], consumed: usize },
    /// No newline yet: keep the bytes and wait for more.
    NeedMore,
    /// No newline in more bytes than memcached buffers for this line: close the
    /// connection (the caller's `LineTooLong`).
    TooLong,
}

/// Finds the request line at the front of `buf`. `max_get_line` is the longest get
/// line waited for (see `Config::max_get_line`).
#[inline]
pub(crate) fn find_line(buf: &[u8], max_get_line: usize) -> Found<'_> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        return incomplete_line(buf, max_get_line);
    };
    // memcached reads into a READ_BUFFER_SIZE buffer: a line whose newline is past
    // it is never seen whole, whatever the reads returned, so it is "no newline" in
    // more than 2048 bytes (closed unless it is a get).
    if nl >= READ_BUFFER_SIZE {
        if let Found::TooLong = incomplete_line(&buf[..nl], max_get_line) {
            return Found::TooLong;
        }
    }
    let mut line = &buf[..nl];
    if line.len() > 1 && line[line.len() - 1] == b'\r' {
        line = &line[..line.len() - 1];
    }
    Found::Line {
        line,
        consumed: nl + 1,
    }
}

/// No newline yet: wait, or close when memcached would.
fn incomplete_line(buf: &[u8], max_get_line: usize) -> Found<'_> {
    if buf.len() <= LINE_MAX_NO_NEWLINE {
        return Found::NeedMore;
    }
    let spaces = buf.iter().take_while(|&&b| b == b' ').count();
    let rest = &buf[spaces..];
    let is_get = rest.starts_with(b"get ") || rest.starts_with(b"gets ");
    if spaces > LONG_LINE_MAX_LEADING_SPACES || !is_get || buf.len() > max_get_line {
        return Found::TooLong;
    }
    Found::NeedMore
}

/// One tokenizer pass over a line, as memcached's `tokenize_command`: tokens are split
/// on spaces only (runs of spaces collapse; tabs are part of a token), up to
/// `MAX_TOKENS - 1` of them. memcached also keeps the unscanned rest of a longer line
/// for its multi-get loop; here a get's keys are scanned from the line again
/// (`Keys`), so the pass just stops.
pub(crate) struct Tokens<'a> {
    toks: [&'a [u8]; MAX_TOKENS - 1],
    n: usize,
}

impl<'a> Tokens<'a> {
    pub(crate) fn new(line: &'a [u8]) -> Self {
        let mut t = Tokens {
            toks: [&[]; MAX_TOKENS - 1],
            n: 0,
        };
        let mut start = 0;
        let mut i = 0;
        while i < line.len() {
            if line[i] == b' ' {
                if start != i {
                    t.toks[t.n] = &line[start..i];
                    t.n += 1;
                    if t.n == MAX_TOKENS - 1 {
                        return t;
                    }
                }
                start = i + 1;
            }
            i += 1;
        }
        if start != line.len() {
            t.toks[t.n] = &line[start..];
            t.n += 1;
        }
        t
    }

    /// memcached's `ntokens`: real tokens plus the terminal pseudo-token.
    pub(crate) fn ntokens(&self) -> usize {
        self.n + 1
    }

    /// Token `i`, or empty past the last one (memcached's terminal token).
    pub(crate) fn get(&self, i: usize) -> &'a [u8] {
        if i < self.n {
            self.toks[i]
        } else {
            &[]
        }
    }

    /// The real tokens, in order (at most `MAX_TOKENS - 1`).
    pub(crate) fn as_slice(&self) -> &[&'a [u8]] {
        &self.toks[..self.n]
    }

    /// `set_noreply_maybe`: is the last real token exactly `noreply`?
    pub(crate) fn noreply(&self) -> bool {
        self.n >= 1 && self.toks[self.n - 1] == b"noreply"
    }
}

/// mcmc's `MCMC_TOKTO32_MAX` and `MCMC_TOKTO64_MAX`: the longest number token it
/// reads (leading zeros count).
pub(crate) const TOK_U32_MAX_LEN: usize = 11;
pub(crate) const TOK_U64_MAX_LEN: usize = 22;

/// memcached 1.6.45 reads meta flag numbers and some admin arguments with mcmc's
/// strict converters
/// (`mcmc_token_get_*`, "ascii: safely convert flag args to numerics", 1.6.42),
/// where 1.6.18 used strtol: digits only (no `+`, no spaces, no hex), at
/// most `max_len` of them, range-checked; an empty argument is refused.
pub(crate) fn tok_u64(arg: &[u8], max_len: usize) -> Result<u64, NotANumber> {
    if arg.is_empty() || arg.len() > max_len {
        return Err(NotANumber);
    }
    arg.iter().try_fold(0u64, |sum, &c| {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return Err(NotANumber);
        }
        sum.checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(NotANumber)
    })
}

/// mcmc's `mcmc_tokto32` for `T`, `N` and `R`: [`tok_u64`]'s rules with an optional
/// leading `-` (alone it reads as 0, as mcmc's does), within `i32`.
pub(crate) fn tok_i32(arg: &[u8]) -> Result<i32, NotANumber> {
    if arg.is_empty() || arg.len() > TOK_U32_MAX_LEN {
        return Err(NotANumber);
    }
    let (neg, digits) = match arg.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, arg),
    };
    let magnitude = if digits.is_empty() {
        0
    } else {
        tok_u64(digits, TOK_U32_MAX_LEN)?
    };
    let v = if neg {
        -(magnitude as i64)
    } else {
        magnitude as i64
    };
    i32::try_from(v).map_err(|_| NotANumber)
}
