//! The key dump's walk ([`Engine::walk`]) against writers running at the same time:
//! it never shows a dead item (expired, flushed, deleted before the walk looked), and
//! it shows every key that stays live, including ones the engine moves meanwhile
//! (under `-M` the segment engine compacts: it moves live items to free segments).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use memcrab_store::reference::Reference;
use memcrab_store::seg::{KeyHasher, Seg};
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
            // The segment engine may show a key again when its partition's table
            // was rebuilt, or cuckoo moves ran in it, under the walk (each starts
            // the partition again: rarely more than once in a walk); the reference
            // engine's slots never move.
            let most = if moves { 4 } else { 1 };
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
                    (1..=most).contains(&times),
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

/// Cuckoo displacement moves index slots from one bucket to another while a walk
/// reads the table: a key moved from the part not yet walked into the part already
/// walked must still be shown. Under a fixed seed, stable keys and churning keys
/// (inserted and deleted so that the tables stay nearly full, which is when chains
/// of moves run) all fall in the same few partitions; every walk, resumed every few
/// items and lingering on each, must show each stable key.
#[test]
fn seg_walk_shows_keys_that_cuckoo_moves() {
    const SEED: u128 = 0x5eed_c0c0_0f0f;
    const PARTS: u64 = 8;
    const STABLE_KEYS: usize = 3_000;
    const CHURN_KEYS: usize = 3_000;
    // The keys with `prefix` whose hashes fall in the first PARTS partitions.
    let keys = |prefix: &'static str| {
        let hasher = KeyHasher::with_seed(SEED);
        (0u64..)
            .map(move |i| format!("{prefix}{i}"))
            .filter(move |k| hasher.hash(k.as_bytes()) >> 52 < PARTS)
    };
    let stable: Vec<String> = keys("s").take(STABLE_KEYS).collect();
    let clock = Arc::new(Clock::new());
    clock.set(100);
    let cfg = Config {
        limit_bytes: 64 << 20,
        // -M: the churn's dead items are compacted away, no stable key is evicted.
        evict: false,
        use_cas: true,
        item_size_max: 0,
        hash_seed: Some(SEED),
    };
    let engine: Arc<dyn Engine> = Arc::new(Seg::new(cfg, Arc::clone(&clock)));
    let e = engine.as_ref();
    for k in &stable {
        assert!(matches!(set(e, k, 0, 8), StoreResult::Stored(_)));
    }
    let mut churn_keys = keys("c");
    let mut window = std::collections::VecDeque::new();
    for _ in 0..CHURN_KEYS {
        let k = churn_keys.next().expect("keys");
        assert!(matches!(set(e, &k, 0, 8), StoreResult::Stored(_)));
        window.push_back(k);
    }
    let chains_before = e.stats().index_cuckoo_chains;
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (engine, stop) = (Arc::clone(&engine), Arc::clone(&stop));
        std::thread::spawn(move || {
            // Delete the oldest churn key, insert a new one: the item count stays
            // put, the tables stay full, and new keys need room in full buckets.
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && n < 20_000_000 {
                if let Some(old) = window.pop_front() {
                    engine.delete(old.as_bytes(), &DeleteOpts::default());
                }
                let k = churn_keys.next().expect("keys");
                set(engine.as_ref(), &k, 0, 8);
                window.push_back(k);
                n += 1;
            }
        })
    };
    let index: HashMap<&str, usize> = stable
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    let mut walks = 0;
    // Walk until the writer has made enough chains of moves under the walks.
    while walks < 2_000 && (walks < 5 || e.stats().index_cuckoo_chains < chains_before + 20_000) {
        let mut seen = vec![0u32; STABLE_KEYS];
        let mut cursor = WalkCursor::default();
        while !cursor.is_done() {
            let mut n = 0;
            e.walk(&mut cursor, &mut |w| {
                if let Some(&i) = std::str::from_utf8(w.key).ok().and_then(|k| index.get(k)) {
                    seen[i] += 1;
                }
                // Linger on each item (the visitor runs inside the walk of a
                // partition's slots), so that moves land mid-partition.
                for _ in 0..200 {
                    std::hint::spin_loop();
                }
                n += 1;
                n % 5 != 0
            });
        }
        let missed: Vec<usize> = (0..STABLE_KEYS).filter(|&i| seen[i] == 0).collect();
        assert!(
            missed.is_empty(),
            "walk {walks}: {} stable keys missed, e.g. {}",
            missed.len(),
            stable[missed[0]]
        );
        walks += 1;
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().expect("churn thread");
    let chains = e.stats().index_cuckoo_chains - chains_before;
    assert!(
        chains >= 20_000,
        "only {chains} chains of moves in {walks} walks: the test did not exercise them"
    );
}
