//! memcrab-testkit: start the real servers for tests and tools, and read their ports.
//!
//! One harness for every crate that runs a server: the server's integration tests,
//! the client's tests, the bench's tests and the differential fuzzer. It starts
//! memcrab or any memcached (Debian's 1.6.18 at `/usr/bin/memcached`, or another
//! build by path) the same way:
//!
//! ```text
//!   Launch::new(bin).args(["-m", "8"]).start()
//!       │  bin [-u root|nobody] -l 127.0.0.1:0 -m 8
//!       │  MEMCACHED_PORT_FILENAME=<dir>/port   (written as .lck, renamed once bound)
//!       ▼
//!     poll <dir>/port every 2 ms (10 s deadline) ──► "TCP INET: 40123"
//!       │                                           (or, for -s, the first connect)
//!     Server { tcp: 127.0.0.1:40123, udp_port, port_text, pid, stderr() }
//!       │
//!     drop(Server) ──► SIGKILL if still running, wait, remove <dir>
//! ```
//!
//! Nothing sleeps to wait for a reply: startup is the port file (memcached's own
//! mechanism, which memcrab implements too) or a unix socket's first connect, so no
//! port is guessed and none can be taken first. Every wait has a deadline.
//!
//! Goals: the same start-up for memcrab and memcached; errors that carry the
//! server's stderr. Non-goals: talking to the server (each suite has its own client
//! with the assertions it needs), picking ports for command lines that need one
//! (`memcrab-bench compare` binds and frees a port per `{port}` itself).
//!
//! Files, and what each imports of this crate (`──►`):
//!
//! ```text
//!   lib.rs       this map and the re-exports
//!   launch.rs    Launch (binary, flags, listener, user, hooks), Server, StartError
//!                                                  ──► bins, scratch, wait
//!   bins.rs      memcrab_bin, memcached_bin, is_memcached, is_root; a leaf
//!   scratch.rs   Scratch: a fresh temp dir, removed on drop; a leaf
//!   wait.rs      wait_until, POLL_INTERVAL; a leaf
//! ```

mod bins;
mod launch;
mod scratch;
mod wait;

pub use bins::{is_memcached, is_root, memcached_bin, memcrab_bin, MEMCACHED_DEBIAN};
pub use launch::{Launch, Listen, Server, StartError, User, STARTUP_TIMEOUT};
pub use scratch::Scratch;
pub use wait::{wait_until, POLL_INTERVAL};
