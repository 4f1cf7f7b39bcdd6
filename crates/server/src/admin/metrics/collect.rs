//! What `/metrics` serves: the `stats` reports, read as memcached_exporter reads
//! them, turned into the families it makes (same names, types and labels), and
//! memcrab's own `memcrab_*` series for everything else those reports hold and for
//! what the engine and the workers count.
//!
//! The reports come from [`crate::admin::stats::render`], the code that answers
//! `stats`: the two can never disagree, and a stat another change adds shows up in
//! the `memcrab_unmapped_stats` gauge (and fails crates/server/tests/metrics.rs)
//! until it is given a series here.

use std::collections::BTreeMap;

use super::expo::{Family, Kind, Value};
use super::names::*;
use crate::admin::hotkeys::{self, HotKeys};
use crate::admin::latency::{self, Snapshot, LE_SECS};
use crate::admin::stats;
use crate::server::Server;

/// One `stats` report as (name, value) pairs, in order.
pub type Report = Vec<(String, String)>;

/// Renders `stats <sub>` and splits its `STAT name value` lines (a value may hold
/// spaces: `stats settings`' `inter`).
pub fn report(server: &Server, sub: Option<&[u8]>) -> Report {
    let mut out = Vec::new();
    stats::render(server, sub, None, -1, &mut out);
    parse_report(&out)
}

pub fn parse_report(text: &[u8]) -> Report {
    text.split(|&b| b == b'\n')
        .filter_map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let rest = line.strip_prefix(b"STAT ")?;
            let text = String::from_utf8_lossy(rest);
            let (k, v) = text.split_once(' ').unwrap_or((&text, ""));
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// The four reports `/metrics` reads.
pub struct Reports {
    pub general: Report,
    pub settings: Report,
    pub items: Report,
    pub slabs: Report,
    pub conns: Report,
}

impl Reports {
    pub fn read(server: &Server) -> Reports {
        Reports {
            general: report(server, None),
            settings: report(server, Some(b"settings")),
            items: report(server, Some(b"items")),
            slabs: report(server, Some(b"slabs")),
            conns: report(server, Some(b"conns")),
        }
    }
}

/// A number as the exporter parses one (`strconv.ParseFloat`), or a timeval
/// (`rusage_*`: seconds.micros).
fn num(v: &str) -> Option<Value> {
    if let Ok(n) = v.parse::<u64>() {
        return Some(Value::Int(n));
    }
    v.parse::<f64>().ok().map(Value::Float)
}

fn as_f64(v: Value) -> f64 {
    match v {
        Value::Int(n) => n as f64,
        Value::Float(x) => x,
    }
}

/// Families by name, in first-use order.
#[derive(Default)]
pub struct Out {
    families: Vec<Family>,
    index: BTreeMap<String, usize>,
}

impl Out {
    fn family(&mut self, name: &str, kind: Kind, help: &'static str) -> &mut Family {
        let i = *self.index.entry(name.to_string()).or_insert_with(|| {
            self.families.push(Family::new(name, kind, help));
            self.families.len() - 1
        });
        &mut self.families[i]
    }

    fn put(
        &mut self,
        name: &str,
        kind: Kind,
        help: &'static str,
        labels: &[(&'static str, &str)],
        v: Value,
    ) {
        self.family(name, kind, help).push(labels, v);
    }

    /// Adds a family made whole (a histogram, the hot keys).
    fn add(&mut self, f: Family) {
        self.index.insert(f.name.clone(), self.families.len());
        self.families.push(f);
    }

    pub fn into_families(self) -> Vec<Family> {
        self.families
    }
}

use Kind::{Counter as C, Gauge as G};

/// Every family `/metrics` serves.
pub fn collect(server: &Server) -> Vec<Family> {
    let r = Reports::read(server);
    let mut out = Out::default();
    families_from_reports(&r, &mut out);
    engine_and_workers(server, &mut out);
    out.into_families()
}

fn lookup<'a>(report: &'a Report, name: &str) -> Option<&'a str> {
    report
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A report's `<class>:<field>` (slabs) or `items:<class>:<field>` entries, by class.
fn by_class<'a>(report: &'a Report, prefix: &str) -> BTreeMap<u32, Vec<(&'a str, &'a str)>> {
    let mut m: BTreeMap<u32, Vec<(&str, &str)>> = BTreeMap::new();
    for (k, v) in report {
        let Some(rest) = k.strip_prefix(prefix) else {
            continue;
        };
        if let Some((class, field)) = rest.split_once(':') {
            if let Ok(c) = class.parse::<u32>() {
                m.entry(c).or_default().push((field, v.as_str()));
            }
        }
    }
    m
}

/// The families made from the `stats` reports (memcached_exporter's and memcrab's).
pub fn families_from_reports(r: &Reports, out: &mut Out) {
    let g = &r.general;
    let get = |name: &str| lookup(g, name).and_then(num);
    // slabs' unprefixed names (active_slabs, total_malloced) join `stats`' as the
    // exporter's stats parser files them.
    let slabs_general: Report = r
        .slabs
        .iter()
        .filter(|(k, _)| !k.contains(':'))
        .cloned()
        .collect();
    let get_any = |name: &str| get(name).or_else(|| lookup(&slabs_general, name).and_then(num));

    out.put(
        "memcached_up",
        G,
        "Could the memcached server be reached.",
        &[],
        Value::Int(1),
    );
    if let Some(v) = lookup(g, "version") {
        out.put(
            "memcached_version",
            G,
            "The version of this memcached server.",
            &[("version", v)],
            Value::Int(1),
        );
    }
    let cmd = |out: &mut Out, stat: &str, command: &str, status: &str| {
        if let Some(v) = get(stat) {
            out.put(
                "memcached_commands_total",
                C,
                COMMANDS_HELP,
                &[("command", command), ("status", status)],
                v,
            );
        }
    };
    for op in SLAB_OPS {
        cmd(out, &format!("{op}_hits"), op, "hit");
        cmd(out, &format!("{op}_misses"), op, "miss");
    }
    cmd(out, "cas_badval", "cas", "badval");
    cmd(out, "cmd_flush", "flush", "hit");
    // memcached counts cas again in cmd_set: the exporter subtracts it.
    if let (Some(set), Some(a), Some(b), Some(c)) = (
        get("cmd_set"),
        get("cas_misses"),
        get("cas_hits"),
        get("cas_badval"),
    ) {
        let v = as_f64(set) - as_f64(a) - as_f64(b) - as_f64(c);
        out.put(
            "memcached_commands_total",
            C,
            COMMANDS_HELP,
            &[("command", "set"), ("status", "hit")],
            Value::Float(v),
        );
    }
    for &(stat, name, kind, help) in EXPORTER_GENERAL {
        let v = match stat {
            "rusage_user" | "rusage_system" => lookup(g, stat).and_then(timeval),
            _ => get_any(stat),
        };
        if let Some(v) = v {
            out.put(name, kind, help, &[], v);
        }
    }
    for &(stat, name, kind, help) in MEMCRAB_GENERAL {
        // Prometheus' base unit is the second.
        let seconds = |v: Value| match stat.ends_with("_us") {
            true => Value::Float(as_f64(v) / 1e6),
            false => v,
        };
        if let Some(v) = get_any(stat).map(seconds) {
            out.put(name, kind, help, &[], v);
        }
    }
    settings(&r.settings, out);
    items(&r.items, out);
    slabs(&r.slabs, out);
    conns(&r.conns, out);
    let unmapped = unmapped_stats(r);
    out.put(
        "memcrab_unmapped_stats",
        G,
        "Numeric stats fields that /metrics has no series for (0 unless a new stat was added without one).",
        &[],
        Value::Int(unmapped.len() as u64),
    );
}

/// `rusage_*`'s `seconds.micros`, as the exporter's parseTimeval.
fn timeval(v: &str) -> Option<Value> {
    let (s, us) = v.split_once('.')?;
    let (s, us) = (s.parse::<f64>().ok()?, us.parse::<f64>().ok()?);
    Some(Value::Float(s + us / 1e6))
}

/// Numeric `stats`, `stats items` and `stats slabs` names with no series.
pub fn unmapped_stats(r: &Reports) -> Vec<String> {
    let known_general = |k: &str| {
        EXPORTER_GENERAL.iter().any(|e| e.0 == k)
            || MEMCRAB_GENERAL.iter().any(|e| e.0 == k)
            || EXPORTER_COMMAND_STATS.contains(&k)
            || NOT_SERIES.contains(&k)
    };
    let field_known = |f: &str, table: &[(&str, &str, Kind, &str)]| {
        table.iter().any(|e| e.0 == f)
            || LRU_HITS.iter().any(|e| e.0 == f)
            || f.ends_with("_hits")
            || f == "cas_badval"
            || f == "cmd_set"
    };
    let mut missing = Vec::new();
    for (k, v) in r.general.iter().chain(&r.slabs) {
        if num(v).is_none() && timeval(v).is_none() {
            continue;
        }
        let ok = match k.split_once(':') {
            None => known_general(k),
            Some((_, f)) => field_known(f, EXPORTER_SLABS),
        };
        if !ok {
            missing.push(k.clone());
        }
    }
    for (k, v) in &r.items {
        let f = k.rsplit(':').next().unwrap_or("");
        if num(v).is_some() && !field_known(f, EXPORTER_ITEMS) {
            missing.push(k.clone());
        }
    }
    missing
}

/// `stats settings`: the exporter's few, then every numeric or yes/no setting as
/// `memcrab_setting{name}` and every other as `memcrab_setting_info{name,value}`.
fn settings(s: &Report, out: &mut Out) {
    if let Some(v) = lookup(s, "maxconns").and_then(num) {
        out.put(
            "memcached_max_connections",
            G,
            "Maximum number of clients allowed.",
            &[],
            v,
        );
    }
    if lookup(s, "lru_crawler") == Some("yes") {
        let b = |k: &str| lookup(s, k).and_then(yes_no);
        let n = |k: &str| lookup(s, k).and_then(num);
        let crawler: [(&str, &str, &'static str, Option<Value>); 8] = [
            (
                "lru_crawler",
                "memcached_lru_crawler_enabled",
                "Whether the LRU crawler is enabled.",
                b("lru_crawler"),
            ),
            (
                "lru_crawler_sleep",
                "memcached_lru_crawler_sleep",
                "Microseconds to sleep between LRU crawls.",
                n("lru_crawler_sleep"),
            ),
            (
                "lru_crawler_tocrawl",
                "memcached_lru_crawler_to_crawl",
                "Max items to crawl per slab per run.",
                n("lru_crawler_tocrawl"),
            ),
            (
                "lru_maintainer_thread",
                "memcached_lru_crawler_maintainer_thread",
                "Split LRU mode and background threads.",
                b("lru_maintainer_thread"),
            ),
            (
                "hot_lru_pct",
                "memcached_lru_crawler_hot_percent",
                "Percent of slab memory reserved for HOT LRU.",
                n("hot_lru_pct"),
            ),
            (
                "warm_lru_pct",
                "memcached_lru_crawler_warm_percent",
                "Percent of slab memory reserved for WARM LRU.",
                n("warm_lru_pct"),
            ),
            (
                "hot_max_factor",
                "memcached_lru_crawler_hot_max_factor",
                "Set idle age of HOT LRU to COLD age * this",
                n("hot_max_factor"),
            ),
            (
                "warm_max_factor",
                "memcached_lru_crawler_warm_max_factor",
                "Set idle age of WARM LRU to COLD age * this",
                n("warm_max_factor"),
            ),
        ];
        for (_, name, help, v) in crawler {
            if let Some(v) = v {
                out.put(name, G, help, &[], v);
            }
        }
    }
    for (k, v) in s {
        match num(v).or_else(|| yes_no(v)) {
            Some(x) => out.put(
                "memcrab_setting",
                G,
                "A numeric or yes/no (1/0) setting from stats settings.",
                &[("name", k)],
                x,
            ),
            None => out.put(
                "memcrab_setting_info",
                G,
                "A text setting from stats settings, as a label.",
                &[("name", k), ("value", v)],
                Value::Int(1),
            ),
        }
    }
}

fn yes_no(v: &str) -> Option<Value> {
    match v {
        "yes" | "on" => Some(Value::Int(1)),
        "no" | "off" => Some(Value::Int(0)),
        _ => None,
    }
}

fn items(report: &Report, out: &mut Out) {
    for (class, fields) in by_class(report, "items:") {
        let slab = class.to_string();
        for (f, v) in &fields {
            let Some(v) = num(v) else { continue };
            if let Some(&(_, name, kind, help)) = EXPORTER_ITEMS.iter().find(|e| e.0 == *f) {
                out.put(name, kind, help, &[("slab", &slab)], v);
            } else if let Some(&(_, lru)) = LRU_HITS.iter().find(|e| e.0 == *f) {
                out.put(
                    "memcached_slab_lru_hits_total",
                    C,
                    "Number of get_hits to the LRU.",
                    &[("slab", &slab), ("lru", lru)],
                    v,
                );
            }
        }
    }
}

fn slabs(report: &Report, out: &mut Out) {
    for (class, fields) in by_class(report, "") {
        let slab = class.to_string();
        let get = |k: &str| fields.iter().find(|e| e.0 == k).and_then(|e| num(e.1));
        for op in SLAB_OPS {
            if let Some(v) = get(&format!("{op}_hits")) {
                out.put(
                    "memcached_slab_commands_total",
                    C,
                    SLAB_COMMANDS_HELP,
                    &[("slab", &slab), ("command", op), ("status", "hit")],
                    v,
                );
            }
        }
        if let Some(v) = get("cas_badval") {
            out.put(
                "memcached_slab_commands_total",
                C,
                SLAB_COMMANDS_HELP,
                &[("slab", &slab), ("command", "cas"), ("status", "badval")],
                v,
            );
        }
        if let (Some(set), Some(h), Some(b)) = (get("cmd_set"), get("cas_hits"), get("cas_badval"))
        {
            let v = as_f64(set) - as_f64(h) - as_f64(b);
            out.put(
                "memcached_slab_commands_total",
                C,
                SLAB_COMMANDS_HELP,
                &[("slab", &slab), ("command", "set"), ("status", "hit")],
                Value::Float(v),
            );
        }
        for &(field, name, kind, help) in EXPORTER_SLABS {
            if let Some(v) = get(field) {
                out.put(name, kind, help, &[("slab", &slab)], v);
            }
        }
    }
}

/// `stats conns`: connections counted by state, and the longest idle.
fn conns(report: &Report, out: &mut Out) {
    let mut by_state: BTreeMap<&str, u64> = BTreeMap::new();
    let mut idle_max = 0u64;
    for (k, v) in report {
        match k.split_once(':') {
            Some((_, "state")) => *by_state.entry(v.as_str()).or_default() += 1,
            Some((_, "secs_since_last_cmd")) => {
                idle_max = idle_max.max(v.parse().unwrap_or(0));
            }
            _ => {}
        }
    }
    for (state, n) in by_state {
        out.put(
            "memcrab_connections",
            G,
            "Connections and listeners by state (stats conns).",
            &[("state", state)],
            Value::Int(n),
        );
    }
    out.put(
        "memcrab_connection_idle_seconds_max",
        G,
        "The longest secs_since_last_cmd in stats conns.",
        &[],
        Value::Int(idle_max),
    );
}

/// memcrab's own series from the engine and the workers.
fn engine_and_workers(server: &Server, out: &mut Out) {
    let s = &server.settings;
    out.put(
        "memcrab_info",
        G,
        "The server's version, engine and transport (io_uring or epoll, after any fallback).",
        &[
            ("version", env!("CARGO_PKG_VERSION")),
            ("engine", s.engine.name()),
            ("io", s.io.name()),
        ],
        Value::Int(1),
    );
    let sg = server.engine.stats().segments;
    if sg.segment_bytes > 0 {
        let segs: [(&str, &'static str, u64); 5] = [
            (
                "memcrab_segments",
                "Normal segments holding memory.",
                sg.segments,
            ),
            (
                "memcrab_segments_free",
                "Normal segments free or waiting for readers to leave them.",
                sg.free_segments,
            ),
            (
                "memcrab_segments_large",
                "Segments of their own, one large item each.",
                sg.large_segments,
            ),
            (
                "memcrab_segments_held",
                "Retired segments that leases still hold.",
                sg.held_segments,
            ),
            (
                "memcrab_segment_memory_bytes",
                "Bytes of segment memory held, normal and large.",
                sg.memory_bytes,
            ),
        ];
        for (name, help, v) in segs {
            out.put(name, G, help, &[], Value::Int(v));
        }
    }
    for (i, c) in server.counters.iter().enumerate() {
        let t = c.snapshot();
        let w = i.to_string();
        let per: [(&str, &'static str, u64); 5] = [
            (
                "memcrab_worker_read_bytes_total",
                "Bytes read by each worker (not reset by stats reset).",
                t.bytes_read,
            ),
            (
                "memcrab_worker_written_bytes_total",
                "Bytes written by each worker (not reset by stats reset).",
                t.bytes_written,
            ),
            (
                "memcrab_worker_cmd_get_total",
                "Keys requested by get commands, per worker.",
                t.cmd_get,
            ),
            (
                "memcrab_worker_cmd_set_total",
                "Storage commands, per worker.",
                t.cmd_set,
            ),
            (
                "memcrab_worker_connections_yielded_total",
                "Connections yielded at the -R limit, per worker.",
                t.conn_yields,
            ),
        ];
        for (name, help, v) in per {
            out.put(name, C, help, &[("worker", &w)], Value::Int(v));
        }
    }
    observe(server, out);
}

/// The request step's measurements: latency histograms, hot keys, the slow log.
fn observe(server: &Server, out: &mut Out) {
    let o = &server.observe;
    if o.latency {
        out.add(latency_family(
            "memcrab_request_duration_seconds",
            "Time from a request parsed to its reply queued, by protocol, command and (reads) hit or miss.",
            &o.latencies(),
        ));
    }
    if o.hotkeys {
        out.add(hotkeys_family(o.hotkeys()));
    }
    out.put(
        "memcrab_slowlog_entries_total",
        C,
        "Requests that entered the slow log (-o slowlog_us), including those the ring has dropped.",
        &[],
        Value::Int(o.slowlog.logged()),
    );
}

/// A Prometheus histogram family of latency series, from merged snapshots (series
/// order as [`latency::series`]); empty series are left out.
pub fn latency_family(name: &str, help: &'static str, merged: &[Snapshot]) -> Family {
    let mut f = Family::new(name, Kind::Histogram, help);
    let les: Vec<String> = LE_SECS.iter().map(|&x| super::expo::float(x)).collect();
    for (i, snap) in merged.iter().enumerate() {
        let n = snap.count();
        if n == 0 {
            continue;
        }
        let s = latency::series(i);
        let base = [
            ("protocol", s.protocol),
            ("command", s.command),
            ("outcome", s.outcome),
        ];
        for (le, c) in les.iter().zip(snap.prometheus_buckets(&LE_SECS)) {
            let mut l = base.to_vec();
            l.push(("le", le));
            f.push_suffixed("_bucket", &l, Value::Int(c));
        }
        let mut l = base.to_vec();
        l.push(("le", "+Inf"));
        f.push_suffixed("_bucket", &l, Value::Int(n));
        f.push_suffixed("_sum", &base, Value::Float(snap.sum_ns as f64 / 1e9));
        f.push_suffixed("_count", &base, Value::Int(n));
    }
    f
}

/// The hot keys as `memcrab_hotkey_estimate{kind,rank,key}` (at most
/// [`hotkeys::TOP_K`] series per kind, keys URI-encoded as `watch` prints them).
pub fn hotkeys_family<'a>(workers: impl IntoIterator<Item = &'a HotKeys> + Clone) -> Family {
    let mut f = Family::new(
        "memcrab_hotkey_estimate",
        Kind::Gauge,
        "Estimated requests (reads, writes) or value bytes (bytes) of the hottest keys, from sampled counts.",
    );
    for kind in hotkeys::Kind::ALL {
        for (rank, (key, n)) in HotKeys::top(workers.clone(), kind, hotkeys::TOP_K)
            .iter()
            .enumerate()
        {
            let rank = (rank + 1).to_string();
            let key = memcrab_proto::text::reply::uriencoded(key);
            f.push(
                &[("kind", kind.name()), ("rank", &rank), ("key", &key)],
                Value::Int(*n),
            );
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::super::expo::{encode, Format};
    use super::*;

    fn rep(text: &str) -> Report {
        parse_report(text.as_bytes())
    }

    fn reports() -> Reports {
        Reports {
            general: rep("STAT pid 1\r\nSTAT uptime 5\r\nSTAT version 1.6.18-memcrab-0.1.0\r\nSTAT rusage_user 1.500000\r\n\
                STAT cmd_set 10\r\nSTAT cas_hits 1\r\nSTAT cas_misses 2\r\nSTAT cas_badval 3\r\nSTAT get_hits 4\r\n\
                STAT get_misses 5\r\nSTAT evictions 6\r\nSTAT engine seg\r\nEND\r\n"),
            settings: rep("STAT maxconns 1024\r\nSTAT inter 127.0.0.1:0,::1\r\nSTAT cas_enabled yes\r\n\
                STAT lru_crawler yes\r\nSTAT hot_max_factor 0.20\r\nEND\r\n"),
            items: rep("STAT items:1:number 3\r\nSTAT items:1:evicted 6\r\nSTAT items:1:mem_requested 99\r\nEND\r\n"),
            slabs: rep("STAT 1:chunk_size 33\r\nSTAT 1:get_hits 4\r\nSTAT 1:cmd_set 10\r\nSTAT 1:cas_hits 1\r\n\
                STAT 1:cas_badval 3\r\nSTAT active_slabs 1\r\nSTAT total_malloced 1048576\r\nEND\r\n"),
            conns: rep("STAT 5:addr tcp:127.0.0.1:11211\r\nSTAT 5:state conn_listening\r\nSTAT 5:secs_since_last_cmd 9\r\n\
                STAT 7:state conn_parse_cmd\r\nSTAT 7:secs_since_last_cmd 2\r\nEND\r\n"),
        }
    }

    #[test]
    fn the_exporters_names_types_and_labels() {
        let mut out = Out::default();
        families_from_reports(&reports(), &mut out);
        let text = encode(&out.into_families(), Format::Text);
        for want in [
            "memcached_up 1\n",
            "memcached_version{version=\"1.6.18-memcrab-0.1.0\"} 1\n",
            "# TYPE memcached_commands_total counter\n",
            "memcached_commands_total{command=\"get\",status=\"hit\"} 4\n",
            "memcached_commands_total{command=\"cas\",status=\"badval\"} 3\n",
            "memcached_commands_total{command=\"set\",status=\"hit\"} 4.0\n",
            "memcached_uptime_seconds 5\n",
            "memcached_process_user_cpu_seconds_total 1.5\n",
            "# TYPE memcached_items_evicted_total counter\nmemcached_items_evicted_total 6\n",
            "memcached_malloced_bytes 1048576\n",
            "memcached_max_connections 1024\n",
            "memcached_lru_crawler_enabled 1\n",
            "memcached_lru_crawler_hot_max_factor 0.2\n",
            "memcached_slab_current_items{slab=\"1\"} 3\n",
            "memcached_slab_items_evicted_total{slab=\"1\"} 6\n",
            "# TYPE memcached_slab_mem_requested_bytes counter\n",
            "memcached_slab_chunk_size_bytes{slab=\"1\"} 33\n",
            "memcached_slab_commands_total{slab=\"1\",command=\"set\",status=\"hit\"} 6.0\n",
            "memcrab_setting{name=\"cas_enabled\"} 1\n",
            "memcrab_setting_info{name=\"inter\",value=\"127.0.0.1:0,::1\"} 1\n",
            "memcrab_active_slabs 1\n",
            "memcrab_connections{state=\"conn_parse_cmd\"} 1\n",
            "memcrab_connection_idle_seconds_max 9\n",
            "memcrab_unmapped_stats 0\n",
        ] {
            assert!(text.contains(want), "no {want:?} in\n{text}");
        }
        assert!(!text.contains("pid"), "{text}");
    }

    #[test]
    fn a_new_stat_without_a_series_is_counted() {
        let mut r = reports();
        r.general.push(("brand_new".into(), "1".into()));
        r.items.push(("items:1:brand_new".into(), "1".into()));
        r.slabs.push(("1:brand_new".into(), "1".into()));
        assert_eq!(
            unmapped_stats(&r),
            ["brand_new", "1:brand_new", "items:1:brand_new"]
        );
    }

    #[test]
    fn latency_histogram_family() {
        let l = latency::Latencies::default();
        let i = latency::series_index("text", "get", true).unwrap_or(0);
        l.record(i, 3_000);
        l.record(i, 2_000_000);
        let f = latency_family(
            "memcrab_request_duration_seconds",
            "H.",
            &latency::Latencies::merged([&l]),
        );
        let text = encode(&[f], Format::Text);
        assert!(text.contains("memcrab_request_duration_seconds_bucket{protocol=\"text\",command=\"get\",outcome=\"hit\",le=\"5e-6\"} 1\n"), "{text}");
        assert!(text.contains("le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("memcrab_request_duration_seconds_count{protocol=\"text\",command=\"get\",outcome=\"hit\"} 2\n"), "{text}");
        assert_eq!(text.matches("_count").count(), 1, "empty series left out");
    }

    #[test]
    fn hot_keys_family() {
        let h = HotKeys::new(3);
        h.note(false, b"k\"1", 5);
        let text = encode(&[hotkeys_family([&h])], Format::Text);
        assert!(
            text.contains("memcrab_hotkey_estimate{kind=\"reads\",rank=\"1\",key=\"k%221\"} 128\n"),
            "{text}"
        );
        assert!(
            text.contains("memcrab_hotkey_estimate{kind=\"bytes\",rank=\"1\",key=\"k%221\"} 640\n"),
            "{text}"
        );
    }
}
