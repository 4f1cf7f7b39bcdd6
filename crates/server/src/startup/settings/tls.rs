//! TLS's part of the command line: memcached's `-o ssl_*` sub-options with
//! memcached's messages, into the settings' [`TlsSettings`].

use super::TlsSettings;

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
