//! Leases under an adversary: many connections that stop reading while their
//! multi-gets' values are lent, and another connection that churns the whole cache
//! meanwhile, so that every lent segment is evicted and held. Over real sockets
//! against the real binary (docs/storage.md, "Leases"):
//!
//! - lent segments still in the cache are not bounded by the held segments'
//!   bound (a sixteenth of `-m`), so the stalled readers lend far more than it;
//! - once they are evicted, held segments pass that bound, and what passes it is
//!   charged against `-m`: `limit_used_bytes` stays within `-m` and a sixteenth
//!   (and a segment of slack), RSS within the README's bound, and every set stores;
//! - the stalled readers then read every reply exactly (values are `key:version:`
//!   repeated, so a reused segment or another key's bytes are caught), and once
//!   they are gone the lent and held bytes go back to 0.
//!
//! `MEMCRAB_IO=epoll` runs it on the other transport (scripts/test does).
//! Synchronised with `mn`; the only polling is for the server to stop serving the
//! stalled connections and to notice closed ones (`wait_until` on its stats).

mod common;

use std::time::Duration;

use common::{wait_until, Addr, Client, Rng, Server, Stream};

/// `-m 32` (256 KiB segments): held segments may take 2 MiB beyond it.
const LIMIT: u64 = 32 << 20;
const HELD_MAX: u64 = LIMIT / 16;
const SEGMENT: u64 = 256 << 10;
/// The README's memory bound at `-m 32`: 32 MB × 1.25 + 16 MB.
const RSS_BOUND_KIB: u64 = (32 * 5 / 4 + 16) * 1024;
/// Keys the stalled readers ask for: 2000 × 8000 B, about half of `-m`.
const KEYS: usize = 2000;
const VALUE_LEN: usize = 8000;
const READERS: usize = 12;
/// Multi-gets of 16 keys each stalled reader sends at once.
const GETS: usize = 64;

/// `key:version:` repeated to `len` bytes.
fn value(key: &str, version: u64, len: usize) -> Vec<u8> {
    let unit = format!("{key}:{version}:");
    unit.bytes().cycle().take(len).collect()
}

fn set_noreply(key: &str, data: &[u8]) -> Vec<u8> {
    let mut v = format!("set {key} 0 0 {} noreply\r\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

/// A connection with a 4 KiB receive buffer (set before connecting), so that what
/// it does not read stays in the server's output, lent.
fn small_window(server: &Server) -> Client {
    let Addr::Tcp(a) = &server.addr else {
        panic!("a TCP server");
    };
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    sock.connect(&(*a).into()).expect("connect");
    Client::new(Stream::Tcp(sock.into()))
}

/// Reads one multi-get's reply: its hits, in the order asked, each exact (`END`
/// after them). Returns how many hit.
fn read_multiget<'a>(c: &mut Client, mut asked: impl Iterator<Item = &'a str>) -> usize {
    let mut hits = 0;
    loop {
        let line = c.read_line();
        if line == b"END" {
            return hits;
        }
        let text = String::from_utf8_lossy(&line).into_owned();
        let key = text
            .strip_prefix("VALUE ")
            .and_then(|r| r.split(' ').next())
            .unwrap_or_else(|| panic!("not a value line: {text}"));
        assert!(asked.any(|k| k == key), "{key} not asked (or out of order)");
        assert_eq!(text, format!("VALUE {key} 0 {VALUE_LEN}"));
        let mut want = value(key, 0, VALUE_LEN);
        want.extend_from_slice(b"\r\n");
        assert!(
            c.read_exact_bytes(VALUE_LEN + 2) == want,
            "{key}: torn value"
        );
        hits += 1;
    }
}

fn num(st: &std::collections::HashMap<String, String>, k: &str) -> u64 {
    st[k].parse().expect("number")
}

#[test]
fn stalled_readers_lend_freely_and_held_memory_stays_within_the_bound() {
    let s = Server::tcp(&["-m", "32", "-o", "value_lend_min=4096"]);
    let mut w = s.connect();
    let keys: Vec<String> = (0..KEYS).map(|i| format!("s{i}")).collect();
    for chunk in keys.chunks(100) {
        let mut batch = Vec::new();
        for k in chunk {
            batch.extend_from_slice(&set_noreply(k, &value(k, 0, VALUE_LEN)));
        }
        w.send(&batch);
        w.sync();
    }
    // Each stalled reader asks for GETS × 16 random keys at once and reads nothing.
    let mut rng = Rng(0x1e4d);
    let mut readers: Vec<(Client, Vec<usize>)> = (0..READERS)
        .map(|_| {
            let mut c = small_window(&s);
            let asked: Vec<usize> = (0..GETS * 16).map(|_| rng.below(KEYS)).collect();
            let mut req = Vec::new();
            for get in asked.chunks(16) {
                let names: Vec<&str> = get.iter().map(|&i| keys[i].as_str()).collect();
                req.extend_from_slice(format!("get {}\r\n", names.join(" ")).as_bytes());
            }
            c.send(&req);
            (c, asked)
        })
        .collect();
    // Wait until their workers have served what they will (the lent count no
    // longer moves between two looks).
    let mut last = u64::MAX;
    wait_until(
        "the stalled readers to stop",
        Duration::from_secs(20),
        || {
            let now = w.stat("values_lent");
            let stopped = now == last && now > 0;
            last = now;
            stopped
        },
    );
    let st = w.stats("");
    let lent = num(&st, "lent_segment_bytes");
    eprintln!(
        "stalled: values_lent {}, lent_segment_bytes {lent}",
        num(&st, "values_lent")
    );
    // Live lent segments cost nothing beyond -m: far more than the held bound.
    assert!(lent > 2 * HELD_MAX, "lent only {lent} bytes: {st:?}");

    // Churn: 120 × 100 fresh 8000-byte values (three times -m) evict every
    // segment the stalled readers lent from. Every round's last set must read back.
    let mut peak_rss = 0;
    let mut peak_used = 0;
    let mut peak_held = 0;
    for round in 0..120 {
        let mut batch = Vec::new();
        for j in 0..100 {
            let k = format!("w{round}-{j}");
            batch.extend_from_slice(&set_noreply(&k, &value(&k, 1, VALUE_LEN)));
        }
        w.send(&batch);
        w.sync();
        let last = format!("w{round}-99");
        w.send(format!("get {last}\r\n").as_bytes());
        w.expect(&common::value(&last, 0, &value(&last, 1, VALUE_LEN)));
        w.expect(b"END\r\n");
        let st = w.stats("");
        peak_used = peak_used.max(num(&st, "limit_used_bytes"));
        peak_held = peak_held.max(num(&st, "lease_held_bytes"));
        peak_rss = peak_rss.max(s.rss_kib());
    }
    let st = w.stats("");
    eprintln!(
        "churned: peak limit_used_bytes {peak_used}, peak lease_held_bytes {peak_held}, \
         peak RSS {} MiB (bound {} MiB), evictions {}",
        peak_rss / 1024,
        RSS_BOUND_KIB / 1024,
        num(&st, "evictions"),
    );
    // Held segments passed their bound (the adversary won that much), yet memory
    // charged and resident stayed within -m and the bound.
    assert!(peak_held > HELD_MAX, "held at most {peak_held}: {st:?}");
    assert!(
        peak_used <= LIMIT + HELD_MAX + SEGMENT,
        "limit_used_bytes reached {peak_used}"
    );
    assert!(peak_rss < RSS_BOUND_KIB, "peak RSS {peak_rss} KiB");

    // The stalled readers now read every reply: exact bytes, though every segment
    // they were lent from has been evicted since. (A get their workers had not
    // served before the churn misses now.)
    let mut read = 0;
    for (c, asked) in &mut readers {
        for get in asked.chunks(16) {
            read += read_multiget(c, get.iter().map(|&i| keys[i].as_str()));
        }
    }
    eprintln!("the stalled readers read {read} values");
    assert!(read > GETS * 16, "read {read} values");
    drop(readers);
    wait_until("the leases to be released", Duration::from_secs(10), || {
        let st = w.stats("");
        st["lent_segment_bytes"] == "0" && st["lease_held_bytes"] == "0"
    });
    // The next segment a writer takes gives back what was held past the bound.
    let mut batch = Vec::new();
    for j in 0..100 {
        let k = format!("after{j}");
        batch.extend_from_slice(&set_noreply(&k, &value(&k, 2, VALUE_LEN)));
    }
    w.send(&batch);
    w.sync();
    let used = w.stat("limit_used_bytes");
    assert!(used <= LIMIT, "limit_used_bytes {used}");
}
