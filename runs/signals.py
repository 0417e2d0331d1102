"""Signals other apps listen to (heartbeats → runs: runs never imports
heartbeats). Receivers must not raise: a failing receiver is logged and the
run is not affected."""

from __future__ import annotations

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

# Sent by a beat after each tick that reached the database; kwargs: now. The
# beat's own heartbeat and the overdue check listen (heartbeats.receivers).
beat_ticked = Signal()

# Sent when maintenance mode goes on or off (the switch or the lock file),
# once, by the process that saw it first; kwargs: on, note, lock_file, now.
maintenance_changed = Signal()
