"""A worker's liveness key (runs/delivery.py): ``<prefix>:alive:worker:<worker start>``
(runs.marks.worker_start: hostname and start token) with a TTL of TAKT_WORKER_ALIVE_TTL_SECONDS, renewed every third of it by a
daemon thread of the worker's main process (the process whose consumer
receives the messages), deleted when the worker shuts down.

A worker killed with SIGKILL stops renewing: its key expires within one
TTL, and the runs whose message mark names it are sent again, even when a
supervisor restarts it under the same hostname at once (the new start has
its own key). A Redis
restart loses the key: the thread writes it again within a third of the
TTL (the lost-message sweep waits that long after a loss).
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from redis import RedisError

from runs.locks import get_redis
from runs.marks import alive_key
from runs.redis_age import note_data_start

log = logging.getLogger("takt.liveness")


class Liveness:
    """Keeps one worker's key alive until `stop()`."""

    def __init__(self, hostname: str) -> None:
        self.hostname = hostname
        self.key = alive_key(hostname)
        self.ttl_s = int(settings.TAKT_WORKER_ALIVE_TTL_SECONDS)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="takt-liveness", daemon=True)

    def start(self) -> Liveness:
        self.beat()
        self._thread.start()
        return self

    def beat(self) -> None:
        """Write the key with its TTL, and date Redis's data if a loss wiped
        that too (runs.redis_age), in one round trip; a Redis error is
        logged."""
        try:
            pipe = get_redis().pipeline(transaction=False)
            pipe.set(self.key, "1", ex=self.ttl_s)
            note_data_start(pipe)
            pipe.execute()
        except Exception:
            log.exception("could not renew the liveness key of worker %s", self.hostname)

    def _loop(self) -> None:
        while not self._stopped.wait(self.ttl_s / 3):
            self.beat()

    def stop(self) -> None:
        """Stop renewing and delete the key (the worker is going away)."""
        self._stopped.set()
        try:
            get_redis().delete(self.key)
        except RedisError as exc:
            # Redis went first (Ctrl-C in `make run` stops all processes at
            # once): nothing is lost, the key expires with its TTL. One line.
            log.warning(
                "could not delete the liveness key of worker %s (%s); it expires within %s s",
                self.hostname,
                exc,
                self.ttl_s,
            )
        except Exception:
            log.exception("could not delete the liveness key of worker %s", self.hostname)
