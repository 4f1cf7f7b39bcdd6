//! ketama consistent hashing, point for point as libmemcached computes it with
//! `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED` (libmemcached `hosts.cc`, `update_continuum`;
//! `hash.cc`, `dispatch_host`), so that a memcrab client and a libmemcached client
//! (PHP's memcached, pylibmc, ...) given the same server list send every key to the
//! same server.
//!
//! ```text
//!   server i (weight w_i of total W, n servers):
//!     points_i = floor(w_i/W * 160/4 * n + 1e-10) * 4        (in f32, as the C does)
//!     for j in 0..points_i/4:
//!       name = "host:port-j"     ("host-j" when port == 11211; a unix socket
//!                                  is "path:0-j")
//!       md5(name) = b0..b15 ──► four points: LE u32 of b0..3, b4..7, b8..11, b12..15
//!   continuum: every point (value, i), sorted by value then i
//!
//!   key ──md5──► LE u32 of bytes 0..3 = h ──► first point with value >= h
//!                                             (past the end: wrap to the first)
//! ```
//!
//! With equal weights every server gets 160 points (40 MD5s × 4). The host text is
//! hashed as written: `localhost:11212` and `127.0.0.1:11212` are different rings,
//! as in libmemcached. A single server gets every key (libmemcached skips hashing).
//! `tests/ketama.rs` checks all of this against the real libmemcached.

use md5::{Digest, Md5};

use crate::addr::{ServerAddr, DEFAULT_PORT};
use crate::error::{Error, Result};

/// Points per server when all weights are equal
/// (`MEMCACHED_POINTS_PER_SERVER_KETAMA`, libmemcached `defaults.h`).
pub const POINTS_PER_SERVER: u32 = 160;
/// Points cut from one MD5 digest (`pointer_per_hash` in `update_continuum`).
const POINTS_PER_HASH: u32 = 4;

/// One point of the continuum. The derived order (value, then server index) is
/// libmemcached's `continuum_item_cmp`, so ties between servers resolve the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Point {
    value: u32,
    index: u32,
}

/// A ketama continuum over a list of servers.
#[derive(Clone, Debug)]
pub struct Ring {
    points: Vec<Point>,
    servers: usize,
}

impl Ring {
    /// A ring over `servers`, all of weight 1, in this order (the order matters only
    /// for the indexes returned).
    pub fn new<'a>(servers: impl IntoIterator<Item = &'a ServerAddr>) -> Result<Ring> {
        Ring::weighted(servers.into_iter().map(|a| (a, 1)))
    }

    /// A ring with weights; weight 0 counts as 1, as in libmemcached.
    pub fn weighted<'a>(servers: impl IntoIterator<Item = (&'a ServerAddr, u32)>) -> Result<Ring> {
        let servers: Vec<(&ServerAddr, u32)> =
            servers.into_iter().map(|(a, w)| (a, w.max(1))).collect();
        if servers.is_empty() {
            return Err(Error::NoServers);
        }
        let total_weight: u64 = servers.iter().map(|&(_, w)| u64::from(w)).sum();
        let live = servers.len() as f32;
        let mut points = Vec::with_capacity(servers.len() * POINTS_PER_SERVER as usize);
        for (index, &(addr, weight)) in servers.iter().enumerate() {
            let index = u32::try_from(index)
                .map_err(|_| Error::InvalidArgument("too many servers".into()))?;
            // libmemcached computes this in float, operation by operation; f32 here
            // gives the same roundings, so the same point counts for any weights.
            let pct = weight as f32 / total_weight as f32;
            let per_server = (pct * POINTS_PER_SERVER as f32 / POINTS_PER_HASH as f32 * live
                + 0.000_000_000_1_f32)
                .floor() as u32
                * POINTS_PER_HASH;
            let prefix = point_prefix(addr);
            for j in 0..per_server / POINTS_PER_HASH {
                let digest: [u8; 16] = Md5::digest(format!("{prefix}-{j}").as_bytes()).into();
                for quad in digest.chunks_exact(4) {
                    let value = u32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]);
                    points.push(Point { value, index });
                }
            }
        }
        points.sort_unstable();
        Ok(Ring {
            points,
            servers: servers.len(),
        })
    }

    /// The index (in the list given) of the server that owns `key`.
    pub fn server_for(&self, key: &[u8]) -> usize {
        if self.servers == 1 {
            return 0;
        }
        let hash = key_hash(key);
        let i = self.points.partition_point(|p| p.value < hash);
        // The largest server share is at least 1/n, so it has points: never empty.
        let p = self.points.get(i).or(self.points.first());
        p.map_or(0, |p| p.index as usize)
    }

    /// How many servers the ring was built over.
    pub fn server_count(&self) -> usize {
        self.servers
    }

    /// How many points the continuum has (160 per server at equal weights).
    pub fn point_count(&self) -> usize {
        self.points.len()
    }
}

/// The key's position on the continuum: the first four bytes of its MD5, little
/// endian (libhashkit `hashkit_md5`).
pub fn key_hash(key: &[u8]) -> u32 {
    let d: [u8; 16] = Md5::digest(key).into();
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

/// The text before `-<j>` in a server's point names: `host:port`, or `host` alone
/// when the port is memcached's default (libmemcached omits it then); a unix socket
/// is its path with port 0.
pub fn point_prefix(addr: &ServerAddr) -> String {
    match addr {
        ServerAddr::Tcp { host, port } if *port == DEFAULT_PORT => host.clone(),
        ServerAddr::Tcp { host, port } => format!("{host}:{port}"),
        ServerAddr::Unix(path) => format!("{}:0", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<ServerAddr> {
        list.iter().map(|s| s.parse().expect(s)).collect()
    }

    #[test]
    fn point_names() {
        let rows = [
            ("10.0.0.1:11211", "10.0.0.1"),
            ("10.0.0.1:11212", "10.0.0.1:11212"),
            ("cache.example", "cache.example"),
            ("[::1]:5000", "::1:5000"),
            ("/tmp/mc.sock", "/tmp/mc.sock:0"),
        ];
        for (addr, want) in rows {
            assert_eq!(point_prefix(&addr.parse().expect(addr)), want, "{addr}");
        }
    }

    #[test]
    fn key_hash_is_md5_le() {
        // md5("") = d41d8cd98f00b204e9800998ecf8427e
        assert_eq!(key_hash(b""), 0xd98c_1dd4);
        // md5("a") = 0cc175b9c0f1b6a831c399e269772661
        assert_eq!(key_hash(b"a"), 0xb975_c10c);
    }

    #[test]
    fn shape() {
        let list = addrs(&["a:1", "b:2", "c:3"]);
        let ring = Ring::new(&list).expect("servers");
        assert_eq!(ring.server_count(), 3);
        assert_eq!(ring.point_count(), 3 * 160);
        assert!(ring.points.windows(2).all(|w| w[0] <= w[1]));
        let mut seen = [0usize; 3];
        for i in 0..3000 {
            seen[ring.server_for(format!("key:{i}").as_bytes())] += 1;
        }
        assert!(seen.iter().all(|&n| n > 600), "spread {seen:?}");

        let one = Ring::new(&list[..1]).expect("servers");
        assert_eq!(one.server_for(b"anything"), 0);
        assert!(matches!(Ring::new(&[]), Err(Error::NoServers)));

        // Weights scale the point counts: 1:3 of 2 servers is 80 and 240.
        let w = Ring::weighted([(&list[0], 1), (&list[1], 3)]).expect("servers");
        let heavy = w.points.iter().filter(|p| p.index == 1).count();
        assert_eq!((w.point_count(), heavy), (320, 240));
    }

    /// Adding a server moves only keys to the new server (the point of ketama).
    #[test]
    fn adding_a_server_moves_keys_only_to_it() {
        let list = addrs(&["a:1", "b:2", "c:3", "d:4"]);
        let three = Ring::new(&list[..3]).expect("servers");
        let four = Ring::new(&list).expect("servers");
        for i in 0..2000 {
            let key = format!("k{i}");
            let (before, after) = (
                three.server_for(key.as_bytes()),
                four.server_for(key.as_bytes()),
            );
            assert!(before == after || after == 3, "{key}: {before} -> {after}");
        }
    }
}
