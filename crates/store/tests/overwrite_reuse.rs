//! Compaction keeps an overwrite-heavy load near its live data instead of growing to
//! `-m`. This binary must hold this one test and nothing else.
//!
//! Why a binary of its own: the epoch registry (`seg/epoch.rs`) is process-wide, so a
//! reader pinned by any thread in the process, for any engine, keeps this engine's
//! retired segments in limbo. `take_segment` compacts only while fewer than two
//! segments are free or in limbo and never waits for readers, so while limbo is held
//! it takes fresh memory instead (it may: the limit is 64 MiB). As a unit test it
//! shared the process with tests that pin (the index test holds a pin over 50,000
//! lookups, the concurrent readers pin constantly) and failed about 1 run in 10 with
//! 8–18 MB; alone, a single thread that is never pinned while it stores, it always
//! reuses the segments it compacted, so the bound below is deterministic.

use std::sync::Arc;

use memcrab_store::seg::Seg;
use memcrab_store::{Clock, Config, Engine, GetOpts, Mode, StoreOpts, StoreResult};

fn get(e: &Seg, key: &[u8]) -> Option<Vec<u8>> {
    let mut out = None;
    e.get(key, &GetOpts::default(), &mut |it| {
        out = Some(it.value.to_vec());
        false
    });
    out
}

#[test]
fn overwrites_reuse_mostly_dead_segments_instead_of_growing() {
    // 1000 keys of 1000 B (1 MB live) overwritten 50 times over under a 64 MiB
    // limit: the arena compacts mostly dead segments instead of touching 50 MB of
    // fresh memory, and nothing live is evicted.
    let clock = Arc::new(Clock::new());
    clock.set(100);
    let cfg = Config {
        limit_bytes: 64 << 20,
        evict: true,
        use_cas: true,
        item_size_max: 1024 * 1024,
        hash_seed: None,
    };
    let e = Seg::new(cfg, clock);
    let mut last = vec![0u32; 1000];
    let mut x = 0x9e37_79b9u32;
    for n in 0..50_000u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let k = (x % 1000) as usize;
        last[k] = n;
        let mut v = n.to_le_bytes().to_vec();
        v.resize(1000, b'v');
        assert!(matches!(
            e.store(
                Mode::Set,
                format!("k{k}").as_bytes(),
                0,
                0,
                &v,
                &StoreOpts::default()
            ),
            StoreResult::Stored(_)
        ));
    }
    let st = e.stats();
    assert_eq!(st.evictions, 0);
    assert!(
        st.segments.compacted > 10,
        "compacted {}",
        st.segments.compacted
    );
    assert!(
        st.segments.memory_bytes <= 8 << 20,
        "grew to {} bytes for 1 MB of live data",
        st.segments.memory_bytes
    );
    for (k, &n) in last.iter().enumerate() {
        let Some(v) = get(&e, format!("k{k}").as_bytes()) else {
            panic!("k{k} lost");
        };
        assert_eq!(v[..4], n.to_le_bytes(), "k{k} is not its last value");
    }
    assert_eq!(st.curr_items, 1000);
}
