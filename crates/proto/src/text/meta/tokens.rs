//! A meta line split as memcached 1.6.45 splits it: mcmc's `_mcmc_tokenize_meta`,
//! which proto_parser.c's `process_request` runs on `mg md ma me` (flags from token 2)
//! and `ms` (flags from token 3). Imports nothing of `text`.
//!
//! It differs from the classic tokenizer (`text/token.rs`) in two ways that change
//! replies: a flag token must start with an ASCII letter (or one of ``[\]^_` ``) or a
//! digit, else the whole line is refused (memcached then answers `CLIENT_ERROR bad
//! command line format`, as for a line without a key); and the count has no terminal
//! pseudo-token (`MFLAG_MAX_OPT_LENGTH` is compared with real tokens).
//!
//! ```text
//!   "ms k 5 T10 c"  mstart 3 ──► ["ms", "k", "5", "T10", "c"], n == 5
//!   "mg k v !x"     mstart 2 ──► Err(Malformed): "!x" cannot start a flag
//! ```

/// mcmc's `MCMC_PARSER_MAX_TOKENS - 1`: the tokens looked at; the rest of a longer
/// line is ignored (and never checked).
pub const MAX_LINE_TOKENS: usize = 23;

/// A flag token (from `mstart` on) starts with a byte mcmc does not take as a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Malformed;

/// The tokens of one meta line, at most [`MAX_LINE_TOKENS`], each non-empty.
pub(super) struct MetaTokens<'a> {
    toks: [&'a [u8]; MAX_LINE_TOKENS],
    n: usize,
}

impl<'a> MetaTokens<'a> {
    /// Splits `line` (without its `\r\n`) on spaces, checking the first byte of
    /// every token from index `mstart` on as mcmc does while it records it.
    pub(super) fn new(line: &'a [u8], mstart: usize) -> Result<Self, Malformed> {
        let mut t = MetaTokens {
            toks: [&[]; MAX_LINE_TOKENS],
            n: 0,
        };
        for tok in line.split(|&b| b == b' ').filter(|t| !t.is_empty()) {
            if t.n >= mstart && !is_flag_start(tok[0]) {
                return Err(Malformed);
            }
            t.toks[t.n] = tok;
            t.n += 1;
            if t.n == MAX_LINE_TOKENS {
                break;
            }
        }
        Ok(t)
    }

    /// How many tokens (no terminal pseudo-token).
    pub(super) fn len(&self) -> usize {
        self.n
    }

    /// The tokens, in order.
    pub(super) fn as_slice(&self) -> &[&'a [u8]] {
        &self.toks[..self.n]
    }
}

/// mcmc's test for a flag's first byte: `'A'..='z'` (which takes in ``[\]^_` ``),
/// or a digit (an unknown flag, refused later as `invalid flag`). memcached's `char`
/// is signed, so bytes over 127 fail both tests.
fn is_flag_start(b: u8) -> bool {
    (b'A'..=b'z').contains(&b) || b.is_ascii_digit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_checks_flags() {
        let t = MetaTokens::new(b"ms  k 5 T10 c ", 3).expect("ok");
        assert_eq!(t.as_slice(), [&b"ms"[..], b"k", b"5", b"T10", b"c"]);
        // The key and (for ms) the length are not checked.
        assert!(MetaTokens::new(b"mg !k", 2).is_ok());
        assert!(MetaTokens::new(b"ms k -1", 3).is_ok());
        for bad in [&b"mg k v !"[..], b"mg k \x80", b"mg k \tv", b"mg k {"] {
            assert_eq!(MetaTokens::new(bad, 2).err(), Some(Malformed));
        }
        assert!(MetaTokens::new(b"mg k [ ` 9", 2).is_ok());
        // Past the 23rd token nothing is looked at.
        let mut long = b"mg k".to_vec();
        for _ in 0..21 {
            long.extend_from_slice(b" v");
        }
        long.extend_from_slice(b" !");
        let t = MetaTokens::new(&long, 2).expect("ok");
        assert_eq!(t.len(), MAX_LINE_TOKENS);
    }
}
