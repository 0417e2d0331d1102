"""Progress of maintenance and of the commands (F-93): a maintenance pass
reports a step per section and per cleanup batch (the built-in job's run
shows it; takt_maintenance prints it on stderr), and backfill prints its
progress on stderr while stdout keeps its summary."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobs.models import Job
from runs.execution import execute
from runs.maintenance import run_maintenance
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run
from tests.integration.conftest import make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

NOW = utc(2026, 6, 10, 12, 0)
DAY = timedelta(days=1)


def old_runs(n: int, *, now) -> None:
    job = make_job("old")
    done_at = now - 15 * DAY
    Run.objects.bulk_create(
        Run(job=job, trigger=RunTrigger.MANUAL, status=RunStatus.SUCCEEDED,
            scheduled_for=done_at, enqueued_at=done_at, finished_at=done_at)
        for _ in range(n)
    )  # fmt: skip


def test_a_maintenance_pass_reports_a_step_per_section_and_per_cleanup_batch():
    old_runs(25, now=NOW)
    steps: list[tuple[int, int, str]] = []

    run_maintenance(now=NOW, batch=10, progress=lambda *step: steps.append(step))

    assert steps == [
        (1, 9, "Recover lost runs: marked 0 runs lost"),
        (2, 9, "Expire runs: marked 0 runs failed (queued or running for more than 7 days)"),
        (3, 9, "Cleanup 'runs': batch 1 of 3, 10 runs deleted"),
        (4, 9, "Cleanup 'runs': batch 2 of 3, 20 runs deleted"),
        (5, 9, "Cleanup 'runs': batch 3 of 3, 25 runs deleted"),
        (6, 9, "Cleanup 'runs': deleted 25 finished runs older than 14 days in 3 batches"
               " (3 audit rows)"),
        (7, 9, "Cleanup 'decisions': deleted 0 decisions older than 30 days"),
        (8, 9, "Checks: all checks passed"),
        (9, 9, "Stalled schedules: none (every trigger that can fire has a next fire time or a"
               " run to set it)"),
    ]  # fmt: skip


def test_a_section_that_fails_still_moves_the_progress_on():
    steps: list[tuple[int, int, str]] = []
    run_maintenance(now=NOW, only=["cleanup", "checks"], dry_run=True,
                    progress=lambda *step: steps.append(step))  # fmt: skip
    assert [(done, total) for done, total, _ in steps] == [(1, 2), (2, 2)]


def test_the_maintenance_jobs_run_stores_its_final_progress(redis_client):
    old_runs(3, now=timezone.now())
    job = Job.objects.get(target="takt.maintenance")
    run = create_run(job, trigger=RunTrigger.MANUAL, now=timezone.now())

    assert execute(run.pk, worker="test") == RunStatus.SUCCEEDED

    run.refresh_from_db()
    assert run.progress == {
        "done": 7,
        "total": 7,
        "note": "Stalled schedules: none (every trigger that can fire has a next fire time or a"
        " run to set it)",
    }


def test_takt_maintenance_prints_its_progress_on_stderr_and_its_report_on_stdout():
    old_runs(3, now=timezone.now())
    out, err = StringIO(), StringIO()

    call_command("takt_maintenance", "--only", "cleanup", stdout=out, stderr=err)

    assert out.getvalue().splitlines() == [
        "Cleanup 'runs': deleted 3 finished runs older than 14 days in 1 batch (1 audit row)"
    ]
    assert err.getvalue().splitlines() == [
        "takt_maintenance: 1 of 2 (50 %): Cleanup 'runs': batch 1 of 1, 3 runs deleted",
        "takt_maintenance: 2 of 2 (100 %): Cleanup 'runs': deleted 3 finished runs older than"
        " 14 days in 1 batch (1 audit row)",
    ]


def test_backfill_prints_progress_every_ten_percent_on_stderr_and_the_summary_on_stdout():
    job = make_job("every minute")
    start = utc(2026, 6, 1, 8, 0)
    make_trigger(job, created_at=start, kind="interval", interval_seconds=60, start_at=start)
    out, err = StringIO(), StringIO()

    call_command("backfill", str(job.pk), "--from", "2026-06-01T08:00+00:00",
                 "--to", "2026-06-01T09:39+00:00", stdout=out, stderr=err)  # fmt: skip

    assert out.getvalue().splitlines()[0] == "100 fire time(s) in the range; 0 already have a run"
    lines = err.getvalue().splitlines()
    assert lines[0] == "backfill: 0 of 100 (0 %): fire times handled"
    assert lines[1] == "backfill: 10 of 100 (10 %): fire times handled"
    assert lines[-1] == "backfill: 100 of 100 (100 %): fire times handled"
    assert len(lines) == 11
