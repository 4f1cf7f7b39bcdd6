//! One blocking connection to one server: every classic text command.
//!
//! A call encodes the request into the connection's write buffer (after checking
//! keys and arguments, so a refused request costs no I/O), writes it with one
//! `write_all`, and reads the whole response through the read buffer
//! ([`crate::reply`]). Both buffers live as long as the connection, in its `Wire`
//! (wire.rs), which the `noreply` form ([`NoReply`]) and a [`Pipeline`] borrow.
//! The keyed commands are [`Commands`]' methods; the rest are here.

use std::fmt;

use memcrab_proto::text::client::encode;
use memcrab_proto::text::StoreCmd;

use crate::addr::{Options, ServerAddr};
use crate::commands::Commands;
use crate::error::{Error, Result};
use crate::noreply::NoReply;
use crate::pipeline::Pipeline;
use crate::reply::{CasOutcome, Item, Response};
use crate::request::{self, Expect};
use crate::wire::Wire;

/// A blocking connection to one memcached-compatible server.
///
/// Methods mirror the protocol's commands: the keyed ones through [`Commands`],
/// which a [`Cluster`](crate::Cluster) and a [`Pipeline`] implement too. Keys are
/// any `AsRef<[u8]>` and are checked before anything is sent
/// ([`crate::check_key`]). `exptime` is memcached's: seconds from now up to 30 days,
/// a unix time beyond that, 0 for never, negative for already expired. `noreply`
/// forms are on [`Connection::noreply`].
///
/// After an error that [`Error::is_fatal`] reports, the connection is broken: every
/// call answers [`Error::Broken`] until [`Connection::reconnect`].
pub struct Connection {
    wire: Wire,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("addr", self.wire.addr())
            .field("broken", &self.wire.is_broken())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects to `host:port`, `[v6]:port` or a unix socket path (see
    /// [`ServerAddr`]) with the default [`Options`].
    pub fn connect(addr: &str) -> Result<Connection> {
        Connection::open(&addr.parse()?, &Options::default())
    }

    /// Connects with the given options.
    pub fn connect_with(addr: &str, opts: &Options) -> Result<Connection> {
        Connection::open(&addr.parse()?, opts)
    }

    /// Connects to a parsed address.
    pub fn open(addr: &ServerAddr, opts: &Options) -> Result<Connection> {
        Ok(Connection {
            wire: Wire::open(addr, opts)?,
        })
    }

    /// The server this connection talks to.
    pub fn addr(&self) -> &ServerAddr {
        self.wire.addr()
    }

    /// Whether an earlier error broke this connection.
    pub fn is_broken(&self) -> bool {
        self.wire.is_broken()
    }

    /// Drops the current socket and connects again with the same options.
    pub fn reconnect(&mut self) -> Result<()> {
        self.wire.reconnect()
    }

    /// Requests that get no reply.
    pub fn noreply(&mut self) -> NoReply<'_> {
        NoReply {
            wire: &mut self.wire,
        }
    }

    /// Queues requests to send in one write; see [`Pipeline`].
    pub fn pipeline(&mut self) -> Pipeline<'_> {
        Pipeline::new(&mut self.wire)
    }

    /// The socket and buffers, for a [`Cluster`](crate::Cluster) that sends to
    /// several servers before it reads.
    pub(crate) fn wire(&mut self) -> &mut Wire {
        &mut self.wire
    }

    // ---- retrieval beyond [`Commands`] ------------------------------------------

    /// `gat <exptime> <key>*`.
    pub fn gat_multi<K: AsRef<[u8]>>(&mut self, keys: &[K], exptime: i64) -> Result<Vec<Item>> {
        self.multi(keys, |out| request::gat(out, exptime, keys, false))
    }

    /// `gats <exptime> <key>*`.
    pub fn gats_multi<K: AsRef<[u8]>>(&mut self, keys: &[K], exptime: i64) -> Result<Vec<Item>> {
        self.multi(keys, |out| request::gat(out, exptime, keys, true))
    }

    fn multi<K>(
        &mut self,
        keys: &[K],
        encode: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<Vec<Item>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        match self.wire.call(Expect::Values, encode)? {
            Response::Values(items) => Ok(items),
            r => unexpected(r),
        }
    }

    // ---- server commands --------------------------------------------------------

    /// `version`: the server's version text.
    pub fn version(&mut self) -> Result<String> {
        match self.wire.call(Expect::Status, |out| {
            encode::version(out);
            Ok(())
        })? {
            Response::Version(v) => Ok(v),
            r => unexpected(r),
        }
    }

    /// `stats [args]`: name/value pairs in the server's order (e.g. `None`,
    /// `Some("items")`, `Some("slabs")`, `Some("settings")`). `stats reset` and other
    /// subcommands that answer one status line give an empty list.
    pub fn stats(&mut self, args: Option<&str>) -> Result<Vec<(String, String)>> {
        match self
            .wire
            .call(Expect::Stats, |out| request::stats(out, args))?
        {
            Response::Stats(s) => Ok(s),
            Response::Reset | Response::Ok => Ok(Vec::new()),
            r => unexpected(r),
        }
    }

    /// `verbosity <level>`.
    pub fn verbosity(&mut self, level: u32) -> Result<()> {
        ok(self.wire.call(Expect::Status, |out| {
            encode::verbosity(out, level, false);
            Ok(())
        })?)
    }

    /// `cache_memlimit <megabytes>`. memcached refuses values under 8 with
    /// `MEMLIMIT_TOO_SMALL ...`, which comes back as [`Error::UnexpectedReply`].
    pub fn cache_memlimit(&mut self, megabytes: u32) -> Result<()> {
        ok(self.wire.call(Expect::Status, |out| {
            encode::cache_memlimit(out, megabytes, false);
            Ok(())
        })?)
    }

    /// `quit`: the server closes the connection; this waits for the close.
    pub fn quit(mut self) -> Result<()> {
        self.wire.send(|out| {
            encode::quit(out);
            Ok(())
        })?;
        if !self.wire.rbuf.pending().is_empty() {
            let extra = self.wire.rbuf.pending().escape_ascii().to_string();
            return Err(Error::UnexpectedReply(extra));
        }
        let mut b = [0u8; 256];
        loop {
            match self.wire.stream.read(&mut b) {
                Ok(0) => return Ok(()),
                Ok(n) => return Err(Error::UnexpectedReply(b[..n].escape_ascii().to_string())),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::from_io(e)),
            }
        }
    }

    // ---- helpers for Commands ---------------------------------------------------

    fn store(
        &mut self,
        cmd: StoreCmd,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: i64,
        cas_unique: u64,
    ) -> Result<Response> {
        self.wire.call(Expect::Status, |out| {
            request::store(out, cmd, key, value, flags, exptime, cas_unique, false)
        })
    }

    fn arith(&mut self, key: &[u8], incr: bool, delta: u64) -> Result<Option<u64>> {
        match self.wire.call(Expect::Status, |out| {
            request::arith(out, key, incr, delta, false)
        })? {
            Response::Number(n) => Ok(Some(n)),
            Response::NotFound => Ok(None),
            r => unexpected(r),
        }
    }
}

impl Commands for Connection {
    type Answer<'a, T>
        = Result<T>
    where
        Self: 'a,
        T: 'a;

    /// `get <key>`.
    fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Item>> {
        let key = key.as_ref();
        first(
            self.wire
                .call(Expect::Values, |out| request::get(out, &[key], false))?,
        )
    }

    /// `get <key>*`: the hits, in request order. No keys: no request.
    fn get_multi<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Item>> {
        self.multi(keys, |out| request::get(out, keys, false))
    }

    /// `gets <key>`: the item with its CAS unique.
    fn gets(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Item>> {
        let key = key.as_ref();
        first(
            self.wire
                .call(Expect::Values, |out| request::get(out, &[key], true))?,
        )
    }

    /// `gets <key>*`.
    fn gets_multi<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Item>> {
        self.multi(keys, |out| request::get(out, keys, true))
    }

    /// `gat <exptime> <key>`: get and touch.
    fn gat(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> Result<Option<Item>> {
        let key = key.as_ref();
        first(self.wire.call(Expect::Values, |out| {
            request::gat(out, exptime, &[key], false)
        })?)
    }

    /// `gats <exptime> <key>`: get and touch, with the CAS unique.
    fn gats(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> Result<Option<Item>> {
        let key = key.as_ref();
        first(self.wire.call(Expect::Values, |out| {
            request::gat(out, exptime, &[key], true)
        })?)
    }

    /// `set`: store unconditionally.
    fn set(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Result<()> {
        let r = self.store(
            StoreCmd::Set,
            key.as_ref(),
            value.as_ref(),
            flags,
            exptime,
            0,
        )?;
        match r {
            Response::Stored => Ok(()),
            r => unexpected(r),
        }
    }

    /// `add`: store only if absent. `false`: it was there (`NOT_STORED`).
    fn add(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Result<bool> {
        stored(self.store(
            StoreCmd::Add,
            key.as_ref(),
            value.as_ref(),
            flags,
            exptime,
            0,
        )?)
    }

    /// `replace`: store only if present. `false`: it was absent.
    fn replace(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Result<bool> {
        let r = self.store(
            StoreCmd::Replace,
            key.as_ref(),
            value.as_ref(),
            flags,
            exptime,
            0,
        )?;
        stored(r)
    }

    /// `append`: add bytes after an existing value (flags and exptime are ignored
    /// by the server). `false`: the key was absent.
    fn append(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<bool> {
        stored(self.store(StoreCmd::Append, key.as_ref(), value.as_ref(), 0, 0, 0)?)
    }

    /// `prepend`: add bytes before an existing value. `false`: the key was absent.
    fn prepend(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<bool> {
        stored(self.store(StoreCmd::Prepend, key.as_ref(), value.as_ref(), 0, 0, 0)?)
    }

    /// `cas`: store if the item's CAS unique is still `cas_unique` (from `gets`).
    fn cas(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
        cas_unique: u64,
    ) -> Result<CasOutcome> {
        let (key, value) = (key.as_ref(), value.as_ref());
        match self.store(StoreCmd::Cas, key, value, flags, exptime, cas_unique)? {
            Response::Stored => Ok(CasOutcome::Stored),
            Response::Exists => Ok(CasOutcome::Exists),
            Response::NotFound => Ok(CasOutcome::NotFound),
            r => unexpected(r),
        }
    }

    /// `delete`: `false` when the key was absent.
    fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        match self
            .wire
            .call(Expect::Status, |out| request::delete(out, key, false))?
        {
            Response::Deleted => Ok(true),
            Response::NotFound => Ok(false),
            r => unexpected(r),
        }
    }

    /// `incr`: the new value (wrapping at 2^64), `None` when the key is absent.
    /// A value that is not a decimal number: [`Error::ClientError`].
    fn incr(&mut self, key: impl AsRef<[u8]>, delta: u64) -> Result<Option<u64>> {
        self.arith(key.as_ref(), true, delta)
    }

    /// `decr`: the new value (never below 0), `None` when the key is absent.
    fn decr(&mut self, key: impl AsRef<[u8]>, delta: u64) -> Result<Option<u64>> {
        self.arith(key.as_ref(), false, delta)
    }

    /// `touch`: a new exptime. `false` when the key was absent.
    fn touch(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> Result<bool> {
        let key = key.as_ref();
        match self.wire.call(Expect::Status, |out| {
            request::touch(out, key, exptime, false)
        })? {
            Response::Touched => Ok(true),
            Response::NotFound => Ok(false),
            r => unexpected(r),
        }
    }

    /// `flush_all [delay]`: invalidate every item now, or `delay` seconds from now.
    fn flush_all(&mut self, delay: Option<i64>) -> Result<()> {
        ok(self.wire.call(Expect::Status, |out| {
            encode::flush_all(out, delay, false);
            Ok(())
        })?)
    }
}

fn first(r: Response) -> Result<Option<Item>> {
    match r {
        Response::Values(items) => Ok(items.into_iter().next()),
        r => unexpected(r),
    }
}

fn stored(r: Response) -> Result<bool> {
    match r {
        Response::Stored => Ok(true),
        Response::NotStored => Ok(false),
        r => unexpected(r),
    }
}

fn ok(r: Response) -> Result<()> {
    match r {
        Response::Ok => Ok(()),
        r => unexpected(r),
    }
}

fn unexpected<T>(r: Response) -> Result<T> {
    Err(Error::UnexpectedReply(r.to_string()))
}
