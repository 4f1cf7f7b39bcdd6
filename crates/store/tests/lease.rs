//! Leases (`Item::lend`, `seg/lease.rs`): a lent value stays intact while its segment
//! is evicted, compacted and its neighbours overwritten; the segment is reused once
//! the lease drops; live lent segments lend freely up to half of `-m`, held ones
//! up to a sixteenth, past which `lend` refuses and eviction charges them against
//! `-m`; no writer ever waits for a lease.
//!
//! A binary of its own, like tests/overwrite_reuse.rs: the epoch registry is
//! process-wide, and these tests assert when retired segments come back.

use std::sync::Arc;

use memcrab_store::reference::Reference;
use memcrab_store::seg::Seg;
use memcrab_store::{Clock, Config, Engine, GetOpts, Lease, Mode, StoreOpts, StoreResult};

fn config(limit: u64) -> Config {
    Config {
        limit_bytes: limit,
        evict: true,
        use_cas: true,
        item_size_max: 1024 * 1024,
        hash_seed: None,
    }
}

fn engine(limit: u64) -> Seg {
    let clock = Arc::new(Clock::new());
    clock.set(100);
    Seg::new(config(limit), clock)
}

/// A self-checking value: `key:version:` repeated to `len` bytes.
fn value(key: &str, version: u32, len: usize) -> Vec<u8> {
    let unit = format!("{key}:{version}:");
    unit.bytes().cycle().take(len).collect()
}

fn set(e: &dyn Engine, key: &str, v: &[u8]) {
    let r = e.store(Mode::Set, key.as_bytes(), 0, 0, v, &StoreOpts::default());
    assert!(matches!(r, StoreResult::Stored(_)), "set {key}: {r:?}");
}

/// Looks `key` up and lends its value: (the lease, whether the engine lent).
fn lend(e: &dyn Engine, key: &str) -> Option<Option<Lease>> {
    let mut out = None;
    e.get(key.as_bytes(), &GetOpts::default(), &mut |it| {
        out = Some(it.lend());
        false
    });
    out
}

#[test]
fn a_lent_value_outlives_eviction_compaction_and_reuse() {
    // -m 4 MiB: 64 KiB segments. One thread holds leases and writes 40 times -m,
    // evicting everything many times over (it would deadlock if a writer waited).
    let e = engine(4 << 20);
    let lent_keys: Vec<String> = (0..3).map(|i| format!("lent{i}")).collect();
    for k in &lent_keys {
        set(&e, k, &value(k, 0, 9000));
    }
    let leases: Vec<Lease> = lent_keys
        .iter()
        .map(|k| lend(&e, k).expect("hit").expect("lent"))
        .collect();
    for round in 1..=40u32 {
        // Overwrite the lent keys (their old items die: compaction's food), and
        // fill the rest of -m with fresh keys (eviction's).
        for k in &lent_keys {
            set(&e, k, &value(k, round, 9000));
        }
        for i in 0..100 {
            let k = format!("fill{round}-{i}");
            set(&e, &k, &value(&k, round, 1000));
        }
        for i in 0..200 {
            let k = format!("hot{i}");
            set(&e, &k, &value(&k, round, 100));
        }
    }
    let st = e.stats();
    assert!(st.evictions > 1000, "evicted {}", st.evictions);
    for (k, l) in lent_keys.iter().zip(&leases) {
        assert_eq!(&l[..], &value(k, 0, 9000)[..], "lease of {k} torn");
    }
    assert!(st.segments.held_segments >= 1, "{:?}", st.segments);
    assert!(st.segments.held_bytes <= 3 * st.segments.segment_bytes);
    assert!(
        st.segments.memory_bytes <= (4 << 20) + st.segments.held_bytes,
        "{:?}",
        st.segments
    );
    assert!(st.segments.lent_bytes > 0);
    drop(leases);
    // The held segments come back: the next segment a writer takes reclaims them.
    for i in 0..2000 {
        let k = format!("after{i}");
        set(&e, &k, &value(&k, 0, 1000));
    }
    let st = e.stats();
    assert_eq!(st.segments.held_segments, 0, "{:?}", st.segments);
    assert_eq!(st.segments.held_bytes, 0);
    assert_eq!(st.segments.lent_bytes, 0);
    assert!(st.segments.memory_bytes <= 4 << 20, "{:?}", st.segments);
    // And what was stored reads back.
    let now = lend(&e, "lent0").expect("hit").expect("lent");
    assert_eq!(&now[..], &value("lent0", 40, 9000)[..]);
}

#[test]
fn a_large_items_own_segment_is_held_then_freed() {
    // 100 KB items get a segment of their own; evicted while lent, the memory is
    // held and given back when the lease drops.
    let e = engine(4 << 20);
    set(&e, "big", &value("big", 0, 100_000));
    let l = lend(&e, "big").expect("hit").expect("lent");
    for i in 0..200 {
        let k = format!("big{i}");
        set(&e, &k, &value(&k, 1, 100_000));
    }
    assert_eq!(&l[..], &value("big", 0, 100_000)[..]);
    let st = e.stats();
    assert_eq!(st.segments.held_segments, 1, "{:?}", st.segments);
    drop(l);
    set(&e, "again", &value("again", 0, 100_000));
    let st = e.stats();
    assert_eq!(st.segments.held_segments, 0, "{:?}", st.segments);
    assert!(st.segments.memory_bytes <= 4 << 20);
}

#[test]
fn live_segments_lend_up_to_half_the_limit() {
    // -m 4 MiB: 64 KiB segments. Lent segments still in the cache cost nothing
    // beyond -m, so all of 60 10 KB values (ten segments, 640 KiB, more than the
    // sixteenth that held segments may take) are lent.
    let e = engine(4 << 20);
    let keys: Vec<String> = (0..60).map(|i| format!("k{i}")).collect();
    for k in &keys {
        set(&e, k, &value(k, 0, 10_000));
    }
    let held: Vec<Lease> = keys
        .iter()
        .map(|k| lend(&e, k).expect("hit").expect("a live segment lends"))
        .collect();
    let lent = e.stats().segments.lent_bytes;
    assert!(lent >= 10 * (64 << 10), "{lent} bytes lent");
    drop(held);
    assert_eq!(e.stats().segments.lent_bytes, 0);

    // Half of -m (2 MiB, 32 segments) is where lent segments stop taking new
    // leases: lending 240 values (40 segments) stops within 33 segments.
    let keys: Vec<String> = (0..240).map(|i| format!("m{i}")).collect();
    for k in &keys {
        set(&e, k, &value(k, 0, 10_000));
    }
    let mut held = Vec::new();
    let mut refused = 0;
    for k in &keys {
        match lend(&e, k).expect("hit") {
            Some(l) => held.push(l),
            None => refused += 1,
        }
    }
    let lent = e.stats().segments.lent_bytes;
    assert!(refused > 0, "nothing refused, {lent} bytes lent");
    assert!(
        ((2 << 20)..=((2 << 20) + (64 << 10))).contains(&lent),
        "{lent} bytes lent"
    );
    // Over the bound, a segment that already has a lease still lends (it holds
    // nothing more back), and the lent bytes do not move.
    let again = lend(&e, &keys[0])
        .expect("hit")
        .expect("an already lent segment lends");
    assert_eq!(e.stats().segments.lent_bytes, lent);
    assert!(
        lend(&e, &keys[239]).expect("hit").is_none(),
        "a new segment is refused"
    );
    drop(again);
    drop(held);
    assert_eq!(e.stats().segments.lent_bytes, 0);
    assert!(lend(&e, &keys[239]).expect("hit").is_some());
}

#[test]
fn held_segments_past_their_bound_are_charged_and_refuse_new_leases() {
    // -m 4 MiB: held segments may take a sixteenth (256 KiB, four 64 KiB segments)
    // beyond -m. Twenty segments lent, then all evicted: held is five times that,
    // and the excess is charged against -m, so memory stays within -m + 256 KiB.
    let e = engine(4 << 20);
    let keys: Vec<String> = (0..120).map(|i| format!("k{i}")).collect();
    for k in &keys {
        set(&e, k, &value(k, 0, 10_000));
    }
    let leases: Vec<Lease> = keys
        .iter()
        .map(|k| lend(&e, k).expect("hit").expect("lent"))
        .collect();
    let mut peak = 0;
    for round in 1..=20u32 {
        for i in 0..400 {
            let k = format!("fill{round}-{i}");
            set(&e, &k, &value(&k, round, 1000));
        }
        peak = peak.max(e.stats().segments.memory_bytes);
    }
    let st = e.stats().segments;
    assert!(st.held_bytes >= 20 * (64 << 10), "{st:?}");
    assert!(peak <= (4 << 20) + (256 << 10), "peak {peak}: {st:?}");
    for (l, k) in leases.iter().zip(&keys) {
        assert_eq!(&l[..], &value(k, 0, 10_000)[..], "lease of {k} torn");
    }
    // Held over its bound: a segment without a lease gets none; sets still store.
    set(&e, "new", &value("new", 0, 10_000));
    assert!(lend(&e, "new").expect("hit").is_none(), "{st:?}");
    drop(leases);
    for i in 0..2000 {
        let k = format!("after{i}");
        set(&e, &k, &value(&k, 0, 1000));
    }
    let st = e.stats().segments;
    assert_eq!(st.held_bytes, 0, "{st:?}");
    assert!(st.memory_bytes <= 4 << 20, "{st:?}");
    set(&e, "new", &value("new", 1, 10_000));
    assert!(lend(&e, "new").expect("hit").is_some());
}

#[test]
fn a_lease_outlives_the_engine() {
    let e = engine(4 << 20);
    set(&e, "k", &value("k", 7, 5000));
    let l = lend(&e, "k").expect("hit").expect("lent");
    drop(e);
    assert_eq!(&l[..], &value("k", 7, 5000)[..]);
}

#[test]
fn exclusive_lookups_lend_too() {
    // mg's lookup takes the partition lock instead of pinning. (No bump, so that
    // eviction drops the item rather than moving it forward.)
    let e = engine(4 << 20);
    set(&e, "k", &value("k", 1, 5000));
    let mut lease = None;
    let opts = GetOpts {
        exclusive: true,
        no_bump: true,
        ..GetOpts::default()
    };
    e.get(b"k", &opts, &mut |it| {
        lease = it.lend();
        false
    });
    let l = lease.expect("lent");
    for i in 0..20_000 {
        let k = format!("f{i}");
        set(&e, &k, &value(&k, 0, 2000));
    }
    assert_eq!(e.stats().segments.held_segments, 1);
    assert_eq!(&l[..], &value("k", 1, 5000)[..]);
}

#[test]
fn the_reference_engine_does_not_lend() {
    let clock = Arc::new(Clock::new());
    let e = Reference::new(config(4 << 20), 16, clock);
    set(&e, "k", b"value");
    assert!(lend(&e, "k").expect("hit").is_none());
}

#[test]
fn readers_lend_while_writers_churn() {
    // Two readers lend, hold a batch of leases and check them while a writer
    // overwrites the same keys and evicts: a lease must never see another version's
    // bytes or a reused segment.
    let e = Arc::new(engine(4 << 20));
    let keys: Vec<String> = (0..64).map(|i| format!("c{i}")).collect();
    for k in &keys {
        set(&*e, k, &value(k, 0, 4000));
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (e, keys, stop) = (Arc::clone(&e), keys.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut checked = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut batch = Vec::new();
                    for (i, k) in keys.iter().enumerate().skip(r).step_by(3) {
                        let mut got = None;
                        e.get(k.as_bytes(), &GetOpts::default(), &mut |it| {
                            got = Some((it.value.to_vec(), it.lend()));
                            false
                        });
                        if let Some((copy, Some(l))) = got {
                            batch.push((i, copy, l));
                        }
                    }
                    for (i, copy, l) in &batch {
                        // The copy and the lease are the same item's value, and it is
                        // some version of this key's.
                        assert_eq!(&l[..], &copy[..], "lease differs from its item");
                        let unit = format!("{}:", keys[*i]);
                        assert!(l.starts_with(unit.as_bytes()), "foreign bytes");
                        let ver_end = l[unit.len()..].iter().position(|&b| b == b':');
                        let ver: u32 =
                            std::str::from_utf8(&l[unit.len()..unit.len() + ver_end.expect(":")])
                                .expect("utf8")
                                .parse()
                                .expect("version");
                        assert_eq!(&l[..], &value(&keys[*i], ver, 4000)[..]);
                        checked += 1;
                    }
                }
                checked
            })
        })
        .collect();
    for round in 1..=300u32 {
        for k in &keys {
            set(&*e, k, &value(k, round, 4000));
        }
        for i in 0..20 {
            let k = format!("x{round}-{i}");
            set(&*e, &k, &value(&k, 0, 8000));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let checked: u64 = readers.into_iter().map(|r| r.join().expect("reader")).sum();
    assert!(checked > 0);
    assert!(e.stats().evictions > 0);
}
