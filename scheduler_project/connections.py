"""Reusing the database connection between back-to-back units of work (a
worker's runs, a beat's ticks).

Django's `close_old_connections()` drops a connection that broke or passed
CONN_MAX_AGE, and marks it for a health check (CONN_HEALTH_CHECKS: a
`SELECT 1` round trip before its next use). A connection used a moment ago
without an error needs neither, so `ConnectionReuse` calls it only when the
connection was idle for longer than `fresh_s`, had an error, or is past its
age.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import close_old_connections, connection


class ConnectionReuse:
    def __init__(self, fresh_s: float) -> None:
        self.fresh_s = fresh_s
        self._last_end = float("-inf")

    @contextmanager
    def use(self) -> Iterator[None]:
        """Around one unit of work: checks the connection first if it needs it."""
        now = time.monotonic()
        aged = connection.close_at is not None and now >= connection.close_at
        if now - self._last_end > self.fresh_s or connection.errors_occurred or aged:
            close_old_connections()
        try:
            yield
        finally:
            self._last_end = time.monotonic()
