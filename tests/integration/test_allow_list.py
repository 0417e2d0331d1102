"""The maintenance allow-list (F-29): only functions registered with
allowed_during_maintenance=True start in maintenance mode or while the
queue is paused; Takt's own (maintenance off, pause and resume the queue)
are on it; maintenance going on raises an alert and is recorded."""

from __future__ import annotations

import socket

import pytest

from heartbeats.models import Alert
from jobs import registry
from jobs.errors import MaintenanceMode, QueuePaused
from runs.decisions import query
from runs.execution import execute
from runs.models import RunStatus, RunTrigger
from runs.queue import in_maintenance, is_paused, maintenance_key, pause_queue, set_maintenance
from runs.services import enqueue_job
from runs.tick import run_tick
from tests.integration.conftest import SECOND, clock, make_job, make_trigger, utc

T0 = utc(2026, 6, 1, 8, 0)
pytestmark = pytest.mark.django_db(transaction=True)


def test_takts_own_functions_on_the_list_and_the_hourly_maintenance_off_it():
    allowed = registry.allowed_names()
    assert {"takt.maintenance_off", "takt.pause_queue", "takt.resume_queue"} <= set(allowed)
    assert "tests.log_off" in allowed  # an operator's own hook
    for name in ("takt.maintenance", "takt.maintenance_on", "takt.operation", "tests.echo"):
        assert not registry.allowed_in_maintenance(name)


def test_in_maintenance_only_allowed_jobs_start_whatever_starts_them(redis_client):
    plain = make_job("report")
    log_off = make_job("log everybody off", target="tests.log_off")
    set_maintenance(True, note="ERP upgrade", now=T0)

    with pytest.raises(MaintenanceMode):
        enqueue_job(plain, trigger="api", now=T0)
    run = enqueue_job(log_off, trigger="api", now=T0)
    assert execute(run.pk, worker="w", clock=clock(T0)) == RunStatus.SUCCEEDED


def test_allowed_jobs_start_while_the_queue_is_paused(redis_client, monkeypatch):
    import runs.tick

    monkeypatch.setattr(runs.tick, "_allowed_at", float("-inf"))  # not looked at lately
    plain = make_job("report")
    resume = make_job("resume the queue", target="takt.resume_queue")
    plain_trigger = make_trigger(plain, created_at=T0, kind="interval", interval_seconds=60)
    make_trigger(resume, created_at=T0, kind="interval", interval_seconds=60)
    pause_queue(note="night", by="ops", now=T0)

    with pytest.raises(QueuePaused):
        enqueue_job(plain, trigger="manual", now=T0)
    run_tick(now=T0 + 60 * SECOND)  # the beat claims only the allowed job's trigger

    assert not plain.runs.exists()
    plain_trigger.refresh_from_db()
    assert plain_trigger.next_run_at == T0 + 60 * SECOND  # still due: caught up on resume
    resumer = resume.runs.get()
    assert resumer.trigger == RunTrigger.SCHEDULE
    assert execute(resumer.pk, worker="w", clock=clock(T0 + 61 * SECOND)) == "succeeded"
    assert not is_paused()


def test_maintenance_off_ends_it_and_removes_the_lock_file(redis_client, settings, tmp_path):
    lock_file = tmp_path / "NoLock.ini"
    lock_file.write_text("")
    settings.TAKT_MAINTENANCE_LOCK_FILE = str(lock_file)
    set_maintenance(True, now=T0)
    job = make_job("maintenance off", target="takt.maintenance_off")

    run = enqueue_job(job, trigger="manual", now=T0)
    assert execute(run.pk, worker="w", clock=clock(T0)) == RunStatus.SUCCEEDED

    assert not lock_file.exists() and not in_maintenance()
    run.refresh_from_db()
    assert f"removed the lock file {lock_file}" in run.output
    # Issue 27 (5): the workers' copy is off at once, not at the beat's next
    # mirror pass (30 s): a normal job's run is no longer refused.
    assert redis_client.get(maintenance_key()) is None


def test_deleting_the_lock_file_by_hand_ends_maintenance_for_the_workers_at_the_next_tick(
    redis_client, settings, tmp_path
):
    """Issue 27 (5): the beat wrote the workers' copy every tick while
    maintenance was on, then waited 30 s of its own clock after the file
    went before writing "off"."""
    lock_file = tmp_path / "NoLock.ini"
    lock_file.write_text("")
    settings.TAKT_MAINTENANCE_LOCK_FILE = str(lock_file)
    run_tick(now=T0)
    assert redis_client.get(maintenance_key()) == b"1"

    lock_file.unlink()
    run_tick(now=T0 + SECOND)
    assert redis_client.get(maintenance_key()) is None
    assert Alert.objects.get(key="maintenance").resolved_at is not None


def test_maintenance_going_on_is_recorded_and_alerted_and_going_off_resolves(redis_client):
    set_maintenance(True, note="ERP upgrade", now=T0)

    alert = Alert.objects.get(key="maintenance")
    assert (alert.severity, alert.title) == ("warning", "Maintenance mode on")
    assert "switched on: ERP upgrade" in alert.message
    entries = [e for e in query(job_id=0) if e["kind"] == "maintenance"]
    assert entries[0]["detail"] == "maintenance mode on: ERP upgrade"
    set_maintenance(True, note="again", now=T0)  # already on: no second alert
    assert Alert.objects.get(key="maintenance").count == 1

    set_maintenance(False, now=T0)
    alert.refresh_from_db()
    assert alert.resolved_at is not None


def test_the_lock_file_appearing_is_noticed_by_the_beat(redis_client, settings, tmp_path):
    lock_file = tmp_path / "NoLock.ini"
    settings.TAKT_MAINTENANCE_LOCK_FILE = str(lock_file)
    run_tick(now=T0)
    assert not Alert.objects.filter(key="maintenance").exists()

    lock_file.write_text("")
    run_tick(now=T0 + SECOND)
    run_tick(now=T0 + 2 * SECOND)

    alert = Alert.objects.get(key="maintenance")
    assert f"the lock file {lock_file} on {socket.gethostname()} exists" in alert.message
    assert alert.count == 1
