"""One clock for every decision that crosses machines (issue 28).

A beat decides which fire times are due, a worker records when a run
started and ended and when its retry is due, and another beat judges all
of that later. Each used its own machine's clock: a beat 90 s ahead
started every run 90 s early and recorded catch-up runs for fire times
that had not come yet. Now they all read the database's clock, which every
process shares: `now()` is this machine's clock plus its offset from the
database's, measured with one `SELECT` every MEASURE_EVERY_S (the midpoint
of the round trip, so the query's own time adds no error beyond half of
it). Redis's clock serves what lives in Redis (lock TTLs, the age of its
data: runs/redis_age.py).

SQLite has no clock of its own: the processes that share its file share a
machine, and its clock is the one clock (the offset is 0). TAKT_CLOCK =
"local" turns the measurement off (tests that move the clock by hand).

A machine whose clock is more than TAKT_CLOCK_SKEW_WARN_SECONDS off logs
it once (and again when it is back), reports its offset with its heartbeat
(heartbeats.processes: `clock=+90.0`), shows on the Queue page and raises
a warning alert (heartbeats.clock_skew); it keeps working correctly, as
its decisions no longer read its own clock.

Pure-core functions keep taking `now=`: only where `now` comes from changes.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

log = logging.getLogger("takt.clock")

MEASURE_EVERY_S = 60.0

# The database's own clock, as seconds since the epoch (not the
# transaction's start: clock_timestamp() on PostgreSQL, NOW(6) on MySQL).
CLOCK_SQL = {
    "postgresql": "SELECT EXTRACT(EPOCH FROM clock_timestamp())",
    "mysql": "SELECT UNIX_TIMESTAMP(NOW(6))",
}


def database_offset_s() -> float:
    """The database's clock less this machine's, in seconds (0.0 on
    SQLite). Raises DatabaseError when the database cannot be reached."""
    sql = CLOCK_SQL.get(connection.vendor)
    if sql is None:
        return 0.0
    with connection.cursor() as cursor:
        before = time.time()
        cursor.execute(sql)
        (value,) = cursor.fetchone()
        after = time.time()
    return float(value) - (before + after) / 2


class SharedClock:
    """This process's reading of the one clock. `measure` returns the
    offset (database_offset_s); `monotonic` paces the measurements. Never
    raises: a measurement that fails keeps the last offset."""

    def __init__(
        self,
        measure: Callable[[], float] = database_offset_s,
        *,
        every_s: float = MEASURE_EVERY_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._measure = measure
        self._every_s = every_s
        self._monotonic = monotonic
        self._offset_s = 0.0
        self._measured_at = -math.inf
        self._skewed = False
        self._lock = threading.Lock()

    @property
    def offset_s(self) -> float:
        """The last measured offset (0.0 before the first)."""
        return self._offset_s

    def now(self) -> datetime:
        """The one clock's time, aware UTC."""
        return timezone.now() + timedelta(seconds=self.current_offset_s())

    def current_offset_s(self) -> float:
        """The offset, measured again when the last measurement is older
        than `every_s`."""
        if settings.TAKT_CLOCK != "database":
            return 0.0
        with self._lock:
            if self._monotonic() - self._measured_at >= self._every_s:
                self._measured_at = self._monotonic()
                try:
                    self._offset_s = self._measure()
                except DatabaseError as exc:  # keep the last; the tick says what failed
                    log.debug("could not read the database's clock: %s", exc)
                else:
                    self._say_skew(self._offset_s)
            return self._offset_s

    def _say_skew(self, offset_s: float) -> None:
        limit = float(settings.TAKT_CLOCK_SKEW_WARN_SECONDS)
        skewed = abs(offset_s) > limit
        if skewed and not self._skewed:
            log.warning(
                "this machine's clock is %.1f s %s of the database's (more than"
                " TAKT_CLOCK_SKEW_WARN_SECONDS, %g s): Takt decides on the database's"
                " clock, but fix the machine's time sync (deploy/README.md, A cluster: Clocks)",
                abs(offset_s),
                "behind" if offset_s > 0 else "ahead",
                limit,
            )
        elif self._skewed and not skewed:
            log.info("this machine's clock is within %g s of the database's again", limit)
        self._skewed = skewed


CLOCK = SharedClock()


def now() -> datetime:
    """The one clock's time (this process's SharedClock)."""
    return CLOCK.now()


def skew_s() -> float:
    """How far this machine's clock is ahead of the one clock (negative:
    behind), as last measured, to a tenth of a second: what a process
    reports with its heartbeat (+ 0.0: never "-0.0")."""
    return round(-CLOCK.offset_s, 1) + 0.0
