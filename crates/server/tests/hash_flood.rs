//! Hash flooding end to end (`docs/security.md`, "Hash flooding"): keys built
//! offline to share one index partition and both candidate buckets under a known
//! seed, sent to the real binary forced to that seed and to one with a seed of its
//! own.
//!
//! ```text
//!   seed known (MEMCRAB_TEST_HASH_SEED)            seed drawn from the OS
//!   ───────────────────────────────────            ──────────────────────
//!   16 classes × 24 keys, each class: one          the same keys: spread over the
//!   partition, the same 32 bucket bits             partitions like any others
//!     → each class's partition grows its table       → rebuilds per insert as for
//!       to the largest (4 MiB) in one insert            random keys
//!     → 64 MiB of index charged against -m           → hash_bytes barely moves
//!     → later stores evict unrelated items           → nothing evicted
//! ```
//!
//! How the keys are built: the index hash is an AES-128 CBC-MAC keyed by the seed
//! (crates/store/src/seg/keyhash.rs). For a 16-byte key M the hash is the low 64
//! bits of E(E(len block) ^ M), so with the seed known any hash can be had: pick
//! the block Y wanted (the class's 44 bits, the other bits at random) and set
//! M = D(Y) ^ E(len block), retried until M's bytes are all valid in a text-protocol
//! key. Each key is checked against the store's own hasher. The work is measured by
//! counters the engine reports (`memcrab_index_rebuilds`,
//! `memcrab_index_rehashed_items`, `hash_bytes`, `evictions`), not by the clock.
//!
//! Synchronisation: replies and the `mn`-free text sentinel (`get nothing` → END).
//! memcrab's own feature: not run against memcached.

mod common;

use std::collections::HashMap;

use common::{Client, Rng, Server};
use memcrab_store::seg::{same_buckets_everywhere, KeyHasher};

/// The known seed ("hash flood test!").
const SEED: u128 = 0x2174_7365_7420_646f_6f6c_6620_6873_6168;
/// Partitions flooded; keys per partition stored in the flood (two buckets hold
/// 16); rounds after it, each with one more key per partition.
const CLASSES: usize = 16;
const FLOOD: usize = 24;
const ROUNDS: usize = 8;
const PER_CLASS: usize = FLOOD + ROUNDS;
/// Unrelated items stored before the flood, and in each round, with 1000-byte
/// values: at most about 37 MB in all, well inside `-m 64` unless the index takes
/// the room.
const BEFORE: usize = 20_000;
const ROUND_ITEMS: usize = 2_000;
const VALUE_BYTES: usize = 1000;

/// What the server reported around each phase.
#[derive(Debug)]
struct Figures {
    /// Rebuilds and items re-read while the flood keys were stored.
    flood_rebuilds: u64,
    flood_rehashed: u64,
    /// The same for as many random keys stored next.
    random_rebuilds: u64,
    random_rehashed: u64,
    /// Evictions while the flood keys were stored (full buckets dropping a slot).
    flood_evictions: u64,
    /// hash_bytes right after the flood (maintain shrinks emptied tables back
    /// every 100 ms, so this sees the inflation only if no shrink came between).
    peak_index_bytes: u64,
    /// Rounds of "one more colliding key per class, then 2000 unrelated items in
    /// the same write" run, and unrelated items stored before the flood still
    /// there after them.
    rounds: usize,
    before_left: usize,
}

#[cfg(target_arch = "x86_64")]
mod aes {
    use std::arch::x86_64::*;

    macro_rules! expand_key {
        ($k:expr, $rcon:expr) => {{
            let k = $k;
            let t = _mm_shuffle_epi32(_mm_aeskeygenassist_si128(k, $rcon), 0xff);
            let k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
            let k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
            let k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
            _mm_xor_si128(k, t)
        }};
    }

    /// AES-128 under one key, both directions (an independent copy of the
    /// server's, so that a forged key proves the two agree).
    pub struct Aes {
        enc: [__m128i; 11],
        dec: [__m128i; 11],
    }

    impl Aes {
        /// # Safety
        /// The CPU has AES-NI.
        #[target_feature(enable = "aes")]
        pub unsafe fn new(seed: u128) -> Aes {
            let mut enc = [_mm_set_epi64x((seed >> 64) as i64, seed as i64); 11];
            enc[1] = expand_key!(enc[0], 0x01);
            enc[2] = expand_key!(enc[1], 0x02);
            enc[3] = expand_key!(enc[2], 0x04);
            enc[4] = expand_key!(enc[3], 0x08);
            enc[5] = expand_key!(enc[4], 0x10);
            enc[6] = expand_key!(enc[5], 0x20);
            enc[7] = expand_key!(enc[6], 0x40);
            enc[8] = expand_key!(enc[7], 0x80);
            enc[9] = expand_key!(enc[8], 0x1b);
            enc[10] = expand_key!(enc[9], 0x36);
            let mut dec = enc;
            dec[0] = enc[10];
            for i in 1..10 {
                dec[i] = _mm_aesimc_si128(enc[10 - i]);
            }
            dec[10] = enc[0];
            Aes { enc, dec }
        }

        /// # Safety
        /// The CPU has AES-NI.
        #[target_feature(enable = "aes")]
        pub unsafe fn encrypt(&self, b: u128) -> u128 {
            let mut x = _mm_xor_si128(load(b), self.enc[0]);
            for k in &self.enc[1..10] {
                x = _mm_aesenc_si128(x, *k);
            }
            store(_mm_aesenclast_si128(x, self.enc[10]))
        }

        /// # Safety
        /// The CPU has AES-NI.
        #[target_feature(enable = "aes")]
        pub unsafe fn decrypt(&self, b: u128) -> u128 {
            let mut x = _mm_xor_si128(load(b), self.dec[0]);
            for k in &self.dec[1..10] {
                x = _mm_aesdec_si128(x, *k);
            }
            store(_mm_aesdeclast_si128(x, self.dec[10]))
        }
    }

    fn load(b: u128) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_set_epi64x((b >> 64) as i64, b as i64) }
    }

    fn store(x: __m128i) -> u128 {
        // SAFETY: __m128i and u128 are both 16 plain bytes (x86-64 is little-endian).
        unsafe { std::mem::transmute::<__m128i, u128>(x) }
    }
}

/// A byte a text-protocol key may hold: no space, no control byte (memcached
/// splits on spaces; a NUL ends the line).
fn key_byte(b: u8) -> bool {
    b > b' ' && b != 0x7f
}

/// `CLASSES` × `PER_CLASS` 16-byte keys; each class shares its partition and its 32
/// bucket bits under `SEED`, each class in another partition. None when the CPU has
/// no AES-NI (the server then hashes with SipHash-1-3, which a test cannot invert).
fn forge_colliding_keys() -> Option<Vec<Vec<u8>>> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("aes") {
        // SAFETY: AES-NI checked just above.
        let aes = unsafe { aes::Aes::new(SEED) };
        // E(length block) for 16-byte keys: the CBC-MAC's first step.
        // SAFETY: as above.
        let x0 = unsafe { aes.encrypt(16) };
        let server = KeyHasher::with_seed(SEED);
        let mut rng = Rng(0x5eed_f100d);
        let mut keys = Vec::new();
        for class in 0..CLASSES as u64 {
            // Partition class * 256 + 7, bucket bits and tag fixed per class.
            let want = (class * 256 + 7) << 52 | 0x9e37_0000 | class;
            let mut made = 0;
            for _ in 0..100_000 {
                if made == PER_CLASS {
                    break;
                }
                let free = rng.next();
                let y = u128::from(want | (free & 0x000f_0000_0000_0000)) | u128::from(free) << 64;
                // SAFETY: as above.
                let m = (unsafe { aes.decrypt(y) } ^ x0).to_le_bytes();
                if !m.iter().all(|&b| key_byte(b)) {
                    continue;
                }
                let h = server.hash(&m);
                assert!(
                    same_buckets_everywhere(h, want),
                    "forged key hashes to {h:#x}, not into {want:#x}'s buckets"
                );
                keys.push(m.to_vec());
                made += 1;
            }
            assert_eq!(made, PER_CLASS, "class {class}: too few text-safe keys");
        }
        return Some(keys);
    }
    None
}

/// Appends a `set` of `key` (noreply) to `req`.
fn set_request(req: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    req.extend_from_slice(b"set ");
    req.extend_from_slice(key);
    req.extend_from_slice(format!(" 0 0 {} noreply\r\n", value.len()).as_bytes());
    req.extend_from_slice(value);
    req.extend_from_slice(b"\r\n");
}

/// Sets each key (noreply, in batches) and syncs.
fn store_all(c: &mut Client, keys: &[Vec<u8>], value: &[u8]) {
    for batch in keys.chunks(200) {
        let mut req = Vec::new();
        for k in batch {
            set_request(&mut req, k, value);
        }
        c.send(&req);
        c.sync();
    }
}

/// How many of `keys` are stored.
fn present(c: &mut Client, keys: &[Vec<u8>]) -> usize {
    let mut n = 0;
    for batch in keys.chunks(100) {
        let mut req = b"get".to_vec();
        for k in batch {
            req.push(b' ');
            req.extend_from_slice(k);
        }
        req.extend_from_slice(b"\r\n");
        c.send(&req);
        loop {
            let line = c.read_line();
            if line == b"END" {
                break;
            }
            assert!(
                line.starts_with(b"VALUE "),
                "{}",
                String::from_utf8_lossy(&line)
            );
            c.read_line();
            n += 1;
        }
    }
    n
}

fn named(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}:{i:08}").into_bytes())
        .collect()
}

fn stat(s: &HashMap<String, String>, k: &str) -> u64 {
    s.get(k)
        .unwrap_or_else(|| panic!("no STAT {k}"))
        .parse()
        .expect("a number")
}

/// One server through the phases: unrelated items; the flood (`FLOOD` keys per
/// class); as many random keys; then rounds of one more colliding key per class
/// and `ROUND_ITEMS` unrelated items in one write, until an item stored before the
/// flood is gone (known seed) or `ROUNDS` rounds ran.
fn run(env: &[(&str, &str)], flood: &[Vec<u8>]) -> Figures {
    let server = Server::tcp_env(&["-m", "64", "-t", "1"], env);
    let mut c = server.connect();
    let value = vec![b'v'; VALUE_BYTES];
    let before = named("before", BEFORE);
    store_all(&mut c, &before, &value);
    let first: Vec<Vec<u8>> = flood
        .chunks(PER_CLASS)
        .flat_map(|class| class[..FLOOD].iter().cloned())
        .collect();
    let s0 = c.stats("");
    store_all(&mut c, &first, b"x");
    let s1 = c.stats("");
    let mut rng = Rng(0xabcdef);
    let random: Vec<Vec<u8>> = (0..first.len())
        .map(|_| format!("random:{:016x}", rng.next()).into_bytes())
        .collect();
    store_all(&mut c, &random, b"x");
    let s2 = c.stats("");
    let mut f = Figures {
        flood_rebuilds: stat(&s1, "memcrab_index_rebuilds") - stat(&s0, "memcrab_index_rebuilds"),
        flood_rehashed: stat(&s1, "memcrab_index_rehashed_items")
            - stat(&s0, "memcrab_index_rehashed_items"),
        random_rebuilds: stat(&s2, "memcrab_index_rebuilds") - stat(&s1, "memcrab_index_rebuilds"),
        random_rehashed: stat(&s2, "memcrab_index_rehashed_items")
            - stat(&s1, "memcrab_index_rehashed_items"),
        flood_evictions: stat(&s1, "evictions") - stat(&s0, "evictions"),
        peak_index_bytes: stat(&s1, "hash_bytes"),
        rounds: 0,
        before_left: BEFORE,
    };
    for round in 0..ROUNDS {
        // One write: the next colliding key of each class, then unrelated items
        // that need new segments while the regrown tables are charged to -m.
        let mut req = Vec::new();
        for class in flood.chunks(PER_CLASS) {
            set_request(&mut req, &class[FLOOD + round], b"x");
        }
        for k in named(&format!("after{round}"), ROUND_ITEMS) {
            set_request(&mut req, &k, &value);
        }
        c.send(&req);
        c.sync();
        f.rounds = round + 1;
        f.before_left = present(&mut c, &before);
        if f.before_left < BEFORE {
            break;
        }
    }
    eprintln!("{env:?}: {f:?}");
    f
}

/// Forced to the seed the keys were built for, the server degrades: the first
/// key too many in each class's two buckets rebuilds its partition's table over
/// a dozen times, up to the largest size (4 MiB, charged against `-m`), and every
/// further one drops a slot; unrelated items stored while the tables are that
/// large are evicted.
#[test]
fn hash_flood_under_a_known_seed_degrades_the_server() {
    let Some(flood) = forge_colliding_keys() else {
        eprintln!("skipped: no AES-NI, so no keys can be forged for the server's hash");
        return;
    };
    let seed = SEED.to_string();
    let f = run(&[("MEMCRAB_TEST_HASH_SEED", &seed)], &flood);
    // A few buckets → 65,535, an eighth then doubling, is over 14 tables per class
    // (12 asked: the tables the preload grew start a few steps up). The random keys'
    // figures here also count maintain shrinking the tables the flood grew; the
    // other test compares flood and random keys.
    assert!(f.flood_rebuilds >= 12 * CLASSES as u64, "{f:?}");
    // Each of those rebuilds re-reads at least the class's 16 keys.
    assert!(f.flood_rehashed >= 16 * f.flood_rebuilds, "{f:?}");
    assert!(
        f.flood_evictions >= ((FLOOD - 16) * CLASSES) as u64,
        "{f:?}"
    );
    assert!(f.before_left < BEFORE, "no unrelated item evicted: {f:?}");
}

/// With a seed of its own the same keys are ordinary: the work per insert of
/// random keys, the index does not balloon, and nothing is evicted.
#[test]
fn hash_flood_keys_are_ordinary_under_a_random_seed() {
    let Some(flood) = forge_colliding_keys() else {
        eprintln!("skipped: no AES-NI, so no keys can be forged for the server's hash");
        return;
    };
    let f = run(&[], &flood);
    // Rebuilds of a few small tables either way; the flood above makes hundreds.
    assert!(f.flood_rebuilds <= f.random_rebuilds + 8, "{f:?}");
    assert!(f.flood_rehashed <= f.random_rehashed + 8 * 32, "{f:?}");
    assert!(f.peak_index_bytes < 4 << 20, "{f:?}");
    assert_eq!(f.flood_evictions, 0, "{f:?}");
    assert_eq!((f.rounds, f.before_left), (ROUNDS, BEFORE), "{f:?}");
}

/// Stops with SIGUSR1 and checks the save.
fn graceful_stop(mut s: Server) {
    s.signal("USR1");
    let st = s.wait_exit(std::time::Duration::from_secs(60));
    assert!(st.success(), "SIGUSR1 exit {st}; stderr: {}", s.stderr());
    assert!(s.stderr().contains("[restart] saved "), "{}", s.stderr());
}

/// A warm restart keeps the seed (keys built for it still collide after a restart
/// started without it), and a metadata file of format 1, from before the index
/// hash had a seed, is refused with a `[restart]` line: the cache starts empty.
#[test]
fn hash_flood_seed_survives_a_warm_restart_and_format_1_is_refused() {
    let Some(flood) = forge_colliding_keys() else {
        eprintln!("skipped: no AES-NI, so no keys can be forged for the server's hash");
        return;
    };
    let dir = common::scratch_dir("hash-restart");
    let file = dir.join("mem");
    let file = file.to_str().expect("utf-8 path");
    let args = ["-m", "64", "-t", "1", "-e", file];
    let class = &flood[..PER_CLASS];
    let seed = SEED.to_string();
    let s = Server::tcp_env(&args, &[("MEMCRAB_TEST_HASH_SEED", &seed)]);
    store_all(&mut s.connect(), &class[..16], b"x");
    graceful_stop(s);
    // No seed given: the saved one comes back, so the class still fills its two
    // buckets and the 17th key rebuilds the table to the largest size.
    let s = Server::tcp_env(&args, &[]);
    assert!(
        s.stderr().contains("[restart] warm restart from"),
        "{}",
        s.stderr()
    );
    let mut c = s.connect();
    assert_eq!(present(&mut c, &class[..16]), 16);
    let r0 = c.stat("memcrab_index_rebuilds");
    store_all(&mut c, &class[16..17], b"x");
    let r1 = c.stat("memcrab_index_rebuilds");
    assert!(
        r1 - r0 >= 12,
        "{r0} -> {r1} rebuilds: the seed was not kept"
    );
    drop(c);
    graceful_stop(s);
    let meta = dir.join("mem.meta");
    let mut b = std::fs::read(&meta).expect("read the metadata");
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&meta, &b).expect("write the metadata");
    let s = Server::tcp_env(&args, &[]);
    let line = s
        .stderr()
        .lines()
        .find(|l| l.starts_with("[restart] memory file"))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no [restart] line: {}", s.stderr()));
    assert!(
        line.contains("starting with an empty cache")
            && line.contains("another version (format 1, this memcrab reads 3)"),
        "{line}"
    );
    assert_eq!(present(&mut s.connect(), &class[..17]), 0);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
