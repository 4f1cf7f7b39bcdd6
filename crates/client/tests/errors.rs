//! Errors: server errors that leave the connection usable, requests refused before
//! any I/O, timeouts, closed connections and replies that cannot be parsed.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::{test_options, Kind, Server};
use memcrab_client::{Cluster, Commands, Connection, Error, KeyError, Options};

both! {
    fn too_large_is_a_server_error(srv: &Server) {
        let mut c = srv.connect();
        c.set("k", "small", 0, 0).expect("set");
        let big = vec![b'x'; 2 * 1024 * 1024];
        match c.set("k", &big, 0, 0) {
            Err(Error::ServerError(m)) => assert_eq!(m, "object too large for cache"),
            other => panic!("2 MiB value under -I 1m: {other:?}"),
        }
        assert!(!c.is_broken(), "the server swallowed the data block; still in sync");
        // memcached drops the old value when a set is too large.
        assert_eq!(c.get("k").expect("get"), None);
        assert!(matches!(c.add("k", &big, 0, 0), Err(Error::ServerError(_))));
        c.set("k", "after", 0, 0).expect("set");
        assert_eq!(c.get("k").expect("get").map(|i| i.value), Some(b"after".to_vec()));
    }

    fn non_numeric_incr_is_a_client_error(srv: &Server) {
        let mut c = srv.connect();
        c.set("k", "ten", 0, 0).expect("set");
        let e = c.incr("k", 1).expect_err("incr of text");
        assert!(matches!(&e, Error::ClientError(m) if m.contains("non-numeric")), "{e:?}");
        assert!(!e.is_fatal());
        assert_eq!(e.to_string(), "CLIENT_ERROR cannot increment or decrement non-numeric value");
        assert_eq!(c.get("k").expect("get").map(|i| i.value), Some(b"ten".to_vec()));
    }

    fn unknown_stats_is_a_plain_error(srv: &Server) {
        let mut c = srv.connect();
        let e = c.stats(Some("bogus")).expect_err("stats bogus");
        assert!(matches!(&e, Error::Error(m) if m.is_empty()), "{e:?}");
        assert_eq!(e.to_string(), "ERROR");
        assert!(c.version().is_ok(), "still in sync");
    }
}

/// A listener standing in for a server: accepts one connection and reports every
/// byte the client sent until the client closed it.
fn record_one() -> (u16, thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let h = thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut got = Vec::new();
        s.read_to_end(&mut got)
            .expect("read until the client closes");
        got
    });
    (port, h)
}

#[test]
fn invalid_keys_are_refused_without_io() {
    let (port, recorder) = record_one();
    let mut c =
        Connection::connect_with(&format!("127.0.0.1:{port}"), &test_options()).expect("connect");
    let long = "k".repeat(251);
    let bad: [(&str, KeyError); 6] = [
        ("", KeyError::Empty),
        (&long, KeyError::TooLong { len: 251 }),
        ("a b", KeyError::BadByte { at: 1, byte: b' ' }),
        ("a\r\nflush_all", KeyError::BadByte { at: 1, byte: b'\r' }),
        ("tab\t", KeyError::BadByte { at: 3, byte: b'\t' }),
        ("nul\0", KeyError::BadByte { at: 3, byte: 0 }),
    ];
    for (key, why) in &bad {
        let want = |r: Result<(), Error>| match r {
            Err(Error::InvalidKey(k)) => assert_eq!(&k, why, "{key:?}"),
            other => panic!("{key:?}: {other:?}"),
        };
        want(c.get(key).map(drop));
        want(c.gets(key).map(drop));
        want(c.get_multi(&["ok", key]).map(drop));
        want(c.gets_multi(&[key]).map(drop));
        want(c.gat(key, 1).map(drop));
        want(c.gats(key, 1).map(drop));
        want(c.gat_multi(&[key, "ok"], 1).map(drop));
        want(c.gats_multi(&[key], 1).map(drop));
        want(c.set(key, "v", 0, 0));
        want(c.add(key, "v", 0, 0).map(drop));
        want(c.replace(key, "v", 0, 0).map(drop));
        want(c.append(key, "v").map(drop));
        want(c.prepend(key, "v").map(drop));
        want(c.cas(key, "v", 0, 0, 1).map(drop));
        want(c.delete(key).map(drop));
        want(c.incr(key, 1).map(drop));
        want(c.decr(key, 1).map(drop));
        want(c.touch(key, 1).map(drop));
        let mut nr = c.noreply();
        want(nr.set(key, "v", 0, 0));
        want(nr.add(key, "v", 0, 0));
        want(nr.replace(key, "v", 0, 0));
        want(nr.append(key, "v"));
        want(nr.prepend(key, "v"));
        want(nr.cas(key, "v", 0, 0, 1));
        want(nr.delete(key));
        want(nr.incr(key, 1));
        want(nr.decr(key, 1));
        want(nr.touch(key, 1));
        let r = c
            .pipeline()
            .get(key)
            .set(key, "v", 0, 0)
            .execute()
            .expect("execute");
        assert_eq!(r.len(), 2);
        for x in r {
            want(x.map(drop));
        }
    }
    assert!(!c.is_broken());
    drop(c);
    assert_eq!(recorder.join().expect("recorder"), b"", "no byte was sent");

    // A cluster checks before it connects: the servers here do not exist.
    let mut cluster =
        Cluster::new(&["127.0.0.1:1", "127.0.0.1:2"], &test_options()).expect("cluster");
    assert!(matches!(cluster.get("a b"), Err(Error::InvalidKey(_))));
    assert!(matches!(
        cluster.get_multi(&["ok", ""]),
        Err(Error::InvalidKey(_))
    ));
}

/// A server that accepts and never answers: the read times out, the connection is
/// broken, and reconnecting makes it usable again.
#[test]
fn read_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let opts = Options {
        read_timeout: Some(Duration::from_millis(200)),
        ..test_options()
    };
    let mut c = Connection::connect_with(&format!("127.0.0.1:{port}"), &opts).expect("connect");
    let (mut first, _) = listener.accept().expect("accept");
    let start = Instant::now();
    let e = c.get("k").expect_err("no reply");
    let waited = start.elapsed();
    assert!(matches!(e, Error::Timeout), "{e:?}");
    assert!(e.is_fatal());
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert!(c.is_broken());
    assert!(matches!(c.version(), Err(Error::Broken)));
    // The broken connection was shut down: a late reply cannot reach a later call.
    let mut sent = Vec::new();
    first
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    first.read_to_end(&mut sent).expect("client closed");
    assert_eq!(sent, b"get k\r\n");

    c.reconnect().expect("reconnect");
    let (mut second, _) = listener.accept().expect("accept again");
    second.write_all(b"VERSION 9\r\n").expect("answer");
    assert_eq!(c.version().expect("version"), "9");
}

#[test]
fn options_and_addresses() {
    let zero = Options {
        write_timeout: Some(Duration::ZERO),
        ..Options::default()
    };
    assert!(matches!(
        Connection::connect_with("127.0.0.1:1", &zero),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        Connection::connect("127.0.0.1:x"),
        Err(Error::InvalidAddr(_))
    ));
    // Nothing listens on a port we just released.
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    match Connection::connect(&format!("127.0.0.1:{port}")) {
        Err(Error::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused),
        other => panic!("connect to a closed port: {other:?}"),
    }
    assert!(matches!(
        Connection::connect("/nonexistent/memcrab.sock"),
        Err(Error::Io(_))
    ));
}

#[test]
fn server_gone() {
    let Some(mut srv) = Server::start(Kind::Memcrab, &[]) else {
        unreachable!("memcrab always starts")
    };
    let mut c = srv.connect();
    c.set("k", "v", 0, 0).expect("set");
    srv.kill();
    let e = c.get("k").expect_err("server killed");
    assert!(matches!(e, Error::Closed | Error::Io(_)), "{e:?}");
    assert!(e.is_fatal() && c.is_broken());
    assert!(c.reconnect().is_err());
}

/// One fake reply per case: what the client makes of it, and whether the
/// connection survives. The fake server keeps the connection open after replying,
/// except in the last case, where it closes mid-reply.
#[test]
fn bad_replies() {
    type Call = fn(&mut Connection) -> Result<(), Error>;
    type Is = fn(&Error) -> bool;
    let cases: &[(&[u8], Call, Is, bool)] = &[
        // Not a reply at all: a bad flags field.
        (
            b"VALUE k x 3\r\nabc\r\nEND\r\n",
            |c| c.get("k").map(drop),
            |e| matches!(e, Error::Malformed(_)),
            true,
        ),
        // A data block without its CR LF.
        (
            b"VALUE k 0 3\r\nabcd\r\n",
            |c| c.get("k").map(drop),
            |e| matches!(e, Error::Malformed(_)),
            true,
        ),
        // A status where values belong: out of sync.
        (
            b"STORED\r\n",
            |c| c.get("k").map(drop),
            |e| matches!(e, Error::Malformed(_)),
            true,
        ),
        // A value where a status belongs: out of sync.
        (
            b"VALUE k 0 1\r\na\r\nEND\r\n",
            |c| c.delete("k").map(drop),
            |e| matches!(e, Error::Malformed(_)),
            true,
        ),
        // The wrong status line: still in sync.
        (
            b"DELETED\r\n",
            |c| c.set("k", "v", 0, 0),
            |e| matches!(e, Error::UnexpectedReply(m) if m == "DELETED"),
            false,
        ),
        (
            b"ERROR\r\n",
            |c| c.touch("k", 1).map(drop),
            |e| matches!(e, Error::Error(m) if m.is_empty()),
            false,
        ),
        (
            b"SERVER_ERROR out of memory storing object\r\n",
            |c| c.set("k", "v", 0, 0),
            |e| matches!(e, Error::ServerError(m) if m == "out of memory storing object"),
            false,
        ),
        // The server closes mid-reply.
        (
            b"VALUE k 0 10\r\nabc",
            |c| c.get("k").map(drop),
            |e| matches!(e, Error::Closed),
            true,
        ),
    ];
    for (i, &(reply, call, is, fatal)) in cases.iter().enumerate() {
        let close = i == cases.len() - 1;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let reply = reply.to_vec();
        let server = thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut b = [0u8; 512];
            let _ = s.read(&mut b).expect("request");
            s.write_all(&reply).expect("reply");
            (!close).then_some(s)
        });
        let mut c = Connection::connect_with(&format!("127.0.0.1:{port}"), &test_options())
            .expect("connect");
        let e = call(&mut c).expect_err("case should fail");
        let kept_open: Option<TcpStream> = server.join().expect("fake server");
        assert!(is(&e), "case {i}: {e:?}");
        assert_eq!(c.is_broken(), fatal, "case {i}: {e:?}");
        assert_eq!(e.is_fatal(), fatal, "case {i}: {e:?}");
        drop(kept_open);
    }
}
