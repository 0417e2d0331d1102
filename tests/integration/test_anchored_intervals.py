"""Intervals anchored on a run's start or finish (F-12) whose fire time
gets no run that will start (issue 27, defect 1): the claim sets their
next_run_at to NULL for the run to set again; when the beat refuses the
run (maintenance, F-29), records it skipped (overlap, F-23) or passes the
fire time by (condition not met, F-32), no run will, and the trigger must
fire again at now + N. Through the real beat tick, bulk and row by row."""

from __future__ import annotations

import pytest

from jobs.models import ResultVariable
from runs.anchored import release_on_start
from runs.decisions import query
from runs.dispatch import claim_due_runs
from runs.ending import finish_run
from runs.execution import execute
from runs.locks import job_lock
from runs.models import Run, RunStatus, RunTrigger
from runs.queue import set_maintenance
from runs.services import create_run, start_run
from tests.integration.conftest import SECOND, beat_tick, clock, make_job, make_trigger, utc

T0 = utc(2026, 6, 1, 8, 0)
# Real commits: the decision log's entries go out after each commit.
pytestmark = pytest.mark.django_db(transaction=True)

ANCHORS = ["from_start", "from_finish"]


tick = beat_tick


def started(run, *, now):
    """The worker's claim, then its admission (runs/starting.admit_start),
    which moves an interval anchored on the run's start."""
    if not start_run(run, worker="w", now=now):
        return False
    release_on_start(run, started_at=now)
    return True


def interval(job, anchor):
    return make_trigger(
        job, created_at=T0, kind="interval", interval_seconds=60, interval_anchor=anchor
    )


@pytest.mark.parametrize("anchor", ANCHORS)
def test_a_fire_time_refused_in_maintenance_fires_again_an_interval_later(
    anchor, claim_path, redis_client
):
    job = make_job("report")
    trigger = interval(job, anchor)
    set_maintenance(True, note="ERP upgrade", now=T0)

    tick(T0 + 60 * SECOND)

    refused = job.runs.get()
    assert refused.status == RunStatus.SKIPPED and "maintenance" in refused.message
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 120 * SECOND, "the trigger never fires again"
    set_maintenance(False, now=T0 + 90 * SECOND)
    tick(T0 + 120 * SECOND)
    assert job.runs.get(scheduled_for=T0 + 120 * SECOND).status == RunStatus.QUEUED


@pytest.mark.parametrize("anchor", ANCHORS)
def test_a_fire_time_held_back_by_an_unmet_condition_fires_again_an_interval_later(
    anchor, claim_path, redis_client
):
    variable = ResultVariable.objects.create(name="Import done")  # -1
    job = make_job("reader", condition_variable=variable, condition_values=[0])
    trigger = interval(job, anchor)

    tick(T0 + 60 * SECOND)

    assert not job.runs.exists()
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 120 * SECOND, "the trigger never fires again"
    assert {"rescheduled", "condition_not_met"} <= {d["kind"] for d in query(job_id=job.pk)}
    ResultVariable.objects.filter(pk=variable.pk).update(value=0)
    tick(T0 + 120 * SECOND)
    assert job.runs.get(scheduled_for=T0 + 120 * SECOND).status == RunStatus.QUEUED


@pytest.mark.parametrize("anchor", ANCHORS)
def test_a_fire_time_skipped_behind_another_run_fires_again_an_interval_later(
    anchor, claim_path, redis_client
):
    """The skipped fire time counts as a run that started and ended at the
    claim; the other run's end, later, moves nothing."""
    job = make_job("report")
    trigger = interval(job, anchor)
    manual = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    assert started(manual, now=T0 + 30 * SECOND)
    # its live worker holds the job's lock: the lost-run check leaves it be
    lock = job_lock(job.pk, run_id=manual.pk, ttl_s=600)
    assert lock.acquire()

    tick(T0 + 60 * SECOND)

    assert job.runs.get(trigger=RunTrigger.SCHEDULE).status == RunStatus.SKIPPED
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 120 * SECOND
    assert finish_run(manual, status=RunStatus.SUCCEEDED, now=T0 + 90 * SECOND)
    lock.release()
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 120 * SECOND


@pytest.mark.parametrize("anchor", ANCHORS)
def test_a_fire_time_that_gets_a_run_still_waits_for_that_run(anchor, claim_path, redis_client):
    job = make_job("report")
    trigger = interval(job, anchor)

    tick(T0 + 60 * SECOND)

    assert job.runs.get().status == RunStatus.QUEUED
    trigger.refresh_from_db()
    assert trigger.next_run_at is None  # the run's start or end sets it (F-12)


@pytest.mark.parametrize("anchor", ANCHORS)
def test_a_run_refused_when_the_worker_starts_it_sets_the_next_time_by_its_end(
    anchor, redis_client
):
    """The other side: a queued run that the worker refuses (maintenance
    went on after the claim) ends `skipped`, and its end sets the time."""
    job = make_job("report")
    trigger = interval(job, anchor)
    tick(T0 + 60 * SECOND)
    run = job.runs.get()
    set_maintenance(True, note="ERP upgrade", now=T0 + 61 * SECOND)

    assert execute(run.pk, worker="w", clock=clock(T0 + 62 * SECOND)) == RunStatus.SKIPPED

    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 122 * SECOND


def test_an_earlier_run_ending_leaves_a_from_start_trigger_waiting_for_its_own_run(
    claim_path, redis_client
):
    """Found by the model-based test (tests/integration/test_engine_model.py):
    a run that started before the claim and ends after it set the
    `from_start` trigger, which waited for the claim's queued run, to its
    own start + N, a fire time already claimed. The next claim's run then
    hit the unique key and the trigger waited for no run at all (stalled
    until the stalled-schedule check). The earlier run's start moved the
    trigger already; only the claim's run moves it now."""
    job = make_job("report", overlap_policy="buffer_one")
    trigger = interval(job, "from_start")
    manual = create_run(job, trigger=RunTrigger.MANUAL, now=T0 + 50 * SECOND)
    assert started(manual, now=T0 + 50 * SECOND)  # before the claim
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 60 * SECOND  # the start moved it (as before)

    tick(T0 + 60 * SECOND)
    waiting = job.runs.get(trigger=RunTrigger.SCHEDULE)
    assert waiting.status == RunStatus.QUEUED
    assert finish_run(manual, status=RunStatus.SUCCEEDED, now=T0 + 90 * SECOND)

    trigger.refresh_from_db()
    assert trigger.next_run_at is None  # still waits for its own run's start
    assert started(waiting, now=T0 + 100 * SECOND)
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 160 * SECOND


# --- a fire time whose run exists already (the claim's duplicate-key path) -----


def recorded_run(job, *, status, started_at=None, finished_at=None):
    """The fire time T0 + 60 s's run, made before the beat claims it (a
    backfill's, or a row restored by hand): the claim's insert meets the
    unique key (job, scheduled_for), and the bulk claim falls back to
    claiming row by row."""
    return Run.objects.create(
        job=job, trigger=RunTrigger.CATCHUP, status=status, scheduled_for=T0 + 60 * SECOND,
        enqueued_at=T0, started_at=started_at, finished_at=finished_at,
    )  # fmt: skip


@pytest.mark.parametrize("anchor", ANCHORS)
def test_a_fire_time_whose_run_already_ended_fires_again_an_interval_later(
    anchor, claim_path, redis_client
):
    """The claim set next_run_at to NULL for its run to set; its run was a
    duplicate and the existing one had ended: before the fix no run would
    ever set it (only the stalled-schedule check, later, with an alert)."""
    job = make_job("report")
    trigger = interval(job, anchor)
    recorded_run(job, status=RunStatus.SUCCEEDED, started_at=T0, finished_at=T0 + SECOND)

    result = claim_due_runs(now=T0 + 61 * SECOND, limit=10)

    assert job.runs.count() == 1 and result.lost_races == 1
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 121 * SECOND, "the trigger never fires again"
    [said] = [d.detail for d in result.decisions if d.kind == "rescheduled"]
    assert said.startswith(f"fire time {(T0 + 60 * SECOND).isoformat()} already has a run")


@pytest.mark.parametrize("anchor", ANCHORS)
def test_a_fire_time_whose_run_waits_to_start_is_left_for_that_run_to_set(
    anchor, claim_path, redis_client
):
    job = make_job("report", overlap_policy="allow", max_instances=2)
    trigger = interval(job, anchor)
    existing = recorded_run(job, status=RunStatus.QUEUED)

    claim_due_runs(now=T0 + 61 * SECOND, limit=10)

    trigger.refresh_from_db()
    assert job.runs.count() == 1 and trigger.next_run_at is None  # the queued run sets it
    assert started(existing, now=T0 + 70 * SECOND)
    assert finish_run(existing, status=RunStatus.SUCCEEDED, now=T0 + 80 * SECOND)
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + (130 if anchor == "from_start" else 140) * SECOND


@pytest.mark.parametrize(("anchor", "then"), [("from_start", 121), ("from_finish", 150)])
def test_a_fire_time_whose_run_is_running_fires_at_its_end_or_an_interval_after_the_claim(
    anchor, then, claim_path, redis_client
):
    """A run that started already set a `from_start` trigger at its start
    and will not again: the claim counts as a run then (claim + N). A
    `from_finish` trigger waits for that run's end."""
    job = make_job("report", overlap_policy="buffer_one")
    trigger = interval(job, anchor)
    existing = recorded_run(job, status=RunStatus.RUNNING, started_at=T0 + 50 * SECOND)

    claim_due_runs(now=T0 + 61 * SECOND, limit=10)
    assert finish_run(existing, status=RunStatus.SUCCEEDED, now=T0 + 90 * SECOND)

    trigger.refresh_from_db()
    assert job.runs.count() == 1 and trigger.next_run_at == T0 + then * SECOND


# --- only the run the trigger waits for moves it (issue 27, defect B) ------


@pytest.mark.parametrize("anchor", ANCHORS)
def test_a_manual_run_starting_and_ending_leaves_the_trigger_waiting_for_its_own_run(
    anchor, claim_path, redis_client
):
    """Found by the model-based test as a retry (test_engine_model_found.py):
    any run of the job that started or ended gave a waiting trigger its
    next fire time, and it fired again while its own run still waited."""
    job = make_job("report", overlap_policy="allow", max_instances=3)
    trigger = interval(job, anchor)
    tick(T0 + 60 * SECOND)
    own = job.runs.get(trigger=RunTrigger.SCHEDULE)
    manual = create_run(job, trigger=RunTrigger.MANUAL, now=T0 + 61 * SECOND)

    assert started(manual, now=T0 + 62 * SECOND)
    assert finish_run(manual, status=RunStatus.SUCCEEDED, now=T0 + 63 * SECOND)

    trigger.refresh_from_db()
    assert trigger.next_run_at is None, "a manual run moved the trigger"
    assert started(Run.objects.get(pk=own.pk), now=T0 + 70 * SECOND)
    assert finish_run(own, status=RunStatus.SUCCEEDED, now=T0 + 80 * SECOND)
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + (130 if anchor == "from_start" else 140) * SECOND


@pytest.mark.parametrize("anchor", ANCHORS)
def test_a_run_claimed_before_an_edit_does_not_move_the_trigger_waiting_for_a_later_one(
    anchor, claim_path, redis_client
):
    """The trigger waited for run 1; an edit gave it a fire time again (as
    saving its schedule does) and the beat claimed run 2: run 1's start and
    end are not the ones it waits for."""
    job = make_job("report", overlap_policy="allow", max_instances=3)
    trigger = interval(job, anchor)
    tick(T0 + 60 * SECOND)
    first = job.runs.get(trigger=RunTrigger.SCHEDULE)
    type(trigger).objects.filter(pk=trigger.pk).update(next_run_at=T0 + 65 * SECOND)
    tick(T0 + 65 * SECOND)
    second = job.runs.get(scheduled_for=T0 + 65 * SECOND)

    assert started(Run.objects.get(pk=first.pk), now=T0 + 70 * SECOND)
    assert finish_run(first, status=RunStatus.SUCCEEDED, now=T0 + 75 * SECOND)

    trigger.refresh_from_db()
    assert trigger.next_run_at is None, "the earlier run moved the trigger"
    assert started(Run.objects.get(pk=second.pk), now=T0 + 80 * SECOND)
    assert finish_run(second, status=RunStatus.SUCCEEDED, now=T0 + 90 * SECOND)
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + (140 if anchor == "from_start" else 150) * SECOND
