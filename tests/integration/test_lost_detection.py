"""The beat's continuous lost-run check (F-70, F-82): every
TAKT_LOST_CHECK_SECONDS the tick marks `lost` the running runs older than the
lock TTL whose job holds no lock slot under their token, with the retry
their job's policy plans, and frees the job at once; it waits while Redis's
data is younger than the TTL + 1 s. Real database, private Redis."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest
import time_machine
from django.db import connection

import runs.tick
from jobs.models import Job
from runs.locks import job_lock
from runs.models import Run, RunStatus, RunTrigger
from runs.recovery import LOST_MESSAGE, _mark_lost, check_lost_runs, lost_candidates
from runs.redis_age import set_data_age, since_key
from runs.tick import run_tick
from tests.integration.conftest import SECOND, broker_task_ids, make_job, make_trigger, utc
from tests.integration.conftest import running_run as make_running_run
from tests.processes import free_port

pytestmark = pytest.mark.django_db

NOW = utc(2026, 6, 10, 12, 0)
TTL = 30 * SECOND  # TAKT_LOCK_TTL_SECONDS in the test process


def running_run(job: Job, *, started_at: Any) -> Run:
    return make_running_run(job, started_at=started_at, trigger=RunTrigger.SCHEDULE)


def held_run(job: Job, *, enqueued_at: Any) -> Run:
    return Run.objects.create(
        job=job,
        trigger=RunTrigger.CATCHUP,
        status=RunStatus.QUEUED,
        held=True,
        scheduled_for=enqueued_at,
        enqueued_at=enqueued_at,
    )


@pytest.fixture
def check_due(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tick's next lost-run check is due (it ran long ago)."""
    monkeypatch.setattr(runs.tick, "_lost_checked_at", float("-inf"))


def tick(now: Any) -> None:
    with time_machine.travel(now, tick=False):
        run_tick(now=now)


def test_the_tick_marks_a_run_whose_slot_is_empty_past_the_ttl_lost_and_retries_it(
    redis_client, check_due
):
    job = make_job(max_retries=1, retry_backoff_s=5, retry_jitter=0)
    run = running_run(job, started_at=NOW - TTL - SECOND)

    tick(NOW)

    run.refresh_from_db()
    assert (run.status, run.finished_at) == (RunStatus.LOST, NOW)
    assert run.message == f"{LOST_MESSAGE}; retry 1 of 1 in 5 s"
    retries = Run.objects.filter(retry_of=run, trigger=RunTrigger.RETRY, attempt=2)
    assert list(retries.values_list("status", "scheduled_for")) == [
        (RunStatus.QUEUED, NOW + 5 * SECOND)
    ]


def test_a_run_whose_slot_holds_its_token_is_not_lost(redis_client, check_due):
    job = make_job(overlap_policy="allow", max_instances=3)
    run = running_run(job, started_at=NOW - 10 * TTL)
    assert job_lock(job.pk, slot=2, run_id=run.pk).acquire()

    tick(NOW)

    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_a_run_in_a_slot_above_a_lowered_max_instances_is_not_lost(redis_client):
    job = make_job(overlap_policy="allow", max_instances=5)
    run = running_run(job, started_at=NOW - 10 * TTL)
    assert job_lock(job.pk, slot=4, run_id=run.pk).acquire()
    job.max_instances = 1
    job.save()

    assert check_lost_runs(now=NOW) == {"locked": 1}
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_a_run_is_lost_only_after_the_ttl_at_the_instant_and_one_second_later(redis_client):
    job = make_job()
    run = running_run(job, started_at=NOW - TTL)

    assert check_lost_runs(now=NOW) == {}
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING

    assert check_lost_runs(now=NOW + SECOND) == {"lost": 1}
    assert Run.objects.get(pk=run.pk).status == RunStatus.LOST


def test_right_after_a_redis_flush_nothing_is_marked_until_the_grace_is_over(redis_client, caplog):
    run = running_run(make_job(), started_at=NOW - 10 * TTL)
    redis_client.flushdb()  # a restart without persistence: every lock key is gone

    caplog.set_level(logging.INFO, logger="takt.maintenance")
    assert check_lost_runs(now=NOW) == {"waited": 1}  # the data is 0 s old
    assert "lost-run check waits: Redis's data is 0.0 s old" in caplog.text
    # The age is Redis's own (runs/redis_age.py): its clock moves on.
    set_data_age(redis_client, TTL.total_seconds())
    assert check_lost_runs(now=NOW + TTL) == {"waited": 1}  # 30 s: less than TTL + 1 s
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING

    set_data_age(redis_client, (TTL + SECOND).total_seconds())
    assert check_lost_runs(now=NOW + TTL + SECOND) == {"lost": 1}
    assert Run.objects.get(pk=run.pk).status == RunStatus.LOST


def test_a_live_keeper_that_re_took_its_lock_within_the_grace_keeps_its_run(redis_client):
    job = make_job()
    run = running_run(job, started_at=NOW - 10 * TTL)
    redis_client.delete(since_key())  # Redis lost its data at NOW
    assert check_lost_runs(now=NOW) == {"waited": 1}
    assert job_lock(job.pk, run_id=run.pk).acquire()  # the keeper's next renewal

    set_data_age(redis_client, (TTL + SECOND).total_seconds())  # Redis's clock moved on
    assert check_lost_runs(now=NOW + TTL + SECOND) == {"locked": 1}
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_a_lost_run_frees_its_job_and_its_next_held_run_is_sent_at_once(
    redis_client, django_capture_on_commit_callbacks
):
    job = make_job(overlap_policy="buffer_all")
    lost = running_run(job, started_at=NOW - TTL - SECOND)
    waiting = held_run(job, enqueued_at=NOW - 5 * SECOND)

    with django_capture_on_commit_callbacks(execute=True):
        check_lost_runs(now=NOW)

    assert Run.objects.get(pk=lost.pk).status == RunStatus.LOST
    waiting.refresh_from_db()
    assert (waiting.status, waiting.held) == (RunStatus.QUEUED, False)
    assert waiting.published_at is not None
    assert broker_task_ids(redis_client) == [waiting.task_id]


def test_two_beats_checking_at_once_mark_a_run_lost_once(redis_client, caplog):
    job = make_job(max_retries=3, retry_jitter=0)
    run = running_run(job, started_at=NOW - TTL - SECOND)
    stale_copy = Run.objects.select_related("job").get(pk=run.pk)
    caplog.set_level(logging.WARNING, logger="takt.maintenance")

    assert check_lost_runs(now=NOW) == {"lost": 1, "retried": 1}
    # The other beat loaded the run before the first marked it: its
    # compare-and-set loses, no second retry, no second log line.
    counts: Counter[str] = Counter()
    _mark_lost(stale_copy, counts, now=NOW + SECOND)

    assert counts == {}
    assert Run.objects.filter(retry_of=run).count() == 1
    assert caplog.text.count(f"run {run.pk} of job {job.pk} lost") == 1


def test_the_check_runs_once_per_period(settings, redis_client, check_due):
    settings.TAKT_LOST_CHECK_SECONDS = 1
    first = running_run(make_job("first"), started_at=NOW - TTL - SECOND)

    tick(NOW)
    second = running_run(make_job("second"), started_at=NOW - TTL - SECOND)
    tick(NOW)
    assert Run.objects.get(pk=first.pk).status == RunStatus.LOST
    assert Run.objects.get(pk=second.pk).status == RunStatus.RUNNING  # within the period

    time.sleep(1.0)
    tick(NOW + SECOND)

    assert Run.objects.get(pk=second.pk).status == RunStatus.LOST


def test_a_redis_error_in_the_check_is_logged_and_the_tick_goes_on(
    settings, redis_client, caplog, check_due
):
    run = running_run(make_job(), started_at=NOW - TTL - SECOND)
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there

    tick(NOW)  # no exception

    assert "the lost-run check failed" in caplog.text
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_an_idle_check_is_one_query_on_the_running_runs_index(
    redis_client, django_assert_num_queries
):
    running_run(make_job("young"), started_at=NOW)
    with django_assert_num_queries(1):
        assert check_lost_runs(now=NOW) == {}
    plan = lost_candidates(now=NOW).select_related("job")[:500].explain()
    assert "run_running_idx" in plan, plan
    assert connection.vendor in ("sqlite", "postgresql")


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("0", "TAKT_LOST_CHECK_SECONDS: must be between 1 and 3600, got '0'"),
        ("5s", "TAKT_LOST_CHECK_SECONDS: expected a whole number, got '5s'"),
    ],
)
def test_a_bad_check_period_stops_the_process_naming_the_setting(raw, error):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "scheduler_project.settings"}
    env["TAKT_LOST_CHECK_SECONDS"] = raw
    code = "import django; django.setup()"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and error in done.stderr


@pytest.fixture
def nothing_unjudged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs.tick, "_unjudged", frozenset())


def test_a_skip_job_is_not_skipped_behind_a_run_the_check_cannot_judge_yet(
    redis_client, check_due, nothing_unjudged
):
    """Right after a Redis loss nobody can tell whether a running run's
    worker lives (its lock key went with the data): its job's due fire
    times wait, the check runs every tick, and once it can judge, the dead
    run is lost and the fire time runs instead of being skipped behind it.
    Other jobs are dispatched meanwhile."""
    blocked = make_job("blocked")  # overlap policy skip
    other = make_job("other")
    for job in (blocked, other):
        make_trigger(job, created_at=NOW - 2 * TTL, kind="interval", interval_seconds=60)
    dead = running_run(blocked, started_at=NOW - 2 * TTL)
    redis_client.flushdb()  # the restart: lock keys and the data's age are gone

    tick(NOW)  # the data is 0 s old: the check cannot judge run `dead`

    assert Run.objects.get(pk=dead.pk).status == RunStatus.RUNNING
    assert not Run.objects.filter(job=blocked).exclude(pk=dead.pk).exists()  # not skipped
    assert Run.objects.filter(job=other, status=RunStatus.QUEUED).count() == 1
    assert runs.tick._unjudged == {blocked.pk}

    set_data_age(redis_client, (TTL + 2 * SECOND).total_seconds())  # on Redis's clock
    tick(NOW + TTL + 2 * SECOND)  # older than TTL + 1 s: judged at the very next tick

    assert Run.objects.get(pk=dead.pk).status == RunStatus.LOST
    queued = Run.objects.filter(job=blocked).exclude(pk=dead.pk)
    assert [r.status for r in queued] == [RunStatus.QUEUED]
    assert runs.tick._unjudged == frozenset()
