//! `watch`: memcached's live log streams (`logger.c`, `logger.h` and
//! `process_watch_command` of memcached 1.6.45). What a `watch` line asks for
//! ([`parse_events`], the `LOG_*` bits below) and the log lines, one writer per event
//! type, byte for byte as memcached's `_logger_parse_*` functions print them.
//!
//! A line is [`prefix`] (`ts=<seconds>.<microseconds> gid=<n> `) followed by one of
//! the event writers, each of which ends the line with a bare `\n` (only the `OK`
//! that starts a stream has `\r\n`). Keys are URI-encoded as memcached's `uriencode`.
//!
//! ```text
//!   OK\r\n
//!   ts=1700000000.123 gid=2 type=item_get key=foo status=found clsid=1 cfd=23 size=3\n
//!   skipped=12\n
//! ```
//!
//! `deletions` (`type=deleted`) is memcached 1.6.20's; 1.6.18 answers `ERROR` to it.
//!
//! Imports only [`super::reply`] (for `uriencode`) and `request.rs` (the storage
//! command names).

use std::net::SocketAddr;

use super::reply::uriencode;
use super::request::StoreCmd;

/// `sysevents`: crawler and slab mover reports (memcrab has neither; none are sent).
pub const SYSEVENTS: u16 = 1 << 1;
/// `fetchers`: `type=item_get`, every lookup of a key.
pub const FETCHERS: u16 = 1 << 2;
/// `mutations`: `type=item_store`, every storage request.
pub const MUTATIONS: u16 = 1 << 3;
/// `connevents`: `type=conn_new` and `type=conn_close`.
pub const CONNEVENTS: u16 = 1 << 5;
/// `evictions`: `type=eviction`, a live item dropped to make room.
pub const EVICTIONS: u16 = 1 << 6;
/// `rawcmds`: accepted; memcached 1.6.18 logs nothing under it either.
pub const RAWCMDS: u16 = 1 << 9;
/// `proxyreqs`, `proxyevents`, `proxyuser`: accepted; memcached's proxy only.
pub const PROXYREQS: u16 = 1 << 10;
pub const PROXYEVENTS: u16 = 1 << 11;
pub const PROXYUSER: u16 = 1 << 12;
/// `deletions` (memcached 1.6.20): `type=deleted`, an item removed by `delete`/`md`.
pub const DELETIONS: u16 = 1 << 13;
/// `slowlog` (memcrab's own): `type=slow`, a request slower than `-o slowlog_us`,
/// as it enters the slow log.
pub const SLOWLOG: u16 = 1 << 14;

/// The event types named after `watch` (the tokens after the command), as
/// memcached 1.6.45's `process_watch_command`: each must be one of the names or a
/// prefix of one (`strncmp` over the token's length; the first name in memcached's
/// order wins), and none means `fetchers`. `None` when one is not (memcached answers
/// `ERROR`).
pub fn parse_events(args: &[&[u8]]) -> Option<u16> {
    const NAMES: [(&[u8], u16); 11] = [
        (b"rawcmds", RAWCMDS),
        (b"evictions", EVICTIONS),
        (b"fetchers", FETCHERS),
        (b"mutations", MUTATIONS),
        (b"sysevents", SYSEVENTS),
        (b"connevents", CONNEVENTS),
        (b"proxyreqs", PROXYREQS),
        (b"proxyevents", PROXYEVENTS),
        (b"proxyuser", PROXYUSER),
        (b"deletions", DELETIONS),
        (b"slowlog", SLOWLOG),
    ];
    if args.is_empty() {
        return Some(FETCHERS);
    }
    let mut events = 0;
    for arg in args {
        let (_, bit) = NAMES
            .iter()
            .find(|(name, _)| !arg.is_empty() && name.starts_with(arg))?;
        events |= bit;
    }
    Some(events)
}

/// The reply to `watch` when `-W` (`--disable-watch`) is set.
pub const DISABLED: &[u8] = b"CLIENT_ERROR watch commands not allowed\r\n";
/// The reply to `watch` after other requests whose replies are not yet sent.
pub const CANNOT_PIPELINE: &[u8] = b"ERROR cannot pipeline other commands before watch\r\n";
/// The reply when memcached's 20 watchers are already connected.
pub const TOO_MANY: &[u8] = b"WATCHER_TOO_MANY log watcher limit reached\r\n";
/// The reply when a watcher cannot be set up.
pub const FAILED: &[u8] = b"WATCHER_FAILED failed to add log watcher\r\n";
/// The first line of a stream.
pub const OK: &[u8] = b"OK\r\n";

/// `ts=<seconds>.<microseconds> gid=<n> `: the start of every event line. memcached
/// prints the microseconds with `%d`, without leading zeros (`ts=1700000000.4521`
/// is 4521 µs past the second).
pub fn prefix(out: &mut Vec<u8>, secs: u64, micros: u32, gid: u64) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b"ts=");
    out.extend_from_slice(b.format(secs).as_bytes());
    out.push(b'.');
    out.extend_from_slice(b.format(micros).as_bytes());
    field(out, b" gid=", gid);
    out.push(b' ');
}

/// `skipped=<n>\n`: lines a watcher lost because it fell behind, written before the
/// next line it gets.
pub fn skipped(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(b"skipped=");
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.push(b'\n');
}

/// What a lookup found (`item_get`'s `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetStatus {
    NotFound,
    Found,
    Flushed,
    Expired,
}

/// `type=item_get key=<key> status=<status> clsid=<class> cfd=<fd> size=<value
/// bytes>\n` (`_logger_parse_ige`). memcached prints class 0 and size 0 for
/// anything but `found`.
pub fn item_get(
    out: &mut Vec<u8>,
    key: &[u8],
    status: GetStatus,
    clsid: u32,
    cfd: i32,
    size: usize,
) {
    out.extend_from_slice(b"type=item_get key=");
    uriencode(out, key);
    out.extend_from_slice(match status {
        GetStatus::NotFound => b" status=not_found",
        GetStatus::Found => b" status=found",
        GetStatus::Flushed => b" status=flushed",
        GetStatus::Expired => b" status=expired",
    });
    class_fd_size(out, clsid, cfd, size);
}

/// The result of a storage request (`item_store`'s `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreStatus {
    NotStored,
    Stored,
    Exists,
    NotFound,
    TooLarge,
    NoMemory,
}

/// `type=item_store key=<key> status=<status> cmd=<command> ttl=<seconds left>
/// clsid=<class> cfd=<fd> size=<value bytes>\n` (`_logger_parse_ise`). `cmd` is `None`
/// for memcached's `null` (a binary store refused before its command was known);
/// `ttl` is printed unsigned, as memcached's `%u` (0 for no expiry).
#[allow(clippy::too_many_arguments)]
pub fn item_store(
    out: &mut Vec<u8>,
    key: &[u8],
    status: StoreStatus,
    cmd: Option<StoreCmd>,
    ttl: u32,
    clsid: u32,
    cfd: i32,
    size: usize,
) {
    out.extend_from_slice(b"type=item_store key=");
    uriencode(out, key);
    out.extend_from_slice(match status {
        StoreStatus::NotStored => b" status=not_stored",
        StoreStatus::Stored => b" status=stored",
        StoreStatus::Exists => b" status=exists",
        StoreStatus::NotFound => b" status=not_found",
        StoreStatus::TooLarge => b" status=too_large",
        StoreStatus::NoMemory => b" status=no_memory",
    });
    out.extend_from_slice(match cmd {
        None => b" cmd=null",
        Some(StoreCmd::Add) => b" cmd=add",
        Some(StoreCmd::Set) => b" cmd=set",
        Some(StoreCmd::Replace) => b" cmd=replace",
        Some(StoreCmd::Append) => b" cmd=append",
        Some(StoreCmd::Prepend) => b" cmd=prepend",
        Some(StoreCmd::Cas) => b" cmd=cas",
    });
    field(out, b" ttl=", ttl);
    class_fd_size(out, clsid, cfd, size);
}

/// Appends ` name=<number>`.
fn field(out: &mut Vec<u8>, name: &[u8], v: impl itoa::Integer) {
    out.extend_from_slice(name);
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// ` clsid=<class> cfd=<fd> size=<bytes>\n`, the end of `item_get` and `item_store`.
fn class_fd_size(out: &mut Vec<u8>, clsid: u32, cfd: i32, size: usize) {
    field(out, b" clsid=", clsid);
    field(out, b" cfd=", cfd);
    field(out, b" size=", size);
    out.push(b'\n');
}

/// `type=eviction key=<key> fetch=yes|no ttl=<seconds left, -1 for none> la=<seconds
/// since last access> clsid=<class> size=<value bytes>\n` (`_logger_parse_ee`).
pub fn eviction(
    out: &mut Vec<u8>,
    key: &[u8],
    fetched: bool,
    ttl: i64,
    la: i32,
    clsid: u32,
    size: usize,
) {
    out.extend_from_slice(b"type=eviction key=");
    uriencode(out, key);
    out.extend_from_slice(if fetched { b" fetch=yes" } else { b" fetch=no" });
    field(out, b" ttl=", ttl);
    field(out, b" la=", la);
    field(out, b" clsid=", clsid);
    field(out, b" size=", size);
    out.push(b'\n');
}

/// Which command removed an item (`deleted`'s `cmd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteCmd {
    /// Text `delete`.
    Delete,
    /// Meta `md` (without `I`).
    Md,
}

/// `type=deleted key=<key> cmd=delete|md clsid=<class> size=<value bytes>\n`
/// (`_logger_parse_ide`, memcached 1.6.20).
pub fn deleted(out: &mut Vec<u8>, key: &[u8], cmd: DeleteCmd, clsid: u32, size: usize) {
    out.extend_from_slice(b"type=deleted key=");
    uriencode(out, key);
    out.extend_from_slice(match cmd {
        DeleteCmd::Delete => b" cmd=delete",
        DeleteCmd::Md => b" cmd=md",
    });
    field(out, b" clsid=", clsid);
    field(out, b" size=", size);
    out.push(b'\n');
}

/// `type=slow id=<n> cmd=<series> key=<key> us=<microseconds> client=<client>
/// cfd=<fd>\n`: a slow log entry (memcrab's own event). `cmd` is the request's
/// latency series (`text_get_hit`, `meta_set`, ...), `client` as `stats conns`
/// names it; an empty key (a request without one) prints as `key=`.
pub fn slow(
    out: &mut Vec<u8>,
    id: u64,
    cmd: &str,
    key: &[u8],
    micros: u64,
    client: &str,
    cfd: i32,
) {
    field(out, b"type=slow id=", id);
    out.extend_from_slice(b" cmd=");
    out.extend_from_slice(cmd.as_bytes());
    out.extend_from_slice(b" key=");
    uriencode(out, key);
    field(out, b" us=", micros);
    out.extend_from_slice(b" client=");
    out.extend_from_slice(client.as_bytes());
    field(out, b" cfd=", cfd);
    out.push(b'\n');
}

/// A connection's transport as the connection events name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A unix socket.
    Local,
    Tcp,
    Udp,
}

/// Why a connection closed (`conn_close`'s `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Anything but the three below (a protocol error, an I/O error, a watcher).
    Error,
    /// The client closed its side, or sent `quit`.
    Normal,
    /// `-o idle_timeout`.
    IdleTimeout,
    /// The `shutdown` command.
    Shutdown,
}

/// `type=conn_new rip=<peer ip> rport=<peer port> transport=<t> cfd=<fd>\n`
/// (`_logger_parse_cne`); a unix socket peer (`None`) is `rip=unix rport=0`.
pub fn conn_new(out: &mut Vec<u8>, peer: Option<SocketAddr>, transport: Transport, cfd: i32) {
    out.extend_from_slice(b"type=conn_new");
    endpoint(out, peer, transport);
    out.extend_from_slice(b" cfd=");
    out.extend_from_slice(itoa::Buffer::new().format(cfd).as_bytes());
    out.push(b'\n');
}

/// `type=conn_close rip=<peer ip> rport=<peer port> transport=<t> reason=<why>
/// cfd=<fd>\n` (`_logger_parse_cce`).
pub fn conn_close(
    out: &mut Vec<u8>,
    peer: Option<SocketAddr>,
    transport: Transport,
    reason: CloseReason,
    cfd: i32,
) {
    out.extend_from_slice(b"type=conn_close");
    endpoint(out, peer, transport);
    out.extend_from_slice(match reason {
        CloseReason::Error => b" reason=error",
        CloseReason::Normal => b" reason=normal",
        CloseReason::IdleTimeout => b" reason=idle_timeout",
        CloseReason::Shutdown => b" reason=shutdown",
    });
    out.extend_from_slice(b" cfd=");
    out.extend_from_slice(itoa::Buffer::new().format(cfd).as_bytes());
    out.push(b'\n');
}

/// ` rip=<ip> rport=<port> transport=<t>` (`_logger_util_addr_endpoint`).
fn endpoint(out: &mut Vec<u8>, peer: Option<SocketAddr>, transport: Transport) {
    use std::io::Write;
    // Writing to a Vec cannot fail.
    let _ = match peer {
        Some(a) => write!(out, " rip={} rport={}", a.ip(), a.port()),
        None => write!(out, " rip=unix rport=0"),
    };
    out.extend_from_slice(match transport {
        Transport::Local => b" transport=local",
        Transport::Tcp => b" transport=tcp",
        Transport::Udp => b" transport=udp",
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events() {
        assert_eq!(parse_events(&[]), Some(FETCHERS));
        assert_eq!(
            parse_events(&[b"mutations", b"evictions", b"mutations"]),
            Some(MUTATIONS | EVICTIONS)
        );
        assert_eq!(parse_events(&[b"fetchers", b"Fetchers"]), None);
        assert_eq!(parse_events(&[b"noreply"]), None);
        assert_eq!(parse_events(&[b"deletions"]), Some(DELETIONS));
        assert_eq!(
            parse_events(&[b"slowlog", b"fetchers"]),
            Some(SLOWLOG | FETCHERS)
        );
    }

    #[test]
    fn lines_as_memcached_prints_them() {
        // Lines from memcached 1.6.18 (deleted: 1.6.20's format).
        let mut out = Vec::new();
        prefix(&mut out, 1795479025, 11303, 27);
        item_get(&mut out, b"foo", GetStatus::NotFound, 0, 26, 0);
        prefix(&mut out, 1795479025, 313206, 35);
        item_store(
            &mut out,
            b"k%20",
            StoreStatus::Stored,
            Some(StoreCmd::Set),
            0,
            1,
            26,
            1,
        );
        eviction(&mut out, b"\xc3\xa9\x01", true, -1, 3, 1, 100);
        conn_new(&mut out, "127.0.0.1:52094".parse().ok(), Transport::Tcp, 26);
        conn_close(
            &mut out,
            "[::1]:7".parse().ok(),
            Transport::Tcp,
            CloseReason::IdleTimeout,
            9,
        );
        conn_close(&mut out, None, Transport::Local, CloseReason::Normal, 9);
        deleted(&mut out, b"a b", DeleteCmd::Md, 1, 5);
        skipped(&mut out, 12);
        slow(
            &mut out,
            7,
            "text_get_hit",
            b"a/b",
            1500,
            "tcp:127.0.0.1:9",
            12,
        );
        assert_eq!(
            String::from_utf8_lossy(&out),
            "ts=1795479025.11303 gid=27 type=item_get key=foo status=not_found clsid=0 \
             cfd=26 size=0\n\
             ts=1795479025.313206 gid=35 type=item_store key=k%2520 status=stored cmd=set \
             ttl=0 clsid=1 cfd=26 size=1\n\
             type=eviction key=%C3%A9%01 fetch=yes ttl=-1 la=3 clsid=1 size=100\n\
             type=conn_new rip=127.0.0.1 rport=52094 transport=tcp cfd=26\n\
             type=conn_close rip=::1 rport=7 transport=tcp reason=idle_timeout cfd=9\n\
             type=conn_close rip=unix rport=0 transport=local reason=normal cfd=9\n\
             type=deleted key=a%20b cmd=md clsid=1 size=5\n\
             skipped=12\n\
             type=slow id=7 cmd=text_get_hit key=a%2Fb us=1500 client=tcp:127.0.0.1:9 cfd=12\n"
        );
    }
}
