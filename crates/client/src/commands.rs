//! [`Commands`]: the keyed classic commands, with one signature for every face of
//! the client that answers them.
//!
//! A [`Connection`](crate::Connection) and a [`Cluster`](crate::Cluster) answer at
//! once (`Result<T>`); a [`Pipeline`](crate::Pipeline) queues the request and
//! answers itself, so that calls chain, and gives every reply at `execute`. Code
//! written against `Commands` issues the same requests to any of the three.

use crate::reply::{CasOutcome, Item};

/// The keyed classic commands (`doc/protocol.txt`) and `flush_all`.
///
/// Keys are any `AsRef<[u8]>` and are checked before anything is sent
/// ([`crate::check_key`]). `exptime` is memcached's: seconds from now up to 30 days,
/// a unix time beyond that, 0 for never, negative for already expired.
///
/// What a call gives back is [`Commands::Answer`] of the command's typed result:
/// for a connection or a cluster, [`Result<T>`](crate::Result) (a typed result, or
/// the error); for a
/// pipeline, the pipeline itself (the [`Response`](crate::Response) comes from
/// `execute`).
pub trait Commands {
    /// What a call returns for a command whose typed result is `T`.
    type Answer<'a, T>
    where
        Self: 'a,
        T: 'a;

    /// `get <key>`: the item, `None` on a miss.
    fn get(&mut self, key: impl AsRef<[u8]>) -> Self::Answer<'_, Option<Item>>;

    /// `gets <key>`: the item with its CAS unique.
    fn gets(&mut self, key: impl AsRef<[u8]>) -> Self::Answer<'_, Option<Item>>;

    /// `gat <exptime> <key>`: get and touch.
    fn gat(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> Self::Answer<'_, Option<Item>>;

    /// `gats <exptime> <key>`: get and touch, with the CAS unique.
    fn gats(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> Self::Answer<'_, Option<Item>>;

    /// `get <key>*`: the hits. No keys: no request.
    fn get_multi<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Self::Answer<'_, Vec<Item>>;

    /// `gets <key>*`.
    fn gets_multi<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Self::Answer<'_, Vec<Item>>;

    /// `set`: store unconditionally.
    fn set(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Self::Answer<'_, ()>;

    /// `add`: store only if absent. `false`: it was there (`NOT_STORED`).
    fn add(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Self::Answer<'_, bool>;

    /// `replace`: store only if present. `false`: it was absent.
    fn replace(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
    ) -> Self::Answer<'_, bool>;

    /// `append`: add bytes after an existing value (flags and exptime are ignored
    /// by the server). `false`: the key was absent.
    fn append(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Self::Answer<'_, bool>;

    /// `prepend`: add bytes before an existing value. `false`: the key was absent.
    fn prepend(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>)
        -> Self::Answer<'_, bool>;

    /// `cas`: store if the item's CAS unique is still `cas_unique` (from `gets`).
    fn cas(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: i64,
        cas_unique: u64,
    ) -> Self::Answer<'_, CasOutcome>;

    /// `delete`: `false` when the key was absent.
    fn delete(&mut self, key: impl AsRef<[u8]>) -> Self::Answer<'_, bool>;

    /// `incr`: the new value (wrapping at 2^64), `None` when the key is absent.
    /// A value that is not a decimal number: [`Error::ClientError`](crate::Error).
    fn incr(&mut self, key: impl AsRef<[u8]>, delta: u64) -> Self::Answer<'_, Option<u64>>;

    /// `decr`: the new value (never below 0), `None` when the key is absent.
    fn decr(&mut self, key: impl AsRef<[u8]>, delta: u64) -> Self::Answer<'_, Option<u64>>;

    /// `touch`: a new exptime. `false` when the key was absent.
    fn touch(&mut self, key: impl AsRef<[u8]>, exptime: i64) -> Self::Answer<'_, bool>;

    /// `flush_all [delay]`: invalidate every item now, or `delay` seconds from now.
    fn flush_all(&mut self, delay: Option<i64>) -> Self::Answer<'_, ()>;
}
