//! Response encoders: the header, and the shapes memcached's `write_bin_response`,
//! `process_bin_get_or_touch` and `append_bin_stats` produce.

use super::frame::{Header, RES_MAGIC};
use super::op;
use super::status;

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
