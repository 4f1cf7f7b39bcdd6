//! The codec's unit tests: framing waits for every byte, the length checks in
//! `dispatch_bin_command`'s order, and a decoded store's fields.

use super::*;

fn dec(b: &[u8], sasl: bool, authed: bool) -> Result<Request<'_>, Reject> {
    match frame(b) {
        Frame::Packet(header, extras, key) => decode(&header, extras, key, sasl, authed),
        other => panic!("{other:?}"),
    }
}

#[test]
fn framing_waits_for_key_and_extras() {
    let r = client::request(op::GET, &[], b"key", &[], 7, 0);
    for n in 0..r.len() {
        assert_eq!(frame(&r[..n]), Frame::NeedMore, "{n}");
    }
    assert!(matches!(frame(&r), Frame::Packet(..)));
    let mut bad = r.clone();
    bad[0] = b'g';
    assert_eq!(frame(&bad), Frame::BadMagic);
}

#[test]
fn length_matrix() {
    // keylen > bodylen: unknown command, close.
    let r = client::raw(op::SET, 5, 8, 4, 0, 0, &[0; 13]);
    assert_eq!(
        dec(&r, false, false),
        Err(Reject::Close(status::UNKNOWN_COMMAND))
    );
    // A body over 1 GiB: EINVAL, close, before the SASL gate (1.6.45).
    let r = client::raw(op::SET, 1, 8, BODY_MAX_BYTES + 1, 0, 0, &[0; 9]);
    assert_eq!(dec(&r, true, false), Err(Reject::Close(status::EINVAL)));
    let r = client::raw(op::SET, 1, 8, BODY_MAX_BYTES, 0, 0, &[0; 9]);
    assert!(dec(&r, false, false).is_ok());
    // keylen 251: EINVAL, close.
    let r = client::request(op::GET, &[], &[b'a'; 251], &[], 0, 0);
    assert_eq!(dec(&r, false, false), Err(Reject::Close(status::EINVAL)));
    // wrong extlen for set.
    let r = client::request(op::SET, &[0; 4], b"k", b"v", 0, 0);
    assert_eq!(dec(&r, false, false), Err(Reject::Close(status::EINVAL)));
    // unknown opcode: swallow bodylen.
    let r = client::raw(0x50, 0, 0, 9, 0, 0, &[]);
    assert_eq!(
        dec(&r, false, false),
        Err(Reject::Swallow(status::UNKNOWN_COMMAND, 9))
    );
    // SASL gate.
    let r = client::request(op::GET, &[], b"k", &[], 0, 0);
    assert_eq!(dec(&r, true, false), Err(Reject::Close(status::AUTH_ERROR)));
    assert!(dec(&r, true, true).is_ok());
    let r = client::request(op::VERSION, &[], &[], &[], 0, 0);
    assert_eq!(dec(&r, true, false), Ok(Request::Version));
}

#[test]
fn store_fields() {
    let r = client::request(
        op::SETQ,
        &client::store_extras(5, 10),
        b"key",
        b"value",
        1,
        9,
    );
    assert_eq!(
        dec(&r, false, false),
        Ok(Request::Store {
            kind: StoreKind::Set,
            key: b"key",
            quiet: true,
            flags: 5,
            exptime: 10,
            cas: 9,
            value_len: 5
        })
    );
}
