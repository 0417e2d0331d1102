"""Maintenance (F-52, F-70..F-73): runs.maintenance.run_maintenance, the
`takt_maintenance` command and the built-in hourly job, against the real
database and the private Redis."""

from __future__ import annotations

import importlib
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings
from django.utils import timezone

from jobs import registry
from jobs.models import Job
from runs.execution import execute
from runs.locks import job_lock
from runs.maintenance import Severity, maintenance_finished, run_maintenance
from runs.models import AuditRecord, Run, RunStatus, RunTrigger
from runs.recovery import LOST_MESSAGE
from runs.services import create_run
from tests.integration.conftest import SECOND, make_job, running_run, utc

pytestmark = pytest.mark.django_db

NOW = utc(2026, 6, 10, 12, 0)
DAY = timedelta(days=1)
MINUTE = 60 * SECOND
TTL = 30 * SECOND  # TAKT_LOCK_TTL_SECONDS in the test process


def finished_run(job: Job, *, finished_at: Any, status: str = RunStatus.SUCCEEDED) -> Run:
    return Run.objects.create(
        job=job,
        trigger=RunTrigger.MANUAL,
        status=status,
        scheduled_for=finished_at - SECOND,
        enqueued_at=finished_at - SECOND,
        started_at=finished_at - SECOND,
        finished_at=finished_at,
        duration_s=1.0,
    )


def queued_run(job: Job, *, enqueued_at: Any, scheduled_for: Any = None) -> Run:
    return Run.objects.create(
        job=job,
        trigger=RunTrigger.MANUAL,
        status=RunStatus.QUEUED,
        scheduled_for=scheduled_for or enqueued_at,
        enqueued_at=enqueued_at,
    )


def drop_table(table: str) -> None:
    """Inside the test's transaction: rolled back when the test ends."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {connection.ops.quote_name(table)}")


# --- lost runs (F-70) -------------------------------------------------------


def test_a_running_run_whose_lock_is_gone_is_marked_lost_and_retried(redis_client):
    job = make_job(max_retries=1, retry_backoff_s=5, retry_jitter=0)
    run = running_run(job, started_at=NOW - TTL - SECOND)

    report = run_maintenance(now=NOW, only=["lost"])

    run.refresh_from_db()
    assert (run.status, run.finished_at, run.duration_s) == (RunStatus.LOST, NOW, None)
    assert run.message == f"{LOST_MESSAGE}; retry 1 of 1 in 5 s"
    retry = Run.objects.get(retry_of=run)
    assert (retry.status, retry.trigger, retry.attempt, retry.scheduled_for) == (
        RunStatus.QUEUED,
        RunTrigger.RETRY,
        2,
        NOW + 5 * SECOND,
    )
    assert report.lines() == ["Recover lost runs: marked 1 run lost (1 retried)"]
    assert not report.failed


def test_a_lost_run_of_a_job_without_retries_is_not_retried(redis_client):
    job = make_job(max_retries=0)
    run = running_run(job, started_at=NOW - TTL - SECOND)

    run_maintenance(now=NOW, only=["lost"])

    run.refresh_from_db()
    assert (run.status, run.message) == (RunStatus.LOST, LOST_MESSAGE)
    assert job.runs.count() == 1


def test_a_run_is_lost_only_once_it_is_older_than_the_lock_ttl(redis_client):
    job = make_job()
    at_ttl = running_run(job, started_at=NOW - TTL)
    older = running_run(make_job(), started_at=NOW - TTL - SECOND)

    run_maintenance(now=NOW, only=["lost"])

    at_ttl.refresh_from_db()
    older.refresh_from_db()
    assert (at_ttl.status, older.status) == (RunStatus.RUNNING, RunStatus.LOST)


def test_a_running_run_whose_job_holds_a_lock_slot_is_left_alone(redis_client):
    one_slot = make_job("one slot")
    parallel = make_job("parallel", overlap_policy="allow", max_instances=5)
    job_lock(one_slot.pk).acquire()
    job_lock(parallel.pk, slot=3).acquire()
    runs = [running_run(job, started_at=NOW - DAY) for job in (one_slot, parallel)]

    report = run_maintenance(now=NOW, only=["lost"])

    assert [Run.objects.get(pk=r.pk).status for r in runs] == [RunStatus.RUNNING] * 2
    assert report.lines() == [
        "Recover lost runs: marked 0 runs lost; 2 runs running for longer than the lock TTL"
        " left alone (their job's lock is held)"
    ]


def test_a_run_that_ended_meanwhile_is_not_marked_lost(redis_client, monkeypatch):
    run = running_run(make_job(max_retries=1), started_at=NOW - DAY)
    import runs.recovery as recovery

    real_plan = recovery.plan_retry

    def plan_then_the_worker_ends_it(r: Run, **kwargs: Any) -> Any:
        Run.objects.filter(pk=r.pk).update(status=RunStatus.SUCCEEDED, finished_at=NOW)
        return real_plan(r, **kwargs)

    monkeypatch.setattr(recovery, "plan_retry", plan_then_the_worker_ends_it)

    report = run_maintenance(now=NOW, only=["lost"])

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert not Run.objects.filter(retry_of=run).exists()
    assert report.counts() == {"lost": {}}


def test_dry_run_counts_lost_runs_and_changes_nothing(redis_client):
    run = running_run(make_job(), started_at=NOW - DAY)

    report = run_maintenance(now=NOW, only=["lost"], dry_run=True)

    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    assert report.lines() == ["Recover lost runs: would mark 1 run lost"]


# --- expired runs (F-71) ----------------------------------------------------


def test_runs_queued_or_running_for_more_than_7_days_are_failed_without_running(redis_client):
    job = make_job()
    job_lock(job.pk).acquire()  # a live-looking lock: the lost section leaves it to expiry
    old_queued = queued_run(job, enqueued_at=NOW - 8 * DAY)
    old_running = running_run(job, started_at=NOW - 8 * DAY)
    at_limit = queued_run(job, enqueued_at=NOW - 7 * DAY)
    deferred = queued_run(job, enqueued_at=NOW - 8 * DAY, scheduled_for=NOW - DAY)

    report = run_maintenance(now=NOW, only=["lost", "expire"])

    statuses = {r.pk: r for r in Run.objects.all()}
    assert statuses[old_queued.pk].status == RunStatus.FAILED
    assert statuses[old_queued.pk].message == "expired: queued for more than 7 days"
    assert statuses[old_queued.pk].started_at is None  # never ran
    assert statuses[old_running.pk].status == RunStatus.FAILED
    assert statuses[old_running.pk].message == "expired: running for more than 7 days"
    assert statuses[at_limit.pk].status == RunStatus.QUEUED
    assert statuses[deferred.pk].status == RunStatus.QUEUED  # due for one day only
    expire = report.sections[1]
    assert expire.counts == {"expired": 2}
    assert [(f.severity, f.title) for f in report.findings] == [
        (Severity.WARNING, "Runs expired after 7 days")
    ]
    assert report.lines()[1:] == [
        "Expire runs: marked 2 runs failed (queued or running for more than 7 days)",
        f"  warning: Runs expired after 7 days (2 runs queued or running too long marked failed:"
        f" #{old_queued.pk}, #{old_running.pk})",
    ]


@override_settings(TAKT_EXPIRE_AFTER_DAYS=2)
def test_the_expiry_period_is_a_setting(redis_client):
    run = queued_run(make_job(), enqueued_at=NOW - 2 * DAY - SECOND)

    report = run_maintenance(now=NOW, only=["expire"])

    run.refresh_from_db()
    assert (run.status, run.message) == (RunStatus.FAILED, "expired: queued for more than 2 days")
    assert report.findings[0].title == "Runs expired after 2 days"


# --- retention cleanup (F-52, F-72) ----------------------------------------


def test_cleanup_deletes_old_finished_runs_in_audited_batches_oldest_first(redis_client):
    job = make_job()
    old = [
        finished_run(job, finished_at=NOW - 15 * DAY, status=status)
        for status in (
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.LOST,
            RunStatus.SKIPPED,
            RunStatus.CANCELLED,
        )
    ]
    at_limit = finished_run(job, finished_at=NOW - 14 * DAY)
    recent = finished_run(job, finished_at=NOW - DAY)
    old_but_queued = queued_run(job, enqueued_at=NOW - 6 * DAY)

    report = run_maintenance(now=NOW, only=["cleanup"], batch=2, by="test")

    assert set(Run.objects.values_list("pk", flat=True)) == {
        at_limit.pk,
        recent.pk,
        old_but_queued.pk,
    }
    audit = list(AuditRecord.objects.order_by("pk"))
    ids = [r.pk for r in old]
    assert [(a.action, a.count, a.first_id, a.last_id, a.by) for a in audit] == [
        ("delete runs", 2, ids[0], ids[1], "test"),
        ("delete runs", 2, ids[2], ids[3], "test"),
        ("delete runs", 1, ids[4], ids[4], "test"),
    ]
    assert audit[0].recorded_at == NOW
    assert "ended before 2026-05-27T12:00:00+00:00 (retention 14 days)" in audit[0].detail
    assert report.lines() == [
        "Cleanup 'runs': deleted 5 finished runs older than 14 days in 3 batches (3 audit rows)"
    ]


def test_cleanup_with_nothing_to_delete_writes_no_audit_row(redis_client):
    finished_run(make_job(), finished_at=NOW - DAY)

    report = run_maintenance(now=NOW, only=["cleanup"])

    assert not AuditRecord.objects.exists()
    assert report.lines() == [
        "Cleanup 'runs': deleted 0 finished runs older than 14 days in 0 batches (0 audit rows)"
    ]


def test_a_batch_whose_audit_row_cannot_be_written_is_not_deleted(redis_client, monkeypatch):
    job = make_job()
    old = [finished_run(job, finished_at=NOW - 20 * DAY) for _ in range(5)]
    real_create = AuditRecord.objects.create
    calls = []

    def create_once(**fields: Any) -> AuditRecord:
        calls.append(fields)
        if len(calls) > 1:
            raise RuntimeError("audit store unavailable")
        return real_create(**fields)

    monkeypatch.setattr(AuditRecord.objects, "create", create_once)

    report = run_maintenance(now=NOW, only=["cleanup"], batch=2)

    remaining = set(Run.objects.values_list("pk", flat=True))
    assert remaining == {r.pk for r in old[2:]}  # the first batch went, the rest stays
    assert AuditRecord.objects.count() == 1
    assert len(calls) == 2  # it stopped at the failed batch
    assert report.failed
    assert report.lines() == [
        f"Cleanup 'runs' failed: could not write the audit row, so the batch of 2 runs"
        f" (#{old[2].pk} to #{old[3].pk}) and the runs after it were kept: RuntimeError:"
        f" audit store unavailable; before that: deleted 2 finished runs older than 14 days"
        f" in 1 batch (1 audit row)"
    ]
    assert [(f.severity, f.title) for f in report.findings] == [
        (Severity.WARNING, "Cleanup 'runs' failed")
    ]


@override_settings(TAKT_RETENTION_DAYS=3)
def test_the_retention_period_is_a_setting(redis_client):
    job = make_job()
    gone = finished_run(job, finished_at=NOW - 3 * DAY - SECOND)
    kept = finished_run(job, finished_at=NOW - 3 * DAY)

    run_maintenance(now=NOW, only=["cleanup"])

    assert list(Run.objects.values_list("pk", flat=True)) == [kept.pk]
    assert AuditRecord.objects.get().first_id == gone.pk


def test_deleting_a_run_keeps_its_retry(redis_client):
    job = make_job(max_retries=1, retry_jitter=0)
    failed = finished_run(job, finished_at=NOW - 20 * DAY, status=RunStatus.FAILED)
    retry = finished_run(job, finished_at=NOW - DAY)
    Run.objects.filter(pk=retry.pk).update(retry_of=failed, trigger=RunTrigger.RETRY)

    run_maintenance(now=NOW, only=["cleanup"])

    retry.refresh_from_db()
    assert retry.retry_of_id is None
    assert not Run.objects.filter(pk=failed.pk).exists()


# --- a failing section (F-72) ----------------------------------------------


def test_a_failing_section_is_reported_and_the_others_go_on(redis_client):
    job = make_job()
    old = finished_run(job, finished_at=NOW - 20 * DAY)
    stale = queued_run(job, enqueued_at=NOW - 8 * DAY)
    lost = running_run(job, started_at=NOW - DAY)
    drop_table(AuditRecord._meta.db_table)  # cleanup cannot announce its batch

    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):  # nothing listens there
        report = run_maintenance(now=NOW)

    assert [s.name for s in report.sections] == [
        "lost", "expire", "cleanup", "decisions", "checks", "schedules"
    ]  # fmt: skip
    assert [bool(s.error) for s in report.sections] == [True, False, True, False, False, False]
    assert Run.objects.get(pk=lost.pk).status == RunStatus.RUNNING  # Redis unseen: not lost
    assert Run.objects.get(pk=stale.pk).status == RunStatus.FAILED
    assert Run.objects.filter(pk=old.pk).exists()
    lines = report.lines()
    assert lines[0].startswith("Recover lost runs failed: Error ")
    assert lines[3].startswith(
        f"Cleanup 'runs' failed: could not write the audit row, so the batch of 1 runs"
        f" (#{old.pk} to #{old.pk}) and the runs after it were kept: "
    )
    assert [(f.severity, f.key, f.title) for f in report.findings] == [
        (Severity.WARNING, "maintenance:failed:lost", "Recover lost runs failed"),
        (Severity.WARNING, "maintenance:runs-expired", "Runs expired after 7 days"),
        (Severity.WARNING, "maintenance:failed:cleanup", "Cleanup 'runs' failed"),
        (
            Severity.CRITICAL,
            "maintenance:schema:takt_runs_auditrecord",
            "Schema problem: table takt_runs_auditrecord is missing",
        ),
    ]


def test_maintenance_finished_is_sent_with_the_report_and_a_failing_receiver_is_ignored(
    redis_client,
):
    seen = []

    def receiver(sender: Any, report: Any, now: Any, **kwargs: Any) -> None:
        seen.append((report, now))
        raise RuntimeError("receiver broke")

    maintenance_finished.connect(receiver, dispatch_uid="test-maintenance-receiver")
    try:
        run_maintenance(now=NOW, dry_run=True)
        report = run_maintenance(now=NOW, only=["checks"])
    finally:
        maintenance_finished.disconnect(dispatch_uid="test-maintenance-receiver")

    assert seen == [(report, NOW)]  # not after the dry run


# --- checks (F-73) ----------------------------------------------------------


def test_checks_warn_about_a_first_retry_delay_shorter_than_the_longest_run(redis_client):
    too_short = make_job("too short", max_retries=2, retry_backoff_s=10)
    equal = make_job("equal", max_retries=2, retry_backoff_s=42)
    no_retries = make_job("no retries", max_retries=0, retry_backoff_s=1)
    for job, seconds in ((too_short, 42.5), (too_short, 3.0), (equal, 42.0), (no_retries, 99.0)):
        run = finished_run(job, finished_at=NOW - DAY)
        Run.objects.filter(pk=run.pk).update(duration_s=seconds)

    report = run_maintenance(now=NOW, only=["checks"])

    assert report.lines() == [
        "Checks: 1 warning",
        f"  warning: Retry delay shorter than the longest run: job 'too short' (#{too_short.pk})"
        " (first retry after 10 s; longest recorded run 42.5 s)",
    ]
    assert not report.failed


def test_checks_report_a_missing_table_as_critical(redis_client):
    drop_table(AuditRecord._meta.db_table)

    report = run_maintenance(now=NOW, only=["checks"])

    assert report.lines() == [
        "Checks: 1 critical",
        "  critical: Schema problem: table takt_runs_auditrecord is missing",
    ]


def test_a_healthy_install_passes_every_check(redis_client):
    assert run_maintenance(now=NOW, only=["checks"]).lines() == ["Checks: all checks passed"]


# --- the command and the built-in job ---------------------------------------


STALLED = (
    "Stalled schedules: none (every trigger that can fire has a next fire time or a run to set it)"
)


def maintenance_command(*args: str) -> list[str]:
    out = StringIO()
    call_command("takt_maintenance", *args, stdout=out)
    return out.getvalue().splitlines()


def test_the_command_prints_a_line_per_section(redis_client):
    now = timezone.now()
    finished_run(make_job(), finished_at=now - 15 * DAY)

    assert maintenance_command() == [
        "Recover lost runs: marked 0 runs lost",
        "Expire runs: marked 0 runs failed (queued or running for more than 7 days)",
        "Cleanup 'runs': deleted 1 finished run older than 14 days in 1 batch (1 audit row)",
        "Cleanup 'decisions': deleted 0 decisions older than 30 days",
        "Checks: all checks passed",
        STALLED,
    ]
    assert AuditRecord.objects.get().by == "manage.py takt_maintenance"


def test_the_command_with_only_and_dry_run_changes_nothing(redis_client):
    old = finished_run(make_job(), finished_at=timezone.now() - 15 * DAY)

    assert maintenance_command("--only", "cleanup,checks", "--dry-run") == [
        "Cleanup 'runs': would delete 1 finished run older than 14 days",
        "Checks: all checks passed",
    ]
    assert Run.objects.filter(pk=old.pk).exists()
    assert not AuditRecord.objects.exists()


def test_the_command_exits_non_zero_when_a_section_failed(redis_client):
    finished_run(make_job(), finished_at=timezone.now() - 15 * DAY)
    drop_table(AuditRecord._meta.db_table)
    out = StringIO()

    with pytest.raises(CommandError, match=r"^maintenance failed in: Cleanup 'runs'$") as exc:
        call_command("takt_maintenance", "--only", "cleanup", stdout=out)

    assert exc.value.returncode == 1
    assert out.getvalue().startswith("Cleanup 'runs' failed: could not write the audit row")


def test_the_command_refuses_an_unknown_section(redis_client):
    with pytest.raises(CommandError, match=r"--only: unknown maintenance section\(s\) bogus"):
        maintenance_command("--only", "lost,bogus")


def test_a_fresh_install_has_the_hourly_maintenance_job(redis_client):
    job = Job.objects.get(target="takt.maintenance")
    assert (job.name, job.enabled, job.kind, job.code_managed, job.paused) == (
        "Takt maintenance",
        True,
        "system",  # a system function (F-02) since migration 0014
        True,
        False,
    )
    assert registry.is_known("takt.maintenance")
    trigger = job.triggers.get()
    assert (trigger.kind, trigger.cron_expression, trigger.timezone, trigger.enabled) == (
        "cron",
        "7 * * * *",
        "UTC",
        True,
    )
    assert trigger.next_run_at.minute == 7


def test_the_data_migration_creates_the_job_with_an_active_trigger_once(redis_client):
    migration = importlib.import_module("jobs.migrations.0007_builtin_maintenance_job")
    # The models as the database has them now (the migration's own state
    # would name columns that later migrations changed).
    loader = MigrationExecutor(connection).loader
    state = loader.project_state(loader.graph.leaf_nodes("takt_jobs")[0])
    Job.objects.filter(target="takt.maintenance").delete()

    with time_machine.travel(NOW, tick=False):
        migration.create_maintenance_job(state.apps, None)
        migration.create_maintenance_job(state.apps, None)  # it exists: nothing more

    job = Job.objects.get(target="takt.maintenance")
    trigger = job.triggers.get()
    assert (job.enabled, trigger.active, trigger.next_run_at) == (True, True, NOW + 7 * MINUTE)


def test_the_maintenance_job_logs_its_report(redis_client):
    job = Job.objects.get(target="takt.maintenance")
    finished_run(make_job(), finished_at=timezone.now() - 15 * DAY)
    run = create_run(job, trigger=RunTrigger.MANUAL, now=timezone.now())

    assert execute(run.pk, worker="test") == RunStatus.SUCCEEDED

    run.refresh_from_db()
    assert run.output.splitlines() == [
        "Recover lost runs: marked 0 runs lost",
        "Expire runs: marked 0 runs failed (queued or running for more than 7 days)",
        "Cleanup 'runs': deleted 1 finished run older than 14 days in 1 batch (1 audit row)",
        "Cleanup 'decisions': deleted 0 decisions older than 30 days",
        "Checks: all checks passed",
        STALLED,
    ]
    assert run.result["cleanup"] == {"deleted": 1, "batches": 1}
    assert AuditRecord.objects.get().by == f"job 'Takt maintenance' (run #{run.pk})"


def test_the_maintenance_job_fails_when_a_section_failed(redis_client):
    job = Job.objects.get(target="takt.maintenance")
    finished_run(make_job(), finished_at=timezone.now() - 15 * DAY)
    drop_table(AuditRecord._meta.db_table)
    run = create_run(job, trigger=RunTrigger.MANUAL, now=timezone.now())

    assert execute(run.pk, worker="test") == RunStatus.FAILED

    run.refresh_from_db()
    assert run.message.startswith("Cleanup 'runs' failed: could not write the audit row")
    assert "critical: Schema problem: table takt_runs_auditrecord is missing" in run.output


def test_maintenance_findings_become_alerts(redis_client):
    from heartbeats.models import Alert

    job = make_job()
    job_lock(job.pk).acquire()
    queued_run(job, enqueued_at=NOW - 8 * DAY)
    run_maintenance(now=NOW, only=["lost", "expire"])
    run_maintenance(now=NOW, only=["expire"])  # nothing new: no second alert
    alerts = {a.title: a for a in Alert.objects.all()}
    # the expired run also ended failed, which raises the job's own alert
    assert sorted(alerts) == ["Run 'job' failed", "Runs expired after 7 days"]
    assert (
        alerts["Runs expired after 7 days"].severity,
        alerts["Runs expired after 7 days"].count,
    ) == ("warning", 1)


def test_a_dead_run_is_lost_even_while_another_run_of_the_job_holds_a_slot(redis_client):
    parallel = make_job("parallel", overlap_policy="allow", max_instances=2)
    alive = running_run(parallel, started_at=NOW - DAY)
    dead = running_run(parallel, started_at=NOW - DAY)
    assert job_lock(parallel.pk, slot=0, run_id=alive.pk).acquire()  # its token names it

    run_maintenance(now=NOW, only=["lost"])

    assert Run.objects.get(pk=alive.pk).status == RunStatus.RUNNING
    assert Run.objects.get(pk=dead.pk).status == RunStatus.LOST
