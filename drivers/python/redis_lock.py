#!/usr/bin/python3
"""lockbench driver: redis-py's Lock (python3-redis).

Each acquisition is a redis.lock.Lock, as `r.lock(name, timeout=...)` makes
it: SET name token NX PX timeout; a blocking acquire tries again every
`sleep` seconds until its blocking_timeout; release and extend are the
library's Lua scripts, which raise LockNotOwnedError when the token is no
longer the key's. The library issues no fencing token and never says a
lease is gone. One redis.Redis (one connection pool) serves every client
of the instance, as it would in an application.

Applications also share a lock object between their threads or tasks (a
module-level `lock = r.lock("jobs")`): `share` does what they do, the
clients of an instance being the application's threads or tasks.
- none (the default): a Lock per acquisition, as above;
- threads: one redis.lock.Lock per key, shared by every client, each on a
  thread of its own. redis-py keeps the lock's token in thread-local
  storage (thread_local=True, its default), so each thread releases and
  extends with its own token;
- tasks: one redis.asyncio.lock.Lock per key (redis.asyncio.Redis), shared
  by every client, each an asyncio task of one event loop. The tasks run on
  one thread, so they share the thread-local token: the last acquisition's.
  A task whose lease ran out then releases (or extends) the lock another
  task holds now (redis/asyncio/lock.py: release() reads self.local.token,
  which do_acquire's caller set for the latest holder).

Applications also retry a release that failed on the connection:
`release_retries` does, once a second. In redis-py 4.3.4 release() clears
the lock's token before its round trip, so a retry after a failed one
finds no token and raises LockError ("Cannot release an unlocked lock"),
and the key stays until its timeout (redis/redis-py #3847, #4258). The
release is then answered with the first attempt's error: it may have
reached the server.
"""

import asyncio
import sys
import time
import uuid

import redis
import redis.asyncio
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError, LockNotOwnedError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from lockbench_driver import Failure, Library, Refused, serve

EXTEND_MODES = ("replace", "add", "reacquire")
SHARE_MODES = ("none", "threads", "tasks")


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def failure(e):
    """The protocol's error for one of redis-py's lock exceptions."""
    if isinstance(e, LockNotOwnedError):
        return Failure("not_held", str(e))
    if isinstance(e, LockError):
        # raised before any command is sent (no token: "Cannot release an
        # unlocked lock")
        return Failure("error", str(e), "none")
    return Failure("unavailable", "%s: %s" % (type(e).__name__, e))


class RedisPyLock(Library):
    name = "redis-py"
    version = redis.__version__
    abilities = {"token": False, "extend": True, "lost": False,
                 "acquire": ["wait", "try"], "concurrent": True, "bare": True}
    options = {"timeout": "ttl", "sleep": 0.1, "thread_local": True, "extend": "replace", "socket_timeout": None,
               "share": "none", "release_retries": 0}

    def __init__(self, hello, lost):
        super().__init__(hello, lost)
        if self.opts["extend"] not in EXTEND_MODES:
            raise Refused("extend: %r is not one of %s" % (self.opts["extend"], ", ".join(EXTEND_MODES)))
        if self.opts["share"] not in SHARE_MODES:
            raise Refused("share: %r is not one of %s" % (self.opts["share"], ", ".join(SHARE_MODES)))
        servers = self.servers_of("redis")
        if not servers:
            raise Refused("no redis server in the hello")
        self.host, self.port = self.host_port(servers[0]["addr"])
        self.timeout = self.ttl_ms / 1000.0 if self.opts["timeout"] == "ttl" else self.opts["timeout"]
        self.r = self.connect()
        self.locks = {}   # lease -> the Lock it was acquired with
        self.shared = {}  # key -> the Lock every client shares (share: threads, tasks)

    def connect(self):
        r = redis.Redis(host=self.host, port=self.port, socket_timeout=self.opts["socket_timeout"])
        r.ping()
        return r

    def lock_for(self, key):
        """The Lock an acquisition of key uses: a new one, or the one the
        clients share."""
        lock = self.shared.get(key)
        if lock is None:
            lock = self.r.lock("%s:lock:%s" % (self.namespace, key), timeout=self.timeout, sleep=self.opts["sleep"],
                               thread_local=self.opts["thread_local"])
            if self.opts["share"] != "none":
                self.shared[key] = lock
        return lock

    def acquired(self, lock, got):
        if not got:
            raise Failure("held", "the lock is held by another client")
        lease = uuid.uuid4().hex
        self.locks[lease] = lock
        return lease, None

    def lock_of(self, lease, pop=False):
        lock = self.locks.pop(lease, None) if pop else self.locks.get(lease)
        if lock is None:
            raise Failure("bad_request", "no lease %s" % lease)
        return lock

    def acquire(self, client, key, wait, timeout):
        lock = self.lock_for(key)
        try:
            got = lock.acquire(blocking=wait, blocking_timeout=timeout if wait else None)
        except RedisError as e:
            raise failure(e)
        return self.acquired(lock, got)

    def release(self, client, lease):
        lock = self.lock_of(lease, pop=True)
        try:
            lock.release()
        except (RedisConnectionError, RedisTimeoutError) as e:
            self.retry_release(lock, e)
        except (LockError, RedisError) as e:
            raise failure(e)

    def retry_release(self, lock, first):
        """What an application's retry of a release that failed on the
        connection does: the release again, once a second."""
        for i in range(int(self.opts["release_retries"])):
            time.sleep(1)
            try:
                lock.release()
                return
            except (RedisConnectionError, RedisTimeoutError):
                continue
            except (LockError, RedisError) as e:
                log("release retry %d after %s: %s: %s" % (i + 1, type(first).__name__, type(e).__name__, e))
                break
        raise failure(first)

    def extend(self, client, lease, ttl_ms):
        lock = self.lock_of(lease)
        try:
            if self.opts["extend"] == "reacquire":
                lock.reacquire()
            else:
                lock.extend(ttl_ms / 1000.0, replace_ttl=self.opts["extend"] == "replace")
        except (LockError, RedisError) as e:
            raise failure(e)

    def close(self):
        self.r.close()


class RedisPyTasks(RedisPyLock):
    """share: tasks. redis-py's asyncio client and Lock, every client an
    asyncio task of one event loop (lockbench_driver's tasks), one Lock per
    key shared by them all."""

    tasks = True

    def connect(self):
        # Connects lazily, on the loop the tasks run on.
        return redis.asyncio.Redis(host=self.host, port=self.port, socket_timeout=self.opts["socket_timeout"])

    async def acquire(self, client, key, wait, timeout):
        lock = self.lock_for(key)
        try:
            got = await lock.acquire(blocking=wait, blocking_timeout=timeout if wait else None)
        except RedisError as e:
            raise failure(e)
        return self.acquired(lock, got)

    async def release(self, client, lease):
        lock = self.lock_of(lease, pop=True)
        try:
            await lock.release()
        except (RedisConnectionError, RedisTimeoutError) as e:
            await self.retry_release_async(lock, e)
        except (LockError, RedisError) as e:
            raise failure(e)

    async def retry_release_async(self, lock, first):
        for i in range(int(self.opts["release_retries"])):
            await asyncio.sleep(1)
            try:
                await lock.release()
                return
            except (RedisConnectionError, RedisTimeoutError):
                continue
            except (LockError, RedisError) as e:
                log("release retry %d after %s: %s: %s" % (i + 1, type(first).__name__, type(e).__name__, e))
                break
        raise failure(first)

    async def extend(self, client, lease, ttl_ms):
        lock = self.lock_of(lease)
        try:
            if self.opts["extend"] == "reacquire":
                await lock.reacquire()
            else:
                await lock.extend(ttl_ms / 1000.0, replace_ttl=self.opts["extend"] == "replace")
        except (LockError, RedisError) as e:
            raise failure(e)

    async def close(self):
        await self.r.close()


def driver(hello, lost):
    """The Library the hello's options ask for."""
    if (hello.get("options") or {}).get("share") == "tasks":
        return RedisPyTasks(hello, lost)
    return RedisPyLock(hello, lost)


if __name__ == "__main__":
    serve(driver)
