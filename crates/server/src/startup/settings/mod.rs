//! The settings the server runs with ([`Settings`]), from a command line compatible
//! with memcached 1.6: the same short letters with the same meanings, the same long
//! forms, `-o` sub-options, and getopt's conventions (`-p11211`, `-p 11211`,
//! `--port=11211`, `--port 11211`, bundled `-vvv`).
//!
//! A bad value is an error naming the flag; `main` prints it on one line and exits 2.
//!
//! ```text
//!   settings/mod.rs     Settings and TlsSettings, their defaults and limits: what
//!                       the rest of the server reads (it imports nothing of ours)
//!   settings/parse.rs   parse's steps: the environment, each flag in order, -o's
//!                       sub-options, memcached's rules for flags that go
//!                       together, the password files; `-h`'s usage
//!   settings/getopt.rs  the flag table and getopt's splitting
//!   settings/tls.rs     -o ssl_*'s sub-options
//!   settings/tuning.rs  -o's slab, LRU, hash and logger sub-options, and
//!                       memcached's checks of them against -I
//!   settings/tests.rs   the parser against memcached's flags and conventions
//! ```

mod getopt;
pub mod parse;
mod tls;
pub mod tuning;

/// The storage engines `-o engine=` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// The segment engine (default): crates/store/src/seg.
    Seg,
    /// The simple reference engine, kept as the model and for comparisons.
    Reference,
}

/// The stream transports `-o io=` selects (the `MEMCRAB_IO` environment variable
/// sets the default, so that a test suite can run on either unchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    /// mio over epoll: readiness, then `read`/`write` per connection (io/epoll.rs).
    Epoll,
    /// io_uring (the default: less CPU per request on W1–W4, docs/benchmarks.md):
    /// multishot receives into provided buffers, sends batched into one
    /// `io_uring_enter` per loop turn (uring.rs). Falls back to epoll, with one log
    /// line, where the kernel refuses it.
    Uring,
}

impl IoKind {
    pub fn name(self) -> &'static str {
        match self {
            IoKind::Epoll => "epoll",
            IoKind::Uring => "uring",
        }
    }

    fn parse(v: Option<&str>) -> Result<IoKind, String> {
        match v {
            Some("epoll") => Ok(IoKind::Epoll),
            Some("uring") | Some("io_uring") => Ok(IoKind::Uring),
            other => Err(format!(
                "-o io: unknown transport \"{}\" (available: epoll, uring)",
                other.unwrap_or("")
            )),
        }
    }
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Seg => "seg",
            EngineKind::Reference => "reference",
        }
    }
}

/// The port to bind for a `-p`/`-U` value: -1 (ephemeral) binds port 0.
pub fn bind_port(port: i32) -> u16 {
    u16::try_from(port).unwrap_or(0)
}

/// Everything the command line decides.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `-p`: the TCP port; 0 turns TCP off, -1 asks for an ephemeral port (as
    /// memcached's `-p`, which `stats settings` prints as given).
    pub port: i32,
    /// `-l`: addresses to listen on, each a [`ListenEntry`].
    pub listen: Vec<String>,
    /// `-l` as given (repeated ones joined with `,`), as `stats settings` shows it
    /// and memcached's `failed to listen` message prints it.
    pub inter: String,
    /// `-U`: the UDP port, 0 (off), or -1 (ephemeral), as `port`.
    pub udp_port: i32,
    pub unix_socket: Option<String>,
    /// `-a`: permissions of the unix socket (octal on the command line).
    pub unix_mask: u32,
    pub memory_limit_mb: u64,
    /// `-M`: answer out-of-memory instead of evicting.
    pub no_evict: bool,
    pub max_connections: usize,
    pub threads: usize,
    /// Worker threads actually run: `threads` capped at the usable CPUs (set by main).
    pub workers: usize,
    pub item_size_max: usize,
    pub use_cas: bool,
    pub backlog: i32,
    pub reqs_per_event: usize,
    pub shutdown_command: bool,
    pub flush_enabled: bool,
    /// `false` with `-X`: key dumps (`lru_crawler metadump`/`mgdump`) are refused.
    pub dump_enabled: bool,
    /// `-o track_sizes`: `stats sizes` is enabled from the start.
    pub track_sizes: bool,
    /// The LRU crawler is on at start (`-o no_lru_crawler` or `no_modern`: off).
    pub lru_crawler: bool,
    /// `false` with `-W`: `watch` is refused.
    pub watch_enabled: bool,
    /// `-o watcher_logbuf_size` (given in kilobytes): the log lines a watcher may have
    /// waiting before it falls behind (`skipped=`).
    pub watcher_buf_bytes: usize,
    pub verbose: u32,
    pub lock_memory: bool,
    /// `-d`: fork into the background (service.rs).
    pub daemonize: bool,
    /// `-P`: the pid file, made absolute (it is written after `-d`'s `chdir("/")`).
    pub pid_file: Option<String>,
    /// `-u`: the user to switch to when started as root (required then, as memcached).
    pub user: Option<String>,
    /// `-r`: raise the core file limit; with `-d`, also stay in the start directory.
    pub enable_coredumps: bool,
    /// `-o idle_timeout`: seconds; 0 = never.
    pub idle_timeout_secs: u32,
    /// `-o hashpower`: initial index size as a power of two.
    pub hash_power: u8,
    /// `-o engine=`: the storage engine.
    pub engine: EngineKind,
    /// `-o io=`: the stream transport.
    pub io: IoKind,
    /// `-o value_lend_min=`: values of at least this many bytes are sent from the
    /// store's memory (writev/sendmsg over a lease) instead of copied into the
    /// output, on plain TCP and unix connections; 0: always copy.
    pub value_lend_min: usize,
    /// `-e`: the memory file of a restartable cache (segment engine only).
    pub memory_file: Option<std::path::PathBuf>,
    pub growth_factor: f64,
    pub chunk_size: u32,
    pub stat_prefix: char,
    /// `-B`: which protocols client connections speak.
    pub protocol: Protocol,
    /// `-S`: SASL PLAIN authentication over the binary protocol.
    pub sasl: bool,
    /// `-Y`: the ASCII authentication file's path.
    pub auth_file: Option<String>,
    /// The password file `-Y` names, or `MEMCACHED_SASL_PWDB` with `-S` (`sasl`
    /// says which), made absolute; SIGHUP reads it again (`startup::service::reload`).
    pub users_file: Option<String>,
    /// `-Z` and the `ssl_*` sub-options.
    pub tls: TlsSettings,
    /// `-o metrics_listen=HOST:PORT`: where `/metrics` is served (admin/metrics/);
    /// main replaces it with the address bound. None: off.
    pub metrics_listen: Option<String>,
    /// `-o latency=on|off`: per-command latency histograms (`stats latency`,
    /// `/metrics`); on by default.
    pub latency: bool,
    /// `-o latency_clock=tsc|monotonic`: what the request step times with. `tsc`
    /// (the default) reads the time-stamp counter where the kernel reports a
    /// constant, non-stop one, else the monotonic clock; `monotonic` always reads
    /// the monotonic clock (a VM whose counter cannot be trusted, say).
    pub monotonic_clock: bool,
    /// `-o hotkeys=on|off`: sampled hot keys (`stats hotkeys`, `/metrics`); on by
    /// default.
    pub hotkeys: bool,
    /// `-o slowlog_us=N`: requests taking at least N microseconds enter the slow log
    /// (`stats slowlog`, `watch slowlog`); 0: off (the default).
    pub slowlog_us: u64,
    /// `-o slowlog_len=N`: slow log entries kept (the newest).
    pub slowlog_len: usize,
    /// memcached's slab, LRU, hash and logger sub-options (`-o`), as given.
    pub tuning: tuning::Tuning,
}

/// `-B`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// The first byte of a connection decides (0x80: binary).
    Auto,
    Ascii,
    Binary,
}

impl Protocol {
    /// As `stats settings` names it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Auto => "auto-negotiate",
            Protocol::Ascii => "ascii",
            Protocol::Binary => "binary",
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            port: 11211,
            listen: vec!["127.0.0.1".to_string()],
            inter: "127.0.0.1".to_string(),
            udp_port: 0,
            unix_socket: None,
            unix_mask: 0o700,
            memory_limit_mb: 64,
            no_evict: false,
            max_connections: 1024,
            threads: 4,
            workers: 4,
            item_size_max: memcrab_limits::ITEM_SIZE_MAX_DEFAULT,
            use_cas: true,
            backlog: 1024,
            reqs_per_event: 20,
            shutdown_command: false,
            flush_enabled: true,
            dump_enabled: true,
            track_sizes: false,
            lru_crawler: true,
            watch_enabled: true,
            watcher_buf_bytes: WATCHER_BUF_BYTES_DEFAULT,
            verbose: 0,
            lock_memory: false,
            daemonize: false,
            pid_file: None,
            user: None,
            enable_coredumps: false,
            idle_timeout_secs: 0,
            hash_power: 16,
            engine: EngineKind::Seg,
            io: IoKind::Uring,
            value_lend_min: VALUE_LEND_MIN,
            memory_file: None,
            growth_factor: 1.25,
            chunk_size: 48,
            stat_prefix: ':',
            protocol: Protocol::Auto,
            sasl: false,
            auth_file: None,
            users_file: None,
            tls: TlsSettings::default(),
            metrics_listen: None,
            latency: true,
            monotonic_clock: false,
            hotkeys: true,
            slowlog_us: 0,
            slowlog_len: SLOWLOG_LEN_DEFAULT,
            tuning: tuning::Tuning::default(),
        }
    }
}

/// memcached's `LOGGER_WATCHER_BUF_SIZE`: 256 KiB of log lines per watcher.
pub const WATCHER_BUF_BYTES_DEFAULT: usize = 256 * 1024;

/// `-o slowlog_len`'s default: the slow log keeps the newest 128 entries.
pub const SLOWLOG_LEN_DEFAULT: usize = 128;

/// `-o value_lend_min`'s default: values of 4 KiB and more are sent from item
/// memory (docs/benchmarks.md, "Zero-copy values", measured it).
pub const VALUE_LEND_MIN: usize = 4096;

/// Longest get line buffered (memcached has no limit; we keep per-connection
/// memory bounded).
pub const MAX_GET_LINE: usize = 1024 * 1024;

/// The request parsers' limits under these settings (every transport alike).
pub fn parse_config(s: &Settings) -> memcrab_proto::text::Config {
    memcrab_proto::text::Config {
        item_size_max: s.item_size_max,
        use_cas: s.use_cas,
        max_get_line: MAX_GET_LINE,
    }
}

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

/// memcached's per-listener TLS prefixes on a `-l` entry (1.6.30), valid with `-Z`
/// only: `notls:` keeps the listener plain, `btls:` asks no client certificate,
/// `mtls:` requires one (`startup/tls.rs`'s `ClientAuth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenPrefix {
    NoTls,
    Btls,
    Mtls,
}

impl ListenPrefix {
    /// Splits a prefix off a `-l` entry. As memcached's `server_sockets`, the
    /// prefix is matched at the entry's start, and it and the one character after
    /// it (the `:`) are skipped.
    pub fn split(entry: &str) -> (Option<ListenPrefix>, &str) {
        for (name, prefix) in [
            ("notls", ListenPrefix::NoTls),
            ("btls", ListenPrefix::Btls),
            ("mtls", ListenPrefix::Mtls),
        ] {
            if let Some(rest) = entry.strip_prefix(name) {
                return (Some(prefix), rest.get(1..).unwrap_or(""));
            }
        }
        (None, entry)
    }

    /// memcached 1.6.45's message for the prefix without `-Z`, byte for byte: it
    /// names `mtls` as 'otls'.
    pub fn without_tls_message(self) -> &'static str {
        match self {
            ListenPrefix::NoTls => "'notls' option is valid only when SSL is enabled",
            ListenPrefix::Btls => "'btls' option is valid only when SSL is enabled",
            ListenPrefix::Mtls => "'otls' option is valid only when SSL is enabled",
        }
    }
}

/// One `-l` entry as memcached 1.6.45's `server_sockets` reads it:
/// `[notls:|btls:|mtls:][proto[NAME]:][tag[NAME]:]ADDRESS`. The `-l` list is cut at
/// `,` and `;` (as `strtok(";,")`), so an entry has neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenEntry<'a> {
    pub tls: Option<ListenPrefix>,
    /// `proto[ascii|binary|negotiating]:`: this listener's connections speak it
    /// instead of `-B`'s. A name is matched as memcached's `strncmp(name, given,
    /// len)` does, so any prefix of a name (even an empty one) picks it; an
    /// unknown name keeps `-B`'s.
    pub protocol: Option<Protocol>,
    /// `tag[NAME]:` or `tag_NAME_:`, 1 to 8 bytes. memcached's proxy routes by a
    /// listener's tag; without the proxy (memcrab has none) it changes nothing.
    pub tag: Option<&'a str>,
    /// What is left: `host`, `host:port`, `[v6]:port`, `*`.
    pub addr: &'a str,
    /// Where memcached's parse wrote its first NUL into this entry (its `]`s and
    /// the port's `:`), which is where its messages that print the first entry of
    /// the list cut it.
    pub cut: usize,
}

impl<'a> ListenEntry<'a> {
    /// Reads `entry` (`ascii_auth`: `-Y` is given); `first` is the list's first
    /// entry as memcached's later messages print it (`None` when `entry` is the
    /// first). An error is memcached's message (its caller adds the `failed to
    /// listen` line).
    pub fn parse(entry: &'a str, ascii_auth: bool, first: Option<&str>) -> Result<Self, String> {
        let (tls, mut p) = ListenPrefix::split(entry);
        let at = |p: &str| entry.len() - p.len();
        let mut cut = entry.len();
        let mut protocol = None;
        if let Some(rest) = p.strip_prefix("proto") {
            p = rest;
            if p.starts_with('[') {
                let Some(e) = p.find(']') else {
                    return Err(format!("Invalid protocol spec: \"{p}\""));
                };
                let name = &p[1..e];
                cut = cut.min(at(p) + e);
                p = p.get(e + 2..).unwrap_or("");
                let picks = |full: &str| full.starts_with(name);
                if picks("ascii") {
                    protocol = Some(Protocol::Ascii);
                } else if picks("binary") {
                    if ascii_auth {
                        return Err(
                            "Cannot use binary protocol when ascii authentication enabled".into(),
                        );
                    }
                    protocol = Some(Protocol::Binary);
                } else if picks("negotiating") {
                    protocol = Some(if ascii_auth {
                        eprintln!("WARNING: negotiating ports are ascii only when ascii authentication enabled");
                        Protocol::Ascii
                    } else {
                        Protocol::Auto
                    });
                } else if picks("proxy") {
                    let list = match first {
                        Some(f) => f,
                        None => &entry[..cut],
                    };
                    return Err(format!("Server not built with proxy: \"{list}\""));
                }
            }
        }
        let mut tag = None;
        if let Some(rest) = p.strip_prefix("tag") {
            p = rest;
            if p.starts_with(['[', '_']) {
                let Some(e) = p.find(']').or_else(|| p[1..].find('_').map(|i| i + 1)) else {
                    return Err(format!("Invalid tag in socket config: \"{p}\""));
                };
                let name = &p[1..e];
                cut = cut.min(at(p) + e);
                p = p.get(e + 2..).unwrap_or("");
                if name.is_empty() || name.len() > 8 {
                    return Err(format!(
                        "Listener tags must be between 1 and 8 characters: \"{name}\""
                    ));
                }
                tag = Some(name);
            }
        }
        // The address's own NULs: an IPv6 address's `]`, the port's `:`.
        let a = at(p);
        if p.starts_with('[') {
            if let Some(e) = p.find(']') {
                cut = cut.min(a + e);
            }
        } else if let Some(c) = p.find(':') {
            if !p[c + 1..].contains(':') {
                cut = cut.min(a + c);
            }
        }
        Ok(ListenEntry {
            tls,
            protocol,
            tag,
            addr: p,
            cut,
        })
    }
}

/// The `-l` list's entries, cut at `,` and `;` as memcached's `strtok(";,")`
/// cuts them (empty ones skipped).
pub fn listen_entries(list: &str) -> impl Iterator<Item = &str> {
    list.split([',', ';']).filter(|e| !e.is_empty())
}

#[cfg(test)]
mod tests;
