// memjs 1.3.2 (binary protocol, SASL PLAIN) against memcached (the oracle) and
// memcrab: every Client method memjs has, with the same assertions for both
// servers. Each test starts its own server (servers.js) and closes it after.
//
// memjs has no CAS, no multi-get and no version call; its flags are always 0 on
// write. Its prepend sends opcode 0x0E, which is APPEND (memjs 1.3.2's bug), so
// the test pins that a "prepend" appends on both servers.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const { describe, it, beforeEach, afterEach } = require('node:test');
const memjs = require('memjs');
const { KINDS, start, saslEnv } = require('./servers');

const quiet = { log() {} };
// The loopback is fast, but two cores run seven test suites at once: memjs's
// 0.5 s default would turn a busy machine into failures.
const OPTS = { timeout: 5, retries: 1, logger: quiet };
const NO_FLAGS = Buffer.alloc(4);
// An expiry over 30 days is a Unix time (protocol.txt); this one is in 1970,
// so the item is expired as soon as it is stored: TTL semantics without a wait.
const PAST = 60 * 60 * 24 * 30 + 1;

for (const kind of KINDS) {
  describe(`memjs vs ${kind}`, () => {
    let server;
    let client;
    beforeEach(async () => {
      server = await start(kind);
      client = memjs.Client.create(server.address, OPTS);
    });
    afterEach(async () => {
      client.close();
      await server.kill();
    });

    it('get, set and flags', async () => {
      assert.deepEqual(await client.get('missing'), { value: null, flags: null });
      assert.equal(await client.set('k', 'v'), true);
      const got = await client.get('k');
      assert.deepEqual(got.value, Buffer.from('v'));
      assert.deepEqual(got.flags, NO_FLAGS);
      assert.equal(await client.set('k', Buffer.from('w')), true);
      assert.deepEqual((await client.get('k')).value, Buffer.from('w'));
      assert.equal(await client.set('empty', ''), true);
      assert.deepEqual((await client.get('empty')).value, Buffer.alloc(0));
    });

    it('add and replace', async () => {
      assert.equal(await client.replace('k', '1'), false);
      assert.equal(await client.add('k', '1'), true);
      assert.equal(await client.add('k', '2'), false);
      assert.equal(await client.replace('k', '3'), true);
      assert.deepEqual((await client.get('k')).value, Buffer.from('3'));
    });

    it('delete', async () => {
      assert.equal(await client.delete('k'), false);
      await client.set('k', 'v');
      assert.equal(await client.delete('k'), true);
      assert.equal((await client.get('k')).value, null);
    });

    it('append, and prepend (which memjs 1.3.2 sends as APPEND)', async () => {
      // A miss is NOT_STORED (status 5), which memjs reports as an error.
      await assert.rejects(client.append('k', 'x'), /Item not stored/);
      await assert.rejects(client.prepend('k', 'x'), /Item not stored/);
      await client.set('k', 'mid');
      assert.equal(await client.append('k', '>'), true);
      assert.equal(await client.prepend('k', '<'), true);
      assert.deepEqual((await client.get('k')).value, Buffer.from('mid><'));
    });

    it('increment and decrement, with initial values', async () => {
      // A miss stores the initial value (the binary protocol's incr/decr extras).
      assert.deepEqual(await client.increment('n', 5, { initial: 10 }), { success: true, value: 10 });
      // (memjs's decrement needs the options object; its increment does not.)
      assert.deepEqual(await client.increment('n', 5), { success: true, value: 15 });
      assert.deepEqual(await client.decrement('n', 3, {}), { success: true, value: 12 });
      // Counters are unsigned: decrement stops at 0.
      assert.deepEqual(await client.decrement('n', 100, {}), { success: true, value: 0 });
      // A decr that shortens the number pads it with spaces in place
      // (memcached's do_add_delta writes over the old value when it fits).
      assert.deepEqual((await client.get('n')).value, Buffer.from('0 '));
      await client.set('s', 'text');
      await assert.rejects(client.increment('s', 1), /Incr\/Decr on non-numeric value/);
      // A counter stored as text by set counts on from there.
      await client.set('t', '41');
      assert.deepEqual(await client.increment('t', 1), { success: true, value: 42 });
    });

    it('touch and expiry', async () => {
      assert.equal(await client.touch('k', 100), false);
      await client.set('k', 'v');
      assert.equal(await client.touch('k', 100), true);
      assert.deepEqual((await client.get('k')).value, Buffer.from('v'));
      assert.equal(await client.touch('k', PAST), true);
      assert.equal((await client.get('k')).value, null);
      assert.equal(await client.set('gone', 'v', { expires: PAST }), true);
      assert.equal((await client.get('gone')).value, null);
      assert.equal(await client.add('gone', 'again'), true, 'an expired key can be added');
    });

    it('a relative TTL expires (polled under a deadline)', async () => {
      // The servers' clocks tick once a second, so a TTL of 1 can run out before
      // the next request; 2 lives 1-2 s, polled to 6 s.
      await client.set('k', 'v', { expires: 2 });
      assert.deepEqual((await client.get('k')).value, Buffer.from('v'));
      const deadline = Date.now() + 6000;
      let value = Buffer.from('v');
      while (value !== null && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        value = (await client.get('k')).value;
      }
      assert.equal(value, null, 'still there 6 s after a 2 s TTL');
    });

    it('binary-safe keys and values', async () => {
      const all = Buffer.alloc(256 * 4);
      for (let i = 0; i < all.length; i++) all[i] = i % 256;
      const tricky = Buffer.concat([all, Buffer.from('\r\nEND\r\n\0')]);
      assert.equal(await client.set('bin', tricky), true);
      assert.deepEqual((await client.get('bin')).value, tricky);
      // Binary-protocol keys may hold spaces and control bytes (not so in text).
      const key = 'sp ace\tkey\u0001';
      assert.equal(await client.set(key, 'v'), true);
      assert.deepEqual((await client.get(key)).value, Buffer.from('v'));
      const longest = 'k'.repeat(250);
      assert.equal(await client.set(longest, 'v'), true);
      assert.deepEqual((await client.get(longest)).value, Buffer.from('v'));
    });

    it('large values, and a too-large one leaves the connection usable', async () => {
      const big = Buffer.alloc(1000 * 1000, 'x');
      big.write('head', 0);
      big.write('tail', big.length - 4);
      assert.equal(await client.set('big', big), true);
      assert.deepEqual((await client.get('big')).value, big);
      const huge = Buffer.alloc(1024 * 1024 + 1, 'y');
      await assert.rejects(client.set('huge', huge), /Value too large/);
      assert.equal((await client.get('huge')).value, null);
      assert.deepEqual((await client.get('big')).value, big);
    });

    it('flush and stats', async () => {
      for (let i = 0; i < 10; i++) await client.set(`k${i}`, `v${i}`);
      const stats = await new Promise((resolve, reject) =>
        client.stats((err, addr, s) => (err ? reject(err) : resolve({ addr, s }))),
      );
      assert.equal(stats.addr, server.address);
      assert.equal(stats.s.curr_items, '10');
      assert.equal(stats.s.cmd_set, '10');
      assert.match(stats.s.version, /^\d+\.\d+\.\d+/);
      assert.deepEqual(await client.flush(), { [server.address]: true });
      for (let i = 0; i < 10; i++) assert.equal((await client.get(`k${i}`)).value, null);
    });
  });

  describe(`memjs SASL PLAIN vs ${kind}`, () => {
    const users = { alice: 's3cret' };
    let server;
    let sasl;
    beforeEach(async () => {
      sasl = saslEnv(users);
      server = await start(kind, ['-S'], sasl.env);
    });
    afterEach(async () => {
      await server.kill();
      fs.rmSync(sasl.dir, { recursive: true, force: true });
    });

    it('the right password unlocks every command', async () => {
      const client = memjs.Client.create(`alice:s3cret@${server.address}`, OPTS);
      try {
        assert.equal(await client.set('k', 'v'), true);
        assert.deepEqual((await client.get('k')).value, Buffer.from('v'));
        assert.deepEqual(await client.increment('n', 1, { initial: 7 }), { success: true, value: 7 });
      } finally {
        client.close();
      }
    });

    it('a wrong password and no password are refused', async () => {
      for (const creds of ['alice:wrong@', 'bob:s3cret@', '']) {
        const client = memjs.Client.create(`${creds}${server.address}`, OPTS);
        try {
          await assert.rejects(client.set('k', 'v'), /auth/i, `credentials ${JSON.stringify(creds)}`);
        } finally {
          client.close();
        }
      }
    });
  });
}
