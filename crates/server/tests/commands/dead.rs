//! Dead items met by any command, over TCP. memcached counts an expired item as
//! `get_expired` (a flushed one as `get_flushed`) in `do_item_get`, which every
//! command that looks its key up calls: gets, stores, deletes, incr/decr, touch, in
//! the text, meta and binary protocols alike. A store refused before its lookup
//! (an add, append or cas too large for `-I`) counts nothing; a set or `ms` that is
//! refused looks the key up to drop its old item, and counts.
//!
//! Each row stores an item that has already expired (text exptime -1; binary
//! 2592001, an absolute time before the server started) and, in the same write, the
//! command under test and a sentinel. memcached's LRU maintainer thread can still
//! reclaim the dead item between the two (it pulls expired items off an LRU's tail,
//! counting `reclaimed`), and the command then misses without counting it: see
//! [`dead_counted`]. Its crawler, which counts its reclaims only when a crawl ends,
//! is off (`-o no_lru_crawler`, which memcrab reads and checks). `get_flushed` takes the same path in memcrab (the store's
//! `Met`); it is checked against both engines in crates/store/tests/dead.rs, as
//! memcached flushes lazily only items older than a second.

use super::*;

/// A value too large for the default `-I`.
fn too_large() -> Vec<u8> {
    vec![b'x'; 2 * ITEM_SIZE_MAX]
}

/// Text and meta requests on a dead item (`K` is the key), memcached 1.6.45's reply,
/// and whether the request counts `get_expired`.
fn text_rows() -> Vec<(Vec<u8>, &'static [u8], u64)> {
    let big = too_large();
    let sized = |head: &str| cat(&[head.as_bytes(), b"\r\n", &big, b"\r\n"]);
    let n = big.len();
    let rows: Vec<(Vec<u8>, &'static [u8], u64)> = vec![
        (b"set K 0 0 1\r\ny\r\n".to_vec(), b"STORED\r\n", 1),
        (b"add K 0 0 1\r\ny\r\n".to_vec(), b"STORED\r\n", 1),
        (b"replace K 0 0 1\r\ny\r\n".to_vec(), b"NOT_STORED\r\n", 1),
        (b"append K 0 0 1\r\ny\r\n".to_vec(), b"NOT_STORED\r\n", 1),
        (b"prepend K 0 0 1\r\ny\r\n".to_vec(), b"NOT_STORED\r\n", 1),
        (b"cas K 0 0 1 1\r\ny\r\n".to_vec(), b"NOT_FOUND\r\n", 1),
        (b"get K\r\n".to_vec(), b"END\r\n", 1),
        (b"gets K\r\n".to_vec(), b"END\r\n", 1),
        (b"gat 10 K\r\n".to_vec(), b"END\r\n", 1),
        (b"touch K 10\r\n".to_vec(), b"NOT_FOUND\r\n", 1),
        (b"delete K\r\n".to_vec(), b"NOT_FOUND\r\n", 1),
        (b"incr K 1\r\n".to_vec(), b"NOT_FOUND\r\n", 1),
        (b"decr K 1\r\n".to_vec(), b"NOT_FOUND\r\n", 1),
        (sized(&format!("set K 0 0 {n}")), TOO_LARGE, 1),
        (sized(&format!("add K 0 0 {n}")), TOO_LARGE, 0),
        (sized(&format!("append K 0 0 {n}")), TOO_LARGE, 0),
        (sized(&format!("cas K 0 0 {n} 1")), TOO_LARGE, 0),
        (b"ms K 1\r\ny\r\n".to_vec(), b"HD\r\n", 1),
        (b"ms K 1 q\r\ny\r\n".to_vec(), b"", 1),
        (b"ms K 1 MA\r\ny\r\n".to_vec(), b"NS\r\n", 1),
        (b"ms K 1 MA N10\r\ny\r\n".to_vec(), b"HD\r\n", 1),
        (b"ms K 1 ME\r\ny\r\n".to_vec(), b"HD\r\n", 1),
        (b"ms K 1 MR\r\ny\r\n".to_vec(), b"NS\r\n", 1),
        (b"ms K 1 C5\r\ny\r\n".to_vec(), b"NF\r\n", 1),
        (b"ms K 1 C5 I\r\ny\r\n".to_vec(), b"NF\r\n", 1),
        (sized(&format!("ms K {n}")), TOO_LARGE, 1),
        (sized(&format!("ms K {n} ME")), TOO_LARGE, 1),
        (b"mg K v\r\n".to_vec(), b"EN\r\n", 1),
        (b"mg K\r\n".to_vec(), b"EN\r\n", 1),
        (b"mg K T10\r\n".to_vec(), b"EN\r\n", 1),
        (b"mg K N10 v\r\n".to_vec(), b"VA 0 W\r\n\r\n", 1),
        (
            cat(&[b"mg K N10 O", &[b'o'; 40], b" v\r\n"]),
            b"CLIENT_ERROR opaque token too long\r\n",
            1,
        ),
        (b"me K\r\n".to_vec(), b"EN\r\n", 1),
        (b"md K\r\n".to_vec(), b"NF\r\n", 1),
        (b"md K q\r\n".to_vec(), b"NF\r\n", 1),
        (b"md K I\r\n".to_vec(), b"NF\r\n", 1),
        (b"md K C5\r\n".to_vec(), b"NF\r\n", 1),
        (b"md K x\r\n".to_vec(), b"NF\r\n", 1),
        (b"ma K\r\n".to_vec(), b"NF\r\n", 1),
        (b"ma K MD\r\n".to_vec(), b"NF\r\n", 1),
        (b"ma K C5\r\n".to_vec(), b"NF\r\n", 1),
        (b"ma K N10\r\n".to_vec(), b"HD\r\n", 1),
    ];
    rows
}

/// Replaces each `K` token of `req` (a request line's key) with `key`; the data
/// blocks here hold no `K`.
fn with_key(req: &[u8], key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(req.len() + key.len());
    let mut i = 0;
    while i < req.len() {
        if req[i] == b'K' && i > 0 && req[i - 1] == b' ' {
            out.extend_from_slice(key.as_bytes());
        } else {
            out.push(req[i]);
        }
        i += 1;
    }
    out
}

/// The servers for these rows: memcached's crawler off (see the module's notes).
const NO_CRAWLER: &[&str] = &["-o", "no_lru_crawler"];

/// `get_expired` and `reclaimed` now, to compare with the next row's.
fn dead_stats(c: &mut common::Client) -> (u64, u64) {
    let st = c.stats("");
    let n = |name: &str| st[name].parse::<u64>().expect("a number");
    (n("get_expired"), n("reclaimed"))
}

/// Whether `want` dead items met were counted: `get_expired` rose by exactly `want`;
/// or, against memcached only, by less, and its LRU maintainer reclaimed at least
/// the rest first (`reclaimed` rose by as many), so the commands missed them
/// without counting. memcrab has no such thread: its counts are always exact.
pub(crate) fn dead_seen(expired: u64, reclaimed: u64, want: u64) -> bool {
    expired == want
        || (common::against_memcached() && expired < want && reclaimed >= want - expired)
}

/// [`dead_seen`] for one row, from the stats before and after it.
fn dead_counted(before: (u64, u64), after: (u64, u64), counts: u64) -> bool {
    dead_seen(after.0 - before.0, after.1 - before.1, counts)
}

#[test]
fn dead_items_count_for_every_text_and_meta_command() {
    let s = Server::tcp(NO_CRAWLER);
    let mut c = s.connect();
    let mut before = dead_stats(&mut c);
    for (i, (req, want, counts)) in text_rows().iter().enumerate() {
        let key = format!("dead{i}");
        c.call(
            &cat(&[
                &store("set", &key, 0, -1, b"1"),
                &with_key(req, &key),
                b"mn\r\n",
            ]),
            &cat(&[b"STORED\r\n", want, b"MN\r\n"]),
        );
        let after = dead_stats(&mut c);
        let shown = String::from_utf8_lossy(&req[..req.len().min(40)]).into_owned();
        assert!(
            dead_counted(before, after, *counts),
            "get_expired, reclaimed {before:?} -> {after:?} after {shown:?} (counts {counts})"
        );
        before = after;
    }
    // A plain miss counts nothing.
    c.call(b"delete nothing-here\r\nmn\r\n", b"NOT_FOUND\r\nMN\r\n");
    assert_eq!(c.stat("get_expired"), before.0);
}

/// A binary request: header (magic, opcode, key length, extras length, body length,
/// CAS), extras, key, value.
fn packet(op: u8, key: &[u8], extras: &[u8], value: &[u8], cas: u64) -> Vec<u8> {
    let mut p = vec![0x80, op];
    p.extend_from_slice(&(key.len() as u16).to_be_bytes());
    p.extend_from_slice(&[extras.len() as u8, 0, 0, 0]);
    p.extend_from_slice(&((extras.len() + key.len() + value.len()) as u32).to_be_bytes());
    p.extend_from_slice(&[0; 4]);
    p.extend_from_slice(&cas.to_be_bytes());
    p.extend_from_slice(extras);
    p.extend_from_slice(key);
    p.extend_from_slice(value);
    p
}

/// A binary store's extras: flags and expiration.
fn store_extras(exptime: u32) -> Vec<u8> {
    cat(&[&0u32.to_be_bytes(), &exptime.to_be_bytes()])
}

/// incr/decr extras: delta, initial value, expiration (0xffffffff: no initial value).
fn arith_extras(initial: u64, exptime: u32) -> Vec<u8> {
    cat(&[
        &1u64.to_be_bytes(),
        &initial.to_be_bytes(),
        &exptime.to_be_bytes(),
    ])
}

/// Reads binary responses up to and including the NOOP's, as (opcode, status).
fn read_until_noop(c: &mut common::Client) -> Vec<(u8, u16)> {
    let mut seen = Vec::new();
    // Bounded: every row sends at most three requests and the NOOP.
    for _ in 0..8 {
        let head = c.read_exact_bytes(24);
        let body = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
        c.read_exact_bytes(body);
        seen.push((head[1], u16::from_be_bytes([head[6], head[7]])));
        if head[1] == 0x0a {
            return seen;
        }
    }
    panic!("no NOOP response among {seen:?}");
}

#[test]
fn dead_items_count_for_every_binary_command() {
    const SET: u8 = 0x01;
    const NOOP: u8 = 0x0a;
    // An absolute expiration before the server started: stored already expired.
    const EXPIRED: u32 = 30 * 24 * 3600 + 1;
    const NO_INITIAL: u32 = 0xffff_ffff;
    let big = too_large();
    let touch = 10u32.to_be_bytes();
    // (opcode, extras, value, CAS, memcached 1.6.45's responses after the SET's
    // and before the NOOP's as (opcode, status), counts get_expired).
    type Row<'a> = (u8, Vec<u8>, &'a [u8], u64, Vec<(u8, u16)>, u64);
    let rows: Vec<Row<'_>> = vec![
        (0x00, vec![], b"", 0, vec![(0x00, 1)], 1),
        (0x0c, vec![], b"", 0, vec![(0x0c, 1)], 1),
        (SET, store_extras(0), b"y", 0, vec![(SET, 0)], 1),
        (0x11, store_extras(0), b"y", 0, vec![], 1),
        (0x02, store_extras(0), b"y", 0, vec![(0x02, 0)], 1),
        (0x03, store_extras(0), b"y", 0, vec![(0x03, 1)], 1),
        (0x0e, vec![], b"y", 0, vec![(0x0e, 5)], 1),
        (0x19, vec![], b"y", 0, vec![(0x19, 5)], 1),
        (0x0f, vec![], b"y", 0, vec![(0x0f, 5)], 1),
        (SET, store_extras(0), b"y", 5, vec![(SET, 1)], 1),
        (0x04, vec![], b"", 0, vec![(0x04, 1)], 1),
        (0x14, vec![], b"", 0, vec![(0x14, 1)], 1),
        (0x04, vec![], b"", 5, vec![(0x04, 1)], 1),
        (
            0x05,
            arith_extras(0, NO_INITIAL),
            b"",
            0,
            vec![(0x05, 1)],
            1,
        ),
        (
            0x15,
            arith_extras(0, NO_INITIAL),
            b"",
            0,
            vec![(0x15, 1)],
            1,
        ),
        (0x05, arith_extras(7, 0), b"", 0, vec![(0x05, 0)], 1),
        (
            0x06,
            arith_extras(0, NO_INITIAL),
            b"",
            0,
            vec![(0x06, 1)],
            1,
        ),
        (0x1c, touch.to_vec(), b"", 0, vec![(0x1c, 1)], 1),
        (0x1d, touch.to_vec(), b"", 0, vec![(0x1d, 1)], 1),
        (SET, store_extras(0), &big, 0, vec![(SET, 3)], 1),
        (0x02, store_extras(0), &big, 0, vec![(0x02, 3)], 0),
        (0x03, store_extras(0), &big, 0, vec![(0x03, 3)], 0),
        (0x0e, vec![], &big, 0, vec![(0x0e, 3)], 0),
    ];
    let s = Server::tcp(NO_CRAWLER);
    let mut text = s.connect();
    let mut before = dead_stats(&mut text);
    for (i, (op, extras, value, cas, want, counts)) in rows.iter().enumerate() {
        let key = format!("bdead{i}");
        let mut c = s.connect();
        c.send(&cat(&[
            &packet(SET, key.as_bytes(), &store_extras(EXPIRED), b"1", 0),
            &packet(*op, key.as_bytes(), extras, value, *cas),
            &packet(NOOP, b"", &[], b"", 0),
        ]));
        let mut all = vec![(SET, 0)];
        all.extend_from_slice(want);
        all.push((NOOP, 0));
        assert_eq!(read_until_noop(&mut c), all, "opcode {op:#04x}");
        let after = dead_stats(&mut text);
        assert!(
            dead_counted(before, after, *counts),
            "get_expired, reclaimed {before:?} -> {after:?} after opcode {op:#04x} (counts {counts})"
        );
        before = after;
    }
}

/// With `watch deletions` on, memcrab looks a deleted item up first to log it; a
/// dead item met there still counts once.
#[test]
fn dead_items_count_once_while_deletions_are_watched() {
    let s = Server::tcp(NO_CRAWLER);
    let mut watcher = s.connect();
    watcher.call(b"watch deletions\r\n", b"OK\r\n");
    let mut c = s.connect();
    c.call(
        &cat(&[
            &store("set", "w1", 0, -1, b"1"),
            b"delete w1\r\n",
            &store("set", "w2", 0, -1, b"1"),
            b"md w2\r\nmn\r\n",
        ]),
        b"STORED\r\nNOT_FOUND\r\nSTORED\r\nNF\r\nMN\r\n",
    );
    let (expired, reclaimed) = dead_stats(&mut c);
    assert!(dead_seen(expired, reclaimed, 2), "{expired} {reclaimed}");
}
