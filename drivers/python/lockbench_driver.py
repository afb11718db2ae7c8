"""The lockbench driver protocol (docs/drivers.md) for Python lock libraries.

A driver is a Library subclass that knows one lock library; serve() speaks
the protocol around it: the hello, each client on a thread of its own (so a
library that keeps its token in thread-local storage, as redis-py's Lock
does, releases on the thread that acquired) or, for a Library with
tasks = True, each client an asyncio task of one event loop (its acquire,
release and extend are then coroutines: the application's tasks sharing
what the library keeps per thread); the answer to every operation within
its timeout, the lost signal, the bare loop of `bench driver perf`, and a
clean exit when stdin closes.

Use it from outside lockbench's clone: `bench driver path` prints the folder
lockbench writes it to, which a driver's environment names in
LOCKBENCH_DRIVERS:

    sys.path.insert(0, os.path.join(os.environ["LOCKBENCH_DRIVERS"], "python"))
    from lockbench_driver import Failure, Library, serve

Only the standard library: the drivers run on Debian's python3 with the
lock library's Debian package.
"""

import asyncio
import collections
import json
import os
import queue
import sys
import threading
import time
import traceback

PROTOCOL = 1


EFFECTS = ("none", "unknown", "unsent")


class Failure(Exception):
    """An operation's error answer: a protocol code, and whether the
    operation surely did not take effect (effect "none"), was surely never
    sent ("unsent": nothing of the request left the process, so the servers
    said nothing; never with held or not_held), or may have taken effect
    ("unknown", the default: when unsure, it may have). The effect is passed
    through as given (docs/drivers.md)."""

    def __init__(self, code, message, effect="unknown"):
        if effect not in EFFECTS:
            raise ValueError("effect %r is not one of %s" % (effect, ", ".join(EFFECTS)))
        super().__init__(message)
        self.code = code
        self.message = message
        self.effect = effect


class Refused(Exception):
    """Options the driver refuses, at its start."""


class Library:
    """One lock library behind the protocol. Subclasses set name, version
    and abilities, and implement acquire, release (and extend)."""

    name = "?"
    version = "?"
    language = "python %d.%d.%d" % sys.version_info[:3]
    abilities = {"token": False, "extend": False, "lost": False,
                 "acquire": ["wait", "try"], "concurrent": True, "bare": True}
    # options maps each library option the driver takes to its default.
    options = {}
    # tasks: serve each client as an asyncio task of one event loop, the
    # library's acquire, release, extend (and close) being coroutines;
    # False: each client on a thread of its own, the calls blocking.
    tasks = False

    def __init__(self, hello, lost):
        self.hello = hello
        self.ttl_ms = hello["ttl_ms"]
        self.namespace = hello["namespace"]
        self.servers = hello["servers"]
        self.opts = dict(self.options)
        given = hello.get("options") or {}
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            raise Refused("%s takes no option %s (it takes: %s)" % (
                self.name, ", ".join(unknown), ", ".join(sorted(self.options))))
        self.opts.update(given)
        # lost(client, lease, message) says a lease is gone.
        self.lost = lost

    def servers_of(self, *kinds):
        return [s for s in self.servers if s["kind"] in kinds]

    @staticmethod
    def host_port(addr):
        host, _, port = addr.rpartition(":")
        return host, int(port)

    def acquire(self, client, key, wait, timeout):
        """Take the lock on key, waiting up to timeout seconds when wait.
        Returns (lease handle, token or None); raises Failure."""
        raise NotImplementedError

    def release(self, client, lease):
        raise NotImplementedError

    def extend(self, client, lease, ttl_ms):
        raise Failure("unsupported", "%s cannot extend" % self.name, "none")

    def close(self):
        pass


_encode = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps would build an encoder per call


class _Out:
    """stdout, whole lines only. A line is queued, and whoever finds no
    other thread writing writes every queued line at once, straight to the
    file descriptor: a thread that queues a line while another is in its
    write leaves it to that one, which writes it next, before it lets go.
    Lines go out in the order they were queued."""

    def __init__(self):
        self.lock = threading.Lock()
        self.fd = sys.stdout.fileno()
        self.lines = collections.deque()

    def send(self, msg):
        self.lines.append(_encode(msg).encode() + b"\n")
        while self.lines and self.lock.acquire(False):
            try:
                buf = []
                while self.lines:
                    buf.append(self.lines.popleft())
                data = b"".join(buf)
                while data:
                    data = data[os.write(self.fd, data):]
            finally:
                self.lock.release()
            # Lines queued while this thread wrote, by threads that found
            # it writing, are this thread's to write: the loop looks again.


class _Op:
    """One request, with its deadline. It is answered once, by its client's
    thread or by the deadline watcher, whichever takes it out of the
    server's pending operations first."""

    __slots__ = ("req", "deadline")

    def __init__(self, req, deadline):
        self.req = req
        self.deadline = deadline


class _Deadlines(threading.Thread):
    """Answers an operation "timeout" (effect unknown) when its deadline
    passes before its library call returns. It looks over the pending
    operations every tick: there are a few (lockbench's clients each wait
    for their answer), and a fast loop of operations, thousands a second,
    nearly all answered long before their deadline, costs it nothing."""

    # tick is the watcher's grain: an operation's timeout answer comes at
    # most this late.
    tick = 0.02

    def __init__(self, server):
        super().__init__(daemon=True)
        self.server = server

    def run(self):
        pending = self.server.pending
        while True:
            time.sleep(self.tick)
            now = time.monotonic()
            for op in list(pending):
                if op.deadline <= now:
                    self.server.answer(op, {"type": "error", "code": "timeout", "effect": "unknown",
                                            "message": "%s did not return within %d ms" % (op.req["type"], op.req.get("timeout_ms", 0))})


class _Now:
    """The result of a blocking library call as an awaitable that is
    already done: one coroutine (_Server.run) serves threaded and asyncio
    libraries alike, and on a thread it never suspends."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __await__(self):
        return self.value
        yield  # noqa: unreachable - makes this a generator


def _now(fn, *args):
    return _Now(fn(*args))


def _run_now(coro):
    """Runs a coroutine that never suspends (a blocking library's) to its
    end on this thread."""
    try:
        coro.send(None)
    except StopIteration:
        return
    coro.close()
    raise RuntimeError("a blocking library call suspended: set tasks = True for an asyncio library")


class _Server:
    def __init__(self, lib_class):
        self.lib_class = lib_class
        self.out = _Out()
        self.lib = None
        self.clients = {}
        self.held = {}  # (client, lease) of every lease lockbench holds
        self.held_lock = threading.Lock()
        # pending holds every operation not answered yet: taking one out
        # (dict.pop, one step under the GIL) is the right to answer it.
        self.pending = {}
        self.deadlines = _Deadlines(self)
        # loop runs the clients' tasks of a Library with tasks = True.
        self.loop = None
        self.call = _now

    def log(self, msg):
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    def answer(self, op, msg):
        if self.pending.pop(op, None) is None:
            return False  # answered already
        if "id" in op.req:
            msg["id"] = op.req["id"]
        self.out.send(msg)
        return True

    def lost(self, client, lease, message=""):
        with self.held_lock:
            if self.held.pop((client, lease), None) is None:
                return  # given back already, or never lockbench's
        msg = {"type": "lost", "client": client, "lease": lease}
        if message:
            msg["message"] = message
        self.out.send(msg)

    def put(self, client, op):
        """Queues op behind its client's earlier operations, on the
        client's thread or task."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.task_put, client, op)
            return
        q = self.clients.get(client)
        if q is None:
            q = queue.SimpleQueue()
            self.clients[client] = q
            threading.Thread(target=self.client_loop, args=(client, q), daemon=True).start()
        q.put(op)

    def client_loop(self, client, q):
        while True:
            op = q.get()
            if op not in self.pending:
                continue  # its deadline passed while it queued
            _run_now(self.run(client, op))

    def start_tasks(self):
        self.loop = asyncio.new_event_loop()
        self.call = lambda fn, *args: fn(*args)
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def task_put(self, client, op):
        # On the loop's thread.
        q = self.clients.get(client)
        if q is None:
            q = asyncio.Queue()
            self.clients[client] = q
            self.loop.create_task(self.task_loop(client, q))
        q.put_nowait(op)

    async def task_loop(self, client, q):
        while True:
            op = await q.get()
            if op in self.pending:
                await self.run(client, op)

    async def run(self, client, op):
        req = op.req
        kind = req["type"]
        call = self.call
        # The library gets a little less than lockbench's timeout, so that
        # its own answer (a blocking acquire giving up: held) comes first.
        left = op.deadline - time.monotonic()
        timeout = max(0.0, left - max(0.05, 0.1 * left))
        try:
            if kind == "acquire":
                lease, token = await call(self.lib.acquire, client, req["key"], bool(req.get("wait")), timeout)
                msg = {"type": "ok", "lease": lease}
                if token is not None:
                    msg["token"] = token
                with self.held_lock:
                    self.held[(client, lease)] = True
                if not self.answer(op, msg):
                    # Too late: lockbench counted the acquire as unknown and
                    # will not release it; give the lock back.
                    with self.held_lock:
                        self.held.pop((client, lease), None)
                    self.log("acquire %s answered late: releasing lease %s" % (req["key"], lease))
                    try:
                        await call(self.lib.release, client, lease)
                    except Exception as e:  # noqa: BLE001
                        self.log("release of the late lease %s: %r" % (lease, e))
            elif kind == "release":
                with self.held_lock:
                    self.held.pop((client, req["lease"]), None)
                await call(self.lib.release, client, req["lease"])
                self.answer(op, {"type": "ok"})
            elif kind == "extend":
                await call(self.lib.extend, client, req["lease"], req.get("ttl_ms") or self.lib.ttl_ms)
                self.answer(op, {"type": "ok"})
            else:
                self.answer(op, {"type": "error", "code": "unsupported", "effect": "none",
                                 "message": "no operation %r" % kind})
        except Failure as f:
            if f.code == "not_held" and kind == "extend":
                with self.held_lock:
                    self.held.pop((client, req["lease"]), None)
            msg = {"type": "error", "code": f.code, "message": f.message}
            if f.code not in ("held", "not_held", "unsupported", "bad_request"):
                msg["effect"] = f.effect
            self.answer(op, msg)
        except Exception as e:  # noqa: BLE001 - the library's own exceptions
            self.answer(op, {"type": "error", "code": "error", "effect": "unknown",
                             "message": "%s: %s" % (type(e).__name__, e)})

    def serve(self):
        stdin = sys.stdin.buffer
        first = stdin.readline()
        if not first:
            return 0
        hello = json.loads(first)
        if hello.get("type") != "hello" or hello.get("protocol") != PROTOCOL:
            self.out.send({"type": "error", "code": "error", "message": "want a hello of protocol %d" % PROTOCOL})
            return 2
        try:
            self.lib = self.lib_class(hello, self.lost)
        except Refused as e:
            self.out.send({"type": "error", "code": "options", "message": str(e)})
            return 2
        except Exception as e:  # noqa: BLE001
            self.log(traceback.format_exc())
            self.out.send({"type": "error", "code": "error", "message": "start: %s: %s" % (type(e).__name__, e)})
            return 1
        self.out.send({"type": "hello", "protocol": PROTOCOL, "library": self.lib.name, "version": self.lib.version,
                       "language": self.lib.language, "abilities": self.lib.abilities})
        if hello.get("bare"):
            return self.bare(hello["bare"])
        if self.lib.tasks:
            self.start_tasks()
        self.deadlines.start()
        for line in stdin:
            req = json.loads(line)
            kind = req.get("type")
            if kind == "ping":
                self.out.send({"type": "ok", "id": req["id"]})
                continue
            op = _Op(req, time.monotonic() + req.get("timeout_ms", 10000) / 1000.0)
            self.pending[op] = True
            self.put(req.get("client", 0), op)
        return 0

    def bare(self, shape):
        """The library's own loop: each thread acquires and releases a key of
        its own, as fast as it can, with nothing of lockbench around it."""
        stop = time.monotonic() + shape["seconds"]
        counts = [0] * shape["clients"]
        errors = [0] * shape["clients"]
        wait = self.lib.abilities["acquire"][0] == "wait"

        call = self.call
        if self.lib.tasks:
            call = lambda fn, *args: fn(*args)  # noqa: E731

        async def loop(i):
            key = "bare-%d" % i
            while time.monotonic() < stop:
                try:
                    lease, _ = await call(self.lib.acquire, i, key, wait, 2.0)
                except Failure as f:
                    if f.code != "held":
                        errors[i] += 1
                    continue
                except Exception:  # noqa: BLE001
                    errors[i] += 1
                    continue
                try:
                    await call(self.lib.release, i, lease)
                    counts[i] += 1
                except Exception:  # noqa: BLE001
                    errors[i] += 1

        start = time.monotonic()
        if self.lib.tasks:
            async def all_tasks():
                await asyncio.gather(*(loop(i) for i in range(shape["clients"])))
            asyncio.run(all_tasks())
        else:
            threads = [threading.Thread(target=lambda i=i: _run_now(loop(i)), daemon=True) for i in range(shape["clients"])]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.out.send({"type": "bare", "cycles": sum(counts), "errors": sum(errors),
                       "seconds": time.monotonic() - start})
        return 0


def serve(lib_class):
    """Run a driver for lib_class until stdin closes; then exit at once,
    whatever the library's threads are still doing."""
    server = _Server(lib_class)
    code = 0
    try:
        code = server.serve()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        code = 1
    finally:
        if server.lib is not None:
            if server.loop is not None and asyncio.iscoroutinefunction(server.lib.close):
                fut = asyncio.run_coroutine_threadsafe(server.lib.close(), server.loop)
                try:
                    fut.result(2.0)
                except Exception:  # noqa: BLE001 - exiting anyway
                    pass
            else:
                closer = threading.Thread(target=server.lib.close, daemon=True)
                closer.start()
                closer.join(2.0)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
