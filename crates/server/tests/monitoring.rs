//! What monitoring reads: `stats`, `stats settings`, `stats slabs` and `stats items`
//! after a workload with small, large, expired and evicted items, checked against
//! the rules Prometheus' memcached_exporter (pkg/exporter/exporter.go, v0.14.4, with
//! its gomemcache fork's stats parser) holds them to. Breaking one makes it answer
//! HTTP 500 or `memcached_up 0`. Runs against memcached too
//! (`MEMCRAB_TEST_SERVER=/usr/bin/memcached`), which keeps every rule.
//!
//! The rules:
//! - gomemcache keeps a `STAT` line only if it splits on single spaces into exactly
//!   three tokens (`stats settings`: at least three), and files `a:b` names under
//!   slab class `a`, `items:a:b` under item class `a` (an integer), the rest as
//!   general stats (so `stats slabs`' `active_slabs` joins `stats`' names).
//! - Every number the exporter reads must parse as a float; `rusage_*` must be
//!   `seconds.micros`; `cmd_set`, `cas_misses`, `cas_hits` and `cas_badval` must be in
//!   `stats`, and `cmd_set`, `cas_hits`, `cas_badval` in every `stats slabs` class.
//! - It registers each metric once per label set: no per-class name may come from
//!   both `stats slabs` and `stats items` (`mem_requested` feeds the same metric from
//!   either), and no general name from two replies.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{store, Client, Server};

/// Numbers the exporter parses from `stats`, when present.
const GENERAL_NUMBERS: &[&str] = &[
    "uptime",
    "time",
    "get_hits",
    "get_misses",
    "delete_hits",
    "delete_misses",
    "incr_hits",
    "incr_misses",
    "decr_hits",
    "decr_misses",
    "cas_hits",
    "cas_misses",
    "cas_badval",
    "touch_hits",
    "touch_misses",
    "cmd_flush",
    "cmd_set",
    "bytes",
    "limit_maxbytes",
    "curr_items",
    "total_items",
    "bytes_read",
    "bytes_written",
    "curr_connections",
    "total_connections",
    "rejected_connections",
    "conn_yields",
    "listen_disabled_num",
    "evictions",
    "reclaimed",
    "store_too_large",
    "store_no_memory",
    "lru_crawler_starts",
    "crawler_items_checked",
    "crawler_reclaimed",
    "moves_to_cold",
    "moves_to_warm",
    "moves_within_lru",
    "total_malloced",
    "accepting_conns",
];

/// Numbers it parses from each `stats slabs` class, when present.
const SLAB_NUMBERS: &[&str] = &[
    "get_hits",
    "delete_hits",
    "incr_hits",
    "decr_hits",
    "cas_hits",
    "touch_hits",
    "cas_badval",
    "cmd_set",
    "chunk_size",
    "chunks_per_page",
    "total_pages",
    "total_chunks",
    "used_chunks",
    "free_chunks",
    "free_chunks_end",
    "mem_requested",
];

/// Numbers it parses from each `stats items` class, when present.
const ITEM_NUMBERS: &[&str] = &[
    "number",
    "age",
    "hits_to_hot",
    "hits_to_warm",
    "hits_to_cold",
    "hits_to_temp",
    "crawler_reclaimed",
    "evicted",
    "evicted_nonzero",
    "evicted_time",
    "evicted_unfetched",
    "expired_unfetched",
    "outofmemory",
    "reclaimed",
    "tailrepairs",
    "mem_requested",
    "moves_to_cold",
    "moves_to_warm",
    "moves_within_lru",
    "number_hot",
    "number_warm",
    "number_cold",
    "number_temp",
    "age_hot",
    "age_warm",
];

/// One reply as gomemcache files it.
#[derive(Default, Debug)]
struct Parsed {
    general: BTreeMap<String, String>,
    /// Class → name → value (`stats slabs` or `stats items`).
    classes: BTreeMap<u32, BTreeMap<String, String>>,
}

/// Sends `stats[ sub]` and files every line as gomemcache does, asserting the line
/// shape the exporter needs.
fn read_stats(c: &mut Client, sub: &str) -> Parsed {
    let req = if sub.is_empty() {
        "stats\r\n".to_string()
    } else {
        format!("stats {sub}\r\n")
    };
    c.send(req.as_bytes());
    let mut p = Parsed::default();
    loop {
        let line = String::from_utf8(c.read_line()).expect("utf-8 stats line");
        if line == "END" {
            return p;
        }
        let tokens: Vec<&str> = line.split(' ').collect();
        assert!(
            tokens.len() == 3 && tokens[0] == "STAT" && !tokens[2].is_empty(),
            "stats {sub}: {line:?} is not `STAT <name> <value>`"
        );
        let parts: Vec<&str> = tokens[1].split(':').collect();
        let (class, name) = match (sub, parts.as_slice()) {
            ("slabs", [class, name]) => (Some(*class), *name),
            ("items", ["items", class, name]) => (Some(*class), *name),
            (_, [name]) => (None, *name),
            _ => panic!("stats {sub}: unexpected name {:?}", tokens[1]),
        };
        let value = tokens[2].to_string();
        match class {
            Some(class) => {
                let class: u32 = class
                    .parse()
                    .unwrap_or_else(|_| panic!("stats {sub}: class {class:?}"));
                let dup = p
                    .classes
                    .entry(class)
                    .or_default()
                    .insert(name.to_string(), value);
                assert!(dup.is_none(), "stats {sub}: {line:?} twice");
            }
            None => {
                let dup = p.general.insert(name.to_string(), value);
                assert!(dup.is_none(), "stats {sub}: {line:?} twice");
            }
        }
    }
}

#[track_caller]
fn number(what: &str, name: &str, v: &str) {
    assert!(
        v.parse::<f64>().is_ok(),
        "{what} {name} = {v:?} is not a number"
    );
}

/// Small, large, expired and evicted items under `-m 8`.
fn workload(s: &Server) {
    let mut c = s.connect();
    for i in 0..200 {
        c.call(
            &store("set", &format!("small{i}"), 0, 0, b"0123456789"),
            b"STORED\r\n",
        );
    }
    let large = vec![b'L'; 300_000];
    for i in 0..3 {
        c.call(
            &store("set", &format!("large{i}"), 1, 0, &large),
            b"STORED\r\n",
        );
    }
    for i in 0..20 {
        c.call(
            &store("set", &format!("expired{i}"), 0, -1, b"x"),
            b"STORED\r\n",
        );
    }
    // 16 MB of 4 KB values through 8 MB: evictions.
    let filler = vec![b'f'; 4000];
    let mut batch = Vec::new();
    for i in 0..4000 {
        batch.extend_from_slice(&store("set", &format!("fill{i}"), 0, 0, &filler));
    }
    c.send(&batch);
    for _ in 0..4000 {
        c.expect(b"STORED\r\n");
    }
    // Some hits, misses and other counters; the replies are not the point here
    // (the first small items may be evicted): read up to the `version` after them.
    c.send(
        b"get small1 large1 expired1 nothing\r\ngets small2\r\ndelete small3\r\n\
          incr small4 1\r\ntouch small5 100\r\nversion\r\n",
    );
    while !c.read_line().starts_with(b"VERSION ") {}
}

#[test]
fn stats_keep_memcached_exporter_rules() {
    let s = Server::tcp(&["-m", "8"]);
    workload(&s);
    let mut c = s.connect();
    let general = read_stats(&mut c, "");
    let settings = read_stats(&mut c, "settings");
    let slabs = read_stats(&mut c, "slabs");
    let items = read_stats(&mut c, "items");

    let g = &general.general;
    assert!(
        g["evictions"].parse::<u64>().expect("evictions") > 0,
        "the workload evicted nothing: {g:?}"
    );
    for name in ["cmd_set", "cas_misses", "cas_hits", "cas_badval"] {
        assert!(g.contains_key(name), "stats has no {name}");
    }
    for name in GENERAL_NUMBERS {
        if let Some(v) = g.get(*name) {
            number("stats", name, v);
        }
    }
    for name in ["rusage_user", "rusage_system"] {
        let v = &g[name];
        let parts: Vec<&str> = v.split('.').collect();
        assert!(
            parts.len() == 2 && parts.iter().all(|p| p.parse::<f64>().is_ok()),
            "stats {name} = {v:?} is not seconds.micros"
        );
    }

    // General names from stats slabs and stats items join the same map.
    for (sub, p) in [("slabs", &slabs), ("items", &items)] {
        for name in p.general.keys() {
            assert!(!g.contains_key(name), "stats {sub} repeats stats' {name}");
            number(sub, name, &p.general[name]);
        }
    }

    assert!(!slabs.classes.is_empty() && !items.classes.is_empty());
    for (class, fields) in &slabs.classes {
        for name in ["cmd_set", "cas_hits", "cas_badval"] {
            assert!(
                fields.contains_key(name),
                "stats slabs class {class} has no {name}"
            );
        }
        for name in SLAB_NUMBERS {
            if let Some(v) = fields.get(*name) {
                number("stats slabs", name, v);
            }
        }
    }
    for (class, fields) in &items.classes {
        for name in ITEM_NUMBERS {
            if let Some(v) = fields.get(*name) {
                number("stats items", name, v);
            }
        }
        // These map to metrics without a class label.
        for name in ["store_too_large", "store_no_memory"] {
            assert!(
                !fields.contains_key(name),
                "stats items class {class}: {name}"
            );
        }
        if let Some(slab) = slabs.classes.get(class) {
            let slab_names: BTreeSet<&String> = slab.keys().collect();
            let item_names: BTreeSet<&String> = fields.keys().collect();
            let both: Vec<_> = slab_names.intersection(&item_names).collect();
            assert!(
                both.is_empty(),
                "class {class}: {both:?} in both stats slabs and stats items"
            );
        }
    }

    let st = &settings.general;
    number("stats settings", "maxconns", &st["maxconns"]);
    if st.get("lru_crawler").map(String::as_str) == Some("yes") {
        for name in [
            "lru_crawler_sleep",
            "lru_crawler_tocrawl",
            "hot_lru_pct",
            "warm_lru_pct",
            "hot_max_factor",
            "warm_max_factor",
        ] {
            if let Some(v) = st.get(name) {
                number("stats settings", name, v);
            }
        }
        if let Some(v) = st.get("lru_maintainer_thread") {
            assert!(v == "yes" || v == "no", "lru_maintainer_thread {v:?}");
        }
    }
}
