//! memcrab's buffering around rustls (`crates/server/src/io/tls.rs`, `TlsStream`),
//! driven through a real socket: the TLS code lives in the server binary, which has
//! no library target, so this check starts the real `memcrab -Z` (once per process)
//! and plays a rustls client against it. libFuzzer's coverage therefore sees only
//! this client side; the input still steers everything the server's read/write/
//! flush state machine meets: TLS 1.2 or 1.3, the server's `ssl_wbuf_size` (1 KiB or
//! the default 16 KiB), where plaintext is cut into TLS records (mid-command,
//! mid-value), how the record stream is cut into socket writes (down to one byte),
//! pipelined commands whose replies pile up unread (large values, multi-gets), a
//! client close_notify, and a corrupted byte anywhere in the record stream.
//!
//! Checked:
//! - without corruption: the plaintext replies are exactly the memcached replies to
//!   the commands sent, in order, however the bytes were cut (the replies are
//!   computed from a model: each connection uses keys of its own after a
//!   `flush_all`);
//! - after a corrupted byte or a close_notify (and our half-close): the server ends
//!   the connection within 20 s, and what it answered is a prefix of the replies;
//! - the server is still running after every input.
//!
//! The binary is `$MEMCRAB_BIN`, else `target/release/memcrab` of this repository.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use memcrab_testkit::{Launch, Scratch, Server};

use crate::reader::Reader;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};

/// How long one input may take, in all: far more than the bounded work below needs
/// even under ASan on a loaded machine, so a miss means the server stopped.
const DEADLINE: Duration = Duration::from_secs(20);
/// Most TLS records one `put` makes, and most socket writes one `send` makes: tiny
/// cuts stay tiny for small messages (headers, record boundaries) but a 40 KB value
/// cut into 1-byte records sent 1 byte at a time would take a million syscalls.
const MAX_PIECES: usize = 256;

/// The two servers (by `ssl_wbuf_size`) and the certificates' directory.
struct Servers {
    servers: [Server; 2],
    _certs: Scratch,
}

fn memcrab() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMCRAB_BIN").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/memcrab");
    assert!(
        p.is_file(),
        "no memcrab binary at {}: build it with `cargo build --release -p memcrab-server` \
         (or point MEMCRAB_BIN at one)",
        p.display()
    );
    p
}

fn servers() -> &'static Mutex<Servers> {
    /// The servers every run talks to, started once; the mutex is held for a whole
    /// run, so runs on several threads take turns.
    static SERVERS: OnceLock<Mutex<Servers>> = OnceLock::new();
    SERVERS.get_or_init(|| {
        let certs = Scratch::new("fuzz-tls").expect("scratch dir");
        let dir = certs.path();
        let st = std::process::Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(dir.join("key.pem"))
            .arg("-out")
            .arg(dir.join("cert.pem"))
            .stderr(std::process::Stdio::null())
            .status()
            .expect("run openssl to make a certificate");
        assert!(st.success(), "openssl req failed");
        let start = |wbuf_kb: u32| {
            let opts = format!(
                "ssl_chain_cert={},ssl_key={},ssl_wbuf_size={wbuf_kb}",
                dir.join("cert.pem").display(),
                dir.join("key.pem").display()
            );
            Launch::new(memcrab())
                .args(["-Z", "-t", "1", "-m", "64", "-o", &opts])
                .die_with_parent()
                .tag("fuzz-tls")
                .start()
                .expect("start memcrab -Z")
        };
        Mutex::new(Servers {
            servers: [start(1), start(16)],
            _certs: certs,
        })
    })
}

/// Trusts any certificate: the check is about the stream, not about PKI.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn client_config(tls13: bool) -> Arc<ClientConfig> {
    /// The TLS 1.2 and 1.3 client configurations, built once.
    static CONFIGS: OnceLock<[Arc<ClientConfig>; 2]> = OnceLock::new();
    let make = |v: &'static rustls::SupportedProtocolVersion| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[v])
            .expect("protocol version")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
            .with_no_client_auth();
        Arc::new(cfg)
    };
    let c = CONFIGS.get_or_init(|| [make(&rustls::version::TLS12), make(&rustls::version::TLS13)]);
    Arc::clone(&c[usize::from(tls13)])
}

/// One client connection and what it has seen.
struct Conn {
    tcp: TcpStream,
    tls: ClientConnection,
    /// TLS bytes taken from rustls, not yet written to the socket.
    out: Vec<u8>,
    /// Plaintext replies received.
    got: Vec<u8>,
    /// Why the connection ended (EOF, close_notify, an alert, a reset), once it did.
    closed: Option<String>,
    deadline: Instant,
}

impl Conn {
    /// Moves what the socket has into rustls and the plaintext into `got`.
    fn read_some(&mut self) {
        if self.closed.is_some() {
            return;
        }
        let mut buf = [0u8; 16 * 1024];
        match self.tcp.read(&mut buf) {
            Ok(0) => self.closed = Some("EOF".into()),
            Ok(n) => {
                let mut slice = &buf[..n];
                while !slice.is_empty() {
                    if let Err(e) = self.tls.read_tls(&mut slice) {
                        self.closed = Some(format!("read_tls: {e}"));
                        return;
                    }
                    if let Err(e) = self.tls.process_new_packets() {
                        // A fatal alert from the server or a record we cannot read.
                        self.closed = Some(format!("TLS: {e}"));
                        return;
                    }
                    let mut plain = [0u8; 16 * 1024];
                    loop {
                        match self.tls.reader().read(&mut plain) {
                            Ok(0) => {
                                self.closed = Some("close_notify".into());
                                return;
                            }
                            Ok(k) => self.got.extend_from_slice(&plain[..k]),
                            Err(_) => break,
                        }
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => self.closed = Some(format!("read: {e}")),
        }
    }

    fn take_tls(&mut self) {
        while self.tls.wants_write() {
            if self.tls.write_tls(&mut self.out).is_err() {
                break;
            }
        }
    }

    /// Sends what rustls has in socket writes of at most `cut` bytes, reading
    /// replies whenever the socket is full (the server stops reading a client that
    /// does not read).
    fn send(&mut self, cut: usize) {
        self.take_tls();
        let cut = cut.max(self.out.len() / (4 * MAX_PIECES));
        let mut at = 0;
        while at < self.out.len() && self.closed.is_none() {
            assert!(
                Instant::now() < self.deadline,
                "send: the input took over 20 s (the server stopped reading?)"
            );
            let end = (at + cut.max(1)).min(self.out.len());
            match self.tcp.write(&self.out[at..end]) {
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.read_some(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.closed = Some(format!("write: {e}")),
            }
        }
        self.out.clear();
    }

    /// Hands `plain` to rustls in pieces of at most `cut` bytes (each becomes its own
    /// record), sending when rustls's buffer is full.
    fn put(&mut self, plain: &[u8], cut: usize) {
        let cut = cut.max(plain.len() / MAX_PIECES);
        let mut at = 0;
        while at < plain.len() && self.closed.is_none() {
            let end = (at + cut.max(1)).min(plain.len());
            match self.tls.writer().write(&plain[at..end]) {
                Ok(0) | Err(_) => self.send(16 * 1024),
                Ok(n) => at += n,
            }
        }
    }
}

/// The `tls` fuzz target.
pub fn tls(data: &[u8]) {
    /// Relaxed: it only has to hand out distinct numbers.
    static CONN_ID: AtomicU64 = AtomicU64::new(0);
    let mut guard = servers().lock().unwrap_or_else(|e| e.into_inner());
    let mut r = Reader(data);
    let mode = r.u8();
    let srv = &mut guard.servers[usize::from(mode & 1)];
    let addr = srv.tcp.expect("a TCP address");
    let tcp = TcpStream::connect(addr).expect("connect to memcrab -Z");
    tcp.set_nodelay(true).expect("nodelay");
    tcp.set_nonblocking(true).expect("nonblocking");
    let name = ServerName::try_from("localhost").expect("server name");
    let tls = ClientConnection::new(client_config(mode & 2 != 0), name).expect("client");
    let mut c = Conn {
        tcp,
        tls,
        out: Vec::new(),
        got: Vec::new(),
        closed: None,
        deadline: Instant::now() + DEADLINE,
    };
    // The handshake, its flights cut as the input says.
    let hs_cut = usize::from(r.u8()) + 1;
    while c.tls.is_handshaking() && c.closed.is_none() {
        assert!(
            Instant::now() < c.deadline,
            "the handshake did not finish in 20 s"
        );
        c.send(hs_cut);
        if c.tls.is_handshaking() {
            c.read_some();
        }
    }
    if let Some(why) = &c.closed {
        panic!("the connection ended during a clean handshake: {why}");
    }
    let id = CONN_ID.fetch_add(1, Ordering::Relaxed);
    let mut expected = b"OK\r\n".to_vec();
    c.put(b"flush_all\r\n", 64);
    let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut broken = false;
    let mut cut = 4096usize;
    for _ in 0..48 {
        if r.0.is_empty() || broken {
            break;
        }
        match r.u8() % 8 {
            0 | 1 => {
                // set k<id>:<x> with a value whose length and bytes come from the input.
                let key = format!("k{id}:{}", r.u8() % 8).into_bytes();
                let len = usize::from(r.u16()) % 40_000;
                let fill = r.u8();
                let value: Vec<u8> = (0..len).map(|j| fill.wrapping_add(j as u8)).collect();
                let mut cmd = b"set ".to_vec();
                cmd.extend_from_slice(&key);
                cmd.extend_from_slice(format!(" 0 0 {len}\r\n").as_bytes());
                cmd.extend_from_slice(&value);
                cmd.extend_from_slice(b"\r\n");
                c.put(&cmd, cut);
                expected.extend_from_slice(b"STORED\r\n");
                model.insert(key, value);
            }
            2 | 3 => {
                // get of up to 4 keys, repeats allowed: replies pile up unread.
                let mut cmd = b"get".to_vec();
                for _ in 0..(r.u8() % 4 + 1) {
                    let key = format!("k{id}:{}", r.u8() % 8).into_bytes();
                    cmd.push(b' ');
                    cmd.extend_from_slice(&key);
                    if let Some(v) = model.get(&key) {
                        expected.extend_from_slice(b"VALUE ");
                        expected.extend_from_slice(&key);
                        expected.extend_from_slice(format!(" 0 {}\r\n", v.len()).as_bytes());
                        expected.extend_from_slice(v);
                        expected.extend_from_slice(b"\r\n");
                    }
                }
                cmd.extend_from_slice(b"\r\n");
                expected.extend_from_slice(b"END\r\n");
                c.put(&cmd, cut);
            }
            4 => {
                c.put(b"mn\r\n", cut);
                expected.extend_from_slice(b"MN\r\n");
            }
            5 => cut = usize::from(r.u16()) % 20_000 + 1,
            6 => {
                let wire = usize::from(r.u16()) % 2048 + 1;
                c.send(wire);
                if r.u8() & 1 == 1 {
                    c.read_some();
                }
            }
            _ => match r.u8() % 4 {
                0 => {
                    // A flipped byte in the record stream.
                    c.take_tls();
                    if !c.out.is_empty() {
                        let at = usize::from(r.u16()) % c.out.len();
                        c.out[at] ^= r.u8() | 1;
                        broken = true;
                    }
                }
                1 => {
                    c.tls.send_close_notify();
                    broken = true;
                }
                _ => {
                    // A pause: read what is there.
                    c.read_some();
                }
            },
        }
    }
    c.send(usize::from(r.u8()) * 64 + 1);
    if broken {
        let _ = c.tcp.shutdown(Shutdown::Write);
        while c.closed.is_none() {
            assert!(
                Instant::now() < c.deadline,
                "the server kept a broken TLS connection open for 20 s"
            );
            c.read_some();
        }
        assert!(
            expected.starts_with(&c.got),
            "replies before the break are not a prefix of the expected ones:\n got {} bytes",
            c.got.len()
        );
    } else {
        while c.got.len() < expected.len() && c.closed.is_none() {
            assert!(
                Instant::now() < c.deadline,
                "waited 20 s for replies: {} of {} bytes",
                c.got.len(),
                expected.len()
            );
            c.read_some();
        }
        assert!(
            c.got == expected,
            "replies differ: got {} bytes, expected {} (first difference at {}; ended: {:?})",
            c.got.len(),
            expected.len(),
            c.got
                .iter()
                .zip(&expected)
                .position(|(a, b)| a != b)
                .unwrap_or(c.got.len().min(expected.len())),
            c.closed
        );
    }
    drop(c);
    assert!(srv.running(), "memcrab -Z exited: {}", srv.stderr());
}
