//! The key dump's walk ([`Engine::walk`]) against writers running at the same time:
//! it never shows a dead item (expired, flushed, deleted before the walk looked), and
//! it shows every key that stays live, including ones the engine moves meanwhile
//! (under `-M` the segment engine compacts: it moves live items to free segments).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use memcrab_store::reference::Reference;
use memcrab_store::seg::Seg;
use memcrab_store::{Clock, Config, DeleteOpts, Engine, Mode, StoreOpts, StoreResult, WalkCursor};

const STABLE: usize = 2000;
const VICTIMS: usize = 3000;

fn set(e: &dyn Engine, key: &str, exptime: u32, len: usize) -> StoreResult {
    let value = vec![b'v'; len];
    e.store(
        Mode::Set,
        key.as_bytes(),
        0,
        exptime,
        &value,
        &StoreOpts::default(),
    )
}

#[test]
fn seg_walk_with_concurrent_writers() {
    walk_with_concurrent_writers(|cfg, clock| Arc::new(Seg::new(cfg, clock)), true);
}

#[test]
fn reference_walk_with_concurrent_writers() {
    walk_with_concurrent_writers(|cfg, clock| Arc::new(Reference::new(cfg, 12, clock)), false);
}

/// `moves`: the engine keeps a key in place across overwrites and moves, so keys
/// overwritten during the walk must be shown too (the segment engine's promise).
fn walk_with_concurrent_writers(make: fn(Config, Arc<Clock>) -> Arc<dyn Engine>, moves: bool) {
    let clock = Arc::new(Clock::new());
    clock.set(100);
    let cfg = Config {
        limit_bytes: 4 << 20,
        // -M: nothing live is ever dropped, but the segment engine compacts.
        evict: false,
        use_cas: true,
        item_size_max: 0,
        hash_seed: None,
    };
    let engine = make(cfg, Arc::clone(&clock));
    let e = engine.as_ref();
    // Dead before the walk: flushed, expired, deleted.
    for i in 0..500 {
        assert!(matches!(
            set(e, &format!("flushed{i}"), 0, 20),
            StoreResult::Stored(_)
        ));
    }
    e.flush_all(None);
    for i in 0..500 {
        assert!(matches!(
            set(e, &format!("expired{i}"), 105, 20),
            StoreResult::Stored(_)
        ));
        assert!(matches!(
            set(e, &format!("deleted{i}"), 0, 20),
            StoreResult::Stored(_)
        ));
        e.delete(format!("deleted{i}").as_bytes(), &DeleteOpts::default());
    }
    clock.set(110);
    for i in 0..STABLE {
        assert!(matches!(
            set(e, &format!("stable{i}"), 0, 30),
            StoreResult::Stored(_)
        ));
        assert!(matches!(
            set(e, &format!("rewritten{i}"), 0, 30),
            StoreResult::Stored(_)
        ));
    }
    for i in 0..VICTIMS {
        assert!(matches!(
            set(e, &format!("victim{i}"), 0, 30),
            StoreResult::Stored(_)
        ));
    }

    let stop = Arc::new(AtomicBool::new(false));
    // How many victims (in order) are deleted for sure, and how many walk calls
    // have begun (the deleter paces itself on them, so deletes spread over walks).
    let deleted = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for t in 0..2 {
        let (engine, stop) = (Arc::clone(&engine), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            // Overwrites fill segments with dead items, which compaction empties by
            // moving the live ones; new keys grow index partitions.
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                set(
                    engine.as_ref(),
                    &format!("churn{t}-{}", i % 700),
                    0,
                    100 + i % 400,
                );
                set(engine.as_ref(), &format!("rewritten{}", i % STABLE), 0, 30);
                i += 1;
            }
        }));
    }
    {
        let (engine, stop) = (Arc::clone(&engine), Arc::clone(&stop));
        let (deleted, calls) = (Arc::clone(&deleted), Arc::clone(&calls));
        threads.push(std::thread::spawn(move || {
            for i in 0..VICTIMS {
                while calls.load(Ordering::Relaxed) < i / 3 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::yield_now();
                }
                engine.delete(format!("victim{i}").as_bytes(), &DeleteOpts::default());
                deleted.store(i + 1, Ordering::Release);
            }
        }));
    }

    let mut moved_under_walk = false;
    for round in 0..10 {
        let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut cursor = WalkCursor::default();
        let mut step = 0;
        while !cursor.is_done() {
            step += 1;
            if round == 0 && step == 300 && moves {
                // Halfway through a walk, make the engine move items (compaction
                // under -M), stable ones included: they must still be shown, once.
                let before = engine.stats().segments.reinserted;
                let mut i = 0;
                while engine.stats().segments.reinserted < before + STABLE as u64 {
                    assert!(i < 1_000_000, "no compaction after {i} overwrites");
                    set(e, &format!("filler{}", i % 500), 0, 900);
                    i += 1;
                }
                moved_under_walk = true;
            }
            // Victims deleted before this call began can never be shown by it.
            let gone = deleted.load(Ordering::Acquire);
            calls.fetch_add(1, Ordering::Relaxed);
            let mut n = 0;
            e.walk(&mut cursor, &mut |w| {
                let key = String::from_utf8_lossy(w.key).into_owned();
                for dead in ["flushed", "expired", "deleted"] {
                    assert!(
                        !key.starts_with(dead),
                        "round {round}: the walk showed {key}"
                    );
                }
                if let Some(i) = key.strip_prefix("victim") {
                    let i: usize = i.parse().expect("victim number");
                    assert!(
                        i >= gone,
                        "round {round}: {key} shown after its delete ({gone})"
                    );
                }
                *seen.entry(w.key.to_vec()).or_default() += 1;
                n += 1;
                // Stop now and then, so that the walk resumes from its cursor.
                n % 7 != 0
            });
        }
        for i in 0..STABLE {
            let times = seen
                .get(format!("stable{i}").as_bytes())
                .copied()
                .unwrap_or(0);
            // The segment engine may show a key twice when its partition's table
            // grew under the walk; the reference engine's slots never move.
            let most = if moves { 2 } else { 1 };
            assert!(
                (1..=most).contains(&times),
                "round {round}: stable{i} shown {times} times"
            );
            if moves {
                let times = seen
                    .get(format!("rewritten{i}").as_bytes())
                    .copied()
                    .unwrap_or(0);
                assert!(
                    (1..=2).contains(&times),
                    "round {round}: rewritten{i} shown {times} times"
                );
            }
        }
    }
    assert_eq!(moved_under_walk, moves);
    assert!(
        deleted.load(Ordering::Relaxed) > 0,
        "no delete ran under the walks"
    );
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("writer");
    }
}
