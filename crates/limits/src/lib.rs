//! memcrab-limits: memcached's limits, defined once.
//!
//! proto rejects requests by these rules, store applies them when an item grows
//! (append, prepend), and the server reports them (`stats settings`, `me`). proto and
//! store never depend on each other, so the rules they share live here, in a crate
//! that depends on nothing.
//!
//! ```text
//!   proto ──┐
//!   store ──┼──► limits
//!   server ─┘
//! ```

/// Longest key memcached accepts (`KEY_MAX_LENGTH`, memcached.h; protocol.txt "Keys").
pub const KEY_MAX_LEN: usize = 250;

/// memcached's `sizeof(item)` on 64-bit: the header it counts against `-I`.
pub const MEMCACHED_ITEM_HEADER_BYTES: usize = 48;

/// memcached's default `-I` (`item_size_max`): 1 MiB.
pub const ITEM_SIZE_MAX_DEFAULT: usize = 1024 * 1024;

/// An item's size as memcached counts it against `-I` (`item_make_header` plus
/// `sizeof(item)`): its 48-byte header, the key and a NUL, 4 bytes of flags when they
/// are non-zero, the value and its `\r\n`, and 8 bytes of CAS unless `-C`.
pub fn memcached_item_bytes(key_len: usize, flags: u32, value_len: usize, use_cas: bool) -> usize {
    let flags_len = if flags == 0 { 0 } else { 4 };
    let cas_len = if use_cas { 8 } else { 0 };
    MEMCACHED_ITEM_HEADER_BYTES + key_len + 1 + flags_len + value_len + 2 + cas_len
}

/// memcached's `item_size_ok`: would an item with this key, flags and value fit in
/// `-I` (`item_size_max`)? The largest value accepted is a little under `-I`, exactly
/// where memcached draws the line.
pub fn item_size_ok(
    key_len: usize,
    flags: u32,
    value_len: usize,
    use_cas: bool,
    item_size_max: usize,
) -> bool {
    memcached_item_bytes(key_len, flags, value_len, use_cas) <= item_size_max
}

/// memcached's default `slab_chunk_max` (half its 1 MiB slab page): larger items are
/// stored in chunks.
pub const SLAB_CHUNK_MAX_DEFAULT: usize = 512 * 1024;

/// Would memcached store this item in chunks (`ITEM_CHUNKED`: its size over
/// `slab_chunk_max`, at its default)? incr/decr refuse such an item as non-numeric
/// before they compare its CAS unique or look at its value (`do_add_delta`).
pub fn memcached_chunked(key_len: usize, flags: u32, value_len: usize, use_cas: bool) -> bool {
    memcached_item_bytes(key_len, flags, value_len, use_cas) > SLAB_CHUNK_MAX_DEFAULT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_size_counts_header_key_flags_crlf_and_cas() {
        // 48 + 1 + 1 + 0 + v + 2 + 8 = 60 + v.
        assert_eq!(memcached_item_bytes(1, 0, 0, true), 60);
        assert_eq!(memcached_item_bytes(1, 1, 0, true), 64);
        assert_eq!(memcached_item_bytes(1, 0, 0, false), 52);
        assert!(item_size_ok(1, 0, 1024 - 60, true, 1024));
        assert!(!item_size_ok(1, 0, 1024 - 59, true, 1024));
        assert!(!item_size_ok(1, 1, 1024 - 60, true, 1024));
        assert!(item_size_ok(1, 0, 1024 - 52, false, 1024));
    }

    #[test]
    fn chunked_over_half_a_megabyte() {
        // Measured on memcached 1.6.18: key "k", flags 0, CAS on: a value of 524228
        // bytes is whole, 524229 chunked; key "kk" with flags: 524223 / 524224.
        assert!(!memcached_chunked(1, 0, 524_228, true));
        assert!(memcached_chunked(1, 0, 524_229, true));
        assert!(!memcached_chunked(2, 5, 524_223, true));
        assert!(memcached_chunked(2, 5, 524_224, true));
    }
}
