//! The cache's coarse clock, in whole seconds, as memcached keeps it.
//!
//! memcached stores times as `rel_time_t`: seconds since the process started, updated
//! once per tick rather than read per request. We do the same: [`Clock::now`] is a
//! relaxed atomic load, and a ticker (the server's, or a test driving time by hand)
//! moves it forward.
//!
//! Locks: none; the time is one relaxed atomic.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Largest relative exptime; larger values are absolute unix times
/// (`REALTIME_MAXDELTA`, memcached.h; protocol.txt "Expiration times").
pub const REALTIME_MAXDELTA_SECS: i64 = 60 * 60 * 24 * 30;

/// A relative time in seconds since the clock's epoch. 0 means "never" for exptimes.
pub type RelTime = u32;

/// The relative time at startup: memcached sets `process_started` to
/// `time(0) - ITEM_UPDATE_INTERVAL - 2`, so its `current_time` starts at 62. It shows
/// on the wire: an item whose exptime is 1 (a negative or past TTL given by `mg`'s
/// `T` or `N`) reports `t` as `1 - current_time`, printed unsigned.
pub const START: RelTime = 62;

#[derive(Debug)]
pub struct Clock {
    /// Unix time of relative second 0: [`START`] seconds before the real start, as
    /// memcached's `process_started`, so that `now()` is never 0 (0 means "never" in
    /// exptimes).
    epoch_unix_secs: i64,
    started: Instant,
    /// The relative time at `started` ([`START`], or where a warm restart resumed).
    base: u32,
    /// Seconds since `epoch_unix_secs`. Written by `tick`/`set` (one ticker thread),
    /// read by every request; Relaxed suffices because a reader only needs some
    /// recent value, not ordering with other memory.
    now: AtomicU32,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    pub fn new() -> Self {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        Clock {
            epoch_unix_secs: unix - i64::from(START),
            started: Instant::now(),
            base: START,
            now: AtomicU32::new(START),
        }
    }

    /// A clock that goes on from relative time `now` (a warm restart: the saved
    /// clock plus the time spent down), so that saved exptimes and access times keep
    /// their meaning; relative 0 is `now` seconds before this unix second.
    pub fn resumed(now: RelTime) -> Self {
        let now = now.max(START);
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        Clock {
            epoch_unix_secs: unix - i64::from(now),
            started: Instant::now(),
            base: now,
            now: AtomicU32::new(now),
        }
    }

    /// The current relative time.
    #[inline]
    pub fn now(&self) -> RelTime {
        self.now.load(Ordering::Relaxed)
    }

    /// Re-reads the monotonic clock. Call a few times a second.
    pub fn tick(&self) {
        let secs = self
            .started
            .elapsed()
            .as_secs()
            .saturating_add(u64::from(self.base))
            .min(u64::from(u32::MAX)) as u32;
        self.now.fetch_max(secs, Ordering::Relaxed);
    }

    /// Sets the relative time by hand (tests).
    pub fn set(&self, now: RelTime) {
        self.now.store(now, Ordering::Relaxed);
    }

    /// The unix time now, as the clock sees it.
    pub fn unix_now(&self) -> i64 {
        self.to_unix(self.now())
    }

    /// The unix time of relative time `t` (memcached's `t + process_started`).
    pub fn to_unix(&self, t: RelTime) -> i64 {
        self.epoch_unix_secs + i64::from(t)
    }

    /// Seconds since the server started (the `uptime` stat); after a warm restart,
    /// since the first start, as memcached counts it.
    pub fn uptime_secs(&self) -> u32 {
        // memcached: `current_time - ITEM_UPDATE_INTERVAL`, 2 at startup.
        self.now().saturating_sub(START - 2)
    }

    /// memcached's `realtime(EXPTIME_TO_POSITIVE_TIME(exptime))`: a wire exptime to a
    /// relative time. 0 is "never"; up to 30 days is relative to now; anything larger
    /// is a unix time, and one at or before the epoch becomes 1 (already expired);
    /// negative values are turned into such a past absolute time.
    pub fn realtime(&self, exptime: i64) -> RelTime {
        let exptime = if exptime < 0 {
            REALTIME_MAXDELTA_SECS + 1
        } else {
            exptime
        };
        if exptime == 0 {
            return 0;
        }
        if exptime > REALTIME_MAXDELTA_SECS {
            if exptime <= self.epoch_unix_secs {
                return 1;
            }
            return (exptime - self.epoch_unix_secs).min(i64::from(u32::MAX)) as RelTime;
        }
        (exptime + i64::from(self.now())).min(i64::from(u32::MAX)) as RelTime
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_rules() {
        let c = Clock::new();
        c.set(100);
        assert_eq!(c.realtime(0), 0);
        assert_eq!(c.realtime(10), 110);
        assert_eq!(
            c.realtime(REALTIME_MAXDELTA_SECS),
            100 + REALTIME_MAXDELTA_SECS as u32
        );
        // Negative and absolute-in-the-past both expire at once.
        assert_eq!(c.realtime(-1), 1);
        assert_eq!(c.realtime(REALTIME_MAXDELTA_SECS + 1), 1);
        let future = c.unix_now() + 50;
        assert_eq!(c.realtime(future), 150);
    }

    #[test]
    fn tick_never_goes_back() {
        let c = Clock::new();
        c.set(1000);
        c.tick();
        assert_eq!(c.now(), 1000);
    }
}
