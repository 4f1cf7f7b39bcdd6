//! memcrab-store: the cache engine, with memcached's semantics and no wire knowledge.
//!
//! Goals: every operation memcached's protocols need (get, get-and-touch, touch, the
//! six storage modes, delete, incr/decr, flush with delay), memcached's exact
//! semantics for each (CAS uniqueness, append keeping flags, the incr in-place
//! padding, lazy expiry, flush by time and by CAS), memory bounded by a byte limit
//! with eviction (or out-of-memory errors with `-M`), and counters for `stats`.
//!
//! Non-goals: parsing, sockets, reply formats. Times are [`clock::RelTime`] seconds;
//! the server turns wire exptimes into them with [`clock::Clock::realtime`].
//!
//! ```text
//!   server worker ──► dyn Engine ──► reference::Reference   (sharded maps + LRU)
//!                                └─► (the fast segment engine, a later issue)
//! ```
//!
//! [`Engine`] is the contract both engines keep; the reference engine is the simple
//! model that property tests hold faster engines against.

pub mod clock;
pub mod reference;

pub use clock::{Clock, RelTime};

/// How a storage request treats an existing item (protocol.txt "Storage commands").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Store unconditionally.
    Set,
    /// Store only if the key holds no live item.
    Add,
    /// Store only if the key holds a live item.
    Replace,
    /// Add the data after the existing value, keeping its flags and exptime.
    Append,
    /// Add the data before the existing value, keeping its flags and exptime.
    Prepend,
    /// Store only if the item's CAS unique equals this one. 0 never matches (as in
    /// memcached), nor does anything when CAS is disabled.
    Cas(u64),
}

/// The result of a storage request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreResult {
    /// Stored; the new item's CAS unique.
    Stored(u64),
    /// Add on a live key, or replace/append/prepend on a missing one.
    NotStored,
    /// CAS mismatch.
    Exists,
    /// CAS on a missing key.
    NotFound,
    /// No memory, and eviction is off (`-M`) or could not free enough.
    OutOfMemory,
}

/// A live item, lent to a [`Engine::get`] visitor.
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub flags: u32,
    /// 0 when CAS is disabled (`-C`).
    pub cas: u64,
}

/// What a lookup found, for the `get_hits`/`get_expired`/`get_flushed` counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fetch {
    Hit,
    Miss,
    /// The key held an item whose exptime had passed.
    Expired,
    /// The key held an item invalidated by `flush_all`.
    Flushed,
}

impl Fetch {
    pub fn is_hit(self) -> bool {
        self == Fetch::Hit
    }
}

/// The result of incr/decr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    /// The new value.
    Value(u64),
    NotFound,
    /// The value is not a decimal number of at most 20 digits.
    NonNumeric,
    OutOfMemory,
}

/// Engine settings, from the command line.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// `-m`: the most bytes items may take, overhead included.
    pub limit_bytes: u64,
    /// `false` with `-M`: answer out-of-memory instead of evicting.
    pub evict: bool,
    /// `false` with `-C`: CAS uniques are reported as 0.
    pub use_cas: bool,
    /// `-I`: append/prepend may not grow an item past this, counted as memcached
    /// counts it (see [`memcached_item_bytes`]). 0 = no limit.
    pub item_size_max: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            limit_bytes: 64 * 1024 * 1024,
            evict: true,
            use_cas: true,
            item_size_max: 1024 * 1024,
        }
    }
}

/// An item's size as memcached counts it against `-I` (`item_size_ok`): its 48-byte
/// header, the key and a NUL, 4 bytes of flags when non-zero, the value and `\r\n`,
/// and 8 bytes of CAS. memcrab-proto's `item_size_ok` applies the same rule to
/// incoming values; this one serves append and prepend, which grow items.
pub fn memcached_item_bytes(key_len: usize, flags: u32, value_len: usize, use_cas: bool) -> usize {
    48 + key_len + 1 + if flags == 0 { 0 } else { 4 } + value_len + 2 + if use_cas { 8 } else { 0 }
}

/// The engine's counters and gauges, named as memcached's stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub curr_items: u64,
    pub total_items: u64,
    /// Bytes items take now, overhead included.
    pub bytes: u64,
    pub limit_maxbytes: u64,
    pub evictions: u64,
    /// Items whose memory was taken back after they expired.
    pub reclaimed: u64,
    pub expired_unfetched: u64,
    pub evicted_unfetched: u64,
    /// Evicted items that had an exptime.
    pub evicted_nonzero: u64,
    /// Seconds between last access and eviction of the most recent evicted item.
    pub evicted_time: u32,
    /// Stores refused for lack of memory.
    pub outofmemory: u64,
    /// Seconds since the least recently used item was stored or used.
    pub oldest_item_age: u32,
    /// Flushed items freed by background upkeep (memcached's LRU crawler's count).
    pub crawler_reclaimed: u64,
    pub hash_power_level: u32,
    pub hash_bytes: u64,
}

/// The cache engine contract. All methods are safe to call from any thread at once.
///
/// Times are relative seconds from the engine's [`Clock`]; an `exptime` of 0 is
/// "never". An item is live while `exptime == 0 || exptime > now` and no flush has
/// invalidated it. Every method that meets an expired or flushed item treats the key
/// as missing.
pub trait Engine: Send + Sync {
    /// Looks a key up. On a hit, calls `visit` once with the item (while the item cannot
    /// change) and, when `touch` is `Some(exptime)`, first sets its exptime (gat).
    fn get(&self, key: &[u8], touch: Option<RelTime>, visit: &mut dyn FnMut(Item<'_>)) -> Fetch;

    /// Sets a live item's exptime. Returns whether the key was live.
    fn touch(&self, key: &[u8], exptime: RelTime) -> bool;

    /// A storage request. `flags` and `exptime` are ignored by append/prepend.
    fn store(
        &self,
        mode: Mode,
        key: &[u8],
        flags: u32,
        exptime: RelTime,
        value: &[u8],
    ) -> StoreResult;

    /// Removes a live item. Returns whether there was one.
    fn delete(&self, key: &[u8]) -> bool;

    /// incr (`incr == true`, wrapping at 2^64) or decr (stopping at 0) on a value that
    /// is a decimal number, as memcached's `do_add_delta`.
    fn delta(&self, key: &[u8], incr: bool, delta: u64) -> Delta;

    /// memcached's flush_all: with `at == None` every item stored so far becomes
    /// invalid now; with `Some(t)`, items last stored before `t` become invalid once the
    /// clock reaches `t`. A later flush replaces a pending one.
    fn flush_all(&self, at: Option<RelTime>);

    /// `cache_memlimit`: a new byte limit; the excess is evicted on later stores.
    fn set_limit(&self, limit_bytes: u64);

    /// The engine's counters.
    fn stats(&self) -> Stats;

    /// `stats reset`: zeroes the cumulative counters (not the gauges).
    fn reset_stats(&self);

    /// The clock the engine reads.
    fn clock(&self) -> &Clock;

    /// Background upkeep, called about once a second by the server's ticker (frees
    /// the items of a delayed flush_all once it is due).
    fn maintain(&self) {}
}

/// Parses an item's value as memcached's incr/decr do (`safe_strtoull` on the data):
/// optional leading whitespace and `+`, decimal digits, then whitespace or the end.
/// Values of 22 or more bytes are never numbers (`INCR_MAX_STORAGE_LEN`).
pub fn parse_counter(value: &[u8]) -> Option<u64> {
    // memcached: `it->nbytes >= INCR_MAX_STORAGE_LEN` (24, counting the `\r\n`).
    if value.is_empty() || value.len() + 2 >= 24 {
        return None;
    }
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut i = value.iter().take_while(|&&b| is_space(b)).count();
    let mut negative = false;
    if i < value.len() && (value[i] == b'+' || value[i] == b'-') {
        negative = value[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut n: u64 = 0;
    while i < value.len() && value[i].is_ascii_digit() {
        n = n.checked_mul(10)?.checked_add(u64::from(value[i] - b'0'))?;
        i += 1;
    }
    if i == start {
        return None;
    }
    // In memcached the data is followed by "\r\n", so the end is always whitespace.
    if i < value.len() && !is_space(value[i]) {
        return None;
    }
    let n = if negative { n.wrapping_neg() } else { n };
    if (n as i64) < 0 && value.contains(&b'-') {
        return None;
    }
    Some(n)
}

/// Applies incr/decr to a counter and renders the new value as memcached stores it:
/// when the new number is shorter than the old value it is padded with spaces to the
/// old length (memcached rewrites the item in place), otherwise it is exactly the
/// digits.
pub fn apply_delta(old: &[u8], incr: bool, delta: u64) -> Option<(u64, Vec<u8>)> {
    let n = parse_counter(old)?;
    let v = if incr {
        n.wrapping_add(delta)
    } else {
        n.saturating_sub(delta)
    };
    let mut out = v.to_string().into_bytes();
    if out.len() < old.len() {
        out.resize(old.len(), b' ');
    }
    Some((v, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters() {
        let rows: &[(&[u8], Option<u64>)] = &[
            (b"0", Some(0)),
            (b"10", Some(10)),
            (b"9 ", Some(9)),
            (b" 7", Some(7)),
            (b"+7", Some(7)),
            (b"18446744073709551615", Some(u64::MAX)),
            (b"18446744073709551616", None),
            (b"-1", None),
            (b"", None),
            (b"abc", None),
            (b"1a", None),
            (b"0000000000000000000001", None),
            (b"000000000000000000001", Some(1)),
        ];
        for (v, want) in rows {
            assert_eq!(parse_counter(v), *want, "{:?}", String::from_utf8_lossy(v));
        }
    }

    #[test]
    fn deltas() {
        assert_eq!(apply_delta(b"10", false, 1), Some((9, b"9 ".to_vec())));
        assert_eq!(apply_delta(b"9", true, 1), Some((10, b"10".to_vec())));
        assert_eq!(apply_delta(b"5", false, 10), Some((0, b"0".to_vec())));
        assert_eq!(
            apply_delta(b"18446744073709551615", true, 2),
            Some((1, b"1                   ".to_vec()))
        );
        assert_eq!(apply_delta(b"x", true, 1), None);
    }
}
