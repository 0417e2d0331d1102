""" "Why didn't it run?" (F-66) in real situations of coordination, against
the real database and the private Redis: a group whose slot a run took
through runs.slots.acquire_start (F-31), the exclusive slot, the global
limit (F-34), a variable that does not satisfy a condition (F-32), a
dependency (F-33), a child and its parent (F-04), and the maintenance
allow-list (F-29); each checked by explain_job's verdict and by
`manage.py explain_job`'s text."""

from __future__ import annotations

from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

from heartbeats.explaining import explain_job
from heartbeats.processes import report_process
from jobs.models import ConcurrencyGroup, Job, ResultVariable, Trigger
from runs.execution import execute
from runs.locks import JobLock
from runs.models import Run, RunStatus, RunTrigger
from runs.queue import pause_queue, resume_queue, set_maintenance
from runs.services import create_run
from runs.slots import acquire_start
from runs.variables import set_variable
from runs.waiting import slot_needs
from tests.integration.conftest import SECOND, make_job, utc

pytestmark = pytest.mark.django_db

NOW = utc(2026, 6, 10, 10, 20)  # 12:20 in Berlin
NEXT_HOUR = utc(2026, 6, 10, 11, 0)


def utc_text(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


@pytest.fixture(autouse=True)
def _alive(redis_client: Any) -> Any:
    """A live beat with its scheduler on and a live worker, at NOW."""
    report_process("beat@here", now=NOW, detail="scheduler=on")
    report_process("worker:celery@here", now=NOW, detail="concurrency=2")
    with time_machine.travel(NOW, tick=False):
        yield


def hourly_job(name: str, **fields: Any) -> Job:
    job = make_job(name, **fields)
    Trigger.objects.create(job=job, kind="cron", cron_expression="0 * * * *", timezone="UTC")
    return job


def running(job: Job) -> Run:
    return Run.objects.create(
        job=job,
        trigger=RunTrigger.MANUAL,
        status=RunStatus.RUNNING,
        scheduled_for=NOW - 60 * SECOND,
        enqueued_at=NOW - 60 * SECOND,
        started_at=NOW - 60 * SECOND,
        worker="celery@here",
    )


def take_slots(job: Job) -> tuple[Run, JobLock]:
    """A running run of `job` holding its job's lock and its slots, taken
    as a worker takes them."""
    run = running(job)
    lock, acquired = acquire_start(job.pk, run_id=run.pk, needs=slot_needs(job))
    assert acquired is True
    return run, lock


def verdict(job: Job) -> str:
    return explain_job(Job.objects.get(pk=job.pk), now=NOW).verdict(utc_text)


def check(job: Job, name: str) -> Any:
    answer = explain_job(Job.objects.get(pk=job.pk), now=NOW)
    return next(c for c in answer.checks if c.name == name)


def explain_text(job: Job, capsys: Any) -> str:
    call_command("explain_job", str(job.pk))
    return capsys.readouterr().out


# --- groups, the exclusive slot, the global limit ----------------------------------


def test_a_group_held_by_another_jobs_run(capsys):
    imports = ConcurrencyGroup.objects.create(name="Imports", limit=1)
    import_a = make_job("Import A", concurrency_group=imports)
    import_b = hourly_job("Import B", concurrency_group=imports)
    assert verdict(import_b) == f"nothing holds it back: it runs next at {utc_text(NEXT_HOUR)}"
    assert check(import_b, "group").detail == "'Imports' (limit 1): 0 of 1 slot(s) taken"

    holder, _ = take_slots(import_a)

    expected = (
        f"'Imports' (limit 1): its group is full (1 of 1 running), by run #{holder.pk} of job"
        f" 'Import A' (#{import_a.pk}); a new run waits (held) for a slot, and is never skipped"
        " for it"
    )
    assert verdict(import_b) == f"held back by: group ({expected})"
    out = explain_text(import_b, capsys)
    assert f"  [NO] group: {expected}\n" in out
    assert "  [ok] exclusive: no exclusive run holds the groups back\n" in out
    assert out.rstrip().endswith(f"held back by: group ({expected})")


def test_a_run_of_the_job_waiting_for_its_group_is_named(capsys):
    imports = ConcurrencyGroup.objects.create(name="Imports", limit=1)
    import_a = make_job("Import A", concurrency_group=imports)
    import_b = hourly_job("Import B", concurrency_group=imports)
    holder, _ = take_slots(import_a)
    waiter = Run.objects.create(
        job=import_b,
        trigger=RunTrigger.SCHEDULE,
        status=RunStatus.QUEUED,
        held=True,
        waiting_for="group",
        scheduled_for=NOW - 30 * SECOND,
        enqueued_at=NOW - 30 * SECOND,
    )

    answer = explain_job(import_b, now=NOW)
    assert answer.holding_back.name == "active runs"
    assert answer.blocking_run_id == waiter.pk
    out = explain_text(import_b, capsys)
    assert (
        f"  [NO] active runs: run #{waiter.pk} is queued (held, waiting for a slot of its"
        " concurrency group); the next fire time is recorded as skipped; due since" in out
    )
    assert f"by run #{holder.pk} of job 'Import A' (#{import_a.pk})" in out
    assert f"; run #{waiter.pk} of this job waits for one\n" in out


def test_the_exclusive_job_and_the_groups_hold_each_other_back():
    imports = ConcurrencyGroup.objects.create(name="Imports", limit=2)
    import_a = make_job("Import A", concurrency_group=imports)
    backup = hourly_job("Backup", exclusive=True)
    grouped, lock = take_slots(import_a)

    assert verdict(backup) == (
        f"held back by: exclusive (1 grouped run(s) must end first: run #{grouped.pk} of job"
        f" 'Import A' (#{import_a.pk}); a run of this job that waits for them reserves the"
        " exclusive slot, so no new grouped run starts meanwhile)"
    )

    lock.release()  # and its slots: the groups are empty
    assert check(backup, "exclusive").ok
    exclusive, _ = take_slots(backup)
    import_b = hourly_job("Import B", concurrency_group=imports)
    assert verdict(import_b) == (
        "held back by: exclusive (an exclusive job runs or waits: every group waits"
        f" (run #{exclusive.pk} of job 'Backup' (#{backup.pk})))"
    )


def test_the_global_limit_counts_every_run(capsys):
    with override_settings(TAKT_MAX_CONCURRENCY=1):
        other = make_job("Other")
        report = hourly_job("Report")
        assert check(report, "global limit").detail == "0 of TAKT_MAX_CONCURRENCY=1 running"
        holder, _ = take_slots(other)
        out = explain_text(report, capsys)
    assert (
        "held back by: global limit (the global limit is reached (1 of TAKT_MAX_CONCURRENCY=1"
        f" running): run #{holder.pk} of job 'Other' (#{other.pk}); a new run waits (held) for"
        " a slot)"
    ) in out


# --- a condition on a result variable ----------------------------------------------


def test_a_variable_that_does_not_satisfy_the_condition(capsys):
    done = ResultVariable.objects.create(name="Import done")
    importer = make_job("Import", result_variable=done)
    transform = hourly_job(
        "Transform", condition_variable=done, condition_values=[0, 200], condition_consume=True
    )

    out = explain_text(transform, capsys)
    expected = (
        "condition not met: variable 'Import done' is -1, it must be 0 or 200; written by job"
        f" 'Import' (#{importer.pk}); until it is met its fire times pass without a run, a"
        " dependency's or parent's run of it ends skipped and Run now is refused; consumed: a"
        " run that starts sets it back to -1, so one result starts one run"
    )
    assert f"  [NO] condition: {expected}\n" in out
    assert out.rstrip().endswith(f"held back by: condition ({expected})")

    set_variable(done, 200, by="ops", now=NOW)
    condition = check(transform, "condition")
    assert condition.ok
    assert condition.detail.startswith("variable 'Import done' is 200, one of 0 or 200; consumed")
    assert verdict(transform) == f"nothing holds it back: it runs next at {utc_text(NEXT_HOUR)}"

    set_variable(done, -1002, by="ops", now=NOW)
    assert (
        check(transform, "condition")
        .text(utc_text)
        .endswith(f"set by ops (by hand) at {utc_text(NOW)}")
    )


# --- dependencies, parents and children --------------------------------------------


def test_a_dependency_says_which_end_starts_the_job(admin_client):
    importer = make_job("Import")
    Run.objects.create(
        job=importer,
        trigger=RunTrigger.MANUAL,
        status=RunStatus.FAILED,
        scheduled_for=NOW - 60 * SECOND,
        enqueued_at=NOW - 60 * SECOND,
        started_at=NOW - 60 * SECOND,
        finished_at=NOW - 30 * SECOND,
    )
    alert = make_job("Import failed")
    Trigger.objects.create(
        job=alert, kind="dependency", upstream_job=importer, upstream_statuses=["failed", "lost"]
    )

    trigger = check(alert, "trigger")
    assert trigger.detail.startswith(
        f"1 enabled: starts when job 'Import' (#{importer.pk}) ends failed or lost (its last run #"
    )
    when = f"it runs when job 'Import' (#{importer.pk}) ends failed or lost"
    assert verdict(alert) == f"nothing holds it back: {when}"
    page = admin_client.get(reverse("admin:takt_jobs_job_change", args=[alert.pk]))
    assert f"nothing holds it back: {when}" in page.content.decode().replace("&#x27;", "'")


def test_a_child_runs_only_with_its_parent(capsys):
    nightly = hourly_job("Nightly", target="takt.children")
    first = make_job("Import", parent=nightly, child_order=1)
    second = make_job("Transform", parent=nightly, child_order=2)

    parent = check(second, "parent")
    assert parent.detail == (
        f"child of job 'Nightly' (#{nightly.pk}): it runs only as part of its parent's run,"
        " 2nd of its 2 enabled children (a failed child stops the ones after it); the parent"
        " runs next at"
    )
    assert verdict(second) == (
        f"nothing holds it back: it runs as part of its parent 'Nightly' (#{nightly.pk})'s run,"
        f" next at {utc_text(NEXT_HOUR)}"
    )
    out = explain_text(second, capsys)
    assert "trigger:" not in out  # a child takes no trigger of its own
    assert "  [ok] parent: child of job 'Nightly'" in out

    children = check(nightly, "children")
    assert children.detail == (
        f"a parent: its run runs its 2 enabled children in order, 'Import' (#{first.pk}),"
        f" 'Transform' (#{second.pk}), each as a run of its own (a failed child stops the ones"
        " after it); its own target is not called"
    )

    parent_run = create_run(nightly, trigger=RunTrigger.MANUAL, now=NOW)
    execute(parent_run.pk, worker="celery@here", clock=lambda: NOW)
    child_run = Run.objects.get(cause=parent_run)
    assert check(nightly, "active runs").text(utc_text) == (
        f"run #{parent_run.pk} runs its children (now run #{child_run.pk} of job 'Import'"
        f" (#{first.pk}), queued); the next fire time is recorded as skipped; running since"
        f" {utc_text(NOW)}"
    )
    assert f"the parent's run #{parent_run.pk} is running now" in check(second, "parent").detail

    Job.objects.filter(pk=nightly.pk).update(enabled=False)
    assert verdict(second) == (
        f"held back by: parent (child of job 'Nightly' (#{nightly.pk}): it runs only as part of"
        " its parent's run, and the parent is disabled)"
    )


# --- the queue switches and the maintenance allow-list ------------------------------


def test_maintenance_names_the_target_and_the_allow_list(capsys):
    report = hourly_job("Report", target="tests.echo")
    log_off = hourly_job("Log off", target="tests.log_off")
    set_maintenance(True, note="database upgrade", now=NOW)
    try:
        out = explain_text(report, capsys)
        assert (
            "  [NO] maintenance: maintenance mode is on (database upgrade): target 'tests.echo'"
            " is not on the maintenance allow-list (takt.maintenance_off, takt.pause_queue,"
            " takt.remove_lock_file, takt.resume_queue, tests.erp_import, tests.erp_transform,"
            " tests.log_off), so every"
            " start is refused and recorded skipped"
        ) in out
        assert check(log_off, "maintenance").detail == (
            "maintenance mode is on (database upgrade); target 'tests.log_off' is on the"
            " maintenance allow-list: its runs start"
        )
        assert verdict(log_off).startswith("nothing holds it back")
    finally:
        set_maintenance(False, now=NOW)


def test_a_paused_queue_lets_the_allowed_jobs_through():
    report = hourly_job("Report", target="tests.echo")
    log_off = hourly_job("Log off", target="tests.log_off")
    pause_queue(note="deploy", by="ops", now=NOW)
    try:
        assert verdict(report) == "held back by: queue (the queue is paused: deploy)"
        queue = check(log_off, "queue")
        assert queue.ok and queue.detail == (
            "the queue is paused: deploy, but target 'tests.log_off' is on the maintenance"
            " allow-list: its runs start while the queue is paused"
        )
    finally:
        resume_queue(now=NOW)
