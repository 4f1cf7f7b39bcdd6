//! `Cluster` over three real servers (two memcrab, one memcached): every key lands
//! on the server its ring names, multi-key gets fan out, a dead server fails only
//! its own keys.

mod common;

use common::{test_options, Kind, Server};
use memcrab_client::{CasOutcome, Cluster, Commands, Error};

fn three_servers() -> Vec<Server> {
    let mut servers = vec![
        Server::start(Kind::Memcrab, &[]).expect("memcrab starts"),
        Server::start(Kind::Memcrab, &[]).expect("memcrab starts"),
    ];
    servers.push(match Server::start(Kind::Memcached, &[]) {
        Some(s) => s,
        None => Server::start(Kind::Memcrab, &[]).expect("memcrab starts"),
    });
    servers
}

fn cluster_of(servers: &[Server]) -> Cluster {
    let addrs: Vec<String> = servers.iter().map(Server::addr_text).collect();
    let refs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    Cluster::new(&refs, &test_options()).expect("cluster")
}

#[test]
fn keys_land_where_the_ring_says() {
    let servers = three_servers();
    let mut cluster = cluster_of(&servers);
    assert_eq!(cluster.servers().len(), 3);
    assert_eq!(cluster.ring().point_count(), 480);
    let keys: Vec<String> = (0..200).map(|i| format!("c:{i}")).collect();
    for k in &keys {
        cluster.set(k, k, 0, 0).expect("set");
    }
    let mut direct: Vec<_> = servers.iter().map(Server::connect).collect();
    let mut spread = [0usize; 3];
    for k in &keys {
        let holders: Vec<usize> = (0..3)
            .filter(|&i| direct[i].get(k).expect("get").is_some())
            .collect();
        assert_eq!(holders, [cluster.server_for(k)], "{k}");
        spread[holders[0]] += 1;
    }
    assert!(spread.iter().all(|&n| n > 20), "{spread:?}");

    let mut wanted = keys.clone();
    wanted.push("c:missing".into());
    let mut hits = cluster.get_multi(&wanted).expect("get_multi");
    hits.sort_by(|a, b| a.key.cmp(&b.key));
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(
        hits.iter()
            .map(|i| String::from_utf8_lossy(&i.key).into_owned())
            .collect::<Vec<_>>(),
        sorted
    );
    assert!(hits.iter().all(|i| i.key == i.value && i.cas.is_none()));
    let with_cas = cluster.gets_multi(&keys[..10]).expect("gets_multi");
    assert_eq!(with_cas.len(), 10);
    assert!(with_cas.iter().all(|i| i.cas.is_some()));
    assert!(cluster.get_multi::<&str>(&[]).expect("no keys").is_empty());

    cluster.flush_all(None).expect("flush_all");
    assert!(cluster.get_multi(&keys).expect("get_multi").is_empty());
}

#[test]
fn every_keyed_command() {
    let servers = three_servers();
    let mut c = cluster_of(&servers);
    assert!(c.add("a", "1", 0, 0).expect("add"));
    assert!(!c.add("a", "1", 0, 0).expect("add again"));
    assert!(c.replace("a", "2", 4, 0).expect("replace"));
    assert!(c.append("a", "3").expect("append"));
    assert!(c.prepend("a", "1").expect("prepend"));
    let got = c.get("a").expect("get").expect("hit");
    assert_eq!((got.value.as_slice(), got.flags), (b"123".as_slice(), 4));
    let cas = c.gets("a").expect("gets").expect("hit").cas.expect("cas");
    assert_eq!(c.cas("a", "9", 0, 0, cas).expect("cas"), CasOutcome::Stored);
    assert_eq!(c.cas("a", "8", 0, 0, cas).expect("cas"), CasOutcome::Exists);
    assert_eq!(c.incr("a", 1).expect("incr"), Some(10));
    assert_eq!(c.decr("a", 3).expect("decr"), Some(7));
    assert!(c.touch("a", 1000).expect("touch"));
    assert!(c.gat("a", 1000).expect("gat").is_some());
    assert!(c
        .gats("a", 1000)
        .expect("gats")
        .and_then(|i| i.cas)
        .is_some());
    assert!(c.delete("a").expect("delete"));
    assert_eq!(c.get("a").expect("get"), None);
    // Key-less commands go through a chosen server's connection.
    let v = c
        .connection(2)
        .expect("server 2")
        .version()
        .expect("version");
    assert!(v.starts_with("1.6."));
    assert!(matches!(c.connection(3), Err(Error::InvalidArgument(_))));
}

#[test]
fn a_dead_server_fails_only_its_keys() {
    let mut servers = three_servers();
    let mut c = cluster_of(&servers);
    let keys: Vec<String> = (0..60).map(|i| format!("d:{i}")).collect();
    for k in &keys {
        c.set(k, "v", 0, 0).expect("set");
    }
    servers[0].kill();
    let (dead, alive): (Vec<&String>, Vec<&String>) =
        keys.iter().partition(|k| c.server_for(k) == 0);
    assert!(!dead.is_empty() && !alive.is_empty());
    let e = c.get(dead[0]).expect_err("its server is gone");
    assert!(e.is_fatal(), "{e:?}");
    // The next use reconnects (and fails to), rather than reporting the old break.
    match c.get(dead[0]) {
        Err(Error::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused),
        other => panic!("{other:?}"),
    }
    for k in &alive {
        assert!(c.get(k).expect("other servers work").is_some(), "{k}");
    }
    // A fan-out that includes the dead server fails, and leaves the others in sync.
    assert!(c.get_multi(&keys).is_err());
    for k in &alive {
        assert!(c.get(k).expect("still in sync").is_some(), "{k}");
    }
    assert!(c.flush_all(None).is_err());
}
