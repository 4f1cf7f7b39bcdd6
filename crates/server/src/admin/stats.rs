//! The `stats` report writer: renders `stats`, `stats settings|items|slabs|sizes|
//! conns|reset|detail` as memcached's `process_stat` does, from the workers' counters
//! ([`crate::admin::counters`]), the engine's stats and the server's bookkeeping;
//! and memcrab's own `stats latency|hotkeys|slowlog`, from the request step's
//! measurements (the server's `Observe`).

use std::sync::atomic::{AtomicU64, Ordering};

use memcrab_store::{Stats, WalkCursor};

use crate::admin::hotkeys::HotKeys;
use crate::admin::tunables::{stat_float, CrawlRunning};
use crate::server::{ConnState, Observe, Server};

/// The connections' read buffers (io/conn.rs): how many are allocated and their
/// bytes, memcached's `read_buf_count` and `read_buf_bytes`. A connection's buffer
/// is allocated at its first read, grows with a long request, and goes back to
/// none when a grown one is emptied or the connection closes. One server per
/// process, so one count. Relaxed: statistics, ordered against nothing.
static READ_BUFS: AtomicU64 = AtomicU64::new(0);
static READ_BUF_BYTES: AtomicU64 = AtomicU64::new(0);

/// A connection's read buffer went from `before` bytes to `after` (0: none).
#[inline]
pub fn read_buf_resized(before: usize, after: usize) {
    if before == after {
        return;
    }
    match (before, after) {
        (0, _) => READ_BUFS.fetch_add(1, Ordering::Relaxed),
        (_, 0) => READ_BUFS.fetch_sub(1, Ordering::Relaxed),
        _ => 0,
    };
    READ_BUF_BYTES.fetch_add(after as u64, Ordering::Relaxed);
    READ_BUF_BYTES.fetch_sub(before as u64, Ordering::Relaxed);
}

/// The file descriptors the process holds that are not client connections
/// (listeners, event loops, wakers, io_uring rings, files): memcached's
/// `reserved_fds`, its "misc fds used internally". Counted in /proc/self/fd.
fn reserved_fds(clients: usize) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count().saturating_sub(1 + clients))
        .unwrap_or(0)
}

/// Renders `stats [sub [arg]]` into `out`, as memcached's `process_stat`.
/// `asker`: the asking connection's fd (-1 for none), which `stats conns` shows
/// parsing its command.
pub fn render(
    server: &Server,
    sub: Option<&[u8]>,
    arg: Option<&[u8]>,
    asker: i32,
    out: &mut Vec<u8>,
) {
    use memcrab_proto::text::reply;
    let _ = arg;
    match sub {
        None => general(server, out),
        Some(b"reset") => {
            server.reset_stats();
            out.extend_from_slice(reply::RESET);
            return;
        }
        Some(b"settings") => settings(server, out),
        Some(b"items") => items(server, out),
        Some(b"slabs") => slabs(server, out),
        Some(b"sizes") => sizes(server, out),
        Some(b"conns") => conns(server, asker, out),
        // memcrab's own: the request step's measurements (`Observe`).
        Some(sub @ (b"latency" | b"hotkeys" | b"slowlog")) => {
            measurements(&server.observe, sub, arg, out);
            return;
        }
        Some(b"detail") => {
            // memcached 1.6.37: `-X` disables `stats detail` as it does the dumps.
            if !server.settings.dump_enabled {
                out.extend_from_slice(reply::STATS_DETAIL_NOT_ALLOWED);
                return;
            }
            detail(server, arg, out);
            return;
        }
        _ => {
            // `stats cachedump` is not supported (`lru_crawler metadump` is);
            // `stats sizes_enable|sizes_disable` left memcached in 1.6.25.
            out.extend_from_slice(reply::ERROR);
            return;
        }
    }
    out.extend_from_slice(reply::END);
}

/// `stats detail on|off|dump` (memcached's `process_stats_detail`).
fn detail(server: &Server, arg: Option<&[u8]>, out: &mut Vec<u8>) {
    use memcrab_proto::text::reply;
    match arg {
        Some(b"on") => {
            server.prefixes.set_enabled(true);
            out.extend_from_slice(reply::OK);
        }
        Some(b"off") => {
            server.prefixes.set_enabled(false);
            out.extend_from_slice(reply::OK);
        }
        Some(b"dump") => server.prefixes.dump(out),
        _ => out.extend_from_slice(reply::STATS_DETAIL_USAGE),
    }
}

/// `stats sizes`: how many items there are of each size, in 32-byte steps (each
/// size rounded up), as memcached's `item_stats_sizes`; only while enabled (`-o
/// track_sizes`). memcached keeps the histogram as items come
/// and go; here it is counted by walking the whole store on each request, on this
/// worker: about 0.1 s per million items (docs/operations.md, "Monitoring").
fn sizes(server: &Server, out: &mut Vec<u8>) {
    use memcrab_proto::text::reply::stat;
    if !server.tunables.track_sizes.load(Ordering::Relaxed) {
        stat(out, "sizes_status", "disabled");
        return;
    }
    // memcached's histogram has item_size_max / 32 + 1 buckets; bigger items are
    // not counted.
    let buckets = server.settings.item_size_max as u64 / 32 + 1;
    let mut hist = std::collections::BTreeMap::<u64, u64>::new();
    let mut cursor = WalkCursor::default();
    while !cursor.is_done() {
        server.engine.walk(&mut cursor, &mut |w| {
            let bucket = w.size.div_ceil(32);
            if bucket < buckets {
                *hist.entry(bucket * 32).or_default() += 1;
            }
            true
        });
    }
    for (size, n) in hist {
        stat(out, &size.to_string(), n);
    }
}

fn rusage() -> (String, String) {
    // SAFETY: getrusage writes only into the zeroed struct we pass, which lives on
    // our stack for the duration of the call.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

fn general(server: &Server, out: &mut Vec<u8>) {
    use memcrab_proto::text::reply::stat;
    let t = server.totals();
    let es = server.engine.stats();
    let clock = server.engine.clock();
    let (user, system) = rusage();
    stat(out, "pid", std::process::id());
    stat(out, "uptime", clock.uptime_secs());
    stat(out, "time", clock.unix_now());
    stat(out, "version", crate::server::VERSION);
    stat(out, "memcrab_version", crate::server::MEMCRAB_VERSION);
    stat(out, "pointer_size", 8 * std::mem::size_of::<usize>());
    stat(out, "rusage_user", user);
    stat(out, "rusage_system", system);
    stat(out, "max_connections", server.settings.max_connections);
    // memcached counts each worker's UDP "connection" (one per UDP socket per
    // worker thread) in curr_connections and total_connections.
    let udp = server
        .conns
        .lock()
        .values()
        .filter(|c| c.addr.starts_with("udp"))
        .count();
    stat(
        out,
        "curr_connections",
        server.curr_connections.load(Ordering::Relaxed) + udp,
    );
    stat(
        out,
        "total_connections",
        server.total_connections.load(Ordering::Relaxed) + udp as u64,
    );
    stat(
        out,
        "rejected_connections",
        server.rejected_connections.load(Ordering::Relaxed),
    );
    let listeners = server
        .conns
        .lock()
        .values()
        .filter(|c| c.listen_addr.is_none())
        .count();
    stat(
        out,
        "connection_structures",
        server.curr_connections.load(Ordering::Relaxed) + listeners,
    );
    // memcached's response objects are pooled; memcrab writes each connection's
    // replies into one output buffer and pauses a request that outgrows it (-o
    // read_buf_mem_limit's bound is not needed): no response runs out of memory.
    stat(out, "response_obj_oom", 0);
    stat(out, "read_buf_count", READ_BUFS.load(Ordering::Relaxed));
    stat(
        out,
        "read_buf_bytes",
        READ_BUF_BYTES.load(Ordering::Relaxed),
    );
    // Read buffers are the connections' own, never cached when unused; an
    // allocation that fails aborts the process, so none is counted as failed.
    stat(out, "read_buf_bytes_free", 0);
    stat(out, "read_buf_oom", 0);
    let clients = server.curr_connections.load(Ordering::Relaxed);
    stat(out, "reserved_fds", reserved_fds(clients));
    stat(out, "cmd_get", t.cmd_get);
    stat(out, "cmd_set", t.cmd_set);
    stat(out, "cmd_flush", t.cmd_flush);
    stat(out, "cmd_touch", t.cmd_touch);
    stat(out, "cmd_meta", t.cmd_meta);
    stat(out, "get_hits", t.get_hits);
    stat(out, "get_misses", t.get_misses);
    stat(out, "get_expired", t.get_expired);
    stat(out, "get_flushed", t.get_flushed);
    stat(out, "delete_misses", t.delete_misses);
    stat(out, "delete_hits", t.delete_hits);
    stat(out, "incr_misses", t.incr_misses);
    stat(out, "incr_hits", t.incr_hits);
    stat(out, "decr_misses", t.decr_misses);
    stat(out, "decr_hits", t.decr_hits);
    stat(out, "cas_misses", t.cas_misses);
    stat(out, "cas_hits", t.cas_hits);
    stat(out, "cas_badval", t.cas_badval);
    stat(out, "touch_hits", t.touch_hits);
    stat(out, "touch_misses", t.touch_misses);
    stat(out, "store_too_large", t.store_too_large);
    stat(out, "store_no_memory", t.store_no_memory);
    stat(out, "auth_cmds", t.auth_cmds);
    stat(out, "auth_errors", t.auth_errors);
    if server.settings.idle_timeout_secs > 0 {
        stat(out, "idle_kicks", t.idle_kicks);
    }
    stat(out, "bytes_read", t.bytes_read);
    stat(out, "bytes_written", t.bytes_written);
    stat(out, "limit_maxbytes", es.limit_maxbytes);
    stat(out, "accepting_conns", u8::from(!server.shutting_down()));
    // memcrab never stops listening: at -c it answers and closes instead.
    stat(out, "listen_disabled_num", 0);
    stat(out, "time_in_listen_disabled_us", 0);
    // The workers that run: -t capped at the CPUs this process may use (main.rs).
    stat(out, "threads", server.settings.workers);
    stat(out, "conn_yields", t.conn_yields);
    stat(out, "hash_power_level", es.hash_power_level);
    stat(out, "hash_bytes", es.hash_bytes);
    stat(out, "hash_is_expanding", u8::from(es.hash_is_expanding));
    // memcrab's own: index tables rebuilt and the items they re-read (docs/storage.md).
    stat(out, "memcrab_index_rebuilds", es.index_rebuilds);
    stat(out, "memcrab_index_rehashed_items", es.index_rehashed_items);
    // memcrab's own: what is charged against limit_maxbytes. The segment engine
    // charges its segments (total_malloced in `stats slabs`) and its index
    // (hash_bytes); the reference engine charges each item's bytes.
    let used = match es.segments.segment_bytes {
        0 => es.bytes,
        _ => es.segments.memory_bytes + es.hash_bytes,
    };
    stat(out, "limit_used_bytes", used);
    // memcrab's own (zero-copy values): values sent from item memory instead of
    // copied (`-o value_lend_min`); the bytes of the segments such values hold
    // (lent_segment_bytes), and of those the retired ones, kept past their eviction
    // until their sends complete (lease_held_bytes, part of limit_used_bytes and
    // the only memory it may count beyond limit_maxbytes: at most a sixteenth).
    stat(out, "values_lent", t.values_lent);
    stat(out, "lent_segment_bytes", es.segments.lent_bytes);
    stat(out, "lease_held_bytes", es.segments.held_bytes);
    let tun = &server.tunables;
    stat(out, "lru_crawler_running", CrawlRunning::count());
    stat(
        out,
        "lru_crawler_starts",
        tun.crawler_starts.load(Ordering::Relaxed),
    );
    // Rust aborts the process when an allocation fails: none is counted.
    stat(out, "malloc_fails", 0);
    // `watch`'s counters. memcrab formats each event once on the worker that saw it,
    // with no per-worker buffer to overflow: worker_dropped is always 0, and
    // worker_written counts the events formatted for watchers.
    let w = server.watch.stats();
    stat(out, "log_worker_dropped", 0);
    stat(out, "log_worker_written", w.written);
    stat(out, "log_watcher_skipped", w.skipped);
    stat(out, "log_watcher_sent", w.sent);
    stat(out, "log_watchers", w.watchers);
    // As memcached without -N: connections go to workers in turn, by no NAPI ID.
    stat(out, "unexpected_napi_ids", 0);
    stat(out, "round_robin_fallback", 0);
    stat(out, "bytes", es.bytes);
    stat(out, "curr_items", es.curr_items);
    stat(out, "total_items", es.total_items);
    stat(out, "expired_unfetched", es.expired_unfetched);
    stat(out, "evicted_unfetched", es.evicted_unfetched);
    stat(out, "evicted_active", es.evicted_active);
    stat(out, "evictions", es.evictions);
    stat(out, "reclaimed", es.reclaimed);
    stat(out, "crawler_reclaimed", es.crawler_reclaimed);
    let checked = tun.crawler_items_checked.load(Ordering::Relaxed);
    stat(out, "crawler_items_checked", checked);
    if let Some(tls) = &server.tls {
        // memcached prints these with -Z only.
        if let Some(n) = tls.new_sessions() {
            stat(out, "ssl_new_sessions", n);
        }
        stat(out, "ssl_handshake_errors", tls.handshake_errors());
        stat(out, "ssl_proto_errors", tls.proto_errors());
        stat(
            out,
            "time_since_server_cert_refresh",
            tls.secs_since_refresh(),
        );
    }
    stat(out, "engine", server.settings.engine.name());
}

fn settings(server: &Server, out: &mut Vec<u8>) {
    use memcrab_proto::text::reply::stat;
    let s = &server.settings;
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    stat(out, "maxbytes", server.engine.stats().limit_maxbytes);
    stat(out, "maxconns", s.max_connections);
    // As memcached: the configured port, even when -s disabled TCP.
    stat(out, "tcpport", s.port);
    stat(out, "udpport", s.udp_port);
    stat(out, "inter", &s.inter);
    stat(out, "verbosity", server.verbosity.load(Ordering::Relaxed));
    stat(out, "oldest", 0);
    stat(out, "evictions", if s.no_evict { "off" } else { "on" });
    stat(
        out,
        "domain_socket",
        s.unix_socket.as_deref().unwrap_or("NULL"),
    );
    stat(out, "umask", format!("{:o}", s.unix_mask));
    stat(out, "shutdown_command", yes_no(s.shutdown_command));
    stat(out, "growth_factor", format!("{:.2}", s.growth_factor));
    stat(out, "chunk_size", s.chunk_size);
    stat(out, "num_threads", s.threads);
    stat(out, "num_threads_per_udp", s.threads);
    stat(out, "stat_key_prefix", s.stat_prefix);
    stat(out, "detail_enabled", yes_no(server.prefixes.enabled()));
    stat(out, "reqs_per_event", s.reqs_per_event);
    stat(out, "cas_enabled", yes_no(s.use_cas));
    stat(out, "tcp_backlog", s.backlog);
    stat(out, "binding_protocol", s.protocol.name());
    stat(out, "auth_enabled_sasl", yes_no(s.sasl));
    stat(
        out,
        "auth_enabled_ascii",
        s.auth_file.as_deref().unwrap_or("no"),
    );
    stat(out, "item_size_max", s.item_size_max);
    // Connections over -c are answered and closed at once: memcached's maxconns_fast.
    stat(out, "maxconns_fast", "yes");
    // As given with -o hashpower, 0 when not (the index starts at 2^16 then).
    stat(out, "hashpower_init", s.tuning.hashpower_init);
    // What the admin commands set (crate::admin::tunables), in memcached's order.
    let t = &server.tunables;
    let tn = &s.tuning;
    stat(out, "slab_reassign", yes_no(tn.slab_reassign));
    stat(
        out,
        "slab_automove",
        t.slab_automove.load(Ordering::Relaxed),
    );
    stat(
        out,
        "slab_automove_ratio",
        stat_float(t.slab_automove_ratio(), 2),
    );
    stat(
        out,
        "slab_automove_window",
        t.slab_automove_window.load(Ordering::Relaxed),
    );
    stat(out, "slab_chunk_max", tn.slab_chunk_max);
    stat(
        out,
        "lru_crawler",
        yes_no(t.crawler.load(Ordering::Relaxed)),
    );
    stat(
        out,
        "lru_crawler_sleep",
        t.crawler_sleep_us.load(Ordering::Relaxed),
    );
    stat(
        out,
        "lru_crawler_tocrawl",
        t.crawler_tocrawl.load(Ordering::Relaxed),
    );
    stat(out, "tail_repair_time", tn.tail_repair_time);
    stat(out, "flush_enabled", yes_no(s.flush_enabled));
    stat(out, "dump_enabled", yes_no(s.dump_enabled));
    stat(out, "hash_algorithm", tn.hash_algorithm);
    stat(out, "lru_maintainer_thread", yes_no(tn.lru_maintainer));
    let lru = *t.lru.lock();
    stat(out, "lru_segmented", yes_no(lru.segmented));
    stat(out, "hot_lru_pct", lru.hot_pct);
    stat(out, "warm_lru_pct", lru.warm_pct);
    stat(out, "hot_max_factor", stat_float(lru.hot_max_factor, 2));
    stat(out, "warm_max_factor", stat_float(lru.warm_max_factor, 2));
    stat(out, "temp_lru", yes_no(lru.temp_lru));
    stat(out, "temporary_ttl", lru.temporary_ttl);
    stat(out, "idle_timeout", s.idle_timeout_secs);
    stat(out, "watcher_logbuf_size", s.watcher_buf_bytes);
    stat(out, "worker_logbuf_size", tn.worker_logbuf_bytes);
    stat(out, "read_buf_mem_limit", tn.read_buf_mem_limit);
    stat(
        out,
        "track_sizes",
        yes_no(t.track_sizes.load(Ordering::Relaxed)),
    );
    // memcached 1.6.45: "setting is dead, cannot be yes".
    stat(out, "inline_ascii_response", "no");
    // Where memcached 1.6.45 (built with extstore) prints it, among its ext_ lines.
    let free = stat_float(t.slab_automove_freeratio(), 3);
    stat(out, "slab_automove_freeratio", free);
    // memcached prints its TLS settings with or without -Z; unset paths as glibc
    // prints a NULL `%s` ("(null)"), or memcached's "NULL".
    let t = &s.tls;
    stat(out, "ssl_enabled", yes_no(t.enabled));
    stat(
        out,
        "ssl_chain_cert",
        t.chain_cert.as_deref().unwrap_or("(null)"),
    );
    stat(out, "ssl_key", t.key.as_deref().unwrap_or("(null)"));
    stat(out, "ssl_verify_mode", t.verify_mode_bits());
    stat(out, "ssl_keyformat", t.key_format);
    stat(out, "ssl_ciphers", t.ciphers.as_deref().unwrap_or("NULL"));
    stat(out, "ssl_ca_cert", t.ca_cert.as_deref().unwrap_or("NULL"));
    stat(out, "ssl_wbuf_size", t.wbuf_size);
    stat(out, "ssl_session_cache", yes_no(t.session_cache));
    stat(out, "ssl_kernel_tls", yes_no(t.kernel_tls));
    stat(out, "ssl_min_version", t.min_version_name());
    // memcrab has no -N (NAPI ID based thread selection).
    stat(out, "num_napi_ids", 0);
    let memory_file = s.memory_file.as_ref().map(|p| p.display().to_string());
    stat(
        out,
        "memory_file",
        memory_file.as_deref().unwrap_or("(null)"),
    );
    // memcached 1.6.22: the bytes of client flags, 4 in its default build (64-bit
    // flags are a build option memcrab does not offer).
    stat(out, "client_flags_size", 4);
    stat(out, "engine", server.settings.engine.name());
    // memcrab's own: `-o metrics_listen`, as bound (admin/metrics/).
    stat(
        out,
        "metrics_listen",
        s.metrics_listen.as_deref().unwrap_or("NULL"),
    );
    // memcrab's own: `-o latency`, `hotkeys`, `slowlog_us`, `slowlog_len`, and the
    // clock that times requests (admin/clock.rs).
    let o = &server.observe;
    stat(out, "latency", yes_no(o.latency));
    stat(out, "latency_clock", o.ticks.source());
    stat(out, "hotkeys", yes_no(o.hotkeys));
    stat(out, "slowlog_us", o.slowlog.threshold_us());
    stat(out, "slowlog_len", s.slowlog_len);
}

/// A size class as `stats items` and `stats slabs` report it.
///
/// The segment engine has two: class 1 is the items in shared segments (a page is a
/// segment, a chunk an item, `chunk_size` their mean size), class 2 the large items,
/// each in a segment of its own. The reference engine has no classes: every item is
/// its own allocation, reported as class 1 whose chunks are the items. Field
/// meanings are in docs/storage.md and docs/operations.md.
struct Class {
    id: u8,
    items: u64,
    /// Bytes its items take (`mem_requested`).
    bytes: u64,
    /// Seconds since its oldest item was stored or used.
    age: u32,
    pages: u64,
    chunks_per_page: u64,
    free_chunks: u64,
    /// Segment figures of class 1 (segment engine only).
    segments: Option<memcrab_store::SegmentStats>,
}

fn classes(es: &Stats) -> Vec<Class> {
    let sg = es.segments;
    if sg.segment_bytes == 0 {
        return vec![Class {
            id: 1,
            items: es.curr_items,
            bytes: es.bytes,
            age: es.oldest_item_age,
            pages: es.curr_items,
            chunks_per_page: 1,
            free_chunks: 0,
            segments: None,
        }];
    }
    let large = sg.large_segments.min(es.curr_items);
    let small = es.curr_items - large;
    let large_bytes = sg.memory_bytes - sg.segments * sg.segment_bytes;
    let in_use = (sg.segments - sg.free_segments).max(1);
    let per_page = (small / in_use).max(1);
    vec![
        Class {
            id: 1,
            items: small,
            bytes: es.bytes.saturating_sub(large_bytes),
            age: sg.oldest_normal_age,
            pages: sg.segments,
            chunks_per_page: per_page,
            free_chunks: sg.free_segments * per_page,
            segments: Some(sg),
        },
        Class {
            id: 2,
            items: large,
            bytes: large_bytes,
            age: sg.oldest_large_age,
            pages: sg.large_segments,
            chunks_per_page: 1,
            free_chunks: sg.large_segments - large,
            segments: None,
        },
    ]
}

/// `stats items`, for each class that has items. memcrab counts evictions and
/// reclaims per engine, not per class: the first class listed carries them all and
/// the others report zeros, so sums over classes are right.
fn items(server: &Server, out: &mut Vec<u8>) {
    let es = server.engine.stats();
    let zero = Stats::default();
    let mut counters = Some(&es);
    for c in classes(&es).iter().filter(|c| c.items > 0) {
        let k = counters.take().unwrap_or(&zero);
        let mut put = |name: &str, v: u64| {
            memcrab_proto::text::reply::stat(out, &format!("items:{}:{name}", c.id), v)
        };
        put("number", c.items);
        // One queue per class, reported as memcached's COLD queue.
        put("number_hot", 0);
        put("number_warm", 0);
        put("number_cold", c.items);
        put("age_hot", 0);
        put("age_warm", 0);
        put("age", u64::from(c.age));
        put("mem_requested", c.bytes);
        put("evicted", k.evictions);
        put("evicted_nonzero", k.evicted_nonzero);
        put("evicted_time", u64::from(k.evicted_time));
        put("outofmemory", k.outofmemory);
        put("tailrepairs", 0);
        put("reclaimed", k.reclaimed);
        put("expired_unfetched", k.expired_unfetched);
        put("evicted_unfetched", k.evicted_unfetched);
        put("evicted_active", k.evicted_active);
        put("crawler_reclaimed", k.crawler_reclaimed);
    }
}

/// `stats slabs`, for each class that has memory. The request counters are counted
/// per server, not per class: the first class listed carries them all and the
/// others report zeros (memcached_exporter needs `cmd_set` in every class).
/// `mem_requested` is in `stats items` only, as in memcached 1.6.18: an exporter
/// that reads both must not meet it twice.
fn slabs(server: &Server, out: &mut Vec<u8>) {
    use memcrab_proto::text::reply::stat;
    let es = server.engine.stats();
    let mut t = Some(server.totals());
    let classes = classes(&es);
    let mut active = 0;
    for c in classes.iter().filter(|c| c.pages > 0) {
        active += 1;
        let k = t.take().unwrap_or_default();
        let mut put = |name: &str, v: u64| stat(out, &format!("{}:{name}", c.id), v);
        let used = c.items;
        put("chunk_size", c.bytes.checked_div(used).unwrap_or(0));
        put("chunks_per_page", c.chunks_per_page);
        put("total_pages", c.pages);
        put("total_chunks", used + c.free_chunks);
        put("used_chunks", used);
        put("free_chunks", c.free_chunks);
        put("free_chunks_end", 0);
        put("get_hits", k.get_hits);
        put("cmd_set", k.cmd_set);
        put("delete_hits", k.delete_hits);
        put("incr_hits", k.incr_hits);
        put("decr_hits", k.decr_hits);
        put("cas_hits", k.cas_hits);
        put("cas_badval", k.cas_badval);
        put("touch_hits", k.touch_hits);
        if let Some(sg) = c.segments {
            put("segment_size", sg.segment_bytes);
            put("free_pages", sg.free_segments);
            put("reinserted", sg.reinserted);
            put("compacted", sg.compacted);
        }
    }
    stat(out, "active_slabs", active);
    let malloced = match es.segments.segment_bytes {
        0 => es.bytes,
        _ => es.segments.memory_bytes,
    };
    stat(out, "total_malloced", malloced);
}

fn conns(server: &Server, asker: i32, out: &mut Vec<u8>) {
    let now = server.engine.clock().now();
    let conns = server.conns.lock();
    for (fd, info) in conns.iter() {
        let mut put = |name: &str, v: &dyn std::fmt::Display| {
            memcrab_proto::text::reply::stat(out, &format!("{fd}:{name}"), v)
        };
        if info.addr.starts_with("udp") {
            // memcached lists each worker's UDP socket as an idle connection.
            put("UDP", &"UDP");
            put("addr", &info.addr);
            put("state", &"conn_read");
            put(
                "secs_since_last_cmd",
                &now.saturating_sub(info.last_cmd.load(Ordering::Relaxed)),
            );
            continue;
        }
        put("addr", &info.addr);
        match &info.listen_addr {
            Some(l) => {
                put("listen_addr", l);
                let state = if *fd == asker {
                    "conn_parse_cmd"
                } else {
                    ConnState::name(info.state.load(Ordering::Relaxed))
                };
                put("state", &state);
            }
            None => put("state", &"conn_listening"),
        }
        let last = info.last_cmd.load(Ordering::Relaxed);
        put("secs_since_last_cmd", &now.saturating_sub(last));
    }
}

/// `stats latency`, `stats hotkeys [reset]` and `stats slowlog [reset|<n>]`
/// (`sub` is one of the three): their `STAT` lines and `END`, `RESET` after a
/// reset, or `CLIENT_ERROR` with the usage for another argument. A measurement
/// that is off answers `END` alone (`stats settings` says which are on).
fn measurements(o: &Observe, sub: &[u8], arg: Option<&[u8]>, out: &mut Vec<u8>) {
    use memcrab_proto::text::reply;
    match (sub, arg) {
        (b"latency", None) => crate::admin::latency::render_stats(&o.latencies(), out),
        (b"hotkeys", None) => crate::admin::hotkeys::render_stats(o.hotkeys(), out),
        (b"hotkeys", Some(b"reset")) => {
            o.hotkeys().for_each(HotKeys::clear);
            out.extend_from_slice(reply::RESET);
            return;
        }
        (b"slowlog", None) => crate::admin::slowlog::render_stats(&o.slowlog.entries(), out),
        (b"slowlog", Some(b"reset")) => {
            o.slowlog.clear();
            out.extend_from_slice(reply::RESET);
            return;
        }
        (b"slowlog", Some(n)) if memcrab_proto::num::safe_strtoul(n).is_ok() => {
            // Redis' SLOWLOG GET <count>: the newest `n`, oldest first.
            let n = memcrab_proto::num::safe_strtoul(n).unwrap_or(0) as usize;
            let all = o.slowlog.entries();
            crate::admin::slowlog::render_stats(&all[all.len().saturating_sub(n)..], out);
        }
        _ => {
            out.extend_from_slice(match sub {
                b"latency" => USAGE_LATENCY,
                b"hotkeys" => USAGE_HOTKEYS,
                _ => USAGE_SLOWLOG,
            });
            return;
        }
    }
    out.extend_from_slice(reply::END);
}

const USAGE_LATENCY: &[u8] = b"CLIENT_ERROR usage: stats latency\r\n";
const USAGE_HOTKEYS: &[u8] = b"CLIENT_ERROR usage: stats hotkeys [reset]\r\n";
const USAGE_SLOWLOG: &[u8] = b"CLIENT_ERROR usage: stats slowlog [reset|<count>]\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_subcommands() {
        let o = Observe::new(1, true, true, 1, 4, false);
        let w = &o.workers[0];
        w.latencies.record(crate::admin::latency::TEXT, 2_000);
        w.hotkeys.note(false, b"hot", 10);
        for i in 0..3 {
            o.slowlog.push(i, "text_get_hit", b"k", 5 + i, "-".into());
        }
        let run = |sub: &[u8], arg: Option<&[u8]>| {
            let mut out = Vec::new();
            measurements(&o, sub, arg, &mut out);
            String::from_utf8_lossy(&out).into_owned()
        };
        let l = run(b"latency", None);
        assert!(
            l.starts_with("STAT text_get_hit:count 1\r\n") && l.ends_with("END\r\n"),
            "{l}"
        );
        assert!(run(b"hotkeys", None).contains("STAT reads:1:key hot\r\n"));
        let s = run(b"slowlog", Some(b"2"));
        assert!(
            !s.contains("STAT 1:") && s.contains("STAT 2:us 6\r\n"),
            "{s}"
        );
        assert_eq!(run(b"slowlog", Some(b"reset")), "RESET\r\n");
        assert_eq!(run(b"slowlog", None), "END\r\n");
        assert_eq!(run(b"hotkeys", Some(b"reset")), "RESET\r\n");
        assert_eq!(run(b"hotkeys", None), "END\r\n");
        assert_eq!(run(b"latency", Some(b"reset")).as_bytes(), USAGE_LATENCY);
        assert_eq!(run(b"slowlog", Some(b"x")).as_bytes(), USAGE_SLOWLOG);
    }
}
