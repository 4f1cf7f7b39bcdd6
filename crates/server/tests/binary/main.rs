//! The binary protocol over real sockets, exact bytes (CAS uniques compared by
//! relation, since two servers number them differently): every opcode, quiet forms,
//! error statuses and texts, CAS flows, the malformed-length matrix and the inputs
//! of the historical binary-protocol CVEs (malformed.rs, beside this file). All
//! pass against memcached 1.6.45
//! (`MEMCRAB_TEST_SERVER=/work/shared/memcached-1.6.45/bin/memcached`); the only
//! memcrab-specific value is the version string, of which only the `1.6.X` form is
//! asserted.

#[path = "../common/mod.rs"]
mod common;
mod malformed;

use common::{Client, Server};
use memcrab_proto::binary::client::{arith_extras, parse_response, raw, request, store_extras};
use memcrab_proto::binary::{op, status};

/// What a response's CAS must be.
#[derive(Clone, Copy, Debug)]
enum Cas {
    Zero,
    /// Not zero; returned for later comparisons.
    New,
    Is(u64),
}

fn text(st: u16) -> &'static [u8] {
    status::text(st)
}

/// Reads one response and asserts every byte but the CAS, which must be as `cas`
/// says. Returns the CAS.
#[allow(clippy::too_many_arguments)]
#[track_caller]
fn expect(
    c: &mut Client,
    opcode: u8,
    st: u16,
    opaque: u32,
    cas: Cas,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) -> u64 {
    let head = c.read_exact_bytes(24);
    let bodylen = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
    let body = c.read_exact_bytes(bodylen);
    let mut all = head.clone();
    all.extend_from_slice(&body);
    let (r, n) = parse_response(&all).expect("a complete response");
    assert_eq!(n, all.len());
    let mut want = vec![0x81, opcode];
    want.extend_from_slice(&(key.len() as u16).to_be_bytes());
    want.push(extras.len() as u8);
    want.push(0);
    want.extend_from_slice(&st.to_be_bytes());
    want.extend_from_slice(&((extras.len() + key.len() + value.len()) as u32).to_be_bytes());
    want.extend_from_slice(&opaque.to_be_bytes());
    assert_eq!(
        &head[..16],
        &want[..],
        "header (without CAS) of {:?}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(r.extras, extras, "extras");
    assert_eq!(r.key, key, "key");
    assert_eq!(
        r.value,
        value,
        "value {:?}",
        String::from_utf8_lossy(&r.value)
    );
    match cas {
        Cas::Zero => assert_eq!(r.cas, 0, "cas"),
        Cas::New => assert_ne!(r.cas, 0, "cas"),
        Cas::Is(v) => assert_eq!(r.cas, v, "cas"),
    }
    r.cas
}

#[track_caller]
fn expect_err(c: &mut Client, opcode: u8, st: u16, opaque: u32) {
    expect(c, opcode, st, opaque, Cas::Zero, &[], &[], text(st));
}

#[track_caller]
fn expect_ok(c: &mut Client, opcode: u8, opaque: u32, cas: Cas) -> u64 {
    expect(c, opcode, status::SUCCESS, opaque, cas, &[], &[], &[])
}

/// A successful response that carries the item's flags (get, touch and gat families).
#[track_caller]
fn expect_hit(
    c: &mut Client,
    opcode: u8,
    opaque: u32,
    cas: Cas,
    flags: u32,
    key: &[u8],
    value: &[u8],
) -> u64 {
    let flags = flags4(flags);
    expect(c, opcode, status::SUCCESS, opaque, cas, &flags, key, value)
}

/// A successful incr/decr response: the new value as 8 bytes, big-endian.
#[track_caller]
fn expect_count(c: &mut Client, opcode: u8, opaque: u32, cas: Cas, n: u64) -> u64 {
    let n = n.to_be_bytes();
    expect(c, opcode, status::SUCCESS, opaque, cas, &[], &[], &n)
}

/// An incr/decr request.
fn arith(
    opcode: u8,
    key: &[u8],
    delta: u64,
    initial: u64,
    exptime: u32,
    opaque: u32,
    cas: u64,
) -> Vec<u8> {
    let extras = arith_extras(delta, initial, exptime);
    request(opcode, &extras, key, &[], opaque, cas)
}

fn set(key: &[u8], value: &[u8], flags: u32, exptime: u32, cas: u64) -> Vec<u8> {
    request(op::SET, &store_extras(flags, exptime), key, value, 0, cas)
}

fn get(opcode: u8, key: &[u8], opaque: u32) -> Vec<u8> {
    request(opcode, &[], key, &[], opaque, 0)
}

fn noop() -> Vec<u8> {
    request(op::NOOP, &[], &[], &[], 0, 0)
}

fn sync(c: &mut Client) {
    c.send(&noop());
    expect_ok(c, op::NOOP, 0, Cas::Zero);
}

/// Stores `key` and returns its CAS.
fn put(c: &mut Client, key: &[u8], value: &[u8], flags: u32) -> u64 {
    c.send(&set(key, value, flags, 0, 0));
    expect_ok(c, op::SET, 0, Cas::New)
}

fn flags4(f: u32) -> [u8; 4] {
    f.to_be_bytes()
}

#[test]
fn get_family_hits_and_misses() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.send(&get(op::GET, b"nope", 0x01020304));
    expect_err(&mut c, op::GET, status::KEY_ENOENT, 0x01020304);
    c.send(&get(op::GETK, b"nope", 7));
    expect(
        &mut c,
        op::GETK,
        status::KEY_ENOENT,
        7,
        Cas::Zero,
        &[],
        b"nope",
        &[],
    );
    // Quiet misses are silent; the noop proves nothing else was sent.
    c.send(&get(op::GETQ, b"nope", 1));
    c.send(&get(op::GETKQ, b"nope", 2));
    sync(&mut c);

    let cas = put(&mut c, b"k", b"hello", 0xdeadbeef);
    for (o, with_key) in [
        (op::GET, false),
        (op::GETQ, false),
        (op::GETK, true),
        (op::GETKQ, true),
    ] {
        c.send(&get(o, b"k", 9));
        let key: &[u8] = if with_key { b"k" } else { b"" };
        expect_hit(&mut c, o, 9, Cas::Is(cas), 0xdeadbeef, key, b"hello");
    }
    // Pipelined: quiet hits answer, quiet misses do not, noop closes the batch.
    let mut batch = get(op::GETKQ, b"a", 1);
    batch.extend(get(op::GETKQ, b"k", 2));
    batch.extend(get(op::GETQ, b"b", 3));
    batch.extend(noop());
    c.send(&batch);
    expect_hit(
        &mut c,
        op::GETKQ,
        2,
        Cas::Is(cas),
        0xdeadbeef,
        b"k",
        b"hello",
    );
    expect_ok(&mut c, op::NOOP, 0, Cas::Zero);
}

#[test]
fn touch_and_gat() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let ttl = 100u32.to_be_bytes();
    for o in [op::TOUCH, op::GAT, op::GATK] {
        c.send(&request(o, &ttl, b"none", &[], 4, 0));
        if o == op::GATK {
            expect(
                &mut c,
                o,
                status::KEY_ENOENT,
                4,
                Cas::Zero,
                &[],
                b"none",
                &[],
            );
        } else {
            expect_err(&mut c, o, status::KEY_ENOENT, 4);
        }
    }
    c.send(&request(op::GATQ, &ttl, b"none", &[], 4, 0));
    c.send(&request(op::GATKQ, &ttl, b"none", &[], 4, 0));
    sync(&mut c);
    let cas = put(&mut c, b"k", b"val", 3);
    c.send(&request(op::TOUCH, &ttl, b"k", &[], 1, 0));
    expect_hit(&mut c, op::TOUCH, 1, Cas::Is(cas), 3, &[], &[]);
    c.send(&request(op::GAT, &ttl, b"k", &[], 2, 0));
    expect_hit(&mut c, op::GAT, 2, Cas::Is(cas), 3, &[], b"val");
    c.send(&request(op::GATQ, &ttl, b"k", &[], 3, 0));
    expect_hit(&mut c, op::GATQ, 3, Cas::Is(cas), 3, &[], b"val");
    c.send(&request(op::GATK, &ttl, b"k", &[], 4, 0));
    expect_hit(&mut c, op::GATK, 4, Cas::Is(cas), 3, b"k", b"val");
    c.send(&request(op::GATKQ, &ttl, b"k", &[], 5, 0));
    expect_hit(&mut c, op::GATKQ, 5, Cas::Is(cas), 3, b"k", b"val");
    // An exptime in the past expires the item.
    c.send(&request(
        op::TOUCH,
        &u32::MAX.to_be_bytes()[..],
        b"k",
        &[],
        6,
        0,
    ));
    expect_hit(&mut c, op::TOUCH, 6, Cas::Is(cas), 3, &[], &[]);
    c.send(&get(op::GET, b"k", 0));
    expect_hit(&mut c, op::GET, 0, Cas::Is(cas), 3, &[], b"val");
}

#[test]
fn storage_statuses_and_quiet_forms() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let ex = store_extras(0, 0);
    c.send(&request(op::ADD, &ex, b"k", b"a", 1, 0));
    let first = expect_ok(&mut c, op::ADD, 1, Cas::New);
    c.send(&request(op::ADD, &ex, b"k", b"b", 2, 0));
    expect_err(&mut c, op::ADD, status::KEY_EEXISTS, 2);
    c.send(&request(op::REPLACE, &ex, b"missing", b"c", 3, 0));
    expect_err(&mut c, op::REPLACE, status::KEY_ENOENT, 3);
    c.send(&request(op::REPLACE, &ex, b"k", b"c", 4, 0));
    let second = expect_ok(&mut c, op::REPLACE, 4, Cas::New);
    assert_ne!(first, second);
    // Quiet successes are silent; quiet failures are not.
    c.send(&request(op::SETQ, &ex, b"q", b"1", 5, 0));
    c.send(&request(op::ADDQ, &ex, b"q", b"2", 6, 0));
    c.send(&request(op::REPLACEQ, &ex, b"nope", b"3", 7, 0));
    c.send(&request(op::REPLACEQ, &ex, b"q", b"4", 8, 0));
    c.send(&request(op::ADDQ, &ex, b"q2", b"5", 9, 0));
    expect_err(&mut c, op::ADDQ, status::KEY_EEXISTS, 6);
    expect_err(&mut c, op::REPLACEQ, status::KEY_ENOENT, 7);
    sync(&mut c);
    c.send(&get(op::GET, b"q", 0));
    let cas_q = c.read_exact_bytes(24);
    let body = c.read_exact_bytes(5);
    assert_eq!(&body, b"\0\0\0\x004");
    assert_eq!(cas_q[6..8], [0, 0]);
    c.send(&get(op::GET, b"q2", 0));
    expect_hit(&mut c, op::GET, 0, Cas::New, 0, &[], b"5");
}

#[test]
fn cas_flows() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    // CAS on a missing key: not found.
    c.send(&set(b"k", b"v", 0, 0, 12345));
    expect_err(&mut c, op::SET, status::KEY_ENOENT, 0);
    let cas = put(&mut c, b"k", b"v", 0);
    c.send(&set(b"k", b"w", 0, 0, cas + 1000));
    expect_err(&mut c, op::SET, status::KEY_EEXISTS, 0);
    // add and replace with a CAS compare it as well.
    c.send(&request(
        op::ADD,
        &store_extras(0, 0),
        b"k",
        b"x",
        0,
        cas + 1000,
    ));
    expect_err(&mut c, op::ADD, status::KEY_EEXISTS, 0);
    c.send(&request(
        op::REPLACE,
        &store_extras(0, 0),
        b"k",
        b"x",
        0,
        cas,
    ));
    let cas2 = expect_ok(&mut c, op::REPLACE, 0, Cas::New);
    assert_ne!(cas, cas2);
    c.send(&set(b"k", b"y", 0, 0, cas));
    expect_err(&mut c, op::SET, status::KEY_EEXISTS, 0);
    c.send(&set(b"k", b"y", 0, 0, cas2));
    let cas3 = expect_ok(&mut c, op::SET, 0, Cas::New);
    c.send(&get(op::GET, b"k", 0));
    expect_hit(&mut c, op::GET, 0, Cas::Is(cas3), 0, &[], b"y");
    // delete compares a non-zero CAS.
    c.send(&request(op::DELETE, &[], b"k", &[], 0, cas2));
    expect_err(&mut c, op::DELETE, status::KEY_EEXISTS, 0);
    c.send(&request(op::DELETE, &[], b"k", &[], 0, cas3));
    expect_ok(&mut c, op::DELETE, 0, Cas::Zero);
}

#[test]
fn cas_disabled() {
    let s = Server::tcp(&["-C"]);
    let mut c = s.connect();
    // Under -C the request's CAS is never compared by stores, and every CAS is 0.
    c.send(&set(b"k", b"v", 0, 0, 77));
    expect_ok(&mut c, op::SET, 0, Cas::Zero);
    c.send(&get(op::GET, b"k", 0));
    expect_hit(&mut c, op::GET, 0, Cas::Zero, 0, &[], b"v");
    c.send(&arith(op::INCREMENT, b"n", 1, 5, 0, 0, 0));
    expect_count(&mut c, op::INCREMENT, 0, Cas::Zero, 5);
    // delete with a CAS never matches an item without one.
    c.send(&request(op::DELETE, &[], b"k", &[], 0, 77));
    expect_err(&mut c, op::DELETE, status::KEY_EEXISTS, 0);
}

#[test]
fn delete_forms() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.send(&get(op::DELETE, b"k", 3));
    expect_err(&mut c, op::DELETE, status::KEY_ENOENT, 3);
    c.send(&get(op::DELETEQ, b"k", 4));
    expect_err(&mut c, op::DELETEQ, status::KEY_ENOENT, 4);
    put(&mut c, b"k", b"v", 0);
    c.send(&get(op::DELETE, b"k", 5));
    expect_ok(&mut c, op::DELETE, 5, Cas::Zero);
    put(&mut c, b"k", b"v", 0);
    c.send(&get(op::DELETEQ, b"k", 6));
    sync(&mut c);
    c.send(&get(op::GET, b"k", 0));
    expect_err(&mut c, op::GET, status::KEY_ENOENT, 0);
    let st = s.connect().stats("");
    assert_eq!(st["delete_hits"], "2");
    assert_eq!(st["delete_misses"], "2");
}

#[test]
fn incr_decr() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let no = 0xffff_ffffu32;
    // Miss without creation.
    c.send(&arith(op::INCREMENT, b"n", 1, 10, no, 1, 0));
    expect_err(&mut c, op::INCREMENT, status::KEY_ENOENT, 1);
    c.send(&arith(op::DECREMENTQ, b"n", 1, 10, no, 2, 0));
    expect_err(&mut c, op::DECREMENTQ, status::KEY_ENOENT, 2);
    // Miss with creation: the initial value, not the delta.
    c.send(&arith(op::INCREMENT, b"n", 5, 10, 0, 3, 0));
    let created = expect_count(&mut c, op::INCREMENT, 3, Cas::New, 10);
    c.send(&get(op::GET, b"n", 0));
    expect_hit(&mut c, op::GET, 0, Cas::Is(created), 0, &[], b"10");
    c.send(&arith(op::INCREMENT, b"n", 5, 10, 0, 4, 0));
    let cas = expect_count(&mut c, op::INCREMENT, 4, Cas::New, 15);
    assert_ne!(cas, created);
    c.send(&arith(op::DECREMENT, b"n", 100, 0, 0, 5, 0));
    let cas = expect_count(&mut c, op::DECREMENT, 5, Cas::New, 0);
    // CAS compare.
    c.send(&arith(op::INCREMENT, b"n", 1, 0, 0, 6, cas + 99));
    expect_err(&mut c, op::INCREMENT, status::KEY_EEXISTS, 6);
    c.send(&arith(op::INCREMENT, b"n", 1, 0, 0, 7, cas));
    expect_count(&mut c, op::INCREMENT, 7, Cas::New, 1);
    // Quiet success is silent.
    c.send(&arith(op::INCREMENTQ, b"n", 1, 0, 0, 8, 0));
    sync(&mut c);
    c.send(&get(op::GET, b"n", 0));
    expect_hit(&mut c, op::GET, 0, Cas::New, 0, &[], b"2 ");
    // Wraps at 2^64.
    c.send(&arith(op::INCREMENT, b"n", u64::MAX, 0, 0, 9, 0));
    expect_count(&mut c, op::INCREMENT, 9, Cas::New, 1);
    // Non-numeric.
    put(&mut c, b"s", b"abc", 0);
    c.send(&arith(op::DECREMENT, b"s", 1, 0, 0, 10, 0));
    expect_err(&mut c, op::DECREMENT, status::DELTA_BADVAL, 10);
}

#[test]
fn append_prepend() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.send(&request(op::APPEND, &[], b"k", b"x", 1, 0));
    expect_err(&mut c, op::APPEND, status::NOT_STORED, 1);
    c.send(&request(op::PREPENDQ, &[], b"k", b"x", 2, 0));
    expect_err(&mut c, op::PREPENDQ, status::NOT_STORED, 2);
    let cas = put(&mut c, b"k", b"mid", 42);
    c.send(&request(op::APPEND, &[], b"k", b">", 3, 0));
    let cas2 = expect_ok(&mut c, op::APPEND, 3, Cas::New);
    assert_ne!(cas, cas2);
    c.send(&request(op::PREPEND, &[], b"k", b"<", 4, cas));
    expect_err(&mut c, op::PREPEND, status::KEY_EEXISTS, 4);
    c.send(&request(op::PREPEND, &[], b"k", b"<", 5, cas2));
    expect_ok(&mut c, op::PREPEND, 5, Cas::New);
    c.send(&request(op::APPENDQ, &[], b"k", b"!", 6, 0));
    c.send(&get(op::GET, b"k", 7));
    expect_hit(&mut c, op::GET, 7, Cas::New, 42, &[], b"<mid>!");
}

#[test]
fn flush_noop_version_quit() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    put(&mut c, b"k", b"v", 0);
    c.send(&request(op::FLUSH, &[], &[], &[], 1, 0));
    expect_ok(&mut c, op::FLUSH, 1, Cas::Zero);
    c.send(&get(op::GET, b"k", 0));
    expect_err(&mut c, op::GET, status::KEY_ENOENT, 0);
    put(&mut c, b"k", b"v", 0);
    c.send(&request(op::FLUSHQ, &[], &[], &[], 2, 0));
    sync(&mut c);
    c.send(&get(op::GET, b"k", 0));
    expect_err(&mut c, op::GET, status::KEY_ENOENT, 0);
    // A delayed flush leaves items readable until it is due.
    put(&mut c, b"k", b"v", 0);
    c.send(&request(op::FLUSH, &100u32.to_be_bytes(), &[], &[], 3, 0));
    expect_ok(&mut c, op::FLUSH, 3, Cas::Zero);
    c.send(&get(op::GET, b"k", 0));
    expect_hit(&mut c, op::GET, 0, Cas::New, 0, &[], b"v");

    c.send(&request(op::VERSION, &[], &[], &[], 4, 0));
    let head = c.read_exact_bytes(24);
    assert_eq!(&head[..8], &[0x81, op::VERSION, 0, 0, 0, 0, 0, 0]);
    let len = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
    assert_eq!(&head[12..], &[0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
    let v = c.read_exact_bytes(len);
    assert!(
        v.starts_with(b"1.6.") && v.iter().all(|b| b.is_ascii_digit() || *b == b'.'),
        "{}",
        String::from_utf8_lossy(&v)
    );

    c.send(&request(op::QUIT, &[], &[], &[], 5, 0));
    expect_ok(&mut c, op::QUIT, 5, Cas::Zero);
    c.expect_closed();
    let mut c = s.connect();
    c.send(&request(op::QUITQ, &[], &[], &[], 6, 0));
    c.expect_closed();
}

#[test]
fn flush_disabled_is_auth_error() {
    let s = Server::tcp(&["-F"]);
    let mut c = s.connect();
    c.send(&request(op::FLUSH, &[], &[], &[], 1, 0));
    expect_err(&mut c, op::FLUSH, status::AUTH_ERROR, 1);
    c.send(&request(op::FLUSHQ, &[], &[], &[], 2, 0));
    expect_err(&mut c, op::FLUSHQ, status::AUTH_ERROR, 2);
    sync(&mut c);
}

/// Reads stat packets up to the empty terminator.
fn read_stats(c: &mut Client, opaque: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let head = c.read_exact_bytes(24);
        assert_eq!(&head[..2], &[0x81, op::STAT]);
        assert_eq!(&head[4..8], &[0, 0, 0, 0]);
        assert_eq!(&head[12..16], &opaque.to_be_bytes());
        assert_eq!(&head[16..], &[0; 8]);
        let klen = usize::from(u16::from_be_bytes([head[2], head[3]]));
        let blen = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
        let body = c.read_exact_bytes(blen);
        if blen == 0 {
            return out;
        }
        out.push((body[..klen].to_vec(), body[klen..].to_vec()));
    }
}

#[test]
fn stats_groups() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    put(&mut c, b"k", b"v", 0);
    c.send(&get(op::STAT, b"", 1));
    let general = read_stats(&mut c, 1);
    let find = |v: &[(Vec<u8>, Vec<u8>)], k: &[u8]| {
        v.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no stat {}", String::from_utf8_lossy(k)))
    };
    assert_eq!(find(&general, b"cmd_set"), b"1");
    assert_eq!(find(&general, b"curr_items"), b"1");
    assert_eq!(general[0].0, b"pid");
    c.send(&get(op::STAT, b"settings", 2));
    let settings = read_stats(&mut c, 2);
    assert_eq!(find(&settings, b"binding_protocol"), b"auto-negotiate");
    assert_eq!(find(&settings, b"auth_enabled_sasl"), b"no");
    c.send(&get(op::STAT, b"items", 3));
    let items = read_stats(&mut c, 3);
    assert_eq!(find(&items, b"items:1:number"), b"1");
    c.send(&get(op::STAT, b"bogus", 4));
    expect_err(&mut c, op::STAT, status::KEY_ENOENT, 4);
    c.send(&get(op::STAT, b"conns", 5));
    expect_err(&mut c, op::STAT, status::KEY_ENOENT, 5);
    c.send(&get(op::STAT, b"reset", 6));
    assert!(read_stats(&mut c, 6).is_empty());
    c.send(&get(op::STAT, b"detail on", 7));
    assert!(read_stats(&mut c, 7).is_empty());
    c.send(&get(op::STAT, b"", 8));
    assert_eq!(find(&read_stats(&mut c, 8), b"cmd_set"), b"0");
}

#[test]
fn unknown_opcodes_and_sasl_without_s() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    // verbosity is not a binary command in memcached (1.6.45 neither).
    // Its 4 bytes of extras are consumed, then bodylen (4) more are swallowed.
    let mut b = request(op::VERBOSITY, &1u32.to_be_bytes(), &[], &[], 1, 0);
    b.extend_from_slice(b"pad!");
    c.send(&b);
    expect_err(&mut c, op::VERBOSITY, status::UNKNOWN_COMMAND, 1);
    // memcached swallows bodylen bytes *after* the extras and key it consumed.
    let mut b = raw(0x50, 0, 0, 5, 2, 0, &[]);
    b.extend_from_slice(b"12345");
    b.extend(noop());
    c.send(&b);
    expect_err(&mut c, 0x50, status::UNKNOWN_COMMAND, 2);
    expect_ok(&mut c, op::NOOP, 0, Cas::Zero);
    let mut b = request(0x60, &[], b"key", &[], 3, 0);
    b.extend_from_slice(b"abc");
    b.extend(noop());
    c.send(&b);
    expect_err(&mut c, 0x60, status::UNKNOWN_COMMAND, 3);
    expect_ok(&mut c, op::NOOP, 0, Cas::Zero);
    c.send(&request(op::SASL_LIST_MECHS, &[], &[], &[], 4, 0));
    expect_err(&mut c, op::SASL_LIST_MECHS, status::UNKNOWN_COMMAND, 4);
    let mut b = request(op::SASL_AUTH, &[], b"PLAIN", b"\0u\0p", 5, 0);
    b.extend(noop());
    c.send(&b);
    expect_err(&mut c, op::SASL_AUTH, status::UNKNOWN_COMMAND, 5);
    expect_ok(&mut c, op::NOOP, 0, Cas::Zero);
}

#[test]
fn protocol_selection() {
    // -B binary: text is not understood; the connection closes once 24 bytes came.
    let s = Server::tcp(&["-B", "binary"]);
    let mut c = s.connect();
    c.send(b"get foo\r\nget foo\r\nget foo\r\n");
    c.expect_closed();
    let mut c = s.connect();
    c.send(&get(op::STAT, b"settings", 0));
    let st = read_stats(&mut c, 0);
    let proto = st
        .iter()
        .find(|(k, _)| k == b"binding_protocol")
        .map(|(_, v)| v.clone());
    assert_eq!(proto.as_deref(), Some(&b"binary"[..]));
    // -B ascii: a binary packet is a bad text command.
    let s = Server::tcp(&["-B", "ascii"]);
    let mut c = s.connect();
    // (0x0a, NOOP's opcode, ends the first "line": one token, too short for
    // 1.6.45's process_request.)
    c.send(&noop());
    c.expect(b"CLIENT_ERROR bad command line format\r\n");
    assert_eq!(s.connect().stats("settings")["binding_protocol"], "ascii");
    // auto: each connection picks by its first byte.
    let s = Server::tcp(&["-B", "auto"]);
    let mut t = s.connect();
    let mut b = s.connect();
    t.call(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    b.send(&get(op::GET, b"k", 0));
    expect_hit(&mut b, op::GET, 0, Cas::New, 0, &[], b"v");
    // A binary connection stays binary.
    b.send(b"get k\r\nget k\r\nget k\r\nget k\r\n");
    b.expect_closed();
    t.call(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
}

#[test]
fn stats_count_binary_commands() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    put(&mut c, b"k", b"1", 0);
    c.send(&get(op::GET, b"k", 0));
    expect_hit(&mut c, op::GET, 0, Cas::New, 0, &[], b"1");
    c.send(&get(op::GETQ, b"x", 0));
    c.send(&arith(op::INCREMENT, b"k", 1, 0, 0, 0, 0));
    expect_count(&mut c, op::INCREMENT, 0, Cas::New, 2);
    c.send(&request(op::TOUCH, &[0; 4], b"x", &[], 0, 0));
    expect_err(&mut c, op::TOUCH, status::KEY_ENOENT, 0);
    let mut t = s.connect();
    let st = t.stats("");
    for (k, v) in [
        ("cmd_get", "2"),
        ("get_hits", "1"),
        ("get_misses", "1"),
        ("cmd_set", "1"),
        ("incr_hits", "1"),
        ("cmd_touch", "1"),
        ("touch_misses", "1"),
    ] {
        assert_eq!(st[k], v, "{k}");
    }
}
