//! Request counters (the data under `stats`), kept per worker so that counting takes no shared lock and no
//! contended cache line, and summed only when a client asks for `stats`.
//!
//! Each worker owns one [`Counters`]; only that worker's thread writes it, with a
//! relaxed load and store (no read-modify-write instruction is needed for a single
//! writer). `stats` reads every worker's counters with relaxed loads: a total may
//! miss requests still in flight, which memcached's totals do too. `stats reset` does
//! not write to other threads' counters: it records the current totals as a baseline
//! that later reports subtract. [`Counters::count_dead`] counts a dead item a
//! command's lookup met, as memcached's `do_item_get` does.

use std::sync::atomic::{AtomicU64, Ordering};

use memcrab_store::Dead;

/// A counter written by one thread and read by any.
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn incr(&self) {
        self.add(1);
    }

    /// Adds `n`. Only the owning worker calls this, so load-then-store cannot lose an
    /// update; Relaxed suffices because readers need no ordering with other data.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// One worker's counters, named as memcached's stats.
        #[derive(Default, Debug)]
        pub struct Counters {
            $(pub $name: Counter,)*
        }

        /// A snapshot or sum of [`Counters`].
        #[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Totals {
            $(pub $name: u64,)*
        }

        impl Counters {
            pub fn snapshot(&self) -> Totals {
                Totals { $($name: self.$name.get(),)* }
            }
        }

        impl Totals {
            pub fn add(&mut self, o: &Totals) {
                $(self.$name = self.$name.wrapping_add(o.$name);)*
            }

            pub fn since(&self, base: &Totals) -> Totals {
                Totals { $($name: self.$name.wrapping_sub(base.$name),)* }
            }
        }
    };
}

counters!(
    cmd_get,
    cmd_set,
    cmd_flush,
    cmd_touch,
    cmd_meta,
    get_hits,
    get_misses,
    get_expired,
    get_flushed,
    delete_misses,
    delete_hits,
    incr_misses,
    incr_hits,
    decr_misses,
    decr_hits,
    cas_misses,
    cas_hits,
    cas_badval,
    touch_hits,
    touch_misses,
    store_too_large,
    store_no_memory,
    idle_kicks,
    auth_cmds,
    auth_errors,
    conn_yields,
    bytes_read,
    bytes_written,
    values_lent,
);

impl Counters {
    /// Counts an incr (`incr`) or decr that found its item (`hit`) or did not.
    #[inline]
    pub fn count_delta(&self, incr: bool, hit: bool) {
        match (incr, hit) {
            (true, true) => self.incr_hits.incr(),
            (true, false) => self.incr_misses.incr(),
            (false, true) => self.decr_hits.incr(),
            (false, false) => self.decr_misses.incr(),
        }
    }
}

impl Counters {
    /// Counts the dead item a lookup met as `get_expired` or `get_flushed`, as
    /// memcached's `do_item_get` does for every command that looks its key up.
    #[inline(always)]
    pub fn count_dead(&self, dead: Option<Dead>) {
        if let Some(d) = dead {
            self.count_dead_met(d);
        }
    }

    #[cold]
    #[inline(never)]
    fn count_dead_met(&self, dead: Dead) {
        match dead {
            Dead::Expired => self.get_expired.incr(),
            Dead::Flushed => self.get_flushed.incr(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_baseline() {
        let a = Counters::default();
        let b = Counters::default();
        a.get_hits.add(3);
        b.get_hits.incr();
        b.bytes_read.add(100);
        let mut t = a.snapshot();
        t.add(&b.snapshot());
        assert_eq!((t.get_hits, t.bytes_read), (4, 100));
        let base = t;
        a.get_hits.incr();
        let mut t2 = a.snapshot();
        t2.add(&b.snapshot());
        assert_eq!(t2.since(&base).get_hits, 1);
    }
}
