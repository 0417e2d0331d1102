"""How long Redis has held its data (F-82, F-83).

Takt keeps live state in Redis that a restart without persistence, a
FLUSHALL or a failover to a stale replica wipes: job locks, the marks of
messages in flight, the workers' liveness keys. Right after such a loss a
missing key means nothing yet: live workers put their locks back on their
next renewal (within a third of TAKT_LOCK_TTL_SECONDS). So the checks that
read a missing key as "dead" (lost runs, lost messages) first ask how old
Redis's data is, and wait while it is younger than their grace.

The age is kept in one key, ``<prefix>:redis:since``, and measured on
Redis's own clock, never on a process's: the key is written with SET NX
and an expiry of SPAN_S (ten years), Redis counts that expiry down, and
the age is SPAN_S less what is left (PTTL). A worker or beat whose clock
is off by minutes writes and reads the same age as one whose clock is
right (issue 28: a worker 90 s ahead once stamped the start 91 s in the
future, and the beats' lost-run check waited 76 s instead of ~9).
Every worker writes it with its liveness key (every third of
TAKT_WORKER_ALIVE_TTL_SECONDS, runs/liveness.py), so a loss is dated
within seconds even when no check looked at the time; otherwise the first
check to look after a loss writes it. A key without an expiry (written by
hand, or by an earlier Takt, which stored a time stamp) counts as a loss: the checks wait their
grace once.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from runs.locks import get_redis

# Longer than any Redis keeps its data without a restart.
SPAN_S = 10 * 365 * 86400


def since_key() -> str:
    return f"{settings.TAKT_KEY_PREFIX}:redis:since"


def note_data_start(pipe: Any) -> None:
    """Add the SET NX of the start of Redis's data to `pipe` (a pipeline a
    process sends anyway): a no-op while the key exists."""
    pipe.set(since_key(), "1", nx=True, ex=SPAN_S)


def data_age_seconds() -> float:
    """Seconds since Redis's data began, on Redis's clock (0.0 right after
    a loss: this call then records the start). One round trip. Raises
    redis.RedisError when Redis cannot be reached."""
    pipe = get_redis().pipeline(transaction=False)
    note_data_start(pipe)
    pipe.pttl(since_key())
    _, left_ms = pipe.execute()
    if left_ms is None or left_ms < 0:  # no expiry (by hand, an older Takt): count from now
        get_redis().set(since_key(), "1", ex=SPAN_S)
        return 0.0
    return max(SPAN_S - left_ms / 1000, 0.0)


def set_data_age(client: Any, seconds: float) -> None:
    """Make Redis's data `seconds` old (tests, and an operator who knows
    better after a restore): the key with SPAN_S - `seconds` left."""
    client.set(since_key(), "1", px=int((SPAN_S - seconds) * 1000))
