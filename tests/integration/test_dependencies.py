"""Dependencies (F-33) and parent and child jobs (F-04) at run time, and
the cycles and outside starts they refuse: runs.execution, runs.ending,
runs.children and runs.dependencies against the database and the private
Redis, with real commits (the runs a run's end starts commit with it)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from jobs.errors import ChildJob
from jobs.models import Job, ResultVariable, Trigger
from runs.cancel import cancel_run
from runs.decisions import query
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.recovery import check_lost_runs
from runs.services import enqueue_job
from tests.integration.conftest import SECOND, broker_task_ids, clock, make_job, utc

T0 = utc(2026, 6, 1, 8, 0)
pytestmark = pytest.mark.django_db(transaction=True)


def after(job: Job, upstream: Job, *statuses: str) -> Trigger:
    return Trigger.objects.create(
        job=job,
        kind="dependency",
        upstream_job=upstream,
        upstream_statuses=list(statuses) or ["succeeded"],
    )


def run_now(job: Job) -> tuple[str | None, Run]:
    run = enqueue_job(job, trigger="manual", now=T0)
    return execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND)), run


def run_next(job: Job) -> tuple[str | None, Run]:
    """Execute the newest queued run of `job` (sent by another run's end)."""
    run = job.runs.filter(status=RunStatus.QUEUED).latest("pk")
    return execute(run.pk, worker="w", clock=clock(T0 + SECOND)), run


# --- dependencies ---------------------------------------------------------------------


def test_a_chain_runs_in_order_each_run_carrying_its_cause(redis_client):
    a, b, c = make_job("import"), make_job("transform"), make_job("report")
    after(b, a)
    after(c, b)

    status, first = run_now(a)
    assert status == RunStatus.SUCCEEDED
    second = b.runs.get()
    assert (second.trigger, second.cause_id, second.status) == ("dependency", first.pk, "queued")
    assert second.source_trigger.upstream_job_id == a.pk
    assert second.task_id in broker_task_ids(redis_client)  # sent after the commit
    assert not c.runs.exists()  # not before its own upstream ended

    assert run_next(b)[0] == RunStatus.SUCCEEDED
    third = c.runs.get()
    assert third.cause_id == second.pk
    assert run_next(c)[0] == RunStatus.SUCCEEDED
    assert query(job_id=b.pk)[-1]["kind"] == "dependency_started"


def test_fan_out_and_an_on_failure_job(redis_client):
    a = make_job("import", target="tests.fail")
    on_success = [make_job("transform"), make_job("archive")]
    for job in on_success:
        after(job, a)
    alert = make_job("page the operator")
    after(alert, a, "failed", "timed_out", "lost")

    assert run_now(a)[0] == RunStatus.FAILED

    assert [job.runs.count() for job in on_success] == [0, 0]
    assert alert.runs.get().trigger == RunTrigger.DEPENDENCY
    a.target = "tests.echo"
    a.save()
    assert run_now(a)[0] == RunStatus.SUCCEEDED
    assert [job.runs.count() for job in on_success] == [1, 1]
    assert alert.runs.count() == 1


def test_a_retried_run_starts_its_dependants_only_with_its_last_attempt(redis_client):
    a = make_job("flaky", target="tests.fail", max_retries=1, retry_backoff_s=1, retry_jitter=0)
    b = make_job("after any end")
    after(b, a, "failed", "succeeded")

    assert run_now(a)[0] == RunStatus.FAILED
    assert not b.runs.exists()  # a retry follows
    retry = a.runs.get(trigger=RunTrigger.RETRY)
    assert execute(retry.pk, worker="w", clock=clock(T0 + 2 * SECOND)) == RunStatus.FAILED
    assert b.runs.get().cause_id == retry.pk


def test_a_disabled_dependant_is_not_started_and_its_condition_records_a_skip(redis_client):
    a = make_job("import")
    off = make_job("off", enabled=False)
    after(off, a)
    variable = ResultVariable.objects.create(name="ready")
    picky = make_job("picky", condition_variable=variable, condition_values=[0])
    after(picky, a)

    run_now(a)

    assert not off.runs.exists()  # its trigger is inactive, like a schedule's
    skipped = picky.runs.get()
    assert skipped.status == RunStatus.SKIPPED
    assert "condition not met: variable 'ready' is -1" in skipped.message


def test_a_dependency_cycle_is_refused_naming_the_jobs(redis_client):
    a, b, c = make_job("a"), make_job("b"), make_job("c")
    after(b, a)
    after(c, b)
    closing = Trigger(job=a, kind="dependency", upstream_job=c, upstream_statuses=["succeeded"])

    with pytest.raises(ValidationError) as caught:
        closing.full_clean()

    message = caught.value.message_dict["upstream_job"][0]
    assert message == (
        f"that would make a cycle: 'c' (#{c.pk}) → 'a' (#{a.pk}) → 'b' (#{b.pk}) → 'c' (#{c.pk})"
    )
    assert not a.triggers.exists()
    itself = Trigger(job=a, kind="dependency", upstream_job=a, upstream_statuses=["failed"])
    with pytest.raises(ValidationError, match="cannot depend on itself"):
        itself.full_clean()


# --- parent and child jobs --------------------------------------------------------------


def family(*targets: str, stop: bool = True) -> tuple[Job, list[Job]]:
    """A parent and its children in their order; made last to first, so
    that the order is child_order's, not the ids'."""
    parent = make_job("nightly", target="takt.children", stop_on_child_failure=stop)
    made = [
        make_job(f"step {i}", target=target, parent=parent, child_order=10 * (i + 1))
        for i, target in reversed(list(enumerate(targets)))
    ]
    return parent, list(reversed(made))


def test_a_parent_runs_its_children_in_order_each_its_own_linked_run(redis_client):
    parent, children = family("tests.echo", "tests.echo", "tests.echo")

    status, parent_run = run_now(parent)

    assert status == RunStatus.RUNNING  # it waits for its children, on no worker
    for child in children:
        (child_run,) = child.runs.all()
        assert (child_run.trigger, child_run.cause_id) == (RunTrigger.PARENT, parent_run.pk)
        assert run_next(child)[0] == RunStatus.SUCCEEDED
    parent_run.refresh_from_db()
    assert parent_run.status == RunStatus.SUCCEEDED
    assert (
        parent_run.message == "children: 'step 0' succeeded, 'step 1' succeeded, 'step 2' succeeded"
    )
    order = list(
        Run.objects.filter(cause=parent_run).order_by("pk").values_list("job_id", flat=True)
    )
    assert order == [c.pk for c in children]


@pytest.mark.parametrize(("stop", "third_runs"), [(True, 0), (False, 1)])
def test_a_failed_child_stops_the_rest_or_not(redis_client, stop, third_runs):
    parent, (first, second, third) = family("tests.echo", "tests.fail", "tests.echo", stop=stop)

    _, parent_run = run_now(parent)
    assert run_next(first)[0] == RunStatus.SUCCEEDED
    assert run_next(second)[0] == RunStatus.FAILED
    if third_runs:
        assert run_next(third)[0] == RunStatus.SUCCEEDED

    parent_run.refresh_from_db()
    assert parent_run.status == RunStatus.FAILED  # a child failed, either way
    assert third.runs.count() == third_runs
    if stop:
        assert parent_run.message.endswith("(stopped after 'step 1' failed)")


def test_a_child_cannot_be_started_from_outside(redis_client):
    parent, (child,) = family("tests.echo")
    with pytest.raises(ChildJob, match=f"job #{child.pk} is a child of job #{parent.pk}"):
        enqueue_job(child, trigger="api", now=T0)
    dependency = Trigger(job=child, kind="dependency", upstream_job=make_job("other"))
    with pytest.raises(ValidationError) as caught:
        dependency.full_clean()
    assert "takes no trigger of its own" in caught.value.message_dict["kind"][0]
    schedule = Trigger(job=child, kind="cron", cron_expression="0 3 * * *")
    with pytest.raises(ValidationError):
        schedule.full_clean()


def test_a_loop_through_a_parent_and_its_child_is_refused(redis_client):
    """ETL's run starts its child Load, whose end starts Report: Report's
    end may not start ETL again, whichever link comes last."""
    etl = make_job("ETL", target="takt.children")
    load = make_job("Load", parent=etl)
    report = make_job("Report")
    after(report, load)
    closing = Trigger(
        job=etl, kind="dependency", upstream_job=report, upstream_statuses=["succeeded"]
    )
    with pytest.raises(ValidationError) as caught:
        closing.full_clean()
    assert caught.value.message_dict["upstream_job"] == [
        f"that would make a cycle: 'Report' (#{report.pk}) → 'ETL' (#{etl.pk})"
        f" → 'Load' (#{load.pk}) → 'Report' (#{report.pk})"
    ]
    # the other way round: the dependencies first, then the parent
    etl2, load2, report2 = (
        make_job("ETL 2", target="takt.children"),
        make_job("Load 2"),
        make_job("R2"),
    )
    after(report2, load2)
    after(etl2, report2)
    load2.parent = etl2
    with pytest.raises(ValidationError) as caught:
        load2.full_clean()
    assert caught.value.message_dict["parent"] == [
        f"that would make a loop of runs starting runs: 'ETL 2' (#{etl2.pk}) → 'Load 2'"
        f" (#{load2.pk}) → 'R2' (#{report2.pk}) → 'ETL 2' (#{etl2.pk})"
    ]


def test_a_loop_of_parents_is_refused(redis_client):
    a = make_job("a")
    b = make_job("b", parent=a)
    a.parent = b
    with pytest.raises(ValidationError) as caught:
        a.full_clean()
    assert caught.value.message_dict["parent"] == [
        f"that would make a loop of parents: 'a' (#{a.pk}) → 'b' (#{b.pk}) → 'a' (#{a.pk})"
    ]
    b.parent = b
    with pytest.raises(ValidationError, match="cannot be its own parent"):
        b.full_clean()


def test_cancelling_a_parent_run_cancels_its_running_child(redis_client):
    parent, (child, _) = family("tests.echo", "tests.echo")
    _, parent_run = run_now(parent)

    cancel_run(parent_run.pk, by="alice", now=T0 + SECOND)

    child_run = child.runs.get()
    assert child_run.status == RunStatus.CANCELLED
    assert child_run.cancelled_by == f"alice (with its parent run #{parent_run.pk})"


def test_the_lost_run_check_leaves_a_parent_alone_while_a_child_is_active(redis_client, settings):
    settings.TAKT_LOCK_TTL_SECONDS = 3
    parent, (child,) = family("tests.echo")
    _, parent_run = run_now(parent)
    later = T0 + 60 * SECOND

    counts = check_lost_runs(now=later)

    assert counts["parent"] == 1 and counts["lost"] == 0
    Run.objects.filter(cause=parent_run).update(status=RunStatus.SUCCEEDED)  # its child gone
    assert check_lost_runs(now=later)["lost"] == 1
