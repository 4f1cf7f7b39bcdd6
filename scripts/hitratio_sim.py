#!/usr/bin/env python3
"""Simulates LRU, S3-FIFO, W-TinyLFU and Belady (PyPI's libcachesim) on the traces
`memcrab-bench trace` wrote, at the byte capacity each server held, and prints the
servers' miss ratios next to the simulated ones (markdown).

Same requests, same counting as the replay (crates/bench/src/trace/replay.rs):
- a read (get, gets) is `cache.get(req)`: a hit, or a miss and an insert (the
  look-aside fill); reads from the trace's warm-up index on are counted;
- `add` is `cache.get(req)` too (stores when absent; when present memcached
  answers NOT_STORED and bumps the item, as a simulated hit does);
- `cas` (replayed as `replace`) is `cache.get(req)` only when the object is present.
Object size is key + value bytes. The capacity is a judgment, stated in
docs/benchmarks.md: each server's capacity is the key + value bytes it held over
the counted window (its mean `curr_items`, sampled with `stats`, times the mean
key + value bytes of the items it held at the end): its `-m` less its own
overheads. The simulation asks what each policy does with the memory that server
had for data.

TTLs: libcachesim's policies here ignore a request's TTL. When a trace's TTLs
expire within it (`memcrab-bench trace --ttl-divisor`), this harness expires
objects lazily, as memcached does on access: a read of an expired object removes it
and counts a miss. Expired objects keep their space until then.

Usage: scripts/hitratio_sim.py [--dir target/trace] [--shapes cluster52,cluster25]

With --curve DIR (what `memcrab-bench storage --experiments misscurve` runs), it
reads DIR/misscurve.tsv (each server's capacity at each `-m`) and the trace files
beside it, simulates every policy at every one of those capacities in one pass over
the trace, and writes DIR/misscurve.sims.tsv: mem_mb, server, policy,
capacity_bytes, miss_ratio.
"""

import argparse
import csv
import sys
import time

import libcachesim as lcs

READ, ADD, CAS = 0, 1, 2
OPS = {"get": READ, "gets": READ, "add": ADD, "cas": CAS}
POLICIES = [
    ("LRU", lambda c: lcs.LRU(c)),
    ("S3-FIFO", lambda c: lcs.S3FIFO(c)),
    ("W-TinyLFU", lambda c: lcs.WTinyLFU(c)),
    ("Belady", lambda c: lcs.Belady(c)),
]


def read_servers(path):
    """The replay's summary: header fields, and one dict per server."""
    with open(path) as f:
        head = f.readline().lstrip("# ").split()
        meta = dict(kv.split("=", 1) for kv in head)
        rows = list(csv.DictReader(f, delimiter="\t"))
    return meta, rows


def read_ops(path):
    """The ops and TTLs of the trace's csv, one entry per request, and the working
    set: the key + value bytes of its distinct objects."""
    ops = bytearray()
    ttls = []
    sizes = {}
    with open(path) as f:
        r = csv.reader(f)
        next(r)
        for row in r:
            ops.append(OPS[row[3]])
            ttls.append(int(row[4]))
            sizes[row[1]] = int(row[2])
    return ops, ttls, sum(sizes.values())


def simulate(make, capacity, trace, ops, ttls, warmup, expire):
    """Miss ratio over the reads from `warmup` on."""
    cache = make(capacity)
    reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
    reads = misses = 0
    expires = {}
    for i, req in enumerate(reader):
        op = ops[i]
        if expire:
            at = expires.get(req.obj_id)
            if at is not None and at <= req.clock_time:
                cache.remove(req.obj_id)
                del expires[req.obj_id]
        if op == READ:
            hit = cache.get(req)
            if not hit and expire:
                expires[req.obj_id] = req.clock_time + ttls[i]
            if i >= warmup:
                reads += 1
                misses += not hit
        elif op == ADD:
            if not cache.get(req) and expire:
                expires[req.obj_id] = req.clock_time + ttls[i]
        elif cache.find(req, False) is not None:
            cache.get(req)
            if expire:
                expires[req.obj_id] = req.clock_time + ttls[i]
    if i + 1 != len(ops):
        sys.exit(f"{trace}: {i + 1} requests, the csv has {len(ops)}")
    return misses / max(reads, 1), reads


def simulate_many(caches, trace, ops, ttls, warmup, expire):
    """`simulate` for several caches in one pass over the trace: the same requests
    and the same counting for each. Returns each cache's (miss ratio, reads)."""
    reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
    n = len(caches)
    misses = [0] * n
    reads = 0
    expires = [{} for _ in caches]
    i = -1
    for i, req in enumerate(reader):
        op = ops[i]
        counted = op == READ and i >= warmup
        reads += counted
        for k, cache in enumerate(caches):
            ex = expires[k]
            if expire:
                at = ex.get(req.obj_id)
                if at is not None and at <= req.clock_time:
                    cache.remove(req.obj_id)
                    del ex[req.obj_id]
            if op == READ or op == ADD:
                hit = cache.get(req)
                if not hit and expire:
                    ex[req.obj_id] = req.clock_time + ttls[i]
                if counted and not hit:
                    misses[k] += 1
            elif cache.find(req, False) is not None:
                cache.get(req)
                if expire:
                    ex[req.obj_id] = req.clock_time + ttls[i]
    if i + 1 != len(ops):
        sys.exit(f"{trace}: {i + 1} requests, the csv has {len(ops)}")
    return [(m / max(reads, 1), reads) for m in misses]


def curve(d):
    """--curve: every policy at every server's capacity at every size."""
    meta, rows = read_servers(f"{d}/misscurve.tsv")
    shape = meta["shape"]
    warmup = int(meta["warmup_index"])
    ops, ttls, _ = read_ops(f"{d}/{shape}.csv")
    expire = min(ttls) <= int(meta["span_secs"])
    runs = [(r, name, make) for r in rows for name, make in POLICIES]
    caches = [make(int(r["capacity_bytes"])) for r, _, make in runs]
    t0 = time.time()
    results = simulate_many(caches, f"{d}/{shape}.oracleGeneral.bin", ops, ttls, warmup,
                            expire)
    print(f"  {len(caches)} simulations in one pass: {time.time() - t0:.0f} s",
          file=sys.stderr)
    out = ["mem_mb\tserver\tpolicy\tcapacity_bytes\tmiss_ratio"]
    for (r, name, _), (mr, reads) in zip(runs, results):
        if reads != int(meta["window_reads"]):
            sys.exit(f"{shape}: {name} counted {reads} reads, the replay "
                     f"{meta['window_reads']}")
        out.append(f"{r['mem_mb']}\t{r['server']}\t{name}\t{r['capacity_bytes']}\t{mr:.6f}")
    with open(f"{d}/misscurve.sims.tsv", "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="target/trace")
    ap.add_argument("--shapes", default="cluster52,cluster25")
    ap.add_argument("--curve", metavar="DIR", help="misscurve's figures (see above)")
    a = ap.parse_args()
    if a.curve:
        curve(a.curve)
        return
    for shape in a.shapes.split(","):
        meta, servers = read_servers(f"{a.dir}/{shape}.servers.tsv")
        warmup = int(meta["warmup_index"])
        ops, ttls, working_set = read_ops(f"{a.dir}/{shape}.csv")
        trace = f"{a.dir}/{shape}.oracleGeneral.bin"
        expire = min(ttls) <= int(meta["span_secs"])
        print(f"### {shape}: miss ratio of each server next to the policies at its capacity\n")
        print(f"`-m {meta['mem_mb']}`; {meta['requests']} requests, the reads of the last "
              f"{int(meta['requests']) - warmup} counted ({meta['window_reads']} reads)"
              + ("; TTLs expire lazily in the simulations" if expire else "") + ".\n")
        print("| capacity (key+value bytes held by) | MB | server's miss ratio | "
              + " | ".join(n for n, _ in POLICIES) + " | server vs S3-FIFO |")
        print("|---|---|---|" + "---|" * len(POLICIES) + "---|")
        results = {}
        for s in servers:
            cap = int(s["capacity_bytes"])
            sims = {}
            for name, make in POLICIES:
                t0 = time.time()
                mr, reads = simulate(make, cap, trace, ops, ttls, warmup, expire)
                if reads != int(meta["window_reads"]):
                    sys.exit(f"{shape}: {name} counted {reads} reads, the replay "
                             f"{meta['window_reads']}")
                sims[name] = mr
                print(f"  {shape} {s['server']} {name}: {mr:.4f} ({time.time() - t0:.0f} s)",
                      file=sys.stderr)
            mr = float(s["miss_ratio"])
            results[s["server"]] = (mr, sims)
            rel = mr / sims["S3-FIFO"] - 1 if sims["S3-FIFO"] else float("nan")
            print(f"| {s['server']} | {cap / 1e6:.2f} | {mr:.4f} | "
                  + " | ".join(f"{sims[n]:.4f}" for n, _ in POLICIES)
                  + f" | {rel:+.1%} |")
        # Nothing evicted: every policy is the same, so LRU stands for all. What is
        # left is compulsory misses, and with TTLs inside the trace, expiry misses.
        mr, _ = simulate(POLICIES[0][1], working_set + 1, trace, ops, ttls, warmup, expire)
        print(f"| no eviction (the whole working set) | {working_set / 1e6:.2f} | | "
              + " | ".join(f"{mr:.4f}" for _ in POLICIES) + " | |")
        print()
        if "memcrab" in results:
            mc = results["memcrab"][0]
            for other, (mr, _) in results.items():
                if other != "memcrab" and mr > 0:
                    print(f"memcrab's misses against {other}'s: {mc / mr - 1:+.1%} (relative).")
            print()


if __name__ == "__main__":
    main()
