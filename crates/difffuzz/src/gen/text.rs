//! Classic text commands, valid and malformed.

use rand::Rng;

use super::{lit, pieces_len, Gen, Gen1, Scope, ALPHABET};
use crate::plan::Piece;

const STORAGE: &[&str] = &["set", "add", "replace", "append", "prepend", "cas"];
const GETS: &[&str] = &["get", "gets", "gat", "gats", "bget"];
const UNKNOWN: &[&str] = &[
    "foo",
    "sett",
    "GET",
    "Get",
    "gett",
    "deletee",
    "incrx",
    "mx",
    "m",
    "x",
    "stat",
    "flush",
    "lru_crawlerx",
    "verbose",
    "cass",
    "touchy",
    "quitx",
    "versio",
];

/// Joins tokens with single spaces (or, sometimes, runs of them: memcached's
/// tokenizer collapses them).
fn line(g: &mut Gen, toks: &[String]) -> Vec<u8> {
    let sep = if g.chance(0.05) { "   " } else { " " };
    let mut l = toks.join(sep).into_bytes();
    if g.chance(0.02) {
        l.splice(0..0, b"  ".iter().copied());
    }
    l.extend_from_slice(g.eol());
    l
}

impl Gen {
    pub(super) fn text(&mut self, scope: &Scope, valid_only: bool) -> Gen1 {
        let bad = !valid_only && self.chance(0.15);
        match self.rng.random_range(0..100) {
            0..=34 => self.storage(scope, bad),
            35..=59 => self.get(scope, bad),
            60..=66 => self.delete(scope, bad),
            67..=75 => self.arith(scope, bad),
            76..=81 => self.touch(scope, bad),
            82..=84 if scope.flush_ok => self.flush_all(bad),
            85..=86 => self.verbosity(bad),
            87 => Gen1::new("text.stats", vec![lit(b"stats\r\n".to_vec())], false),
            88 if !valid_only => Gen1::new("text.quit", vec![lit(b"quit\r\n".to_vec())], false),
            89 => Gen1::new(
                "text.shutdown",
                vec![lit(if self.chance(0.5) {
                    &b"shutdown\r\n"[..]
                } else {
                    b"shutdown graceful\r\n"
                }
                .to_vec())],
                false,
            ),
            _ if valid_only => self.storage(scope, false),
            _ => self.junk(scope),
        }
    }

    fn storage(&mut self, scope: &Scope, bad: bool) -> Gen1 {
        let cmd = *self.pick(STORAGE);
        let mut value = self.value();
        if cmd == "append" || cmd == "prepend" {
            value = self.concat_safe(value);
        }
        let n = pieces_len(&value);
        let mut key = self.key(scope);
        let mut flags = self.client_flags();
        let mut ttl = self.ttl();
        let mut len = self.num(n as u64);
        let mut cas: Vec<Piece> = if cmd == "cas" {
            vec![self.cas_piece(scope)]
        } else {
            Vec::new()
        };
        let mut noreply = self.chance(0.15);
        let mut extra: Option<String> = None;
        let mut missing = false;
        if bad {
            match self.rng.random_range(0..9) {
                0 => key = self.long_key(),
                1 => flags = self.bad_client_flags(),
                2 => ttl = self.bad_ttl(),
                3 => {
                    len = self.bad_len(n);
                    // 1.6.45's tokenizer skips an empty token, so `cas`'s unique
                    // (each server's own) would be read as the length.
                    if cmd == "cas" && len.is_empty() {
                        len = "abc".to_string();
                    }
                }
                4 if cmd == "cas" => cas = vec![lit(self.bad_cas_token().into_bytes())],
                5 => extra = Some(self.pick(&["noreply", "x", "0"]).to_string()),
                6 => missing = true,
                7 => noreply = !noreply,
                _ => {}
            }
        }
        let mut toks = vec![
            cmd.to_string(),
            String::from_utf8_lossy(&key).into_owned(),
            flags,
            ttl,
            len,
        ];
        if missing {
            let k = self.rng.random_range(1..toks.len());
            toks.truncate(k);
        }
        let mut pieces = Vec::new();
        let mut head = toks.join(" ").into_bytes();
        if !cas.is_empty() && !missing {
            head.push(b' ');
            pieces.push(lit(head));
            pieces.append(&mut cas);
            head = Vec::new();
        }
        if noreply {
            head.extend_from_slice(b" noreply");
        }
        if let Some(e) = extra {
            head.push(b' ');
            head.extend_from_slice(e.as_bytes());
        }
        head.extend_from_slice(self.eol());
        pieces.push(lit(head));
        let (mut block, bad_block) = self.data_block(value, bad, scope);
        pieces.append(&mut block);
        Gen1::new(format!("text.{cmd}"), pieces, bad || bad_block)
    }

    fn get(&mut self, scope: &Scope, bad: bool) -> Gen1 {
        let cmd = *self.pick(GETS);
        let nkeys = match self.rng.random_range(0..10) {
            0..=5 => 1,
            6..=8 => self.rng.random_range(2..=4),
            _ => self.rng.random_range(5..=20),
        };
        let mut toks = vec![cmd.to_string()];
        if cmd.starts_with("gat") {
            toks.push(if bad && self.chance(0.4) {
                self.bad_ttl()
            } else {
                self.ttl()
            });
        }
        for _ in 0..nkeys {
            let k = self.key(scope);
            self.fetches(&k);
            toks.push(String::from_utf8_lossy(&k).into_owned());
        }
        if bad {
            match self.rng.random_range(0..4) {
                0 => {
                    // memcrab sends a multi-get's values once they pass its 256 KiB
                    // output limit; memcached drops them all at a long key (see
                    // AVOIDED): after other keys only where they cannot add up to it.
                    let first = if cmd.starts_with("gat") { 2 } else { 1 };
                    let at = if self.cfg.item_max * nkeys >= 256 * 1024 {
                        first
                    } else {
                        self.rng.random_range(1..=toks.len())
                    };
                    let k = self.long_key();
                    toks.insert(at, String::from_utf8_lossy(&k).into_owned());
                }
                1 => toks.truncate(1),
                // A long get line (only get/gets may exceed 2048 bytes), of keys
                // nothing stores (a pool key repeated could fetch a 1 MB value
                // hundreds of times).
                2 if cmd == "get" || cmd == "gets" => {
                    let many = self.rng.random_range(100..=900);
                    toks.extend((0..many).map(|i| format!("nokey{i}")));
                }
                _ => toks.push("noreply".to_string()),
            }
        }
        let l = line(self, &toks);
        Gen1::new(format!("text.{cmd}"), vec![lit(l)], bad)
    }

    fn delete(&mut self, scope: &Scope, bad: bool) -> Gen1 {
        let k = self.key(scope);
        let mut toks = vec![
            "delete".to_string(),
            String::from_utf8_lossy(&k).into_owned(),
        ];
        if self.chance(0.1) {
            toks.push("0".to_string());
        }
        if self.chance(0.15) {
            toks.push("noreply".to_string());
        }
        if bad {
            match self.rng.random_range(0..4) {
                0 => toks[1] = String::from_utf8_lossy(&self.long_key()).into_owned(),
                1 => toks.insert(2, self.pick(&["5", "x", "-1", "0 0"]).to_string()),
                2 => toks.truncate(1),
                _ => toks.push("extra".to_string()),
            }
        }
        let l = line(self, &toks);
        Gen1::new("text.delete", vec![lit(l)], bad)
    }

    fn arith(&mut self, scope: &Scope, bad: bool) -> Gen1 {
        let cmd = if self.chance(0.5) { "incr" } else { "decr" };
        let k = self.key(scope);
        self.increments(&k);
        let d = self.delta();
        let mut toks = vec![
            cmd.to_string(),
            String::from_utf8_lossy(&k).into_owned(),
            d.to_string(),
        ];
        if self.chance(0.15) {
            toks.push("noreply".to_string());
        }
        if bad {
            match self.rng.random_range(0..4) {
                0 => toks[2] = self.bad_u64_token(),
                1 => toks[1] = String::from_utf8_lossy(&self.long_key()).into_owned(),
                2 => toks.truncate(2),
                _ => toks.push("extra".to_string()),
            }
        }
        let l = line(self, &toks);
        Gen1::new(format!("text.{cmd}"), vec![lit(l)], bad)
    }

    fn touch(&mut self, scope: &Scope, bad: bool) -> Gen1 {
        let k = self.key(scope);
        let mut toks = vec![
            "touch".to_string(),
            String::from_utf8_lossy(&k).into_owned(),
            self.ttl(),
        ];
        if self.chance(0.15) {
            toks.push("noreply".to_string());
        }
        if bad {
            match self.rng.random_range(0..3) {
                0 => toks[2] = self.bad_ttl(),
                1 => toks[1] = String::from_utf8_lossy(&self.long_key()).into_owned(),
                _ => toks.truncate(2),
            }
        }
        let l = line(self, &toks);
        Gen1::new("text.touch", vec![lit(l)], bad)
    }

    fn flush_all(&mut self, bad: bool) -> Gen1 {
        let mut toks = vec!["flush_all".to_string()];
        let delayed = !self.immediate_flush && self.chance(0.2);
        match self.rng.random_range(0..4) {
            _ if delayed => toks.push(self.pick(&["5000", "86400", "2000000000"]).to_string()),
            0 => toks.push("0".to_string()),
            1 => toks.push("-1".to_string()),
            _ => {}
        }
        if bad {
            // memcached ignores tokens after the delay: these still flush.
            toks.push(self.pick(&["abc", "1.5", "x y", "-"]).to_string());
        }
        if !delayed {
            self.immediate_flush = true;
        }
        if self.chance(0.2) {
            toks.push("noreply".to_string());
        }
        let l = line(self, &toks);
        Gen1::new("text.flush_all", vec![lit(l)], bad)
    }

    fn verbosity(&mut self, bad: bool) -> Gen1 {
        let mut toks = vec!["verbosity".to_string()];
        if bad {
            match self.rng.random_range(0..3) {
                0 => {}
                1 => toks.push("abc".to_string()),
                _ => toks.extend(["1".to_string(), "2".to_string(), "3".to_string()]),
            }
        } else {
            toks.push(self.pick(&["0", "1", "2"]).to_string());
        }
        if self.chance(0.2) {
            toks.push("noreply".to_string());
        }
        let l = line(self, &toks);
        Gen1::new("text.verbosity", vec![lit(l)], bad)
    }

    /// Unknown commands, empty lines, binary-looking bytes, long lines, a line
    /// ending in `HTTP/1.1` (memcached closes), cache_memlimit with a bad argument.
    fn junk(&mut self, scope: &Scope) -> Gen1 {
        let l: Vec<u8> = match self.rng.random_range(0..9) {
            0 => {
                let k = self.key(scope);
                let mut l = self.pick(UNKNOWN).as_bytes().to_vec();
                l.push(b' ');
                l.extend_from_slice(&k);
                l.extend_from_slice(b"\r\n");
                l
            }
            1 => self
                .pick(&[
                    &b"\r\n"[..],
                    b"\n",
                    b" \r\n",
                    b"\r\r\n",
                    b"a\r\n",
                    b"\0\r\n",
                ])
                .to_vec(),
            2 => {
                // Any bytes but a newline (and not 0x80 first: that is binary's magic).
                let n = self.rng.random_range(1..=200);
                let mut l: Vec<u8> = (0..n)
                    .map(|_| self.rng.random_range(0u8..=255))
                    .map(|b| if b == b'\n' { b'.' } else { b })
                    .collect();
                if l[0] == 0x80 {
                    l[0] = b'!';
                }
                l.extend_from_slice(b"\r\n");
                l
            }
            3 => {
                let n = self.rng.random_range(300..=2040);
                let mut l: Vec<u8> = (0..n).map(|_| *self.pick(ALPHABET)).collect();
                l.extend_from_slice(b"\r\n");
                l
            }
            4 => {
                // Over 16384 bytes without a newline: memcached always closes.
                let n = self.rng.random_range(17_000..=40_000);
                let mut l = b"junk".to_vec();
                l.resize(n, b'j');
                l.extend_from_slice(b"\r\n");
                l
            }
            5 => {
                let mut l = self
                    .pick(&[&b"GET / "[..], b"get ", b"delete ", b""])
                    .to_vec();
                if l.starts_with(b"get") || l.starts_with(b"delete") {
                    let k = self.key(scope);
                    self.fetches(&k);
                    l.extend_from_slice(&k);
                    l.push(b' ');
                }
                let ends: [&[u8]; 3] = [b"HTTP/1.1\r\n", b"HTTP/1.0\r\n", b"HTTP/\r\n"];
                let end = *self.pick(&ends);
                l.extend_from_slice(end);
                l
            }
            6 => self
                .pick(&[
                    &b"cache_memlimit abc\r\n"[..],
                    b"cache_memlimit\r\n",
                    b"cache_memlimit -5\r\n",
                ])
                .to_vec(),
            7 => self
                .pick(&[
                    &b"quit now\r\n"[..],
                    b"verbosity\r\n",
                    b"stats nonsense\r\n",
                    // 1.6.45 reads `flush_all 1 2 3` as a flush in one second: an
                    // unparsable delay is the junk that flushes nothing.
                    b"flush_all x 2 3\r\n",
                ])
                .to_vec(),
            _ => {
                // Too many tokens for one tokenizer pass.
                let k = self.key(scope);
                let mut l = b"set".to_vec();
                for _ in 0..self.rng.random_range(20..=40) {
                    l.push(b' ');
                    l.extend_from_slice(&k);
                }
                l.extend_from_slice(b"\r\n");
                l
            }
        };
        Gen1::new("text.junk", vec![lit(l)], true)
    }
}
