"""A fault for tests/e2e/test_held_turn_e2e.py, loaded into its worker by
TAKT_JOB_MODULES (never into a beat): every run's lock slot is freed
TAKT_E2E_RELEASE_DELAY_S seconds after its end is recorded in the
database, as on a worker slowed at that instant (issue 28, finding 5: a
beat's sweep sent the next held run in that window, and its worker found
the job's lock taken). The job's side of a run is unchanged."""

from __future__ import annotations

import os
import time
from typing import Any

import runs.execution

DELAY_S = float(os.environ.get("TAKT_E2E_RELEASE_DELAY_S", "0.6"))
_count_end = runs.execution.count_end


def _late_count_end(*args: Any, **kwargs: Any) -> None:
    time.sleep(DELAY_S)  # the end is in the database; the slot is still held
    _count_end(*args, **kwargs)


runs.execution.count_end = _late_count_end  # type: ignore[assignment]
