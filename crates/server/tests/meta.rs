//! The meta commands (`mg ms md ma mn me`) over real sockets, asserting exact reply
//! bytes. The expected bytes are memcached 1.6.45's (where they changed since 1.6.18,
//! the test says what 1.6.18 answered): every test passes with
//! `MEMCRAB_TEST_SERVER=/work/shared/memcached-1.6.45/bin/memcached cargo test -p
//! memcrab-server --test meta`, except that where memcrab deliberately differs the
//! test checks the server it runs against (`against_memcached()`) and says why:
//!
//! - memcached remembers per item whether its key was sent base64 (`b`) and echoes
//!   `k`/`me` keys accordingly; memcrab encodes when the *request* used `b`.
//!
//! CAS uniques are read back from the server (`mg <key> c`), never assumed. TTLs
//! (`t`) are checked against the two values a second boundary can give.

mod common;

use common::{against_memcached, Client, Server};

const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";

fn server() -> (Server, Client) {
    let s = Server::tcp(&[]);
    let c = s.connect();
    (s, c)
}

/// The item's CAS unique, from `me` (which changes nothing: no bump, no token).
fn cas_of(c: &mut Client, key: &str) -> u64 {
    c.send(format!("me {key}\r\n").as_bytes());
    let line = String::from_utf8(c.read_line()).expect("utf-8");
    line.split(' ')
        .find_map(|f| f.strip_prefix("cas="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected me reply {line:?}"))
}

/// Reads one line and checks it is one of `wants` (TTL replies can straddle a second).
#[track_caller]
fn expect_one_of(c: &mut Client, wants: &[&str]) {
    let line = String::from_utf8(c.read_line()).expect("utf-8");
    assert!(
        wants.iter().any(|w| *w == line),
        "got {line:?}, wanted one of {wants:?}"
    );
}

fn ms(key: &str, data: &[u8], flags: &str) -> Vec<u8> {
    let sep = if flags.is_empty() { "" } else { " " };
    let mut v = format!("ms {key} {}{sep}{flags}\r\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

#[test]
fn mn_and_quiet_mode_pipeline() {
    let (_s, mut c) = server();
    c.call(b"mn\r\n", b"MN\r\n");
    c.call(b"mn with tokens\r\n", b"MN\r\n");
    // Quiet: mg hides EN, ms and md hide HD; failures still answer.
    let mut req = Vec::new();
    req.extend_from_slice(b"mg a v q\r\n");
    req.extend_from_slice(&ms("b", b"1", "q"));
    req.extend_from_slice(&ms("b", b"1", "q ME"));
    req.extend_from_slice(b"md b q\r\nmd b q\r\nmn\r\n");
    c.call(&req, b"NS\r\nNF\r\nMN\r\n");
    // A hit under q still answers in mg (1.6.18 hides only the miss).
    c.call(&ms("h", b"v", ""), b"HD\r\n");
    c.call(
        b"mg h q\r\nmg h q v k\r\nmn\r\n",
        b"HD\r\nVA 1 kh\r\nv\r\nMN\r\n",
    );
    // Errors are never quiet.
    c.call(
        b"mg h q z\r\nmn\r\n",
        b"CLIENT_ERROR invalid flag\r\nMN\r\n",
    );
}

#[test]
fn mg_return_flags_in_request_order() {
    let (_s, mut c) = server();
    c.call(&ms("foo", b"hello", "F42"), b"HD\r\n");
    c.call(
        b"mg foo s v f k O123 t\r\n",
        b"VA 5 s5 f42 kfoo O123 t-1\r\nhello\r\n",
    );
    c.call(b"mg foo\r\n", b"HD\r\n");
    c.call(b"mg foo Oabc k\r\n", b"HD Oabc kfoo\r\n");
    let cas = cas_of(&mut c, "foo");
    c.call(b"mg foo c f\r\n", format!("HD c{cas} f42\r\n").as_bytes());
    // Misses echo only O and k.
    c.call(b"mg nope v s t c k Oxy\r\n", b"EN knope Oxy\r\n");
    c.call(b"mg nope\r\n", b"EN\r\n");
}

#[test]
fn mg_hit_and_access_flags() {
    let (_s, mut c) = server();
    c.call(&ms("k", b"v", ""), b"HD\r\n");
    // h/l show the state before this request's bump; u skips the bump.
    c.call(b"mg k h u\r\n", b"HD h0\r\n");
    c.call(b"mg k h\r\n", b"HD h0\r\n");
    c.call(b"mg k h l\r\n", b"HD h1 l0\r\n");
    c.call(b"mg k u h\r\n", b"HD h1\r\n");
}

#[test]
fn mg_touch_and_ttl_order() {
    let (_s, mut c) = server();
    c.call(&ms("k", b"v", "T100"), b"HD\r\n");
    c.send(b"mg k t\r\n");
    expect_one_of(&mut c, &["HD t100", "HD t99"]);
    // t before T shows the old TTL, after it the new one.
    c.send(b"mg k t T500\r\n");
    expect_one_of(&mut c, &["HD t100", "HD t99", "HD t98"]);
    c.send(b"mg k T30 t\r\n");
    expect_one_of(&mut c, &["HD t30", "HD t29"]);
    c.send(b"mg k T0 t\r\n");
    expect_one_of(&mut c, &["HD t-1"]);
    // A negative TTL expires the item at once.
    c.call(b"mg k T-1\r\nmg k\r\n", b"HD\r\nEN\r\n");
}

#[test]
fn ms_modes_and_invalid_mode() {
    let (_s, mut c) = server();
    // E: add. A: append. P: prepend. R: replace. S: set. Others: error, data swallowed.
    c.call(&ms("k", b"a", "ME"), b"HD\r\n");
    c.call(&ms("k", b"b", "ME"), b"NS\r\n");
    c.call(&ms("n", b"b", "MR"), b"NS\r\n");
    c.call(&ms("n", b"b", "MA"), b"NS\r\n");
    c.call(&ms("n", b"b", "MP"), b"NS\r\n");
    c.call(&ms("k", b">", "MA F9 T1"), b"HD\r\n");
    c.call(&ms("k", b"<", "MP"), b"HD\r\n");
    // Append/prepend keep the item's flags and TTL.
    c.call(b"mg k v f t\r\n", b"VA 3 f0 t-1\r\n<a>\r\n");
    c.call(&ms("k", b"r", "MR F3"), b"HD\r\n");
    c.call(&ms("k", b"s", "MS F4"), b"HD\r\n");
    c.call(b"mg k v f\r\n", b"VA 1 f4\r\ns\r\n");
    c.call(
        &ms("k", b"zz", "MX"),
        b"CLIENT_ERROR invalid mode for ms M token\r\n",
    );
    c.call(b"mg k v\r\n", b"VA 1\r\ns\r\n");
    // c returns the new CAS on success and 0 otherwise; k and O echo in order.
    c.send(&ms("k", b"x", "c k Oq"));
    let line = String::from_utf8(c.read_line()).expect("utf-8");
    let cas = cas_of(&mut c, "k");
    assert_eq!(line, format!("HD c{cas} kk Oq"));
    c.call(&ms("k", b"x", "ME c Oq k"), b"NS c0 Oq kk\r\n");
}

#[test]
fn ms_compare_cas_in_every_mode() {
    let (_s, mut c) = server();
    c.call(&ms("k", b"v", ""), b"HD\r\n");
    let cas = cas_of(&mut c, "k");
    let wrong = cas + 1000;
    c.call(&ms("k", b"w", &format!("C{wrong}")), b"EX\r\n");
    c.call(&ms("k", b"w", "C0"), b"EX\r\n");
    c.call(&ms("nokey", b"w", "C5"), b"NF\r\n");
    c.call(&ms("nokey", b"w", "C5 MR"), b"NF\r\n");
    c.call(&ms("k", b"w", &format!("C{wrong} MR")), b"EX\r\n");
    // Append compares a non-zero CAS; 0 does not compare.
    c.call(&ms("k", b"+", &format!("C{wrong} MA")), b"EX\r\n");
    c.call(&ms("k", b"+", "C0 MA"), b"HD\r\n");
    c.call(&ms("nokey", b"+", "C5 MA"), b"NS\r\n");
    // Add ignores the CAS.
    c.call(&ms("new", b"+", &format!("C{wrong} ME")), b"HD\r\n");
    let cas = cas_of(&mut c, "k");
    c.call(&ms("k", b"set", &format!("C{cas}")), b"HD\r\n");
    c.call(b"mg k v\r\n", b"VA 3\r\nset\r\n");
    assert_ne!(cas_of(&mut c, "k"), cas);
}

#[test]
fn md_flags_and_quiet() {
    let (_s, mut c) = server();
    c.call(b"md k\r\n", b"NF\r\n");
    c.call(b"md k q\r\n", b"NF\r\n");
    c.call(b"md k k Oab\r\n", b"NF kk Oab\r\n");
    c.call(&ms("k", b"v", ""), b"HD\r\n");
    let cas = cas_of(&mut c, "k");
    c.call(
        format!("md k C{} Oab k\r\n", cas + 1).as_bytes(),
        b"EX Oab kk\r\n",
    );
    c.call(b"md k C0\r\n", b"EX\r\n");
    // T without I is ignored; with q the HD is hidden.
    c.call(b"md k T30 q\r\nmn\r\n", b"MN\r\n");
    c.call(b"mg k\r\n", b"EN\r\n");
    c.call(&ms("k", b"v", ""), b"HD\r\n");
    let cas = cas_of(&mut c, "k");
    c.call(format!("md k C{cas} k\r\n").as_bytes(), b"HD kk\r\n");
}

/// protocol.txt "Stale-while-revalidate": md I marks stale; the first fetch wins
/// (W) and sees X; later fetches see Z; an older-CAS ms I stores but stays stale; a
/// matching CAS store makes the item fresh again.
/// `md x I` stores the empty item and marks it stale: `HD` even when its new TTL
/// has already passed (then nothing is left to read). Found by the differential
/// fuzzer.
#[test]
fn md_empty_and_invalidate_with_a_past_ttl() {
    let (_s, mut c) = server();
    c.call(&ms("k", b"v", ""), b"HD\r\n");
    c.call(b"md k x I T-1 k\r\nmg k v\r\n", b"HD kk\r\nEN\r\n");
    c.call(&ms("k", b"v", ""), b"HD\r\n");
    c.call(b"md k x I T-1 q\r\nmn\r\n", b"MN\r\n");
    c.call(&ms("k", b"v", ""), b"HD\r\n");
    c.call(b"md k x T-1\r\nmg k\r\n", b"HD\r\nEN\r\n");
}

#[test]
fn stale_while_revalidate() {
    let (_s, mut c) = server();
    c.call(&ms("k", b"old", "T100"), b"HD\r\n");
    let old = cas_of(&mut c, "k");
    c.call(b"md k I T30\r\n", b"HD\r\n");
    let stale = cas_of(&mut c, "k");
    assert_ne!(old, stale, "md I bumps the CAS");
    c.send(b"mg k v t\r\n");
    expect_one_of(&mut c, &["VA 3 t30 X W", "VA 3 t29 X W"]);
    c.expect(b"old\r\n");
    c.call(b"mg k v\r\n", b"VA 3 Z X\r\nold\r\n");
    c.call(b"mg k\r\n", b"HD Z X\r\n");
    // A stale-CAS set with I goes in, keeps the TTL and the stale/token state.
    c.call(&ms("k", b"mid", &format!("C{old} I T999")), b"HD\r\n");
    c.send(b"mg k v t\r\n");
    expect_one_of(&mut c, &["VA 3 t30 Z X", "VA 3 t29 Z X", "VA 3 t28 Z X"]);
    c.expect(b"mid\r\n");
    // Without I the older CAS is just a mismatch; a newer one too.
    c.call(&ms("k", b"bad", &format!("C{old}")), b"EX\r\n");
    let cur = cas_of(&mut c, "k");
    c.call(&ms("k", b"bad", &format!("C{} I", cur + 1000)), b"EX\r\n");
    c.call(&ms("k", b"new", &format!("C{cur}")), b"HD\r\n");
    c.call(b"mg k v\r\n", b"VA 3\r\nnew\r\n");
    // md I q is quiet; invalidating again hands out a fresh token.
    c.call(b"md k I q\r\nmg k\r\nmg k\r\n", b"HD X W\r\nHD Z X\r\n");
    c.call(b"md k I\r\nmg k\r\n", b"HD\r\nHD X W\r\n");
}

/// protocol.txt "Autovivification": the first client to miss gets an empty item
/// and the win (W); others see it with Z until the winner stores the real value.
#[test]
fn autovivify_race() {
    let s = Server::tcp(&[]);
    let mut a = s.connect();
    let mut b = s.connect();
    a.send(b"mg k N30 v t\r\n");
    expect_one_of(&mut a, &["VA 0 t30 W", "VA 0 t29 W"]);
    a.expect(b"\r\n");
    b.call(b"mg k N30 v\r\n", b"VA 0 Z\r\n\r\n");
    b.call(b"mg k v\r\n", b"VA 0 Z\r\n\r\n");
    let cas = cas_of(&mut a, "k");
    a.call(&ms("k", b"real", &format!("C{cas} T60")), b"HD\r\n");
    b.call(b"mg k N30 v\r\n", b"VA 4\r\nreal\r\n");
    // N with T: the created item takes the later of the two in request order.
    a.send(b"mg v2 T60 N30 t\r\n");
    expect_one_of(&mut a, &["HD t30 W", "HD t29 W"]);
    a.send(b"mg v3 N30 T60 t\r\n");
    expect_one_of(&mut a, &["HD t60 W", "HD t59 W"]);
    // t before N on a created item reports the TTL memcached allocated it with.
    a.call(b"mg v4 t N30\r\n", b"HD t-1 W\r\n");
}

/// The `mg` that vivifies an item bumps it like any fetch (memcached's delayed
/// `do_item_bump`), so the item is already fetched (`h1`, `me` `fetch=yes`) at the
/// next lookup, unless that `mg` had `u`. Found by the differential fuzzer.
#[test]
fn vivified_item_counts_as_fetched() {
    let (_s, mut c) = server();
    c.call(b"mg k N0 h\r\n", b"HD h0 W\r\n");
    c.call(b"mg k h\r\n", b"HD h1 Z\r\n");
    c.call(b"mg k2 N0\r\n", b"HD W\r\n");
    c.send(b"me k2\r\n");
    let line = String::from_utf8(c.read_line()).expect("utf-8");
    assert!(line.contains(" fetch=yes "), "{line:?}");
    c.call(b"mg k3 N0 u\r\n", b"HD W\r\n");
    c.call(b"mg k3 h\r\n", b"HD h0 Z\r\n");
}

/// An item whose exptime is 1 (a negative `T` or `N`: "already expired") reports
/// its `t` as `1 - current_time`, unsigned, and memcached's `current_time` starts at
/// 62 (`process_started` is `ITEM_UPDATE_INTERVAL + 2` seconds before the start),
/// 60 more than its `uptime`. Found by the differential fuzzer.
#[test]
fn negative_ttl_reports_memcacheds_clock() {
    let (_s, mut c) = server();
    c.call(&ms("k", b"v", ""), b"HD\r\n");
    // Retried until no second boundary falls between the two uptime readings.
    for _ in 0..5 {
        let before = c.stat("uptime");
        c.send(b"mg k T-1 t\r\nmg v N-1 t\r\n");
        let touched = String::from_utf8(c.read_line()).expect("utf-8");
        let vivified = String::from_utf8(c.read_line()).expect("utf-8");
        if c.stat("uptime") != before {
            continue;
        }
        let want = (1u64 << 32) + 1 - 60 - before;
        assert_eq!(touched, format!("HD t{want}"));
        assert_eq!(vivified, format!("HD t{want} W"));
        return;
    }
    panic!("the clock ticked during every attempt");
}

/// memcached stores an item over 512 KiB (its default `slab_chunk_max`) in chunks,
/// and incr/decr refuse a chunked item as non-numeric before comparing its CAS
/// unique or reading it. Key "k", flags 0, CAS on: 60 bytes of item besides the
/// value. Found by the differential fuzzer (memcrab answered EX, and incremented a
/// chunked number padded with spaces).
#[test]
fn delta_refuses_items_memcached_chunks() {
    let (_s, mut c) = server();
    const NON_NUMERIC: &[u8] = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
    let padded = |len: usize| {
        let mut v = b"7".to_vec();
        v.resize(len, b' ');
        v
    };
    c.call(&ms("k", &padded(524_228), ""), b"HD\r\n");
    let cas = cas_of(&mut c, "k");
    c.call(format!("ma k C{}\r\n", cas + 1).as_bytes(), b"EX\r\n");
    c.call(b"incr k 1\r\n", b"8\r\n");
    c.call(&ms("k", &padded(524_229), ""), b"HD\r\n");
    let cas = cas_of(&mut c, "k");
    c.call(format!("ma k C{}\r\n", cas + 1).as_bytes(), NON_NUMERIC);
    c.call(b"incr k 1\r\n", NON_NUMERIC);
    c.call(b"mg k s\r\n", b"HD s524229\r\n");
}

#[test]
fn recache_flag() {
    let (_s, mut c) = server();
    c.call(&ms("k", b"v", "T10"), b"HD\r\n");
    // Less than 30s left: the first R30 wins, the next sees Z.
    c.call(b"mg k R30\r\n", b"HD W\r\n");
    c.call(b"mg k R30\r\n", b"HD Z\r\n");
    c.call(&ms("far", b"v", "T100"), b"HD\r\n");
    c.call(b"mg far R30\r\n", b"HD\r\n");
    // Items that never expire never win.
    c.call(&ms("never", b"v", ""), b"HD\r\n");
    c.call(b"mg never R30\r\n", b"HD\r\n");
    // T before R: R compares the new TTL.
    c.call(b"mg far T5 R30\r\n", b"HD W\r\n");
}

#[test]
fn ma_modes_values_and_quiet() {
    let (_s, mut c) = server();
    c.call(b"ma n\r\n", b"NF\r\n");
    c.call(b"ma n q k\r\nmn\r\n", b"NF kn\r\nMN\r\n");
    c.call(b"ma n N0 J10 v t\r\n", b"VA 2 t-1\r\n10\r\n");
    c.call(b"ma n v\r\n", b"VA 2\r\n11\r\n");
    c.call(b"ma n MI D9 v\r\n", b"VA 2\r\n20\r\n");
    c.call(b"ma n M+ v\r\n", b"VA 2\r\n21\r\n");
    c.call(b"ma n MD D100 v\r\n", b"VA 1\r\n0\r\n");
    c.call(b"ma n M- v\r\n", b"VA 1\r\n0\r\n");
    c.call(
        b"ma n MX\r\n",
        b"CLIENT_ERROR invalid mode for ma M token\r\n",
    );
    // Quiet hides a success, also for an item N just created (1.6.18 showed that).
    c.call(b"ma n q\r\nma m q N0\r\nmn\r\n", b"MN\r\n");
    // (n was decremented to 0 in place from "21": "0 ", now "1 ".)
    c.call(b"mg n v\r\nmg m v\r\n", b"VA 2\r\n1 \r\nVA 1\r\n0\r\n");
    // In-place decrement pads with spaces, as incr/decr does.
    c.call(&ms("p", b"10", ""), b"HD\r\n");
    c.call(b"ma p MD v\r\nmg p v\r\n", b"VA 1\r\n9\r\nVA 2\r\n9 \r\n");
    // Wraps at 2^64.
    c.call(&ms("w", b"18446744073709551615", ""), b"HD\r\n");
    c.call(b"ma w D2 v\r\n", b"VA 1\r\n1\r\n");
    // CAS: a mismatch answers EX, C0 does not compare; c returns the new CAS.
    let cas = cas_of(&mut c, "n");
    c.call(format!("ma n C{} k\r\n", cas + 1).as_bytes(), b"EX kn\r\n");
    c.call(b"ma n C0 v\r\n", b"VA 1\r\n2\r\n");
    let cas = cas_of(&mut c, "n");
    c.send(format!("ma n C{cas} c\r\n").as_bytes());
    let line = String::from_utf8(c.read_line()).expect("utf-8");
    assert_eq!(line, format!("HD c{}", cas_of(&mut c, "n")));
    // Non-numeric values; an empty value is non-numeric before the CAS check.
    c.call(&ms("s", b"abc", ""), b"HD\r\n");
    c.call(
        b"ma s\r\n",
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
    c.call(b"ma s C1\r\n", b"EX\r\n");
    c.call(&ms("e", b"", ""), b"HD\r\n");
    c.call(
        b"ma e C1\r\n",
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
}

#[test]
fn ma_ttl_flags() {
    let (_s, mut c) = server();
    // A created item takes the later of N and T; t reports the TTL as it is then.
    c.send(b"ma a N100 J5 T7 t v\r\n");
    expect_one_of(&mut c, &["VA 1 t7", "VA 1 t6"]);
    c.expect(b"5\r\n");
    c.send(b"ma b T7 N100 J5 t v\r\n");
    expect_one_of(&mut c, &["VA 1 t100", "VA 1 t99"]);
    c.expect(b"5\r\n");
    c.call(b"ma c t N100\r\n", b"HD t-1\r\n");
    // On an existing item T applies; t before T shows the old TTL.
    c.send(b"ma b t T50\r\n");
    expect_one_of(&mut c, &["HD t100", "HD t99", "HD t98"]);
    c.send(b"mg b t\r\n");
    expect_one_of(&mut c, &["HD t50", "HD t49"]);
}

#[test]
fn base64_keys() {
    let (_s, mut c) = server();
    // "foobar"
    c.call(&ms("Zm9vYmFy", b"hi", "b k"), b"HD kZm9vYmFy b\r\n");
    c.call(b"mg Zm9vYmFy b k v\r\n", b"VA 2 kZm9vYmFy b\r\nhi\r\n");
    // Bytes outside the alphabet are skipped by memcached's decoder.
    c.call(b"mg Zm9v!YmFy b v\r\n", b"VA 2\r\nhi\r\n");
    c.call(b"mg Zm9vYmF b\r\n", b"CLIENT_ERROR error decoding key\r\n");
    c.call(
        &ms("Zm9vYmF", b"hi", "b"),
        b"CLIENT_ERROR error decoding key\r\n",
    );
    // md names the error since 1.6.45; ma does not.
    c.call(b"md Zm9vYmF b\r\n", b"CLIENT_ERROR error decoding key\r\n");
    c.call(
        b"ma Zm9vYmF b\r\n",
        b"CLIENT_ERROR invalid or duplicate flag\r\n",
    );
    // me decodes only when a fourth token follows the b (1.6.45 counts tokens
    // without 1.6.18's terminal one): here the key is the token as sent.
    c.call(b"me Zm9vYmF b\r\n", b"EN\r\n");
    c.call(b"me Zm9vYmF b x\r\n", BAD_FORMAT);
    // The decoded key is the item's key for every protocol.
    c.call(b"get foobar\r\n", b"VALUE foobar 0 2\r\nhi\r\nEND\r\n");
    // Binary bytes: "\x00\x01\x02".
    c.call(&ms("AAEC", b"bin", "b"), b"HD\r\n");
    c.call(b"mg AAEC b v k\r\n", b"VA 3 kAAEC b\r\nbin\r\n");
    c.call(
        b"ma AAEC b k\r\n",
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
    c.call(b"md AAEC b k q\r\nmd AAEC b k\r\n", b"NF kAAEC b\r\n");
    c.call(b"mg AAEC b k\r\n", b"EN kAAEC b\r\n");
    // memcached remembers the key was stored base64 and encodes it even for a plain
    // request; memcrab encodes keys only for requests that use b.
    let want: &[u8] = if against_memcached() {
        b"VA 2 kZm9vYmFy b\r\nhi\r\n"
    } else {
        b"VA 2 kfoobar\r\nhi\r\n"
    };
    c.call(b"mg foobar k v\r\n", want);
}

#[test]
fn me_debug_format() {
    let (_s, mut c) = server();
    c.call(b"me k\r\n", b"EN\r\n");
    c.call(b"me\r\n", BAD_FORMAT);
    c.call(&ms("k", b"hello", "F3"), b"HD\r\n");
    let cas = cas_of(&mut c, "k");
    // size = 48 (header) + 2 (key + NUL) + 4 (flags) + 7 (value + CRLF) + 8 (CAS).
    c.call(
        b"me k\r\n",
        format!("ME k exp=-1 la=0 cas={cas} fetch=no cls=1 size=69\r\n").as_bytes(),
    );
    c.call(b"mg k\r\n", b"HD\r\n");
    c.call(
        b"me k extra tokens\r\n",
        format!("ME k exp=-1 la=0 cas={cas} fetch=yes cls=1 size=69\r\n").as_bytes(),
    );
    c.call(&ms("big", &[b'x'; 100], ""), b"HD\r\n");
    let cas = cas_of(&mut c, "big");
    c.call(
        b"me big\r\n",
        format!("ME big exp=-1 la=0 cas={cas} fetch=no cls=4 size=162\r\n").as_bytes(),
    );
    // exp is the seconds left (1.6.18 printed `current_time - exptime`, -100 here).
    c.call(&ms("t", b"v", "T100"), b"HD\r\n");
    let cas = cas_of(&mut c, "t");
    c.send(b"me t\r\n");
    expect_one_of(
        &mut c,
        &[
            &format!("ME t exp=100 la=0 cas={cas} fetch=no cls=1 size=61"),
            &format!("ME t exp=99 la=0 cas={cas} fetch=no cls=1 size=61"),
            &format!("ME t exp=99 la=1 cas={cas} fetch=no cls=1 size=61"),
        ],
    );
    // Five answered me above (a malformed one is not counted), three in cas_of.
    assert_eq!(c.stat("cmd_meta"), 8);
}

#[test]
fn errors_exact() {
    let (_s, mut c) = server();
    let k251 = "k".repeat(251);
    let opaque33 = format!("O{}", "1".repeat(32));
    let cases: Vec<(Vec<u8>, &[u8])> = vec![
        (b"mx k\r\n".to_vec(), b"ERROR\r\n"),
        (b" mg k\r\n".to_vec(), b"ERROR\r\n"),
        // No key (1.6.18: ERROR).
        (b"mg\r\n".to_vec(), BAD_FORMAT),
        (b"ms\r\n".to_vec(), BAD_FORMAT),
        (b"md\r\n".to_vec(), BAD_FORMAT),
        (b"ma\r\n".to_vec(), BAD_FORMAT),
        (format!("mg {k251}\r\n").into_bytes(), BAD_FORMAT),
        (format!("md {k251}\r\n").into_bytes(), BAD_FORMAT),
        // ma answers every refusal of _meta_flag_preparse so (1.6.18: bad format).
        (
            format!("ma {k251}\r\n").into_bytes(),
            b"CLIENT_ERROR invalid or duplicate flag\r\n",
        ),
        (format!("me {k251}\r\n").into_bytes(), BAD_FORMAT),
        // ms reads its length first, so this swallows a data block (1.6.18 did not).
        (format!("ms {k251} 1\r\nx\r\n").into_bytes(), BAD_FORMAT),
        (b"mg k z\r\n".to_vec(), b"CLIENT_ERROR invalid flag\r\n"),
        (b"mg k v v\r\n".to_vec(), b"CLIENT_ERROR duplicate flag\r\n"),
        // A flag token that starts with neither a letter nor a digit refuses the
        // line (1.6.18: duplicate flag for a byte over 127, invalid flag else).
        (b"mg k \x80\r\n".to_vec(), BAD_FORMAT),
        (b"mg k v !\r\n".to_vec(), BAD_FORMAT),
        (b"md k {\r\n".to_vec(), BAD_FORMAT),
        (b"mg k 5\r\n".to_vec(), b"CLIENT_ERROR invalid flag\r\n"),
        (
            b"mg k Tx\r\n".to_vec(),
            b"CLIENT_ERROR bad token in command line format\r\n",
        ),
        (
            b"mg k N\r\n".to_vec(),
            b"CLIENT_ERROR bad token in command line format\r\n",
        ),
        (
            b"mg k R1x\r\n".to_vec(),
            b"CLIENT_ERROR bad token in command line format\r\n",
        ),
        (
            b"mg k Cx\r\n".to_vec(),
            b"CLIENT_ERROR bad token in command line format\r\n",
        ),
        (b"mg k Fx\r\n".to_vec(), BAD_FORMAT),
        (
            b"mg k Tx Fx\r\n".to_vec(),
            b"CLIENT_ERROR bad token in command line format\r\n",
        ),
        (
            b"mg k Jx\r\n".to_vec(),
            b"CLIENT_ERROR invalid numeric initial value\r\n",
        ),
        (
            b"mg k Dx\r\n".to_vec(),
            b"CLIENT_ERROR invalid numeric delta value\r\n",
        ),
        // md names its flag errors (1.6.18: invalid or duplicate flag).
        (
            b"md k Tx\r\n".to_vec(),
            b"CLIENT_ERROR bad token in command line format\r\n",
        ),
        (b"md k v v\r\n".to_vec(), b"CLIENT_ERROR duplicate flag\r\n"),
        (
            b"ma k q q\r\n".to_vec(),
            b"CLIENT_ERROR invalid or duplicate flag\r\n",
        ),
        (
            b"ma k Dx\r\n".to_vec(),
            b"CLIENT_ERROR invalid or duplicate flag\r\n",
        ),
        (
            format!("md k {opaque33}\r\n").into_bytes(),
            b"CLIENT_ERROR opaque token too long\r\n",
        ),
        (
            format!("mg k {opaque33}\r\n").into_bytes(),
            b"CLIENT_ERROR opaque token too long\r\n",
        ),
        (
            format!("ma k {opaque33}\r\n").into_bytes(),
            b"CLIENT_ERROR opaque token too long\r\n",
        ),
        // 21 tokens are too many, 20 are not (1.6.18 counted one more token, and
        // wrote "options flags too long" for md and ma).
        (
            b"mg k a b c d e f g h i j k l m n o p q r s\r\n".to_vec(),
            b"CLIENT_ERROR options flags are too long\r\n",
        ),
        (
            b"mg k a b c d e f g h i j k l m n o p q r\r\n".to_vec(),
            b"CLIENT_ERROR invalid flag\r\n",
        ),
        (
            b"md k a b c d e f g h i j k l m n o p q r s\r\n".to_vec(),
            b"CLIENT_ERROR options flags are too long\r\n",
        ),
        (
            b"ma k a b c d e f g h i j k l m n o p q r s\r\n".to_vec(),
            b"CLIENT_ERROR invalid or duplicate flag\r\n",
        ),
        (b"ms k\r\n".to_vec(), BAD_FORMAT),
        (b"ms k x\r\n".to_vec(), BAD_FORMAT),
        (b"ms k -1\r\n".to_vec(), BAD_FORMAT),
        (b"ms k 2147483646\r\n".to_vec(), BAD_FORMAT),
    ];
    for (req, want) in &cases {
        c.call(req, want);
    }
    c.sync();
    // An opaque of exactly 32 bytes is fine.
    let opaque32 = format!("O{}", "1".repeat(31));
    c.call(
        format!("mg k {opaque32}\r\n").as_bytes(),
        format!("EN {opaque32}\r\n").as_bytes(),
    );
    // 250-byte keys are fine.
    let k250 = "k".repeat(250);
    c.call(
        format!("mg {k250} k\r\n").as_bytes(),
        format!("EN k{k250}\r\n").as_bytes(),
    );
}

#[test]
fn ms_errors_swallow_the_data_block() {
    let (_s, mut c) = server();
    c.call(&ms("k", b"old", ""), b"HD\r\n");
    // Flag errors after the length: the data block is discarded.
    c.call(
        &ms("k", b"get k", "v v"),
        b"CLIENT_ERROR duplicate flag\r\n",
    );
    c.call(&ms("k", b"get k", "z"), b"CLIENT_ERROR invalid flag\r\n");
    c.call(
        &ms("k", b"get k", "Tx"),
        b"CLIENT_ERROR bad token in command line format\r\n",
    );
    c.call(&ms("k", b"get k", "Fx"), BAD_FORMAT);
    c.call(
        &ms("k", b"get k", "MX"),
        b"CLIENT_ERROR invalid mode for ms M token\r\n",
    );
    let opaque33 = format!("O{}", "1".repeat(32));
    c.call(
        &ms("k", b"get k", &opaque33),
        b"CLIENT_ERROR opaque token too long\r\n",
    );
    // The mode error wins over the opaque one.
    c.call(
        &ms("k", b"get k", &format!("{opaque33} MX")),
        b"CLIENT_ERROR invalid mode for ms M token\r\n",
    );
    // Errors before the length is known leave the block to be read as commands;
    // so does a flag token that the tokenizer refuses.
    c.call(
        b"ms k\r\nmn\r\n",
        b"CLIENT_ERROR bad command line format\r\nMN\r\n",
    );
    c.call(
        b"ms k 2 !\r\nmn\r\n",
        b"CLIENT_ERROR bad command line format\r\nMN\r\n",
    );
    // Every error after it swallows the block, too many flags included (1.6.18
    // refused those before reading the length).
    c.call(
        b"ms k 1 a b c d e f g h i j k l m n o p q r\r\nx\r\nmn\r\n",
        b"CLIENT_ERROR options flags are too long\r\nMN\r\n",
    );
    // A bad data chunk: the declared bytes and two more are consumed, then parsing
    // goes on. q does not hide it.
    c.call(
        b"ms k 2 q\r\nabcdmn\r\n",
        b"CLIENT_ERROR bad data chunk\r\nMN\r\n",
    );
    c.call(b"mg k v\r\n", b"VA 3\r\nold\r\n");
    // Too large: error, old value gone (in any mode), data swallowed.
    let big = vec![b'x'; 1024 * 1024];
    c.call(
        &ms("k", &big, "MA q"),
        b"SERVER_ERROR object too large for cache\r\n",
    );
    c.call(b"mg k v\r\n", b"EN\r\n");
    assert_eq!(c.stat("store_too_large"), 1);
}

#[test]
fn explicit_cas_flag() {
    // 1.6.27's E (1.6.18 answered `CLIENT_ERROR invalid flag`).
    let (_s, mut c) = server();
    c.call(&ms("k", b"v", "E77 c"), b"HD c77\r\n");
    c.call(b"mg k c v\r\n", b"VA 1 c77\r\nv\r\n");
    c.call(&ms("k", b"w", "C77 E78 c"), b"HD c78\r\n");
    c.call(b"md k I E90\r\nmg k c\r\n", b"HD\r\nHD c90 X W\r\n");
    c.call(b"mg viv N30 E5 c\r\n", b"HD c5 W\r\n");
    c.call(
        b"ma n N0 J1 E6 c\r\nma n E7 c v\r\n",
        b"HD c6\r\nVA 1 c7\r\n2\r\n",
    );
    c.call(
        b"mg k Ex\r\n",
        b"CLIENT_ERROR bad token in command line format\r\n",
    );
}

#[test]
fn cas_disabled() {
    let s = Server::tcp(&["-C"]);
    let mut c = s.connect();
    c.call(&ms("k", b"v", "c"), b"HD c0\r\n");
    c.call(b"mg k c\r\n", b"HD c0\r\n");
    c.call(&ms("k", b"v", "C0"), b"EX\r\n");
    c.call(&ms("k", b"v", "C5"), b"EX\r\n");
    c.call(&ms("k", b"+", "C5 MA"), b"HD\r\n");
    c.call(b"ma n N0 c\r\n", b"HD c0\r\n");
    c.call(b"md k C0\r\n", b"HD\r\n");
}

#[test]
fn stats_counters() {
    // memcached's crawler off, and a dead item its LRU maintainer reclaimed before
    // `mg e` looked allowed for below (as in commands/dead.rs).
    let s = Server::tcp(&["-o", "no_lru_crawler"]);
    let mut c = s.connect();
    let mut req = Vec::new();
    req.extend_from_slice(&ms("a", b"1", ""));
    req.extend_from_slice(b"mg a\r\nmg a T10\r\nmg nokey\r\nmg nokey T10\r\nmg v N10\r\n");
    req.extend_from_slice(&ms("a", b"1", "C99999 MR"));
    req.extend_from_slice(&ms("nokey", b"1", "C1"));
    req.extend_from_slice(&ms("a", b"1", "C0 MA"));
    req.extend_from_slice(b"md nokey\r\nmd a C99999\r\nmd a I\r\nmd a\r\n");
    req.extend_from_slice(b"ma n\r\nma n MD\r\nma n N0\r\nma n\r\nma n MD\r\nma n C99999\r\n");
    req.extend_from_slice(&ms("e", b"1", "T-1"));
    req.extend_from_slice(b"mg e\r\nmn\r\n");
    c.send(&req);
    c.expect(b"HD\r\nHD\r\nHD\r\nEN\r\nEN\r\nHD W\r\nEX\r\nNF\r\nHD\r\n");
    c.expect(b"NF\r\nEX\r\nHD\r\nHD\r\nNF\r\nNF\r\nHD\r\nHD\r\nHD\r\nEX\r\nHD\r\nEN\r\nMN\r\n");
    let st = c.stats("");
    let want = [
        ("cmd_get", 5),
        ("get_hits", 2),
        ("get_misses", 3),
        ("cmd_touch", 1),
        ("touch_hits", 1),
        ("touch_misses", 0),
        ("cmd_set", 5),
        ("cas_misses", 1),
        ("cas_hits", 0),
        ("cas_badval", 1),
        ("delete_hits", 1),
        ("delete_misses", 2),
        ("incr_hits", 1),
        ("incr_misses", 1),
        ("decr_hits", 1),
        ("decr_misses", 1),
    ];
    for (name, n) in want {
        assert_eq!(
            st.get(name).map(String::as_str),
            Some(n.to_string().as_str()),
            "{name}"
        );
    }
    let expired = st["get_expired"].as_str();
    assert!(
        expired == "1" || (against_memcached() && expired == "0" && st["reclaimed"] != "0"),
        "get_expired {expired}, reclaimed {}",
        st["reclaimed"]
    );
}

/// `ma T` when the number grows longer than the stored value ("9" → "10"):
/// memcached 1.6.18 links a new item and then applies T to the old one, so the TTL
/// is lost; memcrab keeps it, as it does when the number fits in place.
#[test]
fn ma_touch_when_the_number_grows() {
    let (_s, mut c) = server();
    c.call(&ms("fits", b"10", ""), b"HD\r\n");
    c.call(b"ma fits T100\r\n", b"HD\r\n");
    c.send(b"mg fits t v\r\n");
    expect_one_of(&mut c, &["VA 2 t100", "VA 2 t99"]);
    c.expect(b"11\r\n");
    c.call(&ms("grows", b"9", ""), b"HD\r\n");
    c.send(b"ma grows T100 t v\r\n");
    expect_one_of(&mut c, &["VA 2 t100", "VA 2 t99"]);
    c.expect(b"10\r\n");
    c.send(b"mg grows t v\r\n");
    if against_memcached() {
        expect_one_of(&mut c, &["VA 2 t-1"]);
    } else {
        expect_one_of(&mut c, &["VA 2 t100", "VA 2 t99"]);
    }
    c.expect(b"10\r\n");
}
