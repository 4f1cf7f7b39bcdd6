//! Unit tests of warm restart at the engine level (the server's end to end tests are
//! crates/server/tests/restart.rs): save, reopen, compare every item; and that a
//! changed byte, a missing metadata file or other settings start empty.
//!
//! Locks: none held; the engine is driven as the server drives it.

use std::collections::HashMap;
use std::path::PathBuf;

use super::persist::{meta_path, open_memory_file};
use super::*;
use crate::{DeleteOpts, Mode, StoreOpts, StoreResult};

fn cfg(mb: u64) -> Config {
    Config {
        limit_bytes: mb << 20,
        evict: true,
        use_cas: true,
        item_size_max: 1024 * 1024,
        hash_seed: None,
    }
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("memcrab-persist-{}-{name}", std::process::id()))
}

fn get(e: &Seg, key: &[u8]) -> Option<(Vec<u8>, u32, u64)> {
    let mut out = None;
    e.get(key, &GetOpts::default(), &mut |it| {
        out = Some((it.value.to_vec(), it.flags, it.cas));
        false
    });
    out
}

type Model = HashMap<Vec<u8>, (Vec<u8>, u32, u64)>;

/// Fills an engine with mixed items (some large, some with TTLs, some deleted or
/// overwritten) and returns what should be live.
fn fill(e: &Seg) -> Model {
    let mut model = Model::new();
    for i in 0..6000u32 {
        let key = format!("key:{i}").into_bytes();
        let len = match i % 50 {
            0 => 150_000 + i as usize,
            1 | 2 => 20_000,
            _ => 10 + (i as usize * 37) % 2000,
        };
        let value: Vec<u8> = (0..len).map(|j| (i as usize + j) as u8).collect();
        let exptime = if i % 3 == 0 {
            e.clock().now() + 1000
        } else {
            0
        };
        let r = e.store(Mode::Set, &key, i, exptime, &value, &StoreOpts::default());
        let StoreResult::Stored(cas) = r else {
            panic!("store {i}: {r:?}")
        };
        model.insert(key, (value, i, cas));
    }
    for i in (0..6000u32).step_by(11) {
        let key = format!("key:{i}").into_bytes();
        e.delete(&key, &DeleteOpts::default());
        model.remove(&key);
    }
    // Evicted items are gone from both.
    model.retain(|k, _| get(e, k).is_some());
    model
}

fn cleanup(p: &std::path::Path) {
    let _ = std::fs::remove_file(p);
    let _ = std::fs::remove_file(meta_path(p));
}

#[test]
fn graceful_save_comes_back_warm_with_values_flags_and_cas() {
    let p = tmp("warm");
    cleanup(&p);
    let s = open_memory_file(cfg(64), &p).expect("open");
    assert!(!s.warm, "{}", s.log);
    let model = fill(&s.seg);
    assert!(model.len() > 3000, "{} live", model.len());
    let saved = s.seg.save(&p, "test").expect("save");
    assert_eq!((saved.items, saved.lost_items), (model.len() as u64, 0));
    drop(s);
    let s = open_memory_file(cfg(64), &p).expect("open");
    assert!(s.warm, "{}", s.log);
    let mut max_cas = 0;
    for (k, want) in &model {
        let got = get(&s.seg, k);
        assert_eq!(got.as_ref(), Some(want), "{}", String::from_utf8_lossy(k));
        max_cas = max_cas.max(want.2);
    }
    for i in (0..6000u32).step_by(11) {
        assert!(get(&s.seg, format!("key:{i}").as_bytes()).is_none());
    }
    // The CAS counter goes on: a new item's unique is above every saved one.
    let StoreResult::Stored(cas) =
        s.seg
            .store(Mode::Set, b"new", 0, 0, b"v", &StoreOpts::default())
    else {
        panic!()
    };
    assert!(cas > max_cas, "{cas} <= {max_cas}");
    // The metadata was used up: a second start is cold.
    drop(s);
    let s = open_memory_file(cfg(64), &p).expect("open");
    assert!(!s.warm);
    assert!(s.log.contains("no metadata file"), "{}", s.log);
    assert!(get(&s.seg, b"key:1").is_none());
    drop(s);
    cleanup(&p);
}

#[test]
fn changed_bytes_or_settings_start_empty() {
    let p = tmp("cold");
    cleanup(&p);
    let save = || {
        let s = open_memory_file(cfg(64), &p).expect("open");
        fill(&s.seg);
        s.seg.save(&p, "test").expect("save");
    };
    save();
    // One byte of an item changed behind the engine's back.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .read(true)
            .open(&p)
            .expect("file io");
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, 100).expect("file io");
        b[0] ^= 1;
        f.write_all_at(&b, 100).expect("file io");
    }
    let s = open_memory_file(cfg(64), &p).expect("open");
    assert!(!s.warm);
    assert!(s.log.contains("checksum"), "{}", s.log);
    assert!(get(&s.seg, b"key:1").is_none());
    drop(s);
    save();
    let s = open_memory_file(cfg(128), &p).expect("open");
    assert!(!s.warm);
    assert!(s.log.contains("settings differ"), "{}", s.log);
    drop(s);
    save();
    let s = open_memory_file(
        Config {
            use_cas: false,
            ..cfg(64)
        },
        &p,
    )
    .expect("file io");
    assert!(!s.warm);
    assert!(s.log.contains("CAS"), "{}", s.log);
    drop(s);
    save();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .expect("file io");
    f.set_len(1 << 20).expect("file io");
    drop(f);
    let s = open_memory_file(cfg(64), &p).expect("open");
    assert!(!s.warm);
    assert!(s.log.contains("not"), "{}", s.log);
    assert!(get(&s.seg, b"key:1").is_none());
    drop(s);
    cleanup(&p);
}

#[test]
fn a_delayed_flush_all_stays_pending_across_the_restart() {
    let p = tmp("delayed");
    cleanup(&p);
    let s = open_memory_file(cfg(64), &p).expect("open");
    let now = s.clock.now();
    let r = s
        .seg
        .store(Mode::Set, b"a", 1, 0, b"x", &StoreOpts::default());
    assert!(matches!(r, StoreResult::Stored(_)));
    s.seg.flush_all(Some(now + 100));
    s.seg.save(&p, "test").expect("save");
    drop(s);
    let s = open_memory_file(cfg(64), &p).expect("open");
    assert!(s.warm, "{}", s.log);
    assert!(get(&s.seg, b"a").is_some(), "the flush is not due yet");
    // Time passes (by hand): the saved flush comes due and invalidates the item.
    s.clock.set(s.clock.now() + 200);
    assert!(
        get(&s.seg, b"a").is_none(),
        "the delayed flush was forgotten"
    );
    drop(s);
    cleanup(&p);
}

/// The index hash's secret seed is kept across a warm restart, and the restart
/// checks it: a metadata file whose probe hash does not match (another hash
/// function, or a damaged seed re-checksummed) starts empty and says why.
#[test]
fn the_hash_seed_survives_a_restart_and_is_checked() {
    let p = tmp("seed");
    cleanup(&p);
    let s = open_memory_file(cfg(64), &p).expect("open");
    let seed = s.seg.hasher.seed();
    let model = fill(&s.seg);
    s.seg.save(&p, "test").expect("save");
    drop(s);
    let s = open_memory_file(cfg(64), &p).expect("open");
    assert!(s.warm, "{}", s.log);
    assert_eq!(s.seg.hasher.seed(), seed, "the restart drew a new seed");
    assert!(model.keys().all(|k| get(&s.seg, k).is_some()));
    s.seg.save(&p, "test").expect("save");
    drop(s);
    // The probe no longer matches the seed: refused, nothing misread.
    let mp = meta_path(&p);
    let mut m = meta::decode(&std::fs::read(&mp).expect("read meta")).expect("decode");
    m.hash_probe ^= 1;
    std::fs::write(&mp, meta::encode(&m)).expect("write meta");
    let s = open_memory_file(cfg(64), &p).expect("open");
    assert!(!s.warm);
    assert!(s.log.contains("index hash differs"), "{}", s.log);
    assert!(model.keys().all(|k| get(&s.seg, k).is_none()));
    assert_ne!(s.seg.hasher.seed(), seed, "a cold start draws a new seed");
    drop(s);
    cleanup(&p);
}

/// A metadata file of format 1 (written before the index hash had a seed) is
/// refused as another version, before any of its body is read.
#[test]
fn an_older_format_metadata_file_is_refused() {
    // Format 1: before keyed hashing; format 2: the 8-byte item header of 4-aligned
    // items. Either would misread this build's items: a cold start, never a restore.
    for old in [1u32, 2] {
        let p = tmp(&format!("format{old}"));
        cleanup(&p);
        let s = open_memory_file(cfg(64), &p).expect("open");
        let model = fill(&s.seg);
        s.seg.save(&p, "test").expect("save");
        drop(s);
        let mp = meta_path(&p);
        let mut b = std::fs::read(&mp).expect("read meta");
        b[8..12].copy_from_slice(&old.to_le_bytes());
        std::fs::write(&mp, &b).expect("write meta");
        let s = open_memory_file(cfg(64), &p).expect("open");
        assert!(!s.warm);
        let want = format!(
            "another version (format {old}, this memcrab reads {})",
            meta::FORMAT
        );
        assert!(s.log.contains(&want), "{}", s.log);
        assert!(model.keys().all(|k| get(&s.seg, k).is_none()));
        drop(s);
        cleanup(&p);
    }
}
