"""F-12 as the migration manual says it (issue 27, item 5), through the real
beat tick, bulk and row by row: an interval anchored on the enqueue
(`after_enqueue`) fires next at the claim's moment + N; a busy job (overlap
skip/buffer) leaves the due time due, it is caught up once after the run
ends, then it is that enqueue + N. The grid (`fixed_rate`, and its old name
`from_enqueue`) keeps its times. The old name is accepted everywhere."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

import runs.busy
import runs.dispatch
from jobs.models import Trigger
from runs.decisions import query
from runs.ending import finish_run
from runs.execution import execute
from runs.locks import job_lock
from runs.models import RunStatus, RunTrigger
from runs.services import create_run, start_run
from tests.integration.api_helpers import SessionClient, user_with
from tests.integration.conftest import SECOND, beat_tick, clock, make_job, make_trigger, utc
from tests.integration.test_admin import change_url, job_form, trigger_row
from tests.integration.test_api_jobs import JOB_PERMS

T0 = utc(2026, 6, 1, 8, 0)
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_busy_notes():
    """The beat notes a busy spell once per job id (runs.busy._NOTED): ids
    repeat from test to test."""
    runs.busy._NOTED.clear()
    yield
    runs.busy._NOTED.clear()


tick = beat_tick


def interval(job, anchor, seconds=60):
    return make_trigger(
        job, created_at=T0, kind="interval", interval_seconds=seconds, interval_anchor=anchor
    )


def busy(job, *, started_at):
    """A run of `job` running since `started_at` on a live worker: it holds
    the job's lock as its worker does. Without the lock the beat's lost-run
    check, whenever its throttle lets it run in this process, marks it lost
    and the job is no longer busy (seen in CI: the order of the files
    decided)."""
    manual = create_run(job, trigger=RunTrigger.MANUAL, now=started_at)
    assert start_run(manual, worker="w", now=started_at)
    manual.lock = job_lock(job.pk, run_id=manual.pk, ttl_s=600)
    assert manual.lock.acquire()
    return manual


def ended(run, *, now):
    """The busy run ends as its worker ends it: recorded, then its lock freed."""
    assert finish_run(run, status=RunStatus.SUCCEEDED, now=now)
    run.lock.release()


def test_the_next_time_is_the_enqueue_plus_n(claim_path, redis_client):
    """Enqueued 5 s late, it fires next 60 s after that: it drifts."""
    job = make_job("sync")
    trigger = interval(job, "after_enqueue")
    assert trigger.next_run_at == T0 + 60 * SECOND

    tick(T0 + 65 * SECOND)

    run = job.runs.get()
    assert (run.scheduled_for, run.trigger) == (T0 + 60 * SECOND, RunTrigger.SCHEDULE)
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 125 * SECOND
    # The run's start and end move nothing.
    assert execute(run.pk, worker="w", clock=clock(T0 + 66 * SECOND, T0 + 90 * SECOND)) == (
        RunStatus.SUCCEEDED
    )
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 125 * SECOND


@pytest.mark.parametrize("anchor", ["fixed_rate", "from_enqueue"])
def test_the_grid_keeps_its_times(anchor, claim_path, redis_client):
    job = make_job("sync")
    trigger = interval(job, anchor)
    assert trigger.interval_anchor == "fixed_rate"  # the old name is the grid

    tick(T0 + 65 * SECOND)

    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 120 * SECOND


@pytest.mark.parametrize("overlap", ["skip", "buffer_one", "buffer_all"])
@pytest.mark.parametrize("missed_policy", ["run_once", "skip"])
def test_a_busy_job_catches_the_due_time_up_once_after_the_run_then_now_plus_n(
    overlap, missed_policy, claim_path, redis_client
):
    """The manual: "Läuft für dieselbe Migration bereits ein Lauf, wird kein
    zweiter eingereiht. Der Termin bleibt fällig und wird nach Abschluss
    einmal nachgeholt." Due at 08:01:00 while a run goes on from 08:00:30
    to 08:04:00 (longer than the grace): no run and no skipped record, the
    time stays due at every poll; the first poll after the end makes ONE
    run for it, and the next time is that poll + 60 s. Held, not missed:
    even the missed-run policy `skip` catches it up."""
    job = make_job("sync", overlap_policy=overlap, missed_run_policy=missed_policy)
    trigger = interval(job, "after_enqueue")
    manual = busy(job, started_at=T0 + 30 * SECOND)

    for at in (60, 61, 120, 239):  # at the instant, one second later, ...
        # the due time stays due, but the beat sleeps a poll, never spins
        assert tick(T0 + at * SECOND) >= settings.TAKT_POLL_SECONDS
        assert list(job.runs.exclude(pk=manual.pk)) == [], f"a run at +{at} s"
        trigger.refresh_from_db()
        assert trigger.next_run_at == T0 + 60 * SECOND, "the due time must stay due"
    assert [d["kind"] for d in query(job_id=job.pk)].count("busy") == 1

    ended(manual, now=T0 + 240 * SECOND)
    tick(T0 + 241 * SECOND)

    caught = job.runs.exclude(pk=manual.pk).get()
    assert caught.scheduled_for == T0 + 60 * SECOND
    assert caught.status == RunStatus.QUEUED and not caught.held
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 301 * SECOND  # that enqueue + N
    assert execute(caught.pk, worker="w", clock=clock(T0 + 242 * SECOND, T0 + 250 * SECOND)) == (
        RunStatus.SUCCEEDED
    )
    tick(T0 + 300 * SECOND)
    assert job.runs.count() == 2
    tick(T0 + 301 * SECOND)
    assert job.runs.get(scheduled_for=T0 + 301 * SECOND).trigger == RunTrigger.SCHEDULE
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 361 * SECOND


def test_the_grid_behind_a_busy_job_is_still_skipped(claim_path, redis_client):
    """Unchanged for the grid: the overlap policy records the fire time
    `skipped` and the grid goes on."""
    job = make_job("sync")
    trigger = interval(job, "fixed_rate")
    busy(job, started_at=T0 + 30 * SECOND)

    tick(T0 + 60 * SECOND)

    assert job.runs.get(trigger=RunTrigger.SCHEDULE).status == RunStatus.SKIPPED
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 120 * SECOND


def test_allow_admits_a_parallel_run(claim_path, redis_client):
    job = make_job("sync", overlap_policy="allow", max_instances=2)
    trigger = interval(job, "after_enqueue")
    busy(job, started_at=T0 + 30 * SECOND)

    tick(T0 + 60 * SECOND)

    assert job.runs.get(trigger=RunTrigger.SCHEDULE).status == RunStatus.QUEUED
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 120 * SECOND


def test_held_triggers_do_not_hold_up_the_others(settings, redis_client):
    """A batch full of held triggers: the tick reads the next batch."""
    settings.TAKT_CLAIM_BATCH = 1
    held = make_job("busy")
    interval(held, "after_enqueue", seconds=30)
    busy(held, started_at=T0 + 10 * SECOND)
    other = make_job("other")
    interval(other, "after_enqueue")

    tick(T0 + 60 * SECOND)

    assert other.runs.get().scheduled_for == T0 + 60 * SECOND
    assert held.runs.count() == 1


def test_the_api_takes_the_old_name_for_the_grid(redis_client):
    client = SessionClient(user_with(*JOB_PERMS))
    body: dict[str, Any] = {
        "name": "sync",
        "target": "tests.echo",
        "triggers": [
            {"kind": "interval", "interval_seconds": 60, "interval_anchor": "from_enqueue"}
        ],
    }
    response = client.send("post", "/api/v1/jobs", body)
    assert response.status_code == 201, response.content
    assert response.json()["triggers"][0]["interval_anchor"] == "fixed_rate"
    assert Trigger.objects.get(job_id=response.json()["id"]).interval_anchor == "fixed_rate"


def test_the_manuals_api_field_makes_the_manuals_interval(redis_client):
    """auto_sync_interval_minutes (the migration manual's field) makes a
    new interval anchored on the enqueue."""
    client = SessionClient(user_with(*JOB_PERMS))
    body = {"name": "sync", "target": "tests.echo", "auto_sync_interval_minutes": 60}
    response = client.send("post", "/api/v1/jobs", body)
    assert response.status_code == 201, response.content
    assert Trigger.objects.get(job_id=response.json()["id"]).interval_anchor == "after_enqueue"


def test_the_migration_renames_the_stored_grid_and_nothing_else(redis_client):
    """Migration 0022: a trigger stored `from_enqueue` (the grid) becomes
    `fixed_rate`, keeping its next_run_at; going back refuses while an
    `after_enqueue` trigger exists."""
    migration = importlib.import_module("jobs.migrations.0022_interval_anchor_names")
    state = MigrationExecutor(connection).loader.project_state(
        ("takt_jobs", "0022_interval_anchor_names")
    )
    job = make_job("sync")
    grid = interval(job, "fixed_rate")
    finish = interval(job, "from_finish")
    Trigger.objects.filter(pk=grid.pk).update(interval_anchor="from_enqueue")

    migration.forwards(state.apps, None)

    after = Trigger.objects.get(pk=grid.pk)
    assert (after.interval_anchor, after.next_run_at) == ("fixed_rate", grid.next_run_at)
    assert Trigger.objects.get(pk=finish.pk).interval_anchor == "from_finish"
    interval(job, "after_enqueue")
    with pytest.raises(RuntimeError, match="after_enqueue"):
        migration.backwards(state.apps, None)


@pytest.mark.parametrize(
    ("posted", "stored"),
    [
        ("after_enqueue", "after_enqueue"),
        ("fixed_rate", "fixed_rate"),
        ("from_enqueue", "fixed_rate"),
    ],
)
def test_the_admin_offers_both_and_takes_the_old_name(posted, stored, admin_client):
    job = make_job("sync")
    row = trigger_row(job, kind="interval", interval_seconds="3600", interval_anchor=posted)

    with time_machine.travel(T0, tick=False):
        response = admin_client.post(change_url(job), job_form(job, row))

    assert response.status_code == 302, response.context and response.context["errors"]
    assert job.triggers.get().interval_anchor == stored


def test_the_admin_says_which_is_which_in_german(admin_client):
    job = make_job("sync")
    interval(job, "after_enqueue", seconds=3600)
    german = {"HTTP_ACCEPT_LANGUAGE": "de-DE,de;q=0.9,en;q=0.5"}

    editor = admin_client.get(change_url(job), **german).content.decode()
    listing = admin_client.get(reverse("admin:takt_jobs_job_changelist"), **german)

    assert "Festes Raster (feste Rate: Start + k × N)" in editor
    assert "N nach dem Einreihen des vorigen Laufs (verschiebt sich)" in editor
    assert "alle 1 Stunde nach dem Einreihen des vorigen Laufs" in listing.content.decode()


def test_an_import_or_a_declaration_takes_the_old_name_as_unchanged(redis_client):
    """The export/import format (also config-as-code's): a file written
    before the rename says `from_enqueue`; it makes the grid, and importing
    it again changes nothing."""
    from jobs.importing import import_jobs

    entry = {
        "key": "sync",
        "name": "sync",
        "target": "tests.echo",
        "triggers": [
            {"kind": "interval", "interval_seconds": 60, "interval_anchor": "from_enqueue"}
        ],
    }
    (first,) = import_jobs([entry], now=T0, by="test")
    (again,) = import_jobs([entry], now=T0 + SECOND, by="test")

    assert first.action == "create"
    assert again.action == "unchanged", again.changes
    assert Trigger.objects.get(job__key="sync").interval_anchor == "fixed_rate"


@pytest.mark.parametrize(
    ("anchor", "words"),
    [
        ("after_enqueue", "every 1 hour after the previous run was enqueued"),
        ("from_enqueue", "every 1 hour"),
    ],
)
def test_check_schedule_previews_both(anchor, words, admin_client):
    body = {"kind": "interval", "interval_seconds": 3600, "interval_anchor": anchor, "count": 2}
    with time_machine.travel(T0, tick=False):
        answer = admin_client.post(
            "/api/v1/schedule/preview", body, content_type="application/json"
        )
    assert answer.status_code == 200, answer.json()
    assert answer.json()["description"] == words
    assert answer.json()["fire_times"] == ["2026-06-01T09:00:00Z", "2026-06-01T10:00:00Z"]
