//! The generator: seeded rounds of random requests, most valid, some malformed.
//!
//! ```text
//!   Gen::round(view) ─► Round
//!     ├─ solo round (15%): one connection, every key, flush_all allowed
//!     └─ otherwise: every connection, keys split between them (see AVOIDED)
//!   per connection: (re)open? protocol? ─► requests ─► segments
//!     text.rs   get/gets/gat/gats/bget, set/add/replace/append/prepend/cas, delete,
//!               incr/decr, touch, flush_all, verbosity, stats, quit, junk lines
//!     meta.rs   mg ms md ma mn me: random flag sets, base64 keys, quiet, opaque
//!     binary.rs every opcode (quiet forms too), bad magic/lengths/extras, CAS
//!   tests.rs  the generator's unit tests
//! ```
//!
//! Everything comes from one `SmallRng` seeded with the seed, plus what the servers
//! (agreeing so far) told: which connections are open and how many CAS uniques were
//! seen. The same seed makes the same rounds.

mod binary;
mod meta;
mod text;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::plan::{ConnRound, Piece, Proto, Request, Round};

/// What the generator must know about the servers' configuration.
#[derive(Clone, Copy, Debug)]
pub struct GenConfig {
    /// `-I` in bytes.
    pub item_max: usize,
    /// CAS on (no `-C`): without it memcached's flush_all spares items stored in
    /// the second it runs in, so flushes are not sent.
    pub cas: bool,
    pub nconns: usize,
    /// The oracle is memcached 1.6.45 (or newer): what changed after 1.6.18 is sent
    /// (see `mask::AVOIDED`).
    pub today: bool,
    /// Meta commands only (on text connections): `run --meta-only`.
    pub meta_only: bool,
}

/// The generator with three connections, CAS, 1.6.45's commands and items up to
/// 1 MiB (the unit tests' configuration, here and in trace.rs).
#[cfg(test)]
pub(crate) fn three_conns() -> GenConfig {
    GenConfig {
        item_max: 1024 * 1024,
        cas: true,
        nconns: 3,
        today: true,
        meta_only: false,
    }
}

/// What the servers have told so far (the same for both while they agree).
#[derive(Clone, Debug)]
pub struct View {
    /// Per connection: its protocol while it is open.
    pub open: Vec<Option<Proto>>,
    /// Distinct CAS uniques returned so far.
    pub cas_seen: usize,
    /// The key each unique was returned with, by number, where a reply said.
    pub cas_keys: Vec<Option<Vec<u8>>>,
}

/// Relative TTLs far beyond any run, and expiry values whose meaning does not
/// depend on the second they arrive in (see `mask::AVOIDED`).
const TTLS: &[(u32, &str)] = &[
    (40, "0"),
    (6, "1000"),
    (6, "3600"),
    (6, "86400"),
    (4, "2592000"),
    (5, "2592001"),
    (10, "-1"),
    (3, "-1000"),
    (5, "2000000000"),
    (2, "2147483647"),
    (1, "-2147483648"),
];
/// Expiry tokens memcached refuses.
const BAD_TTLS: &[&str] = &[
    "abc",
    "2147483648",
    "1.5",
    "-",
    "99999999999999999999",
    "0x10",
    "1k",
];
/// `R` (recache) thresholds, each far from every TTL above.
const RECACHE: &[&str] = &[
    "0",
    "1",
    "30",
    "500",
    "2000",
    "50000",
    "1000000",
    "3000000",
    "2000000000",
    "-1",
];

/// Keys every protocol uses (all printable, no spaces; one is 250 bytes).
fn text_pool() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = ["a", "b", "foo", "k:1", "x_y.z", "n42", "bar-baz"]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    let mut long = b"long".to_vec();
    long.resize(250, b'q');
    v.push(long);
    v
}

/// Keys only ever sent base64-encoded through meta commands with `b`.
const B64_POOL: &[&[u8]] = &[b"bin key", b"\x01\x02\xfe\xff", b"tab\tkey\r"];
/// Keys only the binary protocol uses (text cannot send them).
const BIN_POOL: &[&[u8]] = &[b"has space", b"\x00nul\x7f"];

/// Value bytes: no uppercase (so no `VERSION `), no `\r`/`\n` unless added on purpose,
/// no space (a value of spaces only is avoided, see AVOIDED).
const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_.:";

/// Numbers incr/decr, `ma` and friends find interesting. None from 2^63 to 2^64-1,
/// and deltas and initial values keep stored numbers below 2^63 (see AVOIDED).
const NUMERIC_VALUES: &[&str] = &[
    "0",
    "1",
    "9",
    "10",
    "42",
    "00042",
    "4611686018427387904",
    "4611686018427387903",
    "18446744073709551616",
    "99999999999999999999",
    "123456789012345678901",
    "-1",
    " 12",
    "12 ",
    "1 2",
    "12abc",
    "",
    "3.5",
    "+7",
    "000000000000000000000000000001",
];

/// One generated request and whether it must start a segment (it is malformed).
pub struct Gen1 {
    pub req: Request,
    pub risky: bool,
}

impl Gen1 {
    fn new(kind: impl Into<String>, pieces: Vec<Piece>, risky: bool) -> Gen1 {
        Gen1 {
            req: Request::new(kind, pieces),
            risky,
        }
    }
}

/// The keys one connection may use this round, and what it may do.
pub struct Scope {
    text: Vec<Vec<u8>>,
    b64: Vec<Vec<u8>>,
    bin: Vec<Vec<u8>>,
    /// The only connection in the round, with CAS on: flush_all allowed (see
    /// `GenConfig::cas`).
    flush_ok: bool,
    cas_seen: usize,
    /// `View::cas_keys`.
    cas_keys: Vec<Option<Vec<u8>>>,
}

pub struct Gen {
    pub rng: SmallRng,
    cfg: GenConfig,
    round_no: u64,
    /// An immediate flush happened (delayed ones are avoided from then on).
    immediate_flush: bool,
    text_pool: Vec<Vec<u8>>,
    /// Keys whose values a request of the current segment fetched: memcached's
    /// incr/decr pads a value in place only while no unsent reply holds the item,
    /// so an increment of one of them starts a new segment (see AVOIDED).
    seg_fetched: Vec<Vec<u8>>,
    /// The same for the request being generated.
    req_fetched: Vec<Vec<u8>>,
    /// The request being generated must start a segment.
    req_new_segment: bool,
}

impl Gen {
    pub fn new(seed: u64, cfg: GenConfig) -> Gen {
        Gen {
            rng: SmallRng::seed_from_u64(seed),
            cfg,
            round_no: 0,
            immediate_flush: false,
            text_pool: text_pool(),
            seg_fetched: Vec::new(),
            req_fetched: Vec::new(),
            req_new_segment: false,
        }
    }

    pub fn round(&mut self, view: &View) -> Round {
        let n = self.cfg.nconns;
        let solo = self.rng.random_bool(0.15);
        let active: Vec<usize> = if solo {
            vec![self.rng.random_range(0..n)]
        } else {
            let mut a: Vec<usize> = (0..n).filter(|_| self.rng.random_bool(0.85)).collect();
            if a.is_empty() {
                a.push(self.rng.random_range(0..n));
            }
            a
        };
        let r = self.round_no;
        self.round_no += 1;
        let mut conns = Vec::new();
        for (slot, &conn) in active.iter().enumerate() {
            let part = |i: usize| solo || (i as u64 + r) % active.len() as u64 == slot as u64;
            let scope = Scope {
                text: pick(&self.text_pool, part),
                b64: pick(
                    &B64_POOL.iter().map(|k| k.to_vec()).collect::<Vec<_>>(),
                    |i| part(i + 1),
                ),
                bin: pick(
                    &BIN_POOL.iter().map(|k| k.to_vec()).collect::<Vec<_>>(),
                    |i| part(i + 2),
                ),
                flush_ok: solo && self.cfg.cas,
                cas_seen: view.cas_seen,
                cas_keys: view.cas_keys.clone(),
            };
            let open = view.open.get(conn).copied().flatten();
            let reconnect = open.is_none() || self.rng.random_bool(0.03);
            let proto = match (reconnect, open) {
                (false, Some(p)) => p,
                _ if !self.cfg.meta_only && self.rng.random_bool(0.3) => Proto::Binary,
                _ => Proto::Text,
            };
            conns.push(self.conn_round(conn, proto, reconnect, &scope));
        }
        Round {
            conns,
            order_seed: self.rng.random(),
        }
    }

    fn conn_round(&mut self, conn: usize, proto: Proto, fresh: bool, scope: &Scope) -> ConnRound {
        let count = match self.rng.random_range(0..10) {
            0 => 0,
            1..=6 => self.rng.random_range(1..=4),
            7 | 8 => self.rng.random_range(5..=10),
            _ => self.rng.random_range(11..=25),
        };
        let mut segments: Vec<Vec<Request>> = vec![Vec::new()];
        self.seg_fetched.clear();
        for i in 0..count {
            self.req_fetched.clear();
            self.req_new_segment = false;
            // A new connection's first byte picks its protocol: keep it well formed.
            let valid_only = fresh && i == 0;
            // memcrab answers malformed text and meta lines as 1.6.45 does: an
            // older oracle gets well-formed ones only (see AVOIDED).
            let text_valid_only = valid_only || !self.cfg.today;
            let g = loop {
                let g = match proto {
                    Proto::Text if self.cfg.meta_only || self.rng.random_bool(0.4) => {
                        self.meta(scope, text_valid_only)
                    }
                    Proto::Text => self.text(scope, text_valid_only),
                    Proto::Binary => self.binary(scope, valid_only),
                };
                if proto == Proto::Binary || !has_ambiguous_line(&g.req) {
                    break g;
                }
            };
            let mut req = g.req;
            self.cut(&mut req);
            let last = segments.last_mut().expect("one segment at least");
            if !last.is_empty() && (g.risky || self.req_new_segment || self.rng.random_bool(0.08)) {
                segments.push(vec![req]);
                self.seg_fetched.clear();
            } else {
                last.push(req);
            }
            self.seg_fetched.append(&mut self.req_fetched);
        }
        ConnRound {
            conn,
            proto,
            fresh,
            segments,
        }
    }

    /// Where the request is cut into separate writes.
    fn cut(&mut self, req: &mut Request) {
        let len = req.template_len();
        if len > 1 && self.rng.random_bool(0.25) {
            let k = self.rng.random_range(1..=3);
            req.cuts = (0..k).map(|_| self.rng.random_range(1..len)).collect();
            req.cuts.sort_unstable();
            req.cuts.dedup();
        }
        req.split_after = self.rng.random_bool(0.3);
    }

    // ---- shared pieces ----------------------------------------------------------

    /// The request's reply holds `key`'s item until it is sent (memcached: get
    /// and friends, any `mg` hit, binary gets and touches).
    fn fetches(&mut self, key: &[u8]) {
        self.req_fetched.push(key.to_vec());
    }

    /// The request increments or decrements `key`.
    fn increments(&mut self, key: &[u8]) {
        if self.seg_fetched.iter().any(|k| k == key) {
            self.req_new_segment = true;
        }
    }

    /// A length field memcached refuses, or one it reads (wrapping to 32 bits) as
    /// `n`, the bytes that follow: never one that makes a server wait for more.
    fn bad_len(&mut self, n: usize) -> String {
        match self.rng.random_range(0..10) {
            0 => (4_294_967_296 + n as u64).to_string(),
            _ => self
                .pick(&[
                    "-1",
                    "abc",
                    "2147483646",
                    "2147483647",
                    "4294967295",
                    "9223372036854775807",
                    "9223372036854775808",
                    "1e3",
                    "-0",
                    "",
                ])
                .to_string(),
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.rng.random_range(0..v.len())]
    }

    fn weighted(&mut self, v: &[(u32, &'static str)]) -> &'static str {
        let total: u32 = v.iter().map(|x| x.0).sum();
        let mut k = self.rng.random_range(0..total);
        for (w, s) in v {
            if k < *w {
                return s;
            }
            k -= w;
        }
        v[0].1
    }

    /// A key this connection owns (a made-up one when it owns none).
    fn key(&mut self, scope: &Scope) -> Vec<u8> {
        if scope.text.is_empty() {
            return b"unowned".to_vec();
        }
        self.pick(&scope.text).clone()
    }

    /// A key memcached refuses: over 250 bytes.
    fn long_key(&mut self) -> Vec<u8> {
        let mut k = b"toolong".to_vec();
        let n = self.rng.random_range(251..=400);
        k.resize(n, b'z');
        k
    }

    fn ttl(&mut self) -> String {
        self.weighted(TTLS).to_string()
    }

    fn bad_ttl(&mut self) -> String {
        self.pick(BAD_TTLS).to_string()
    }

    fn recache(&mut self) -> String {
        self.pick(RECACHE).to_string()
    }

    /// A decimal number, sometimes in a form strtoul also takes (`+n`, `0n`; 1.6.45
    /// reads lengths with mcmc's converters and refuses `+n`, so only it gets that).
    fn num(&mut self, n: u64) -> String {
        match self.rng.random_range(0..40) {
            0 if self.cfg.today => format!("+{n}"),
            1 => format!("00{n}"),
            _ => n.to_string(),
        }
    }

    fn client_flags(&mut self) -> String {
        match self.rng.random_range(0..10) {
            0..=5 => "0".to_string(),
            6 => "4294967295".to_string(),
            7 => self.num(1),
            _ => {
                let n = self.rng.random_range(0..100_000);
                self.num(n)
            }
        }
    }

    fn bad_client_flags(&mut self) -> String {
        self.pick(&["-1", "4294967296", "abc", "1.0", "99999999999999999999"])
            .to_string()
    }

    /// A delta for incr/decr: at most 2^40, so that stored numbers stay below 2^63.
    fn delta(&mut self) -> u64 {
        match self.rng.random_range(0..10) {
            0 => 0,
            1 => 1 << 40,
            2 => (1 << 40) - self.rng.random_range(1..10),
            3..=6 => self.rng.random_range(1..10),
            _ => self.rng.random_range(0..1_000_000),
        }
    }

    /// An initial value for an increment that creates the item: at most 2^62.
    fn initial(&mut self) -> u64 {
        match self.rng.random_range(0..8) {
            0 => 1 << 62,
            1 => (1 << 62) - 1,
            _ => self.delta(),
        }
    }

    fn bad_u64_token(&mut self) -> String {
        self.pick(&["-1", "18446744073709551616", "abc", "1.5", "", "0x1"])
            .to_string()
    }

    /// A CAS unique for a request: one the server returned (a placeholder), 0, or
    /// one no server assigns.
    fn cas_piece(&mut self, scope: &Scope) -> Piece {
        match self.rng.random_range(0..10) {
            0..=5 if scope.cas_seen > 0 => {
                let i = self.rng.random_range(0..scope.cas_seen);
                // Recent uniques are likelier to still be some item's.
                let recent = scope
                    .cas_seen
                    .saturating_sub(1 + self.rng.random_range(0..4));
                Piece::Cas(if self.chance(0.7) { recent } else { i })
            }
            6 => Piece::Lit(b"0".to_vec()),
            7 => Piece::Lit(b"18446744073709551615".to_vec()),
            _ => Piece::Lit(
                ((1u64 << 63) + self.rng.random_range(0..1000u64))
                    .to_string()
                    .into_bytes(),
            ),
        }
    }

    fn bad_cas_token(&mut self) -> String {
        self.pick(&["abc", "-1", "18446744073709551616", "1x", "0.0"])
            .to_string()
    }

    /// A value's length: mostly small, sometimes around or over `-I`, never one a
    /// refused command line could turn into a line of 2049..16999 bytes.
    fn value_len(&mut self) -> usize {
        let max = self.cfg.item_max;
        let n = match self.rng.random_range(0..100) {
            0..=49 => self.rng.random_range(0..=10),
            50..=79 => self.rng.random_range(11..=200),
            80..=91 => self.rng.random_range(201..=2000),
            92..=97 => self.rng.random_range(max.saturating_sub(350)..=max + 50),
            _ => self.rng.random_range(17_000..=(max + max / 8).max(20_000)),
        };
        if (2001..17_000).contains(&n) {
            if self.chance(0.5) {
                2000
            } else {
                17_000
            }
        } else {
            n
        }
    }

    /// A value of `n` bytes (no `\r`/`\n`, no uppercase).
    fn value_of(&mut self, n: usize) -> Vec<Piece> {
        if n > 4096 {
            let b = *self.pick(ALPHABET);
            return vec![Piece::Rep(n, b)];
        }
        let v = (0..n).map(|_| *self.pick(ALPHABET)).collect();
        vec![Piece::Lit(v)]
    }

    /// A value: random bytes, or (often) a number for incr/decr to work on.
    fn value(&mut self) -> Vec<Piece> {
        if self.chance(0.25) {
            let s = self.pick(NUMERIC_VALUES).to_string();
            return vec![Piece::Lit(s.into_bytes())];
        }
        let n = self.value_len();
        self.value_of(n)
    }

    /// A value to append or prepend: never only digits and `+` (see AVOIDED: a
    /// number made longer could reach 2^63), so a value that is gets an `x` first.
    fn concat_safe(&mut self, mut v: Vec<Piece>) -> Vec<Piece> {
        let numeric = |b: &u8| b.is_ascii_digit() || *b == b'+';
        let only_digits = pieces_len(&v) > 0
            && v.iter().all(|p| match p {
                Piece::Lit(b) => b.iter().all(numeric),
                Piece::Rep(_, b) => numeric(b),
                Piece::Cas(_) | Piece::BinCas(_) => false,
            });
        if only_digits {
            v.insert(0, lit(b"x".to_vec()));
        }
        v
    }

    /// The opaque token value for meta `O` (never too long unless `bad`).
    fn opaque(&mut self, bad: bool) -> String {
        let n = if bad {
            self.rng.random_range(33..=40)
        } else {
            self.rng.random_range(0..=31)
        };
        (0..n)
            .map(|_| *self.pick(b"abcdefghij0123456789") as char)
            .collect()
    }

    /// The line ending: almost always `\r\n`; memcached also takes a bare `\n`.
    fn eol(&mut self) -> &'static [u8] {
        if self.chance(0.04) {
            b"\n"
        } else {
            b"\r\n"
        }
    }

    /// The data block after a storage line announcing the value's length: the value
    /// and `\r\n`, or (when `bad`, sometimes) a block with a wrong terminator or
    /// more bytes than announced, the excess read as command lines. Never fewer
    /// bytes than announced: the server would take the next request's as data.
    /// Returns the pieces and whether the block is deliberately bad.
    fn data_block(&mut self, value: Vec<Piece>, bad: bool, scope: &Scope) -> (Vec<Piece>, bool) {
        let mut p = value;
        if bad && self.chance(0.5) {
            match self.rng.random_range(0..4) {
                // The right length, a wrong terminator, then a line end (so that
                // the next request starts a line however the block was read).
                0 => p.push(Piece::Lit(
                    self.pick(&[&b"xx\r\n"[..], b"\n\n", b"\r\r\n", b"\rX\r\n", b" \n"])
                        .to_vec(),
                )),
                // Longer than announced: the tail is read as a command line.
                1 => {
                    let extra = self.rng.random_range(1..=40);
                    let junk: Vec<u8> = (0..extra).map(|_| *self.pick(ALPHABET)).collect();
                    p.push(Piece::Lit(junk));
                    p.push(Piece::Lit(b"\r\n".to_vec()));
                }
                // A command line after the block.
                2 => {
                    let mut l = b"\r\nget ".to_vec();
                    let k = self.key(scope);
                    self.fetches(&k);
                    l.extend_from_slice(&k);
                    l.extend_from_slice(b"\r\n");
                    p.push(Piece::Lit(l));
                }
                _ => p.push(Piece::Lit(b"\n\r\n".to_vec())),
            }
            return (p, true);
        }
        p.push(Piece::Lit(b"\r\n".to_vec()));
        (p, false)
    }
}

/// Length of a value's pieces (placeholders do not occur in values).
fn pieces_len(p: &[Piece]) -> usize {
    p.iter()
        .map(|x| match x {
            Piece::Lit(b) => b.len(),
            Piece::Rep(n, _) => *n,
            Piece::Cas(_) | Piece::BinCas(_) => 0,
        })
        .sum()
}

/// Whether a text request holds a stretch without a newline whose fate depends on
/// how memcached's reads were chunked: 2049..=16384 bytes, not a get/gets line
/// (see `mask::AVOIDED`). Such requests are drawn again.
fn has_ambiguous_line(req: &Request) -> bool {
    let mut b = Vec::new();
    req.fill(&[], &mut b);
    b.split(|&c| c == b'\n').any(|line| {
        let spaces = line.iter().take_while(|&&c| c == b' ').count();
        let rest = &line[spaces..];
        let get = spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets "));
        (2049..=16_384).contains(&line.len()) && !get
    })
}

fn pick(pool: &[Vec<u8>], mut keep: impl FnMut(usize) -> bool) -> Vec<Vec<u8>> {
    pool.iter()
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(_, k)| k.clone())
        .collect()
}

fn lit(b: impl Into<Vec<u8>>) -> Piece {
    Piece::Lit(b.into())
}

#[cfg(test)]
mod tests;
