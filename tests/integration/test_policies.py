"""Overlap policies, retries, the timeout actions and the job limits
against the real database and Redis (F-23, F-25, F-26, F-103, F-104). The
decisions are unit-tested in tests/unit/test_transitions.py; these tests
check that every source of runs applies them the same way."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.models import Job
from runs.dispatch import claim_due_runs
from runs.execution import execute
from runs.locks import job_lock
from runs.models import Run, RunStatus, RunTrigger
from runs.outbox import sweep_unpublished
from runs.overlap import release_stranded
from runs.services import create_run, enqueue_job, start_run
from tests.integration.conftest import SECOND, broker_task_ids, clock, make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)


def running_run(job: Job) -> Run:
    """A run of `job` that a worker has started (and holds the job's lock)."""
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    assert start_run(run, worker="elsewhere", now=T0)
    return run


@pytest.mark.parametrize(
    ("policy", "statuses"),
    [
        # while one run is running, three more are requested
        ("skip", ["skipped", "skipped", "skipped"]),
        ("buffer_one", ["queued/held", "skipped", "skipped"]),
        ("buffer_all", ["queued/held", "queued/held", "skipped"]),  # max_buffered = 2
        ("allow", ["queued", "skipped", "skipped"]),  # max_instances = 2
    ],
)
def test_every_source_of_runs_gets_the_same_overlap_decision(policy, statuses, redis_client):
    job = make_job(overlap_policy=policy, max_instances=2, max_buffered=2)
    running_run(job)
    later = T0 + SECOND
    trigger = make_trigger(job, created_at=T0 - 60 * SECOND, kind="interval", interval_seconds=60)
    runs = [
        enqueue_job(job, trigger="manual", now=later),  # "Run now"
        enqueue_job(job, trigger="api", now=later),  # enqueue_job()
    ]
    assert trigger.next_run_at <= later
    claim_due_runs(now=later, limit=10)  # the schedule
    runs.append(job.runs.get(trigger=RunTrigger.SCHEDULE))
    got = []
    for run in runs:
        run.refresh_from_db()
        got.append(f"{run.status}/held" if run.held else run.status)
    assert got == statuses


def test_a_held_run_is_sent_when_the_running_run_ends(
    redis_client, django_capture_on_commit_callbacks
):
    job = make_job(overlap_policy="buffer_one")
    first = enqueue_job(job, trigger="manual", now=T0)
    assert execute(first.pk, worker="w", clock=clock(T0)) == RunStatus.SUCCEEDED  # idle: runs

    holder = running_run(job)
    waiting = enqueue_job(job, trigger="manual", now=T0 + SECOND)
    assert waiting.held and waiting.task_id not in broker_task_ids(redis_client)
    sweep_unpublished(now=T0 + 60 * SECOND)  # the sweep leaves it while the job runs
    assert waiting.task_id not in broker_task_ids(redis_client)

    Run.objects.filter(pk=holder.pk).update(status=RunStatus.SUCCEEDED)  # it ends…
    with django_capture_on_commit_callbacks(execute=True):
        assert release_stranded(now=T0 + 61 * SECOND) == 1  # …and the next one goes out
    waiting.refresh_from_db()
    assert not waiting.held
    assert waiting.task_id in broker_task_ids(redis_client)


def test_a_buffered_run_that_finds_the_lock_taken_waits_and_is_sent_by_the_holder(redis_client):
    job = make_job(overlap_policy="buffer_all", target="tests.echo")
    racer = enqueue_job(job, trigger="manual", now=T0)  # sent: the job looked idle
    other = running_run(job)  # …but another run started first
    holder = job_lock(job.pk)
    assert holder.acquire()

    assert execute(racer.pk, worker="w", clock=clock(T0 + SECOND)) == RunStatus.QUEUED
    racer.refresh_from_db()
    assert (racer.status, racer.held, racer.started_at) == (RunStatus.QUEUED, True, None)

    holder.release()
    Run.objects.filter(pk=other.pk).update(status=RunStatus.SUCCEEDED)
    release_stranded(now=T0 + 2 * SECOND)
    assert execute(racer.pk, worker="w", clock=clock(T0 + 3 * SECOND)) == RunStatus.SUCCEEDED


def test_cancel_other_replaces_the_active_runs(redis_client):
    job = make_job(overlap_policy="cancel_other")
    old = running_run(job)
    new = enqueue_job(job, trigger="manual", now=T0 + SECOND)
    old.refresh_from_db()
    assert new.status == RunStatus.QUEUED
    assert old.status == RunStatus.CANCELLED
    assert old.message == f"cancelled: replaced by run #{new.pk}"

    # The old run's process still holds the lock: the new run takes it over.
    stale = job_lock(job.pk)
    assert stale.acquire()
    assert execute(new.pk, worker="w", clock=clock(T0 + 2 * SECOND)) == RunStatus.SUCCEEDED
    assert not stale.release()  # the old holder's token no longer owns the lock


def test_allow_runs_in_parallel_up_to_max_instances(redis_client):
    job = make_job(overlap_policy="allow", max_instances=2)
    other_slot_holder = job_lock(job.pk)
    assert other_slot_holder.acquire()  # one run is under way
    run = enqueue_job(job, trigger="manual", now=T0)
    assert execute(run.pk, worker="w", clock=clock(T0)) == RunStatus.SUCCEEDED  # slot 2


def test_a_failing_run_is_retried_with_growing_delays_then_stops(redis_client):
    job = make_job("flaky", target="tests.fail", max_retries=2, retry_backoff_s=10, retry_jitter=0)
    run = enqueue_job(job, trigger="manual", now=T0)
    execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND))

    first_retry = Run.objects.get(retry_of=run)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.message == "failed on purpose; retry 1 of 2 in 10 s"
    assert (first_retry.trigger, first_retry.attempt) == (RunTrigger.RETRY, 2)
    assert first_retry.scheduled_for == T0 + 11 * SECOND
    assert first_retry.task_id not in broker_task_ids(redis_client)  # not before its time

    sweep_unpublished(now=T0 + 11 * SECOND)
    assert first_retry.task_id in broker_task_ids(redis_client)
    execute(first_retry.pk, worker="w", clock=clock(T0 + 11 * SECOND, T0 + 12 * SECOND))
    second_retry = Run.objects.get(retry_of=first_retry)
    assert second_retry.scheduled_for == T0 + 12 * SECOND + 20 * SECOND  # twice the delay

    execute(second_retry.pk, worker="w", clock=clock(T0 + 40 * SECOND, T0 + 41 * SECOND))
    second_retry.refresh_from_db()
    assert second_retry.message == "failed on purpose; no retries left (2 of 2 used)"
    assert not Run.objects.filter(retry_of=second_retry).exists()


def test_a_retry_that_would_run_into_the_next_fire_time_is_dropped_and_counted(redis_client):
    job = make_job("tight", target="tests.fail", max_retries=3, retry_backoff_s=120)
    make_trigger(job, created_at=T0, kind="interval", interval_seconds=60)  # next: T0 + 60 s
    run = enqueue_job(job, trigger="manual", now=T0)
    execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND))
    run.refresh_from_db()
    assert "retry 1 dropped: it would start at or after the next scheduled run" in run.message
    assert not Run.objects.filter(retry_of=run).exists()
    assert Job.objects.get(pk=job.pk).dropped_retries == 1


def test_an_exception_listed_as_non_retryable_is_not_retried(redis_client):
    job = make_job(target="tests.raise", max_retries=3, non_retryable_exceptions="RuntimeError")
    run = enqueue_job(job, trigger="manual", now=T0)
    execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND))
    run.refresh_from_db()
    assert (
        run.message == "RuntimeError: exploded on purpose; builtins.RuntimeError is not retryable"
    )
    assert not Run.objects.filter(retry_of=run).exists()


def test_a_due_retry_of_a_busy_job_waits_instead_of_being_skipped(redis_client):
    job = make_job(target="tests.echo")  # overlap policy skip
    retry = create_run(job, trigger=RunTrigger.RETRY, now=T0, scheduled_for=T0 + 5 * SECOND)
    other = running_run(job)
    holder = job_lock(job.pk)
    assert holder.acquire()
    assert execute(retry.pk, worker="w", clock=clock(T0 + 5 * SECOND)) == RunStatus.QUEUED
    retry.refresh_from_db()
    assert retry.held
    holder.release()
    Run.objects.filter(pk=other.pk).update(status=RunStatus.SUCCEEDED)
    release_stranded(now=T0 + 6 * SECOND)
    assert execute(retry.pk, worker="w", clock=clock(T0 + 7 * SECOND)) == RunStatus.SUCCEEDED


def test_a_job_pauses_itself_after_n_failures_in_a_row(redis_client):
    job = make_job("fragile", target="tests.fail", pause_after_failures=2)
    make_trigger(job, created_at=T0, kind="interval", interval_seconds=60)
    for i in range(2):
        run = enqueue_job(job, trigger="manual", now=T0 + i * SECOND)
        execute(run.pk, worker="w", clock=clock(T0 + i * SECOND))
    job.refresh_from_db()
    assert job.paused and job.consecutive_failures == 2
    assert job.pause_note == "paused automatically after 2 consecutive failed runs"
    assert not job.triggers.get().active  # no longer scheduled
    assert claim_due_runs(now=T0 + timedelta(hours=1), limit=10).claimed == 0


def test_a_success_resets_the_failure_streak(redis_client):
    job = make_job(target="tests.echo", pause_after_failures=3, consecutive_failures=2)
    run = enqueue_job(job, trigger="manual", now=T0)
    execute(run.pk, worker="w", clock=clock(T0))
    job.refresh_from_db()
    assert (job.consecutive_failures, job.paused) == (0, False)


def test_a_job_disables_itself_after_its_run_limit(redis_client):
    job = make_job(target="tests.echo", max_runs=2)
    for i in range(2):
        run = enqueue_job(job, trigger="manual", now=T0 + i * SECOND)
        execute(run.pk, worker="w", clock=clock(T0 + i * SECOND))
    job.refresh_from_db()
    assert (job.enabled, job.runs_done) == (False, 2)
    assert job.pause_note == "disabled automatically: reached its limit of 2 runs"


def test_a_paused_queue_enqueues_nothing_and_holds_what_arrives(redis_client):
    from jobs.errors import QueuePaused
    from runs.queue import pause_queue, resume_queue
    from runs.tick import run_tick

    job = make_job(target="tests.echo", overlap_policy="allow", max_instances=3)
    already_sent = enqueue_job(job, trigger="manual", now=T0)
    trigger = make_trigger(job, created_at=T0, kind="interval", interval_seconds=60)
    assert pause_queue(note="deploying", by="ops", now=T0)

    with pytest.raises(QueuePaused, match="the queue is paused"):
        enqueue_job(job, trigger="manual", now=T0 + SECOND)
    # A run that was sent before the pause is put back, not started.
    assert execute(already_sent.pk, worker="w", clock=clock(T0 + SECOND)) == RunStatus.QUEUED
    already_sent.refresh_from_db()
    assert already_sent.held and already_sent.started_at is None
    # The beat claims nothing while paused: the due times stay due.
    run_tick(now=T0 + 150 * SECOND)
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 60 * SECOND
    assert job.runs.count() == 1

    assert resume_queue(now=T0 + 170 * SECOND)
    run_tick(now=T0 + 170 * SECOND)
    caught_up = job.runs.exclude(pk=already_sent.pk)
    assert [(r.trigger, r.scheduled_for) for r in caught_up] == [
        (RunTrigger.CATCHUP, T0 + 120 * SECOND)  # once, for the latest of T0+60 s, T0+120 s
    ]
    already_sent.refresh_from_db()
    assert not already_sent.held  # sent again by the sweep
    assert execute(already_sent.pk, worker="w", clock=clock(T0 + 171 * SECOND)) == (
        RunStatus.SUCCEEDED
    )


HOUR = 3600 * SECOND


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # no beat ran for 3.5 hours: fire times 08:59, 09:59 and 10:59 were missed
        ("skip", [("skipped", "catchup", 3)]),
        ("run_once", [("queued", "catchup", 2)]),
        ("run_all", [("queued", "catchup", 0), ("queued/held", "catchup", 0),
                     ("queued/held", "catchup", 0)]),
    ],
)  # fmt: skip
def test_missed_run_policies_after_an_outage(policy, expected):
    job = make_job(missed_run_policy=policy)
    trigger = make_trigger(job, created_at=T0 - 60 * SECOND, kind="interval", interval_seconds=3600)
    assert trigger.next_run_at == T0 - 60 * SECOND + HOUR

    claim_due_runs(now=T0 + 3 * HOUR + 30 * 60 * SECOND, limit=10)

    got = [
        (f"{r.status}/held" if r.held else r.status, r.trigger, r.missed_count)
        for r in job.runs.order_by("scheduled_for")
    ]
    assert got == expected
    if policy == "skip":
        assert "3 missed fire time(s) from" in job.runs.get().message


def test_jitter_delays_each_run_by_the_same_amount_in_every_beat(redis_client):
    from jobs.core.triggers import compute_jitter

    job = make_job("jittery")
    trigger = make_trigger(
        job, created_at=T0, kind="interval", interval_seconds=3600, jitter_seconds=600
    )
    fire = trigger.next_run_at
    delay = compute_jitter(f"trigger:{trigger.pk}", fire, 600)
    assert timedelta(0) <= delay <= timedelta(seconds=600)
    if not delay:
        pytest.skip("this trigger's jitter happens to be 0 s for this fire time")

    claim_due_runs(now=fire, limit=10)
    run = job.runs.get()
    assert run.scheduled_for == fire + delay  # one run per fire time, due later
    assert run.status == RunStatus.QUEUED and run.task_id not in broker_task_ids(redis_client)
    sweep_unpublished(now=fire + delay - SECOND)
    assert run.task_id not in broker_task_ids(redis_client)
    sweep_unpublished(now=fire + delay)
    assert run.task_id in broker_task_ids(redis_client)


def test_a_pause_with_an_end_time_lifts_itself():
    from jobs.services import pause_job, resume_due_jobs

    job = make_job("paused until noon")
    trigger = make_trigger(job, created_at=T0, kind="interval", interval_seconds=60)
    assert pause_job(job.pk, note="db migration", by="ops", now=T0, until=T0 + 3600 * SECOND)
    trigger.refresh_from_db()
    assert not trigger.active
    assert resume_due_jobs(now=T0 + 3599 * SECOND) == 0
    assert resume_due_jobs(now=T0 + 3600 * SECOND) == 1
    job.refresh_from_db()
    trigger.refresh_from_db()
    assert not job.paused and trigger.active
    assert trigger.next_run_at == T0 + 60 * SECOND  # kept: caught up per the missed-run policy


def test_maintenance_mode_refuses_every_start_of_jobs_not_allowed(redis_client):
    from jobs.errors import MaintenanceMode
    from runs.queue import set_maintenance
    from runs.tick import run_tick

    plain = make_job("report")
    allowed = make_job("cleanup", target="tests.log_off")  # on the allow-list
    sent_before = enqueue_job(plain, trigger="manual", now=T0)
    trigger = make_trigger(plain, created_at=T0, kind="interval", interval_seconds=60)
    assert set_maintenance(True, note="db upgrade", now=T0)

    with pytest.raises(MaintenanceMode, match="not allowed to start during maintenance"):
        enqueue_job(plain, trigger="manual", now=T0 + SECOND)
    assert enqueue_job(allowed, trigger="manual", now=T0 + SECOND).status == RunStatus.QUEUED
    # a run sent before the switch is refused by the worker, whatever triggered it
    assert execute(sent_before.pk, worker="w", clock=clock(T0 + 2 * SECOND)) == RunStatus.SKIPPED
    sent_before.refresh_from_db()
    assert "maintenance" in sent_before.message
    # the schedule: the fire time is recorded as refused, the trigger moves on
    run_tick(now=T0 + 60 * SECOND)
    refused = plain.runs.get(trigger=RunTrigger.SCHEDULE)
    assert refused.status == RunStatus.SKIPPED and "maintenance" in refused.message
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 120 * SECOND

    assert set_maintenance(False, now=T0 + 61 * SECOND)
    assert enqueue_job(plain, trigger="manual", now=T0 + 62 * SECOND).status == RunStatus.QUEUED


def test_every_decision_is_recorded_and_queryable_by_job(redis_client):
    from django.core.management import call_command

    from runs.decisions import query
    from runs.tick import run_tick

    job = make_job("logged")
    other = make_job("other")
    make_trigger(job, created_at=T0, kind="interval", interval_seconds=60)
    run_tick(now=T0 + 60 * SECOND)  # due
    run_tick(now=T0 + 120 * SECOND)  # skipped: the first is still queued
    scheduled = job.runs.get(status=RunStatus.QUEUED)
    execute(scheduled.pk, worker="w", clock=clock(T0 + 121 * SECOND))  # end
    execute(scheduled.pk, worker="w", clock=clock(T0 + 122 * SECOND))  # a second delivery
    enqueue_job(other, trigger="manual", now=T0)

    kinds = [entry["kind"] for entry in query(job_id=job.pk)]
    assert kinds == ["double_start_prevented", "end", "start", "skipped", "due"]
    call_command("decision_log", "--job", str(job.pk), "--limit", "2")


def test_a_capped_catch_up_raises_an_alert(redis_client):
    from heartbeats.models import Alert
    from runs.tick import run_tick

    job = make_job("capped", missed_run_policy="run_all", catchup_max_runs=2)
    make_trigger(job, created_at=T0 - 60 * SECOND, kind="interval", interval_seconds=3600)
    run_tick(now=T0 + 4 * HOUR)  # 4 missed fire times, 2 may run (plus the on-time one)
    alert = Alert.objects.get(key=f"catchup-capped:job:{job.pk}")
    assert alert.title == "Catch-up of 'capped' capped" and alert.severity == "warning"


def test_a_retry_without_delay_is_sent_by_the_next_sweep(redis_client):
    """A retry due at once (no backoff) goes out with the next tick's sweep,
    not only after TAKT_REPUBLISH_AFTER_SECONDS like a run whose publisher
    died."""
    job = make_job(
        "flaky-now", target="tests.fail", max_retries=1, retry_backoff_s=0, retry_jitter=0
    )
    run = enqueue_job(job, trigger="manual", now=T0)
    execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND))
    retry = Run.objects.get(retry_of=run)
    assert retry.scheduled_for == retry.enqueued_at == T0 + SECOND
    sweep_unpublished(now=T0 + 2 * SECOND)
    assert retry.task_id in broker_task_ids(redis_client)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # three fire times due in one claim (a beat that started late)
        ("buffer_one", ["queued", "skipped", "skipped"]),
        ("buffer_all", ["queued", "queued/held", "skipped"]),  # max_buffered = 2
        ("skip", ["queued", "queued/held", "queued/held"]),  # run_all: one by one
    ],
)
def test_the_runs_of_one_claim_keep_to_the_overlap_policy(policy, expected):
    job = make_job(overlap_policy=policy, max_buffered=2, missed_run_policy="run_all")
    make_trigger(job, created_at=T0, kind="interval", interval_seconds=1)

    claim_due_runs(now=T0 + 3 * SECOND + SECOND / 2, limit=10)

    got = [f"{r.status}/held" if r.held else r.status for r in job.runs.order_by("scheduled_for")]
    assert got == expected
    if policy == "buffer_one":
        skipped = job.runs.filter(status=RunStatus.SKIPPED)
        assert all("already waiting (overlap policy 'buffer_one')" in r.message for r in skipped)
