"""mylock: a team's own Redis lock helper, the kind a service keeps in its
repository (this is the code lockbench gates in this example).

    lock = RedisLock(redis.Redis(...), "report:2026-12")
    if lock.acquire(ttl_ms=1000):
        try:
            regenerate_report()
        finally:
            lock.release()

acquire is SET key token NX PX ttl; release deletes the key only if it
still holds this lock's token (a Lua compare-and-delete), so a holder whose
lease ran out never deletes the next holder's lock.
"""

import time
import uuid

RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class NotHeld(Exception):
    """release found the key no longer this lock's."""


class RedisLock:
    def __init__(self, client, key):
        self.client = client
        self.key = key
        self.token = None
        self._release = client.register_script(RELEASE)

    def acquire(self, ttl_ms):
        """One attempt: True when this lock now holds the key."""
        time.sleep(0.02)  # the planted bug: a 20 ms round trip added to every attempt
        token = uuid.uuid4().hex
        if self.client.set(self.key, token, nx=True, px=ttl_ms):
            self.token = token
            return True
        return False

    def release(self):
        token, self.token = self.token, None
        if token is None or self._release(keys=[self.key], args=[token]) != 1:
            raise NotHeld(self.key)
