//! Every storage command's error paths, text, meta and binary: a refused request's
//! value bytes are executed as commands exactly where memcached 1.6.45 executes them
//! (a line refused before its length could be read: its data block is then read as
//! lines) and never where it does not (a value over `-I`, or a line refused after
//! its length was read, is swallowed; a refused binary request closes the
//! connection). The values are made of requests (`get smuggled`), so a reply to one
//! shows a value run as commands. The "cas desync" (a `cas` with a non-numeric
//! unique and a length over `-I`) is one of the cases: 1.6.45's process_update_command
//! reads the length first and swallows the block, so it no longer desyncs.
//!
//! Every case passes against memcached too
//! (`MEMCRAB_TEST_SERVER=/work/shared/memcached-1.6.45/bin/memcached cargo test --test
//! desync`), which is where the expected bytes come from. Synchronised with sentinels (`version`, a
//! binary NOOP), never with sleeps.

mod common;

use common::{cat, Client, Server};

const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
/// What one smuggled `get smuggled` line answers, when it is run.
const SMUGGLED_REPLY: &[u8] = b"END\r\n";
const SMUGGLED_LINES: usize = 80;

/// `-I 1k` (memcached needs `slab_chunk_max`, in kilobytes, no larger; memcrab
/// ignores it): values
/// made of 80 requests (1,120 bytes) are over the limit.
fn server() -> Server {
    Server::tcp(&["-I", "1k", "-o", "slab_chunk_max=1"])
}

/// A value made of text requests, over `-I`.
fn smuggled_text() -> Vec<u8> {
    b"get smuggled\r\n".repeat(SMUGGLED_LINES)
}

/// The version sentinel's reply (memcached's or memcrab's `VERSION` line).
fn expect_version(c: &mut Client) {
    let line = c.read_line();
    assert!(
        line.starts_with(b"VERSION "),
        "expected the sentinel's VERSION, got {}",
        common::show(&line)
    );
}

/// Sends `line` and `data` + `\r\n` in one write, then the sentinel, and checks the
/// reply is `first` followed by the smuggled lines' replies when `runs`.
#[track_caller]
fn text_case(c: &mut Client, line: &str, data: &[u8], first: &[u8], runs: bool) {
    c.send(&cat(&[line.as_bytes(), b"\r\n", data, b"\r\nversion\r\n"]));
    let mut want = first.to_vec();
    if runs {
        want.extend_from_slice(&SMUGGLED_REPLY.repeat(SMUGGLED_LINES));
        // The block's own `\r\n` is an empty line, too short for 1.6.45's
        // process_request.
        want.extend_from_slice(BAD_FORMAT);
    }
    c.expect(&want);
    expect_version(c);
}

#[test]
fn text_storage_error_paths() {
    let s = server();
    let mut c = s.connect();
    let data = smuggled_text();
    let n = data.len();
    let long_key = "k".repeat(251);
    for cmd in ["set", "add", "replace", "append", "prepend", "cas"] {
        let unique = if cmd == "cas" { " 1" } else { "" };
        // A well-formed line with a length over -I: the error, the data swallowed.
        text_case(
            &mut c,
            &format!("{cmd} k 0 0 {n}{unique}"),
            &data,
            TOO_LARGE,
            false,
        );
        // A line refused after its length was read: 1.6.45's
        // process_update_command swallows the data block.
        for line in [
            format!("{cmd} k abc 0 {n}{unique}"),
            format!("{cmd} k 0 abc {n}{unique}"),
            format!("{cmd} {long_key} 0 0 {n}{unique}"),
        ] {
            text_case(&mut c, &line, &data, BAD_FORMAT, false);
        }
        // A length that does not read: no block to skip, so it is read as commands.
        text_case(
            &mut c,
            &format!("{cmd} k 0 0 -1{unique}"),
            &data,
            BAD_FORMAT,
            true,
        );
        // `noreply` not last is no flag: the too-large error is sent.
        text_case(
            &mut c,
            &format!("{cmd} k 0 0 {n}{unique} noreply x"),
            &data,
            TOO_LARGE,
            false,
        );
    }
    // cas: a non-numeric unique (the cas desync) and a missing one; both refused
    // after the length, both swallowed.
    text_case(
        &mut c,
        &format!("cas k 0 0 {n} abc"),
        &data,
        BAD_FORMAT,
        false,
    );
    text_case(&mut c, &format!("cas k 0 0 {n}"), &data, BAD_FORMAT, false);
    c.call(b"cas k 0 0 5 abc\r\nhello\r\n", BAD_FORMAT);
    c.send(b"version\r\n");
    expect_version(&mut c);
}

/// The cas desync with a value that is one line longer than memcached's 16 KiB
/// read buffer: 1.6.18 read it as a line and closed the connection; 1.6.45's
/// process_update_command has the length, so it swallows the value, however long,
/// and the connection goes on.
#[test]
fn refused_cas_with_a_long_unbroken_value_is_swallowed() {
    let s = server();
    for value in [vec![b'x'; 16_384], vec![b'x'; 40_000]] {
        let mut c = s.connect();
        let line = format!("cas k 0 0 {} abc\r\n", value.len());
        c.send(&cat(&[line.as_bytes(), &value, b"\r\nversion\r\n"]));
        c.expect(BAD_FORMAT);
        expect_version(&mut c);
    }
}

#[test]
fn meta_set_error_paths() {
    let s = server();
    let mut c = s.connect();
    let data = smuggled_text();
    let n = data.len();
    // Flags are checked before the length: a bad one answers its error and the
    // data block is swallowed (memcached sets it to be skipped); a good set over
    // -I is swallowed as too large.
    for (flags, first) in [
        ("", TOO_LARGE),
        ("q", TOO_LARGE),
        ("I F1 T0 C1 MS", TOO_LARGE),
        ("Mx", &b"CLIENT_ERROR invalid mode for ms M token\r\n"[..]),
        ("Fabc", BAD_FORMAT),
        ("Tabc", b"CLIENT_ERROR bad token in command line format\r\n"),
        ("Cabc", b"CLIENT_ERROR bad token in command line format\r\n"),
        ("b", b"CLIENT_ERROR error decoding key\r\n"),
        // memcached 1.6.45 checks the size before the opaque.
        ("O0123456789012345678901234567890123456789", TOO_LARGE),
        ("zz", b"CLIENT_ERROR invalid flag\r\n"),
    ] {
        text_case(&mut c, &format!("ms k {n} {flags}"), &data, first, false);
    }
    text_case(
        &mut c,
        &format!("ms !!!! {n} b"),
        &data,
        b"CLIENT_ERROR error decoding key\r\n",
        false,
    );
    // 1.6.45 reads the length first: a key over 250 bytes swallows the block.
    text_case(
        &mut c,
        &format!("ms {} {n}", "k".repeat(251)),
        &data,
        BAD_FORMAT,
        false,
    );
    // A refused line (length missing or not a number, a flag token the tokenizer
    // refuses): memcached has no length to skip, so the block is read as commands.
    for line in [
        "ms k abc".to_string(),
        "ms k".to_string(),
        format!("ms k {n} !"),
    ] {
        text_case(&mut c, &line, &data, BAD_FORMAT, true);
    }
}

/// One binary request (magic, opcode, lengths; opaque and CAS zero).
fn bin(op: u8, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
    let body = (extras.len() + key.len() + value.len()) as u32;
    let mut h = vec![0x80, op];
    h.extend_from_slice(&(key.len() as u16).to_be_bytes());
    h.push(extras.len() as u8);
    h.extend_from_slice(&[0; 3]);
    h.extend_from_slice(&body.to_be_bytes());
    h.extend_from_slice(&[0; 12]);
    cat(&[&h, extras, key, value])
}

/// Reads one response header and body; returns (opcode, status, body).
fn bin_reply(c: &mut Client) -> (u8, u16, Vec<u8>) {
    let h = c.read_exact_bytes(24);
    assert_eq!(h[0], 0x81, "not a response: {}", common::show(&h));
    let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
    let b = c.read_exact_bytes(body);
    (h[1], u16::from_be_bytes([h[6], h[7]]), b)
}

const NOOP: u8 = 0x0a;

#[test]
fn binary_storage_error_paths() {
    let s = server();
    // A value made of binary GETs, over -I.
    let data = bin(0x00, b"", b"smuggled", b"").repeat(50);
    let extras = [0u8; 8];
    let long_key = vec![b'k'; 251];
    for op in [0x01u8, 0x02, 0x03, 0x11, 0x0e, 0x0f] {
        let append = op == 0x0e || op == 0x0f;
        let ext: &[u8] = if append { b"" } else { &extras };
        // Over -I: "Too large." (status 3), the value swallowed: the next reply is
        // the NOOP sentinel's.
        let mut c = s.connect();
        c.send(&cat(&[
            &bin(op, ext, b"k", &data),
            &bin(NOOP, b"", b"", b""),
        ]));
        let (got_op, status, body) = bin_reply(&mut c);
        assert_eq!((got_op, status, &body[..]), (op, 3, &b"Too large."[..]));
        assert_eq!(bin_reply(&mut c).0, NOOP);
        // Refused headers (a long key, wrong extras): "Invalid arguments" (status
        // 4) and the connection closed, nothing of the value run.
        let wrong_ext: &[u8] = if append { &extras } else { &extras[..4] };
        for req in [
            bin(op, ext, &long_key, &data),
            bin(op, wrong_ext, b"k", &data),
        ] {
            let mut c = s.connect();
            c.send(&cat(&[&req, &bin(NOOP, b"", b"", b"")]));
            let (got_op, status, body) = bin_reply(&mut c);
            assert_eq!(
                (got_op, status, &body[..]),
                (op, 4, &b"Invalid arguments"[..])
            );
            c.expect_closed();
        }
    }
}
