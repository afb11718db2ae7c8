#!/usr/bin/python3
"""lockbench driver: kazoo's Lock (python3-kazoo).

Each acquisition is a kazoo.recipe.lock.Lock on /<namespace>/<key>, as
`zk.Lock(path)` makes it: a protected ephemeral sequential node, the
predecessor watched while blocking. One KazooClient (one session) serves
every client of the instance. kazoo's documentation advises watching the
connection state: LOST means the lock is surely gone, SUSPENDED that it
may be; the driver says `lost` on LOST (or, with lost_on: suspended, on
SUSPENDED). The library issues no fencing token and cannot extend: the
session renews itself while connected.
"""

import threading
import uuid

import kazoo.version
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout

from lockbench_driver import Failure, Library, Refused, serve


class KazooLock(Library):
    name = "kazoo"
    version = kazoo.version.__version__
    abilities = {"token": False, "extend": False, "lost": True,
                 "acquire": ["wait", "try"], "concurrent": True, "bare": True}
    options = {"timeout": 10.0, "lost_on": "lost"}

    def __init__(self, hello, lost):
        super().__init__(hello, lost)
        if self.opts["lost_on"] not in ("lost", "suspended"):
            raise Refused("lost_on: %r is neither lost nor suspended" % self.opts["lost_on"])
        hosts = ",".join(s["addr"] for s in self.servers_of("zookeeper"))
        if not hosts:
            raise Refused("no zookeeper server in the hello")
        self.locks = {}
        self.mu = threading.Lock()
        # troubles counts connection troubles: an acquire that fails across
        # one may have created its node (kazoo retries a lost create and
        # gives up with False), so its outcome is unknown.
        self.troubles = 0
        self.zk = KazooClient(hosts=hosts, timeout=float(self.opts["timeout"]))
        self.zk.add_listener(self.state)
        self.zk.start(timeout=15)

    def state(self, state):
        # Called on kazoo's own thread: it must not block.
        if state != KazooState.CONNECTED:
            self.troubles += 1
        if state == KazooState.LOST or (state == KazooState.SUSPENDED and self.opts["lost_on"] == "suspended"):
            with self.mu:
                held = list(self.locks.items())
            for lease, (client, _) in held:
                self.lost(client, lease, "connection state %s" % state)

    def acquire(self, client, key, wait, timeout):
        lock = self.zk.Lock("/%s/%s" % (self.namespace, key))
        before = self.troubles
        try:
            got = lock.acquire(blocking=wait, timeout=timeout if wait else None)
        except LockTimeout as e:
            got, why = False, str(e)
        except KazooException as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))
        else:
            why = "the lock is held by another client"
        if not got:
            if self.troubles != before or self.zk.state != KazooState.CONNECTED:
                raise Failure("unavailable", "not acquired across a connection trouble (%s)" % self.zk.state)
            raise Failure("held", why)
        lease = uuid.uuid4().hex
        with self.mu:
            self.locks[lease] = (client, lock)
        return lease, None

    def release(self, client, lease):
        with self.mu:
            entry = self.locks.pop(lease, None)
        if entry is None:
            raise Failure("bad_request", "no lease %s" % lease)
        try:
            released = entry[1].release()
        except KazooException as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))
        if not released:
            raise Failure("not_held", "kazoo's release says the lock was not acquired")

    def close(self):
        self.zk.stop()
        self.zk.close()


if __name__ == "__main__":
    serve(KazooLock)
