//! Meta commands (`mg ms md ma mn me`): random flag sets in random order, base64
//! keys, quiet mode, opaques; malformed flags, keys and lengths. Against memcached
//! 1.6.45 (`GenConfig::today`) also what changed after 1.6.18: `E`, `ms s`, `ms N`
//! on append/prepend, `md x`, `mg C` with `v`, and the flag tokens 1.6.45 reads
//! differently; and `ms I` with a unique the same key was returned with.

use memcrab_proto::text::meta::base64_encode;
use rand::seq::SliceRandom;
use rand::Rng;

use super::{lit, pieces_len, Gen, Gen1, Scope};
use crate::plan::Piece;

/// A flag token: literal text, or a CAS placeholder after its letter.
enum Flag {
    Text(String),
    Cas(char, Piece),
}

/// The key as sent, and whether `b` must go with it.
struct MetaKey {
    /// The key itself (what the item is stored under).
    raw: Vec<u8>,
    token: Vec<u8>,
    b: bool,
    /// A key of the text pool sent base64-encoded: no `k`, no `N` (see AVOIDED).
    b_on_text: bool,
}

impl Gen {
    pub(super) fn meta(&mut self, scope: &Scope, valid_only: bool) -> Gen1 {
        let bad = !valid_only && self.chance(0.15);
        match self.rng.random_range(0..100) {
            0..=34 => self.mg(scope, bad),
            35..=64 => self.ms(scope, bad),
            65..=74 => self.md(scope, bad),
            75..=89 => self.ma(scope, bad),
            90..=93 => {
                let l: &[u8] = if bad { b"mn foo bar\r\n" } else { b"mn\r\n" };
                Gen1::new("meta.mn", vec![lit(l.to_vec())], bad)
            }
            // 1.6.18's `me` prints a TTL's negative (see AVOIDED).
            _ if !self.cfg.today => self.mg(scope, bad),
            _ => self.me(scope, bad),
        }
    }

    /// A key for a meta command: a text-pool key, a binary-pool key in base64
    /// (with `b`), or, when `allow_b_text`, a text-pool key in base64.
    fn meta_key(&mut self, scope: &Scope, allow_b_text: bool) -> MetaKey {
        if !scope.b64.is_empty() && self.chance(0.2) {
            let raw = self.pick(&scope.b64).clone();
            let mut token = Vec::new();
            base64_encode(&raw, &mut token);
            return MetaKey {
                raw,
                token,
                b: true,
                b_on_text: false,
            };
        }
        let raw = self.key(scope);
        if allow_b_text && self.chance(0.1) {
            let mut token = Vec::new();
            base64_encode(&raw, &mut token);
            return MetaKey {
                raw,
                token,
                b: true,
                b_on_text: true,
            };
        }
        MetaKey {
            token: raw.clone(),
            raw,
            b: false,
            b_on_text: false,
        }
    }

    /// A key memcached refuses in a meta command: never a key another connection
    /// could name, nor a pool key in base64.
    fn bad_meta_key(&mut self) -> (Vec<u8>, bool) {
        match self.rng.random_range(0..5) {
            0 => (self.long_key(), false),
            // Not base64. (A mangled encoding of a pool key is not sent: memcached
            // decodes some of them, e.g. "YQ==" with its '=' moved, to the key
            // itself, which then counts as a base64 key; see AVOIDED.)
            1 | 4 => (
                self.pick(&[&b"!!!!"[..], b"abc", b"====", b"YQ", b"YQ="])
                    .to_vec(),
                true,
            ),
            // Base64 of more than 250 bytes.
            2 => {
                let mut t = Vec::new();
                base64_encode(&vec![b'k'; self.rng.random_range(251..=300)], &mut t);
                (t, true)
            }
            _ => (self.long_key(), true),
        }
    }

    /// Replaces the key with a bad one, with `b` when it is base64 (and then without
    /// `k`, see AVOIDED).
    fn break_key(&mut self, token: &mut Vec<u8>, flags: &mut Vec<Flag>) {
        let (t, b) = self.bad_meta_key();
        *token = t;
        flags.retain(|f| !matches!(f, Flag::Text(t) if t == "b" || (b && t == "k")));
        if b {
            flags.push(Flag::Text("b".to_string()));
        }
    }

    /// Picks flags from `menu` (each about one in three), shuffles them, and, when
    /// `bad`, breaks them one way or another.
    fn flags(&mut self, menu: &[&str], scope: &Scope, bad: bool) -> Vec<Flag> {
        let mut out = Vec::new();
        for &f in menu {
            if !self.chance(0.3) {
                continue;
            }
            let t = match f {
                "O" => format!("O{}", self.opaque(false)),
                // An explicit new unique no server assigns (see AVOIDED).
                "E" => format!("E{}", (1u64 << 63) + self.rng.random_range(0..1000u64)),
                "N" | "T" => format!("{f}{}", self.ttl()),
                "R" => format!("R{}", self.recache()),
                // Digits only for 1.6.18: 1.6.45 refuses `+n` (see AVOIDED).
                "F" if self.cfg.today => format!("F{}", self.client_flags()),
                "F" => format!("F{}", self.client_flags().trim_start_matches('+')),
                "J" => format!("J{}", self.initial()),
                "D" => format!("D{}", self.delta()),
                "C" => {
                    out.push(Flag::Cas('C', self.cas_piece(scope)));
                    continue;
                }
                "Mms" => format!("M{}", self.pick(&["E", "A", "P", "R", "S"])),
                "Mma" => format!("M{}", self.pick(&["I", "+", "D", "-"])),
                _ => f.to_string(),
            };
            out.push(Flag::Text(t));
        }
        if bad {
            match self.rng.random_range(0..7) {
                // A duplicate.
                0 => out.push(Flag::Text(
                    self.pick(&["v", "k", "q", "c", "t", "s"]).to_string(),
                )),
                // An unknown letter, or a byte 1.6.45's tokenizer refuses the line
                // for (1.6.18: a duplicate or unknown flag); a digit or one of
                // ``[\]^_` `` is an unknown flag to both.
                1 => out.push(Flag::Text(
                    self.pick(&[
                        "z", "a", "!", "\u{7f}", "Y", "e", "w", "5", "[", "_x", "{", "~",
                    ])
                    .to_string(),
                )),
                // Without `E` (see AVOIDED).
                2 => {
                    out.retain(|f| !matches!(f, Flag::Text(t) if t.starts_with('E')));
                    out.push(Flag::Text(format!("O{}", self.opaque(true))));
                }
                3 => {
                    let f = *self.pick(&["N", "T", "R", "F", "C", "J", "D"]);
                    let today = self.cfg.today;
                    let v = match f {
                        "J" | "D" | "C" => self.bad_u64_token(),
                        "F" if today => self
                            .pick(&["-1", "abc", "1.0", "4294967296", "+5", "99999999999"])
                            .to_string(),
                        // Values over 2^32-1: see AVOIDED.
                        "F" => self.pick(&["-1", "abc", "1.0"]).to_string(),
                        _ if today => self.bad_ttl(),
                        // A lone `-`, or over 2^31-1: see AVOIDED.
                        _ => Some(self.bad_ttl())
                            .filter(|t| t != "-" && t != "2147483648")
                            .unwrap_or_default(),
                    };
                    out.push(Flag::Text(format!("{f}{v}")));
                }
                4 if self.cfg.today => out.push(Flag::Text(
                    self.pick(&["Mx", "Ms", "Mi", "M0", "M", "MSx", "MEE", "MA+"])
                        .to_string(),
                )),
                // Not `M` alone or longer than two bytes: see AVOIDED.
                4 => out.push(Flag::Text(self.pick(&["Mx", "Ms", "Mi", "M0"]).to_string())),
                // More tokens than memcached looks at.
                5 => {
                    for _ in 0..self.rng.random_range(18..=30) {
                        out.push(Flag::Text("v".to_string()));
                    }
                }
                _ => out.push(Flag::Text(String::new())),
            }
        }
        out.shuffle(&mut self.rng);
        out
    }

    /// `<cmd> <key> [<extra>] <flags>\r\n` as pieces.
    fn meta_line(
        &mut self,
        cmd: &str,
        key: &[u8],
        extra: Option<String>,
        flags: Vec<Flag>,
    ) -> Vec<Piece> {
        let mut pieces = Vec::new();
        let mut cur = cmd.as_bytes().to_vec();
        cur.push(b' ');
        cur.extend_from_slice(key);
        if let Some(e) = extra {
            cur.push(b' ');
            cur.extend_from_slice(e.as_bytes());
        }
        for f in flags {
            cur.push(b' ');
            match f {
                Flag::Text(t) => cur.extend_from_slice(t.as_bytes()),
                Flag::Cas(letter, p) => {
                    cur.push(letter as u8);
                    pieces.push(lit(std::mem::take(&mut cur)));
                    pieces.push(p);
                }
            }
        }
        cur.extend_from_slice(self.eol());
        pieces.push(lit(cur));
        pieces
    }

    /// Applies the base64 rules (see AVOIDED): `b` goes with a base64 key, which
    /// never asks for `k`; a text-pool key in base64 also drops `N`.
    fn key_flags(&mut self, key: &MetaKey, mut flags: Vec<Flag>) -> Vec<Flag> {
        if key.b {
            flags.retain(|f| !matches!(f, Flag::Text(t) if t == "k"));
        }
        if key.b_on_text {
            flags.retain(|f| !matches!(f, Flag::Text(t) if t.starts_with('N')));
        }
        if key.b {
            let at = self.rng.random_range(0..=flags.len());
            flags.insert(at, Flag::Text("b".to_string()));
        }
        flags
    }

    /// `menu` and, against 1.6.45, `newer`.
    fn menu<'a>(&self, menu: &[&'a str], newer: &[&'a str]) -> Vec<&'a str> {
        let mut m = menu.to_vec();
        if self.cfg.today {
            m.extend_from_slice(newer);
        }
        m
    }

    fn mg(&mut self, scope: &Scope, bad: bool) -> Gen1 {
        let key = self.meta_key(scope, true);
        // 1.6.40: with `C` and `v` the value comes only when the item changed.
        let menu = self.menu(
            &[
                "c", "f", "h", "k", "l", "O", "q", "s", "t", "u", "v", "N", "R", "T", "P", "L",
            ],
            &["C", "E", "x"],
        );
        let flags = self.flags(&menu, scope, bad);
        let mut flags = self.key_flags(&key, flags);
        // A hit's reply holds the item until sent, value or not.
        self.fetches(&key.raw);
        let mut token = key.token;
        if bad && self.chance(0.3) {
            self.break_key(&mut token, &mut flags);
        }
        let pieces = if bad && self.chance(0.05) {
            vec![lit(b"mg\r\n".to_vec())]
        } else {
            self.meta_line("mg", &token, None, flags)
        };
        Gen1::new("meta.mg", pieces, bad)
    }

    fn ms(&mut self, scope: &Scope, bad: bool) -> Gen1 {
        let key = self.meta_key(scope, false);
        let mut value = self.value();
        let menu = self.menu(
            &[
                "c", "C", "F", "I", "k", "O", "q", "T", "Mms", "N", "f", "t", "v", "s",
            ],
            &["E", "x"],
        );
        let mut flags = self.flags(&menu, scope, bad);
        if !self.cfg.today {
            // `s` (stored size) answers since 1.6.20: see AVOIDED.
            flags.retain(|f| !matches!(f, Flag::Text(t) if t == "s"));
        }
        let mut flags = self.key_flags(&key, flags);
        if flags
            .iter()
            .any(|f| matches!(f, Flag::Text(t) if t == "MA" || t == "MP"))
        {
            value = self.concat_safe(value);
            if !self.cfg.today {
                // Append and prepend with N autovivify since 1.6.20: see AVOIDED.
                flags.retain(|f| !matches!(f, Flag::Text(t) if t.starts_with('N')));
            }
        }
        let n = pieces_len(&value);
        // With `I`, memcached compares the unique's *order* with the item's: only
        // the uniques this key was returned with are ordered the same way on both
        // servers (other keys' depend on scheduling, see AVOIDED). Before memcrab
        // orders a key's uniques in time, this finds that difference.
        if flags.iter().any(|f| matches!(f, Flag::Text(t) if t == "I")) {
            let own: Vec<usize> = (0..scope.cas_seen)
                .filter(|&i| scope.cas_keys.get(i).and_then(|k| k.as_deref()) == Some(&key.raw[..]))
                .collect();
            for f in flags.iter_mut() {
                if matches!(f, Flag::Cas(_, Piece::Cas(_))) {
                    *f = if !key.b && !own.is_empty() && self.chance(0.8) {
                        Flag::Cas('C', Piece::Cas(*self.pick(&own)))
                    } else {
                        let v = if self.chance(0.5) {
                            0
                        } else {
                            (1u64 << 63) + self.rng.random_range(0..1000u64)
                        };
                        Flag::Cas('C', lit(v.to_string().into_bytes()))
                    };
                }
            }
        }
        let mut token = key.token;
        let mut len = self.num(n as u64);
        if bad {
            match self.rng.random_range(0..4) {
                0 => {
                    self.break_key(&mut token, &mut flags);
                }
                1 => len = self.bad_len(n),
                _ => {}
            }
        }
        let (mut block, bad_block) = self.data_block(value, bad, scope);
        if bad_block {
            // A refused data block after `E`: see AVOIDED.
            flags.retain(|f| !matches!(f, Flag::Text(t) if t.starts_with('E')));
        }
        let mut pieces = self.meta_line("ms", &token, Some(len).filter(|l| !l.is_empty()), flags);
        pieces.append(&mut block);
        Gen1::new("meta.ms", pieces, bad || bad_block)
    }

    fn md(&mut self, scope: &Scope, bad: bool) -> Gen1 {
        let key = self.meta_key(scope, true);
        // 1.6.27: `x` empties the value (with `I`, a stale tombstone); `E`.
        let menu = self.menu(&["C", "I", "k", "O", "q", "T"], &["x", "E", "F"]);
        let flags = self.flags(&menu, scope, bad);
        let mut flags = self.key_flags(&key, flags);
        let mut token = key.token;
        if bad && self.chance(0.3) {
            self.break_key(&mut token, &mut flags);
        }
        let pieces = self.meta_line("md", &token, None, flags);
        Gen1::new("meta.md", pieces, bad)
    }

    fn ma(&mut self, scope: &Scope, bad: bool) -> Gen1 {
        let key = self.meta_key(scope, false);
        self.increments(&key.raw);
        // Not `E`: see AVOIDED (`ma` with `T` or `E`).
        let menu = self.menu(
            &["C", "N", "J", "D", "Mma", "O", "q", "t", "c", "v", "k"],
            &["x"],
        );
        let mut flags = self.flags(&menu, scope, bad);
        if !self.cfg.today
            && flags
                .iter()
                .any(|f| matches!(f, Flag::Text(t) if t.starts_with('N')))
        {
            // 1.6.45's q hides the reply for an item N created (see AVOIDED).
            flags.retain(|f| !matches!(f, Flag::Text(t) if t == "q"));
        }
        let mut flags = self.key_flags(&key, flags);
        let mut token = key.token;
        if bad && self.chance(0.3) {
            self.break_key(&mut token, &mut flags);
        }
        let pieces = self.meta_line("ma", &token, None, flags);
        Gen1::new("meta.ma", pieces, bad)
    }

    /// `me`, on text-pool keys only (it prints the key, see AVOIDED).
    fn me(&mut self, scope: &Scope, bad: bool) -> Gen1 {
        let mut token = self.key(scope);
        let mut flags = Vec::new();
        if bad {
            match self.rng.random_range(0..3) {
                // Without `b` even where the key is base64 (see AVOIDED).
                0 => token = self.bad_meta_key().0,
                1 => flags.push(Flag::Text("v".to_string())),
                _ => return Gen1::new("meta.me", vec![lit(b"me\r\n".to_vec())], true),
            }
        }
        let pieces = self.meta_line("me", &token, None, flags);
        Gen1::new("meta.me", pieces, bad)
    }
}
