//! Starting the server: the command line, running under a service manager (`-u`,
//! `-d`, `-P`), and the password files. `main` runs these in memcached's start-up order (drawn in `service.rs`).
//!
//! ```text
//!   startup/settings/   Settings, and the command line parsed into them (its
//!                       files: settings/mod.rs)
//!   startup/service.rs  -u (leave root), -r, -d, -P, with memcached's exit statuses;
//!                       SIGHUP's reload (users, certificates)
//!   startup/auth.rs     SASL PLAIN users (-S) and the ascii auth file (-Y)
//!   startup/certs.rs    TLS's server configuration (-Z, ssl_*): certificates,
//!                       ciphers, sessions; rebuilt by refresh_certs and SIGHUP
//!   startup/tls.rs      the TLS state it is held in (and the ssl_* statistics),
//!                       which new TLS connections are made from
//! ```

pub mod auth;
pub mod certs;
pub mod service;
pub mod settings;
pub mod tls;
