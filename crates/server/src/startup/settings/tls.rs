//! TLS's part of the command line: `-Z`, memcached's `-o ssl_*` sub-options with
//! memcached's messages, and the `notls:` listener prefix. `crate::io::tls` builds
//! rustls's configuration from [`TlsSettings`].

/// `-Z` and `-o ssl_*`, as memcached 1.6 takes them (`crate::io::tls` builds rustls's
/// configuration from these). Defaults are memcached's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// `-Z`: TCP listeners speak TLS (except `-l notls:...` ones).
    pub enabled: bool,
    /// `ssl_chain_cert`: the server's certificate chain, PEM.
    pub chain_cert: Option<String>,
    /// `ssl_key`: the server's private key.
    pub key: Option<String>,
    /// `ssl_keyformat`: OpenSSL's file type number, 1 = PEM (default), 2 = DER.
    pub key_format: i32,
    /// `ssl_verify_mode`: 0 none, 1 request, 2 require, 3 once.
    pub verify_mode: u8,
    /// `ssl_ciphers`: an OpenSSL cipher list for TLS 1.2 (see `certs::tls12_suites`).
    pub ciphers: Option<String>,
    /// `ssl_ca_cert`: PEM file of the CAs client certificates are checked against.
    pub ca_cert: Option<String>,
    /// `ssl_wbuf_size`: plaintext bytes encrypted per write (given in kilobytes).
    pub wbuf_size: u32,
    /// `ssl_session_cache`: a server-side session cache (default: stateless tickets).
    pub session_cache: bool,
    /// `ssl_kernel_tls`: refused at startup (see `certs::start`).
    pub kernel_tls: bool,
    /// `ssl_min_version`: 0 tlsv1.0, 1 tlsv1.1, 2 tlsv1.2 (default), 3 tlsv1.3.
    pub min_version: u8,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            enabled: false,
            chain_cert: None,
            key: None,
            key_format: 1,
            verify_mode: 0,
            ciphers: None,
            ca_cert: None,
            wbuf_size: 16 * 1024,
            session_cache: false,
            kernel_tls: false,
            min_version: 2,
        }
    }
}

impl TlsSettings {
    /// `ssl_min_version` as `stats settings` prints it (memcached's `ssl_proto_text`).
    pub fn min_version_name(&self) -> &'static str {
        match self.min_version {
            0 => "tlsv1.0",
            1 => "tlsv1.1",
            2 => "tlsv1.2",
            _ => "tlsv1.3",
        }
    }

    /// `ssl_verify_mode` as `stats settings` prints it: OpenSSL's flag bits
    /// (PEER 1, FAIL_IF_NO_PEER_CERT 2, CLIENT_ONCE 4), as memcached stores it.
    pub fn verify_mode_bits(&self) -> u8 {
        match self.verify_mode {
            0 => 0,
            1 => 1,
            2 => 3,
            _ => 7,
        }
    }
}

/// The `-l` prefix that keeps one listener plain under `-Z`. As memcached's
/// `server_sockets`, the prefix and the one character after it are skipped.
pub const NOTLS_PREFIX: &str = "notls";

/// memcached's TLS sub-options (all taken, with or without `-Z`, as memcached does).
pub(super) const TLS_SUBOPTIONS: &[&str] = &[
    "ssl_chain_cert",
    "ssl_key",
    "ssl_verify_mode",
    "ssl_keyformat",
    "ssl_ciphers",
    "ssl_ca_cert",
    "ssl_wbuf_size",
    "ssl_session_cache",
    "ssl_kernel_tls",
    "ssl_min_version",
];

/// The `ssl_*` sub-options, with memcached's messages (`memcached.c`'s `SSL_*` cases).
pub(super) fn tls_suboption(
    t: &mut TlsSettings,
    name: &str,
    value: Option<&str>,
) -> Result<(), String> {
    let need = || value.ok_or_else(|| format!("Missing {name} argument"));
    let number = || -> Result<i64, String> {
        // memcached's safe_strtol: optional sign, digits, trailing whitespace allowed.
        need()?
            .trim()
            .parse()
            .map_err(|_| format!("could not parse argument to {name}"))
    };
    match name {
        "ssl_chain_cert" => t.chain_cert = Some(need()?.to_string()),
        "ssl_key" => t.key = Some(need()?.to_string()),
        "ssl_verify_mode" => match number()? {
            m @ 0..=3 => t.verify_mode = m as u8,
            _ => return Err("Invalid ssl_verify_mode. Use help to see valid options.".into()),
        },
        "ssl_keyformat" => {
            t.key_format = i32::try_from(number()?)
                .map_err(|_| format!("could not parse argument to {name}"))?
        }
        "ssl_ciphers" => t.ciphers = Some(need()?.to_string()),
        "ssl_ca_cert" => t.ca_cert = Some(need()?.to_string()),
        "ssl_wbuf_size" => {
            let kb: u32 = need()?
                .trim()
                .parse()
                .map_err(|_| format!("could not parse argument to {name}"))?;
            t.wbuf_size = kb.wrapping_mul(1024);
        }
        "ssl_session_cache" => t.session_cache = true,
        "ssl_kernel_tls" => t.kernel_tls = true,
        "ssl_min_version" => match number()? {
            v @ 0..=3 => t.min_version = v as u8,
            _ => return Err("Invalid ssl_min_version. Use help to see valid options.".into()),
        },
        _ => return Err(format!("-o: Illegal suboption \"{name}\"")),
    }
    Ok(())
}
