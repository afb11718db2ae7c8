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
//
// The protocol is lockbench_driver.js's, beside this file.
'use strict';

const path = require('node:path');
const { createClient } = require('redis');
const redisVersion = require('redis/package.json').version;
const { randomUUID } = require('node:crypto');
const { Failure, serve, log } = require(path.join(__dirname, 'lockbench_driver.js'));

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
    await this.extendLock(this.lockOf(lease), ttlMs || this.ttlMs);
  }

  close() {
    for (const lock of this.locks.values()) {
      clearInterval(lock.timer);
    }
  }
}

serve({
  name: 'node-redis',
  version: redisVersion,
  options: OPTIONS,
  async start(hello, opts, lost) {
    const server = (hello.servers || []).find((s) => s.kind === 'redis');
    if (!server) {
      throw new Failure('options', 'no redis server in the hello', 'none');
    }
    const at = server.addr.lastIndexOf(':');
    // As node-redis's documentation says to: an error listener, or an
    // error ends the process.
    const redis = createClient({ socket: { host: server.addr.slice(0, at), port: Number(server.addr.slice(at + 1)) } });
    redis.on('error', (e) => log(`node-redis: ${e.message}`));
    try {
      await redis.connect();
    } catch (e) {
      throw new Failure('error', `connect: ${e.message}`);
    }
    const lib = new Lease(hello, opts, redis);
    lib.lost = lost;
    lib.abilities = { token: !!opts.fencing, extend: true, lost: lib.renewEvery > 0, acquire: ['try'], concurrent: true, bare: true };
    return lib;
  },
});
