"""How long Redis has held its data (F-82, F-83).

Takt keeps live state in Redis that a restart without persistence, a
FLUSHALL or a failover to a stale replica wipes: job locks, the marks of
messages in flight, the workers' liveness keys. Right after such a loss a
missing key means nothing yet: live workers put their locks back on their
next renewal (within a third of TAKT_LOCK_TTL_SECONDS). So the checks that
read a missing key as "dead" (lost runs, lost messages) first ask how old
Redis's data is, and wait while it is younger than their grace.

The age is kept in one key, ``<prefix>:redis:since``, written with SET NX
and never expiring. Every worker writes it with its liveness key (every
third of TAKT_WORKER_ALIVE_TTL_SECONDS, runs/liveness.py), so a loss is
dated within seconds even when no check looked at the time; otherwise the
first check to look after a loss writes it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings

from runs.locks import get_redis


def since_key() -> str:
    return f"{settings.TAKT_KEY_PREFIX}:redis:since"


def note_data_start(pipe: Any, *, now: datetime) -> None:
    """Add the SET NX of the start of Redis's data to `pipe` (a pipeline a
    process sends anyway): a no-op while the key exists."""
    pipe.set(since_key(), f"{now.timestamp():.3f}", nx=True)


def data_age_seconds(*, now: datetime) -> float:
    """Seconds since Redis's data began (0.0 right after a loss: this call
    then records `now` as the start). One round trip. Raises
    redis.RedisError when Redis cannot be reached."""
    stamp = f"{now.timestamp():.3f}"
    pipe = get_redis().pipeline(transaction=False)
    note_data_start(pipe, now=now)
    pipe.get(since_key())
    _, raw = pipe.execute()
    try:
        began = float(raw.decode() if isinstance(raw, bytes) else raw)
    except (TypeError, ValueError):  # a hand-written value: count from now
        get_redis().set(since_key(), stamp)
        return 0.0
    return max(now.timestamp() - began, 0.0)
