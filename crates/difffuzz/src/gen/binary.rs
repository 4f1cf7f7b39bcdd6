//! The binary protocol: every opcode of memcached 1.6 (quiet forms too), unknown
//! ones, and broken headers (magic, lengths, extras).
//!
//! A request always carries at least the bytes its header announces and at least
//! its extras and key, so no server waits for bytes that never come (a stalled
//! request would swallow the sentinel): see [`Gen::packet`].

use memcrab_proto::binary::op;
use rand::Rng;

use super::{lit, pieces_len, Gen, Gen1, Scope};
use crate::plan::{Piece, SENTINEL_OPAQUE};

/// The fields of a request header, before [`Gen::packet`] lays them out.
struct Head {
    magic: u8,
    opcode: u8,
    datatype: u8,
    vbucket: u16,
    opaque: u32,
    cas: Piece,
    /// Length fields as sent; `None`: the true lengths.
    keylen: Option<u16>,
    extlen: Option<u8>,
    bodylen: Option<u32>,
}

const GETS: &[u8] = &[op::GET, op::GETQ, op::GETK, op::GETKQ];
const STORES: &[u8] = &[
    op::SET,
    op::SETQ,
    op::ADD,
    op::ADDQ,
    op::REPLACE,
    op::REPLACEQ,
];
const APPENDS: &[u8] = &[op::APPEND, op::APPENDQ, op::PREPEND, op::PREPENDQ];
const DELETES: &[u8] = &[op::DELETE, op::DELETEQ];
const ARITH: &[u8] = &[op::INCREMENT, op::INCREMENTQ, op::DECREMENT, op::DECREMENTQ];
const TOUCHES: &[u8] = &[op::TOUCH, op::GAT, op::GATQ, op::GATK, op::GATKQ];

impl Gen {
    pub(super) fn binary(&mut self, scope: &Scope, valid_only: bool) -> Gen1 {
        let bad = !valid_only && self.chance(0.12);
        let mut h = Head {
            magic: 0x80,
            opcode: 0,
            datatype: if self.chance(0.03) {
                self.rng.random()
            } else {
                0
            },
            vbucket: if self.chance(0.05) {
                self.rng.random()
            } else {
                0
            },
            opaque: self.bin_opaque(),
            cas: lit(vec![0; 8]),
            keylen: None,
            extlen: None,
            bodylen: None,
        };
        let key = self.bin_key(scope);
        let (opcode, ext, key, value): (u8, Vec<u8>, Vec<u8>, Vec<Piece>) =
            match self.rng.random_range(0..100) {
                0..=24 => {
                    self.fetches(&key);
                    (*self.pick(GETS), Vec::new(), key, Vec::new())
                }
                25..=49 => {
                    let mut ext = self.rng.random::<u32>().to_be_bytes().to_vec();
                    if self.chance(0.6) {
                        ext = vec![0; 4];
                    }
                    ext.extend_from_slice(&self.bin_ttl().to_be_bytes());
                    h.cas = self.bin_cas(scope);
                    let value = self.value();
                    (*self.pick(STORES), ext, key, value)
                }
                50..=57 => {
                    h.cas = self.bin_cas(scope);
                    let value = self.value();
                    let value = self.concat_safe(value);
                    (*self.pick(APPENDS), Vec::new(), key, value)
                }
                58..=65 => {
                    h.cas = self.bin_cas(scope);
                    (*self.pick(DELETES), Vec::new(), key, Vec::new())
                }
                66..=77 => {
                    let mut ext = Vec::new();
                    ext.extend_from_slice(&self.delta().to_be_bytes());
                    ext.extend_from_slice(&self.initial().to_be_bytes());
                    let exp = if self.chance(0.3) {
                        0xffff_ffff
                    } else {
                        self.bin_ttl()
                    };
                    ext.extend_from_slice(&exp.to_be_bytes());
                    h.cas = self.bin_cas(scope);
                    self.increments(&key);
                    (*self.pick(ARITH), ext, key, Vec::new())
                }
                78..=85 => {
                    self.fetches(&key);
                    (
                        *self.pick(TOUCHES),
                        self.bin_ttl().to_be_bytes().to_vec(),
                        key,
                        Vec::new(),
                    )
                }
                86..=88 => (op::NOOP, Vec::new(), Vec::new(), Vec::new()),
                89 => (op::VERSION, Vec::new(), Vec::new(), Vec::new()),
                90..=91 => {
                    let groups: [&[u8]; 5] = [b"", b"", b"reset", b"nonsense", b"settings"];
                    let group = *self.pick(&groups);
                    (op::STAT, Vec::new(), group.to_vec(), Vec::new())
                }
                92 if scope.flush_ok => {
                    let opc = if self.chance(0.5) {
                        op::FLUSH
                    } else {
                        op::FLUSHQ
                    };
                    let delayed = !self.immediate_flush && self.chance(0.2);
                    let ext = if delayed {
                        self.pick(&[5000u32, 86400]).to_be_bytes().to_vec()
                    } else if self.chance(0.5) {
                        vec![0; 4]
                    } else {
                        Vec::new()
                    };
                    // A broken header may still flush (memcached reads what it
                    // can): count it.
                    if !delayed {
                        self.immediate_flush = true;
                    }
                    (opc, ext, Vec::new(), Vec::new())
                }
                93 if !valid_only => (
                    *self.pick(&[op::QUIT, op::QUITQ]),
                    Vec::new(),
                    Vec::new(),
                    Vec::new(),
                ),
                94 => (
                    *self.pick(&[op::SASL_LIST_MECHS, op::SASL_AUTH, op::SASL_STEP]),
                    Vec::new(),
                    b"PLAIN".to_vec(),
                    vec![lit(b"\0user\0pass".to_vec())],
                ),
                95 => (
                    op::VERBOSITY,
                    1u32.to_be_bytes().to_vec(),
                    Vec::new(),
                    Vec::new(),
                ),
                _ => {
                    // Unknown opcodes: memcached answers and swallows `bodylen` bytes.
                    let opc = loop {
                        let o: u8 = self.rng.random();
                        if o > op::GATKQ || (0x25..0x30).contains(&o) || o == 0x1f {
                            break o;
                        }
                    };
                    (opc, Vec::new(), Vec::new(), vec![lit(b"xyz".to_vec())])
                }
            };
        h.opcode = opcode;
        let mut ext = ext;
        let mut key = key;
        if bad {
            match self.rng.random_range(0..8) {
                0 => {
                    h.magic = *self.pick(&[0x81u8, 0x00, b'g', 0x7f, 0xff]);
                    // A NOOP first (see AVOIDED): memcached clears a connection's
                    // last unique when it reads a header, except one it closes on.
                    let mut noop = vec![0u8; 24];
                    noop[0] = 0x80;
                    noop[1] = op::NOOP;
                    let mut pieces = vec![lit(noop)];
                    let name = format!("bin.{}", opcode_name(h.opcode));
                    pieces.extend(self.packet(&h, &ext, &key, value));
                    return Gen1::new(name, pieces, bad);
                }
                1 => ext = vec![0; *self.pick(&[1usize, 3, 4, 8, 12, 20, 21])],
                2 => key = self.long_key(),
                3 => key.clear(),
                // The header's lengths disagree with the body. A shorter key length
                // would name a prefix of the key, maybe another connection's key.
                4 => {
                    h.keylen = Some(if self.chance(0.2) {
                        0
                    } else {
                        key.len() as u16 + self.rng.random_range(1..=20)
                    })
                }
                5 => h.extlen = Some(self.rng.random_range(0..30)),
                6 => {
                    let real = (ext.len() + key.len() + pieces_len(&value)) as u32;
                    // Opcodes that read or swallow the body after the header get no
                    // more than is sent: a server would wait for the rest.
                    let swallows = STORES.contains(&opcode)
                        || APPENDS.contains(&opcode)
                        || opcode == op::SASL_AUTH
                        || opcode == op::SASL_STEP
                        || !is_known(opcode);
                    h.bodylen = Some(if swallows {
                        self.rng.random_range(0..=real)
                    } else {
                        *self.pick(&[0, real / 2, real + 1, 0xffff_ffff])
                    });
                }
                _ => h.opcode = *self.pick(&[op::NOOP, op::VERSION, op::QUIT, op::GET]),
            }
        }
        let name = format!("bin.{}", opcode_name(h.opcode));
        Gen1::new(name, self.packet(&h, &ext, &key, value), bad)
    }

    /// Lays out a request: the header with the given (or true) lengths, then the
    /// extras, key and value, padded so that at least `bodylen` bytes and at least
    /// the announced extras and key follow the header.
    fn packet(&mut self, h: &Head, ext: &[u8], key: &[u8], value: Vec<Piece>) -> Vec<Piece> {
        let vlen = pieces_len(&value);
        let keylen = h.keylen.unwrap_or(key.len() as u16);
        let extlen = h.extlen.unwrap_or(ext.len() as u8);
        let real = ext.len() + key.len() + vlen;
        let bodylen = h.bodylen.unwrap_or(real as u32);
        let mut head = vec![h.magic, h.opcode];
        head.extend_from_slice(&keylen.to_be_bytes());
        head.push(extlen);
        head.push(h.datatype);
        head.extend_from_slice(&h.vbucket.to_be_bytes());
        head.extend_from_slice(&bodylen.to_be_bytes());
        head.extend_from_slice(&h.opaque.to_be_bytes());
        let mut pieces = vec![lit(head), h.cas.clone()];
        let mut body = ext.to_vec();
        body.extend_from_slice(key);
        pieces.push(lit(body));
        pieces.extend(value);
        // What a server may wait for before it looks at the request: extras and
        // key, and (for unknown opcodes, which are swallowed after them) the body.
        let announced = extlen as usize + keylen as usize;
        let mut need = announced.max(if bodylen == 0xffff_ffff {
            0
        } else {
            bodylen as usize
        });
        let unknown = !is_known(h.opcode);
        if unknown {
            need = need.max(announced + bodylen as usize);
        }
        if need > real {
            pieces.push(Piece::Rep(need - real, 0));
        }
        pieces
    }

    fn bin_key(&mut self, scope: &Scope) -> Vec<u8> {
        if !scope.bin.is_empty() && self.chance(0.1) {
            return self.pick(&scope.bin).clone();
        }
        self.key(scope)
    }

    fn bin_opaque(&mut self) -> u32 {
        loop {
            let o: u32 = if self.chance(0.5) {
                self.rng.random_range(0..16)
            } else {
                self.rng.random()
            };
            if o & 0xffff_0000 != SENTINEL_OPAQUE {
                return o;
            }
        }
    }

    fn bin_ttl(&mut self) -> u32 {
        // The same values as text, as memcached reads them (a signed 32-bit field).
        let t = self.ttl();
        t.parse::<i64>().map(|v| v as u32).unwrap_or(0)
    }

    /// The header's CAS field: mostly 0, sometimes a returned unique or a made-up one.
    fn bin_cas(&mut self, scope: &Scope) -> Piece {
        if self.chance(0.7) {
            return lit(vec![0; 8]);
        }
        match self.cas_piece(scope) {
            Piece::Cas(i) => Piece::BinCas(i),
            Piece::Lit(t) => {
                let v: u64 = std::str::from_utf8(&t)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                lit(v.to_be_bytes().to_vec())
            }
            p => p,
        }
    }
}

fn is_known(opcode: u8) -> bool {
    opcode <= op::GATKQ && opcode != 0x1f && opcode != op::VERBOSITY
}

fn opcode_name(o: u8) -> String {
    let n = match o {
        op::GET => "GET",
        op::SET => "SET",
        op::ADD => "ADD",
        op::REPLACE => "REPLACE",
        op::DELETE => "DELETE",
        op::INCREMENT => "INCREMENT",
        op::DECREMENT => "DECREMENT",
        op::QUIT => "QUIT",
        op::FLUSH => "FLUSH",
        op::GETQ => "GETQ",
        op::NOOP => "NOOP",
        op::VERSION => "VERSION",
        op::GETK => "GETK",
        op::GETKQ => "GETKQ",
        op::APPEND => "APPEND",
        op::PREPEND => "PREPEND",
        op::STAT => "STAT",
        op::SETQ => "SETQ",
        op::ADDQ => "ADDQ",
        op::REPLACEQ => "REPLACEQ",
        op::DELETEQ => "DELETEQ",
        op::INCREMENTQ => "INCREMENTQ",
        op::DECREMENTQ => "DECREMENTQ",
        op::QUITQ => "QUITQ",
        op::FLUSHQ => "FLUSHQ",
        op::APPENDQ => "APPENDQ",
        op::PREPENDQ => "PREPENDQ",
        op::VERBOSITY => "VERBOSITY",
        op::TOUCH => "TOUCH",
        op::GAT => "GAT",
        op::GATQ => "GATQ",
        op::SASL_LIST_MECHS => "SASL_LIST_MECHS",
        op::SASL_AUTH => "SASL_AUTH",
        op::SASL_STEP => "SASL_STEP",
        op::GATK => "GATK",
        op::GATKQ => "GATKQ",
        _ => return format!("{o:#04x}"),
    };
    n.to_string()
}
