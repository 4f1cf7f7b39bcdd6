//! The TLS state (`-Z`) that every TLS connection is made from, shared by the
//! acceptor, `stats` and the reloaders: the rustls configuration that
//! `startup/certs.rs` builds from memcached's `ssl_*` options (and rebuilds on
//! `refresh_certs` and SIGHUP), and the `ssl_*` statistics. The encrypted stream
//! itself is the transport's (`io/tls.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use rustls::server::StoresServerSessions;
use rustls::ServerConfig;

/// The TLS state shared by the acceptor (which wraps new connections), `stats` and
/// the reloaders.
pub struct Tls {
    pub(crate) verbose: bool,
    /// Plaintext bytes encrypted per write (`ssl_wbuf_size`, at least 1 KiB).
    pub(crate) wbuf_size: usize,
    /// `ssl_session_cache`: sessions are cached here (and counted).
    pub(crate) session_cache: bool,
    /// The configuration new connections get. Replaced whole by [`reload_certs`];
    /// taken for an Arc clone at each TLS accept and for the swap. Open connections
    /// hold their own Arc, so they keep the certificates they started with.
    pub(crate) config: Mutex<Arc<ServerConfig>>,
    /// Kept across reloads, so tickets and cached sessions survive a rotation.
    pub(crate) ticketer: Arc<dyn rustls::server::ProducesTickets>,
    pub(crate) sessions: Arc<dyn StoresServerSessions>,
    /// Failed handshakes (Relaxed: a statistic).
    pub(crate) handshake_errors: AtomicU64,
    /// Sessions put in the `ssl_session_cache` (Relaxed: a statistic).
    pub(crate) new_sessions: Arc<AtomicU64>,
    /// When the certificates were last loaded; taken by reloads and `stats`.
    pub(crate) refreshed: Mutex<Instant>,
}

impl Tls {
    /// The configuration new connections get now (the certificates last loaded).
    pub fn config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.config.lock())
    }

    /// Plaintext bytes encrypted per write (`ssl_wbuf_size`, at least 1 KiB).
    pub fn wbuf_size(&self) -> usize {
        self.wbuf_size
    }

    /// Counts a failed handshake (`ssl_handshake_errors`), and under `-v` says
    /// with whom and why.
    pub fn handshake_failed(&self, tcp: &mio::net::TcpStream, why: &dyn std::fmt::Display) {
        self.handshake_errors.fetch_add(1, Ordering::Relaxed);
        if self.verbose {
            let peer = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_default();
            eprintln!("memcrab: TLS handshake with {peer} failed: {why}");
        }
    }

    /// `ssl_handshake_errors`.
    pub fn handshake_errors(&self) -> u64 {
        self.handshake_errors.load(Ordering::Relaxed)
    }

    /// `ssl_new_sessions`, with `ssl_session_cache` only.
    pub fn new_sessions(&self) -> Option<u64> {
        self.session_cache
            .then(|| self.new_sessions.load(Ordering::Relaxed))
    }

    /// `time_since_server_cert_refresh`, in seconds.
    pub fn secs_since_refresh(&self) -> u64 {
        self.refreshed.lock().elapsed().as_secs()
    }
}
