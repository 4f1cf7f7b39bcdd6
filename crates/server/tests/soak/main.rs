//! Faults and load against the real binary: many connections, slowloris,
//! clients that never read, connection churn, a client killed in the middle of a
//! value, values at the `-I` limit, `kill -9` and a restart under load, and memory
//! pressure at `-m 64`.
//!
//! ```text
//!   probe thread ── set p<n> / get p<n> every ms ──► latency of each request (p99)
//!   rss thread   ── /proc/<pid>/status every 10 ms ──► peak VmRSS
//!   load threads ── the case's abuse ──► memcrab -l 127.0.0.1:0
//! ```
//!
//! Every case asserts (a) a well-behaved probe client is answered throughout, its
//! p99 request latency under `MEMCRAB_SOAK_P99_MS` (200 ms unless set), (b) resident
//! memory within the README's bound (`-m` × 1.25 + 16 MB) plus what the README says
//! each connection may add, and (c) no acknowledged write is lost or torn: a get
//! returns exactly the last value acknowledged for the key, or a miss only where
//! eviction (or the restart, after `kill -9`) explains it; the cases with no
//! eviction also assert `evictions` is 0.
//!
//! The tests' names start with `soak_` so that scripts/test can run them in a step
//! of their own (and `--skip soak_` them in the workspace run).
//!
//! `cargo test --test soak` runs the short version (a few seconds a case, about 40 s
//! in all on 2 slow cores; the cases run one at a time). `scripts/soak` runs the long
//! one: `MEMCRAB_SOAK_SECS` sets each case's duration, `MEMCRAB_SOAK_CONNS` the
//! concurrent connections (10,000 unless the fd limit is lower), and
//! `MEMCRAB_SOAK_REPORT` names a file that gets one line of figures per case.
//! Nothing sleeps to synchronise: the sleeps are the probe's and the load's pacing
//! (the rates are what is under test) and the RSS sampling interval; every loop is
//! bounded in count and in time.

//!
//! Files: main.rs (the cases), harness.rs (the probe, the RSS sampler, raw
//! connections and the bounds every case asserts).

#[path = "../common/mod.rs"]
mod common;
mod harness;

use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::{cat, store, Rng, Server};

use harness::*;

/// 10,000 concurrent connections (fewer if the fd limit is lower; scripts/soak
/// raises it): each stores a key, a rotating tenth of them is used every 100 ms for
/// the case's duration, all are open at once (`curr_connections`), then all close
/// and every key is intact.
#[test]
fn soak_ten_thousand_concurrent_connections() {
    let _g = serial();
    let limit = raise_fd_limit();
    let want = env_u64("MEMCRAB_SOAK_CONNS").unwrap_or(10_000);
    let n = want.min(limit.saturating_sub(200)) as usize;
    if (n as u64) < want {
        eprintln!("soak: fd limit {limit}: {n} connections instead of {want}");
    }
    let conn_limit = (n + 100).to_string();
    let w = Watched::start(&["-m", "64", "-c", &conn_limit], false);
    let addr = w.addr();
    let t0 = Instant::now();
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        let c = Raw::connect(addr).unwrap_or_else(|e| panic!("connection {i}: {e}"));
        conns.push(c);
    }
    let connect_time = t0.elapsed();
    // Every connection stores its key (all written, then all read: the server has
    // every one of them busy at once).
    for (i, c) in conns.iter_mut().enumerate() {
        c.send(&store(
            "set",
            &format!("c{i}"),
            0,
            0,
            &val(&format!("c{i}"), 100),
        ))
        .expect("send");
    }
    for c in conns.iter_mut() {
        c.expect(b"STORED\r\n").expect("STORED");
    }
    let mut stats = Raw::connect(addr).expect("connect");
    let open = stats.stat("curr_connections");
    assert!(open >= n as u64, "curr_connections {open}, want {n}");
    let end = Instant::now() + duration(3);
    let mut round = 0usize;
    let mut gets = 0u64;
    while Instant::now() < end && round < 1_000_000 {
        let tenth = n / 10 + 1;
        for i in (round * tenth..(round + 1) * tenth).map(|i| i % n) {
            let key = format!("c{i}");
            let want = val(&key, 100);
            assert!(
                conns[i].get_is(&key, Some(&want)).expect("get"),
                "{key} lost"
            );
            gets += 1;
        }
        round += 1;
        thread::sleep(Duration::from_millis(100));
    }
    drop(conns);
    wait_conns_at_most(addr, 1, Duration::from_secs(30));
    let mut c = Raw::connect(addr).expect("connect");
    for i in 0..n {
        let key = format!("c{i}");
        assert!(
            c.get_is(&key, Some(&val(&key, 100))).expect("get"),
            "{key} lost"
        );
    }
    assert_no_evictions(addr);
    let bound = rss_bound_kib(64) + n as u64 * CONN_KIB;
    let (_s, rep, peak) = w.finish("connections", bound);
    rep.assert_kept(addr);
    report(&format!(
        "connections: {n} open (curr_connections {open}), connected in {:.2} s, {gets} gets on them; {}; peak RSS {} KiB (bound {bound} KiB)",
        connect_time.as_secs_f64(),
        rep.summary(),
        peak
    ));
}

/// 100 slowloris connections: half send a `get` line a byte at a time, half a set's
/// header and then its data a byte at a time, one byte per connection every 50 ms,
/// never finishing. The partial set is never stored.
#[test]
fn soak_one_hundred_slowloris_connections() {
    let _g = serial();
    let w = Watched::start(&["-m", "64"], false);
    let addr = w.addr();
    let mut conns: Vec<(Raw, Vec<u8>, usize)> = (0..100)
        .map(|i| {
            let body = if i % 2 == 0 {
                let mut b = b"get".to_vec();
                for j in 0..2_000 {
                    b.extend_from_slice(format!(" slow{i}x{j}").as_bytes());
                }
                b
            } else {
                cat(&[
                    format!("set slow{i} 0 0 1000000\r\n").as_bytes(),
                    // Enough for 25 minutes at 20 bytes a second.
                    &val(&format!("slow{i}"), 30_000),
                ])
            };
            (Raw::connect(addr).expect("connect"), body, 0)
        })
        .collect();
    let end = Instant::now() + duration(3);
    let mut ticks = 0u64;
    let mut closed = 0usize;
    while Instant::now() < end && ticks < 1_000_000 {
        for (c, body, pos) in conns.iter_mut() {
            if *pos == usize::MAX || *pos >= body.len() {
                continue;
            }
            match c.send(&body[*pos..*pos + 1]) {
                Ok(()) => *pos += 1,
                Err(_) => {
                    // The server may close a line that grows too long.
                    *pos = usize::MAX;
                    closed += 1;
                }
            }
        }
        ticks += 1;
        thread::sleep(Duration::from_millis(50));
    }
    let mut c = Raw::connect(addr).expect("connect");
    for i in (1..100).step_by(2) {
        assert!(!c.get_is(&format!("slow{i}"), None).expect("get"));
    }
    let sent: usize = conns
        .iter()
        .map(|(_, _, p)| if *p == usize::MAX { 0 } else { *p })
        .sum();
    drop(conns);
    wait_conns_at_most(addr, 2, Duration::from_secs(30));
    assert_no_evictions(addr);
    // The README: a 16 KiB read buffer each, more while a value arrives (up to -I).
    let bound = rss_bound_kib(64) + 100 * CONN_KIB + 50 * 1024;
    let (_s, rep, peak) = w.finish("slowloris", bound);
    rep.assert_kept(addr);
    report(&format!(
        "slowloris: 100 connections, {ticks} ticks, {sent} bytes sent, {closed} closed by the server; {}; peak RSS {peak} KiB (bound {bound} KiB)",
        rep.summary()
    ));
}

/// 50 clients pipeline `get` of 16 values of 100 KB each and never read: they write
/// until their socket blocks and keep trying for the case's duration. The server
/// stops reading them (its unsent replies are capped), so memory stays bounded.
#[test]
fn soak_fifty_clients_pipeline_large_gets_and_never_read() {
    let _g = serial();
    let w = Watched::start(&["-m", "64"], false);
    let addr = w.addr();
    let mut c = Raw::connect(addr).expect("connect");
    let mut line = b"get".to_vec();
    for k in 0..16 {
        let key = format!("big{k}");
        c.set(&key, &val(&key, 100_000)).expect("set");
        line.extend_from_slice(format!(" {key}").as_bytes());
    }
    line.extend_from_slice(b"\r\n");
    let mut conns: Vec<TcpStream> = (0..50)
        .map(|_| {
            let s = Raw::connect(addr).expect("connect").s;
            s.set_nonblocking(true).expect("nonblocking");
            s
        })
        .collect();
    let end = Instant::now() + duration(3);
    let mut requests = 0u64;
    let mut rounds = 0u64;
    while Instant::now() < end && rounds < 1_000_000 {
        for s in conns.iter_mut() {
            // A whole request or none (a partial write is finished at once).
            for _ in 0..64 {
                match s.write(&line) {
                    Ok(n) if n == line.len() => requests += 1,
                    Ok(n) => {
                        s.set_nonblocking(false).expect("blocking");
                        // The rest fits or the write times out: the server is
                        // still reading this connection then.
                        let _ = s.write_all(&line[n..]);
                        s.set_nonblocking(true).expect("nonblocking");
                        requests += 1;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("non-reader write: {e}"),
                }
            }
        }
        rounds += 1;
        thread::sleep(Duration::from_millis(20));
    }
    for k in 0..16 {
        let key = format!("big{k}");
        assert!(c.get_is(&key, Some(&val(&key, 100_000))).expect("get"));
    }
    // What the server served them: the rest of what they wrote waits in the
    // kernel's buffers.
    let served = c.stat("cmd_get");
    let written_mb = c.stat("bytes_written") >> 20;
    drop(conns);
    wait_conns_at_most(addr, 2, Duration::from_secs(30));
    assert_no_evictions(addr);
    // The README: a 16 KiB read buffer and about 256 KiB of unsent replies each, and
    // a reply is cut at a value: one 100 KB value more.
    let bound = rss_bound_kib(64) + 50 * (CONN_KIB + UNSENT_KIB + 100);
    let (_s, rep, peak) = w.finish("non-readers", bound);
    rep.assert_kept(addr);
    report(&format!(
        "non-readers: 50 connections wrote {requests} gets of 1.6 MB and never read; the server answered cmd_get {served} (keys, 16 a request; {written_mb} MB written); {}; peak RSS {peak} KiB (bound {bound} KiB)",
        rep.summary()
    ));
}

/// 1,000 connects a second for the case's duration, from 2 threads: each connection
/// stores or reads one key of its thread's and closes, by FIN, by `quit`, by a reset,
/// or with its reply unread.
#[test]
fn soak_connection_churn_1000_per_second() {
    let _g = serial();
    let w = Watched::start(&["-m", "64"], false);
    let addr = w.addr();
    let secs = duration(3);
    let churners: Vec<JoinHandle<(u64, LastValues)>> = (0..2u64)
        .map(|t| {
            thread::spawn(move || {
                let per_sec = 500u64;
                let start = Instant::now();
                let total = per_sec * secs.as_secs();
                let mut last: Vec<Option<Vec<u8>>> = vec![None; 100];
                let mut done = 0u64;
                while done < total && start.elapsed() < secs + Duration::from_secs(60) {
                    // Pacing: connection number `done` is due at done / per_sec.
                    let due = start + Duration::from_micros(done * 1_000_000 / per_sec);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        thread::sleep(wait);
                    }
                    let mut c = Raw::connect(addr).expect("churn connect");
                    let slot = (done % 100) as usize;
                    let key = format!("churn{t}x{slot}");
                    match done % 4 {
                        0 => {
                            let data = val(&format!("{key}.{done}"), 50);
                            c.set(&key, &data).expect("churn set");
                            last[slot] = Some(data);
                        }
                        1 => {
                            c.get_is(&key, last[slot].as_deref()).expect("churn get");
                            c.send(b"quit\r\n").expect("quit");
                        }
                        2 => {
                            c.get_is(&key, last[slot].as_deref()).expect("churn get");
                            let s = socket2::SockRef::from(&c.s);
                            s.set_linger(Some(Duration::ZERO)).expect("linger");
                        }
                        _ => {
                            c.send(format!("get {key}\r\n").as_bytes()).expect("send");
                        }
                    }
                    drop(c);
                    done += 1;
                }
                (done, last)
            })
        })
        .collect();
    let t0 = Instant::now();
    let results: Vec<_> = churners
        .into_iter()
        .map(|h| h.join().expect("churn thread"))
        .collect();
    let took = t0.elapsed();
    let connects: u64 = results.iter().map(|r| r.0).sum();
    let mut c = Raw::connect(addr).expect("connect");
    for (t, (_, last)) in results.iter().enumerate() {
        for (slot, want) in last.iter().enumerate() {
            let hit = c
                .get_is(&format!("churn{t}x{slot}"), want.as_deref())
                .expect("get");
            assert_eq!(hit, want.is_some());
        }
    }
    let total = c.stat("total_connections");
    assert!(total >= connects, "total_connections {total} < {connects}");
    drop(c);
    wait_conns_at_most(addr, 1, Duration::from_secs(30));
    assert_no_evictions(addr);
    let bound = rss_bound_kib(64) + 1000 * CONN_KIB;
    let (_s, rep, peak) = w.finish("churn", bound);
    rep.assert_kept(addr);
    let rate = connects as f64 / took.as_secs_f64();
    report(&format!(
        "churn: {connects} connections in {:.1} s ({rate:.0}/s); {}; peak RSS {peak} KiB (bound {bound} KiB)",
        took.as_secs_f64(),
        rep.summary()
    ));
    assert!(
        rate >= 500.0,
        "churn reached only {rate:.0} connects/s (target 1000)"
    );
}

/// A client killed in the middle of a value: a set whose data stops halfway (the
/// first half holding what looks like a whole `set` of the same key), then the
/// socket is closed (FIN) or reset (RST). The key keeps its previous value exactly;
/// a key with none stays a miss; the connections are released.
#[test]
fn soak_client_killed_in_the_middle_of_a_value() {
    let _g = serial();
    let w = Watched::start(&["-m", "64"], false);
    let addr = w.addr();
    let mut c = Raw::connect(addr).expect("connect");
    let end = Instant::now() + duration(3);
    let mut i = 0u64;
    while Instant::now() < end && i < 1_000_000 {
        let key = format!("torn{}", i % 500);
        let old = (!i.is_multiple_of(3))
            .then(|| val(&format!("{key}.{i}"), 1000 + (i % 7) as usize * 3000));
        match &old {
            Some(v) => c.set(&key, v).expect("set"),
            None => {
                c.send(format!("delete {key}\r\n").as_bytes())
                    .expect("delete");
                let r = c.read_n(1).expect("delete reply");
                let rest: &[u8] = if r == b"D" {
                    b"ELETED\r\n"
                } else {
                    b"OT_FOUND\r\n"
                };
                c.expect(rest).expect("delete reply");
            }
        }
        let len = if i.is_multiple_of(2) { 200_000 } else { 2000 };
        let mut data = val(&format!("{key}.new{i}"), len);
        let inject = format!("\r\nset {key} 0 0 1\r\nX\r\n");
        data[100..100 + inject.len()].copy_from_slice(inject.as_bytes());
        let mut k = Raw::connect(addr).expect("connect");
        k.send(format!("set {key} 0 0 {len}\r\n").as_bytes())
            .expect("send header");
        k.send(&data[..len / 2]).expect("send half");
        if i % 4 >= 2 {
            socket2::SockRef::from(&k.s)
                .set_linger(Some(Duration::ZERO))
                .expect("linger");
        }
        drop(k);
        let hit = c.get_is(&key, old.as_deref()).expect("get");
        assert_eq!(hit, old.is_some(), "{key}: previous value lost");
        i += 1;
    }
    wait_conns_at_most(addr, 2, Duration::from_secs(30));
    // And once the server has dropped them all, still the same.
    assert_no_evictions(addr);
    let bound = rss_bound_kib(64) + 10 * (CONN_KIB + 200);
    let (_s, rep, peak) = w.finish("killed mid-value", bound);
    rep.assert_kept(addr);
    report(&format!(
        "killed mid-value: {i} clients killed halfway (FIN and RST, 2 KB and 200 KB values); {}; peak RSS {peak} KiB (bound {bound} KiB)",
        rep.summary()
    ));
}

/// Values at the `-I` limit (the largest that memcached counts as fitting) are
/// stored and read back; one byte more, and a value of `-I` bytes, are refused with
/// memcached's error, the old value gone, the connection in sync. 2 threads, for
/// the case's duration.
#[test]
fn soak_values_at_and_over_the_item_size_limit() {
    let _g = serial();
    let w = Watched::start(&["-m", "64", "-I", "1m"], false);
    let addr = w.addr();
    let secs = duration(3);
    let workers: Vec<JoinHandle<u64>> = (0..2u64)
        .map(|t| {
            thread::spawn(move || {
                let mut c = Raw::connect(addr).expect("connect");
                let end = Instant::now() + secs;
                let mut rounds = 0u64;
                while Instant::now() < end && rounds < 100_000 {
                    let key = format!("lim{t}");
                    let overhead = memcrab_limits::memcached_item_bytes(key.len(), 0, 0, true);
                    let max = (1 << 20) - overhead;
                    let fits = val(&format!("{key}.{rounds}"), max);
                    c.set(&key, &fits).expect("set at -I");
                    assert!(c.get_is(&key, Some(&fits)).expect("get"));
                    for over in [max + 1, 1 << 20] {
                        c.send(&store("set", &key, 0, 0, &val("over", over)))
                            .expect("send");
                        c.expect(b"SERVER_ERROR object too large for cache\r\n")
                            .expect("refusal");
                        c.send(common::MARKER).expect("marker");
                        c.expect(common::MARKER_REPLY).expect("in sync");
                        // memcached unlinks the old value when a set is refused.
                        assert!(!c.get_is(&key, None).expect("get"));
                    }
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    let rounds: u64 = workers.into_iter().map(|h| h.join().expect("worker")).sum();
    assert_no_evictions(addr);
    let bound = rss_bound_kib(64) + 3 * (CONN_KIB + 2 * 1024);
    let (_s, rep, peak) = w.finish("item size limit", bound);
    rep.assert_kept(addr);
    report(&format!(
        "item size limit: {rounds} rounds (a value at -I 1m stored and read, -I+1 and -I bytes refused); {}; peak RSS {peak} KiB (bound {bound} KiB)",
        rep.summary()
    ));
    assert!(rounds > 0);
}

/// `kill -9` of the server while 8 clients and the probe keep going, then a new
/// server on the same port: the clients see resets, connect again, and go on; no
/// request hangs (a timeout fails the test); every client is answered after the
/// restart; a get returns a miss or exactly the last value acknowledged.
#[test]
fn soak_kill_9_under_load_and_restart_on_the_same_port() {
    let _g = serial();
    let mut w = Watched::start(&["-m", "64"], true);
    let port = w.server.port();
    let addr = w.addr();
    let generation = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let secs = duration(3);
    let clients: Vec<JoinHandle<(u64, u64, u64)>> = (0..8u64)
        .map(|t| {
            let generation = generation.clone();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9 + t);
                let mut last: Vec<Option<Vec<u8>>> = vec![None; 200];
                let mut conn: Option<Raw> = None;
                let (mut ops, mut errors, mut after) = (0u64, 0u64, 0u64);
                let hard_stop = Instant::now() + Duration::from_secs(3600);
                while !stop.load(Ordering::SeqCst) && Instant::now() < hard_stop {
                    let gen = generation.load(Ordering::SeqCst);
                    let c = match conn.as_mut() {
                        Some(c) => c,
                        None => match Raw::connect(addr) {
                            Ok(c) => conn.insert(c),
                            Err(e) => {
                                assert!(!is_timeout(&e), "connect timed out: {e}");
                                errors += 1;
                                thread::sleep(Duration::from_millis(2));
                                continue;
                            }
                        },
                    };
                    let slot = rng.below(200);
                    let key = format!("k9c{t}x{slot}");
                    let step = if rng.below(2) == 0 {
                        let data = val(&format!("{key}.{ops}"), 10 + rng.below(5000));
                        // Unknown until acknowledged: the set may or may not land.
                        last[slot] = None;
                        c.set(&key, &data).map(|()| last[slot] = Some(data))
                    } else {
                        c.get_is(&key, last[slot].as_deref()).map(|_| ())
                    };
                    match step {
                        Ok(()) => {
                            ops += 1;
                            if gen == 1 {
                                after += 1;
                            }
                        }
                        Err(e) => {
                            assert!(!is_timeout(&e), "client {t}: a request hung: {e}");
                            errors += 1;
                            conn = None;
                        }
                    }
                }
                (ops, errors, after)
            })
        })
        .collect();
    // Load for half the time, then kill -9 with everything in flight.
    let half = Instant::now() + secs / 2;
    while Instant::now() < half {
        thread::sleep(Duration::from_millis(10));
    }
    let rss_first = rss_of(w.server.pid()).unwrap_or(0);
    w.server.signal("KILL");
    w.server.wait_exit(Duration::from_secs(10));
    let killed = Instant::now();
    let port_arg = format!("127.0.0.1:{port}");
    let (restarted, _) = Server::listen(&["-l", &port_arg, "-m", "64"]);
    let restart_took = killed.elapsed();
    w.pid.store(restarted.pid(), Ordering::SeqCst);
    generation.store(1, Ordering::SeqCst);
    // Every client answered by the new server.
    let end = Instant::now() + secs / 2;
    while Instant::now() < end {
        thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::SeqCst);
    let results: Vec<(u64, u64, u64)> = clients
        .into_iter()
        .map(|h| h.join().expect("client"))
        .collect();
    for (t, (_, _, after)) in results.iter().enumerate() {
        assert!(*after > 0, "client {t} got no reply after the restart");
    }
    let ops: u64 = results.iter().map(|r| r.0).sum();
    let errors: u64 = results.iter().map(|r| r.1).sum();
    let bound = rss_bound_kib(64) + 10 * CONN_KIB;
    let Watched {
        server: old,
        probe,
        rss,
        pid: _,
    } = w;
    drop(old);
    let rep = probe.finish();
    let peak = rss.finish().max(rss_first);
    rep.assert_responsive("kill -9", 20);
    assert!(
        peak <= bound,
        "kill -9: peak RSS {peak} KiB over {bound} KiB"
    );
    assert_eq!(tcp_addr(&restarted), addr);
    report(&format!(
        "kill -9: 8 clients, {ops} requests answered, {errors} resets/refusals, restart took {:.0} ms; {}, {} probe errors; peak RSS {peak} KiB (bound {bound} KiB)",
        restart_took.as_secs_f64() * 1e3,
        rep.summary(),
        rep.errors
    ));
}

/// Memory-limit pressure: 4 clients store values of mixed sizes (10 B to 200 KB)
/// under 20,000 keys each into `-m 64`, about 1 GB live, so eviction never stops,
/// and read their keys back: a miss (evicted) or exactly the last value stored.
/// 20 s in the short version, 10 minutes in scripts/soak.
#[test]
fn soak_memory_limit_pressure_with_mixed_sizes() {
    let _g = serial();
    let w = Watched::start(&["-m", "64"], false);
    let addr = w.addr();
    let secs = duration(20);
    let workers: Vec<JoinHandle<(u64, u64, u64, u64)>> = (0..4u64)
        .map(|t| {
            thread::spawn(move || {
                let mut rng = Rng(0x1234_5678 + t);
                let mut c = Raw::connect(addr).expect("connect");
                // (version, length): the value is made again to compare.
                let mut last: Vec<Option<(u64, usize)>> = vec![None; 20_000];
                let (mut sets, mut hits, mut misses, mut bytes) = (0u64, 0u64, 0u64, 0u64);
                let end = Instant::now() + secs;
                while Instant::now() < end && sets < 100_000_000 {
                    let slot = rng.below(20_000);
                    let key = format!("mp{t}x{slot}");
                    if rng.below(3) == 0 {
                        let want = last[slot].map(|(v, len)| val(&format!("{key}.{v}"), len));
                        if c.get_is(&key, want.as_deref()).expect("get") {
                            hits += 1;
                        } else {
                            misses += 1;
                            // Evicted: anything later is a new acknowledgement.
                            last[slot] = None;
                        }
                    } else {
                        let len = match rng.below(100) {
                            0..=69 => 10 + rng.below(1000),
                            70..=94 => 1000 + rng.below(15_000),
                            _ => 16_000 + rng.below(184_000),
                        };
                        let data = val(&format!("{key}.{sets}"), len);
                        c.set(&key, &data).expect("set");
                        bytes += len as u64;
                        last[slot] = Some((sets, len));
                        sets += 1;
                    }
                }
                (sets, hits, misses, bytes)
            })
        })
        .collect();
    let results: Vec<_> = workers
        .into_iter()
        .map(|h| h.join().expect("worker"))
        .collect();
    let sets: u64 = results.iter().map(|r| r.0).sum();
    let hits: u64 = results.iter().map(|r| r.1).sum();
    let misses: u64 = results.iter().map(|r| r.2).sum();
    let bytes: u64 = results.iter().map(|r| r.3).sum();
    let mut c = Raw::connect(addr).expect("connect");
    let evictions = c.stat("evictions");
    assert!(evictions > 0, "no eviction: the case did not press on -m");
    let bound = rss_bound_kib(64) + 6 * CONN_KIB;
    let (_s, rep, peak) = w.finish("memory pressure", bound);
    report(&format!(
        "memory pressure -m 64: {sets} sets ({} MB), {hits} hits, {misses} misses, {evictions} evictions in {} s; {}; peak RSS {peak} KiB (bound {bound} KiB)",
        bytes >> 20,
        secs.as_secs(),
        rep.summary()
    ));
}
