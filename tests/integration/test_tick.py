"""One beat tick in-process (runs.tick.run_tick, F-20, F-30, F-83): claim in
batches, publish to the private Redis broker, sweep the outbox."""

from __future__ import annotations

import pytest
import time_machine

from runs.models import Run, RunStatus, RunTrigger
from runs.outbox import sweep_unpublished
from runs.services import create_run
from runs.tick import _claim, run_tick
from tests.integration.conftest import SECOND, broker_task_ids, hourly, make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
CREATED = utc(2026, 6, 1, 7, 30)


def test_a_tick_claims_every_due_trigger_in_batches_and_publishes_them(settings, redis_client):
    settings.TAKT_CLAIM_BATCH = 2
    for i in range(5):
        hourly(make_job(f"job {i}"), created_at=CREATED)

    with time_machine.travel(T0 + 10 * SECOND, tick=False):
        sleep_s = run_tick(now=T0)

    runs = list(Run.objects.order_by("pk"))
    assert len(runs) == 5 and {r.status for r in runs} == {RunStatus.QUEUED}
    assert {r.published_at for r in runs} == {T0 + 10 * SECOND}
    assert sorted(broker_task_ids(redis_client)) == sorted(r.task_id for r in runs)
    assert sleep_s == 3600 - 10  # until 11:00 Berlin, from the clock after the tick


def test_a_batch_claimed_late_in_a_long_tick_is_not_taken_for_lost_by_another_beat(
    settings, redis_client
):
    """Seen with two beats and 20,000 due at once: a tick that claims for
    seconds recorded every batch at its start, so another beat's outbox
    sweep took the last batch, committed but not yet marked sent, for lost
    (older than TAKT_REPUBLISH_AFTER_SECONDS) and sent it a second time.
    Each batch is recorded at the time it is claimed."""
    settings.TAKT_CLAIM_BATCH = 2
    settings.TAKT_REPUBLISH_AFTER_SECONDS = 15
    for i in range(5):
        hourly(make_job(f"job {i}"), created_at=CREATED)
    tick_clock = iter([0.0, 0.0, 8.0, 16.0])  # at the start, then before each batch

    with time_machine.travel(T0 + 16 * SECOND, tick=False):
        _claim(now=T0, maintenance=False, clock=lambda: next(tick_clock))

    runs = list(Run.objects.order_by("pk"))
    assert [r.enqueued_at for r in runs] == [T0, T0, T0 + 8 * SECOND, T0 + 8 * SECOND,
                                             T0 + 16 * SECOND]  # fmt: skip
    assert {r.scheduled_for for r in runs} == {T0}
    sent = sorted(broker_task_ids(redis_client))
    # The last batch between its commit and its mark, as another beat's
    # sweep at the same moment sees it: not sent again.
    Run.objects.filter(pk=runs[-1].pk).update(published_at=None)
    assert sweep_unpublished(now=T0 + 16 * SECOND) == 0
    assert sorted(broker_task_ids(redis_client)) == sent
    # A run recorded 16 s ago and never marked (its publisher died) is.
    Run.objects.filter(pk=runs[0].pk).update(published_at=None)
    assert sweep_unpublished(now=T0 + 16 * SECOND) == 1
    assert sorted(broker_task_ids(redis_client)) == sorted([*sent, runs[0].task_id])


def test_a_tick_with_nothing_due_sleeps_until_the_next_fire_time(redis_client):
    hourly(make_job(), created_at=CREATED)

    with time_machine.travel(T0 - 90 * SECOND, tick=False):
        assert run_tick(now=T0 - 90 * SECOND) == 90

    assert not Run.objects.exists() and broker_task_ids(redis_client) == []


def test_without_triggers_a_tick_sleeps_one_poll(settings):
    settings.TAKT_POLL_SECONDS = 0.5
    assert run_tick(now=T0) == 0.5


def test_with_the_scheduler_switched_off_a_tick_dispatches_nothing_but_still_sends_the_outbox(
    settings, redis_client
):
    settings.TAKT_SCHEDULER_ENABLED = False
    trigger = hourly(make_job("scheduled"), created_at=CREATED)
    manual = create_run(make_job("manual"), trigger=RunTrigger.MANUAL, now=T0 - 60 * SECOND)

    with time_machine.travel(T0, tick=False):
        run_tick(now=T0)

    assert list(Run.objects.values_list("pk", flat=True)) == [manual.pk]
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0  # still due: caught up when the switch is on again
    assert broker_task_ids(redis_client) == [manual.task_id]
