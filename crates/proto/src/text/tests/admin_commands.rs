//! The admin commands' parsing: `lru_crawler`, `slabs`, `lru`, `watch`, `stats`.

use super::*;

/// The admin commands, as memcached 1.6.45 tells them apart (which token counts,
/// which errors `noreply` silences).
#[test]
fn admin_commands() {
    use crate::text::admin::{Admin, Classes, CrawlKind, Float};
    let admin = |a| Ok(Request::Admin(a));
    let crawl = |kind, classes| admin(Admin::Crawl { kind, classes });
    use crate::text::watch as w;
    let watch = |events, noreply| admin(Admin::Watch { events, noreply });
    let cases: &[(&[u8], Result<Request<'_>, Error>)] = &[
        (
            b"lru_crawler metadump all\r\n",
            crawl(CrawlKind::Metadump, Classes::All),
        ),
        (
            b"lru_crawler mgdump hash\r\n",
            crawl(CrawlKind::Mgdump, Classes::Hash),
        ),
        (
            b"lru_crawler crawl 1,3\r\n",
            crawl(CrawlKind::Crawl, Classes::List(0b1010)),
        ),
        (
            b"lru_crawler crawl ,1,\r\n",
            crawl(CrawlKind::Crawl, Classes::List(0b10)),
        ),
        (
            b"lru_crawler crawl ,\r\n",
            crawl(CrawlKind::Crawl, Classes::List(0)),
        ),
        (
            b"lru_crawler metadump 0\r\n",
            crawl(CrawlKind::Metadump, Classes::Bad),
        ),
        (
            b"lru_crawler metadump 64\r\n",
            crawl(CrawlKind::Metadump, Classes::Bad),
        ),
        (
            b"lru_crawler metadump 63\r\n",
            crawl(CrawlKind::Metadump, Classes::List(1 << 63)),
        ),
        (
            b"lru_crawler metadump x\r\n",
            crawl(CrawlKind::Metadump, Classes::Bad),
        ),
        (b"lru_crawler metadump\r\n", Err(Error::UnknownCommand)),
        (
            b"lru_crawler metadump all x\r\n",
            Err(Error::UnknownCommand),
        ),
        (
            b"lru_crawler tocrawl 7\r\n",
            admin(Admin::CrawlerTocrawl(7)),
        ),
        (
            b"lru_crawler tocrawl 4294967296\r\n",
            Err(Error::BadFormat { noreply: false }),
        ),
        (
            b"lru_crawler tocrawl -1\r\n",
            Err(Error::BadFormat { noreply: false }),
        ),
        (b"lru_crawler sleep 5\r\n", admin(Admin::CrawlerSleep(5))),
        (
            b"lru_crawler sleep x\r\n",
            Err(Error::BadFormat { noreply: false }),
        ),
        (b"lru_crawler enable\r\n", admin(Admin::CrawlerEnable(true))),
        (
            b"lru_crawler disable\r\n",
            admin(Admin::CrawlerEnable(false)),
        ),
        (b"lru_crawler enable x\r\n", Err(Error::UnknownCommand)),
        (b"lru_crawler\r\n", Err(Error::UnknownCommand)),
        (
            b"slabs reassign 1 2\r\n",
            admin(Admin::SlabsReassign { src: 1, dst: 2 }),
        ),
        (
            b"slabs reassign -1 2\r\n",
            admin(Admin::SlabsReassign { src: -1, dst: 2 }),
        ),
        (
            b"slabs reassign x 2\r\n",
            Err(Error::BadFormat { noreply: false }),
        ),
        (
            b"slabs reassign 1 2 noreply\r\n",
            Err(Error::Rejected { noreply: true }),
        ),
        (
            b"slabs automove 2\r\n",
            admin(Admin::SlabsAutomove {
                level: 2,
                noreply: false,
            }),
        ),
        (
            b"slabs automove 9 noreply\r\n",
            admin(Admin::SlabsAutomove {
                level: 9,
                noreply: true,
            }),
        ),
        (
            b"slabs automove x noreply\r\n",
            Err(Error::BadFormat { noreply: true }),
        ),
        (
            b"slabs automove ratio 0.5\r\n",
            admin(Admin::SlabsAutomoveRatio {
                ratio: Float(0.5),
                noreply: false,
            }),
        ),
        (
            b"slabs automove ratio\r\n",
            Err(Error::Rejected { noreply: false }),
        ),
        (
            b"slabs automove freeratio 0.25\r\n",
            admin(Admin::SlabsAutomoveFreeratio {
                ratio: Float(0.25),
                noreply: false,
            }),
        ),
        (
            b"slabs automove f -3 noreply\r\n",
            admin(Admin::SlabsAutomoveFreeratio {
                ratio: Float(-3.0),
                noreply: true,
            }),
        ),
        (
            b"slabs automove fr\r\n",
            Err(Error::Rejected { noreply: false }),
        ),
        (
            b"slabs automove freeratio x\r\n",
            Err(Error::Rejected { noreply: false }),
        ),
        (
            b"slabs automove freeratios 1\r\n",
            Err(Error::BadFormat { noreply: false }),
        ),
        (
            b"slabs automove ratio x noreply\r\n",
            Err(Error::Rejected { noreply: true }),
        ),
        (b"slabs automove\r\n", Err(Error::UnknownCommand)),
        (b"slabs\r\n", Err(Error::UnknownCommand)),
        (
            b"lru tune 10 20 0.1 2.0\r\n",
            admin(Admin::LruTune {
                hot_pct: 10,
                warm_pct: 20,
                hot_factor: Float(0.1),
                warm_factor: Float(2.0),
                noreply: false,
            }),
        ),
        (
            b"lru tune 10 20 x 2.0 noreply\r\n",
            Err(Error::Rejected { noreply: true }),
        ),
        (
            b"lru tune 10 20 0.1\r\n",
            Err(Error::Rejected { noreply: false }),
        ),
        (
            b"lru mode flat\r\n",
            admin(Admin::LruMode {
                segmented: false,
                noreply: false,
            }),
        ),
        (
            b"lru mode segmented noreply\r\n",
            admin(Admin::LruMode {
                segmented: true,
                noreply: true,
            }),
        ),
        (b"lru mode x\r\n", Err(Error::Rejected { noreply: false })),
        (
            b"lru temp_ttl -1\r\n",
            admin(Admin::LruTempTtl {
                ttl: -1,
                noreply: false,
            }),
        ),
        (b"lru temp_ttl\r\n", Err(Error::Rejected { noreply: false })),
        (
            b"lru bogus noreply\r\n",
            Err(Error::Rejected { noreply: true }),
        ),
        (b"lru\r\n", Err(Error::Rejected { noreply: false })),
        // process_watch_command: no argument is `fetchers`; every token must name an
        // event type (or a prefix of one); `noreply` means nothing to it.
        (b"watch\r\n", watch(Some(w::FETCHERS), false)),
        (
            b"watch  mutations evictions \r\n",
            watch(Some(w::MUTATIONS | w::EVICTIONS), false),
        ),
        (
            b"watch connevents deletions sysevents rawcmds\r\n",
            watch(
                Some(w::CONNEVENTS | w::DELETIONS | w::SYSEVENTS | w::RAWCMDS),
                false,
            ),
        ),
        (b"watch Fetchers\r\n", watch(None, false)),
        (b"watch noreply\r\n", watch(None, false)),
        (b"watch fetchers noreply\r\n", watch(None, false)),
        (
            b"watch f m\r\n",
            watch(Some(w::FETCHERS | w::MUTATIONS), false),
        ),
    ];
    for (input, want) in cases {
        let (got, n) = full(input);
        assert_eq!(n, input.len());
        assert_eq!(&got, want, "{:?}", String::from_utf8_lossy(input));
    }
}
