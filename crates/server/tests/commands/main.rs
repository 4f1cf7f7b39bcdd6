//! Every classic text-protocol command and every error reply, against the real binary,
//! asserting exact reply bytes. The expected bytes are memcached 1.6.45's (checked by
//! running this file with
//! `MEMCRAB_TEST_SERVER=/work/shared/memcached-1.6.45/bin/memcached`).
//!
//! The protocol tests run twice, over TCP and over a unix socket (`-s`): the
//! `transport_tests!` list at the bottom makes a `tcp::` and a `unix::` test of each.
//! Beside this file: framing.rs (line framing and data blocks, both transports, its
//! own `transport_tests!` list); stats.rs, dead.rs (dead items met by any command,
//! text, meta and binary) and time.rs (over TCP only).

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{cat, store, value, Server};

const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
const INVALID_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";
const INVALID_DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta argument\r\n";
const NON_NUMERIC: &[u8] = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
/// memcached's default `-I` (1 MiB).
const ITEM_SIZE_MAX: usize = 1024 * 1024;

fn key(len: usize) -> String {
    "k".repeat(len)
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

// ---------------------------------------------------------------------------------
// Protocol tests, run over both transports.

fn set_and_get(s: &Server) {
    let mut c = s.connect();
    c.call(&store("set", "a", 5, 0, b"abc"), b"STORED\r\n");
    c.call(b"get a\r\n", &cat(&[&value("a", 5, b"abc"), b"END\r\n"]));
    // Overwrite; an empty value; a value holding protocol bytes.
    c.call(&store("set", "a", 0, 0, b""), b"STORED\r\n");
    c.call(b"get a\r\n", b"VALUE a 0 0\r\n\r\nEND\r\n");
    c.call(&store("set", "a", 0, 0, b"x\r\nEND\r\n"), b"STORED\r\n");
    c.call(
        b"get a\r\n",
        &cat(&[&value("a", 0, b"x\r\nEND\r\n"), b"END\r\n"]),
    );
    // gets adds the CAS unique.
    let cas = c.gets_cas("a");
    assert_ne!(cas, 0, "CAS is on by default");
    // A 7th token that is not `noreply` is ignored.
    c.call(b"set a 0 0 1 junk\r\nz\r\n", b"STORED\r\n");
    c.call(b"get a\r\n", &cat(&[&value("a", 0, b"z"), b"END\r\n"]));
    // Too few tokens: 1.6.45's process_request answers bad command line format,
    // and no data block is read (the sentinel after it is answered).
    c.call(b"set a 0 0\r\n", BAD_FORMAT);
    c.call(b"set\r\n", BAD_FORMAT);
    // `noreply` counts only as the last token: here it is the ignored 6th one, and
    // the set is answered.
    c.call(b"set a 0 0 1 noreply x\r\ny\r\n", b"STORED\r\n");
    c.call(b"get a\r\n", &cat(&[&value("a", 0, b"y"), b"END\r\n"]));
    c.call(&store("set", "a", 0, 0, b"z"), b"STORED\r\n");
    // A bad flags or exptime with a good length: the error, and the data block is
    // swallowed (1.6.45's process_update_cmd_start, then conn_swallow).
    c.call(b"set a x 0 1\r\ny\r\n", BAD_FORMAT);
    c.call(b"set a 0 x 1\r\ny\r\n", BAD_FORMAT);
    // A bad length: nothing to swallow, so the data line is then a command (a
    // one-token line, itself bad command line format).
    c.call(b"set a 0 0 x\r\ny\r\n", &cat(&[BAD_FORMAT, BAD_FORMAT]));
    c.call(b"get a\r\n", &cat(&[&value("a", 0, b"z"), b"END\r\n"]));
}

fn flags_range(s: &Server) {
    let mut c = s.connect();
    c.call(&store("set", "f", u32::MAX, 0, b"x"), b"STORED\r\n");
    c.call(b"get f\r\n", b"VALUE f 4294967295 1\r\nx\r\nEND\r\n");
    // memcached parses flags as an unsigned long and truncates to 32 bits.
    c.call(b"set f 4294967296 0 1\r\nx\r\n", b"STORED\r\n");
    c.call(b"get f\r\n", b"VALUE f 0 1\r\nx\r\nEND\r\n");
    c.call(b"set f 4294967301 0 1\r\nx\r\n", b"STORED\r\n");
    c.call(b"get f\r\n", b"VALUE f 5 1\r\nx\r\nEND\r\n");
    // Out of range: refused, and the data block swallowed.
    c.call(b"set f -1 0 1\r\nx\r\n", BAD_FORMAT);
    c.call(b"set f 18446744073709551616 0 1\r\nx\r\n", BAD_FORMAT);
    c.call(b"get f\r\n", b"VALUE f 5 1\r\nx\r\nEND\r\n");
}

fn add_replace_append_prepend(s: &Server) {
    let mut c = s.connect();
    c.call(&store("add", "a", 1, 0, b"one"), b"STORED\r\n");
    c.call(&store("add", "a", 2, 0, b"two"), b"NOT_STORED\r\n");
    c.call(b"get a\r\n", &cat(&[&value("a", 1, b"one"), b"END\r\n"]));

    c.call(&store("replace", "r", 0, 0, b"x"), b"NOT_STORED\r\n");
    c.call(b"get r\r\n", b"END\r\n");
    c.call(&store("replace", "a", 3, 0, b"uno"), b"STORED\r\n");
    c.call(b"get a\r\n", &cat(&[&value("a", 3, b"uno"), b"END\r\n"]));

    c.call(&store("append", "p", 0, 0, b"x"), b"NOT_STORED\r\n");
    c.call(&store("prepend", "p", 0, 0, b"x"), b"NOT_STORED\r\n");
    c.call(b"get p\r\n", b"END\r\n");
    c.call(&store("set", "p", 7, 0, b"mid"), b"STORED\r\n");
    // append/prepend keep the item's flags; theirs are ignored.
    c.call(&store("append", "p", 9, 0, b">>"), b"STORED\r\n");
    c.call(&store("prepend", "p", 9, 0, b"<<"), b"STORED\r\n");
    c.call(
        b"get p\r\n",
        &cat(&[&value("p", 7, b"<<mid>>"), b"END\r\n"]),
    );
    c.call(b"add\r\n", BAD_FORMAT);
    c.call(b"append p 0 0\r\n", BAD_FORMAT);
}

fn cas_command(s: &Server) {
    let mut c = s.connect();
    c.call(b"cas c 0 0 1 1\r\nx\r\n", b"NOT_FOUND\r\n");
    c.call(&store("set", "c", 0, 0, b"v1"), b"STORED\r\n");
    let cas = c.gets_cas("c");
    c.call(
        format!("cas c 0 0 2 {}\r\nv2\r\n", cas.wrapping_add(1)).as_bytes(),
        b"EXISTS\r\n",
    );
    c.call(b"get c\r\n", &cat(&[&value("c", 0, b"v1"), b"END\r\n"]));
    c.call(
        format!("cas c 4 0 2 {cas}\r\nv3\r\n").as_bytes(),
        b"STORED\r\n",
    );
    c.call(b"get c\r\n", &cat(&[&value("c", 4, b"v3"), b"END\r\n"]));
    // The unique changed with the store, so the old one no longer matches.
    c.call(
        format!("cas c 0 0 2 {cas}\r\nv4\r\n").as_bytes(),
        b"EXISTS\r\n",
    );
    let cas2 = c.gets_cas("c");
    assert_ne!(cas, cas2, "a store must change the CAS unique");
    // Any store changes it, not only cas.
    c.call(&store("set", "c", 0, 0, b"v5"), b"STORED\r\n");
    let cas3 = c.gets_cas("c");
    assert_ne!(cas2, cas3);
    // Errors: a missing or bad unique is refused and the data block swallowed.
    c.call(b"cas c 0 0 1\r\nx\r\n", BAD_FORMAT);
    c.call(b"cas c 0 0 1 x\r\nx\r\n", BAD_FORMAT);
    c.call(b"cas c 0 0 1 -1\r\nx\r\n", BAD_FORMAT);
    c.call(b"get c\r\n", &cat(&[&value("c", 0, b"v5"), b"END\r\n"]));
}

fn get_many_keys(s: &Server) {
    let mut c = s.connect();
    c.call(b"get nope\r\n", b"END\r\n");
    c.call(b"gets nope other\r\n", b"END\r\n");
    c.call(b"get\r\n", BAD_FORMAT);
    c.call(b"gets\r\n", BAD_FORMAT);
    // 100 keys (well past memcached's 24-token tokenizer window), every third one
    // stored, a missing key between each.
    let keys: Vec<String> = (0..100).map(|i| format!("key{i}")).collect();
    let mut want = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        if i % 3 == 0 {
            c.call(&store("set", k, i as u32, 0, k.as_bytes()), b"STORED\r\n");
            want.extend_from_slice(&value(k, i as u32, k.as_bytes()));
        }
    }
    want.extend_from_slice(b"END\r\n");
    c.call(format!("get {}\r\n", keys.join(" ")).as_bytes(), &want);
    // A key repeated is returned each time; runs of spaces collapse.
    c.call(
        b"get key0  key0   key1 key0\r\n",
        &cat(&[
            &value("key0", 0, b"key0"),
            &value("key0", 0, b"key0"),
            &value("key0", 0, b"key0"),
            b"END\r\n",
        ]),
    );
}

/// Replies far over the output limit (256 KiB) complete without the client writing
/// anything more: a multi-get that pauses at the limit resumes when the socket
/// drains, and so does a pipeline whose replies fill the output buffer.
fn large_replies_complete_without_more_input(s: &Server) {
    let mut c = s.connect();
    let data = [b'v'; 20];
    c.call(&store("set", "k", 0, 0, &data), b"STORED\r\n");
    // One get of one key 30,000 times: about 1 MB of replies.
    let n = 30_000;
    let mut line = b"get".to_vec();
    for _ in 0..n {
        line.extend_from_slice(b" k");
    }
    line.extend_from_slice(b"\r\n");
    let one = value("k", 0, &data);
    let mut want = one.repeat(n);
    want.extend_from_slice(b"END\r\n");
    c.call(&line, &want);
    // 2,000 pipelined gets of a 1000-byte value: about 2 MB of replies.
    let big = [b'b'; 1000];
    c.call(&store("set", "big", 0, 0, &big), b"STORED\r\n");
    let gets = b"get big\r\n".repeat(2000);
    let mut want = value("big", 0, &big);
    want.extend_from_slice(b"END\r\n");
    c.call(&gets, &want.repeat(2000));
    c.sync();
}

fn key_length_limit(s: &Server) {
    let mut c = s.connect();
    let k250 = key(250);
    let k251 = key(251);
    c.call(&store("set", &k250, 0, 0, b"x"), b"STORED\r\n");
    c.call(
        format!("get {k250}\r\n").as_bytes(),
        &cat(&[&value(&k250, 0, b"x"), b"END\r\n"]),
    );
    // 1.6.45's process_get_command_err answers the error line and then an empty
    // line.
    let get_err = cat(&[BAD_FORMAT, b"\r\n"]);
    c.call(format!("get {k251}\r\n").as_bytes(), &get_err);
    c.call(format!("gets {k251}\r\n").as_bytes(), &get_err);
    // A long key anywhere in a multi-get: the whole reply is the error, with no
    // VALUE for the keys before it and no END.
    c.call(&store("set", "a", 0, 0, b"x"), b"STORED\r\n");
    c.call(format!("get a {k251} a\r\n").as_bytes(), &get_err);
    let mut many: Vec<String> = (0..30).map(|_| "a".to_string()).collect();
    many.push(k251.clone());
    c.call(format!("get {}\r\n", many.join(" ")).as_bytes(), &get_err);
    c.call(format!("gat 0 {k251}\r\n").as_bytes(), &get_err);
    // Storage, delete, incr, touch with a long key.
    // A storage line with a long key swallows its data block.
    c.call(format!("set {k251} 0 0 1\r\nx\r\n").as_bytes(), BAD_FORMAT);
    c.call(format!("delete {k251}\r\n").as_bytes(), BAD_FORMAT);
    c.call(format!("incr {k251} 1\r\n").as_bytes(), BAD_FORMAT);
    c.call(format!("touch {k251} 1\r\n").as_bytes(), BAD_FORMAT);
    c.sync();
}

fn gat_and_gats(s: &Server) {
    let mut c = s.connect();
    c.call(&store("set", "g", 3, 0, b"gv"), b"STORED\r\n");
    c.call(
        b"gat 100 g nope\r\n",
        &cat(&[&value("g", 3, b"gv"), b"END\r\n"]),
    );
    c.call(b"gat 100 nope\r\n", b"END\r\n");
    // gats carries the CAS unique, and touching does not change it.
    let cas = c.gets_cas("g");
    c.call(
        b"gats 100 g\r\n",
        format!("VALUE g 3 2 {cas}\r\ngv\r\nEND\r\n").as_bytes(),
    );
    c.call(b"gat x g\r\n", INVALID_EXPTIME);
    c.call(b"gats x g\r\n", INVALID_EXPTIME);
    c.call(b"gat 100\r\n", BAD_FORMAT);
    c.call(b"gat\r\n", BAD_FORMAT);
    // Many keys.
    let mut line = "gat 0".to_string();
    for _ in 0..40 {
        line.push_str(" g nope");
    }
    line.push_str("\r\n");
    let mut want = Vec::new();
    for _ in 0..40 {
        want.extend_from_slice(&value("g", 3, b"gv"));
    }
    want.extend_from_slice(b"END\r\n");
    c.call(line.as_bytes(), &want);
}

fn touch_command(s: &Server) {
    let mut c = s.connect();
    c.call(b"touch t 10\r\n", b"NOT_FOUND\r\n");
    c.call(&store("set", "t", 0, 0, b"x"), b"STORED\r\n");
    c.call(b"touch t 10\r\n", b"TOUCHED\r\n");
    c.call(b"touch t 0\r\n", b"TOUCHED\r\n");
    c.call(b"touch t x\r\n", INVALID_EXPTIME);
    c.call(b"touch t\r\n", BAD_FORMAT);
    // Tokens past the exptime are ignored.
    c.call(b"touch t 0 2 3\r\n", b"TOUCHED\r\n");
    c.call(b"get t\r\n", &cat(&[&value("t", 0, b"x"), b"END\r\n"]));
    // A negative exptime expires the item at once.
    c.call(b"touch t -1\r\n", b"TOUCHED\r\n");
    c.call(b"get t\r\n", b"END\r\n");
}

fn delete_command(s: &Server) {
    let mut c = s.connect();
    c.call(b"delete d\r\n", b"NOT_FOUND\r\n");
    c.call(&store("set", "d", 0, 0, b"x"), b"STORED\r\n");
    c.call(b"delete d\r\n", b"DELETED\r\n");
    c.call(b"get d\r\n", b"END\r\n");
    c.call(b"delete d\r\n", b"NOT_FOUND\r\n");
    // 1.6.45's process_delete_cmd ignores what follows the key (1.6.18
    // refused a hold time other than 0): each of these deletes. `noreply` counts
    // only as the last token.
    for line in [
        &b"delete d 0\r\n"[..],
        b"delete d 1\r\n",
        b"delete d x\r\n",
        b"delete d 0 x\r\n",
        b"delete d 0 noreply x\r\n",
    ] {
        c.call(&store("set", "d", 0, 0, b"x"), b"STORED\r\n");
        c.call(line, b"DELETED\r\n");
        c.call(b"get d\r\n", b"END\r\n");
    }
    c.call(b"delete\r\n", BAD_FORMAT);
    for line in [&b"delete d 1 noreply\r\n"[..], b"delete d 0 noreply\r\n"] {
        c.call(&store("set", "d", 0, 0, b"x"), b"STORED\r\n");
        c.send(line);
        c.sync();
        c.call(b"get d\r\n", b"END\r\n");
    }
}

fn incr_decr(s: &Server) {
    let mut c = s.connect();
    c.call(b"incr n 1\r\n", b"NOT_FOUND\r\n");
    c.call(b"decr n 1\r\n", b"NOT_FOUND\r\n");
    c.call(&store("set", "n", 5, 0, b"10"), b"STORED\r\n");
    // decr rewrites in place: a shorter number is padded with spaces, as memcached.
    c.call(b"decr n 1\r\n", b"9\r\n");
    c.call(b"get n\r\n", b"VALUE n 5 2\r\n9 \r\nEND\r\n");
    c.call(b"incr n 1\r\n", b"10\r\n");
    c.call(b"get n\r\n", b"VALUE n 5 2\r\n10\r\nEND\r\n");
    // 1.6.45 parses the delta strictly: a sign is refused.
    c.call(b"incr n +5\r\n", INVALID_DELTA);
    c.call(b"incr n 5\r\n", b"15\r\n");
    // Growing past the stored length makes a new value.
    c.call(b"incr n 85\r\n", b"100\r\n");
    c.call(b"get n\r\n", b"VALUE n 5 3\r\n100\r\nEND\r\n");
    // decr floors at 0.
    c.call(b"decr n 1000\r\n", b"0\r\n");
    c.call(b"get n\r\n", b"VALUE n 5 3\r\n0  \r\nEND\r\n");
    // incr wraps at 2^64.
    c.call(
        &store("set", "w", 0, 0, b"18446744073709551615"),
        b"STORED\r\n",
    );
    c.call(b"incr w 1\r\n", b"0\r\n");
    c.call(
        &store("set", "w", 0, 0, b"18446744073709551614"),
        b"STORED\r\n",
    );
    c.call(b"incr w 3\r\n", b"1\r\n");
    c.call(
        b"get w\r\n",
        b"VALUE w 0 20\r\n1                   \r\nEND\r\n",
    );
    c.call(b"incr w 18446744073709551615\r\n", b"0\r\n");
    // Bad deltas.
    c.call(b"incr w x\r\n", INVALID_DELTA);
    c.call(b"incr w -1\r\n", INVALID_DELTA);
    c.call(b"decr w 18446744073709551616\r\n", INVALID_DELTA);
    c.call(b"incr w\r\n", BAD_FORMAT);
    c.call(b"incr\r\n", BAD_FORMAT);
    // Non-numeric values.
    c.call(&store("set", "s", 0, 0, b"abc"), b"STORED\r\n");
    c.call(b"incr s 1\r\n", NON_NUMERIC);
    c.call(b"decr s 1\r\n", NON_NUMERIC);
    c.call(&store("set", "s", 0, 0, b"12a"), b"STORED\r\n");
    c.call(b"incr s 1\r\n", NON_NUMERIC);
    c.call(&store("set", "s", 0, 0, b""), b"STORED\r\n");
    c.call(b"incr s 1\r\n", NON_NUMERIC);
    c.call(b"get s\r\n", b"VALUE s 0 0\r\n\r\nEND\r\n");
    // Numbers are parsed as safe_strtoull does, whatever their length: leading
    // zeros, surrounding spaces, and a NUL where strtoull stops.
    c.call(
        &store("set", "z", 0, 0, b"00000000000000000000012"),
        b"STORED\r\n",
    );
    c.call(b"incr z 1\r\n", b"13\r\n");
    c.call(
        b"get z\r\n",
        b"VALUE z 0 23\r\n13                     \r\nEND\r\n",
    );
    c.call(&store("set", "z", 0, 0, b"  7    "), b"STORED\r\n");
    c.call(b"decr z 2\r\n", b"5\r\n");
    c.call(&store("set", "z", 0, 0, b"7\0x"), b"STORED\r\n");
    c.call(b"incr z 1\r\n", b"8\r\n");
    c.call(
        &store("set", "z", 0, 0, b"99999999999999999999999"),
        b"STORED\r\n",
    );
    c.call(b"incr z 1\r\n", NON_NUMERIC);
}

/// Every command that takes `noreply`: nothing comes back, and the marker that
/// follows gets its own reply first, so the stream is still in sync.
fn noreply_everywhere(s: &Server) {
    let mut c = s.connect();
    let quiet: &[&[u8]] = &[
        b"set a 1 0 1 noreply\r\nx\r\n",
        b"add a 0 0 1 noreply\r\ny\r\n",
        b"add b 0 0 1 noreply\r\nb\r\n",
        b"replace a 2 0 2 noreply\r\nxx\r\n",
        b"replace nope 0 0 1 noreply\r\nz\r\n",
        b"append a 0 0 1 noreply\r\n>\r\n",
        b"prepend a 0 0 1 noreply\r\n<\r\n",
        b"append nope 0 0 1 noreply\r\nz\r\n",
        b"cas a 0 0 1 1 noreply\r\nz\r\n",
        b"cas nope 0 0 1 1 noreply\r\nz\r\n",
        b"set n 0 0 1 noreply\r\n5\r\n",
        b"incr n 10 noreply\r\n",
        b"decr n 3 noreply\r\n",
        b"incr nope 1 noreply\r\n",
        b"incr a 1 noreply\r\n",
        b"incr n x noreply\r\n",
        b"touch a 0 noreply\r\n",
        b"touch nope 0 noreply\r\n",
        b"touch a x noreply\r\n",
        b"delete b noreply\r\n",
        b"delete nope noreply\r\n",
        b"delete nope 1 noreply\r\n",
        b"verbosity 0 noreply\r\n",
        b"verbosity x noreply\r\n",
        b"flush_all x noreply\r\n",
        // A bad flags: silent, and the data block is still swallowed.
        b"set f x 0 1 noreply\r\nx\r\n",
        // 1.6.45's process_request silences an unknown command under noreply too.
        b"bogus noreply\r\n",
    ];
    for req in quiet {
        c.send(req);
        c.sync();
    }
    // All of them at once, too.
    c.send(&quiet.concat());
    c.sync();
    // A bad length is answered even under noreply: without a length there is no
    // data block to swallow, so the error is what keeps the stream readable.
    c.call(b"set f 0 0 x noreply\r\n", BAD_FORMAT);
    c.call(
        b"get a b n\r\n",
        &cat(&[&value("a", 2, b"<xx>"), &value("n", 0, b"12"), b"END\r\n"]),
    );
    let cas = c.gets_cas("a");
    c.send(format!("cas a 3 0 1 {cas} noreply\r\nc\r\n").as_bytes());
    c.call(b"get a\r\n", &cat(&[&value("a", 3, b"c"), b"END\r\n"]));
    c.send(b"flush_all noreply\r\n");
    c.call(b"get a n\r\n", b"END\r\n");
    c.send(b"flush_all 0 noreply\r\n");
    c.sync();
}

fn flush_all_now(s: &Server) {
    let mut c = s.connect();
    c.call(&store("set", "a", 0, 0, b"x"), b"STORED\r\n");
    c.call(&store("set", "b", 0, 0, b"y"), b"STORED\r\n");
    c.call(b"flush_all\r\n", b"OK\r\n");
    c.call(b"get a b\r\n", b"END\r\n");
    // Items stored after the flush are there.
    c.call(&store("set", "a", 0, 0, b"x"), b"STORED\r\n");
    c.call(b"get a\r\n", &cat(&[&value("a", 0, b"x"), b"END\r\n"]));
    c.call(b"flush_all 0\r\n", b"OK\r\n");
    c.call(b"get a\r\n", b"END\r\n");
    c.call(&store("set", "a", 0, 0, b"x"), b"STORED\r\n");
    c.call(b"flush_all -1\r\n", b"OK\r\n");
    c.call(b"get a\r\n", b"END\r\n");
    c.call(b"flush_all x\r\n", INVALID_EXPTIME);
    // Tokens past the delay are ignored.
    c.call(&store("set", "a", 0, 0, b"x"), b"STORED\r\n");
    c.call(b"flush_all 0 2 3\r\n", b"OK\r\n");
    c.call(b"get a\r\n", b"END\r\n");
    c.send(b"flush_all 0 noreply\r\n");
    c.sync();
}

fn version_and_verbosity(s: &Server) {
    let mut c = s.connect();
    c.send(b"version\r\n");
    let line = c.read_line();
    // The memcached release, `X.Y.Z` and nothing after it (memcrab answers the
    // release it implements, 1.6.45; tests/today.rs checks that exact number).
    let v = line.strip_prefix(b"VERSION ").unwrap_or(b"");
    assert!(
        v.starts_with(b"1.6.") && v.iter().all(|b| b.is_ascii_digit() || *b == b'.'),
        "version line {}",
        common::show(&line)
    );
    c.call(b"verbosity 1\r\n", b"OK\r\n");
    c.call(b"verbosity 5\r\n", b"OK\r\n");
    c.call(b"verbosity 1 x\r\n", b"OK\r\n");
    c.call(b"verbosity 0\r\n", b"OK\r\n");
    c.call(b"verbosity\r\n", BAD_FORMAT);
    c.call(b"verbosity 1 2 3\r\n", b"OK\r\n");
    c.call(b"verbosity x\r\n", BAD_FORMAT);
    c.call(b"verbosity -1\r\n", BAD_FORMAT);
    c.send(b"verbosity 1 noreply\r\n");
    c.sync();
}

fn cache_memlimit(s: &Server) {
    let mut c = s.connect();
    c.call(b"cache_memlimit 100\r\n", b"OK\r\n");
    c.call(
        b"cache_memlimit 7\r\n",
        b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n",
    );
    c.call(
        b"cache_memlimit 0\r\n",
        b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n",
    );
    c.call(
        b"cache_memlimit 2000000000\r\n",
        b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n",
    );
    c.call(b"cache_memlimit x\r\n", b"ERROR\r\n");
    c.call(b"cache_memlimit -1\r\n", b"ERROR\r\n");
    c.call(b"cache_memlimit\r\n", b"ERROR\r\n");
    c.send(b"cache_memlimit 64 noreply\r\n");
    c.sync();
    c.send(b"cache_memlimit 1 noreply\r\n");
    c.sync();
    c.call(b"cache_memlimit 8\r\n", b"OK\r\n");
    assert_eq!(c.stats("settings")["maxbytes"], "8388608");
    assert_eq!(c.stats("")["limit_maxbytes"], "8388608");
    c.call(b"cache_memlimit 64\r\n", b"OK\r\n");
    assert_eq!(c.stats("")["limit_maxbytes"], "67108864");
}

fn quit_closes(s: &Server) {
    let mut c = s.connect();
    c.call(b"quit\r\n", b"");
    c.expect_closed();
    // Replies before a quit in the same write are delivered; nothing after it runs.
    let mut c = s.connect();
    c.call(&store("set", "q", 0, 0, b"1"), b"STORED\r\n");
    c.send(b"get q\r\nquit\r\nincr q 1\r\n");
    c.expect(&cat(&[&value("q", 0, b"1"), b"END\r\n"]));
    c.expect_closed();
    let mut c = s.connect();
    c.call(b"get q\r\n", &cat(&[&value("q", 0, b"1"), b"END\r\n"]));
}

fn unknown_commands(s: &Server) {
    let mut c = s.connect();
    for line in [
        &b"bogus\r\n"[..],
        b"foo bar baz\r\n",
        b"GET a\r\n",
        b"sett a 0 0 1\r\n",
        b"gett a\r\n",
        b"get\ta\r\n",
        b"get\0 a\r\n",
        b"stats_bogus\r\n",
    ] {
        c.call(line, b"ERROR\r\n");
    }
    // A line under 4 bytes with its newline is not looked up: 1.6.45's
    // process_request answers bad command line format (1.6.18 said ERROR).
    for line in [&b"\r\n"[..], b"\n", b"x\r\n", b"ab\n"] {
        c.call(line, BAD_FORMAT);
    }
    c.sync();
}

fn shutdown_not_enabled(s: &Server) {
    let mut c = s.connect();
    // 1.6.45's process_shutdown_command answers SERVER_ERROR (1.6.18: ERROR).
    const NOT_ENABLED: &[u8] = b"SERVER_ERROR: shutdown not enabled\r\n";
    c.call(b"shutdown\r\n", NOT_ENABLED);
    c.call(b"shutdown graceful\r\n", NOT_ENABLED);
    // memcached checks -A before it looks at the mode.
    c.call(b"shutdown now\r\n", NOT_ENABLED);
    c.sync();
}

fn exptime_in_the_past(s: &Server) {
    let mut c = s.connect();
    c.call(&store("set", "neg", 0, -1, b"x"), b"STORED\r\n");
    c.call(b"get neg\r\n", b"END\r\n");
    // Over 30 days is an absolute unix time; these are in the past.
    c.call(&store("set", "abs", 0, 1_000_000_000, b"x"), b"STORED\r\n");
    c.call(b"get abs\r\n", b"END\r\n");
    c.call(
        &store("set", "abs", 0, unix_now() - 10, b"x"),
        b"STORED\r\n",
    );
    c.call(b"get abs\r\n", b"END\r\n");
    c.call(&store("set", "rel", 0, 100, b"x"), b"STORED\r\n");
    c.call(
        &store("set", "fut", 0, unix_now() + 3600, b"x"),
        b"STORED\r\n",
    );
    c.call(
        b"get rel fut\r\n",
        &cat(&[&value("rel", 0, b"x"), &value("fut", 0, b"x"), b"END\r\n"]),
    );
    c.call(b"touch rel -1\r\n", b"TOUCHED\r\n");
    c.call(
        b"gat -1 fut\r\n",
        &cat(&[&value("fut", 0, b"x"), b"END\r\n"]),
    );
    c.call(b"get rel fut\r\n", b"END\r\n");
    // A bad exptime: refused, and its data block swallowed.
    c.call(b"set bad 0 x 1\r\nx\r\n", BAD_FORMAT);
}

macro_rules! transport_tests {
    ($($name:ident),* $(,)?) => {
        mod tcp {
            $(
                #[test]
                fn $name() {
                    super::$name(&super::Server::tcp(&[]));
                }
            )*
        }
        mod unix {
            $(
                #[test]
                fn $name() {
                    super::$name(&super::Server::unix(&[]));
                }
            )*
        }
    };
}

transport_tests!(
    set_and_get,
    flags_range,
    add_replace_append_prepend,
    cas_command,
    get_many_keys,
    large_replies_complete_without_more_input,
    key_length_limit,
    gat_and_gats,
    touch_command,
    delete_command,
    incr_decr,
    noreply_everywhere,
    flush_all_now,
    version_and_verbosity,
    cache_memlimit,
    quit_closes,
    unknown_commands,
    shutdown_not_enabled,
    exptime_in_the_past,
);

mod dead;
mod framing;
mod stats;
mod time;
