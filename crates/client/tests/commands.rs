//! Every `Connection` method against the real memcrab binary and against memcached
//! 1.6: the same assertions hold for both.

mod common;

use common::{Kind, Server};
use memcrab_client::{CasOutcome, Commands, Connection, Error, Item};

fn item(key: &str, value: &[u8], flags: u32) -> Item {
    Item {
        key: key.as_bytes().to_vec(),
        value: value.to_vec(),
        flags,
        cas: None,
    }
}

fn value_of(c: &mut Connection, key: &str) -> Option<Vec<u8>> {
    c.get(key).expect("get").map(|i| i.value)
}

both! {
    fn set_and_get(srv: &Server) {
        let mut c = srv.connect();
        assert_eq!(c.get("absent").expect("get"), None);
        c.set("k", "hello", 42, 0).expect("set");
        assert_eq!(c.get("k").expect("get"), Some(item("k", b"hello", 42)));
        // Values are bytes: CR LF, END and NUL inside a value are data.
        let tricky = b"line\r\nEND\r\n\0\xff VALUE x 0 1\r\n";
        c.set(b"bin".as_slice(), tricky, u32::MAX, 0).expect("set");
        assert_eq!(c.get("bin").expect("get"), Some(item("bin", tricky, u32::MAX)));
        c.set("empty", "", 0, 0).expect("set");
        assert_eq!(value_of(&mut c, "empty"), Some(Vec::new()));
        // A key of exactly 250 bytes and a UTF-8 key.
        let long = "k".repeat(250);
        c.set(&long, "x", 0, 0).expect("set 250-byte key");
        assert_eq!(value_of(&mut c, &long), Some(b"x".to_vec()));
        c.set("ключ", "значение", 0, 0).expect("set utf-8 key");
        assert_eq!(value_of(&mut c, "ключ"), Some("значение".as_bytes().to_vec()));
        // A value larger than the read buffer's first size arrives whole.
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        c.set("big", &big, 1, 0).expect("set big");
        assert_eq!(value_of(&mut c, "big"), Some(big));
        // An exptime in the past stores an already expired item.
        c.set("gone", "x", 0, -1).expect("set expired");
        assert_eq!(c.get("gone").expect("get"), None);
    }

    fn get_multi(srv: &Server) {
        let mut c = srv.connect();
        for i in 0..50 {
            c.set(format!("m{i}"), format!("v{i}"), i, 0).expect("set");
        }
        let keys: Vec<String> = (0..60).map(|i| format!("m{i}")).collect();
        let hits = c.get_multi(&keys).expect("get_multi");
        assert_eq!(hits.len(), 50, "misses are absent");
        for (i, hit) in hits.iter().enumerate() {
            assert_eq!(hit, &item(&format!("m{i}"), format!("v{i}").as_bytes(), i as u32));
        }
        assert_eq!(c.get_multi::<&str>(&[]).expect("no keys"), Vec::new());
        assert_eq!(c.get_multi(&["x1", "x2"]).expect("all misses"), Vec::new());
        // gets_multi carries CAS uniques, and they match gets.
        let with_cas = c.gets_multi(&["m1", "nope", "m2"]).expect("gets_multi");
        assert_eq!(with_cas.len(), 2);
        assert!(with_cas.iter().all(|i| i.cas.is_some()));
        let one = c.gets("m1").expect("gets").expect("hit");
        assert_eq!(one.cas, with_cas[0].cas);
        assert_eq!(c.gets("nope").expect("gets"), None);
    }

    fn add_replace_append_prepend(srv: &Server) {
        let mut c = srv.connect();
        assert!(c.add("k", "a", 1, 0).expect("add"));
        assert!(!c.add("k", "b", 2, 0).expect("add again"));
        assert_eq!(c.get("k").expect("get"), Some(item("k", b"a", 1)));
        assert!(c.replace("k", "c", 3, 0).expect("replace"));
        assert!(!c.replace("absent", "c", 3, 0).expect("replace absent"));
        assert_eq!(c.get("absent").expect("get"), None);
        assert!(c.append("k", "-end").expect("append"));
        assert!(c.prepend("k", "start-").expect("prepend"));
        assert_eq!(c.get("k").expect("get"), Some(item("k", b"start-c-end", 3)));
        assert!(!c.append("absent", "x").expect("append absent"));
        assert!(!c.prepend("absent", "x").expect("prepend absent"));
    }

    fn cas(srv: &Server) {
        let mut c = srv.connect();
        c.set("k", "v1", 0, 0).expect("set");
        let cas = c.gets("k").expect("gets").expect("hit").cas.expect("cas unique");
        assert_eq!(c.cas("k", "v2", 5, 0, cas).expect("cas"), CasOutcome::Stored);
        assert_eq!(c.cas("k", "v3", 0, 0, cas).expect("stale cas"), CasOutcome::Exists);
        assert_eq!(c.get("k").expect("get"), Some(item("k", b"v2", 5)));
        assert_eq!(c.cas("absent", "v", 0, 0, cas).expect("cas absent"), CasOutcome::NotFound);
        let newer = c.gets("k").expect("gets").expect("hit").cas.expect("cas unique");
        assert_ne!(newer, cas, "a store changes the CAS unique");
    }

    fn gat_and_gats(srv: &Server) {
        let mut c = srv.connect();
        c.set("k", "v", 7, 0).expect("set");
        assert_eq!(c.gat("k", 1000).expect("gat"), Some(item("k", b"v", 7)));
        let g = c.gats("k", 1000).expect("gats").expect("hit");
        assert_eq!((g.value.as_slice(), g.flags), (b"v".as_slice(), 7));
        assert_eq!(g.cas, c.gets("k").expect("gets").expect("hit").cas);
        assert_eq!(c.gat("absent", 10).expect("gat miss"), None);
        assert_eq!(c.gats("absent", 10).expect("gats miss"), None);
        c.set("k2", "w", 0, 0).expect("set");
        let hits = c.gat_multi(&["k", "absent", "k2"], 1000).expect("gat_multi");
        assert_eq!(hits.iter().map(|i| i.key.as_slice()).collect::<Vec<_>>(), [b"k".as_slice(), b"k2"]);
        let hits = c.gats_multi(&["k", "k2"], 1000).expect("gats_multi");
        assert!(hits.iter().all(|i| i.cas.is_some()) && hits.len() == 2);
        // The touch takes effect: a negative exptime expires the item after the read.
        assert_eq!(c.gat("k", -1).expect("gat"), Some(item("k", b"v", 7)));
        assert_eq!(c.get("k").expect("get"), None);
    }

    fn delete_and_touch(srv: &Server) {
        let mut c = srv.connect();
        c.set("k", "v", 0, 0).expect("set");
        assert!(c.touch("k", 1000).expect("touch"));
        assert!(!c.touch("absent", 1000).expect("touch absent"));
        assert_eq!(value_of(&mut c, "k"), Some(b"v".to_vec()));
        assert!(c.touch("k", -1).expect("touch to expire"));
        assert_eq!(c.get("k").expect("get"), None);
        c.set("d", "v", 0, 0).expect("set");
        assert!(c.delete("d").expect("delete"));
        assert!(!c.delete("d").expect("delete again"));
        assert_eq!(c.get("d").expect("get"), None);
    }

    fn incr_and_decr(srv: &Server) {
        let mut c = srv.connect();
        assert_eq!(c.incr("n", 1).expect("incr absent"), None);
        assert_eq!(c.decr("n", 1).expect("decr absent"), None);
        c.set("n", "10", 0, 0).expect("set");
        assert_eq!(c.incr("n", 5).expect("incr"), Some(15));
        assert_eq!(c.decr("n", 3).expect("decr"), Some(12));
        assert_eq!(c.decr("n", 100).expect("decr below zero"), Some(0));
        c.set("max", u64::MAX.to_string(), 0, 0).expect("set");
        assert_eq!(c.incr("max", 2).expect("incr wraps"), Some(1));
        assert_eq!(c.incr("n", u64::MAX).expect("incr by max"), Some(u64::MAX));
        c.set("text", "abc", 0, 0).expect("set");
        match c.incr("text", 1) {
            Err(Error::ClientError(m)) => {
                assert_eq!(m, "cannot increment or decrement non-numeric value")
            }
            other => panic!("incr of a non-number: {other:?}"),
        }
        match c.decr("text", 1) {
            Err(Error::ClientError(_)) => {}
            other => panic!("decr of a non-number: {other:?}"),
        }
        // A CLIENT_ERROR reply leaves the connection in sync.
        assert!(!c.is_broken());
        assert_eq!(c.incr("n", 1).expect("incr"), Some(0));
    }

    fn flush_all(srv: &Server) {
        let mut c = srv.connect();
        c.set("a", "1", 0, 0).expect("set");
        c.set("b", "2", 0, 0).expect("set");
        // A delayed flush leaves items readable until then.
        c.flush_all(Some(1000)).expect("flush_all 1000");
        assert_eq!(value_of(&mut c, "a"), Some(b"1".to_vec()));
        c.flush_all(None).expect("flush_all");
        assert_eq!(c.get_multi(&["a", "b"]).expect("get_multi"), Vec::new());
        c.set("c", "3", 0, 0).expect("set after flush");
        assert_eq!(value_of(&mut c, "c"), Some(b"3".to_vec()));
    }

    fn version_verbosity_memlimit(srv: &Server) {
        let mut c = srv.connect();
        let v = c.version().expect("version");
        assert!(v.starts_with("1.6."), "version {v:?}");
        c.verbosity(0).expect("verbosity");
        c.cache_memlimit(100).expect("cache_memlimit 100");
        match c.cache_memlimit(1) {
            Err(Error::UnexpectedReply(line)) => {
                assert!(line.starts_with("MEMLIMIT_TOO_SMALL"), "{line}")
            }
            other => panic!("cache_memlimit 1: {other:?}"),
        }
        assert_eq!(c.version().expect("still in sync"), v);
    }

    fn stats(srv: &Server) {
        let mut c = srv.connect();
        c.set("k", "v", 0, 0).expect("set");
        let general = c.stats(None).expect("stats");
        let find = |s: &[(String, String)], name: &str| {
            s.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
        };
        assert!(find(&general, "pid").is_some_and(|p| p.parse::<u32>().is_ok()), "{general:?}");
        assert_eq!(find(&general, "curr_items").as_deref(), Some("1"));
        assert_eq!(general.first().map(|(n, _)| n.as_str()), Some("pid"), "server order kept");
        let settings = c.stats(Some("settings")).expect("stats settings");
        assert!(find(&settings, "maxbytes").is_some(), "{settings:?}");
        let items = c.stats(Some("items")).expect("stats items");
        assert!(items.iter().any(|(n, _)| n.starts_with("items:") && n.ends_with(":number")), "{items:?}");
        c.stats(Some("slabs")).expect("stats slabs");
        assert_eq!(c.stats(Some("reset")).expect("stats reset"), Vec::new());
        assert!(matches!(c.stats(Some("a\r\nflush_all")), Err(Error::InvalidArgument(_))));
        assert_eq!(value_of(&mut c, "k"), Some(b"v".to_vec()), "not flushed by the refused line");
    }

    fn noreply(srv: &Server) {
        let mut c = srv.connect();
        {
            let mut nr = c.noreply();
            nr.set("a", "1", 3, 0).expect("set");
            nr.add("a", "x", 0, 0).expect("add (not stored)");
            nr.add("b", "2", 0, 0).expect("add");
            nr.replace("b", "22", 0, 0).expect("replace");
            nr.append("a", "+").expect("append");
            nr.prepend("a", "+").expect("prepend");
            nr.set("n", "5", 0, 0).expect("set");
            nr.incr("n", 10).expect("incr");
            nr.decr("n", 2).expect("decr");
            nr.set("d", "x", 0, 0).expect("set");
            nr.delete("d").expect("delete");
            nr.set("t", "x", 0, 0).expect("set");
            nr.touch("t", -1).expect("touch");
            nr.incr("a", 1).expect("incr of a non-number: the error is not sent");
            nr.verbosity(0).expect("verbosity");
            nr.cache_memlimit(100).expect("cache_memlimit");
        }
        // If any of those had answered, these reads would see its reply instead.
        assert_eq!(c.get("a").expect("get"), Some(item("a", b"+1+", 3)));
        assert_eq!(value_of(&mut c, "b"), Some(b"22".to_vec()));
        assert_eq!(value_of(&mut c, "n"), Some(b"13".to_vec()));
        assert_eq!(c.get_multi(&["d", "t"]).expect("get_multi"), Vec::new());
        let cas = c.gets("a").expect("gets").expect("hit").cas.expect("cas");
        c.noreply().cas("a", "new", 0, 0, cas).expect("cas");
        c.noreply().cas("a", "stale", 0, 0, cas).expect("stale cas");
        assert_eq!(value_of(&mut c, "a"), Some(b"new".to_vec()));
        c.noreply().flush_all(None).expect("flush_all");
        assert_eq!(c.get("a").expect("get"), None);
        c.noreply().flush_all(Some(1000)).expect("flush_all delayed");
        assert!(!c.version().expect("in sync").is_empty());
    }

    fn quit(srv: &Server) {
        let mut c = srv.connect();
        c.set("k", "v", 0, 0).expect("set");
        c.quit().expect("quit: the server closes");
        let mut again = srv.connect();
        assert_eq!(value_of(&mut again, "k"), Some(b"v".to_vec()));
    }

    fn connect_by_text(srv: &Server) {
        let mut c = Connection::connect(&srv.addr_text()).expect("connect");
        c.set("k", "v", 0, 0).expect("set");
        assert_eq!(c.addr(), &srv.addr);
        c.reconnect().expect("reconnect");
        assert_eq!(value_of(&mut c, "k"), Some(b"v".to_vec()));
    }
}

/// The same calls over a unix socket.
fn unix_socket(kind: Kind) {
    let Some(srv) = Server::start_unix(kind, &[]) else {
        return;
    };
    let mut c = Connection::connect(&srv.addr_text()).expect("connect to the socket");
    c.set("k", "over unix", 9, 0).expect("set");
    assert_eq!(c.get("k").expect("get"), Some(item("k", b"over unix", 9)));
    assert_eq!(c.incr("k", 1).map_err(|e| e.is_fatal()).err(), Some(false));
    let replies = c
        .pipeline()
        .get("k")
        .noreply()
        .delete("k")
        .get("k")
        .execute()
        .expect("pipeline");
    assert_eq!(replies.len(), 3);
    assert!(matches!(&replies[2], Ok(memcrab_client::Response::Values(v)) if v.is_empty()));
}

#[test]
fn unix_socket_memcrab() {
    unix_socket(Kind::Memcrab);
}

#[test]
fn unix_socket_memcached() {
    unix_socket(Kind::Memcached);
}
