"""Per-job locks in Redis (F-82).

A lock is a key ``<prefix>:lock:job:<id>`` holding the owner's random token,
set with SET NX and a TTL. The owner renews the TTL while its run lives
(`LockKeeper`); renewal and release are Lua scripts that act only when the
key still holds the owner's token, so a worker whose lock expired and was
taken over can never extend or delete the new owner's lock.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import redis
from django.conf import settings

log = logging.getLogger("takt.locks")

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url, socket_timeout=5, socket_connect_timeout=5, health_check_interval=30
    )


def get_redis() -> redis.Redis:
    """The Redis client for REDIS_URL (one connection pool per process)."""
    return _client(settings.REDIS_URL)


def job_lock_key(job_id: int) -> str:
    return f"{settings.TAKT_KEY_PREFIX}:lock:job:{job_id}"


@dataclass
class JobLock:
    """One owner's hold on a job's lock. `ttl_ms` is the lease length."""

    key: str
    ttl_ms: int
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    client: redis.Redis = field(default_factory=get_redis)

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))

    def renew(self) -> bool:
        """Extend the lease; False when the lock is no longer ours."""
        return bool(self.client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms))

    def release(self) -> bool:
        """Delete the lock if it still holds our token."""
        return bool(self.client.eval(_RELEASE, 1, self.key, self.token))

    def holder(self) -> str | None:
        value = self.client.get(self.key)
        return value.decode() if isinstance(value, bytes) else value


def job_lock(job_id: int, *, ttl_s: float | None = None) -> JobLock:
    ttl = settings.TAKT_LOCK_TTL_SECONDS if ttl_s is None else ttl_s
    return JobLock(key=job_lock_key(job_id), ttl_ms=int(ttl * 1000))


class LockKeeper(threading.Thread):
    """Renews a lock every third of its TTL until stopped, and calls
    `on_tick` each time (the run flushes its output there). A failed renewal
    is logged; the run goes on, and maintenance treats it as lost if the
    lock is gone when it looks."""

    def __init__(self, lock: JobLock, on_tick: Callable[[], None] | None = None) -> None:
        super().__init__(name=f"takt-lock-keeper-{lock.key}", daemon=True)
        self.lock = lock
        self.on_tick = on_tick
        self._stop_event = threading.Event()
        self.lost = False

    def run(self) -> None:
        interval = max(self.lock.ttl_ms / 3000, 0.1)
        while not self._stop_event.wait(interval):
            try:
                if not self.lock.renew():
                    self.lost = True
                    log.warning("lock %s was lost before the run ended", self.lock.key)
                if self.on_tick is not None:
                    self.on_tick()
            except Exception:  # keep renewing through a passing Redis or DB error
                log.exception("renewing lock %s failed", self.lock.key)
        # This thread's own database connection (on_tick may have opened one).
        from django.db import connections

        connections.close_all()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)
