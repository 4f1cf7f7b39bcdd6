//! The index's unit tests: growth, cuckoo moves (with concurrent readers),
//! rebuilds under a new salt, shrinking, the byte
//! count, and what a partition does when its table cannot grow.

use super::*;
use std::collections::HashMap;

fn h(i: u64) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(7).hash_one(i)
}

#[test]
fn insert_find_remove_and_grow() {
    let idx = Index::new();
    // Fake "segments": location i ↔ key i.
    let n = 50_000u64;
    let mut hashes = HashMap::new();
    for i in 1..=n {
        let loc = Loc {
            seg: (i % 1000 + 1) as u32,
            off: ((i / 1000) * 4) as u32,
        };
        hashes.insert(loc, h(i));
        let hi = h(i);
        let mut l = idx.lock(hi);
        assert!(l.find(hi, |x| x == loc).is_none());
        l.insert(hi, loc, |x| hashes[&x]);
        l.counts.items += 1;
    }
    assert_eq!(idx.counts().items, n);
    let g = epoch::pin();
    for (loc, hi) in &hashes {
        assert_eq!(idx.find(*hi, &g, |x| x == *loc), Some(*loc));
    }
    drop(g);
    let (buckets, _) = idx.size();
    let load = n as f64 / (buckets as f64 * 8.0);
    assert!(
        load > 0.6,
        "two-choice tables should fill well: load {load}"
    );
    for (loc, hi) in &hashes {
        let mut l = idx.lock(*hi);
        let pos = l.find_loc(*hi, *loc).expect("linked");
        l.remove(pos);
    }
    let g = epoch::pin();
    for (loc, hi) in &hashes {
        assert_eq!(idx.find(*hi, &g, |x| x == *loc), None);
    }
}

/// Links `n` items into partition 0 (hashes with its partition bits) and
/// returns each one's hash by location, for `rehash`.
fn fill_partition_0(idx: &Index, n: u64) -> HashMap<Loc, u64> {
    let mut hashes = HashMap::new();
    for i in 1..=n {
        let hi = h(i) & !(0xfff << PARTITION_SHIFT);
        let loc = Loc {
            seg: (i % 1000 + 1) as u32,
            off: ((i / 1000) * 4) as u32,
        };
        hashes.insert(loc, hi);
        let mut l = idx.lock(hi);
        l.insert(hi, loc, |x| hashes[&x]);
        l.counts.items += 1;
    }
    hashes
}

/// A table left mostly empty shrinks, keeping every item findable.
#[test]
fn mostly_empty_tables_shrink() {
    let idx = Index::new();
    let hashes = fill_partition_0(&idx, 5_000);
    let big = (idx.table_word(0) >> 48) as usize;
    assert!(!idx.lock_part(0).shrink(|x| hashes[&x]), "full: no shrink");
    // Remove all but every tenth item.
    let mut kept = Vec::new();
    for (k, (loc, hi)) in hashes.iter().enumerate() {
        if k % 10 == 0 {
            kept.push((*loc, *hi));
            continue;
        }
        let mut l = idx.lock(*hi);
        let pos = l.find_loc(*hi, *loc).expect("linked");
        l.remove(pos);
        l.counts.items -= 1;
    }
    assert!(idx.lock_part(0).shrink(|x| hashes[&x]));
    let small = (idx.table_word(0) >> 48) as usize;
    assert!(small * 4 < big, "{big} -> {small} buckets");
    let g = epoch::pin();
    for (loc, hi) in &kept {
        assert_eq!(idx.find(*hi, &g, |x| x == *loc), Some(*loc));
    }
    drop(g);
    // About half full now: no second shrink.
    assert!(!idx.lock_part(0).shrink(|x| hashes[&x]));
    epoch::wait_quiescent(epoch::advance());
    idx.collect();
    let expected = ((PARTITIONS - 1) * INITIAL_BUCKETS * 64 + table_bytes(small)) as u64;
    assert_eq!(idx.bytes(), expected);
}

/// The byte count covers exactly the tables held: once readers are gone, the
/// retired ones are freed and leave it, and large tables fill whole pages.
#[test]
fn bytes_count_the_tables_held() {
    let idx = Index::new();
    let start = idx.bytes();
    assert_eq!(start, (PARTITIONS * INITIAL_BUCKETS * 64) as u64);
    // Enough items in one partition for mapped tables.
    fill_partition_0(&idx, 5_000);
    // Other tests' readers (same process) may be pinned: wait them out.
    epoch::wait_quiescent(epoch::advance());
    idx.collect();
    let word = idx.table_word(0);
    let len = (word >> 48) as usize;
    assert!(len >= MAP_MIN_BUCKETS, "{len} buckets");
    assert_eq!(len, table_len(len), "a mapped table fills its pages");
    let expected = ((PARTITIONS - 1) * INITIAL_BUCKETS * 64 + table_bytes(len)) as u64;
    assert_eq!(idx.bytes(), expected);
    assert_eq!(idx.size().1, expected);
}

/// Hash flooding with the seed known, at the index: keys whose hashes share the
/// partition, the tag and the 32 bucket bits fill their two buckets, and growth never
/// separates them. The partition grows its table once, to the largest size, in
/// one bounded series of rebuilds; from then on each further colliding insert
/// drops one slot of the first bucket (returned, for the engine to count as an
/// eviction) without rebuilding anything. Nothing loops, nothing panics, the
/// colliding keys never hold more than their two buckets, and keys of other
/// buckets in the partition still go in and are found.
#[test]
fn colliding_hashes_grow_a_table_once_then_displace() {
    let idx = Index::new();
    // Partition 0, fixed bucket bits and tag (the tag picks the second bucket).
    let class = 0x0000_1234_9e37_79b9u64;
    let hashes: Vec<u64> = (0..100u64).map(|i| class | (i & 0xf) << 48).collect();
    assert!(hashes.iter().all(|&h| same_buckets_everywhere(h, class)));
    let loc = |i: usize| Loc {
        seg: i as u32 + 1,
        off: 0,
    };
    let by_loc: HashMap<Loc, u64> = hashes
        .iter()
        .enumerate()
        .map(|(i, &h)| (loc(i), h))
        .collect();
    let mut displaced = Vec::new();
    let mut rebuilds_after = Vec::new();
    for (i, &h) in hashes.iter().enumerate() {
        let mut l = idx.lock(h);
        if let Some(v) = l.insert(h, loc(i), |x| by_loc[&x]) {
            displaced.push(v);
        }
        drop(l);
        rebuilds_after.push(idx.rebuild_counts().0);
    }
    let table = (idx.table_word(0) >> 48) as usize;
    assert_eq!(
        table, MAX_BUCKETS,
        "the flood drove the table to its largest size"
    );
    let first_overflow = SLOTS_PER_BUCKET * 2;
    let grown = rebuilds_after[first_overflow];
    assert!(grown > 0 && grown < 64, "{grown} rebuilds");
    assert_eq!(
        *rebuilds_after.last().expect("inserts"),
        grown,
        "rebuilds after the table reached its largest size"
    );
    assert_eq!(displaced.len(), hashes.len() - first_overflow);
    // What is left of the class: exactly its two buckets' worth, all findable.
    let g = epoch::pin();
    let found = hashes
        .iter()
        .enumerate()
        .filter(|&(i, &h)| idx.find(h, &g, |x| x == loc(i)).is_some())
        .count();
    assert_eq!(found, first_overflow);
    drop(g);
    // Other keys of the partition are unaffected.
    for i in 0..1000u64 {
        let other = h(i) & !(0xfff << PARTITION_SHIFT);
        let at = Loc {
            seg: 1000 + i as u32,
            off: 4,
        };
        let mut l = idx.lock(other);
        assert!(
            l.insert(other, at, |x| by_loc[&x]).is_none(),
            "other key {i} displaced"
        );
        drop(l);
        let g = epoch::pin();
        assert_eq!(idx.find(other, &g, |x| x == at), Some(at));
    }
}

#[test]
fn churn_keeps_tables_nearly_full() {
    // A cache at its memory bound: a fixed number of live items, the oldest
    // replaced by a new one, over and over. Every partition meets two full buckets
    // in time; cuckoo displacement makes room there, so the table grows only when
    // nearly full. With two-choice placement alone and a rebuild under a new salt
    // before growing, 2,000 live items ended at 448 buckets (56% full).
    let idx = Index::new();
    // 1,500 items fit 188 buckets; growth steps by an eighth (182, 204) below the
    // 256 buckets from which tables are mapped in whole pages.
    let live = 1_500u64;
    let mut hashes = HashMap::new();
    let loc = |i: u64| Loc {
        seg: (i % 1000 + 1) as u32,
        off: ((i / 1000) * 4) as u32,
    };
    let hash = |i: u64| h(i) & !(0xfff << PARTITION_SHIFT);
    let mut len = 0;
    for i in 1..=live * 30 {
        hashes.insert(loc(i), hash(i));
        let mut l = idx.lock(hash(i));
        assert!(l.insert(hash(i), loc(i), |x| hashes[&x]).is_none());
        l.counts.items += 1;
        if i > live {
            let old = i - live;
            let pos = l.find_loc(hash(old), loc(old)).expect("live");
            l.remove(pos);
            l.counts.items -= 1;
            hashes.remove(&loc(old));
        }
        len = l.table().len();
    }
    let load = live as f64 / (len * SLOTS_PER_BUCKET) as f64;
    assert!(load > 0.85, "load {load} after churn ({len} buckets)");
    assert!(
        idx.heads[0].moves.load(Ordering::Relaxed) > 0,
        "nothing moved"
    );
    let g = epoch::pin();
    for (l, hi) in &hashes {
        assert_eq!(idx.find(*hi, &g, |x| x == *l), Some(*l));
    }
}

/// Lock-free readers during cuckoo moves: keys stored once and never removed are
/// found by every lookup of four reader threads while a writer churns other keys
/// of the same partition at full load (each insert there moves slots between
/// buckets). Bounded by the writer's rounds; the readers stop when it is done.
#[test]
fn readers_never_miss_a_key_that_moves() {
    use std::sync::atomic::AtomicBool;
    let idx = Index::new();
    let hash = |i: u64| h(i) & !(0xfff << PARTITION_SHIFT);
    let loc = |i: u64| Loc {
        seg: (i % 1000 + 1) as u32,
        off: ((i / 1000) * 4) as u32,
    };
    let stable = 600u64;
    let churn = 1_200u64;
    let hashes = std::sync::Mutex::new(HashMap::new());
    let insert = |i: u64| {
        hashes.lock().expect("hashes").insert(loc(i), hash(i));
        let mut l = idx.lock(hash(i));
        let map = hashes.lock().expect("hashes").clone();
        assert!(l.insert(hash(i), loc(i), |x| map[&x]).is_none());
        l.counts.items += 1;
    };
    for i in 1..=stable + churn {
        insert(i);
    }
    let done = AtomicBool::new(false);
    let before = idx.heads[0].moves.load(Ordering::Relaxed);
    std::thread::scope(|sc| {
        for r in 0..4u64 {
            let (idx, done) = (&idx, &done);
            sc.spawn(move || {
                let mut lookups = 0u64;
                while !done.load(Ordering::Relaxed) && lookups < 50_000_000 {
                    let i = (lookups * 7 + r) % stable + 1;
                    let g = epoch::pin();
                    assert_eq!(
                        idx.find(hash(i), &g, |x| x == loc(i)),
                        Some(loc(i)),
                        "stable key {i} missed after {lookups} lookups"
                    );
                    lookups += 1;
                }
            });
        }
        // The writer: remove the oldest churn key, insert a new one.
        for i in stable + churn + 1..stable + churn + 40_000 {
            let old = i - churn;
            {
                let mut l = idx.lock(hash(old));
                let pos = l.find_loc(hash(old), loc(old)).expect("live");
                l.remove(pos);
                l.counts.items -= 1;
            }
            hashes.lock().expect("hashes").remove(&loc(old));
            insert(i);
        }
        done.store(true, Ordering::Relaxed);
    });
    let moved = idx.heads[0].moves.load(Ordering::Relaxed) - before;
    assert!(
        moved > 1000,
        "only {moved} moves: the test did not exercise them"
    );
}
