//! The metadata file of a warm restart (`<memory file>.meta`): what a graceful stop
//! saves beside the memory file, and the strict reader a restart uses.
//!
//! ```text
//!   "MCRABWRM" | format u32 (at byte 8) | byte-order mark u32 | body … | length u64 | xxh3-64 u64
//!   body: version string (u16 length + bytes, informational)
//!         settings that must match: -m bytes u64, -I u64, segment size u32, CAS u8,
//!                                   memory file length u64
//!         index hash: seed u128, hash of HASH_PROBE under it u64 (format 2 on)
//!         time: relative now at the stop u32, unix time of the stop i64
//!         CAS/flush: next generation u64, flush generation u64, oldest_live u32
//!         segments u32 × { file offset u64, cap u32, end u32, generation u64,
//!                          opened u32, max_exptime u32, main u8, queue u8,
//!                          xxh3-64 of bytes [0, end) u64,
//!                          live items u32 × offset u32 (ascending) }
//! ```
//!
//! All integers are little-endian. The trailer's length is the whole file's and its
//! hash covers every byte before the hash. [`decode`] checks, in order: the magic,
//! the format (another format is "another version"), the byte order, the length,
//! the hash, then reads the body with every read bounded, and refuses trailing
//! bytes. What the values mean is checked by the restart (`persist.rs`).
//!
//! Locks: none. Imports: nothing of the engine's.

use xxhash_rust::xxh3::xxh3_64;

pub const MAGIC: &[u8; 8] = b"MCRABWRM";
/// Bump on any change to this layout, the item layout (item.rs), the CAS derivation
/// or the key hash: a restart refuses other formats. Format 3: the 6-byte item
/// header of 2-aligned items, and index slots of offset / 2.
pub const FORMAT: u32 = 3;
const BYTE_ORDER: u32 = 0x0102_0304;
/// The key whose hash, saved beside the seed, proves the restart hashes as the
/// stop did (same seed, same hash function).
pub const HASH_PROBE: &[u8] = b"memcrab warm restart hash check";
/// Bytes after the body: length and hash.
const TRAILER: usize = 16;

/// The settings a restart must match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub limit_bytes: u64,
    pub item_size_max: u64,
    pub seg_size: u32,
    pub use_cas: bool,
    pub file_len: u64,
}

/// One saved segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub file_off: u64,
    pub cap: u32,
    pub end: u32,
    pub gen: u64,
    pub opened: u32,
    pub max_exptime: u32,
    /// The descriptor's reinsertion flag.
    pub main: bool,
    /// Which S3-FIFO queue it was in (true: main).
    pub queue_main: bool,
    pub checksum: u64,
    /// Offsets of its linked items, ascending.
    pub live: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub version: String,
    pub settings: Settings,
    /// The index hash's secret seed (format 2): a restart keeps it.
    pub hash_seed: u128,
    /// The hash of [`HASH_PROBE`] under `hash_seed` at the stop.
    pub hash_probe: u64,
    pub now: u32,
    pub stop_unix: i64,
    pub gen: u64,
    pub flush_gen: u64,
    pub oldest_live: u32,
    /// In queue order: the small queue oldest first, then the main queue.
    pub segments: Vec<Segment>,
}

/// The hash segments and the file use.
pub fn checksum(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

pub fn encode(m: &Meta) -> Vec<u8> {
    let live: usize = m.segments.iter().map(|s| s.live.len()).sum();
    let mut b = Vec::with_capacity(128 + m.segments.len() * 48 + live * 4);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&FORMAT.to_le_bytes());
    b.extend_from_slice(&BYTE_ORDER.to_ne_bytes());
    let v = m.version.as_bytes();
    let vlen = v.len().min(u16::MAX as usize);
    b.extend_from_slice(&(vlen as u16).to_le_bytes());
    b.extend_from_slice(&v[..vlen]);
    let s = &m.settings;
    b.extend_from_slice(&s.limit_bytes.to_le_bytes());
    b.extend_from_slice(&s.item_size_max.to_le_bytes());
    b.extend_from_slice(&s.seg_size.to_le_bytes());
    b.push(u8::from(s.use_cas));
    b.extend_from_slice(&s.file_len.to_le_bytes());
    b.extend_from_slice(&m.hash_seed.to_le_bytes());
    b.extend_from_slice(&m.hash_probe.to_le_bytes());
    b.extend_from_slice(&m.now.to_le_bytes());
    b.extend_from_slice(&m.stop_unix.to_le_bytes());
    b.extend_from_slice(&m.gen.to_le_bytes());
    b.extend_from_slice(&m.flush_gen.to_le_bytes());
    b.extend_from_slice(&m.oldest_live.to_le_bytes());
    b.extend_from_slice(&(m.segments.len() as u32).to_le_bytes());
    for g in &m.segments {
        b.extend_from_slice(&g.file_off.to_le_bytes());
        b.extend_from_slice(&g.cap.to_le_bytes());
        b.extend_from_slice(&g.end.to_le_bytes());
        b.extend_from_slice(&g.gen.to_le_bytes());
        b.extend_from_slice(&g.opened.to_le_bytes());
        b.extend_from_slice(&g.max_exptime.to_le_bytes());
        b.push(u8::from(g.main));
        b.push(u8::from(g.queue_main));
        b.extend_from_slice(&g.checksum.to_le_bytes());
        b.extend_from_slice(&(g.live.len() as u32).to_le_bytes());
        for off in &g.live {
            b.extend_from_slice(&off.to_le_bytes());
        }
    }
    let len = (b.len() + TRAILER) as u64;
    b.extend_from_slice(&len.to_le_bytes());
    let h = checksum(&b);
    b.extend_from_slice(&h.to_le_bytes());
    b
}

/// Bounded little-endian reads.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or("metadata file is truncated inside its body")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self) -> Result<bool, String> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            x => Err(format!("metadata file has a bad boolean {x}")),
        }
    }
    fn u16(&mut self) -> Result<u16, String> {
        let mut a = [0; 2];
        a.copy_from_slice(self.take(2)?);
        Ok(u16::from_le_bytes(a))
    }
    fn u32(&mut self) -> Result<u32, String> {
        let mut a = [0; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, String> {
        let mut a = [0; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
}

/// Reads a metadata file, or says why it cannot be trusted.
pub fn decode(b: &[u8]) -> Result<Meta, String> {
    if b.len() < 16 || &b[..8] != MAGIC {
        return Err("not a memcrab metadata file (bad magic)".into());
    }
    let mut r = Reader { b, at: 8 };
    let format = r.u32()?;
    if format != FORMAT {
        return Err(format!(
            "metadata file is from another version (format {format}, this memcrab reads {FORMAT})"
        ));
    }
    let bom = r.take(4)?;
    if bom != BYTE_ORDER.to_ne_bytes() {
        return Err("metadata file is from a machine of another byte order".into());
    }
    if b.len() < r.at + TRAILER {
        return Err("metadata file is truncated".into());
    }
    let body_end = b.len() - TRAILER;
    let mut t = Reader { b, at: body_end };
    let len = t.u64()?;
    let hash = t.u64()?;
    if len != b.len() as u64 {
        return Err(format!(
            "metadata file is {} bytes but says {len} (truncated or extended)",
            b.len()
        ));
    }
    if checksum(&b[..body_end + 8]) != hash {
        return Err("metadata file checksum mismatch (corrupt)".into());
    }
    let mut r = Reader {
        b: &b[..body_end],
        at: r.at,
    };
    let vlen = r.u16()? as usize;
    let version = String::from_utf8_lossy(r.take(vlen)?).into_owned();
    let settings = Settings {
        limit_bytes: r.u64()?,
        item_size_max: r.u64()?,
        seg_size: r.u32()?,
        use_cas: r.bool()?,
        file_len: r.u64()?,
    };
    let hash_seed = u128::from(r.u64()?) | u128::from(r.u64()?) << 64;
    let hash_probe = r.u64()?;
    let now = r.u32()?;
    let stop_unix = r.u64()? as i64;
    let gen = r.u64()?;
    let flush_gen = r.u64()?;
    let oldest_live = r.u32()?;
    let n = r.u32()? as usize;
    // Each segment record takes at least 46 bytes: bound the allocation by the file.
    if n > r.b.len() / 46 {
        return Err("metadata file lists more segments than it holds".into());
    }
    let mut segments = Vec::with_capacity(n);
    for _ in 0..n {
        let file_off = r.u64()?;
        let cap = r.u32()?;
        let end = r.u32()?;
        let gen = r.u64()?;
        let opened = r.u32()?;
        let max_exptime = r.u32()?;
        let main = r.bool()?;
        let queue_main = r.bool()?;
        let checksum = r.u64()?;
        let k = r.u32()? as usize;
        let raw = r.take(k.checked_mul(4).ok_or("metadata file: bad item count")?)?;
        let live = raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        segments.push(Segment {
            file_off,
            cap,
            end,
            gen,
            opened,
            max_exptime,
            main,
            queue_main,
            checksum,
            live,
        });
    }
    if r.at != r.b.len() {
        return Err("metadata file has bytes after its last segment".into());
    }
    Ok(Meta {
        version,
        settings,
        hash_seed,
        hash_probe,
        now,
        stop_unix,
        gen,
        flush_gen,
        oldest_live,
        segments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Meta {
        Meta {
            version: "0.1.0".into(),
            settings: Settings {
                limit_bytes: 64 << 20,
                item_size_max: 1 << 20,
                seg_size: 512 << 10,
                use_cas: true,
                file_len: 74 << 20,
            },
            hash_seed: 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
            hash_probe: 77,
            now: 1234,
            stop_unix: 1_700_000_000,
            gen: 99,
            flush_gen: 3,
            oldest_live: 7,
            segments: vec![
                Segment {
                    file_off: 0,
                    cap: 512 << 10,
                    end: 4000,
                    gen: 5,
                    opened: 9,
                    max_exptime: u32::MAX,
                    main: false,
                    queue_main: false,
                    checksum: 42,
                    live: vec![0, 64, 128],
                },
                Segment {
                    file_off: 512 << 10,
                    cap: 300_000,
                    end: 300_000,
                    gen: 6,
                    opened: 10,
                    max_exptime: 50,
                    main: true,
                    queue_main: true,
                    checksum: 43,
                    live: vec![],
                },
            ],
        }
    }

    #[test]
    fn roundtrip() {
        let m = sample();
        assert_eq!(decode(&encode(&m)).expect("decodes"), m);
    }

    #[test]
    fn every_truncation_and_bit_flip_is_refused() {
        let b = encode(&sample());
        for n in 0..b.len() {
            assert!(decode(&b[..n]).is_err(), "truncated to {n}");
        }
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert!(decode(&c).is_err(), "flipped byte {i}");
        }
        let mut c = b.clone();
        c[8] = 1; // the format field: format 1, before keyed hashing
        assert!(decode(&c)
            .expect_err("other format")
            .contains("another version"));
    }
}
