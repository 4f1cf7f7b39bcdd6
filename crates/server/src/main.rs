//! memcrab: a memcached-compatible cache server.
//!
//! ```text
//!   main ── parses flags, binds, spawns ──┬─ acceptor thread (listeners, -c)
//!                                         ├─ worker threads × -t (mio or io_uring
//!                                         │    loops, conns)
//!                                         ├─ clock ticker, engine maintainer
//!                                         └─ signal thread (SIGTERM/SIGINT/SIGUSR1 →
//!                                              shutdown, SIGHUP → Server::reload:
//!                                              users and TLS certificates)
//!   after the threads end: a graceful stop (SIGUSR1, `shutdown graceful`) with -e
//!   saves the engine for a warm restart (crates/store/src/seg/persist.rs)
//!   all share Arc<Server> { settings, engine, per-worker counters, users, tls, ... }
//! ```
//!
//! Startup runs memcached's steps in its order (service.rs draws them): refuse root
//! without `-u`, bind, leave root, `-d`, `-P`, then start the threads.
//!
//! One request path serves every transport: a transport moves bytes and calls the
//! request step, which frames and decodes requests and hands them to the executors.
//!
//! Modules, each importing only those below it (no cycles):
//!
//! ```text
//!   main.rs       flags, binding, threads, signals
//!   startup/      settings/ (the command line), service.rs (-u, -d, -P, -r), auth.rs
//!                 (SASL and -Y password files), listen.rs (the acceptor thread, -c)
//!   io/           the transport: worker.rs (epoll loop), uring.rs and ringio.rs
//!                 (io_uring loop), conn.rs (a stream's read/serve/write cycle), udp.rs,
//!                 tls.rs, net.rs (sockets), out.rs (reply bytes and lent values),
//!                 handoff.rs (acceptor → worker)
//!   request.rs    the transport-independent request step (Session::step/serve)
//!   exec/         executors: mod.rs (Ctx, Flow, Resume, counting), text.rs, meta.rs,
//!                 binary.rs, admin.rs (lru_crawler and key dumps, slabs, lru)
//!   admin/        stats.rs (the `stats` writer), counters.rs, watch.rs, prefix.rs
//!                 (`stats detail`), slab.rs (memcached's classes), tunables.rs
//!   server.rs     state shared by every thread (settings, engine, counters, conns,
//!                 users, the watch hub), reload (SIGHUP)
//! ```

mod admin;
mod exec;
mod io;
mod request;
mod server;
mod startup;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::Context;
use memcrab_store::reference::Reference;
use memcrab_store::seg::Seg;
use memcrab_store::{Clock, Config};
use mio::{Poll, Waker};

use crate::admin::{slab, watch};
use crate::io::{handoff, net, tls, udp, uring, worker};
use crate::server::Server;
use crate::startup::settings::{Command, EngineKind, IoKind, Settings};
use crate::startup::{listen, service, settings};

fn main() {
    let cmd = match settings::parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("memcrab: {msg}");
            std::process::exit(2);
        }
    };
    let settings = match cmd {
        Command::Run(s) => *s,
        Command::Help => {
            print!("{}", settings::usage());
            return;
        }
        Command::Version => {
            println!(
                "memcrab {} (memcached {} compatible)",
                env!("CARGO_PKG_VERSION"),
                server::VERSION
            );
            return;
        }
        Command::License => {
            println!("memcrab is distributed under the MIT license.");
            return;
        }
    };
    // As memcached's ssl_init: unusable TLS settings stop startup with EX_USAGE.
    let tls = match tls::start(&settings) {
        Ok(t) => t,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(tls::EXIT_USAGE);
        }
    };
    if let Err(e) = run(settings, tls) {
        if let Some(f) = e.downcast_ref::<service::Failure>() {
            // memcached's own words and exit status, for scripts that look for them.
            eprintln!("{f}");
            std::process::exit(f.code);
        }
        eprintln!("memcrab: {e:#}");
        std::process::exit(1);
    }
}

/// CPUs this process may run on (its affinity mask), if the kernel says.
fn usable_cpus() -> Option<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at
    // most size_of::<cpu_set_t>() bytes into it, and CPU_COUNT only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        usize::try_from(libc::CPU_COUNT(&set))
            .ok()
            .filter(|&n| n > 0)
    }
}

fn run(mut settings: Settings, tls: Option<Arc<tls::Tls>>) -> anyhow::Result<()> {
    // More workers than CPUs we may run on only adds context switches (on one pinned
    // core, four workers share it in CFS time slices: more CPU per request and
    // a p99 of milliseconds, docs/benchmarks.md), so the workers are capped at the
    // affinity mask's size (`stats` reports them as `threads`; `stats settings` keeps
    // -t as `num_threads`).
    if let Some(cpus) = usable_cpus() {
        if settings.threads > cpus {
            if settings.verbose > 0 {
                eprintln!(
                    "-t {}: running {cpus} worker threads, one per usable CPU",
                    settings.threads
                );
            }
            settings.workers = cpus;
        }
    }
    if settings.engine == EngineKind::Reference {
        limit_malloc_arenas();
    }
    fix_mmap_threshold();
    // Catch the signals before anything else, so that one arriving during startup
    // still means what it means later (SIGHUP never kills memcrab), not the
    // default abrupt exit.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGUSR1,
    ])?;
    // memcached refuses root without -u before doing anything else.
    let user = service::target_user(&settings)?;
    if settings.enable_coredumps {
        service::enable_coredumps()?;
    }
    let config = Config {
        limit_bytes: settings.memory_limit_mb * 1024 * 1024,
        evict: !settings.no_evict,
        use_cas: settings.use_cas,
        item_size_max: settings.item_size_max,
        // Tests only (the hash-flooding test, crates/server/tests/hash_flood.rs): a
        // fixed index hash seed, decimal u128, instead of one drawn from the OS.
        hash_seed: std::env::var("MEMCRAB_TEST_HASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok()),
    };
    // -e: the engine on a memory file, warm if the last stop saved it. Kept to save
    // it again at a graceful stop.
    let mut restartable: Option<(Arc<Seg>, std::path::PathBuf)> = None;
    let (engine, clock): (Arc<dyn memcrab_store::Engine>, Arc<Clock>) =
        match (settings.engine, &settings.memory_file) {
            (EngineKind::Seg, Some(path)) => {
                let started = memcrab_store::seg::open_memory_file(config, path)
                    .with_context(|| format!("-e {}", path.display()))?;
                // memcached prints its [restart] lines whatever the verbosity.
                eprintln!("[restart] {}", started.log);
                let seg = Arc::new(started.seg);
                restartable = Some((Arc::clone(&seg), path.clone()));
                (seg, started.clock)
            }
            (EngineKind::Seg, None) => {
                let clock = Arc::new(Clock::new());
                (Arc::new(Seg::new(config, Arc::clone(&clock))), clock)
            }
            (EngineKind::Reference, _) => {
                let clock = Arc::new(Clock::new());
                let e = Reference::new(config, settings.hash_power, Arc::clone(&clock));
                (Arc::new(e), clock)
            }
        };
    if settings.io == IoKind::Uring {
        if let Err(e) = uring::probe(settings.max_connections) {
            eprintln!("memcrab: io_uring unavailable ({e}); using epoll");
            settings.io = IoKind::Epoll;
        }
    }
    let server = Arc::new(Server::new(settings, engine, tls));
    let s = &server.settings;
    // `watch evictions`: the engine reports each eviction to the hub.
    server
        .engine
        .set_eviction_listener(Arc::new(watch::EvictionReport {
            hub: Arc::clone(&server.watch),
            clock: Arc::clone(&clock),
            classes: slab::Classes {
                chunk_size: s.chunk_size,
                growth_factor: s.growth_factor,
                use_cas: s.use_cas,
            },
        }));

    // TCP and UDP as root (ports below 1024), the unix socket as the -u user.
    let mut listeners = match s.unix_socket {
        None => net::bind(s)?,
        Some(_) => Vec::new(),
    };
    let udp_sockets = net::bind_udp(s)?;
    if let Some(user) = &user {
        service::switch_user(user)?;
        // memcached reads -Y after leaving root: a file the user cannot read fails
        // now rather than at the first SIGHUP.
        server.load_users().map_err(anyhow::Error::msg)?;
    }
    if s.unix_socket.is_some() {
        listeners = net::bind(s)?;
    }
    write_port_file(&listeners, &udp_sockets)?;
    if s.daemonize {
        // Forks: no other thread exists yet, so the child inherits a consistent
        // process. Everything that can fail on the command line has been checked,
        // so the parent's exit status 0 means the server is running.
        service::daemonize(s.enable_coredumps, s.verbose > 0)?;
    }
    let pid_file = s.pid_file.as_deref().and_then(service::PidFile::write);
    if s.lock_memory {
        // SAFETY: mlockall takes flags only and touches no memory of ours.
        if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
            eprintln!(
                "warning: -k invalid, mlockall() failed: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    listen::register_listeners(&server, &listeners);

    // The clock ticker: memcached's clock_handler, a few times a second. The
    // engine's upkeep (expiry and delayed-flush sweeps) runs on a thread of its own,
    // as memcached's LRU maintainer does: a long sweep on a busy machine must not
    // hold the clock back (the differential fuzzer once saw it 4 s behind).
    let ticker = {
        let server = Arc::clone(&server);
        thread::Builder::new().name("clock".into()).spawn(move || {
            while !server.shutting_down() {
                server.engine.clock().tick();
                thread::sleep(Duration::from_millis(100));
            }
        })?
    };
    let maintainer = {
        let server = Arc::clone(&server);
        thread::Builder::new()
            .name("maintain".into())
            .spawn(move || {
                while !server.shutting_down() {
                    server.engine.maintain();
                    thread::sleep(Duration::from_millis(100));
                }
            })?
    };

    let accept_poll = Poll::new()?;
    let mut wakers = vec![Arc::new(Waker::new(accept_poll.registry(), handoff::WAKE)?)];
    let mut to_workers = Vec::new();
    let mut handles = Vec::new();
    let io = s.io;
    for id in 0..s.workers {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), handoff::WAKE)?);
        let (tx, rx) = std::sync::mpsc::channel();
        to_workers.push((tx, Arc::clone(&waker)));
        wakers.push(waker);
        let udp = udp_sockets
            .iter()
            .map(|u| udp::Port::new(&server, u))
            .collect::<std::io::Result<Vec<_>>>()?;
        let w = worker::Worker {
            id,
            poll,
            rx,
            server: Arc::clone(&server),
            udp,
        };
        handles.push(thread::Builder::new().name(format!("worker-{id}")).spawn(
            move || match io {
                IoKind::Uring => uring::run(w),
                IoKind::Epoll => w.run(),
            },
        )?);
    }
    let _ = server.wakers.set(wakers);

    {
        let server = Arc::clone(&server);
        thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                use signal_hook::consts::{SIGHUP, SIGUSR1};
                for sig in signals.forever() {
                    match sig {
                        SIGHUP => server.reload(),
                        SIGUSR1 => {
                            // memcached's graceful stop: stop accepting, let the
                            // workers finish what they have read, save the cache
                            // (-e), exit 0.
                            eprintln!("Gracefully stopping");
                            server.begin_graceful_shutdown();
                            return;
                        }
                        _ => {
                            if server.verbosity.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                                eprintln!("Exiting normally");
                            }
                            server.begin_shutdown();
                            return;
                        }
                    }
                }
            })?;
    }

    if s.verbose > 0 {
        eprintln!("memcrab: connections on {}", s.io.name());
        for l in &listeners {
            eprintln!("memcrab: listening on {}", l.local_addr_text());
        }
        for u in udp_sockets.iter().filter_map(|u| u.local_addr().ok()) {
            eprintln!("memcrab: listening on udp:{u}");
        }
    }
    let acceptor = {
        let server = Arc::clone(&server);
        thread::Builder::new()
            .name("acceptor".into())
            .spawn(move || listen::accept_loop(listeners, accept_poll, to_workers, server))?
    };
    let _ = acceptor.join();
    for h in handles {
        let _ = h.join();
    }
    // Nothing else touches the engine now (the maintainer included): a graceful
    // stop saves it for a warm restart.
    let _ = ticker.join();
    let _ = maintainer.join();
    if let Some((seg, path)) = restartable.filter(|_| server.is_graceful()) {
        match seg.save(&path, env!("CARGO_PKG_VERSION")) {
            Ok(saved) => eprintln!("[restart] {}", saved.log),
            Err(e) => {
                // No metadata: the next start is cold, never wrong.
                if let Some(p) = pid_file {
                    p.remove();
                }
                anyhow::bail!("[restart] saving {} failed: {e}", path.display());
            }
        }
    }
    if let Some(p) = pid_file {
        p.remove();
    }
    Ok(())
}

/// The reference engine allocates each item with malloc from every worker thread.
/// glibc then keeps an arena per thread, and with mixed value sizes freed memory
/// strands in the wrong arena, so resident memory outgrows the README's bound. One
/// arena costs some CPU on set-only loads, a price paid for the memory bound; the
/// segment engine allocates segments, not items, and does not need it. (The figures
/// once quoted here came from scripts that were never committed; docs/benchmarks.md
/// has the reference engine's measured peak with one arena and its command.)
fn limit_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator tuning; called before any thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Connection buffers grow to hold a large value (up to `-I`) and are freed when it
/// is done. glibc serves such buffers with mmap, but raises its mmap threshold to
/// the size of each mmapped block freed (up to 32 MiB), after which they come from
/// the worker threads' heaps and strand there: values near `-I` 1m took resident
/// memory 20 to 35 MB over the README's bound (tests/soak.rs). Setting the
/// threshold turns that adjustment off; 128 KiB is glibc's default.
fn fix_mmap_threshold() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator tuning; called before any thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// memcached's `MEMCACHED_PORT_FILENAME`: write the bound ports (`TCP INET: 11211`,
/// then `UDP INET: 11211` for `-U`) to that file, via a `.lck` file renamed into
/// place, so a test harness that starts the server on port 0 can learn the port.
fn write_port_file(
    listeners: &[net::Listener],
    udp_sockets: &[std::net::UdpSocket],
) -> anyhow::Result<()> {
    let Some(path) = std::env::var_os("MEMCACHED_PORT_FILENAME") else {
        return Ok(());
    };
    let mut text = String::new();
    for l in listeners {
        if let Some(port) = l.tcp_port() {
            let family = if l.local_addr_text().contains('[') {
                "INET6"
            } else {
                "INET"
            };
            text.push_str(&format!("TCP {family}: {port}\n"));
        }
    }
    for addr in udp_sockets.iter().filter_map(|u| u.local_addr().ok()) {
        let family = if addr.is_ipv6() { "INET6" } else { "INET" };
        text.push_str(&format!("UDP {family}: {}\n", addr.port()));
    }
    let mut tmp = path.clone();
    tmp.push(".lck");
    std::fs::write(&tmp, text).context("MEMCACHED_PORT_FILENAME: cannot write")?;
    std::fs::rename(&tmp, &path).context("MEMCACHED_PORT_FILENAME: cannot rename")?;
    Ok(())
}
