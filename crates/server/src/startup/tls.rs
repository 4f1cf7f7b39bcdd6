//! The TLS state (`-Z`) that every TLS connection is made from, shared by the
//! acceptor, `stats` and the reloaders: the rustls configuration that
//! `startup/certs.rs` builds from memcached's `ssl_*` options (and rebuilds on
//! `refresh_certs` and SIGHUP), one per kind of TLS listener ([`ClientAuth`]:
//! `-l btls:` and `-l mtls:` override `ssl_verify_mode`), and the `ssl_*`
//! statistics. The encrypted stream itself is the transport's (`io/tls.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use rustls::server::StoresServerSessions;
use rustls::ServerConfig;

/// How a TLS listener treats client certificates: memcached 1.6.30's `-l`
/// prefixes (`MC_SSL_ENABLED_DEFAULT`, `_NOPEER`, `_PEER` in its `tls.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// No prefix: as `ssl_verify_mode` says.
    Default,
    /// `btls:`: no client certificate is asked for, whatever `ssl_verify_mode` says.
    Basic,
    /// `mtls:`: a client certificate is required and checked against `ssl_ca_cert`
    /// (without one, every certificate fails, as OpenSSL with no trust store).
    Mutual,
}

impl ClientAuth {
    pub const ALL: [ClientAuth; 3] = [ClientAuth::Default, ClientAuth::Basic, ClientAuth::Mutual];

    /// The `ssl_verify_mode` a listener of this kind runs with.
    pub fn verify_mode(self, configured: u8) -> u8 {
        match self {
            ClientAuth::Default => configured,
            ClientAuth::Basic => 0,
            // SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, memcached's mode 2.
            ClientAuth::Mutual => 2,
        }
    }
}

/// One kind of listener's TLS state.
pub(crate) struct Mode {
    /// The configuration new connections get. Replaced whole by [`reload_certs`];
    /// taken for an Arc clone at each TLS accept and for the swap. Open connections
    /// hold their own Arc, so they keep the certificates they started with.
    pub(crate) config: Mutex<Arc<ServerConfig>>,
    /// Kept across reloads, so tickets and cached sessions survive a rotation. Each
    /// kind has its own: a session made where no client certificate was asked for
    /// must not resume where one is required.
    pub(crate) ticketer: Arc<dyn rustls::server::ProducesTickets>,
    pub(crate) sessions: Arc<dyn StoresServerSessions>,
}

/// The TLS state shared by the acceptor (which wraps new connections), `stats` and
/// the reloaders.
pub struct Tls {
    pub(crate) verbose: bool,
    /// Plaintext bytes encrypted per write (`ssl_wbuf_size`, at least 1 KiB).
    pub(crate) wbuf_size: usize,
    /// `ssl_session_cache`: sessions are cached here (and counted).
    pub(crate) session_cache: bool,
    /// Indexed by [`ClientAuth`] (`Default`, `Basic`, `Mutual`).
    pub(crate) modes: [Mode; 3],
    /// Refused ClientHellos (Relaxed: a statistic).
    pub(crate) handshake_errors: AtomicU64,
    /// Every other TLS failure of a connection, `ssl_proto_errors` (Relaxed: a
    /// statistic).
    pub(crate) proto_errors: AtomicU64,
    /// Sessions put in the `ssl_session_cache` (Relaxed: a statistic).
    pub(crate) new_sessions: Arc<AtomicU64>,
    /// When the certificates were last loaded; taken by reloads and `stats`.
    pub(crate) refreshed: Mutex<Instant>,
}

impl Tls {
    /// The configuration a new connection of a listener of kind `auth` gets now
    /// (the certificates last loaded).
    pub fn config(&self, auth: ClientAuth) -> Arc<ServerConfig> {
        Arc::clone(&self.modes[auth as usize].config.lock())
    }

    /// Plaintext bytes encrypted per write (`ssl_wbuf_size`, at least 1 KiB).
    pub fn wbuf_size(&self) -> usize {
        self.wbuf_size
    }

    /// Counts a failed connection: a refused ClientHello in `ssl_handshake_errors`
    /// (`handshake`), anything else in `ssl_proto_errors`; under `-v`, says with
    /// whom and why.
    pub fn failed(&self, handshake: bool, tcp: &mio::net::TcpStream, why: &dyn std::fmt::Display) {
        if handshake {
            self.handshake_errors.fetch_add(1, Ordering::Relaxed);
        } else {
            self.proto_errors.fetch_add(1, Ordering::Relaxed);
        }
        if self.verbose {
            let peer = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_default();
            eprintln!("memcrab: TLS with {peer} failed: {why}");
        }
    }

    /// `ssl_handshake_errors`.
    pub fn handshake_errors(&self) -> u64 {
        self.handshake_errors.load(Ordering::Relaxed)
    }

    /// `ssl_proto_errors`.
    pub fn proto_errors(&self) -> u64 {
        self.proto_errors.load(Ordering::Relaxed)
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
