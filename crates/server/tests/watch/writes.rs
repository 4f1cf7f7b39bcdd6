//! `watch fetchers` for the lookups inside writes: memcached's `do_store_item`,
//! `do_add_delta` and its deletes look the key up with `do_item_get`, whose
//! `item_get` line comes before the command's own line (t/watcher_connid.t). Every
//! check holds against memcached 1.6.45 too (see main.rs).

use crate::common::{against_memcached, store, Client, Server};
use crate::{events, sentinel, Watcher};

/// A binary request (magic, opcode, key length, extras length, body length).
fn binary(op: u8, key: &[u8], extras: &[u8], value: &[u8]) -> Vec<u8> {
    let body = (key.len() + extras.len() + value.len()) as u32;
    let mut p = vec![0x80, op];
    p.extend_from_slice(&(key.len() as u16).to_be_bytes());
    p.extend_from_slice(&[extras.len() as u8, 0, 0, 0]);
    p.extend_from_slice(&body.to_be_bytes());
    p.extend_from_slice(&[0; 12]);
    p.extend_from_slice(&[extras, key, value].concat());
    p
}

/// Sends a binary request and reads its reply; returns the reply's status.
fn binary_call(c: &mut Client, req: &[u8]) -> u16 {
    c.send(req);
    let h = c.read_exact_bytes(24);
    let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
    c.read_exact_bytes(body as usize);
    u16::from_be_bytes([h[6], h[7]])
}

#[test]
fn fetchers_log_the_lookups_inside_writes() {
    // memcached's do_store_item, do_add_delta and its deletes look the key up with
    // do_item_get, whose `item_get` line comes before the command's own line.
    let server = Server::tcp(&[]);
    let mut c = server.connect();
    let mut w = Watcher::start(&server, "watch fetchers mutations deletions");
    c.call(&store("set", "k", 0, 0, b"abc"), b"STORED\r\n");
    c.call(&store("set", "k", 0, 0, b"abc"), b"STORED\r\n");
    c.call(&store("add", "k", 0, 0, b"x"), b"NOT_STORED\r\n");
    c.call(&store("add", "a", 0, 0, b"x"), b"STORED\r\n");
    c.call(&store("set", "n", 0, 0, b"10"), b"STORED\r\n");
    c.call(b"incr n 5\r\n", b"15\r\n");
    c.call(b"decr nx 1\r\n", b"NOT_FOUND\r\n");
    c.call(b"delete a\r\n", b"DELETED\r\n");
    c.call(b"delete a\r\n", b"NOT_FOUND\r\n");
    c.call(b"touch k 0\r\n", b"TOUCHED\r\n");
    c.call(b"ms m 2\r\nhi\r\n", b"HD\r\n");
    c.call(b"ms m 2 MA\r\nhi\r\n", b"HD\r\n");
    c.call(b"md m\r\n", b"HD\r\n");
    c.call(b"ma n\r\n", b"HD\r\n");
    // Created by `ma N`: the add that creates it looks again.
    c.call(b"ma nn N0 J7\r\n", b"HD\r\n");
    sentinel(&mut c);
    let f = |key: &str, size: usize| match size {
        0 => format!("type=item_get key={key} status=not_found clsid=0 cfd=F size=0"),
        n => format!("type=item_get key={key} status=found clsid=1 cfd=F size={n}"),
    };
    let st = |key: &str, status: &str, cmd: &str, size: usize| {
        format!(
            "type=item_store key={key} status={status} cmd={cmd} ttl=0 clsid=1 cfd=F size={size}"
        )
    };
    let want = [
        f("k", 0),
        st("k", "stored", "set", 3),
        f("k", 3),
        st("k", "stored", "set", 3),
        f("k", 3),
        st("k", "not_stored", "add", 1),
        f("a", 0),
        st("a", "stored", "add", 1),
        f("n", 0),
        st("n", "stored", "set", 2),
        f("n", 2),
        f("nx", 0),
        f("a", 1),
        "type=deleted key=a cmd=delete clsid=1 size=1".to_string(),
        f("a", 0),
        f("k", 3),
        f("m", 0),
        st("m", "stored", "set", 2),
        f("m", 2),
        st("m", "stored", "append", 4),
        f("m", 4),
        "type=deleted key=m cmd=md clsid=1 size=4".to_string(),
        f("n", 2),
        f("nn", 0),
        f("nn", 0),
        st("nn", "stored", "add", 1),
        f("sentinel", 0),
    ];
    assert_eq!(events(&w.until("key=sentinel")), want);

    // The binary protocol's writes, on a connection of its own.
    let mut b = server.connect();
    let flags_exptime = [0u8; 8];
    assert_eq!(
        binary_call(&mut b, &binary(0x01, b"b", &flags_exptime, b"v")),
        0
    );
    assert_eq!(
        binary_call(&mut b, &binary(0x02, b"b", &flags_exptime, b"v")),
        2
    );
    assert_eq!(binary_call(&mut b, &binary(0x04, b"b", &[], &[])), 0);
    // An INCREMENT with an initial value (delta 1, initial 5, exptime 0).
    let incr = [1u64.to_be_bytes(), 5u64.to_be_bytes()].concat();
    let incr = [&incr[..], &[0; 4]].concat();
    assert_eq!(binary_call(&mut b, &binary(0x05, b"bn", &incr, &[])), 0);
    assert_eq!(binary_call(&mut b, &binary(0x05, b"bn", &incr, &[])), 0);
    // The sentinel on the same connection: memcached's logger thread gathers each
    // worker thread's lines in turn, so a line from another connection (another
    // thread) can overtake these.
    assert_eq!(binary_call(&mut b, &binary(0x00, b"sentinel", &[], &[])), 1);
    let want = [
        f("b", 0),
        st("b", "stored", "set", 1),
        f("b", 1),
        st("b", "not_stored", "add", 1),
        f("b", 1),
        f("bn", 0),
        f("bn", 0),
        st("bn", "stored", "add", 1),
        f("bn", 1),
        f("sentinel", 0),
    ];
    assert_eq!(events(&w.until("key=sentinel")), want);
}

#[test]
fn watching_fetchers_moves_nothing_a_client_sees() {
    // The lookup a watched write logs neither bumps the item nor reclaims a dead
    // one: `mg h t` (fetched, ttl) after an in-place incr, which keeps the item's
    // bits, and the counters read as without a watcher.
    let run = |watch: bool| {
        let server = Server::tcp(&[]);
        let mut c = server.connect();
        c.call(&store("set", "k", 0, 0, b"1"), b"STORED\r\n");
        for gone in ["gone", "gone2", "gone3"] {
            c.call(&store("set", gone, 0, -1, b"1"), b"STORED\r\n");
        }
        let _w = watch.then(|| Watcher::start(&server, "watch fetchers"));
        c.call(&store("add", "k", 0, 0, b"2"), b"NOT_STORED\r\n");
        c.call(b"incr k 1\r\n", b"2\r\n");
        c.call(b"delete gone\r\n", b"NOT_FOUND\r\n");
        c.call(&store("add", "gone2", 0, 0, b"1"), b"STORED\r\n");
        c.call(b"incr gone3 1\r\n", b"NOT_FOUND\r\n");
        c.call(b"mg k h t v\r\n", b"VA 1 h0 t-1\r\n2\r\n");
        [
            "get_hits",
            "get_misses",
            "get_expired",
            "incr_hits",
            "delete_misses",
        ]
        .map(|s| c.stat(s))
    };
    let quiet = run(false);
    if !against_memcached() {
        // memcached's LRU maintainer may reap the dead items before the writes meet
        // them.
        assert_eq!(quiet, [1, 0, 3, 1, 1]);
        assert_eq!(run(true), quiet);
    } else {
        run(true);
    }
}
