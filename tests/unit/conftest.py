"""Fixtures for the pure-core unit tests (no database)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest


@pytest.fixture
def berlin_local_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run the test with the process's local zone set to Europe/Berlin, so a
    hidden UTC (or local-time) assumption shows up as a wrong result."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
