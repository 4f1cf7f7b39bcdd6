//! The `stats` report writer: renders `stats`, `stats settings|items|slabs|sizes|
//! conns|reset|detail` as memcached's `process_stat` does, from the workers' counters
//! ([`crate::counters`]), the engine's stats and the server's bookkeeping.

use std::sync::atomic::Ordering;

use crate::counters::Totals;
use crate::server::Server;

/// Renders `stats [sub [arg]]` into `out`, as memcached's `process_stat`.
pub fn render(server: &Server, sub: Option<&[u8]>, arg: Option<&[u8]>, out: &mut Vec<u8>) {
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
        Some(b"sizes") => reply::stat(out, "sizes_status", "disabled"),
        Some(b"conns") => conns(server, out),
        Some(b"detail") if arg.is_none() => {
            out.extend_from_slice(reply::STATS_DETAIL_USAGE);
            return;
        }
        _ => {
            // `stats detail on|off|dump` and `stats cachedump` are not supported.
            out.extend_from_slice(reply::ERROR);
            return;
        }
    }
    out.extend_from_slice(reply::END);
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
    stat(out, "threads", server.settings.threads);
    stat(out, "conn_yields", t.conn_yields);
    stat(out, "hash_power_level", es.hash_power_level);
    stat(out, "hash_bytes", es.hash_bytes);
    stat(out, "hash_is_expanding", u8::from(es.hash_is_expanding));
    stat(out, "bytes", es.bytes);
    stat(out, "curr_items", es.curr_items);
    stat(out, "total_items", es.total_items);
    stat(out, "expired_unfetched", es.expired_unfetched);
    stat(out, "evicted_unfetched", es.evicted_unfetched);
    stat(out, "evicted_active", es.evicted_active);
    stat(out, "evictions", es.evictions);
    stat(out, "reclaimed", es.reclaimed);
    stat(out, "crawler_reclaimed", es.crawler_reclaimed);
    if let Some(tls) = &server.tls {
        // memcached prints these with -Z only.
        if let Some(n) = tls.new_sessions() {
            stat(out, "ssl_new_sessions", n);
        }
        stat(out, "ssl_handshake_errors", tls.handshake_errors());
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
    stat(out, "inter", s.listen.join(","));
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
    stat(out, "detail_enabled", "no");
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
    stat(out, "hashpower_init", s.hash_power);
    stat(out, "flush_enabled", yes_no(s.flush_enabled));
    stat(out, "idle_timeout", s.idle_timeout_secs);
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
    stat(out, "engine", server.settings.engine.name());
}

/// The reference engine has no slab classes: every item is its own allocation. It
/// is reported as memcached's class 1, whose "chunks" are the items themselves, and
/// its single LRU as memcached's COLD queue (HOT and WARM are empty).
fn items(server: &Server, out: &mut Vec<u8>) {
    use memcrab_proto::text::reply::stat;
    let es = server.engine.stats();
    if es.curr_items == 0 {
        return;
    }
    stat(out, "items:1:number", es.curr_items);
    stat(out, "items:1:number_hot", 0);
    stat(out, "items:1:number_warm", 0);
    stat(out, "items:1:number_cold", es.curr_items);
    stat(out, "items:1:age_hot", 0);
    stat(out, "items:1:age_warm", 0);
    stat(out, "items:1:age", es.oldest_item_age);
    stat(out, "items:1:mem_requested", es.bytes);
    stat(out, "items:1:evicted", es.evictions);
    stat(out, "items:1:evicted_nonzero", es.evicted_nonzero);
    stat(out, "items:1:evicted_time", es.evicted_time);
    stat(out, "items:1:outofmemory", es.outofmemory);
    stat(out, "items:1:tailrepairs", 0);
    stat(out, "items:1:reclaimed", es.reclaimed);
    stat(out, "items:1:expired_unfetched", es.expired_unfetched);
    stat(out, "items:1:evicted_unfetched", es.evicted_unfetched);
    stat(out, "items:1:evicted_active", es.evicted_active);
    stat(out, "items:1:crawler_reclaimed", es.crawler_reclaimed);
}

/// Slab class 1's request counters (memcached counts them per class; memcrab has
/// one class for them all).
fn class_1_hits(out: &mut Vec<u8>, t: &Totals) {
    use memcrab_proto::text::reply::stat;
    stat(out, "1:get_hits", t.get_hits);
    stat(out, "1:cmd_set", t.cmd_set);
    stat(out, "1:delete_hits", t.delete_hits);
    stat(out, "1:incr_hits", t.incr_hits);
    stat(out, "1:decr_hits", t.decr_hits);
    stat(out, "1:cas_hits", t.cas_hits);
    stat(out, "1:cas_badval", t.cas_badval);
    stat(out, "1:touch_hits", t.touch_hits);
}

fn slabs(server: &Server, out: &mut Vec<u8>) {
    use memcrab_proto::text::reply::stat;
    let es = server.engine.stats();
    let t = server.totals();
    let sg = es.segments;
    if sg.segment_bytes != 0 {
        // The segment engine. Class 1 is the normal segments: a page is a segment
        // and a chunk is an item in it (chunk_size is the mean item size). Class 2
        // is the large items, each in a segment of its own. Field meanings are in
        // docs/storage.md.
        let large = sg.large_segments.min(es.curr_items);
        let small = es.curr_items - large;
        let large_bytes = sg.memory_bytes - sg.segments * sg.segment_bytes;
        if sg.segments > 0 {
            let in_use = (sg.segments - sg.free_segments).max(1);
            let per_page = (small / in_use).max(1);
            let small_bytes = es.bytes.saturating_sub(large_bytes);
            stat(
                out,
                "1:chunk_size",
                small_bytes.checked_div(small).unwrap_or(0),
            );
            stat(out, "1:chunks_per_page", per_page);
            stat(out, "1:total_pages", sg.segments);
            stat(out, "1:total_chunks", small + sg.free_segments * per_page);
            stat(out, "1:used_chunks", small);
            stat(out, "1:free_chunks", sg.free_segments * per_page);
            stat(out, "1:free_chunks_end", 0);
            stat(out, "1:mem_requested", small_bytes);
            class_1_hits(out, &t);
            stat(out, "1:segment_size", sg.segment_bytes);
            stat(out, "1:free_pages", sg.free_segments);
            stat(out, "1:reinserted", sg.reinserted);
            stat(out, "1:compacted", sg.compacted);
        }
        if let Some(avg) = large_bytes.checked_div(sg.large_segments) {
            stat(out, "2:chunk_size", avg);
            stat(out, "2:chunks_per_page", 1);
            stat(out, "2:total_pages", sg.large_segments);
            stat(out, "2:total_chunks", sg.large_segments);
            stat(out, "2:used_chunks", large);
            stat(out, "2:free_chunks", sg.large_segments - large);
            stat(out, "2:free_chunks_end", 0);
            stat(out, "2:mem_requested", large_bytes);
        }
        stat(
            out,
            "active_slabs",
            u8::from(sg.segments > 0) + u8::from(sg.large_segments > 0),
        );
        stat(out, "total_malloced", sg.memory_bytes);
        return;
    }
    if let Some(avg) = es.bytes.checked_div(es.curr_items) {
        stat(out, "1:chunk_size", avg);
        stat(out, "1:chunks_per_page", 1);
        stat(out, "1:total_pages", es.curr_items);
        stat(out, "1:total_chunks", es.curr_items);
        stat(out, "1:used_chunks", es.curr_items);
        stat(out, "1:free_chunks", 0);
        stat(out, "1:free_chunks_end", 0);
        stat(out, "1:mem_requested", es.bytes);
        class_1_hits(out, &t);
    }
    stat(out, "active_slabs", u8::from(es.curr_items > 0));
    stat(out, "total_malloced", es.bytes);
}

fn conns(server: &Server, out: &mut Vec<u8>) {
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
                put("state", &"conn_parse_cmd");
            }
            None => put("state", &"conn_listening"),
        }
        let last = info.last_cmd.load(Ordering::Relaxed);
        put("secs_since_last_cmd", &now.saturating_sub(last));
    }
}
