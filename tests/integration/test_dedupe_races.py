"""F-43 under concurrency: callers racing with one dedupe key get one run
(the unique index on (job, dedupe_key) decides), on real connections."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections

import runs.services as run_services
from runs.models import Run
from runs.services import enqueue_job
from tests.integration.conftest import make_job


def in_another_connection(work: Any) -> Any:
    """Run `work()` in a thread of its own: its own connection, committed."""
    out: list[Any] = []

    def body() -> None:
        try:
            out.append(work())
        finally:
            connections.close_all()

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(timeout=30)
    return out[0]


@pytest.mark.django_db(transaction=True)
def test_the_loser_of_the_insert_returns_the_winners_run(
    monkeypatch: pytest.MonkeyPatch, redis_client: Any
) -> None:
    """Another caller commits a run with the key right after this caller
    looked and found none: this caller's insert fails on the unique index,
    and the winner's run is returned instead of a second one."""
    job = make_job("invoices")
    real_look_up = run_services.run_with_key
    winner: list[Run] = []

    def look_up_then_lose_the_race(job_id: int, key: str) -> Run | None:
        found = real_look_up(job_id, key)
        if not winner:
            winner.append(Run())  # the competitor's own look-up is a plain one
            winner[0] = in_another_connection(lambda: enqueue_job(job_id, dedupe_key=key))
        return found

    monkeypatch.setattr(run_services, "run_with_key", look_up_then_lose_the_race)
    run = enqueue_job(job, dedupe_key="k")
    assert run.pk == winner[0].pk and run.deduplicated
    assert Run.objects.filter(job=job).count() == 1


@pytest.mark.django_db(transaction=True)
def test_callers_racing_with_one_key_get_one_run(redis_client: Any) -> None:
    job = make_job("invoices")
    callers = 6
    barrier = threading.Barrier(callers, timeout=30)
    got: list[int] = []
    errors: list[BaseException] = []

    def caller() -> None:
        try:
            barrier.wait()
            got.append(enqueue_job(job.pk, dedupe_key="invoice-2026-11").pk)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert len(got) == callers and len(set(got)) == 1
    assert Run.objects.filter(job=job).count() == 1
