//! Line framing and data blocks, over both transports: bad data chunks, refused
//! and too-large storage commands whose blocks are swallowed, over-long lines, HTTP
//! lines, and bare `\n` line ends.

use super::*;

const BAD_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";
/// The largest value memcached's `item_size_ok` accepts under the default `-I` for a
/// 2-byte key with flags 0: 48 (item header) + 2 + 1 (key NUL) + value + 2 (`\r\n`)
/// + 8 (CAS) <= 1 MiB.
const LARGEST_VALUE_KEY2: usize = ITEM_SIZE_MAX - 48 - 2 - 1 - 2 - 8;

fn bad_data_chunk(s: &Server) {
    let mut c = s.connect();
    c.call(&store("set", "a", 0, 0, b"old"), b"STORED\r\n");
    // memcached consumes the declared length plus two bytes ("ab\r"), answers bad
    // data chunk, and parses what follows: the lone "\n" is an empty line, too
    // short for 1.6.45's process_request (bad command line format).
    c.call(
        b"set a 0 0 1\r\nab\r\nget a\r\n",
        &cat(&[BAD_CHUNK, BAD_FORMAT, &value("a", 0, b"old"), b"END\r\n"]),
    );
    // Three bytes "xyg" are consumed; "et a" is then an unknown command.
    c.call(
        b"set a 0 0 1\r\nxyget a\r\n",
        &cat(&[BAD_CHUNK, b"ERROR\r\n"]),
    );
    // Data ending in "\n" alone is a bad chunk too.
    c.call(b"set a 0 0 1\r\nx\n\r\n", &cat(&[BAD_CHUNK, BAD_FORMAT]));
    // Under noreply the CLIENT_ERROR is not sent; the stray line still is parsed.
    c.call(b"set a 0 0 1 noreply\r\nab\r\n", BAD_FORMAT);
    c.sync();
}

fn negative_length(s: &Server) {
    let mut c = s.connect();
    // Refused, and no data block is read: the next line is a command.
    c.call(b"set a 0 0 -1\r\n", BAD_FORMAT);
    c.call(b"bogus x\r\n", b"ERROR\r\n");
    // A bad length is answered under noreply too.
    c.call(b"set a 0 0 -1 noreply\r\n", BAD_FORMAT);
    // Larger than memcached's INT_MAX - 2.
    c.call(b"set a 0 0 2147483646\r\n", BAD_FORMAT);
    c.call(b"get a\r\n", b"END\r\n");
}

fn too_large_is_swallowed(s: &Server) {
    let mut c = s.connect();
    // A value made of requests proves it is swallowed, not parsed.
    let junk_line = b"set x 0 0 1\r\ny\r\n";
    let mut big = Vec::new();
    while big.len() <= ITEM_SIZE_MAX {
        big.extend_from_slice(junk_line);
    }
    c.call(&store("set", "a", 0, 0, b"old"), b"STORED\r\n");
    // set: the error, the data swallowed, and the old value gone (memcached unlinks
    // it so a failed set never leaves a stale value readable).
    c.call(&store("set", "a", 0, 0, &big), TOO_LARGE);
    c.call(b"get a x\r\n", b"END\r\n");
    // add/replace/append keep the old value.
    c.call(&store("set", "b", 0, 0, b"old"), b"STORED\r\n");
    for cmd in ["add", "replace", "append", "prepend"] {
        c.call(&store(cmd, "b", 0, 0, &big), TOO_LARGE);
    }
    c.send(format!("cas b 0 0 {} 1\r\n", big.len()).as_bytes());
    c.send(&big);
    c.call(b"\r\n", TOO_LARGE);
    c.call(b"get b x\r\n", &cat(&[&value("b", 0, b"old"), b"END\r\n"]));
    // noreply: nothing comes back, the data is still swallowed.
    let mut req = format!("set b 0 0 {} noreply\r\n", big.len()).into_bytes();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\n");
    c.send(&req);
    c.call(b"get b x\r\n", b"END\r\n");
    // The data arriving in pieces, after the line, is swallowed as it comes.
    c.send(format!("set c 0 0 {}\r\n", big.len()).as_bytes());
    c.send(&big[..1000]);
    c.send(&big[1000..]);
    c.call(b"\r\n", TOO_LARGE);
    c.sync();
    // The boundary: memcached's item_size_ok counts its item header, the key, CAS.
    let fits = vec![b'v'; LARGEST_VALUE_KEY2];
    c.call(&store("set", "bb", 0, 0, &fits), b"STORED\r\n");
    let over = vec![b'v'; LARGEST_VALUE_KEY2 + 1];
    c.call(&store("set", "bb", 0, 0, &over), TOO_LARGE);
    c.call(b"get bb\r\n", b"END\r\n");
}

fn long_lines(s: &Server) {
    // Over 2048 bytes without a newline, not a get: closed without a reply.
    let mut c = s.connect();
    c.send(&vec![b'x'; 3000]);
    c.expect_closed();
    let mut c = s.connect();
    c.send(format!("set {}", "k".repeat(3000)).as_bytes());
    c.expect_closed();
    // In two writes.
    let mut c = s.connect();
    c.send(&vec![b'x'; 2000]);
    c.send(&[b'y'; 100]);
    c.expect_closed();
    // Exactly 2048 is still waited for.
    let mut c = s.connect();
    c.send(&vec![b'x'; 2048]);
    c.call(b"\r\n", b"ERROR\r\n");
    // A long get line is waited for.
    let mut c = s.connect();
    c.call(&store("set", "k", 0, 0, b"v"), b"STORED\r\n");
    let keys = "k ".repeat(1500);
    c.send(format!("get {keys}").as_bytes());
    let mut want = Vec::new();
    for _ in 0..1501 {
        want.extend_from_slice(&value("k", 0, b"v"));
    }
    want.extend_from_slice(b"END\r\n");
    c.call(b"k\r\n", &want);
    let mut c = s.connect();
    c.send(format!("gets {}", "nope ".repeat(1000)).as_bytes());
    c.call(b"\r\n", b"END\r\n");
    // A whole line in one write, its newline past memcached's 16 KiB read buffer:
    // closed as well (memcached never sees the newline). Found by the differential
    // fuzzer: memcrab answered ERROR. A line that fits the buffer is answered.
    for len in [16_384, 40_000] {
        let mut c = s.connect();
        // A large value first: memcrab's read buffer grows to hold it, and then
        // used to take the whole long line in one read.
        c.call(
            &store("set", "big", 0, 0, &vec![b'v'; 200_000]),
            b"STORED\r\n",
        );
        let mut long = vec![b'x'; len];
        long.extend_from_slice(b"\r\n");
        // The server may close while the line is still being written (memcached
        // does once its buffer is full): a write cut short by the close is fine.
        if let Err(e) = std::io::Write::write_all(&mut c.stream, &long) {
            assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ),
                "{e}"
            );
        }
        c.expect_closed();
    }
    // The data block of a refused storage command: 20,000 bytes without a newline.
    let mut c = s.connect();
    let mut set = format!("set {} 0 0 20000\r\n", "k".repeat(251)).into_bytes();
    set.resize(set.len() + 20_000, b'v');
    set.extend_from_slice(b"\r\n");
    // 1.6.45 swallows the data block of a storage line refused for its key (1.6.18
    // read it as a line and closed): the refusal, and the connection stays open.
    c.call(&set, BAD_FORMAT);
    c.call(b"get nope\r\n", b"END\r\n");
    let mut c = s.connect();
    let mut fits = vec![b'x'; 16_382];
    fits.extend_from_slice(b"\r\n");
    c.call(&fits, b"ERROR\r\n");
}

fn http_closes(s: &Server) {
    for line in [
        &b"GET / HTTP/1.1\r\n"[..],
        b"POST /x HTTP/1.0\r\n",
        b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let mut c = s.connect();
        c.send(line);
        c.expect_closed();
    }
}

fn bare_newlines(s: &Server) {
    let mut c = s.connect();
    c.call(b"set a 0 0 1\nx\r\n", b"STORED\r\n");
    c.call(b"get a\n", &cat(&[&value("a", 0, b"x"), b"END\r\n"]));
    c.call(b"incr a 1\n", NON_NUMERIC);
    c.call(b"delete a\ndelete a\n", b"DELETED\r\nNOT_FOUND\r\n");
    // The data block itself must end in \r\n.
    c.call(b"set a 0 0 1\nx\nget a\n", &cat(&[BAD_CHUNK, b"ERROR\r\n"]));
    c.call(b"get a\n", b"END\r\n");
}

transport_tests!(
    bad_data_chunk,
    negative_length,
    too_large_is_swallowed,
    long_lines,
    http_closes,
    bare_newlines,
);
