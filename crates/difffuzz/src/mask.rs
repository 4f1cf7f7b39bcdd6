//! What the fuzzer does not compare, in one place: [`MASKS`] (reply bytes rewritten
//! or compared loosely) and [`AVOIDED`] (requests never generated, because the two
//! servers legitimately answer them differently or nondeterministically).
//! docs/compatibility.md's mask list is the same list (a test checks that it names each).
//!
//! [`mask`] turns one segment's raw reply into the compared form: text with the
//! masked fields replaced by placeholders, and the remaining TTLs it saw on the side
//! (compared with a tolerance). Binary replies are rendered one packet per line.

use std::collections::HashMap;

use crate::plan::Proto;

/// A reply field the fuzzer rewrites or compares loosely.
pub struct Mask {
    pub what: &'static str,
    pub rule: &'static str,
    pub why: &'static str,
}

/// Everything masked in replies. Nothing else is.
pub const MASKS: &[Mask] = &[
    Mask {
        what: "CAS uniques",
        rule: "the 5th token of VALUE lines, meta `c` flags, `me`'s `cas=` and the binary \
               header's CAS become `<cas#N>`, N numbering each server's distinct uniques \
               in the order they were first seen (0 stays 0); requests refer to uniques \
               by that number and each server gets its own value",
        why: "each server hands out its own uniques; only which replies share a unique \
              is protocol behaviour",
    },
    Mask {
        what: "version string",
        rule: "the text after `VERSION ` and the binary VERSION body",
        why: "memcrab answers the memcached release it implements, 1.6.45",
    },
    Mask {
        what: "statistics",
        rule: "a run of `STAT <name> <value>` lines, or of binary STAT packets with a \
               name, is one `<stats>` placeholder (the END line or empty packet after \
               it, and error replies, are compared)",
        why: "values (pids, uptimes, counters, memory) differ between any two servers, \
              and memcrab reports its own set of fields: memcached's names, without \
              those of parts it does not have (libevent, the slab mover, the LRU \
              crawler and maintainer, the logger, TLS, extstore) and with `engine`",
    },
    Mask {
        what: "remaining TTLs",
        rule: "meta `t` flags and `me`'s `exp=` (other than -1) are compared within 2 \
               seconds",
        why: "each server's clock ticks once a second at its own phase, and absolute \
              expiry times go through each server's own start time",
    },
    Mask {
        what: "last access times",
        rule: "meta `l` flags and `me`'s `la=` are not compared",
        why: "a documented difference: memcrab updates an item's access time on every \
              fetch after the first, memcached only once it is 60 seconds old",
    },
    Mask {
        what: "slab classes under a non-default slab_chunk_max",
        rule: "`me`'s `cls=` is not compared in configuration 1 (`-I 1k` with \
               slab_chunk_max at 1 KiB; configuration 0 compares it)",
        why: "memcrab has no slab classes: it reports the class memcached would use \
              with the default slab page and chunk size, whatever `-o slab_chunk_max` \
              says (README, Command line); memcached, which needs that \
              option for an `-I` under 512 KiB, puts items near 1 KiB in a \
              different class",
    },
    Mask {
        what: "replies lost to a close",
        rule: "in the segment where both servers closed a connection, their replies need \
               only agree up to the shorter of the two",
        why: "both drop replies not yet written when they close (memcached's \
              conn_closing frees the unsent response queue, memcrab drops its write \
              buffer); how many were written depends on how the reads were chunked",
    },
];

/// A kind of request the generator never makes.
pub struct Avoided {
    pub what: &'static str,
    pub why: &'static str,
}

/// Everything the generator leaves out on purpose.
pub const AVOIDED: &[Avoided] = &[
    Avoided {
        what: "keys printed for base64 requests",
        why: "a documented difference: memcached remembers per item whether its key was \
              sent base64 (and forgets it when an increment, append or autovivify makes \
              a new item) and prints `k`/`me` keys accordingly, memcrab follows the \
              request. Requests with `b` never ask for `k`, `me` is never sent with `b`, \
              and `b` on keys other than a pool of binary keys (only ever sent with `b`) \
              comes only in `md` and in `mg` without `N` (malformed base64 keys are \
              never a pool key's encoding with its `=` moved: memcached decodes some \
              of those to the key itself)",
    },
    Avoided {
        what: "meta requests whose answer changed after 1.6.18, against 1.6.18",
        why: "memcrab answers them as memcached 1.6.45 does (docs/compatibility.md, \
              Features), and they are sent only to an oracle that new (`scripts/diff-fuzz \
              --debian` runs Debian's 1.6.18): `E` (explicit new unique), `ms` with `s` \
              (stored size), `ms` append/prepend with `N` (autovivify), `md` with `x` \
              (empty the value) and `x` as an unknown flag, `mg` with `C` (compare), `ma` \
              with `q` and `N` (1.6.45 hides the reply for the item it created), `me` \
              (1.6.18 prints a TTL's negative as `exp=`), `F` \
              over 2^32-1 (refused, where 1.6.18 wrapped it), flag numbers with `+`, a \
              lone `-` or over 2^31-1 in `T`, `N` or `R` (1.6.45 reads digits only, `-` \
              as 0, and checks the range), and `M` tokens other than two bytes (1.6.45 \
              reads the byte after `M`)",
    },
    Avoided {
        what: "malformed text and meta requests, against 1.6.18",
        why: "memcached 1.6.45 rewrote how malformed text lines are answered (which \
              are ERROR or CLIENT_ERROR, what is swallowed), and memcrab follows it: \
              against an older oracle only well-formed text and meta requests are sent",
    },
    Avoided {
        what: "`ma` with `T` or `E`",
        why: "a documented difference: memcached (1.6.18 and 1.6.45) applies both to the \
              item it replaced when the number grows longer, so the new TTL is lost and \
              the reply shows `E`'s unique where the item keeps a counter one",
    },
    Avoided {
        what: "`ms` with `E` refused after its line was read",
        why: "a memcached 1.6.45 bug: process_mset_command has taken `E`'s unique for \
              the connection before it refuses an opaque over 32 bytes or a bad data \
              chunk, and leaves it there, so the \
              connection's next store gets that unique instead of a new one (and the \
              allocated item is never freed); memcrab forgets a refused request",
    },
    Avoided {
        what: "a binary store as the last request before the server closes",
        why: "a memcached 1.6.45 bug: a binary connection keeps its last store's unique \
              (`c->cas`) until it reads the next header, a bad magic closes it before \
              that, and the next text connection given the same file descriptor stores \
              its first item under that unique again; a broken magic is sent after a \
              NOOP, and after a server closes a binary connection a throwaway one \
              (which takes the freed descriptor) is answered a NOOP",
    },
    Avoided {
        what: "a delayed flush_all after an immediate one",
        why: "a documented difference: memcached forgets the immediate flush; delayed \
              flushes are only sent before any immediate one",
    },
    Avoided {
        what: "flush_all without CAS",
        why: "timing: under -C memcached's flush_all spares items stored in the second \
              it runs in (with CAS it compares uniques), so the -C configuration sends no \
              flushes",
    },
    Avoided {
        what: "TTLs that can pass during a run",
        why: "timing: relative TTLs are 0, negative or at least 1000 seconds; absolute \
              ones are long past or far ahead; flush_all delays likewise",
    },
    Avoided {
        what: "recache (`R`) thresholds near a TTL in use",
        why: "timing: whether the item is within the threshold must not depend on the \
              second the request lands in",
    },
    Avoided {
        what: "non-get lines of 2049 to 16999 bytes",
        why: "memcached closes a connection when it holds over 2048 bytes without a \
              newline, and holds at most 16384: for lengths in between, whether it \
              closes depends on how much one read returned. Data blocks (which become \
              lines when their command line is refused) avoid those lengths too",
    },
    Avoided {
        what: "the same key on two connections in one round",
        why: "the servers' scheduling would decide the order: rounds with several \
              connections give each its own keys, and flush_all (text or binary) comes \
              only in rounds with one connection",
    },
    Avoided {
        what: "a malformed request after others in a segment",
        why: "memcached drops unsent replies of earlier pipelined commands when it \
              closes and when a get meets a too-long key (a documented difference): a \
              malformed request starts a new segment, after the sentinel flushed the rest",
    },
    Avoided {
        what: "a key over 250 bytes after keys whose values could pass 256 KiB",
        why: "a documented difference: memcrab sends a multi-get's values once they \
              pass its 256 KiB per-connection output limit, so a long key after them \
              can no longer take them back; memcached builds the whole reply first and \
              drops it. In configuration 0 (-I 1m) the long key of a get comes first",
    },
    Avoided {
        what: "`ms` with `I` and another key's unique",
        why: "with I memcached stores a stale value when the unique is lower than the \
              item's; uniques of different keys written on different connections are \
              ordered by the servers' scheduling (and memcrab orders each key's uniques \
              in time, not all of them): with I the unique is one a reply returned with \
              this key (a VALUE line, or a meta reply with `k`), 0, or one never assigned",
    },
    Avoided {
        what: "made-up CAS uniques that a server could have assigned",
        why: "a guessed unique would match an item on one server only: requests use 0, \
              uniques the server returned, or values of 2^63 and above (`E` sets \
              uniques from those too)",
    },
    Avoided {
        what: "background LRU threads",
        why: "both servers run with `-o no_lru_crawler,no_lru_maintainer` (memcrab \
              ignores them): memcached's threads take item references at random moments, \
              and memcached rewrites an incremented number in place (padded with spaces, \
              keeping the item's flags) only while nobody else holds the item, so with \
              them `decr` leaves \"9 \" or \"9\" at random",
    },
    Avoided {
        what: "an increment after a fetch of the same key in a segment",
        why: "the same rule: a reply not yet sent holds the item (replies to get, gets, \
              gat, gats, bget, any mg hit, binary gets and touches do). An increment of \
              a key such a request named earlier in its segment starts a new segment \
              (the sentinel's reply means everything before it was sent)",
    },
    Avoided {
        what: "stored numbers of 2^63 and above",
        why: "memcached bug: incr/decr parse the stored value with safe_strtoull, which \
              for a number that is negative as a signed 64-bit value calls \
              strchr(value, '-') on item data that is not NUL-terminated, so whether such \
              a value counts as numeric depends on the bytes after the item in memory. \
              Values, deltas and initial values keep stored numbers below 2^63, and \
              what is appended or prepended is never only digits, so the \
              wrap-around of incr past 2^64-1 is not tested",
    },
    Avoided {
        what: "memory pressure and engine-specific commands",
        why: "eviction is each engine's own: both run with far more memory than a \
              run stores, and cache_memlimit is sent only with bad arguments; \
              lru_crawler, watch, slabs, lru, extstore and stats \
              detail/cachedump/items/slabs/sizes/conns are never sent (their replies \
              describe slab classes, LRU threads or timing, or stream asynchronously; \
              README's Compatibility table says how memcrab answers them)",
    },
];

/// Each server's CAS uniques, numbered in the order they were first seen, and the
/// key each was seen with (a VALUE line, or a meta reply that echoed its key with
/// `k`), where a reply said.
#[derive(Default, Debug)]
pub struct CasMap {
    values: Vec<u64>,
    keys: Vec<Option<Vec<u8>>>,
    index: HashMap<u64, usize>,
}

impl CasMap {
    pub fn values(&self) -> &[u64] {
        &self.values
    }

    /// The key each unique was seen with, by number (`None`: not said).
    pub fn keys(&self) -> &[Option<Vec<u8>>] {
        &self.keys
    }

    /// Forgets the uniques numbered `n` and above (seen by one server only, in
    /// replies the other dropped at a close).
    pub fn truncate(&mut self, n: usize) {
        self.keys.truncate(n);
        for v in self.values.drain(n.min(self.values.len())..) {
            self.index.remove(&v);
        }
    }

    /// Notes that unique `tok` (a number already named) was `key`'s.
    fn note_key(&mut self, tok: &[u8], key: &[u8]) {
        if let Some(&i) = parse::<u64>(tok).and_then(|v| self.index.get(&v)) {
            self.keys[i] = Some(key.to_vec());
        }
    }

    /// The placeholder for a unique (0 stays 0: `-C` must answer 0).
    fn name(&mut self, v: u64) -> String {
        if v == 0 {
            return "0".to_string();
        }
        let n = self.values.len();
        let i = *self.index.entry(v).or_insert(n);
        if i == n {
            self.values.push(v);
            self.keys.push(None);
        }
        format!("<cas#{i}>")
    }

    fn name_token(&mut self, tok: &[u8]) -> Vec<u8> {
        match parse::<u64>(tok) {
            Some(v) => self.name(v).into_bytes(),
            None => tok.to_vec(),
        }
    }
}

/// A reply in compared form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Masked {
    pub text: Vec<u8>,
    /// The remaining TTLs replaced by `<ttl>` in `text`, in order.
    pub ttls: Vec<i64>,
}

/// How far two remaining TTLs may be apart (see [`MASKS`]).
pub const TTL_TOLERANCE: i64 = 2;

impl Masked {
    /// The text with the TTLs put back, for people.
    pub fn show(&self) -> String {
        let mut out = String::new();
        let mut ttls = self.ttls.iter();
        let text = self.text.escape_ascii().to_string();
        let mut parts = text.split("<ttl>").peekable();
        while let Some(p) = parts.next() {
            out.push_str(p);
            if parts.peek().is_some() {
                match ttls.next() {
                    Some(t) => out.push_str(&format!("<ttl:{t}>")),
                    None => out.push_str("<ttl>"),
                }
            }
        }
        out
    }
}

fn parse<T: std::str::FromStr>(b: &[u8]) -> Option<T> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Masks one segment's reply bytes, numbering CAS uniques in `cas`. `exact_cls`:
/// the configuration leaves memcached's slab classes at their defaults (see MASKS).
pub fn mask(bytes: &[u8], proto: Proto, cas: &mut CasMap, exact_cls: bool) -> Masked {
    let mut m = Masked::default();
    match proto {
        Proto::Text => mask_text(bytes, cas, &mut m, exact_cls),
        Proto::Binary => mask_binary(bytes, cas, &mut m),
    }
    m
}

fn mask_text(bytes: &[u8], cas: &mut CasMap, m: &mut Masked, exact_cls: bool) {
    let mut i = 0;
    while i < bytes.len() {
        let Some(nl) = bytes[i..].iter().position(|&b| b == b'\n').map(|p| p + i) else {
            m.text.extend_from_slice(&bytes[i..]);
            return;
        };
        let line = &bytes[i..nl];
        let (body, ending): (&[u8], &[u8]) = match line.strip_suffix(b"\r") {
            Some(b) => (b, b"\r\n"),
            None => (line, b"\n"),
        };
        i = nl + 1;
        let toks: Vec<&[u8]> = body.split(|&b| b == b' ').collect();
        let out = &mut m.text;
        let mut data = None;
        match toks[0] {
            b"VALUE" if (4..=5).contains(&toks.len()) && parse::<usize>(toks[3]).is_some() => {
                out.extend_from_slice(&toks[..4].join(&b' '));
                if let Some(c) = toks.get(4) {
                    out.push(b' ');
                    out.extend_from_slice(&cas.name_token(c));
                    cas.note_key(c, toks[1]);
                }
                data = parse::<usize>(toks[3]);
            }
            b"VA" | b"HD" | b"EN" | b"NF" | b"NS" | b"EX" | b"MN" => {
                out.extend_from_slice(toks[0]);
                for (k, t) in toks[1..].iter().enumerate() {
                    out.push(b' ');
                    if toks[0] == b"VA" && k == 0 {
                        out.extend_from_slice(t);
                        data = parse::<usize>(t);
                        continue;
                    }
                    mask_meta_flag(t, cas, out, &mut m.ttls);
                }
                // A unique with its key (not a base64 one: `b` follows it).
                let flag = |f: u8| toks[1..].iter().find_map(|t| t.strip_prefix(&[f][..]));
                if let (Some(c), Some(k), None) = (flag(b'c'), flag(b'k'), flag(b'b')) {
                    cas.note_key(c, k);
                }
            }
            b"ME" if toks.len() >= 2 => {
                out.extend_from_slice(&toks[..2].join(&b' '));
                for t in &toks[2..] {
                    out.push(b' ');
                    if let Some(v) = t.strip_prefix(b"cas=") {
                        out.extend_from_slice(b"cas=");
                        out.extend_from_slice(&cas.name_token(v));
                    } else if t.starts_with(b"la=") {
                        out.extend_from_slice(b"la=<la>");
                    } else if !exact_cls && t.starts_with(b"cls=") {
                        out.extend_from_slice(b"cls=<cls>");
                    } else if let Some(v) = t.strip_prefix(b"exp=").filter(|v| *v != b"-1") {
                        push_ttl(b"exp=", v, out, &mut m.ttls);
                    } else {
                        out.extend_from_slice(t);
                    }
                }
            }
            b"VERSION" if toks.len() >= 2 => out.extend_from_slice(b"VERSION <version>"),
            b"STAT" if toks.len() >= 3 => {
                if out.ends_with(b"<stats>\r\n") || out.ends_with(b"<stats>\n") {
                    // One placeholder for the whole run.
                    continue;
                }
                out.extend_from_slice(b"<stats>");
            }
            _ => out.extend_from_slice(body),
        }
        out.extend_from_slice(ending);
        if let Some(n) = data {
            // The data block and its \r\n, verbatim (never parsed as lines).
            let end = (i + n + 2).min(bytes.len());
            out.extend_from_slice(&bytes[i..end]);
            i = end;
        }
    }
}

fn mask_meta_flag(t: &[u8], cas: &mut CasMap, out: &mut Vec<u8>, ttls: &mut Vec<i64>) {
    match t.split_first() {
        Some((b'c', v)) if parse::<u64>(v).is_some() => {
            out.push(b'c');
            out.extend_from_slice(&cas.name_token(v));
        }
        Some((b't', v)) if v != b"-1" && parse::<i64>(v).is_some() => push_ttl(b"t", v, out, ttls),
        Some((b'l', v)) if parse::<u64>(v).is_some() => out.extend_from_slice(b"l<la>"),
        _ => out.extend_from_slice(t),
    }
}

fn push_ttl(prefix: &[u8], v: &[u8], out: &mut Vec<u8>, ttls: &mut Vec<i64>) {
    match parse::<i64>(v) {
        Some(n) => {
            out.extend_from_slice(prefix);
            out.extend_from_slice(b"<ttl>");
            ttls.push(n);
        }
        None => {
            out.extend_from_slice(prefix);
            out.extend_from_slice(v);
        }
    }
}

fn mask_binary(bytes: &[u8], cas: &mut CasMap, m: &mut Masked) {
    use std::fmt::Write;
    let mut i = 0;
    let out = &mut String::new();
    while i < bytes.len() {
        let Some(h) = bytes.get(i..i + 24) else {
            let _ = writeln!(out, "partial header: \"{}\"", bytes[i..].escape_ascii());
            break;
        };
        if h[0] != memcrab_proto::binary::RES_MAGIC {
            let _ = writeln!(out, "not a response: \"{}\"", bytes[i..].escape_ascii());
            break;
        }
        let keylen = u16::from_be_bytes([h[2], h[3]]) as usize;
        let extlen = h[4] as usize;
        let status = u16::from_be_bytes([h[6], h[7]]);
        let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        let opaque = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
        let unique = u64::from_be_bytes([h[16], h[17], h[18], h[19], h[20], h[21], h[22], h[23]]);
        let Some(b) = bytes.get(i + 24..i + 24 + body) else {
            let _ = writeln!(out, "partial packet: \"{}\"", bytes[i..].escape_ascii());
            break;
        };
        i += 24 + body;
        if h[1] == memcrab_proto::binary::op::STAT && status == 0 && keylen > 0 {
            // A run of named STAT packets is one placeholder (see MASKS).
            if !out.ends_with("<stats>\n") {
                out.push_str("<stats>\n");
            }
            continue;
        }
        let _ = write!(
            out,
            "op={:02x} status={status:04x} dt={:02x} opaque={opaque:08x} cas={}",
            h[1],
            h[5],
            cas.name(unique)
        );
        if extlen + keylen > body {
            let _ = writeln!(
                out,
                " lengths ext={extlen} key={keylen} body=\"{}\"",
                b.escape_ascii()
            );
            continue;
        }
        let (ext, rest) = b.split_at(extlen);
        let (key, val) = rest.split_at(keylen);
        let masked_val = match h[1] {
            memcrab_proto::binary::op::VERSION if status == 0 => "<version>".to_string(),
            _ => val.escape_ascii().to_string(),
        };
        let _ = writeln!(
            out,
            " ext=\"{}\" key=\"{}\" value=\"{masked_val}\"",
            ext.escape_ascii(),
            key.escape_ascii()
        );
    }
    m.text.extend_from_slice(out.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cas_uniques_become_first_seen_numbers_and_zero_stays() {
        let mut c = CasMap::default();
        let m = mask(
            b"VALUE a 0 1 77\r\nx\r\nVALUE b 0 1 0\r\ny\r\nHD c77 c90\r\nME k exp=-1 la=3 cas=90 fetch=no cls=1 size=60\r\nEND\r\n",
            Proto::Text,
            &mut c,
            true,
        );
        assert_eq!(
            m.text,
            b"VALUE a 0 1 <cas#0>\r\nx\r\nVALUE b 0 1 0\r\ny\r\nHD c<cas#0> c<cas#1>\r\nME k exp=-1 la=<la> cas=<cas#1> fetch=no cls=1 size=60\r\nEND\r\n"
        );
        assert_eq!(c.values(), &[77, 90]);
    }

    #[test]
    fn data_blocks_are_not_parsed_and_ttls_go_aside() {
        let mut c = CasMap::default();
        let m = mask(
            b"VA 9 t999 l5 s9\r\nSTAT x 1\r\n\r\nEN\r\nHD t-1\r\nSTAT pid 42\r\nSTAT uptime 1\r\nEND\r\nVERSION 1.6.18\r\n",
            Proto::Text,
            &mut c,
            true,
        );
        assert_eq!(
            m.text,
            b"VA 9 t<ttl> l<la> s9\r\nSTAT x 1\r\n\r\nEN\r\nHD t-1\r\n<stats>\r\nEND\r\nVERSION <version>\r\n"
        );
        assert_eq!(m.ttls, vec![999]);
        assert!(m.show().contains("<ttl:999>"));
    }

    #[test]
    fn binary_packets_render_with_cas_and_version_masked() {
        let mut c = CasMap::default();
        let mut b = vec![0x81, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 9];
        b.extend_from_slice(&5u64.to_be_bytes());
        b.extend_from_slice(b"1.6.18");
        b.extend_from_slice(b"\x80junk");
        let m = mask(&b, Proto::Binary, &mut c, true);
        let s = String::from_utf8(m.text).expect("ascii");
        assert_eq!(
            s,
            "op=0b status=0000 dt=00 opaque=00000009 cas=<cas#0> ext=\"\" key=\"\" value=\"<version>\"\npartial header: \"\\x80junk\"\n"
        );
    }

    #[test]
    fn compatibility_page_lists_every_mask_and_avoided_request() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/compatibility.md");
        let page = std::fs::read_to_string(path).expect("docs/compatibility.md");
        let list = page
            .split_once("\n## The differential fuzzer's mask list\n")
            .map(|(_, rest)| rest.split("\n## ").next().unwrap_or(rest))
            .expect("docs/compatibility.md has the mask list's heading");
        let whats: Vec<&str> = MASKS
            .iter()
            .map(|m| m.what)
            .chain(AVOIDED.iter().map(|a| a.what))
            .collect();
        for what in &whats {
            assert!(
                list.lines().any(|l| l.starts_with(&format!("- {what}: "))),
                "docs/compatibility.md's mask list does not name {what:?}"
            );
        }
        // And it names nothing else: one entry per line that opens a bullet.
        let entries = list.lines().filter(|l| l.starts_with("- ")).count();
        assert_eq!(
            entries,
            whats.len(),
            "docs/compatibility.md's mask list has entries mask.rs does not"
        );
    }

    /// GitHub's anchor for a heading: lower case, letters, digits, `-` and `_`
    /// kept, spaces made `-`, everything else dropped.
    fn anchor(heading: &str) -> String {
        heading
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                '-' | '_' => Some(c),
                c if c.is_alphanumeric() => Some(c),
                _ => None,
            })
            .collect()
    }

    /// The lines of a Markdown file outside fenced code blocks.
    fn prose(text: &str) -> impl Iterator<Item = &str> {
        let mut fenced = false;
        text.lines().filter(move |l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
    }

    /// The anchors of a Markdown file's headings (a repeated heading's get `-1`, ...).
    fn anchors(text: &str) -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        let mut out = Vec::new();
        for l in prose(text) {
            let Some(h) = l.strip_prefix('#') else {
                continue;
            };
            let a = anchor(h.trim_start_matches('#'));
            let n = seen.iter().filter(|s| **s == a).count();
            out.push(if n == 0 {
                a.clone()
            } else {
                format!("{a}-{n}")
            });
            seen.push(a);
        }
        out
    }

    #[test]
    fn every_link_in_readme_and_docs_resolves() {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let mut files = vec![root.join("README.md")];
        let docs = std::fs::read_dir(root.join("docs")).expect("docs/");
        for e in docs.flatten() {
            if e.path().extension().is_some_and(|x| x == "md") {
                files.push(e.path());
            }
        }
        assert!(files.len() > 2, "README.md and docs/*.md");
        let mut broken = Vec::new();
        let mut checked = 0;
        for file in &files {
            let text = std::fs::read_to_string(file).expect("a Markdown file");
            let dir = file.parent().expect("a file's folder");
            for line in prose(&text) {
                for (i, _) in line.match_indices("](") {
                    let rest = &line[i + 2..];
                    let Some(end) = rest.find(')') else { continue };
                    let target = &rest[..end];
                    if target.contains("://") || target.starts_with("mailto:") {
                        continue;
                    }
                    checked += 1;
                    let (path, frag) = target.split_once('#').unwrap_or((target, ""));
                    let linked = if path.is_empty() {
                        file.clone()
                    } else {
                        dir.join(path)
                    };
                    let ok = if frag.is_empty() {
                        linked.exists()
                    } else {
                        std::fs::read_to_string(&linked)
                            .is_ok_and(|t| anchors(&t).iter().any(|a| a == frag))
                    };
                    if !ok {
                        broken.push(format!("{}: {target}", file.display()));
                    }
                }
            }
        }
        assert!(
            checked > 10,
            "found only {checked} links: is the scan right?"
        );
        assert!(
            broken.is_empty(),
            "links that resolve to nothing:\n{}",
            broken.join("\n")
        );
    }
}
