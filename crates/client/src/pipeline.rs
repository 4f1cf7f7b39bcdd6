//! Pipelining: many requests in one write, then every reply in order.
//!
//! ```text
//!   p.set(..).get(..).noreply().delete(..).incr(..)      queue: encode into wbuf
//!   p.execute()
//!     ├─ wbuf ≤ 64 KiB: write_all(wbuf), then read reply 1, 2, 4 (3 is noreply)
//!     └─ larger:        scoped writer thread ── write_all(wbuf) ──►  server
//!                       this thread          ◄── read replies ───
//! ```
//!
//! The requests go out in one write (one round trip for the batch). Reading only
//! after writing is safe while the whole batch fits in the socket buffers; a larger
//! batch is written from a second thread while this one reads, because otherwise the
//! server, blocked sending replies nobody reads, stops reading requests, and our
//! write blocks too: a deadlock that ends in a timeout.

use std::net::Shutdown;

use memcrab_proto::text::client::encode;
use memcrab_proto::text::StoreCmd;

use crate::commands::Commands;
use crate::error::{Error, Result};
use crate::reply::{ReadBuf, Response};
use crate::request::{self, Expect};
use crate::stream::Stream;
use crate::wire::Wire;

/// The largest batch written before reading. Linux's default loopback/LAN socket
/// buffers (`tcp_rmem` 128 KiB on the server, `tcp_wmem` 16 KiB here, before
/// autotuning) take this much without the server having to send a reply first.
const INLINE_WRITE_MAX_BYTES: usize = 64 * 1024;

/// What `execute` does for one queued request.
enum Slot {
    /// Read a reply of this shape.
    Reply(Expect),
    /// A `noreply` request: nothing to read.
    NoReply,
    /// Decided without the server: a refused argument, or a get of no keys.
    Ready(Result<Response>),
}

/// Requests queued on one connection, sent together by [`Pipeline::execute`].
///
/// Each method queues one request and returns the pipeline, so calls chain:
///
/// ```no_run
/// # use memcrab_client::Commands;
/// # fn main() -> Result<(), memcrab_client::Error> {
/// let mut conn = memcrab_client::Connection::connect("127.0.0.1:11211")?;
/// let replies = conn
///     .pipeline()
///     .set("a", "1", 0, 0)
///     .get("a")
///     .noreply()
///     .delete("a")
///     .incr("n", 1)
///     .execute()?;
/// assert_eq!(replies.len(), 4);
/// # Ok(())
/// # }
/// ```
///
/// `execute` answers one entry per queued request, in order. The outer `Result` is
/// for the connection (I/O, timeout, a malformed reply: the connection is broken and
/// the batch's outcome unknown); each inner one is that request's answer, including
/// refusals decided before sending ([`Error::InvalidKey`]), which send nothing for
/// that request and leave the others alone.
pub struct Pipeline<'c> {
    wire: &'c mut Wire,
    slots: Vec<Slot>,
}

impl<'c> Pipeline<'c> {
    pub(crate) fn new(wire: &'c mut Wire) -> Pipeline<'c> {
        wire.wbuf.clear();
        Pipeline {
            wire,
            slots: Vec::new(),
        }
    }

    /// How many requests are queued.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn push(
        &mut self,
        expect: Option<Expect>,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> &mut Self {
        let slot = match encode(&mut self.wire.wbuf) {
            Ok(()) => expect.map_or(Slot::NoReply, Slot::Reply),
            Err(e) => Slot::Ready(Err(e)),
        };
        self.slots.push(slot);
        self
    }

    fn multi<K>(
        &mut self,
        keys: &[K],
        encode: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> &mut Self {
        if keys.is_empty() {
            self.slots
                .push(Slot::Ready(Ok(Response::Values(Vec::new()))));
            return self;
        }
        self.push(Some(Expect::Values), encode)
    }

    /// The next request is sent with `noreply`.
    pub fn noreply(&mut self) -> PipelineNoReply<'_, 'c> {
        PipelineNoReply { p: self }
    }

    pub fn gat_multi<K: AsRef<[u8]>>(&mut self, keys: &[K], exptime: i64) -> &mut Self {
        self.multi(keys, |out| request::gat(out, exptime, keys, false))
    }

    pub fn gats_multi<K: AsRef<[u8]>>(&mut self, keys: &[K], exptime: i64) -> &mut Self {
        self.multi(keys, |out| request::gat(out, exptime, keys, true))
    }

    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        nr: bool,
        cmd: StoreCmd,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: i64,
        cas_unique: u64,
    ) -> &mut Self {
        self.push(reply(nr), |out| {
            request::store(out, cmd, key, value, flags, exptime, cas_unique, nr)
        })
    }

    pub fn version(&mut self) -> &mut Self {
        self.push(reply(false), |out| {
            encode::version(out);
            Ok(())
        })
    }

    pub fn stats(&mut self, args: Option<&str>) -> &mut Self {
        self.push(Some(Expect::Stats), |out| request::stats(out, args))
    }

    pub fn verbosity(&mut self, level: u32) -> &mut Self {
        self.push(reply(false), |out| {
            encode::verbosity(out, level, false);
            Ok(())
        })
    }

    pub fn cache_memlimit(&mut self, megabytes: u32) -> &mut Self {
        self.push(reply(false), |out| {
            encode::cache_memlimit(out, megabytes, false);
            Ok(())
        })
    }

    /// Sends everything queued and reads every reply; the pipeline is then empty
    /// and can be filled again.
    pub fn execute(&mut self) -> Result<Vec<Result<Response>>> {
        let slots = std::mem::take(&mut self.slots);
        let conn = &mut *self.wire;
        if let Err(e) = conn.usable() {
            conn.reset_wbuf();
            return Err(e);
        }
        if conn.wbuf.len() <= INLINE_WRITE_MAX_BYTES {
            conn.write_wbuf()?;
            return read_slots(&mut conn.rbuf, &conn.stream, slots).map_err(|e| conn.fail(e));
        }
        let outcome = exchange(conn, slots);
        conn.reset_wbuf();
        match outcome {
            Ok(r) => Ok(r),
            Err((e, sent)) if sent => Err(conn.fail(e)),
            Err((e, _)) => Err(e),
        }
    }
}

impl<'c> Commands for Pipeline<'c> {
    type Answer<'a, T>
        = &'a mut Pipeline<'c>
    where
        Self: 'a,
        T: 'a;

    fn get(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        let key = key.as_ref();
        self.push(Some(Expect::Values), |out| request::get(out, &[key], false))
    }

    fn gets(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        let key = key.as_ref();
        self.push(Some(Expect::Values), |out| request::get(out, &[key], true))
    }

    fn get_multi<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> &mut Self {
        self.multi(keys, |out| request::get(out, keys, false))
    }

    fn gets_multi<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> &mut Self {
        self.multi(keys, |out| request::get(out, keys, true))
    }

    fn gat(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> &mut Self {
        let key = key.as_ref();
        self.push(Some(Expect::Values), |out| {
            request::gat(out, exptime, &[key], false)
        })
    }

    fn gats(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> &mut Self {
        let key = key.as_ref();
        self.push(Some(Expect::Values), |out| {
            request::gat(out, exptime, &[key], true)
        })
    }

    fn set(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> &mut Self {
        self.store(
            false,
            StoreCmd::Set,
            key.as_ref(),
            value.as_ref(),
            flags,
            exptime,
            0,
        )
    }

    fn add(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> &mut Self {
        self.store(
            false,
            StoreCmd::Add,
            key.as_ref(),
            value.as_ref(),
            flags,
            exptime,
            0,
        )
    }

    fn replace(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> &mut Self {
        let (k, v) = (key.as_ref(), value.as_ref());
        self.store(false, StoreCmd::Replace, k, v, flags, exptime, 0)
    }

    fn append(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.store(
            false,
            StoreCmd::Append,
            key.as_ref(),
            value.as_ref(),
            0,
            0,
            0,
        )
    }

    fn prepend(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.store(
            false,
            StoreCmd::Prepend,
            key.as_ref(),
            value.as_ref(),
            0,
            0,
            0,
        )
    }

    fn cas(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
        cas_unique: u64,
    ) -> &mut Self {
        let (k, v) = (key.as_ref(), value.as_ref());
        self.store(false, StoreCmd::Cas, k, v, flags, exptime, cas_unique)
    }

    fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        let key = key.as_ref();
        self.push(reply(false), |out| request::delete(out, key, false))
    }

    fn incr(&mut self, key: impl AsRef<[u8]>, delta: u64) -> &mut Self {
        let key = key.as_ref();
        self.push(reply(false), |out| {
            request::arith(out, key, true, delta, false)
        })
    }

    fn decr(&mut self, key: impl AsRef<[u8]>, delta: u64) -> &mut Self {
        let key = key.as_ref();
        self.push(reply(false), |out| {
            request::arith(out, key, false, delta, false)
        })
    }

    fn touch(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> &mut Self {
        let key = key.as_ref();
        self.push(reply(false), |out| request::touch(out, key, exptime, false))
    }

    fn flush_all(&mut self, delay: Option<i64>) -> &mut Self {
        self.push(reply(false), |out| {
            encode::flush_all(out, delay, false);
            Ok(())
        })
    }
}

fn reply(noreply: bool) -> Option<Expect> {
    (!noreply).then_some(Expect::Status)
}

/// Reads the replies in order.
fn read_slots(
    rbuf: &mut ReadBuf,
    stream: &Stream,
    slots: Vec<Slot>,
) -> Result<Vec<Result<Response>>> {
    slots
        .into_iter()
        .map(|slot| match slot {
            Slot::Reply(expect) => rbuf.read_response(stream, expect),
            Slot::NoReply => Ok(Ok(Response::NoReply)),
            Slot::Ready(r) => Ok(r),
        })
        .collect()
}

/// Writes from a scoped thread while this one reads. A failure on either side shuts
/// the socket down so the other side stops waiting. The error's flag says whether
/// anything may have been sent (then the connection is broken).
fn exchange(conn: &mut Wire, slots: Vec<Slot>) -> Result<Vec<Result<Response>>, (Error, bool)> {
    let (stream, wbuf, rbuf) = (&conn.stream, &conn.wbuf, &mut conn.rbuf);
    std::thread::scope(|s| {
        let writer = std::thread::Builder::new()
            .name("memcrab-client-pipeline-writer".into())
            .spawn_scoped(s, move || {
                let r = stream.write_all(wbuf);
                if r.is_err() {
                    stream.shutdown(Shutdown::Read);
                }
                r
            })
            .map_err(|e| (Error::Io(e), false))?;
        let read = read_slots(rbuf, stream, slots);
        if read.is_err() {
            stream.shutdown(Shutdown::Both);
        }
        let wrote = writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("pipeline writer panicked")));
        // Report the first failure. A writer that failed first shut the read side,
        // so the reader saw EOF; a reader that failed first shut both sides, so the
        // writer saw a broken pipe.
        match (read, wrote) {
            (Ok(replies), Ok(())) => Ok(replies),
            (Err(Error::Closed) | Ok(_), Err(w)) => Err((Error::from_io(w), true)),
            (Err(r), _) => Err((r, true)),
        }
    })
}

/// Queues the next request with `noreply`; see [`Pipeline::noreply`]. Its entry in
/// `execute`'s answer is `Ok(Response::NoReply)`.
pub struct PipelineNoReply<'p, 'c> {
    p: &'p mut Pipeline<'c>,
}

impl<'p, 'c> PipelineNoReply<'p, 'c> {
    pub fn set(
        self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> &'p mut Pipeline<'c> {
        let (k, v) = (key.as_ref(), value.as_ref());
        self.p.store(true, StoreCmd::Set, k, v, flags, exptime, 0)
    }

    pub fn add(
        self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> &'p mut Pipeline<'c> {
        let (k, v) = (key.as_ref(), value.as_ref());
        self.p.store(true, StoreCmd::Add, k, v, flags, exptime, 0)
    }

    pub fn replace(
        self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> &'p mut Pipeline<'c> {
        let (k, v) = (key.as_ref(), value.as_ref());
        self.p
            .store(true, StoreCmd::Replace, k, v, flags, exptime, 0)
    }

    pub fn append(self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &'p mut Pipeline<'c> {
        let (k, v) = (key.as_ref(), value.as_ref());
        self.p.store(true, StoreCmd::Append, k, v, 0, 0, 0)
    }

    pub fn prepend(self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &'p mut Pipeline<'c> {
        let (k, v) = (key.as_ref(), value.as_ref());
        self.p.store(true, StoreCmd::Prepend, k, v, 0, 0, 0)
    }

    pub fn cas(
        self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
        cas_unique: u64,
    ) -> &'p mut Pipeline<'c> {
        let (k, v) = (key.as_ref(), value.as_ref());
        self.p
            .store(true, StoreCmd::Cas, k, v, flags, exptime, cas_unique)
    }

    pub fn delete(self, key: impl AsRef<[u8]>) -> &'p mut Pipeline<'c> {
        let key = key.as_ref();
        self.p.push(None, |out| request::delete(out, key, true))
    }

    pub fn incr(self, key: impl AsRef<[u8]>, delta: u64) -> &'p mut Pipeline<'c> {
        let key = key.as_ref();
        self.p
            .push(None, |out| request::arith(out, key, true, delta, true))
    }

    pub fn decr(self, key: impl AsRef<[u8]>, delta: u64) -> &'p mut Pipeline<'c> {
        let key = key.as_ref();
        self.p
            .push(None, |out| request::arith(out, key, false, delta, true))
    }

    pub fn touch(self, key: impl AsRef<[u8]>, exptime: i64) -> &'p mut Pipeline<'c> {
        let key = key.as_ref();
        self.p
            .push(None, |out| request::touch(out, key, exptime, true))
    }

    pub fn flush_all(self, delay: Option<i64>) -> &'p mut Pipeline<'c> {
        self.p.push(None, |out| {
            encode::flush_all(out, delay, true);
            Ok(())
        })
    }

    pub fn verbosity(self, level: u32) -> &'p mut Pipeline<'c> {
        self.p.push(None, |out| {
            encode::verbosity(out, level, true);
            Ok(())
        })
    }

    pub fn cache_memlimit(self, megabytes: u32) -> &'p mut Pipeline<'c> {
        self.p.push(None, |out| {
            encode::cache_memlimit(out, megabytes, true);
            Ok(())
        })
    }
}
