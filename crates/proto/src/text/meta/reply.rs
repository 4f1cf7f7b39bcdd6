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

/// One `lru_crawler mgdump` line (memcached 1.6.19's `crawler_mgdump_eval`):
/// `mg <key>\r\n`, or `mg <base64 key> b\r\n` for a key that cannot be sent as a
/// text key. memcached base64-encodes keys that were stored in base64 (meta `b`);
/// the store does not remember how a key arrived, so here a key is encoded when it
/// holds a byte a text key cannot (a control character, a space, DEL).
pub fn mgdump_line(out: &mut Vec<u8>, key: &[u8]) {
    out.extend_from_slice(b"mg ");
    if key.iter().all(|&b| b > b' ' && b != 0x7f) {
        out.extend_from_slice(key);
    } else {
        base64_encode(key, out);
        out.extend_from_slice(b" b");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mgdump_lines() {
        let mut out = Vec::new();
        mgdump_line(&mut out, b"plain:key");
        mgdump_line(&mut out, b"a b");
        mgdump_line(&mut out, b"\x00\x7f");
        assert_eq!(out, b"mg plain:key\r\nmg YSBi b\r\nmg AH8= b\r\n");
    }
}
