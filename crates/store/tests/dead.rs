//! What a write's lookup met ([`Met`]): every storage mode, delete and incr/decr that
//! finds its key's item expired or flushed reports it once (memcached counts it as
//! `get_expired`/`get_flushed` in `do_item_get`, whatever the command), then treats
//! the key as missing; a vivifying lookup reports it on the item it created
//! ([`Item::replaced`]). Both engines, each kind of dead item.

use std::sync::Arc;

use memcrab_store::reference::Reference;
use memcrab_store::seg::Seg;
use memcrab_store::{
    Clock, Config, Dead, DeleteOpts, DeleteResult, Delta, DeltaOpts, Engine, Fetch, GetOpts, Met,
    Mode, StoreOpts, StoreResult, Vivify,
};

/// One write on a key, as a result both engines can compare.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Store(StoreResult),
    Delete(DeleteResult),
    /// `Some(created)` for a value, else the result.
    Delta(Result<bool, Delta>),
}

type Op = fn(&dyn Engine, &[u8]) -> Met<Answer>;

fn store(e: &dyn Engine, key: &[u8], mode: Mode, opts: StoreOpts) -> Met<Answer> {
    let Met { result, dead } = e.store_met(mode, key, 0, 0, b"v", &opts);
    let result = match result {
        StoreResult::Stored(_) => StoreResult::Stored(0),
        r => r,
    };
    Met {
        result: Answer::Store(result),
        dead,
    }
}

fn delete(e: &dyn Engine, key: &[u8], opts: DeleteOpts) -> Met<Answer> {
    let Met { result, dead } = e.delete_met(key, &opts);
    Met {
        result: Answer::Delete(result),
        dead,
    }
}

fn delta(e: &dyn Engine, key: &[u8], opts: DeltaOpts) -> Met<Answer> {
    let Met { result, dead } = e.delta_met(key, true, 1, &opts);
    let result = match result {
        Delta::Value(c) => Ok(c.created),
        r => Err(r),
    };
    Met {
        result: Answer::Delta(result),
        dead,
    }
}

/// Each write and what it answers on a key whose item is dead.
fn rows() -> Vec<(&'static str, Op, Answer)> {
    use Answer::{Delete as D, Store as S};
    vec![
        (
            "set",
            |e, k| store(e, k, Mode::Set, StoreOpts::default()),
            S(StoreResult::Stored(0)),
        ),
        (
            "add",
            |e, k| store(e, k, Mode::Add, StoreOpts::default()),
            S(StoreResult::Stored(0)),
        ),
        (
            "replace",
            |e, k| store(e, k, Mode::Replace, StoreOpts::default()),
            S(StoreResult::NotStored),
        ),
        (
            "append",
            |e, k| store(e, k, Mode::Append, StoreOpts::default()),
            S(StoreResult::NotStored),
        ),
        (
            "prepend",
            |e, k| store(e, k, Mode::Prepend, StoreOpts::default()),
            S(StoreResult::NotStored),
        ),
        (
            "cas",
            |e, k| store(e, k, Mode::Cas(5), StoreOpts::default()),
            S(StoreResult::NotFound),
        ),
        (
            "set with compare_cas",
            |e, k| {
                let opts = StoreOpts {
                    compare_cas: Some(5),
                    ..StoreOpts::default()
                };
                store(e, k, Mode::Set, opts)
            },
            S(StoreResult::NotFound),
        ),
        (
            "append with vivify",
            |e, k| {
                let opts = StoreOpts {
                    vivify: Some(0),
                    ..StoreOpts::default()
                };
                store(e, k, Mode::Append, opts)
            },
            S(StoreResult::Stored(0)),
        ),
        (
            "delete",
            |e, k| delete(e, k, DeleteOpts::default()),
            D(DeleteResult::NotFound),
        ),
        (
            "delete with compare_cas",
            |e, k| {
                delete(
                    e,
                    k,
                    DeleteOpts {
                        compare_cas: Some(5),
                        ..DeleteOpts::default()
                    },
                )
            },
            D(DeleteResult::NotFound),
        ),
        (
            "delete with invalidate",
            |e, k| {
                delete(
                    e,
                    k,
                    DeleteOpts {
                        invalidate: true,
                        ..DeleteOpts::default()
                    },
                )
            },
            D(DeleteResult::NotFound),
        ),
        (
            "incr",
            |e, k| delta(e, k, DeltaOpts::default()),
            Answer::Delta(Err(Delta::NotFound)),
        ),
        (
            "incr with compare_cas",
            |e, k| {
                delta(
                    e,
                    k,
                    DeltaOpts {
                        compare_cas: Some(5),
                        ..DeltaOpts::default()
                    },
                )
            },
            Answer::Delta(Err(Delta::NotFound)),
        ),
        (
            "incr with vivify",
            |e, k| {
                let vivify = Some(Vivify {
                    initial: 3,
                    exptime: 0,
                });
                delta(
                    e,
                    k,
                    DeltaOpts {
                        vivify,
                        ..DeltaOpts::default()
                    },
                )
            },
            Answer::Delta(Ok(true)),
        ),
    ]
}

/// How an item is made dead: stored at 100 and then expired (exptime 101) or
/// flushed (a `flush_all` due at 102, never swept: `maintain` is not called); the
/// clock then stands at 102.
fn kill(e: &dyn Engine, clock: &Clock, key: &[u8], kind: Dead) {
    clock.set(100);
    let exptime = if kind == Dead::Expired { 101 } else { 0 };
    let r = e.store(Mode::Set, key, 0, exptime, b"1", &StoreOpts::default());
    assert!(matches!(r, StoreResult::Stored(_)), "{r:?}");
    if kind == Dead::Flushed {
        e.flush_all(Some(102));
    }
    clock.set(102);
}

fn every_write_reports_the_dead_item_it_met(make: fn(Arc<Clock>) -> Arc<dyn Engine>) {
    for kind in [Dead::Expired, Dead::Flushed] {
        for (name, op, want) in rows() {
            let clock = Arc::new(Clock::new());
            let engine = make(Arc::clone(&clock));
            let e = engine.as_ref();
            kill(e, &clock, b"k", kind);
            let got = op(e, b"k");
            assert_eq!(got.result, want, "{name} on a {kind:?} item");
            assert_eq!(got.dead, Some(kind), "{name} on a {kind:?} item");
            // Met once: the item is gone, or the write replaced it.
            let again = e.delete_met(b"k", &DeleteOpts::default());
            assert_eq!(again.dead, None, "{name}, then delete: {kind:?} again");
            // A live key and a missing one meet nothing.
            e.store(Mode::Set, b"live", 0, 0, b"1", &StoreOpts::default());
            assert_eq!(op(e, b"live").dead, None, "{name} on a live item");
            assert_eq!(op(e, b"missing").dead, None, "{name} on a missing key");
        }
    }
}

fn lookups_report_the_dead_item(make: fn(Arc<Clock>) -> Arc<dyn Engine>) {
    for kind in [Dead::Expired, Dead::Flushed] {
        let clock = Arc::new(Clock::new());
        let engine = make(Arc::clone(&clock));
        let e = engine.as_ref();
        let want = if kind == Dead::Expired {
            Fetch::Expired
        } else {
            Fetch::Flushed
        };
        kill(e, &clock, b"k", kind);
        let mut replaced = None;
        assert_eq!(e.get(b"k", &GetOpts::default(), &mut |_| false), want);
        assert_eq!(
            e.get(b"k", &GetOpts::default(), &mut |_| false),
            Fetch::Miss
        );
        // A vivifying lookup shows the dead item on the item it creates.
        kill(e, &clock, b"v", kind);
        let opts = GetOpts {
            vivify: Some(0),
            ..GetOpts::default()
        };
        let found = e.get(b"v", &opts, &mut |it| {
            replaced = Some((it.created, it.replaced));
            false
        });
        assert_eq!(found, Fetch::Hit);
        assert_eq!(replaced, Some((true, Some(kind))), "{kind:?}");
        let found = e.get(b"v", &opts, &mut |it| {
            replaced = Some((it.created, it.replaced));
            false
        });
        assert_eq!(found, Fetch::Hit);
        assert_eq!(replaced, Some((false, None)), "{kind:?}");
    }
}

fn config() -> Config {
    Config {
        limit_bytes: 8 << 20,
        hash_seed: Some(7),
        ..Config::default()
    }
}

fn seg(clock: Arc<Clock>) -> Arc<dyn Engine> {
    Arc::new(Seg::new(config(), clock))
}

fn reference(clock: Arc<Clock>) -> Arc<dyn Engine> {
    Arc::new(Reference::new(config(), 8, clock))
}

#[test]
fn seg_writes_report_dead_items() {
    every_write_reports_the_dead_item_it_met(seg);
}

#[test]
fn reference_writes_report_dead_items() {
    every_write_reports_the_dead_item_it_met(reference);
}

#[test]
fn seg_lookups_report_dead_items() {
    lookups_report_the_dead_item(seg);
}

#[test]
fn reference_lookups_report_dead_items() {
    lookups_report_the_dead_item(reference);
}
