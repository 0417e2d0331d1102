"""TAKT_DB_OUTAGE_MAX_SECONDS: a bad value stops the process with an error
naming the setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.processes import ROOT


@pytest.mark.parametrize("value", ["0", "five", "100000"])
def test_a_bad_outage_limit_stops_the_process_naming_the_setting(value):
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, "TAKT_DB_OUTAGE_MAX_SECONDS": value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "TAKT_DB_OUTAGE_MAX_SECONDS: " in done.stderr and repr(value) in done.stderr
