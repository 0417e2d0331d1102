"""The one clock against the real database, and the alert for a machine
whose clock is off (runs/clock.py, heartbeats/clock_skew.py; issue 28)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from heartbeats.clock_skew import check_clock_skew
from heartbeats.models import Alert
from heartbeats.processes import clock_detail, report_process
from heartbeats.queue_status import queue_status
from runs.clock import database_offset_s

pytestmark = pytest.mark.django_db


def test_the_database_clock_is_read_as_an_offset_from_this_machines():
    """Same machine: (almost) no offset. SQLite has no clock of its own."""
    offset = database_offset_s()
    if connection.vendor == "sqlite":
        assert offset == 0.0
    else:
        assert abs(offset) < 0.5, offset


def test_a_process_whose_clock_is_off_raises_a_warning_until_it_is_back(settings):
    settings.TAKT_CLOCK_SKEW_WARN_SECONDS = 2.0
    now = timezone.now()
    report_process("beat@ahead", now=now, detail="scheduler=on clock=+90.0")
    report_process("worker:celery@behind", now=now, detail="concurrency=2 clock=-3.5")
    report_process("worker:celery@fine", now=now, detail="concurrency=2 clock=+0.3")
    report_process("worker:celery@old", now=now, detail="concurrency=2")

    assert check_clock_skew(now=now) == ["beat@ahead", "worker:celery@behind"]
    alerts = Alert.objects.filter(key__startswith="clock-skew:", resolved_at__isnull=True)
    titles = sorted(alerts.values_list("title", flat=True))
    assert titles == [
        "The clock of beat@ahead is 90.0 s ahead of the database's",
        "The clock of worker:celery@behind is 3.5 s behind the database's",
    ]
    assert {a.severity for a in alerts} == {"warning"}
    status = queue_status(now=now)
    assert [(b["name"], b["clock_skew_s"], b["clock_off"]) for b in status["beats"]] == [
        ("beat@ahead", 90.0, True)
    ]
    assert [(w["clock_skew_s"], w["clock_off"]) for w in status["workers"]] == [
        (-3.5, True),
        (0.3, False),
        (None, False),
    ]

    later = now + timedelta(seconds=30)
    report_process("beat@ahead", now=later, detail="scheduler=on clock=+0.1")
    report_process("worker:celery@behind", now=later, detail="concurrency=2 clock=-3.5")
    assert check_clock_skew(now=later) == ["worker:celery@behind"]
    resolved = Alert.objects.get(key="clock-skew:beat@ahead")
    assert resolved.resolved_at is not None


def test_a_process_reports_its_measured_skew_only_when_it_measures(settings):
    settings.TAKT_CLOCK = "local"
    assert clock_detail() == ""
    settings.TAKT_CLOCK = "database"
    assert clock_detail().startswith(" clock=")
