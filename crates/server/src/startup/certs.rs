//! TLS's server configuration (`-Z`) on rustls: memcached's `ssl_*` options made
//! into the certificate chain, key, CA, TLS 1.2 ciphers and session resumption that
//! new connections get, built at start-up and rebuilt whole by `refresh_certs` and
//! SIGHUP ([`reload_certs`]), into `startup/tls.rs`'s `Tls`. The encrypted stream
//! itself is the transport's (`io/tls.rs`, which wraps each accepted connection
//! with [`Tls::config`]).
//!
//! Goals: memcached 1.6's options, messages and stats; certificates reloaded
//! without a restart (new connections get the new ones, open ones keep theirs).
//! Non-goals: TLS 1.0/1.1, CBC or RSA-key-exchange suites (rustls implements none),
//! renegotiation (memcached turns it off too), kernel TLS (see [`start`]).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{
    NoServerSessionStorage, ServerSessionMemoryCache, StoresServerSessions, WebPkiClientVerifier,
};
use rustls::{
    CipherSuite, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig,
    SignatureScheme, SupportedCipherSuite,
};

use crate::startup::settings::TlsSettings;
use crate::startup::tls::{ClientAuth, Mode, Tls};

/// memcached's exit status for unusable TLS settings (`EX_USAGE`).
pub const EXIT_USAGE: i32 = 64;
/// Sessions the `ssl_session_cache` keeps (OpenSSL's default cache size).
const SESSION_CACHE_ENTRIES: usize = 20 * 1024;

/// Builds the TLS state `-Z` asks for (`t`; `tcp_port` is `-p`, `verbose` is
/// `-v`), or `None` without `-Z`. An error is memcached's startup message; the
/// caller exits with [`EXIT_USAGE`].
pub fn start(t: &TlsSettings, tcp_port: u16, verbose: bool) -> Result<Option<Arc<Tls>>, String> {
    if !t.enabled {
        return Ok(None);
    }
    if tcp_port == 0 {
        return Err("ERROR: You cannot enable SSL without a TCP port.".into());
    }
    if t.kernel_tls {
        // memcached's message where OpenSSL lacks kTLS. rustls could hand its keys to
        // the kernel, but this kernel has no `tls` ULP (setsockopt TCP_ULP "tls"
        // fails with ENOENT), and a kTLS path would bypass rustls's record layer.
        return Err("Kernel TLS offload is not available".into());
    }
    let new_sessions = Arc::new(AtomicU64::new(0));
    let mut modes = Vec::with_capacity(ClientAuth::ALL.len());
    for auth in ClientAuth::ALL {
        let (ticketer, sessions) = resumption(t.session_cache, &new_sessions)?;
        let config = build_config(t, auth, &ticketer, &sessions)?;
        modes.push(Mode {
            config: Mutex::new(config),
            ticketer,
            sessions,
        });
    }
    let modes: [Mode; 3] = modes
        .try_into()
        .map_err(|_| "TLS: one configuration per kind of listener".to_string())?;
    Ok(Some(Arc::new(Tls {
        verbose,
        wbuf_size: (t.wbuf_size as usize).max(1024),
        session_cache: t.session_cache,
        modes,
        handshake_errors: AtomicU64::new(0),
        proto_errors: AtomicU64::new(0),
        new_sessions,
        refreshed: Mutex::new(Instant::now()),
    })))
}

/// Session resumption for one kind of listener: with `ssl_session_cache`, a
/// server-side cache counted in `new_sessions` (no tickets); else stateless tickets
/// and no cache, as OpenSSL's default.
#[allow(clippy::type_complexity)]
fn resumption(
    session_cache: bool,
    new_sessions: &Arc<AtomicU64>,
) -> Result<
    (
        Arc<dyn rustls::server::ProducesTickets>,
        Arc<dyn StoresServerSessions>,
    ),
    String,
> {
    if session_cache {
        let cache = CountingCache {
            inner: ServerSessionMemoryCache::new(SESSION_CACHE_ENTRIES),
            new_sessions: Arc::clone(new_sessions),
        };
        Ok((Arc::new(NoTickets), Arc::new(cache)))
    } else {
        let ticketer = ring::Ticketer::new().map_err(|e| format!("TLS ticketer: {e}"))?;
        Ok((ticketer, Arc::new(NoServerSessionStorage {})))
    }
}

/// Reloads the certificate chain, key and CA file (memcached's `refresh_certs`) as
/// `t` (the settings `tls` was started with) names them:
/// new connections use them, open ones keep theirs. On error nothing changes and
/// the message is memcached's (the `refresh_certs` reply without its `\r\n`).
pub fn reload_certs(tls: Option<&Tls>, t: &TlsSettings) -> Result<(), String> {
    let Some(tls) = tls else {
        return Err("Error TLS not enabled".into());
    };
    // All three or none: build every kind's configuration before swapping any.
    let mut configs = Vec::with_capacity(tls.modes.len());
    for (auth, mode) in ClientAuth::ALL.into_iter().zip(&tls.modes) {
        configs.push(build_config(t, auth, &mode.ticketer, &mode.sessions)?);
    }
    for (mode, config) in tls.modes.iter().zip(configs) {
        *mode.config.lock() = config;
    }
    *tls.refreshed.lock() = Instant::now();
    Ok(())
}

/// The rustls configuration for these options and a listener of kind `auth`,
/// certificates loaded from their files; errors are memcached's
/// (`load_server_certificates`, `ssl_init`).
fn build_config(
    t: &TlsSettings,
    auth: ClientAuth,
    ticketer: &Arc<dyn rustls::server::ProducesTickets>,
    sessions: &Arc<dyn StoresServerSessions>,
) -> Result<Arc<ServerConfig>, String> {
    let chain_path = t.chain_cert.as_deref().unwrap_or("(null)");
    let chain = load_certs(t.chain_cert.as_deref())
        .map_err(|e| format!("Error loading the certificate chain: {chain_path} : {e}"))?;
    let key_path = t.key.as_deref().unwrap_or("(null)");
    let key = load_key(t.key.as_deref(), t.key_format)
        .map_err(|e| format!("Error loading the key: {key_path} : {e}"))?;

    let mut provider = ring::default_provider();
    let tls12 = tls12_suites(t.ciphers.as_deref(), &provider.cipher_suites).ok_or_else(|| {
        format!(
            "Error setting the provided cipher(s): {}",
            t.ciphers.as_deref().unwrap_or("")
        )
    })?;
    provider
        .cipher_suites
        .retain(|s| s.version() == &rustls::version::TLS13 || tls12.contains(&s.suite()));
    // Order the TLS 1.2 suites as the list did.
    provider.cipher_suites.sort_by_key(|s| {
        tls12
            .iter()
            .position(|&c| c == s.suite())
            .map_or(0, |i| i + 1)
    });
    let provider = Arc::new(provider);
    // rustls has no TLS 1.0/1.1: a minimum below 1.2 is 1.2 (so is Debian's
    // OpenSSL's, whose default security level refuses them).
    let versions: &[&rustls::SupportedProtocolVersion] = if t.min_version >= 3 {
        &[&rustls::version::TLS13]
    } else {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    };
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(|e| format!("Error setting the provided cipher(s): {e}"))?;
    // memcached checks the key against the certificate before it loads the CA file.
    rustls::sign::CertifiedKey::from_der(chain.clone(), key.clone_key(), &provider)
        .map_err(|e| format!("Error loading the key: {key_path} : {}", key_error(&e)))?;
    let verifier = client_verifier(t, auth.verify_mode(t.verify_mode), &provider)?;
    let mut config = builder
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("Error validating the certificate: {e}"))?;
    config.ticketer = Arc::clone(ticketer);
    config.session_storage = Arc::clone(sessions);
    Ok(Arc::new(config))
}

fn key_error(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            "key values mismatch".into()
        }
        other => other.to_string(),
    }
}

/// Every certificate in a PEM file, in order.
fn load_certs(path: Option<&str>) -> Result<Vec<CertificateDer<'static>>, String> {
    let path = path.ok_or("no file given")?;
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error)?;
    if certs.is_empty() {
        return Err("no certificate found".into());
    }
    Ok(certs)
}

/// The private key: PEM (`ssl_keyformat` 1, any of PKCS#8, PKCS#1, SEC1) or DER (2).
fn load_key(path: Option<&str>, format: i32) -> Result<PrivateKeyDer<'static>, String> {
    let path = path.ok_or("no file given")?;
    match format {
        1 => PrivateKeyDer::from_pem_file(path).map_err(pem_error),
        2 => {
            let der = std::fs::read(path).map_err(|e| io_error(&e))?;
            PrivateKeyDer::try_from(der).map_err(str::to_string)
        }
        _ => Err("bad ssl filetype".into()),
    }
}

fn io_error(e: &io::Error) -> String {
    // "No such file or directory", without Rust's " (os error 2)".
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => io_error(&e),
        rustls::pki_types::pem::Error::NoItemsFound => "no start line".into(),
        other => format!("{other:?}"),
    }
}

/// `verify_mode` (`ssl_verify_mode`, or a listener prefix's) over `ssl_ca_cert`:
/// 0 asks for no certificate; 1 asks, and checks one if sent; 2 and 3 require one
/// (3, "once", differs from 2 only on renegotiation, which TLS here never does).
fn client_verifier(
    t: &TlsSettings,
    verify_mode: u8,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, String> {
    // memcached loads the CA file whenever one is named, whatever the mode.
    let ca_error = |e: &dyn std::fmt::Display| {
        format!(
            "Error loading the CA certificate: {} : {e}",
            t.ca_cert.as_deref().unwrap_or_default()
        )
    };
    let roots = match t.ca_cert.as_deref() {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in load_certs(Some(path)).map_err(|e| ca_error(&e))? {
                roots.add(cert).map_err(|e| ca_error(&e))?;
            }
            Some(roots)
        }
        None => None,
    };
    if verify_mode == 0 {
        return Ok(WebPkiClientVerifier::no_client_auth());
    }
    let mandatory = verify_mode >= 2;
    let Some(roots) = roots else {
        // As OpenSSL with no verify locations: every client certificate fails.
        return Ok(Arc::new(NoTrustedCa {
            mandatory,
            provider: Arc::clone(provider),
        }));
    };
    let mut builder =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider));
    if !mandatory {
        builder = builder.allow_unauthenticated();
    }
    builder.build().map_err(|e| ca_error(&e))
}

/// A client verifier with no trusted CA: asks for a certificate and refuses any.
#[derive(Debug)]
struct NoTrustedCa {
    mandatory: bool,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for NoTrustedCa {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// No session tickets (`ssl_session_cache` resumes from the server's cache instead).
#[derive(Debug)]
struct NoTickets;

impl rustls::server::ProducesTickets for NoTickets {
    fn enabled(&self) -> bool {
        false
    }
    fn lifetime(&self) -> u32 {
        0
    }
    fn encrypt(&self, _plain: &[u8]) -> Option<Vec<u8>> {
        None
    }
    fn decrypt(&self, _cipher: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// The session cache, counting the sessions put in it (`ssl_new_sessions`, which
/// memcached counts in its new-session callback).
#[derive(Debug)]
struct CountingCache {
    inner: Arc<ServerSessionMemoryCache>,
    /// The TLS state's `ssl_new_sessions` counter, shared (Relaxed: a statistic).
    new_sessions: Arc<AtomicU64>,
}

impl StoresServerSessions for CountingCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let stored = self.inner.put(key, value);
        if stored {
            self.new_sessions.fetch_add(1, Ordering::Relaxed);
        }
        stored
    }
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.get(key)
    }
    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.take(key)
    }
    fn can_cache(&self) -> bool {
        self.inner.can_cache()
    }
}

/// The TLS 1.2 suites rustls implements, by OpenSSL name, with the OpenSSL aliases
/// that select each (`openssl ciphers -v` lists the same properties).
const TLS12_SUITES: &[(CipherSuite, &str, &[&str])] = &[
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        &["aECDSA", "ECDSA", "AES", "AES256", "AESGCM", "SHA384"],
    ),
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        &["aECDSA", "ECDSA", "AES", "AES128", "AESGCM", "SHA256"],
    ),
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        &["aECDSA", "ECDSA", "CHACHA20", "SHA256"],
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-RSA-AES256-GCM-SHA384",
        &["aRSA", "AES", "AES256", "AESGCM", "SHA384"],
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-RSA-AES128-GCM-SHA256",
        &["aRSA", "AES", "AES128", "AESGCM", "SHA256"],
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-RSA-CHACHA20-POLY1305",
        &["aRSA", "CHACHA20", "SHA256"],
    ),
];

/// Aliases every suite above matches: all are ECDHE, AEAD, TLS 1.2 and "HIGH".
const ALL_ALIASES: &[&str] = &[
    "ALL", "DEFAULT", "HIGH", "ECDHE", "EECDH", "kECDHE", "kEECDH", "AEAD", "TLSv1.2",
];

/// The TLS 1.2 suites an OpenSSL cipher list (`ssl_ciphers`) selects among those
/// the provider has, in order; `None` when it selects none (memcached's "Error
/// setting the provided cipher(s)"). No list: all of them.
///
/// OpenSSL's grammar, as far as these suites go: elements split on `:` (or space);
/// each is a name or alias, or several joined by `+` (all must match); a leading
/// `!` removes for good, `-` removes, `+` moves to the end; `@STRENGTH`, `@SECLEVEL`
/// and unknown words select nothing. TLS 1.3 suites are not chosen by this list (as
/// OpenSSL, whose TLS 1.3 suites are a separate setting): all of them stay on.
pub fn tls12_suites(
    list: Option<&str>,
    available: &[SupportedCipherSuite],
) -> Option<Vec<CipherSuite>> {
    let have = |c: CipherSuite| available.iter().any(|s| s.suite() == c);
    let Some(list) = list else {
        return Some(
            TLS12_SUITES
                .iter()
                .map(|s| s.0)
                .filter(|&c| have(c))
                .collect(),
        );
    };
    let mut chosen: Vec<CipherSuite> = Vec::new();
    let mut banned: Vec<CipherSuite> = Vec::new();
    for elem in list.split([':', ' ']).filter(|e| !e.is_empty()) {
        let (op, words) = match elem.as_bytes()[0] {
            b'!' | b'-' | b'+' => (elem.as_bytes()[0], &elem[1..]),
            _ => (b'=', elem),
        };
        let matched = TLS12_SUITES.iter().filter(|(c, name, aliases)| {
            have(*c)
                && words
                    .split('+')
                    .all(|w| w == *name || aliases.contains(&w) || ALL_ALIASES.contains(&w))
        });
        for &(c, _, _) in matched {
            match op {
                b'!' => {
                    banned.push(c);
                    chosen.retain(|&x| x != c);
                }
                b'-' => chosen.retain(|&x| x != c),
                b'+' => {
                    if let Some(i) = chosen.iter().position(|&x| x == c) {
                        chosen.remove(i);
                        chosen.push(c);
                    }
                }
                _ => {
                    if !banned.contains(&c) && !chosen.contains(&c) {
                        chosen.push(c);
                    }
                }
            }
        }
    }
    (!chosen.is_empty()).then_some(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &str) -> Option<Vec<&'static str>> {
        let provider = ring::default_provider();
        tls12_suites(Some(list), &provider.cipher_suites).map(|v| {
            v.iter()
                .map(|c| TLS12_SUITES.iter().find(|s| s.0 == *c).map_or("?", |s| s.1))
                .collect()
        })
    }

    #[test]
    fn cipher_lists() {
        let rows: &[(&str, Option<&[&str]>)] = &[
            ("BOGUS", None),
            // TLS 1.3 names are not TLS 1.2 ciphers: OpenSSL refuses them too.
            ("TLS_AES_128_GCM_SHA256", None),
            ("AES256-SHA", None),
            (
                "ECDHE-RSA-AES128-GCM-SHA256",
                Some(&["ECDHE-RSA-AES128-GCM-SHA256"]),
            ),
            (
                "BOGUS:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256",
                Some(&[
                    "ECDHE-ECDSA-CHACHA20-POLY1305",
                    "ECDHE-RSA-AES128-GCM-SHA256",
                ]),
            ),
            (
                "ECDHE+AESGCM:!aRSA",
                Some(&[
                    "ECDHE-ECDSA-AES256-GCM-SHA384",
                    "ECDHE-ECDSA-AES128-GCM-SHA256",
                ]),
            ),
            ("HIGH:!aRSA:!aECDSA", None),
            (
                "aECDSA+AES128:aECDSA:-AES256:+CHACHA20",
                Some(&[
                    "ECDHE-ECDSA-AES128-GCM-SHA256",
                    "ECDHE-ECDSA-CHACHA20-POLY1305",
                ]),
            ),
            (
                "!CHACHA20:DEFAULT:@STRENGTH:CHACHA20",
                Some(&[
                    "ECDHE-ECDSA-AES256-GCM-SHA384",
                    "ECDHE-ECDSA-AES128-GCM-SHA256",
                    "ECDHE-RSA-AES256-GCM-SHA384",
                    "ECDHE-RSA-AES128-GCM-SHA256",
                ]),
            ),
        ];
        for (list, want) in rows {
            assert_eq!(names(list).as_deref(), *want, "{list}");
        }
    }
}
