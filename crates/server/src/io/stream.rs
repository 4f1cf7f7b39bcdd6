//! A socket as a connection's [`Wire`]: the epoll driver's every connection, and
//! the io_uring driver's TLS ones, read and write their [`Stream`] when readiness
//! says so.

use std::io;

use crate::io::net::Stream;
use crate::io::wire::{Wire, KEEP_BUFFER_BYTES};
use crate::out::Out;
use crate::server::Ctx;

/// A socket as a connection's wire: reads when readiness says so; writes with one
/// `write` (one `writev` of up to `IOV_MAX` pieces when the output holds leases,
/// each lease released once the kernel took its last byte).
impl Wire for Stream {
    #[inline(always)]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Stream::read(self, buf)
    }

    /// Writes once (more if the kernel takes it all and more is left).
    #[inline]
    fn send(&mut self, out: &mut Out, wpos: &mut usize, cx: &Ctx<'_>) -> io::Result<()> {
        while *wpos < out.len() {
            let wrote = match out.owned_from(*wpos) {
                Some(bytes) => self.write(bytes),
                None => {
                    let mut slices = Vec::new();
                    out.io_slices(*wpos, &mut slices);
                    self.write_vectored(&slices)
                }
            };
            match wrote {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    cx.counters.bytes_written.add(n as u64);
                    *wpos += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.flush()?;
        if *wpos == out.len() {
            *wpos = 0;
            out.clear();
            out.free_buffer_over(KEEP_BUFFER_BYTES);
        } else {
            out.release_sent(*wpos);
        }
        Ok(())
    }

    fn holds_output(&self) -> bool {
        self.has_pending_output()
    }
}
