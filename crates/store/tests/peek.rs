//! [`Engine::peek`], the lookup `watch fetchers` makes for a write's own lookup: it
//! says what [`Engine::get`] would find and changes nothing. A live item is shown
//! but not bumped (its `fetched` bit and `atime` stay); a dead item is reported as
//! expired or flushed but left in place, so the write after it still meets it (and
//! counts it). Both engines.

use std::sync::Arc;

use memcrab_store::reference::Reference;
use memcrab_store::seg::Seg;
use memcrab_store::{
    Clock, Config, Dead, DeleteOpts, Engine, Fetch, GetOpts, Mode, StoreOpts, StoreResult,
};

/// What a peek shows of a live item: value, flags, fetched, atime.
type Shown = (Vec<u8>, u32, bool, u32);

/// What a peek showed: the result and, on a hit, the item.
fn peek(e: &dyn Engine, key: &[u8]) -> (Fetch, Option<Shown>) {
    let mut seen = None;
    let found = e.peek(key, &mut |it| {
        seen = Some((it.value.to_vec(), it.flags, it.fetched, it.atime));
    });
    (found, seen)
}

fn set(e: &dyn Engine, key: &[u8], exptime: u32) {
    let r = e.store(Mode::Set, key, 3, exptime, b"val", &StoreOpts::default());
    assert!(matches!(r, StoreResult::Stored(_)), "{r:?}");
}

fn live_items_are_shown_and_not_bumped(make: fn(Arc<Clock>) -> Arc<dyn Engine>) {
    let clock = Arc::new(Clock::new());
    let engine = make(Arc::clone(&clock));
    let e = engine.as_ref();
    assert_eq!(peek(e, b"k"), (Fetch::Miss, None));
    clock.set(100);
    set(e, b"k", 0);
    clock.set(110);
    let shown = Some((b"val".to_vec(), 3, false, 100));
    assert_eq!(peek(e, b"k"), (Fetch::Hit, shown.clone()));
    // Neither fetched nor given a new atime: a second peek shows the same.
    assert_eq!(peek(e, b"k"), (Fetch::Hit, shown));
    // Once fetched, a second fetch would move the atime; a peek still moves nothing.
    e.get(b"k", &GetOpts::default(), &mut |_| false);
    clock.set(120);
    assert_eq!(
        peek(e, b"k"),
        (Fetch::Hit, Some((b"val".to_vec(), 3, true, 100)))
    );
    let mut atime = 0;
    let no_bump = GetOpts {
        no_bump: true,
        ..GetOpts::default()
    };
    e.get(b"k", &no_bump, &mut |it| {
        atime = it.atime;
        false
    });
    assert_eq!(atime, 100, "the peeks moved the atime");
}

fn dead_items_are_reported_and_left(make: fn(Arc<Clock>) -> Arc<dyn Engine>) {
    for kind in [Dead::Expired, Dead::Flushed] {
        let clock = Arc::new(Clock::new());
        let engine = make(Arc::clone(&clock));
        let e = engine.as_ref();
        clock.set(100);
        set(e, b"k", if kind == Dead::Expired { 101 } else { 0 });
        if kind == Dead::Flushed {
            e.flush_all(Some(102));
        }
        clock.set(102);
        let want = match kind {
            Dead::Expired => Fetch::Expired,
            Dead::Flushed => Fetch::Flushed,
        };
        assert_eq!(peek(e, b"k"), (want, None), "{kind:?}");
        assert_eq!(peek(e, b"k"), (want, None), "{kind:?}, again");
        assert_eq!(e.stats().curr_items, 1, "{kind:?}: the peek unlinked it");
        // The write after the peek still meets the dead item.
        let met = e.delete_met(b"k", &DeleteOpts::default());
        assert_eq!(met.dead, Some(kind));
        assert_eq!(peek(e, b"k"), (Fetch::Miss, None));
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
fn seg_peeks_change_nothing() {
    live_items_are_shown_and_not_bumped(seg);
    dead_items_are_reported_and_left(seg);
}

#[test]
fn reference_peeks_change_nothing() {
    live_items_are_shown_and_not_bumped(reference);
    dead_items_are_reported_and_left(reference);
}
