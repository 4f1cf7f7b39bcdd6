//! memcrab: a memcached-compatible cache server.
//!
//! ```text
//!   main ── parses flags, binds, spawns ──┬─ acceptor thread (listeners, -c)
//!                                         ├─ worker threads × -t (mio or io_uring
//!                                         │    loops, conns)
//!                                         ├─ clock ticker, engine maintainer
//!                                         ├─ metrics thread (-o metrics_listen)
//!                                         └─ signal thread (SIGTERM/SIGINT/SIGUSR1 →
//!                                              shutdown, SIGHUP → service::reload:
//!                                              users and TLS certificates)
//!   after the threads end: a graceful stop (SIGUSR1, `shutdown graceful`) with -e
//!   saves the engine for a warm restart (crates/store/src/seg/persist.rs)
//!   all share Arc<Server> { settings, engine, per-worker counters, users, tls, ... }
//! ```
//!
//! Startup runs memcached's steps in its order (`run`, one function per step;
//! `startup/service.rs` draws them): refuse root without `-u`, bind, leave root,
//! `-d`, `-P`, then start the threads.
//!
//! One request path serves every transport: a transport moves bytes and calls the
//! request step, which frames and decodes requests and hands them to the executors.
//!
//! What is at the top, each above what it imports (no two files import each other,
//! directly or around a circle); each folder's `mod.rs` maps its own files:
//!
//! ```text
//!   main.rs       start-up steps, threads, signals
//!   io/           the transport: the acceptor, sockets, connections, the epoll and
//!                 io_uring loops, UDP, TLS streams (its file map: io/mod.rs)
//!   request.rs    the transport-independent request step (Session::step/serve)
//!   exec/         executors: a file per command family, a file per protocol
//!   server.rs     state shared by every thread (settings, engine, counters, conns,
//!                 users, TLS, the watch hub, the measurements) and Ctx, one
//!                 worker's view of it; it imports only files that import nothing
//!                 of ours
//!   admin/        stats and counters, watch, stats detail, slab classes, tunables,
//!                 the request step's measurements
//!   startup/      the command line, -u/-d/-P, SIGHUP's reload, password files,
//!                 TLS certificates
//!   out.rs        a connection's reply output: bytes, and values lent by the store
//! ```
//!
//! admin/, startup/ and io/tls.rs lie on both sides of server.rs: below it, the
//! parts it holds (settings, counters, recorders, the watch hub, the TLS state);
//! above it, what reads the whole server (`stats`, /metrics, SIGHUP, listeners).

mod admin;
mod exec;
mod io;
mod out;
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
use signal_hook::iterator::Signals;

use crate::admin::{evictions, slab};
use crate::io::{epoll, handoff, listen, net, udp, uring, worker};
use crate::server::Server;
use crate::startup::auth::Users;
use crate::startup::settings::parse::{self, Command};
use crate::startup::settings::{bind_port, EngineKind, IoKind, Settings};
use crate::startup::tls::Tls;
use crate::startup::{certs, service};

fn main() {
    let cmd = match parse::parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("memcrab: {msg}");
            std::process::exit(2);
        }
    };
    let (settings, users) = match cmd {
        Command::Run { settings, users } => (*settings, users),
        Command::Help => {
            print!("{}", parse::usage());
            return;
        }
        Command::Version => {
            println!(
                "memcrab {} (memcached {} compatible)",
                server::MEMCRAB_VERSION,
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
    let tls = match certs::start(
        &settings.tls,
        bind_port(settings.port),
        settings.verbose > 0,
    ) {
        Ok(t) => t,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(certs::EXIT_USAGE);
        }
    };
    if let Err(e) = run(settings, tls, users) {
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

/// memcached's start-up, step by step in its order (`startup/service.rs` draws it),
/// then serving until shutdown, then the graceful stop's save.
fn run(
    mut settings: Settings,
    tls: Option<Arc<Tls>>,
    users: Option<Arc<Users>>,
) -> anyhow::Result<()> {
    cap_workers(&mut settings);
    tune_malloc(&settings);
    let signals = catch_signals()?;
    // memcached refuses root without -u before doing anything else.
    let user = service::target_user(&settings)?;
    if settings.enable_coredumps {
        service::enable_coredumps()?;
    }
    let store = open_engine(&settings, user.as_ref())?;
    choose_io(&mut settings);
    let metrics = bind_metrics(&mut settings)?;
    let server = Arc::new(Server::new(settings, store.engine, tls, users));
    report_evictions(&server, store.clock);
    let (listeners, udp_sockets) = bind(&server, user.as_ref())?;
    write_port_file(&listeners, &udp_sockets)?;
    let pid_file = detach(&server.settings)?;
    listen::register_listeners(&server, &listeners);
    let timers = start_timers(&server)?;
    if let Some(listener) = metrics {
        admin::metrics::spawn(listener, Arc::clone(&server))?;
    }
    let workers = start_workers(&server, &udp_sockets)?;
    start_signal_thread(&server, signals)?;
    announce(&server.settings, &listeners, &udp_sockets);
    serve(&server, listeners, workers, timers)?;
    stop(&server, store.restartable, pid_file)
}

/// More workers than CPUs we may run on only adds context switches (on one pinned
/// core, four workers share it in CFS time slices: more CPU per request and a p99 of
/// milliseconds, docs/benchmarks.md), so the workers are capped at the affinity
/// mask's size (`stats` reports them as `threads`; `stats settings` keeps -t as
/// `num_threads`).
fn cap_workers(settings: &mut Settings) {
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
}

/// glibc's allocator tuning, before any thread exists.
fn tune_malloc(settings: &Settings) {
    if settings.engine == EngineKind::Reference {
        limit_malloc_arenas();
    }
    fix_mmap_threshold();
}

/// Catches the signals before anything else, so that one arriving during startup
/// still means what it means later (SIGHUP never kills memcrab), not the default
/// abrupt exit. [`start_signal_thread`] handles them once the server runs.
fn catch_signals() -> anyhow::Result<Signals> {
    Ok(Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGUSR1,
    ])?)
}

/// The engine and its clock, and, under -e, the segment engine again with its memory
/// file, to save at a graceful stop.
struct Store {
    engine: Arc<dyn memcrab_store::Engine>,
    clock: Arc<Clock>,
    restartable: Option<(Arc<Seg>, std::path::PathBuf)>,
}

/// Builds the engine `-o engine` names; with -e, on a memory file, warm if the last
/// stop saved it. The memory file and its metadata may belong to the `-u` user too
/// (it writes the metadata at a graceful stop, after start-up left root).
fn open_engine(settings: &Settings, user: Option<&nix::unistd::User>) -> anyhow::Result<Store> {
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
    Ok(match (settings.engine, &settings.memory_file) {
        (EngineKind::Seg, Some(path)) => {
            let trusted: Vec<u32> = user.map(|u| u.uid.as_raw()).into_iter().collect();
            let started =
                memcrab_store::seg::persist::open_memory_file_trusting(config, path, &trusted)
                    .with_context(|| format!("-e {}", path.display()))?;
            // memcached prints its [restart] lines whatever the verbosity.
            eprintln!("[restart] {}", started.log);
            let seg = Arc::new(started.seg);
            Store {
                engine: Arc::clone(&seg) as Arc<dyn memcrab_store::Engine>,
                clock: started.clock,
                restartable: Some((seg, path.clone())),
            }
        }
        (EngineKind::Seg, None) => {
            let clock = Arc::new(Clock::new());
            Store {
                engine: Arc::new(Seg::new(config, Arc::clone(&clock))),
                clock,
                restartable: None,
            }
        }
        (EngineKind::Reference, _) => {
            let clock = Arc::new(Clock::new());
            let e = Reference::new(config, settings.hash_power, Arc::clone(&clock));
            Store {
                engine: Arc::new(e),
                clock,
                restartable: None,
            }
        }
    })
}

/// io_uring when asked for and the kernel allows it, else epoll.
fn choose_io(settings: &mut Settings) {
    if settings.io == IoKind::Uring {
        if let Err(e) = uring::probe(settings.max_connections) {
            eprintln!("memcrab: io_uring unavailable ({e}); using epoll");
            settings.io = IoKind::Epoll;
        }
    }
}

/// `-o metrics_listen`: bound now, as the other listeners, so that a bad address
/// stops start-up; `stats settings` shows the address bound.
fn bind_metrics(settings: &mut Settings) -> anyhow::Result<Option<std::net::TcpListener>> {
    let Some(addr) = &settings.metrics_listen else {
        return Ok(None);
    };
    let (listener, bound) = admin::metrics::bind(addr).map_err(anyhow::Error::msg)?;
    settings.metrics_listen = Some(bound);
    Ok(Some(listener))
}

/// `watch evictions`: the engine reports each eviction to the hub.
fn report_evictions(server: &Arc<Server>, clock: Arc<Clock>) {
    let s = &server.settings;
    server
        .engine
        .set_eviction_listener(Arc::new(evictions::EvictionReport {
            hub: Arc::clone(&server.watch),
            clock,
            classes: slab::Classes {
                chunk_size: s.chunk_size,
                growth_factor: s.growth_factor,
                use_cas: s.use_cas,
            },
        }));
}

/// Binds TCP and UDP as root (ports below 1024), leaves root for `user` (-u), then
/// binds the unix socket as that user.
fn bind(
    server: &Server,
    user: Option<&nix::unistd::User>,
) -> anyhow::Result<(Vec<net::Listener>, Vec<std::net::UdpSocket>)> {
    let s = &server.settings;
    let mut listeners = match s.unix_socket {
        None => net::bind(s)?,
        Some(_) => Vec::new(),
    };
    let udp_sockets = net::bind_udp(s)?;
    if let Some(user) = user {
        service::switch_user(user)?;
        // memcached reads -Y after leaving root: a file the user cannot read fails
        // now rather than at the first SIGHUP.
        server.load_users().map_err(anyhow::Error::msg)?;
    }
    if s.unix_socket.is_some() {
        listeners = net::bind(s)?;
    }
    Ok((listeners, udp_sockets))
}

/// `-d` (daemonize), `-P` (the pid file, written after the fork) and `-k` (lock
/// memory).
fn detach(s: &Settings) -> anyhow::Result<Option<service::PidFile>> {
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
    Ok(pid_file)
}

/// Runs `job` every 100 ms on a thread of its own until shutdown.
fn every_100ms(
    name: &str,
    server: &Arc<Server>,
    job: fn(&Server),
) -> std::io::Result<thread::JoinHandle<()>> {
    let server = Arc::clone(server);
    thread::Builder::new().name(name.into()).spawn(move || {
        while !server.shutting_down() {
            job(&server);
            thread::sleep(Duration::from_millis(100));
        }
    })
}

/// The clock ticker (memcached's clock_handler, a few times a second) and the
/// engine's upkeep (expiry and delayed-flush sweeps), each on a thread of its own, as
/// memcached's LRU maintainer is: a long sweep on a busy machine must not hold the
/// clock back (the differential fuzzer once saw it 4 s behind).
fn start_timers(server: &Arc<Server>) -> std::io::Result<[thread::JoinHandle<()>; 2]> {
    let ticker = every_100ms("clock", server, |s| s.engine.clock().tick())?;
    let maintainer = every_100ms("maintain", server, |s| s.engine.maintain())?;
    Ok([ticker, maintainer])
}

/// The worker threads (`-t`, capped by [`cap_workers`]), each with its poll, its
/// hand-off channel from the acceptor and its share of the UDP sockets, on the
/// `-o io` loop; and the acceptor's poll, which the workers' wakers join.
struct Workers {
    accept_poll: Poll,
    to_workers: Vec<(std::sync::mpsc::Sender<handoff::NewConn>, Arc<Waker>)>,
    handles: Vec<thread::JoinHandle<()>>,
}

/// Starts the worker threads; the acceptor, started last by [`serve`], hands them
/// connections.
fn start_workers(
    server: &Arc<Server>,
    udp_sockets: &[std::net::UdpSocket],
) -> anyhow::Result<Workers> {
    let s = &server.settings;
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
        let udp = udp::Ports::new(server, udp_sockets)?;
        let w = worker::Worker {
            id,
            poll,
            rx,
            server: Arc::clone(server),
        };
        handles.push(
            thread::Builder::new()
                .name(format!("worker-{id}"))
                .spawn(move || drive(w, udp, io))?,
        );
    }
    let _ = server.wakers.set(wakers);
    Ok(Workers {
        accept_poll,
        to_workers,
        handles,
    })
}

/// A worker thread's life on the driver `io` names. io_uring hands the worker and
/// its UDP sockets back when its ring cannot be set up or fails at run time (having
/// closed the connections on it); the epoll driver then serves them from there on.
fn drive(w: worker::Worker, udp: udp::Ports, io: IoKind) {
    let (w, udp) = match io {
        IoKind::Uring => match uring::run(w, udp) {
            Some(taken_back) => taken_back,
            None => return,
        },
        IoKind::Epoll => (w, udp),
    };
    epoll::run(w, udp);
}

/// The signal thread: SIGHUP reloads (users and TLS certificates); SIGUSR1 is
/// memcached's graceful stop; SIGTERM and SIGINT stop.
fn start_signal_thread(server: &Arc<Server>, mut signals: Signals) -> std::io::Result<()> {
    let server = Arc::clone(server);
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            use signal_hook::consts::{SIGHUP, SIGUSR1};
            for sig in signals.forever() {
                match sig {
                    SIGHUP => service::reload(&server),
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
    Ok(())
}

/// `-v`: what memcrab listens on, and with which loop.
fn announce(s: &Settings, listeners: &[net::Listener], udp_sockets: &[std::net::UdpSocket]) {
    if s.verbose > 0 {
        eprintln!(
            "memcrab {} (memcached {} protocol)",
            server::MEMCRAB_VERSION,
            server::VERSION
        );
        eprintln!("memcrab: connections on {}", s.io.name());
        for l in listeners {
            eprintln!("memcrab: listening on {}", l.local_addr_text());
        }
        for u in udp_sockets.iter().filter_map(|u| u.local_addr().ok()) {
            eprintln!("memcrab: listening on udp:{u}");
        }
    }
}

/// Runs the acceptor until shutdown, then waits for every thread to end.
fn serve(
    server: &Arc<Server>,
    listeners: Vec<net::Listener>,
    workers: Workers,
    timers: [thread::JoinHandle<()>; 2],
) -> std::io::Result<()> {
    let acceptor = {
        let server = Arc::clone(server);
        let Workers {
            accept_poll,
            to_workers,
            ..
        } = workers;
        thread::Builder::new()
            .name("acceptor".into())
            .spawn(move || listen::accept_loop(listeners, accept_poll, to_workers, server))?
    };
    let _ = acceptor.join();
    for h in workers.handles {
        let _ = h.join();
    }
    // Nothing else touches the engine after this (the maintainer included).
    for t in timers {
        let _ = t.join();
    }
    Ok(())
}

/// After every thread ended: a graceful stop with -e saves the engine for a warm
/// restart; then the pid file goes.
fn stop(
    server: &Server,
    restartable: Option<(Arc<Seg>, std::path::PathBuf)>,
    pid_file: Option<service::PidFile>,
) -> anyhow::Result<()> {
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
/// memory 20 to 35 MB over the README's bound (tests/soak/). Setting the
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
