//! Meta reply pieces, exactly as memcached writes them: the status codes the server
//! sends whole and the ` <flag><value>` pieces it appends. The error lines are in
//! [`super::errors`]. Imports only `key.rs`.

use super::key::{base64_encode, Key, KeyBuf, DECODED_KEY_MAX};

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
        let mut buf: KeyBuf = [0; DECODED_KEY_MAX];
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
