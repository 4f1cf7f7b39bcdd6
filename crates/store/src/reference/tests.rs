//! Unit tests of the reference engine (the shared semantics are checked against the
//! model in tests/model.rs).
//!
//! Locks: the tests call the engine as the server does, holding none.

use super::*;
use crate::Counter;

fn engine(limit: u64, evict: bool) -> Reference {
    let cfg = Config {
        limit_bytes: limit,
        evict,
        use_cas: true,
        item_size_max: 0,
        hash_seed: None,
    };
    Reference::new(cfg, 10, Arc::new(Clock::new()))
}

fn get(e: &Reference, key: &[u8]) -> Option<(Vec<u8>, u32, u64)> {
    let mut out = None;
    e.get(key, &GetOpts::default(), &mut |it| {
        out = Some((it.value.to_vec(), it.flags, it.cas));
        false
    });
    out
}

#[test]
fn modes() {
    let e = engine(1 << 20, true);
    assert_eq!(
        e.store(Mode::Add, b"k", 1, 0, b"a", &StoreOpts::default()),
        StoreResult::Stored(get_cas_after(&e))
    );
    assert_eq!(
        e.store(Mode::Add, b"k", 1, 0, b"b", &StoreOpts::default()),
        StoreResult::NotStored
    );
    assert_eq!(
        e.store(Mode::Replace, b"x", 1, 0, b"b", &StoreOpts::default()),
        StoreResult::NotStored
    );
    assert!(matches!(
        e.store(Mode::Append, b"k", 9, 0, b"z", &StoreOpts::default()),
        StoreResult::Stored(_)
    ));
    assert!(matches!(
        e.store(Mode::Prepend, b"k", 9, 0, b"y", &StoreOpts::default()),
        StoreResult::Stored(_)
    ));
    let (v, f, cas) = get(&e, b"k").expect("hit");
    assert_eq!((v.as_slice(), f), (&b"yaz"[..], 1));
    assert_eq!(
        e.store(Mode::Cas(cas + 1), b"k", 0, 0, b"c", &StoreOpts::default()),
        StoreResult::Exists
    );
    assert!(
        matches!(e.store(Mode::Cas(cas), b"k", 0, 0, b"c", &StoreOpts::default()), StoreResult::Stored(c) if c != cas)
    );
    assert_eq!(
        e.store(Mode::Cas(1), b"nope", 0, 0, b"c", &StoreOpts::default()),
        StoreResult::NotFound
    );
    assert_eq!(
        e.delete(b"k", &DeleteOpts::default()),
        DeleteResult::Deleted
    );
    assert_eq!(
        e.delete(b"k", &DeleteOpts::default()),
        DeleteResult::NotFound
    );
}

fn get_cas_after(e: &Reference) -> u64 {
    // The first item in an empty shard gets sequence 1.
    let (_, si) = e.locate(b"k");
    SHARDS as u64 + si as u64
}

#[test]
fn append_stops_at_item_size_max() {
    let cfg = Config {
        limit_bytes: 1 << 20,
        evict: true,
        use_cas: true,
        item_size_max: 1024,
        hash_seed: None,
    };
    let e = Reference::new(cfg, 10, Arc::new(Clock::new()));
    assert!(matches!(
        e.store(Mode::Set, b"k", 0, 0, &[b'y'; 600], &StoreOpts::default()),
        StoreResult::Stored(_)
    ));
    assert_eq!(
        e.store(
            Mode::Append,
            b"k",
            0,
            0,
            &[b'z'; 600],
            &StoreOpts::default()
        ),
        StoreResult::NotStored
    );
    assert_eq!(
        e.store(
            Mode::Prepend,
            b"k",
            0,
            0,
            &[b'z'; 600],
            &StoreOpts::default()
        ),
        StoreResult::NotStored
    );
    // 1024 - 48 header - 2 (key + NUL) - 2 (CRLF) - 8 (CAS) = 964 bytes fit.
    assert!(matches!(
        e.store(
            Mode::Append,
            b"k",
            0,
            0,
            &[b'z'; 364],
            &StoreOpts::default()
        ),
        StoreResult::Stored(_)
    ));
    assert_eq!(
        e.store(Mode::Append, b"k", 0, 0, b"z", &StoreOpts::default()),
        StoreResult::NotStored
    );
}

#[test]
fn expiry_and_touch() {
    let e = engine(1 << 20, true);
    e.clock.set(100);
    e.store(Mode::Set, b"k", 0, 101, b"v", &StoreOpts::default());
    assert!(get(&e, b"k").is_some());
    e.clock.set(101);
    assert_eq!(
        e.get(b"k", &GetOpts::default(), &mut |_| false),
        Fetch::Expired
    );
    assert_eq!(
        e.get(b"k", &GetOpts::default(), &mut |_| false),
        Fetch::Miss
    );
    e.store(Mode::Set, b"t", 0, 102, b"v", &StoreOpts::default());
    assert!(e.touch(b"t", 0));
    e.clock.set(1000);
    assert!(get(&e, b"t").is_some());
}

#[test]
fn flush_now_and_delayed() {
    let e = engine(1 << 20, true);
    e.clock.set(100);
    e.store(Mode::Set, b"a", 0, 0, b"v", &StoreOpts::default());
    e.store(Mode::Set, b"z", 0, 0, b"v", &StoreOpts::default());
    e.flush_all(None);
    // An immediate flush frees its items before it returns (memcached 1.6.25+):
    // a lookup is a plain miss.
    assert_eq!((e.stats().curr_items, e.stats().bytes), (0, 0));
    assert_eq!(
        e.get(b"a", &GetOpts::default(), &mut |_| false),
        Fetch::Miss
    );
    // Stored in the same second after the flush: live.
    e.store(Mode::Set, b"b", 0, 0, b"v", &StoreOpts::default());
    assert!(get(&e, b"b").is_some());
    e.flush_all(Some(110));
    e.clock.set(105);
    assert!(get(&e, b"b").is_some());
    e.clock.set(110);
    assert_eq!(
        e.get(b"b", &GetOpts::default(), &mut |_| false),
        Fetch::Flushed
    );
    // maintain() frees a due delayed flush's items without a lookup.
    e.store(Mode::Set, b"d", 0, 0, b"v", &StoreOpts::default());
    e.flush_all(Some(115));
    e.clock.set(115);
    assert_eq!(e.stats().curr_items, 1);
    e.maintain();
    assert_eq!(e.stats().curr_items, 0);
    e.clock.set(116);
    e.store(Mode::Set, b"c", 0, 0, b"v", &StoreOpts::default());
    assert!(get(&e, b"c").is_some());
}

#[test]
fn incr_decr() {
    let e = engine(1 << 20, true);
    e.store(Mode::Set, b"n", 5, 0, b"10", &StoreOpts::default());
    let total = e.stats().total_items;
    assert!(matches!(
        e.delta(b"n", false, 1, &DeltaOpts::default()),
        Delta::Value(Counter { value: 9, .. })
    ));
    assert_eq!(get(&e, b"n").map(|g| g.0), Some(b"9 ".to_vec()));
    assert_eq!(e.stats().total_items, total, "in place: no new item");
    assert!(matches!(
        e.delta(b"n", true, 91, &DeltaOpts::default()),
        Delta::Value(Counter { value: 100, .. })
    ));
    assert_eq!(
        get(&e, b"n").map(|g| (g.0, g.1)),
        Some((b"100".to_vec(), 5))
    );
    assert_eq!(
        e.delta(b"missing", true, 1, &DeltaOpts::default()),
        Delta::NotFound
    );
    e.store(Mode::Set, b"s", 0, 0, b"abc", &StoreOpts::default());
    assert_eq!(
        e.delta(b"s", true, 1, &DeltaOpts::default()),
        Delta::NonNumeric
    );
}

#[test]
fn eviction_keeps_memory_bounded() {
    let limit = 64 * 1024;
    let e = engine(limit, true);
    for i in 0..10_000u32 {
        let key = format!("key:{i}");
        assert!(matches!(
            e.store(
                Mode::Set,
                key.as_bytes(),
                0,
                0,
                &[b'x'; 100],
                &StoreOpts::default()
            ),
            StoreResult::Stored(_)
        ));
        assert!(e.stats().bytes <= limit);
    }
    let st = e.stats();
    assert!(st.evictions > 0);
    assert!(st.curr_items < 10_000);
    assert_eq!(
        st.bytes,
        st.curr_items * (ITEM_OVERHEAD_BYTES + 100 + 8) - extra_digits(&e)
    );
}

/// Keys "key:0".."key:9999" differ in length; count the bytes below 4 digits.
fn extra_digits(e: &Reference) -> u64 {
    let mut short = 0;
    for i in 0..10_000u32 {
        let key = format!("key:{i}");
        if get(e, key.as_bytes()).is_some() {
            short += 8 - key.len() as u64;
        }
    }
    short
}

#[test]
fn no_evict_reports_out_of_memory() {
    let e = engine(4096, false);
    let mut stored = 0;
    for i in 0..100u32 {
        match e.store(
            Mode::Set,
            format!("k{i}").as_bytes(),
            0,
            0,
            &[b'x'; 100],
            &StoreOpts::default(),
        ) {
            StoreResult::Stored(_) => stored += 1,
            StoreResult::OutOfMemory => break,
            other => panic!("{other:?}"),
        }
    }
    assert!(stored > 0 && stored < 100);
    assert_eq!(e.stats().evictions, 0);
    // A failed set removes the old value.
    assert_eq!(
        e.store(Mode::Set, b"k0", 0, 0, &[b'x'; 1000], &StoreOpts::default()),
        StoreResult::OutOfMemory
    );
    assert!(get(&e, b"k0").is_none());
}
