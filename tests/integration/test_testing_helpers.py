"""The testing helpers Takt ships for its users' suites (F-96), used the way
docs/testing-your-jobs.md shows them: the `takt` fixture of jobs.pytest_plugin, a job
run inline at a frozen time, fire times asserted, a beat tick frozen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from jobs.core.cron import TriggerError
from jobs.models import Job, Trigger
from jobs.services import pause_job
from jobs.testing import fire_times, run_inline

pytestmark = pytest.mark.django_db

T0 = datetime(2027, 1, 4, 8, 0, tzinfo=UTC)


def test_a_job_runs_inline_with_its_params_and_the_time_given(takt, takt_redis_url):
    job = Job.objects.create(name="echo", target="tests.echo", params={"colour": "green"})

    run = takt.run_inline(job, params={"size": 3}, now=[T0, T0.replace(second=2)])

    assert run.status == "succeeded"
    assert (run.started_at, run.finished_at, run.duration_s) == (T0, T0.replace(second=2), 2)
    assert "params=[('colour', 'green'), ('size', 3)]" in run.output
    assert run.result == {"echo": {"colour": "green", "size": 3}}
    assert settings.REDIS_URL == takt_redis_url  # not the Redis of make run


def test_a_failing_job_gives_its_run_failed_with_the_error(takt):
    job = Job.objects.create(name="boom", target="tests.raise")

    run = run_inline(job, trigger="api", now=T0)

    assert (run.status, run.trigger) == ("failed", "api")
    assert "exploded on purpose" in run.message


def test_fire_times_of_an_expression_a_trigger_and_a_job():
    assert fire_times(
        "0 9 * * MON-FRI", count=2, timezone="Europe/Berlin", after="2027-01-01T00:00:00+01:00"
    ) == ["2027-01-01T09:00:00+01:00", "2027-01-04T09:00:00+01:00"]
    job = Job.objects.create(name="twice", target="tests.echo")
    Trigger.objects.create(job=job, kind="cron", cron_expression="0 6 * * *", timezone="UTC")
    Trigger.objects.create(
        job=job, kind="cron", cron_expression="30 2 * * *", timezone="Europe/Berlin"
    )
    # The spring-forward night: 02:30 does not exist, Takt runs it at 03:00 (F-11).
    assert fire_times(job, count=3, after="2027-03-28T00:00:00+00:00") == [
        "2027-03-28T03:00:00+02:00",
        "2027-03-28T06:00:00+00:00",
        "2027-03-29T02:30:00+02:00",
    ]
    with pytest.raises(TriggerError, match="minute"):
        fire_times("61 * * * *")
    with pytest.raises(ValueError, match="UTC offset"):
        fire_times("* * * * *", after="2027-01-01T00:00:00")


def test_a_frozen_tick_records_the_runs_due_then(takt):
    job = Job.objects.create(name="hourly", target="tests.echo")
    trigger = Trigger.objects.create(
        job=job, kind="cron", cron_expression="0 * * * *", timezone="UTC"
    )
    first = trigger.next_run_at
    second = fire_times(trigger, count=1, after=first, as_strings=False)[0]

    (ran,) = takt.tick(first, run=True)
    (queued,) = takt.tick(second)

    assert (ran.status, ran.trigger, ran.scheduled_for) == ("succeeded", "schedule", first)
    assert (queued.status, queued.scheduled_for) == ("queued", second)
    assert takt.tick(second) == []  # that fire time is taken


def test_a_tick_lifts_a_pause_that_ran_out_then_however_soon_after_the_last(takt):
    """A beat lifts pauses at most every 10 s of its monotonic clock; a
    frozen tick at `now` is a whole tick then, whatever real time passed
    since the last one (here: none to speak of)."""
    job = Job.objects.create(name="paused", target="tests.echo")
    until = T0 + timedelta(hours=1)
    assert pause_job(job.pk, note="deploy", by="tests", now=T0, until=until)

    takt.tick(until - timedelta(seconds=1))
    assert Job.objects.get(pk=job.pk).paused  # a second early: still paused
    takt.tick(until)

    assert not Job.objects.get(pk=job.pk).paused


def test_a_tick_holds_takts_builtin_jobs_unless_asked(takt):
    """The migrations make "Takt maintenance", enabled and hourly: in a
    user's test database its trigger is active (Takt's own suite switches
    it off, tests/conftest.py). A tick records the user's jobs only."""
    job = Job.objects.create(name="hourly", target="tests.echo")
    Trigger.objects.create(job=job, kind="cron", cron_expression="7 * * * *", timezone="UTC")
    due = job.triggers.get().next_run_at
    # As migrated (active), due at the same time as the job.
    Trigger.objects.filter(job__target="takt.maintenance").update(active=True, next_run_at=due)

    (mine,) = takt.tick(due)
    (builtin,) = takt.tick(due, builtin_jobs=True)  # held until asked for, still due

    assert mine.job_id == job.pk
    assert builtin.job.target == "takt.maintenance"
    assert set(takt.builtin_job_ids()) == set(
        Job.objects.filter(target__in=["takt.maintenance", "takt.operation"]).values_list(
            "pk", flat=True
        )
    )
