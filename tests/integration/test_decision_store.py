"""F-65, issue 29 B.7: the decision log is durable. Decisions are recorded
into a Redis stream and moved into the database by each beat tick (and by
every reader) exactly once; a Redis restart without persistence loses
none that were moved; the maintenance pass deletes those older than
TAKT_DECISION_LOG_DAYS, at the boundary to the second."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import override_settings

from jobs.services import pause_job, resume_job
from jobs.testing import tick
from runs.beat import TaktScheduler
from runs.decisions import Decision, decision_key, drain, query, record
from runs.maintenance import run_maintenance
from runs.models import SchedulerDecision
from runs.queue import pause_queue, resume_queue
from scheduler_project.takt_settings import takt_settings
from tests.integration.conftest import SECOND, hourly, make_job, utc
from tests.integration.test_claim_races import race

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
DAY = timedelta(days=1)
MINUTE = timedelta(minutes=1)


def test_a_tick_moves_the_decisions_into_the_database_and_a_redis_restart_keeps_them(
    capsys, redis_client, django_capture_on_commit_callbacks
):
    job = make_job("Nightly")
    record([Decision("refused", job.pk, detail="maintenance mode", at=T0)])
    record([Decision("maintenance", 0, detail="maintenance mode off", at=T0 + SECOND)])
    with django_capture_on_commit_callbacks(execute=True):
        tick(T0 + 2 * SECOND)
    assert redis_client.xlen(decision_key()) == 0  # acknowledged: gone from the stream
    assert SchedulerDecision.objects.count() == 2

    redis_client.flushdb()  # what a Redis restart without persistence leaves

    call_command("decision_log")
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "2026-06-01 08:00:01 UTC  maintenance             all jobs  maintenance mode off",
        f"2026-06-01 08:00:00 UTC  refused                 job {job.pk} 'Nightly'"
        "  maintenance mode",
    ]
    assert [e["kind"] for e in query(job_id=job.pk)] == ["refused"]


def test_a_drain_whose_acknowledgement_was_lost_doubles_nothing(
    redis_client, django_capture_on_commit_callbacks
):
    record([Decision("due", 7, None, 3, f"schedule run {i}", T0 + i * SECOND) for i in range(3)])
    # The rows are written but the stream's entries not deleted (a crash
    # before the commit's acknowledgement ran): the next drain reads them
    # again.
    with django_capture_on_commit_callbacks(execute=False):
        assert drain() == 3
    assert redis_client.xlen(decision_key()) == 3
    record([Decision("due", 7, None, 3, "schedule run 3", T0 + 3 * SECOND)])
    with django_capture_on_commit_callbacks(execute=True):
        assert drain(batch=2) == 4
    assert redis_client.xlen(decision_key()) == 0
    details = [e["detail"] for e in query(job_id=7, limit=10)]
    assert details == [f"schedule run {i}" for i in (3, 2, 1, 0)]


@override_settings(TAKT_DECISION_LOG_DAYS=30)
def test_maintenance_deletes_the_decisions_older_than_the_retention_to_the_second():
    now = utc(2026, 7, 1, 12, 0)
    cutoff = now - 30 * DAY
    for name, at in (("older", cutoff - SECOND), ("at", cutoff), ("newer", cutoff + SECOND)):
        SchedulerDecision.objects.create(stream_id=name, at=at, kind="due", job_id=1, detail=name)

    dry = run_maintenance(now=now, only=["decisions"], dry_run=True)
    assert dry.lines() == ["Cleanup 'decisions': would delete 1 decision older than 30 days"]
    assert SchedulerDecision.objects.count() == 3

    report = run_maintenance(now=now, only=["decisions"])
    assert report.lines() == ["Cleanup 'decisions': deleted 1 decision older than 30 days"]
    assert sorted(SchedulerDecision.objects.values_list("detail", flat=True)) == ["at", "newer"]


def test_the_retention_setting_is_checked_at_start_naming_it():
    assert takt_settings(environ={})["TAKT_DECISION_LOG_DAYS"] == 30
    assert takt_settings(environ={"TAKT_DECISION_LOG_DAYS": "7"})["TAKT_DECISION_LOG_DAYS"] == 7
    with pytest.raises(ImproperlyConfigured, match="TAKT_DECISION_LOG_DAYS"):
        takt_settings(environ={"TAKT_DECISION_LOG_DAYS": "0"})
    with pytest.raises(ImproperlyConfigured, match="TAKT_DECISION_LOG_DAYS"):
        takt_settings(environ={"TAKT_DECISION_LOG_DAYS": "a month"})


def not_due(job_id: int) -> list[str]:
    return [e["detail"] for e in query(job_id=job_id, limit=100) if e["kind"] == "not_due"]


def test_a_paused_job_whose_time_has_come_is_noted_once_per_pause(redis_client):
    job = make_job("Report")
    hourly(job, created_at=T0 - 30 * MINUTE)  # due at 08:00 UTC
    pause_job(job.pk, note="vendor down", by="ops", now=T0 - 10 * MINUTE)

    for at in (T0, T0 + MINUTE, T0 + 2 * MINUTE):
        assert tick(at) == []
    assert not_due(job.pk) == [
        "the job is paused (by ops at 2026-06-01T07:50:00+00:00: vendor down):"
        " its due time 2026-06-01T08:00:00+00:00 waits until it is resumed"
    ]

    resume_job(job.pk)  # the fire time is caught up: the spell is over
    assert len(tick(T0 + 3 * MINUTE)) == 1
    pause_job(job.pk, note="again", by="ops", now=T0 + 4 * MINUTE)
    tick(T0 + 61 * MINUTE)
    tick(T0 + 62 * MINUTE)
    assert len(not_due(job.pk)) == 2
    assert "(by ops at 2026-06-01T08:04:00+00:00: again)" in not_due(job.pk)[0]


def test_the_due_jobs_of_a_paused_queue_are_noted_once_per_pause(redis_client):
    job = make_job("Import")
    hourly(job, created_at=T0 - 30 * MINUTE)
    pause_queue(note="db upgrade", by="ops", now=T0 - 5 * MINUTE)

    for at in (T0, T0 + MINUTE):
        assert tick(at) == []
    assert not_due(job.pk) == [
        "the queue is paused (by ops at 2026-06-01T07:55:00+00:00: db upgrade):"
        " its due time 2026-06-01T08:00:00+00:00 stays due until the queue is resumed"
    ]
    resume_queue(now=T0 + 2 * MINUTE)
    assert len(tick(T0 + 2 * MINUTE)) == 1
    assert len(not_due(job.pk)) == 1


@pytest.mark.parametrize("enabled", [True, False])
def test_a_beat_notes_its_start_with_its_scheduler_switch_and_its_stop(redis_client, enabled):
    from scheduler_project.celery import app

    with override_settings(TAKT_SCHEDULER_ENABLED=enabled, TAKT_WATCH_FILES=False):
        scheduler = TaktScheduler(app=app)
        scheduler.close()
    where = f"on {socket.gethostname()} (pid {os.getpid()})"
    switch = "scheduling on" if enabled else "scheduling OFF (TAKT_SCHEDULER_ENABLED=false)"
    assert [(e["kind"], e["job"], e["detail"]) for e in query(limit=2)] == [
        ("beat", "0", f"beat stopped {where}"),
        ("beat", "0", f"beat started {where}: {switch}"),
    ]


@pytest.mark.django_db(transaction=True)
def test_two_beats_draining_at_once_store_each_decision_once(redis_client):
    """Two beats' drains race over the same entries on their own database
    connections (SQLite serialises them; PostgreSQL's unique index makes
    the later insert of an entry a no-op)."""
    record([Decision("due", 9, None, 1, f"schedule run {i}", T0) for i in range(2500)])

    moved = race(2, drain)

    assert sum(moved) >= 2500
    assert SchedulerDecision.objects.count() == 2500
    assert redis_client.xlen(decision_key()) == 0
    assert query(job_id=9, limit=1)[0]["detail"] == "schedule run 2499"
