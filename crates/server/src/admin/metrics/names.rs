//! The series names: which `stats` field feeds which memcached_exporter series
//! (pkg/exporter/exporter.go, v0.14.4: name, type, help) and which memcrab's own.
//! Each row is (stats field, series, type, help).

use super::expo::Kind;
use Kind::{Counter as C, Gauge as G};

/// `stats` names and the exporter's series for them (memcached_exporter's
/// `parseStats`), without labels.
#[rustfmt::skip]
pub const EXPORTER_GENERAL: &[(&str, &str, Kind, &str)] = &[
    ("uptime", "memcached_uptime_seconds", C, "Number of seconds since the server started."),
    ("time", "memcached_time_seconds", G, "current UNIX time according to the server."),
    ("rusage_user", "memcached_process_user_cpu_seconds_total", C, "Accumulated user time for this process."),
    ("rusage_system", "memcached_process_system_cpu_seconds_total", C, "Accumulated system time for this process."),
    ("bytes", "memcached_current_bytes", G, "Current number of bytes used to store items."),
    ("limit_maxbytes", "memcached_limit_bytes", G, "Number of bytes this server is allowed to use for storage."),
    ("curr_items", "memcached_current_items", G, "Current number of items stored by this instance."),
    ("total_items", "memcached_items_total", C, "Total number of items stored during the life of this instance."),
    ("bytes_read", "memcached_read_bytes_total", C, "Total number of bytes read by this server from network."),
    ("bytes_written", "memcached_written_bytes_total", C, "Total number of bytes sent by this server to network."),
    ("curr_connections", "memcached_current_connections", G, "Current number of open connections."),
    ("total_connections", "memcached_connections_total", C, "Total number of connections opened since the server started running."),
    ("rejected_connections", "memcached_connections_rejected_total", C, "Total number of connections rejected due to hitting the memcached's -c limit in maxconns_fast mode."),
    ("conn_yields", "memcached_connections_yielded_total", C, "Total number of connections yielded running due to hitting the memcached's -R limit."),
    ("listen_disabled_num", "memcached_connections_listener_disabled_total", C, "Number of times that memcached has hit its connections limit and disabled its listener."),
    ("evictions", "memcached_items_evicted_total", C, "Total number of valid items removed from cache to free memory for new items."),
    ("reclaimed", "memcached_items_reclaimed_total", C, "Total number of times an entry was stored using memory from an expired entry."),
    ("store_too_large", "memcached_item_too_large_total", C, "The number of times an item exceeded the max-item-size when being stored."),
    ("store_no_memory", "memcached_item_no_memory_total", C, "The number of times an item could not be stored due to no more memory."),
    ("lru_crawler_starts", "memcached_lru_crawler_starts_total", C, "Times an LRU crawler was started."),
    ("crawler_items_checked", "memcached_lru_crawler_items_checked_total", C, "Total items examined by LRU Crawler."),
    ("crawler_reclaimed", "memcached_lru_crawler_reclaimed_total", C, "Total items freed by LRU Crawler."),
    ("moves_to_cold", "memcached_lru_crawler_moves_to_cold_total", C, "Total number of items moved from HOT/WARM to COLD LRU's."),
    ("moves_to_warm", "memcached_lru_crawler_moves_to_warm_total", C, "Total number of items moved from COLD to WARM LRU."),
    ("moves_within_lru", "memcached_lru_crawler_moves_within_lru_total", C, "Total number of items reshuffled within HOT or WARM LRU's."),
    ("total_malloced", "memcached_malloced_bytes", G, "Number of bytes of memory allocated to slab pages."),
    ("accepting_conns", "memcached_accepting_connections", G, "The Memcached server is currently accepting new connections."),
];

/// `stats` names read for `memcached_commands_total` and `memcached_version`.
#[rustfmt::skip]
pub const EXPORTER_COMMAND_STATS: &[&str] = &[
    "get_hits", "get_misses", "delete_hits", "delete_misses", "incr_hits", "incr_misses", "decr_hits", "decr_misses", "cas_hits", "cas_misses", "cas_badval", "touch_hits", "touch_misses", "cmd_flush", "cmd_set", "version",
];

/// memcrab's series for the other `stats` names.
#[rustfmt::skip]
pub const MEMCRAB_GENERAL: &[(&str, &str, Kind, &str)] = &[
    ("cmd_get", "memcrab_cmd_get_total", C, "Keys requested by get commands (stats cmd_get)."),
    ("cmd_set", "memcrab_cmd_set_total", C, "Storage commands, cas included (stats cmd_set)."),
    ("cmd_touch", "memcrab_cmd_touch_total", C, "Touch commands (stats cmd_touch)."),
    ("cmd_meta", "memcrab_cmd_meta_total", C, "Meta commands (stats cmd_meta)."),
    ("get_expired", "memcrab_get_expired_total", C, "Gets that found an expired item (stats get_expired)."),
    ("get_flushed", "memcrab_get_flushed_total", C, "Gets that found an item flushed by flush_all (stats get_flushed)."),
    ("auth_cmds", "memcrab_auth_commands_total", C, "Authentication attempts (stats auth_cmds)."),
    ("auth_errors", "memcrab_auth_errors_total", C, "Failed authentications (stats auth_errors)."),
    ("idle_kicks", "memcrab_idle_kicks_total", C, "Connections closed by -o idle_timeout (stats idle_kicks)."),
    ("response_obj_oom", "memcrab_response_obj_oom_total", C, "Responses that ran out of memory; always 0: output pauses instead (stats response_obj_oom)."),
    ("read_buf_count", "memcrab_read_buffers", G, "Connection read buffers allocated (stats read_buf_count)."),
    ("read_buf_bytes", "memcrab_read_buffer_bytes", G, "Bytes of the connections' read buffers (stats read_buf_bytes)."),
    ("read_buf_bytes_free", "memcrab_read_buffer_free_bytes", G, "Bytes of unused cached read buffers; always 0: none are cached (stats read_buf_bytes_free)."),
    ("read_buf_oom", "memcrab_read_buffer_oom_total", C, "Read buffers that could not be allocated; always 0 (stats read_buf_oom)."),
    ("reserved_fds", "memcrab_reserved_fds", G, "File descriptors held that are not client connections (stats reserved_fds)."),
    ("lru_crawler_running", "memcrab_lru_crawler_running", G, "Key dumps under way (stats lru_crawler_running)."),
    ("malloc_fails", "memcrab_malloc_fails_total", C, "Failed allocations; always 0: one aborts the process (stats malloc_fails)."),
    ("unexpected_napi_ids", "memcrab_unexpected_napi_ids_total", C, "Connections with an unknown NAPI ID; always 0: no -N (stats unexpected_napi_ids)."),
    ("round_robin_fallback", "memcrab_round_robin_fallback_total", C, "Connections placed in turn for want of a NAPI ID; always 0: no -N (stats round_robin_fallback)."),
    ("max_connections", "memcrab_max_connections", G, "The -c limit (stats max_connections)."),
    ("connection_structures", "memcrab_connection_structures", G, "Connection structures: clients and listeners (stats connection_structures)."),
    ("time_in_listen_disabled_us", "memcrab_listen_disabled_seconds_total", C, "Seconds with the listener disabled; always 0 (stats time_in_listen_disabled_us, in seconds)."),
    ("threads", "memcrab_worker_threads", G, "Worker threads running (stats threads)."),
    ("hash_power_level", "memcrab_hash_power_level", G, "The index size as a power of two (stats hash_power_level)."),
    ("hash_bytes", "memcrab_hash_bytes", G, "Bytes of the index (stats hash_bytes)."),
    ("hash_is_expanding", "memcrab_hash_is_expanding", G, "1 while the index grows (stats hash_is_expanding)."),
    ("memcrab_index_rebuilds", "memcrab_index_rebuilds_total", C, "Index partition tables rebuilt to grow or shrink (stats memcrab_index_rebuilds)."),
    ("memcrab_index_rehashed_items", "memcrab_index_rehashed_items_total", C, "Items re-read by index rebuilds (stats memcrab_index_rehashed_items)."),
    ("limit_used_bytes", "memcrab_limit_used_bytes", G, "Bytes charged against limit_maxbytes: segments and index (stats limit_used_bytes)."),
    ("values_lent", "memcrab_values_lent_total", C, "Values sent from item memory instead of copied (stats values_lent)."),
    ("lent_segment_bytes", "memcrab_lent_segment_bytes", G, "Bytes of the segments that lent values hold (stats lent_segment_bytes)."),
    ("lease_held_bytes", "memcrab_lease_held_bytes", G, "Bytes of retired segments kept for sends in flight (stats lease_held_bytes)."),
    ("log_worker_dropped", "memcrab_log_worker_dropped_total", C, "watch events dropped by workers; always 0 (stats log_worker_dropped)."),
    ("log_worker_written", "memcrab_log_worker_written_total", C, "watch events formatted (stats log_worker_written)."),
    ("log_watcher_skipped", "memcrab_log_watcher_skipped_total", C, "watch events a slow watcher missed (stats log_watcher_skipped)."),
    ("log_watcher_sent", "memcrab_log_watcher_sent_total", C, "watch events sent (stats log_watcher_sent)."),
    ("log_watchers", "memcrab_log_watchers", G, "Connections running watch (stats log_watchers)."),
    ("expired_unfetched", "memcrab_items_expired_unfetched_total", C, "Items expired before they were ever read (stats expired_unfetched)."),
    ("evicted_unfetched", "memcrab_items_evicted_unfetched_total", C, "Items evicted before they were ever read (stats evicted_unfetched)."),
    ("evicted_active", "memcrab_items_evicted_active_total", C, "Items evicted although read recently (stats evicted_active)."),
    ("ssl_new_sessions", "memcrab_tls_new_sessions_total", C, "TLS sessions started, with -o ssl_session_cache (stats ssl_new_sessions)."),
    ("ssl_handshake_errors", "memcrab_tls_handshake_errors_total", C, "Refused TLS ClientHellos (stats ssl_handshake_errors)."),
    ("ssl_proto_errors", "memcrab_tls_proto_errors_total", C, "Other TLS failures of connections: refused client certificates, corrupt records, the peer gone mid-handshake (stats ssl_proto_errors)."),
    ("time_since_server_cert_refresh", "memcrab_tls_seconds_since_cert_refresh", G, "Seconds since the certificate was (re)loaded (stats time_since_server_cert_refresh)."),
    ("active_slabs", "memcrab_active_slabs", G, "Size classes with memory (stats slabs active_slabs)."),
];

/// `stats` names that are not measurements (or are in `memcrab_info`).
#[rustfmt::skip]
pub const NOT_SERIES: &[&str] = &["pid", "pointer_size", "engine", "libevent", "memcrab_version"];

/// `stats items` fields per class: the exporter's, then memcrab's.
#[rustfmt::skip]
pub const EXPORTER_ITEMS: &[(&str, &str, Kind, &str)] = &[
    ("number", "memcached_slab_current_items", G, "Number of items currently stored in this slab class."),
    ("age", "memcached_slab_items_age_seconds", G, "Number of seconds the oldest item has been in the slab class."),
    ("crawler_reclaimed", "memcached_slab_items_crawler_reclaimed_total", C, "Number of items freed by the LRU Crawler."),
    ("evicted", "memcached_slab_items_evicted_total", C, "Total number of times an item had to be evicted from the LRU before it expired."),
    ("evicted_nonzero", "memcached_slab_items_evicted_nonzero_total", C, "Total number of times an item which had an explicit expire time set had to be evicted from the LRU before it expired."),
    ("evicted_time", "memcached_slab_items_evicted_time_seconds", C, "Seconds since the last access for the most recent item evicted from this class."),
    ("evicted_unfetched", "memcached_slab_items_evicted_unfetched_total", C, "Total nmber of items evicted and never fetched."),
    ("expired_unfetched", "memcached_slab_items_expired_unfetched_total", C, "Total number of valid items evicted from the LRU which were never touched after being set."),
    ("outofmemory", "memcached_slab_items_outofmemory_total", C, "Total number of items for this slab class that have triggered an out of memory error."),
    ("reclaimed", "memcached_slab_items_reclaimed_total", C, "Total number of items reclaimed."),
    ("tailrepairs", "memcached_slab_items_tailrepairs_total", C, "Total number of times the entries for a particular ID need repairing."),
    ("mem_requested", "memcached_slab_mem_requested_bytes", C, "Number of bytes of memory actual items take up within a slab."),
    ("moves_to_cold", "memcached_slab_items_moves_to_cold", C, "Number of items moved from HOT or WARM into COLD."),
    ("moves_to_warm", "memcached_slab_items_moves_to_warm", C, "Number of items moves from COLD into WARM."),
    ("moves_within_lru", "memcached_slab_items_moves_within_lru", C, "Number of times active items were bumped within HOT or WARM."),
    ("number_hot", "memcached_slab_hot_items", G, "Number of items presently stored in the HOT LRU."),
    ("number_warm", "memcached_slab_warm_items", G, "Number of items presently stored in the WARM LRU."),
    ("number_cold", "memcached_slab_cold_items", G, "Number of items presently stored in the COLD LRU."),
    ("number_temp", "memcached_slab_temporary_items", G, "Number of items presently stored in the TEMPORARY LRU."),
    ("age_hot", "memcached_slab_hot_age_seconds", G, "Age of the oldest item in HOT LRU."),
    ("age_warm", "memcached_slab_warm_age_seconds", G, "Age of the oldest item in HOT LRU."),
    ("evicted_active", "memcrab_slab_items_evicted_active_total", C, "Items evicted although read recently, per class (stats items evicted_active)."),
];

/// `stats items` hits per LRU (`memcached_slab_lru_hits_total{slab,lru}`).
#[rustfmt::skip]
pub const LRU_HITS: &[(&str, &str)] = &[
    ("hits_to_hot", "hot"),
    ("hits_to_warm", "warm"),
    ("hits_to_cold", "cold"),
    ("hits_to_temp", "temporary"),
];

/// `stats slabs` fields per class: the exporter's, then memcrab's.
#[rustfmt::skip]
pub const EXPORTER_SLABS: &[(&str, &str, Kind, &str)] = &[
    ("chunk_size", "memcached_slab_chunk_size_bytes", G, "Number of bytes allocated to each chunk within this slab class."),
    ("chunks_per_page", "memcached_slab_chunks_per_page", G, "Number of chunks within a single page for this slab class."),
    ("total_pages", "memcached_slab_current_pages", G, "Number of pages allocated to this slab class."),
    ("total_chunks", "memcached_slab_current_chunks", G, "Number of chunks allocated to this slab class."),
    ("used_chunks", "memcached_slab_chunks_used", G, "Number of chunks allocated to an item."),
    ("free_chunks", "memcached_slab_chunks_free", G, "Number of chunks not yet allocated items."),
    ("free_chunks_end", "memcached_slab_chunks_free_end", G, "Number of free chunks at the end of the last allocated page."),
    ("mem_requested", "memcached_slab_mem_requested_bytes", G, "Number of bytes of memory actual items take up within a slab."),
    ("segment_size", "memcrab_slab_segment_size_bytes", G, "Bytes of one segment (stats slabs segment_size)."),
    ("free_pages", "memcrab_slab_free_segments", G, "Segments free or waiting for readers to leave (stats slabs free_pages)."),
    ("reinserted", "memcrab_slab_reinserted_total", C, "Items moved forward by eviction (read since stored) or compaction (stats slabs reinserted)."),
    ("compacted", "memcrab_slab_compacted_total", C, "Segments compacted and reused (stats slabs compacted)."),
];

/// The commands `stats slabs` counts hits of, per class.
pub const SLAB_OPS: &[&str] = &["get", "delete", "incr", "decr", "cas", "touch"];
pub const COMMANDS_HELP: &str =
    "Total number of all requests broken down by command (get, set, etc.) and status.";

pub const SLAB_COMMANDS_HELP: &str =
    "Total number of all requests broken down by command (get, set, etc.) and status per slab.";
