"""TAKT_DB_OUTAGE_MAX_SECONDS: a bad value stops the process with an error
naming the setting and the value."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.processes import ROOT


def _check(value: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TAKT_DB_OUTAGE_MAX_SECONDS": value}
    argv = [sys.executable, "manage.py", "check"]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_a_bad_outage_limit_stops_the_process_naming_the_setting():
    for value in ("0", "five", "100000"):
        done = _check(value)
        assert done.returncode != 0, value
        assert "TAKT_DB_OUTAGE_MAX_SECONDS: " in done.stderr and repr(value) in done.stderr
    assert _check("30").returncode == 0
