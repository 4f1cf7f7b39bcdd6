//! Warm restart (`-e <file>`) end to end: the real binary, stopped with
//! SIGUSR1 or `shutdown graceful` and started again on the same memory file.
//!
//! ```text
//!   start -e <dir>/mem ── store ── SIGUSR1 ── exit 0, <dir>/mem.meta ── start again
//!                                                                          │
//!        every item back (value, flags, CAS, TTL) ◄── warm ◄── same settings, valid files
//!        empty cache + [restart] line          ◄── cold ◄── kill -9, other -m/-I,
//!                                                           truncated or corrupt files
//! ```
//!
//! The memory file lives in /dev/shm when it has 1 GB free (tmpfs, as operators run
//! it), else in the temp dir. Synchronisation is the port file (startup), replies, and
//! process exit; the only waiting is the TTL test's, which polls the wall clock for
//! the two seconds its items need to expire while the server is down.
//!
//! memcrab's own feature: not run against memcached (its restart keeps different
//! settings and prints different lines).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Client, Rng, Server};

const EXIT_WITHIN: Duration = Duration::from_secs(60);

/// A directory for one test's memory file, removed on drop.
struct MemDir(PathBuf);

impl MemDir {
    fn new(tag: &str) -> MemDir {
        // A tmpfs with too little room (Docker gives /dev/shm 64 MB) would kill the
        // server with SIGBUS when a page cannot be allocated: use it only with 1 GB
        // free.
        let shm = Path::new("/dev/shm");
        let base = if free_bytes(shm) >= 1 << 30 {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("memcrab-restart-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create memory file dir");
        MemDir(d)
    }
    fn file(&self) -> String {
        self.0.join("mem").to_str().expect("utf-8 path").to_string()
    }
    fn meta(&self) -> PathBuf {
        self.0.join("mem.meta")
    }
}

/// Free bytes on the filesystem of `p` (0 if it cannot be asked).
fn free_bytes(p: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: a zeroed statvfs is a valid value for statvfs to overwrite; `c` is a
    // NUL-terminated path that outlives the call.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return 0;
        }
        st.f_bavail as u64 * st.f_frsize as u64
    }
}

impl Drop for MemDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A value that names its key and version in every 8 bytes, so any mix-up shows.
fn value_of(i: u64, ver: u64, len: usize) -> Vec<u8> {
    let word = (i << 16 | ver).to_le_bytes();
    (0..len).map(|j| word[j % 8] ^ (j / 8) as u8).collect()
}

fn start(args: &[&str]) -> Server {
    Server::tcp(args)
}

/// Stops with SIGUSR1 and checks the exit and the save line.
fn graceful_stop(mut s: Server) -> String {
    s.signal("USR1");
    let st = s.wait_exit(EXIT_WITHIN);
    let err = s.stderr();
    assert!(st.success(), "SIGUSR1 exit {st}; stderr: {err}");
    assert!(err.contains("[restart] saved "), "no save line: {err}");
    err
}

/// The server's `[restart]` line at startup.
fn restart_line(s: &Server) -> String {
    s.stderr()
        .lines()
        .find(|l| l.starts_with("[restart] ") && !l.starts_with("[restart] saved "))
        .unwrap_or_else(|| panic!("no [restart] line: {}", s.stderr()))
        .to_string()
}

fn assert_warm(s: &Server) -> String {
    let l = restart_line(s);
    assert!(l.contains("warm restart from"), "expected warm: {l}");
    l
}

fn assert_cold(s: &Server, why: &str) {
    let l = restart_line(s);
    assert!(
        l.contains("starting with an empty cache") && l.contains(why),
        "expected cold because of {why:?}: {l}"
    );
}

/// Stores `(key, flags, exptime, value)` items, pipelined, each answered STORED.
fn store_all(c: &mut Client, items: &[(String, u32, i64, Vec<u8>)]) {
    for chunk in items.chunks(200) {
        let mut req = Vec::new();
        for (k, f, e, v) in chunk {
            req.extend_from_slice(&common::store("set", k, *f, *e, v));
        }
        c.send(&req);
        for (k, ..) in chunk {
            let line = c.read_line();
            assert_eq!(line, b"STORED", "set {k}");
        }
    }
}

/// `gets` of many keys: key → (flags, value, cas) for the hits.
fn gets_all(c: &mut Client, keys: &[String]) -> HashMap<String, (u32, Vec<u8>, u64)> {
    let mut out = HashMap::new();
    for chunk in keys.chunks(100) {
        c.send(format!("gets {}\r\n", chunk.join(" ")).as_bytes());
        loop {
            let line = String::from_utf8(c.read_line()).expect("utf-8 reply line");
            if line == "END" {
                break;
            }
            let p: Vec<&str> = line.split(' ').collect();
            assert!(p.len() == 5 && p[0] == "VALUE", "bad line {line:?}");
            let len: usize = p[3].parse().expect("length");
            let data = c.read_exact_bytes(len + 2);
            out.insert(
                p[1].to_string(),
                (
                    p[2].parse().expect("flags"),
                    data[..len].to_vec(),
                    p[4].parse().expect("cas"),
                ),
            );
        }
    }
    out
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

#[test]
fn hundred_thousand_mixed_items_survive_a_graceful_restart() {
    let d = MemDir::new("100k");
    let file = d.file();
    // memcached 1.6.45 needs slab_chunk_max no larger than an -I under 512 KiB.
    let args = [
        "-e",
        file.as_str(),
        "-m",
        "256",
        "-I",
        "256k",
        "-o",
        "slab_chunk_max=256",
    ];
    let item_max = 256 * 1024 - 100;
    let s = start(&args);
    assert_cold(&s, "no metadata file");
    let mut c = s.connect();
    let mut rng = Rng(0x5eed_1234_5678_9abc);
    let now = unix_now();
    let items: Vec<(String, u32, i64, Vec<u8>)> = (0..100_000u64)
        .map(|i| {
            let len = match rng.below(1000) {
                0..=4 => 8000 + rng.below(item_max - 8000),
                5..=99 => 500 + rng.below(7500),
                _ => 10 + rng.below(490),
            };
            let len = if i == 0 { item_max } else { len };
            let exptime = match i % 8 {
                0 | 1 => 3600,   // relative TTL
                2 => now + 7200, // absolute unix time
                _ => 0,          // never
            };
            let flags = if i % 3 == 0 { 0 } else { rng.next() as u32 };
            (format!("item:{i}"), flags, exptime, value_of(i, 1, len))
        })
        .collect();
    store_all(&mut c, &items);
    // Some deletions and overwrites: the restart must keep the latest state.
    let mut req = Vec::new();
    for i in (0..100_000u64).step_by(97) {
        req.extend_from_slice(format!("delete item:{i} noreply\r\n").as_bytes());
    }
    c.send(&req);
    c.sync();
    let mut want: HashMap<String, (u32, Vec<u8>)> = items
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 97 != 0)
        .map(|(_, (k, f, _, v))| (k.clone(), (*f, v.clone())))
        .collect();
    let over: Vec<(String, u32, i64, Vec<u8>)> = (1..100_000u64)
        .step_by(89)
        .filter(|i| i % 97 != 0)
        .map(|i| {
            (
                format!("item:{i}"),
                7,
                0,
                value_of(i, 2, 10 + (i % 300) as usize),
            )
        })
        .collect();
    store_all(&mut c, &over);
    for (k, f, _, v) in &over {
        want.insert(k.clone(), (*f, v.clone()));
    }
    assert_eq!(c.stat("evictions"), 0, "the test's items must all fit");
    let keys: Vec<String> = items.iter().map(|it| it.0.clone()).collect();
    let before = gets_all(&mut c, &keys);
    assert_eq!(before.len(), want.len());
    let ttl_before = {
        c.send(b"mg item:8 t\r\n");
        String::from_utf8(c.read_line()).expect("utf-8")
    };
    drop(c);
    let saved = graceful_stop(s);
    assert!(
        saved.contains(&format!("saved {} items", want.len())),
        "{saved}"
    );

    let s = start(&args);
    let line = assert_warm(&s);
    assert!(
        line.contains(&format!("recovered {} items", want.len())),
        "{line}"
    );
    let mut c = s.connect();
    let after = gets_all(&mut c, &keys);
    assert_eq!(after.len(), want.len(), "items lost or resurrected");
    for (k, (f, v)) in &want {
        let (gf, gv, gcas) = &after[k];
        assert!(
            gf == f && gv == v,
            "{k}: wrong flags or value after restart"
        );
        assert_eq!(*gcas, before[k].2, "{k}: CAS unique changed");
    }
    // The TTL goes on (item:8 had 3600 s; at most the time spent down is gone).
    c.send(b"mg item:8 t\r\n");
    let ttl_after = String::from_utf8(c.read_line()).expect("utf-8");
    let secs = |l: &str| -> i64 {
        l.strip_prefix("HD t")
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("mg t reply {l:?}"))
    };
    let (tb, ta) = (secs(&ttl_before), secs(&ttl_after));
    assert!(ta <= tb && ta > tb - 60, "TTL {tb} before, {ta} after");
    assert_eq!(c.stat("curr_items"), want.len() as u64);
    drop(c);
    graceful_stop(s);
}

#[test]
fn hit_ratio_right_after_the_restart_equals_the_one_before() {
    let d = MemDir::new("ratio");
    let file = d.file();
    // Small memory: the workload evicts, so the hit ratio is well below 1.
    let args = ["-e", file.as_str(), "-m", "16"];
    let keys = 40_000u64;
    // A skewed workload: get, set on a miss (a cache in front of a database).
    let run = |c: &mut Client, rng: &mut Rng, n: usize| -> f64 {
        let mut hits = 0;
        for _ in 0..n / 100 {
            let ks: Vec<u64> = (0..100)
                .map(|_| {
                    let r = rng.below(1 << 20) as f64 / f64::from(1 << 20);
                    (r * r * r * keys as f64) as u64
                })
                .collect();
            let names: Vec<String> = ks.iter().map(|k| format!("w:{k}")).collect();
            let got = gets_all(c, &names);
            hits += got.len();
            let misses: Vec<(String, u32, i64, Vec<u8>)> = ks
                .iter()
                .zip(&names)
                .filter(|(_, n)| !got.contains_key(*n))
                .map(|(k, n)| (n.clone(), 0, 0, value_of(*k, 1, 300 + (*k % 700) as usize)))
                .collect();
            for (n, (_, v, _)) in &got {
                let k: u64 = n[2..].parse().expect("key number");
                assert_eq!(v, &value_of(k, 1, 300 + (k % 700) as usize), "{n}");
            }
            store_all(c, &misses);
        }
        hits as f64 / n as f64
    };
    let s = start(&args);
    let mut c = s.connect();
    let mut rng = Rng(42);
    run(&mut c, &mut rng, 60_000);
    let before = run(&mut c, &mut rng, 20_000);
    assert!(c.stat("evictions") > 0, "the workload should not fit");
    // A read-only probe of every key: its hits are the cache's exact contents.
    let all: Vec<String> = (0..keys).map(|k| format!("w:{k}")).collect();
    let mut probe_before: Vec<String> = gets_all(&mut c, &all).into_keys().collect();
    probe_before.sort();
    drop(c);
    graceful_stop(s);

    let s = start(&args);
    assert_warm(&s);
    let mut c = s.connect();
    let mut probe_after: Vec<String> = gets_all(&mut c, &all).into_keys().collect();
    probe_after.sort();
    assert_eq!(probe_before, probe_after, "the cache's contents changed");
    let after = run(&mut c, &mut rng, 20_000);
    assert!(
        (after - before).abs() < 0.03,
        "hit ratio {before:.3} before the restart, {after:.3} after"
    );
    assert!(
        before > 0.3,
        "hit ratio {before:.3}: the workload is not cacheable"
    );
    drop(c);
    graceful_stop(s);
}

#[test]
fn kill_9_leaves_no_metadata_and_no_wrong_value() {
    let d = MemDir::new("kill9");
    let file = d.file();
    let args = ["-e", file.as_str(), "-m", "64"];
    let s = start(&args);
    let mut c = s.connect();
    let v1: Vec<_> = (0..2000u64)
        .map(|i| {
            (
                format!("k:{i}"),
                1,
                0,
                value_of(i, 1, 100 + (i % 900) as usize),
            )
        })
        .collect();
    store_all(&mut c, &v1);
    drop(c);
    graceful_stop(s);
    assert!(d.meta().exists());

    // Warm, then overwrite half and die without saving: the old metadata must not
    // bring back the old values.
    let mut s = start(&args);
    assert_warm(&s);
    assert!(!d.meta().exists(), "a restart must use up the metadata");
    let mut c = s.connect();
    let v2: Vec<_> = (0..2000u64)
        .step_by(2)
        .map(|i| {
            (
                format!("k:{i}"),
                2,
                0,
                value_of(i, 2, 50 + (i % 500) as usize),
            )
        })
        .collect();
    store_all(&mut c, &v2);
    s.signal("KILL");
    s.wait_exit(EXIT_WITHIN);
    drop(c);

    let s = start(&args);
    assert_cold(&s, "no metadata file");
    let mut c = s.connect();
    let keys: Vec<String> = v1.iter().map(|x| x.0.clone()).collect();
    assert!(
        gets_all(&mut c, &keys).is_empty(),
        "values came back after kill -9"
    );
    // And the cache works.
    store_all(&mut c, &v2[..10]);
    assert_eq!(gets_all(&mut c, &keys[..20]).len(), 10);
}

#[test]
fn a_truncated_or_corrupt_file_or_other_settings_start_empty() {
    let d = MemDir::new("cold");
    let file = d.file();
    let args = ["-e", file.as_str(), "-m", "64"];
    let items: Vec<_> = (0..500u64)
        .map(|i| (format!("c:{i}"), 3, 0, value_of(i, 1, 200)))
        .collect();
    let keys: Vec<String> = items.iter().map(|x| x.0.clone()).collect();
    let fill_and_save = |args: &[&str]| {
        let s = start(args);
        let mut c = s.connect();
        store_all(&mut c, &items);
        drop(c);
        graceful_stop(s);
    };
    let check_empty = |args: &[&str], why: &str| {
        let s = start(args);
        assert_cold(&s, why);
        let mut c = s.connect();
        assert!(gets_all(&mut c, &keys).is_empty(), "{why}: items came back");
        store_all(&mut c, &items[..5]);
        assert_eq!(gets_all(&mut c, &keys[..5]).len(), 5, "{why}: cache broken");
        drop(c);
        // Leave no metadata behind for the next case.
        let mut s = s;
        s.signal("TERM");
        assert!(s.wait_exit(EXIT_WITHIN).success());
        assert!(!d.meta().exists(), "SIGTERM must not save");
    };

    // The memory file cut short.
    fill_and_save(&args);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .expect("open memory file");
    let len = f.metadata().expect("stat").len();
    f.set_len(len / 2).expect("truncate");
    drop(f);
    check_empty(&args, "truncated or replaced");

    // Other settings: -m, -I, -C.
    fill_and_save(&args);
    check_empty(&["-e", file.as_str(), "-m", "32"], "-m 32 MB, saved 64 MB");
    fill_and_save(&args);
    check_empty(
        &["-e", file.as_str(), "-m", "64", "-I", "512k"],
        "-I 524288",
    );
    fill_and_save(&args);
    check_empty(&["-e", file.as_str(), "-m", "64", "-C"], "CAS false");

    // The metadata file: cut short, a flipped bit, another format version.
    let meta = d.meta();
    fill_and_save(&args);
    let m = std::fs::read(&meta).expect("read meta");
    std::fs::write(&meta, &m[..m.len() - 3]).expect("write meta");
    check_empty(&args, "metadata file");
    fill_and_save(&args);
    let mut m = std::fs::read(&meta).expect("read meta");
    let mid = m.len() / 2;
    m[mid] ^= 0x40;
    std::fs::write(&meta, &m).expect("write meta");
    check_empty(&args, "checksum");
    fill_and_save(&args);
    let mut m = std::fs::read(&meta).expect("read meta");
    m[8] = m[8].wrapping_add(1); // the format field (seg/meta.rs)
    std::fs::write(&meta, &m).expect("write meta");
    check_empty(&args, "another version");

    // An item's bytes changed in the memory file while down.
    fill_and_save(&args);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&file)
            .expect("open memory file");
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, 40).expect("read");
        b[0] ^= 1;
        f.write_all_at(&b, 40).expect("write");
    }
    check_empty(&args, "checksum");
}

#[test]
fn ttl_cas_and_flush_rules_hold_across_the_restart() {
    let d = MemDir::new("rules");
    let file = d.file();
    let args = ["-e", file.as_str(), "-m", "64", "-A"];
    let s = start(&args);
    let mut c = s.connect();
    // Flushed before the stop: stays flushed. Stored after the flush: kept.
    c.call(&common::store("set", "old", 0, 0, b"x"), b"STORED\r\n");
    c.call(b"flush_all\r\n", b"OK\r\n");
    c.call(&common::store("set", "short", 1, 2, b"s"), b"STORED\r\n");
    c.call(&common::store("set", "long", 2, 100, b"l"), b"STORED\r\n");
    c.call(&common::store("set", "forever", 3, 0, b"f"), b"STORED\r\n");
    let cas_forever = c.gets_cas("forever");
    let cas_long = c.gets_cas("long");
    let stopped = Instant::now();
    // `shutdown graceful` (-A) saves as SIGUSR1 does.
    c.send(b"shutdown graceful\r\n");
    let mut s = s;
    assert!(s.wait_exit(EXIT_WITHIN).success());
    assert!(
        s.stderr().contains("[restart] saved 3 items"),
        "{}",
        s.stderr()
    );
    drop(c);
    // Down long enough for `short` (2 s) to expire: time down counts.
    let start_unix = unix_now();
    while unix_now() < start_unix + 3 {
        std::thread::sleep(Duration::from_millis(50));
    }

    let s = start(&args);
    let line = assert_warm(&s);
    assert!(line.contains("recovered 2 items"), "{line}");
    let mut c = s.connect();
    c.call(b"get old short\r\n", b"END\r\n");
    c.send(b"mg long t f\r\n");
    let l = String::from_utf8(c.read_line()).expect("utf-8");
    let ttl: u64 = l
        .strip_prefix("HD t")
        .and_then(|r| r.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("mg reply {l:?}"));
    let down = stopped.elapsed().as_secs();
    assert!(
        ttl <= 100 - 3 && ttl >= 100 - down - 2,
        "ttl {ttl}, down {down} s"
    );
    assert!(l.ends_with(" f2"), "{l}");
    // CAS uniques are kept, the old one still works, and new ones are above both.
    assert_eq!(c.gets_cas("forever"), cas_forever);
    c.call(
        format!("cas long 2 100 1 {cas_long}\r\nL\r\n").as_bytes(),
        b"STORED\r\n",
    );
    c.call(&common::store("set", "new", 0, 0, b"n"), b"STORED\r\n");
    let cas_new = c.gets_cas("new");
    assert!(
        cas_new > cas_forever && cas_new > cas_long,
        "CAS reused: {cas_new} after {cas_forever}, {cas_long}"
    );
    // A plain `shutdown` does not save: the next start is cold.
    c.send(b"shutdown\r\n");
    let mut s = s;
    assert!(s.wait_exit(EXIT_WITHIN).success());
    assert!(!d.meta().exists());
    let s = start(&args);
    assert_cold(&s, "no metadata file");
}

#[test]
fn a_second_server_on_the_same_file_is_refused() {
    let d = MemDir::new("twice");
    let file = d.file();
    let args = ["-e", file.as_str(), "-m", "64"];
    let s = start(&args);
    let mut c = s.connect();
    c.call(&common::store("set", "k", 5, 0, b"first"), b"STORED\r\n");
    let out = common::run_cli(&["-l", "127.0.0.1:0", "-e", file.as_str(), "-m", "64"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "second server ran: {err}");
    assert!(err.contains("in use by another process"), "{err}");
    // The first still has its item, and saves it.
    c.call(
        b"get k\r\n",
        &common::cat(&[&common::value("k", 5, b"first"), b"END\r\n"]),
    );
    drop(c);
    graceful_stop(s);
    let s = start(&args);
    assert_warm(&s);
    s.connect().call(
        b"get k\r\n",
        &common::cat(&[&common::value("k", 5, b"first"), b"END\r\n"]),
    );
    // -e needs the segment engine.
    let out = common::run_cli(&["-e", file.as_str(), "-o", "engine=reference"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("segment engine"));
}

#[test]
fn cache_memlimit_does_not_change_what_a_restart_compares() {
    let d = MemDir::new("memlimit");
    let file = d.file();
    let args = ["-e", file.as_str(), "-m", "64"];
    let s = start(&args);
    let mut c = s.connect();
    c.call(b"cache_memlimit 100\r\n", b"OK\r\n");
    c.call(&common::store("set", "k", 1, 0, b"v"), b"STORED\r\n");
    drop(c);
    graceful_stop(s);
    let s = start(&args);
    assert_warm(&s);
    s.connect().call(
        b"get k\r\n",
        &common::cat(&[&common::value("k", 1, b"v"), b"END\r\n"]),
    );
}
