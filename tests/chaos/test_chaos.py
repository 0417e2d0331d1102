"""The short chaos test (about 2 minutes, marker `chaos`): the harness of
tests/chaos/harness.py with its own PostgreSQL cluster and Redis, so it
runs the same on both CI passes (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from tests.chaos.harness import run_chaos
from tests.chaos.schedule import SHORT
from tests.processes import ROOT

pytestmark = pytest.mark.chaos


# Its own ceiling: the short form takes about 2.5 minutes, and twice that on
# a loaded machine (make test-stress).
@pytest.mark.timeout(600)
def test_chaos_short() -> None:
    """Kills, both beats down, a Redis restart without persistence and a
    10-second database outage: no fire time doubled, lost, left behind or
    blocked by a dead run, and the start lag back under 2 s p99."""
    seed = int(os.environ.get("TAKT_CHAOS_SEED", "12"))
    # Under var/ (not pytest's temporary directories, which later sessions
    # delete): the logs a failure names stay for the one who reads it.
    workdir = ROOT / "var" / "chaos" / datetime.now(UTC).strftime("pytest-%Y%m%d-%H%M%S")
    report = run_chaos(SHORT, seed=seed, workdir=workdir)
    assert report.passed, (
        f"chaos test failed (seed {seed}, logs in {workdir}):\n{report.markdown()}"
    )
