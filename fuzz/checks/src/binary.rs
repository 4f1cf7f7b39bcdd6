//! The binary protocol's framing and validation ([`memcrab_proto::binary`]).
//!
//! The input is what a client sends. It runs through a model of the server's binary
//! read loop (`crates/server/src/request.rs`, `binary_step`: frame, decode, check a value against `-I`
//! before waiting for it, swallow what memcached swallows, stop on a close), with and
//! without SASL, and:
//! - framing never reads past the input, and asks for more only while the header,
//!   extras or key are incomplete (so at most 24 + 255 + 65,535 bytes are buffered
//!   before a decision);
//! - every length a decoded request reports agrees with the header (no underflow:
//!   CVE-2016-8704/8705/8706, CVE-2017-9951, CVE-2020-10931), keys are at most 250
//!   bytes, swallows are at most the body length;
//! - the only value bytes ever waited for belong to a request whose item fits `-I`;
//!   a larger one is refused from the header alone (CVE-2011-4971);
//! - every accepted request, re-encoded with the client-side encoder, decodes to
//!   itself;
//! - the same bytes fed in two pieces give the same outcomes;
//! - the client-side response parser never panics, and responses the server's
//!   encoders write parse back.

use memcrab_proto::binary::{self as bin, client, Frame, Header, Reject, Request, HEADER_LEN};
use memcrab_proto::text;

use crate::Step;

/// `-I` for the model: small, so short inputs reach the too-large path.
const ITEM_SIZE_MAX: usize = 2048;

/// The `binary` fuzz target.
pub fn binary(data: &[u8]) {
    let split = crate::split_point(data);
    for sasl in [false, true] {
        let whole = drive(&[data], sasl);
        let parts = drive(&[&data[..split], &data[split..]], sasl);
        assert_eq!(whole, parts, "split at {split} changed the outcomes");
    }
    responses(data);
}

fn drive(chunks: &[&[u8]], sasl: bool) -> Vec<String> {
    let cfg = text::Config {
        item_size_max: ITEM_SIZE_MAX,
        ..text::Config::default()
    };
    let mut events = Vec::new();
    crate::read_loop(chunks, |buf| {
        let (header, extras, key) = match bin::frame(buf) {
            Frame::NeedMore => {
                if let Some(h) = Header::parse(buf) {
                    assert!(buf.len() < h.prefix_len(), "NeedMore with a whole prefix");
                    assert!(h.prefix_len() <= HEADER_LEN + 255 + 65_535);
                } else {
                    assert!(buf.len() < HEADER_LEN);
                }
                return Step::Wait;
            }
            Frame::BadMagic => {
                assert_ne!(buf[0], bin::REQ_MAGIC);
                events.push("close: bad magic".to_string());
                return Step::Stop;
            }
            Frame::Packet(header, extras, key) => (header, extras, key),
        };
        let prefix = header.prefix_len();
        assert_eq!(extras.len(), usize::from(header.extlen));
        assert_eq!(key.len(), usize::from(header.keylen));
        assert!(prefix <= buf.len());
        let req = match bin::decode(&header, extras, key, sasl, false) {
            Ok(r) => r,
            Err(Reject::Close(st)) => {
                events.push(format!("close: {st:#x}"));
                return Step::Stop;
            }
            Err(Reject::Swallow(st, n)) => {
                assert!(n <= header.bodylen as usize, "swallow {n} > bodylen");
                events.push(format!("swallow {n}: {st:#x}"));
                return Step::Consume {
                    used: prefix,
                    swallow: n,
                };
            }
        };
        check_request(&header, &req);
        let (value_len, too_large) = match req {
            Request::Store {
                key,
                flags,
                value_len,
                ..
            } => (
                value_len,
                (!text::item_size_ok(key.len(), flags, value_len, &cfg)).then_some("too large"),
            ),
            Request::SaslAuth {
                mech, value_len, ..
            } => (
                value_len,
                (!text::item_size_ok(mech.len(), 0, value_len, &cfg)).then_some("sasl too large"),
            ),
            _ => (0, None),
        };
        if let Some(what) = too_large {
            events.push(format!("{what}: {value_len}"));
            return Step::Consume {
                used: prefix,
                swallow: value_len,
            };
        }
        // The invariant behind CVE-2011-4971: nothing waits for (or allocates)
        // more value bytes than an item may hold.
        assert!(value_len <= ITEM_SIZE_MAX, "waiting for {value_len} bytes");
        let Some(value) = buf.get(prefix..prefix + value_len) else {
            return Step::Wait;
        };
        round_trip(&header, &req, extras, key, value);
        events.push(format!("{req:?} value={value:?}"));
        if matches!(req, Request::Quit { .. }) {
            return Step::Stop;
        }
        Step::Consume {
            used: prefix + value_len,
            swallow: 0,
        }
    });
    events
}

fn check_request(h: &Header, req: &Request<'_>) {
    let body = h.bodylen as usize;
    let (klen, elen) = (usize::from(h.keylen), usize::from(h.extlen));
    assert!(klen + elen <= body, "accepted keylen+extlen > bodylen");
    match req {
        Request::Get { key, .. }
        | Request::Delete { key, .. }
        | Request::Arith { key, .. }
        | Request::Store { key, .. } => {
            assert!(!key.is_empty() && key.len() <= text::KEY_MAX_LEN);
        }
        Request::Stat { key } => assert!(key.len() <= text::KEY_MAX_LEN),
        Request::SaslAuth { mech, .. } => {
            assert!(!mech.is_empty() && mech.len() <= bin::MAX_SASL_MECH_LEN)
        }
        _ => {}
    }
    if let Request::Store { value_len, .. } | Request::SaslAuth { value_len, .. } = req {
        assert_eq!(value_len + klen + elen, body, "value length disagrees");
    }
}

/// Re-encodes an accepted request and decodes it again.
fn round_trip(h: &Header, req: &Request<'_>, extras: &[u8], key: &[u8], value: &[u8]) {
    let opaque = u32::from_be_bytes(h.opaque);
    let wire = client::request(h.opcode, extras, key, value, opaque, h.cas);
    let Frame::Packet(header, e2, k2) = bin::frame(&wire) else {
        panic!("re-encoded {req:?} does not frame");
    };
    assert_eq!(header.opaque, h.opaque);
    assert_eq!(header.cas, h.cas);
    let back = bin::decode(&header, e2, k2, false, false).or_else(|_| {
        // SASL requests decode only with SASL on.
        bin::decode(&header, e2, k2, true, true)
    });
    assert_eq!(back.as_ref(), Ok(req), "round trip changed the request");
}

/// The response side: the client parser never panics; responses written by the
/// server's encoders parse back to what was written.
fn responses(data: &[u8]) {
    let mut rest = data;
    while let Some((_, used)) = client::parse_response(rest) {
        assert!(used >= HEADER_LEN && used <= rest.len());
        rest = &rest[used..];
    }
    let Some(h) = Header::parse(data) else {
        return;
    };
    let tail = &data[HEADER_LEN..];
    let (key, value) = tail.split_at(tail.len().min(usize::from(h.keylen).min(250)));
    let mut out = Vec::new();
    bin::hit(&mut out, &h, h.cas, h.bodylen, Some(key), Some(value));
    let (r, used) = client::parse_response(&out).expect("a hit parses");
    assert_eq!(used, out.len());
    assert_eq!((r.key.as_slice(), r.value.as_slice()), (key, value));
    assert_eq!(r.extras, h.bodylen.to_be_bytes());
    out.clear();
    bin::stat(&mut out, h.opaque, key, value);
    let (r, used) = client::parse_response(&out).expect("a stat parses");
    assert_eq!(used, out.len());
    assert_eq!((r.key.as_slice(), r.value.as_slice()), (key, value));
}
