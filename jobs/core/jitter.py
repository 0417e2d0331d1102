"""Jitter (F-18): a deterministic delay per trigger and fire time. Pure core.

The delay comes from a hash of the trigger's key and the fire time, not from
`random`, so every beat process computes the same delay for the same fire
time. A run's scheduled_for is the fire time plus the delay: the key of the
fire time (F-100), computed in one place, jobs.specs.fire_time_key, for the
beat and backfill alike. `hash()` is salted per process and would not do.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from jobs.core.cron import TriggerError, gettext_noop

MAX_JITTER_S = 86_400


def validate_jitter(max_seconds: int) -> int:
    """Return `max_seconds` (0..86400, whole seconds; 0 = no jitter).
    Raises TriggerError("jitter_seconds")."""
    if not isinstance(max_seconds, int) or isinstance(max_seconds, bool):
        raise TriggerError(
            "jitter_seconds",
            gettext_noop("must be a whole number of seconds, got %(max_seconds)r"),
            max_seconds=max_seconds,
        )
    if not 0 <= max_seconds <= MAX_JITTER_S:
        raise TriggerError(
            "jitter_seconds",
            gettext_noop("must be between 0 and %(max_jitter_s)s seconds, got %(max_seconds)s"),
            max_jitter_s=MAX_JITTER_S,
            max_seconds=max_seconds,
        )
    return max_seconds


def compute_jitter(key: str, fire_at: datetime, max_seconds: int) -> timedelta:
    """A delay of 0..max_seconds whole seconds (inclusive), the same for the
    same `key` (say, the trigger's id) and fire time in every process, and
    roughly uniform over keys and fire times. `fire_at` is aware; it counts as
    its UTC instant. Raises TriggerError("jitter_seconds") for max_seconds
    outside 0..86400 and TriggerError("fire_at") for a naive `fire_at`."""
    validate_jitter(max_seconds)
    if not isinstance(fire_at, datetime) or fire_at.utcoffset() is None:
        raise TriggerError("fire_at", gettext_noop("must be a timezone-aware date and time"))
    if max_seconds == 0:
        return timedelta(0)
    message = f"{key}\x00{fire_at.astimezone(UTC).isoformat()}".encode()
    number = int.from_bytes(hashlib.sha256(message).digest()[:8], "big")
    # 2**64 values over at most 86401 buckets: the modulo bias is below 1e-14.
    return timedelta(seconds=number % (max_seconds + 1))
