//! `lru_crawler` rules that 1.6.45 added or changed: a key dump after queued
//! replies is refused, and `-o no_lru_crawler`/`no_modern` start the crawler off.

use crate::common::{show, Client, Server};

/// memcached 1.6.45 refuses a key dump while replies of earlier requests in the
/// same batch are still queued (`resp_has_stack`), as it refuses `watch`; after
/// `mn`, which writes them out, the dump runs.
#[test]
fn dumps_after_queued_replies_are_refused() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let rows: &[(&[u8], &[u8])] = &[
        (
            b"mg nokey v\r\nlru_crawler metadump all\r\nmn\r\n",
            b"EN\r\nERROR cannot pipeline other commands before metadump\r\nMN\r\n",
        ),
        (
            b"set a 0 0 1 noreply\r\nx\r\nlru_crawler mgdump hash\r\nmn\r\n",
            b"ERROR cannot pipeline other commands before mgdump\r\nMN\r\n",
        ),
        (
            b"get a\r\nlru_crawler mgdump hash\r\nmn\r\n",
            b"VALUE a 0 1\r\nx\r\nEND\r\nERROR cannot pipeline other commands before mgdump\r\nMN\r\n",
        ),
    ];
    for (req, want) in rows {
        c.call(req, want);
    }
    // After `mn`, which writes the queued replies out, the dump runs.
    dump_when_free(
        &mut c,
        b"mn\r\n",
        b"MN",
        b"lru_crawler mgdump hash\r\n",
        b"mg a\r\nEN\r\n",
    );
}

/// `-o no_lru_crawler` and `-o no_modern` start without the LRU crawler, as in
/// memcached: `stats settings` says so, key dumps are refused until `lru_crawler
/// enable`, and then they run.
#[test]
fn no_lru_crawler_starts_it_off() {
    for opt in ["no_lru_crawler", "no_modern"] {
        let s = Server::tcp(&["-o", opt]);
        let mut c = s.connect();
        assert_eq!(c.stats("settings")["lru_crawler"], "no", "{opt}");
        c.call(
            b"lru_crawler metadump all\r\n",
            b"CLIENT_ERROR lru crawler disabled\r\n",
        );
        c.call(b"lru_crawler enable\r\n", b"OK\r\n");
        assert_eq!(c.stats("settings")["lru_crawler"], "yes", "{opt}");
        dump_when_free(
            &mut c,
            b"",
            b"",
            b"lru_crawler metadump all\r\n",
            b"END\r\n",
        );
    }
}

/// Sends `before` (whose reply is the line `before_reply`, if any) and the dump
/// `req`, and expects `OK` and then `rest`. memcached's own background crawl may
/// hold its crawler for a moment (`BUSY currently processing crawler request`,
/// after start-up or `lru_crawler enable`): the request is sent again then, a
/// bounded number of times.
fn dump_when_free(c: &mut Client, before: &[u8], before_reply: &[u8], req: &[u8], rest: &[u8]) {
    for attempt in 0.. {
        c.send(&[before, req].concat());
        if !before.is_empty() {
            assert_eq!(c.read_line(), before_reply);
        }
        let line = c.read_line();
        if line == b"BUSY currently processing crawler request" && attempt < 10_000 {
            continue;
        }
        assert_eq!(line, b"OK", "attempt {attempt}: {}", show(&line));
        c.expect(rest);
        return;
    }
}
