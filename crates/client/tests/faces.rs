//! The `Commands` trait: one generic function issues the same requests through each
//! face that implements it (a connection, a pipeline, a cluster), and every face
//! leaves the server in the same state.

mod common;

use common::{test_options, Kind, Server};
use memcrab_client::{Cluster, Commands, Item};

/// Stores `k0..k3`, makes `n` a counter, deletes `k3` and bumps `n`: the same
/// requests whatever the face. The answers (typed results, or the pipeline
/// itself) are the face's business.
fn seed<C: Commands>(c: &mut C, tag: &str) {
    for i in 0..4 {
        let _ = c.set(format!("{tag}k{i}"), format!("v{i}"), i, 0);
    }
    let _ = c.set(format!("{tag}n"), "10", 0, 0);
    let _ = c.delete(format!("{tag}k3"));
    let _ = c.incr(format!("{tag}n"), 5);
}

/// What `seed` left behind, read through a plain connection.
fn check(srv: &Server, tag: &str) {
    let mut conn = srv.connect();
    let keys: Vec<String> = ["k0", "k1", "k2", "k3", "n"]
        .iter()
        .map(|k| format!("{tag}{k}"))
        .collect();
    let got: Vec<(Vec<u8>, Vec<u8>, u32)> = conn
        .get_multi(&keys)
        .expect("get_multi")
        .into_iter()
        .map(|it: Item| (it.key, it.value, it.flags))
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>, u32)> = vec![
        (format!("{tag}k0").into(), b"v0".to_vec(), 0),
        (format!("{tag}k1").into(), b"v1".to_vec(), 1),
        (format!("{tag}k2").into(), b"v2".to_vec(), 2),
        (format!("{tag}n").into(), b"15".to_vec(), 0),
    ];
    assert_eq!(got, want, "after seeding through {tag}");
}

#[test]
fn one_generic_function_drives_every_face() {
    let srv = Server::start(Kind::Memcrab, &[]).expect("memcrab starts");

    let mut conn = srv.connect();
    seed(&mut conn, "conn-");
    check(&srv, "conn-");

    let mut p = conn.pipeline();
    seed(&mut p, "pipe-");
    let replies = p.execute().expect("execute");
    assert_eq!(replies.len(), 7, "{replies:?}");
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    check(&srv, "pipe-");

    let mut cluster = Cluster::new(&[&srv.addr_text()], &test_options()).expect("cluster");
    seed(&mut cluster, "ring-");
    check(&srv, "ring-");
}
