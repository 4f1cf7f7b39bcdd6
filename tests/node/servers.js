// Starts memcached (the oracle) and memcrab for the Node.js client suites.
//
// Every server is a real process on a free loopback port, in its own process
// group, killed (SIGKILL to the group) when the test that started it ends, and
// on process exit whatever happens. Readiness is polled with connect() under a
// deadline, never a fixed sleep.
//
// Binaries: MEMCACHED_BIN (default: memcached on PATH, else /usr/bin/memcached)
// and MEMCRAB_BIN (default: ../../target/release/memcrab).
// MEMCRAB_BIN=/usr/bin/memcached runs every suite against memcached alone.
'use strict';

const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const KINDS = ['memcached', 'memcrab'];
const READY_TIMEOUT_MS = 10000;
const START_ATTEMPTS = 5; // a port found free can be taken before the server binds it

function onPath(name) {
  for (const dir of (process.env.PATH || '').split(':')) {
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      // not in this directory
    }
  }
  return null;
}

function binary(kind) {
  const p =
    kind === 'memcached'
      ? process.env.MEMCACHED_BIN || onPath('memcached') || '/usr/bin/memcached'
      : process.env.MEMCRAB_BIN || path.resolve(__dirname, '../../target/release/memcrab');
  fs.accessSync(p, fs.constants.X_OK); // throws with the path in the message
  return p;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

const running = new Set();
process.on('exit', () => {
  for (const s of running) s.kill();
});

class Server {
  constructor(kind, proc, port) {
    this.kind = kind;
    this.proc = proc;
    this.port = port;
    this.address = `127.0.0.1:${port}`;
    this.log = '';
    this.exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.stdout.on('data', (d) => (this.log += d));
    proc.stderr.on('data', (d) => (this.log += d));
  }

  alive() {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  // SIGKILL to the whole group (kill -9, as a crash); returns once it is reaped.
  kill() {
    running.delete(this);
    if (this.alive()) {
      try {
        process.kill(-this.proc.pid, 'SIGKILL');
      } catch {
        // the group is already gone
      }
    }
    return this.exited;
  }
}

async function waitReady(server) {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (!server.alive()) {
      throw new Error(`${server.kind} exited before accepting connections:\n${server.log}`);
    }
    if ((await canConnect(server.port)) && server.alive()) return;
    if (Date.now() > deadline) {
      throw new Error(`${server.kind} did not accept within ${READY_TIMEOUT_MS} ms:\n${server.log}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

// Starts `kind` with memcached's flags plus `extra`, and `env` added to the
// environment; returns once it accepts connections.
async function start(kind, extra = [], env = {}) {
  const bin = binary(kind);
  let failure;
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    const port = await freePort();
    const args = ['-U', '0', '-l', '127.0.0.1', '-p', String(port), ...extra];
    // memcached refuses to run as root without -u; memcrab accepts it.
    if (process.getuid() === 0) args.push('-u', 'root');
    const proc = spawn(bin, args, {
      detached: true, // own process group: the kill reaches everything it spawns
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    const server = new Server(kind, proc, port);
    running.add(server);
    try {
      await waitReady(server);
      return server;
    } catch (e) {
      await server.kill();
      failure = e;
      if (!/in use/i.test(e.message)) break;
    }
  }
  throw failure;
}

// A scratch directory with the users' passwords in both forms: a cyrus sasldb
// for Debian's memcached (built against cyrus SASL, it reads no plain file) and
// the `user:password` file memcrab reads from MEMCACHED_SASL_PWDB. Returns the
// environment for start(kind, ['-S'], env).
function saslEnv(users) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'memcrab-node-sasl-'));
  const sasldb = path.join(dir, 'sasldb2');
  for (const [user, pass] of Object.entries(users)) {
    const saslpasswd2 = onPath('saslpasswd2') || '/usr/sbin/saslpasswd2';
    const r = spawnSync(saslpasswd2, ['-p', '-c', '-f', sasldb, '-a', 'memcached', user], {
      input: pass,
    });
    if (r.status !== 0) throw new Error(`saslpasswd2 (sasl2-bin) failed: ${r.stderr}`);
  }
  const pwdb = path.join(dir, 'pwdb');
  fs.writeFileSync(pwdb, Object.entries(users).map(([u, p]) => `${u}:${p}\n`).join(''));
  fs.writeFileSync(path.join(dir, 'memcached.conf'), `mech_list: plain\nsasldb_path: ${sasldb}\n`);
  return {
    dir,
    env: { MEMCACHED_SASL_PWDB: pwdb, SASL_CONF_PATH: dir },
  };
}

// Raw text-protocol request on a fresh connection: sends `req`, resolves with
// everything read once the reply ends with `until`. Used to look at a server
// directly, past the client under test.
function raw(port, req, until = 'END\r\n', timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let got = '';
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no ${JSON.stringify(until)} after ${JSON.stringify(req)}: ${JSON.stringify(got)}`));
    }, timeoutMs);
    s.on('data', (d) => {
      got += d.toString('latin1');
      if (got.endsWith(until)) {
        clearTimeout(timer);
        s.destroy();
        resolve(got);
      }
    });
    s.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    s.write(req);
  });
}

module.exports = { KINDS, start, saslEnv, raw };
