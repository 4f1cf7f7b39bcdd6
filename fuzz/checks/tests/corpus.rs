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
