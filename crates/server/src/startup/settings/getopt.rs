//! getopt's conventions over memcached's flag table: `-p11211`, `-p 11211`,
//! `--port=11211`, `--port 11211`, bundled `-vvv`.

/// Flags: (short, long, takes a value).
pub const FLAGS: &[(char, &str, bool)] = &[
    ('p', "port", true),
    ('U', "udp-port", true),
    ('s', "unix-socket", true),
    ('a', "unix-mask", true),
    ('l', "listen", true),
    ('d', "daemon", false),
    ('r', "enable-coredumps", false),
    ('u', "user", true),
    ('m', "memory-limit", true),
    ('M', "disable-evictions", false),
    ('c', "conn-limit", true),
    ('k', "lock-memory", false),
    ('v', "verbose", false),
    ('h', "help", false),
    ('i', "license", false),
    ('V', "version", false),
    ('P', "pidfile", true),
    ('f', "slab-growth-factor", true),
    ('n', "slab-min-size", true),
    ('L', "enable-largepages", false),
    ('D', "stats-prefix-delimiter", true),
    ('t', "threads", true),
    ('R', "max-reqs-per-event", true),
    ('C', "disable-cas", false),
    ('b', "listen-backlog", true),
    ('B', "protocol", true),
    ('I', "max-item-size", true),
    ('S', "enable-sasl", false),
    ('F', "disable-flush-all", false),
    ('X', "disable-dumping", false),
    ('W', "disable-watch", false),
    ('Y', "auth-file", true),
    ('e', "memory-file", true),
    ('A', "enable-shutdown", false),
    ('o', "extended", true),
    ('Z', "enable-ssl", false),
];

/// Splits the arguments into (short flag, value) pairs, long forms turned into their
/// short letter, in command-line order.
pub fn split<I: IntoIterator<Item = String>>(
    args: I,
) -> Result<Vec<(char, Option<String>)>, String> {
    let mut pairs: Vec<(char, Option<String>)> = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let Some(&(c, _, takes)) = FLAGS.iter().find(|f| f.1 == name) else {
                return Err(format!("unrecognized option '--{name}'"));
            };
            let value = if takes {
                match inline {
                    Some(v) => Some(v),
                    None => Some(
                        args.next()
                            .ok_or_else(|| format!("option '--{name}' requires an argument"))?,
                    ),
                }
            } else if inline.is_some() {
                return Err(format!("option '--{name}' doesn't allow an argument"));
            } else {
                None
            };
            pairs.push((c, value));
        } else if let Some(shorts) = arg.strip_prefix('-').filter(|s| !s.is_empty()) {
            for (i, c) in shorts.char_indices() {
                let Some(&(_, _, takes)) = FLAGS.iter().find(|f| f.0 == c) else {
                    return Err(format!("invalid option -- '{c}'"));
                };
                if takes {
                    let rest = &shorts[i + c.len_utf8()..];
                    let value = if rest.is_empty() {
                        args.next()
                            .ok_or_else(|| format!("option requires an argument -- '{c}'"))?
                    } else {
                        rest.to_string()
                    };
                    pairs.push((c, Some(value)));
                    break;
                }
                pairs.push((c, None));
            }
        } else {
            return Err(format!("unexpected argument \"{arg}\""));
        }
    }

    Ok(pairs)
}
