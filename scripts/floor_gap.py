"""Marginal user-space cost per request, by concern, from callgrind profiles.

Used by scripts/bench-floor-gap. Each server ran the same seeded W1 sequence twice,
with N and 3N measured requests; the difference of the two profiles divided by 2N
is what one more request costs, without start-up, the preload or the shutdown.

Usage: floor_gap.py N NAME SHORT LONG [NAME SHORT LONG ...]   (callgrind out files)
Prints a markdown table: Ir (and, where the profiles have them, D1 and LL data
read misses) per request, one row per concern; then the code each request runs,
in 64-byte lines (what a cold instruction cache must fetch).
"""

import collections
import re
import subprocess
import sys

# Concern of a (source file, function) pair: the file where the instructions were
# written decides (inlining puts them in their caller), else the function's name.
BY_FILE = [
    (r"crates/proto/src/text/reply\.rs", "reply encoding"),
    (r"crates/proto/|/memchr-", "parse"),
    (r"crates/store/", "store"),
    (r"exec/probe\.rs|admin/latency\.rs|admin/hotkeys|admin/clock\.rs|rdtsc", "latency, hot keys"),
    (r"server/src/(request\.rs|exec/|out\.rs|admin/)", "request step"),
    (r"server/src/io/|server/src/main\.rs|bench/src/floor|/mio-", "transport, loop"),
]
BY_FN = [
    (r"reply::", "reply encoding"),
    (r"memcrab_proto|memchr|floor::answer", "parse"),
    (r"memcrab_store|memcmp", "store"),
    (r"probe|latency|hotkeys", "latency, hot keys"),
    (r"memcrab::(exec|request|out|admin)", "request step"),
    (r"memcrab::(io|drive)|floor::serve|mio|epoll|recv|send|asynccancel", "transport, loop"),
    (r"memcpy|memmove", "memcpy"),
]


def concern(key):
    path, _, fn = key.partition(":")
    if "floor::answer" in fn and "/memchr-" not in path:
        return "parse"  # the floor's: parse and the canned reply, in one function
    for pattern, name in BY_FILE:
        if re.search(pattern, path):
            return name
    for pattern, name in BY_FN:
        if re.search(pattern, fn):
            return name
    return "other"


def load(path):
    """Self cost of every (file, function) pair, per event."""
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--auto=no", "--inclusive=no", path],
        capture_output=True, text=True, check=True,
    ).stdout
    events = re.search(r"^Events shown:\s+(.*)$", out, re.M).group(1).split()
    costs = collections.defaultdict(collections.Counter)
    for line in out.splitlines():
        if "PROGRAM TOTALS" in line or ":" not in line:
            continue
        fields = re.sub(r"\(\s*[\d.]+%\)", "", line).split(None, len(events))
        if len(fields) != len(events) + 1:
            continue
        if not all(re.fullmatch(r"[\d,]+|\.", f) for f in fields[:-1]):
            continue
        key = re.sub(r" \[.*\]$", "", fields[-1])
        for ev, v in zip(events, fields):
            costs[ev][key] += 0 if v == "." else int(v.replace(",", ""))
    return costs


def executions(path):
    """Instructions executed, per (object, address): needs a profile written with
    --dump-instr=yes --compress-pos=no --compress-strings=no."""
    counts = collections.Counter()
    ob, call = None, False
    with open(path) as f:
        for line in f:
            if line.startswith("ob="):
                ob = line[3:].strip()
            elif line.startswith("calls="):
                call = True  # the next cost line is the call's inclusive cost
            elif line.startswith("0x"):
                if not call:
                    fields = line.split()
                    counts[(ob, int(fields[0], 16))] += int(fields[2])
                call = False
    return counts


def footprint(short, long_, n):
    """64-byte lines of code run on most requests (an instruction in them runs at
    least 0.45 times a request: the get path, 90% of W1) and on any (0.05: sets
    too), from the difference of the two runs."""
    a, b = executions(short), executions(long_)
    per = {k: (b[k] - a[k]) / (2 * n) for k in b}
    return [len({(ob, addr // 64) for (ob, addr), v in per.items() if v >= t}) for t in (0.45, 0.05)]


def main():
    n = int(sys.argv[1])
    args = sys.argv[2:]
    sides, paths = [], []
    while args:
        name, short, long_ = args[:3]
        args = args[3:]
        paths.append((short, long_))
        a, b = load(short), load(long_)
        per = collections.defaultdict(collections.Counter)
        for ev in b:
            for key in set(a[ev]) | set(b[ev]):
                per[ev][concern(key)] += (b[ev][key] - a[ev][key]) / (2 * n)
        sides.append((name, per))
    events = [e for e in ("Ir", "D1mr", "DLmr") if all(e in p for _, p in sides)]
    rows = sorted({c for _, p in sides for c in p["Ir"]}, key=lambda c: -sides[-1][1]["Ir"][c])
    head = [f"{name} {ev}" for ev in events for name, _ in sides]
    print("| concern (per request) | " + " | ".join(head) + " |")
    print("|---" * (len(head) + 1) + "|")
    for c in rows + ["total"]:
        cells = []
        for ev in events:
            for _, p in sides:
                v = sum(p[ev].values()) if c == "total" else p[ev][c]
                cells.append(f"{v:.0f}" if ev == "Ir" else f"{v:.2f}")
        if c == "total" or any(abs(float(x)) >= 1 for x in cells):
            print(f"| {c} | " + " | ".join(cells) + " |")
    print()
    print("| code touched per request | " + " | ".join(name for name, _ in sides) + " |")
    print("|---" * (len(sides) + 1) + "|")
    lines = [footprint(*files, n) for files in paths]
    for i, what in enumerate(("on most requests (the get path)", "on any request")):
        print(f"| 64-byte lines {what} | " + " | ".join(
            f"{f[i]} ({f[i] * 64 / 1024:.1f} KiB)" for f in lines) + " |")


if __name__ == "__main__":
    main()
