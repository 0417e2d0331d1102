"""Saying clearly which Redis a process tried when it cannot reach it.

A command started from a second terminal must talk to the Redis that
`make run` started (scheduler_project/localenv.py); when it cannot reach
Redis at all, it names the URL it tried and where that URL came from (or,
with Redis Sentinel, the sentinels and the master's name), and exits
non-zero, instead of printing nothing or "free"."""

from __future__ import annotations

import re

import redis
from django.conf import settings
from django.core.management.base import CommandError

from runs.locks import get_redis
from runs.redis_client import redis_location


def masked_url(url: str) -> str:
    """`url` with its password replaced by ***."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


def redis_unreachable_message(exc: Exception) -> str:
    location, setting = redis_location(masked_url)
    if setting == "REDIS_SENTINELS":  # F-85: the master is found through Sentinel
        return (
            f"cannot reach the Redis {location} (from REDIS_SENTINELS and"
            f" REDIS_SENTINEL_MASTER): {str(exc).rstrip('.')}. Check that the sentinels run"
            " and know that master, or set REDIS_SENTINELS to the sentinels the workers use."
        )
    source = getattr(settings, "REDIS_URL_SOURCE", "")
    where = f" ({source})" if source else ""
    return (
        f"cannot reach Redis at {location}{where}: {str(exc).rstrip('.')}."
        " Start it (`make run` starts its own), or set REDIS_URL to the Redis the workers use."
    )


def require_redis() -> None:
    """Ping Redis once; raise CommandError naming the URL if it does not
    answer (for management commands that need it)."""
    try:
        get_redis().ping()
    except redis.RedisError as exc:
        raise CommandError(redis_unreachable_message(exc)) from None
