//! A meta request's key ([`Key`]): the token as sent, plain or base64 (the `b` flag),
//! and memcached's base64 codec (base64.c). Imports nothing of `text`.

use memcrab_limits::KEY_MAX_LEN;

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
    pub(super) fn plain(raw: &'a [u8]) -> Self {
        Key { raw, binary: false }
    }

    /// A base64 key, if it decodes as memcached's `base64_decode` would.
    pub(super) fn base64(raw: &'a [u8]) -> Result<Self, NotBase64> {
        base64_decode(raw, &mut [0; DECODED_KEY_MAX])?;
        Ok(Key { raw, binary: true })
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

/// Input memcached's `base64_decode` refuses (it returns 0): nothing to decode, not
/// whole blocks of four, more than two `=`, or more bytes than the output holds. For a
/// key sent with `b` the parser answers `CLIENT_ERROR error decoding key` (`mg`, `ms`,
/// `md`, `ma`) or `CLIENT_ERROR bad command line format` (`me`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotBase64;

/// memcached's `base64_decode` (base64.c): bytes outside the alphabet are skipped,
/// the rest must come in whole blocks of four, a block with `=` padding ends the
/// input (one `=` drops a byte, two drop two, more is invalid). Returns the decoded
/// length, or [`NotBase64`] where memcached returns 0.
pub fn base64_decode(src: &[u8], out: &mut [u8]) -> Result<usize, NotBase64> {
    let count = src.iter().filter(|&&b| b64_value(b).is_some()).count();
    if count == 0 || count % 4 != 0 || count / 4 * 3 > out.len() {
        return Err(NotBase64);
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
                    _ => return Err(NotBase64),
                }
                break;
            }
        }
    }
    if pos > 0 {
        Ok(pos)
    } else {
        Err(NotBase64)
    }
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
