"""runs/outage.py: what counts as a database outage, the backoff schedule,
one warning per outage, and the retry loop (its clock and sleep injected)."""

from __future__ import annotations

import logging

import psycopg
import pytest
from django.db import IntegrityError, InterfaceError, OperationalError

from runs.outage import (
    OutageLog,
    OutageTooLong,
    compute_backoff_s,
    is_db_outage,
    is_db_unreachable,
    retry_through_outage,
)
from runs.tasks import compute_claim_wait_s

LOGGER = logging.getLogger("takt.test-outage")


@pytest.mark.parametrize(
    ("attempt", "first_s", "cap_s", "expected"),
    [
        (0, 0.5, 5.0, 0.5),
        (1, 0.5, 5.0, 1.0),
        (2, 0.5, 5.0, 2.0),
        (3, 0.5, 5.0, 4.0),
        (4, 0.5, 5.0, 5.0),  # 8 s, capped
        (500, 0.5, 5.0, 5.0),
        (0, 1.0, 5.0, 1.0),  # the beat: its poll first
        (2, 1.0, 5.0, 4.0),
        (0, 10.0, 5.0, 10.0),  # a poll longer than the cap: the poll
        (3, 10.0, 5.0, 10.0),
    ],
)
def test_backoff_doubles_from_the_first_wait_up_to_the_cap(attempt, first_s, cap_s, expected):
    assert compute_backoff_s(attempt, first_s=first_s, cap_s=cap_s) == expected


def _raised_from(cause: BaseException) -> Exception:
    try:
        try:
            raise cause
        except BaseException as exc:
            raise RuntimeError("while saving") from exc
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (OperationalError("connection refused"), True),
        (InterfaceError("connection already closed"), True),
        (psycopg.OperationalError("terminating connection due to administrator command"), True),
        (psycopg.InterfaceError("the connection is closed"), True),
        (_raised_from(OperationalError("server closed the connection")), True),
        (IntegrityError("duplicate key"), False),
        (ValueError("bad data"), False),
        (_raised_from(ValueError("bad data")), False),
    ],
)
def test_which_errors_mean_the_database_is_unreachable(exc, expected):
    assert is_db_outage(exc) is expected


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_an_outage_is_logged_once_when_it_begins_and_once_when_it_ends(caplog):
    clock = Clock()
    outage = OutageLog(LOGGER, clock=clock)
    caplog.set_level(logging.INFO, logger=LOGGER.name)
    assert outage.recovered() is None  # no outage: nothing logged
    for _ in range(5):
        outage.failed(OperationalError("connection refused\n\tIs the server running?"), what="beat")
        clock.now += 6.24
    assert outage.recovered() == pytest.approx(31.2)
    assert outage.recovered() is None
    assert [r.getMessage() for r in caplog.records] == [
        "database unavailable (beat): connection refused; retrying with backoff",
        "database back after 31.2 s",
    ]


def test_a_call_is_retried_with_backoff_until_the_database_answers(caplog):
    clock = Clock()
    outage = OutageLog(LOGGER, clock=clock)
    failures = [OperationalError("refused"), InterfaceError("closed"), OperationalError("refused")]
    kept: list[str] = []

    def call() -> str:
        if failures:
            raise failures.pop(0)
        return "recorded"

    caplog.set_level(logging.INFO, logger=LOGGER.name)
    value = retry_through_outage(
        call,
        what="recording the end of run 7",
        sleep=clock.sleep,
        clock=clock,
        outage=outage,
        on_outage=lambda: kept.append("lock kept"),
    )
    assert value == "recorded"
    assert clock.slept == [0.5, 1.0, 2.0]
    assert kept == ["lock kept"]  # once, at the first failure
    assert [r.getMessage() for r in caplog.records] == [
        "database unavailable (recording the end of run 7): refused; retrying with backoff",
        "database back after 3.5 s",
    ]


def test_other_errors_are_not_retried():
    clock = Clock()

    def call() -> None:
        raise IntegrityError("duplicate key")

    with pytest.raises(IntegrityError):
        retry_through_outage(
            call, what="x", sleep=clock.sleep, clock=clock, outage=OutageLog(LOGGER)
        )
    assert clock.slept == []


def test_past_its_deadline_the_retry_gives_up_with_outage_too_long():
    clock = Clock()

    def call() -> None:
        raise OperationalError("refused")

    with pytest.raises(OutageTooLong, match=r"claiming run 3: the database was unreachable for"):
        retry_through_outage(
            call,
            what="claiming run 3",
            deadline_s=10,
            sleep=clock.sleep,
            clock=clock,
            outage=OutageLog(LOGGER, clock=clock),
        )
    # 0.5 + 1 + 2 + 4 = 7.5 s waited; the next wait (5 s) would pass 10 s
    assert clock.slept == [0.5, 1.0, 2.0, 4.0]


@pytest.mark.parametrize(
    ("hard_s", "soft_s", "expected"),
    [
        (None, None, 300.0),  # timeout action `continue`: no limit
        (330, 300, 150.0),  # the default timeout: half of it
        (3630, 3600, 300.0),  # a long timeout: the setting
        (31, 1, 0.5),
        (40, None, 20.0),  # only a hard limit
    ],
)
def test_a_claim_waits_at_most_half_the_runs_time_limit(hard_s, soft_s, expected):
    assert compute_claim_wait_s(300, hard_s=hard_s, soft_s=soft_s) == expected


def _sqlite_error(sql: str, database: str = ":memory:") -> BaseException:
    """A real sqlite3 error: `sql` run on `database`, with REGEXP as Django's."""
    import re
    import sqlite3

    try:
        connection = sqlite3.connect(database)
        connection.create_function("REGEXP", 2, lambda p, s: bool(re.search(p, s)))
        connection.execute(sql)
    except sqlite3.Error as exc:
        return exc
    raise AssertionError(f"{sql!r} on {database} raised nothing")


def _wrapped(driver_error: BaseException) -> OperationalError:
    """As Django's DatabaseErrorWrapper raises it: from the driver's error."""
    try:
        raise OperationalError(str(driver_error)) from driver_error
    except OperationalError as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (OperationalError("connection refused"), True),  # nothing more to tell
        (InterfaceError("connection already closed"), True),
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (_wrapped(psycopg.errors.lookup("57P01")("terminating connection")), True),
        (_wrapped(psycopg.errors.lookup("57P03")("the database system is starting up")), True),
        (_wrapped(psycopg.errors.lookup("08006")("connection failure")), True),
        (_wrapped(psycopg.errors.lookup("53300")("too many connections")), True),
        (_wrapped(_sqlite_error("SELECT 1", "/no/such/folder/takt.db")), True),  # CANTOPEN
        # Statements the database refused: the request's own error, no outage.
        (_wrapped(_sqlite_error("SELECT 'a' REGEXP '('")), False),  # a bad regex on SQLite
        (_wrapped(_sqlite_error("SELECT * FROM no_such_table")), False),
        (_wrapped(psycopg.errors.lookup("57014")("canceling statement due to timeout")), False),
        (_wrapped(psycopg.errors.lookup("40P01")("deadlock detected")), False),
        (IntegrityError("duplicate key"), False),
        (ValueError("bad data"), False),
    ],
)
def test_which_errors_answer_a_web_request_with_database_unavailable(exc, expected):
    assert is_db_unreachable(exc) is expected
