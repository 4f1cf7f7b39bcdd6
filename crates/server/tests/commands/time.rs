//! Time, over TCP: expiry, delayed flush_all and pipelining. Expiry is polled (with
//! a deadline), not slept for a fixed time.

use super::*;

/// Polls `get <key>` until it misses; returns how long that took.
fn wait_until_gone(c: &mut common::Client, key: &str, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        c.send(format!("get {key}\r\n").as_bytes());
        let line = c.read_line();
        if line == b"END" {
            return start.elapsed();
        }
        let len: usize = std::str::from_utf8(&line)
            .expect("utf-8")
            .rsplit(' ')
            .next()
            .and_then(|l| l.parse().ok())
            .expect("VALUE line");
        c.read_exact_bytes(len + 2);
        c.expect(b"END\r\n");
        assert!(
            start.elapsed() < within,
            "{key} still there after {within:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn expiry_over_time() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let t0 = Instant::now();
    c.call(&store("set", "rel", 0, 2, b"r"), b"STORED\r\n");
    c.call(&store("set", "abs", 0, unix_now() + 2, b"a"), b"STORED\r\n");
    c.call(&store("set", "touched", 0, 2, b"t"), b"STORED\r\n");
    c.call(b"touch touched 100\r\n", b"TOUCHED\r\n");
    c.call(&store("set", "gat", 0, 0, b"g"), b"STORED\r\n");
    c.call(
        b"gat 2 gat\r\n",
        &cat(&[&value("gat", 0, b"g"), b"END\r\n"]),
    );
    c.call(&store("set", "forever", 0, 0, b"f"), b"STORED\r\n");
    c.call(
        b"get rel abs touched gat forever\r\n",
        &cat(&[
            &value("rel", 0, b"r"),
            &value("abs", 0, b"a"),
            &value("touched", 0, b"t"),
            &value("gat", 0, b"g"),
            &value("forever", 0, b"f"),
            b"END\r\n",
        ]),
    );
    // A 2 s exptime ends between 1 and 2 s from now (the clock counts whole seconds),
    // plus up to a second of clock-tick lag in memcached; 10 s allowed for a loaded
    // machine.
    for key in ["rel", "abs", "gat"] {
        wait_until_gone(&mut c, key, Duration::from_secs(10));
    }
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(900), "expired after {took:?}");
    c.call(
        b"get rel abs touched gat forever\r\n",
        &cat(&[
            &value("touched", 0, b"t"),
            &value("forever", 0, b"f"),
            b"END\r\n",
        ]),
    );
    let st = c.stats("");
    assert!(st["get_expired"].parse::<u64>().expect("number") >= 3);
}

#[test]
fn flush_all_with_delay() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let t0 = Instant::now();
    c.call(&store("set", "a", 0, 0, b"x"), b"STORED\r\n");
    c.call(b"flush_all 2\r\n", b"OK\r\n");
    c.call(b"get a\r\n", &cat(&[&value("a", 0, b"x"), b"END\r\n"]));
    wait_until_gone(&mut c, "a", Duration::from_secs(10));
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(900), "flushed after {took:?}");
    // Items stored after the flush time are kept (memcached invalidates items stored
    // up to and including the flush second, so this may take one more second; 10 s
    // allowed for a loaded machine).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        c.call(&store("set", "b", 0, 0, b"y"), b"STORED\r\n");
        c.send(b"get b\r\n");
        if c.read_line() == b"VALUE b 0 1" {
            c.expect(b"y\r\nEND\r\n");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "items stored after the flush are gone"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    c.call(b"flush_all 2 noreply\r\n", b"");
    c.sync();
}

/// memcached's LRU maintainer reclaims flushed items in the background, so
/// `curr_items` falls to 0 soon after `flush_all` (within ~0.2 s in 1.6.18; 10 s
/// allowed for a loaded machine), even if nothing looks the keys up.
#[test]
fn flush_all_empties_curr_items() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    for i in 0..100 {
        c.call(&store("set", &format!("k{i}"), 0, 0, b"x"), b"STORED\r\n");
    }
    assert_eq!(c.stat("curr_items"), 100);
    c.call(b"flush_all\r\n", b"OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = c.stat("curr_items");
        if n == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "curr_items still {n} 10 s after flush_all"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn flush_all_disabled() {
    let s = Server::tcp(&["-F"]);
    let mut c = s.connect();
    c.call(&store("set", "a", 0, 0, b"x"), b"STORED\r\n");
    c.call(b"flush_all\r\n", b"CLIENT_ERROR flush_all not allowed\r\n");
    c.call(b"flush_all 0 noreply\r\n", b"");
    c.call(b"get a\r\n", &cat(&[&value("a", 0, b"x"), b"END\r\n"]));
    assert_eq!(c.stat("cmd_flush"), 2);
}

/// A whole pipeline in one write: the server parses requests ahead of the one it
/// executes (to prefetch their keys), so a refused data block, an error line or a
/// suspended multiget in the middle must not let it run what follows from the wrong
/// place. The too-large value is made of requests, which must be swallowed.
#[test]
fn pipeline_in_one_write() {
    // A small -I, so that the refused block arrives in the same read as the rest.
    // slab_chunk_max may not exceed it; 1.6.45 reads that option in kilobytes.
    let s = Server::tcp(&["-I", "1k", "-o", "slab_chunk_max=1"]);
    let mut c = s.connect();
    let junk = b"get a\r\nset a 0 0 1\r\nj\r\n".repeat(60);
    let mut req = Vec::new();
    req.extend_from_slice(&store("set", "a", 1, 0, b"one"));
    req.extend_from_slice(b"get a\r\nget a b\r\n");
    req.extend_from_slice(format!("set big 0 0 {}\r\n", junk.len()).as_bytes());
    req.extend_from_slice(&junk);
    req.extend_from_slice(b"\r\nget a\r\nbogus\r\nget a\r\n");
    req.extend_from_slice(&store("append", "a", 0, 0, b"+"));
    req.extend_from_slice(b"incr n 1\r\nset b 0 0 2 noreply\r\nbb\r\nget b a\r\n");
    req.extend_from_slice(b"get a\r\n".repeat(50).as_slice());
    c.send(&req);
    let one = cat(&[&value("a", 1, b"one"), b"END\r\n"]);
    let mut want = cat(&[
        b"STORED\r\n",
        &one,
        &one,
        TOO_LARGE,
        &one,
        b"ERROR\r\n",
        &one,
        b"STORED\r\n",
        b"NOT_FOUND\r\n",
        &value("b", 0, b"bb"),
        &value("a", 1, b"one+"),
        b"END\r\n",
    ]);
    for _ in 0..50 {
        want.extend_from_slice(&cat(&[&value("a", 1, b"one+"), b"END\r\n"]));
    }
    c.expect(&want);
    c.call(b"get big\r\n", b"END\r\n");
}
