//! The fuzz input as a stream of numbers: every check reads its program or edit list
//! through one [`Reader`]; reads past the end yield zeros, so every input is a whole
//! program.

/// Reads the input front to back; past the end every read is 0.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl Reader<'_> {
    pub(crate) fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub(crate) fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
    pub(crate) fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
}
