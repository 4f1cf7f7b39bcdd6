//! Unit tests of the segment engine's own mechanics (the shared semantics are
//! checked against the model in tests/model.rs; compaction's memory bound is in
//! tests/overwrite_reuse.rs, a process of its own, because other tests' pinned
//! readers would hold its retired segments).
//!
//! Locks: the tests call the engine as the server does, holding none; a few read
//! the engine's state through its own lock.

use super::segments::NEVER;
use super::write::ttl_bucket;
use super::*;
use crate::Counter;

pub(super) fn engine(limit: u64, evict: bool) -> (Seg, Arc<Clock>) {
    let clock = Arc::new(Clock::new());
    clock.set(100);
    let cfg = Config {
        limit_bytes: limit,
        evict,
        use_cas: true,
        item_size_max: 1024 * 1024,
        hash_seed: None,
    };
    (Seg::new(cfg, Arc::clone(&clock)), clock)
}

fn get(e: &Seg, key: &[u8]) -> Option<(Vec<u8>, u32, u64)> {
    let mut out = None;
    e.get(key, &GetOpts::default(), &mut |it| {
        out = Some((it.value.to_vec(), it.flags, it.cas));
        false
    });
    out
}

#[test]
fn ttl_buckets() {
    assert_eq!(ttl_bucket(0, 100), 0);
    assert_eq!(ttl_bucket(101, 100), 1);
    assert_eq!(ttl_bucket(107, 100), 1);
    assert_eq!(ttl_bucket(108, 100), 2);
    assert_eq!(ttl_bucket(100 + 63, 100), 2);
    assert_eq!(ttl_bucket(100 + 64, 100), 3);
    assert_eq!(ttl_bucket(u32::MAX, 100), 7);
}

#[test]
fn segment_sizes() {
    assert_eq!(segment_bytes(1 << 20), 64 * 1024);
    assert_eq!(segment_bytes(64 << 20), 512 * 1024);
    assert_eq!(segment_bytes(1 << 30), 1024 * 1024);
}

#[test]
fn basic_and_cas_uniqueness() {
    let (e, _) = engine(64 << 20, true);
    let StoreResult::Stored(c1) = e.store(Mode::Set, b"a", 5, 0, b"one", &StoreOpts::default())
    else {
        panic!("set")
    };
    let StoreResult::Stored(c2) = e.store(Mode::Set, b"b", 0, 0, b"two", &StoreOpts::default())
    else {
        panic!("set")
    };
    assert_ne!(c1, c2);
    assert_eq!(get(&e, b"a"), Some((b"one".to_vec(), 5, c1)));
    assert_eq!(
        e.store(Mode::Cas(c1 + 1), b"a", 0, 0, b"x", &StoreOpts::default()),
        StoreResult::Exists
    );
    let StoreResult::Stored(c3) = e.store(Mode::Cas(c1), b"a", 0, 0, b"x", &StoreOpts::default())
    else {
        panic!("cas")
    };
    assert!(c3 != c1 && c3 != c2);
    let StoreResult::Stored(c4) = e.store(Mode::Append, b"a", 9, 0, b"yz", &StoreOpts::default())
    else {
        panic!("append")
    };
    assert!(![c1, c2, c3].contains(&c4));
    assert_eq!(get(&e, b"a").map(|x| x.0), Some(b"xyz".to_vec()));
    assert_eq!(
        e.delta(b"a", true, 1, &DeltaOpts::default()),
        Delta::NonNumeric
    );
    e.store(Mode::Set, b"n", 0, 0, b"10", &StoreOpts::default());
    assert!(matches!(
        e.delta(b"n", false, 1, &DeltaOpts::default()),
        Delta::Value(Counter { value: 9, .. })
    ));
    assert_eq!(get(&e, b"n").map(|x| x.0), Some(b"9 ".to_vec()));
    assert_eq!(
        e.delete(b"n", &DeleteOpts::default()),
        DeleteResult::Deleted
    );
    assert_eq!(
        e.delete(b"n", &DeleteOpts::default()),
        DeleteResult::NotFound
    );
    let st = e.stats();
    assert_eq!(st.curr_items, 2);
}

#[test]
fn large_values_get_their_own_segment() {
    let (e, _) = engine(64 << 20, true);
    let big = vec![7u8; 900 * 1024];
    assert!(matches!(
        e.store(Mode::Set, b"big", 1, 0, &big, &StoreOpts::default()),
        StoreResult::Stored(_)
    ));
    assert_eq!(get(&e, b"big").map(|x| x.0.len()), Some(big.len()));
    // Append grows it past a shared segment's limit, still fine.
    assert!(matches!(
        e.store(
            Mode::Append,
            b"big",
            0,
            0,
            &[1u8; 10],
            &StoreOpts::default()
        ),
        StoreResult::Stored(_)
    ));
    assert_eq!(get(&e, b"big").map(|x| x.0.len()), Some(big.len() + 10));
}

#[test]
fn expired_segments_are_reclaimed_whole() {
    let (e, clock) = engine(8 << 20, true);
    for i in 0..2000u32 {
        e.store(
            Mode::Set,
            format!("t{i}").as_bytes(),
            0,
            110,
            &[1u8; 500],
            &StoreOpts::default(),
        );
    }
    e.store(Mode::Set, b"keep", 0, 0, b"v", &StoreOpts::default());
    let before = e.stats();
    assert_eq!(before.curr_items, 2001);
    clock.set(111);
    e.maintain();
    let after = e.stats();
    // Every sealed segment of the TTL bucket went at once; the active one waits for
    // lookups or its sealing.
    assert!(after.curr_items < 200, "curr_items {}", after.curr_items);
    assert!(after.reclaimed >= 1800);
    assert_eq!(after.expired_unfetched, after.reclaimed);
    assert!(get(&e, b"keep").is_some());
}

/// Exptime, CAS and access state of a live item, without bumping it.
fn meta(e: &Seg, key: &[u8]) -> Option<(RelTime, u64, bool)> {
    let mut out = None;
    let opts = GetOpts {
        no_bump: true,
        ..GetOpts::default()
    };
    e.get(key, &opts, &mut |it| {
        out = Some((it.exptime, it.cas, it.fetched));
        false
    });
    out
}

#[test]
fn touching_an_item_stored_without_exptime_copies_it() {
    // Items stored with exptime 0 have no exptime field; a touch to a non-zero time
    // links a copy that has one, keeping value, flags, CAS and state.
    let (e, clock) = engine(8 << 20, true);
    let StoreResult::Stored(cas) = e.store(Mode::Set, b"k", 7, 0, b"value", &StoreOpts::default())
    else {
        panic!("set")
    };
    assert!(get(&e, b"k").is_some()); // fetched: the copy must keep that
    let bytes_before = e.stats().bytes;
    assert!(e.touch(b"k", 150));
    assert_eq!(meta(&e, b"k"), Some((150, cas, true)));
    assert_eq!(get(&e, b"k"), Some((b"value".to_vec(), 7, cas)));
    let st = e.stats();
    assert_eq!(st.curr_items, 1);
    assert_eq!(st.total_items, 1, "a touch is not a store");
    // The copy carries the exptime field and an explicit CAS: 4 + 8 bytes more, and
    // 2 of padding before the exptime when the copy sits at a 4-aligned place.
    let grown = st.bytes - bytes_before;
    assert!(grown == 12 || grown == 14, "{grown}");
    // Now it has the field: later touches write in place, to 0 and back.
    assert!(e.touch(b"k", 0));
    assert_eq!(meta(&e, b"k"), Some((0, cas, true)));
    assert!(e.touch(b"k", 160));
    assert_eq!(e.stats().bytes, bytes_before + grown);
    // gat through the visitor: it sees the exptime before the touch.
    e.store(Mode::Set, b"g", 0, 0, b"v", &StoreOpts::default());
    let mut seen = None;
    let opts = GetOpts {
        touch: Some(140),
        ..GetOpts::default()
    };
    assert!(e
        .get(b"g", &opts, &mut |it| {
            seen = Some(it.exptime);
            false
        })
        .is_hit());
    assert_eq!(seen, Some(0));
    assert_eq!(meta(&e, b"g").map(|m| m.0), Some(140));
    // And the touched lifetimes hold.
    clock.set(141);
    assert!(get(&e, b"g").is_none());
    assert!(get(&e, b"k").is_some());
    clock.set(161);
    assert!(get(&e, b"k").is_none());
    // Touching a missing key stays a miss.
    assert!(!e.touch(b"nope", 5));
}

#[test]
fn maintain_skips_its_walk_until_something_can_expire() {
    let (e, clock) = engine(8 << 20, true);
    let fill = |prefix: &str, exptime: u32| {
        for i in 0..1000u32 {
            e.store(
                Mode::Set,
                format!("{prefix}{i}").as_bytes(),
                0,
                exptime,
                &[1u8; 500],
                &StoreOpts::default(),
            );
        }
    };
    // Sealed segments that never expire: nothing to look for.
    fill("n", 0);
    e.maintain();
    assert_eq!(e.arena.lock().next_expiry, NEVER);
    // Segments expiring at 1000, then (sealed later) some expiring at 110: the bound
    // drops at the seal, so the walk is not skipped when 110 comes.
    fill("late", 1000);
    e.maintain();
    assert!(e.arena.lock().next_expiry >= 1000);
    fill("early", 110);
    assert!(e.arena.lock().next_expiry <= 110);
    let before = e.stats().reclaimed;
    clock.set(111);
    e.maintain();
    assert!(e.stats().reclaimed >= before + 500, "{:?}", e.stats());
    assert!(get(&e, b"late1").is_some());
    assert!(get(&e, b"n1").is_some());
    // A flush_all makes the next walk happen whatever the bound says.
    e.flush_all(None);
    e.store(Mode::Set, b"after", 0, 0, b"v", &StoreOpts::default());
    e.maintain();
    assert_eq!(e.stats().curr_items, 1);
}

#[test]
fn flush_all_immediate_and_sweep() {
    let (e, _) = engine(8 << 20, true);
    for i in 0..3000u32 {
        e.store(
            Mode::Set,
            format!("k{i}").as_bytes(),
            0,
            0,
            &[1u8; 300],
            &StoreOpts::default(),
        );
    }
    e.flush_all(None);
    // Freed before flush_all returns (memcached 1.6.25+ unlinks at once).
    assert_eq!((e.stats().curr_items, e.stats().bytes), (0, 0));
    assert!(get(&e, b"k1").is_none());
    e.store(Mode::Set, b"after", 0, 0, b"v", &StoreOpts::default());
    assert!(get(&e, b"after").is_some());
    e.maintain();
    assert_eq!(e.stats().curr_items, 1);
}

#[test]
fn eviction_keeps_hot_items() {
    let (e, _) = engine(4 << 20, true);
    // A hot set of 200 keys read constantly while 40 MB of cold data streams by.
    let hot: Vec<String> = (0..200).map(|i| format!("hot{i}")).collect();
    for k in &hot {
        e.store(
            Mode::Set,
            k.as_bytes(),
            0,
            0,
            &[b'h'; 200],
            &StoreOpts::default(),
        );
    }
    for i in 0..100_000u32 {
        e.store(
            Mode::Set,
            format!("cold{i}").as_bytes(),
            0,
            0,
            &[b'c'; 400],
            &StoreOpts::default(),
        );
        let k = &hot[(i % 200) as usize];
        if get(&e, k.as_bytes()).is_none() {
            e.store(
                Mode::Set,
                k.as_bytes(),
                0,
                0,
                &[b'h'; 200],
                &StoreOpts::default(),
            );
        }
    }
    let present = hot
        .iter()
        .filter(|k| get(&e, k.as_bytes()).is_some())
        .count();
    assert!(present >= 190, "only {present} of 200 hot keys survived");
    let st = e.stats();
    assert!(st.evictions > 50_000);
    assert!(e.counters.reinserted.load(Ordering::Relaxed) > 0);
    assert!(e.arena.lock().used <= 4 << 20);
}

/// `evicted_active` counts items evicted although they were read since they were
/// stored (eviction's reinsertion budget was spent): none while nothing is read,
/// some when every item is read once right after it is stored.
#[test]
fn evicted_active_counts_items_evicted_after_a_read() {
    for read in [false, true] {
        let (e, _) = engine(4 << 20, true);
        for i in 0..40_000u32 {
            let k = format!("k{i}");
            e.store(
                Mode::Set,
                k.as_bytes(),
                0,
                0,
                &[b'v'; 400],
                &StoreOpts::default(),
            );
            if read {
                assert!(get(&e, k.as_bytes()).is_some());
            }
        }
        let st = e.stats();
        assert!(st.evictions > 20_000, "{read}: {} evictions", st.evictions);
        if read {
            assert!(st.evicted_active > 0, "no active item evicted");
            assert!(st.evicted_active <= st.evictions);
            assert_eq!(st.evicted_unfetched, 0);
        } else {
            assert_eq!(st.evicted_active, 0);
            assert_eq!(st.evicted_unfetched, st.evictions);
        }
        e.reset_stats();
        assert_eq!(e.stats().evicted_active, 0);
    }
}

#[test]
fn no_evict_mode_answers_out_of_memory_and_compacts() {
    // 1 MiB for segments: the index's first tables (512 KiB) count against the limit.
    let (e, _) = engine(3 << 19, false);
    let mut stored = 0;
    for i in 0..10_000u32 {
        match e.store(
            Mode::Set,
            format!("k{i}").as_bytes(),
            0,
            0,
            &[1u8; 1000],
            &StoreOpts::default(),
        ) {
            StoreResult::Stored(_) => stored += 1,
            StoreResult::OutOfMemory => break,
            other => panic!("{other:?}"),
        }
    }
    assert!(stored > 500, "stored {stored}");
    assert!(stored < 1100);
    // Nothing was evicted: every stored key is still there.
    for i in 0..stored {
        assert!(get(&e, format!("k{i}").as_bytes()).is_some(), "k{i} lost");
    }
    assert_eq!(e.stats().evictions, 0);
    // Deleting half frees room again: compaction moves the live half together.
    for i in (0..stored).step_by(2) {
        e.delete(format!("k{i}").as_bytes(), &DeleteOpts::default());
    }
    let mut more = 0;
    for i in 0..(stored / 3) {
        if matches!(
            e.store(
                Mode::Set,
                format!("m{i}").as_bytes(),
                0,
                0,
                &[1u8; 1000],
                &StoreOpts::default()
            ),
            StoreResult::Stored(_)
        ) {
            more += 1;
        }
    }
    assert!(more >= stored / 4, "only {more} stored after deleting half");
    for i in (1..stored).step_by(2) {
        assert!(
            get(&e, format!("k{i}").as_bytes()).is_some(),
            "k{i} lost by compaction"
        );
    }
}

#[test]
fn concurrent_readers_and_writers_see_whole_values() {
    let (e, _) = engine(2 << 20, true);
    let e = Arc::new(e);
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let e = Arc::clone(&e);
            std::thread::spawn(move || {
                for i in 0..50_000u32 {
                    let k = format!("k{}", (i * 31 + t) % 3000);
                    if i % 4 == 0 {
                        let fill = (i % 251) as u8;
                        let mut v = k.clone().into_bytes();
                        v.push(b':');
                        v.extend(std::iter::repeat_n(fill, (i % 700) as usize));
                        e.store(Mode::Set, k.as_bytes(), 0, 0, &v, &StoreOpts::default());
                    } else {
                        // Every 7th read is a gat far in the future: the first one on an
                        // item stored without exptime links a copy (touch_copy) racing
                        // the other threads' sets.
                        let opts = GetOpts {
                            touch: (i % 7 == 1).then_some(1_000_000),
                            ..GetOpts::default()
                        };
                        e.get(k.as_bytes(), &opts, &mut |it| {
                            let v = it.value;
                            assert!(v.starts_with(k.as_bytes()), "another key's value");
                            let body = &v[k.len() + 1..];
                            if let Some(&first) = body.first() {
                                assert!(body.iter().all(|&b| b == first), "torn value");
                            }
                            false
                        });
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    assert!(e.arena.lock().used <= 2 << 20);
}
