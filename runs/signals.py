"""Signals other apps listen to (heartbeats → runs: runs never imports
heartbeats). Receivers must not raise: a failing receiver is logged and the
run is not affected."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from django.dispatch import Signal

# Sent after a run reached a final status; kwargs: run (a Run instance).
run_finished = Signal()

# Sent after a run started, for jobs that ask to be told (Job.notify "start").
run_started = Signal()

# Sent once when a run passes its job's long-run threshold (Job.notify
# "long_run" with "long_run_s"); kwargs: run, seconds.
run_running_long = Signal()

# Sent by the beat after a claim whose run_all catch-up left missed fire
# times out (its limit or window); kwargs: job_id, job_name, skipped, now.
catchup_capped = Signal()

# Sent when a trigger was found with no next fire time and no run that
# would set one, and repaired where it could be (runs/stalled.py, F-111);
# kwargs: stalled (a runs.stalled.Stalled), now.
trigger_stalled = Signal()

# Sent by a beat after each tick that reached the database; kwargs: now. The
# beat's own heartbeat and the overdue check listen (heartbeats.receivers).
beat_ticked = Signal()

# Sent when maintenance mode goes on or off (the switch or the lock file),
# once, by the process that saw it first; kwargs: on, note, lock_file, now.
maintenance_changed = Signal()


class EndCompanion(NamedTuple):
    """A statement that goes with a run's end in the same statement, on
    PostgreSQL (runs/ending.py): `sql` reads the CTE `ended` (one row when
    the end was recorded, none when its compare-and-set lost) and returns
    one row; `parse` turns that row into what the run's `ended_with`
    attribute then holds for the `run_finished` receivers."""

    sql: str
    params: list[Any]
    parse: Callable[[Any], Any]


# The provider of the statement that goes with a run's end: called with the
# run and the fields its end sets; returns an EndCompanion or None (the end
# goes alone, and `run_finished` receivers write what they write). One
# provider: the heartbeat's upsert (heartbeats.receivers), which thus costs
# no round trip and no commit of its own.
end_companion: list[Callable[[Any, dict[str, Any]], EndCompanion | None]] = []
