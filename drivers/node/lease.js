#!/usr/bin/env node
// lockbench driver: the seeds' TypeScript lease, on node-redis (Debian
// node-redis 4.5.1), written out in plain JavaScript.
//
// The lease is the seeds' own code: acquireLock is SET key token NX PX ttl
// with a random UUID; its fencing token is INCR lock-sequence:<resource>
// right after; withLease renews it every ttl/2 on a setInterval; extendLock
// is a Lua compare-and-pexpire that throws "Lock perdido" when the key is
// no longer the token's; releaseLock is a Lua compare-and-delete. One
// node-redis client (one connection) serves every client of the instance.
//
// Two things the seeds leave to chance are pinned down here. The renew
// timer's promise is not awaited in the seeds, so a failed renew is an
// unhandled rejection, which ends a Node 15+ process: here a renew that
// finds the lease gone says `lost` (and stops), and one that fails on the
// connection is logged and tried again at the next tick. And the seeds
// retry acquisition in the application (acquireWithRetry): here that is
// lockbench's retry loop, so acquisition tries once.
'use strict';

const { createClient } = require('redis');
const redisVersion = require('redis/package.json').version;
const { randomUUID } = require('node:crypto');

const PROTOCOL = 1;
const OPTIONS = { fencing: true, renew_every_ms: null };

const releaseScript = `
  if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
  end
  return 0
`;

const extendScript = `
  if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
  end
  return 0
`;

// Lines to lockbench are queued and written together once the event
// loop has run what is ready (setImmediate): the answers that one read of
// node-redis's socket settles go out in one write. flush writes at once
// (before an exit).
let outLines = [];
let flushing = false;

function send(msg) {
  outLines.push(JSON.stringify(msg));
  if (!flushing) {
    flushing = true;
    setImmediate(flush);
  }
}

function flush() {
  flushing = false;
  if (outLines.length > 0) {
    const data = outLines.join('\n') + '\n';
    outLines = [];
    process.stdout.write(data);
  }
}

function exit(code) {
  flush();
  process.exit(code);
}

// lineReader calls onLine with each line of stdin, and onEnd when it ends.
function lineReader(onLine, onEnd) {
  let rest = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop();
    for (const line of lines) {
      onLine(line.endsWith('\r') ? line.slice(0, -1) : line);
    }
  });
  process.stdin.on('end', () => {
    if (rest !== '') {
      onLine(rest);
    }
    onEnd();
  });
}

function log(msg) {
  process.stderr.write(msg + '\n');
}

// Failure is an operation's error answer: a protocol code, and whether the
// operation surely did not take effect ('none'), was surely never sent
// ('unsent': nothing of the request left the process, so the servers said
// nothing; never with held or not_held), or may have ('unknown', the
// default). The effect is passed through as given (docs/drivers.md).
const EFFECTS = ['none', 'unknown', 'unsent'];

class Failure extends Error {
  constructor(code, message, effect = 'unknown') {
    if (!EFFECTS.includes(effect)) {
      throw new TypeError(`effect ${JSON.stringify(effect)} is not one of ${EFFECTS.join(', ')}`);
    }
    super(message);
    this.code = code;
    this.effect = effect;
  }
}

class Lease {
  constructor(hello, opts, redis) {
    this.ns = hello.namespace;
    this.ttlMs = hello.ttl_ms;
    this.fencing = opts.fencing;
    this.renewEvery = opts.renew_every_ms === null ? Math.floor(this.ttlMs / 2) : opts.renew_every_ms;
    this.redis = redis;
    this.locks = new Map(); // lease -> {client, key, token, timer}
    this.lost = () => {};
  }

  // The seeds' acquireLock, and their fencing token.
  async acquire(client, resource) {
    const token = randomUUID();
    const key = `${this.ns}:lock:${resource}`;
    const result = await this.redis.set(key, token, { NX: true, PX: this.ttlMs });
    if (result !== 'OK') {
      throw new Failure('held', 'the lock is held by another client', 'none');
    }
    let fence;
    if (this.fencing) {
      fence = await this.redis.incr(`${this.ns}:lock-sequence:${resource}`);
    }
    const lease = randomUUID();
    const lock = { client, key, token, timer: null };
    this.locks.set(lease, lock);
    if (this.renewEvery > 0) {
      lock.timer = setInterval(() => this.renew(lease, lock), this.renewEvery);
    }
    return { lease, token: fence };
  }

  // The seeds' withLease renew tick.
  renew(lease, lock) {
    this.extendLock(lock, this.ttlMs).catch((e) => {
      if (e instanceof Failure && e.code === 'not_held') {
        clearInterval(lock.timer);
        lock.timer = null;
        this.lost(lock.client, lease, 'renew: ' + e.message);
      } else {
        log(`renew of ${lock.key}: ${e.message}`);
      }
    });
  }

  // The seeds' extendLock.
  async extendLock(lock, ttlMs) {
    const result = await this.redis.eval(extendScript, { keys: [lock.key], arguments: [lock.token, String(ttlMs)] });
    if (result !== 1) {
      throw new Failure('not_held', 'Lock perdido');
    }
  }

  lockOf(lease) {
    const lock = this.locks.get(lease);
    if (!lock) {
      throw new Failure('bad_request', `no lease ${lease}`, 'none');
    }
    return lock;
  }

  // The seeds' releaseLock, after withLease's clearInterval.
  async release(client, lease) {
    const lock = this.lockOf(lease);
    this.locks.delete(lease);
    clearInterval(lock.timer);
    const result = await this.redis.eval(releaseScript, { keys: [lock.key], arguments: [lock.token] });
    if (result !== 1) {
      throw new Failure('not_held', 'the key no longer holds this lease\'s token');
    }
  }

  async extend(client, lease, ttlMs) {
    await this.extendLock(this.lockOf(lease), ttlMs);
  }

  close() {
    for (const lock of this.locks.values()) {
      clearInterval(lock.timer);
    }
  }
}

async function main() {
  // Lines before the driver is ready (the hello, then whatever comes while
  // node-redis connects) wait in early; then serve takes each as it comes.
  let early = [];
  let serve = null;
  let ended = false;
  let helloSeen = null;
  const started = new Promise((resolve) => { helloSeen = resolve; });
  lineReader((line) => {
    if (serve) {
      serve(line);
    } else {
      early.push(line);
      if (early.length === 1) {
        helloSeen();
      }
    }
  }, () => {
    ended = true;
    if (serve) {
      finish();
    } else {
      helloSeen();
    }
  });
  await started;
  if (early.length === 0) {
    exit(0);
  }
  const hello = JSON.parse(early.shift());
  if (hello.type !== 'hello' || hello.protocol !== PROTOCOL) {
    send({ type: 'error', code: 'error', message: `want a hello of protocol ${PROTOCOL}` });
    exit(2);
  }
  const opts = { ...OPTIONS };
  for (const [k, v] of Object.entries(hello.options || {})) {
    if (!(k in OPTIONS)) {
      send({ type: 'error', code: 'options', message: `node-redis takes no option ${k} (it takes: ${Object.keys(OPTIONS).join(', ')})` });
      exit(2);
    }
    opts[k] = v;
  }
  const server = (hello.servers || []).find((s) => s.kind === 'redis');
  if (!server) {
    send({ type: 'error', code: 'options', message: 'no redis server in the hello' });
    exit(2);
  }
  const [host, port] = [server.addr.slice(0, server.addr.lastIndexOf(':')), Number(server.addr.slice(server.addr.lastIndexOf(':') + 1))];
  // As node-redis's documentation says to: an error listener, or an error
  // ends the process.
  const redis = createClient({ socket: { host, port } });
  redis.on('error', (e) => log(`node-redis: ${e.message}`));
  try {
    await redis.connect();
  } catch (e) {
    send({ type: 'error', code: 'error', message: `connect: ${e.message}` });
    exit(1);
  }
  const lib = new Lease(hello, opts, redis);
  const held = new Set(); // `${client} ${lease}` lockbench holds
  lib.lost = (client, lease, message) => {
    if (held.delete(`${client} ${lease}`)) {
      send({ type: 'lost', client, lease, message });
    }
  };
  send({
    type: 'hello', protocol: PROTOCOL, library: 'node-redis', version: redisVersion, language: `node ${process.version}`,
    abilities: { token: !!opts.fencing, extend: true, lost: lib.renewEvery > 0, acquire: ['try'], concurrent: true, bare: true },
  });
  if (hello.bare) {
    await bare(lib, hello.bare);
    return;
  }
  const clients = new Map(); // client -> its queue of requests, the running one first
  const finish = () => {
    lib.close();
    exit(0);
  };
  serve = (line) => {
    const req = JSON.parse(line);
    if (req.type === 'ping') {
      send({ type: 'ok', id: req.id });
      return;
    }
    // The deadline runs from the request's arrival: a request that waits
    // behind its client's previous one (stuck on a command node-redis
    // never settles) is still answered in time.
    const op = new Op(req);
    let q = clients.get(req.client);
    if (q === undefined) {
      q = [];
      clients.set(req.client, q);
    }
    q.push(op);
    if (q.length === 1) {
      runQueue(lib, held, q);
    }
  };
  for (const line of early) {
    serve(line);
  }
  early = null;
  if (ended) {
    finish();
  }
}

// runQueue runs a client's requests in order, each once the one before
// it has settled.
async function runQueue(lib, held, q) {
  while (q.length > 0) {
    await run(lib, held, q[0]);
    q.shift();
  }
}

// Op is a request with its deadline, answered once: with its result, or
// with a timeout (effect unknown) when the deadline comes first.
class Op {
  constructor(req) {
    this.req = req;
    this.answered = false;
    this.timer = setTimeout(() => this.answer({ type: 'error', code: 'timeout', effect: 'unknown', message: `${req.type} did not settle within ${req.timeout_ms} ms` }), req.timeout_ms || 10000);
  }

  answer(msg) {
    if (this.answered) {
      return false;
    }
    this.answered = true;
    clearTimeout(this.timer);
    msg.id = this.req.id;
    send(msg);
    return true;
  }
}

// run serves one request.
async function run(lib, held, op) {
  const { req } = op;
  const answer = (msg) => op.answer(msg);
  if (op.answered) {
    return; // its deadline passed while it waited behind its client's previous request
  }
  try {
    switch (req.type) {
      case 'acquire': {
        const { lease, token } = await lib.acquire(req.client, req.key);
        held.add(`${req.client} ${lease}`);
        const msg = { type: 'ok', lease };
        if (token !== undefined) {
          msg.token = token;
        }
        if (!answer(msg)) {
          held.delete(`${req.client} ${lease}`);
          log(`acquire ${req.key} settled late: releasing lease ${lease}`);
          lib.release(req.client, lease).catch((e) => log(`release of the late lease: ${e.message}`));
        }
        break;
      }
      case 'release':
        held.delete(`${req.client} ${req.lease}`);
        await lib.release(req.client, req.lease);
        answer({ type: 'ok' });
        break;
      case 'extend':
        await lib.extend(req.client, req.lease, req.ttl_ms || lib.ttlMs);
        answer({ type: 'ok' });
        break;
      default:
        answer({ type: 'error', code: 'unsupported', message: `no operation ${JSON.stringify(req.type)}` });
    }
  } catch (e) {
    if (e instanceof Failure) {
      const msg = { type: 'error', code: e.code, message: e.message };
      if (!['held', 'not_held', 'unsupported', 'bad_request'].includes(e.code)) {
        msg.effect = e.effect;
      }
      answer(msg);
    } else {
      answer({ type: 'error', code: 'error', effect: 'unknown', message: `${e.name}: ${e.message}` });
    }
  }
}

// bare is the library's own loop: each client acquires and releases a key
// of its own as fast as it can, nothing of lockbench around it.
async function bare(lib, shape) {
  const stop = Date.now() + shape.seconds * 1000;
  const start = process.hrtime.bigint();
  let cycles = 0;
  let errors = 0;
  const loop = async (i) => {
    while (Date.now() < stop) {
      let got;
      try {
        got = await lib.acquire(i, `bare-${i}`);
      } catch (e) {
        if (!(e instanceof Failure && e.code === 'held')) {
          errors++;
        }
        continue;
      }
      try {
        await lib.release(i, got.lease);
        cycles++;
      } catch (e) {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: shape.clients }, (_, i) => loop(i)));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  send({ type: 'bare', cycles, errors, seconds });
  lib.close();
  exit(0);
}

main().catch((e) => {
  log(e.stack || String(e));
  exit(1);
});
