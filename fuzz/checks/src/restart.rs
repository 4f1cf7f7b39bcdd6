//! The warm-restart reader (`crates/store/src/seg/persist.rs`, `meta.rs`) fed a memory
//! file and a `.meta` that a local attacker with write access has altered.
//!
//! A saved state is built once (a 2 MiB engine on a memory file, a few hundred items,
//! some deleted, some with a TTL, a graceful save). Each input is a list of edits to
//! that state: bytes of the memory file inside or outside the saved segments, any
//! field of the metadata (settings, generations, clock, seed, each segment's offset,
//! capacity, end, generation and live-item offsets), segments dropped, duplicated or
//! swapped, the memory file's length, and raw bytes of the encoded metadata. By
//! default the edits are disguised as an attacker who knows the format would do it:
//! every segment checksum and the metadata's trailer are recomputed (xxh3 is not a
//! secret), so the restart's bounds checks, not its hashes, are what is tested.
//!
//! Checked:
//! - `open_memory_file` never panics and never fails (the file is always usable),
//!   and the metadata file is gone afterwards (never trusted twice);
//! - no edit, or edits only to memory outside the saved segments: a warm start with
//!   every saved item back, value, flags and all;
//! - a cold start: no item at all;
//! - a warm start, read consistently: the walk lists `curr_items` items, each walked
//!   key is found by a get with that key and a value within `-I`; accounted bytes
//!   never exceed `-m`; then writing more than the cache holds through it (2.4 MB,
//!   evicting restored segments) keeps the accounting within `-m` and every hit on a
//!   new key is the value last written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use memcrab_store::seg::meta::{self, Meta};
use memcrab_store::seg::persist::{meta_path, open_memory_file};
use memcrab_store::{Config, Engine, GetOpts, Mode, StoreOpts, StoreResult, WalkCursor};

use crate::reader::Reader;

/// `-m` of the saved engine: 64 KiB segments, a 2.4 MB memory file.
const LIMIT_BYTES: u64 = 2 << 20;
const ITEM_SIZE_MAX: usize = 64 * 1024;
/// The saved engine's hash seed: fixed, so that every run builds the same state.
const SEED: u128 = 0x6d65_6d63_7261_6266_757a_7a72_6573_7461;

fn cfg() -> Config {
    Config {
        limit_bytes: LIMIT_BYTES,
        evict: true,
        use_cas: true,
        item_size_max: ITEM_SIZE_MAX,
        hash_seed: Some(SEED),
    }
}

/// What a graceful stop left: the memory file, its metadata, and the live items.
struct Saved {
    mem: Vec<u8>,
    meta: Meta,
    items: HashMap<Vec<u8>, (Vec<u8>, u32)>,
}

/// A fresh path for this process's next memory file (in /dev/shm when there is one).
fn scratch_path() -> PathBuf {
    /// Relaxed: it only has to hand out distinct numbers.
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = Path::new("/dev/shm");
    let dir = if dir.is_dir() {
        dir.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let n = N.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("memcrab-fuzz-restart-{}-{n}", std::process::id()))
}

fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(meta_path(path));
}

fn saved() -> &'static Saved {
    /// The saved cache every run starts from, made once per process.
    static SAVED: OnceLock<Saved> = OnceLock::new();
    SAVED.get_or_init(|| {
        let path = scratch_path();
        remove(&path);
        let started = open_memory_file(cfg(), &path).expect("create the memory file");
        let e = started.seg;
        let mut items = HashMap::new();
        for i in 0..400u32 {
            let key = format!("restart:{i}").into_bytes();
            let len = if i % 97 == 0 {
                20_000
            } else {
                1 + (i as usize * 53) % 900
            };
            let value: Vec<u8> = (0..len).map(|j| (i as usize * 7 + j) as u8).collect();
            let exptime = if i % 5 == 0 {
                e.clock().now() + 100_000
            } else {
                0
            };
            let r = e.store(Mode::Set, &key, i, exptime, &value, &StoreOpts::default());
            assert!(matches!(r, StoreResult::Stored(_)), "base store {i}: {r:?}");
            items.insert(key, (value, i));
        }
        for i in (0..400u32).step_by(7) {
            let key = format!("restart:{i}").into_bytes();
            e.delete(&key, &Default::default());
            items.remove(&key);
        }
        e.save(&path, "fuzz").expect("save");
        drop(e);
        let mem = std::fs::read(&path).expect("read the memory file");
        let bytes = std::fs::read(meta_path(&path)).expect("read the metadata");
        let meta = meta::decode(&bytes).expect("decode the metadata just saved");
        remove(&path);
        assert!(
            meta.segments.len() >= 3,
            "the saved state has too few segments"
        );
        Saved { mem, meta, items }
    })
}

impl Reader<'_> {
    /// Up to 15 bytes to write somewhere.
    fn patch(&mut self) -> Vec<u8> {
        let n = usize::from(self.u8() % 16);
        (0..n).map(|_| self.u8()).collect()
    }
    /// A value near `base`, or any value: attackers like off-by-ones and extremes.
    fn near(&mut self, base: u64) -> u64 {
        match self.u8() % 4 {
            0 => base.wrapping_add(u64::from(self.u8() % 8)),
            1 => base.wrapping_sub(u64::from(self.u8() % 8)),
            2 => u64::MAX - u64::from(self.u8() % 4),
            _ => self.u64(),
        }
    }
}

/// The edited state, and what the edits allow the restart to do.
struct Forged {
    mem: Vec<u8>,
    meta: Meta,
    /// Raw pokes into the encoded metadata (offset, bytes).
    meta_pokes: Vec<(usize, Vec<u8>)>,
    fix_checksums: bool,
    fix_trailer: bool,
    /// Whether anything but memory outside the saved segments changed.
    trusted_changed: bool,
}

fn forge(data: &[u8]) -> Forged {
    let base = saved();
    let mut f = Forged {
        mem: base.mem.clone(),
        meta: base.meta.clone(),
        meta_pokes: Vec::new(),
        fix_checksums: true,
        fix_trailer: true,
        trusted_changed: false,
    };
    let mut r = Reader(data);
    // At most 32 edits: a bound on work per input.
    for _ in 0..32 {
        if r.0.is_empty() {
            break;
        }
        let nseg = f.meta.segments.len().max(1);
        match r.u8() % 9 {
            0 => {
                // Bytes inside a saved segment's items.
                let i = usize::from(r.u8()) % nseg;
                let Some(s) = f.meta.segments.get(i) else {
                    continue;
                };
                let at = s.file_off.saturating_add(u64::from(r.u32() % s.end.max(1)));
                poke(&mut f.mem, at, &r.patch());
                f.trusted_changed = true;
            }
            1 => {
                // Bytes anywhere in the memory file.
                let at = r.u32() as u64 % f.mem.len().max(1) as u64;
                let p = r.patch();
                let end = at + p.len() as u64;
                if base
                    .meta
                    .segments
                    .iter()
                    .any(|s| at < s.file_off.saturating_add(u64::from(s.end)) && s.file_off < end)
                {
                    f.trusted_changed = true;
                }
                poke(&mut f.mem, at, &p);
            }
            2 => {
                let i = usize::from(r.u8()) % nseg;
                let field = r.u8() % 8;
                let Some(s) = f.meta.segments.get_mut(i) else {
                    continue;
                };
                match field {
                    0 => s.file_off = r.near(s.file_off),
                    1 => s.cap = r.near(u64::from(s.cap)) as u32,
                    2 => s.end = r.near(u64::from(s.end)) as u32,
                    3 => s.gen = r.near(s.gen),
                    4 => s.opened = r.u32(),
                    5 => s.max_exptime = r.u32(),
                    6 => s.main = !s.main,
                    _ => s.queue_main = !s.queue_main,
                }
                f.trusted_changed = true;
            }
            3 => {
                let i = usize::from(r.u8()) % nseg;
                let action = r.u8() % 4;
                let Some(s) = f.meta.segments.get_mut(i) else {
                    continue;
                };
                let n = s.live.len().max(1);
                let j = r.u32() as usize % n;
                match action {
                    0 => s.live.push(r.near(u64::from(s.end)) as u32),
                    1 if !s.live.is_empty() => {
                        s.live.remove(j);
                    }
                    2 if !s.live.is_empty() => s.live[j] = r.near(u64::from(s.live[j])) as u32,
                    _ => s.live.reverse(),
                }
                f.trusted_changed = true;
            }
            4 => {
                let m = &mut f.meta;
                match r.u8() % 11 {
                    0 => m.now = r.near(u64::from(m.now)) as u32,
                    1 => m.stop_unix = r.near(m.stop_unix as u64) as i64,
                    2 => m.gen = r.near(m.gen),
                    3 => m.flush_gen = r.near(m.flush_gen),
                    4 => m.oldest_live = r.u32(),
                    5 => m.hash_seed ^= u128::from(r.u64()) | 1,
                    6 => m.hash_probe = r.u64(),
                    7 => m.settings.limit_bytes = r.near(m.settings.limit_bytes),
                    8 => m.settings.file_len = r.near(m.settings.file_len),
                    9 => m.settings.seg_size = r.near(u64::from(m.settings.seg_size)) as u32,
                    _ => m.settings.item_size_max = r.near(m.settings.item_size_max),
                }
                f.trusted_changed = true;
            }
            5 => {
                let segs = &mut f.meta.segments;
                let i = usize::from(r.u8()) % nseg;
                let j = usize::from(r.u8()) % nseg;
                match r.u8() % 3 {
                    0 if i < segs.len() => {
                        segs.remove(i);
                    }
                    1 if i < segs.len() => {
                        let s = segs[i].clone();
                        segs.insert(j.min(segs.len()), s);
                    }
                    _ if i < segs.len() && j < segs.len() => segs.swap(i, j),
                    _ => {}
                }
                f.trusted_changed = true;
            }
            6 => {
                // The memory file truncated or grown.
                let len = r.near(f.mem.len() as u64).min(f.mem.len() as u64 + 4096);
                f.mem.resize(len as usize, 0);
                f.trusted_changed = true;
            }
            7 => {
                let at = r.u32() as usize;
                f.meta_pokes.push((at, r.patch()));
                f.trusted_changed = true;
            }
            _ => {
                match r.u8() % 2 {
                    0 => f.fix_checksums = !f.fix_checksums,
                    _ => f.fix_trailer = !f.fix_trailer,
                }
                f.trusted_changed = true;
            }
        }
    }
    f
}

fn poke(buf: &mut [u8], at: u64, bytes: &[u8]) {
    for (k, b) in bytes.iter().enumerate() {
        if let Some(x) = usize::try_from(at)
            .ok()
            .and_then(|a| a.checked_add(k))
            .and_then(|a| buf.get_mut(a))
        {
            *x = *b;
        }
    }
}

fn encode(f: &mut Forged) -> Vec<u8> {
    if f.fix_checksums {
        for s in &mut f.meta.segments {
            let start = usize::try_from(s.file_off).unwrap_or(usize::MAX);
            let end = start.checked_add(s.end as usize);
            if let Some(bytes) = end.and_then(|end| f.mem.get(start..end)) {
                s.checksum = meta::checksum(bytes);
            }
        }
    }
    let mut b = meta::encode(&f.meta);
    for (at, p) in &f.meta_pokes {
        let at = at % b.len().max(1);
        poke(&mut b, at as u64, p);
    }
    if f.fix_trailer && b.len() >= 16 {
        let body = b.len() - 8;
        let h = meta::checksum(&b[..body]);
        b[body..].copy_from_slice(&h.to_le_bytes());
    }
    b
}

/// The `restart` fuzz target.
pub fn restart(data: &[u8]) {
    let mut f = forge(data);
    let meta_bytes = encode(&mut f);
    let path = scratch_path();
    std::fs::write(&path, &f.mem).expect("write the memory file");
    std::fs::write(meta_path(&path), &meta_bytes).expect("write the metadata");
    let started = open_memory_file(cfg(), &path);
    let meta_left = meta_path(&path).exists();
    let started = match started {
        Ok(s) => s,
        Err(e) => {
            remove(&path);
            panic!("open_memory_file failed on a usable file: {e}");
        }
    };
    assert!(!meta_left, "the metadata file survived the restart");
    let e = started.seg;
    let base = saved();
    if !f.trusted_changed {
        assert!(
            started.warm,
            "untouched state started cold: {}",
            started.log
        );
        for (key, (value, flags)) in &base.items {
            let got = get(&e, key);
            assert_eq!(
                got.as_ref(),
                Some(&(value.clone(), *flags)),
                "{key:?} after a warm restart"
            );
        }
    }
    let stats = e.stats();
    if !started.warm {
        assert_eq!(
            stats.curr_items, 0,
            "a cold start kept items: {}",
            started.log
        );
        for key in base.items.keys() {
            assert!(get(&e, key).is_none(), "{key:?} hit after a cold start");
        }
    }
    assert!(
        stats.bytes <= LIMIT_BYTES,
        "restored {} bytes > -m",
        stats.bytes
    );
    // Every walked item is found by its key, and the walk agrees with curr_items.
    let mut keys = Vec::new();
    let mut cur = WalkCursor::default();
    for _ in 0..10_000 {
        if cur.is_done() {
            break;
        }
        e.walk(&mut cur, &mut |w| {
            keys.push(w.key.to_vec());
            true
        });
    }
    assert!(cur.is_done(), "the walk did not finish");
    assert_eq!(keys.len() as u64, stats.curr_items, "walk vs curr_items");
    for k in &keys {
        let mut seen = None;
        e.get(k, &GetOpts::default(), &mut |it| {
            seen = Some((it.key.to_vec(), it.value.len()));
            false
        });
        let (key, vlen) = seen.unwrap_or_else(|| panic!("walked key {k:?} not found"));
        assert_eq!(&key, k, "a get returned another key");
        assert!(vlen <= ITEM_SIZE_MAX, "restored value of {vlen} bytes");
    }
    // Write more than the cache holds through it: restored segments are evicted or
    // reused.
    let mut last: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    for i in 0..1300u32 {
        let key = format!("after:{}", i % 300).into_bytes();
        let value = vec![(i % 251) as u8; 1900];
        e.store(Mode::Set, &key, 0, 0, &value, &StoreOpts::default());
        last.insert(key, value);
        if i % 100 == 0 {
            assert!(e.stats().bytes <= LIMIT_BYTES, "over -m after {i} stores");
        }
    }
    e.maintain();
    assert!(e.stats().bytes <= LIMIT_BYTES, "over -m after the writes");
    for (k, v) in &last {
        if let Some((got, _)) = get(&e, k) {
            assert_eq!(&got, v, "{k:?}: not the last value written");
        }
    }
    drop(e);
    remove(&path);
}

fn get(e: &dyn Engine, key: &[u8]) -> Option<(Vec<u8>, u32)> {
    let mut out = None;
    e.get(key, &GetOpts::default(), &mut |it| {
        out = Some((it.value.to_vec(), it.flags));
        false
    });
    out
}
