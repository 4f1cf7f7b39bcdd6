//! `memcrab-bench trace` against real servers: the replay's bookkeeping must agree
//! with each server's own `stats` (`--check`), every server must be asked the same
//! reads, and the libcachesim files must hold one record per request.

use std::path::PathBuf;
use std::process::Command;

fn bench_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_memcrab-bench"))
}

/// The server binary: `$MEMCRAB_BIN` (scripts/test: the release build), else the one
/// built next to the bench by `cargo test --workspace`.
fn memcrab_bin() -> PathBuf {
    let p = memcrab_testkit::memcrab_bin();
    assert!(
        p.exists(),
        "{} missing: run cargo test --workspace",
        p.display()
    );
    p
}

/// memcached, the oracle; `MEMCRAB_TRACE_TESTS=require` (scripts/test) fails
/// instead of skipping when it is missing.
fn memcached_bin() -> Option<PathBuf> {
    let p = PathBuf::from(
        std::env::var("MEMCRAB_TEST_MEMCACHED").unwrap_or_else(|_| "/usr/bin/memcached".into()),
    );
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var("MEMCRAB_TRACE_TESTS").as_deref() != Ok("require"),
        "{} missing",
        p.display()
    );
    None
}

/// The rows of the server table: (name, miss ratio, reads counted).
fn server_rows(stdout: &str) -> Vec<(String, f64, u64)> {
    stdout
        .lines()
        .filter(|l| l.starts_with("| memcached") || l.starts_with("| memcrab"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            Some((
                cells.get(1)?.to_string(),
                cells.get(2)?.parse().ok()?,
                cells.get(3)?.parse().ok()?,
            ))
        })
        .collect()
}

#[test]
fn replay_agrees_with_each_servers_stats_and_files_hold_every_request() {
    let out = std::env::temp_dir().join(format!("memcrab-trace-test-{}", std::process::id()));
    let mut cmd = Command::new(bench_bin());
    cmd.args(["trace", "--check", "--requests", "100000", "--mem-mb", "2"])
        .args(["--server-cpus", "0,1", "--out"])
        .arg(&out)
        .arg("--server-cmd")
        .arg(format!(
            "memcrab={} -u root -l 127.0.0.1 -p {{port}} -t 2",
            memcrab_bin().display()
        ));
    let with_memcached = memcached_bin();
    if let Some(m) = &with_memcached {
        cmd.arg("--server-cmd").arg(format!(
            "memcached={} -u root -U 0 -l 127.0.0.1 -p {{port}} -t 2",
            m.display()
        ));
    }
    let run = cmd.output().expect("run memcrab-bench trace");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rows = server_rows(&stdout);
    let servers = 1 + usize::from(with_memcached.is_some());
    assert_eq!(
        rows.len(),
        2 * servers,
        "one row per server and shape:\n{stdout}"
    );
    for shape in rows.chunks(servers) {
        // The same reads for every server, and a cache too small for the working
        // set: some misses, far from all.
        assert!(
            shape.iter().all(|r| r.2 == shape[0].2 && r.2 > 40_000),
            "{shape:?}"
        );
        assert!(shape.iter().all(|r| r.1 > 0.0 && r.1 < 0.5), "{shape:?}");
    }
    for shape in ["cluster52", "cluster25"] {
        let csv = std::fs::read_to_string(out.join(format!("{shape}.csv"))).expect("csv");
        let requests = csv.lines().count() - 1;
        assert!(
            (99_000..=101_000).contains(&requests),
            "{shape}: {requests}"
        );
        let bin = std::fs::metadata(out.join(format!("{shape}.oracleGeneral.bin"))).expect("bin");
        assert_eq!(
            bin.len(),
            24 * requests as u64,
            "{shape}: 24 bytes per request"
        );
        let tsv = std::fs::read_to_string(out.join(format!("{shape}.servers.tsv"))).expect("tsv");
        assert_eq!(tsv.lines().count(), 2 + servers, "{tsv}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
