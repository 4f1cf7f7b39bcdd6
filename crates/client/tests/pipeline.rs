//! Pipelines: a thousand mixed requests against memcrab and memcached, proof that a
//! batch goes out before any reply is awaited, and batches larger than the socket
//! buffers.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::{test_options, Kind, Server};
use memcrab_client::{Commands, Connection, Error, Item, KeyError, Options, Response};

fn item(key: &str, value: &[u8], flags: u32, cas: Option<u64>) -> Item {
    Item {
        key: key.as_bytes().to_vec(),
        value: value.to_vec(),
        flags,
        cas,
    }
}

/// The keys of a `Values` response.
fn keys(r: &Result<Response, Error>) -> Vec<String> {
    match r {
        Ok(Response::Values(v)) => v
            .iter()
            .map(|i| String::from_utf8_lossy(&i.key).into_owned())
            .collect(),
        other => panic!("not a get reply: {other:?}"),
    }
}

both! {
    /// 1000 requests of every kind (8 per round, 125 rounds) and one refused
    /// request in the middle, in one batch; every reply checked in order.
    fn thousand_mixed(srv: &Server) {
        let mut c = srv.connect();
        c.set("n", "0", 0, 0).expect("set counter");
        let mut p = c.pipeline();
        for r in 0..125u32 {
            let k = format!("k{r}");
            let nr = format!("nr{r}");
            p.set(&k, format!("v{r}"), r, 0)
                .get(&k)
                .incr("n", 1)
                .noreply()
                .set(&nr, "x", 0, 0)
                .add(&k, "other", 0, 0)
                .gets_multi(&[k.as_str(), nr.as_str(), "missing"])
                .delete(&k)
                .get_multi(&[k.as_str(), nr.as_str()]);
            if r == 60 {
                p.get("bad key");
            }
        }
        assert_eq!(p.len(), 1001);
        let replies = p.execute().expect("execute");
        assert!(p.is_empty(), "execute drains the pipeline");
        assert_eq!(replies.len(), 1001);
        let mut it = replies.iter();
        for r in 0..125u32 {
            let k = format!("k{r}");
            let mut next = || it.next().expect("a reply per request");
            assert!(matches!(next(), Ok(Response::Stored)), "set {r}");
            match next() {
                Ok(Response::Values(v)) => {
                    assert_eq!(v, &[item(&k, format!("v{r}").as_bytes(), r, None)])
                }
                other => panic!("get {r}: {other:?}"),
            }
            match next() {
                Ok(Response::Number(n)) => assert_eq!(*n, u64::from(r) + 1),
                other => panic!("incr {r}: {other:?}"),
            }
            assert!(matches!(next(), Ok(Response::NoReply)));
            assert!(matches!(next(), Ok(Response::NotStored)), "add {r}");
            let g = next();
            assert_eq!(keys(g), [k.clone(), format!("nr{r}")]);
            assert!(matches!(g, Ok(Response::Values(v)) if v.iter().all(|i| i.cas.is_some())));
            assert!(matches!(next(), Ok(Response::Deleted)), "delete {r}");
            assert_eq!(keys(next()), [format!("nr{r}")]);
            if r == 60 {
                assert!(matches!(
                    next(),
                    Err(Error::InvalidKey(KeyError::BadByte { at: 3, byte: b' ' }))
                ));
            }
        }
        assert!(it.next().is_none());
        // The connection is in sync afterwards.
        assert_eq!(c.get("n").expect("get").map(|i| i.value), Some(b"125".to_vec()));
    }

    /// Every other command in a pipeline, server errors included; a pipeline is
    /// reusable after `execute`.
    fn every_command_and_errors(srv: &Server) {
        let mut c = srv.connect();
        let big = vec![b'x'; 2 * 1024 * 1024];
        let mut p = c.pipeline();
        p.set("a", "1", 0, 0)
            .set("big", &big, 0, 0)
            .replace("a", "2", 0, 0)
            .append("a", "3")
            .prepend("a", "0")
            .gets("a")
            .incr("a", 1)
            .set("t", "text", 0, 0)
            .incr("t", 1)
            .decr("a", 100)
            .touch("a", 1000)
            .gat("a", 1000)
            .gats("a", 1000)
            .gat_multi(&["a", "t"], 1000)
            .gats_multi(&["t"], 1000)
            .get_multi::<&str>(&[])
            .version()
            .verbosity(0)
            .cache_memlimit(100)
            .stats(None)
            .stats(Some("reset"))
            .stats(Some("bogus"))
            .noreply()
            .append("a", "9");
        let r = p.execute().expect("execute");
        assert_eq!(r.len(), 23);
        assert!(matches!(r[0], Ok(Response::Stored)));
        assert!(
            matches!(&r[1], Err(Error::ServerError(m)) if m == "object too large for cache"),
            "{:?}",
            r[1]
        );
        assert!(matches!(r[2], Ok(Response::Stored)));
        assert!(matches!(r[3], Ok(Response::Stored)));
        assert!(matches!(r[4], Ok(Response::Stored)));
        let cas = match &r[5] {
            Ok(Response::Values(v)) if v.len() == 1 && v[0].value == b"023" => v[0].cas,
            other => panic!("gets: {other:?}"),
        };
        assert!(matches!(r[6], Ok(Response::Number(24))));
        assert!(matches!(r[7], Ok(Response::Stored)));
        assert!(matches!(&r[8], Err(Error::ClientError(_))), "{:?}", r[8]);
        assert!(matches!(r[9], Ok(Response::Number(0))));
        assert!(matches!(r[10], Ok(Response::Touched)));
        assert_eq!(keys(&r[11]), ["a"]);
        assert!(matches!(&r[12], Ok(Response::Values(v)) if v[0].cas.is_some() && v[0].cas != cas));
        assert_eq!(keys(&r[13]), ["a", "t"]);
        assert_eq!(keys(&r[14]), ["t"]);
        assert_eq!(keys(&r[15]), Vec::<String>::new());
        assert!(matches!(&r[16], Ok(Response::Version(v)) if v.starts_with("1.6.")));
        assert!(matches!(r[17], Ok(Response::Ok)));
        assert!(matches!(r[18], Ok(Response::Ok)));
        assert!(matches!(&r[19], Ok(Response::Stats(s)) if s.iter().any(|(n, _)| n == "pid")));
        assert!(matches!(r[20], Ok(Response::Reset)));
        assert!(matches!(&r[21], Err(Error::Error(m)) if m.is_empty()), "{:?}", r[21]);
        assert!(matches!(r[22], Ok(Response::NoReply)));

        // Reuse, cas and flush_all.
        let cas = c.gets("a").expect("gets").expect("hit").cas.expect("cas");
        let mut p = c.pipeline();
        p.cas("a", "new", 1, 0, cas).cas("a", "again", 0, 0, cas).get("a");
        let r = p.execute().expect("execute");
        assert!(matches!(r[0], Ok(Response::Stored)));
        assert!(matches!(r[1], Ok(Response::Exists)));
        assert!(matches!(&r[2], Ok(Response::Values(v)) if v[0].value == b"new" && v[0].flags == 1));
        p.noreply().flush_all(None).get("a").flush_all(Some(1000));
        let r = p.execute().expect("execute again");
        assert!(matches!(r[0], Ok(Response::NoReply)));
        assert_eq!(keys(&r[1]), Vec::<String>::new());
        assert!(matches!(r[2], Ok(Response::Ok)));
        assert!(p.execute().expect("empty pipeline").is_empty());
    }

    /// Every `noreply` form in one batch: each answers `NoReply`, and the reads
    /// queued after them get their own replies (nothing extra arrived).
    fn noreply_forms(srv: &Server) {
        let mut c = srv.connect();
        c.set("c", "x", 0, 0).expect("set");
        let cas = c.gets("c").expect("gets").expect("hit").cas.expect("cas");
        let mut p = c.pipeline();
        p.noreply()
            .set("a", "1", 0, 0)
            .noreply()
            .add("a", "no", 0, 0)
            .noreply()
            .add("b", "2", 0, 0)
            .noreply()
            .replace("b", "3", 5, 0)
            .noreply()
            .append("a", "]")
            .noreply()
            .prepend("a", "[")
            .noreply()
            .cas("c", "y", 0, 0, cas)
            .noreply()
            .set("n", "10", 0, 0)
            .noreply()
            .incr("n", 5)
            .noreply()
            .decr("n", 1)
            .noreply()
            .incr("a", 1)
            .noreply()
            .touch("b", 1000)
            .noreply()
            .verbosity(0)
            .noreply()
            .cache_memlimit(100)
            .noreply()
            .set("d", "x", 0, 0)
            .noreply()
            .delete("d")
            .get_multi(&["a", "b", "c", "n", "d"]);
        let r = p.execute().expect("execute");
        assert_eq!(r.len(), 17);
        assert!(r[..16].iter().all(|r| matches!(r, Ok(Response::NoReply))), "{r:?}");
        match &r[16] {
            Ok(Response::Values(v)) => {
                let got: Vec<(&[u8], &[u8], u32)> = v
                    .iter()
                    .map(|i| (i.key.as_slice(), i.value.as_slice(), i.flags))
                    .collect();
                let want: [(&[u8], &[u8], u32); 4] =
                    [(b"a", b"[1]", 0), (b"b", b"3", 5), (b"c", b"y", 0), (b"n", b"14", 0)];
                assert_eq!(got, want);
            }
            other => panic!("{other:?}"),
        }
    }

    /// 100 × (set 256 KiB, get it back): 25 MiB each way, far past the socket
    /// buffers. Writing all before reading would deadlock (the server stops reading
    /// while its replies are not read) and end in a timeout; the writer thread
    /// avoids that.
    fn larger_than_socket_buffers(srv: &Server) {
        let mut c = srv.connect();
        let value = |i: usize| vec![b'a' + (i % 26) as u8; 256 * 1024];
        let mut p = c.pipeline();
        for i in 0..100 {
            let k = format!("big{i}");
            p.set(&k, value(i), 0, 0).get(&k);
        }
        let r = p.execute().expect("execute");
        for i in 0..100 {
            assert!(matches!(r[2 * i], Ok(Response::Stored)), "set {i}");
            match &r[2 * i + 1] {
                Ok(Response::Values(v)) => assert_eq!(v[0].value, value(i), "get {i}"),
                other => panic!("get {i}: {other:?}"),
            }
        }
        assert!(!c.version().expect("in sync").is_empty());
    }
}

/// A batch is written whole before any reply is read: this fake server answers
/// nothing until it has every request. A client that waited for a reply first
/// would time out.
#[test]
fn all_requests_before_any_reply() {
    const N: usize = 1000;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let mut expected = Vec::new();
    for i in 0..N {
        expected.extend_from_slice(format!("get key{i}\r\n").as_bytes());
    }
    expected.extend_from_slice(b"delete gone noreply\r\n");
    let want = expected.clone();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut got = vec![0u8; want.len()];
        s.read_exact(&mut got)
            .expect("every request before any reply");
        assert_eq!(got, want);
        let mut replies = Vec::new();
        for i in 0..N {
            replies
                .extend_from_slice(format!("VALUE key{i} 0 1\r\n{}\r\nEND\r\n", i % 10).as_bytes());
        }
        s.write_all(&replies).expect("write replies");
    });
    let opts = Options {
        read_timeout: Some(Duration::from_secs(5)),
        ..test_options()
    };
    let mut c = Connection::connect_with(&format!("127.0.0.1:{port}"), &opts).expect("connect");
    let mut p = c.pipeline();
    for i in 0..N {
        p.get(format!("key{i}"));
    }
    p.noreply().delete("gone");
    let r = p.execute().expect("execute");
    server.join().expect("fake server");
    assert_eq!(r.len(), N + 1);
    for (i, reply) in r[..N].iter().enumerate() {
        match reply {
            Ok(Response::Values(v)) => assert_eq!(v[0].value, (i % 10).to_string().as_bytes()),
            other => panic!("{i}: {other:?}"),
        }
    }
    assert!(matches!(r[N], Ok(Response::NoReply)));
}

/// A broken connection refuses a batch; a batch whose every request is refused
/// sends nothing.
#[test]
fn broken_and_refused_batches() {
    let Some(srv) = Server::start(Kind::Memcrab, &[]) else {
        unreachable!("memcrab always starts")
    };
    let mut c = srv.connect();
    let r = c
        .pipeline()
        .get("")
        .set("a b", "v", 0, 0)
        .noreply()
        .delete("x\ny")
        .execute()
        .expect("nothing to send is fine");
    assert!(
        r.iter().all(|r| matches!(r, Err(Error::InvalidKey(_)))),
        "{r:?}"
    );
    assert!(!c.version().expect("in sync").is_empty());

    let mut srv = srv;
    srv.kill();
    let err = c.pipeline().get("k").execute().expect_err("server gone");
    assert!(err.is_fatal(), "{err:?}");
    assert!(c.is_broken());
    assert!(matches!(
        c.pipeline().get("k").execute(),
        Err(Error::Broken)
    ));
}

/// A batch too large to write before reading, to a server that answers nonsense
/// and stops reading: the reader's error is reported, at once (the writer, blocked
/// on full socket buffers, is released by the shutdown, not by its timeout).
#[test]
fn large_batch_reports_the_first_failure() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        s.write_all(b"BOGUS\r\n").expect("reply");
        let _ = done_rx.recv();
    });
    let opts = Options {
        write_timeout: Some(Duration::from_secs(30)),
        read_timeout: Some(Duration::from_secs(30)),
        ..test_options()
    };
    let mut c = Connection::connect_with(&format!("127.0.0.1:{port}"), &opts).expect("connect");
    let value = vec![b'v'; 1024 * 1024];
    let mut p = c.pipeline();
    // A line that cannot start a get's reply: the stream is out of sync.
    p.get("k");
    for i in 0..32 {
        p.set(format!("k{i}"), &value, 0, 0);
    }
    let start = Instant::now();
    let e = p.execute().expect_err("nonsense reply");
    let took = start.elapsed();
    done_tx.send(()).expect("release the fake server");
    server.join().expect("fake server");
    assert!(matches!(e, Error::Malformed(_)), "{e:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(c.is_broken());
}
