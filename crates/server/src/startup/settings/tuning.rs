//! `-o`'s sub-options for memcached's slab allocator, LRU maintainer, LRU crawler,
//! hash and logger ([`Tuning`]), read with memcached 1.6.45's conversions (C's
//! `atoi` and `atof`, which reads hexadecimal floats, or `safe_strtoul`), range
//! checks and messages, and its checks of `slab_chunk_max` against `-I` and of the
//! LRU percentages once the whole command line is read.
//!
//! memcrab has no slab classes, page mover or LRU maintainer: most of these values
//! change nothing but what `stats settings` shows, and the admin commands that set
//! the same values at run time start from them (`admin::tunables`).
//! docs/operations.md "What the replies hold" says which values memcrab acts on.

use memcrab_proto::num::{atof, safe_strtol, safe_strtoul};

/// memcached's `slab_page_size`: 1 MiB, whatever `-I` says.
pub const SLAB_PAGE_BYTES: u32 = 1024 * 1024;

/// The values of memcached's slab, LRU, hash and logger sub-options, with its
/// defaults (memcached.c's `settings_init`).
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// `hashpower=`: as given, 0 when not (the index starts at 2^16 then).
    pub hashpower_init: u8,
    /// `slab_reassign` / `no_slab_reassign`.
    pub slab_reassign: bool,
    /// `slab_automove=0|1|2` (a bare name is 1), `no_slab_automove`.
    pub slab_automove: u32,
    pub slab_automove_ratio: f64,
    pub slab_automove_window: u32,
    /// `slab_chunk_max=` (given in kilobytes), in bytes.
    pub slab_chunk_max: u32,
    /// Whether `slab_chunk_max=` was given (`no_modern` and a large `-I` change
    /// the default only).
    slab_chunk_max_given: bool,
    /// `slab_sizes=`: checked as memcached's `_parse_slab_sizes` checks it.
    pub slab_sizes: Option<String>,
    /// `tail_repair_time=` (seconds, at least 10; 0: off).
    pub tail_repair_time: i32,
    /// `hash_algorithm=`: `murmur3` (default), `jenkins` or `xxh3`.
    pub hash_algorithm: &'static str,
    /// `lru_maintainer` / `no_lru_maintainer`: memcached's `lru_maintainer_thread`.
    pub lru_maintainer: bool,
    pub lru_segmented: bool,
    pub hot_lru_pct: i32,
    pub warm_lru_pct: i32,
    pub hot_max_factor: f64,
    pub warm_max_factor: f64,
    /// `temporary_ttl=` turns the temporary LRU on.
    pub temp_lru: bool,
    pub temporary_ttl: i32,
    pub lru_crawler_sleep: i32,
    pub lru_crawler_tocrawl: u32,
    /// `worker_logbuf_size=` (given in kilobytes), in bytes.
    pub worker_logbuf_bytes: u32,
    /// `read_buf_mem_limit=` (given in megabytes), in bytes; 0: no limit.
    pub read_buf_mem_limit: u32,
    /// `maxconns_fast` / `no_maxconns_fast`.
    pub maxconns_fast: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            hashpower_init: 0,
            slab_reassign: true,
            slab_automove: 1,
            slab_automove_ratio: 0.8,
            slab_automove_window: 10,
            slab_chunk_max: SLAB_PAGE_BYTES / 2,
            slab_chunk_max_given: false,
            slab_sizes: None,
            tail_repair_time: 0,
            hash_algorithm: "murmur3",
            lru_maintainer: true,
            lru_segmented: true,
            hot_lru_pct: 20,
            warm_lru_pct: 40,
            hot_max_factor: 0.2,
            warm_max_factor: 2.0,
            temp_lru: false,
            temporary_ttl: 61,
            lru_crawler_sleep: 100,
            lru_crawler_tocrawl: 0,
            worker_logbuf_bytes: 64 * 1024,
            read_buf_mem_limit: 0,
            maxconns_fast: true,
        }
    }
}

/// C's `atoi`: leading whitespace, a sign and digits, whatever follows ignored; 0
/// where there are no digits (glibc's `strtol` truncated to `int`).
pub fn atoi(v: &str) -> i32 {
    let t = v.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut n: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        n = (n * 10 + i64::from(b - b'0')).min(i64::from(u32::MAX) + 1);
    }
    let n = if neg { -n } else { n };
    n.clamp(i64::MIN, i64::MAX) as i32
}

impl Tuning {
    /// Applies `-o name[=value]` if it is one of these sub-options: `None` if it is
    /// not, else whether memcached accepts it (its message if not).
    pub fn suboption(&mut self, name: &str, value: Option<&str>) -> Option<Result<(), String>> {
        let need = |what: &str| value.ok_or_else(|| format!("Missing {what} argument"));
        let strtoul = |what: &str| -> Result<u32, String> {
            let v = value.ok_or_else(|| format!("Missing {what} argument"))?;
            safe_strtoul(v.as_bytes()).map_err(|_| format!("could not parse argument to {what}"))
        };
        let r = (|| -> Result<(), String> {
            match name {
                "maxconns_fast" => self.maxconns_fast = true,
                "no_maxconns_fast" => self.maxconns_fast = false,
                "slab_reassign" => self.slab_reassign = true,
                "no_slab_reassign" => self.slab_reassign = false,
                "no_slab_automove" => self.slab_automove = 0,
                "slab_automove" => {
                    let n = value.map_or(1, atoi);
                    if !(0..=2).contains(&n) {
                        return Err("slab_automove must be between 0 and 2".into());
                    }
                    self.slab_automove = n as u32;
                }
                "slab_automove_ratio" => {
                    let r = atof(need("slab_automove_ratio")?.as_bytes());
                    // As memcached's `<= 0 || > 1`: NaN passes.
                    if r <= 0.0 || r > 1.0 {
                        return Err("slab_automove_ratio must be > 0 and < 1".into());
                    }
                    self.slab_automove_ratio = r;
                }
                "slab_automove_window" => {
                    let w = atoi(need("slab_automove_window")?);
                    if !(3..=1800).contains(&w) {
                        return Err("slab_automove_window must be > 2 and < 1800".into());
                    }
                    self.slab_automove_window = w as u32;
                }
                "tail_repair_time" => {
                    let v = value.ok_or("Missing numeric argument for tail_repair_time")?;
                    self.tail_repair_time = atoi(v);
                    if self.tail_repair_time < 10 {
                        return Err("Cannot set tail_repair_time to less than 10 seconds".into());
                    }
                }
                "hash_algorithm" => {
                    self.hash_algorithm = match need("hash_algorithm")? {
                        "jenkins" => "jenkins",
                        "murmur3" => "murmur3",
                        "xxh3" => "xxh3",
                        _ => {
                            return Err(
                                "Unknown hash_algorithm option (jenkins, murmur3, xxh3)".into()
                            )
                        }
                    }
                }
                "lru_crawler_sleep" => {
                    let v = value.ok_or("Missing lru_crawler_sleep value")?;
                    self.lru_crawler_sleep = atoi(v);
                    if !(0..=1_000_000).contains(&self.lru_crawler_sleep) {
                        return Err("LRU crawler sleep must be between 0 and 1 second".into());
                    }
                }
                "lru_crawler_tocrawl" => {
                    let v = value.ok_or("Missing lru_crawler_tocrawl value")?;
                    self.lru_crawler_tocrawl = safe_strtoul(v.as_bytes())
                        .map_err(|_| "lru_crawler_tocrawl takes a numeric 32bit value")?;
                }
                "lru_maintainer" => {
                    self.lru_maintainer = true;
                    self.lru_segmented = true;
                }
                "no_lru_maintainer" => {
                    self.lru_maintainer = false;
                    self.lru_segmented = false;
                }
                "hot_lru_pct" | "warm_lru_pct" => {
                    let pct = atoi(need(name)?);
                    if !(1..80).contains(&pct) {
                        return Err(format!("{name} must be > 1 and < 80"));
                    }
                    match name {
                        "hot_lru_pct" => self.hot_lru_pct = pct,
                        _ => self.warm_lru_pct = pct,
                    }
                }
                "hot_max_factor" | "warm_max_factor" => {
                    let f = atof(need(name)?.as_bytes());
                    if f <= 0.0 {
                        return Err(format!("{name} must be > 0"));
                    }
                    match name {
                        "hot_max_factor" => self.hot_max_factor = f,
                        _ => self.warm_max_factor = f,
                    }
                }
                "temporary_ttl" => {
                    self.temp_lru = true;
                    self.temporary_ttl = atoi(need("temporary_ttl")?);
                }
                "worker_logbuf_size" => {
                    self.worker_logbuf_bytes = strtoul("worker_logbuf_size")?.wrapping_mul(1024)
                }
                "read_buf_mem_limit" => {
                    self.read_buf_mem_limit =
                        strtoul("read_buf_mem_limit")?.wrapping_mul(1024 * 1024)
                }
                "slab_sizes" => self.slab_sizes = Some(value.unwrap_or_default().to_string()),
                "slab_chunk_max" => {
                    let v = need("slab_chunk_max")?;
                    let kib = safe_strtol(v.as_bytes())
                        .map_err(|_| "could not parse argument to slab_chunk_max")?;
                    if kib <= 0 {
                        return Err("slab_chunk_max must be >= 0".into());
                    }
                    if kib > 1024 {
                        return Err("slab_chunk_max must be specified in kilobytes.".into());
                    }
                    self.slab_chunk_max = kib as u32 * 1024;
                    self.slab_chunk_max_given = true;
                }
                "no_chunked_items" => self.slab_chunk_max = SLAB_PAGE_BYTES,
                // memcached 1.6's defaults are these already.
                "modern" | "inline_ascii_resp" | "no_inline_ascii_resp" => {}
                "no_modern" => {
                    if !self.slab_chunk_max_given {
                        self.slab_chunk_max = SLAB_PAGE_BYTES;
                    }
                    self.slab_reassign = false;
                    self.slab_automove = 0;
                    self.maxconns_fast = false;
                    self.lru_segmented = false;
                    self.hash_algorithm = "jenkins";
                    self.lru_maintainer = false;
                }
                _ => return Err(String::new()),
            }
            Ok(())
        })();
        match r {
            Err(e) if e.is_empty() => None,
            r => Some(r),
        }
    }

    /// memcached's checks once the command line is read (each exits 64 there):
    /// `slab_chunk_max` against `-I` and the slab page, `slab_sizes`, the LRU
    /// percentages, and the temporary LRU's need for the maintainer.
    pub fn check(&mut self, item_size_max: usize, chunk_size: u32) -> Result<(), String> {
        let item = u32::try_from(item_size_max).unwrap_or(u32::MAX);
        if item > 1024 * 1024 && !self.slab_chunk_max_given {
            self.slab_chunk_max = SLAB_PAGE_BYTES / 2;
        }
        let chunk = self.slab_chunk_max;
        if chunk > item {
            return Err(format!(
                "slab_chunk_max (bytes: {chunk}) cannot be larger than -I (item_size_max {item})"
            ));
        }
        if !item.is_multiple_of(chunk) {
            return Err(format!(
                "-I (item_size_max: {item}) must be evenly divisible by slab_chunk_max (bytes: {chunk})"
            ));
        }
        if !SLAB_PAGE_BYTES.is_multiple_of(chunk) {
            return Err(format!(
                "slab_chunk_max (bytes: {chunk}) must divide evenly into {SLAB_PAGE_BYTES} (slab_page_size)"
            ));
        }
        if let Some(sizes) = &self.slab_sizes {
            check_slab_sizes(sizes, chunk_size, chunk)?;
        }
        if self.hot_lru_pct + self.warm_lru_pct > 80 {
            return Err("hot_lru_pct + warm_lru_pct cannot be more than 80% combined".into());
        }
        if self.temp_lru && !self.lru_maintainer {
            return Err("temporary_ttl requires lru_maintainer to be enabled".into());
        }
        Ok(())
    }
}

/// memcached's `_parse_slab_sizes`: `-`-separated sizes, each from `-n` to
/// `slab_chunk_max`, each more than 8 bytes over the one before, at most 62.
fn check_slab_sizes(sizes: &str, chunk_size: u32, chunk_max: u32) -> Result<(), String> {
    if sizes.is_empty() {
        return Err(String::new());
    }
    let mut last = 0u32;
    for (i, p) in sizes.split('-').filter(|p| !p.is_empty()).enumerate() {
        let size = safe_strtoul(p.as_bytes()).unwrap_or(0);
        if safe_strtoul(p.as_bytes()).is_err() || size < chunk_size || size > chunk_max {
            return Err(format!("slab size {size} is out of valid range"));
        }
        if last >= size {
            return Err(format!(
                "slab size {size} cannot be lower than or equal to a previous class size"
            ));
        }
        if size <= last + 8 {
            return Err(format!(
                "slab size {size} must be at least 8 bytes larger than previous class"
            ));
        }
        last = size;
        if i + 1 >= 63 {
            return Err("too many slab classes specified".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{atoi, Tuning};

    #[test]
    fn atoi_as_c() {
        for (v, want) in [("12", 12), (" -3x", -3), ("x", 0), ("+7", 7), ("", 0)] {
            assert_eq!(atoi(v), want, "{v:?}");
        }
    }

    #[test]
    fn memcached_messages() {
        let rows: &[(&str, Option<&str>, &str)] = &[
            (
                "slab_automove",
                Some("3"),
                "slab_automove must be between 0 and 2",
            ),
            (
                "slab_automove_ratio",
                Some("0x1p1"),
                "slab_automove_ratio must be > 0 and < 1",
            ),
            (
                "slab_automove_ratio",
                None,
                "Missing slab_automove_ratio argument",
            ),
            ("slab_chunk_max", Some("0"), "slab_chunk_max must be >= 0"),
            (
                "slab_chunk_max",
                Some("2000"),
                "slab_chunk_max must be specified in kilobytes.",
            ),
            (
                "tail_repair_time",
                Some("5"),
                "Cannot set tail_repair_time to less than 10 seconds",
            ),
            (
                "hash_algorithm",
                Some("md5"),
                "Unknown hash_algorithm option (jenkins, murmur3, xxh3)",
            ),
            (
                "read_buf_mem_limit",
                Some("x"),
                "could not parse argument to read_buf_mem_limit",
            ),
            (
                "worker_logbuf_size",
                Some("-1"),
                "could not parse argument to worker_logbuf_size",
            ),
            (
                "slab_automove_window",
                Some("2"),
                "slab_automove_window must be > 2 and < 1800",
            ),
            (
                "lru_crawler_sleep",
                Some("2000000"),
                "LRU crawler sleep must be between 0 and 1 second",
            ),
        ];
        for &(name, value, want) in rows {
            let got = Tuning::default().suboption(name, value);
            assert_eq!(got, Some(Err(want.to_string())), "{name}={value:?}");
        }
        assert_eq!(Tuning::default().suboption("nonsense", None), None);
        let mut t = Tuning::default();
        assert_eq!(
            t.suboption("slab_automove_ratio", Some("0x1p-2")),
            Some(Ok(()))
        );
        assert_eq!(t.slab_automove_ratio, 0.25);
    }

    #[test]
    fn checks_after_the_command_line() {
        let check = |opts: &[(&str, Option<&str>)], item: usize| {
            let mut t = Tuning::default();
            for &(n, v) in opts {
                t.suboption(n, v).expect("known").expect("accepted");
            }
            t.check(item, 48)
        };
        assert_eq!(
            check(&[], 1024),
            Err(
                "slab_chunk_max (bytes: 524288) cannot be larger than -I (item_size_max 1024)"
                    .into()
            )
        );
        assert_eq!(check(&[("slab_chunk_max", Some("1"))], 1024), Ok(()));
        assert_eq!(
            check(&[("slab_chunk_max", Some("48"))], 1 << 20),
            Err("-I (item_size_max: 1048576) must be evenly divisible by slab_chunk_max (bytes: 49152)".into())
        );
        assert_eq!(check(&[], 3 << 20), Ok(()));
        assert_eq!(
            check(
                &[("hot_lru_pct", Some("50")), ("warm_lru_pct", Some("40"))],
                1 << 20
            ),
            Err("hot_lru_pct + warm_lru_pct cannot be more than 80% combined".into())
        );
        assert_eq!(
            check(
                &[("temporary_ttl", Some("10")), ("no_lru_maintainer", None)],
                1 << 20
            ),
            Err("temporary_ttl requires lru_maintainer to be enabled".into())
        );
        assert_eq!(
            check(&[("slab_sizes", Some("100-104"))], 1 << 20),
            Err("slab size 104 must be at least 8 bytes larger than previous class".into())
        );
        assert_eq!(check(&[("slab_sizes", Some("100-200"))], 1 << 20), Ok(()));
    }
}
