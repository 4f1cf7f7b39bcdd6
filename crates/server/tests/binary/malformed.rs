//! Malformed binary requests: values over `-I`, the malformed-length matrix and the
//! inputs of the historical binary-protocol CVEs; each answers memcached's status and
//! then closes or goes on as memcached does.

use super::*;

#[test]
fn too_large_values_are_swallowed() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    put(&mut c, b"k", b"old", 0);
    let big = vec![b'x'; 1024 * 1024];
    let mut b = set(b"k", &big, 0, 0, 0);
    b.extend(noop());
    c.send(&b);
    expect_err(&mut c, op::SET, status::E2BIG, 0);
    expect_ok(&mut c, op::NOOP, 0, Cas::Zero);
    // A failed set removes the old value.
    c.send(&get(op::GET, b"k", 0));
    expect_err(&mut c, op::GET, status::KEY_ENOENT, 0);
    put(&mut c, b"k", b"old", 0);
    let mut b = request(op::APPEND, &[], b"k", &big, 1, 0);
    b.extend(request(op::ADDQ, &store_extras(0, 0), b"k", &big, 2, 0));
    b.extend(noop());
    c.send(&b);
    expect_err(&mut c, op::APPEND, status::E2BIG, 1);
    expect_err(&mut c, op::ADDQ, status::E2BIG, 2);
    expect_ok(&mut c, op::NOOP, 0, Cas::Zero);
    c.send(&get(op::GET, b"k", 0));
    expect_hit(&mut c, op::GET, 0, Cas::New, 0, &[], b"old");
}

/// After a refused request the server must still serve everyone, with data intact.
fn assert_alive(s: &Server, key: &[u8], value: &[u8]) {
    let mut c = s.connect();
    c.send(&get(op::GET, key, 0));
    expect_hit(&mut c, op::GET, 0, Cas::New, 0, &[], value);
}

/// Sends `bytes` on a fresh connection and expects one error response, then a
/// close (memcached's close_after_write).
fn expect_error_then_close(s: &Server, bytes: &[u8], opcode: u8, st: u16) {
    let mut c = s.connect();
    c.send(bytes);
    expect_err(&mut c, opcode, st, 0);
    c.expect_closed();
}

/// [`expect_error_then_close`] for a raw header with the given lengths, opaque
/// and CAS 0.
fn raw_error_then_close(s: &Server, opcode: u8, lens: (u16, u8, u32), body: &[u8], st: u16) {
    let (keylen, extlen, bodylen) = lens;
    let bytes = raw(opcode, keylen, extlen, bodylen, 0, 0, body);
    expect_error_then_close(s, &bytes, opcode, st);
}

/// A server holding `keep` = `safe`, which [`assert_alive`] checks afterwards.
fn server_with_keep() -> Server {
    let s = Server::tcp(&[]);
    put(&mut s.connect(), b"keep", b"safe", 0);
    s
}

#[test]
fn malformed_length_matrix() {
    let s = server_with_keep();
    // keylen > bodylen, and keylen + extlen > bodylen: unknown command, close.
    expect_error_then_close(
        &s,
        // memcached waits for header + extras + key before it checks anything.
        &raw(op::GET, 5, 0, 4, 0, 0, b"abcde"),
        op::GET,
        status::UNKNOWN_COMMAND,
    );
    raw_error_then_close(&s, op::SET, (1, 8, 8), &[0; 9], status::UNKNOWN_COMMAND);
    // keylen > 250: invalid arguments, close.
    expect_error_then_close(
        &s,
        &request(op::GET, &[], &[b'a'; 251], &[], 0, 0),
        op::GET,
        status::EINVAL,
    );
    // Wrong extlen or body shape for the opcode: invalid arguments, close.
    let rows: Vec<(u8, Vec<u8>)> = vec![
        (op::SET, request(op::SET, &[0; 4], b"k", b"v", 0, 0)),
        (
            op::SET,
            request(op::SET, &store_extras(0, 0), b"", b"v", 0, 0),
        ),
        (op::ADD, request(op::ADD, &[0; 12], b"k", b"v", 0, 0)),
        (op::GET, request(op::GET, &[0; 4], b"k", &[], 0, 0)),
        (op::GET, request(op::GET, &[], b"k", b"v", 0, 0)),
        (op::GET, request(op::GET, &[], b"", &[], 0, 0)),
        (op::DELETE, request(op::DELETE, &[0; 4], b"k", &[], 0, 0)),
        (
            op::INCREMENT,
            request(op::INCREMENT, &[0; 8], b"k", &[], 0, 0),
        ),
        (
            op::INCREMENT,
            request(op::INCREMENT, &[0; 20], b"k", b"x", 0, 0),
        ),
        (op::APPEND, request(op::APPEND, &[0; 8], b"k", b"v", 0, 0)),
        (op::NOOP, request(op::NOOP, &[], b"k", &[], 0, 0)),
        (op::VERSION, request(op::VERSION, &[0; 4], &[], &[], 0, 0)),
        (op::QUIT, request(op::QUIT, &[], &[], b"x", 0, 0)),
        (op::FLUSH, request(op::FLUSH, &[0; 8], &[], &[], 0, 0)),
        (op::FLUSH, request(op::FLUSH, &[], b"k", &[], 0, 0)),
        (op::STAT, request(op::STAT, &[0; 4], &[], &[], 0, 0)),
        (op::TOUCH, request(op::TOUCH, &[], b"k", &[], 0, 0)),
        (op::GAT, request(op::GAT, &[0; 4], b"", &[], 0, 0)),
        (
            op::SASL_LIST_MECHS,
            request(op::SASL_LIST_MECHS, &[], b"k", &[], 0, 0),
        ),
        (
            op::SASL_AUTH,
            request(op::SASL_AUTH, &[0; 4], b"PLAIN", &[], 0, 0),
        ),
    ];
    for (o, b) in rows {
        expect_error_then_close(&s, &b, o, status::EINVAL);
    }
    // A wrong magic byte closes without a reply, once 24 bytes have arrived (the
    // first packet's 0x80 made this a binary connection).
    let mut c = s.connect();
    sync(&mut c);
    let mut b = noop();
    b[0] = 0x81;
    c.send(&b[..23]);
    c.wait_server_read();
    c.send(&b[23..]);
    c.expect_closed();
    // A header split across writes is waited for.
    let mut c = s.connect();
    let b = get(op::GETK, b"keep", 11);
    c.send(&b[..10]);
    c.wait_server_read();
    c.send(&b[10..]);
    expect_hit(&mut c, op::GETK, 11, Cas::New, 0, b"keep", b"safe");
    // Huge declared bodies on a storage command are refused before allocation:
    // over -I, too large, the body swallowed (memcached answers once it has
    // swallowed it, so it is sent whole); over 1 GiB, 1.6.45's
    // dispatch_bin_command refuses it as invalid and closes.
    let mut c = s.connect();
    let body_bytes: u32 = 2 << 20;
    let mut big = raw(
        op::SET,
        1,
        8,
        body_bytes,
        0,
        0,
        &[0, 0, 0, 0, 0, 0, 0, 0, b'k'],
    );
    big.resize(big.len() + body_bytes as usize - 9, b'x');
    c.send(&big);
    expect_err(&mut c, op::SET, status::E2BIG, 0);
    sync(&mut c);
    raw_error_then_close(
        &s,
        op::SET,
        (1, 8, u32::MAX),
        &[0, 0, 0, 0, 0, 0, 0, 0, b'k'],
        status::EINVAL,
    );
    assert_alive(&s, b"keep", b"safe");
}

#[test]
fn cve_2016_8704_append_integer_overflow() {
    // APPENDQ/PREPENDQ with bodylen < keylen: vlen = bodylen - keylen underflowed.
    let s = server_with_keep();
    for o in [op::APPENDQ, op::PREPENDQ, op::APPEND, op::PREPEND] {
        let mut body = vec![b'k'; 0xfa];
        body.extend_from_slice(&[b'v'; 16]);
        raw_error_then_close(&s, o, (0xfa, 0, 0xf0), &body, status::UNKNOWN_COMMAND);
    }
    assert_alive(&s, b"keep", b"safe");
}

#[test]
fn cve_2016_8705_update_underflow() {
    // SET/ADD/REPLACE(Q) whose bodylen is below keylen + extlen.
    let s = server_with_keep();
    for o in [
        op::SET,
        op::SETQ,
        op::ADD,
        op::ADDQ,
        op::REPLACE,
        op::REPLACEQ,
    ] {
        let mut body = vec![0u8; 8];
        body.extend_from_slice(&[b'k'; 0xfa]);
        raw_error_then_close(&s, o, (0xfa, 8, 2), &body, status::UNKNOWN_COMMAND);
    }
    // keylen + extlen == bodylen + 1 exactly.
    raw_error_then_close(&s, op::SET, (4, 8, 11), &[0; 12], status::UNKNOWN_COMMAND);
    assert_alive(&s, b"keep", b"safe");
}

#[test]
fn cve_2016_8706_sasl_auth_lengths() {
    // SASL_AUTH with bodylen < keylen (without -S, still validated first).
    let s = server_with_keep();
    let mut body = vec![b'M'; 0x20];
    body.extend_from_slice(b"data");
    raw_error_then_close(
        &s,
        op::SASL_AUTH,
        (0x20, 0, 0x10),
        &body,
        status::UNKNOWN_COMMAND,
    );
    assert_alive(&s, b"keep", b"safe");
}

#[test]
fn cve_2020_10931_large_extlen() {
    // Large extlen overflowed memcached's extras buffer in try_read_command_binary.
    let s = server_with_keep();
    for o in [op::SASL_AUTH, op::GET, op::INCREMENT, op::SET, op::FLUSH] {
        let body = vec![0xffu8; 0xff + 5];
        raw_error_then_close(&s, o, (5, 0xff, 0xff + 5), &body, status::EINVAL);
    }
    assert_alive(&s, b"keep", b"safe");
}
