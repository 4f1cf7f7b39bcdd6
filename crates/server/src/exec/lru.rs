//! memcached's LRU and slab machinery commands (`proto_text.c`'s
//! `process_lru_crawler_command`, `process_slabs_command`, `process_lru_command`):
//! the key dumps, which walk the store, and the tuning commands, which memcrab
//! accepts with memcached's answers and records in [`crate::admin::tunables`] without
//! acting on them where they tune machinery it does not have (see docs/operations.md
//! for each). `watch`'s checks are in [`super::admin`].
//!
//! A key dump (`lru_crawler metadump|mgdump`) streams: it walks the store a share at
//! a time ([`memcrab_store::Engine::walk`]), appending one line per live item, and
//! pauses ([`Flow::Suspend`]) once the output passes the connection's limit or it has
//! shown [`DUMP_ITEMS_PER_TURN`] items, so a dump of any size holds at most about
//! the output limit in memory and other connections get their turn. The walk's
//! cursor waits in the request step's [`super::Resume`] until the request runs again.
//! memcached runs dumps on its crawler thread, one at a time (`BUSY` otherwise);
//! here each connection walks on its own, so dumps never answer `BUSY`.

use std::sync::atomic::Ordering;

use memcrab_proto::text::admin::{Admin, Classes, CrawlKind};
use memcrab_proto::text::meta::reply::{mgdump_line, EN};
use memcrab_proto::text::reply;
use memcrab_store::WalkCursor;

use super::{Flow, Resume};
use crate::admin::tunables::CrawlRunning;
use crate::server::Ctx;

/// Items a dump shows per turn before it lets the connection's other work run (the
/// request step counts each turn against `-R`).
const DUMP_ITEMS_PER_TURN: usize = 4096;

/// The largest class id `stats slabs` reports: 1 for items in shared segments, 2 for
/// large items in segments of their own. `slabs reassign` accepts 0 (memcached's
/// global page pool) to this.
const LARGEST_CLASS: i32 = 2;

/// `lru_crawler sleep`'s limit: one second, in microseconds.
const CRAWLER_SLEEP_MAX_US: u32 = 1_000_000;

/// `slabs automove window`'s range in seconds (memcached's
/// `process_slabs_automove_command`).
const AUTOMOVE_WINDOW_MIN: u32 = 3;
const AUTOMOVE_WINDOW_MAX: u32 = 1800;

/// `lru tune`: hot and warm together may take at most this percentage.
const LRU_HOT_WARM_PCT_MAX: u32 = 80;

/// Executes an `lru_crawler`, `slabs` or `lru` request (and hands `watch` back). `walk` is a suspended dump's cursor (see the module
/// docs); `out_limit` is where a dump pauses.
pub fn execute(
    a: Admin,
    cx: &Ctx<'_>,
    out: &mut Vec<u8>,
    resume: &mut Resume,
    out_limit: usize,
) -> Flow {
    let walk = &mut resume.walk;
    let t = &cx.server.tunables;
    let answer = |out: &mut Vec<u8>, noreply: bool, r: &[u8]| {
        if !noreply {
            out.extend_from_slice(r);
        }
    };
    match a {
        Admin::Crawl { kind, classes } => {
            if walk.is_some() {
                // A dump resuming: it was allowed when it started.
                let flow = dump(kind, classes, cx, out, walk, out_limit);
                resume.running = resume.running.take().filter(|_| walk.is_some());
                return flow;
            }
            if !t.crawler.load(Ordering::Relaxed) {
                out.extend_from_slice(reply::CRAWLER_DISABLED);
                return Flow::Next;
            }
            let refused = match kind {
                CrawlKind::Metadump => reply::METADUMP_NOT_ALLOWED,
                CrawlKind::Mgdump => reply::KEY_DUMP_NOT_ALLOWED,
                CrawlKind::Crawl => b"",
            };
            if !refused.is_empty() && !cx.server.settings.dump_enabled {
                out.extend_from_slice(refused);
                return Flow::Next;
            }
            if kind != CrawlKind::Crawl && resume.stacked {
                out.extend_from_slice(match kind {
                    CrawlKind::Mgdump => reply::CANNOT_PIPELINE_MGDUMP,
                    _ => reply::CANNOT_PIPELINE_METADUMP,
                });
                return Flow::Next;
            }
            match classes {
                Classes::Bad => out.extend_from_slice(reply::BADCLASS),
                // memcached walks its hash table for dumps only.
                Classes::Hash if kind == CrawlKind::Crawl => {
                    out.extend_from_slice(reply::CRAWLER_ERROR)
                }
                Classes::List(0) => out.extend_from_slice(reply::CRAWLER_NOT_STARTED),
                _ => {
                    t.crawler_starts.fetch_add(1, Ordering::Relaxed);
                    if kind != CrawlKind::Crawl {
                        // memcached 1.6.43: a dump that starts answers OK first.
                        out.extend_from_slice(reply::OK);
                        *walk = Some(WalkCursor::default());
                        let flow = dump(kind, classes, cx, out, walk, out_limit);
                        resume.running = walk.is_some().then(CrawlRunning::start);
                        return flow;
                    }
                    // Nothing to do: expired items are freed with their segment
                    // every second, and on sight by any lookup.
                    out.extend_from_slice(reply::OK);
                }
            }
            Flow::Next
        }
        Admin::CrawlerTocrawl(n) => {
            t.crawler_tocrawl.store(n, Ordering::Relaxed);
            out.extend_from_slice(reply::OK);
            Flow::Next
        }
        Admin::CrawlerSleep(us) => {
            if us > CRAWLER_SLEEP_MAX_US {
                out.extend_from_slice(reply::CRAWLER_SLEEP_TOO_LONG);
            } else {
                t.crawler_sleep_us.store(us, Ordering::Relaxed);
                out.extend_from_slice(reply::OK);
            }
            Flow::Next
        }
        Admin::CrawlerEnable(on) => {
            // memcached: starting the crawler thread when it runs fails; stopping
            // it always succeeds.
            let was = t.crawler.swap(on, Ordering::Relaxed);
            out.extend_from_slice(if on && was {
                reply::CRAWLER_ENABLE_FAILED
            } else {
                reply::OK
            });
            Flow::Next
        }
        Admin::SlabsReassign { src, dst } => {
            // memcached's do_slabs_reassign, for a move that always succeeds:
            // segments hold items of every size, so there is nothing to move. A
            // source of -1 asks memcached to pick a class with a page to spare;
            // there is none here, and 1.6.41's class check answers BADCLASS then.
            let class = |c: i32| (0..=LARGEST_CLASS).contains(&c);
            out.extend_from_slice(if src == dst {
                reply::REASSIGN_SAME
            } else if !class(src) || !class(dst) {
                reply::REASSIGN_BADCLASS
            } else {
                reply::OK
            });
            Flow::Next
        }
        Admin::SlabsAutomove { level, noreply } => {
            if level <= 2 {
                t.slab_automove.store(level, Ordering::Relaxed);
                answer(out, noreply, reply::OK);
            } else {
                answer(out, noreply, reply::ERROR);
            }
            Flow::Next
        }
        Admin::SlabsAutomoveWindow { window, noreply } => {
            // memcached 1.6.42 refuses windows its automover could crash on; segments
            // have no automover, so a valid window is only recorded.
            if (AUTOMOVE_WINDOW_MIN..=AUTOMOVE_WINDOW_MAX).contains(&window) {
                t.slab_automove_window.store(window, Ordering::Relaxed);
                answer(out, noreply, reply::OK);
            } else {
                answer(out, noreply, reply::AUTOMOVE_WINDOW_RANGE);
            }
            Flow::Next
        }
        Admin::SlabsAutomoveRatio { ratio, noreply } => {
            t.set_slab_automove_ratio(ratio.0);
            answer(out, noreply, reply::OK);
            Flow::Next
        }
        // memcached 1.6.34 keeps any number (negative, nan) for its extstore page
        // mover; segments have no page mover, so it is only recorded.
        Admin::SlabsAutomoveFreeratio { ratio, noreply } => {
            t.set_slab_automove_freeratio(ratio.0);
            answer(out, noreply, reply::OK);
            Flow::Next
        }
        Admin::LruTune {
            hot_pct,
            warm_pct,
            hot_factor,
            warm_factor,
            noreply,
        } => {
            // memcached adds the two as 32-bit unsigned numbers.
            let r = if hot_pct.wrapping_add(warm_pct) > LRU_HOT_WARM_PCT_MAX {
                reply::LRU_PCTS_TOO_HIGH
            } else if warm_factor.0 <= 0.0 || hot_factor.0 <= 0.0 {
                reply::LRU_FACTORS_NOT_POSITIVE
            } else {
                let mut lru = t.lru.lock();
                lru.hot_pct = hot_pct;
                lru.warm_pct = warm_pct;
                lru.hot_max_factor = hot_factor.0;
                lru.warm_max_factor = warm_factor.0;
                reply::OK
            };
            answer(out, noreply, r);
            Flow::Next
        }
        Admin::LruMode { segmented, noreply } => {
            t.lru.lock().segmented = segmented;
            answer(out, noreply, reply::OK);
            Flow::Next
        }
        // The request step checks it (it knows what came before it).
        Admin::Watch { .. } => Flow::Watch,
        Admin::LruTempTtl { ttl, noreply } => {
            let mut lru = t.lru.lock();
            lru.temp_lru = ttl >= 0;
            if ttl >= 0 {
                lru.temporary_ttl = ttl;
            }
            answer(out, noreply, reply::OK);
            Flow::Next
        }
    }
}

/// One turn of a key dump (see the module docs; its leading `OK` is written when it
/// starts): lines for the live items of `classes` from where `walk` stands, then `END` (metadump) or `EN` (mgdump) once
/// the walk is over.
fn dump(
    kind: CrawlKind,
    classes: Classes,
    cx: &Ctx<'_>,
    out: &mut Vec<u8>,
    walk: &mut Option<WalkCursor>,
    out_limit: usize,
) -> Flow {
    let cursor = walk.get_or_insert_with(WalkCursor::default);
    let clock = cx.engine.clock();
    let mut shown = 0;
    cx.engine.walk(cursor, &mut |w| {
        if !classes.covers(w.class) {
            return true;
        }
        if kind == CrawlKind::Mgdump {
            mgdump_line(out, w.key);
        } else {
            let exp = if w.exptime == 0 {
                -1
            } else {
                clock.to_unix(w.exptime)
            };
            let la = clock.to_unix(w.atime);
            reply::metadump_line(
                out, w.key, exp, la, w.cas, w.fetched, w.class, w.size, w.flags,
            );
        }
        shown += 1;
        out.len() <= out_limit && shown < DUMP_ITEMS_PER_TURN
    });
    let checked = &cx.server.tunables.crawler_items_checked;
    checked.fetch_add(shown as u64, Ordering::Relaxed);
    if !cursor.is_done() {
        return Flow::Suspend;
    }
    *walk = None;
    out.extend_from_slice(if kind == CrawlKind::Mgdump {
        EN
    } else {
        reply::END
    });
    Flow::Next
}
