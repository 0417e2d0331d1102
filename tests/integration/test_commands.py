"""Management commands (F-19, F-74) and the built-in Hello world job (F-05)."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from jobs import registry
from jobs.models import Job
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from tests.integration.conftest import make_job


def check_schedule(*args: str) -> list[str]:
    out = StringIO()
    call_command("check_schedule", *args, stdout=out)
    return out.getvalue().splitlines()


def test_check_schedule_prints_the_spring_forward_night_in_the_zone():
    assert check_schedule("30 2 * * *", "--tz", "Europe/Berlin", "--after", "2026-03-28T00:00") == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",  # 02:30 does not exist that night
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
        "2026-04-01T02:30:00+02:00",
    ]


def test_check_schedule_runs_a_fixed_time_once_and_hourly_in_both_copies_when_clocks_go_back():
    after = ["--tz", "europe/berlin", "--after", "2026-10-25T01:30", "--count", "3"]
    assert check_schedule("30 2 * * *", *after) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
        "2026-10-27T02:30:00+01:00",
    ]
    assert check_schedule("0 * * * *", *after) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


def test_check_schedule_in_new_york_with_an_offset_in_after():
    lines = check_schedule(
        "0 30 8 * * MON-FRI",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-06T12:00:00+00:00",
        "--count",
        "2",
    )
    assert lines == ["2026-03-06T08:30:00-05:00", "2026-03-09T08:30:00-04:00"]


def test_check_schedule_defaults_to_the_server_zone():
    lines = check_schedule("0 9 1 1 *", "--after", "2026-06-01T00:00", "--count", "1")
    assert lines == ["2027-01-01T09:00:00+01:00"]  # the test session runs in Europe/Berlin


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["61 * * * *"], "cron_expression"),
        (["0 0 31 4 *"], "cron_expression"),
        (["* * *"], "cron_expression"),
        (["0 9 * * *", "--tz", "Mars/Olympus"], "timezone"),
        (["0 9 * * *", "--count", "0"], "count"),
        (["0 9 * * *", "--count", "1001"], "count"),
        (["0 9 * * *", "--count", "five"], "count"),
        (["0 9 * * *", "--after", "next tuesday"], "after"),
    ],
)
def test_check_schedule_errors_name_the_field(args, field):
    with pytest.raises(CommandError) as exc:
        check_schedule(*args)
    assert str(exc.value).startswith(f"{field}: ")


@pytest.mark.django_db
@pytest.mark.parametrize("enabled", [True, False])
def test_run_job_creates_a_manual_run(enabled):
    job = make_job("nightly", enabled=enabled)
    out = StringIO()

    call_command("run_job", str(job.pk), stdout=out)

    run = Run.objects.get()
    assert (run.job, run.trigger, run.status) == (job, RunTrigger.MANUAL, RunStatus.QUEUED)
    assert out.getvalue() == f"run {run.pk} of job {job.pk} (nightly): queued\n"


@pytest.mark.django_db
@pytest.mark.parametrize("job_id", ["999999", "abc"])
def test_run_job_with_an_unknown_id_fails_and_stores_nothing(job_id):
    with pytest.raises(CommandError, match=f"no job with id '{job_id}'"):
        call_command("run_job", job_id, stdout=StringIO())
    assert not Run.objects.exists()


@pytest.mark.django_db  # not transactional: the row comes from the migration, a flush would drop it
def test_a_fresh_install_has_a_disabled_hello_world_job_that_runs(redis_client):
    job = Job.objects.get(target="takt.hello_world")
    assert (job.name, job.enabled, job.kind) == ("Hello world", False, "callable")
    assert registry.is_known("takt.hello_world")
    trigger = job.triggers.get()
    assert (trigger.kind, trigger.cron_expression, trigger.active) == ("cron", "0 9 * * *", False)

    call_command("run_job", str(job.pk), stdout=StringIO())
    run = job.runs.get()
    assert execute(run.pk, worker="test") == RunStatus.SUCCEEDED

    run.refresh_from_db()
    lines = run.output.splitlines()
    assert lines[:2] == ["Hello, world! This is 'Hello world'.", "Started by trigger: manual"]
    assert lines[2].startswith("The time is ")
    assert lines[3] == f"There are {Job.objects.count()} jobs."


@pytest.mark.django_db
def test_pause_and_resume_queue_commands(capsys, redis_client):
    from runs.queue import is_paused

    call_command("pause_queue", "--note", "deploy")
    assert is_paused()
    call_command("pause_queue")
    call_command("resume_queue")
    assert not is_paused()
    out = capsys.readouterr().out
    assert out.splitlines() == ["queue paused", "queue was already paused", "queue resumed"]


@pytest.mark.django_db
def test_explain_job_says_what_holds_the_job_back(capsys, redis_client):
    from django.utils import timezone

    from heartbeats.processes import report_process
    from jobs.services import pause_job

    job = make_job("nightly")
    report_process("beat@here", now=timezone.now(), detail="scheduler=on")
    report_process("worker:celery@here", now=timezone.now(), detail="concurrency=2")
    pause_job(job.pk, note="waiting for the new API key", by="ops", now=timezone.now())
    call_command("explain_job", str(job.pk))
    out = capsys.readouterr().out
    assert "[NO] job pause: paused: waiting for the new API key" in out
    assert out.rstrip().endswith("held back by: job pause (paused: waiting for the new API key)")
    with pytest.raises(CommandError, match="job: no job with id 999999"):
        call_command("explain_job", "999999")


@pytest.mark.django_db
def test_takt_status_prints_the_queue(capsys, redis_client):
    import json

    from django.utils import timezone

    from heartbeats.processes import report_process
    from runs.queue import pause_queue

    make_job("a")
    pause_queue(note="deploy", by="ops", now=timezone.now())
    call_command("takt_status", "--json")
    status = json.loads(capsys.readouterr().out)
    assert status["paused"] is True and status["pause_note"] == "deploy"
    assert (status["active_count"], status["queued_count"]) == (0, 0)
    report_process("beat@here", now=timezone.now(), detail="scheduler=off")
    call_command("takt_status")
    out = capsys.readouterr().out
    assert re.search(r"^paused +True$", out, re.M), out
    assert re.search(r"^beats +beat@here \(scheduler_enabled=False\)$", out, re.M), out
    assert re.search(r"^scheduler_enabled +False$", out, re.M), out
    report_process("beat@here", now=timezone.now(), detail="scheduler=on clock=+90.0")
    call_command("takt_status")
    out = capsys.readouterr().out
    assert re.search(
        r"^beats +beat@here \(scheduler_enabled=True, clock_skew_s=\+90\.0 \(off\)\)$", out, re.M
    ), out
    from runs.queue import resume_queue

    resume_queue(now=timezone.now())


@pytest.mark.django_db
def test_maintenance_mode_command(capsys, redis_client):
    from runs.queue import in_maintenance

    call_command("maintenance_mode", "on", "--note", "upgrade")
    assert in_maintenance()
    call_command("maintenance_mode", "on")
    call_command("maintenance_mode", "off")
    assert not in_maintenance()
    assert capsys.readouterr().out.splitlines() == [
        "maintenance mode on",
        "maintenance mode was already on",
        "maintenance mode off",
    ]
