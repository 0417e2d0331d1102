"""Per-job locks in Redis (F-82).

A lock is a key ``<prefix>:lock:job:<id>`` holding the owner's random token,
set with SET NX and a TTL. The owner renews the TTL while its run lives
(`LockKeeper`); renewal and release are Lua scripts that act only when the
key still holds the owner's token, so a worker whose lock expired and was
taken over can never extend or delete the new owner's lock.

A cancelled run (runs/cancel.py) loses its lock at once: `release_cancelled`
deletes the slots whose token names the run and leaves a cancel marker
``<prefix>:cancel:run:<id>``, in one round trip. The run's keeper sees the
marker on its next renewal and hands over to `on_cancel` (the worker's stop,
runs/stopping.py); a run that reaches the lock after its cancel finds the
marker in the same round trip as the lock and does not start.

Locks across a Redis restart or flush: a keeper whose renewal finds its key
gone altogether (not held by another token) takes it back with its own
token in the same Lua round trip (SET PX) and logs "re-took lock …
after Redis lost it". It does so only while its last successful renewal is
younger than the TTL: then the key cannot have expired, so Redis lost it.
A key held by another token stays NOT_OURS (the keeper sets `lost`), and
the cancel marker is still looked at first.

The window that remains: between the loss and the keeper's next renewal
(at most a third of the TTL) the key is missing, and another run of the job
may take the lock in that window. The keeper's renewal then finds the other
token: the lock is lost (below). Once Redis's data is older than TTL + 1 s
(runs/redis_age.py) the lost-run check (runs/recovery.py) marks that run
`lost`, since no slot holds its token. A Redis outage longer than the TTL
ends with no re-take: the lock is lost.

A lost lock stops its run (F-113). Before each renewal the keeper compares
the monotonic clock with its last successful renewal: more than the TTL
later (the process was paused — SIGSTOP, a long GC, a frozen VM — or its
renewals failed that long), the key may have expired and another run may
hold the lock, so the lock is lost at once, without asking Redis; a
renewal that finds another token loses it too. The keeper then renews no
more and calls `on_lost` instead of `on_tick`, as often as it asks (the
worker stops the job as a cancel does, runs/stopping.py `LostWatch`). A
paused process's renewer is overdue when it wakes, so it notices before
the next regular renewal; `check()` lets the job's own thread ask too.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import redis
from django.conf import settings
from django.db import connections

from runs.redis_client import redis_client

log = logging.getLogger("takt.locks")

# KEYS: the lock, the run's cancel marker, then the slot sets the token is
# a member of (runs/slots.py). ARGV: the token, the TTL (ms), "1" to take a
# vanished key back. -1: the run was cancelled; 1: renewed; 2: the key was
# gone and is ours again; 0: another token holds it. A renewed or retaken
# lock renews its slots (score: expiry, in Redis's own clock); a retaken one
# puts them back too.
_RENEW = """
if redis.call('exists', KEYS[2]) == 1 then
  return -1
end
local token = redis.call('get', KEYS[1])
local state = 0
if token == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  state = 1
elseif not token and ARGV[3] == '1' then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  state = 2
end
if state > 0 and #KEYS > 2 then
  local t = redis.call('time')
  local expiry = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
  for i = 3, #KEYS do
    if state == 2 then
      redis.call('zadd', KEYS[i], expiry, ARGV[1])
    else
      redis.call('zadd', KEYS[i], 'XX', expiry, ARGV[1])
    end
  end
end
return state
"""
# KEYS: the job's slot keys (ARGV[1] of them), then the runs' cancel markers.
# ARGV: the slot count, the markers' value and TTL (ms), then one token
# prefix per run ("run-<id>:"). Deletes only slots held by those runs.
_RELEASE_CANCELLED = """
local slots = tonumber(ARGV[1])
local released = 0
for i = 1, slots do
  local token = redis.call('get', KEYS[i])
  if token then
    for j = 4, #ARGV do
      if string.sub(token, 1, string.len(ARGV[j])) == ARGV[j] then
        released = released + redis.call('del', KEYS[i])
        break
      end
    end
  end
end
for i = slots + 1, #KEYS do
  redis.call('set', KEYS[i], ARGV[2], 'PX', ARGV[3])
end
return released
"""
# KEYS: the lock, then the slot sets the token is a member of.
_RELEASE = """
for i = 2, #KEYS do
  redis.call('zrem', KEYS[i], ARGV[1])
end
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def get_redis() -> redis.Redis:
    """Takt's Redis client: REDIS_URL's, or with REDIS_SENTINELS the current
    master's (one connection pool per process; runs/redis_client.py)."""
    return redis_client()


def job_lock_key(job_id: int) -> str:
    return f"{settings.TAKT_KEY_PREFIX}:lock:job:{job_id}"


def cancel_key(run_id: int | None) -> str:
    """The marker a cancelled run leaves for its worker (see the module
    docstring); for a lock that names no run, a key nobody sets."""
    suffix = "none" if run_id is None else str(run_id)
    return f"{settings.TAKT_KEY_PREFIX}:cancel:run:{suffix}"


@dataclass
class JobLock:
    """One owner's hold on a job's lock. `ttl_ms` is the lease length.
    `members`: the slot sets (runs/slots.py) that hold the token too,
    renewed and released with the lock. `fence`: the run's fencing token,
    set when runs/slots.acquire_start took the lock (F-113): it grows with
    every start of the job, so a system the job writes to can refuse the
    writes of a run older than the last one it saw."""

    key: str
    ttl_ms: int
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    client: redis.Redis = field(default_factory=get_redis)
    members: tuple[str, ...] = ()
    fence: int | None = None

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))

    @property
    def run_id(self) -> int | None:
        """The run this lock's token names, if any."""
        return token_run_id(self.token)

    def renew(self) -> bool:
        """Extend the lease; False when the lock is no longer ours."""
        return self.renew_unless_cancelled() == RENEWED

    def renew_unless_cancelled(self, *, retake: bool = False) -> int:
        """Extend the lease, in one round trip with a look for the run's
        cancel marker: RENEWED, NOT_OURS, or CANCELLED (nothing renewed).
        With `retake`, a key that is gone altogether is set again with our
        token and TTL: RETAKEN (see the module docstring)."""
        keys = (self.key, cancel_key(self.run_id), *self.members)
        flag = "1" if retake else "0"
        return int(self.client.eval(_RENEW, len(keys), *keys, self.token, self.ttl_ms, flag))

    def release(self) -> bool:
        """Delete the lock if it still holds our token, and leave the slots."""
        keys = (self.key, *self.members)
        return bool(self.client.eval(_RELEASE, len(keys), *keys, self.token))

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


def slot_keys(job_id: int, *, slots: int = 1) -> list[str]:
    """The keys of the job's lock slots 0 … slots-1 (see `job_lock`)."""
    base = job_lock_key(job_id)
    return [base if slot == 0 else f"{base}:{slot}" for slot in range(max(slots, 1))]


def slots_taken(job_id: int, *, slots: int = 1) -> int:
    """How many of the job's lock slots 0 … slots-1 are held, by a run's
    token or any other. One round trip; raises redis.RedisError."""
    return int(get_redis().exists(*slot_keys(job_id, slots=slots)))


RUN_TOKEN = "run-"
RENEWED, NOT_OURS, CANCELLED, RETAKEN = 1, 0, -1, 2


def token_run_id(token: bytes | str | None) -> int | None:
    """The run a lock token names, or None for another owner's token."""
    if token is None:
        return None
    text = token.decode() if isinstance(token, bytes) else token
    head, _, _ = text.partition(":")
    if not head.startswith(RUN_TOKEN) or not head[len(RUN_TOKEN) :].isdigit():
        return None
    return int(head[len(RUN_TOKEN) :])


def release_cancelled(
    job_id: int, run_ids: list[int], *, marker: str, marker_ttl_s: float, slots: int
) -> int:
    """Cancelled runs give up their job's lock at once: delete every slot
    (0 … slots-1) whose token names one of `run_ids` — never another run's
    — and set each run's cancel marker to `marker` for `marker_ttl_s`, in
    one Lua round trip. Returns how many slots were freed. Raises
    redis.RedisError when Redis cannot be reached (nothing is changed)."""
    if not run_ids:
        return 0
    slots_of_job = slot_keys(job_id, slots=slots)
    markers = [cancel_key(run_id) for run_id in run_ids]
    prefixes = [f"{RUN_TOKEN}{run_id}:" for run_id in run_ids]
    args = (len(slots_of_job), marker, int(marker_ttl_s * 1000), *prefixes)
    keys = (*slots_of_job, *markers)
    return int(get_redis().eval(_RELEASE_CANCELLED, len(keys), *keys, *args))


class LockKeeper:
    """Keeps one lock alive while its run lives: renews it every third of its
    TTL and calls `on_tick` each time (the run saves its output there). A
    renewal that finds the key gone while the last good renewal is younger
    than the TTL (Redis lost its data) takes it back.

    The lock is lost (`lost` set, `lost_reason` says why, logged once) when
    more than the TTL has passed on `clock` (monotonic seconds) since the
    last good renewal, checked before each renewal, or when a renewal finds
    another token (module docstring). From then on the keeper renews no
    more and calls `on_lost` instead of `on_tick`.

    Once a renewal finds the run's cancel marker, the keeper renews no more
    and calls `on_cancel` instead of `on_tick`. `on_cancel` and `on_lost`
    are called as often as they ask: each returns the seconds until its
    next call (None: every interval).

    All keepers of a process share one daemon thread (`_Renewer`), so a run
    costs no thread start; a prefork child that forked gets its own."""

    def __init__(
        self,
        lock: JobLock,
        on_tick: Callable[[], None] | None = None,
        on_cancel: Callable[[], float | None] | None = None,
        on_lost: Callable[[], float | None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lock = lock
        self.on_tick = on_tick
        self.on_cancel = on_cancel
        self.on_lost = on_lost
        self.clock = clock
        self.interval_s = max(lock.ttl_ms / 3000, 0.1)
        self.lost = False
        self.lost_reason = ""
        self.cancelled = False
        self.retaken = 0
        self._renewed_at = clock()
        self._losing = threading.Lock()

    def start(self) -> None:
        self._renewed_at = self.clock()  # the lock was just taken
        _renewer().add(self)

    def stop(self) -> None:
        _renewer().discard(self)

    def tick(self) -> float:
        """One renewal (or cancel or lost step); returns the seconds until
        the next."""
        try:
            if not (self.cancelled or self.lost):
                self._renew()
            if self.cancelled or self.lost:
                handler = self.on_cancel if self.cancelled else self.on_lost
                if handler is not None:
                    delay = handler()
                    return self.interval_s if delay is None else max(delay, 0.01)
            elif self.on_tick is not None:
                self.on_tick()
        except Exception:  # keep renewing through a passing Redis or DB error
            log.exception("renewing lock %s failed", self.lock.key)
        return self.interval_s

    def check(self) -> bool:
        """Whether the lock still counts as ours, by the clock alone (no
        Redis): False once it was lost, or when more than the TTL has
        passed since the last good renewal (then it is lost from now on).
        Safe from any thread."""
        if not self.lost:
            self._jumped(self.clock())
        return not self.lost

    def _jumped(self, now: float) -> bool:
        """The monotonic-clock jump check: lose the lock once the TTL has
        passed since the last good renewal."""
        silent_s = now - self._renewed_at
        ttl_s = self.lock.ttl_ms / 1000
        if silent_s < ttl_s:  # at the TTL the key may have expired already
            return False
        self._lose(
            f"no renewal for {silent_s:.1f} s, longer than the lock's TTL of {ttl_s:g} s"
            " (the worker was paused or could not reach Redis)"
        )
        return True

    def _lose(self, reason: str) -> None:
        with self._losing:
            if self.lost:
                return
            self.lost_reason = reason
            self.lost = True
        log.warning("lock %s was lost before the run ended: %s", self.lock.key, reason)

    def _renew(self) -> None:
        asked_at = self.clock()
        if self._jumped(asked_at):
            return
        # A key that vanished less than a TTL after our last renewal cannot
        # have expired: Redis lost it (restart without persistence, flush).
        state = self.lock.renew_unless_cancelled(retake=True)
        self.cancelled = state == CANCELLED
        if state in (RENEWED, RETAKEN):
            self._renewed_at = asked_at
        if state == RETAKEN:
            self.retaken += 1
            log.warning("re-took lock %s after Redis lost it", self.lock.key)
        elif state == NOT_OURS:
            self._lose("another owner holds it")


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
        while True:
            with self._changed:
                now = time.monotonic()
                due = [k for k, at in self._due.items() if at <= now]
                if not due:
                    wake = min(self._due.values(), default=now + 60)
                    self._changed.wait(timeout=max(wake - now, 0.01))
                    continue
                for keeper in due:
                    delay = keeper.tick()
                    if keeper in self._due:
                        self._due[keeper] = time.monotonic() + delay
                # Renewals are Redis's; a watch that wrote to the database (a
                # long-run alert, a variable's -1003, a cancel's output) gives
                # its connection back rather than hold it between ticks.
                try:
                    connections.close_all()
                except Exception:  # never let the renewals die with a connection
                    log.exception("closing the renewer's database connections failed")


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
