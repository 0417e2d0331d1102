"""The one clock (runs/clock.py, issue 28): this machine's clock plus its
measured offset from the database's, measured again every minute, never
raising, saying once when the machine's clock is off."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import OperationalError

from runs.clock import SharedClock

LOCAL = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class Monotonic:
    def __init__(self) -> None:
        self.at = 1000.0

    def __call__(self) -> float:
        return self.at


@pytest.fixture
def database_clock(settings):
    settings.TAKT_CLOCK = "database"
    settings.TAKT_CLOCK_SKEW_WARN_SECONDS = 2.0


def test_the_time_is_the_databases_whatever_this_machines_clock_says(database_clock):
    """A machine 90 s ahead (offset -90) reads the database's time."""
    clock = SharedClock(lambda: -90.0, monotonic=Monotonic())
    with time_machine.travel(LOCAL, tick=False):
        assert clock.now() == LOCAL - timedelta(seconds=90)


def test_it_is_measured_again_only_after_a_minute(database_clock):
    offsets = iter([-90.0, 5.0])
    ticks = Monotonic()
    clock = SharedClock(lambda: next(offsets), every_s=60, monotonic=ticks)
    assert clock.current_offset_s() == -90.0
    ticks.at += 59.9
    assert clock.current_offset_s() == -90.0
    ticks.at += 0.1
    assert clock.current_offset_s() == 5.0


def test_a_failed_measurement_keeps_the_last_offset(database_clock):
    answers = iter([-3.0])

    def measure() -> float:
        try:
            return next(answers)
        except StopIteration:
            raise OperationalError("the database is down") from None

    ticks = Monotonic()
    clock = SharedClock(measure, monotonic=ticks)
    assert clock.current_offset_s() == -3.0
    ticks.at += 60
    assert clock.current_offset_s() == -3.0


def test_a_skew_over_the_limit_is_said_once_and_its_end_once(database_clock, caplog):
    offsets = iter([-90.0, -91.0, -0.5, -0.4])
    ticks = Monotonic()
    clock = SharedClock(lambda: next(offsets), every_s=1, monotonic=ticks)
    with caplog.at_level(logging.INFO, logger="takt.clock"):
        for _ in range(4):
            clock.current_offset_s()
            ticks.at += 1
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]
    assert (
        caplog.records[0]
        .getMessage()
        .startswith("this machine's clock is 90.0 s ahead of the database's")
    )
    assert "TAKT_CLOCK_SKEW_WARN_SECONDS, 2 s" in caplog.records[0].getMessage()


def test_local_reads_this_machines_clock_and_measures_nothing(settings):
    settings.TAKT_CLOCK = "local"

    def measure() -> float:
        raise AssertionError("measured")

    clock = SharedClock(measure, monotonic=Monotonic())
    with time_machine.travel(LOCAL, tick=False):
        assert clock.now() == LOCAL


def test_the_reported_skew_is_never_minus_zero(monkeypatch):
    from runs import clock

    for offset, said in [(0.0, "+0.0"), (0.01, "+0.0"), (-90.04, "+90.0"), (3.46, "-3.5")]:
        monkeypatch.setattr(clock.CLOCK, "_offset_s", offset)
        assert f"{clock.skew_s():+.1f}" == said
