"""Living through a database outage (a PostgreSQL restart, killed
connections): the beat, the workers and their threads retry with backoff
instead of dying or logging a traceback per attempt.

* `is_db_outage(exc)`: whether an error means "the database is not
  reachable" (Django's OperationalError / InterfaceError, or psycopg's
  underneath) rather than a bug or bad data.
* `is_db_unreachable(exc)`: narrower, for the web's 503: the connection
  itself failed, not a statement the database refused.
* `compute_backoff_s`: the pure backoff schedule: first, 2×first, 4×first …
  capped, so a resume is noticed within the cap.
* `OUTAGE`: the process's one outage log: one warning when an outage
  begins ("database unavailable: …; retrying with backoff"), one line when
  the database answers again ("database back after 31.2 s"), whichever of
  the process's threads saw it first.
* `retry_through_outage(fn, …)`: call `fn` until it gets through, dropping
  the broken connection and sleeping by the backoff between tries, up to a
  deadline (None: until the database is back); past it, `OutageTooLong`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger("takt.outage")

T = TypeVar("T")

FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 5.0  # a resume is noticed within this long

try:  # Django wraps psycopg's errors in its own; an error raised outside the wrapper is not
    import psycopg

    _DRIVER_ERRORS: tuple[type[BaseException], ...] = (
        psycopg.OperationalError,
        psycopg.InterfaceError,
    )
except ImportError:  # pragma: no cover - SQLite-only installations
    _DRIVER_ERRORS = ()

OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    *_DRIVER_ERRORS,
)


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then the error it was raised from (its cause, else its
    context), and so on, each once: Django wraps the driver's error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        yield current
        seen.add(id(current))
        current = current.__cause__ or current.__context__


def is_db_outage(exc: BaseException) -> bool:
    """Whether `exc` (or an error it was raised from) says the database
    cannot be reached or the connection broke."""
    return any(isinstance(e, OUTAGE_ERRORS) for e in exception_chain(exc))


# SQLite's primary result codes that mean its file cannot be used now:
# SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_PROTOCOL.
SQLITE_UNREACHABLE = frozenset({5, 6, 10, 14, 15})


def is_db_unreachable(exc: BaseException) -> bool:
    """Narrower than is_db_outage, for what a web request answers with 503
    "database unavailable": the connection failed, broke or was refused
    (PostgreSQL's SQLSTATE class 08, 57P01-57P05, 53300 too many
    connections, or a driver error with no SQLSTATE; SQLite busy, locked,
    unreadable), never a statement the database refused (a bad regular
    expression, a cancelled query, a deadlock): those are the request's
    own error."""
    if not is_db_outage(exc):
        return False
    for current in exception_chain(exc):
        sqlstate = getattr(current, "sqlstate", None)
        if sqlstate:
            return sqlstate[:2] == "08" or sqlstate[:4] == "57P0" or sqlstate == "53300"
        code = getattr(current, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF in SQLITE_UNREACHABLE
    return True  # an outage error with nothing more to tell: as is_db_outage says


def compute_backoff_s(attempt: int, *, first_s: float, cap_s: float) -> float:
    """The wait after failed attempt number `attempt` (0 for the first
    failure): first_s · 2^attempt, at most cap_s (and at least first_s)."""
    cap_s = max(cap_s, first_s)
    if attempt >= 64:  # 2**64 × anything is past any cap
        return cap_s
    return min(cap_s, first_s * 2 ** max(attempt, 0))


def describe(exc: BaseException) -> str:
    """The error's first line (psycopg's messages run over several)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class OutageLog:
    """One warning per outage and one line at its end, for all threads of a
    process. `clock` is monotonic seconds."""

    def __init__(self, logger: logging.Logger, clock: Callable[[], float] = time.monotonic):
        self.logger = logger
        self.clock = clock
        self.since: float | None = None  # when the current outage was first seen
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException, *, what: str = "") -> None:
        """A database call failed with an outage error; logs only when it
        is the first failure of an outage."""
        with self._lock:
            if self.since is not None:
                return
            self.since = self.clock()
        where = f" ({what})" if what else ""
        self.logger.warning(
            "database unavailable%s: %s; retrying with backoff", where, describe(exc)
        )

    def recovered(self) -> float | None:
        """A database call got through: logs the outage's end and returns
        its length in seconds, or None when there was no outage."""
        if self.since is None:  # the common case: no lock taken
            return None
        with self._lock:
            if self.since is None:
                return None
            lasted = self.clock() - self.since
            self.since = None
        self.logger.warning("database back after %.1f s", lasted)
        return lasted


OUTAGE = OutageLog(log)


class OutageTooLong(Exception):
    """The database stayed unreachable past the caller's deadline."""


def drop_connection() -> None:
    """Close this thread's (broken) connection so the next query connects
    again; never raises."""
    try:
        connection.close()
    except Exception:  # closing a dead connection may fail: it is gone either way
        log.debug("closing the broken database connection failed", exc_info=True)


def retry_through_outage(
    fn: Callable[[], T],
    *,
    what: str,
    deadline_s: float | None = None,
    first_s: float = FIRST_BACKOFF_S,
    cap_s: float = MAX_BACKOFF_S,
    sleep: Callable[[float], Any] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    outage: OutageLog | None = None,
    on_outage: Callable[[], Any] | None = None,
) -> T:
    """Call `fn` until it returns without an outage error (other errors
    propagate at once). Between tries the broken connection is dropped and
    the wait follows `compute_backoff_s`. `on_outage` is called once, at
    the first failure (e.g. to keep a lock renewed meanwhile). Raises
    OutageTooLong (from the last error) when the database is still
    unreachable `deadline_s` seconds after the first failure; None: no
    deadline."""
    outage = OUTAGE if outage is None else outage
    started: float | None = None
    attempt = 0
    while True:
        try:
            value = fn()
        except Exception as exc:
            if not is_db_outage(exc):
                raise
            outage.failed(exc, what=what)
            drop_connection()
            now = clock()
            if started is None:
                started = now
                if on_outage is not None:
                    on_outage()
            wait = compute_backoff_s(attempt, first_s=first_s, cap_s=cap_s)
            attempt += 1
            if deadline_s is not None and now - started + wait > deadline_s:
                raise OutageTooLong(
                    f"{what}: the database was unreachable for {now - started:.1f} s"
                ) from exc
            sleep(wait)
            continue
        outage.recovered()
        return value
