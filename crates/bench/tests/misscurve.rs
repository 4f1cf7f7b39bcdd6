//! `memcrab-bench storage --experiments misscurve` end to end on a tiny trace:
//! memcached and memcrab replayed at two sizes, scripts/hitratio_sim.py's policies
//! simulated at each server's capacity, the table printed and the picture drawn with
//! one line per series. The picture's layout is checked by src/plot/tests.rs.
//!
//! The simulator needs PyPI's libcachesim: the Python in `MEMCRAB_SIM_PYTHON`, else
//! the workspace's target/hitratio-venv (scripts/test makes it). Without either the
//! servers alone are drawn, unless `MEMCRAB_TRACE_TESTS=require` (scripts/test),
//! which fails instead.

use std::path::PathBuf;
use std::process::Command;

fn bench_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_memcrab-bench"))
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python with libcachesim, or None to draw the servers only.
fn sim_python() -> Option<PathBuf> {
    let p = std::env::var_os("MEMCRAB_SIM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/hitratio-venv/bin/python"));
    let has = Command::new(&p)
        .args(["-c", "import libcachesim"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        has || std::env::var("MEMCRAB_TRACE_TESTS").as_deref() != Ok("require"),
        "{} has no libcachesim",
        p.display()
    );
    has.then_some(p)
}

#[test]
fn misscurve_replays_simulates_and_draws_every_series() {
    // `$MEMCRAB_BIN` (scripts/test: the release build), else the one beside the bench.
    let memcrab = memcrab_testkit::memcrab_bin();
    assert!(memcrab.exists(), "{} missing", memcrab.display());
    let memcached = PathBuf::from("/usr/bin/memcached");
    assert!(
        memcached.exists(),
        "memcached is not installed; scripts/test installs it"
    );
    let dir = std::env::temp_dir().join(format!("memcrab-misscurve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let python = sim_python();
    let out = Command::new(bench_bin())
        .args([
            "storage",
            "--experiments",
            "misscurve",
            "--miss-sizes",
            "2,4",
            "--miss-requests",
            "20000",
        ])
        .arg("--miss-dir")
        .arg(dir.join("trace"))
        .arg("--miss-python")
        .arg(python.as_deref().unwrap_or("none".as_ref()))
        .arg("--miss-sim")
        .arg(workspace().join("scripts/hitratio_sim.py"))
        .arg("--plot")
        .arg(&dir)
        .arg("--server-cmd")
        .arg(format!(
            "memcached={} -u nobody -U 0 -l 127.0.0.1 -p {{port}} -t 1",
            memcached.display()
        ))
        .arg("--server-cmd")
        .arg(format!(
            "memcrab={} -u nobody -l 127.0.0.1 -p {{port}} -t 1",
            memcrab.display()
        ))
        .output()
        .expect("run memcrab-bench storage");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let policies = ["LRU", "S3-FIFO", "W-TinyLFU", "Belady"];
    let simulated = python.is_some();
    // The table: a row per size per server, a miss ratio in each policy's column.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| 2 |") || l.starts_with("| 4 |"))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    // Cells: -m, server, MB held, miss ratio, then each policy's, then vs S3-FIFO.
    let numbers = if simulated { 1 + policies.len() } else { 1 };
    for r in &rows {
        assert_eq!(r.len(), 6 + numbers - 1 + usize::from(simulated), "{r:?}");
        for c in &r[4..4 + numbers] {
            let m: f64 = c.parse().unwrap_or_else(|_| panic!("{c:?} in {r:?}"));
            assert!((0.0..=1.0).contains(&m), "{r:?}");
        }
    }
    let svg = std::fs::read_to_string(dir.join("storage-miss.svg")).expect("storage-miss.svg");
    let series = svg.matches("<polyline class=\"series\"").count();
    let dashed = svg
        .split("<polyline class=\"series\"")
        .skip(1)
        .filter(|p| p.split('>').next().is_some_and(|t| t.contains("dasharray")))
        .count();
    let per_panel = if simulated { policies.len() } else { 0 };
    assert_eq!(series, 2 * (2 + per_panel), "{svg}");
    assert_eq!(dashed, 2 * per_panel, "{svg}");
    for p in policies {
        assert_eq!(
            svg.contains(&format!("{p} at memcrab&apos;s bytes"))
                || svg.contains(&format!("{p} at memcrab's bytes")),
            simulated,
            "{p}"
        );
    }
    // --miss-replot prints and draws the same from the figures left in --miss-dir.
    std::fs::remove_file(dir.join("storage-miss.svg")).expect("rm");
    let again = Command::new(bench_bin())
        .args([
            "storage",
            "--experiments",
            "misscurve",
            "--miss-requests",
            "20000",
            "--miss-replot",
            "--server-cmd",
            "unused",
        ])
        .arg("--miss-dir")
        .arg(dir.join("trace"))
        .arg("--plot")
        .arg(&dir)
        .output()
        .expect("run memcrab-bench storage --miss-replot");
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&again.stdout), stdout);
    let redrawn = std::fs::read_to_string(dir.join("storage-miss.svg")).expect("redrawn");
    assert_eq!(redrawn, svg);
    let _ = std::fs::remove_dir_all(&dir);
}
