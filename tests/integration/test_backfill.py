"""F-101: backfill over a past range."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from runs.backfill import backfill
from runs.models import Run, RunStatus, RunTrigger
from tests.integration.conftest import SECOND, make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
HOUR = 3600 * SECOND


def hourly_job(**fields):
    job = make_job(**fields)
    make_trigger(job, created_at=T0, kind="interval", interval_seconds=3600, start_at=T0)
    return job


def test_backfill_creates_one_run_per_fire_time_oldest_first_one_after_another():
    job = hourly_job()
    Run.objects.create(  # 10:00 already ran
        job=job, trigger=RunTrigger.SCHEDULE, scheduled_for=T0 + 2 * HOUR,
        enqueued_at=T0, status=RunStatus.SUCCEEDED,
    )  # fmt: skip
    result = backfill(job, start=T0, end=T0 + 3 * HOUR, now=T0 + 10 * HOUR)
    assert result.already_ran == 1
    runs = list(job.runs.filter(trigger=RunTrigger.CATCHUP).order_by("scheduled_for"))
    assert [(r.scheduled_for, r.held) for r in runs] == [
        (T0, False),  # sent at once
        (T0 + HOUR, True),  # the rest wait their turn
        (T0 + 3 * HOUR, True),
    ]
    again = backfill(job, start=T0, end=T0 + 3 * HOUR, now=T0 + 10 * HOUR)
    assert (again.created, again.already_ran) == ([], 4)  # never a fire time twice


def test_backfill_of_a_busy_job_with_overlap_skip_creates_nothing_and_says_why():
    job = hourly_job()
    Run.objects.create(job=job, trigger="manual", scheduled_for=T0, enqueued_at=T0,
                       status=RunStatus.RUNNING)  # fmt: skip
    result = backfill(job, start=T0, end=T0 + HOUR, now=T0 + 10 * HOUR)
    assert result.created == [] and "already has an active run" in result.skipped_reason


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "2026-06-01T12:00", "--to", "2026-06-01T10:00"], "end: must not be before"),
        (["--from", "yesterday", "--to", "2026-06-01T10:00"], "--from: not an ISO-8601"),
        (["--from", "2026-06-01", "--to", "2999-01-01"], "end: must not be in the future"),
        (["--from", "2026-06-01", "--to", "2026-09-01"], "more than 1000 fire times"),
    ],
)
def test_backfill_command_refuses_bad_ranges_naming_the_option(args, message):
    job = hourly_job()
    with pytest.raises(CommandError, match=message):
        call_command("backfill", str(job.pk), *args)
    assert not job.runs.exists()


def test_backfill_command_dry_run_lists_the_fire_times(capsys):
    job = hourly_job()
    call_command("backfill", str(job.pk), "--from", "2026-06-01T08:00+00:00",
                 "--to", "2026-06-01T10:00+00:00", "--dry-run")  # fmt: skip
    out = capsys.readouterr().out
    assert "3 fire time(s) in the range" in out and "2026-06-01T09:00:00+00:00" in out
    assert not job.runs.exists()


def test_backfill_never_runs_a_fire_time_twice_when_its_trigger_has_jitter(redis_client):
    """Issue 27, defect 3: the beat keyed the 08:00 run as 08:00 + its
    jitter, backfill looked for 08:00 and ran it a second time (F-100)."""
    from runs.dispatch import claim_due_runs

    job = make_job()
    make_trigger(
        job, created_at=T0, kind="interval", interval_seconds=3600, start_at=T0, jitter_seconds=600
    )
    claim_due_runs(now=T0, limit=10)  # the beat claims 08:00
    beat_run = job.runs.get()
    assert T0 < beat_run.scheduled_for <= T0 + 600 * SECOND  # this fire time's jitter is not 0
    Run.objects.filter(pk=beat_run.pk).update(status=RunStatus.SUCCEEDED)  # it ran at 08:0x

    result = backfill(job, start=T0, end=T0 + HOUR, now=T0 + 10 * HOUR)

    assert result.already_ran == 1 and len(result.created) == 1
    assert job.runs.filter(scheduled_for__lt=T0 + HOUR).count() == 1, "08:00 ran twice"
    again = backfill(job, start=T0, end=T0 + HOUR, now=T0 + 10 * HOUR)
    assert (again.created, again.already_ran) == ([], 2)
