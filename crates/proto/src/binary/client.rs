//! Client-side request encoding and response parsing (tests and tools).

use super::frame::{Header, HEADER_LEN, REQ_MAGIC};

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
    let h = Header::parse(b)?;
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
