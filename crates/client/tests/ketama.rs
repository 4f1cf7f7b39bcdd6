//! ketama compatibility with the real libmemcached.
//!
//! The oracle is `tests/ketama_ref.c`, compiled here against the system's
//! libmemcached (Debian: `apt-get install libmemcached-dev`) and configured with
//! `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`. Three checks:
//!
//! 1. `fixture`: `tests/fixtures/ketama_libmemcached.txt`, the oracle's answers for
//!    10 server lists × 540 keys (default port omitted or not, hostnames, IPv6,
//!    unix sockets, 1 to 13 servers, unequal weights), against [`Ring`]. Needs
//!    nothing installed.
//! 2. `libmemcached_routes`: the same input through the oracle built now; its output
//!    must equal both the fixture and [`Ring`]. Regenerate the fixture with
//!    `MEMCRAB_WRITE_KETAMA_FIXTURE=1 cargo test -p memcrab-client --test ketama`.
//! 3. `libmemcached_and_cluster_agree_on_live_servers`: libmemcached stores keys on
//!    three running servers and each key is found on exactly the server `Ring`
//!    names; then [`Cluster`] stores keys and libmemcached reads every one back.
//!
//! Without a C compiler or libmemcached, 2 and 3 fail unless
//! `MEMCRAB_SKIP_LIBMEMCACHED=1`.

mod common;

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{test_options, Kind, Server, TempDir};
use memcrab_client::{Cluster, Commands, Ring, ServerAddr};

const FIXTURE: &str = "tests/fixtures/ketama_libmemcached.txt";

/// Server lists as the oracle takes them: `host:port:weight` or `/path:weight`.
const SERVER_LISTS: &[&[&str]] = &[
    &["127.0.0.1:11211:1"],
    &["127.0.0.1:11211:1", "127.0.0.1:11212:1"],
    &["10.0.0.1:11211:1", "10.0.0.2:11211:1", "10.0.0.3:11211:1"],
    &[
        "cache-a.example.com:11211:1",
        "cache-b.example.com:22122:1",
        "localhost:11213:1",
        "::1:5000:1",
    ],
    &[
        "192.168.1.1:11211:1",
        "192.168.1.2:11211:1",
        "192.168.1.3:11211:1",
        "192.168.1.4:11211:1",
        "192.168.1.5:11211:1",
        "192.168.1.6:11211:1",
        "192.168.1.7:11211:1",
    ],
    &["10.0.0.1:11211:1", "10.0.0.2:11211:2", "10.0.0.3:11211:3"],
    &["a.example:1:5", "b.example:2:1"],
    &[
        "/tmp/memcached.sock:1",
        "/var/run/mc2.sock:1",
        "127.0.0.1:11212:1",
    ],
    &[
        "10.1.0.1:40001:1",
        "10.1.0.2:40002:1",
        "10.1.0.3:40003:1",
        "10.1.0.4:40004:1",
        "10.1.0.5:40005:1",
        "10.1.0.6:40006:1",
        "10.1.0.7:40007:1",
        "10.1.0.8:40008:1",
        "10.1.0.9:40009:1",
        "10.1.0.10:40010:1",
        "10.1.0.11:40011:1",
        "10.1.0.12:40012:1",
        "10.1.0.13:40013:1",
    ],
    // A server whose share rounds down to no points at all.
    &["10.0.0.1:11211:100", "10.0.0.2:11211:1"],
];

/// A server spec of the oracle's input as an address and weight.
fn parse_spec(spec: &str) -> (ServerAddr, u32) {
    let (rest, weight) = spec.rsplit_once(':').expect("weight");
    let weight = weight.parse().expect("weight number");
    if rest.starts_with('/') {
        return (ServerAddr::Unix(PathBuf::from(rest)), weight);
    }
    let (host, port) = rest.rsplit_once(':').expect("port");
    (
        ServerAddr::tcp(host, port.parse().expect("port number")),
        weight,
    )
}

fn ring_of(specs: &[&str]) -> Ring {
    let servers: Vec<(ServerAddr, u32)> = specs.iter().map(|s| parse_spec(s)).collect();
    Ring::weighted(servers.iter().map(|(a, w)| (a, *w))).expect("servers")
}

fn keys() -> Vec<String> {
    let mut keys: Vec<String> = (0..400).map(|i| format!("key:{i}")).collect();
    keys.extend((0..60).map(|i| format!("user/{}/profile", i * 7919)));
    keys.extend((0..40).map(|i| format!("ключ-{i}-キー")));
    keys.extend((0..30).map(|i| ((b'a' + i as u8 % 26) as char).to_string().repeat(250 - i)));
    keys.extend(
        [
            "a", "b", "z", "0", "~", "!", "%", "\u{7ff}", "k\u{80}", "x:y",
        ]
        .map(String::from),
    );
    keys
}

/// The oracle's input for every server list and key.
fn oracle_input() -> String {
    let keys = keys();
    let mut input = String::new();
    for list in SERVER_LISTS {
        writeln!(input, "servers {}", list.join(" ")).expect("write");
        for k in &keys {
            writeln!(input, "key {k}").expect("write");
        }
    }
    input
}

/// Checks every `key` line of oracle output against [`Ring`]; returns how many.
fn check_against_ring(output: &str) -> usize {
    let mut ring = None;
    let mut checked = 0;
    for line in output.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(specs) = line.strip_prefix("servers ") {
            ring = Some(ring_of(&specs.split(' ').collect::<Vec<_>>()));
            continue;
        }
        let (rest, index) = line.rsplit_once(' ').expect("key line");
        let key = rest.strip_prefix("key ").expect("key line");
        let want: usize = index.parse().expect("index");
        let ring = ring.as_ref().expect("servers before keys");
        assert_eq!(
            ring.server_for(key.as_bytes()),
            want,
            "key {key:?} (line {line:?})"
        );
        checked += 1;
    }
    checked
}

fn skip_libmemcached() -> bool {
    std::env::var_os("MEMCRAB_SKIP_LIBMEMCACHED").is_some()
}

/// Compiles the oracle; `None` when that is impossible and skipping is allowed.
fn build_oracle(dir: &TempDir) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ketama_ref.c");
    let bin = dir.0.join("ketama_ref");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(&src)
        .arg("-lmemcached")
        .output();
    match out {
        Ok(o) if o.status.success() => Some(bin),
        other => {
            let why = match other {
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => format!("{cc}: {e}"),
            };
            assert!(
                skip_libmemcached(),
                "cannot build the libmemcached oracle (apt-get install gcc libmemcached-dev, \
                 or set MEMCRAB_SKIP_LIBMEMCACHED=1 to skip): {why}"
            );
            eprintln!("SKIPPED: no libmemcached oracle: {why}");
            None
        }
    }
}

fn run_oracle(bin: &Path, input: &str) -> String {
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the oracle");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_string();
    // Write from a thread: the oracle's output would fill the pipe otherwise.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("oracle output");
    writer.join().expect("writer").expect("write oracle input");
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 oracle output")
}

/// The lines that carry data (not `#` comments).
fn data_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

#[test]
fn fixture() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let text = fs::read_to_string(&path).expect("read the fixture");
    let checked = check_against_ring(&text);
    let want = SERVER_LISTS.len() * keys().len();
    assert_eq!(checked, want, "the fixture has every key of every list");
    // The fixture exercises what matters: a list where the default port is
    // omitted and one where it is not, weights, unix sockets.
    assert!(text.contains("servers 10.0.0.1:11211:1 10.0.0.2:11211:2 10.0.0.3:11211:3"));
    assert!(text.contains("servers /tmp/memcached.sock:1"));
}

#[test]
fn libmemcached_routes() {
    let dir = TempDir::new("ketama");
    let Some(oracle) = build_oracle(&dir) else {
        return;
    };
    let live = run_oracle(&oracle, &oracle_input());
    let checked = check_against_ring(&live);
    assert_eq!(checked, SERVER_LISTS.len() * keys().len());

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    if std::env::var_os("MEMCRAB_WRITE_KETAMA_FIXTURE").is_some() {
        let header = "\
# The server index real libmemcached picks for each key, with
# MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED (tests/ketama_ref.c; `key K I`: key K goes to
# server I of the `servers` line above it, specs host:port:weight or /path:weight).
# tests/ketama.rs checks memcrab_client::Ring against every line.
# Produced by: MEMCRAB_WRITE_KETAMA_FIXTURE=1 cargo test -p memcrab-client --test ketama
# (compiles tests/ketama_ref.c with `cc -O2 -Wall ... -lmemcached` and feeds it the
# input that tests/ketama.rs generates), on Debian 12, libmemcached-dev 1.1.4-1.
";
        fs::write(&path, format!("{header}{live}")).expect("write the fixture");
    }
    let fixture = fs::read_to_string(&path).expect("read the fixture");
    assert!(
        data_lines(&fixture) == data_lines(&live),
        "the fixture differs from what libmemcached answers now; regenerate it with \
         MEMCRAB_WRITE_KETAMA_FIXTURE=1 (see the module docs)"
    );
}

#[test]
fn libmemcached_and_cluster_agree_on_live_servers() {
    let dir = TempDir::new("ketama");
    let Some(oracle) = build_oracle(&dir) else {
        return;
    };
    let mut servers = vec![
        Server::start(Kind::Memcrab, &[]).expect("memcrab starts"),
        Server::start(Kind::Memcrab, &[]).expect("memcrab starts"),
    ];
    servers.push(match Server::start(Kind::Memcached, &[]) {
        Some(s) => s,
        None => Server::start(Kind::Memcrab, &[]).expect("memcrab starts"),
    });
    let specs: Vec<String> = servers
        .iter()
        .map(|s| format!("127.0.0.1:{}:1", s.port()))
        .collect();
    let ring = ring_of(&specs.iter().map(String::as_str).collect::<Vec<_>>());

    // libmemcached writes; every key is on the server Ring names, and only there.
    let keys: Vec<String> = (0..300).map(|i| format!("lm:{i}")).collect();
    let mut input = format!("servers {}\n", specs.join(" "));
    for k in &keys {
        writeln!(input, "store {k}").expect("write");
    }
    run_oracle(&oracle, &input);
    let mut conns: Vec<_> = servers.iter().map(Server::connect).collect();
    let mut per_server = [0usize; 3];
    for k in &keys {
        let holders: Vec<usize> = (0..3)
            .filter(|&i| conns[i].get(k).expect("get").is_some())
            .collect();
        assert_eq!(holders, [ring.server_for(k.as_bytes())], "key {k}");
        per_server[holders[0]] += 1;
    }
    assert!(per_server.iter().all(|&n| n > 30), "spread {per_server:?}");

    // Cluster writes; libmemcached reads every key back.
    let addrs: Vec<String> = servers.iter().map(Server::addr_text).collect();
    let mut cluster = Cluster::new(
        &addrs.iter().map(String::as_str).collect::<Vec<_>>(),
        &test_options(),
    )
    .expect("cluster");
    let hits = cluster.get_multi(&keys).expect("get_multi");
    assert_eq!(
        hits.len(),
        keys.len(),
        "Cluster finds what libmemcached stored"
    );
    assert!(hits.iter().all(|i| i.key == i.value));
    let mine: Vec<String> = (0..300).map(|i| format!("mc:{i}")).collect();
    for k in &mine {
        cluster.set(k, format!("v-{k}"), 0, 0).expect("cluster set");
    }
    let mut input = format!("servers {}\n", specs.join(" "));
    for k in &mine {
        writeln!(input, "fetch {k}").expect("write");
    }
    let out = run_oracle(&oracle, &input);
    let fetched = data_lines(&out);
    assert_eq!(fetched.len(), mine.len() + 1);
    for (k, line) in mine.iter().zip(&fetched[1..]) {
        assert_eq!(*line, format!("fetch {k} v-{k}"), "libmemcached reads {k}");
    }
}
