//! The admin commands every protocol shares or the text protocol adds: `flush_all`
//! (and binary FLUSH), `shutdown`, `verbosity`, `cache_memlimit`, `refresh_certs`,
//! and `watch`'s checks (`process_watch_command` up to `logger_add_watcher`; the
//! transport runs the stream, `crate::admin::watch`). Each acts and counts once and
//! returns what happened; the executors encode it. (`stats` is written by
//! `crate::admin::stats`; `lru_crawler`, `slabs` and `lru` are in [`super::lru`].)

use std::sync::atomic::Ordering;

use crate::server::Ctx;
use memcrab_proto::text::watch as watch_reply;
use memcrab_proto::text::{reply, ShutdownMode};

/// memcached's `MAX_VERBOSITY_LEVEL`.
const MAX_VERBOSITY_LEVEL: u32 = 2;

/// memcached's `cache_memlimit` bounds, in megabytes.
const MEMLIMIT_MIN_MB: u32 = 8;
const MEMLIMIT_MAX_MB: u32 = 1_000_000_000;

/// `flush_all [delay]`: invalidates every item now, or `delay` seconds from now.
/// Returns `false` when `-F` refuses it. memcached's text `flush_all` counts
/// `cmd_flush` before it checks `-F` (`counts_refused`); its binary FLUSH only once
/// allowed.
pub fn flush_all(cx: &Ctx<'_>, delay: i64, counts_refused: bool) -> bool {
    let allowed = cx.server.settings.flush_enabled;
    if allowed || counts_refused {
        cx.counters.cmd_flush.incr();
    }
    if !allowed {
        return false;
    }
    let at = (delay > 0).then(|| cx.engine.clock().realtime(delay));
    cx.engine.flush_all(at);
    true
}

/// `verbosity <level>`, capped at memcached's highest level.
pub fn verbosity(cx: &Ctx<'_>, level: u32) {
    cx.server
        .verbosity
        .store(level.min(MAX_VERBOSITY_LEVEL), Ordering::Relaxed);
}

/// Why `cache_memlimit` refused a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemLimitRefused {
    TooSmall,
    NotMegabytes,
}

/// `cache_memlimit <megabytes>`: the engine's new memory limit.
pub fn cache_memlimit(cx: &Ctx<'_>, megabytes: u32) -> Result<(), MemLimitRefused> {
    if megabytes < MEMLIMIT_MIN_MB {
        Err(MemLimitRefused::TooSmall)
    } else if megabytes > MEMLIMIT_MAX_MB {
        Err(MemLimitRefused::NotMegabytes)
    } else {
        cx.engine.set_limit(u64::from(megabytes) * 1024 * 1024);
        Ok(())
    }
}

/// What `shutdown` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// Started: the connection sends what it has and closes.
    Started,
    /// `-A` was not given.
    Disabled,
    /// A mode other than `graceful`.
    InvalidMode,
}

/// `shutdown [graceful]` (with `-A`): both stop accepting and flush what is in
/// flight; a graceful one also saves the cache for a warm restart (-e), as
/// memcached's GRACE_STOP. The replies to requests before it are sent, then the
/// connection closes (memcached answers them too).
pub fn shutdown(cx: &Ctx<'_>, mode: ShutdownMode) -> Shutdown {
    if !cx.server.settings.shutdown_command {
        return Shutdown::Disabled;
    }
    if mode == ShutdownMode::Invalid {
        return Shutdown::InvalidMode;
    }
    if mode == ShutdownMode::Graceful {
        cx.server.begin_graceful_shutdown();
    } else {
        cx.server.begin_shutdown();
    }
    Shutdown::Started
}

/// `refresh_certs`: reloads the TLS certificate and key; `Err` has memcached's
/// message.
pub fn refresh_certs(cx: &Ctx<'_>) -> Result<(), String> {
    crate::startup::certs::reload_certs(cx.server.tls.as_deref(), &cx.server.settings.tls)
}

/// `watch`'s checks (`process_watch_command` up to `logger_add_watcher`): refused
/// under `-W`, then when replies to earlier requests are still to be sent
/// (`stacked`, which the request step decides), then for an unknown event type;
/// `noreply` silences those errors. Returns the event types when accepted: the
/// connection's transport then starts the stream.
pub fn watch(
    events: Option<u16>,
    noreply: bool,
    stacked: bool,
    cx: &Ctx<'_>,
    out: &mut Vec<u8>,
) -> Option<u16> {
    let refused = match events {
        _ if !cx.server.settings.watch_enabled => watch_reply::DISABLED,
        _ if stacked => watch_reply::CANNOT_PIPELINE,
        None => reply::ERROR,
        Some(events) => return Some(events),
    };
    if !noreply {
        out.extend_from_slice(refused);
    }
    None
}
