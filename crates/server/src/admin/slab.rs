//! memcached's slab classes, for the reports that name one: `me`'s `cls` and the
//! `clsid` of `watch`'s lines. memcrab has no slab classes; these are the classes
//! memcached's `slabs_init` builds from `-n` and `-f` with the default 1 MiB page, and
//! an item goes in the one `slabs_clsid` picks for its size as memcached counts it
//! ([`memcrab_store::memcached_item_bytes`]).
//!
//! Imports nothing of the server's.

/// memcached's `slab_chunk_size_max` with the default 1 MiB slab page.
const SLAB_CHUNK_SIZE_MAX: u32 = 512 * 1024;
/// memcached's `sizeof(item)` on 64-bit.
const ITEM_HEADER_BYTES: u32 = memcrab_limits::MEMCACHED_ITEM_HEADER_BYTES as u32;
/// memcached's `CHUNK_ALIGN_BYTES`.
const CHUNK_ALIGN_BYTES: u32 = 8;
/// memcached's `MAX_NUMBER_OF_SLAB_CLASSES`.
const MAX_SLAB_CLASSES: u32 = 64;

/// The settings that decide the classes (`-n`, `-f`, and `-C`, which changes every
/// item's size).
#[derive(Clone, Copy, Debug)]
pub struct Classes {
    pub chunk_size: u32,
    pub growth_factor: f64,
    pub use_cas: bool,
}

impl Classes {
    /// The class of an item with this key length, flags and value length.
    pub fn of(&self, key_len: usize, flags: u32, value_len: usize) -> u32 {
        let ntotal = memcrab_store::memcached_item_bytes(key_len, flags, value_len, self.use_cas);
        slab_class(
            u32::try_from(ntotal).unwrap_or(u32::MAX),
            self.chunk_size,
            self.growth_factor,
        )
    }
}

/// memcached's `slabs_clsid` over the classes `slabs_init` builds from `-n`
/// (`chunk_size`) and `-f` (`factor`) with the default slab page.
pub fn slab_class(ntotal: u32, chunk_size: u32, factor: f64) -> u32 {
    let mut size = ITEM_HEADER_BYTES + chunk_size;
    let mut id = 1;
    while id < MAX_SLAB_CLASSES - 1 {
        if f64::from(size) >= f64::from(SLAB_CHUNK_SIZE_MAX) / factor {
            break;
        }
        if !size.is_multiple_of(CHUNK_ALIGN_BYTES) {
            size += CHUNK_ALIGN_BYTES - size % CHUNK_ALIGN_BYTES;
        }
        if ntotal <= size {
            return id;
        }
        // memcached multiplies an unsigned int by a double and truncates.
        size = (f64::from(size) * factor) as u32;
        id += 1;
    }
    // The largest class holds SLAB_CHUNK_SIZE_MAX (bigger items are chunked).
    id
}

#[cfg(test)]
mod tests {
    use super::{slab_class, Classes};

    #[test]
    fn slab_classes_as_memcached() {
        // memcached -vv with defaults: class 1 is 96 bytes, 2 is 120, 3 is 152,
        // 4 is 192, ... 39 is 524288.
        assert_eq!(slab_class(60, 48, 1.25), 1);
        assert_eq!(slab_class(96, 48, 1.25), 1);
        assert_eq!(slab_class(97, 48, 1.25), 2);
        assert_eq!(slab_class(152, 48, 1.25), 3);
        assert_eq!(slab_class(153, 48, 1.25), 4);
        assert_eq!(slab_class(600_000, 48, 1.25), 39);
        let c = Classes {
            chunk_size: 48,
            growth_factor: 1.25,
            use_cas: true,
        };
        // 48 + 1 + 1 + 100 + 2 + 8 = 160 bytes: class 4.
        assert_eq!(c.of(1, 0, 100), 4);
    }
}
