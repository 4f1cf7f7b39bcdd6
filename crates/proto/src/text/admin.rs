//! The admin commands operators and deployment scripts send: `lru_crawler` (crawls
//! and key dumps), `slabs` (page moves, automove), `lru` (LRU tuning) and `watch`
//! (log streams), as memcached 1.6.45's `process_lru_crawler_command`,
//! `process_slabs_command`, `process_lru_command` and `process_watch_command` accept
//! them. The parser ([`super::parse`]) builds these;
//! the server decides what each means for its engine and answers.
//!
//! Imports only [`crate::num`] (for class lists).

use crate::num::safe_strtoul;

/// memcached's `MAX_NUMBER_OF_SLAB_CLASSES`: class ids are 1..=63.
pub const CLASS_MAX: u32 = 63;

/// An admin request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admin {
    /// `lru_crawler crawl|metadump|mgdump <classes>`.
    Crawl { kind: CrawlKind, classes: Classes },
    /// `lru_crawler tocrawl <items>`.
    CrawlerTocrawl(u32),
    /// `lru_crawler sleep <microseconds>`; the server checks the range.
    CrawlerSleep(u32),
    /// `lru_crawler enable` (`true`) or `disable`.
    CrawlerEnable(bool),
    /// `slabs reassign <src> <dst>`.
    SlabsReassign { src: i32, dst: i32 },
    /// `slabs automove <level>`; the server checks the range.
    SlabsAutomove { level: u32, noreply: bool },
    /// `slabs automove ratio <ratio>`.
    SlabsAutomoveRatio { ratio: Float, noreply: bool },
    /// `slabs automove freeratio <ratio>` (memcached 1.6.34).
    SlabsAutomoveFreeratio { ratio: Float, noreply: bool },
    /// `slabs automove window <seconds>` (memcached 1.6.42 checks its range); the
    /// server checks the range.
    SlabsAutomoveWindow { window: u32, noreply: bool },
    /// `lru tune <hot pct> <warm pct> <hot max factor> <warm max factor>`; the server
    /// checks the ranges.
    LruTune {
        hot_pct: u32,
        warm_pct: u32,
        hot_factor: Float,
        warm_factor: Float,
        noreply: bool,
    },
    /// `lru mode flat|segmented`.
    LruMode { segmented: bool, noreply: bool },
    /// `lru temp_ttl <seconds>`; negative turns the temporary LRU off.
    LruTempTtl { ttl: i32, noreply: bool },
    /// `watch [event types]`: the `LOG_*` bits of [`super::watch`], or `None` when
    /// an argument names no event type (`ERROR`, once the server has checked `-W`
    /// and pipelining, in memcached's order).
    Watch { events: Option<u16>, noreply: bool },
}

/// What an `lru_crawler` run does with each item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrawlKind {
    /// `crawl`: free expired items.
    Crawl,
    /// `metadump`: one `key=… exp=… la=… cas=… fetch=… cls=… size=…` line per item.
    Metadump,
    /// `mgdump` (memcached 1.6.19): one `mg <key>` line per item.
    Mgdump,
}

/// The items an `lru_crawler` run covers (`crawler.c`'s `lru_crawler_crawl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Classes {
    All,
    /// Walk the hash table instead of the LRUs (metadump and mgdump only).
    Hash,
    /// These class ids (bit `n` for class `n`, 1..=[`CLASS_MAX`]).
    List(u64),
    /// Not `all`, `hash`, or a comma-separated list of class ids: `BADCLASS`.
    Bad,
}

impl Classes {
    /// Parses the argument as memcached does: `all`, `hash`, or ids separated by
    /// commas (empty pieces are skipped, as `strtok_r` skips them), each a number
    /// `safe_strtoul` accepts in 1..=63.
    pub fn parse(tok: &[u8]) -> Classes {
        match tok {
            b"all" => return Classes::All,
            b"hash" => return Classes::Hash,
            _ => {}
        }
        let mut set = 0u64;
        for piece in tok.split(|&b| b == b',').filter(|p| !p.is_empty()) {
            match safe_strtoul(piece) {
                Ok(id) if (1..=CLASS_MAX).contains(&id) => set |= 1 << id,
                _ => return Classes::Bad,
            }
        }
        Classes::List(set)
    }

    /// Whether items of class `class` are covered (for `All` and `Hash`, all are).
    pub fn covers(self, class: u8) -> bool {
        match self {
            Classes::All | Classes::Hash => true,
            Classes::List(set) => class < 64 && set & (1 << class) != 0,
            Classes::Bad => false,
        }
    }
}

/// A number `safe_strtod` accepted. Compared by its bits, so that requests stay `Eq`.
#[derive(Clone, Copy, Debug)]
pub struct Float(pub f64);

impl PartialEq for Float {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Float {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover() {
        let list = Classes::parse(b"1,3");
        assert!(list.covers(1) && list.covers(3) && !list.covers(2) && !list.covers(64));
        assert!(Classes::All.covers(2) && Classes::Hash.covers(40));
        assert!(!Classes::Bad.covers(1));
        assert_eq!(Classes::parse(b"+2"), Classes::List(0b100));
        assert_eq!(Classes::parse(b"1,x"), Classes::Bad);
    }
}
