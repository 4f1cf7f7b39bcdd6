//! The UDP transport (`-U`) over real sockets, asserting exact datagrams: frame
//! headers, payload bytes and how replies are split into messages. The expected
//! datagrams are memcached 1.6.45's: every test passes with
//! `MEMCRAB_TEST_SERVER=/work/shared/memcached-1.6.45/bin/memcached cargo test -p
//! memcrab-server --test udp`.
//! Where memcrab deliberately differs the test checks the server it runs against
//! (`against_memcached()`) and says why:
//!
//! - memcached keeps a request that is incomplete at the end of a datagram (a `set`
//!   whose data is not all there) in its one per-socket connection and reads the
//!   next datagram, from anyone, as its continuation; memcrab drops it with its
//!   datagram, so the next datagram is served normally.
//! - After a `quit`, memcached's UDP connection keeps its close-after-write flag
//!   and drops the rest of every later datagram after its first write, for every
//!   peer; memcrab's `quit` ends only its own datagram.
//! - `VERSION` and CAS uniques differ by design.
//!
//! Servers start with `-l 127.0.0.1:0 -U 1`: as in memcached, the `-l` entry's port
//! (0, ephemeral) wins over `-U`, and the port file's `UDP INET: <port>` line says
//! which port was bound. Most tests use `-t 1` so that replies to consecutive
//! datagrams arrive in order; `many_peers_many_workers` covers several workers.
//! "Nothing was sent" is proven without sleeping for long: a marker request follows
//! and its reply must be the next datagram that arrives.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use common::{against_memcached, cat, store, value, Client, Rng, Server, REPLY_TIMEOUT};

/// memcached's UDP_MAX_PAYLOAD_SIZE: the largest datagram, header included.
const MAX_DATAGRAM: usize = 1400;
const HEADER: usize = 8;
/// Payload bytes per datagram.
const DATA: usize = MAX_DATAGRAM - HEADER;
const END: &[u8] = b"END\r\n";

/// One received datagram's frame header and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Datagram {
    id: u16,
    seq: u16,
    total: u16,
    reserved: u16,
    payload: Vec<u8>,
}

fn frame(id: u16, seq: u16, total: u16, reserved: u16, payload: &[u8]) -> Vec<u8> {
    let mut d = Vec::with_capacity(HEADER + payload.len());
    for v in [id, seq, total, reserved] {
        d.extend_from_slice(&v.to_be_bytes());
    }
    d.extend_from_slice(payload);
    d
}

/// A UDP client socket aimed at one server.
struct Udp {
    sock: UdpSocket,
    server: SocketAddr,
}

impl Udp {
    fn new(server: &Server) -> Udp {
        let port = server
            .udp_port
            .expect("the port file has a `UDP INET: <port>` line");
        let sock = UdpSocket::bind("127.0.0.1:0").expect("bind a UDP client socket");
        Udp {
            sock,
            server: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    fn send_raw(&self, d: &[u8]) {
        self.sock.send_to(d, self.server).expect("send a datagram");
    }

    /// Sends a single-datagram request (seq 0, total 1).
    fn send(&self, id: u16, payload: &[u8]) {
        self.send_raw(&frame(id, 0, 1, 0, payload));
    }

    /// The next datagram, or None after `wait`.
    fn recv_within(&self, wait: Duration) -> Option<Datagram> {
        self.sock
            .set_read_timeout(Some(wait))
            .expect("set_read_timeout");
        let mut buf = vec![0u8; 65536];
        match self.sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                assert_eq!(from, self.server, "a datagram from elsewhere");
                assert!(n >= HEADER, "a {n}-byte datagram");
                assert!(n <= MAX_DATAGRAM, "a {n}-byte datagram");
                let u = |i: usize| u16::from_be_bytes([buf[i], buf[i + 1]]);
                Some(Datagram {
                    id: u(0),
                    seq: u(2),
                    total: u(4),
                    reserved: u(6),
                    payload: buf[HEADER..n].to_vec(),
                })
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(e) => panic!("recv: {e}"),
        }
    }

    #[track_caller]
    fn recv(&self) -> Datagram {
        self.recv_within(REPLY_TIMEOUT)
            .expect("a reply datagram within the timeout")
    }

    /// One whole message for request `id`: its datagrams, in arrival order, checked
    /// for a consistent header; returns the payloads joined in sequence order.
    #[track_caller]
    fn message(&self, id: u16) -> Vec<u8> {
        let first = self.recv();
        assert_eq!((first.id, first.reserved), (id, 0), "{first:?}");
        let total = first.total;
        let mut parts = vec![first];
        while parts.len() < usize::from(total) {
            let d = self.recv();
            assert_eq!((d.id, d.total, d.reserved), (id, total, 0), "{d:?}");
            parts.push(d);
        }
        parts.sort_by_key(|d| d.seq);
        let seqs: Vec<u16> = parts.iter().map(|d| d.seq).collect();
        let want: Vec<u16> = (0..total.max(1)).collect();
        assert_eq!(seqs, want, "sequence numbers");
        parts.into_iter().flat_map(|d| d.payload).collect()
    }

    /// Sends `payload` as request `id` and expects exactly the messages `want`
    /// (each one whole reply object), then nothing else before a marker's reply.
    #[track_caller]
    fn call(&self, id: u16, payload: &[u8], want: &[&[u8]]) {
        self.send(id, payload);
        for (i, w) in want.iter().enumerate() {
            let got = self.message(id);
            assert_eq!(
                got,
                *w,
                "message {i} of the reply to {}: got {}, want {}",
                payload.escape_ascii(),
                got.escape_ascii(),
                w.escape_ascii()
            );
        }
        self.sync();
    }

    /// Proves nothing more is on its way: a marker request's reply must be the
    /// next datagram.
    #[track_caller]
    fn sync(&self) {
        const MARKER_ID: u16 = 0xfeed;
        self.send(MARKER_ID, b"get nothing\r\n");
        let d = self.recv();
        assert_eq!(
            d,
            Datagram {
                id: MARKER_ID,
                seq: 0,
                total: 1,
                reserved: 0,
                payload: END.to_vec()
            },
            "expected only the marker's reply"
        );
    }
}

fn server(args: &[&str]) -> (Server, Udp) {
    let mut full = vec!["-U", "1", "-t", "1"];
    full.extend_from_slice(args);
    let s = Server::tcp(&full);
    let u = Udp::new(&s);
    (s, u)
}

/// A bare header, total 0: how memcached sends an empty reply object.
fn empty() -> &'static [u8] {
    b""
}

#[test]
fn set_and_get_round_trip() {
    let (s, u) = server(&[]);
    u.call(1, &store("set", "k", 5, 0, b"hello"), &[b"STORED\r\n"]);
    u.call(2, b"get k\r\n", &[&cat(&[&value("k", 5, b"hello"), END])]);
    // The same item over TCP, and the other way round.
    let mut c = s.connect();
    c.call(b"get k\r\n", &cat(&[&value("k", 5, b"hello"), END]));
    c.call(&store("set", "t", 0, 0, b"from tcp"), b"STORED\r\n");
    u.call(
        3,
        b"get t\r\n",
        &[&cat(&[&value("t", 0, b"from tcp"), END])],
    );
    u.call(4, b"get missing\r\n", &[END]);
    u.call(5, b"delete k\r\n", &[b"DELETED\r\n"]);
    u.call(6, &store("add", "n", 0, 0, b"41"), &[b"STORED\r\n"]);
    u.call(7, b"incr n 1\r\n", &[b"42\r\n"]);
    u.call(8, b"touch n 100\r\n", &[b"TOUCHED\r\n"]);
}

#[test]
fn replies_echo_the_request_id() {
    let (_s, u) = server(&[]);
    for id in [0u16, 1, 0x1234, 0xbeef, 0xffff] {
        u.send(id, b"get nothing\r\n");
        let d = u.recv();
        assert_eq!(
            d,
            Datagram {
                id,
                seq: 0,
                total: 1,
                reserved: 0,
                payload: END.to_vec()
            }
        );
    }
    // The request's sequence number and reserved field are not checked.
    u.send_raw(&frame(77, 5, 1, 9, b"get nothing\r\n"));
    let d = u.recv();
    assert_eq!((d.id, d.seq, d.total, d.reserved), (77, 0, 1, 0));
    assert_eq!(d.payload, END);
    u.sync();
}

#[test]
fn a_large_reply_spans_datagrams() {
    let (s, u) = server(&[]);
    let data: Vec<u8> = (0..10_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    // A set fits in one datagram (up to 64 KiB).
    u.call(9, &store("set", "big", 3, 0, &data), &[b"STORED\r\n"]);
    let want = cat(&[&value("big", 3, &data), END]);
    u.send(10, b"get big\r\n");
    let total = want.len().div_ceil(DATA);
    let mut got = Vec::new();
    for seq in 0..total {
        let d = u.recv();
        assert_eq!(
            (d.id, d.seq, usize::from(d.total), d.reserved),
            (10, seq as u16, total, 0)
        );
        // Every datagram but the last is full.
        let len = if seq + 1 < total {
            DATA
        } else {
            want.len() - DATA * (total - 1)
        };
        assert_eq!(d.payload.len(), len, "datagram {seq}");
        got.extend_from_slice(&d.payload);
    }
    assert_eq!(got, want);
    u.sync();
    // The same bytes as over TCP.
    let mut c = s.connect();
    c.call(b"get big\r\n", &want);
    // stats is one reply object, so one message.
    u.send(11, b"stats\r\n");
    let stats = u.message(11);
    assert!(stats.starts_with(b"STAT pid ") && stats.ends_with(END));
    u.sync();
}

#[test]
fn multi_packet_requests_are_dropped() {
    let (_s, u) = server(&[]);
    // memcached 1.6 sends nothing back (1.4 answered "SERVER_ERROR multi-packet
    // request not supported").
    for total in [0u16, 2, 3, 0xffff] {
        u.send_raw(&frame(20, 0, total, 0, b"get nothing\r\n"));
        u.sync();
    }
    u.send_raw(&frame(21, 1, 2, 0, &store("set", "m", 0, 0, b"x")));
    u.sync();
    u.call(22, b"get m\r\n", &[END]);
}

#[test]
fn datagrams_of_eight_bytes_or_fewer_are_ignored() {
    let (_s, u) = server(&[]);
    for n in 0..=HEADER {
        let d = frame(30, 0, 1, 0, b"");
        u.send_raw(&d[..n]);
    }
    u.sync();
    // Nine bytes is a request: an empty line, too short for 1.6.45's
    // process_request.
    u.call(31, b"\n", &[b"CLIENT_ERROR bad command line format\r\n"]);
}

#[test]
fn bad_requests_get_memcached_errors() {
    let (_s, u) = server(&[]);
    u.call(40, b"bogus\r\n", &[b"ERROR\r\n"]);
    // 1.6.45's process_request: a line of fewer than two tokens is malformed.
    u.call(41, b"\r\n", &[b"CLIENT_ERROR bad command line format\r\n"]);
    u.call(
        42,
        b"get\r\n",
        &[b"CLIENT_ERROR bad command line format\r\n"],
    );
    // Each request of a datagram is its own message; the empty line left after
    // the bad data chunk is malformed too.
    u.call(
        43,
        b"set b 0 0 1\r\nxyz\r\n",
        &[
            b"CLIENT_ERROR bad data chunk\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        ],
    );
    u.call(44, &store("set", "s", 0, 0, b"str"), &[b"STORED\r\n"]);
    u.call(
        45,
        b"incr s 1\r\n",
        &[b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"],
    );
    // 1.6.45's process_delete_command ignores the tokens after the key (1.6.18
    // refused them with a usage line).
    u.call(46, b"delete s 0 0\r\nget s\r\n", &[b"DELETED\r\n", END]);
    u.call(50, &store("set", "s", 0, 0, b"str"), &[b"STORED\r\n"]);
    // A key over 250 bytes: only the error, earlier hits are dropped. 1.6.45's
    // process_get_command ends this error with an extra CRLF (over TCP too).
    let long = "k".repeat(251);
    u.call(
        47,
        format!("get s {long}\r\n").as_bytes(),
        &[b"CLIENT_ERROR bad command line format\r\n\r\n"],
    );
    // No newline: nothing; a long line without one is dropped too.
    u.call(48, b"get s", &[]);
    u.call(49, &[b'x'; 3000], &[]);
}

#[test]
fn replies_go_only_to_the_sender() {
    let (_s, a) = server(&[]);
    let b = Udp {
        sock: UdpSocket::bind("127.0.0.1:0").expect("bind"),
        server: a.server,
    };
    a.call(50, &store("set", "who", 0, 0, b"a"), &[b"STORED\r\n"]);
    a.send(51, b"get who\r\n");
    b.send(52, b"version\r\n");
    assert_eq!(a.message(51), cat(&[&value("who", 0, b"a"), END]));
    let v = b.message(52);
    assert!(v.starts_with(b"VERSION 1.6."), "{}", v.escape_ascii());
    // Neither got the other's reply.
    a.sync();
    b.sync();
}

#[test]
fn meta_commands() {
    let (_s, u) = server(&[]);
    u.call(60, b"ms mk 2 F7 T0\r\nhi\r\n", &[b"HD\r\n"]);
    u.call(61, b"mg mk v f\r\n", &[b"VA 2 f7\r\nhi\r\n"]);
    u.call(62, b"mg missing v\r\n", &[b"EN\r\n"]);
    u.call(63, b"mn\r\n", &[b"MN\r\n"]);
    // Quiet mode: a miss sends nothing; mn still answers.
    u.call(64, b"mg missing v q\r\nmn\r\n", &[b"MN\r\n"]);
    u.call(65, b"ms mk 2 q\r\nho\r\n", &[]);
    u.call(66, b"mg mk v\r\nmn\r\n", &[b"VA 2\r\nho\r\n", b"MN\r\n"]);
    u.call(67, b"ma cnt N0 J5 v\r\n", &[b"VA 1\r\n5\r\n"]);
    u.call(68, b"md cnt\r\n", &[b"HD\r\n"]);
    u.call(69, b"md mk q\r\n", &[]);
    u.call(70, b"mg mk\r\n", &[b"EN\r\n"]);
}

#[test]
fn multigets_are_split_as_memcached_does() {
    let (_s, u) = server(&[]);
    u.call(80, &store("set", "a", 5, 0, b"abc"), &[b"STORED\r\n"]);
    let va = value("a", 5, b"abc");
    let va_end = cat(&[&va, END]);
    // One message per hit, END on the last key's.
    u.call(81, b"get a b a\r\n", &[&va, &va_end]);
    u.call(82, b"get a b\r\n", &[&va, END]);
    u.call(83, b"get a a a\r\n", &[&va, &va, &va_end]);
    // A first key that misses is an empty reply object, sent as a bare header
    // (total 0) when it opens a write round ...
    u.call(84, b"get b a\r\n", &[empty(), &va_end]);
    u.call(85, b"get b c\r\n", &[empty(), END]);
    u.call(86, b"gat 100 b a\r\n", &[empty(), &va_end]);
    u.call(
        87,
        b"set q 0 0 1 noreply\r\nx\r\nget b a\r\n",
        &[empty(), &va_end],
    );
    u.call(88, b"mn\r\nget b a\r\n", &[b"MN\r\n", empty(), &va_end]);
    // ... and folded into the previous send otherwise.
    u.call(89, b"version\r\nget b a\r\n", &[&version_of(&u), &va_end]);
    u.call(90, b"mg a v\r\nget b a\r\n", &[b"VA 3\r\nabc\r\n", &va_end]);
    // Pipelined gets: a message each.
    u.call(91, b"get a\r\nget b\r\n", &[&va_end, END]);
}

/// The server's `version` reply.
fn version_of(u: &Udp) -> Vec<u8> {
    u.send(0x7777, b"version\r\n");
    u.message(0x7777)
}

#[test]
fn noreply() {
    let (_s, u) = server(&[]);
    u.call(
        100,
        b"set n 0 0 1 noreply\r\nx\r\nget n\r\n",
        &[&cat(&[&value("n", 0, b"x"), END])],
    );
    u.call(101, b"delete n noreply\r\nget n\r\n", &[END]);
}

/// `quit` ends its datagram; its empty reply object is a bare header when it opens
/// a write round, and folded into the previous send otherwise. Each case gets a
/// fresh server: after a `quit`, memcached's UDP connection keeps its
/// close-after-write flag for good and stops every later datagram after its first
/// write (a memcached bug memcrab does not copy).
#[test]
fn quit_ends_the_datagram() {
    let v = {
        let (_s, u) = server(&[]);
        version_of(&u)
    };
    let cases: &[(&[u8], &[&[u8]])] = &[
        (b"quit\r\nget n\r\n", &[empty()]),
        // Since 1.6.35 a get batches with what follows (process_get_command goes
        // on to conn_new_cmd): `quit`'s empty object joins the END's send.
        (b"get n\r\nquit\r\nversion\r\n", &[END]),
        // `mn` still writes at once, so `quit` opens a round of its own.
        (b"mn\r\nquit\r\nversion\r\n", &[b"MN\r\n", empty()]),
        (b"version\r\nquit\r\nget n\r\n", &[&v]),
    ];
    for (req, want) in cases {
        let (_s, u) = server(&[]);
        u.call(102, req, want);
    }
}

#[test]
fn refused_values_are_swallowed() {
    // slab_chunk_max is in kilobytes (1.6.45 refuses 1024 KB above a 2 KB -I).
    let (_s, u) = server(&["-I", "2048", "-o", "slab_chunk_max=1"]);
    let big = vec![b'x'; 3000];
    let mut req = store("set", "t", 0, 0, &big);
    req.extend_from_slice(b"get t\r\n");
    u.call(
        110,
        &req,
        &[b"SERVER_ERROR object too large for cache\r\n", END],
    );
    let mut req = b"set t 0 0 3000 noreply\r\n".to_vec();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\nget t\r\n");
    u.call(111, &req, &[END]);
}

#[test]
fn an_incomplete_request_is_dropped() {
    let (_s, u) = server(&[]);
    u.send(120, b"set c 0 0 3\r\nab");
    if against_memcached() {
        // memcached would read the next datagram as the rest of the value.
        return;
    }
    u.sync();
    u.call(121, b"get c\r\n", &[END]);
}

#[test]
fn binary_requests() {
    let (_s, u) = server(&[]);
    // NOOP, opaque 0x01020304.
    let mut noop = vec![0x80, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4];
    noop.extend_from_slice(&[0; 8]);
    let mut noop_reply = noop.clone();
    noop_reply[0] = 0x81;
    u.call(130, &noop, &[&noop_reply]);
    // GET of a missing key: status 1, "Not found".
    let mut get = vec![0x80, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9];
    get.extend_from_slice(&[0; 8]);
    get.push(b'z');
    let mut want = vec![0x81, 0x00, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, 9];
    want.extend_from_slice(&[0; 8]);
    want.extend_from_slice(b"Not found");
    u.call(131, &get, &[&want]);
    // Two packets: two messages.
    u.call(132, &cat(&[&noop, &get]), &[&noop_reply, &want]);
}

/// A binary request: header, extras, key, value.
fn packet(opcode: u8, key: &[u8], extras: &[u8], value: &[u8], opaque: u32) -> Vec<u8> {
    let body = (key.len() + extras.len() + value.len()) as u32;
    let mut p = vec![0x80, opcode];
    p.extend_from_slice(&(key.len() as u16).to_be_bytes());
    p.extend_from_slice(&[extras.len() as u8, 0, 0, 0]);
    p.extend_from_slice(&body.to_be_bytes());
    p.extend_from_slice(&opaque.to_be_bytes());
    p.extend_from_slice(&[0; 8]);
    cat(&[&p, extras, key, value])
}

#[test]
fn binary_quiet_requests() {
    let (_s, u) = server(&[]);
    let noop = packet(0x0a, b"", b"", b"", 7);
    let mut noop_reply = noop.clone();
    noop_reply[0] = 0x81;
    let getq_miss = packet(0x09, b"zz", b"", b"", 1);
    let setq = packet(0x11, b"k", &[0; 8], b"v", 2);
    // memcached's binary quiet mode leaves an empty reply object (not "skip", as
    // text noreply is): a bare header when it opens a write round. NOOP and error
    // replies end a round.
    u.call(150, &getq_miss, &[empty()]);
    u.call(151, &setq, &[empty()]);
    u.call(152, &cat(&[&getq_miss, &noop]), &[empty(), &noop_reply]);
    u.call(153, &cat(&[&noop, &getq_miss]), &[&noop_reply, empty()]);
    u.call(154, &cat(&[&setq, &setq, &noop]), &[empty(), &noop_reply]);
    // DELETEQ of a missing key still answers its error.
    let mut not_found = vec![0x81, 0x14, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, 6];
    not_found.extend_from_slice(&[0; 8]);
    not_found.extend_from_slice(b"Not found");
    u.call(
        155,
        &cat(&[&packet(0x14, b"zz", b"", b"", 6), &getq_miss]),
        &[&not_found, empty()],
    );
}

#[test]
fn every_reqs_per_event_requests_yield() {
    let (s, u) = server(&[]);
    let mut c = s.connect();
    let v = version_of(&u);
    // (request, count, yields): memcached counts a yield each time it has used
    // its -R (20) budget; since 1.6.35 a get waits for the end of the datagram as
    // a version does (1.6.18's get wrote at once, one step less: 20 gets did not
    // yield).
    let rows: &[(&[u8], usize, u64)] = &[
        (b"version\r\n", 19, 0),
        (b"version\r\n", 20, 1),
        (b"version\r\n", 41, 2),
        (b"version\r\n", 100, 5),
        (b"get nothing\r\n", 19, 0),
        (b"get nothing\r\n", 20, 1),
        (b"get nothing\r\n", 21, 1),
        (b"get nothing\r\n", 41, 2),
    ];
    for &(req, n, want) in rows {
        let before = c.stat("conn_yields");
        u.send(160, &req.repeat(n));
        let reply: &[u8] = if req.starts_with(b"get") { END } else { &v };
        for _ in 0..n {
            assert_eq!(u.message(160), reply);
        }
        u.sync();
        assert_eq!(
            c.stat("conn_yields") - before,
            want,
            "{n} x {}",
            req.escape_ascii()
        );
    }
}

#[test]
fn stats_count_udp_traffic() {
    let (s, u) = server(&[]);
    let mut c = s.connect();
    let st = c.stats("settings");
    // The -U value, as memcached prints it (the -l entry's :0 picked the port).
    assert_eq!(st["udpport"], "1");
    assert_eq!(st["num_threads_per_udp"], "1");
    let st = c.stats("");
    // memcached counts each worker's UDP socket as a connection.
    assert_eq!(st["curr_connections"], "2");
    let num = |m: &std::collections::HashMap<String, String>, k: &str| -> u64 {
        m[k].parse().expect("a number")
    };
    let before = c.stats("");
    let req = b"get nothing\r\n";
    u.call(140, req, &[END]);
    let after = c.stats("");
    // call's marker is a get too.
    assert_eq!(num(&after, "cmd_get"), num(&before, "cmd_get") + 2);
    assert_eq!(num(&after, "get_misses"), num(&before, "get_misses") + 2);
    // Whole datagrams, headers included, plus the second `stats` line.
    assert_eq!(
        num(&after, "bytes_read"),
        num(&before, "bytes_read") + 2 * (HEADER + req.len()) as u64 + b"stats\r\n".len() as u64
    );
    // The first stats reply, then the two datagrams.
    assert!(
        num(&after, "bytes_written")
            > num(&before, "bytes_written") + 2 * (HEADER + END.len()) as u64
    );
    // -R 20: 19 gets in a datagram do not yield; the 20th uses up the budget
    // with the datagram's final write still to come, and yields once.
    let yields = c.stat("conn_yields");
    u.send(141, &req.repeat(19));
    for _ in 0..19 {
        assert_eq!(u.message(141), END);
    }
    u.sync();
    assert_eq!(c.stat("conn_yields"), yields);
    u.send(142, &req.repeat(20));
    for _ in 0..20 {
        assert_eq!(u.message(142), END);
    }
    u.sync();
    assert_eq!(c.stat("conn_yields"), yields + 1);
    let conns = c.stats_list("conns");
    let udp: Vec<&(String, String)> = conns.iter().filter(|(k, _)| k.ends_with(":UDP")).collect();
    assert_eq!(udp.len(), 1, "{conns:?}");
    let fd = udp[0].0.trim_end_matches(":UDP");
    let want_addr = format!("udp:127.0.0.1:{}", u.server.port());
    assert!(
        conns.contains(&(format!("{fd}:addr"), want_addr)),
        "{conns:?}"
    );
    assert!(conns.contains(&(format!("{fd}:state"), "conn_read".to_string())));
}

#[test]
fn udp_is_off_by_default() {
    let s = Server::tcp(&[]);
    assert_eq!(s.udp_port, None);
    let mut c = s.connect();
    assert_eq!(c.stats("settings")["udpport"], "0");
    let s = Server::tcp(&["-U", "0"]);
    assert_eq!(s.udp_port, None);
}

#[test]
fn many_peers_many_workers() {
    let s = Server::tcp(&["-U", "1", "-t", "4"]);
    let peers: Vec<Udp> = (0..8).map(|_| Udp::new(&s)).collect();
    for (i, p) in peers.iter().enumerate() {
        let key = format!("p{i}");
        p.call(
            i as u16,
            &store("set", &key, 0, 0, key.as_bytes()),
            &[b"STORED\r\n"],
        );
    }
    for round in 0..50u16 {
        for (i, p) in peers.iter().enumerate() {
            p.send(round, format!("get p{i}\r\n").as_bytes());
        }
        for (i, p) in peers.iter().enumerate() {
            let key = format!("p{i}");
            assert_eq!(
                p.message(round),
                cat(&[&value(&key, 0, key.as_bytes()), END])
            );
        }
    }
}

#[test]
fn survives_random_datagrams() {
    let (s, u) = server(&[]);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let words: &[&[u8]] = &[
        b"get ",
        b"gets ",
        b"gat 1 ",
        b"set ",
        b"add ",
        b"cas ",
        b"incr ",
        b"delete ",
        b"mg ",
        b"ms ",
        b"md ",
        b"ma ",
        b"mn",
        b"me ",
        b"stats ",
        b"k ",
        b"0 ",
        b"1 ",
        b"4294967295 ",
        b"-1 ",
        b"noreply",
        b"v ",
        b"q ",
        b"\r\n",
        b"\n",
        b" ",
        b"\0",
        b"\x80",
        b"\xff",
    ];
    let mut buf = Vec::new();
    for i in 0..4000 {
        buf.clear();
        match i % 4 {
            // Pure noise, any length up to a few datagrams' worth.
            0 => buf.extend((0..rng.below(3000)).map(|_| rng.next() as u8)),
            // A valid header, then noise.
            1 => {
                buf.extend_from_slice(&frame(rng.next() as u16, 0, 1, 0, b""));
                buf.extend((0..rng.below(1500)).map(|_| rng.next() as u8));
            }
            // A valid header, then protocol-looking words.
            2 => {
                buf.extend_from_slice(&frame(rng.next() as u16, 0, 1, 0, b""));
                for _ in 0..rng.below(40) {
                    buf.extend_from_slice(words[rng.below(words.len())]);
                }
            }
            // A binary header with random fields.
            _ => {
                buf.extend_from_slice(&frame(rng.next() as u16, 0, 1, 0, &[0x80]));
                buf.extend((0..23 + rng.below(64)).map(|_| rng.next() as u8));
            }
        }
        u.send_raw(&buf);
    }
    // A fresh socket, so that the replies to the noise do not get in the way. The
    // server may still be reading the backlog, and a datagram that meets a full
    // receive buffer is lost, so the first request is repeated until answered.
    // (memcached may also be in the middle of a value started by the noise; see the
    // module docs.)
    let fresh = Udp::new(&s);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        fresh.send(9, b"get nothing\r\n");
        if let Some(d) = fresh.recv_within(Duration::from_millis(200)) {
            if d.id == 9 && d.payload == END {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the server stopped answering");
    }
    // Drain late answers to the repeats.
    while fresh.recv_within(Duration::from_millis(100)).is_some() {}
    if !against_memcached() {
        fresh.call(10, &store("set", "after", 0, 0, b"ok"), &[b"STORED\r\n"]);
        fresh.call(
            11,
            b"get after\r\n",
            &[&cat(&[&value("after", 0, b"ok"), END])],
        );
    }
    let mut c: Client = s.connect();
    c.call(b"get nothing\r\n", END);
}
