"""Heartbeat states (F-106) and the operations label (F-64): the pure core,
with exact boundaries (at the instant, and one second later)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from heartbeats.core.status import (
    NO_REPORT_LABEL,
    HeartbeatState,
    compute_deadline_at,
    compute_state,
    operations_label,
)

S = timedelta(seconds=1)
T0 = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # the night Berlin springs forward
DEADLINE_S = 3600
GRACE_S = 600
OK, FAILED = "succeeded", "failed"

NEW, UP, LATE, DOWN, PAUSED, RUNNING = (
    HeartbeatState.NEW,
    HeartbeatState.UP,
    HeartbeatState.LATE,
    HeartbeatState.DOWN,
    HeartbeatState.PAUSED,
    HeartbeatState.RUNNING,
)


def state(
    *,
    now: datetime,
    last_run_at: datetime | None = T0,
    last_started_at: datetime | None = None,
    last_status: str = OK,
    deadline_s: int | None = DEADLINE_S,
    grace_s: int = GRACE_S,
    paused: bool = False,
    running: bool = False,
) -> HeartbeatState:
    return compute_state(
        last_run_at=last_run_at,
        last_started_at=last_started_at,
        last_status=last_status,
        deadline_s=deadline_s,
        grace_s=grace_s,
        paused=paused,
        running=running,
        now=now,
    )


D = DEADLINE_S * S
G = GRACE_S * S


@pytest.mark.parametrize(
    ("case", "now", "fields", "expected"),
    [
        ("no report yet", T0, {"last_run_at": None, "last_status": ""}, NEW),
        ("no report, long after", T0 + 10 * D, {"last_run_at": None, "last_status": ""}, NEW),
        ("just reported", T0, {}, UP),
        ("one second before the deadline", T0 + D - S, {}, UP),
        ("at the deadline", T0 + D, {}, UP),
        ("one second after the deadline", T0 + D + S, {}, LATE),
        ("at the end of the grace", T0 + D + G, {}, LATE),
        ("one second after the grace", T0 + D + G + S, {}, DOWN),
        ("no grace: at the deadline", T0 + D, {"grace_s": 0}, UP),
        ("no grace: one second after", T0 + D + S, {"grace_s": 0}, DOWN),
        ("no deadline, a year later", T0 + 8760 * D, {"deadline_s": None}, UP),
        ("deadline 0: at the report", T0, {"deadline_s": 0}, UP),
        ("deadline 0: one second later", T0 + S, {"deadline_s": 0}, LATE),
        ("last run failed, fresh", T0, {"last_status": FAILED}, DOWN),
        ("last run timed out", T0, {"last_status": "timed_out"}, DOWN),
        ("last run lost", T0, {"last_status": "lost"}, DOWN),
        ("failed and late", T0 + D + S, {"last_status": FAILED}, LATE),
        ("failed, no deadline", T0 + 8760 * D, {"last_status": FAILED, "deadline_s": None}, DOWN),
        ("paused and down", T0 + D + G + S, {"paused": True}, PAUSED),
        ("paused and failed", T0, {"paused": True, "last_status": FAILED}, PAUSED),
        ("paused, no report", T0, {"paused": True, "last_run_at": None}, PAUSED),
        ("running, fresh", T0 + S, {"running": True, "last_started_at": T0 + S}, RUNNING),
        (
            "running after a failure",
            T0 + S,
            {"running": True, "last_started_at": T0 + S, "last_status": FAILED},
            RUNNING,
        ),
        ("running, first run", T0, {"running": True, "last_run_at": None, "last_started_at": T0}, RUNNING),
        # A start is a sign of life: the deadline counts from it while it runs.
        ("started late: at start + deadline", T0 + D + D, {"running": True, "last_started_at": T0 + D}, RUNNING),
        ("started late: one second after", T0 + D + D + S, {"running": True, "last_started_at": T0 + D}, LATE),
        ("started late: past the grace", T0 + D + D + G + S, {"running": True, "last_started_at": T0 + D}, DOWN),
        ("running, start unknown: at the deadline", T0 + D, {"running": True}, RUNNING),
        ("running, start unknown: one second after", T0 + D + S, {"running": True}, LATE),
        # An older start (the last reported run's) does not move the deadline.
        ("not running, older start", T0 + D + S, {"last_started_at": T0 - S}, LATE),
        ("not running, later start ignored", T0 + D + S, {"last_started_at": T0 + D}, LATE),
    ],
)  # fmt: skip
def test_compute_state(case: str, now: datetime, fields: dict[str, Any], expected: HeartbeatState):
    assert state(now=now, **fields) == expected, case


def test_the_states_are_the_healthcheck_names():
    assert [s.value for s in HeartbeatState] == ["new", "up", "late", "down", "paused", "running"]


@pytest.mark.parametrize(
    ("now", "fields", "expected"),
    [
        (T0, {"last_run_at": None, "last_status": ""}, NO_REPORT_LABEL),
        (T0 + 10 * D, {"last_run_at": None, "last_status": ""}, "No run has reported yet"),
        (T0, {}, "OK"),
        (T0 + D, {}, "OK"),
        (T0 + D + S, {}, "Overdue"),
        (T0, {"last_status": FAILED}, "Last run failed"),
        (T0 + D, {"last_status": FAILED}, "Last run failed"),
        (T0 + D + S, {"last_status": FAILED}, "Overdue"),  # overdue comes first
        (T0 + 8760 * D, {"deadline_s": None}, "OK"),
        (T0 + 8760 * D, {"deadline_s": None, "last_status": "lost"}, "Last run failed"),
    ],
)
def test_operations_label(now: datetime, fields: dict[str, Any], expected: str):
    values: dict[str, Any] = {"last_run_at": T0, "last_status": OK, "deadline_s": DEADLINE_S}
    assert operations_label(**(values | fields), now=now) == expected


def test_compute_deadline_at():
    assert (
        compute_deadline_at(last_run_at=T0, last_started_at=None, running=False, deadline_s=60)
        == T0 + 60 * S
    )
    assert (
        compute_deadline_at(last_run_at=T0, last_started_at=T0 + D, running=True, deadline_s=60)
        == T0 + D + 60 * S
    )
    assert (
        compute_deadline_at(last_run_at=None, last_started_at=None, running=True, deadline_s=60)
        is None
    )
    assert (
        compute_deadline_at(last_run_at=T0, last_started_at=None, running=False, deadline_s=None)
        is None
    )


def test_times_in_any_zone_compare_as_instants(berlin_local_time):
    """Across Berlin's spring-forward night: the deadline is elapsed time."""
    berlin = ZoneInfo("Europe/Berlin")
    reported = T0.astimezone(berlin)  # 01:30 CET; an hour later it is 03:30 CEST
    assert state(last_run_at=reported, now=(T0 + D).astimezone(berlin)) == UP
    assert state(last_run_at=reported, now=(T0 + D + S).astimezone(berlin)) == LATE


@pytest.mark.parametrize(
    ("now", "grace_s", "error"),
    [
        (datetime(2026, 3, 29, 2, 30), GRACE_S, "aware"),  # noqa: DTZ001 (naive on purpose)
        (T0, -1, "grace_s"),
    ],
)
def test_bad_input_is_refused(now: datetime, grace_s: int, error: str):
    with pytest.raises(ValueError, match=error):
        state(now=now, grace_s=grace_s)
    if grace_s >= 0:
        with pytest.raises(ValueError, match=error):
            operations_label(last_run_at=T0, last_status=OK, deadline_s=60, now=now)
