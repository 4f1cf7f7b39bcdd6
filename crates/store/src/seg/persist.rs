//! Warm restart (`-e <file>`, memcached's restartable cache): opening the memory
//! file and bringing back what a graceful stop saved ([`open_memory_file`]), and the
//! save itself ([`Seg::save`]).
//!
//! ```text
//!   graceful stop (every other thread stopped)      restart
//!   ─────────────────────────────────────────      ─────────────────────────────────
//!   seal the open segments                          read <file>.meta, then delete it
//!   per sealed segment in the memory file:          check it (meta.rs) and the settings
//!     offsets of its linked, live items             map <file>; same length or cold
//!     xxh3 of its bytes [0, end)                    per saved segment: claim its units,
//!   msync the file                                    check its xxh3, walk its items
//!   write <file>.meta.tmp, fsync, rename              with bounds checks, link the live
//! ```
//!
//! Never a wrong value: the metadata is deleted before anything is served, so a
//! crash or `kill -9` leaves none (the next start is cold), and a restart trusts the
//! memory file only as far as the metadata's hashes vouch for it. Anything that
//! does not check out (missing or corrupt metadata, another format, other `-m`/`-I`/
//! segment size/CAS settings, a memory file of another length, an index hash that
//! does not hash as the stop's did, a clock that went backwards, a segment whose
//! bytes changed, an item header out of bounds) starts an empty cache and says why.
//!
//! The index hash's secret seed is saved in the metadata (readable by the server's
//! user only, as the memory file is) and the restart keeps it, checked by the hash
//! of a probe key: every item is rehashed as it is linked back, so the check
//! guards against a build or CPU that hashes differently, not against misplaced
//! items. A format-1 file (before keyed hashing) is "from another version".
//!
//! What is not kept: items in segments that got heap memory because the file had no
//! run of free units long enough (see mapfile.rs); counters (`stats` start again).
//!
//! Locks: `save` takes region → arena → partition locks itself, but must run after
//! every thread that used the engine stopped (it seals open segments under their
//! owners' locks, and a store racing with it would be lost, not corrupted). A
//! restart runs before the engine is shared.
//!
//! Imports: `super::Seg` (its fields), link (`Seg::link`, `find_locked`), arena,
//! segments, mapfile, meta, item, index, keyhash, strict.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use std::{fs, io};

use super::index::{Loc, MAX_OFFSET, PARTITIONS};
use super::item::{self, View};
use super::keyhash::KeyHasher;
use super::mapfile::{self, MemFile};
use super::meta::{self, Meta};
use super::segments::{segment_bytes, Life};
use super::strict;
use super::Seg;
use crate::clock::Clock;
use crate::Config;

/// The metadata file beside a memory file: `<file>.meta`, as memcached names it.
pub fn meta_path(memory_file: &Path) -> PathBuf {
    let mut p = memory_file.as_os_str().to_owned();
    p.push(".meta");
    PathBuf::from(p)
}

/// An engine on a memory file, and what its start found.
pub struct Started {
    pub seg: Seg,
    /// The clock the engine runs on: resumed from the saved one when warm.
    pub clock: Arc<Clock>,
    /// Whether saved items came back.
    pub warm: bool,
    /// One line for the log: how many items came back and how long it took, or why
    /// the cache starts empty.
    pub log: String,
}

/// What a save wrote.
pub struct Saved {
    pub items: u64,
    pub segments: usize,
    /// Items in heap segments (the file was full), not kept.
    pub lost_items: u64,
    pub log: String,
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Reads and deletes the metadata file. Deleting first is what makes a crash
/// later in this run leave no metadata to trust.
fn take_meta(path: &Path, trusted: &[u32]) -> Result<Meta, String> {
    let mp = meta_path(path);
    let read = strict::open(&mp, fs::OpenOptions::new().read(true), trusted).and_then(|mut f| {
        let mut b = Vec::new();
        io::Read::read_to_end(&mut f, &mut b).map(|_| b)
    });
    let bytes = match read {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(format!(
                "no metadata file {} (first start, or the last stop was not graceful)",
                mp.display()
            ))
        }
        Err(e) => {
            // Not trusted, or unreadable: never read again either.
            let _ = fs::remove_file(&mp);
            return Err(format!("cannot read {}: {e}", mp.display()));
        }
    };
    fs::remove_file(&mp).map_err(|e| {
        format!(
            "cannot delete {} ({e}); refusing to trust it twice",
            mp.display()
        )
    })?;
    meta::decode(&bytes)
}

/// Whether saved metadata fits this run's settings.
fn check_settings(m: &Meta, want: &meta::Settings) -> Result<(), String> {
    let have = &m.settings;
    let mut diffs = Vec::new();
    if have.limit_bytes != want.limit_bytes {
        diffs.push(format!(
            "-m {} MB, saved {} MB",
            want.limit_bytes >> 20,
            have.limit_bytes >> 20
        ));
    }
    if have.item_size_max != want.item_size_max {
        diffs.push(format!(
            "-I {}, saved {}",
            want.item_size_max, have.item_size_max
        ));
    }
    if have.seg_size != want.seg_size {
        diffs.push(format!(
            "segment size {}, saved {}",
            want.seg_size, have.seg_size
        ));
    }
    if have.use_cas != want.use_cas {
        diffs.push(format!("CAS {}, saved {}", want.use_cas, have.use_cas));
    }
    if have.file_len != want.file_len {
        diffs.push(format!(
            "memory file length {}, saved {}",
            want.file_len, have.file_len
        ));
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(format!("settings differ: {}", diffs.join("; ")))
    }
}

/// Whether this build hashes keys under the saved seed as the stopped one did.
fn check_hash(m: &Meta) -> Result<(), String> {
    let h = KeyHasher::with_seed(m.hash_seed);
    if h.hash(meta::HASH_PROBE) == m.hash_probe {
        Ok(())
    } else {
        Err(format!(
            "the index hash differs from the stopped server's (this one uses {} under the saved seed)",
            h.algorithm()
        ))
    }
}

/// Opens the memory file at `path` for an engine of `cfg` and brings back what the
/// last graceful stop saved, if everything about it checks out; otherwise starts
/// empty. Errors only when the file cannot be created or mapped, or is not to be
/// trusted (see strict.rs); a metadata file that is not to be trusted means a cold
/// start.
pub fn open_memory_file(cfg: Config, path: &Path) -> io::Result<Started> {
    open_memory_file_trusting(cfg, path, &[])
}

/// [`open_memory_file`], trusting files owned by the users in `trusted` too (the
/// `-u` user, which writes the metadata at a graceful stop).
pub fn open_memory_file_trusting(cfg: Config, path: &Path, trusted: &[u32]) -> io::Result<Started> {
    let t0 = Instant::now();
    let seg_size = segment_bytes(cfg.limit_bytes);
    let file_len = mapfile::file_len(cfg.limit_bytes, seg_size);
    let want = meta::Settings {
        limit_bytes: cfg.limit_bytes,
        item_size_max: cfg.item_size_max as u64,
        seg_size,
        use_cas: cfg.use_cas,
        file_len,
    };
    let checked = take_meta(path, trusted)
        .and_then(|m| check_settings(&m, &want).map(|()| m))
        .and_then(|m| check_hash(&m).map(|()| m));
    let why_cold = match checked {
        Err(why) => why,
        Ok(m) => {
            let cfg = Config {
                hash_seed: Some(m.hash_seed),
                ..cfg
            };
            let down = unix_now() - m.stop_unix;
            let (file, kept) = MemFile::open(path, cfg.limit_bytes, seg_size, true, trusted)?;
            if down < 0 {
                format!("the clock went back {} s since the stop", -down)
            } else if !kept {
                format!(
                    "memory file {} is not {file_len} bytes (truncated or replaced)",
                    path.display()
                )
            } else {
                let now = m
                    .now
                    .saturating_add(u32::try_from(down).unwrap_or(u32::MAX));
                let clock = Arc::new(Clock::resumed(now));
                let seg = Seg::with_memory(cfg, Arc::clone(&clock), Some(Arc::new(file)));
                match seg.restore(&m) {
                    Ok(r) => {
                        let log = format!(
                            "warm restart from {}: recovered {} items ({} bytes) in {} segments in {:.3} s; {} expired or flushed while down; down {down} s",
                            path.display(),
                            r.items,
                            r.bytes,
                            r.segments,
                            t0.elapsed().as_secs_f64(),
                            r.dead,
                        );
                        return Ok(Started {
                            seg,
                            clock,
                            warm: true,
                            log,
                        });
                    }
                    Err(why) => why,
                }
            }
        }
    };
    // Cold: discard the old contents (and so the pages a previous run left).
    let (file, _) = MemFile::open(path, cfg.limit_bytes, seg_size, false, trusted)?;
    let clock = Arc::new(Clock::new());
    let seg = Seg::with_memory(cfg, Arc::clone(&clock), Some(Arc::new(file)));
    Ok(Started {
        seg,
        clock,
        warm: false,
        log: format!(
            "memory file {}: starting with an empty cache: {why_cold}",
            path.display()
        ),
    })
}

/// What a restore brought back.
struct Restored {
    items: u64,
    bytes: u64,
    segments: usize,
    dead: u64,
}

impl Seg {
    /// Links the saved items back (`self` is new, empty, on the memory file, with
    /// the resumed clock). Checks every segment and item before trusting it; an
    /// error leaves a half-restored engine the caller must drop.
    fn restore(&self, m: &Meta) -> Result<Restored, String> {
        let file = self.descs.file().ok_or("no memory file")?;
        if m.gen == 0 || m.flush_gen > m.gen {
            return Err(format!(
                "metadata generations are inconsistent (next {}, flushed {})",
                m.gen, m.flush_gen
            ));
        }
        self.gen.store(m.gen, Ordering::Relaxed);
        // Uniques given before the save are below the next generation's range, so
        // the next one given (`Seg::next_unique`) starts above it.
        self.explicit
            .store(m.gen << super::segments::PLACE_BITS, Ordering::Relaxed);
        self.flush.gen.store(m.flush_gen, Ordering::Release);
        self.flush
            .oldest_live
            .store(m.oldest_live, Ordering::Relaxed);
        if m.oldest_live != 0 {
            // Let maintain sweep a delayed flush once it is due (harmless if done).
            self.flush_seq.store(1, Ordering::Relaxed);
        }
        let now = self.clock.now();
        let mut r = Restored {
            items: 0,
            bytes: 0,
            segments: 0,
            dead: 0,
        };
        // Size each partition's table for its share of the saved items up front
        // (keys hash evenly over the partitions): linking them then rebuilds few
        // tables. Partition locks alone, before the arena's (lock order).
        let saved: usize = m.segments.iter().map(|s| s.live.len()).sum();
        let share = saved / PARTITIONS + 1;
        for part in 0..PARTITIONS {
            self.index.lock_part(part).reserve(share);
        }
        let mut arena = self.arena.lock();
        for (i, s) in m.segments.iter().enumerate() {
            let bad = |what: &str| format!("saved segment {i}: {what}");
            let normal = s.cap == self.seg_size;
            if !normal && (s.cap <= self.large_min || s.cap > MAX_OFFSET) {
                return Err(bad(&format!("bad capacity {}", s.cap)));
            }
            if s.end > s.cap || (!normal && s.end != s.cap) {
                return Err(bad(&format!("end {} past capacity {}", s.end, s.cap)));
            }
            if s.gen == 0 || s.gen >= m.gen {
                return Err(bad(&format!("generation {} not below {}", s.gen, m.gen)));
            }
            let p = file
                .claim(s.file_off, s.cap)
                .ok_or_else(|| bad("outside the file or overlapping another"))?;
            let id = arena
                .adopt(&self.descs, s.cap, p)
                .ok_or_else(|| bad("no segment id"))?;
            // SAFETY: the claimed run lies inside the mapping, and nothing else
            // reads or writes it while the engine is not shared yet.
            let bytes = unsafe { std::slice::from_raw_parts(p, s.end as usize) };
            if meta::checksum(bytes) != s.checksum {
                return Err(bad("contents changed since the stop (checksum)"));
            }
            let d = self.descs.get(id);
            d.open(s.gen, s.opened, s.main);
            d.max_exptime.store(s.max_exptime, Ordering::Relaxed);
            d.end.store(s.end, Ordering::Relaxed);
            let mut live = s.live.iter().copied().peekable();
            let mut off = 0u32;
            while off < s.end {
                let c = item::checked(&bytes[off as usize..], off as usize)
                    .ok_or_else(|| bad(&format!("bad item header at {off}")))?;
                if self.item_size_max != 0 && c.vlen > self.item_size_max {
                    return Err(bad(&format!("value of {} bytes at {off}", c.vlen)));
                }
                if live.peek() == Some(&off) {
                    live.next();
                    let loc = Loc { seg: id, off };
                    // SAFETY: `checked` found a whole item here inside the segment's
                    // claimed memory, which stays ours.
                    let v = unsafe { View::read(p.add(off as usize)) };
                    if self.flush.life(d, &v, now) != Life::Live {
                        r.dead += 1;
                    } else {
                        let h = self.hash(v.key);
                        let mut l = self.index.lock(h);
                        if self.find_locked(&l, h, v.key).is_some() {
                            return Err(bad(&format!("key at {off} saved twice")));
                        }
                        self.link(&mut l, h, None, loc);
                        r.items += 1;
                        r.bytes += c.size as u64;
                    }
                }
                off += c.size as u32;
            }
            if off != s.end || live.next().is_some() {
                return Err(bad("item offsets do not match its items"));
            }
            arena.enqueue(&self.descs, id, s.queue_main);
            r.segments += 1;
        }
        Ok(r)
    }

    /// Saves what a restart needs beside the memory file `path` (`<path>.meta`).
    /// Call once, after every thread that used the engine has stopped, then exit.
    pub fn save(&self, path: &Path, version: &str) -> io::Result<Saved> {
        let t0 = Instant::now();
        let file = self
            .descs
            .file()
            .ok_or_else(|| io::Error::other("the engine has no memory file"))?;
        // Seal every open segment, as an immediate flush_all does, so each one's
        // items end at its `end`.
        for reg in self.regions.iter() {
            let mut region = reg.lock();
            let mut arena = self.arena.lock();
            for slot in region.iter_mut() {
                if let Some(a) = slot.take() {
                    arena.seal(&self.descs, a);
                }
            }
        }
        let arena = {
            let mut arena = self.arena.lock();
            if let Some(a) = arena.reinsert.take() {
                arena.seal(&self.descs, a);
            }
            arena
        };
        let now = self.clock.now();
        let mut segments = Vec::new();
        let (mut items, mut lost_items) = (0u64, 0u64);
        let queues = arena.fifo.small.iter().map(|&id| (id, false));
        for (id, queue_main) in queues.chain(arena.fifo.main.iter().map(|&id| (id, true))) {
            let d = self.descs.get(id);
            let p = d.ptr.load(Ordering::Acquire);
            let end = d.end.load(Ordering::Relaxed);
            let mut live = Vec::new();
            let mut off = 0u32;
            while off < end {
                let loc = Loc { seg: id, off };
                // SAFETY: the arena is locked: a sealed segment in its queues is
                // neither emptied nor reused, and its items up to `end` are written.
                let v = unsafe { View::read(p.add(off as usize)) };
                let h = self.hash(v.key);
                let linked = self.index.lock(h).find_loc(h, loc).is_some();
                if linked && self.flush.life(d, &v, now) == Life::Live {
                    live.push(off);
                }
                off += v.size as u32;
            }
            let Some(file_off) = file.offset_of(p) else {
                lost_items += live.len() as u64;
                continue;
            };
            items += live.len() as u64;
            // SAFETY: the segment's memory holds `end` written bytes (as above).
            let bytes = unsafe { std::slice::from_raw_parts(p, end as usize) };
            segments.push(meta::Segment {
                file_off,
                cap: d.cap.load(Ordering::Relaxed),
                end,
                gen: d.gen.load(Ordering::Relaxed),
                opened: d.opened.load(Ordering::Relaxed),
                max_exptime: d.max_exptime.load(Ordering::Relaxed),
                main: d.main.load(Ordering::Relaxed),
                queue_main,
                checksum: meta::checksum(bytes),
                live,
            });
        }
        let m = Meta {
            version: version.to_owned(),
            hash_seed: self.hasher.seed(),
            hash_probe: self.hasher.hash(meta::HASH_PROBE),
            settings: meta::Settings {
                limit_bytes: file.limit_bytes,
                item_size_max: self.item_size_max as u64,
                seg_size: self.seg_size,
                use_cas: self.use_cas,
                file_len: file.len(),
            },
            now,
            stop_unix: unix_now(),
            gen: self.gen.load(Ordering::Relaxed),
            flush_gen: self.flush.gen.load(Ordering::Acquire),
            oldest_live: self.flush.oldest_live.load(Ordering::Relaxed),
            segments,
        };
        drop(arena);
        file.flush()?;
        let bytes = meta::encode(&m);
        let mp = meta_path(path);
        let mut tmp = mp.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            // A new file, never one found there: whatever sits at the name (a
            // symbolic link someone planted, say) goes, and O_EXCL creates afresh.
            match fs::remove_file(&tmp) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &mp)?;
        let log = format!(
            "saved {items} items in {} segments to {} ({} bytes of metadata) in {:.3} s{}",
            m.segments.len(),
            mp.display(),
            bytes.len(),
            t0.elapsed().as_secs_f64(),
            if lost_items > 0 {
                format!("; {lost_items} items in heap segments (memory file full) not kept")
            } else {
                String::new()
            }
        );
        Ok(Saved {
            items,
            segments: m.segments.len(),
            lost_items,
            log,
        })
    }
}
