#!/usr/bin/python3
"""lockbench driver: python-etcd3's Lock (python3-etcd3).

Each acquisition is an etcd3.locks.Lock on /locks/<namespace>/<key>, as
`client.lock(name, ttl)` makes it: a lease of ttl whole seconds, then a
transaction that puts the key (bound to the lease) if its create revision
is 0; a blocking acquire watches the key and tries again until its
timeout. release is a transaction deleting the key if its value is still
the lock's uuid (the lease itself is left to expire); extend is the
lease's refresh(), which reports no error when the lease is already gone.
The client talks to one endpoint (etcd-1): this version of the library
has no failover. No fencing token, no lost signal.

Acquisition tries once by default (acquire(timeout=0)), lockbench's retry
loop waiting between tries: the blocking acquire of 0.12.0 raises
TypeError as soon as it has to wait, on Debian 12's tenacity 8.2 (its wait
callback has tenacity's old two-argument signature: kragniz/python-etcd3
#2149). `acquire: wait` runs it as the library's default does.

`context_manager: true` acquires as `with client.lock(name, ttl):` does:
Lock.__enter__ calls acquire() with its own default timeout (10s) and
enters the block whatever it returned, so a waiter whose 10s run out
enters without the lock (kragniz/python-etcd3 #599); the driver answers
ok where __enter__ returns, as the application goes on. With Debian 12's
tenacity the wait raises TypeError first, after the transaction that
found the key held: the lock was not taken (effect none).
"""

import math
import sys
import uuid

import etcd3
from etcd3.exceptions import Etcd3Exception

from lockbench_driver import Failure, Library, Refused, serve


class Etcd3Lock(Library):
    name = "python-etcd3"
    version = etcd3.__version__
    abilities = {"token": False, "extend": True, "lost": False,
                 "acquire": ["try", "wait"], "concurrent": True, "bare": True}
    options = {"ttl": None, "timeout": None, "context_manager": False}

    def __init__(self, hello, lost):
        super().__init__(hello, lost)
        servers = self.servers_of("etcd")
        if not servers:
            raise Refused("no etcd server in the hello")
        host, port = self.host_port(servers[0]["addr"])
        self.ttl = self.opts["ttl"] or max(1, math.ceil(self.ttl_ms / 1000.0))
        self.c = etcd3.client(host=host, port=port, timeout=self.opts["timeout"])
        self.c.status()
        self.locks = {}

    def acquire(self, client, key, wait, timeout):
        lock = self.c.lock("%s/%s" % (self.namespace, key), ttl=self.ttl)
        if self.opts["context_manager"]:
            return self.enter(lock)
        try:
            got = lock.acquire(timeout=timeout if wait else 0)
        except Etcd3Exception as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))
        if not got:
            raise Failure("held", "the lock is held by another client")
        lease = uuid.uuid4().hex
        self.locks[lease] = lock
        return lease, None

    def enter(self, lock):
        """What `with lock:` does before its block runs."""
        try:
            lock.__enter__()
        except Etcd3Exception as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))
        except TypeError as e:
            # tenacity 8.2 calling python-etcd3's two-argument wait
            # callback, after the transaction that found the key held
            raise Failure("error", "__enter__: TypeError: %s" % e, "none")
        lease = uuid.uuid4().hex
        self.locks[lease] = lock
        return lease, None

    def lock_of(self, lease, pop=False):
        lock = self.locks.pop(lease, None) if pop else self.locks.get(lease)
        if lock is None:
            raise Failure("bad_request", "no lease %s" % lease)
        return lock

    def release(self, client, lease):
        lock = self.lock_of(lease, pop=True)
        try:
            released = lock.release()
        except Etcd3Exception as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))
        if not released:
            raise Failure("not_held", "the key no longer holds this lock's uuid")

    def extend(self, client, lease, ttl_ms):
        lock = self.lock_of(lease)
        try:
            answers = lock.refresh()
        except Etcd3Exception as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))
        for a in answers:
            if getattr(a, "TTL", 1) <= 0:
                # What the library returns, not raises: an application that
                # only catches exceptions believes its lock extended.
                log("refresh of lease %s returned TTL %d: the lease is gone, and python-etcd3 raised nothing" % (lease, a.TTL))

    def close(self):
        self.c.close()


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


if __name__ == "__main__":
    serve(Etcd3Lock)
