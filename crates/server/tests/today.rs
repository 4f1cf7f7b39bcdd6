//! What changed in memcached's protocols from 1.6.19 to 1.6.45, over real sockets,
//! asserting exact reply bytes. The expected bytes are memcached 1.6.45's: every test
//! passes with
//! `MEMCRAB_TEST_SERVER=$PWD/../shared/memcached-1.6.45/bin/memcached cargo test -p
//! memcrab-server --test today` (scripts/test runs it so). CAS uniques are read back
//! from the server, never assumed.
//!
//! - meta: `ms s` (1.6.20), `ms N` on append/prepend (1.6.20), `md x` (1.6.27), `mg
//!   C` with `v` (1.6.40), `R` (the item wins when its remaining TTL is below the
//!   token), the `M` token read by its first byte, flag numbers read strictly
//!   (1.6.42's mcmc converters), 32-bit client flags (the default build, 1.6.22);
//! - `lru_crawler metadump|mgdump`'s leading `OK` (1.6.43) and `flags=`;
//! - `slabs automove 2` and `slabs automove freeratio` (1.6.34) with their
//!   `stats settings` lines, `stats sizes_enable|disable` gone (1.6.25),
//!   `-X` refusing `stats detail` (text 1.6.37, binary 1.6.44);
//! - `VERSION` as the bare release number;
//! - flush_all unlinking what it flushes at once (1.6.25);
//! - the hardening of 1.6.41 to 1.6.45: inputs those releases fixed crashes or
//!   overruns on, answered as 1.6.45 answers them (not yet here: the stricter ASCII
//!   auth of `-Y`, which is the request step's; docs/compatibility.md).

mod common;

use common::{against_memcached, Client, Server};

const BAD_TOKEN: &[u8] = b"CLIENT_ERROR bad token in command line format\r\n";
const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";

fn server(args: &[&str]) -> (Server, Client) {
    let s = Server::tcp(args);
    let c = s.connect();
    (s, c)
}

/// `ms <key> <len> <flags>` and its data block.
fn ms(key: &str, data: &[u8], flags: &str) -> Vec<u8> {
    let mut v = format!("ms {key} {} {flags}\r\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

/// The item's CAS unique (`mg <key> c`; a stale item's `Z`/`X` may follow).
fn cas_of(c: &mut Client, key: &str) -> u64 {
    c.send(format!("mg {key} c\r\n").as_bytes());
    let line = String::from_utf8(c.read_line()).expect("utf-8");
    line.strip_prefix("HD c")
        .and_then(|n| n.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("mg {key} c: {line:?}"))
}

#[test]
fn ms_stored_size() {
    let (_s, mut c) = server(&[]);
    c.call(&ms("k", b"hello", "s"), b"HD s5\r\n");
    // After an append, the joined value's size; `c` and `s` in request order.
    c.send(&ms("k", b"abc", "MA s c"));
    let line = String::from_utf8(c.read_line()).expect("utf-8");
    assert_eq!(line, format!("HD s8 c{}", cas_of(&mut c, "k")));
    c.call(&ms("k", b"<", "MP s"), b"HD s9\r\n");
    c.call(b"mg k v s\r\n", b"VA 9 s9\r\n<helloabc\r\n");
    // A refused store reports the request's data length; q hides only HD.
    c.call(&ms("k", b"hello", "ME s c"), b"NS s5 c0\r\n");
    c.call(&ms("nope", b"abc", "MA s k O1"), b"NS s3 knope O1\r\n");
    c.call(&ms("k", b"hi", "s q"), b"");
    c.call(b"mn\r\n", b"MN\r\n");
}

#[test]
fn ms_append_autovivifies_with_n() {
    let (_s, mut c) = server(&[]);
    // A miss creates the item from the data, with N's TTL and F's flags.
    c.call(&ms("a", b"abc", "MA N100 s"), b"HD s3\r\n");
    c.call(b"mg a v t f\r\n", b"VA 3 t100 f0\r\nabc\r\n");
    c.call(&ms("p", b"xyz", "MP N0 F5"), b"HD\r\n");
    c.call(b"mg p v f t\r\n", b"VA 3 f5 t-1\r\nxyz\r\n");
    // A hit appends as usual, keeping the item's TTL.
    c.call(&ms("a", b"def", "MA N5"), b"HD\r\n");
    c.call(b"mg a v t\r\n", b"VA 6 t100\r\nabcdef\r\n");
    // Without N a miss is still NS.
    c.call(&ms("q", b"abc", "MA"), b"NS\r\n");
}

#[test]
fn md_x_empties_the_value() {
    let (_s, mut c) = server(&[]);
    c.call(&ms("a", b"hello", "T100 F7"), b"HD\r\n");
    let cas = cas_of(&mut c, "a");
    // The value goes; the CAS unique stays; flags and TTL are the request's (none).
    c.call(b"md a x\r\n", b"HD\r\n");
    c.call(
        b"mg a v f t c\r\n",
        format!("VA 0 f0 t-1 c{cas}\r\n\r\n").as_bytes(),
    );
    c.call(b"md a x T50 F3 k O9\r\n", b"HD ka O9\r\n");
    c.call(b"mg a f t\r\n", b"HD f3 t50\r\n");
    // With I: a stale tombstone with a new unique, which the next fetch wins.
    c.call(b"md a x I T30\r\n", b"HD\r\n");
    c.send(b"mg a v f t c\r\n");
    let line = String::from_utf8(c.read_line()).expect("utf-8");
    c.expect(b"\r\n");
    let newer = cas_of(&mut c, "a");
    assert_ne!(newer, cas);
    assert_eq!(line, format!("VA 0 f0 t30 c{newer} X W"));
    c.call(b"md a x q\r\n", b"");
    c.call(format!("md a x C{}\r\n", newer + 1).as_bytes(), b"EX\r\n");
    c.call(b"md zz x\r\n", b"NF\r\n");
    c.call(b"md zz x q\r\n", b"NF\r\n");
    c.call(b"mn\r\n", b"MN\r\n");
    // The other commands accept x and ignore it.
    c.call(b"ma zz x\r\n", b"NF\r\n");
    c.call(b"mg a x s\r\n", b"HD s0\r\n");
}

#[test]
fn mg_c_sends_the_value_only_when_changed() {
    let (_s, mut c) = server(&[]);
    c.call(&ms("b", b"hello", "T100"), b"HD\r\n");
    let cas = cas_of(&mut c, "b");
    let same = format!("mg b C{cas} v t\r\n");
    c.call(same.as_bytes(), b"HD t100\r\n");
    // Other flags act either way: T touches.
    c.call(
        format!("mg b C{cas} v T200 t\r\n").as_bytes(),
        b"HD t200\r\n",
    );
    c.call(
        format!("mg b C{} v s\r\n", cas + 1).as_bytes(),
        b"VA 5 s5\r\nhello\r\n",
    );
    // q hides only a miss.
    c.call(format!("mg b C{cas} v q\r\n").as_bytes(), b"HD\r\n");
    c.call(format!("mg zz C{cas} v q\r\nmn\r\n").as_bytes(), b"MN\r\n");
}

#[test]
fn mg_recache_wins_below_the_token() {
    let (_s, mut c) = server(&[]);
    c.call(&ms("r", b"hello", "T1000"), b"HD\r\n");
    c.call(b"mg r R100 v\r\n", b"VA 5\r\nhello\r\n");
    c.call(b"mg r R5000 v\r\n", b"VA 5 W\r\nhello\r\n");
    c.call(b"mg r R5000 v\r\n", b"VA 5 Z\r\nhello\r\n");
}

#[test]
fn meta_flag_numbers_are_strict() {
    let (_s, mut c) = server(&[]);
    c.call(&ms("k", b"hi", "T100"), b"HD\r\n");
    for bad in ["T+5", "T000000000005", "T", "N99999999999", "C+1", "R 5"] {
        let want: &[u8] = if bad == "R 5" {
            // `5` is a flag of its own, which mg does not know.
            b"CLIENT_ERROR invalid flag\r\n"
        } else {
            BAD_TOKEN
        };
        c.call(format!("mg k {bad} v\r\n").as_bytes(), want);
    }
    // A lone `-` reads as 0, as mcmc's converter reads it.
    c.call(b"mg k T- t\r\n", b"HD t-1\r\n");
    c.call(b"mg k T00000000100 t\r\n", b"HD t100\r\n");
    c.call(
        b"ma k J+5\r\n",
        b"CLIENT_ERROR invalid or duplicate flag\r\n",
    );
    c.call(b"mg k F+1\r\n", BAD_FORMAT);
    c.call(&ms("j", b"x", "F+7"), BAD_FORMAT);
    c.call(&ms("j", b"x", "F07"), b"HD\r\n");
    c.call(b"mg j f\r\n", b"HD f7\r\n");
}

#[test]
fn meta_m_token_reads_its_first_byte() {
    let (_s, mut c) = server(&[]);
    c.call(&ms("k", b"zz", "MSS"), b"HD\r\n");
    c.call(b"mg k MAB v\r\n", b"VA 2\r\nzz\r\n");
    c.call(
        &ms("k", b"zz", "M"),
        b"CLIENT_ERROR invalid mode for ms M token\r\n",
    );
    c.call(&ms("n", b"5", "MSX"), b"HD\r\n");
    c.call(b"ma n MIX v\r\n", b"VA 1\r\n6\r\n");
}

#[test]
fn client_flags_are_32_bit() {
    let (_s, mut c) = server(&[]);
    c.call(&ms("f", b"x", "F4294967295"), b"HD\r\n");
    c.call(b"mg f f\r\n", b"HD f4294967295\r\n");
    c.call(&ms("f", b"x", "F4294967296"), BAD_FORMAT);
    c.call(&ms("f", b"x", "F18446744073709551615"), BAD_FORMAT);
    c.call(b"mg f f\r\n", b"HD f4294967295\r\n");
    // The text protocol still wraps a larger number into 32 bits, as 1.6.18 did.
    c.call(b"set t 4294967297 0 1\r\nx\r\n", b"STORED\r\n");
    c.call(b"mg t f\r\n", b"HD f1\r\n");
    assert_eq!(c.stats("settings")["client_flags_size"], "4");
}

#[test]
fn version_is_the_release() {
    let (_s, mut c) = server(&[]);
    c.call(b"version\r\n", b"VERSION 1.6.45\r\n");
    let stats = c.stats("");
    assert_eq!(stats["version"], "1.6.45");
    if !against_memcached() {
        assert_eq!(stats["memcrab_version"], env!("CARGO_PKG_VERSION"));
    }
}

/// memcrab's own version goes where a person looks: `-V` (tests/server.rs) and the
/// first memcrab line logged under `-v`.
#[test]
fn memcrab_version_in_the_startup_log() {
    if against_memcached() {
        return;
    }
    let (s, mut c) = server(&["-v"]);
    c.call(b"version\r\n", b"VERSION 1.6.45\r\n");
    let want = format!(
        "memcrab {} (memcached 1.6.45 protocol)",
        env!("CARGO_PKG_VERSION")
    );
    let log = s.stderr();
    let first = log.lines().find(|l| l.starts_with("memcrab"));
    assert_eq!(first, Some(want.as_str()), "{log}");
}

/// Sends a dump request (again after memcached's `BUSY`: `common::start_dump`) and
/// reads its reply up to and including its last line (`END` or `EN`).
fn dump(c: &mut Client, req: &[u8], last: &[u8]) -> Vec<u8> {
    let mut got = common::start_dump(c, req);
    got.push(b'\n');
    while !got.ends_with(last) {
        got.extend_from_slice(&c.read_line_lf());
        got.push(b'\n');
        assert!(got.len() < 1 << 20, "no end: {}", common::show(&got));
    }
    got
}

#[test]
fn dumps_start_with_ok() {
    let (s, mut c) = server(&[]);
    c.call(&ms("a%b", b"x", "F9"), b"HD\r\n");
    let mut d = s.connect();
    let got = dump(&mut d, b"lru_crawler mgdump all\r\n", b"\nEN\r\n");
    assert_eq!(got, b"OK\r\nmg a%b\r\nEN\r\n");
    let mut d = s.connect();
    let got = dump(&mut d, b"lru_crawler metadump all\r\n", b"\nEND\r\n");
    let text = String::from_utf8(got).expect("utf-8");
    let body = text
        .strip_prefix("OK\r\nkey=a%25b exp=-1 la=")
        .unwrap_or_else(|| panic!("{text:?}"));
    assert!(body.ends_with(" flags=9 \nEND\r\n"), "{text:?}");
    assert!(body.contains(" fetch=no cls=1 size="), "{text:?}");
}

#[test]
fn admin_changes() {
    let (_s, mut c) = server(&[]);
    c.call(b"slabs automove 2\r\n", b"OK\r\n");
    c.call(b"slabs automove 3\r\n", b"ERROR\r\n");
    c.call(b"stats sizes_enable\r\n", b"ERROR\r\n");
    c.call(b"stats sizes_disable\r\n", b"ERROR\r\n");
    c.call(b"stats detail on\r\n", b"OK\r\n");
    c.call(b"stats detail off\r\n", b"OK\r\n");
    let (_s, mut c) = server(&["-X"]);
    c.call(
        b"stats detail dump\r\n",
        b"CLIENT_ERROR stats detail not allowed\r\n",
    );
    c.call(
        b"stats detail on\r\n",
        b"CLIENT_ERROR stats detail not allowed\r\n",
    );
    // Binary STAT "detail dump" under -X: KEY_ENOENT, as 1.6.44 (a connection's
    // first byte picks its protocol).
    let mut c = _s.connect();
    let key = b"detail dump";
    let mut req = vec![0x80, 0x10, 0, key.len() as u8, 0, 0, 0, 0];
    req.extend_from_slice(&(key.len() as u32).to_be_bytes());
    req.extend_from_slice(&[0; 12]);
    req.extend_from_slice(key);
    c.send(&req);
    let head = c.read_exact_bytes(24);
    assert_eq!(&head[..8], &[0x81, 0x10, 0, 0, 0, 0, 0, 1], "{head:?}");
    let len = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
    assert_eq!(c.read_exact_bytes(len), b"Not found");
}

/// flush_all (1.6.25) unlinks what it flushes before it answers: curr_items and bytes
/// drop at once, and a later lookup is a plain miss, not get_flushed. A delayed flush
/// leaves the items until it is due.
#[test]
fn flush_all_unlinks_at_once() {
    let (_s, mut c) = server(&[]);
    for i in 0..200 {
        c.call(
            format!("set k{i} 0 0 3\r\nabc\r\n").as_bytes(),
            b"STORED\r\n",
        );
    }
    assert_eq!(c.stat("curr_items"), 200);
    c.call(b"flush_all 1000\r\n", b"OK\r\n");
    assert_eq!(c.stat("curr_items"), 200);
    c.call(b"get k7\r\n", b"VALUE k7 0 3\r\nabc\r\nEND\r\n");
    c.call(b"flush_all\r\n", b"OK\r\n");
    let s = c.stats("");
    assert_eq!((&s["curr_items"][..], &s["bytes"][..]), ("0", "0"));
    c.call(b"get k1 k2\r\n", b"END\r\n");
    let s = c.stats("");
    assert_eq!((&s["get_flushed"][..], &s["get_misses"][..]), ("0", "2"));
    c.call(b"set after 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.call(b"flush_all noreply\r\nmn\r\n", b"MN\r\n");
    assert_eq!(c.stat("curr_items"), 0);
}

/// 1.6.41 to 1.6.45's hardening: the inputs of those fixes that are not the text
/// parser's line errors, answered as 1.6.45 answers them.
#[test]
fn hardening_inputs() {
    let (_s, mut c) = server(&[]);
    // "ascii: fix crash with invalid automove windows" (1.6.42).
    for w in ["0", "67108864"] {
        c.call(
            format!("slabs automove window {w}\r\n").as_bytes(),
            b"CLIENT_ERROR automove window too low or too high\r\n",
        );
    }
    c.call(b"slabs automove window 10\r\n", b"OK\r\n");
    // "core: fix crashes from `slabs reassign`" (1.6.41): invalid classes.
    for req in [
        "slabs reassign 31 64\r\n",
        "slabs reassign 1 64\r\n",
        "slabs reassign -1 2\r\n",
    ] {
        c.call(req.as_bytes(), b"BADCLASS invalid src or dst class id\r\n");
    }
    // "proto: convert more strto calls" (1.6.45): admin numbers read strictly.
    c.call(b"lru_crawler tocrawl 4294967296\r\n", BAD_FORMAT);
    c.call(b"lru_crawler tocrawl +5\r\n", BAD_FORMAT);
    c.call(b"lru_crawler tocrawl 5\r\n", b"OK\r\n");
    // "ascii: fix refcount leak on `ms` parse error" (1.6.44): the item stays usable.
    c.call(&ms("k", b"hello", "Tx"), BAD_TOKEN);
    c.call(&ms("k", b"hello", "T1 F-1"), BAD_FORMAT);
    c.call(&ms("k", b"hi", ""), b"HD\r\n");
    c.call(b"mg k v\r\n", b"VA 2\r\nhi\r\n");
    // "proto: armor against empty commands" (1.6.41): lines of spaces.
    c.call(b"   \r\n", b"ERROR\r\n");
    c.call(b"version\r\n", b"VERSION 1.6.45\r\n");
    // "ascii: fix potential overrun when given all spaces" (1.6.42): 64 KiB of
    // spaces without a newline closes the connection.
    let (_s, mut c) = server(&[]);
    c.send(&[b' '; 65535]);
    c.expect_closed();
}

/// "proto: fix crash in binary protocol" (1.6.41): a binary SET refused while
/// `watch mutations` runs; and "proto: fix signed overflow in bodylen" (1.6.44).
#[test]
fn hardening_binary() {
    let (s, mut c) = server(&["-I", "1k", "-o", "slab_chunk_max=1"]);
    let mut w = s.connect();
    w.call(b"watch mutations\r\n", b"OK\r\n");
    let key = b"big";
    let value = [b'v'; 2000];
    let body = 8 + key.len() + value.len();
    let mut req = vec![0x80, 0x01, 0, key.len() as u8, 8, 0, 0, 0];
    req.extend_from_slice(&(body as u32).to_be_bytes());
    req.extend_from_slice(&[0; 12]);
    req.extend_from_slice(&[0; 8]);
    req.extend_from_slice(key);
    req.extend_from_slice(&value);
    c.send(&req);
    let head = c.read_exact_bytes(24);
    assert_eq!(&head[..8], &[0x81, 0x01, 0, 0, 0, 0, 0, 3], "{head:?}");
    let len = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
    assert_eq!(c.read_exact_bytes(len), b"Too large.");
    s.connect().call(b"version\r\n", b"VERSION 1.6.45\r\n");
    // A GET whose body length is over i32::MAX: "Invalid arguments", then the
    // connection closes (1.6.44 no longer reads the length as signed).
    let mut c = s.connect();
    let mut req = vec![0x80, 0x00, 0, 1, 0, 0, 0, 0];
    req.extend_from_slice(&0x8000_0001u32.to_be_bytes());
    req.extend_from_slice(&[0; 12]);
    req.push(b'k');
    c.send(&req);
    let head = c.read_exact_bytes(24);
    assert_eq!(&head[..8], &[0x81, 0x00, 0, 0, 0, 0, 0, 4], "{head:?}");
    assert_eq!(c.read_exact_bytes(17), b"Invalid arguments");
    c.expect_closed();
}

/// The `stats settings` lines of `slabs automove`, in the order given, each as
/// `name value`.
fn automove_settings(c: &mut Client) -> Vec<String> {
    let st = c.stats_list("settings");
    let line = |name: &str| {
        st.iter()
            .find(|(n, _)| n == name)
            .map(|(n, v)| format!("{n} {v}"))
            .unwrap_or_else(|| panic!("no STAT {name}"))
    };
    [
        "slab_automove",
        "slab_automove_ratio",
        "slab_automove_window",
        "slab_automove_freeratio",
    ]
    .iter()
    .map(|n| line(n))
    .collect()
}

/// `slabs automove` in all its 1.6.45 forms: `<0|1|2>`, `ratio`, `window` (3 to
/// 1800, 1.6.42) and `freeratio` (1.6.34), each subcommand by any prefix, a ratio
/// as `strtod` reads it; and what `stats settings` shows of each, floats as glibc
/// prints them into memcached's 127-byte stat buffer. memcrab has no slab page
/// mover: it records the values and shows them.
#[test]
fn slabs_automove_forms() {
    let (_s, mut c) = server(&[]);
    assert_eq!(
        automove_settings(&mut c),
        [
            "slab_automove 1",
            "slab_automove_ratio 0.80",
            "slab_automove_window 10",
            "slab_automove_freeratio 0.010",
        ]
    );
    // memcached 1.6.45 prints freeratio among its extstore settings: after
    // track_sizes, before the TLS ones.
    let names: Vec<String> = c
        .stats_list("settings")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let at = |name: &str| names.iter().position(|n| n == name).expect(name);
    assert!(at("track_sizes") < at("slab_automove_freeratio"));
    assert!(at("slab_automove_freeratio") < at("ssl_enabled"));
    let rows: &[(&[u8], &[u8])] = &[
        (b"slabs automove freeratio 0.5\r\n", b"OK\r\n"),
        (b"slabs automove f 0.25\r\n", b"OK\r\n"),
        (b"slabs automove fr\r\n", b"ERROR\r\n"),
        (b"slabs automove freeratio x\r\n", b"ERROR\r\n"),
        (b"slabs automove freeratio 1e400\r\n", b"ERROR\r\n"),
        (
            b"slabs automove freeratio 12345678901234567890123456789012\r\n",
            b"ERROR\r\n",
        ),
        (b"slabs automove freeratios 1\r\n", BAD_FORMAT),
        (b"slabs automove freeratio x noreply\r\n", b""),
        (b"slabs automove freeratio 0.9 noreply\r\n", b""),
        (b"slabs automove fre 0.0005 x\r\n", b"OK\r\n"),
        (b"slabs automove r 0.125\r\n", b"OK\r\n"),
        (b"slabs automove w 30\r\n", b"OK\r\n"),
        (
            b"slabs automove window 1801\r\n",
            b"CLIENT_ERROR automove window too low or too high\r\n",
        ),
        (b"slabs automove window x\r\n", BAD_FORMAT),
        (b"slabs automove 2\r\n", b"OK\r\n"),
        (b"slabs auto 0\r\n", b"OK\r\n"),
    ];
    for (req, want) in rows {
        c.call(req, want);
        c.sync();
    }
    assert_eq!(
        automove_settings(&mut c),
        [
            "slab_automove 0",
            "slab_automove_ratio 0.12",
            "slab_automove_window 30",
            "slab_automove_freeratio 0.001",
        ]
    );
    // Any number is kept: negative, nan (glibc prints its sign), and long ones cut
    // at 126 bytes.
    c.call(b"slabs automove freeratio -nan\r\n", b"OK\r\n");
    c.call(b"slabs automove ratio 1e300\r\n", b"OK\r\n");
    c.call(b"slabs automove 1\r\n", b"OK\r\n");
    let ratio = "100000000000000005250476025520442024870446858110815915491585411551180245798890819578637137508044786404370444383288387817694252";
    assert_eq!(
        automove_settings(&mut c),
        [
            "slab_automove 1".to_string(),
            format!("slab_automove_ratio {ratio}"),
            "slab_automove_window 30".to_string(),
            "slab_automove_freeratio -nan".to_string(),
        ]
    );
    c.call(b"slabs automove freeratio -3\r\n", b"OK\r\n");
    assert_eq!(
        automove_settings(&mut c)[3],
        "slab_automove_freeratio -3.000"
    );
}
