//! Property tests: random operation sequences against the reference engine and a plain
//! map model of memcached's semantics, comparing every result. Time is driven by hand.

use std::collections::HashMap;
use std::sync::Arc;

use memcrab_store::reference::Reference;
use memcrab_store::seg::Seg;
use memcrab_store::{
    apply_delta, Clock, Config, DeleteOpts, DeleteResult, Delta, DeltaOpts, Engine, Fetch, GetOpts,
    Mode, StoreOpts, StoreResult, Vivify, WalkCursor,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Item {
    value: Vec<u8>,
    flags: u32,
    exptime: u32,
    cas: u64,
    /// memcached's `it->time` (the engine's `atime`).
    time: u32,
    fetched: bool,
    stale: bool,
    token_sent: bool,
    /// Invalidated by a flush_all that was due when issued (the engine reports such
    /// keys as flushed until its `maintain` frees them, which this test never calls).
    flushed: bool,
}

impl Item {
    fn new(value: Vec<u8>, flags: u32, exptime: u32, now: u32) -> Self {
        Item {
            value,
            flags,
            exptime,
            cas: 0,
            time: now,
            fetched: false,
            stale: false,
            token_sent: false,
            flushed: false,
        }
    }
}

/// memcached's semantics, written as plainly as possible.
#[derive(Default)]
struct Model {
    map: HashMap<Vec<u8>, Item>,
    now: u32,
    /// memcached's `oldest_live`.
    oldest_live: u32,
}

impl Model {
    /// Why an item is dead now, or None when it is live.
    fn dead(&self, it: &Item) -> Option<Fetch> {
        if it.flushed
            || (self.oldest_live != 0
                && self.oldest_live <= self.now
                && it.time <= self.oldest_live)
        {
            Some(Fetch::Flushed)
        } else if it.exptime != 0 && it.exptime <= self.now {
            Some(Fetch::Expired)
        } else {
            None
        }
    }

    /// Finds a live item, dropping a dead one and saying why it was dead.
    fn lookup(&mut self, key: &[u8]) -> Result<&mut Item, Fetch> {
        let why = match self.map.get(key) {
            None => return Err(Fetch::Miss),
            Some(it) => self.dead(it),
        };
        if let Some(why) = why {
            self.map.remove(key);
            return Err(why);
        }
        self.map.get_mut(key).ok_or(Fetch::Miss)
    }
}

/// Which CAS unique a request compares with, relative to the live item's.
#[derive(Clone, Copy, Debug)]
enum CasPick {
    None,
    Right,
    Below,
    Above,
    Zero,
}

impl CasPick {
    fn unique(self, live: Option<&Item>) -> Option<u64> {
        let cur = live.map_or(12345, |it| it.cas);
        match self {
            CasPick::None => None,
            CasPick::Right => Some(cur),
            CasPick::Below => Some(cur.saturating_sub(1)),
            CasPick::Above => Some(cur + 1),
            CasPick::Zero => Some(0),
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// mode, key, flags, exptime, value, compare, invalidate, vivify ttl, explicit CAS.
    Store(
        Mode,
        u8,
        u32,
        u32,
        Vec<u8>,
        CasPick,
        bool,
        Option<u32>,
        Option<u64>,
    ),
    /// CAS with the model's current unique (`true`) or a wrong one.
    Cas(u8, bool, Vec<u8>),
    /// key, touch, no_bump, vivify ttl, explicit CAS, visitor asks for the token.
    Get(u8, Option<u32>, bool, Option<u32>, Option<u64>, bool),
    Touch(u8, u32),
    /// key, compare, invalidate, touch, explicit CAS.
    Delete(u8, CasPick, bool, Option<u32>, Option<u64>),
    /// key, incr, delta, compare, vivify (initial, ttl), touch, explicit CAS.
    Delta(
        u8,
        bool,
        u64,
        CasPick,
        Option<(u64, u32)>,
        Option<u32>,
        Option<u64>,
    ),
    FlushNow,
    FlushIn(u32),
    Advance(u32),
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k}").into_bytes()
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "[0-9]{1,3}".prop_map(String::into_bytes),
        Just(b"18446744073709551615".to_vec()),
        "[a-z ]{0,8}".prop_map(String::into_bytes),
    ]
}

fn cas_pick() -> impl Strategy<Value = CasPick> {
    prop_oneof![
        6 => Just(CasPick::None),
        2 => Just(CasPick::Right),
        1 => Just(CasPick::Below),
        1 => Just(CasPick::Above),
        1 => Just(CasPick::Zero),
    ]
}

/// Operations; explicit CAS uniques only when there are no flushes, because a flush
/// invalidates by comparing uniques with the engine's counter (as memcached does),
/// which hand-picked uniques do not follow.
fn op(flushes: bool) -> impl Strategy<Value = Op> {
    let k = 0u8..6;
    let exp = prop_oneof![Just(0u32), 1u32..6];
    let opt_exp = prop::option::weighted(0.3, exp.clone());
    let new_cas = if flushes {
        Just(None).boxed()
    } else {
        prop::option::weighted(0.2, (1u64 << 40)..(1u64 << 40) + 8).boxed()
    };
    let mode = prop_oneof![
        Just(Mode::Set),
        Just(Mode::Add),
        Just(Mode::Replace),
        Just(Mode::Append),
        Just(Mode::Prepend)
    ];
    let flush_weight = if flushes { 1 } else { 0 };
    prop_oneof![
        4 => (mode, k.clone(), any::<u32>(), exp.clone(), value(), cas_pick(), any::<bool>(), opt_exp.clone(), new_cas.clone())
            .prop_map(|(m, k, f, e, v, c, i, n, x)| Op::Store(m, k, f, e, v, c, i, n, x)),
        1 => (k.clone(), any::<bool>(), value()).prop_map(|(k, ok, v)| Op::Cas(k, ok, v)),
        5 => (k.clone(), opt_exp.clone(), any::<bool>(), opt_exp.clone(), new_cas.clone(), any::<bool>())
            .prop_map(|(k, t, u, n, x, w)| Op::Get(k, t, u, n, x, w)),
        1 => (k.clone(), exp.clone()).prop_map(|(k, e)| Op::Touch(k, e)),
        2 => (k.clone(), cas_pick(), any::<bool>(), opt_exp.clone(), new_cas.clone())
            .prop_map(|(k, c, i, t, x)| Op::Delete(k, c, i, t, x)),
        2 => (
            k.clone(),
            any::<bool>(),
            prop_oneof![0u64..20, Just(u64::MAX)],
            cas_pick(),
            prop::option::weighted(0.3, (0u64..200, exp.clone())),
            opt_exp,
            new_cas,
        )
            .prop_map(|(k, i, d, c, v, t, x)| Op::Delta(k, i, d, c, v, t, x)),
        flush_weight => Just(Op::FlushNow),
        flush_weight => (1u32..4).prop_map(Op::FlushIn),
        2 => (1u32..3).prop_map(Op::Advance),
    ]
}

/// Relative exptime in the model's terms (the engine gets the same absolute value).
fn abs(m: &Model, e: u32) -> u32 {
    if e == 0 {
        0
    } else {
        m.now + e
    }
}

/// The engines under test, built from a config and a clock.
fn reference(cfg: Config, clock: Arc<Clock>) -> Arc<dyn Engine> {
    Arc::new(Reference::new(cfg, 12, clock))
}

fn seg(cfg: Config, clock: Arc<Clock>) -> Arc<dyn Engine> {
    Arc::new(Seg::new(cfg, clock))
}

type Make = fn(Config, Arc<Clock>) -> Arc<dyn Engine>;

/// What an engine-chosen or explicit unique must look like.
fn check_cas(got: u64, explicit: Option<u64>) -> bool {
    match explicit {
        Some(x) => got == x,
        None => got != 0 && got < 1 << 40,
    }
}

/// An engine-chosen unique must also exceed every one the engine gave the key before
/// (memcached's one counter orders them, deleted versions included); a client's (`E`)
/// is taken as given, and the next version need not exceed it. Records `got`.
fn ordered(past: &mut HashMap<Vec<u8>, u64>, key: &[u8], got: u64, explicit: Option<u64>) -> bool {
    if !check_cas(got, explicit) {
        return false;
    }
    if explicit.is_some() {
        return true;
    }
    let last = past.entry(key.to_vec()).or_insert(0);
    let ok = got > *last;
    *last = got;
    ok
}

fn check(ops: Vec<Op>, make: Make) -> Result<(), TestCaseError> {
    let clock = Arc::new(Clock::new());
    clock.set(10);
    let engine = make(
        Config {
            limit_bytes: 1 << 30,
            evict: true,
            use_cas: true,
            item_size_max: 0,
            hash_seed: None,
        },
        Arc::clone(&clock),
    );
    let mut m = Model {
        now: 10,
        ..Model::default()
    };
    let mut past = HashMap::new();
    for (step, op) in ops.into_iter().enumerate() {
        let now = m.now;
        match op {
            Op::Store(mode, k, flags, e, v, pick, invalidate, vivify, new_cas) => {
                let key = key(k);
                let exptime = abs(&m, e);
                let live = m.lookup(&key).ok().cloned();
                let opts = StoreOpts {
                    compare_cas: pick.unique(live.as_ref()),
                    invalidate,
                    vivify: vivify.map(|t| abs(&m, t)),
                    new_cas,
                };
                let got = engine.store(mode, &key, flags, exptime, &v, &opts);
                let fresh = Item::new(v.clone(), flags, exptime, now);
                let cas_mode =
                    matches!(mode, Mode::Set | Mode::Replace) && opts.compare_cas.is_some();
                // Ok(Some(item)): stored; Ok(None): NotStored; Err(result): other.
                let want: Result<Option<Item>, StoreResult> = match (&live, cas_mode) {
                    (None, true) => Err(StoreResult::NotFound),
                    (Some(old), true) => {
                        let c = opts.compare_cas.unwrap_or(0);
                        if c != 0 && c == old.cas {
                            Ok(Some(fresh))
                        } else if invalidate && c != 0 && c < old.cas {
                            Ok(Some(Item {
                                exptime: old.exptime,
                                stale: true,
                                token_sent: old.token_sent,
                                ..fresh
                            }))
                        } else {
                            Err(StoreResult::Exists)
                        }
                    }
                    (_, false) => match (mode, &live) {
                        (Mode::Set, _) | (Mode::Add | Mode::Replace, None)
                            if mode != Mode::Replace =>
                        {
                            Ok(Some(fresh))
                        }
                        (Mode::Replace, Some(_)) => Ok(Some(fresh)),
                        (Mode::Add, Some(_)) => {
                            let it = m.map.get_mut(&key).expect("live");
                            it.time = now;
                            Ok(None)
                        }
                        (Mode::Append | Mode::Prepend, Some(old)) => match opts.compare_cas {
                            Some(c) if c != 0 && c != old.cas => Err(StoreResult::Exists),
                            _ => {
                                let value = if mode == Mode::Append {
                                    [old.value.as_slice(), &v].concat()
                                } else {
                                    [v.as_slice(), &old.value].concat()
                                };
                                Ok(Some(Item::new(value, old.flags, old.exptime, now)))
                            }
                        },
                        (Mode::Append | Mode::Prepend, None) => match opts.vivify {
                            Some(t) => Ok(Some(Item::new(v.clone(), flags, t, now))),
                            None => Ok(None),
                        },
                        _ => Ok(None),
                    },
                };
                match (got, want) {
                    (StoreResult::Stored(cas), Ok(Some(mut it))) => {
                        prop_assert!(
                            ordered(&mut past, &key, cas, new_cas),
                            "step {step}: cas {cas}"
                        );
                        it.cas = cas;
                        m.map.insert(key, it);
                    }
                    (StoreResult::NotStored, Ok(None)) => {}
                    (got, Err(want)) if got == want => {}
                    (got, want) => {
                        prop_assert!(
                            false,
                            "step {step}: {mode:?} {opts:?} got {got:?}, model {want:?}"
                        )
                    }
                }
            }
            Op::Cas(k, right, v) => {
                let key = key(k);
                let live = m.lookup(&key).ok().cloned();
                let unique = match (&live, right) {
                    (Some(it), true) => it.cas,
                    (Some(it), false) => it.cas + 1,
                    (None, _) => 12345,
                };
                let got = engine.store(Mode::Cas(unique), &key, 7, 0, &v, &StoreOpts::default());
                match (got, live, right) {
                    (StoreResult::NotFound, None, _) => {}
                    (StoreResult::Exists, Some(_), false) => {}
                    (StoreResult::Stored(cas), Some(_), true) => {
                        prop_assert_ne!(cas, unique, "step {}: cas unchanged", step);
                        prop_assert!(ordered(&mut past, &key, cas, None), "step {step}: order");
                        let mut it = Item::new(v, 7, 0, now);
                        it.cas = cas;
                        m.map.insert(key, it);
                    }
                    (got, live, right) => prop_assert!(
                        false,
                        "step {step}: cas got {got:?}, model {live:?} right={right}"
                    ),
                }
            }
            Op::Get(k, touch, no_bump, vivify, new_cas, ask) => {
                let key = key(k);
                let opts = GetOpts {
                    touch: touch.map(|t| abs(&m, t)),
                    no_bump,
                    vivify: vivify.map(|t| abs(&m, t)),
                    new_cas,
                    // Both paths of an engine with lock-free lookups.
                    exclusive: step % 2 == 0,
                };
                let mut seen = None;
                let got = engine.get(&key, &opts, &mut |it| {
                    let won = !it.token_sent && (it.stale || it.created || ask);
                    seen = Some((
                        it.value.to_vec(),
                        it.flags,
                        it.cas,
                        it.exptime,
                        it.atime,
                        it.fetched,
                        it.stale,
                        it.token_sent,
                        it.created,
                    ));
                    won
                });
                match m.lookup(&key) {
                    Ok(it) => {
                        prop_assert_eq!(got, Fetch::Hit, "step {}", step);
                        prop_assert_eq!(
                            seen,
                            Some((
                                it.value.clone(),
                                it.flags,
                                it.cas,
                                it.exptime,
                                it.time,
                                it.fetched,
                                it.stale,
                                it.token_sent,
                                false
                            )),
                            "step {}",
                            step
                        );
                        if !it.token_sent && (it.stale || ask) {
                            it.token_sent = true;
                        }
                        if let Some(t) = opts.touch {
                            it.exptime = t;
                        }
                        if !no_bump {
                            if it.fetched {
                                it.time = now;
                            }
                            it.fetched = true;
                        }
                    }
                    Err(why) => match opts.vivify {
                        Some(t) => {
                            prop_assert_eq!(got, Fetch::Hit, "step {}", step);
                            let Some(s) = seen else {
                                return Err(TestCaseError::fail(format!("step {step}: no visit")));
                            };
                            prop_assert!(ordered(&mut past, &key, s.2, new_cas), "step {}", step);
                            prop_assert_eq!(
                                (s.0, s.1, s.3, s.4, s.5, s.6, s.7, s.8),
                                (Vec::new(), 0, 0, now, false, false, false, true),
                                "step {}",
                                step
                            );
                            let mut it = Item::new(Vec::new(), 0, t, now);
                            it.cas = s.2;
                            it.token_sent = true;
                            // The vivifying lookup bumps the new item (memcached's mg).
                            it.fetched = !no_bump;
                            m.map.insert(key, it);
                        }
                        None => {
                            // A dead item may already be gone (a plain miss): the seg
                            // engine reclaims dead items when it compacts a mostly dead
                            // segment, as memcached's LRU crawler does in the background.
                            prop_assert!(
                                got == why || got == Fetch::Miss,
                                "step {}: got {:?}, model {:?}",
                                step,
                                got,
                                why
                            );
                            prop_assert!(seen.is_none());
                        }
                    },
                }
            }
            Op::Touch(k, e) => {
                let key = key(k);
                let t = abs(&m, e);
                let got = engine.touch(&key, t);
                let want = match m.lookup(&key) {
                    Ok(it) => {
                        it.exptime = t;
                        if it.fetched {
                            it.time = now;
                        }
                        it.fetched = true;
                        true
                    }
                    Err(_) => false,
                };
                prop_assert_eq!(got, want, "step {}", step);
            }
            Op::Delete(k, pick, invalidate, touch, new_cas) => {
                let key = key(k);
                let live = m.lookup(&key).ok().cloned();
                let opts = DeleteOpts {
                    compare_cas: pick.unique(live.as_ref()),
                    invalidate,
                    touch: touch.map(|t| abs(&m, t)),
                    new_cas,
                };
                let got = engine.delete(&key, &opts);
                match (live, got) {
                    (None, DeleteResult::NotFound) => {}
                    (Some(it), DeleteResult::Exists) if opts.compare_cas != Some(it.cas) => {}
                    (Some(it), DeleteResult::Deleted)
                        if !invalidate && opts.compare_cas.is_none_or(|c| c == it.cas) =>
                    {
                        m.map.remove(&key);
                    }
                    (Some(it), DeleteResult::Invalidated(cas))
                        if invalidate && opts.compare_cas.is_none_or(|c| c == it.cas) =>
                    {
                        prop_assert!(ordered(&mut past, &key, cas, new_cas), "step {}", step);
                        let it = m.map.get_mut(&key).expect("live");
                        it.cas = cas;
                        it.stale = true;
                        it.token_sent = false;
                        if let Some(t) = opts.touch {
                            it.exptime = t;
                        }
                    }
                    (live, got) => {
                        prop_assert!(
                            false,
                            "step {step}: delete {opts:?} got {got:?}, model {live:?}"
                        )
                    }
                }
            }
            Op::Delta(k, incr, d, pick, vivify, touch, new_cas) => {
                let key = key(k);
                let live = m.lookup(&key).ok().cloned();
                let opts = DeltaOpts {
                    compare_cas: pick.unique(live.as_ref()),
                    vivify: vivify.map(|(initial, t)| Vivify {
                        initial,
                        exptime: abs(&m, t),
                    }),
                    touch: touch.map(|t| abs(&m, t)),
                    new_cas,
                };
                let got = engine.delta(&key, incr, d, &opts);
                match live {
                    None => match opts.vivify {
                        None => prop_assert_eq!(got, Delta::NotFound, "step {}", step),
                        Some(v) => {
                            let Delta::Value(c) = got else {
                                return Err(TestCaseError::fail(format!("step {step}: {got:?}")));
                            };
                            prop_assert!(ordered(&mut past, &key, c.cas, new_cas), "step {}", step);
                            prop_assert_eq!((c.value, c.exptime, c.created), (v.initial, 0, true));
                            let mut it =
                                Item::new(v.initial.to_string().into_bytes(), 0, v.exptime, now);
                            it.cas = c.cas;
                            m.map.insert(key, it);
                        }
                    },
                    Some(old) => {
                        let cmp = opts.compare_cas.filter(|&c| c != 0);
                        if old.value.is_empty() {
                            prop_assert_eq!(got, Delta::NonNumeric, "step {}", step);
                        } else if cmp.is_some_and(|c| c != old.cas) {
                            prop_assert_eq!(got, Delta::Exists, "step {}", step);
                        } else {
                            match apply_delta(&old.value, incr, d) {
                                None => prop_assert_eq!(got, Delta::NonNumeric, "step {}", step),
                                Some((n, bytes)) => {
                                    let Delta::Value(c) = got else {
                                        return Err(TestCaseError::fail(format!(
                                            "step {step}: {got:?}"
                                        )));
                                    };
                                    prop_assert!(
                                        ordered(&mut past, &key, c.cas, new_cas),
                                        "step {}",
                                        step
                                    );
                                    prop_assert_eq!(
                                        (c.value, c.exptime, c.created),
                                        (n, old.exptime, false)
                                    );
                                    let in_place = bytes.len() == old.value.len();
                                    let exptime = opts.touch.unwrap_or(old.exptime);
                                    let it = if in_place {
                                        Item {
                                            value: bytes,
                                            cas: c.cas,
                                            time: now,
                                            exptime,
                                            ..old
                                        }
                                    } else {
                                        let mut it = Item::new(bytes, old.flags, exptime, now);
                                        it.cas = c.cas;
                                        it
                                    };
                                    m.map.insert(key, it);
                                }
                            }
                        }
                    }
                }
            }
            Op::FlushNow => {
                engine.flush_all(None);
                m.map.values_mut().for_each(|it| it.flushed = true);
                m.oldest_live = m.now.saturating_sub(1);
            }
            Op::FlushIn(d) => {
                engine.flush_all(Some(m.now + d));
                m.oldest_live = m.now + d - 1;
                // A flush already due when issued is final, like an immediate one.
                if m.oldest_live <= m.now {
                    m.map.values_mut().for_each(|it| it.flushed = true);
                }
            }
            Op::Advance(s) => {
                m.now += s;
                clock.set(m.now);
            }
        }
    }
    check_walk(engine.as_ref(), &m)
}

/// A walk, resumed after every item, shows exactly the model's live items, each
/// once, as they are (and changes nothing: the model is not touched).
fn check_walk(engine: &dyn Engine, m: &Model) -> Result<(), TestCaseError> {
    type Shown = (Vec<u8>, u32, u32, u64, u32, bool);
    let mut shown: Vec<Shown> = Vec::new();
    let mut cursor = WalkCursor::default();
    let mut calls = 0;
    while !cursor.is_done() {
        calls += 1;
        prop_assert!(calls < 10_000, "the walk does not end");
        engine.walk(&mut cursor, &mut |w| {
            shown.push((
                w.key.to_vec(),
                w.flags,
                w.exptime,
                w.cas,
                w.atime,
                w.fetched,
            ));
            false
        });
    }
    shown.sort();
    let mut want: Vec<Shown> = m
        .map
        .iter()
        .filter(|(_, it)| m.dead(it).is_none())
        .map(|(k, it)| (k.clone(), it.flags, it.exptime, it.cas, it.time, it.fetched))
        .collect();
    want.sort();
    prop_assert_eq!(shown, want);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn reference_engine_matches_model(ops in prop::collection::vec(op(true), 1..80)) {
        check(ops, reference)?;
    }

    /// Explicit CAS uniques (meta `E`), without flushes.
    #[test]
    fn reference_engine_matches_model_explicit_cas(ops in prop::collection::vec(op(false), 1..80)) {
        check(ops, reference)?;
    }

    #[test]
    fn seg_engine_matches_model(ops in prop::collection::vec(op(true), 1..80)) {
        check(ops, seg)?;
    }

    #[test]
    fn seg_engine_matches_model_explicit_cas(ops in prop::collection::vec(op(false), 1..80)) {
        check(ops, seg)?;
    }
}

/// Under a tiny limit, with several threads writing, memory never exceeds the limit
/// and every get returns a miss or a value that was written for that key.
#[test]
fn eviction_invariants_under_concurrency_reference() {
    eviction_invariants(reference, 256 * 1024);
}

/// The segment engine with 64 KiB segments: 4 of them for 4 threads at once.
#[test]
fn eviction_invariants_under_concurrency_seg() {
    eviction_invariants(seg, 1024 * 1024);
}

fn eviction_invariants(make: Make, limit: u64) {
    let clock = Arc::new(Clock::new());
    let engine = make(
        Config {
            limit_bytes: limit,
            evict: true,
            use_cas: true,
            item_size_max: 0,
            hash_seed: None,
        },
        clock,
    );
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let e = Arc::clone(&engine);
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    let k = format!("k{}", (i * 7 + t) % 5000);
                    // The value names its key, so a get can check it belongs there.
                    let v = format!("{k}:{}", "x".repeat((i % 300) as usize));
                    assert!(matches!(
                        e.store(
                            Mode::Set,
                            k.as_bytes(),
                            0,
                            0,
                            v.as_bytes(),
                            &StoreOpts::default()
                        ),
                        StoreResult::Stored(_)
                    ));
                    let mut ok = true;
                    e.get(k.as_bytes(), &GetOpts::default(), &mut |it| {
                        ok = it.value.starts_with(format!("{k}:").as_bytes());
                        false
                    });
                    assert!(ok, "a get returned another key's value");
                    let used = e.stats().bytes;
                    // Reservations in flight may overshoot by at most one item per thread.
                    assert!(used <= limit + 4 * 1024, "used {used} > limit {limit}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let st = engine.stats();
    assert!(st.evictions > 0);
    assert!(st.bytes <= limit);
}

/// Many threads vivify the same missing keys at once: each key is created exactly
/// once, and exactly one visitor per key sees the item without a token (and takes
/// it), as memcached's item lock guarantees for `mg N`.
#[test]
fn vivify_race_creates_once_and_hands_out_one_token() {
    let clock = Arc::new(Clock::new());
    let engine = Arc::new(Reference::new(Config::default(), 12, clock));
    let keys = 200u32;
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let e = Arc::clone(&engine);
            std::thread::spawn(move || {
                let mut created = 0u32;
                let mut won = 0u32;
                for k in 0..keys {
                    let key = format!("viv{k}");
                    let opts = GetOpts {
                        vivify: Some(0),
                        ..GetOpts::default()
                    };
                    let got = e.get(key.as_bytes(), &opts, &mut |it| {
                        created += u32::from(it.created);
                        let win = !it.token_sent;
                        won += u32::from(win);
                        win
                    });
                    assert_eq!(got, Fetch::Hit);
                }
                (created, won)
            })
        })
        .collect();
    let (mut created, mut won) = (0, 0);
    for t in threads {
        let (c, w) = t.join().expect("thread");
        created += c;
        won += w;
    }
    assert_eq!((created, won), (keys, keys));
    assert_eq!(engine.stats().curr_items, u64::from(keys));
}
