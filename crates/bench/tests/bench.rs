//! memcrab-bench against real servers: its reports must add up, and compare mode must
//! leave no process behind.

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn bench_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_memcrab-bench"))
}

/// The server binary, built next to the bench by `cargo test --workspace`
/// (testkit looks there first).
fn memcrab_bin() -> PathBuf {
    memcrab_testkit::memcrab_bin()
}

/// A memcrab started by testkit; dropping it kills and reaps the process.
struct Server {
    process: memcrab_testkit::Server,
    port: u16,
}

/// Starts memcrab on an ephemeral port (testkit reads it from the port file).
fn memcrab(extra: &[&str]) -> Server {
    let process = memcrab_testkit::Launch::new(memcrab_bin())
        .tag("bench-test")
        .args(extra.iter().copied())
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    Server {
        port: process.port(),
        process,
    }
}

fn bench(args: &[&str]) -> String {
    let out = Command::new(bench_bin())
        .args(args)
        .output()
        .expect("run bench");
    assert!(
        out.status.success(),
        "bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

/// The number after `"name":` in a flat JSON text (first occurrence at or after `from`).
fn num(json: &str, name: &str) -> f64 {
    let pat = format!("\"{name}\":");
    let i = json
        .find(&pat)
        .unwrap_or_else(|| panic!("{name} missing in {json}"))
        + pat.len();
    let rest = &json[i..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end]
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number in {json}"))
}

#[test]
fn run_report_adds_up() {
    let s = memcrab(&[]);
    let addr = format!("127.0.0.1:{}", s.port);
    let pid = s.process.pid().to_string();
    let j = bench(&[
        "run",
        "--server",
        &addr,
        "--workload",
        "W1",
        "--keys",
        "2000",
        "--conns",
        "4",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--preload",
        "--server-pid",
        &pid,
        "--json",
    ]);
    let (requests, gets, sets) = (num(&j, "requests"), num(&j, "gets"), num(&j, "sets"));
    assert!(requests > 100.0, "{j}");
    assert_eq!(requests, gets + sets, "{j}");
    assert_eq!(num(&j, "keys_requested"), gets, "{j}");
    assert_eq!(num(&j, "hits"), gets, "{j}");
    assert_eq!(num(&j, "hit_ratio"), 1.0, "{j}");
    assert_eq!(num(&j, "errors"), 0.0, "{j}");
    let ratio = gets / requests;
    assert!(
        (0.8..0.97).contains(&ratio),
        "get share {ratio} far from 0.9: {j}"
    );
    assert!(num(&j, "server_cpu_s_per_mreq") > 0.0, "{j}");
    let rps = num(&j, "throughput_rps");
    assert!((rps - requests / num(&j, "window_s")).abs() < 1.0, "{j}");
    assert!(
        num(&j, "p50") <= num(&j, "p99") && num(&j, "p99") <= num(&j, "max"),
        "{j}"
    );
}

#[test]
fn multiget_and_pipeline_count_keys() {
    let s = memcrab(&[]);
    let addr = format!("127.0.0.1:{}", s.port);
    let j = bench(&[
        "run",
        "--server",
        &addr,
        "--workload",
        "W3",
        "--keys",
        "1000",
        "--conns",
        "4",
        "--pipeline",
        "4",
        "--duration",
        "1s",
        "--warmup",
        "100ms",
        "--preload",
        "--json",
    ]);
    let gets = num(&j, "gets");
    assert!(gets > 10.0, "{j}");
    assert_eq!(num(&j, "keys_requested"), gets * 16.0, "{j}");
    assert_eq!(num(&j, "hit_ratio"), 1.0, "{j}");
    assert!(
        j.contains("\"server_cpu_s_per_mreq\":null"),
        "unknown without --server-pid: {j}"
    );
}

#[test]
fn misses_are_counted() {
    let s = memcrab(&[]);
    let addr = format!("127.0.0.1:{}", s.port);
    // No preload, gets only: every key misses.
    let j = bench(&[
        "run",
        "--server",
        &addr,
        "--get-ratio",
        "1",
        "--conns",
        "2",
        "--duration",
        "500ms",
        "--warmup",
        "0s",
        "--json",
    ]);
    assert!(num(&j, "gets") > 10.0, "{j}");
    assert_eq!(num(&j, "hit_ratio"), 0.0, "{j}");
    assert_eq!(num(&j, "errors"), 0.0, "{j}");
}

#[test]
fn sets_then_gets() {
    let s = memcrab(&[]);
    let addr = format!("127.0.0.1:{}", s.port);
    let j = bench(&[
        "run",
        "--server",
        &addr,
        "--mode",
        "sets-then-gets",
        "--requests",
        "5000",
        "--conns",
        "5",
        "--json",
    ]);
    let sets = &j
        [j.find("\"sets\":{").expect("sets phase") + 8..j.find("\"gets\":{").expect("gets phase")];
    let gets = &j[j.find("\"gets\":{").expect("gets phase") + 8..];
    assert_eq!(num(sets, "sets"), 5000.0, "{j}");
    assert_eq!(num(gets, "gets"), 5000.0, "{j}");
    assert_eq!(num(gets, "hit_ratio"), 1.0, "{j}");
}

#[test]
fn open_loop_holds_the_rate() {
    let s = memcrab(&[]);
    let addr = format!("127.0.0.1:{}", s.port);
    let j = bench(&[
        "run",
        "--server",
        &addr,
        "--rate",
        "2000",
        "--conns",
        "4",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
        "--preload",
        "--keys",
        "1000",
        "--json",
    ]);
    let rps = num(&j, "throughput_rps");
    assert!(
        (1700.0..2300.0).contains(&rps),
        "open loop at 2000/s gave {rps}: {j}"
    );
}

#[test]
fn floor_responder_answers_everything() {
    // Both designs: epoll (the default) and io_uring (`--io uring`).
    for io in ["epoll", "uring"] {
        // Port 0: the floor binds a free port and says which once it listens.
        let mut floor = Command::new(bench_bin())
            .args(["floor", "--io", io, "--port", "0"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn floor");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(floor.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("the floor's first line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("floor --io {io} said {line:?}"))
            .to_string();
        let j = bench(&[
            "run",
            "--server",
            &addr,
            "--conns",
            "2",
            "--pipeline",
            "4",
            "--duration",
            "500ms",
            "--warmup",
            "0s",
            "--json",
        ]);
        let _ = floor.kill();
        let _ = floor.wait();
        assert_eq!(
            num(&j, "hit_ratio"),
            1.0,
            "--io {io}: the floor hits every key: {j}"
        );
        assert_eq!(num(&j, "errors"), 0.0, "--io {io}: {j}");
        assert!(num(&j, "requests") > 0.0, "--io {io}: {j}");
    }
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(marker) && !cmd.contains("compare") {
            found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
        }
    }
    found
}

#[test]
fn compare_two_real_servers_leaves_nothing_behind() {
    if Command::new("memcached").arg("-V").output().is_err() {
        panic!("memcached is not installed; scripts/test installs it");
    }
    // An unusual connection limit marks the processes this test starts.
    let marker = "-c 1017";
    // One worker each: both are pinned to one CPU, where memcrab runs one whatever
    // `-t` says, and `--plot` refuses unequal worker counts.
    let a = format!(
        "{} -u root -p {{port}} -t 1 {marker}",
        memcrab_bin().display()
    );
    let b = format!("memcached -u nobody -U 0 -l 127.0.0.1 -p {{port}} -t 1 {marker}");
    let plot = std::env::temp_dir().join(format!("memcrab-compare-{}.svg", std::process::id()));
    let j = bench(&[
        "compare",
        "--server-cmd",
        &a,
        "--server-cmd",
        &b,
        "--rounds",
        "2",
        "--duration",
        "500ms",
        "--warmup",
        "100ms",
        "--preload",
        "--keys",
        "1000",
        "--conns",
        "4",
        "--json",
        "--plot",
        plot.to_str().expect("path"),
    ]);
    assert_eq!(j.matches("\"name\":").count(), 2, "{j}");
    assert!(
        j.contains("\"name\":\"memcrab\"") && j.contains("\"name\":\"memcached\""),
        "{j}"
    );
    assert_eq!(
        num(&j, "throughput_ratio"),
        1.0,
        "the first server is the baseline: {j}"
    );
    assert!(num(&j, "hit_ratio") == 1.0, "{j}");
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    let tsv = std::fs::read_to_string(plot.with_extension("tsv")).expect("figures written");
    let _ = std::fs::remove_file(&plot);
    let _ = std::fs::remove_file(plot.with_extension("tsv"));
    assert!(
        svg.starts_with("<svg") && svg.contains("memcached") && svg.contains("x memcrab"),
        "{svg}"
    );
    assert!(tsv.contains("\nmemcrab\t1\tno\t"), "{tsv}");
    let left = processes_with(marker);
    assert!(left.is_empty(), "compare left processes behind: {left:?}");
}

#[test]
fn compare_failure_still_cleans_up() {
    let marker = "-c 1019";
    let good = format!("{} -u root -p {{port}} {marker}", memcrab_bin().display());
    let out = Command::new(bench_bin())
        .args([
            "compare",
            "--server-cmd",
            &good,
            "--server-cmd",
            "/nonexistent/server -p {port}",
            "--rounds",
            "1",
            "--duration",
            "200ms",
            "--warmup",
            "0s",
        ])
        .output()
        .expect("run compare");
    assert!(
        !out.status.success(),
        "a server that cannot start fails the run"
    );
    let left = processes_with(marker);
    assert!(
        left.is_empty(),
        "compare left processes behind after an error: {left:?}"
    );
}

/// The hot-key recall check: memcrab's `stats hotkeys`, with its default sampling,
/// finds at least 95% of the true top 16 of Zipf 0.99 and 1.2 loads (1,000,000
/// reads each over four connections and four workers); and the check can fail: a
/// server with hot keys off reports none.
#[test]
fn hot_key_recall_at_zipf_099_and_12() {
    let server = memcrab(&["-t", "4"]);
    let port = server.port.to_string();
    let out = bench(&["hotkeys", "--port", &port]);
    for theta in ["0.99", "1.2"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("zipf {theta}:")))
            .unwrap_or_else(|| panic!("no zipf {theta} line in {out}"));
        let found: usize = line
            .split('(')
            .nth(1)
            .and_then(|r| r.split('/').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(found * 100 >= 95 * 16, "{line}");
    }
    let off = memcrab(&["-o", "hotkeys=off"]);
    let status = Command::new(bench_bin())
        .args([
            "hotkeys",
            "--port",
            &off.port.to_string(),
            "--requests",
            "1000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run bench");
    assert!(
        !status.success(),
        "no hot keys reported, yet the check passed"
    );
}
