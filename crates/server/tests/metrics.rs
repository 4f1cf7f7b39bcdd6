//! The metrics listener (`-o metrics_listen`), over real sockets: every `stats` number
//! under memcached_exporter's name, the HTTP edge cases (404, 405, 400, 431, a client
//! that never sends), the text format through Prometheus' own `promtool check
//! metrics`, a real Prometheus scraping memcrab under load and answering
//! `rate(memcached_commands_total[...])` through its HTTP API, Prometheus' p99 over
//! memcrab's request histogram against memcrab-bench's client-side p99, and the
//! Grafana dashboard's expressions against a real scrape.
//!
//! ```text
//!   test ── memcrab -o metrics_listen=127.0.0.1:0 ── `stats settings` ──► bound address
//!     ├── GET /metrics (raw TcpStream) ──► parse samples, compare with `stats`
//!     └── prometheus --config.file=<tmp> (scrape_interval 1s, loopback)
//!            ◄── poll /-/ready, /api/v1/query with a deadline (never a bare sleep)
//! ```
//!
//! The Prometheus and promtool tests need Debian's `prometheus` package; without it
//! they say so and pass, unless `MEMCRAB_PROMETHEUS_TESTS=require` (scripts/test
//! installs the package and sets it).

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{store, Client, Server};

/// How long one HTTP exchange may take before the test fails.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// A server with the metrics listener on an ephemeral port, and that port's address.
fn start(args: &[&str]) -> (Server, SocketAddr) {
    let mut full = vec!["-o", "metrics_listen=127.0.0.1:0"];
    full.extend_from_slice(args);
    let s = Server::tcp(&full);
    let addr = s.connect().stats("settings")["metrics_listen"]
        .parse()
        .expect("stats settings: metrics_listen is the bound address");
    (s, addr)
}

/// Sends `request` as it is and reads the whole response (the server closes).
fn http_raw(addr: SocketAddr, request: &[u8]) -> (String, String, String) {
    let mut s = TcpStream::connect_timeout(&addr, HTTP_TIMEOUT).expect("connect /metrics");
    s.set_read_timeout(Some(HTTP_TIMEOUT)).expect("timeout");
    s.write_all(request).expect("send request");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read response");
    let text = String::from_utf8(buf).expect("utf-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    let status = head.lines().next().unwrap_or("").to_string();
    (status, head.to_string(), body.to_string())
}

fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> (String, String, String) {
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\n{accept}\r\n");
    http_raw(addr, req.as_bytes())
}

/// `/metrics` in the text format, as (series with labels) → value.
fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let (status, head, body) = get(addr, "/metrics", None);
    assert_eq!(status, "HTTP/1.1 200 OK", "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    samples(&body)
}

fn samples(body: &str) -> BTreeMap<String, f64> {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("series and value");
            let v = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("bad value in {l:?}")),
            };
            (series.to_string(), v)
        })
        .collect()
}

/// A workload touching every command family, ending with a sentinel.
fn workload(c: &mut Client) {
    c.call(&store("set", "a", 0, 0, b"1"), b"STORED\r\n");
    c.call(&store("set", "b", 0, 0, b"22"), b"STORED\r\n");
    c.call(
        b"get a b nope\r\n",
        b"VALUE a 0 1\r\n1\r\nVALUE b 0 2\r\n22\r\nEND\r\n",
    );
    c.call(b"delete b\r\n", b"DELETED\r\n");
    c.call(b"delete b\r\n", b"NOT_FOUND\r\n");
    c.call(b"incr a 5\r\n", b"6\r\n");
    c.call(b"decr zz 1\r\n", b"NOT_FOUND\r\n");
    c.call(b"touch a 100\r\n", b"TOUCHED\r\n");
    c.call(&store("cas", "a", 0, 0, b"x").replace_cas(1), b"EXISTS\r\n");
    c.call(b"mn\r\n", b"MN\r\n");
}

trait CasArg {
    fn replace_cas(self, cas: u64) -> Vec<u8>;
}

impl CasArg for Vec<u8> {
    /// `store("cas", ...)` writes no cas unique: put one after the length.
    fn replace_cas(self, cas: u64) -> Vec<u8> {
        let text = String::from_utf8(self).expect("ascii");
        let (line, data) = text.split_once("\r\n").expect("a storage line");
        format!("{line} {cas}\r\n{data}").into_bytes()
    }
}

#[test]
fn off_by_default_and_shown_in_stats_settings() {
    let s = Server::tcp(&[]);
    assert_eq!(s.connect().stats("settings")["metrics_listen"], "NULL");
    let (_s, addr) = start(&[]);
    assert_eq!(addr.ip().to_string(), "127.0.0.1");
    assert_ne!(addr.port(), 0);
}

#[test]
fn a_bad_address_stops_startup() {
    let out = common::run_cli(&["-l", "127.0.0.1:0", "-o", "metrics_listen=nonsense:1:2"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("metrics_listen"), "{err}");
    let out = common::run_cli(&["-o", "metrics_listen=9150"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("HOST:PORT"));
}

#[test]
fn every_stat_under_the_exporters_names() {
    let (s, addr) = start(&["-m", "8"]);
    let mut c = s.connect();
    workload(&mut c);
    let st = c.stats("");
    let m = scrape(addr);
    let n = |k: &str| -> f64 { st[k].parse().unwrap_or_else(|_| panic!("stat {k}")) };
    let series = |k: &str| -> f64 { *m.get(k).unwrap_or_else(|| panic!("no {k} in /metrics")) };
    for (op, status, stat) in [
        ("get", "hit", "get_hits"),
        ("get", "miss", "get_misses"),
        ("delete", "hit", "delete_hits"),
        ("delete", "miss", "delete_misses"),
        ("incr", "hit", "incr_hits"),
        ("decr", "miss", "decr_misses"),
        ("touch", "hit", "touch_hits"),
        ("cas", "badval", "cas_badval"),
    ] {
        let k = format!("memcached_commands_total{{command=\"{op}\",status=\"{status}\"}}");
        assert_eq!(series(&k), n(stat), "{k}");
        assert!(n(stat) > 0.0, "the workload makes {stat} nonzero");
    }
    // The exporter's set: cmd_set less every cas.
    let set = n("cmd_set") - n("cas_hits") - n("cas_misses") - n("cas_badval");
    assert_eq!(
        series("memcached_commands_total{command=\"set\",status=\"hit\"}"),
        set
    );
    for (name, stat) in [
        ("memcached_current_items", "curr_items"),
        ("memcached_items_total", "total_items"),
        ("memcached_current_bytes", "bytes"),
        ("memcached_limit_bytes", "limit_maxbytes"),
        ("memcached_items_evicted_total", "evictions"),
        ("memcrab_cmd_get_total", "cmd_get"),
        ("memcrab_cmd_meta_total", "cmd_meta"),
        ("memcrab_limit_used_bytes", "limit_used_bytes"),
    ] {
        assert_eq!(series(name), n(stat), "{name}");
    }
    assert_eq!(series("memcached_up"), 1.0);
    assert_eq!(series("memcached_max_connections"), 1024.0);
    let version = format!("memcached_version{{version=\"{}\"}}", st["version"]);
    assert_eq!(series(&version), 1.0);
    assert!(series("memcached_slab_current_items{slab=\"1\"}") >= 1.0);
    assert!(
        m.contains_key("memcached_slab_commands_total{slab=\"1\",command=\"set\",status=\"hit\"}")
    );
    assert!(m.contains_key("memcrab_setting{name=\"maxbytes\"}"));
    assert!(m
        .keys()
        .any(|k| k.starts_with("memcrab_connections{state=")));
    assert!(m.keys().any(|k| k.starts_with("memcrab_info{")));
    // Every numeric field of stats, stats items and stats slabs has a series: a new
    // stat added without one shows here.
    assert_eq!(series("memcrab_unmapped_stats"), 0.0);
}

#[test]
fn openmetrics_when_asked() {
    let (_s, addr) = start(&[]);
    let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let (status, head, body) = get(addr, "/metrics", Some(prom));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(head.contains("Content-Type: application/openmetrics-text; version=1.0.0"));
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(body.contains("# TYPE memcached_commands counter\n"));
    assert!(body.contains("memcached_commands_total{command=\"get\",status=\"hit\"} 0\n"));
    // The exporter's counter without _total keeps its name.
    assert!(body.contains("# TYPE memcached_uptime_seconds unknown\n"));
}

#[test]
fn http_edges() {
    let (s, addr) = start(&[]);
    assert_eq!(get(addr, "/", None).0, "HTTP/1.1 404 Not Found");
    assert_eq!(get(addr, "/metricsx", None).0, "HTTP/1.1 404 Not Found");
    assert_eq!(get(addr, "/metrics?x=1", None).0, "HTTP/1.1 200 OK");
    let (status, head, body) = http_raw(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(head.contains("Content-Length: ") && body.is_empty());
    let post = http_raw(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(post.0, "HTTP/1.1 405 Method Not Allowed");
    assert_eq!(
        http_raw(addr, b"hello\r\n\r\n").0,
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(
        http_raw(addr, b"\x00\xff\xfe\r\n\r\n").0,
        "HTTP/1.1 400 Bad Request"
    );
    let mut big = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 20_000));
    big.extend_from_slice(b"\r\n\r\n");
    let (status, _, _) = http_raw(addr, &big);
    assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
    // A client that connects and sends nothing holds the thread for at most the
    // deadline (5 s): a scrape behind it is answered within that, and it gets 408.
    let mut idle = TcpStream::connect(addr).expect("connect");
    idle.set_read_timeout(Some(HTTP_TIMEOUT)).expect("timeout");
    let t = Instant::now();
    let (status, _, _) = get(addr, "/metrics", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    let mut r = String::new();
    let _ = idle.read_to_string(&mut r);
    assert!(r.starts_with("HTTP/1.1 408 Request Timeout"), "{r:?}");
    // A client that closes half way, then the server still answers both ports.
    drop(TcpStream::connect(addr).map(|mut s| s.write_all(b"GET /met")));
    assert_eq!(get(addr, "/metrics", None).0, "HTTP/1.1 200 OK");
    s.connect().call(b"mn\r\n", b"MN\r\n");
}

/// Whether a `prometheus` package tool is here; panics if it is required and not.
fn have(tool: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let required = std::env::var("MEMCRAB_PROMETHEUS_TESTS").is_ok_and(|v| v == "require");
    assert!(
        found || !required,
        "{tool} missing and MEMCRAB_PROMETHEUS_TESTS=require"
    );
    if !found {
        eprintln!("skipped: no {tool} (apt-get install prometheus)");
    }
    found
}

/// `promtool check metrics`' lint findings that are the exporter's own names (its
/// counters without `_total`): memcrab keeps them so that dashboards work.
const EXPORTER_LINT: &[&str] = &[
    "memcached_uptime_seconds counter metrics should have \"_total\" suffix",
    "memcached_slab_items_evicted_time_seconds counter metrics should have \"_total\" suffix",
    "memcached_slab_mem_requested_bytes counter metrics should have \"_total\" suffix",
    "memcached_slab_items_moves_to_cold counter metrics should have \"_total\" suffix",
    "memcached_slab_items_moves_to_warm counter metrics should have \"_total\" suffix",
    "memcached_slab_items_moves_within_lru counter metrics should have \"_total\" suffix",
];

#[test]
fn promtool_check_metrics() {
    if !have("promtool") {
        return;
    }
    let (s, addr) = start(&["-m", "8"]);
    workload(&mut s.connect());
    let (_, _, body) = get(addr, "/metrics", None);
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    // Exit 0: clean; 3: lint findings only (a parse error is 1).
    let code = out.status.code();
    assert!(matches!(code, Some(0 | 3)), "promtool: {code:?}\n{text}");
    let findings: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    for f in &findings {
        assert!(
            EXPORTER_LINT.contains(&f.trim()),
            "promtool finding on memcrab's own series: {f}"
        );
    }
    eprintln!(
        "promtool check metrics: {} findings, all the exporter's names",
        findings.len()
    );
}

/// A `prometheus` process on a temp directory, killed on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// Starts Prometheus scraping `target` every second, and waits (polling
    /// `/-/ready`, 30 s deadline) until it is ready.
    fn start(target: SocketAddr) -> Prometheus {
        let dir = common::scratch_dir("prometheus");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
             - job_name: memcrab\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n    \
             static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("write config");
        // A free loopback port for its web listener (Prometheus cannot report one
        // it picked itself).
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let log = std::fs::File::create(dir.join("log")).expect("log file");
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { child, addr, dir };
        p.wait_for("/-/ready", "Prometheus ready", |status, _| {
            status.contains("200")
        });
        p
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// Polls `path` until `done(status, body)`; panics with the log after 30 s.
    fn wait_for(&self, path: &str, what: &str, mut done: impl FnMut(&str, &str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut s) = TcpStream::connect_timeout(&self.addr, HTTP_TIMEOUT) {
                let _ = s.set_read_timeout(Some(HTTP_TIMEOUT));
                let req = format!("GET {path} HTTP/1.0\r\nHost: p\r\n\r\n");
                let mut buf = String::new();
                if s.write_all(req.as_bytes()).is_ok() && s.read_to_string(&mut buf).is_ok() {
                    let (head, body) = buf.split_once("\r\n\r\n").unwrap_or((&buf, ""));
                    let status = head.lines().next().unwrap_or("");
                    if done(status, body) {
                        return body.to_string();
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The value of an instant query's single result at `time` (Unix seconds), once
    /// it has one.
    fn query(&self, expr: &str, time: Option<f64>) -> f64 {
        let mut path = format!("/api/v1/query?query={}", urlencode(expr));
        if let Some(t) = time {
            path.push_str(&format!("&time={t:.3}"));
        }
        let body = self.wait_for(&path, expr, |status, body| {
            status.contains("200") && body.contains("\"value\":[")
        });
        first_value(&body).unwrap_or_else(|| panic!("no value in {body}"))
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The first `"value":[<time>,"<v>"]` of a query answer.
fn first_value(body: &str) -> Option<f64> {
    let rest = &body[body.find("\"value\":[")? + 9..];
    let rest = &rest[rest.find(",\"")? + 2..];
    rest[..rest.find('"')?].parse().ok()
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The two tests that load memcrab under a real Prometheus run one after the other:
/// cargo runs a binary's tests side by side, and the other's load, starting or
/// ending inside one test's 5-second window, would move the rate it compares.
fn one_load_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    // Held for a whole test; it guards nothing but the machine's time.
    static LOAD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOAD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A real Prometheus scrapes memcrab (OpenMetrics, as it asks by default) while a
/// client sends gets; `rate(memcached_commands_total[5s])` over a window inside the
/// load agrees with the gets the client saw answered in that window, and the last
/// scraped total equals `stats`' `get_hits` exactly.
#[test]
fn prometheus_scrapes_under_load() {
    if !have("prometheus") {
        return;
    }
    let _alone = one_load_at_a_time();
    let (s, addr) = start(&[]);
    let prom = Prometheus::start(addr);
    prom.query("up{job=\"memcrab\"} == 1", None);
    let mut c = s.connect();
    c.call(&store("set", "k", 0, 0, b"v"), b"STORED\r\n");
    // Load for 8 s in batches of 100 pipelined gets, logging (time, gets answered).
    const BATCH: usize = 100;
    let batch = "get k\r\n".repeat(BATCH);
    let reply = "VALUE k 0 1\r\nv\r\nEND\r\n".repeat(BATCH);
    let mut log: Vec<(f64, u64)> = vec![(unix_now(), 0)];
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < Duration::from_secs(8) {
        c.call(batch.as_bytes(), reply.as_bytes());
        done += BATCH as u64;
        log.push((unix_now(), done));
    }
    let hits = c.stat("get_hits");
    assert_eq!(hits, done);
    // The window [t - 5 s, t] with t 1 s before the load ended.
    let t_end = log.last().map(|e| e.0).unwrap_or(0.0) - 1.0;
    let at = |t: f64| {
        log.iter()
            .take_while(|e| e.0 <= t)
            .last()
            .map(|e| e.1)
            .unwrap_or(0)
    };
    let client_rate = (at(t_end) - at(t_end - 5.0)) as f64 / 5.0;
    let q = "rate(memcached_commands_total{command=\"get\",status=\"hit\"}[5s])";
    let prom_rate = prom.query(q, Some(t_end));
    eprintln!("gets/s over the 5 s window: client {client_rate:.0}, Prometheus {prom_rate:.0}");
    assert!(client_rate > 0.0);
    let ratio = prom_rate / client_rate;
    assert!(
        (0.75..=1.25).contains(&ratio),
        "Prometheus {prom_rate}, client {client_rate}"
    );
    // Once a scrape after the load lands, the stored total is exact.
    let q = format!("memcached_commands_total{{command=\"get\",status=\"hit\"}} == {hits}");
    assert_eq!(prom.query(&q, None), hits as f64);
}

/// memcrab-bench, built beside the server (`cargo build --release --workspace`);
/// None (the test says so and passes) when it is not there, unless the Prometheus
/// tests are required.
fn bench_binary() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_BIN_EXE_memcrab")).with_file_name("memcrab-bench");
    let required = std::env::var("MEMCRAB_PROMETHEUS_TESTS").is_ok_and(|v| v == "require");
    assert!(
        p.exists() || !required,
        "{} missing and MEMCRAB_PROMETHEUS_TESTS=require",
        p.display()
    );
    if !p.exists() {
        eprintln!(
            "skipped: no {} (cargo build --release --workspace)",
            p.display()
        );
    }
    p.exists().then_some(p)
}

/// A number in a flat JSON text: the first `"name":<n>` after `after`.
fn json_num(json: &str, after: &str, name: &str) -> f64 {
    let rest = &json[json
        .find(after)
        .unwrap_or_else(|| panic!("{after} in {json}"))..];
    let pat = format!("\"{name}\":");
    let rest = &rest[rest
        .find(&pat)
        .unwrap_or_else(|| panic!("{name} in {json}"))
        + pat.len()..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end]
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} in {json}"))
}

/// Prometheus' `histogram_quantile(0.99, ...)` over memcrab's request histogram,
/// against memcrab-bench's client-side p99 of the same requests (64-key multi-gets
/// of 2,000-byte values, 6 s, 2 connections) and memcrab's own `stats latency` p99.
///
/// The bounds, and why: the server times a request from parsed to reply queued; the
/// client's time adds the kernel, loopback, both event loops and the scheduler of a
/// shared machine, which can only add. So the server's p99 must not be above the
/// client's, beyond what its buckets allow: `stats latency` (buckets 6.25% wide, a
/// quantile reported at its bucket's midpoint) at most 1.07 times the client's p99,
/// and Prometheus' estimate, which interpolates inside a 1-2-5 bucket and so can be
/// anywhere in the bucket that holds the true p99, at most 2.5 times it. Prometheus
/// and `stats latency` read the same histogram, so they agree within that one
/// bucket: a factor of 2.5 either way. How much the client adds is printed; on an
/// idle machine it is tens of microseconds, on this loaded 2-core VM it is more, so
/// it is not bounded from above.
#[test]
fn prometheus_p99_against_the_clients() {
    if !have("prometheus") {
        return;
    }
    let _alone = one_load_at_a_time();
    let Some(bench) = bench_binary() else {
        return;
    };
    let (s, addr) = start(&["-t", "2"]);
    let prom = Prometheus::start(addr);
    prom.query("up{job=\"memcrab\"} == 1", None);
    let out = Command::new(bench)
        .args(["run", "--server", &format!("127.0.0.1:{}", s.port())])
        .args([
            "--workload",
            "W3",
            "--multiget",
            "64",
            "--value-size",
            "2000",
        ])
        .args(["--keys", "2000", "--preload", "--get-ratio", "1"])
        .args([
            "--duration",
            "6s",
            "--warmup",
            "0s",
            "--conns",
            "2",
            "--json",
        ])
        .output()
        .expect("run memcrab-bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8_lossy(&out.stdout).to_string();
    let client_p99_s = json_num(&json, "\"latency_us\"", "p99") / 1e6;
    let mut c = s.connect();
    let lat = c.stats("latency");
    let count: u64 = lat["text_get_hit:count"].parse().expect("count");
    let stats_p99_s: f64 = lat["text_get_hit:p99_us"].parse::<f64>().expect("p99") / 1e6;
    assert!(
        count >= json_num(&json, "{", "gets") as u64,
        "{lat:?} {json}"
    );
    // Wait for a scrape that holds every request, then ask for the quantile over
    // all of them (the histogram counts from start-up; only the load's gets are in
    // this series).
    let sel = "protocol=\"text\",command=\"get\",outcome=\"hit\"";
    prom.query(
        &format!("memcrab_request_duration_seconds_count{{{sel}}} == {count}"),
        None,
    );
    let prom_p99_s = prom.query(
        &format!("histogram_quantile(0.99, sum by (le) (memcrab_request_duration_seconds_bucket{{{sel}}}))"),
        None,
    );
    eprintln!(
        "p99: Prometheus {:.1} µs, stats latency {:.1} µs, client {:.1} µs; the client \
         adds {:.1} µs",
        prom_p99_s * 1e6,
        stats_p99_s * 1e6,
        client_p99_s * 1e6,
        (client_p99_s - stats_p99_s) * 1e6
    );
    assert!(stats_p99_s > 0.0 && prom_p99_s > 0.0);
    assert!(
        stats_p99_s <= client_p99_s * 1.07,
        "server p99 above the client's"
    );
    assert!(
        prom_p99_s <= client_p99_s * 2.5,
        "Prometheus p99 above the client's"
    );
    let ratio = prom_p99_s / stats_p99_s;
    assert!(
        (0.4..=2.5).contains(&ratio),
        "Prometheus / stats latency: {ratio}"
    );
}

/// Series names in the dashboard's `"expr"` strings.
fn dashboard_series(json: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = json;
    while let Some(i) = rest.find("\"expr\":") {
        rest = &rest[i + 7..];
        let Some(open) = rest.find('"') else { break };
        rest = &rest[open + 1..];
        let mut end = 0;
        let bytes = rest.as_bytes();
        while end < bytes.len() && bytes[end] != b'"' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        let expr = &rest[..end.min(rest.len())];
        let mut word = String::new();
        for ch in expr.chars().chain([' ']) {
            if ch.is_ascii_alphanumeric() || ch == '_' || ch == ':' {
                word.push(ch);
            } else {
                if word.starts_with("memcached_") || word.starts_with("memcrab_") {
                    out.push(std::mem::take(&mut word));
                }
                word.clear();
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn the_dashboard_uses_only_series_memcrab_serves() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/grafana/memcrab.json");
    let json = std::fs::read_to_string(&path).expect("packaging/grafana/memcrab.json");
    let used = dashboard_series(&json);
    assert!(used.len() >= 10, "{used:?}");
    let (s, addr) = start(&["-m", "8"]);
    workload(&mut s.connect());
    let served: Vec<String> = scrape(addr)
        .keys()
        .map(|k| k.split('{').next().unwrap_or("").to_string())
        .collect();
    for name in &used {
        assert!(
            served.contains(name),
            "the dashboard uses {name}, which /metrics does not serve"
        );
    }
}

#[test]
fn the_docs_name_every_series() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/monitoring.md");
    let docs = std::fs::read_to_string(&path).expect("docs/monitoring.md");
    let (s, addr) = start(&["-m", "8"]);
    workload(&mut s.connect());
    let (_, _, body) = get(addr, "/metrics", None);
    let families: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert!(families.len() > 50, "{families:?}");
    for f in families {
        assert!(
            docs.contains(&format!("`{f}")),
            "docs/monitoring.md does not describe {f}"
        );
    }
}
