//! Checked request encoding, shared by [`Connection`](crate::Connection), its
//! `noreply` form and [`Pipeline`](crate::Pipeline).
//!
//! Every function checks its arguments first and appends to `out` only when they
//! are all good, so a refused request leaves the write buffer as it was (a pipeline
//! keeps the requests queued before it). The bytes come from memcrab-proto's
//! encoders.

use memcrab_proto::text::client::encode;
use memcrab_proto::text::StoreCmd;

use crate::error::{check_key, Error, Result};

/// The shape of the reply a request gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// `VALUE` blocks, then `END`.
    Values,
    /// `STAT` (or other) lines, then `END`; or one `RESET`/`OK` line.
    Stats,
    /// One status line.
    Status,
}

pub(crate) fn get<K: AsRef<[u8]>>(out: &mut Vec<u8>, keys: &[K], cas: bool) -> Result<()> {
    check_keys(keys)?;
    encode::get(out, keys.iter().map(|k| k.as_ref()), cas);
    Ok(())
}

pub(crate) fn gat<K: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    exptime: i64,
    keys: &[K],
    cas: bool,
) -> Result<()> {
    check_keys(keys)?;
    encode::gat(out, exptime, keys.iter().map(|k| k.as_ref()), cas);
    Ok(())
}

/// A storage command; `cas_unique` is sent by `cas` only.
#[allow(clippy::too_many_arguments)]
pub(crate) fn store(
    out: &mut Vec<u8>,
    cmd: StoreCmd,
    key: &[u8],
    value: &[u8],
    flags: u32,
    exptime: i64,
    cas_unique: u64,
    noreply: bool,
) -> Result<()> {
    check_key(key)?;
    encode::store(out, cmd, key, flags, exptime, value, cas_unique, noreply);
    Ok(())
}

pub(crate) fn delete(out: &mut Vec<u8>, key: &[u8], noreply: bool) -> Result<()> {
    check_key(key)?;
    encode::delete(out, key, noreply);
    Ok(())
}

pub(crate) fn arith(
    out: &mut Vec<u8>,
    key: &[u8],
    incr: bool,
    delta: u64,
    noreply: bool,
) -> Result<()> {
    check_key(key)?;
    encode::arith(out, key, incr, delta, noreply);
    Ok(())
}

pub(crate) fn touch(out: &mut Vec<u8>, key: &[u8], exptime: i64, noreply: bool) -> Result<()> {
    check_key(key)?;
    encode::touch(out, key, exptime, noreply);
    Ok(())
}

pub(crate) fn stats(out: &mut Vec<u8>, args: Option<&str>) -> Result<()> {
    if let Some(a) = args {
        // Spaces separate arguments (`stats cachedump 1 10`); a control character
        // would end or corrupt the line.
        if a.trim().is_empty() || a.bytes().any(|b| b < b' ' || b == 0x7f) {
            return Err(Error::InvalidArgument(format!("stats arguments {a:?}")));
        }
    }
    encode::stats(out, args.map(str::as_bytes));
    Ok(())
}

fn check_keys<K: AsRef<[u8]>>(keys: &[K]) -> Result<()> {
    if keys.is_empty() {
        return Err(Error::InvalidArgument(
            "a get needs at least one key".into(),
        ));
    }
    for k in keys {
        check_key(k.as_ref())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_requests_leave_the_buffer_alone() {
        let mut out = b"queued\r\n".to_vec();
        assert!(get(&mut out, &["ok", "bad key"], false).is_err());
        assert!(get::<&str>(&mut out, &[], false).is_err());
        assert!(gat(&mut out, 1, &[""], true).is_err());
        assert!(store(&mut out, StoreCmd::Set, b"a\nb", b"v", 0, 0, 0, false).is_err());
        assert!(delete(&mut out, &[b'k'; 251], false).is_err());
        assert!(arith(&mut out, b"", true, 1, false).is_err());
        assert!(touch(&mut out, b"\0", 1, false).is_err());
        assert!(stats(&mut out, Some("items\r\nflush_all")).is_err());
        assert!(stats(&mut out, Some(" ")).is_err());
        assert_eq!(out, b"queued\r\n");
    }

    #[test]
    fn encodes() {
        let mut out = Vec::new();
        get(&mut out, &["a", "b"], true).expect("valid");
        gat(&mut out, -1, &[b"c".as_slice()], false).expect("valid");
        store(&mut out, StoreCmd::Cas, b"k", b"v", 3, 10, 99, true).expect("valid");
        stats(&mut out, Some("slabs")).expect("valid");
        stats(&mut out, None).expect("valid");
        assert_eq!(
            out,
            b"gets a b\r\ngat -1 c\r\ncas k 3 10 1 99 noreply\r\nv\r\nstats slabs\r\nstats\r\n"
        );
    }
}
