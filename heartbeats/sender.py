"""Notifications sent after a request's answer (issue 25): a ping from
outside must not wait for a mail server or a webhook (up to
TAKT_ALERT_TIMEOUT_SECONDS each), nor let its caller hold a web worker
with them.

One daemon thread per process takes the notifications from a bounded queue,
in the order given, and delivers each with heartbeats.notify.deliver (which
never raises and sets the alert's notified_at). It is started on first use,
and again in a forked child (a fork keeps the queue, not the thread). What
can be lost, with the alert rows kept (the operations page shows them): a
notification still queued when the process stops, and one handed over while
QUEUE_SIZE are waiting (logged).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import connections

from heartbeats.notify import deliver

log = logging.getLogger("takt.heartbeats")

QUEUE_SIZE = 100


class BackgroundSender:
    def __init__(self, size: int = QUEUE_SIZE) -> None:
        self._queue: queue.Queue[tuple[Mapping[str, Any], int, datetime]] = queue.Queue(size)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def send(self, payload: Mapping[str, Any], *, alert_id: int, now: datetime) -> bool:
        """Queue one notification; returns at once: whether it was queued."""
        self._ensure_thread()
        try:
            self._queue.put_nowait((payload, alert_id, now))
        except queue.Full:
            log.warning(
                "notification about alert %s dropped: %d notifications are waiting",
                payload.get("key"),
                self._queue.maxsize,
                extra={"alert_key": payload.get("key")},
            )
            return False
        return True

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="takt-notifications", daemon=True
                )
                self._thread.start()

    def _loop(self) -> None:
        while True:
            payload, alert_id, now = self._queue.get()
            try:
                deliver(payload, alert_id=alert_id, now=now)
            except Exception:  # deliver logs its own failures; this keeps the thread
                log.exception("notification about alert %s failed", payload.get("key"))
            finally:
                # This thread's connection only: no idle connection is kept
                # between notifications (nor left when the process ends).
                connections.close_all()
                self._queue.task_done()


SENDER = BackgroundSender()
