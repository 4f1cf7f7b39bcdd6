//! Parsing the command line into [`Settings`]: each flag in command-line order,
//! `-o`'s sub-options, then memcached's rules for flags that go together; and
//! `-h`'s usage text.

use std::fmt::Write as _;
use std::sync::Arc;

use super::tls::{tls_suboption, TLS_SUBOPTIONS};
use super::{getopt, EngineKind, IoKind, Protocol, Settings};
use crate::startup::auth::{Format, Users};

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// Serve with these settings, and the users `-Y` or `-S` named (the server
    /// keeps them, and SIGHUP replaces them).
    Run {
        settings: Box<Settings>,
        users: Option<Arc<Users>>,
    },
    Help,
    Version,
    License,
}

/// memcached's `-o` sub-options that change nothing memcrab has and that
/// `stats settings` does not show: accepted, their values unchecked, as memcached
/// checks none of them (`no_hashexpand`: memcrab's index grows and shrinks on its
/// own; the privilege drop is seccomp's, which memcrab does not use).
const IGNORED_SUBOPTIONS: &[&str] = &["no_hashexpand", "drop_privileges", "no_drop_privileges"];

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{flag}: invalid number \"{v}\""))
}

/// A `-p`/`-U` port: 0 to 65535, or -1 for an ephemeral one (memcached's
/// `server_socket` binds port 0 for it).
fn port(flag: &str, v: &str) -> Result<i32, String> {
    let p: i32 = num(flag, v)?;
    if (-1..=i32::from(u16::MAX)).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{flag}: invalid number \"{v}\""))
    }
}

/// A size with an optional k/m suffix, as memcached's `-I`.
fn size(flag: &str, v: &str) -> Result<usize, String> {
    let v = v.trim();
    let (digits, mult) = match v.as_bytes().last() {
        Some(b'k' | b'K') => (&v[..v.len() - 1], 1024),
        Some(b'm' | b'M') => (&v[..v.len() - 1], 1024 * 1024),
        _ => (v, 1),
    };
    let n: usize = num(flag, digits)?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{flag}: size \"{v}\" is too large"))
}

/// Parses the arguments after the program name: the environment's defaults, each
/// flag in command-line order, then memcached's rules for flags that go together.
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Command, String> {
    let mut s = Settings::default();
    if let Ok(v) = std::env::var("MEMCRAB_IO") {
        s.io = IoKind::parse(Some(&v)).map_err(|e| format!("MEMCRAB_IO: {e}"))?;
    }
    let mut given = Given::default();
    for (c, value) in getopt::split(args)? {
        if let Some(cmd) = apply(&mut s, &mut given, c, value.unwrap_or_default())? {
            return Ok(cmd);
        }
    }
    pick_protocol(&mut s, given.protocol)?;
    let users = load_users(&mut s)?.map(Arc::new);
    check_udp(&mut s, given.port)?;
    check_consistency(&s)?;
    s.tuning.check(s.item_size_max, s.chunk_size)?;
    Ok(Command::Run {
        settings: Box::new(s),
        users,
    })
}

/// Flags whose presence, not only their value, later rules look at.
#[derive(Default)]
struct Given {
    /// `-p`: without it, `-U` sets the TCP port too.
    port: bool,
    /// `-B`: without it, `-S` and `-Y` pick the protocol.
    protocol: bool,
    /// `-l`: the first replaces the default address, later ones add to it.
    listen: bool,
}

/// One flag `c` with its value `v` (empty for a flag without one). Returns the
/// command when the flag is one (`-h`, `-i`, `-V`).
fn apply(
    s: &mut Settings,
    given: &mut Given,
    c: char,
    v: String,
) -> Result<Option<Command>, String> {
    let flag = format!("-{c}");
    let flag = flag.as_str();
    match c {
        'p' => {
            s.port = port(flag, &v)?;
            given.port = true;
        }
        'U' => s.udp_port = port(flag, &v)?,
        's' => s.unix_socket = Some(v),
        'a' => {
            s.unix_mask = u32::from_str_radix(v.trim(), 8)
                .map_err(|_| format!("-a: invalid octal mask \"{v}\""))?
        }
        'l' => {
            // Repeated -l adds addresses: memcached joins them with commas, and
            // skips one that its list already holds as a substring.
            if !given.listen {
                s.listen.clear();
                s.inter.clear();
                given.listen = true;
            } else if s.inter.contains(v.as_str()) {
                return Ok(None);
            } else {
                s.inter.push(',');
            }
            s.inter.push_str(&v);
            s.listen
                .extend(super::listen_entries(&v).map(|a| a.trim().to_string()));
        }
        'd' => s.daemonize = true,
        'r' => s.enable_coredumps = true,
        'u' => s.user = Some(v),
        'L' => {}
        'W' => s.watch_enabled = false,
        'X' => s.dump_enabled = false,
        'm' => s.memory_limit_mb = megabytes(flag, &v)?,
        'M' => s.no_evict = true,
        'c' => {
            s.max_connections = num(flag, &v)?;
            if s.max_connections == 0 {
                return Err("-c: Maximum connections must be greater than 0".into());
            }
        }
        'k' => s.lock_memory = true,
        'v' => s.verbose += 1,
        'h' => return Ok(Some(Command::Help)),
        'i' => return Ok(Some(Command::License)),
        'V' => return Ok(Some(Command::Version)),
        'P' => s.pid_file = Some(absolute(&v)),
        'f' => {
            // memcached reads it with atof (hexadecimal floats too).
            s.growth_factor = memcrab_proto::num::atof(v.as_bytes());
            if s.growth_factor <= 1.0 {
                return Err("-f: Factor must be greater than 1".into());
            }
        }
        'n' => {
            s.chunk_size = num(flag, &v)?;
            if s.chunk_size == 0 {
                return Err("-n: Chunk size must be greater than 0".into());
            }
        }
        'D' => {
            s.stat_prefix = v
                .chars()
                .next()
                .ok_or("-D: a delimiter character is required")?
        }
        't' => {
            s.threads = num(flag, &v)?;
            s.workers = s.threads;
            if s.threads == 0 {
                return Err("-t: Number of threads must be greater than 0".into());
            }
            if s.threads > 1024 {
                return Err("-t: at most 1024 threads".into());
            }
        }
        'R' => {
            s.reqs_per_event = num(flag, &v)?;
            if s.reqs_per_event == 0 {
                return Err("-R: Number of requests per event must be greater than 0".into());
            }
        }
        'C' => s.use_cas = false,
        'b' => s.backlog = num(flag, &v)?,
        'B' => {
            given.protocol = true;
            s.protocol = protocol(&v)?;
        }
        'I' => s.item_size_max = size(flag, &v)?,
        'S' => s.sasl = true,
        'Y' => s.auth_file = Some(v),
        'e' => s.memory_file = Some(v.into()),
        'F' => s.flush_enabled = false,
        'A' => s.shutdown_command = true,
        'o' => extended(s, &v)?,
        'Z' => s.tls.enabled = true,
        _ => return Err(format!("invalid option -- '{c}'")),
    }
    Ok(None)
}

/// The largest `-m` in megabytes whose byte count fits a u64 (the engine's limit is
/// in bytes).
const MEMORY_LIMIT_MB_MAX: u64 = u64::MAX >> 20;

/// `-m`: a plain number is megabytes. memcrab also takes a k/m/g suffix, where
/// memcached 1.6 reads the number with `atoi` (a suffix ends it: `-m 2048k` is
/// 2048 MB there) and multiplies in a `size_t`, which wraps; memcrab refuses a
/// limit whose bytes do not fit, as `-I` refuses a size that does not ([`size`]).
fn megabytes(flag: &str, v: &str) -> Result<u64, String> {
    let t = v.trim();
    let mb = match t.as_bytes().last() {
        Some(b'g' | b'G') => num::<u64>(flag, &t[..t.len() - 1])?.checked_mul(1024),
        Some(b'm' | b'M') => Some(num(flag, &t[..t.len() - 1])?),
        Some(b'k' | b'K') => Some(num::<u64>(flag, &t[..t.len() - 1])? / 1024),
        _ => Some(num(flag, t)?),
    }
    .filter(|&mb| mb <= MEMORY_LIMIT_MB_MAX)
    .ok_or_else(|| format!("{flag}: size \"{v}\" is too large"))?;
    if mb == 0 {
        return Err("-m: memory limit must be at least 1 megabyte".into());
    }
    Ok(mb)
}

/// `-B`.
fn protocol(v: &str) -> Result<Protocol, String> {
    match v {
        "auto" => Ok(Protocol::Auto),
        "ascii" => Ok(Protocol::Ascii),
        "binary" => Ok(Protocol::Binary),
        _ => Err(format!(
            "-B: Invalid value for binding protocol: {v} -- should be one of auto, binary, or ascii"
        )),
    }
}

/// memcached's rules: -S implies (and needs) binary, -Y ascii.
fn pick_protocol(s: &mut Settings, protocol_specified: bool) -> Result<(), String> {
    if s.sasl {
        if !protocol_specified {
            s.protocol = Protocol::Binary;
        } else if s.protocol != Protocol::Binary {
            return Err("-S: You cannot allow the ASCII protocol while using SASL.".into());
        }
    }
    if s.auth_file.is_some() {
        if !protocol_specified {
            s.protocol = Protocol::Ascii;
        } else if s.protocol != Protocol::Ascii {
            return Err(
                "-Y: You cannot allow the BINARY protocol while using ascii authentication tokens."
                    .into(),
            );
        }
    }
    if s.sasl && s.auth_file.is_some() {
        return Err("-S and -Y cannot be used together".into());
    }
    Ok(())
}

/// `-Y` and `-S` (with `MEMCACHED_SASL_PWDB`): the password file, read now so a bad
/// one stops startup. Its users, if either flag is given.
fn load_users(s: &mut Settings) -> Result<Option<Users>, String> {
    let mut users = None;
    if let Some(path) = &s.auth_file {
        users = Some(Users::load(path, Format::AuthFile).map_err(|e| format!("-Y: {e}"))?);
        s.users_file = Some(absolute(path));
    }
    if s.sasl {
        let Some(path) = std::env::var_os("MEMCACHED_SASL_PWDB") else {
            return Err(
                "-S: set MEMCACHED_SASL_PWDB to the password file (user:password per line)".into(),
            );
        };
        let path = path.to_string_lossy().into_owned();
        users = Some(
            Users::load(&path, Format::SaslPwdb)
                .map_err(|e| format!("-S: MEMCACHED_SASL_PWDB: {e}"))?,
        );
        s.users_file = Some(absolute(&path));
    }
    Ok(users)
}

/// `-U`: memcached's rules for UDP.
fn check_udp(s: &mut Settings, port_specified: bool) -> Result<(), String> {
    if s.udp_port != 0 {
        // memcached: `-U <n>` without `-p` serves TCP on the same port.
        if !port_specified {
            s.port = s.udp_port;
        }
        if s.sasl {
            return Err("-U: Cannot enable UDP while using binary SASL authentication.".into());
        }
        if s.auth_file.is_some() {
            return Err(
                "-U: Cannot use UDP with ascii authentication enabled (-U 0 to disable)".into(),
            );
        }
    }
    Ok(())
}

/// The rest of memcached's checks of flags that go together: `-e`, `-I`. (A `-l`
/// TLS prefix without `-Z` fails later, where memcached's `server_sockets` fails
/// it: `io/net.rs`'s `bind`.)
fn check_consistency(s: &Settings) -> Result<(), String> {
    if s.memory_file.is_some() && s.engine != EngineKind::Seg {
        return Err("-e: a memory file needs the segment engine (-o engine=seg)".into());
    }
    if s.item_size_max < 1024 {
        return Err("-I: Item max size cannot be less than 1024 bytes.".into());
    }
    if s.item_size_max > 1024 * 1024 * 1024 {
        return Err("-I: Cannot set item size limit higher than a gigabyte.".into());
    }
    if s.item_size_max as u64 > s.memory_limit_mb * 1024 * 1024 / 2 {
        return Err("-I: Cannot set item size limit higher than 1/2 of memory max.".into());
    }
    Ok(())
}

/// `path` made absolute against the current directory (`-d` changes it to `/`
/// before the path is used); unchanged if it is already absolute or the current
/// directory cannot be read.
fn absolute(path: &str) -> String {
    std::path::absolute(path)
        .ok()
        .and_then(|p| p.into_os_string().into_string().ok())
        .unwrap_or_else(|| path.to_string())
}

/// The most slow log entries `-o slowlog_len` keeps (each holds at most a 250-byte
/// key and its client's address).
pub const SLOWLOG_LEN_MAX: usize = 65_536;

/// `on` or `off` (a bare name is `on`).
fn on_off(what: &str, value: Option<&str>) -> Result<bool, String> {
    match value {
        None | Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(v) => Err(format!("{what}: \"{v}\" is neither on nor off")),
    }
}

fn extended(s: &mut Settings, list: &str) -> Result<(), String> {
    for opt in list.split(',').filter(|o| !o.is_empty()) {
        let (name, value) = match opt.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (opt, None),
        };
        let need =
            |what: &str| value.ok_or_else(|| format!("-o: Missing numeric argument for {what}"));
        match name {
            "idle_timeout" => s.idle_timeout_secs = num("-o idle_timeout", need(name)?)?,
            "hashpower" => {
                let hp: u8 = num("-o hashpower", need(name)?)?;
                if hp < 12 {
                    return Err(format!(
                        "-o hashpower: Initial hashtable multiplier of {hp} is too low"
                    ));
                }
                if hp > 32 {
                    return Err(format!(
                        "-o hashpower: Initial hashtable multiplier of {hp} is too high"
                    ));
                }
                s.hash_power = hp;
                s.tuning.hashpower_init = hp;
            }
            "track_sizes" => s.track_sizes = true,
            // memcached: `no_lru_crawler` (and `no_modern`, the 1.4 defaults) start
            // without the LRU crawler (`stats settings`: `lru_crawler no`; key dumps
            // answer that it is disabled until `lru_crawler enable`); the rest of
            // what `no_modern` changes tunes machines memcrab does not have.
            "lru_crawler" => s.lru_crawler = true,
            "no_lru_crawler" => s.lru_crawler = false,
            "resp_obj_mem_limit" => {
                // memcached 1.6.45 warns and goes on.
                eprintln!("DEPRECATED: resp_obj_mem_limit no longer used. See read_buf_mem_limit,");
            }
            "watcher_logbuf_size" => {
                let kib: usize = num("-o watcher_logbuf_size", need(name)?)?;
                s.watcher_buf_bytes = kib
                    .checked_mul(1024)
                    .ok_or("-o watcher_logbuf_size: too large")?;
            }
            "engine" => match value {
                Some("seg") => s.engine = EngineKind::Seg,
                Some("reference") => s.engine = EngineKind::Reference,
                other => {
                    return Err(format!(
                        "-o engine: unknown engine \"{}\" (available: seg, reference)",
                        other.unwrap_or("")
                    ))
                }
            },
            "io" => s.io = IoKind::parse(value)?,
            "value_lend_min" => s.value_lend_min = num("-o value_lend_min", need(name)?)?,
            "metrics_listen" => match value {
                Some(v) if v.contains(':') => s.metrics_listen = Some(v.to_string()),
                _ => return Err("-o metrics_listen: needs HOST:PORT".into()),
            },
            "latency" => s.latency = on_off("-o latency", value)?,
            "latency_clock" => {
                s.monotonic_clock = match value {
                    Some("tsc") => false,
                    Some("monotonic") => true,
                    v => {
                        return Err(format!(
                            "-o latency_clock: \"{}\" is neither tsc nor monotonic",
                            v.unwrap_or("")
                        ))
                    }
                }
            }
            "hotkeys" => s.hotkeys = on_off("-o hotkeys", value)?,
            "slowlog_us" => s.slowlog_us = num("-o slowlog_us", need(name)?)?,
            "slowlog_len" => {
                s.slowlog_len = num("-o slowlog_len", need(name)?)?;
                if s.slowlog_len == 0 || s.slowlog_len > SLOWLOG_LEN_MAX {
                    return Err(format!("-o slowlog_len: 1..={SLOWLOG_LEN_MAX}"));
                }
            }
            _ if TLS_SUBOPTIONS.contains(&name) => tls_suboption(&mut s.tls, name, value)?,
            _ if let Some(r) = s.tuning.suboption(name, value) => {
                r.map_err(|e| format!("-o {name}: {e}"))?;
                if name == "no_modern" {
                    s.lru_crawler = false;
                }
            }
            _ if IGNORED_SUBOPTIONS.contains(&name) => {}
            _ => return Err(format!("-o: Illegal suboption \"{opt}\"")),
        }
    }
    Ok(())
}

/// `-h`.
pub fn usage() -> String {
    let mut u = String::new();
    let _ = writeln!(
        u,
        "memcrab {} — a memcached-compatible cache server",
        env!("CARGO_PKG_VERSION")
    );
    u.push_str(
        "\
-p, --port=<num>          TCP port to listen on (default: 11211)
-U, --udp-port=<num>      UDP port to listen on (default: 0, off; see README on
                          amplification before enabling)
-s, --unix-socket=<file>  UNIX socket to listen on (disables network support)
-a, --unix-mask=<mask>    access mask for the UNIX socket, in octal (default: 700)
-l, --listen=<addr>       interfaces to listen on, separated by ',' or ';', each
                          addr or addr:port (default: 127.0.0.1; memcached binds
                          all), optionally after proto[<ascii|binary|negotiating>]:
                          (that listener's protocol) and tag[<name>]: (accepted;
                          it names a listener for memcached's proxy only)
-d, --daemon              run as a daemon
-u, --user=<user>         assume the identity of <user> (only when run as root,
                          where it is required)
-r, --enable-coredumps    maximize core file limit
-m, --memory-limit=<num>  item memory in megabytes (default: 64)
-M, --disable-evictions   return an error when memory is full instead of evicting
-c, --conn-limit=<num>    max simultaneous connections (default: 1024)
-k, --lock-memory         lock down all paged memory (mlockall)
-v, --verbose             verbose (print errors/warnings); -vv, -vvv more
-h, --help                print this help and exit
-i, --license             print the license and exit
-V, --version             print version and exit
-P, --pidfile=<file>      save the PID in <file>
-f, --slab-growth-factor  memcrab has no slab classes; sets those `me` and `watch`
                          report (default: 1.25)
-n, --slab-min-size       as -f (default: 48)
-L, --enable-largepages   accepted for compatibility; no effect
-D <char>                 stats prefix delimiter for `stats detail` (default: ':')
-t, --threads=<num>       worker threads (default: 4; at most the usable CPUs run)
-R, --max-reqs-per-event  requests served per connection per event (default: 20)
-C, --disable-cas         disable use of CAS
-b, --listen-backlog=<num> listen backlog (default: 1024)
-B, --protocol=<name>     ascii, binary or auto (default: auto; -S: binary, -Y: ascii)
-I, --max-item-size=<num> max item size, k/m suffix (default: 1m; 1k..1024m, at most -m/2)
-S, --enable-sasl         SASL PLAIN over the binary protocol; users and passwords
                          from the file named by $MEMCACHED_SASL_PWDB (user:password)
-Y, --auth-file=<file>    ASCII protocol authentication; file of user:password lines
-F, --disable-flush-all   disable flush_all
-X, --disable-dumping     refuse key dumps (lru_crawler metadump and mgdump)
-W, --disable-watch       disable watch commands (live logging)
-A, --enable-shutdown     enable the shutdown command (`shutdown graceful` saves as SIGUSR1)
-e, --memory-file=<file>  keep item memory in <file> (tmpfs, e.g. /dev/shm/memcrab) for a
                          warm restart: SIGUSR1 or `shutdown graceful` saves <file>.meta
                          and exits; the next start with the same -m/-I/-C comes back warm
-o, --extended            comma separated: idle_timeout=<secs>, hashpower=<12..32>,
                          engine=seg|reference (default seg), track_sizes (enables
                          `stats sizes`), watcher_logbuf_size=<KB> (log lines a `watch`
                          client may have waiting, default 256); memcached's
                          slab, LRU, crawler, hash and logger options are checked
                          as memcached 1.6.45 checks them and shown in `stats
                          settings`, but tune nothing segments have;
                          io=uring|epoll: the connection transport (default uring,
                          or the MEMCRAB_IO environment variable; uring falls back
                          to epoll where the kernel refuses io_uring);
                          value_lend_min=<bytes>: values this long or longer are
                          sent from item memory instead of copied (default 4096;
                          0 never; plain TCP and unix connections only);
                          metrics_listen=<host:port>: serve Prometheus' /metrics
                          there, on a thread of its own (default off);
                          latency=on|off: per-command latency histograms (`stats
                          latency`, default on); latency_clock=tsc|monotonic: what
                          requests are timed with (default tsc where the kernel
                          reports a constant counter, else monotonic);
                          hotkeys=on|off: sampled hot keys (`stats hotkeys`,
                          default on); slowlog_us=<us>: requests
                          this slow or slower enter the slow log (`stats slowlog`,
                          `watch slowlog`; default 0, off); slowlog_len=<n>: slow
                          log entries kept (default 128)
-Z, --enable-ssl          enable TLS on TCP listeners; a -l entry's prefix 'notls:',
                          'btls:' or 'mtls:' makes that listener plain, TLS asking no
                          client certificate, or TLS requiring one (mtls:127.0.0.1:11212)
   - ssl_chain_cert:      certificate chain file in PEM format
   - ssl_key:             private key file (PEM, or DER with ssl_keyformat=2)
   - ssl_keyformat:       private key format: 1 PEM (default), 2 DER
   - ssl_verify_mode:     peer certificate verification mode, default is 0(None).
                          valid values are 0(None), 1(Request), 2(Require)
                          or 3(Once)
   - ssl_ciphers:         OpenSSL cipher list for TLS 1.2 (TLS 1.3 suites are all on)
   - ssl_ca_cert:         PEM format file of acceptable client CA's
   - ssl_wbuf_size:       size in kilobytes of per-connection SSL output buffer
                          (default: 16)
   - ssl_session_cache:   enable server-side SSL session cache, to support session
                          resumption (default: stateless session tickets)
   - ssl_kernel_tls:      kernel TLS offload: not available (refused)
   - ssl_min_version:     minimum protocol version to accept (default: tlsv1.2)
                          valid values are 0(tlsv1.0), 1(tlsv1.1), 2(tlsv1.2), or 3(tlsv1.3);
                          TLS 1.0 and 1.1 are never offered, so 0 and 1 mean tlsv1.2
",
    );
    u
}
