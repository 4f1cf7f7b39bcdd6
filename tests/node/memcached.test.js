// The npm package `memcached` 2.2.2 (text protocol; ketama consistent hashing
// through `hashring`) against memcached (the oracle) and memcrab, with the same
// assertions for both servers: its whole command API on one server, then its
// hash ring over three servers, where keys must land on the server the ring
// names, and a server killed with SIGKILL must be marked failed, then removed
// from the ring, its keys going to the live servers, while the live servers'
// keys keep answering.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, beforeEach, afterEach } = require('node:test');
const Memcached = require('memcached');
const { KINDS, start, raw } = require('./servers');

// The loopback answers in microseconds; the generous timeouts are for two
// busy cores, and retries: 0 keeps a refused connect from backing off for
// seconds inside the client's pool.
const OPTS = { timeout: 5000, retries: 0, minTimeout: 10, maxTimeout: 50, poolSize: 2 };

// Runs a callback-style method as a promise of its result.
function call(client, method, ...args) {
  return new Promise((resolve, reject) => {
    client[method](...args, (err, data) => (err ? reject(err) : resolve(data)));
  });
}

// Runs a callback-style method; resolves with [err, data] whatever happened,
// with an error if no reply came within `ms`. This client never answers a
// request that was in flight on a connection that then resets (it drops the
// socket's queue in connectionIssue): a request sent to a server just killed
// can be such a request, on memcached and memcrab alike.
function settle(ms, client, method, ...args) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve([new Error(`no reply within ${ms} ms`), undefined]), ms);
    client[method](...args, (err, data) => {
      clearTimeout(timer);
      resolve([err, data]);
    });
  });
}

for (const kind of KINDS) {
  describe(`memcached (npm) vs ${kind}`, () => {
    let server;
    let client;
    beforeEach(async () => {
      server = await start(kind);
      client = new Memcached(server.address, OPTS);
    });
    afterEach(async () => {
      client.end();
      await server.kill();
    });

    it('get and set, with the client\'s type flags', async () => {
      assert.equal(await call(client, 'get', 'missing'), undefined);
      assert.equal(await call(client, 'set', 's', 'text', 0), true);
      assert.equal(await call(client, 'set', 'n', 42, 0), true);
      assert.equal(await call(client, 'set', 'j', { a: [1, 'b'] }, 0), true);
      assert.equal(await call(client, 'get', 's'), 'text');
      assert.equal(await call(client, 'get', 'n'), 42);
      assert.deepEqual(await call(client, 'get', 'j'), { a: [1, 'b'] });
      // The client marks its types in the item flags: 8 numeric, 2 JSON.
      assert.equal(await raw(server.port, 'get s n j\r\n'),
        'VALUE s 0 4\r\ntext\r\nVALUE n 8 2\r\n42\r\nVALUE j 2 13\r\n{"a":[1,"b"]}\r\nEND\r\n');
      assert.equal(await call(client, 'set', 'empty', '', 0), true);
      assert.equal(await call(client, 'get', 'empty'), '');
    });

    it('add, replace, append and prepend', async () => {
      await assert.rejects(call(client, 'replace', 'k', 'v', 0), (e) => e.notStored === true);
      assert.equal(await call(client, 'add', 'k', 'mid', 0), true);
      await assert.rejects(call(client, 'add', 'k', 'again', 0), (e) => e.notStored === true);
      await assert.rejects(call(client, 'append', 'nokey', 'x'), (e) => e.notStored === true);
      assert.equal(await call(client, 'append', 'k', '>'), true);
      assert.equal(await call(client, 'prepend', 'k', '<'), true);
      assert.equal(await call(client, 'get', 'k'), '<mid>');
      assert.equal(await call(client, 'replace', 'k', 'new', 0), true);
      assert.equal(await call(client, 'get', 'k'), 'new');
    });

    it('gets and cas', async () => {
      await call(client, 'set', 'k', 'v1', 0);
      const first = await call(client, 'gets', 'k');
      assert.equal(first.k, 'v1');
      assert.match(first.cas, /^[1-9]\d*$/);
      assert.equal(await call(client, 'cas', 'k', 'v2', first.cas, 0), true);
      // The unique changed with the write: the old one is refused (EXISTS).
      assert.equal(await call(client, 'cas', 'k', 'v3', first.cas, 0), false);
      const second = await call(client, 'gets', 'k');
      assert.equal(second.k, 'v2');
      assert.notEqual(second.cas, first.cas);
      await call(client, 'del', 'k');
      assert.equal(await call(client, 'cas', 'k', 'v4', second.cas, 0), false); // NOT_FOUND
      assert.equal(await call(client, 'get', 'k'), undefined);
    });

    it('incr and decr', async () => {
      assert.equal(await call(client, 'incr', 'n', 1), false); // NOT_FOUND
      await call(client, 'set', 'n', '10', 0);
      assert.equal(await call(client, 'incr', 'n', 5), 15);
      assert.equal(await call(client, 'decr', 'n', 100), 0);
      await call(client, 'set', 'big', '18446744073709551615', 0);
      assert.equal(await call(client, 'incr', 'big', 2), 1, '2^64 wraps');
      await call(client, 'set', 'word', 'abc', 0);
      await assert.rejects(call(client, 'incr', 'word', 1),
        /cannot increment or decrement non-numeric value/);
    });

    it('delete, touch and TTLs', async () => {
      assert.equal(await call(client, 'del', 'k'), false);
      await call(client, 'set', 'k', 'v', 0);
      assert.equal(await call(client, 'touch', 'k', 100), true);
      assert.equal(await call(client, 'touch', 'nokey', 100), false);
      assert.equal(await call(client, 'del', 'k'), true);
      assert.equal(await call(client, 'get', 'k'), undefined);
      // A negative TTL stores an item that is expired at once.
      assert.equal(await call(client, 'set', 'gone', 'v', -1), true);
      assert.equal(await call(client, 'get', 'gone'), undefined);
      await call(client, 'set', 'k', 'v', 100);
      assert.equal(await call(client, 'touch', 'k', -1), true);
      assert.equal(await call(client, 'get', 'k'), undefined);
      // A relative TTL, polled under a deadline. The servers' clocks tick once a
      // second, so a TTL of 1 can run out before the next request; 2 lives 1-2 s.
      await call(client, 'set', 'short', 'v', 2);
      assert.equal(await call(client, 'get', 'short'), 'v');
      const deadline = Date.now() + 6000;
      let value = 'v';
      while (value !== undefined && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        value = await call(client, 'get', 'short');
      }
      assert.equal(value, undefined, 'still there 6 s after a 2 s TTL');
    });

    it('multi-get and flush', async () => {
      const keys = [];
      for (let i = 0; i < 100; i++) {
        keys.push(`key:${i}`);
        await call(client, 'set', `key:${i}`, `value ${i}`, 0);
      }
      const got = await call(client, 'getMulti', [...keys, 'absent']);
      assert.equal(Object.keys(got).length, 100);
      for (let i = 0; i < 100; i++) assert.equal(got[`key:${i}`], `value ${i}`);
      assert.deepEqual(await call(client, 'flush'), [true]);
      assert.deepEqual(await call(client, 'getMulti', keys), {});
    });

    it('binary-safe values, long keys, large values', async () => {
      const bytes = Buffer.alloc(512);
      for (let i = 0; i < bytes.length; i++) bytes[i] = i % 256;
      const tricky = Buffer.concat([bytes, Buffer.from('\r\nEND\r\nVALUE x 0 1\r\n')]);
      assert.equal(await call(client, 'set', 'bin', tricky, 0), true);
      assert.deepEqual(await call(client, 'get', 'bin'), tricky);
      const text = 'ünïcødé \u2603 \r\n END';
      await call(client, 'set', 'text', text, 0);
      assert.equal(await call(client, 'get', 'text'), text);
      // The client hashes a key over 250 bytes to its md5 (keyCompression).
      const long = 'k'.repeat(300);
      await call(client, 'set', long, 'v', 0);
      assert.equal(await call(client, 'get', long), 'v');
      await assert.rejects(call(client, 'set', 'has space', 'v', 0), /whitespace/);
      const big = 'x'.repeat(1000 * 1000);
      assert.equal(await call(client, 'set', 'big', big, 0), true);
      assert.equal(await call(client, 'get', 'big'), big);
      // The client itself refuses values over its maxValue (1 MiB) before sending.
      await assert.rejects(call(client, 'set', 'huge', 'y'.repeat(1024 * 1024 + 1), 0),
        /greater than 1048576/);
      assert.equal(await call(client, 'get', 'big'), big);
    });

    it('version and stats', async () => {
      await call(client, 'set', 'a', '1', 0);
      const [version] = await call(client, 'version');
      // The client parses the last X.Y.Z of the VERSION line as the server's
      // release: a drop-in must answer memcached's release there.
      assert.equal(version.server, server.address);
      assert.equal(version.major, '1');
      assert.equal(version.minor, '6');
      const [stats] = await call(client, 'stats');
      assert.equal(stats.server, server.address);
      assert.equal(stats.curr_items, 1);
      assert.equal(stats.cmd_set, 1);
      const [settings] = await call(client, 'settings');
      assert.equal(settings.maxbytes, 64 * 1024 * 1024);
      assert.equal(settings.item_size_max, 1024 * 1024);
    });
  });

  describe(`memcached (npm) consistent hashing over 3 ${kind} servers`, () => {
    let servers;
    let client;
    beforeEach(async () => {
      servers = [];
      for (let i = 0; i < 3; i++) servers.push(await start(kind));
    });
    afterEach(async () => {
      if (client) client.end();
      for (const s of servers) await s.kill();
    });

    // Which servers hold `key`, read past the client with a raw `get`.
    async function holders(key) {
      const found = [];
      for (const s of servers) {
        if (!s.alive()) continue;
        if ((await raw(s.port, `get ${key}\r\n`)) !== 'END\r\n') found.push(s.address);
      }
      return found;
    }

    it('every key lands on the one server the ketama ring names', async () => {
      client = new Memcached(servers.map((s) => s.address), OPTS);
      const count = {};
      for (let i = 0; i < 90; i++) {
        const key = `user:${i}`;
        await call(client, 'set', key, `v${i}`, 0);
        const owner = client.HashRing.get(key);
        count[owner] = (count[owner] || 0) + 1;
        assert.deepEqual(await holders(key), [owner], key);
      }
      // 90 keys over 3 equal servers: each gets some (ketama spreads them).
      for (const s of servers) assert.ok(count[s.address] >= 10, JSON.stringify(count));
      const got = await call(client, 'getMulti', Array.from({ length: 90 }, (_, i) => `user:${i}`));
      assert.equal(Object.keys(got).length, 90);
    });

    it('a killed server is removed from the ring; its keys move, the others answer', async () => {
      client = new Memcached(servers.map((s) => s.address), {
        ...OPTS,
        remove: true, // drop a dead server from the ring (default: wait to reconnect)
        failures: 1, // one failure marks it failed; the next after `retry` removes it
        retry: 100,
        failuresTimeout: 2000,
        reconnect: 2000,
      });
      const removed = [];
      client.on('remove', (details) => removed.push(details.server));
      const keys = Array.from({ length: 60 }, (_, i) => `item:${i}`);
      for (const k of keys) await call(client, 'set', k, `v:${k}`, 0);
      const owner = Object.fromEntries(keys.map((k) => [k, client.HashRing.get(k)]));
      const victim = servers[1];
      const deadKeys = keys.filter((k) => owner[k] === victim.address);
      const liveKeys = keys.filter((k) => owner[k] !== victim.address);
      assert.ok(deadKeys.length > 0 && liveKeys.length > 0);

      await victim.kill(); // kill -9: no goodbye on its connections

      // Keep reading a dead key and a live one until the client removes the
      // dead server; bounded in rounds and time.
      const deadline = Date.now() + 10000;
      let errors = 0;
      let rounds = 0;
      for (; removed.length === 0 && rounds < 500 && Date.now() < deadline; rounds++) {
        const live = liveKeys[rounds % liveKeys.length];
        const [liveErr, liveValue] = await settle(2000, client, 'get', live);
        assert.ifError(liveErr);
        assert.equal(liveValue, `v:${live}`, `live key ${live} in round ${rounds}`);
        const [err, value] = await settle(1000, client, 'get', deadKeys[rounds % deadKeys.length]);
        if (err) errors++;
        else assert.equal(value, undefined, 'a dead server\'s key cannot be served');
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.deepEqual(removed, [victim.address], `after ${rounds} rounds`);
      assert.ok(errors > 0, 'the dead server\'s keys failed before it was removed');

      // Removed: every key now maps to a live server, the dead keys are
      // misses there (re-routed, not lost elsewhere), and can be stored again.
      for (const k of deadKeys) {
        const now = client.HashRing.get(k);
        assert.notEqual(now, victim.address);
        assert.equal(await call(client, 'get', k), undefined);
        assert.equal(await call(client, 'set', k, `new:${k}`, 0), true);
        assert.equal(await call(client, 'get', k), `new:${k}`);
        assert.deepEqual(await holders(k), [now]);
      }
      // ketama moves only the dead server's keys.
      for (const k of liveKeys) {
        assert.equal(client.HashRing.get(k), owner[k]);
        assert.equal(await call(client, 'get', k), `v:${k}`);
      }
    });
  });
}
