"""Published runs whose message is gone are sent again (runs/delivery.py),
against the real database and the private Redis as the broker, with no
worker consuming: the sweep's decisions at exact times (`now=`)."""

from __future__ import annotations

import pytest
from billiard.exceptions import WorkerLostError
from django.test import override_settings

from runs.decisions import query
from runs.delivery import resend_lost_messages
from runs.marks import alive_key, mark_key
from runs.models import Run, RunStatus, RunTrigger
from runs.publish import publish_runs
from runs.receivers import task_failure
from runs.redis_age import set_data_age, since_key
from runs.tasks import execute_run
from tests.integration.conftest import SECOND, broker_task_ids, make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
AFTER = 30 * SECOND  # TAKT_RESEND_AFTER_SECONDS' default
GRACE = 12 * SECOND  # TAKT_WORKER_ALIVE_TTL_SECONDS (10) + the margin (2)


@pytest.fixture
def broker(redis_client):
    """The private Redis, its data a day old (no grace in the way)."""
    set_data_age(redis_client, 86400)
    return redis_client


def published(count: int = 1, *, at=T0, **fields) -> list[Run]:
    """`count` queued runs of one job, published at `at`."""
    job = make_job(f"job {Run.objects.count()}")
    runs = Run.objects.bulk_create(
        Run(
            job=job,
            trigger=RunTrigger.MANUAL,
            scheduled_for=at,
            enqueued_at=at,
            **fields,
        )
        for _ in range(count)
    )
    ids = [run.pk for run in runs]
    assert publish_runs(ids, now=at) == count
    return list(Run.objects.filter(pk__in=ids).order_by("pk"))


def task_id(run: Run) -> str:
    return f"takt-run-{run.pk}"


def test_publishing_marks_each_message_sent_for_the_visibility_timeout(broker):
    run, *_ = published()
    assert broker.get(mark_key(run.pk)) == b"sent"
    assert 43200 - 5 < broker.ttl(mark_key(run.pk)) <= 43200
    assert broker_task_ids(broker) == [task_id(run)]


def test_a_run_whose_mark_is_gone_is_sent_again_after_the_resend_delay_not_before(broker):
    run, *_ = published()
    broker.delete(mark_key(run.pk))

    assert resend_lost_messages(now=T0 + AFTER) == 0  # at the instant: not yet
    assert resend_lost_messages(now=T0 + AFTER + SECOND) == 1

    run.refresh_from_db()
    assert (run.status, run.published_at) == (RunStatus.QUEUED, T0 + AFTER + SECOND)
    assert broker.get(mark_key(run.pk)) == b"sent"
    assert broker_task_ids(broker) == [task_id(run)] * 2  # the old one would lose the CAS
    resent = [d for d in query(job_id=run.job_id) if d["kind"] == "resent"]
    assert [d["detail"] for d in resent] == [
        "its message mark is gone (Redis lost the message with it)"
    ]
    # Its new message is in the queue: later sweeps leave it alone.
    assert resend_lost_messages(now=T0 + 10 * AFTER) == 0


def test_runs_marked_sent_behind_a_long_queue_are_never_sent_again(broker):
    runs = published(2000)
    for minutes in (1, 5, 60, 600):
        assert resend_lost_messages(now=T0 + 60 * minutes * SECOND) == 0
    assert len(broker_task_ids(broker)) == 2000
    assert not Run.objects.exclude(published_at=T0).filter(pk__in=[r.pk for r in runs]).exists()


def test_a_run_marked_sent_whose_queue_is_empty_is_sent_again(broker):
    run, *_ = published()
    for key in broker.keys("takt*"):
        if broker.type(key) == b"list":
            broker.delete(key)  # a worker popped it and died before it could say so

    assert resend_lost_messages(now=T0 + AFTER + SECOND) == 1
    assert broker_task_ids(broker) == [task_id(run)]


def test_a_mark_naming_a_dead_worker_is_sent_again_a_live_one_is_not(broker):
    dead, live = published(2)
    broker.set(mark_key(dead.pk), "w:gone@host")
    broker.set(mark_key(live.pk), "w:busy@host")
    broker.set(alive_key("busy@host"), "1", ex=10)
    broker.delete(*[k for k in broker.keys("takt*") if broker.type(k) == b"list"])

    assert resend_lost_messages(now=T0 + AFTER + SECOND) == 1

    assert broker_task_ids(broker) == [task_id(dead)]
    assert broker.get(mark_key(live.pk)) == b"w:busy@host"
    (decision,) = [d for d in query(job_id=dead.job_id) if d["kind"] == "resent"]
    assert (decision["run"], decision["detail"]) == (
        str(dead.pk),
        "worker gone@host that had received it is gone (killed, or restarted since)",
    )


def test_held_runs_and_runs_for_a_later_time_are_not_looked_at(broker):
    held, later = published(2)
    Run.objects.filter(pk=held.pk).update(held=True)
    Run.objects.filter(pk=later.pk).update(scheduled_for=T0 + 3600 * SECOND)
    broker.delete(mark_key(held.pk), mark_key(later.pk))

    assert resend_lost_messages(now=T0 + AFTER + SECOND) == 0


def test_after_a_flush_nothing_is_sent_again_until_the_grace_is_over_then_all_lost_ones_are(
    broker,
):
    runs = published(3)
    flushed_at = T0 + 40 * SECOND
    broker.flushdb()  # a Redis restart without persistence: messages, marks, liveness gone

    assert resend_lost_messages(now=flushed_at) == 0  # starts the clock of Redis's data
    set_data_age(broker, (GRACE - SECOND).total_seconds())  # the age is on Redis's clock
    assert resend_lost_messages(now=flushed_at + GRACE - SECOND) == 0
    assert broker_task_ids(broker) == []
    set_data_age(broker, GRACE.total_seconds())
    assert resend_lost_messages(now=flushed_at + GRACE) == 3
    assert sorted(broker_task_ids(broker)) == sorted(task_id(r) for r in runs)


def test_the_grace_also_covers_workers_whose_liveness_key_is_not_back_yet(broker):
    run, *_ = published()
    broker.flushdb()
    broker.set(mark_key(run.pk), "w:restarting@host")  # received again, liveness not yet

    with override_settings(TAKT_WORKER_ALIVE_TTL_SECONDS=4):
        assert resend_lost_messages(now=T0 + AFTER + SECOND) == 0
        set_data_age(broker, 6)  # 4 + 2 s later, on Redis's clock
        assert resend_lost_messages(now=T0 + AFTER + 7 * SECOND) == 1


def test_an_idle_system_asks_redis_nothing(broker):
    broker.delete(since_key())
    published(1)[0]  # a run that started is no candidate
    Run.objects.update(status=RunStatus.RUNNING)

    assert resend_lost_messages(now=T0 + 10 * AFTER) == 0
    assert broker.get(since_key()) is None  # not even the age of its data


def test_a_pool_child_lost_before_its_run_started_drops_the_mark(broker):
    run, *_ = published()
    broker.set(mark_key(run.pk), "w:alive@host")
    broker.set(alive_key("alive@host"), "1", ex=10)

    task_failure(sender=execute_run, task_id=task_id(run), exception=WorkerLostError("killed"))
    assert broker.get(mark_key(run.pk)) is None
    task_failure(sender=execute_run, task_id=task_id(run), exception=RuntimeError("x"))

    assert resend_lost_messages(now=T0 + AFTER + SECOND) == 1


def test_the_end_of_a_run_deletes_its_mark(broker):
    from runs.execution import execute
    from tests.integration.conftest import clock

    run, *_ = published()
    broker.set(mark_key(run.pk), "w:me@host")
    assert execute(run.pk, worker="me@host", clock=clock(T0, T0 + SECOND)) == "succeeded"
    assert broker.get(mark_key(run.pk)) is None
    assert resend_lost_messages(now=T0 + 10 * AFTER) == 0


def test_a_worker_that_received_the_message_before_its_mark_was_written_keeps_its_mark(broker):
    from runs.marks import mark_sent

    fresh, resent = published(2)
    broker.set(mark_key(fresh.pk), "w:fast@host")  # received between the flush and the mark
    broker.set(mark_key(resent.pk), "w:new@host")  # the re-sent message was received already

    mark_sent([fresh.pk, resent.pk], replacing={resent.pk: "w:dead@host"})

    assert broker.get(mark_key(fresh.pk)) == b"w:fast@host"
    assert broker.get(mark_key(resent.pk)) == b"w:new@host"
    mark_sent([resent.pk], replacing={resent.pk: "w:new@host"})
    assert broker.get(mark_key(resent.pk)) == b"sent"


def test_a_run_put_back_to_wait_for_its_job_loses_its_mark_and_gets_a_fresh_one(broker):
    from runs.overlap import hold_run

    run, *_ = published()
    broker.set(mark_key(run.pk), "w:holder@host")
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)

    assert hold_run(run)
    assert broker.get(mark_key(run.pk)) is None
    Run.objects.filter(pk=run.pk).update(held=False)
    publish_runs([run.pk], now=T0 + SECOND)
    assert broker.get(mark_key(run.pk)) == b"sent"


def test_the_beat_tick_sends_lost_messages_again_at_most_every_check_period(broker, monkeypatch):
    import runs.tick
    from runs.tick import run_tick

    run, *_ = published()
    broker.delete(mark_key(run.pk))
    monkeypatch.setattr(runs.tick, "_resent_at", float("-inf"))

    run_tick(now=T0 + AFTER + SECOND)
    assert broker_task_ids(broker) == [task_id(run)] * 2
    broker.delete(mark_key(run.pk))
    run_tick(now=T0 + 10 * AFTER)  # within TAKT_RESEND_CHECK_SECONDS (5 s) of the last look
    assert broker_task_ids(broker) == [task_id(run)] * 2


def test_a_redis_outage_in_the_sweep_is_logged_and_the_tick_goes_on(broker, monkeypatch, caplog):
    import runs.tick
    from runs.tick import run_tick
    from tests.processes import free_port

    published()
    monkeypatch.setattr(runs.tick, "_resent_at", float("-inf"))
    with override_settings(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"):  # nobody listens
        assert run_tick(now=T0 + AFTER + SECOND) > 0
    assert "could not look for lost messages" in caplog.text


def test_two_beats_sweeping_at_once_send_a_lost_run_once(broker):
    from runs.delivery import _claimed, _lost

    run, *_ = published()
    broker.delete(mark_key(run.pk))
    first_look = _lost(list(_candidates_now(T0 + AFTER + SECOND)))
    second_look = _lost(list(_candidates_now(T0 + AFTER + SECOND)))  # the other beat, same data

    cutoff = T0 + SECOND
    assert len(_claimed(first_look, cutoff=cutoff, now=T0 + AFTER + SECOND)) == 1
    assert _claimed(second_look, cutoff=cutoff, now=T0 + AFTER + 2 * SECOND) == []


def _candidates_now(now):
    from runs.delivery import _candidates

    return _candidates(cutoff=now - AFTER, now=now, after=None, limit=100)
