#!/usr/bin/python3
"""The lockbench driver for mylock (docs/drivers.md in lockbench): it puts
this repository's RedisLock under lockbench's faults and model.

lockbench runs it as the lock client of each worker instance and passes,
in LOCKBENCH_DRIVERS, the folder of its protocol helpers: the Python one,
lockbench_driver.py, speaks the protocol around the three methods below.
"""

import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.environ["LOCKBENCH_DRIVERS"], "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis  # noqa: E402  (Debian's python3-redis)
from redis.exceptions import ConnectionError as RedisConnectionError  # noqa: E402
from redis.exceptions import RedisError  # noqa: E402

from lockbench_driver import Failure, Library, Refused, serve  # noqa: E402
from mylock import NotHeld, RedisLock  # noqa: E402


class MyLock(Library):
    name = "mylock"
    version = "1.0"
    abilities = {"token": False, "extend": False, "lost": False,
                 "acquire": ["try"], "concurrent": True, "bare": False}

    def __init__(self, hello, lost):
        super().__init__(hello, lost)
        servers = self.servers_of("redis")
        if not servers:
            raise Refused("no redis server in the hello")
        host, port = self.host_port(servers[0]["addr"])
        self.r = redis.Redis(host=host, port=port)
        self.locks = {}

    def acquire(self, client, key, wait, timeout):
        lock = RedisLock(self.r, "%s:mylock:%s" % (self.namespace, key))
        try:
            got = lock.acquire(self.ttl_ms)
        except RedisConnectionError as e:
            raise Failure("unavailable", str(e))
        except RedisError as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))
        if not got:
            raise Failure("held", "the lock is held by another client", "none")
        lease = uuid.uuid4().hex
        self.locks[lease] = lock
        return lease, None

    def release(self, client, lease):
        lock = self.locks.pop(lease, None)
        if lock is None:
            raise Failure("bad_request", "no lease %s" % lease, "none")
        try:
            lock.release()
        except NotHeld as e:
            raise Failure("not_held", "not held: %s" % e, "none")
        except RedisError as e:
            raise Failure("unavailable", "%s: %s" % (type(e).__name__, e))


if __name__ == "__main__":
    serve(MyLock)
