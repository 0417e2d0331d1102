"""What every measurement module gets: the children's environment, the log
directory, a Redis client for the private Redis, and the result-row shape."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

# kombu's Redis transport with Takt's settings (priority steps 0..9, sep ":")
# keeps one list per priority: "takt" for 0, "takt:1" ... "takt:9".
QUEUE_KEYS = ["takt", *(f"takt:{p}" for p in range(1, 10))]


@dataclass
class Ctx:
    db: str
    env: dict[str, str]
    log_dir: Path
    redis_url: str
    _redis: redis.Redis | None = field(default=None, repr=False)

    @property
    def redis(self) -> redis.Redis:
        if self._redis is None:
            self._redis = redis.Redis.from_url(self.redis_url)
        return self._redis

    def queued_messages(self) -> int:
        pipe = self.redis.pipeline(transaction=False)
        for key in QUEUE_KEYS:
            pipe.llen(key)
        return int(sum(pipe.execute()))

    def drop_queued_messages(self) -> None:
        """Empty the queue lists only: a FLUSHDB would also drop kombu's
        exchange bindings, and later publishes would silently go nowhere."""
        self.redis.delete(*QUEUE_KEYS, "unacked", "unacked_index")

    def say(self, msg: str) -> None:
        print(f"  [{self.db}] {msg}", file=sys.stderr, flush=True)


def row(section: str, case: str, metric: str, system: str, unit: str, values: list[float],
        **extra: Any) -> dict[str, Any]:  # fmt: skip
    """One figure: every repetition's value; stats are made at report time."""
    return {
        "section": section,
        "case": case,
        "metric": metric,
        "system": system,
        "unit": unit,
        "values": [float(v) for v in values],
        **extra,
    }


def wait_until(
    predicate: Callable[[], Any], *, timeout: float, every: float = 0.02, what: str = "it"
) -> float:
    """Poll until `predicate()` is truthy; returns time.time() at that moment.
    Raises TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return time.time()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
