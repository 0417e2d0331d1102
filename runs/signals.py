"""Signals other apps listen to (heartbeats → runs: runs never imports
heartbeats). Receivers must not raise: a failing receiver is logged and the
run is not affected."""

from __future__ import annotations

from django.dispatch import Signal

# Sent after a run reached a final status; kwargs: run (a Run instance).
run_finished = Signal()
