// The lockbench driver protocol (docs/drivers.md) for Node lock libraries.
//
// A driver describes one library and serve() speaks the protocol around
// it: the hello, every client's requests run in order (a client's next
// request waits behind its previous one, and is still answered within its
// own timeout, counted from its arrival), the answer to every request
// within its timeout, the lost signal, the bare loop of `bench driver
// perf`, and a clean exit when stdin closes.
//
// Use it from outside lockbench's clone: `bench driver path` prints the
// folder lockbench writes it to, which a driver's environment names in
// LOCKBENCH_DRIVERS:
//
//   const path = require('node:path');
//   const { Failure, serve } = require(path.join(process.env.LOCKBENCH_DRIVERS, 'node', 'lockbench_driver.js'));
//   serve({
//     name: 'mylock', version: '2.1',
//     options: { retries: 3 },              // each option the driver takes, with its default
//     async start(hello, opts, lost) {      // connect; lost(client, lease, message) says a lease is gone
//       return {
//         abilities: { token: false, extend: false, lost: false, acquire: ['try'], concurrent: true, bare: true },
//         async acquire(client, key, wait, timeoutMs) { ... return { lease, token } },  // or throw new Failure('held', ...)
//         async release(client, lease) { ... },
//         async extend(client, lease, ttlMs) { ... },   // with the extend ability
//         close() { ... },
//       };
//     },
//   });
//
// Only Node's own modules.
'use strict';

const PROTOCOL = 1;

// Lines to lockbench are queued and written together once the event loop
// has run what is ready (setImmediate): the answers that one read of a
// library's socket settles go out in one write. flush writes at once
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

function log(msg) {
  process.stderr.write(msg + '\n');
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

// Op is a request with its deadline, answered once: with its result, or
// with a timeout (effect unknown) when the deadline comes first.
class Op {
  constructor(req) {
    this.req = req;
    this.answered = false;
    this.deadline = Date.now() + (req.timeout_ms || 10000);
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

// serve runs driver until stdin closes, then exits at once.
function serve(driver) {
  main(driver).catch((e) => {
    log(e.stack || String(e));
    exit(1);
  });
}

async function main(driver) {
  // Lines before the driver is ready (the hello, then whatever comes while
  // the library connects) wait in early; then take serves each as it comes.
  let early = [];
  let take = null;
  let ended = false;
  let helloSeen = null;
  let finish = null;
  const started = new Promise((resolve) => { helloSeen = resolve; });
  lineReader((line) => {
    if (take) {
      take(line);
    } else {
      early.push(line);
      if (early.length === 1) {
        helloSeen();
      }
    }
  }, () => {
    ended = true;
    if (finish) {
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
  const known = driver.options || {};
  const opts = { ...known };
  for (const [k, v] of Object.entries(hello.options || {})) {
    if (!(k in known)) {
      send({ type: 'error', code: 'options', message: `${driver.name} takes no option ${k} (it takes: ${Object.keys(known).sort().join(', ')})` });
      exit(2);
    }
    opts[k] = v;
  }
  const held = new Set(); // `${client} ${lease}` lockbench holds, lost not yet said
  const lost = (client, lease, message) => {
    if (held.delete(`${client} ${lease}`)) {
      const msg = { type: 'lost', client, lease };
      if (message) {
        msg.message = message;
      }
      send(msg);
    }
  };
  let lib;
  try {
    lib = await driver.start(hello, opts, lost);
  } catch (e) {
    if (e instanceof Failure) {
      send({ type: 'error', code: e.code, message: e.message });
      exit(e.code === 'options' ? 2 : 1);
    }
    send({ type: 'error', code: 'error', message: `start: ${e.message}` });
    exit(1);
  }
  send({ type: 'hello', protocol: PROTOCOL, library: driver.name, version: driver.version, language: `node ${process.version}`, abilities: lib.abilities });
  const close = () => {
    if (lib.close) {
      lib.close();
    }
  };
  if (hello.bare) {
    await bare(lib, hello.bare);
    close();
    exit(0);
  }
  const clients = new Map(); // client -> its queue of requests, the running one first
  finish = () => {
    close();
    exit(0);
  };
  take = (line) => {
    const req = JSON.parse(line);
    if (req.type === 'ping') {
      send({ type: 'ok', id: req.id });
      return;
    }
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
    take(line);
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

// run serves one request.
async function run(lib, held, op) {
  const { req } = op;
  if (op.answered) {
    return; // its deadline passed while it waited behind its client's previous request
  }
  try {
    switch (req.type) {
      case 'acquire': {
        // The library gets a little less than lockbench's timeout, so that
        // its own answer (a blocking acquire giving up: held) comes first.
        const left = op.deadline - Date.now();
        const { lease, token } = await lib.acquire(req.client, req.key, !!req.wait, Math.max(0, left - Math.max(50, left / 10)));
        held.add(`${req.client} ${lease}`);
        const msg = { type: 'ok', lease };
        if (token !== undefined && token !== null) {
          msg.token = token;
        }
        if (!op.answer(msg)) {
          // Too late: lockbench counted the acquire as unknown and will
          // not release it; give the lock back.
          held.delete(`${req.client} ${lease}`);
          log(`acquire ${req.key} settled late: releasing lease ${lease}`);
          Promise.resolve().then(() => lib.release(req.client, lease)).catch((e) => log(`release of the late lease: ${e.message}`));
        }
        break;
      }
      case 'release':
        held.delete(`${req.client} ${req.lease}`);
        await lib.release(req.client, req.lease);
        op.answer({ type: 'ok' });
        break;
      case 'extend':
        if (!lib.extend) {
          throw new Failure('unsupported', 'the library cannot extend', 'none');
        }
        await lib.extend(req.client, req.lease, req.ttl_ms);
        op.answer({ type: 'ok' });
        break;
      default:
        op.answer({ type: 'error', code: 'unsupported', message: `no operation ${JSON.stringify(req.type)}` });
    }
  } catch (e) {
    if (e instanceof Failure) {
      const msg = { type: 'error', code: e.code, message: e.message };
      if (!['held', 'not_held', 'unsupported', 'bad_request'].includes(e.code)) {
        msg.effect = e.effect;
      }
      op.answer(msg);
    } else {
      op.answer({ type: 'error', code: 'error', effect: 'unknown', message: `${e.name}: ${e.message}` });
    }
  }
}

// bare is the library's own loop: each client acquires and releases a key
// of its own as fast as it can, nothing of lockbench around it.
async function bare(lib, shape) {
  const stop = Date.now() + shape.seconds * 1000;
  const start = process.hrtime.bigint();
  const wait = lib.abilities.acquire[0] === 'wait';
  let cycles = 0;
  let errors = 0;
  const loop = async (i) => {
    while (Date.now() < stop) {
      let got;
      try {
        got = await lib.acquire(i, `bare-${i}`, wait, 2000);
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
}

module.exports = { Failure, serve, log, PROTOCOL };
