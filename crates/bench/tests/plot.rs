//! memcrab-bench's pictures through the binary: `compare --plot` refuses servers that
//! run different worker counts (and draws nothing), and `plot --from` draws several
//! workloads' figures into one picture. The layout itself is checked by the unit
//! tests in src/plot/tests.rs.

use std::path::PathBuf;
use std::process::Command;

fn bench_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_memcrab-bench"))
}

/// A fresh folder under the temp dir, named for this test and process.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memcrab-plot-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

#[test]
fn compare_plot_refuses_unequal_worker_counts() {
    if Command::new("memcached").arg("-V").output().is_err() {
        panic!("memcached is not installed; scripts/test installs it");
    }
    let dir = scratch("unequal");
    // memcached runs the threads `-t` asks for, pinned or not.
    let out = Command::new(bench_bin())
        .args([
            "compare",
            "--server-cmd",
            "one=memcached -u nobody -U 0 -l 127.0.0.1 -p {port} -t 1",
            "--server-cmd",
            "two=memcached -u nobody -U 0 -l 127.0.0.1 -p {port} -t 2",
            "--rounds",
            "1",
            "--duration",
            "100ms",
            "--warmup",
            "0s",
            "--keys",
            "100",
            "--conns",
            "2",
            "--plot",
            dir.to_str().expect("path"),
        ])
        .output()
        .expect("run compare");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "1 and 2 workers were drawn: {err}");
    assert!(
        err.contains("one runs 1 worker(s) and two 2"),
        "the refusal names both: {err}"
    );
    let drawn: Vec<_> = std::fs::read_dir(&dir).expect("dir").flatten().collect();
    assert!(drawn.is_empty(), "nothing is drawn: {drawn:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Figures as `compare --plot` writes them.
fn figures(workload: &str, memcrab_cpu: f64, memcrab_workers: u32) -> String {
    format!(
        "workload\t{workload}\n\
         name\tworkers\tfloor\tcpu_s_per_mreq\trps\tp50_us\tp90_us\tp99_us\tp999_us\n\
         memcached\t1\tno\t6.0000\t160000.0\t60\t90\t6500\t12600\n\
         memcrab\t{memcrab_workers}\tno\t{memcrab_cpu:.4}\t190000.0\t250\t300\t380\t1200\n\
         floor\t-\tyes\t4.0000\t195000.0\t200\t250\t430\t700\n"
    )
}

#[test]
fn plot_from_figures_draws_every_workload() {
    let dir = scratch("from");
    let mut args = vec!["plot".to_string(), "--from".to_string()];
    for (w, cpu) in [("W1", 5.0), ("W2", 0.6), ("W3", 8.4), ("W4", 5.2)] {
        let p = dir.join(format!("{w}.tsv"));
        std::fs::write(&p, figures(w, cpu, 1)).expect("write figures");
        args.push(p.display().to_string());
    }
    let out_svg = dir.join("cpu.svg");
    args.extend(["--out".to_string(), out_svg.display().to_string()]);
    let out = Command::new(bench_bin())
        .args(&args)
        .output()
        .expect("run plot");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(&out_svg).expect("cpu.svg written");
    for w in ["W1 (x memcached | x floor)", "W4 (x memcached | x floor)"] {
        assert!(svg.contains(w), "{w} missing: {svg}");
    }
    // memcrab on W2: 0.6 / 6.0 of memcached, 0.6 / 4.0 of the floor.
    assert!(svg.contains(">0.10x | 0.15x<"), "{svg}");

    // Figures whose servers ran different worker counts are refused.
    let bad = dir.join("W5.tsv");
    std::fs::write(&bad, figures("W5", 5.0, 4)).expect("write figures");
    let out = Command::new(bench_bin())
        .args(["plot", "--from"])
        .arg(&bad)
        .arg("--out")
        .arg(dir.join("bad.svg"))
        .output()
        .expect("run plot");
    assert!(!out.status.success(), "1 and 4 workers were drawn");
    assert!(!dir.join("bad.svg").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
