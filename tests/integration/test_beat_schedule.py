"""Celery's own beat_schedule is never dropped in silence: its entries become
jobs declared in code when the beat starts (TAKT_CELERY_BEAT_SCHEDULE=sync,
the default), or the beat refuses to start naming them (refuse)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from celery import current_app
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from jobs.declared import sync_declared_jobs
from jobs.models import Job
from runs.beat import TaktScheduler

pytestmark = pytest.mark.django_db

NOW = datetime(2027, 5, 3, 8, 0, 10, tzinfo=UTC)


@pytest.fixture
def beat_schedule():
    before = current_app.conf.beat_schedule
    current_app.conf.beat_schedule = {}
    yield current_app.conf.beat_schedule
    current_app.conf.beat_schedule = before


def sync():
    with time_machine.travel(NOW, tick=False):
        return sync_declared_jobs(now=NOW)


def test_its_entries_become_jobs_declared_in_code(beat_schedule):
    beat_schedule.update(
        {
            "every minute": {
                "task": "tests.celery_echo",
                "schedule": 60.0,
                "args": (1, "a"),
                "kwargs": {"k": 2},
                "options": {"queue": "reports", "priority": 2},
            },
            "nightly": {
                "task": "tests.celery_echo",
                "schedule": crontab(minute=30, hour=2, day_of_week="mon-fri"),
            },
        }
    )

    report = sync()

    assert len(report.created) == 2
    minute = Job.objects.get(name="every minute")
    assert minute.code_managed and minute.key.startswith("every-minute-")
    assert (minute.args, minute.params, minute.queue, minute.priority) == (
        [1, "a"],
        {"k": 2},
        "reports",
        2,
    )
    trigger = minute.triggers.get()
    assert (trigger.kind, trigger.interval_seconds) == ("interval", 60)
    nightly = Job.objects.get(key="nightly").triggers.get()
    zone = str(current_app.timezone)
    assert (nightly.cron_expression, nightly.timezone) == ("30 2 * * MON-FRI", zone)

    # The beat starts again a minute later: nothing moves (the interval keeps its grid).
    later = NOW + timedelta(minutes=1)
    with time_machine.travel(later, tick=False):
        again = sync_declared_jobs(now=later)
    assert again.unchanged == sorted(again.unchanged) and len(again.unchanged) == 2
    assert minute.triggers.get().start_at == trigger.start_at


def test_an_entry_takt_cannot_take_stops_the_sync_naming_it(beat_schedule):
    beat_schedule["sunrise"] = {"task": "tests.celery_echo", "schedule": timedelta(days=45)}
    with pytest.raises(ImproperlyConfigured, match=r"beat_schedule\['sunrise'\]: .*1 s to 30 days"):
        sync()
    beat_schedule["sunrise"] = {"task": "nowhere.task", "schedule": 10}
    with pytest.raises(ImproperlyConfigured, match="'nowhere.task' is not registered"):
        sync()
    beat_schedule["sunrise"] = {"task": "tests.celery_echo", "schedule": "daily"}
    with pytest.raises(ImproperlyConfigured, match=r"beat_schedule\['sunrise'\]: schedule"):
        sync()
    assert not Job.objects.filter(name="sunrise").exists()


def test_refuse_stops_the_beat_naming_the_entries(beat_schedule, settings):
    settings.TAKT_CELERY_BEAT_SCHEDULE = "refuse"
    beat_schedule["cleanup"] = {"task": "tests.celery_echo", "schedule": 3600}
    scheduler = TaktScheduler.__new__(TaktScheduler)
    scheduler.app = current_app

    with pytest.raises(ImproperlyConfigured, match=r"beat_schedule has 1 entries \('cleanup'\)"):
        scheduler.sync_declared_jobs()
    assert not Job.objects.filter(name="cleanup").exists()


def test_celerys_own_backend_cleanup_is_left_out_with_a_warning(beat_schedule, caplog):
    beat_schedule["celery.backend_cleanup"] = {
        "task": "celery.backend_cleanup",
        "schedule": crontab(minute=0, hour=4),
    }
    beat_schedule["nightly"] = {"task": "tests.celery_echo", "schedule": 3600}

    with caplog.at_level("WARNING", logger="takt.celery_beat"):
        report = sync()

    assert len(report.created) == 1
    assert not Job.objects.filter(target="celery.backend_cleanup").exists()
    assert "beat_schedule['celery.backend_cleanup']: not made a job: Celery's own result" in (
        caplog.text
    )
