#!/usr/bin/env python3
"""Writes the hand-made seed corpus (fuzz/corpus/*) and is kept so it can be rerun."""
import os, struct, random
D = os.path.dirname(os.path.abspath(__file__))

def put(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(D, "corpus", target, name), "wb") as f:
        f.write(data)

text = {
    "get": "get k\r\n", "gets_multi": "gets a b c\r\n", "bget": "bget k\r\n",
    "gat": "gat 10 a b\r\n", "gats": "gats 0 k\r\n",
    "set": "set k 0 0 5\r\nhello\r\n", "set_noreply": "set k 5 100 1 noreply\r\nx\r\n",
    "add": "add k 1 0 2\r\nab\r\n", "replace": "replace k 0 0 0\r\n\r\n",
    "append": "append k 0 0 1\r\nz\r\n", "prepend": "prepend k 0 0 1\r\na\r\n",
    "cas": "cas k 0 0 1 42\r\nv\r\n", "cas_noreply": "cas k 0 0 1 42 noreply\r\nv\r\n",
    "delete": "delete k\r\n", "delete_hold": "delete k 0 noreply\r\n", "delete_bad": "delete k 5\r\n",
    "incr": "incr k 1\r\n", "decr": "decr k 18446744073709551615 noreply\r\n",
    "incr_bad": "incr k -1\r\n", "touch": "touch k 100\r\n", "touch_bad": "touch k x noreply\r\n",
    "stats": "stats\r\n", "stats_sub": "stats items\r\nstats slabs\r\nstats settings\r\nstats detail dump\r\n",
    "flush": "flush_all\r\nflush_all 10\r\nflush_all 0 noreply\r\nflush_all x\r\n",
    "version": "version\r\n", "verbosity": "verbosity 1\r\nverbosity x noreply\r\n",
    "quit": "get a\r\nquit\r\nget b\r\n", "shutdown": "shutdown\r\nshutdown graceful\r\nshutdown x\r\n",
    "memlimit": "cache_memlimit 100\r\ncache_memlimit x noreply\r\n",
    "pipeline": "set a 0 0 1\r\n1\r\nget a\r\nincr a 5\r\ndelete a\r\nget a b\r\n",
    "bad_chunk": "set k 0 0 3\r\nabcdef\r\nget k\r\n",
    "too_large": "set k 0 0 2000000\r\n", "too_large_small_I": "set k 0 0 1500\r\n" + "x"*1500 + "\r\nget k\r\n",
    "neg_len": "set k 0 0 -1\r\n", "huge_len": "set k 0 0 2147483647\r\n",
    "long_key": "set " + "k"*251 + " 0 0 1\r\nx\r\n", "long_get_key": "get " + "k"*300 + "\r\n",
    "no_newline": "x"*2100, "long_get": "get " + "k "*1100,
    "http": "GET / HTTP/1.1\r\n", "nul": "get a\x00b\r\n", "lf_only": "get a\nset b 0 0 1\nx\r\n",
    "unknown": "foo bar\r\n", "empty_lines": "\r\n\n \r\n",
    "many_tokens": "get " + " ".join("k%d" % i for i in range(40)) + "\r\n",
    "cr_in_key": "set a\rb 0 0 1\r\nx\r\ndelete a\r\r\n",
    "exptime_neg": "set k 0 -1 1\r\nx\r\n", "flags_max": "set k 4294967295 0 1\r\nx\r\n",
    "flags_over": "set k 4294967296 0 1\r\nx\r\n",
    # CVE-2010-1152: a line that never ends.
    "cve_2010_1152": "get " + "a"*4000,
    # CVE-2019-11596: lru mode / lru_crawler metadump.
    "cve_2019_11596": "lru mode flat\r\nlru_crawler metadump all\r\n",
}
for k, v in text.items():
    put("text", k, v)

meta = {
    "mg_plain": "mg k\r\n", "mg_v": "mg k v\r\n",
    "mg_all": "mg k b c f h k l O123 q s t u v E5 N30 R10 T30\r\n",
    "mg_b64": "mg Zm9v b v k\r\n", "mg_b64_bad": "mg !!! b\r\n",
    "mg_dup": "mg k v v\r\n", "mg_invalid": "mg k !\r\n", "mg_bad_ttl": "mg k Tx\r\n",
    "mg_opaque_long": "mg k O" + "1"*40 + "\r\n", "mg_many": "mg k " + " ".join("O%d" % i for i in range(25)) + "\r\n",
    "ms": "ms k 5\r\nhello\r\n", "ms_flags": "ms k 2 T30 F5 c k O1 q I\r\nhi\r\n",
    "ms_modes": "".join("ms k 1 M%s\r\nx\r\n" % m for m in "SEAPRsearpX"),
    "ms_cas": "ms k 1 C99 E100\r\nx\r\n", "ms_b64": "ms Zm9v 1 b\r\nx\r\n",
    "ms_bad_chunk": "ms k 1\r\nxyz\r\n", "ms_too_large": "ms k 5000000 T0\r\n",
    "ms_neg": "ms k -1\r\n", "ms_bad_len": "ms k x\r\n", "ms_inv_vivify": "ms k 1 MA N10\r\nx\r\n",
    "md": "md k\r\n", "md_flags": "md k q O12 C5 I T30 k b\r\n", "md_bad": "md k Z\r\n",
    "ma": "ma k\r\n", "ma_flags": "ma k N0 J13 D7 T30 MI v t c q O9 k\r\n", "ma_decr": "ma k MD D100\r\n",
    "ma_mode_bad": "ma k Mx\r\n", "ma_bad_delta": "ma k Dx\r\n", "ma_bad_init": "ma k J-1\r\n",
    "mn": "mg a q\r\nmg b q\r\nmn\r\n", "me": "me k\r\n", "me_b64": "me Zm9v b\r\n",
    "me_nokey": "me\r\n", "mx": "mx k\r\n", "m_only": "m\r\n",
    "long_key": "mg " + "k"*251 + " v\r\n", "key_250": "mg " + "k"*250 + " v\r\n",
    "pipeline": "ms a 1 T0\r\n1\r\nma a D5\r\nmg a v c t\r\nmd a q\r\nmn\r\n",
    "reply_va": "VA 5 c123 t-1 f0\r\nhello\r\nHD\r\nEN\r\nNS\r\nEX\r\nNF\r\nMN\r\n",
    "reply_me": "ME k exp=-1 la=1 cas=2 fetch=no cls=1 size=63\r\n",
    "reply_err": "CLIENT_ERROR bad command line format\r\nSERVER_ERROR out of memory\r\nERROR\r\n",
    "reply_text": "VALUE k 0 5 7\r\nhello\r\nEND\r\nSTAT pid 1\r\nSTORED\r\n42\r\nVERSION 1.6.18\r\n",
    # CVE-2020-22570: crafted meta commands (flags past the token limit, bad base64).
    "cve_2020_22570": "mg " + "a"*250 + " b " + " ".join("v" for _ in range(30)) + "\r\nmd = b\r\nma ==== b\r\n",
}
for k, v in meta.items():
    put("meta", k, v)

def req(op, extras=b"", key=b"", value=b"", opaque=0, cas=0, keylen=None, extlen=None, bodylen=None):
    body = extras + key + value
    return struct.pack(">BBHBBHIIQ", 0x80, op,
        len(key) if keylen is None else keylen,
        len(extras) if extlen is None else extlen, 0, 0,
        len(body) if bodylen is None else bodylen, opaque, cas) + body

se = struct.pack(">II", 5, 0)
ae = struct.pack(">QQI", 1, 10, 0)
ops = {
    "get": req(0x00, key=b"k"), "getq": req(0x09, key=b"k"), "getk": req(0x0c, key=b"k"), "getkq": req(0x0d, key=b"k"),
    "set": req(0x01, se, b"k", b"hello", opaque=7), "setq": req(0x11, se, b"k", b"v"),
    "add": req(0x02, se, b"k", b"v"), "addq": req(0x12, se, b"k", b"v"),
    "replace": req(0x03, se, b"k", b"v"), "replaceq": req(0x13, se, b"k", b"v"),
    "delete": req(0x04, key=b"k"), "deleteq": req(0x14, key=b"k", cas=3),
    "incr": req(0x05, ae, b"k"), "decr": req(0x06, ae, b"k"), "incrq": req(0x15, ae, b"k"), "decrq": req(0x16, ae, b"k"),
    "quit": req(0x07), "quitq": req(0x17), "flush": req(0x08), "flush_delay": req(0x08, struct.pack(">I", 10)), "flushq": req(0x18),
    "noop": req(0x0a), "version": req(0x0b),
    "append": req(0x0e, key=b"k", value=b"x"), "prepend": req(0x0f, key=b"k", value=b"x"),
    "appendq": req(0x19, key=b"k", value=b"x"), "prependq": req(0x1a, key=b"k", value=b"x"),
    "stat": req(0x10), "stat_key": req(0x10, key=b"settings"), "verbosity": req(0x1b, struct.pack(">I", 1)),
    "touch": req(0x1c, struct.pack(">I", 10), b"k"), "gat": req(0x1d, struct.pack(">I", 10), b"k"),
    "gatq": req(0x1e, struct.pack(">I", 10), b"k"), "gatk": req(0x23, struct.pack(">I", 10), b"k"), "gatkq": req(0x24, struct.pack(">I", 10), b"k"),
    "sasl_list": req(0x20), "sasl_auth": req(0x21, key=b"PLAIN", value=b"\x00u\x00p"), "sasl_step": req(0x22, key=b"PLAIN", value=b"x"),
    "unknown_op": req(0x40, key=b"k", value=b"zz"), "bad_magic": b"\x81" + b"\x00"*23,
    "pipeline": req(0x11, se, b"a", b"1") + req(0x15, ae, b"a") + req(0x0d, key=b"a") + req(0x0a),
    "key_251": req(0x00, key=b"k"*251), "set_too_large": req(0x01, se, b"k", bodylen=9 + 5000),
    # CVE-2011-4971: a huge body length.
    "cve_2011_4971": req(0x01, se, b"k", bodylen=0xffffffff),
    # CVE-2016-8704: append with keylen > bodylen (bodylen - keylen underflows in 1.4.32).
    "cve_2016_8704": req(0x0e, key=b"k"*0x10, keylen=0xfa, bodylen=0),
    # CVE-2016-8705: set (update) with keylen + extlen > bodylen.
    "cve_2016_8705": req(0x01, se, b"k"*0x10, keylen=0xfa, bodylen=2),
    # CVE-2016-8706: SASL auth with bodylen < keylen.
    "cve_2016_8706": req(0x21, key=b"A"*16, keylen=0xfa, bodylen=0xf9),
    # CVE-2017-9951: extlen + keylen > bodylen on a set.
    "cve_2017_9951": req(0x01, b"\x00"*8, b"k", keylen=1, extlen=8, bodylen=5),
    # CVE-2020-10931: extlen that runs into the key (extlen 0xff, short body).
    "cve_2020_10931": req(0x01, b"\x00"*0xff, b"", extlen=0xff, bodylen=0xff),
    "cve_2013_7239": req(0x21, key=b"PLAIN", value=b"\x00user\x00"),
    "cve_2013_7290": req(0x00, key=b"k"*250) + req(0x04, key=b"\xff"*250),
    "split_header": req(0x00, key=b"k")[:10],
}
for k, v in ops.items():
    put("binary", k, v)

# Store programs: byte 0 picks the mode (even: seg vs reference; odd: tiny limit).
rng = random.Random(5)
for i in range(24):
    mode = i % 4  # 0/2 differential, 1/3 pressure (3: seg)
    n = rng.choice([16, 64, 256, 1024])
    body = bytes(rng.randrange(256) for _ in range(n))
    prefix = bytes([mode, (i // 4) % 2])
    put("store", "program_%02d" % i, prefix + body)
# Hand-made: set then get the same key, then append/incr/delete, both modes.
hand = bytes([0, 0,   0, 0, 3, 0, 4,5,0,0,0,0, 1, 0, 0, 0,   3, 3, 0, 0, 0, 0, 0])
put("store", "set_get", hand)
put("store", "pressure_big_values", bytes([1, 1]) + bytes([0, 0, 3, 0, 9, 200, 0, 0, 0, 0]) * 60)
put("store", "pressure_ref_big_values", bytes([1, 0]) + bytes([0, 0, 3, 0, 9, 60, 0, 0, 0, 0]) * 60)
