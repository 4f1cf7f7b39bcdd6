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
//! AES is RustCrypto's `aes` crate (`Aes128Enc`: it detects AES-NI, or ARMv8's
//! AES, at run time); the chain runs inside its backend, one dispatch per key
//! (`Cbc`). Without hardware AES the same seed keys SipHash-1-3 instead (the
//! `siphasher` crate; Rust's `HashMap` hash, a PRF by design), about 150
//! instructions per short key: the crate's software AES is constant-time but
//! slower than that.
//!
//! Locks: none. Imports: nothing of the engine's.

use aes::cipher::{
    consts::U16, BlockCipherEncBackend, BlockCipherEncClosure, BlockCipherEncrypt, BlockSizeUser,
    KeyInit,
};
use aes::{Aes128Enc, Block};
use siphasher::sip::SipHasher13;

/// The index hash under one seed.
pub struct KeyHasher {
    seed: u128,
    imp: Imp,
}

enum Imp {
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
        // The `aes` crate falls back to a bitsliced software AES without AES-NI
        // (or ARMv8's AES): constant-time but several times SipHash's cost, so
        // such a CPU gets SipHash-1-3 instead.
        if aes::hardware_accelerated() {
            return KeyHasher {
                seed,
                imp: Imp::Aes(Box::new(AesMac::new(seed))),
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
            Imp::Aes(_) => "aes",
            Imp::Sip(_) => "sip13",
        }
    }

    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        match &self.imp {
            Imp::Aes(m) => m.mac(key),
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

/// AES-128 under the seed, and the encrypted length blocks.
struct AesMac {
    cipher: Aes128Enc,
    /// E(length block) for lengths 0..=255: a key's first CBC step.
    by_len: [[u8; 16]; 256],
}

impl AesMac {
    fn new(seed: u128) -> AesMac {
        let cipher = Aes128Enc::new(&seed.to_le_bytes().into());
        let by_len = core::array::from_fn(|len| {
            let mut b = Block::from(len_block(len));
            cipher.encrypt_block(&mut b);
            b.into()
        });
        AesMac { cipher, by_len }
    }

    /// The CBC-MAC of `key` (see the module docs), low 64 bits.
    #[inline]
    fn mac(&self, key: &[u8]) -> u64 {
        let mut out = 0;
        // One call for the whole chain: the crate picks its AES-NI backend once
        // per key, and the chain runs inside its `target_feature` function, where
        // each block's encryption inlines to ten `aesenc`.
        self.cipher.encrypt_with_backend(Cbc {
            by_len: &self.by_len,
            key,
            out: &mut out,
        });
        out
    }
}

/// The CBC chain over a key's length block and blocks, run by the cipher's
/// backend (`BlockCipherEncrypt::encrypt_with_backend`).
struct Cbc<'a> {
    by_len: &'a [[u8; 16]; 256],
    key: &'a [u8],
    out: &'a mut u64,
}

impl BlockSizeUser for Cbc<'_> {
    type BlockSize = U16;
}

impl BlockCipherEncClosure for Cbc<'_> {
    #[inline]
    fn call<B: BlockCipherEncBackend<BlockSize = U16>>(self, backend: &B) {
        let mut x = match self.by_len.get(self.key.len()) {
            Some(x0) => Block::from(*x0),
            None => {
                let mut b = Block::from(len_block(self.key.len()));
                backend.encrypt_block_inplace(&mut b);
                b
            }
        };
        let (blocks, rest) = self.key.as_chunks::<16>();
        for m in blocks {
            xor(&mut x, m);
            backend.encrypt_block_inplace(&mut x);
        }
        if !rest.is_empty() {
            let t = u128::from_le_bytes(tail_block(rest));
            x = Block::from((u128::from_le_bytes(x.into()) ^ t).to_le_bytes());
            backend.encrypt_block_inplace(&mut x);
        }
        let mut low = [0u8; 8];
        low.copy_from_slice(&x[..8]);
        *self.out = u64::from_le_bytes(low);
    }
}

#[inline(always)]
fn xor(x: &mut Block, m: &[u8; 16]) {
    for (a, b) in x.iter_mut().zip(m) {
        *a ^= b;
    }
}

/// A key's last 1..=15 bytes, zero-padded to a block. Built from overlapping
/// little-endian reads rather than a zeroed array and a copy: LLVM turns the
/// latter into `memset` and `memcpy` calls, a third of a short key's cost.
#[inline(always)]
fn tail_block(rest: &[u8]) -> [u8; 16] {
    let (lo, hi) = match rest.split_at_checked(8) {
        Some((lo, hi)) => (le_u64(lo), partial_u64(hi)),
        None => (partial_u64(rest), 0),
    };
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&lo.to_le_bytes());
    b[8..].copy_from_slice(&hi.to_le_bytes());
    b
}

/// 0..=8 bytes as a little-endian u64, zero-extended.
#[inline(always)]
fn partial_u64(b: &[u8]) -> u64 {
    let n = b.len();
    if n >= 4 {
        // Two 4-byte reads that overlap when n < 8; the overlap holds the same bytes.
        let first = u64::from(le_u32(&b[..4]));
        let last = u64::from(le_u32(&b[n - 4..]));
        first | last << (8 * (n - 4))
    } else if n > 0 {
        u64::from(b[0])
            | u64::from(b[n / 2]) << (8 * (n / 2))
            | u64::from(b[n - 1]) << (8 * (n - 1))
    } else {
        0
    }
}

#[inline(always)]
fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

#[inline(always)]
fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

/// The block that leads a key of `len` bytes: the length, little-endian, then zeros.
fn len_block(len: usize) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&(len as u64).to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher;

    /// The fallback is the `siphasher` crate's SipHash-1-3 under the seed's two
    /// halves, and that crate's SipHash-2-4 agrees with the standard library's.
    #[test]
    #[allow(deprecated)]
    fn siphash_matches_crate_and_std() {
        let (k0, k1) = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        let sip = KeyHasher::sip(u128::from(k1) << 64 | u128::from(k0));
        assert_eq!(sip.algorithm(), "sip13");
        let msg: Vec<u8> = (0..64u8).collect();
        for len in 0..msg.len() {
            let mut h13 = siphasher::sip::SipHasher13::new_with_keys(k0, k1);
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
    }

    /// FIPS-197 appendix C.1: AES-128 of 00112233…ff under 000102…0f, with the
    /// seed's bytes taken little-endian as the AES key.
    #[test]
    fn aes_matches_fips_197() {
        let key = u128::from_le_bytes(core::array::from_fn(|i| i as u8));
        let mut b = Block::from(core::array::from_fn::<u8, 16, _>(|i| (i * 0x11) as u8));
        AesMac::new(key).cipher.encrypt_block(&mut b);
        let want = [
            0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4,
            0xc5, 0x5a,
        ];
        assert_eq!(<[u8; 16]>::from(b), want);
    }

    /// The MAC is CBC over the length block and the zero-padded key, whatever the
    /// length (the precomputed first step and the slow path for long keys agree),
    /// checked against the cipher's one-block API.
    #[test]
    fn mac_is_cbc_over_length_and_key() {
        let key: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let m = AesMac::new(0x1234_5678_9abc_def0_0fed_cba9_8765_4321);
        for len in [0usize, 1, 15, 16, 17, 31, 32, 250, 255, 256, 300] {
            let mut b = vec![0u8; 16 + len.div_ceil(16) * 16];
            b[..8].copy_from_slice(&(len as u64).to_le_bytes());
            b[16..16 + len].copy_from_slice(&key[..len]);
            let mut x = [0u8; 16];
            for c in b.chunks_exact(16) {
                let mut blk = Block::default();
                for i in 0..16 {
                    blk[i] = x[i] ^ c[i];
                }
                m.cipher.encrypt_block(&mut blk);
                x = blk.into();
            }
            let want = u64::from_le_bytes(core::array::from_fn(|i| x[i]));
            assert_eq!(m.mac(&key[..len]), want, "len {len}");
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
