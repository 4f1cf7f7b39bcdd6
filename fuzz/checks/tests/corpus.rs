//! Replays every committed seed (`fuzz/corpus/<target>/`), the minimized corpus
//! that fuzzing grew (`fuzz/minimized/<target>/`, see docs/security.md) and every
//! fixed crash (`fuzz/regressions/<target>/`) through the fuzz targets' checks, on
//! stable.

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut n = 0;
    for dir in ["corpus", "minimized", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        let mut paths: Vec<_> = entries.map(|e| e.expect("dir entry").path()).collect();
        paths.sort();
        for p in paths {
            let data = std::fs::read(&p).expect("read input");
            eprintln!("{}", p.display());
            check(&data);
            n += 1;
        }
    }
    assert!(
        n >= 10,
        "only {n} inputs for {target}: the corpus is missing"
    );
}

#[test]
fn text_corpus() {
    replay("text", memcrab_fuzz_checks::text);
}

#[test]
fn meta_corpus() {
    replay("meta", memcrab_fuzz_checks::meta);
}

#[test]
fn binary_corpus() {
    replay("binary", memcrab_fuzz_checks::binary);
}

#[test]
fn store_corpus() {
    replay("store", memcrab_fuzz_checks::store);
}

#[test]
fn restart_corpus() {
    replay("restart", memcrab_fuzz_checks::restart);
}

#[test]
fn tls_corpus() {
    replay("tls", memcrab_fuzz_checks::tls);
}

/// An open finding of the `tls` target (docs/security.md, "Results"), not yet fixed:
/// a client sends a TLS record with a corrupted byte (a bad ciphertext, or a length
/// promising more bytes), one byte per write, then half-closes; now and then the
/// server keeps the connection in CLOSE-WAIT for good (0% CPU), TLS 1.2 and 1.3
/// alike. Each input is replayed 5 times (the first failure came within 3). Run
/// with `--ignored`; once the server is fixed, move the inputs to
/// `regressions/tls/` and drop this test.
#[test]
#[ignore = "open finding: memcrab -Z keeps a half-closed connection (CLOSE-WAIT)"]
fn tls_open_broken_record_then_half_close() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../regressions/tls-open");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("regressions/tls-open")
        .map(|e| e.expect("dir entry").path())
        .collect();
    paths.sort();
    for p in paths {
        let data = std::fs::read(&p).expect("read the input");
        eprintln!("{}", p.display());
        for _ in 0..5 {
            memcrab_fuzz_checks::tls(&data);
        }
    }
}
