"""Heartbeat states (F-106) and the operations page's label (F-64): the pure
core. Stdlib only, no clock reads: every function takes `now` (aware UTC).

A heartbeat's state, as healthcheck services name them:

    new      no report yet
    paused   an operator silenced it (wins over everything else)
    running  a run is under way and the heartbeat is not overdue
    up       the last report is within the deadline and it succeeded
    late     past the deadline, but still inside the grace period
    down     past deadline + grace, or the last run failed

"Past" is strict, as on the operations page ("older than the deadline"): a
heartbeat exactly at its deadline is still up, one second later it is late;
exactly at deadline + grace it is late, one second later down.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum

from jobs.core.cron import gettext_noop

# The one run status that counts as a success; mirrors
# runs.models.RunStatus.SUCCEEDED (the core cannot import Django models).
OK_STATUS = "succeeded"


class HeartbeatState(StrEnum):
    NEW = "new"
    UP = "up"
    LATE = "late"
    DOWN = "down"
    PAUSED = "paused"
    RUNNING = "running"


# States that keep an overdue alert open (see heartbeats.services.check_overdue).
OVERDUE_STATES = frozenset({HeartbeatState.LATE, HeartbeatState.DOWN})

# Each state's label (English; heartbeats.labels shows it in the reader's language).
STATE_LABELS = {
    HeartbeatState.NEW: gettext_noop("new"),
    HeartbeatState.UP: gettext_noop("up"),
    HeartbeatState.LATE: gettext_noop("late"),
    HeartbeatState.DOWN: gettext_noop("down"),
    HeartbeatState.PAUSED: gettext_noop("paused"),
    HeartbeatState.RUNNING: gettext_noop("running"),
}

# The operations page's state labels (F-64), English; translated where shown.
NO_REPORT_LABEL = gettext_noop("No run has reported yet")
OVERDUE_LABEL = gettext_noop("Overdue")
FAILED_LABEL = gettext_noop("Last run failed")
OK_LABEL = gettext_noop("OK")


def compute_deadline_at(
    *,
    last_run_at: datetime | None,
    last_started_at: datetime | None,
    running: bool,
    deadline_s: int | None,
) -> datetime | None:
    """The instant after which the heartbeat is overdue, or None when it
    cannot be (no deadline, or no sign of life yet to count from).

    It counts from the last report; while a run is under way, from its start
    when that is later (a start is a sign of life too, as a healthcheck's
    `/start` ping is)."""
    if deadline_s is None:
        return None
    reference = last_run_at
    if running and last_started_at is not None:
        reference = last_started_at if reference is None else max(reference, last_started_at)
    if reference is None:
        return None
    # In UTC: adding to a zoned time adds wall-clock time, wrong across DST.
    return reference.astimezone(UTC) + timedelta(seconds=deadline_s)


def compute_state(
    *,
    last_run_at: datetime | None,
    last_started_at: datetime | None,
    last_status: str,
    deadline_s: int | None,
    grace_s: int,
    paused: bool,
    running: bool,
    now: datetime,
) -> HeartbeatState:
    """The heartbeat's state at `now` (see the module docstring).

    `last_run_at` is the last report (None: never reported), `last_status`
    its run status (`OK_STATUS` is a success), `deadline_s` how long the
    last report may lie back (None: never overdue), `grace_s` (seconds, >= 0)
    how long it may be late before it is down. `running` says a run is
    under way, started at `last_started_at` when known.

    Raises ValueError for a naive `now` or a negative `grace_s`."""
    _check(now=now, grace_s=grace_s)
    if paused:
        return HeartbeatState.PAUSED
    deadline_at = compute_deadline_at(
        last_run_at=last_run_at,
        last_started_at=last_started_at,
        running=running,
        deadline_s=deadline_s,
    )
    now = now.astimezone(UTC)  # compared with UTC instants: same-zone times compare by wall clock
    if deadline_at is not None and now > deadline_at:
        if now > deadline_at + timedelta(seconds=grace_s):
            return HeartbeatState.DOWN
        return HeartbeatState.LATE
    if running:
        return HeartbeatState.RUNNING
    if last_run_at is None:
        return HeartbeatState.NEW
    if last_status != OK_STATUS:
        return HeartbeatState.DOWN
    return HeartbeatState.UP


def operations_label(
    *,
    last_run_at: datetime | None,
    last_status: str,
    deadline_s: int | None,
    now: datetime,
) -> str:
    """The state column of the operations page (F-64), in this order:
    "Overdue" when the last run is older than the deadline, else "Last run
    failed", else "OK"; "No run has reported yet" without a report.

    Unlike `compute_state` it knows no grace, pause or running run: it is
    the reference's plain three-way answer. Raises ValueError for a naive
    `now`."""
    _check(now=now, grace_s=0)
    if last_run_at is None:
        return NO_REPORT_LABEL
    deadline_at = compute_deadline_at(
        last_run_at=last_run_at, last_started_at=None, running=False, deadline_s=deadline_s
    )
    if deadline_at is not None and now.astimezone(UTC) > deadline_at:
        return OVERDUE_LABEL
    if last_status != OK_STATUS:
        return FAILED_LABEL
    return OK_LABEL


def _check(*, now: datetime, grace_s: int) -> None:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be an aware datetime (UTC)")
    if grace_s < 0:
        raise ValueError(f"grace_s must be 0 or more seconds, got {grace_s}")
