"""F-65: `manage.py decision_log` prints the decisions of coordination as
the engine records them (a run waiting for its group's slot and getting
it, the global limit, a condition not met, a variable changed, a dependency
and a child started, maintenance on and off, a start), each line with its
time in UTC, its kind, the job's name and what an operator needs: which
group, which run holds the slot, which variable with which values."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from jobs.models import ConcurrencyGroup, Job, ResultVariable, Trigger
from runs.decisions import Decision, record
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.queue import set_maintenance
from runs.services import create_run
from runs.slots import acquire_start
from runs.variables import set_variable
from runs.waiting import release_waiting, slot_needs
from tests.integration.conftest import SECOND, clock, make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC  [a-z_]+ +(job \d+|all jobs)")


def queued(job: Job) -> Run:
    return create_run(job, trigger=RunTrigger.MANUAL, now=T0)


def sent(job: Job) -> Run:
    """A queued run as the worker receives it, whatever its condition says
    now (the condition changed after the run was made)."""
    return Run.objects.create(
        job=job,
        trigger=RunTrigger.MANUAL,
        status=RunStatus.QUEUED,
        scheduled_for=T0,
        enqueued_at=T0,
    )


def holding(job: Job) -> tuple[Run, Any]:
    """A running run of `job` with its slots taken, as a worker takes them."""
    run = Run.objects.create(
        job=job,
        trigger=RunTrigger.MANUAL,
        status=RunStatus.RUNNING,
        scheduled_for=T0,
        enqueued_at=T0,
        started_at=T0,
    )
    lock, acquired = acquire_start(job.pk, run_id=run.pk, needs=slot_needs(job))
    assert acquired is True
    return run, lock


def log_lines(capsys: Any, *args: str) -> list[str]:
    call_command("decision_log", "--limit", "100", *args)
    lines = capsys.readouterr().out.splitlines()
    assert all(LINE.match(line) for line in lines), lines
    return lines


def line_of(lines: list[str], kind: str, who: str) -> str:
    found = [line for line in lines if f"  {kind} " in line and f"  {who}" in line]
    assert len(found) == 1, (kind, who, lines)
    return found[0]


def test_the_decisions_of_coordination_say_what_an_operator_needs(
    capsys, redis_client, django_capture_on_commit_callbacks
):
    imports = ConcurrencyGroup.objects.create(name="Imports", limit=1)
    done = ResultVariable.objects.create(name="Import done")
    import_a = make_job("Import A", concurrency_group=imports, result_variable=done)
    import_b = make_job("Import B", concurrency_group=imports)

    # A run of Import B waits for the group's slot, then gets it.
    holder, lock = holding(import_a)
    waiter = queued(import_b)
    assert execute(waiter.pk, worker="w", clock=clock(T0 + SECOND)) == RunStatus.QUEUED
    lock.release()
    assert release_waiting(now=T0 + 2 * SECOND) == [waiter.pk]

    # A condition not met, then the variable set by hand.
    transform = make_job(
        "Transform", condition_variable=done, condition_values=[0, 200], condition_consume=True
    )
    assert (
        execute(sent(transform).pk, worker="w", clock=clock(T0 + 3 * SECOND)) == RunStatus.SKIPPED
    )
    set_variable(done, 200, by="ops", now=T0 + 4 * SECOND)

    # A dependency and a child, started by the ends of runs (their entries
    # are written once the end commits).
    extract = make_job("Extract")
    load = make_job("Load")
    Trigger.objects.create(job=load, kind="dependency", upstream_job=extract)
    upstream = queued(extract)
    nightly = make_job("Nightly", target="takt.children")
    make_job("Step", parent=nightly)
    parent_run = queued(nightly)
    with django_capture_on_commit_callbacks(execute=True):
        execute(upstream.pk, worker="w", clock=clock(T0 + 5 * SECOND))
        execute(parent_run.pk, worker="w", clock=clock(T0 + 6 * SECOND))

    set_maintenance(True, note="database upgrade", now=T0 + 7 * SECOND)
    set_maintenance(False, now=T0 + 8 * SECOND)

    lines = log_lines(capsys)
    waiting = line_of(lines, "waiting_for_slot", f"job {import_b.pk} 'Import B' run {waiter.pk}")
    assert waiting.endswith(
        "  its concurrency group is full (group 'Imports', limit 1); held by run"
        f" #{holder.pk} of job 'Import A' (#{import_a.pk})"
    )
    granted = line_of(lines, "slot_granted", f"job {import_b.pk} 'Import B' run {waiter.pk}")
    group = import_b.concurrency_group_id
    assert granted.endswith(f"  a slot of group #{group} is free: sent")
    unmet = line_of(lines, "condition_not_met", f"job {transform.pk} 'Transform'")
    assert unmet.endswith("  condition not met: variable 'Import done' is -1, it must be 0 or 200")
    by_hand = line_of(lines, "variable_changed", "all jobs")
    assert by_hand.endswith("  variable 'Import done': -1 → 200, set by ops")
    dependency = line_of(lines, "dependency_started", f"job {load.pk} 'Load'")
    assert (
        f"  run #{upstream.pk} of job 'Extract' (#{extract.pk}) ended succeeded: started run #"
        in (dependency)
    )
    child = line_of(lines, "child_started", "job ")
    assert f"  child 'Step' of parent run #{parent_run.pk}: run #" in child
    on = [line for line in lines if "  maintenance " in line]
    assert [line.split("  all jobs  ")[1] for line in on] == [
        "maintenance mode off",
        "maintenance mode on: database upgrade",
    ]
    start = line_of(lines, "start", f"job {extract.pk} 'Extract' run {upstream.pk}")
    assert start.endswith("  manual run")


def test_the_global_limit_names_the_run_that_holds_the_slot(capsys, redis_client):
    with override_settings(TAKT_MAX_CONCURRENCY=1):
        report = make_job("Report")
        other = make_job("Other")
        holder, _ = holding(other)
        waiter = queued(report)
        execute(waiter.pk, worker="w", clock=clock(T0 + SECOND))
        lines = log_lines(capsys, "--job", str(report.pk))
    assert lines[0].endswith(
        f"  job {report.pk} 'Report' run {waiter.pk}  the global limit TAKT_MAX_CONCURRENCY is"
        f" reached (TAKT_MAX_CONCURRENCY=1); held by run #{holder.pk} of job 'Other'"
        f" (#{other.pk})"
    )
    assert "  limit_reached " in lines[0]


def test_entries_of_jobs_that_are_gone_print_as_they_were(capsys, redis_client):
    record([Decision("waiting_for_slot", 999, 5, detail="its concurrency group is full")])
    (line,) = log_lines(capsys)
    assert line.endswith("  job 999 run 5  its concurrency group is full")
