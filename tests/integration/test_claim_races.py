"""Every fire time runs once, whoever else claims (F-81, F-100): the
compare-and-set on next_run_at, the unique key (job, scheduled_for), and two
claimers racing on real database connections (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import IntegrityError, connections, transaction

from jobs.models import Trigger
from runs.dispatch import ClaimResult, _claim_one, _Load, claim_due_runs
from runs.models import Run, RunStatus, RunTrigger
from tests.integration.conftest import SECOND, hourly, make_job, utc

T0 = utc(2026, 6, 1, 8, 0)
CREATED = utc(2026, 6, 1, 7, 30)
HOUR = 3600 * SECOND


def stale(trigger: Trigger) -> Trigger:
    """The trigger as another beat read it before anyone claimed it."""
    return Trigger.objects.select_related("job").get(pk=trigger.pk)


@pytest.mark.django_db
def test_a_claim_from_a_stale_next_run_at_creates_no_run_and_counts_a_lost_race():
    trigger = hourly(make_job(), created_at=CREATED)
    seen_by_the_slow_beat = stale(trigger)
    assert claim_due_runs(now=T0, limit=10).claimed == 1  # the fast beat

    result = ClaimResult()
    _claim_one(seen_by_the_slow_beat, now=T0, load=_Load({}), result=result)

    assert (result.claimed, result.lost_races) == (0, 1)
    assert Run.objects.count() == 1
    trigger.refresh_from_db()
    assert (trigger.next_run_at, trigger.missed_count) == (T0 + HOUR, 0)


@pytest.mark.django_db
def test_a_claim_loses_to_an_edit_that_moved_next_run_at():
    trigger = hourly(make_job(), created_at=CREATED)
    seen_by_the_beat = stale(trigger)
    Trigger.objects.filter(pk=trigger.pk).update(next_run_at=T0 + 5 * HOUR)

    result = ClaimResult()
    _claim_one(seen_by_the_beat, now=T0, load=_Load({}), result=result)

    assert (result.claimed, result.lost_races) == (0, 1)
    assert not Run.objects.exists()
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 5 * HOUR


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("first", "second"),
    [
        (RunTrigger.SCHEDULE, RunTrigger.SCHEDULE),
        (RunTrigger.SCHEDULE, RunTrigger.CATCHUP),
        (RunTrigger.CATCHUP, RunTrigger.SCHEDULE),
    ],
)
def test_one_fire_time_of_a_job_cannot_get_two_scheduled_runs(first, second):
    job = make_job()
    Run.objects.create(job=job, trigger=first, scheduled_for=T0, enqueued_at=T0)

    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(job=job, trigger=second, scheduled_for=T0, enqueued_at=T0)

    assert Run.objects.count() == 1
    other = make_job("other job")  # the key is per job
    Run.objects.create(job=other, trigger=second, scheduled_for=T0, enqueued_at=T0)


@pytest.mark.django_db
def test_manual_runs_at_the_same_instant_are_allowed():
    job = make_job()
    Run.objects.create(job=job, trigger=RunTrigger.SCHEDULE, scheduled_for=T0, enqueued_at=T0)
    for trigger in (RunTrigger.MANUAL, RunTrigger.MANUAL, RunTrigger.API):
        Run.objects.create(job=job, trigger=trigger, scheduled_for=T0, enqueued_at=T0)

    assert job.runs.filter(scheduled_for=T0).count() == 4


@pytest.mark.django_db
def test_the_unique_key_stops_a_duplicate_that_got_past_the_compare_and_set():
    taken = make_job("already has a run for 10:00")
    taken_trigger = hourly(taken, created_at=CREATED)
    Run.objects.create(
        job=taken,
        trigger=RunTrigger.SCHEDULE,
        scheduled_for=T0,
        enqueued_at=T0,
        status=RunStatus.SUCCEEDED,
    )
    fresh = make_job("fresh")
    hourly(fresh, created_at=CREATED)

    result = claim_due_runs(now=T0, limit=10)

    # The duplicate insert fails in its own savepoint; the batch goes on.
    assert result.lost_races == 1 and len(result.queued) == 1
    assert taken.runs.count() == 1
    assert fresh.runs.get().status == RunStatus.QUEUED
    taken_trigger.refresh_from_db()
    assert taken_trigger.next_run_at == T0 + HOUR


def race(claimers: int, work) -> list:
    """Start `claimers` threads that call `work()` at the same moment, each on
    its own database connection; return their results, re-raise their errors."""
    barrier = threading.Barrier(claimers)
    results: list = [None] * claimers
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = work()
        except BaseException as exc:  # re-raised in the test thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(claimers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a claimer hung"
    if errors:
        raise errors[0]
    return results


def claim_until_done(now, limit):
    """A beat's tick: claim batches until nothing is left (as runs.tick does)."""
    total = ClaimResult()
    while True:
        batch = claim_due_runs(now=now, limit=limit)
        total.queued += batch.queued
        total.skipped += batch.skipped
        total.lost_races += batch.lost_races
        if batch.claimed + batch.lost_races == 0:
            return total


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("limit", [100, 7], ids=["one-batch", "small-batches"])
def test_two_claimers_at_once_create_exactly_one_run_per_trigger(limit):
    triggers = [hourly(make_job(f"job {i}"), created_at=CREATED) for i in range(50)]

    for hour in range(3):  # three fire times in a row, each raced for
        now = T0 + hour * HOUR
        results = race(2, lambda now=now: claim_until_done(now, limit))

        assert sum(len(r.queued) + len(r.skipped) for r in results) == 50
        per_fire_time = Counter(
            Run.objects.filter(scheduled_for=now).values_list("source_trigger_id", flat=True)
        )
        assert per_fire_time == Counter({t.pk: 1 for t in triggers})
        assert set(
            Trigger.objects.filter(pk__in=[t.pk for t in triggers]).values_list(
                "next_run_at", flat=True
            )
        ) == {now + HOUR}
    assert Run.objects.count() == 150
    assert set(Run.objects.values_list("trigger", flat=True)) == {RunTrigger.SCHEDULE}


@pytest.mark.django_db(transaction=True)
def test_two_beats_that_read_the_same_due_triggers_still_create_one_run_each():
    # Both beats read the triggers before either claims (no row lock held),
    # so only the compare-and-set on next_run_at separates them.
    triggers = [hourly(make_job(f"job {i}"), created_at=CREATED) for i in range(50)]
    ids = [t.pk for t in triggers]

    both_have_read = threading.Barrier(2, timeout=30)

    def beat() -> ClaimResult:
        seen = list(Trigger.objects.select_related("job").filter(pk__in=ids))
        both_have_read.wait()  # under load one beat could otherwise finish before the other reads
        result = ClaimResult()
        with transaction.atomic():
            for trigger in seen:
                _claim_one(trigger, now=T0, load=_Load({}), result=result)
        return result

    results = race(2, beat)

    assert sum(r.claimed for r in results) == 50
    assert sum(r.lost_races for r in results) == 50
    assert Counter(Run.objects.values_list("source_trigger_id", flat=True)) == Counter(
        {pk: 1 for pk in ids}
    )
    assert set(Trigger.objects.filter(pk__in=ids).values_list("next_run_at", flat=True)) == {
        T0 + HOUR
    }
