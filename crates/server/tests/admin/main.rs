//! The admin commands operators and their tools send: `lru_crawler` (crawls and key
//! dumps), `slabs`, `lru`, `stats detail`, `stats sizes`, and `-X`. Replies are
//! memcached's, byte for byte: the key dumps' format (a leading `OK`, `flags=`), `-X`
//! and `stats sizes` as 1.6.45 answers them (tests/today.rs checks those against it),
//! the argument checks as 1.6.45's `process_request` answers them (strict numbers;
//! `noreply` anywhere on the line silences the reply, errors included). Where memcrab answers
//! differently on purpose (`slabs reassign`, a no-op with segments) the test says so
//! and checks memcrab only.
//!
//! memcached 1.6.18 quirks the tests step around: its crawler serves one dump at a
//! time and hands the connection back in a state where later commands on it may be
//! lost, so each dump here gets a connection of its own; and a dump that answers
//! `NOTSTARTED` leaves the crawler's client slot taken, failing every later dump on
//! that server, so that case runs on a server of its own.
//!
//!   main.rs     lru_crawler crawls and dumps, slabs, lru, stats detail|sizes, -X
//!   conns.rs    stats conns: each connection's state
//!   crawler.rs  dumps after queued replies; -o no_lru_crawler / no_modern

#[path = "../common/mod.rs"]
mod common;
mod conns;
mod crawler;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use common::{against_memcached, store, Client, Server};

/// One parsed `lru_crawler metadump` line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Meta {
    key: String,
    exp: i64,
    la: i64,
    cas: u64,
    fetch: bool,
    cls: u32,
    size: u64,
    flags: u32,
}

/// memcached's `uriencode` reversed.
fn uridecode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).expect("hex");
            out.push(u8::from_str_radix(hex, 16).expect("hex digits"));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("utf-8 key")
}

/// Parses a metadump line exactly as memcached 1.6.45 writes it (every field
/// followed by a space, `flags=` last).
fn parse_meta(line: &str) -> Meta {
    let fields: Vec<(&str, &str)> = line
        .strip_suffix(' ')
        .unwrap_or_else(|| panic!("no trailing space in {line:?}"))
        .split(' ')
        .map(|f| {
            f.split_once('=')
                .unwrap_or_else(|| panic!("bad field in {line:?}"))
        })
        .collect();
    let names: Vec<&str> = fields.iter().map(|f| f.0).collect();
    assert_eq!(
        names,
        ["key", "exp", "la", "cas", "fetch", "cls", "size", "flags"],
        "{line:?}"
    );
    let num = |i: usize| -> i64 { fields[i].1.parse().unwrap_or_else(|_| panic!("{line:?}")) };
    let key = fields[0].1;
    assert!(
        key.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-._~%".contains(&c)),
        "key not URI-encoded: {line:?}"
    );
    Meta {
        key: uridecode(key),
        exp: num(1),
        la: num(2),
        cas: num(3) as u64,
        fetch: match fields[4].1 {
            "yes" => true,
            "no" => false,
            other => panic!("fetch={other} in {line:?}"),
        },
        cls: num(5) as u32,
        size: num(6) as u64,
        flags: num(7) as u32,
    }
}

/// Sends `lru_crawler metadump <arg>` on a connection of its own and returns the
/// lines (`OK\r\n` first, as memcached 1.6.43; then each ends in a bare `\n`; the
/// dump ends with `END\r\n`), or the one-line reply if it was refused.
fn metadump(s: &Server, arg: &str) -> Result<Vec<Meta>, String> {
    let mut c = s.connect();
    let first = common::start_dump(&mut c, format!("lru_crawler metadump {arg}\r\n").as_bytes());
    if first != b"OK\r" {
        return Err(String::from_utf8_lossy(&first).into_owned());
    }
    // The lines end in `\n` only, so everything up to `END\r\n` reads as one line.
    let text = String::from_utf8(c.read_line()).expect("utf-8 dump");
    match text.strip_suffix("END") {
        Some(body) => Ok(body.lines().map(parse_meta).collect()),
        None => Err(text),
    }
}

fn keys(lines: &[Meta]) -> BTreeSet<String> {
    let set: BTreeSet<String> = lines.iter().map(|m| m.key.clone()).collect();
    assert_eq!(set.len(), lines.len(), "a key was dumped twice: {lines:?}");
    set
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

/// `lru_crawler disable` answers before memcached's crawler thread has stopped, and
/// only then do crawls answer "disabled": wait for `stats settings` to say so.
fn wait_crawler_off(c: &mut Client) {
    let deadline = std::time::Instant::now() + common::REPLY_TIMEOUT;
    while c.stats("settings")["lru_crawler"] != "no" {
        assert!(
            std::time::Instant::now() < deadline,
            "the crawler did not stop"
        );
        std::thread::yield_now();
    }
}

/// Sends a crawl request (or a dump that is refused) and expects `want`. memcached
/// runs crawls on its crawler thread one at a time (one starts with the server) and
/// answers `BUSY` meanwhile: wait for it to finish (`lru_crawler_running 0`) and
/// ask again. memcrab never answers `BUSY`.
fn crawl(c: &mut Client, req: &[u8], want: &[u8]) {
    let deadline = std::time::Instant::now() + common::REPLY_TIMEOUT;
    loop {
        c.send(req);
        let line = c.read_line();
        if line.starts_with(b"BUSY") && against_memcached() {
            while c.stat("lru_crawler_running") != 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the crawl did not end"
                );
                std::thread::yield_now();
            }
            continue;
        }
        assert_eq!(
            [line.as_slice(), b"\r\n"].concat(),
            want,
            "{}",
            String::from_utf8_lossy(req)
        );
        return;
    }
}

#[test]
fn lru_crawler_replies() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let rows: &[(&[u8], &[u8])] = &[
        (b"lru_crawler tocrawl 100\r\n", b"OK\r\n"),
        // 1.6.45 reads the number strictly (1.6.18 wrapped it to 0).
        (
            b"lru_crawler tocrawl 4294967296\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        ),
        (
            b"lru_crawler tocrawl -1\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        ),
        (b"lru_crawler tocrawl\r\n", b"ERROR\r\n"),
        (b"lru_crawler sleep 1000000\r\n", b"OK\r\n"),
        (
            b"lru_crawler sleep 1000001\r\n",
            b"CLIENT_ERROR sleep must be one second or less\r\n",
        ),
        (
            b"lru_crawler sleep x\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        ),
        (b"lru_crawler sleep 0\r\n", b"OK\r\n"),
        (b"lru_crawler crawl all\r\n", b"OK\r\n"),
        (b"lru_crawler crawl 1,2\r\n", b"OK\r\n"),
        (
            b"lru_crawler crawl 64\r\n",
            b"BADCLASS invalid class id\r\n",
        ),
        (b"lru_crawler crawl 0\r\n", b"BADCLASS invalid class id\r\n"),
        (
            b"lru_crawler crawl ,\r\n",
            b"NOTSTARTED no items to crawl\r\n",
        ),
        (
            b"lru_crawler crawl hash\r\n",
            b"ERROR an unknown error happened\r\n",
        ),
        (b"lru_crawler crawl\r\n", b"ERROR\r\n"),
        (b"lru_crawler crawl 1 2\r\n", b"ERROR\r\n"),
        (
            b"lru_crawler metadump 64\r\n",
            b"BADCLASS invalid class id\r\n",
        ),
        (
            b"lru_crawler metadump abc\r\n",
            b"BADCLASS invalid class id\r\n",
        ),
        (b"lru_crawler metadump\r\n", b"ERROR\r\n"),
        (b"lru_crawler metadump all extra\r\n", b"ERROR\r\n"),
        // The crawler runs from the start: enabling it again fails.
        (
            b"lru_crawler enable\r\n",
            b"ERROR failed to start lru crawler thread\r\n",
        ),
        (b"lru_crawler enable x\r\n", b"ERROR\r\n"),
        (b"lru_crawler bogus\r\n", b"ERROR\r\n"),
        // 1.6.45's process_request sees `noreply` as the last token and silences
        // even the ERROR of an unknown subcommand.
        (b"lru_crawler noreply\r\n", b""),
        (b"lru_crawler\r\n", b"ERROR\r\n"),
        (b"lru_crawler disable\r\n", b"OK\r\n"),
        (b"lru_crawler disable\r\n", b"OK\r\n"),
        (b"wait", b""),
        (
            b"lru_crawler metadump all\r\n",
            b"CLIENT_ERROR lru crawler disabled\r\n",
        ),
        (
            b"lru_crawler crawl all\r\n",
            b"CLIENT_ERROR lru crawler disabled\r\n",
        ),
        (b"lru_crawler tocrawl 5\r\n", b"OK\r\n"),
        (b"lru_crawler enable\r\n", b"OK\r\n"),
    ];
    for (req, want) in rows {
        if *req == b"wait" {
            wait_crawler_off(&mut c);
            continue;
        }
        if req.starts_with(b"lru_crawler crawl ") {
            crawl(&mut c, req, want);
            continue;
        }
        c.call(req, want);
        if want.is_empty() {
            c.sync();
        }
    }
    let st = c.stats("settings");
    assert_eq!(st["lru_crawler"], "yes");
    assert_eq!(st["lru_crawler_sleep"], "0");
    assert_eq!(st["lru_crawler_tocrawl"], "5");
    assert!(c.stat("lru_crawler_starts") >= 2);
    // memcached 1.6.19's mgdump.
    c.call(
        b"lru_crawler mgdump 64\r\n",
        b"BADCLASS invalid class id\r\n",
    );
    c.call(b"lru_crawler mgdump\r\n", b"ERROR\r\n");
}

/// A dump of no class at all answers NOTSTARTED (on a server of its own: see the
/// module docs).
#[test]
fn metadump_of_no_class_is_not_started() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    crawl(
        &mut c,
        b"lru_crawler metadump ,\r\n",
        b"NOTSTARTED no items to crawl\r\n",
    );
}

/// `-X` refuses key dumps and `stats detail` (after the crawler check, as memcached orders them).
#[test]
fn dumps_refused_under_x() {
    let s = Server::tcp(&["-X"]);
    let mut c = s.connect();
    c.call(
        b"lru_crawler metadump all\r\n",
        b"ERROR metadump not allowed\r\n",
    );
    c.call(
        b"lru_crawler metadump 64\r\n",
        b"ERROR metadump not allowed\r\n",
    );
    c.call(
        b"lru_crawler mgdump all\r\n",
        b"ERROR key dump not allowed\r\n",
    );
    // memcached 1.6.37: `stats detail` too.
    c.call(
        b"stats detail on\r\n",
        b"CLIENT_ERROR stats detail not allowed\r\n",
    );
    c.call(
        b"stats detail dump\r\n",
        b"CLIENT_ERROR stats detail not allowed\r\n",
    );
    assert_eq!(c.stats("settings")["dump_enabled"], "no");
    c.call(b"lru_crawler disable\r\n", b"OK\r\n");
    wait_crawler_off(&mut c);
    c.call(
        b"lru_crawler metadump all\r\n",
        b"CLIENT_ERROR lru crawler disabled\r\n",
    );
}

/// What a dump shows: every live item once, in memcached's format; never an
/// expired, flushed or deleted one.
#[test]
fn metadump_shows_live_items_only() {
    // memcached's LRU maintainer off: it relinks a fetched item (`get small1` below)
    // into another LRU in the background, and a dump's crawler walking the lists
    // meanwhile could pass it by. memcrab reads and checks the option.
    let s = Server::tcp(&["-m", "64", "-o", "no_lru_maintainer"]);
    let mut c = s.connect();
    for i in 0..20 {
        c.call(
            &store("set", &format!("flushed{i}"), 0, 0, b"x"),
            b"STORED\r\n",
        );
    }
    c.call(b"flush_all\r\n", b"OK\r\n");
    let mut live = BTreeSet::new();
    for i in 0..50 {
        let k = format!("small{i}");
        c.call(&store("set", &k, 0, 0, b"0123456789"), b"STORED\r\n");
        live.insert(k);
    }
    // Keys that need URI encoding (memcached's uriencode keeps only [A-Za-z0-9-._~]).
    for k in ["a%b", "c/d", "e~f.g-h_i", "é"] {
        c.call(&store("set", k, 0, 0, b"v"), b"STORED\r\n");
        live.insert(k.to_string());
    }
    let big = vec![b'L'; 300_000];
    for i in 0..3 {
        c.call(
            &store("set", &format!("large{i}"), 5, 0, &big),
            b"STORED\r\n",
        );
        live.insert(format!("large{i}"));
    }
    // Already expired (a negative exptime), never looked up since.
    for i in 0..10 {
        c.call(
            &store("set", &format!("expired{i}"), 0, -1, b"x"),
            b"STORED\r\n",
        );
    }
    for i in 0..10 {
        c.call(
            &store("set", &format!("deleted{i}"), 0, 0, b"x"),
            b"STORED\r\n",
        );
        c.call(format!("delete deleted{i}\r\n").as_bytes(), b"DELETED\r\n");
    }
    let before = unix_now();
    c.call(&store("set", "ttl", 4294967295, 1000, b"x"), b"STORED\r\n");
    live.insert("ttl".to_string());
    c.call(
        b"get small1\r\n",
        b"VALUE small1 0 10\r\n0123456789\r\nEND\r\n",
    );
    // memcached holds the fetched item until its worker has finished sending the
    // reply, which may be after the client has read it, and its crawler passes over
    // a held item: the next reply on the same connection says it was let go.
    c.call(b"mn\r\n", b"MN\r\n");

    let lines = metadump(&s, "all").expect("a dump");
    assert_eq!(keys(&lines), live);
    let by_key: BTreeMap<&str, &Meta> = lines.iter().map(|m| (m.key.as_str(), m)).collect();
    let ttl = by_key["ttl"];
    // memcached's unix time of an exptime is its whole-second clock (ticked by a
    // timer, against a start time it sets back) plus its start: on a loaded machine
    // seen up to 3 s off the caller's clock, so it gets 5 either way. memcrab's
    // follows the caller's within the second.
    let slack = if against_memcached() { 5 } else { 0 };
    assert!(
        (before + 1000 - slack..=unix_now() + 1001 + slack).contains(&ttl.exp),
        "exp {} is not now + 1000",
        ttl.exp
    );
    assert_eq!(by_key["small2"].exp, -1);
    // 1.6.45's `flags=`.
    assert_eq!((by_key["small2"].flags, ttl.flags), (0, u32::MAX));
    assert!((before - 5..=unix_now() + 1).contains(&by_key["small2"].la));
    assert!(by_key["small1"].fetch && !by_key["small2"].fetch);
    assert!(lines.iter().all(|m| m.cas != 0 && m.size > 0));
    let small_cls = by_key["small2"].cls;
    let large_cls = by_key["large0"].cls;
    assert_ne!(small_cls, large_cls);
    assert!(by_key["large0"].size > 300_000);
    if !against_memcached() {
        assert_eq!((small_cls, large_cls), (1, 2));
    }

    // `hash` walks everything too; a class list only its classes.
    let hashed = metadump(&s, "hash").expect("a dump");
    assert_eq!(keys(&hashed), live);
    let large = metadump(&s, &large_cls.to_string()).expect("a dump");
    let want: BTreeSet<String> = (0..3).map(|i| format!("large{i}")).collect();
    assert_eq!(keys(&large), want);
    let both = metadump(&s, &format!("{small_cls},{large_cls}")).expect("a dump");
    assert_eq!(keys(&both), live);
    // A class with no items dumps nothing.
    assert_eq!(metadump(&s, "63"), Ok(vec![]));
}

/// memcrab serves what follows a dump on the same connection (memcached hands the
/// connection to its crawler thread and may lose it), and `mgdump` (1.6.19).
#[test]
fn mgdump_and_pipelining_after_a_dump() {
    if against_memcached() {
        return;
    }
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.call(&store("set", "plain", 0, 0, b"x"), b"STORED\r\n");
    // A key with a space can only come in base64 (meta `b`); mgdump sends it so.
    c.call(b"ms YSBi 1 b\r\nx\r\n", b"HD\r\n");
    c.send(b"lru_crawler mgdump all\r\nversion\r\nlru_crawler metadump all\r\nmn\r\n");
    c.expect(b"OK\r\n");
    let mut lines = BTreeSet::new();
    loop {
        let line = String::from_utf8(c.read_line()).expect("utf-8");
        if line == "EN" {
            break;
        }
        lines.insert(line);
    }
    let want: BTreeSet<String> = ["mg plain", "mg YSBi b"].map(String::from).into();
    assert_eq!(lines, want);
    let version = String::from_utf8(c.read_line()).expect("utf-8");
    assert!(version.starts_with("VERSION "), "{version}");
    // The version's reply is still queued when the second dump comes.
    c.expect(b"ERROR cannot pipeline other commands before metadump\r\nMN\r\n");
    c.send(b"lru_crawler metadump all\r\n");
    c.expect(b"OK\r\n");
    let dump = String::from_utf8(c.read_line()).expect("utf-8");
    assert!(dump.ends_with("\nEND"), "{dump}");
    assert_eq!(dump.lines().count(), 3, "{dump}");
}

/// A dump bigger than any buffer streams: the server produces it as the client
/// reads, so its memory does not grow by the dump's size. Each line is about 240
/// bytes; 150,000 of them are 36 MB, and the server's RSS may grow by far less.
#[test]
fn large_dump_streams() {
    const KEYS: usize = 150_000;
    let s = Server::tcp(&["-m", "256"]);
    let mut c = s.connect();
    let mut batch = Vec::new();
    for i in 0..KEYS {
        batch.extend_from_slice(format!("set {:0>200} 0 0 1 noreply\r\nx\r\n", i).as_bytes());
        if batch.len() > 1 << 20 {
            c.send(&batch);
            batch.clear();
        }
    }
    c.send(&batch);
    c.sync();
    let rss_before = s.rss_kib();
    let mut d = s.connect();
    // `hash`: memcached's LRU walk may miss items that move under it.
    assert_eq!(
        common::start_dump(&mut d, b"lru_crawler metadump hash\r\n"),
        b"OK\r"
    );
    // Read a little, then look: a server that built the whole dump up front would
    // have grown by its size by now. Then read the rest, looking every 4 MB.
    let mut got = d.take_pending();
    let mut peak = 0;
    let mut buf = vec![0u8; 256 * 1024];
    let mut next_look = 64 * 1024;
    while !got.ends_with(b"END\r\n") {
        let n = d.stream.read(&mut buf).expect("read the dump");
        assert!(n > 0, "connection closed mid-dump");
        got.extend_from_slice(&buf[..n]);
        if got.len() >= next_look {
            peak = peak.max(s.rss_kib());
            next_look = got.len() + (4 << 20);
        }
    }
    let text = String::from_utf8(got).expect("utf-8");
    let count = text.lines().filter(|l| l.starts_with("key=")).count();
    assert_eq!(count, KEYS);
    let grown_mib = peak.saturating_sub(rss_before) / 1024;
    eprintln!(
        "dump of {} MB: RSS grew by {grown_mib} MiB",
        text.len() >> 20
    );
    assert!(
        grown_mib < 16,
        "RSS grew by {grown_mib} MiB during a 36 MB dump"
    );
}

#[test]
fn slabs_and_lru_replies() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let rows: &[(&[u8], &[u8])] = &[
        (b"slabs automove 0\r\n", b"OK\r\n"),
        (b"slabs automove 1\r\n", b"OK\r\n"),
        (b"slabs automove 2\r\n", b"OK\r\n"),
        (b"slabs automove 3\r\n", b"ERROR\r\n"),
        (
            b"slabs automove -1\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        ),
        (
            b"slabs automove x\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        ),
        (b"slabs automove\r\n", b"ERROR\r\n"),
        (b"slabs automove 1 noreply\r\n", b""),
        (b"slabs automove 5 noreply\r\n", b""),
        (b"slabs automove x noreply\r\n", b""),
        (b"slabs automove ratio 0.5\r\n", b"OK\r\n"),
        (b"slabs automove ratio\r\n", b"ERROR\r\n"),
        (b"slabs automove ratio x\r\n", b"ERROR\r\n"),
        (b"slabs automove ratio 0.5 noreply\r\n", b""),
        (
            b"slabs reassign 1 1\r\n",
            b"SAME src and dst class are identical\r\n",
        ),
        (
            b"slabs reassign 1 64\r\n",
            b"BADCLASS invalid src or dst class id\r\n",
        ),
        (
            b"slabs reassign 100 1\r\n",
            b"BADCLASS invalid src or dst class id\r\n",
        ),
        (
            b"slabs reassign -2 1\r\n",
            b"BADCLASS invalid src or dst class id\r\n",
        ),
        (
            b"slabs reassign x 1\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        ),
        (b"slabs reassign 1\r\n", b"ERROR\r\n"),
        (b"slabs reassign 1 2 3\r\n", b"ERROR\r\n"),
        // A trailing `noreply` silences even the ERROR of a line with too many
        // tokens (1.6.45's process_request).
        (b"slabs reassign 1 2 noreply\r\n", b""),
        (b"slabs\r\n", b"ERROR\r\n"),
        (b"slabs bogus 1\r\n", b"ERROR\r\n"),
        (b"lru tune 10 20 0.1 2.0\r\n", b"OK\r\n"),
        (
            b"lru tune 50 40 0.1 2.0\r\n",
            b"ERROR hot and warm pcts must not exceed 80\r\n",
        ),
        (
            b"lru tune 10 20 0 2.0\r\n",
            b"ERROR hot/warm age factors must be greater than 0\r\n",
        ),
        (
            b"lru tune 10 20 0.1 -1\r\n",
            b"ERROR hot/warm age factors must be greater than 0\r\n",
        ),
        (b"lru tune 10 20 x 2.0\r\n", b"ERROR\r\n"),
        (b"lru tune 10 20 0.1\r\n", b"ERROR\r\n"),
        (b"lru tune 10 20 0.1 2.0 noreply\r\n", b""),
        (b"lru tune 50 40 0.1 2.0 noreply\r\n", b""),
        (b"lru tune 10 20 0.1 2.0 x y\r\n", b"OK\r\n"),
        (b"lru mode flat\r\n", b"OK\r\n"),
        (b"lru mode x\r\n", b"ERROR\r\n"),
        (b"lru mode\r\n", b"ERROR\r\n"),
        (b"lru mode flat noreply\r\n", b""),
        (b"lru temp_ttl 100\r\n", b"OK\r\n"),
        (b"lru temp_ttl x\r\n", b"ERROR\r\n"),
        (b"lru temp_ttl\r\n", b"ERROR\r\n"),
        (b"lru temp_ttl 5 noreply\r\n", b""),
        (b"lru bogus\r\n", b"ERROR\r\n"),
        (b"lru bogus noreply\r\n", b""),
        (b"lru\r\n", b"ERROR\r\n"),
    ];
    for (req, want) in rows {
        c.call(req, want);
        c.sync();
    }
    let st = c.stats("settings");
    let want = [
        ("slab_reassign", "yes"),
        ("slab_automove", "1"),
        ("slab_automove_ratio", "0.50"),
        ("lru_segmented", "no"),
        ("hot_lru_pct", "10"),
        ("warm_lru_pct", "20"),
        ("hot_max_factor", "0.10"),
        ("warm_max_factor", "2.00"),
        ("temp_lru", "yes"),
        ("temporary_ttl", "5"),
    ];
    for (name, value) in want {
        assert_eq!(st[name], value, "stats settings {name}");
    }
    c.call(b"lru temp_ttl -1\r\n", b"OK\r\n");
    assert_eq!(c.stats("settings")["temp_lru"], "no");
    // memcrab has no pages to move between classes: a valid move is a no-op OK
    // (memcached answers NOSPARE until a class has two pages to spare).
    if !against_memcached() {
        c.call(b"slabs reassign 1 2\r\n", b"OK\r\n");
        c.call(
            b"slabs reassign -1 2\r\n",
            b"BADCLASS invalid src or dst class id\r\n",
        );
        c.call(b"slabs reassign 0 1\r\n", b"OK\r\n");
        c.call(
            b"slabs reassign 1 3\r\n",
            b"BADCLASS invalid src or dst class id\r\n",
        );
    }
}

#[test]
fn stats_detail() {
    let s = Server::tcp(&["-D", "/"]);
    let mut c = s.connect();
    let rows: &[(&[u8], &[u8])] = &[
        (
            b"stats detail\r\n",
            b"CLIENT_ERROR usage: stats detail on|off|dump\r\n",
        ),
        (
            b"stats detail x\r\n",
            b"CLIENT_ERROR usage: stats detail on|off|dump\r\n",
        ),
        (b"stats detail dump\r\n", b"END\r\n"),
        (b"stats detail on x\r\n", b"OK\r\n"),
        (b"set a/1 0 0 1\r\nx\r\n", b"STORED\r\n"),
        (b"set b/2 0 0 1\r\nx\r\n", b"STORED\r\n"),
        (b"set nokey 0 0 1\r\nx\r\n", b"STORED\r\n"),
        (b"set a:1 0 0 1\r\nx\r\n", b"STORED\r\n"),
        (
            b"get a/1 a/2 b/9 nokey\r\n",
            b"VALUE a/1 0 1\r\nx\r\nVALUE nokey 0 1\r\nx\r\nEND\r\n",
        ),
        (b"gets a/1\r\n", b""),
        (b"delete a/1\r\n", b"DELETED\r\n"),
        (b"delete zz/1\r\n", b"NOT_FOUND\r\n"),
        (b"touch b/2 10\r\n", b"TOUCHED\r\n"),
        (b"gat 0 b/2\r\n", b"VALUE b/2 0 1\r\nx\r\nEND\r\n"),
        (
            b"incr b/2 1\r\n",
            b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        ),
        (b"mg b/2 v\r\n", b"VA 1\r\nx\r\n"),
        (b"ms c/3 1\r\nx\r\n", b"HD\r\n"),
        // Refused for its size, a set still counts (memcached counts before storing).
        (
            b"set d/4 0 0 2000000\r\n",
            b"SERVER_ERROR object too large for cache\r\n",
        ),
    ];
    for (req, want) in rows {
        if req.starts_with(b"gets ") {
            c.gets_cas("a/1");
            continue;
        }
        if req.starts_with(b"set d/4") {
            // The refused value's bytes are read and dropped, then it answers.
            c.call(&store("set", "d/4", 0, 0, &vec![b'x'; 2_000_000]), want);
            continue;
        }
        c.call(req, want);
    }
    // The binary protocol counts too: GET (and GAT, TOUCH), the stores, DELETE.
    {
        use memcrab_proto::binary::client::{parse_response, request, store_extras};
        use memcrab_proto::binary::op;
        let mut b = s.connect();
        let mut req = request(op::SET, &store_extras(0, 0), b"e/1", b"v", 0, 0);
        req.extend(request(op::GET, &[], b"e/1", b"", 0, 0));
        req.extend(request(op::GET, &[], b"e/2", b"", 0, 0));
        req.extend(request(op::DELETE, &[], b"e/1", b"", 0, 0));
        req.extend(request(op::NOOP, &[], b"", b"", 0, 0));
        b.send(&req);
        loop {
            let mut r = b.read_exact_bytes(24);
            let body = u32::from_be_bytes([r[8], r[9], r[10], r[11]]) as usize;
            r.extend(b.read_exact_bytes(body));
            let (resp, _) = parse_response(&r).expect("a response");
            if resp.opcode == op::NOOP {
                break;
            }
        }
    }
    let mut want = [
        "PREFIX a get 3 hit 2 set 1 del 1",
        "PREFIX b get 2 hit 1 set 1 del 0",
        "PREFIX d get 0 hit 0 set 1 del 0",
        "PREFIX e get 2 hit 1 set 1 del 1",
        "PREFIX zz get 0 hit 0 set 0 del 1",
    ];
    let dump = |c: &mut Client| {
        c.send(b"stats detail dump\r\n");
        let mut lines = Vec::new();
        loop {
            let l = String::from_utf8(c.read_line()).expect("utf-8");
            if l == "END" {
                break lines;
            }
            lines.push(l);
        }
    };
    // memcached lists prefixes in hash order, memcrab sorted.
    let mut got = dump(&mut c);
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(c.stats("settings")["detail_enabled"], "yes");
    c.call(b"stats detail off\r\n", b"OK\r\n");
    c.call(b"get a/1\r\n", b"END\r\n");
    let mut again = dump(&mut c);
    again.sort();
    assert_eq!(again, want, "counting stopped with detail off");
    assert_eq!(c.stats("settings")["detail_enabled"], "no");
    // `stats reset` forgets them.
    c.call(b"stats reset\r\n", b"RESET\r\n");
    c.call(b"stats detail dump\r\n", b"END\r\n");
}

#[test]
fn stats_sizes() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.call(b"stats sizes\r\n", b"STAT sizes_status disabled\r\nEND\r\n");
    // memcached 1.6.25 removed the switches; `-o track_sizes` stays.
    c.call(b"stats sizes_enable\r\n", b"ERROR\r\n");
    c.call(b"stats sizes_disable\r\n", b"ERROR\r\n");
    assert_eq!(c.stats("settings")["track_sizes"], "no");

    let s = Server::tcp(&["-o", "track_sizes"]);
    let mut c = s.connect();
    c.call(&store("set", "k", 0, 0, &[b'x'; 100]), b"STORED\r\n");
    c.call(&store("set", "k2", 0, 0, &[b'x'; 3000]), b"STORED\r\n");
    let sizes = c.stats_list("sizes");
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    for (size, n) in &sizes {
        let size: u64 = size.parse().expect("a size");
        assert!(size.is_multiple_of(32) && size > 100, "{sizes:?}");
        assert_eq!(n, "1");
    }
    assert_eq!(c.stats("settings")["track_sizes"], "yes");
}
