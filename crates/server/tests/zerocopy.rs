//! Zero-copy values: values of at least `-o value_lend_min` bytes
//! are sent from item memory (writev over epoll, SENDMSG over io_uring) while the
//! store's leases keep it alive. Over real sockets against the real binary:
//!
//! - large multi-gets, pipelined and read in small random pieces, return exact
//!   bytes while another connection overwrites the same keys and evicts everything
//!   at `-m 8` (values are `key:version:` repeated, so a torn value, another key's
//!   bytes or a reused segment is caught), over TCP and a unix socket;
//! - a client that stops reading while leases are held keeps the server's memory
//!   bounded, and other clients' sets and gets go on (no writer waits for a lease);
//! - closing connections with leases in flight releases them: the lent and held
//!   segment bytes go back to 0 and memory stays bounded over many such closes.
//!
//! `MEMCRAB_IO=epoll` runs the suite on the other transport (scripts/test does).
//! Synchronised with `mn` and `get` sentinels; the only polling is for the server
//! to notice a closed connection (`wait_until` on its stats).

mod common;

use std::io::{Read, Write};
use std::thread;
use std::time::Duration;

use common::{wait_until, Addr, Client, Rng, Server, Stream};

/// Value sizes above the threshold the tests set (1000 bytes): normal segments'
/// items, and (at -m 8, 64 KiB segments) large items with a segment of their own.
const SIZES: [usize; 5] = [1024, 3000, 9000, 20_000, 70_000];

/// `key:version:` repeated to `len` bytes.
fn value(key: &str, version: u64, len: usize) -> Vec<u8> {
    let unit = format!("{key}:{version}:");
    unit.bytes().cycle().take(len).collect()
}

fn set_noreply(key: &str, data: &[u8]) -> Vec<u8> {
    let mut r = format!("set {key} 0 0 {} noreply\r\n", data.len()).into_bytes();
    r.extend_from_slice(data);
    r.extend_from_slice(b"\r\n");
    r
}

/// Reads a reply stream in pieces of random sizes (1 byte to 16 KiB), as a slow
/// or fragmenting client would.
struct Pieces {
    stream: Stream,
    buf: Vec<u8>,
    rng: Rng,
}

impl Pieces {
    fn fill(&mut self) {
        let n = 1 + self.rng.below(16 * 1024);
        let mut piece = vec![0u8; n];
        let got = self.stream.read(&mut piece).expect("read a reply piece");
        assert!(got > 0, "the server closed the connection");
        self.buf.extend_from_slice(&piece[..got]);
    }

    fn line(&mut self) -> Vec<u8> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..i].to_vec();
                self.buf.drain(..i + 2);
                return line;
            }
            self.fill();
        }
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            self.fill();
        }
        self.buf.drain(..n).collect()
    }
}

/// Checks that `data` is `key`'s value of some version at `len` bytes.
fn check_value(key: &str, len: usize, data: &[u8]) {
    let prefix = format!("{key}:");
    let text = std::str::from_utf8(&data[..data.len().min(64)]).unwrap_or("");
    let version = text
        .strip_prefix(&prefix)
        .and_then(|rest| rest.split(':').next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("value of {key} starts {text:?}"));
    assert!(
        data == value(key, version, len).as_slice(),
        "value of {key} (version {version}, {len} bytes) is torn"
    );
}

/// A connection whose receive buffer is small (4 KiB, set before connecting), so
/// that a reply the client has not read stays in the server's output, lent.
fn small_window(server: &Server) -> Stream {
    match &server.addr {
        Addr::Tcp(a) => {
            let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                .expect("socket");
            sock.set_recv_buffer_size(4096).expect("SO_RCVBUF");
            sock.connect(&(*a).into()).expect("connect");
            Stream::Tcp(sock.into())
        }
        Addr::Unix(p) => {
            let s = std::os::unix::net::UnixStream::connect(p).expect("connect");
            socket2::SockRef::from(&s)
                .set_recv_buffer_size(4096)
                .expect("SO_RCVBUF");
            Stream::Unix(s)
        }
    }
}

/// Pipelined multi-gets of random key subsets, read back in random pieces and
/// checked. In lockstep with a writer: after sending each batch of gets and before
/// reading it, the reader has the writer overwrite every key and store about -m of
/// fresh ones (its `mn` proves it done), so the segments the unread replies lent
/// from have been evicted by then and would have been reused, were the leases not
/// holding them. See the module docs.
fn churn(server: &Server) {
    let keys: Vec<(String, usize)> = (0..48)
        .map(|i| (format!("zc{i}"), SIZES[i % SIZES.len()]))
        .collect();
    let mut c = server.connect();
    for (k, n) in &keys {
        c.send(&set_noreply(k, &value(k, 0, *n)));
    }
    c.sync();
    let lent_before = c.stat("values_lent");

    let (go, go_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done) = std::sync::mpsc::channel::<()>();
    let writer = {
        let keys = keys.clone();
        let mut w = server.connect();
        thread::spawn(move || {
            let mut version = 1u64;
            while go_rx.recv().is_ok() {
                // Every key overwritten, and 8 MB of fresh keys: -m 8 evicted through.
                for _ in 0..4 {
                    let mut batch = Vec::new();
                    for (k, n) in &keys {
                        batch.extend_from_slice(&set_noreply(k, &value(k, version, *n)));
                    }
                    for j in 0..70 {
                        let k = format!("fill{version}-{j}");
                        batch.extend_from_slice(&set_noreply(&k, &value(&k, 0, 30_000)));
                    }
                    w.send(&batch);
                    w.send(b"mn\r\n");
                    w.expect(b"MN\r\n");
                    version += 1;
                }
                if done_tx.send(()).is_err() {
                    break;
                }
            }
            version
        })
    };

    let stream = small_window(server);
    stream
        .set_read_timeout(Some(common::REPLY_TIMEOUT))
        .expect("timeout");
    let mut r = Pieces {
        stream,
        buf: Vec::new(),
        rng: Rng(0x5eed_0001),
    };
    let mut values = 0usize;
    for _ in 0..20 {
        // 24 pipelined multi-gets of 16 keys (some repeated, one missing), then mn:
        // about 8 MB, more than the server's socket buffer (it asks for 4 MB).
        let mut req = Vec::new();
        let mut asked: Vec<Vec<usize>> = Vec::new();
        for _ in 0..24 {
            let ks: Vec<usize> = (0..16).map(|_| r.rng.below(keys.len())).collect();
            req.extend_from_slice(b"get");
            for &i in &ks {
                req.push(b' ');
                req.extend_from_slice(keys[i].0.as_bytes());
            }
            req.extend_from_slice(b" zc-missing\r\n");
            asked.push(ks);
        }
        req.extend_from_slice(b"mn\r\n");
        r.stream.write_all(&req).expect("send gets");
        go.send(()).expect("writer alive");
        done.recv().expect("writer round");
        for ks in &asked {
            // Hits come in the order asked; evicted keys are skipped.
            let mut next = 0;
            loop {
                let line = r.line();
                if line == b"END" {
                    break;
                }
                let text = String::from_utf8(line).expect("utf-8 line");
                let parts: Vec<&str> = text.split(' ').collect();
                assert!(
                    parts.len() == 4 && parts[0] == "VALUE" && parts[2] == "0",
                    "bad line {text:?}"
                );
                let len: usize = parts[3].parse().expect("length");
                let at = ks[next..]
                    .iter()
                    .position(|&i| keys[i].0 == parts[1])
                    .unwrap_or_else(|| panic!("{} not asked for here", parts[1]));
                next += at + 1;
                let (key, size) = &keys[ks[next - 1]];
                assert_eq!(len, *size, "length of {key}");
                let data = r.bytes(len + 2);
                assert_eq!(&data[len..], b"\r\n", "value of {key} not followed by CRLF");
                check_value(key, len, &data[..len]);
                values += 1;
            }
        }
        assert_eq!(r.line(), b"MN");
    }
    drop(go);
    let rounds = writer.join().expect("writer");
    let st = c.stats("");
    let num = |k: &str| st[k].parse::<u64>().expect("number");
    eprintln!(
        "{values} values checked; writer rounds {rounds}; evictions {}; values_lent {}",
        num("evictions"),
        num("values_lent") - lent_before
    );
    assert!(values > 1000, "only {values} values came back");
    assert!(num("evictions") > 1000, "the writer did not churn");
    assert!(
        num("values_lent") - lent_before > 100,
        "values were not lent: {st:?}"
    );
}

#[test]
fn large_multigets_are_exact_while_another_connection_overwrites_and_evicts() {
    let s = Server::tcp(&["-m", "8", "-o", "value_lend_min=1000"]);
    churn(&s);
}

#[test]
fn large_multigets_are_exact_over_a_unix_socket() {
    let s = Server::unix(&["-m", "8", "-o", "value_lend_min=1000"]);
    churn(&s);
}

/// `-m 32`: the README's memory bound, 32 MB × 1.25 + 16 MB.
const BOUND_KIB: u64 = (32 * 5 / 4 + 16) * 1024;

/// 64 keys of 100 KB (each a large item with a segment of its own at -m 32).
fn store_big(c: &mut Client) -> Vec<String> {
    let keys: Vec<String> = (0..64).map(|i| format!("big{i}")).collect();
    for k in &keys {
        c.send(&set_noreply(k, &value(k, 0, 100_000)));
    }
    c.sync();
    keys
}

fn multiget(keys: &[String]) -> Vec<u8> {
    format!("get {}\r\n", keys.join(" ")).into_bytes()
}

/// Writes `mb` megabytes of fresh 50 KB values (evicting everything at -m 32),
/// checks one of them reads back, and returns the peak VmRSS seen.
fn churn_writes(s: &Server, c: &mut Client, tag: &str, mb: usize) -> u64 {
    let mut peak = 0;
    for round in 0..mb / 5 {
        let mut batch = Vec::new();
        for j in 0..100 {
            let k = format!("{tag}{round}-{j}");
            batch.extend_from_slice(&set_noreply(&k, &value(&k, 1, 50_000)));
        }
        c.send(&batch);
        c.sync();
        peak = peak.max(s.rss_kib());
    }
    let k = format!("{tag}0-0");
    let last = format!("{tag}{}-99", mb / 5 - 1);
    c.send(format!("get {last}\r\n").as_bytes());
    c.expect(&common::value(&last, 0, &value(&last, 1, 50_000)));
    c.expect(b"END\r\n");
    let _ = k;
    peak
}

#[test]
fn a_client_that_stops_reading_holds_bounded_leases_and_stalls_no_writer() {
    let s = Server::tcp(&["-m", "32", "-o", "value_lend_min=4096"]);
    let mut b = s.connect();
    let keys = store_big(&mut b);
    // The stalled client asks for 100 × 6.4 MB and never reads.
    let mut stalled = s.connect();
    let req = multiget(&keys);
    for _ in 0..100 {
        stalled.send(&req);
    }
    // Its worker has lent what fits under the output limit: wait until it stopped
    // (the lent count no longer moves between two looks).
    let mut last = u64::MAX;
    wait_until(
        "the stalled connection to stop",
        Duration::from_secs(10),
        || {
            let now = b.stat("values_lent");
            let stopped = now == last && now > 0;
            last = now;
            stopped
        },
    );
    // Other clients store 200 MB (every lent segment is evicted) and read back.
    let peak = churn_writes(&s, &mut b, "w", 200);
    let st = b.stats("");
    let num = |k: &str| st[k].parse::<u64>().expect("number");
    eprintln!(
        "stalled reader: peak RSS {} MiB (bound {} MiB), lent_segment_bytes {}, \
         lease_held_bytes {}, limit_used_bytes {}, values_lent {}",
        peak / 1024,
        BOUND_KIB / 1024,
        num("lent_segment_bytes"),
        num("lease_held_bytes"),
        num("limit_used_bytes"),
        num("values_lent"),
    );
    assert!(peak < BOUND_KIB, "peak RSS {peak} KiB over {BOUND_KIB} KiB");
    // It holds about the output limit's worth (256 KiB, plus a value, plus what the
    // socket took), in segments evicted since: held, within -m/16 (2 MiB).
    let held = num("lease_held_bytes");
    assert!(
        held > 0,
        "the stalled client's leases should be held: {st:?}"
    );
    assert!(held <= 2 << 20, "held {held} bytes");
    assert!(num("limit_used_bytes") <= (32 << 20) + held + (4 << 20));
    // Closing it releases everything it held.
    drop(stalled);
    wait_until("the leases to be released", Duration::from_secs(10), || {
        let st = b.stats("");
        st["lent_segment_bytes"] == "0" && st["lease_held_bytes"] == "0"
    });
    churn_writes(&s, &mut b, "x", 20);
}

#[test]
fn closing_connections_with_leases_in_flight_releases_them() {
    let s = Server::tcp(&["-m", "32", "-o", "value_lend_min=4096"]);
    let mut b = s.connect();
    let lent_before = b.stat("values_lent");
    let mut peak = 0;
    for i in 0..40 {
        // (Again each time: the writes below evict them.)
        let keys = store_big(&mut b);
        let mut c = s.connect();
        // 20 × 6.4 MB asked; read the first value's line, then hang up mid-reply.
        let req = multiget(&keys);
        for _ in 0..20 {
            c.send(&req);
        }
        let line = c.read_line();
        assert!(
            line.starts_with(b"VALUE big0 0 100000"),
            "{}",
            String::from_utf8_lossy(&line)
        );
        drop(c);
        // Keep writing meanwhile, so the segments they lent are evicted and held.
        peak = peak.max(churn_writes(&s, &mut b, &format!("c{i}-"), 10));
    }
    wait_until("the leases to be released", Duration::from_secs(10), || {
        let st = b.stats("");
        st["lent_segment_bytes"] == "0" && st["lease_held_bytes"] == "0"
    });
    let lent = b.stat("values_lent") - lent_before;
    eprintln!(
        "40 closes: values_lent {lent}, peak RSS {} MiB (bound {} MiB)",
        peak / 1024,
        BOUND_KIB / 1024
    );
    assert!(lent >= 40, "values_lent {lent}");
    assert!(peak < BOUND_KIB, "peak RSS {peak} KiB over {BOUND_KIB} KiB");
}

#[test]
fn replies_are_memcacheds_with_lending_on_and_off() {
    // The same requests, byte for byte the same replies whether values are lent or
    // copied: get, gets, gat, gats, mg with v (and k, s, f, c flags), a miss, noreply.
    let lending = Server::tcp(&["-o", "value_lend_min=1"]);
    let copying = Server::tcp(&["-o", "value_lend_min=0"]);
    let mut replies = Vec::new();
    for s in [&lending, &copying] {
        let mut c = s.connect();
        let data = value("k", 3, 70_000);
        c.send(&common::store("set", "k", 42, 0, &data));
        c.expect(b"STORED\r\n");
        c.send(&common::store("set", "e", 1, 0, b""));
        c.expect(b"STORED\r\n");
        c.send(
            b"get k e none k\r\ngets k\r\ngat 0 k e\r\ngats 100 k\r\n\
              mg k v k s f c\r\nmg e v\r\nmg k v q\r\nmg none v\r\nmn\r\n",
        );
        let mut out = Vec::new();
        loop {
            let line = c.read_line();
            out.extend_from_slice(&line);
            out.extend_from_slice(b"\r\n");
            if line == b"MN" {
                break;
            }
            if let Some(n) = std::str::from_utf8(&line).ok().and_then(|l| {
                let p: Vec<&str> = l.split(' ').collect();
                match p[0] {
                    "VALUE" => p[3].parse::<usize>().ok(),
                    "VA" => p[1].parse::<usize>().ok(),
                    _ => None,
                }
            }) {
                out.extend_from_slice(&c.read_exact_bytes(n + 2));
            }
        }
        let lent = c.stat("values_lent");
        replies.push((out, lent));
    }
    assert!(replies[0].1 >= 6, "lent {}", replies[0].1);
    assert_eq!(replies[1].1, 0);
    assert!(
        replies[0].0 == replies[1].0,
        "replies differ with lending on"
    );
    assert!(replies[0].0.len() > 6 * 70_000);
}

/// A binary request with no extras and no value.
fn bin_req(opcode: u8, key: &[u8], opaque: u32) -> Vec<u8> {
    let mut r = vec![0x80, opcode];
    r.extend_from_slice(&(key.len() as u16).to_be_bytes());
    r.extend_from_slice(&[0, 0, 0, 0]);
    r.extend_from_slice(&(key.len() as u32).to_be_bytes());
    r.extend_from_slice(&opaque.to_be_bytes());
    r.extend_from_slice(&[0; 8]);
    r.extend_from_slice(key);
    r
}

#[test]
fn binary_gets_are_the_same_lent_or_copied() {
    // GET, GETK, GETQ, GETKQ of a 70 KB value and of a short one, a quiet miss, and
    // NOOP: the same bytes whether the value is lent or copied.
    let lending = Server::tcp(&["-o", "value_lend_min=1"]);
    let copying = Server::tcp(&["-o", "value_lend_min=0"]);
    let mut replies = Vec::new();
    for s in [&lending, &copying] {
        let mut c = s.connect();
        c.send(&common::store("set", "big", 7, 0, &value("big", 1, 70_000)));
        c.expect(b"STORED\r\n");
        c.send(&common::store("set", "small", 8, 0, b"tiny"));
        c.expect(b"STORED\r\n");
        let lent_before = c.stat("values_lent");
        let mut b = s.connect();
        let mut req = Vec::new();
        for (i, op) in [0x00u8, 0x0c, 0x09, 0x0d].into_iter().enumerate() {
            req.extend_from_slice(&bin_req(op, b"big", i as u32));
            req.extend_from_slice(&bin_req(op, b"small", 10 + i as u32));
        }
        req.extend_from_slice(&bin_req(0x0d, b"none", 20));
        req.extend_from_slice(&bin_req(0x0a, b"", 21));
        b.send(&req);
        let mut out = Vec::new();
        loop {
            let head = b.read_exact_bytes(24);
            let body = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
            out.extend_from_slice(&head);
            out.extend_from_slice(&b.read_exact_bytes(body));
            if head[1] == 0x0a {
                break;
            }
        }
        replies.push((out, c.stat("values_lent") - lent_before));
    }
    assert_eq!(replies[0].1, 8, "every GET lent (value_lend_min=1)");
    assert_eq!(replies[1].1, 0);
    assert!(
        replies[0].0 == replies[1].0,
        "binary replies differ with lending on"
    );
    assert!(replies[0].0.len() > 4 * 70_000);
}
