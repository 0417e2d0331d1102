"""Locks across a Redis loss (F-82, issue 12) with real worker and beat
processes: a running run's keeper finds its lock key gone after a FLUSHALL,
or after a restart of a redis-server without persistence, and takes it back
with its own token at its next renewal. A second run of the `skip` job that
comes after the re-take is skipped, and the first run ends `succeeded`, not
`lost`: the beats' lost-run check waits out the grace after the loss."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from django.test import override_settings
from django.utils import timezone

from jobs.models import Job, Trigger
from runs.execution import execute
from runs.locks import job_lock_key, token_run_id
from runs.models import Run, RunStatus, RunTrigger
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until
from tests.processes import RedisServer, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LOCK_TTL_S = 3  # the live processes' TAKT_LOCK_TTL_SECONDS
RUN_S = 8  # how long the first run sleeps


def sleeper() -> Job:
    return Job.objects.create(
        name="skip job", target="tests.sleep", params={"seconds": RUN_S}, overlap_policy="skip"
    )


def renewed(job: Job, client: redis.Redis) -> Callable[[], Run | None]:
    """The job's running run once its keeper has renewed its lock."""

    def check() -> Run | None:
        run = job.runs.filter(status=RunStatus.RUNNING).exclude(output="").first()
        return run if run is not None and client.exists(job_lock_key(job.pk)) else None

    return check


def lock_holder(client: redis.Redis, job: Job) -> int | None:
    return token_run_id(client.get(job_lock_key(job.pk)))


def second_run_is_skipped(job: Job) -> Run:
    """A second run of the job that got past the beat's admission (as one
    racing it would) reaches a worker's lock check: executed here, in the
    test process, against the same Redis."""
    now = timezone.now()
    second = Run.objects.create(
        job=job, trigger=RunTrigger.MANUAL, status=RunStatus.QUEUED, scheduled_for=now,
        enqueued_at=now, published_at=now,
    )  # fmt: skip
    assert execute(second.pk, worker="test-process") == RunStatus.SKIPPED
    second.refresh_from_db()
    assert second.message == (
        f"skipped: job #{job.pk} is locked by another run (overlap policy 'skip')"
    )
    return second


def assert_succeeded_not_lost(first: Run, beat_log: Callable[[], str]) -> None:
    wait_until(
        lambda: Run.objects.get(pk=first.pk).status != RunStatus.RUNNING,
        RUN_S + 10,
        "the first run to end",
    )
    first.refresh_from_db()
    assert first.status == RunStatus.SUCCEEDED, first.message
    assert "lost-run check waits: Redis's data is" in beat_log()  # the grace was kept
    assert f"run {first.pk} of job {first.job_id} lost" not in beat_log()


def test_a_keeper_re_takes_its_lock_after_a_flushall(start_process, beat, redis_client):
    job = sleeper()
    worker = start_process("worker", concurrency=1)
    checker = beat(TAKT_LOST_CHECK_SECONDS="1")
    enqueue_job(job, trigger=RunTrigger.MANUAL)
    first = wait_until(renewed(job, redis_client), 30, "the run to start and renew its lock")

    redis_client.flushall()  # every key: locks, broker, the data-age stamp

    wait_until(lambda: lock_holder(redis_client, job) == first.pk, LOCK_TTL_S, "the re-take")
    retook = f"re-took lock {job_lock_key(job.pk)} after Redis lost it"
    wait_until(lambda: retook in worker.log(), 5, "the keeper to log the re-take")
    second_run_is_skipped(job)
    assert_succeeded_not_lost(first, checker.log)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(free_port(), tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_keeper_re_takes_its_lock_after_a_restart_of_redis_without_persistence(
    start_process, beat, own_redis
):
    client = redis.Redis.from_url(own_redis.url)
    job = sleeper()
    worker = start_process("worker", concurrency=1, REDIS_URL=own_redis.url)
    checker = beat(TAKT_LOST_CHECK_SECONDS="1", REDIS_URL=own_redis.url)
    Trigger.objects.create(job=job, kind="interval", interval_seconds=1)  # the beat sends it
    first = wait_until(renewed(job, client), 30, "the run to start and renew its lock")

    own_redis.stop()  # its data is gone: no RDB, no AOF
    own_redis.start()

    wait_until(lambda: lock_holder(client, job) == first.pk, LOCK_TTL_S, "the re-take")
    retook = f"re-took lock {job_lock_key(job.pk)} after Redis lost it"
    wait_until(lambda: retook in worker.log(), 5, "the keeper to log the re-take")
    with override_settings(REDIS_URL=own_redis.url):
        second_run_is_skipped(job)
    assert_succeeded_not_lost(first, checker.log)
    client.close()
