//! Property tests: random operation sequences against the reference engine and a plain
//! map model of memcached's semantics, comparing every result. Time is driven by hand.

use std::collections::HashMap;
use std::sync::Arc;

use memcrab_store::reference::Reference;
use memcrab_store::{apply_delta, Clock, Config, Delta, Engine, Fetch, Mode, StoreResult};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Item {
    value: Vec<u8>,
    flags: u32,
    exptime: u32,
    cas: u64,
    time: u32,
    /// Invalidated by a flush_all that was due when issued (the engine reports such
    /// keys as flushed until its `maintain` frees them, which this test never calls).
    flushed: bool,
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
    /// Finds a live item, dropping a dead one and saying why it was dead.
    fn lookup(&mut self, key: &[u8]) -> Result<&mut Item, Fetch> {
        let why = match self.map.get(key) {
            None => return Err(Fetch::Miss),
            Some(it) if it.flushed => Some(Fetch::Flushed),
            Some(it)
                if self.oldest_live != 0
                    && self.oldest_live <= self.now
                    && it.time <= self.oldest_live =>
            {
                Some(Fetch::Flushed)
            }
            Some(it) if it.exptime != 0 && it.exptime <= self.now => Some(Fetch::Expired),
            Some(_) => None,
        };
        if let Some(why) = why {
            self.map.remove(key);
            return Err(why);
        }
        self.map.get_mut(key).ok_or(Fetch::Miss)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Store(Mode, u8, u32, u32, Vec<u8>),
    /// CAS with the model's current unique (`true`) or a wrong one.
    Cas(u8, bool, Vec<u8>),
    Get(u8),
    Gat(u8, u32),
    Touch(u8, u32),
    Delete(u8),
    Delta(u8, bool, u64),
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

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..6;
    let exp = prop_oneof![Just(0u32), 1u32..6];
    prop_oneof![
        4 => (
            prop_oneof![Just(Mode::Set), Just(Mode::Add), Just(Mode::Replace), Just(Mode::Append), Just(Mode::Prepend)],
            k.clone(), any::<u32>(), exp.clone(), value()
        ).prop_map(|(m, k, f, e, v)| Op::Store(m, k, f, e, v)),
        1 => (k.clone(), any::<bool>(), value()).prop_map(|(k, ok, v)| Op::Cas(k, ok, v)),
        4 => k.clone().prop_map(Op::Get),
        1 => (k.clone(), exp.clone()).prop_map(|(k, e)| Op::Gat(k, e)),
        1 => (k.clone(), exp.clone()).prop_map(|(k, e)| Op::Touch(k, e)),
        1 => k.clone().prop_map(Op::Delete),
        2 => (k.clone(), any::<bool>(), prop_oneof![0u64..20, Just(u64::MAX)]).prop_map(|(k, i, d)| Op::Delta(k, i, d)),
        1 => Just(Op::FlushNow),
        1 => (1u32..4).prop_map(Op::FlushIn),
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

fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = Arc::new(Clock::new());
    clock.set(10);
    let engine = Reference::new(
        Config {
            limit_bytes: 1 << 30,
            evict: true,
            use_cas: true,
            item_size_max: 0,
        },
        12,
        Arc::clone(&clock),
    );
    let mut m = Model {
        now: 10,
        ..Model::default()
    };
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Store(mode, k, flags, e, v) => {
                let key = key(k);
                let exptime = abs(&m, e);
                let got = engine.store(mode, &key, flags, exptime, &v);
                let live = m.lookup(&key).ok().cloned();
                let want_stored = match (mode, &live) {
                    (Mode::Set, _) => Some(Item {
                        value: v.clone(),
                        flags,
                        exptime,
                        cas: 0,
                        time: m.now,
                        flushed: false,
                    }),
                    (Mode::Add, None) => Some(Item {
                        value: v.clone(),
                        flags,
                        exptime,
                        cas: 0,
                        time: m.now,
                        flushed: false,
                    }),
                    (Mode::Replace, Some(_)) => Some(Item {
                        value: v.clone(),
                        flags,
                        exptime,
                        cas: 0,
                        time: m.now,
                        flushed: false,
                    }),
                    (Mode::Append, Some(old)) => Some(Item {
                        value: [old.value.as_slice(), &v].concat(),
                        time: m.now,
                        ..old.clone()
                    }),
                    (Mode::Prepend, Some(old)) => Some(Item {
                        value: [v.as_slice(), &old.value].concat(),
                        time: m.now,
                        ..old.clone()
                    }),
                    _ => None,
                };
                match (got, want_stored) {
                    (StoreResult::Stored(cas), Some(mut it)) => {
                        prop_assert!(cas != 0, "step {step}: zero cas");
                        it.cas = cas;
                        m.map.insert(key, it);
                    }
                    (StoreResult::NotStored, None) => {}
                    (got, want) => {
                        prop_assert!(false, "step {step}: {mode:?} got {got:?}, model {want:?}")
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
                let got = engine.store(Mode::Cas(unique), &key, 7, 0, &v);
                match (got, live, right) {
                    (StoreResult::NotFound, None, _) => {}
                    (StoreResult::Exists, Some(_), false) => {}
                    (StoreResult::Stored(cas), Some(_), true) => {
                        prop_assert_ne!(cas, unique, "step {}: cas unchanged", step);
                        m.map.insert(
                            key,
                            Item {
                                value: v,
                                flags: 7,
                                exptime: 0,
                                cas,
                                time: m.now,
                                flushed: false,
                            },
                        );
                    }
                    (got, live, right) => prop_assert!(
                        false,
                        "step {step}: cas got {got:?}, model {live:?} right={right}"
                    ),
                }
            }
            Op::Get(k) | Op::Gat(k, _) => {
                let key = key(k);
                let touch = match op {
                    Op::Gat(_, e) => Some(abs(&m, e)),
                    _ => None,
                };
                let mut seen = None;
                let got = engine.get(&key, touch, &mut |it| {
                    seen = Some((it.value.to_vec(), it.flags, it.cas))
                });
                match m.lookup(&key) {
                    Ok(it) => {
                        if let Some(t) = touch {
                            it.exptime = t;
                        }
                        prop_assert_eq!(got, Fetch::Hit, "step {}", step);
                        prop_assert_eq!(
                            seen,
                            Some((it.value.clone(), it.flags, it.cas)),
                            "step {}",
                            step
                        );
                    }
                    Err(why) => {
                        prop_assert_eq!(got, why, "step {}", step);
                        prop_assert!(seen.is_none());
                    }
                }
            }
            Op::Touch(k, e) => {
                let key = key(k);
                let t = abs(&m, e);
                let got = engine.touch(&key, t);
                let want = match m.lookup(&key) {
                    Ok(it) => {
                        it.exptime = t;
                        true
                    }
                    Err(_) => false,
                };
                prop_assert_eq!(got, want, "step {}", step);
            }
            Op::Delete(k) => {
                let key = key(k);
                let got = engine.delete(&key);
                let want = m.lookup(&key).is_ok();
                m.map.remove(&key);
                prop_assert_eq!(got, want, "step {}", step);
            }
            Op::Delta(k, incr, d) => {
                let key = key(k);
                let got = engine.delta(&key, incr, d);
                let now = m.now;
                let want = match m.lookup(&key) {
                    Err(_) => Delta::NotFound,
                    Ok(it) => match apply_delta(&it.value, incr, d) {
                        None => Delta::NonNumeric,
                        Some((n, bytes)) => {
                            it.value = bytes;
                            it.time = now;
                            Delta::Value(n)
                        }
                    },
                };
                prop_assert_eq!(got, want, "step {}", step);
                if let Delta::Value(_) = got {
                    // The engine assigns a new CAS; learn it through a get.
                    let mut cas = 0;
                    engine.get(&key, None, &mut |it| cas = it.cas);
                    if let Some(it) = m.map.get_mut(&key) {
                        prop_assert_ne!(cas, it.cas, "step {}: incr kept the cas", step);
                        it.cas = cas;
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
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn reference_engine_matches_model(ops in prop::collection::vec(op(), 1..80)) {
        check(ops)?;
    }
}

/// Under a tiny limit, with several threads writing, memory never exceeds the limit
/// and every get returns a miss or a value that was written for that key.
#[test]
fn eviction_invariants_under_concurrency() {
    let limit: u64 = 256 * 1024;
    let clock = Arc::new(Clock::new());
    let engine = Arc::new(Reference::new(
        Config {
            limit_bytes: limit,
            evict: true,
            use_cas: true,
            item_size_max: 0,
        },
        12,
        clock,
    ));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let e = Arc::clone(&engine);
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    let k = format!("k{}", (i * 7 + t) % 5000);
                    // The value names its key, so a get can check it belongs there.
                    let v = format!("{k}:{}", "x".repeat((i % 300) as usize));
                    assert!(matches!(
                        e.store(Mode::Set, k.as_bytes(), 0, 0, v.as_bytes()),
                        StoreResult::Stored(_)
                    ));
                    let mut ok = true;
                    e.get(k.as_bytes(), None, &mut |it| {
                        ok = it.value.starts_with(format!("{k}:").as_bytes())
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
