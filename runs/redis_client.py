"""Takt's own Redis client: locks, the decision log, metrics, the queue
switches (runs/locks.py `get_redis` hands it out).

Without Sentinel it is REDIS_URL's client. With REDIS_SENTINELS (settings
REDIS_SENTINEL, scheduler_project/redisconfig.py) it is the client of the
master the sentinels name: its connection pool asks them for the master's
address before each new connection, and drops its connections when that
address changes or a server answers READONLY (a demoted master). So after
a failover the next command that fails on a dead connection reconnects to
the new master; a retry of each command (up to 10 tries, backing off up
to 2 s, each try given up after 3 s on a silent master) covers the seconds
the sentinels need to agree. A retried command may have run once already
on the old master (its reply lost): a count or a decision-log entry may
then be doubled, and a lock that the first try took answers "held" to the
second (the run ends skipped; the lock lapses after its TTL).

One client (one pool) per process and configuration; a forked pool child
opens its own connections (redis-py checks the pid).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

import redis
from django.conf import settings
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

from scheduler_project.redisconfig import BROKER_SOCKET_TIMEOUT_S, SentinelConfig

log = logging.getLogger("takt.redis")

SOCKET_TIMEOUT_S = 5
SENTINEL_TIMEOUT_S = 1  # a sentinel's answer
# A command on the Sentinel master: a master that hangs or is cut off (its
# connections silent) is given up after this long and the command retried.
SENTINEL_SOCKET_TIMEOUT_S = BROKER_SOCKET_TIMEOUT_S
MASTER_RETRIES = 10
HEALTH_CHECK_INTERVAL_S = 30

T = TypeVar("T")


@lru_cache(maxsize=4)
def _url_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url,
        socket_timeout=SOCKET_TIMEOUT_S,
        socket_connect_timeout=SOCKET_TIMEOUT_S,
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
    )


@lru_cache(maxsize=4)
def _sentinel_client(config: SentinelConfig) -> redis.Redis:
    # A sentinel that does not answer is passed over at once for the next
    # one (no retry of its own); the master's connections retry as usual.
    sentinel_kwargs: dict[str, object] = {
        "socket_timeout": SENTINEL_TIMEOUT_S,
        "socket_connect_timeout": SENTINEL_TIMEOUT_S,
        "retry": Retry(NoBackoff(), 0),
    }
    if config.sentinel_password:
        sentinel_kwargs["password"] = config.sentinel_password
    sentinel = Sentinel(list(config.sentinels), sentinel_kwargs=sentinel_kwargs)
    # The master's connections get no retry from master_for (redis-py's
    # default is none there): a command that meets a dead or silent master
    # is tried again on a new connection, which asks the sentinels for the
    # master first, for about as long as a failover takes (~10 s).
    return sentinel.master_for(
        config.master,
        password=config.password or None,
        db=config.db,
        socket_timeout=SENTINEL_SOCKET_TIMEOUT_S,
        socket_connect_timeout=SENTINEL_SOCKET_TIMEOUT_S,
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
        retry=Retry(ExponentialWithJitterBackoff(base=0.1, cap=2.0), MASTER_RETRIES),
    )


def sentinel_config() -> SentinelConfig | None:
    """The Sentinel set-up in use, or None (REDIS_URL)."""
    return getattr(settings, "REDIS_SENTINEL", None)


def redis_client() -> redis.Redis:
    """The process's client for the Redis the settings name (see the
    module docstring)."""
    config = sentinel_config()
    if config is not None:
        return _sentinel_client(config)
    return _url_client(settings.REDIS_URL)


def redis_location(mask: Callable[[str], str]) -> tuple[str, str]:
    """Where Takt looks for Redis, for messages, and the setting to change:
    ("master 'mymaster' via sentinels h1:26379, …", "REDIS_SENTINELS"), or
    (REDIS_URL passed through `mask`, which hides its password;
    "REDIS_URL")."""
    config = sentinel_config()
    if config is not None:
        return config.describe(), "REDIS_SENTINELS"
    return mask(settings.REDIS_URL), "REDIS_URL"


def retry_connection_errors(
    call: Callable[[], T], *, what: str, attempts: int = 5, pause_s: float = 1.0
) -> T:
    """`call()`, tried again (up to `attempts` times, `pause_s` apart) when
    Redis cannot be reached or times out — a failover or a restart — on
    top of redis-py's own short retry. For writes that must not be lost
    and may safely run twice. Raises the last error."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if attempt == attempts:
                raise
            log.warning(
                "%s: %s; trying again (%d of %d)", what, str(exc).rstrip("."), attempt + 1, attempts
            )
            time.sleep(pause_s)
    raise AssertionError("unreachable")  # pragma: no cover


def write_through_failover(
    call: Callable[[], T], *, what: str, extra: dict[str, object] | None = None
) -> T | None:
    """`call()` with `retry_connection_errors` (about 5 s); if Redis is
    still unreachable, the error is logged with `extra` and None returned.
    For a run's last write to Redis (its lock's release, its count), whose
    end is already in the database: a failover must not turn it into an
    error. The release is by token, so a second try is harmless; a try
    whose reply was lost may count the end twice."""
    try:
        return retry_connection_errors(call, what=what)
    except (redis.ConnectionError, redis.TimeoutError):
        log.exception("%s failed: the lock lapses after its TTL", what, extra=extra)
        return None
