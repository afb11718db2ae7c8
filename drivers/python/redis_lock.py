#!/usr/bin/python3
"""lockbench driver: redis-py's Lock (python3-redis).

Each acquisition is a redis.lock.Lock, as `r.lock(name, timeout=...)` makes
it: SET name token NX PX timeout; a blocking acquire tries again every
`sleep` seconds until its blocking_timeout; release and extend are the
library's Lua scripts, which raise LockNotOwnedError when the token is no
longer the key's. The library issues no fencing token and never says a
lease is gone. One redis.Redis (one connection pool) serves every client
of the instance, as it would in an application.
"""

import uuid

import redis
from redis.exceptions import LockError, LockNotOwnedError, RedisError

from lockbench_driver import Failure, Library, Refused, serve

EXTEND_MODES = ("replace", "add", "reacquire")


class RedisPyLock(Library):
    name = "redis-py"
    version = redis.__version__
    abilities = {"token": False, "extend": True, "lost": False,
                 "acquire": ["wait", "try"], "concurrent": True, "bare": True}
    options = {"timeout": "ttl", "sleep": 0.1, "thread_local": True, "extend": "replace", "socket_timeout": None}

    def __init__(self, hello, lost):
        super().__init__(hello, lost)
        if self.opts["extend"] not in EXTEND_MODES:
            raise Refused("extend: %r is not one of %s" % (self.opts["extend"], ", ".join(EXTEND_MODES)))
        servers = self.servers_of("redis")
        if not servers:
            raise Refused("no redis server in the hello")
        host, port = self.host_port(servers[0]["addr"])
        self.timeout = self.ttl_ms / 1000.0 if self.opts["timeout"] == "ttl" else self.opts["timeout"]
        self.r = redis.Redis(host=host, port=port, socket_timeout=self.opts["socket_timeout"])
        self.r.ping()
        self.locks = {}

    def acquire(self, client, key, wait, timeout):
        lock = self.r.lock("%s:lock:%s" % (self.namespace, key), timeout=self.timeout, sleep=self.opts["sleep"],
                           blocking=wait, blocking_timeout=timeout if wait else None,
                           thread_local=self.opts["thread_local"])
        try:
            got = lock.acquire()
        except RedisError as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))
        if not got:
            raise Failure("held", "the lock is held by another client")
        lease = uuid.uuid4().hex
        self.locks[lease] = lock
        return lease, None

    def lock_of(self, lease):
        lock = self.locks.get(lease)
        if lock is None:
            raise Failure("bad_request", "no lease %s" % lease)
        return lock

    def release(self, client, lease):
        lock = self.lock_of(lease)
        del self.locks[lease]
        try:
            lock.release()
        except LockNotOwnedError as e:
            raise Failure("not_held", str(e))
        except LockError as e:
            raise Failure("error", str(e), "none")
        except RedisError as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))

    def extend(self, client, lease, ttl_ms):
        lock = self.lock_of(lease)
        try:
            if self.opts["extend"] == "reacquire":
                lock.reacquire()
            else:
                lock.extend(ttl_ms / 1000.0, replace_ttl=self.opts["extend"] == "replace")
        except LockNotOwnedError as e:
            raise Failure("not_held", str(e))
        except LockError as e:
            raise Failure("error", str(e), "none")
        except RedisError as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))

    def close(self):
        self.r.close()


if __name__ == "__main__":
    serve(RedisPyLock)
