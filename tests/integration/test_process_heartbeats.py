"""F-61: heartbeats of Takt's own processes, and the beat's overdue check."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from heartbeats.models import Alert, Heartbeat
from heartbeats.processes import BeatReporter, report_process

pytestmark = pytest.mark.django_db


def test_a_process_heartbeat_is_made_on_its_first_report_and_then_updated():
    now = timezone.now()
    report_process("worker:celery@a", now=now)
    report_process("worker:celery@a", now=now + timedelta(seconds=30))
    beat = Heartbeat.objects.get(name="worker:celery@a")
    assert beat.job_id is None and beat.deadline_s == 120
    assert beat.last_run_at == now + timedelta(seconds=30)


def test_the_beat_reports_itself_and_finds_a_stopped_worker_overdue():
    now = timezone.now()
    report_process("worker:celery@gone", now=now - timedelta(hours=3))
    reporter = BeatReporter("beat@here")
    reporter.maybe_report(now=now)
    assert Heartbeat.objects.filter(name="beat@here").exists()
    alert = Alert.objects.get()
    assert "worker:celery@gone" in alert.title and "overdue" in alert.title
    reporter.maybe_report(now=now)  # throttled: nothing new
    assert Alert.objects.get().count == 1
