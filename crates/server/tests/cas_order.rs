//! CAS uniques ordered in time per key, over real sockets: each new version of a key
//! gets a larger unique than every earlier one, as memcached's one counter gives,
//! whatever TTL group, size or command wrote it; and meta `I` (a unique lower than
//! the item's marks a stale write) judges by that order. Each test asserts the
//! order of the uniques the server returned, never their values, and the reply
//! bytes with the non-zero uniques masked, which are memcached 1.6.45's: every
//! test passes with `MEMCRAB_TEST_SERVER=$PWD/../shared/memcached-1.6.45/bin/memcached
//! cargo test --release -p memcrab-server --test cas_order`.

mod common;

use common::{Client, Server};

fn server() -> (Server, Client) {
    let s = Server::tcp(&["-m", "64"]);
    let c = s.connect();
    (s, c)
}

/// Sends a meta request with a data block (`ms`), or none (`data` None), and
/// returns its reply line with every non-zero unique masked (`c#`), and the
/// unique it returned (0 if none).
fn meta(c: &mut Client, line: &str, data: Option<&[u8]>) -> (String, u64) {
    let mut req = format!("{line}\r\n").into_bytes();
    if let Some(d) = data {
        req.extend_from_slice(d);
        req.extend_from_slice(b"\r\n");
    }
    c.send(&req);
    let reply = String::from_utf8(c.read_line()).expect("utf-8");
    let mut unique = 0;
    let masked: Vec<String> = reply
        .split(' ')
        .map(|tok| match tok.strip_prefix('c').map(str::parse::<u64>) {
            Some(Ok(n)) if n != 0 => {
                unique = n;
                "c#".to_string()
            }
            _ => tok.to_string(),
        })
        .collect();
    if reply.starts_with("VA ") {
        // The value line: read and keep it.
        let v = String::from_utf8(c.read_line()).expect("utf-8");
        return (format!("{} / {v}", masked.join(" ")), unique);
    }
    (masked.join(" "), unique)
}

/// `ms <key> <len> <flags>` with `data`.
fn ms(c: &mut Client, key: &str, flags: &str, data: &[u8]) -> (String, u64) {
    meta(c, &format!("ms {key} {} {flags}", data.len()), Some(data))
}

fn increasing(what: &str, uniques: &[u64]) {
    for w in uniques.windows(2) {
        assert!(w[1] > w[0], "{what}: uniques not increasing: {uniques:?}");
    }
}

/// TTL flags that move consecutive versions between TTL groups.
const TTLS: [&str; 4] = ["T0", "T5000", "T3", "T100"];

#[test]
fn alternating_ttls_and_sizes_give_increasing_uniques() {
    let (_s, mut c) = server();
    let big = vec![b'b'; 300_000];
    let mut uniques = Vec::new();
    for i in 0..24 {
        // Another key in the next TTL group, so groups' segments open in turn.
        let (r, _) = ms(&mut c, &format!("fill{i}"), TTLS[(i + 1) % 4], b"f");
        assert_eq!(r, "HD");
        let data: &[u8] = if i % 5 == 2 { &big } else { b"value" };
        let (r, u) = ms(&mut c, "k", &format!("c {}", TTLS[i % 4]), data);
        assert_eq!(r, "HD c#");
        uniques.push(u);
        let (r, u) = meta(&mut c, "mg k c", None);
        assert_eq!((r.as_str(), u), ("HD c#", *uniques.last().unwrap_or(&0)));
    }
    increasing("ms with alternating TTLs", &uniques);
}

#[test]
fn a_stale_writer_is_judged_by_time() {
    let (_s, mut c) = server();
    let mut uniques = Vec::new();
    for i in 0..8 {
        ms(&mut c, &format!("fill{i}"), TTLS[(i + 1) % 4], b"f");
        uniques.push(ms(&mut c, "k", &format!("c {}", TTLS[i % 4]), b"v").1);
    }
    increasing("ms", &uniques);
    // Every earlier unique is lower than the current one: each stale write is
    // stored, marked stale (X) and given a new, larger unique.
    let mut cur = uniques[7];
    for (i, old) in uniques[..7].iter().enumerate() {
        let (r, u) = ms(&mut c, "k", &format!("I C{old} c"), b"s");
        assert_eq!(r, "HD c#", "stale write {i}");
        assert!(u > cur);
        cur = u;
        let (r, _) = meta(&mut c, "mg k c v", None);
        assert!(r.starts_with("VA 1 c# ") && r.contains('X'), "{r}");
        // The current unique matches: a plain (not stale) store.
        let (r, u) = ms(&mut c, "k", &format!("I C{cur} c {}", TTLS[i % 4]), b"v");
        assert_eq!(r, "HD c#");
        assert!(u > cur);
        cur = u;
        assert_eq!(meta(&mut c, "mg k c v", None).0, "VA 1 c# / v");
    }
    // A unique above the current one is no earlier read: refused.
    assert_eq!(
        ms(&mut c, "k", &format!("I C{} c", cur + 1), b"x").0,
        "EX c0"
    );
}

#[test]
fn md_invalidate_then_ms_with_the_unique_read_before() {
    let (_s, mut c) = server();
    let mut uniques = Vec::new();
    for i in 0..6 {
        ms(&mut c, &format!("fill{i}"), TTLS[(i + 1) % 4], b"f");
        let (_, read) = ms(&mut c, "k", &format!("c {}", TTLS[i % 4]), b"v");
        uniques.push(read);
        // md I gives the item a new unique, marked stale; a writer holding the
        // unique read before it writes a stale item, winning the token.
        assert_eq!(meta(&mut c, "md k I", None).0, "HD");
        let (r, after_md) = meta(&mut c, "mg k c", None);
        assert!(r.starts_with("HD c# ") && r.contains('X'), "{r}");
        assert!(after_md > read);
        uniques.push(after_md);
        let (r, u) = ms(&mut c, "k", &format!("I C{read} c"), b"w");
        assert_eq!(r, "HD c#");
        uniques.push(u);
    }
    increasing("ms, md I, ms I", &uniques);
}

#[test]
fn append_incr_and_touch_keep_the_order() {
    let (_s, mut c) = server();
    let mut uniques = vec![ms(&mut c, "n", "c T100", b"5").1];
    for i in 0..16 {
        ms(&mut c, &format!("fill{i}"), TTLS[(i + 1) % 4], b"f");
        let (r, u) = match i % 4 {
            0 => ms(&mut c, "n", "MA c", b"1"),
            1 => meta(&mut c, "ma n c", None),
            2 => ms(&mut c, "n", "MP c", b"2"),
            _ => meta(&mut c, "ma n MD c", None),
        };
        assert_eq!(r, "HD c#", "step {i}");
        uniques.push(u);
        // A touch keeps the unique (an item without a TTL field is copied).
        let (r, t) = meta(&mut c, &format!("mg n c {}", TTLS[i % 4]), None);
        assert_eq!((r.as_str(), t), ("HD c#", u));
    }
    increasing("append, incr, prepend, decr", &uniques);
}

#[test]
fn a_deleted_key_stored_again_orders_after_its_past() {
    let (_s, mut c) = server();
    let mut uniques = Vec::new();
    for i in 0..12 {
        ms(&mut c, &format!("fill{i}"), TTLS[(i + 2) % 4], b"f");
        uniques.push(ms(&mut c, "d", &format!("c {}", TTLS[(i + 1) % 4]), b"v").1);
        assert_eq!(meta(&mut c, "md d", None).0, "HD");
        ms(&mut c, &format!("more{i}"), TTLS[i % 4], b"f");
    }
    increasing("delete and store again", &uniques);
    let (_, before) = ms(&mut c, "f", "c T5000", b"v");
    c.call(b"flush_all\r\n", b"OK\r\n");
    let (_, after) = ms(&mut c, "f", "c T0", b"v");
    assert!(after > before);
}
