//! The eviction listener ([`Engine::set_eviction_listener`], the server's `watch
//! evictions`): both engines show it every eviction they count, once, with the
//! evicted item as it was, and nothing that was not evicted (expired items freed to
//! make room and deletes are not evictions).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memcrab_store::reference::Reference;
use memcrab_store::seg::Seg;
use memcrab_store::{
    Clock, Config, DeleteOpts, Engine, Evicted, EvictionListener, GetOpts, Mode, StoreOpts,
    StoreResult,
};

/// What the listener was shown: key → (value length, flags, exptime, fetched), and
/// how many times each key was shown.
#[derive(Default)]
struct Seen {
    items: HashMap<Vec<u8>, (usize, u32, u32, bool)>,
    times: HashMap<Vec<u8>, usize>,
}

#[derive(Default)]
struct Recorder(Mutex<Seen>);

impl EvictionListener for Recorder {
    fn evicted(&self, it: &Evicted<'_>) {
        let Ok(mut seen) = self.0.lock() else { return };
        seen.items.insert(
            it.key.to_vec(),
            (it.value_len, it.flags, it.exptime, it.fetched),
        );
        *seen.times.entry(it.key.to_vec()).or_default() += 1;
    }
}

#[test]
fn seg_reports_every_eviction() {
    reports_every_eviction(|cfg, clock| Arc::new(Seg::new(cfg, clock)));
}

#[test]
fn reference_reports_every_eviction() {
    reports_every_eviction(|cfg, clock| Arc::new(Reference::new(cfg, 12, clock)));
}

fn reports_every_eviction(make: fn(Config, Arc<Clock>) -> Arc<dyn Engine>) {
    let clock = Arc::new(Clock::new());
    clock.set(100);
    let cfg = Config {
        limit_bytes: 2 << 20,
        ..Config::default()
    };
    let e = make(cfg, Arc::clone(&clock));
    let rec = Arc::new(Recorder::default());
    assert!(e.set_eviction_listener(Arc::clone(&rec) as Arc<dyn EvictionListener>));
    // Set once only.
    assert!(!e.set_eviction_listener(Arc::new(Recorder::default())));

    let value_len = |i: usize| 200 + i % 300;
    let flags = |i: usize| (i % 3) as u32;
    let exptime = |i: usize| if i.is_multiple_of(2) { 0 } else { 100_000 };
    for i in 0..30_000 {
        let key = format!("key:{i}");
        let r = e.store(
            Mode::Set,
            key.as_bytes(),
            flags(i),
            exptime(i),
            &vec![b'v'; value_len(i)],
            &StoreOpts::default(),
        );
        assert!(matches!(r, StoreResult::Stored(_)), "{key}: {r:?}");
        if i.is_multiple_of(10) {
            // Fetched: the listener says so.
            e.get(key.as_bytes(), &GetOpts::default(), &mut |_| false);
        }
        if i.is_multiple_of(7) {
            // Deleted: not an eviction.
            e.delete(key.as_bytes(), &DeleteOpts::default());
        }
    }
    let stats = e.stats();
    assert!(stats.evictions > 1000, "no real eviction: {stats:?}");
    let seen = rec.0.lock().expect("listener lock");
    let shown: usize = seen.times.values().sum();
    assert_eq!(shown as u64, stats.evictions, "one report per eviction");
    for (key, &n) in &seen.times {
        assert_eq!(n, 1, "{} reported {n} times", String::from_utf8_lossy(key));
    }
    for (key, &(len, fl, exp, fetched)) in &seen.items {
        let text = String::from_utf8_lossy(key);
        let i: usize = text
            .strip_prefix("key:")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unknown key {text}"));
        assert_ne!(i % 7, 0, "{text} was deleted, not evicted");
        assert_eq!(
            (len, fl, exp),
            (value_len(i), flags(i), exptime(i)),
            "{text}"
        );
        // An item read since it was stored says so (the segment engine may have
        // given it a second chance first, so the other way round is not checked).
        if fetched {
            assert_eq!(i % 10, 0, "{text} was never fetched");
        }
        let found = e.get(key, &GetOpts::default(), &mut |_| false);
        assert!(
            !found.is_hit(),
            "{text} was reported evicted but is still there"
        );
    }
}
