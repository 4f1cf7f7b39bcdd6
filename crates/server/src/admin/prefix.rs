//! `stats detail`: per key prefix counters of gets, hits, sets and deletes, as
//! memcached's `stats_prefix.c` keeps them. The prefix is the key up to the first
//! `-D` delimiter (`:` by default); keys without one are not counted. Counting is off
//! until `stats detail on`, and costs one relaxed load per request while off.
//!
//! What is counted, as in memcached 1.6.18: every key of a text `get`/`gets`/`gat`/
//! `gats` and of a binary GET/GAT/TOUCH (a get, and a hit if found); every text
//! storage command (a set, counted before the item is stored, so also when it is
//! refused) and binary SET/ADD/REPLACE/APPEND/PREPEND; every text and binary delete
//! (counted before the lookup). Meta commands, `touch`, `incr` and `decr` are not.
//!
//! One difference: `stats detail dump` lists prefixes sorted by name; memcached lists
//! them in the order of its hash table.
//!
//! Locks: `table`'s mutex, a leaf taken per counted key while counting is on (as
//! memcached's `STATS_LOCK`) and by `stats detail dump`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

/// Counts of one prefix: gets, hits, sets, deletes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub gets: u64,
    pub hits: u64,
    pub sets: u64,
    pub deletes: u64,
}

#[derive(Debug)]
pub struct Prefixes {
    /// `stats detail on|off`. Relaxed: a setting; a request racing the switch may
    /// or may not be counted, as in memcached.
    enabled: AtomicBool,
    /// `-D`.
    delimiter: u8,
    /// Counts by prefix; see the module docs for the lock.
    table: Mutex<BTreeMap<Vec<u8>, Counts>>,
}

/// What one request counts.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    Get { hit: bool },
    Set,
    Delete,
}

impl Prefixes {
    pub fn new(delimiter: char) -> Prefixes {
        Prefixes {
            enabled: AtomicBool::new(false),
            delimiter: u8::try_from(delimiter).unwrap_or(b':'),
            table: Mutex::new(BTreeMap::new()),
        }
    }

    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Counts `op` for `key`'s prefix, if counting is on and the key has one.
    #[inline]
    pub fn record(&self, key: &[u8], op: Op) {
        if self.enabled() {
            self.count(key, op);
        }
    }

    /// `record`'s work when counting is on, kept out of line so that the check
    /// above is all a request pays when it is off (it cost 24 instructions per
    /// W1 request as one function; scripts/bench-instructions).
    #[cold]
    #[inline(never)]
    fn count(&self, key: &[u8], op: Op) {
        // memcached's stats_prefix_find: the key ends at a NUL as a C string does.
        let key = key.split(|&b| b == 0).next().unwrap_or_default();
        let Some(end) = key.iter().position(|&b| b == self.delimiter) else {
            return;
        };
        let mut table = self.table.lock();
        let c = table.entry(key[..end].to_vec()).or_default();
        match op {
            Op::Get { hit } => {
                c.gets += 1;
                c.hits += u64::from(hit);
            }
            Op::Set => c.sets += 1,
            Op::Delete => c.deletes += 1,
        }
    }

    /// `stats reset` forgets every prefix (memcached's `stats_prefix_clear`).
    pub fn clear(&self) {
        self.table.lock().clear();
    }

    /// `stats detail dump`: `PREFIX <p> get <n> hit <n> set <n> del <n>` lines, then
    /// `END`.
    pub fn dump(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        for (p, c) in self.table.lock().iter() {
            out.extend_from_slice(b"PREFIX ");
            out.extend_from_slice(p);
            let _ = write!(
                out,
                " get {} hit {} set {} del {}\r\n",
                c.gets, c.hits, c.sets, c.deletes
            );
        }
        out.extend_from_slice(b"END\r\n");
    }
}
