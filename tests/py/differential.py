"""The differential harness: play one conversation to two servers, mask, compare.

A conversation is a list of steps. A step sends one or more raw byte chunks on
one connection (chunks go out as separate writes, a few ms apart, so servers
see partial reads), then reads that connection until it has been quiet for
QUIET_SECS or the server closes it. Both servers get the same conversation at
the same time, each over its own fresh connections, so the quiet waits overlap
and timed steps (sleep=...) line up.

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

import os
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

QUIET_SECS = float(os.environ.get("MEMCRAB_DIFF_QUIET_MS", "200")) / 1000.0
MAX_STEP_SECS = 10.0  # a server that keeps talking longer than this is cut off
# Long enough for a server on a loaded 2-core machine to read a chunk before the
# next arrives (cases that split a line depend on it).
CHUNK_GAP_SECS = 0.05

CLOSED = b"<CLOSED>"

_CAS_REF = re.compile(rb"<cas#(\d+)>")
_NOW_REF = re.compile(rb"<now([+-]\d+)>")
_FD_PREFIX = re.compile(rb"^\d+:")
# Meta reply lines whose flags may carry a CAS unique (`mg`/`ms`/`ma` `c`, `me`).
_META_CODES = (b"HD ", b"HD\r", b"VA ", b"NS ", b"EX ", b"NF ", b"ME ")


@dataclass(frozen=True)
class Step:
    chunks: tuple[bytes, ...]
    sleep: float = 0.0  # seconds to wait before sending
    conn: int = 0  # which connection of the conversation (opened on first use)


def S(*chunks: bytes, sleep: float = 0.0, conn: int = 0) -> Step:
    return Step(tuple(chunks), sleep=sleep, conn=conn)


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


def read_reply(sock: socket.socket) -> tuple[bytes, bool]:
    """Read until quiet for QUIET_SECS, or closed. Returns (bytes, closed)."""
    data = bytearray()
    sock.settimeout(QUIET_SECS)
    deadline = time.monotonic() + MAX_STEP_SECS
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 16)
        except (socket.timeout, BlockingIOError):
            return bytes(data), False
        except (ConnectionResetError, ConnectionAbortedError):
            return bytes(data), True
        if not chunk:
            return bytes(data), True
        data += chunk
    return bytes(data), False


def play(server, case: Case) -> list[bytes]:
    """Run the conversation against one server; the raw reply of each step."""
    conns: dict[int, socket.socket] = {}
    closed: set[int] = set()
    cas = CasNames()
    replies = []
    try:
        for step in case.normalized_steps():
            if step.sleep:
                time.sleep(step.sleep)
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
            send_failed = False
            for i, chunk in enumerate(step.chunks):
                if i:
                    time.sleep(CHUNK_GAP_SECS)
                try:
                    sock.sendall(fill_placeholders(chunk, cas))
                except (BrokenPipeError, ConnectionResetError):
                    send_failed = True
                    break
            data, was_closed = read_reply(sock)
            if was_closed or send_failed:
                closed.add(step.conn)
                data += CLOSED
            # Learn the CAS names in order, so <cas#N> works in the next step.
            mask(data, cas, (), ())
            replies.append(data)
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


# Plays a case to both servers at once, so their quiet waits overlap.
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
