//! The reference engine's operations past the lookup: creating an item a miss asks
//! for (`vivify`, `vivify_counter`), and the bodies of store, delete and incr/decr
//! once the key's shard is locked (`store_locked`, `delete_live`, `delta_live`).
//! [`Engine`]'s methods in `mod.rs` look the key up and call these.
//!
//! Locks: `vivify` and `vivify_counter` reserve memory and then take the key's shard
//! lock themselves (no lock held on entry); the others take the locked shard
//! (`&mut Shard`) and take no other lock.
//!
//! Imports: `super::Reference` (its fields and helpers), shard.
//!
//! [`Engine`]: crate::Engine

use std::sync::atomic::Ordering;

use super::shard::{make_data, Epoch, Shard, ITEM_OVERHEAD_BYTES};
use super::{Reference, DELTA_MAX_GROWTH_BYTES};
use crate::clock::RelTime;
use crate::{
    apply_delta, memcached_item_bytes, note_dead, Counter, Dead, DeleteOpts, DeleteResult, Delta,
    DeltaOpts, Engine, Fetch, GetOpts, Item, Mode, StoreOpts, StoreResult, Vivify,
};

impl Reference {
    /// [`GetOpts::vivify`] after a miss: reserve, then create the empty item unless
    /// another request made the key live meanwhile (then it is an ordinary hit).
    pub(super) fn vivify(
        &self,
        key: &[u8],
        (hash, si): (u64, usize),
        opts: &GetOpts,
        ttl: RelTime,
        miss: Fetch,
        visit: &mut dyn FnMut(Item<'_>) -> bool,
    ) -> Fetch {
        let need = key.len() as u64 + ITEM_OVERHEAD_BYTES;
        if !self.reserve(need, si) {
            self.outofmemory.fetch_add(1, Ordering::Relaxed);
            return miss;
        }
        let e = self.epoch();
        let mut sh = self.shards[si].lock();
        if let Ok(idx) = sh.find_live(hash, key, e, &self.used) {
            self.unreserve(need);
            return self.visit_hit(&mut sh, idx, opts, e.now, visit);
        }
        let cas = self.new_cas(opts.new_cas);
        let (idx, _) = sh.insert(
            hash,
            key.len() as u8,
            make_data(key, &[]),
            0,
            ttl,
            e.now,
            cas,
        );
        let s = &sh.slots[idx as usize];
        let won = visit(Item {
            key: s.key(),
            value: s.value(),
            flags: 0,
            cas: self.cas_out(s.cas),
            exptime: 0,
            atime: s.time,
            fetched: false,
            stale: false,
            token_sent: false,
            created: true,
            replaced: miss.dead(),
            lender: None,
        });
        if won {
            sh.slots[idx as usize].token_sent = true;
        }
        // memcached's mg bumps the item it vivified too (FETCHED from then on).
        if !opts.no_bump {
            sh.bump_fetch(idx, e.now);
        }
        Fetch::Hit
    }

    /// [`DeltaOpts::vivify`] after a miss: create the counter unless another request
    /// made the key live meanwhile (then the delta is applied to it after all).
    pub(super) fn vivify_counter(
        &self,
        key: &[u8],
        (hash, si): (u64, usize),
        incr: bool,
        delta: u64,
        opts: &DeltaOpts,
        v: Vivify,
    ) -> Delta {
        let digits = v.initial.to_string();
        let need = (key.len() + digits.len()) as u64 + ITEM_OVERHEAD_BYTES;
        if !self.reserve(need, si) {
            self.outofmemory.fetch_add(1, Ordering::Relaxed);
            return Delta::OutOfMemory;
        }
        let e = self.epoch();
        let mut sh = self.shards[si].lock();
        if sh.find_live(hash, key, e, &self.used).is_ok() {
            self.unreserve(need);
            drop(sh);
            // (The dead item, if any, was met by the caller's lookup.)
            return self.delta(key, incr, delta, opts);
        }
        let data = make_data(key, &[digits.as_bytes()]);
        let cas = self.new_cas(opts.new_cas);
        let (_, cas) = sh.insert(hash, key.len() as u8, data, 0, v.exptime, e.now, cas);
        Delta::Value(Counter {
            value: v.initial,
            cas: self.cas_out(cas),
            exptime: 0,
            created: true,
        })
    }

    /// The body of [`Engine::store`], with the shard locked and `reserved` bytes
    /// already counted in `used` (the request's fields travel unbundled, as in the
    /// trait method); a dead item met is noted in `dead`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn store_locked(
        &self,
        sh: &mut Shard,
        mode: Mode,
        hash: u64,
        key: &[u8],
        flags: u32,
        exptime: RelTime,
        value: &[u8],
        reserved: u64,
        opts: &StoreOpts,
        dead: &mut Option<Dead>,
    ) -> StoreResult {
        let e = self.epoch();
        let old = sh
            .find_live(hash, key, e, &self.used)
            .map_err(|found| note_dead(dead, found))
            .ok();
        let klen = key.len() as u8;
        // memcached's do_store_item: a set or replace with a unique is a cas.
        let (mode, cas_want) = match mode {
            Mode::Cas(c) => (Mode::Set, Some(c)),
            Mode::Set | Mode::Replace if opts.compare_cas.is_some() => {
                (Mode::Set, opts.compare_cas)
            }
            m => (m, None),
        };
        // Items carry no unique under -C: every requested unique compares as 0.
        let want = |c: u64| if self.use_cas { c } else { 0 };
        let refuse = |r: StoreResult| {
            self.unreserve(reserved);
            r
        };
        // (exptime, token_sent) of the old item for a stale store (`ms I`).
        let mut stale_from: Option<(RelTime, bool)> = None;
        let (data, flags, exptime) = match (cas_want, mode, old) {
            (Some(_), _, None) => return refuse(StoreResult::NotFound),
            (Some(c), _, Some(idx)) => {
                let w = want(c);
                let s = &sh.slots[idx as usize];
                let have = self.cas_out(s.cas);
                if w != 0 && w == have {
                    (make_data(key, &[value]), flags, exptime)
                } else if opts.invalidate && w != 0 && w < have {
                    stale_from = Some((s.exptime, s.token_sent));
                    (make_data(key, &[value]), flags, s.exptime)
                } else {
                    return refuse(StoreResult::Exists);
                }
            }
            (None, Mode::Add, Some(idx)) => {
                // memcached refreshes the existing item on a failed add.
                sh.bump(idx);
                sh.slots[idx as usize].time = e.now;
                return refuse(StoreResult::NotStored);
            }
            (None, Mode::Replace, None) => return refuse(StoreResult::NotStored),
            (None, Mode::Append | Mode::Prepend, None) => match opts.vivify {
                Some(t) => (make_data(key, &[value]), flags, t),
                None => return refuse(StoreResult::NotStored),
            },
            (None, Mode::Append | Mode::Prepend, Some(idx)) => {
                let s = &sh.slots[idx as usize];
                if let Some(c) = opts.compare_cas {
                    let w = want(c);
                    if w != 0 && w != self.cas_out(s.cas) {
                        return refuse(StoreResult::Exists);
                    }
                }
                let joined = s.value().len() + value.len();
                // memcached cannot allocate a joined item over -I: NOT_STORED.
                if self.item_size_max != 0
                    && memcached_item_bytes(key.len(), s.flags, joined, self.use_cas)
                        > self.item_size_max
                {
                    return refuse(StoreResult::NotStored);
                }
                let parts: [&[u8]; 2] = if mode == Mode::Append {
                    [s.value(), value]
                } else {
                    [value, s.value()]
                };
                (make_data(key, &parts), s.flags, s.exptime)
            }
            _ => (make_data(key, &[value]), flags, exptime),
        };
        let charge = data.len() as u64 + ITEM_OVERHEAD_BYTES;
        // The reservation was an estimate for append/prepend; settle the difference.
        if charge > reserved {
            self.used.fetch_add(charge - reserved, Ordering::Relaxed);
        } else {
            self.unreserve(reserved - charge);
        }
        if let Some(idx) = old {
            sh.remove(idx, &self.used);
        }
        let (idx, cas) = sh.insert(
            hash,
            klen,
            data,
            flags,
            exptime,
            e.now,
            self.new_cas(opts.new_cas),
        );
        if let Some((_, token_sent)) = stale_from {
            let s = &mut sh.slots[idx as usize];
            s.stale = true;
            s.token_sent = token_sent;
        }
        StoreResult::Stored(self.cas_out(cas))
    }

    /// [`Engine::delete`] of the live item at `idx`.
    pub(super) fn delete_live(&self, sh: &mut Shard, idx: u32, opts: &DeleteOpts) -> DeleteResult {
        if let Some(c) = opts.compare_cas {
            if self.cas_out(sh.slots[idx as usize].cas) != c {
                return DeleteResult::Exists;
            }
        }
        if !opts.invalidate {
            sh.remove(idx, &self.used);
            return DeleteResult::Deleted;
        }
        let cas = match self.new_cas(opts.new_cas) {
            Some(c) => c,
            None => sh.next_cas(),
        };
        let s = &mut sh.slots[idx as usize];
        if let Some(t) = opts.touch {
            s.exptime = t;
        }
        s.stale = true;
        s.token_sent = false;
        s.cas = cas;
        DeleteResult::Invalidated(self.cas_out(cas))
    }

    /// [`Engine::delta`] on the live item at `idx` (found at `e` under `hash`), with
    /// `DELTA_MAX_GROWTH_BYTES` reserved.
    pub(super) fn delta_live(
        &self,
        sh: &mut Shard,
        (idx, hash, e): (u32, u64, Epoch),
        key: &[u8],
        incr: bool,
        delta: u64,
        opts: &DeltaOpts,
    ) -> Delta {
        let explicit = self.new_cas(opts.new_cas);
        let (old_len, item_cas, chunked) = {
            let s = &sh.slots[idx as usize];
            let len = s.value().len();
            let chunked = memcrab_limits::memcached_chunked(key.len(), s.flags, len, self.use_cas);
            (len, self.cas_out(s.cas), chunked)
        };
        // memcached's do_add_delta: empty (or chunked) values first, then the CAS,
        // then the number.
        if old_len == 0 || chunked {
            self.unreserve(DELTA_MAX_GROWTH_BYTES);
            return Delta::NonNumeric;
        }
        if let Some(c) = opts.compare_cas {
            if c != 0 && c != item_cas {
                self.unreserve(DELTA_MAX_GROWTH_BYTES);
                return Delta::Exists;
            }
        }
        let Some((n, digits)) = apply_delta(sh.slots[idx as usize].value(), incr, delta) else {
            self.unreserve(DELTA_MAX_GROWTH_BYTES);
            return Delta::NonNumeric;
        };
        let old_exptime = sh.slots[idx as usize].exptime;
        let new_exptime = opts.touch.unwrap_or(old_exptime);
        if digits.len() <= old_len {
            // memcached rewrites a counter in place when the new number fits (padded
            // with spaces by apply_delta): same item, new CAS, no new link.
            self.unreserve(DELTA_MAX_GROWTH_BYTES);
            let cas = match explicit {
                Some(c) => c,
                None => sh.next_cas(),
            };
            let s = &mut sh.slots[idx as usize];
            let klen = usize::from(s.klen);
            s.data[klen..].copy_from_slice(&digits);
            s.cas = cas;
            s.time = e.now;
            s.exptime = new_exptime;
            return Delta::Value(Counter {
                value: n,
                cas: self.cas_out(cas),
                exptime: old_exptime,
                created: false,
            });
        }
        let flags = sh.slots[idx as usize].flags;
        let growth = (digits.len() - old_len) as u64;
        self.unreserve(DELTA_MAX_GROWTH_BYTES - growth.min(DELTA_MAX_GROWTH_BYTES));
        let data = make_data(key, &[&digits]);
        // The new item's charge is the old one plus `growth`, which is reserved.
        let old_charge = sh.slots[idx as usize].charge();
        sh.remove(idx, &self.used);
        self.used.fetch_add(old_charge, Ordering::Relaxed);
        let (_, cas) = sh.insert(
            hash,
            key.len() as u8,
            data,
            flags,
            new_exptime,
            e.now,
            explicit,
        );
        Delta::Value(Counter {
            value: n,
            cas: self.cas_out(cas),
            exptime: old_exptime,
            created: false,
        })
    }
}
