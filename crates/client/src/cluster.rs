//! Several servers behind one handle: each key goes to the server ketama picks.
//!
//! ```text
//!   cluster.set("k", ..) ── Ring::server_for("k") = 2 ──► connection 2 (opened lazily)
//!   cluster.get_multi(keys) ── group keys by server ──► send each group's `get`
//!                                                      then read each reply
//! ```
//!
//! Connections open on first use; one that broke (timeout, I/O) is replaced on the
//! next use of that server. There is no failover: a key whose server is down fails,
//! as with libmemcached without `MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS`.

use crate::addr::{Options, ServerAddr};
use crate::commands::Commands;
use crate::conn::Connection;
use crate::error::{check_key, Error, Result};
use crate::ketama::Ring;
use crate::reply::{CasOutcome, Item, Response};
use crate::request::{self, Expect};

/// A ketama-routed set of servers, one lazily opened connection each.
#[derive(Debug)]
pub struct Cluster {
    servers: Vec<ServerAddr>,
    ring: Ring,
    opts: Options,
    conns: Vec<Option<Connection>>,
}

impl Cluster {
    /// Servers as text (see [`ServerAddr`]), all of weight 1. Connects to none yet.
    pub fn new(servers: &[&str], opts: &Options) -> Result<Cluster> {
        let addrs = servers
            .iter()
            .map(|s| s.parse().map(|a| (a, 1)))
            .collect::<Result<Vec<_>>>()?;
        Cluster::weighted(addrs, opts)
    }

    /// Parsed servers with ketama weights.
    pub fn weighted(servers: Vec<(ServerAddr, u32)>, opts: &Options) -> Result<Cluster> {
        let ring = Ring::weighted(servers.iter().map(|(a, w)| (a, *w)))?;
        let servers: Vec<ServerAddr> = servers.into_iter().map(|(a, _)| a).collect();
        let conns = servers.iter().map(|_| None).collect();
        Ok(Cluster {
            servers,
            ring,
            opts: opts.clone(),
            conns,
        })
    }

    pub fn servers(&self) -> &[ServerAddr] {
        &self.servers
    }

    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// The index of the server that owns `key`.
    pub fn server_for(&self, key: impl AsRef<[u8]>) -> usize {
        self.ring.server_for(key.as_ref())
    }

    /// The connection to server `index`, opened (or reopened after a fatal error)
    /// as needed. For commands without a key: `cluster.connection(i)?.stats(None)`.
    pub fn connection(&mut self, index: usize) -> Result<&mut Connection> {
        let addr = self
            .servers
            .get(index)
            .ok_or_else(|| Error::InvalidArgument(format!("no server {index}")))?;
        let slot = &mut self.conns[index];
        if !matches!(slot, Some(c) if !c.is_broken()) {
            *slot = None;
            *slot = Some(Connection::open(addr, &self.opts)?);
        }
        slot.as_mut().ok_or(Error::Broken)
    }

    /// The connection to the server that owns `key` (checked first, so a bad key
    /// opens nothing).
    pub fn connection_for(&mut self, key: impl AsRef<[u8]>) -> Result<&mut Connection> {
        let key = key.as_ref();
        check_key(key)?;
        self.connection(self.ring.server_for(key))
    }

    fn multi<K: AsRef<[u8]>>(&mut self, keys: &[K], cas: bool) -> Result<Vec<Item>> {
        for k in keys {
            check_key(k.as_ref())?;
        }
        let mut groups: Vec<Vec<&[u8]>> = vec![Vec::new(); self.servers.len()];
        for k in keys {
            groups[self.ring.server_for(k.as_ref())].push(k.as_ref());
        }
        let mut first_err = None;
        let mut sent = Vec::new();
        for (i, group) in groups.iter().enumerate() {
            if group.is_empty() {
                continue;
            }
            let r = self
                .connection(i)
                .and_then(|c| c.wire().send(|out| request::get(out, group, cas)));
            match r {
                Ok(()) => sent.push(i),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        // Every sent request is read, even after a failure elsewhere, so that no
        // reply is left behind for the next request on that connection.
        let mut items = Vec::new();
        for i in sent {
            let Some(conn) = self.conns[i].as_mut() else {
                continue;
            };
            match conn.wire().recv(Expect::Values) {
                Ok(Response::Values(v)) => items.extend(v),
                Ok(r) => {
                    first_err.get_or_insert(Error::UnexpectedReply(r.to_string()));
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(items),
        }
    }
}

impl Commands for Cluster {
    type Answer<'a, T>
        = Result<T>
    where
        Self: 'a,
        T: 'a;

    fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Item>> {
        let key = key.as_ref();
        self.connection_for(key)?.get(key)
    }

    fn gets(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Item>> {
        let key = key.as_ref();
        self.connection_for(key)?.gets(key)
    }

    fn gat(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> Result<Option<Item>> {
        let key = key.as_ref();
        self.connection_for(key)?.gat(key, exptime)
    }

    fn gats(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> Result<Option<Item>> {
        let key = key.as_ref();
        self.connection_for(key)?.gats(key, exptime)
    }

    fn set(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Result<()> {
        let key = key.as_ref();
        self.connection_for(key)?.set(key, value, flags, exptime)
    }

    fn add(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Result<bool> {
        let key = key.as_ref();
        self.connection_for(key)?.add(key, value, flags, exptime)
    }

    fn replace(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Result<bool> {
        let key = key.as_ref();
        self.connection_for(key)?
            .replace(key, value, flags, exptime)
    }

    fn append(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        self.connection_for(key)?.append(key, value)
    }

    fn prepend(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        self.connection_for(key)?.prepend(key, value)
    }

    fn cas(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
        cas_unique: u64,
    ) -> Result<CasOutcome> {
        let key = key.as_ref();
        self.connection_for(key)?
            .cas(key, value, flags, exptime, cas_unique)
    }

    fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        self.connection_for(key)?.delete(key)
    }

    fn incr(&mut self, key: impl AsRef<[u8]>, delta: u64) -> Result<Option<u64>> {
        let key = key.as_ref();
        self.connection_for(key)?.incr(key, delta)
    }

    fn decr(&mut self, key: impl AsRef<[u8]>, delta: u64) -> Result<Option<u64>> {
        let key = key.as_ref();
        self.connection_for(key)?.decr(key, delta)
    }

    fn touch(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> Result<bool> {
        let key = key.as_ref();
        self.connection_for(key)?.touch(key, exptime)
    }

    /// `get` of many keys across servers: each server's keys go out in one request,
    /// all requests are sent before any reply is read (one round trip). The hits,
    /// grouped by server. Any server's failure fails the call.
    fn get_multi<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Item>> {
        self.multi(keys, false)
    }

    /// `gets` of many keys across servers; see [`Cluster::get_multi`].
    fn gets_multi<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Item>> {
        self.multi(keys, true)
    }

    /// `flush_all [delay]` on every server; the first error, after trying all.
    fn flush_all(&mut self, delay: Option<i64>) -> Result<()> {
        let mut first_err = None;
        for i in 0..self.servers.len() {
            if let Err(e) = self.connection(i).and_then(|c| c.flush_all(delay)) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}
