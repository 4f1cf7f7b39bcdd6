//! The `noreply` forms of a connection's commands ([`Connection::noreply`]): each
//! request is written at once and nothing is read.
//!
//! [`Connection::noreply`]: crate::Connection::noreply

use memcrab_proto::text::client::encode;
use memcrab_proto::text::StoreCmd;

use crate::error::Result;
use crate::request;
use crate::wire::Wire;

/// The `noreply` forms: each request is written at once and nothing is read.
///
/// memcached sends no reply to these, errors included, so a failure (a value too
/// large, a non-numeric incr) goes unnoticed; only I/O errors are reported.
pub struct NoReply<'c> {
    pub(crate) wire: &'c mut Wire,
}

impl NoReply<'_> {
    pub fn set(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Result<()> {
        self.store(
            StoreCmd::Set,
            key.as_ref(),
            value.as_ref(),
            flags,
            exptime,
            0,
        )
    }

    pub fn add(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Result<()> {
        self.store(
            StoreCmd::Add,
            key.as_ref(),
            value.as_ref(),
            flags,
            exptime,
            0,
        )
    }

    pub fn replace(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Result<()> {
        self.store(
            StoreCmd::Replace,
            key.as_ref(),
            value.as_ref(),
            flags,
            exptime,
            0,
        )
    }

    pub fn append(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.store(StoreCmd::Append, key.as_ref(), value.as_ref(), 0, 0, 0)
    }

    pub fn prepend(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.store(StoreCmd::Prepend, key.as_ref(), value.as_ref(), 0, 0, 0)
    }

    pub fn cas(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
        cas_unique: u64,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.store(StoreCmd::Cas, key, value, flags, exptime, cas_unique)
    }

    fn store(
        &mut self,
        cmd: StoreCmd,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: i64,
        cas_unique: u64,
    ) -> Result<()> {
        self.wire
            .send(|out| request::store(out, cmd, key, value, flags, exptime, cas_unique, true))
    }

    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        self.wire.send(|out| request::delete(out, key, true))
    }

    pub fn incr(&mut self, key: impl AsRef<[u8]>, delta: u64) -> Result<()> {
        let key = key.as_ref();
        self.wire
            .send(|out| request::arith(out, key, true, delta, true))
    }

    pub fn decr(&mut self, key: impl AsRef<[u8]>, delta: u64) -> Result<()> {
        let key = key.as_ref();
        self.wire
            .send(|out| request::arith(out, key, false, delta, true))
    }

    pub fn touch(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> Result<()> {
        let key = key.as_ref();
        self.wire
            .send(|out| request::touch(out, key, exptime, true))
    }

    pub fn flush_all(&mut self, delay: Option<i64>) -> Result<()> {
        self.wire.send(|out| {
            encode::flush_all(out, delay, true);
            Ok(())
        })
    }

    pub fn verbosity(&mut self, level: u32) -> Result<()> {
        self.wire.send(|out| {
            encode::verbosity(out, level, true);
            Ok(())
        })
    }

    pub fn cache_memlimit(&mut self, megabytes: u32) -> Result<()> {
        self.wire.send(|out| {
            encode::cache_memlimit(out, megabytes, true);
            Ok(())
        })
    }
}
