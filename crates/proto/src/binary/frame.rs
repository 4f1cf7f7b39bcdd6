//! Framing: the 24-byte header and [`frame`], which splits header, extras and key
//! off the input without copying and waits (`Frame::NeedMore`) until they are all
//! buffered, as memcached's `try_read_command_binary` does. Nothing is allocated
//! from a length field. A leaf.

/// Length of every request and response header.
pub const HEADER_LEN: usize = 24;
/// Request magic byte.
pub const REQ_MAGIC: u8 = 0x80;
/// Response magic byte.
pub const RES_MAGIC: u8 = 0x81;

/// A request header, fields in host order. `opaque` is kept as the raw bytes,
/// since memcached echoes it without conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub magic: u8,
    pub opcode: u8,
    pub keylen: u16,
    pub extlen: u8,
    pub datatype: u8,
    pub vbucket: u16,
    pub bodylen: u32,
    pub opaque: [u8; 4],
    pub cas: u64,
}

impl Header {
    /// Decodes a header from the first 24 bytes of `b`, if there are that many.
    pub fn parse(b: &[u8]) -> Option<Header> {
        let h: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        Some(Header {
            magic: h[0],
            opcode: h[1],
            keylen: u16::from_be_bytes([h[2], h[3]]),
            extlen: h[4],
            datatype: h[5],
            vbucket: u16::from_be_bytes([h[6], h[7]]),
            bodylen: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
            opaque: [h[12], h[13], h[14], h[15]],
            cas: u64::from_be_bytes([h[16], h[17], h[18], h[19], h[20], h[21], h[22], h[23]]),
        })
    }

    /// Header, extras and key: what memcached consumes before dispatching.
    pub fn prefix_len(&self) -> usize {
        HEADER_LEN + usize::from(self.extlen) + usize::from(self.keylen)
    }
}

/// What [`frame`] found at the start of the input.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Fewer bytes than the header, extras and key.
    NeedMore,
    /// The first byte is not the request magic: memcached closes at once.
    BadMagic,
    /// Header, extras and key are buffered (the value, if any, may not be).
    Packet(Header, &'a [u8], &'a [u8]),
}

/// Splits the header, extras and key off `input` without copying.
pub fn frame(input: &[u8]) -> Frame<'_> {
    let Some(header) = Header::parse(input) else {
        return Frame::NeedMore;
    };
    if header.magic != REQ_MAGIC {
        return Frame::BadMagic;
    }
    let ext_end = HEADER_LEN + usize::from(header.extlen);
    let key_end = ext_end + usize::from(header.keylen);
    match (input.get(HEADER_LEN..ext_end), input.get(ext_end..key_end)) {
        (Some(extras), Some(key)) => Frame::Packet(header, extras, key),
        _ => Frame::NeedMore,
    }
}
