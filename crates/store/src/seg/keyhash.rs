//! The index's keyed hash: a 128-bit secret seed, drawn from the OS at start-up,
//! keys AES-128, and a key's hash is the CBC-MAC of its length and its bytes.
//!
//! ```text
//!   blocks:  [len u64 LE | 0u64]  [key 0..16]  [key 16..32]  …  [last bytes | 0 pad]
//!   x0 = E(len block)                 (precomputed for lengths 0..=255: by_len)
//!   x  = E(x ^ block) for each key block            hash = low 64 bits of x
//! ```
//!
//! Why this hash (`docs/security.md`, "Hash flooding"): the index puts a key in one
//! of two buckets of one partition by 44 of the hash's bits, so an attacker who can
//! compute hashes offline can fill a partition's two buckets with keys that no table
//! size separates. With the seed secret, CBC-MAC over a prefix-free encoding (the
//! length leads) is a pseudo-random function as long as AES is a pseudo-random
//! permutation: hashes seen (a key dump's order, timing) say nothing about other
//! keys' hashes or the seed, and colliding keys can only be found by trying ~2^44
//! stores each. AES-NI runs in constant time (no tables, so no cache-timing leak)
//! and costs about as many instructions as foldhash on short keys: one block
//! encryption for a 16-byte key. With the seed known the MAC is trivially
//! invertible (decrypt), which is how the hash-flooding test builds its keys.
//!
//! Without AES-NI (another architecture, or an x86-64 without it) the same seed
//! keys SipHash-1-3 instead (Rust's `HashMap` hash, a PRF by design; the
//! `siphasher` crate), about 150 instructions per short key.
//!
//! The AES is hand-written on the intrinsics, not RustCrypto's `aes` crate: the
//! same construction on that crate (its run-time dispatch once per key) cost
//! +0.4% / +1.2% / +2.1% instructions per request on W1 / W2 / W3
//! (`docs/security.md`, "Hash flooding"), above the +0.5% the project allows for
//! a crate in place of code of its own.
//!
//! Locks: none. Imports: nothing of the engine's.

use siphasher::sip::SipHasher13;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    __m128i, _mm_aesenc_si128, _mm_aesenclast_si128, _mm_aeskeygenassist_si128, _mm_cvtsi128_si64,
    _mm_loadu_si128, _mm_set_epi64x, _mm_shuffle_epi32, _mm_slli_si128, _mm_xor_si128,
};

/// The index hash under one seed.
pub struct KeyHasher {
    seed: u128,
    imp: Imp,
}

enum Imp {
    #[cfg(target_arch = "x86_64")]
    Aes(Box<AesMac>),
    Sip(SipHasher13),
}

impl KeyHasher {
    /// A hasher under a seed drawn from the OS (`getrandom`, else `/dev/urandom`).
    /// Not input-dependent: a kernel that gives no randomness stops the start.
    pub fn random() -> KeyHasher {
        KeyHasher::with_seed(os_seed())
    }

    /// A hasher under `seed` (a warm restart's saved one, or a test's).
    pub fn with_seed(seed: u128) -> KeyHasher {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("aes") {
            // SAFETY: the CPU has AES-NI (just checked).
            let mac = unsafe { AesMac::new(seed) };
            return KeyHasher {
                seed,
                imp: Imp::Aes(Box::new(mac)),
            };
        }
        KeyHasher::sip(seed)
    }

    /// The SipHash-1-3 hasher under `seed`, whatever the CPU.
    fn sip(seed: u128) -> KeyHasher {
        KeyHasher {
            seed,
            imp: Imp::Sip(SipHasher13::new_with_keys(seed as u64, (seed >> 64) as u64)),
        }
    }

    /// The seed, for a warm restart's metadata.
    pub fn seed(&self) -> u128 {
        self.seed
    }

    /// Which function the seed keys, for the restart check ("aes" or "sip13").
    pub fn algorithm(&self) -> &'static str {
        match self.imp {
            #[cfg(target_arch = "x86_64")]
            Imp::Aes(_) => "aes",
            Imp::Sip(_) => "sip13",
        }
    }

    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        match &self.imp {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: an `Aes` hasher is made only on a CPU with AES-NI.
            Imp::Aes(m) => unsafe { m.mac(key) },
            Imp::Sip(h) => h.hash(key),
        }
    }
}

/// 16 bytes from the kernel's random source.
fn os_seed() -> u128 {
    let mut b = [0u8; 16];
    let mut got = 0;
    for _ in 0..16 {
        // SAFETY: writes at most `16 - got` bytes into `b[got..]`, which is ours.
        let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), b.len() - got, 0) };
        if n > 0 {
            got += n as usize;
        }
        let interrupted = std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR);
        if got == b.len() || (n < 0 && !interrupted) {
            break;
        }
    }
    if got < b.len() {
        use std::io::Read;
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
        if let Err(e) = read {
            eprintln!("memcrab: no randomness for the index hash seed: {e}");
            std::process::abort();
        }
    }
    u128::from_le_bytes(b)
}

/// AES-128 round keys and the encrypted length blocks.
#[cfg(target_arch = "x86_64")]
struct AesMac {
    rk: [__m128i; 11],
    /// E(length block) for lengths 0..=255: a key's first CBC step.
    by_len: [__m128i; 256],
}

#[cfg(target_arch = "x86_64")]
macro_rules! expand_key {
    ($k:expr, $rcon:expr) => {{
        let k = $k;
        let t = _mm_shuffle_epi32(_mm_aeskeygenassist_si128(k, $rcon), 0xff);
        let k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
        let k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
        let k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
        _mm_xor_si128(k, t)
    }};
}

#[cfg(target_arch = "x86_64")]
impl AesMac {
    /// # Safety
    /// The CPU has AES-NI.
    #[target_feature(enable = "aes")]
    unsafe fn new(seed: u128) -> AesMac {
        let k0 = _mm_set_epi64x((seed >> 64) as i64, seed as i64);
        let k1 = expand_key!(k0, 0x01);
        let k2 = expand_key!(k1, 0x02);
        let k3 = expand_key!(k2, 0x04);
        let k4 = expand_key!(k3, 0x08);
        let k5 = expand_key!(k4, 0x10);
        let k6 = expand_key!(k5, 0x20);
        let k7 = expand_key!(k6, 0x40);
        let k8 = expand_key!(k7, 0x80);
        let k9 = expand_key!(k8, 0x1b);
        let k10 = expand_key!(k9, 0x36);
        let mut m = AesMac {
            rk: [k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10],
            by_len: [k0; 256],
        };
        for len in 0..256 {
            // SAFETY: AES-NI, per the contract.
            m.by_len[len] = unsafe { m.encrypt(len_block(len)) };
        }
        m
    }

    /// AES-128 encryption of one block.
    ///
    /// # Safety
    /// The CPU has AES-NI.
    #[target_feature(enable = "aes")]
    #[inline]
    unsafe fn encrypt(&self, x: __m128i) -> __m128i {
        let mut x = _mm_xor_si128(x, self.rk[0]);
        for k in &self.rk[1..10] {
            x = _mm_aesenc_si128(x, *k);
        }
        _mm_aesenclast_si128(x, self.rk[10])
    }

    /// The CBC-MAC of `key` (see the module docs), low 64 bits.
    ///
    /// # Safety
    /// The CPU has AES-NI.
    #[target_feature(enable = "aes")]
    unsafe fn mac(&self, key: &[u8]) -> u64 {
        let mut x = match self.by_len.get(key.len()) {
            Some(x) => *x,
            // SAFETY: AES-NI, per the contract.
            None => unsafe { self.encrypt(len_block(key.len())) },
        };
        let mut blocks = key.chunks_exact(16);
        for b in &mut blocks {
            // SAFETY: `b` is 16 readable bytes; loadu needs no alignment.
            let m = unsafe { _mm_loadu_si128(b.as_ptr().cast()) };
            // SAFETY: AES-NI, per the contract.
            x = unsafe { self.encrypt(_mm_xor_si128(x, m)) };
        }
        let rest = blocks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 16];
            last[..rest.len()].copy_from_slice(rest);
            // SAFETY: `last` is 16 readable bytes.
            let m = unsafe { _mm_loadu_si128(last.as_ptr().cast()) };
            // SAFETY: AES-NI, per the contract.
            x = unsafe { self.encrypt(_mm_xor_si128(x, m)) };
        }
        _mm_cvtsi128_si64(x) as u64
    }
}

/// The block that leads a key of `len` bytes: the length, little-endian, then zeros.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn len_block(len: usize) -> __m128i {
    _mm_set_epi64x(0, len as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fallback is the `siphasher` crate's SipHash-1-3 under the seed's two
    /// halves (k0 the low one), that crate's SipHash-2-4 agrees with the standard
    /// library's and with the reference vector, and its SipHash-1-3 gives the
    /// hashes the hand-written code before it gave.
    #[test]
    #[allow(deprecated)]
    fn siphash_matches_crate_and_std() {
        use std::hash::Hasher;
        let (k0, k1) = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        let sip = KeyHasher::sip(u128::from(k1) << 64 | u128::from(k0));
        assert_eq!(sip.algorithm(), "sip13");
        let msg: Vec<u8> = (0..64u8).collect();
        for len in 0..msg.len() {
            let mut h13 = SipHasher13::new_with_keys(k0, k1);
            h13.write(&msg[..len]);
            assert_eq!(sip.hash(&msg[..len]), h13.finish(), "len {len}");
            let mut std24 = std::hash::SipHasher::new_with_keys(k0, k1);
            std24.write(&msg[..len]);
            let crate24 = siphasher::sip::SipHasher24::new_with_keys(k0, k1);
            assert_eq!(crate24.hash(&msg[..len]), std24.finish(), "len {len}");
        }
        // SipHash-2-4's first reference vector (the paper's key, empty message).
        let crate24 = siphasher::sip::SipHasher24::new_with_keys(k0, k1);
        assert_eq!(crate24.hash(b""), 0x726f_db47_dd0e_0e31);
        // What the hand-written SipHash-1-3 this crate replaced gave, so that a
        // warm restart's saved probe hash from a build before it still matches.
        for (len, want) in [
            (0, 0xabac_0158_050f_c4dc),
            (1, 0xc9f4_9bf3_7d57_ca93),
            (7, 0xd392_7d98_9bb1_1140),
            (8, 0x3690_9511_8d29_9a8e),
            (15, 0xd320_d86d_2a51_9956),
            (16, 0xcc4f_dd1a_7d90_8b66),
            (63, 0x9d19_9062_b7bb_b3a8),
        ] {
            assert_eq!(sip.hash(&msg[..len]), want, "len {len}");
        }
    }

    /// FIPS-197 appendix C.1: AES-128 of 00112233…ff under 000102…0f.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn aes_matches_fips_197() {
        if !std::is_x86_feature_detected!("aes") {
            return;
        }
        let key = u128::from_le_bytes(core::array::from_fn(|i| i as u8));
        let pt: [u8; 16] = core::array::from_fn(|i| (i * 0x11) as u8);
        // SAFETY: AES-NI checked above; loads and stores of 16-byte arrays.
        let ct: [u8; 16] = unsafe {
            let m = AesMac::new(key);
            let c = m.encrypt(_mm_loadu_si128(pt.as_ptr().cast()));
            std::mem::transmute(c)
        };
        let want = [
            0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4,
            0xc5, 0x5a,
        ];
        assert_eq!(ct, want);
    }

    /// The MAC is CBC over the length block and the zero-padded key, whatever the
    /// length (the precomputed first step and the slow path for long keys agree).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn mac_is_cbc_over_length_and_key() {
        if !std::is_x86_feature_detected!("aes") {
            return;
        }
        let key: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        // SAFETY: AES-NI checked above.
        unsafe {
            let m = AesMac::new(0x1234_5678_9abc_def0_0fed_cba9_8765_4321);
            for len in [0usize, 1, 15, 16, 17, 31, 32, 250, 255, 256, 300] {
                let mut b = vec![0u8; 16 + len.div_ceil(16) * 16];
                b[..8].copy_from_slice(&(len as u64).to_le_bytes());
                b[16..16 + len].copy_from_slice(&key[..len]);
                let mut x = _mm_set_epi64x(0, 0);
                for c in b.chunks_exact(16) {
                    x = m.encrypt(_mm_xor_si128(x, _mm_loadu_si128(c.as_ptr().cast())));
                }
                assert_eq!(m.mac(&key[..len]), _mm_cvtsi128_si64(x) as u64, "len {len}");
            }
        }
    }

    #[test]
    fn seeds_differ_and_hashes_follow_the_seed() {
        let (a, b) = (KeyHasher::random(), KeyHasher::random());
        assert_ne!(a.seed(), b.seed());
        assert_ne!(a.hash(b"key:000000000001"), b.hash(b"key:000000000001"));
        let c = KeyHasher::with_seed(a.seed());
        for k in [&b""[..], b"a", b"key:000000000001", &[0xffu8; 250]] {
            assert_eq!(a.hash(k), c.hash(k));
        }
        assert_ne!(a.hash(b"k1"), a.hash(b"k2"));
    }
}
