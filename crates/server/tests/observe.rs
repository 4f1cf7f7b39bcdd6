//! What the request step measures, over real sockets against the real binary:
//! `stats latency` counts exactly the requests sent, per protocol, command and hit
//! or miss, one by one or pipelined in one write (whose requests share the batch's
//! time, or are timed one by one while the slow log is on), on the time-stamp
//! counter or (`-o latency_clock=monotonic`) the monotonic clock; the slow log
//! (`-o slowlog_us`) catches a large multi-get, with its key URI-encoded and its
//! client, and `watch slowlog` streams it; `stats hotkeys` puts
//! a hammered key first, counts each key of a multi-get, binary and meta reads and
//! writes (and no sentinel `mn`); each can be switched off. memcrab's own commands: not run
//! against memcached.

mod common;

use std::collections::HashMap;

use common::{store, Client, Server};
use memcrab_proto::binary::client::{arith_extras, request, store_extras};
use memcrab_proto::binary::op;

/// `stats latency`'s `<series>:count` lines.
fn counts(c: &mut Client) -> HashMap<String, u64> {
    c.stats_list("latency")
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_suffix(":count")?.to_string(), v.parse().ok()?)))
        .collect()
}

/// Sends binary requests followed by a NOOP and reads responses up to the NOOP's.
fn binary_batch(c: &mut Client, reqs: &[Vec<u8>]) {
    let mut all: Vec<u8> = reqs.concat();
    all.extend(request(op::NOOP, &[], &[], &[], 0, 0));
    c.send(&all);
    for _ in 0..=reqs.len() {
        let head = c.read_exact_bytes(24);
        let body = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
        c.read_exact_bytes(body);
        if head[1] == op::NOOP {
            return;
        }
    }
    panic!("no NOOP response after {} requests", reqs.len());
}

#[test]
fn histograms_count_what_was_sent() {
    let server = Server::tcp(&["-t", "2"]);
    let mut c = server.connect();
    for i in 0..7 {
        c.call(&store("set", &format!("k{i}"), 0, 0, b"v"), b"STORED\r\n");
    }
    // Text: 7 sets; 5 gets that hit (one of them a multi-get with a missing key),
    // 3 that miss; 2 gats that hit, 1 that misses; 4 deletes, 2 incr, 1 touch.
    for i in 0..4 {
        c.call(format!("get k{i}\r\n").as_bytes(), b"VALUE ");
        c.read_line();
        c.read_line();
        c.expect(b"END\r\n");
    }
    c.call(b"get k5 nokey\r\n", b"VALUE k5 0 1\r\nv\r\nEND\r\n");
    for i in 0..3 {
        c.call(format!("get miss{i}\r\n").as_bytes(), b"END\r\n");
    }
    c.call(b"gat 0 k1\r\n", b"VALUE k1 0 1\r\nv\r\nEND\r\n");
    c.call(b"gats 0 k1\r\n", b"VALUE k1 0 1 ");
    c.read_line();
    c.read_line();
    c.expect(b"END\r\n");
    c.call(b"gat 0 nokey\r\n", b"END\r\n");
    c.call(b"set n 0 0 1\r\n5\r\n", b"STORED\r\n");
    c.call(b"incr n 1\r\n", b"6\r\n");
    c.call(b"incr n 1\r\n", b"7\r\n");
    c.call(b"touch k2 0\r\n", b"TOUCHED\r\n");
    for i in 3..7 {
        c.call(format!("delete k{i}\r\n").as_bytes(), b"DELETED\r\n");
    }
    // Meta: 2 sets, 3 gets that hit, 2 that miss.
    c.call(b"ms m1 1\r\na\r\n", b"HD\r\n");
    c.call(b"ms m2 1\r\nb\r\n", b"HD\r\n");
    for _ in 0..3 {
        c.call(b"mg m1 v\r\n", b"VA 1\r\na\r\n");
    }
    c.call(b"mg nokey v\r\n", b"EN\r\n");
    c.call(b"mg nokey2\r\n", b"EN\r\n");
    // Binary, on a connection of its own: 2 sets, 3 gets that hit, 4 that miss.
    let mut b = server.connect();
    let set = |k: &[u8]| request(op::SET, &store_extras(0, 0), k, b"xyz", 0, 0);
    let get = |k: &[u8]| request(op::GET, &[], k, &[], 0, 0);
    binary_batch(&mut b, &[set(b"b1"), set(b"b2")]);
    binary_batch(
        &mut b,
        &[
            get(b"b1"),
            get(b"b2"),
            get(b"b1"),
            get(b"x1"),
            get(b"x2"),
            get(b"x3"),
            get(b"x4"),
        ],
    );
    let got = counts(&mut c);
    let want: [(&str, u64); 16] = [
        ("text_set", 8),
        ("text_get_hit", 5),
        ("text_get_miss", 3),
        ("text_gat_hit", 2),
        ("text_gat_miss", 1),
        ("text_incr", 2),
        ("text_touch", 1),
        ("text_delete", 4),
        ("meta_set", 2),
        ("meta_get_hit", 3),
        ("meta_get_miss", 2),
        ("binary_set", 2),
        ("binary_get_hit", 3),
        ("binary_get_miss", 4),
        // The two NOOPs.
        ("binary_other", 2),
        ("text_decr", 0),
    ];
    for (series, n) in want {
        assert_eq!(
            got.get(series).copied().unwrap_or(0),
            n,
            "{series}: {got:?}"
        );
    }
    // Quantiles are ordered and within the maximum; every series reports all six.
    let s = c.stats("latency");
    for (series, n) in want.iter().filter(|w| w.1 > 0) {
        let f = |q: &str| -> f64 {
            s.get(&format!("{series}:{q}"))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{series}:{q} in {s:?}"))
        };
        let (p50, p90, p99, p999, max) = (
            f("p50_us"),
            f("p90_us"),
            f("p99_us"),
            f("p999_us"),
            f("max_us"),
        );
        assert!(
            p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= max,
            "{series} ({n}): {s:?}"
        );
        assert!(max > 0.0 && max < 10_000_000.0, "{series}: max {max} µs");
    }
    let settings = c.stats("settings");
    assert_eq!(settings.get("latency").map(String::as_str), Some("yes"));
    assert_eq!(settings.get("hotkeys").map(String::as_str), Some("yes"));
    assert_eq!(settings.get("slowlog_us").map(String::as_str), Some("0"));
}

/// Stores `n` keys `slow/<i>` of 1000 bytes, and returns a multi-get of them all.
#[test]
fn each_command_lands_in_its_series() {
    // The executors name each request's series as they count it: the commands the
    // test above leaves out, and the cases where the outcome decides (an `mg` hit
    // whose reply fails is not counted as a hit; a binary TOUCH is no read).
    let server = Server::tcp(&["-t", "1"]);
    let mut c = server.connect();
    c.call(b"set n 0 0 1\r\n5\r\n", b"STORED\r\n");
    c.call(b"cas n 0 0 1 99999\r\n6\r\n", b"EXISTS\r\n");
    c.call(b"cas nokey 0 0 1 1\r\n6\r\n", b"NOT_FOUND\r\n");
    c.call(b"decr n 1\r\n", b"4\r\n");
    c.call(b"touch nokey 0\r\n", b"NOT_FOUND\r\n");
    c.call(b"version\r\n", b"VERSION ");
    c.read_line();
    c.call(b"ms m 1\r\na\r\n", b"HD\r\n");
    c.call(b"ms c 1\r\n5\r\n", b"HD\r\n");
    c.call(b"ma c\r\n", b"HD\r\n");
    c.call(b"ma c MD\r\n", b"HD\r\n");
    c.call(b"md c\r\n", b"HD\r\n");
    c.call(b"md c\r\n", b"NF\r\n");
    c.call(b"mn\r\n", b"MN\r\n");
    c.call(b"me m\r\n", b"ME m ");
    c.read_line();
    let opaque33 = format!("O{}", "1".repeat(32));
    c.call(
        format!("mg m v {opaque33}\r\n").as_bytes(),
        b"CLIENT_ERROR opaque token too long\r\n",
    );
    c.call(b"mg m T30 v\r\n", b"VA 1\r\na\r\n");
    c.call(b"mg nokey T30 v\r\n", b"EN\r\n");
    let mut b = server.connect();
    let set = |k: &[u8], v: &[u8], cas| request(op::SET, &store_extras(0, 0), k, v, 0, cas);
    let keyed = |o, extras: &[u8], k: &[u8]| request(o, extras, k, &[], 0, 0);
    let ttl = 0u32.to_be_bytes();
    let delta = arith_extras(1, 0, u32::MAX);
    binary_batch(&mut b, &[set(b"b1", b"xyz", 0), set(b"bn", b"5", 0)]);
    binary_batch(
        &mut b,
        &[
            keyed(op::GAT, &ttl, b"b1"),
            keyed(op::GAT, &ttl, b"x1"),
            keyed(op::TOUCH, &ttl, b"b1"),
            keyed(op::TOUCH, &ttl, b"x1"),
            keyed(op::DELETE, &[], b"x1"),
            keyed(op::INCREMENT, &delta, b"bn"),
            keyed(op::DECREMENT, &delta, b"bn"),
            set(b"b1", b"abc", 99_999),
            keyed(op::VERSION, &[], b""),
        ],
    );
    let got = counts(&mut c);
    let want: [(&str, u64); 22] = [
        ("text_set", 1),
        ("text_cas", 2),
        ("text_decr", 1),
        ("text_touch", 1),
        ("text_other", 1),
        ("meta_set", 2),
        ("meta_incr", 1),
        ("meta_decr", 1),
        ("meta_delete", 2),
        ("meta_other", 2),
        ("meta_get_hit", 1),
        ("meta_get_miss", 2),
        ("binary_set", 2),
        ("binary_gat_hit", 1),
        ("binary_gat_miss", 1),
        ("binary_touch", 2),
        ("binary_delete", 1),
        ("binary_incr", 1),
        ("binary_decr", 1),
        ("binary_cas", 1),
        // VERSION and the two NOOPs.
        ("binary_other", 3),
        ("binary_get_hit", 0),
    ];
    for (series, n) in want {
        assert_eq!(
            got.get(series).copied().unwrap_or(0),
            n,
            "{series}: {got:?}"
        );
    }
    let all: u64 = got.values().sum();
    assert_eq!(all, want.iter().map(|w| w.1).sum::<u64>(), "{got:?}");
}

#[test]
fn a_pipelined_batch_gives_each_request_its_observation() {
    // Recorded as shares of each `serve` call's time (batches of at most 32, `-R`
    // cuts them at 20), or one by one with the slow log on: the same counts.
    for args in [&[][..], &["-o", "slowlog_us=10000000"][..]] {
        let server = Server::tcp(args);
        let mut c = server.connect();
        c.call(&store("set", "h", 0, 0, b"v"), b"STORED\r\n");
        c.call(b"ms m 1\r\nw\r\n", b"HD\r\n");
        let (mut batch, mut want) = (Vec::new(), Vec::new());
        for i in 0..70 {
            let (req, reply): (&[u8], &[u8]) = match i % 7 {
                0..=2 => (b"get h\r\n", b"VALUE h 0 1\r\nv\r\nEND\r\n"),
                3 => (b"get nokey\r\n", b"END\r\n"),
                4 => (b"set s 0 0 1\r\nx\r\n", b"STORED\r\n"),
                5 => (b"mg m v\r\n", b"VA 1\r\nw\r\n"),
                _ => (b"mg nokey v\r\n", b"EN\r\n"),
            };
            batch.extend_from_slice(req);
            want.extend_from_slice(reply);
        }
        batch.extend_from_slice(b"mn\r\n");
        want.extend_from_slice(b"MN\r\n");
        let sent = std::time::Instant::now();
        c.send(&batch);
        assert_eq!(c.read_exact_bytes(want.len()), want, "{args:?}");
        let wall_us = sent.elapsed().as_secs_f64() * 1e6;
        let got = counts(&mut c);
        for (series, n) in [
            ("text_get_hit", 30),
            ("text_get_miss", 10),
            // With the first set.
            ("text_set", 11),
            ("meta_get_hit", 10),
            ("meta_get_miss", 10),
            // `mn`, with the first `ms`.
            ("meta_other", 1),
            ("meta_set", 1),
        ] {
            assert_eq!(
                got.get(series).copied(),
                Some(n),
                "{series} {args:?}: {got:?}"
            );
        }
        // No request of the batch took longer than the whole batch did.
        let s = c.stats("latency");
        let max: f64 = s
            .get("text_get_hit:max_us")
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::MAX);
        assert!(
            max > 0.0 && max <= wall_us,
            "max {max} µs, batch {wall_us} µs"
        );
    }
}

fn large_multiget(c: &mut Client, n: usize) -> Vec<u8> {
    let mut batch = Vec::new();
    for i in 0..n {
        batch.extend(store("set", &format!("slow/{i}"), 0, 0, &[b'v'; 1000]));
    }
    c.send(&batch);
    for _ in 0..n {
        c.expect(b"STORED\r\n");
    }
    let mut get = b"get".to_vec();
    for i in 0..n {
        get.extend(format!(" slow/{i}").as_bytes());
    }
    get.extend(b"\r\n");
    get
}

/// Sends a multi-get and reads its reply through `END`.
fn run_multiget(c: &mut Client, get: &[u8], n: usize) {
    c.send(get);
    for _ in 0..n {
        c.read_line();
        c.read_line();
    }
    c.expect(b"END\r\n");
}

#[test]
fn the_slow_log_catches_a_large_multiget() {
    // The default: no slow log, so the same request leaves nothing.
    let off = Server::tcp(&[]);
    let mut c = off.connect();
    let get = large_multiget(&mut c, 200);
    run_multiget(&mut c, &get, 200);
    assert!(c.stats_list("slowlog").is_empty());

    // 1 µs: 200 hits of 1,000 bytes take longer than that on any machine.
    let server = Server::tcp(&["-o", "slowlog_us=1,slowlog_len=3"]);
    let mut c = server.connect();
    let get = large_multiget(&mut c, 200);
    c.call(b"stats slowlog reset\r\n", b"RESET\r\n");
    run_multiget(&mut c, &get, 200);
    let local = c_local(&server, &mut c);
    let log = c.stats("slowlog");
    // The multi-get is the only read since the reset (`stats slowlog reset` and
    // `stats conns` are in it too, as `text_other`).
    let ids: Vec<&str> = log
        .iter()
        .filter(|(k, v)| k.ends_with(":command") && *v == "text_get_hit")
        .filter_map(|(k, _)| k.strip_suffix(":command"))
        .collect();
    assert_eq!(ids.len(), 1, "{log:?}");
    let id = ids[0];
    let at = |f: &str| log[&format!("{id}:{f}")].clone();
    assert_eq!(at("command"), "text_get_hit");
    assert_eq!(at("key"), "slow%2F0", "the first key, URI-encoded");
    assert!(at("us").parse::<u64>().is_ok_and(|us| us >= 1), "{log:?}");
    assert_eq!(at("client"), format!("tcp:{local}"));
    // The ring keeps the newest 3, numbered on; `stats slowlog 1` shows the newest.
    for _ in 0..4 {
        run_multiget(&mut c, &get, 200);
    }
    let ids: Vec<u64> = c
        .stats_list("slowlog")
        .iter()
        .filter_map(|(k, _)| k.strip_suffix(":command")?.parse().ok())
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let newest = c.stats_list("slowlog 1");
    assert_eq!(newest.len(), 5, "one entry of five fields: {newest:?}");
    c.call(
        b"stats slowlog x\r\n",
        b"CLIENT_ERROR usage: stats slowlog [reset|<count>]\r\n",
    );
    assert_eq!(
        c.stats("settings").get("slowlog_us").map(String::as_str),
        Some("1")
    );
}

/// `-o latency_clock=monotonic` takes the monotonic clock where the time-stamp
/// counter would be read (the path a machine without a constant counter takes): the
/// same series count the same requests, each within the time the client saw, and
/// the slow log catches the same multi-get.
#[test]
fn the_monotonic_clock_times_like_the_counter() {
    let default = Server::tcp(&[]);
    let source = default.connect().stats("settings")["latency_clock"].clone();
    assert!(source == "tsc" || source == "monotonic", "{source}");
    let server = Server::tcp(&["-o", "latency_clock=monotonic,slowlog_us=1"]);
    let mut c = server.connect();
    let settings = c.stats("settings");
    assert_eq!(settings["latency_clock"], "monotonic");
    c.call(&store("set", "k", 0, 0, b"v"), b"STORED\r\n");
    // Requests one by one: each timed alone, none longer than all of them together.
    let sent = std::time::Instant::now();
    for _ in 0..50 {
        c.call(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
        c.call(b"mg nokey v\r\n", b"EN\r\n");
    }
    let wall_us = sent.elapsed().as_secs_f64() * 1e6;
    let got = counts(&mut c);
    assert_eq!(got.get("text_get_hit"), Some(&50), "{got:?}");
    assert_eq!(got.get("meta_get_miss"), Some(&50), "{got:?}");
    assert_eq!(got.get("text_set"), Some(&1), "{got:?}");
    let s = c.stats("latency");
    for series in ["text_get_hit", "meta_get_miss"] {
        let us = |f: &str| -> f64 {
            s.get(&format!("{series}:{f}"))
                .and_then(|v| v.parse().ok())
                .unwrap_or(f64::MAX)
        };
        assert!(us("p50_us") > 0.0, "{series}: {s:?}");
        assert!(us("max_us") <= wall_us, "{series}: {s:?}, all {wall_us} µs");
    }
    // The slow log (1 µs) times with the same clock.
    let get = large_multiget(&mut c, 200);
    c.call(b"stats slowlog reset\r\n", b"RESET\r\n");
    run_multiget(&mut c, &get, 200);
    let log = c.stats("slowlog");
    let id = log
        .iter()
        .find(|(k, v)| k.ends_with(":command") && *v == "text_get_hit")
        .and_then(|(k, _)| k.strip_suffix(":command"))
        .unwrap_or_else(|| panic!("no multi-get in {log:?}"));
    let us: u64 = log[&format!("{id}:us")].parse().unwrap_or(0);
    assert!(us >= 1, "{log:?}");
}

/// The client's address as `stats conns` names it (`127.0.0.1:<port>`): the one
/// TCP address that is not the listener's.
fn c_local(server: &Server, c: &mut Client) -> String {
    let listener = format!(":{}", server.port());
    let conns = c.stats_list("conns");
    let addrs: Vec<String> = conns
        .iter()
        .filter(|(k, _)| k.ends_with(":addr"))
        .filter_map(|(_, v)| v.strip_prefix("tcp:"))
        .filter(|a| !a.ends_with(&listener))
        .map(str::to_string)
        .collect();
    assert_eq!(addrs.len(), 1, "one client: {conns:?}");
    addrs[0].clone()
}

#[test]
fn watch_slowlog_streams_slow_requests() {
    let server = Server::tcp(&["-o", "slowlog_us=1"]);
    let mut c = server.connect();
    let get = large_multiget(&mut c, 100);
    let mut w = server.connect();
    w.call(b"watch slowlog\r\n", b"OK\r\n");
    run_multiget(&mut c, &get, 100);
    // Lines for other requests may come first (every request is slow at 1 µs);
    // the multi-get's is within the next few.
    for _ in 0..20 {
        let line = String::from_utf8(w.read_line_lf()).expect("utf-8");
        assert!(line.starts_with("ts="), "{line}");
        assert!(line.contains(" type=slow id="), "{line}");
        if line.contains(" cmd=text_get_hit ") {
            assert!(line.contains(" key=slow%2F0 us="), "{line}");
            assert!(line.contains(" client=tcp:127.0.0.1:"), "{line}");
            return;
        }
    }
    panic!("no slow line for the multi-get");
}

#[test]
fn stats_hotkeys_shows_a_hammered_key() {
    let server = Server::tcp(&["-t", "2"]);
    let mut c = server.connect();
    c.call(&store("set", "hot/key", 0, 0, &[b'h'; 500]), b"STORED\r\n");
    // 6,000 reads of the hot key among 3,000 of 100 others, pipelined.
    let mut batch = Vec::new();
    for i in 0..9000 {
        if i % 3 == 2 {
            batch.extend(format!("get cold{}\r\n", i % 100).as_bytes());
        } else {
            batch.extend(b"get hot/key\r\n");
        }
        if batch.len() > 1200 || i == 8999 {
            batch.extend(b"mn\r\n");
            c.send(&batch);
            batch.clear();
            loop {
                let line = c.read_line();
                if line == b"MN" {
                    break;
                }
            }
        }
    }
    let mut sets = Vec::new();
    for i in 0..2000 {
        sets.extend(store("set", &format!("w/{}", i % 2), 0, 0, b"x"));
    }
    c.send(&sets);
    for _ in 0..2000 {
        c.expect(b"STORED\r\n");
    }
    let h = c.stats("hotkeys");
    assert_eq!(
        h.get("reads:1:key").map(String::as_str),
        Some("hot%2Fkey"),
        "{h:?}"
    );
    assert_eq!(
        h.get("bytes:1:key").map(String::as_str),
        Some("hot%2Fkey"),
        "{h:?}"
    );
    // 1 in 128 sampled: 6,000 reads are 47 samples on average (sd 7); the estimate
    // is the samples times 128.
    let n: u64 = h["reads:1:count"].parse().expect("count");
    assert!((3_000..=9_000).contains(&n), "estimate {n}");
    let w1 = &h["writes:1:key"];
    assert!(w1 == "w%2F0" || w1 == "w%2F1", "{h:?}");
    c.call(b"stats hotkeys reset\r\n", b"RESET\r\n");
    c.call(b"stats hotkeys\r\n", b"END\r\n");
}

/// Sends `line` `n` times, pipelined in batches closed by `mn`, and reads up to
/// each `MN`.
fn pipelined(c: &mut Client, line: &[u8], n: usize) {
    let mut batch = Vec::new();
    for i in 0..n {
        batch.extend_from_slice(line);
        if batch.len() > 1200 || i + 1 == n {
            batch.extend(b"mn\r\n");
            c.send(&batch);
            batch.clear();
            for _ in 0..=n {
                if c.read_line() == b"MN" {
                    break;
                }
            }
        }
    }
}

#[test]
fn stats_hotkeys_counts_every_key_of_a_multi_get() {
    let server = Server::tcp(&["-t", "1"]);
    let mut c = server.connect();
    // 6,000 three-key gets (47 samples on average) against 500 of one key (4).
    pipelined(&mut c, b"get m1 m2 m3\r\n", 6000);
    pipelined(&mut c, b"get solo\r\n", 500);
    let h = c.stats("hotkeys");
    let mut top: Vec<&str> = (1..=3)
        .map(|r| h[&format!("reads:{r}:key")].as_str())
        .collect();
    top.sort_unstable();
    assert_eq!(top, ["m1", "m2", "m3"], "{h:?}");
    // One sample counts each of its keys once: the three counts are equal.
    let count = |r: usize| h[&format!("reads:{r}:count")].clone();
    assert_eq!((count(1), count(2)), (count(3), count(3)), "{h:?}");
    assert!(!h.contains_key("writes:1:key"), "{h:?}");
}

#[test]
fn stats_hotkeys_counts_binary_requests() {
    let server = Server::tcp(&["-t", "1"]);
    let mut c = server.connect();
    let set = |k: &[u8], v: &[u8]| request(op::SET, &store_extras(0, 0), k, v, 0, 0);
    let get = |k: &[u8]| request(op::GET, &[], k, &[], 0, 0);
    binary_batch(&mut c, &[set(b"bin/hot", &[b'v'; 300])]);
    // 4,000 reads of the hot key (31 samples on average) among 1,000 of 50 others,
    // then 1,000 writes of one key with a 10-byte value.
    let reads: Vec<Vec<u8>> = (0..5000)
        .map(|i| match i % 5 {
            4 => get(format!("cold{}", i % 50).as_bytes()),
            _ => get(b"bin/hot"),
        })
        .collect();
    for chunk in reads.chunks(200) {
        binary_batch(&mut c, chunk);
    }
    let writes: Vec<Vec<u8>> = (0..1000).map(|_| set(b"bin/w", b"0123456789")).collect();
    for chunk in writes.chunks(200) {
        binary_batch(&mut c, chunk);
    }
    // This connection speaks binary from its first byte: ask on another.
    let h = server.connect().stats("hotkeys");
    let key = |name: &str| h.get(name).map(String::as_str);
    assert_eq!(key("reads:1:key"), Some("bin%2Fhot"), "{h:?}");
    assert_eq!(key("writes:1:key"), Some("bin%2Fw"), "{h:?}");
    // A read moves its whole reply (300 value bytes and more), a write its 10.
    assert_eq!(key("bytes:1:key"), Some("bin%2Fhot"), "{h:?}");
    let n: u64 = h["bytes:1:count"].parse().expect("count");
    assert!(n >= 4000 / 4 * 300, "bytes estimate {n}");
}

#[test]
fn stats_hotkeys_counts_meta_requests_not_their_sentinels() {
    let server = Server::tcp(&["-t", "1"]);
    let mut c = server.connect();
    c.call(b"ms meta/hot 3\r\nabc\r\n", b"HD\r\n");
    // 12,000 reads of one key, each followed by an `mn` (94 samples on average, sd
    // about 6): a request without a key does not count down to a sample, else half
    // the samples would land on an `mn` and the estimate would halve.
    let pair = b"mg meta/hot v\r\nmn\r\n";
    for _ in 0..200 {
        c.send(&pair.repeat(60));
        for _ in 0..60 {
            c.expect(b"VA 3\r\nabc\r\nMN\r\n");
        }
    }
    pipelined(&mut c, b"ms meta/w 2 q\r\nxy\r\n", 1000);
    let h = c.stats("hotkeys");
    let key = |name: &str| h.get(name).map(String::as_str);
    assert_eq!(key("reads:1:key"), Some("meta%2Fhot"), "{h:?}");
    assert_eq!(key("writes:1:key"), Some("meta%2Fw"), "{h:?}");
    let n: u64 = h["reads:1:count"].parse().expect("count");
    assert!((8_000..=16_000).contains(&n), "estimate {n}: {h:?}");
}

#[test]
fn each_measurement_can_be_switched_off() {
    let server = Server::tcp(&["-o", "latency=off,hotkeys=off"]);
    let mut c = server.connect();
    c.call(&store("set", "k", 0, 0, b"v"), b"STORED\r\n");
    let mut batch = Vec::new();
    for _ in 0..200 {
        batch.extend(b"get k\r\n");
    }
    c.send(&batch);
    for _ in 0..200 {
        c.expect(b"VALUE k 0 1\r\nv\r\nEND\r\n");
    }
    c.call(b"stats latency\r\n", b"END\r\n");
    c.call(b"stats hotkeys\r\n", b"END\r\n");
    let s = c.stats("settings");
    assert_eq!(s.get("latency").map(String::as_str), Some("no"));
    assert_eq!(s.get("hotkeys").map(String::as_str), Some("no"));
    // The same requests with both on are counted.
    let on = Server::tcp(&[]);
    let mut c = on.connect();
    c.call(&store("set", "k", 0, 0, b"v"), b"STORED\r\n");
    c.send(&batch);
    for _ in 0..200 {
        c.expect(b"VALUE k 0 1\r\nv\r\nEND\r\n");
    }
    assert_eq!(counts(&mut c).get("text_get_hit"), Some(&200));
    assert!(c.stats("hotkeys").contains_key("reads:1:key"));
}
