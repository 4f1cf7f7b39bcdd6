//! `lru_crawler` rules that 1.6.45 added or changed: a key dump after queued
//! replies is refused, and `-o no_lru_crawler`/`no_modern` start the crawler off.

use crate::common::Server;

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
        (b"mn\r\nlru_crawler mgdump hash\r\n", b"MN\r\nOK\r\nmg a\r\nEN\r\n"),
    ];
    for (req, want) in rows {
        c.call(req, want);
    }
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
        c.call(b"lru_crawler metadump all\r\n", b"OK\r\nEND\r\n");
    }
}
