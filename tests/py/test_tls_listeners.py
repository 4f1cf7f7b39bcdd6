"""memcached 1.6.30's TLS additions, against memcrab and memcached 1.6.45 (the
`kind` parameter; conftest picks 1.6.45 as the oracle): the `-l` prefixes `btls:`
(TLS, no client certificate asked, whatever ssl_verify_mode says) and `mtls:` (a
client certificate required), their startup errors without -Z, `ssl_proto_errors`
in `stats`, and `type=conntlserr` lines in `watch connevents`.

memcached counts a failure inside its accept call in ssl_handshake_errors and one
in a later read in ssl_proto_errors, so for a refused ClientHello (plain text, an
HTTP request, a port probe) which counter moves is a race there: those tests check
that the two together move by one. memcrab's rule is fixed: a failure before it
has answered (the ClientHello refused) counts in ssl_handshake_errors, any later
one (a refused client certificate, the peer gone mid-handshake) in ssl_proto_errors.
"""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import time

import pytest

from conftest import START_ATTEMPTS, _user_args, binary_for, free_port
from test_tls import (  # noqa: F401  (pki and tls_servers are fixtures)
    TIMEOUT_SECS,
    Pki,
    call,
    client_context,
    memcrab_only,
    pki,
    tls_connect,
    tls_servers,
)

KINDS = ("memcached", "memcrab")
WATCH_SECS = 5.0

# OpenSSL 3's texts, which memcached 1.6.45 logs (pinned by running it).
NO_CERT = "error:0A0000C7:SSL routines::peer did not return a certificate"
VERIFY_FAILED = "error:0A000086:SSL routines::certificate verify failed"
WRONG_VERSION = "error:0A00010B:SSL routines::wrong version number"
HTTP_REQUEST = "error:0A00009C:SSL routines::http request"
UNEXPECTED_EOF = "error:0A000126:SSL routines::unexpected eof while reading"


def plain_stats(port: int) -> dict[str, str]:
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_SECS) as s:
        text = call(s, b"stats\r\n", b"END\r\n").decode()
    return dict(line.split(" ", 2)[1:] for line in text.split("\r\n") if line.startswith("STAT"))


def errors(port: int) -> tuple[int, int]:
    st = plain_stats(port)
    return int(st["ssl_handshake_errors"]), int(st["ssl_proto_errors"])


def start(tls_servers, kind: str, pki: Pki, opts: str = "", metrics: bool = False):
    """A server with four listeners: notls: on -p (so the readiness check, a connect
    and close, is no TLS failure), a TLS one without prefix, btls:, mtls:; with
    `metrics`, memcrab's /metrics too (ports["metrics"])."""
    for attempt in range(START_ATTEMPTS):
        # Ports picked here can be taken by another test process before the server
        # binds them: then it exits ("in use") and five others are tried.
        ports = dict(zip(("plain", "tls", "btls", "mtls", "metrics"), distinct_ports(5)))
        all_opts = opts
        if metrics:
            all_opts = ",".join(
                o for o in (opts, f"metrics_listen=127.0.0.1:{ports['metrics']}") if o)
        listen = (f"notls:127.0.0.1,127.0.0.1:{ports['tls']},btls:127.0.0.1:{ports['btls']},"
                  f"mtls:127.0.0.1:{ports['mtls']}")
        try:
            server = tls_servers.start(kind, pki, listen=listen, opts=all_opts,
                                       port=ports["plain"])
        except RuntimeError as exc:
            if "in use" in str(exc).lower() and attempt + 1 < START_ATTEMPTS:
                continue
            raise
        return server, ports
    raise AssertionError("unreachable")


def distinct_ports(n: int) -> list[int]:
    """`n` free loopback ports, all different (each held while the next is picked)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def served(port: int, ctx: ssl.SSLContext) -> bool:
    with tls_connect(None, ctx, port) as s:  # type: ignore[arg-type]
        return call(s, b"version\r\n").startswith(b"VERSION ")


def refused(port: int, ctx: ssl.SSLContext) -> None:
    """The handshake (or the first read, where TLS 1.3 reports a refused client
    certificate) fails."""
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with tls_connect(None, ctx, port) as s:  # type: ignore[arg-type]
            s.sendall(b"version\r\n")
            if not s.recv(100):
                raise ConnectionError("closed")


# ---------------------------------------------------------------------------
# the prefixes


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("verify_mode", [0, 2])
def test_btls_and_mtls_listeners(kind, verify_mode, pki, tls_servers):
    server, ports = start(tls_servers, kind, pki,
                          opts=f"ssl_verify_mode={verify_mode},ssl_ca_cert={pki.ca}")
    good = client_context(pki, (pki.client_crt, pki.client_key))
    rogue = client_context(pki, (pki.rogue_crt, pki.rogue_key))
    none = client_context(pki)
    # The default listener follows ssl_verify_mode.
    assert served(ports["tls"], good)
    if verify_mode == 0:
        assert served(ports["tls"], none)
    else:
        refused(ports["tls"], none)
    # btls: no certificate asked for, whatever ssl_verify_mode says.
    assert served(ports["btls"], none)
    assert served(ports["btls"], rogue)  # not asked for, so never checked
    # mtls: one required, and checked against ssl_ca_cert.
    assert served(ports["mtls"], good)
    before = errors(ports["plain"])
    refused(ports["mtls"], none)
    refused(ports["mtls"], rogue)
    after = errors(ports["plain"])
    assert sum(after) == sum(before) + 2, (before, after)
    if memcrab_only(kind):
        assert after == (before[0], before[1] + 2)
    # notls: plain text.
    with socket.create_connection(("127.0.0.1", ports["plain"]), timeout=TIMEOUT_SECS) as s:
        assert call(s, b"version\r\n").startswith(b"VERSION ")
    assert server.alive()


@pytest.mark.parametrize("kind", KINDS)
def test_mtls_without_ca_file_refuses_every_certificate(kind, pki, tls_servers):
    """As OpenSSL with no trust store: even a certificate from the server's CA fails."""
    server, ports = start(tls_servers, kind, pki)
    refused(ports["mtls"], client_context(pki, (pki.client_crt, pki.client_key)))
    assert served(ports["tls"], client_context(pki))
    assert served(ports["btls"], client_context(pki))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("prefix,name", [("notls", "notls"), ("btls", "btls"),
                                         ("mtls", "otls")])  # 1.6.45's own word
def test_prefix_without_tls_is_refused(kind, prefix, name):
    port = free_port()
    listen = f"127.0.0.1,{prefix}:127.0.0.1:{free_port()}"
    cmd = [binary_for(kind), "-U", "0", "-p", str(port), "-l", listen, *_user_args()]
    r = subprocess.run(cmd, capture_output=True, timeout=10)
    assert r.returncode == 71, r.stderr
    assert r.stderr.decode() == (f"'{name}' option is valid only when SSL is enabled\n"
                                 f"failed to listen on one of interface(s) {listen}: Success\n")


# ---------------------------------------------------------------------------
# ssl_proto_errors


@pytest.mark.parametrize("kind", KINDS)
def test_ssl_proto_errors_only_with_tls(kind, pki, tls_servers, server_factory):
    _, ports = start(tls_servers, kind, pki)
    st = plain_stats(ports["plain"])
    names = [k for k in st if k.startswith("ssl_")]
    assert names == ["ssl_handshake_errors", "ssl_proto_errors"], names
    assert st["ssl_proto_errors"] == "0"
    plain = server_factory.start(kind)
    with plain.connect() as s:
        text = call(s, b"stats\r\n", b"END\r\n")
    assert b"ssl_" not in text


# ---------------------------------------------------------------------------
# watch connevents


class Watcher:
    """A `watch connevents` connection on the plain listener."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_SECS)
        self.sock.sendall(b"watch connevents\r\n")
        # Event lines may follow OK in the same read (the readiness check's probe).
        self.buf = b""
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            assert chunk, "watcher closed"
            self.buf += chunk
        ok, self.buf = self.buf.split(b"\r\n", 1)
        assert ok == b"OK", ok

    def lines_until(self, pred) -> list[str]:
        """Event lines, without `ts=… gid=… `, up to the first that `pred` accepts."""
        out: list[str] = []
        deadline = time.monotonic() + WATCH_SECS
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                text = line.decode()
                assert re.match(r"ts=\d+\.\d+ gid=\d+ ", text), text
                out.append(text.split(" ", 2)[2])
                if pred(out[-1]):
                    return out
            left = deadline - time.monotonic()
            assert left > 0, f"no such event line; got {out}"
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(4096)
            except TimeoutError:
                raise AssertionError(f"no such event line in {WATCH_SECS} s; got {out}") from None
            assert chunk, "watcher closed"
            self.buf += chunk

    def close(self) -> None:
        self.sock.close()


def conn_lines(watcher: Watcher, rport: int) -> list[str]:
    """The lines up to the close of the connection from `rport`, that connection's
    only (and any conntlserr)."""
    lines = watcher.lines_until(lambda l: l.startswith("type=conn_close") and
                                f" rport={rport} " in l)
    return [l for l in lines if f" rport={rport} " in l or l.startswith("type=conntlserr")]


@pytest.mark.parametrize("kind", KINDS)
def test_refused_client_certificate_in_watch(kind, pki, tls_servers):
    _, ports = start(tls_servers, kind, pki)
    w = Watcher(ports["plain"])
    try:
        raw = socket.create_connection(("127.0.0.1", ports["mtls"]), timeout=TIMEOUT_SECS)
        rport = raw.getsockname()[1]
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with client_context(pki).wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"version\r\n")
                if not s.recv(100):
                    raise ConnectionError("closed")
        lines = conn_lines(w, rport)
        new = re.fullmatch(r"type=conn_new rip=127\.0\.0\.1 rport=\d+ transport=tcp cfd=(\d+)",
                           lines[0])
        assert new, lines
        fd = new.group(1)
        assert lines[1:] == [
            f"type=conntlserr fd={fd} msg={NO_CERT}",
            f"type=conn_close rip=127.0.0.1 rport={rport} transport=tcp reason=error cfd={fd}",
        ], lines
    finally:
        w.close()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("send,msg", [
    (b"version\r\n", WRONG_VERSION),
    (b"GET / HTTP/1.0\r\n\r\n", HTTP_REQUEST),
    (b"", UNEXPECTED_EOF),  # a port probe: connect, then close
])
def test_refused_client_hello_in_watch_and_stats(kind, send, msg, pki, tls_servers):
    _, ports = start(tls_servers, kind, pki)
    w = Watcher(ports["plain"])
    try:
        before = errors(ports["plain"])
        with socket.create_connection(("127.0.0.1", ports["tls"]), timeout=TIMEOUT_SECS) as s:
            if send:
                s.sendall(send)
                try:
                    while s.recv(4096):
                        pass
                except ConnectionResetError:
                    pass
        # memcached logs a failure inside its accept call with no conn_new or
        # conn_close: the conntlserr line is the sure one.
        lines = w.lines_until(lambda l: l.startswith("type=conntlserr"))
        assert re.fullmatch(r"type=conntlserr fd=\d+ msg=" + re.escape(msg), lines[-1]), lines
        after = errors(ports["plain"])
        assert sum(after) == sum(before) + 1, (before, after)
        if memcrab_only(kind):
            # Before the server answered: a refused ClientHello (a probe sends none).
            assert after == ((before[0] + 1, before[1]) if send else (before[0], before[1] + 1))
    finally:
        w.close()


@pytest.mark.parametrize("kind", KINDS)
def test_good_connections_log_no_tls_error(kind, pki, tls_servers):
    _, ports = start(tls_servers, kind, pki)
    w = Watcher(ports["plain"])
    try:
        before = errors(ports["plain"])
        for port in (ports["tls"], ports["btls"]):
            raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_SECS)
            rport = raw.getsockname()[1]
            with client_context(pki).wrap_socket(raw, server_hostname="127.0.0.1") as s:
                assert call(s, b"version\r\n").startswith(b"VERSION ")
                s.unwrap().close()
            lines = conn_lines(w, rport)
            assert [l.split(" ")[0] for l in lines] == ["type=conn_new", "type=conn_close"], lines
            assert " reason=normal " in lines[1], lines
        assert errors(ports["plain"]) == before
    finally:
        w.close()


@pytest.mark.parametrize("kind", KINDS)
def test_btls_session_does_not_resume_on_mtls(kind, pki, tls_servers, tmp_path):
    """A session made where no client certificate was asked for resumes there, and
    never where one is required (that would skip the certificate)."""
    _, ports = start(tls_servers, kind, pki, opts=f"ssl_ca_cert={pki.ca}")
    sess = tmp_path / "btls-session.pem"

    def s_client(port: int, *args: str) -> bytes:
        r = subprocess.run(
            ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", str(pki.ca),
             "-ign_eof", *args],
            input=b"version\r\nquit\r\n", capture_output=True, timeout=10)
        return r.stdout

    first = s_client(ports["btls"], "-sess_out", str(sess))
    assert re.search(rb"VERSION 1\.6\.\d+\r\n", first), first[-2000:]
    again = s_client(ports["btls"], "-sess_in", str(sess))
    assert b"Reused, TLSv1.3" in again, again[-2000:]
    mutual = s_client(ports["mtls"], "-sess_in", str(sess))
    assert b"Reused" not in mutual and b"VERSION" not in mutual, mutual[-2000:]


def test_metrics_serve_ssl_proto_errors(pki, tls_servers):
    """memcrab only (/metrics): the series follows `stats ssl_proto_errors`."""
    if not memcrab_only("memcrab"):
        pytest.skip("memcrab's /metrics; MEMCRAB_BIN is memcached")
    _, ports = start(tls_servers, "memcrab", pki, metrics=True)
    with socket.create_connection(("127.0.0.1", ports["tls"]), timeout=TIMEOUT_SECS):
        pass  # a port probe: one ssl_proto_errors
    # The probe is counted when the server sees it close; each `stats` round trip
    # on the plain port is the wait (no sleep), bounded by the deadline.
    deadline = time.monotonic() + WATCH_SECS
    while errors(ports["plain"])[1] != 1:
        assert time.monotonic() < deadline, "the probe was not counted"
    with socket.create_connection(("127.0.0.1", ports["metrics"]), timeout=TIMEOUT_SECS) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        body = b""
        while chunk := s.recv(65536):
            body += chunk
    assert b"\nmemcrab_tls_proto_errors_total 1\n" in body, body[-3000:]
