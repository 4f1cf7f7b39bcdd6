//! What the text and meta parsers need to know of the server's settings, and the
//! item-size rule they apply with it. Imports nothing of `text`.

/// What the parser needs to know of the server's settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// `-I`: the largest item, counted as memcached counts it (see [`item_size_ok`]).
    pub item_size_max: usize,
    /// `-C` turns CAS off, which makes each item 8 bytes smaller for `-I`.
    pub use_cas: bool,
    /// The longest multi-get line we buffer before closing the connection. memcached
    /// has no bound (it reallocates); we keep per-connection memory bounded.
    pub max_get_line: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            item_size_max: memcrab_limits::ITEM_SIZE_MAX_DEFAULT,
            use_cas: true,
            max_get_line: 1024 * 1024,
        }
    }
}

/// memcached's `item_size_ok` ([`memcrab_limits::item_size_ok`]) under these settings:
/// whether an item with this key, flags and value fits in `-I`.
pub fn item_size_ok(key_len: usize, flags: u32, value_len: usize, cfg: &Config) -> bool {
    memcrab_limits::item_size_ok(key_len, flags, value_len, cfg.use_cas, cfg.item_size_max)
}
