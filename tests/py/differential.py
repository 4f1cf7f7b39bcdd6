"""The differential harness: play one conversation to two servers, mask, compare.

A conversation is a list of steps. A step sends one or more raw byte chunks on
one connection, then a sentinel request (text `mn`, or a binary NOOP on a
connection whose first byte was 0x80), and reads that connection until the
sentinel's reply arrives (which proves every reply before it is complete; the
sentinel's reply is not recorded) or the server closes it. Nothing is timed:
  - chunks go out as separate writes, each only after the server has read the
    one before (its socket's receive queue in /proc/net/tcp is empty), so the
    server sees partial reads;
  - a step that leaves a request unfinished (`open=True`) sends no sentinel; its
    replies are read with the connection's next step, or, if it is the
    connection's last, until the server closes it;
  - a step that waits for time (`wait_clock=N`) first polls the server's clock
    (`STAT time`, on a side connection) until it is N seconds past its reading
    when the previous step finished: expiry and delayed flushes follow that clock;
  - `close_after=S` sends nothing and waits (10 s at most) for the server to
    close the connection, recorded as <CLOSED>, or as <CLOSED EARLY> when that
    came sooner than S seconds after the previous step finished;
  - `settle_conns=True` first polls `stats conns` on the step's connection until
    it is the only client connection the server lists (a connection closed just
    before, like the harness's readiness probe, may still be listed).
Both servers get the same conversation at the same time, each over its own
fresh connections.

Replies are compared byte for byte after masking only what legitimately
differs between two correct servers:
  - CAS uniques in `VALUE <key> <flags> <bytes> <cas>` lines become <cas#N>,
    numbered by first appearance (0 stays 0: `-C` must answer 0), so equal
    CAS values must stay equal and different ones different;
  - the same CAS uniques in meta replies: the `c<cas>` flag of `HD`/`VA`/`NS`/
    `EX`/`NF` lines (a `VA` line's data block is skipped, never parsed) and
    `cas=<cas>` in `ME` lines;
  - the text after `VERSION `;
  - STAT blocks: reduced to the stat names the case requires (sorted), with
    values kept only for the names whose values the case compares.
A closed connection is recorded as <CLOSED>: EOF, RST and a refused connect
alike (after `shutdown` a connect may be refused, or accepted by the kernel and
then reset, depending on timing). Nothing else is masked.

Placeholders in sent bytes are filled per server before sending:
  <cas#N>   the N-th distinct non-zero CAS unique that server has returned
  <now+S>   the unix time plus S seconds (also <now-S>)
"""

from __future__ import annotations

import re
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

# Deadlines, generous for a loaded 2-core machine: a step whose sentinel reply has
# not come by then is recorded as it stands (and so differs from memcached's).
STEP_DEADLINE_SECS = 10.0
POLL_SECS = 0.002  # the interval of every bounded poll below

CLOSED = b"<CLOSED>"
CLOSED_EARLY = b"<CLOSED EARLY>"

TEXT_SENTINEL, TEXT_SENTINEL_REPLY = b"mn\r\n", b"MN\r\n"
# A binary NOOP with a distinctive opaque; its reply echoes the opaque.
_OPAQUE = b"\x5e\x47\x1e\x1e"
BINARY_SENTINEL = b"\x80\x0a" + b"\x00" * 10 + _OPAQUE + b"\x00" * 8
BINARY_SENTINEL_REPLY = b"\x81\x0a" + b"\x00" * 10 + _OPAQUE + b"\x00" * 8

_CAS_REF = re.compile(rb"<cas#(\d+)>")
_NOW_REF = re.compile(rb"<now([+-]\d+)>")
_FD_PREFIX = re.compile(rb"^\d+:")
# Meta reply lines whose flags may carry a CAS unique (`mg`/`ms`/`ma` `c`, `me`).
_META_CODES = (b"HD ", b"HD\r", b"VA ", b"NS ", b"EX ", b"NF ", b"ME ")


@dataclass(frozen=True)
class Step:
    chunks: tuple[bytes, ...]
    conn: int = 0  # which connection of the conversation (opened on first use)
    open: bool = False  # leaves a request unfinished: no sentinel (module docs)
    wait_clock: int = 0  # first wait for the server's clock to pass this many seconds
    close_after: float | None = None  # send nothing; expect a close, not sooner than this
    settle_conns: bool = False  # first wait until this is the only client connection


def S(*chunks: bytes, conn: int = 0, open: bool = False, wait_clock: int = 0,
      close_after: float | None = None, settle_conns: bool = False) -> Step:
    return Step(tuple(chunks), conn=conn, open=open, wait_clock=wait_clock,
                close_after=close_after, settle_conns=settle_conns)


@dataclass(frozen=True)
class Case:
    id: str
    steps: tuple  # of Step, or bytes for a one-chunk step on connection 0
    args: tuple[str, ...] = ()
    unix: bool = False  # serve on a unix socket (-s) instead of TCP
    stats: tuple[bytes, ...] = ()  # STAT names that must be present (fd prefixes as <fd>:)
    stat_values: tuple[bytes, ...] = ()  # STAT names whose values must be equal too
    collapse: bool = False  # collapse runs of identical reply lines to "<line> <xN+>"
    expect: bytes | None = None  # memcached 1.6.18's masked reply (steps joined), pinned

    def normalized_steps(self) -> list[Step]:
        return [s if isinstance(s, Step) else S(s) for s in self.steps]


class CasNames:
    """Numbers CAS uniques by first appearance, per server and conversation."""

    def __init__(self):
        self.by_value: dict[bytes, int] = {}
        self.values: list[bytes] = []

    def name(self, value: bytes) -> bytes:
        if value == b"0":
            return value
        if value not in self.by_value:
            self.values.append(value)
            self.by_value[value] = len(self.values)
        return b"<cas#%d>" % self.by_value[value]

    def lookup(self, n: int) -> bytes:
        if not 1 <= n <= len(self.values):
            raise AssertionError(f"conversation refers to <cas#{n}> but only {len(self.values)} seen")
        return self.values[n - 1]


def fill_placeholders(chunk: bytes, cas: CasNames) -> bytes:
    chunk = _CAS_REF.sub(lambda m: cas.lookup(int(m.group(1))), chunk)
    return _NOW_REF.sub(lambda m: b"%d" % (int(time.time()) + int(m.group(1))), chunk)


def _recv(sock: socket.socket, deadline: float) -> tuple[bytes | None, bool]:
    """One read with a deadline: (bytes, False), (None, True) on a close, or
    (None, False) when the deadline passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        return None, False
    sock.settimeout(left)
    try:
        chunk = sock.recv(1 << 16)
    except (socket.timeout, BlockingIOError):
        return None, False
    except (ConnectionResetError, ConnectionAbortedError):
        return None, True
    return (chunk, False) if chunk else (None, True)


def read_until(sock: socket.socket, end: bytes | None, count: int = 1) -> tuple[bytes, bool]:
    """Read until the bytes received end with `end` (removed from the result) and
    hold it `count` times, or the server closes the connection (`end` None: only
    that), or the deadline. Returns (bytes, closed)."""
    data = bytearray()
    deadline = time.monotonic() + STEP_DEADLINE_SECS
    while True:
        if end is not None and data.endswith(end) and data.count(end) >= count:
            return bytes(data[: -len(end)]), False
        chunk, closed = _recv(sock, deadline)
        if chunk is None:
            return bytes(data), closed
        data += chunk


def sentinel_for(binary: bool) -> tuple[bytes, bytes]:
    return (BINARY_SENTINEL, BINARY_SENTINEL_REPLY) if binary else (TEXT_SENTINEL, TEXT_SENTINEL_REPLY)


# The step's own `mn` commands, whose replies are the text sentinel's.
_OWN_MN = re.compile(rb"(?:^|\n)mn[ \r\n]")


def read_reply(sock: socket.socket, binary: bool = False, sent: bytes = b"") -> tuple[bytes, bool]:
    """Send the sentinel after `sent` and read the replies up to the sentinel's own
    (not returned), or to a close. Returns (bytes, closed)."""
    request, reply = sentinel_for(binary)
    try:
        sock.sendall(request)
    except (BrokenPipeError, ConnectionResetError):
        return read_until(sock, None)  # closed: collect what came before
    own = 0 if binary else len(_OWN_MN.findall(sent))
    return read_until(sock, reply, own + 1)


def _proc_addr(text: str) -> tuple[bytes, int]:
    """/proc/net/tcp's `0100007F:2BCB`: (address bytes, port)."""
    ip, port = text.split(":")
    raw = b"".join(int(ip[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(ip), 8))
    return raw, int(port, 16)


def unread_by_server(sock: socket.socket) -> int | None:
    """Bytes sent on `sock` that the server has not read yet: the receive queue of
    its end of the connection, from /proc/net/tcp (both ends are on this machine).
    None if that socket is not found."""
    here, there = sock.getsockname()[:2], sock.getpeername()[:2]
    family = "tcp" if sock.family == socket.AF_INET else "tcp6"
    want_local = (socket.inet_pton(sock.family, there[0]), there[1])
    want_remote = (socket.inet_pton(sock.family, here[0]), here[1])
    with open(f"/proc/net/{family}") as f:
        next(f)
        for line in f:
            fields = line.split()
            if _proc_addr(fields[1]) == want_local and _proc_addr(fields[2]) == want_remote:
                return int(fields[4].split(":")[1], 16)
    return None


def wait_until(what: str, cond: Callable[[], bool], within: float = STEP_DEADLINE_SECS) -> float:
    """Poll `cond` until it holds; fail after `within` seconds. Returns the seconds
    it took (for the client suites' expiry tests, which poll instead of sleeping)."""
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > within:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        time.sleep(POLL_SECS)
    return time.monotonic() - start


def wait_server_read(sock: socket.socket) -> None:
    """Wait until the server has read everything sent on `sock`, so that the next
    write reaches it in a read of its own."""
    if sock.family == socket.AF_UNIX:
        raise AssertionError("split writes are only supported over TCP")
    wait_until("the server to read a chunk", lambda: unread_by_server(sock) == 0)


def _stats(sock: socket.socket, sub: bytes = b"") -> list[bytes]:
    """`stats[ sub]` on `sock`: its STAT lines."""
    sock.sendall(b"stats" + (b" " + sub if sub else b"") + b"\r\n")
    data, _ = read_until(sock, b"END\r\n")
    return data.splitlines()


def server_clock(server) -> int:
    """The server's clock (`STAT time`), read on a connection of its own."""
    sock = server.connect()
    try:
        for line in _stats(sock):
            if line.startswith(b"STAT time "):
                return int(line.split()[2])
    finally:
        sock.close()
    raise AssertionError("no STAT time")


def _client_conns(sock: socket.socket) -> int:
    return sum(1 for line in _stats(sock, b"conns") if b":listen_addr " in line)


def play(server, case: Case) -> list[bytes]:
    """Run the conversation against one server; the raw reply of each step."""
    conns: dict[int, socket.socket] = {}
    binary: dict[int, bool] = {}
    closed: set[int] = set()
    cas = CasNames()
    replies = []
    steps = case.normalized_steps()
    last_on_conn = {step.conn: i for i, step in enumerate(steps)}
    clock = None  # the server's clock when the previous step finished
    finished = time.monotonic()  # when the previous step finished
    try:
        for i, step in enumerate(steps):
            if step.wait_clock:
                target = clock + step.wait_clock
                wait_until(f"the server clock to reach {target}", lambda: server_clock(server) >= target)
            if step.conn in closed:
                replies.append(CLOSED)
                continue
            if step.conn not in conns:
                try:
                    conns[step.conn] = server.connect()
                except OSError:
                    closed.add(step.conn)
                    replies.append(CLOSED)
                    continue
            sock = conns[step.conn]
            if step.settle_conns:
                wait_until("the other connections to be gone", lambda: _client_conns(sock) == 1)
            if step.close_after is not None:
                data, was_closed = read_until(sock, None)
                if was_closed:
                    closed.add(step.conn)
                    early = time.monotonic() - finished < step.close_after
                    data += CLOSED_EARLY if early else CLOSED
                replies.append(data)
                finished = time.monotonic()
                continue
            send_failed = False
            for k, chunk in enumerate(step.chunks):
                if step.conn not in binary:
                    binary[step.conn] = chunk[:1] == b"\x80"
                if k:
                    wait_server_read(sock)
                try:
                    sock.sendall(fill_placeholders(chunk, cas))
                except (BrokenPipeError, ConnectionResetError):
                    send_failed = True
                    break
            if send_failed:
                data, was_closed = read_until(sock, None)
            elif step.open and last_on_conn[step.conn] == i:
                data, was_closed = read_until(sock, None)  # the server must close it
            elif step.open:
                replies.append(b"")  # its replies are read with the next step
                continue
            else:
                data, was_closed = read_reply(sock, binary.get(step.conn, False), b"".join(step.chunks))
            if was_closed or send_failed:
                closed.add(step.conn)
                data += CLOSED
            # Learn the CAS names in order, so <cas#N> works in the next step.
            mask(data, cas, (), ())
            replies.append(data)
            finished = time.monotonic()
            if i + 1 < len(steps) and steps[i + 1].wait_clock:
                clock = server_clock(server)
    finally:
        for sock in conns.values():
            sock.close()
    return replies


def _mask_stats(lines: list[bytes], names: tuple, values: tuple) -> list[bytes]:
    out = []
    for line in lines:
        body = line.rstrip(b"\r\n")
        parts = body.split(b" ", 2)
        name = parts[1] if len(parts) > 1 else b""
        if name not in names:
            # `stats conns` prefixes names with file descriptors: match them as <fd>:.
            name = _FD_PREFIX.sub(b"<fd>:", name)
        value = parts[2] if len(parts) > 2 else b""
        if name in values:
            out.append(b"STAT %s %s\r\n" % (name, value))
        elif name in names:
            out.append(b"STAT %s *\r\n" % name)
    return sorted(out)


def mask(reply: bytes, cas: CasNames, names: tuple, values: tuple) -> bytes:
    """Mask one step's reply (see the module docs)."""
    out: list[bytes] = []
    i, n = 0, len(reply)
    stats: list[bytes] = []

    def flush_stats():
        if stats:
            out.extend(_mask_stats(stats, names, values))
            stats.clear()

    while i < n:
        if reply.startswith(CLOSED, i):
            flush_stats()
            out.append(CLOSED)
            i += len(CLOSED)
            continue
        j = reply.find(b"\n", i)
        if j < 0:
            flush_stats()
            out.append(reply[i:])
            break
        line = reply[i : j + 1]
        i = j + 1
        if line.startswith(b"STAT "):
            stats.append(line)
            continue
        flush_stats()
        if line.startswith(b"VALUE "):
            ending = b"\r\n" if line.endswith(b"\r\n") else b"\n"
            parts = line[: -len(ending)].split(b" ")
            if len(parts) in (4, 5) and all(p.isdigit() for p in parts[2:]):
                if len(parts) == 5:
                    parts[4] = cas.name(parts[4])
                out.append(b" ".join(parts) + ending)
                size = int(parts[3]) + 2
                out.append(reply[i : i + size])  # the data block, never parsed as lines
                i += size
                continue
        if line[:3] in _META_CODES:
            ending = b"\r\n" if line.endswith(b"\r\n") else b"\n"
            parts = line[: -len(ending)].split(b" ")
            for k, p in enumerate(parts[1:], 1):
                if p[:1] == b"c" and p[1:].isdigit():
                    parts[k] = b"c" + cas.name(p[1:])
                elif p.startswith(b"cas=") and p[4:].isdigit():
                    parts[k] = b"cas=" + cas.name(p[4:])
            out.append(b" ".join(parts) + ending)
            if line.startswith(b"VA ") and parts[1].isdigit():
                size = int(parts[1]) + 2
                out.append(reply[i : i + size])  # the data block, never parsed as lines
                i += size
            continue
        if line.startswith(b"VERSION "):
            line = b"VERSION <masked>" + (b"\r\n" if line.endswith(b"\r\n") else b"\n")
        out.append(line)
    flush_stats()
    return b"".join(out)


def collapse_runs(masked: bytes) -> bytes:
    """Replace each run of identical lines by one line marked `<repeated>`.

    For conversations whose exact counts are the engine's business (how many
    values fit before memory runs out): the order of outcomes must still match."""
    out = []
    for line in masked.splitlines(keepends=True):
        if out and out[-1][0] == line:
            out[-1][1] += 1
        else:
            out.append([line, 1])
    return b"".join(line if count == 1 else line.rstrip(b"\r\n") + b" <repeated>\r\n" for line, count in out)


def masked_replies(case: Case, raw: list[bytes]) -> list[bytes]:
    cas = CasNames()
    masked = [mask(r, cas, case.stats + case.stat_values, case.stat_values) for r in raw]
    if case.collapse:
        masked = [collapse_runs(m) for m in masked]
    return masked


# Plays a case to both servers at once, so their waits for the clock overlap.
_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="diff")


def assert_same_as_memcached(
    case: Case, server_factory, describe: Callable[[Case, list[bytes], list[bytes]], str]
) -> None:
    """Plays `case` to memcached and memcrab at once and asserts memcrab's masked
    replies equal memcached's; `describe` explains a difference. Also asserts the
    case is not vacuous (every stat it names exists in memcached) and that
    memcached still answers a pinned case (`expect`) as pinned."""
    oracle = server_factory.start("memcached", case.args, unix=case.unix)
    candidate = server_factory.start("memcrab", case.args, unix=case.unix)
    futures = [_pool.submit(play, server, case) for server in (oracle, candidate)]
    raw_oracle, raw_candidate = (f.result() for f in futures)
    oracle_masked = masked_replies(case, raw_oracle)
    candidate_masked = masked_replies(case, raw_candidate)

    # Guard against vacuous cases: every stat a case names must exist in memcached.
    for name in case.stats + case.stat_values:
        assert any(b"STAT %s " % name in m for m in oracle_masked), f"memcached has no stat {name!r}"
    if case.expect is not None:
        assert b"".join(oracle_masked) == case.expect, (
            f"memcached itself no longer answers case {case.id} as pinned:\n"
            f"  pinned:    {case.expect!r}\n  memcached: {b''.join(oracle_masked)!r}"
        )
    assert candidate_masked == oracle_masked, describe(case, oracle_masked, candidate_masked)
