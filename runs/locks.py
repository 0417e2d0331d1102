"""Per-job locks in Redis (F-82).

A lock is a key ``<prefix>:lock:job:<id>`` holding the owner's random token,
set with SET NX and a TTL. The owner renews the TTL while its run lives
(`LockKeeper`); renewal and release are Lua scripts that act only when the
key still holds the owner's token, so a worker whose lock expired and was
taken over can never extend or delete the new owner's lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
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
_ACQUIRE = """
if redis.call('exists', KEYS[1]) == 1 then
  return -1
end
if ARGV[3] == '0' and redis.call('exists', KEYS[3]) == 1 then
  return -2
end
if redis.call('set', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
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

    def acquire_unless_paused(
        self, pause_key: str, maintenance_key: str = "", *, allowed_in_maintenance: bool = True
    ) -> int:
        """One round trip: -1 if `pause_key` exists (the queue is paused), -2
        if `maintenance_key` exists and the job is not allowed then, 1 if the
        lock was taken, 0 if it is held by another owner."""
        keys = (pause_key, self.key, maintenance_key or f"{pause_key}:none")
        allowed = "1" if allowed_in_maintenance else "0"
        return int(self.client.eval(_ACQUIRE, 3, *keys, self.token, self.ttl_ms, allowed))

    def renew(self) -> bool:
        """Extend the lease; False when the lock is no longer ours."""
        return bool(self.client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms))

    def release(self) -> bool:
        """Delete the lock if it still holds our token."""
        return bool(self.client.eval(_RELEASE, 1, self.key, self.token))

    def take_over(self) -> None:
        """Take the lock whoever holds it (overlap policy `cancel_other`): the
        old holder's renewal and release then find another token and do
        nothing."""
        self.client.set(self.key, self.token, px=self.ttl_ms)

    def holder(self) -> str | None:
        value = self.client.get(self.key)
        return value.decode() if isinstance(value, bytes) else value


def job_lock(
    job_id: int, *, ttl_s: float | None = None, slot: int = 0, run_id: int | None = None
) -> JobLock:
    """Slot 0 is the job's lock; a job that allows N parallel runs (overlap
    policy `allow`) has slots 0 … N-1, one key each. A run's lock token
    names it (`run-<id>:<random>`), so maintenance can tell whose run holds
    a slot (runs/recovery.py)."""
    ttl = settings.TAKT_LOCK_TTL_SECONDS if ttl_s is None else ttl_s
    key = job_lock_key(job_id) if slot == 0 else f"{job_lock_key(job_id)}:{slot}"
    if run_id is None:
        return JobLock(key=key, ttl_ms=int(ttl * 1000))
    return JobLock(key=key, ttl_ms=int(ttl * 1000), token=f"{RUN_TOKEN}{run_id}:{uuid.uuid4().hex}")


RUN_TOKEN = "run-"


def token_run_id(token: bytes | str | None) -> int | None:
    """The run a lock token names, or None for another owner's token."""
    if token is None:
        return None
    text = token.decode() if isinstance(token, bytes) else token
    head, _, _ = text.partition(":")
    if not head.startswith(RUN_TOKEN) or not head[len(RUN_TOKEN) :].isdigit():
        return None
    return int(head[len(RUN_TOKEN) :])


PAUSED = "paused"
MAINTENANCE = "maintenance"


def acquire_slot(
    job_id: int,
    *,
    slots: int = 1,
    allowed_in_maintenance: bool = True,
    run_id: int | None = None,
) -> tuple[JobLock, bool | str]:
    """Try the job's lock slots in order; returns the lock taken and True,
    or slot 0's lock (not taken) and False when every slot is held, or
    PAUSED when the queue is paused, or MAINTENANCE when maintenance mode is
    on and the job is not allowed then (both checked in the same round
    trip)."""
    prefix = f"{settings.TAKT_KEY_PREFIX}:queue"
    for slot in range(max(slots, 1)):
        lock = job_lock(job_id, slot=slot, run_id=run_id)
        got = lock.acquire_unless_paused(
            f"{prefix}:paused",
            f"{prefix}:maintenance",
            allowed_in_maintenance=allowed_in_maintenance,
        )
        if got == -1:
            return lock, PAUSED
        if got == -2:
            return lock, MAINTENANCE
        if got:
            return lock, True
    return job_lock(job_id, run_id=run_id), False


class LockKeeper:
    """Keeps one lock alive while its run lives: renews it every third of its
    TTL and calls `on_tick` each time (the run saves its output there). A
    failed renewal sets `lost` and is logged; the run goes on, and
    maintenance treats it as lost if the lock is gone when it looks.

    All keepers of a process share one daemon thread (`_Renewer`), so a run
    costs no thread start; a prefork child that forked gets its own."""

    def __init__(self, lock: JobLock, on_tick: Callable[[], None] | None = None) -> None:
        self.lock = lock
        self.on_tick = on_tick
        self.interval_s = max(lock.ttl_ms / 3000, 0.1)
        self.lost = False

    def start(self) -> None:
        _renewer().add(self)

    def stop(self) -> None:
        _renewer().discard(self)

    def tick(self) -> None:
        try:
            if not self.lock.renew():
                self.lost = True
                log.warning("lock %s was lost before the run ended", self.lock.key)
            if self.on_tick is not None:
                self.on_tick()
        except Exception:  # keep renewing through a passing Redis or DB error
            log.exception("renewing lock %s failed", self.lock.key)


class _Renewer(threading.Thread):
    """The process's one renewal thread: wakes when the next keeper is due."""

    def __init__(self) -> None:
        super().__init__(name="takt-lock-renewer", daemon=True)
        self._due: dict[LockKeeper, float] = {}
        self._changed = threading.Condition()

    def add(self, keeper: LockKeeper) -> None:
        with self._changed:
            self._due[keeper] = time.monotonic() + keeper.interval_s
            self._changed.notify()

    def discard(self, keeper: LockKeeper) -> None:
        # Waits for a tick of this keeper that is under way to end, so that
        # no renewal happens after stop() returns.
        with self._changed:
            self._due.pop(keeper, None)

    def run(self) -> None:
        from django.db import close_old_connections

        while True:
            with self._changed:
                now = time.monotonic()
                due = [k for k, at in self._due.items() if at <= now]
                if not due:
                    wake = min(self._due.values(), default=now + 60)
                    self._changed.wait(timeout=max(wake - now, 0.01))
                    continue
                close_old_connections()
                for keeper in due:
                    keeper.tick()
                    if keeper in self._due:
                        self._due[keeper] = time.monotonic() + keeper.interval_s


_RENEWER: _Renewer | None = None
_RENEWER_PID = 0
_RENEWER_LOCK = threading.Lock()


def _renewer() -> _Renewer:
    global _RENEWER, _RENEWER_PID
    with _RENEWER_LOCK:
        if _RENEWER is None or _RENEWER_PID != os.getpid() or not _RENEWER.is_alive():
            _RENEWER, _RENEWER_PID = _Renewer(), os.getpid()
            _RENEWER.start()
        return _RENEWER
