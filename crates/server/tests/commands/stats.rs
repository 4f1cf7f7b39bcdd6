//! Stats, over TCP: memcached's fields, counters that move, `stats` subcommands.

use super::*;

/// CPUs this process may run on (`Cpus_allowed_list`, e.g. `0-1,4`); the server,
/// started by it, inherits the same set.
fn usable_cpus() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .trim();
    list.split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().expect("cpu") - a.parse::<usize>().expect("cpu") + 1,
            None => 1,
        })
        .sum()
}

/// memcached's general-purpose stats that dashboards and exporters read
/// (protocol.txt "General-purpose statistics"; the memcached Prometheus exporter and
/// Telegraf's plugin). Internals of memcached's slab mover, LRU crawler, logger and
/// proxy are left out: memcrab has none of those machines.
const GENERAL_STATS: &[&str] = &[
    "pid",
    "uptime",
    "time",
    "version",
    "pointer_size",
    "rusage_user",
    "rusage_system",
    "max_connections",
    "curr_connections",
    "total_connections",
    "rejected_connections",
    "connection_structures",
    "cmd_get",
    "cmd_set",
    "cmd_flush",
    "cmd_touch",
    "get_hits",
    "get_misses",
    "get_expired",
    "get_flushed",
    "delete_misses",
    "delete_hits",
    "incr_misses",
    "incr_hits",
    "decr_misses",
    "decr_hits",
    "cas_misses",
    "cas_hits",
    "cas_badval",
    "touch_hits",
    "touch_misses",
    "store_too_large",
    "store_no_memory",
    "auth_cmds",
    "auth_errors",
    "bytes_read",
    "bytes_written",
    "limit_maxbytes",
    "accepting_conns",
    "listen_disabled_num",
    "threads",
    "conn_yields",
    "hash_power_level",
    "hash_bytes",
    "hash_is_expanding",
    "bytes",
    "curr_items",
    "total_items",
    "expired_unfetched",
    "evicted_unfetched",
    "evictions",
    "reclaimed",
];

fn missing<'a>(have: &[(String, String)], want: &[&'a str]) -> Vec<&'a str> {
    want.iter()
        .copied()
        .filter(|w| !have.iter().any(|(n, _)| n == w))
        .collect()
}

#[test]
fn stats_has_memcached_fields() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let st = c.stats_list("");
    assert_eq!(
        missing(&st, GENERAL_STATS),
        Vec::<&str>::new(),
        "missing general stats"
    );
    let map: std::collections::HashMap<_, _> = st.into_iter().collect();
    assert_eq!(map["pid"], s.pid().to_string());
    assert_eq!(map["pointer_size"], "64");
    assert_eq!(map["limit_maxbytes"], (64u64 << 20).to_string());
    // memcached runs -t (4) threads; memcrab reports the workers it runs: -t capped
    // at the CPUs it may use.
    let threads = if common::against_memcached() {
        4
    } else {
        usable_cpus().min(4)
    };
    assert_eq!(map["threads"], threads.to_string());
    assert_eq!(map["max_connections"], "1024");
    assert_eq!(map["accepting_conns"], "1");
    assert!(map["version"].starts_with("1.6."), "{}", map["version"]);
    let now = unix_now();
    let t: i64 = map["time"].parse().expect("time");
    assert!((t - now).abs() <= 2, "STAT time {t}, now {now}");
    for tv in ["rusage_user", "rusage_system"] {
        let v = &map[tv];
        let (sec, usec) = v.split_once('.').expect("seconds.micros");
        assert!(
            sec.parse::<u64>().is_ok() && usec.len() == 6 && usec.parse::<u64>().is_ok(),
            "{tv} {v}"
        );
    }
}

/// The counters a fixed sequence of commands leaves, as memcached counts them.
#[test]
fn stats_counters_move() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let want_zero = c.stats("");
    for name in [
        "cmd_get",
        "cmd_set",
        "get_hits",
        "curr_items",
        "total_items",
    ] {
        assert_eq!(want_zero[name], "0", "{name} on a fresh server");
    }
    c.call(&store("set", "a", 0, 0, b"x"), b"STORED\r\n");
    c.call(&store("set", "b", 0, 0, b"1"), b"STORED\r\n");
    c.call(
        b"get a b c\r\n",
        &cat(&[&value("a", 0, b"x"), &value("b", 0, b"1"), b"END\r\n"]),
    );
    c.call(b"get a\r\n", &cat(&[&value("a", 0, b"x"), b"END\r\n"]));
    c.call(b"delete a\r\n", b"DELETED\r\n");
    c.call(b"delete a\r\n", b"NOT_FOUND\r\n");
    c.call(b"incr b 1\r\n", b"2\r\n");
    c.call(b"incr z 1\r\n", b"NOT_FOUND\r\n");
    c.call(b"decr b 1\r\n", b"1\r\n");
    c.call(b"decr z 1\r\n", b"NOT_FOUND\r\n");
    let cas = c.gets_cas("b");
    c.call(
        format!("cas b 0 0 1 {}\r\nx\r\n", cas.wrapping_add(1)).as_bytes(),
        b"EXISTS\r\n",
    );
    c.call(
        format!("cas b 0 0 1 {cas}\r\n7\r\n").as_bytes(),
        b"STORED\r\n",
    );
    c.call(b"cas zz 0 0 1 1\r\nx\r\n", b"NOT_FOUND\r\n");
    c.call(b"touch b 100\r\n", b"TOUCHED\r\n");
    c.call(b"touch zz 100\r\n", b"NOT_FOUND\r\n");
    c.call(
        b"gat 100 b zz\r\n",
        &cat(&[&value("b", 0, b"7"), b"END\r\n"]),
    );
    // In one write, so that memcached's background LRU maintainer cannot reclaim the
    // dead items before the gets see them (it would count plain misses).
    c.call(
        &cat(&[&store("set", "e", 0, -1, b"x"), b"get e\r\n"]),
        b"STORED\r\nEND\r\n",
    );
    // flush_all unlinks b and f at once in memcached 1.6.25+ (plain misses) and
    // lazily in 1.6.18 (get_flushed 2): get_flushed is left to today.rs, which runs
    // against 1.6.45; get_misses counts both ways.
    c.call(
        &cat(&[&store("set", "f", 0, 0, b"x"), b"flush_all\r\nget b f\r\n"]),
        b"STORED\r\nOK\r\nEND\r\n",
    );
    c.call(&store("set", "g", 0, 0, b"x"), b"STORED\r\n");
    c.call(&store("set", "h", 0, 0, b"x"), b"STORED\r\n");
    c.call(
        &store("set", "big", 0, 0, &vec![b'x'; ITEM_SIZE_MAX]),
        TOO_LARGE,
    );
    let st = c.stats("");
    let want: &[(&str, u64)] = &[
        ("cmd_get", 8),
        ("cmd_set", 9),
        ("cmd_flush", 1),
        ("cmd_touch", 4),
        ("get_hits", 4),
        ("get_misses", 4),
        ("get_expired", 1),
        ("delete_hits", 1),
        ("delete_misses", 1),
        ("incr_hits", 1),
        ("incr_misses", 1),
        ("decr_hits", 1),
        ("decr_misses", 1),
        ("cas_hits", 1),
        ("cas_misses", 1),
        ("cas_badval", 1),
        ("touch_hits", 2),
        ("touch_misses", 2),
        ("store_too_large", 1),
        ("store_no_memory", 0),
        ("curr_items", 2),
        ("evictions", 0),
    ];
    let got: Vec<(&str, u64)> = want
        .iter()
        .map(|(n, _)| {
            let v = st.get(*n).unwrap_or_else(|| panic!("no STAT {n}"));
            (*n, v.parse().expect("number"))
        })
        .collect();
    assert_eq!(got, want);
    let bytes: u64 = st["bytes"].parse().expect("bytes");
    assert!(bytes > 0, "bytes {bytes} with 2 items");

    // Connection counters move with connections.
    let total = c.stat("total_connections");
    let curr = c.stat("curr_connections");
    let mut other = s.connect();
    other.sync();
    assert_eq!(c.stat("total_connections"), total + 1);
    assert_eq!(c.stat("curr_connections"), curr + 1);
    drop(other);
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.stat("curr_connections") != curr {
        assert!(Instant::now() < deadline, "curr_connections did not drop");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Bytes move with requests and replies.
    let read = c.stat("bytes_read");
    let written = c.stat("bytes_written");
    c.call(b"get nothing-at-all-here\r\n", b"END\r\n");
    assert!(c.stat("bytes_read") >= read + 25);
    assert!(c.stat("bytes_written") >= written + 5);
}

/// A lookup that finds a dead item counts `get_expired` whatever the command
/// (memcached counts it in `do_item_get`), and then the command's own counters: a
/// `gat` a touch miss, an `mg` with `T` a get miss (it counts a touch only on a hit).
#[test]
fn stats_dead_items_count_for_every_lookup() {
    // memcached's crawler off, and its LRU maintainer's reclaims allowed for, as in
    // dead.rs.
    let s = Server::tcp(&["-o", "no_lru_crawler"]);
    let mut c = s.connect();
    c.call(
        &cat(&[
            &store("set", "e1", 0, -1, b"x"),
            b"gat 100 e1\r\n",
            &store("set", "e2", 0, -1, b"x"),
            b"mg e2 T10 v\r\n",
        ]),
        b"STORED\r\nEND\r\nSTORED\r\nEN\r\n",
    );
    let st = c.stats("");
    let n = |name: &str| st[name].parse::<u64>().expect("a number");
    assert!(
        crate::dead::dead_seen(n("get_expired"), n("reclaimed"), 2),
        "{st:?}"
    );
    let want: &[(&str, u64)] = &[
        ("cmd_touch", 1),
        ("touch_hits", 0),
        ("touch_misses", 1),
        ("cmd_get", 1),
        ("get_hits", 0),
        ("get_misses", 1),
    ];
    let got: Vec<(&str, u64)> = want
        .iter()
        .map(|(n, _)| (*n, st[*n].parse().expect("number")))
        .collect();
    assert_eq!(got, want);
}

/// memcached counts an item each time one is linked: an incr/decr that rewrites the
/// value in place (the new number fits) links nothing; one that grows it does.
#[test]
fn stats_total_items_counts_links() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.call(&store("set", "n", 0, 0, b"1"), b"STORED\r\n");
    c.call(&store("set", "n", 0, 0, b"1"), b"STORED\r\n");
    assert_eq!(c.stat("total_items"), 2);
    c.call(b"incr n 1\r\n", b"2\r\n");
    c.call(b"decr n 1\r\n", b"1\r\n");
    assert_eq!(c.stat("total_items"), 2, "in-place incr/decr link nothing");
    c.call(b"incr n 100\r\n", b"101\r\n");
    assert_eq!(c.stat("total_items"), 3, "a longer number is a new item");
    c.call(&store("append", "n", 0, 0, b"0"), b"STORED\r\n");
    assert_eq!(c.stat("total_items"), 4);
    c.call(b"touch n 100\r\n", b"TOUCHED\r\n");
    c.call(b"delete n\r\n", b"DELETED\r\n");
    assert_eq!(c.stat("total_items"), 4);
    assert_eq!(c.stat("curr_items"), 0);
}

#[test]
fn stats_reset_zeroes_counters() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.call(&store("set", "a", 0, 0, b"x"), b"STORED\r\n");
    c.call(b"get a b\r\n", &cat(&[&value("a", 0, b"x"), b"END\r\n"]));
    c.call(b"delete b\r\n", b"NOT_FOUND\r\n");
    c.call(b"incr a 1\r\n", NON_NUMERIC);
    c.call(b"touch a 0\r\n", b"TOUCHED\r\n");
    c.call(b"flush_all 1000\r\n", b"OK\r\n");
    assert_eq!(c.stat("cmd_get"), 2);
    c.call(b"stats reset\r\n", b"RESET\r\n");
    let st = c.stats("");
    for name in [
        "cmd_get",
        "cmd_set",
        "cmd_flush",
        "cmd_touch",
        "get_hits",
        "get_misses",
        "delete_misses",
        "touch_hits",
        "total_items",
        "total_connections",
        "evictions",
    ] {
        assert_eq!(st[name], "0", "{name} after stats reset");
    }
    // Gauges are not counters: they stay.
    assert_eq!(st["curr_items"], "1");
    assert_eq!(st["curr_connections"], "1");
    // And counting starts again.
    c.call(b"get a\r\n", &cat(&[&value("a", 0, b"x"), b"END\r\n"]));
    assert_eq!(c.stat("get_hits"), 1);
}

#[test]
fn stats_subcommand_errors() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.call(b"stats bogus\r\n", b"ERROR\r\n");
    c.call(b"stats bogus x\r\n", b"ERROR\r\n");
    c.call(b"stats noreply\r\n", b"ERROR\r\n");
    c.call(
        b"stats detail\r\n",
        b"CLIENT_ERROR usage: stats detail on|off|dump\r\n",
    );
    c.call(b"stats sizes\r\n", b"STAT sizes_status disabled\r\nEND\r\n");
    c.sync();
}

#[test]
fn stats_settings_reflect_flags() {
    let s = Server::tcp(&[
        "-m",
        "32",
        "-c",
        "100",
        "-I",
        "2m",
        "-t",
        "2",
        "-R",
        "5",
        "-b",
        "512",
        "-M",
        "-C",
        "-A",
        "-o",
        "idle_timeout=7",
    ]);
    let mut c = s.connect();
    let st = c.stats_list("settings");
    // The names protocol.txt documents for settings memcrab has.
    let names = [
        "maxbytes",
        "maxconns",
        "tcpport",
        "udpport",
        "inter",
        "verbosity",
        "oldest",
        "evictions",
        "domain_socket",
        "umask",
        "shutdown_command",
        "growth_factor",
        "chunk_size",
        "num_threads",
        "stat_key_prefix",
        "detail_enabled",
        "reqs_per_event",
        "cas_enabled",
        "tcp_backlog",
        "binding_protocol",
        "auth_enabled_sasl",
        "item_size_max",
        "maxconns_fast",
        "hashpower_init",
        "flush_enabled",
        "idle_timeout",
    ];
    let map: std::collections::HashMap<_, _> = st.iter().cloned().collect();
    let want: &[(&str, &str)] = &[
        ("maxbytes", "33554432"),
        ("maxconns", "100"),
        ("udpport", "0"),
        ("verbosity", "0"),
        ("evictions", "off"),
        ("domain_socket", "NULL"),
        ("umask", "700"),
        ("shutdown_command", "yes"),
        ("growth_factor", "1.25"),
        ("chunk_size", "48"),
        ("num_threads", "2"),
        ("stat_key_prefix", ":"),
        ("detail_enabled", "no"),
        ("reqs_per_event", "5"),
        ("cas_enabled", "no"),
        ("tcp_backlog", "512"),
        // memcached's default `-B auto` sniffs text or binary per connection.
        ("binding_protocol", "auto-negotiate"),
        ("auth_enabled_sasl", "no"),
        ("item_size_max", "2097152"),
        ("flush_enabled", "yes"),
        ("idle_timeout", "7"),
        ("maxconns_fast", "yes"),
    ];
    let got: Vec<(&str, &str)> = want
        .iter()
        .map(|(n, _)| (*n, map.get(*n).map_or("<missing>", |v| v.as_str())))
        .collect();
    assert_eq!(got, want);
    assert_eq!(missing(&st, &names), Vec::<&str>::new(), "missing settings");
}

#[test]
fn stats_items() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.call(b"stats items\r\n", b"END\r\n");
    for i in 0..10 {
        c.call(
            &store("set", &format!("k{i}"), 0, 0, b"value"),
            b"STORED\r\n",
        );
    }
    let items = c.stats_list("items");
    let mut classes: Vec<String> = Vec::new();
    let mut number = 0;
    for (name, v) in &items {
        let parts: Vec<&str> = name.split(':').collect();
        assert!(
            parts.len() == 3 && parts[0] == "items" && parts[1].parse::<u32>().is_ok(),
            "stats items line {name} {v}"
        );
        assert!(v.parse::<u64>().is_ok(), "{name} {v}");
        if !classes.iter().any(|c| c == parts[1]) {
            classes.push(parts[1].to_string());
        }
        if parts[2] == "number" {
            number += v.parse::<u64>().expect("number");
        }
    }
    assert_eq!(number, 10, "items:N:number sums to curr_items");
    // The per-class fields memcached has reported since 1.4, which monitoring reads.
    let fields = [
        "number",
        "age",
        "evicted",
        "evicted_nonzero",
        "evicted_time",
        "outofmemory",
        "tailrepairs",
        "reclaimed",
        "expired_unfetched",
        "evicted_unfetched",
        "mem_requested",
    ];
    for class in &classes {
        let want: Vec<String> = fields
            .iter()
            .map(|f| format!("items:{class}:{f}"))
            .collect();
        let want: Vec<&str> = want.iter().map(String::as_str).collect();
        assert_eq!(missing(&items, &want), Vec::<&str>::new(), "stats items");
    }
}

#[test]
fn stats_slabs() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    for i in 0..10 {
        c.call(
            &store("set", &format!("k{i}"), 0, 0, b"value"),
            b"STORED\r\n",
        );
    }
    let slabs = c.stats_list("slabs");
    let map: std::collections::HashMap<_, _> = slabs.iter().cloned().collect();
    let active: u64 = map["active_slabs"].parse().expect("active_slabs");
    assert!(active >= 1);
    assert!(
        map["total_malloced"]
            .parse::<u64>()
            .expect("total_malloced")
            > 0
    );
    let used: u64 = slabs
        .iter()
        .filter(|(n, _)| n.ends_with(":used_chunks"))
        .map(|(_, v)| v.parse::<u64>().expect("used_chunks"))
        .sum();
    assert_eq!(used, 10, "N:used_chunks sums to the items stored");
    let fields = [
        "chunk_size",
        "chunks_per_page",
        "total_pages",
        "total_chunks",
        "used_chunks",
        "free_chunks",
        "free_chunks_end",
        "get_hits",
        "cmd_set",
        "delete_hits",
        "incr_hits",
        "decr_hits",
        "cas_hits",
        "cas_badval",
        "touch_hits",
    ];
    let class = slabs
        .iter()
        .find_map(|(n, _)| n.strip_suffix(":used_chunks"))
        .expect("a slab class line");
    let want: Vec<String> = fields.iter().map(|f| format!("{class}:{f}")).collect();
    let want: Vec<&str> = want.iter().map(String::as_str).collect();
    assert_eq!(missing(&slabs, &want), Vec::<&str>::new(), "stats slabs");
}

#[test]
fn stats_conns_lists_listener_and_client() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let me = c.stream.local_tcp_addr().expect("tcp");
    let st = c.stats_list("conns");
    let listen = format!("tcp:127.0.0.1:{}", s.port());
    let fd_of = |value: &str| -> String {
        st.iter()
            .find(|(n, v)| n.ends_with(":addr") && v == value)
            .map(|(n, _)| n.trim_end_matches(":addr").to_string())
            .unwrap_or_else(|| panic!("no `STAT <fd>:addr {value}` in {st:?}"))
    };
    let lfd = fd_of(&listen);
    let get = |name: String| -> String {
        st.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no STAT {name} in {st:?}"))
    };
    assert_eq!(get(format!("{lfd}:state")), "conn_listening");
    let cfd = fd_of(&format!("tcp:{me}"));
    assert_eq!(get(format!("{cfd}:listen_addr")), listen);
    assert_eq!(get(format!("{cfd}:state")), "conn_parse_cmd");
    assert!(get(format!("{cfd}:secs_since_last_cmd"))
        .parse::<u64>()
        .is_ok());
    for (name, _) in &st {
        let (fd, field) = name.split_once(':').expect("<fd>:<field>");
        assert!(fd.parse::<u32>().is_ok(), "{name}");
        assert!(
            ["addr", "listen_addr", "state", "secs_since_last_cmd"].contains(&field),
            "{name}"
        );
    }
}
