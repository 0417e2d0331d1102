"""A worker killed while its run holds a concurrency group's slot (F-31,
F-82): the slot lapses after the lock TTL and the beat's next sweep sends
the run that waited for it. In a module of its own: a worker left by
another test would take the long run that this one kills."""

from __future__ import annotations

import os
import signal
import time

import pytest

from jobs.models import ConcurrencyGroup
from runs.models import Run
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until
from tests.e2e.test_coordination_e2e import LOCK_TTL_S, POLL_S, job, sleeper

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_killed_workers_group_slot_frees_within_the_ttl_and_a_poll(start_process, beat):
    group = ConcurrencyGroup.objects.create(name="Exports")
    hog = sleeper("long export", 60, concurrency_group=group)
    quick = job("quick export", concurrency_group=group)
    doomed = start_process("worker", concurrency=1)
    held = enqueue_job(hog, trigger="manual")
    wait_until(
        lambda: Run.objects.filter(pk=held.pk, status="running").exclude(output="").exists(),
        20,
        "the long run to start",
    )
    start_process("worker", concurrency=1)  # the survivor
    beat()
    waiting = enqueue_job(quick, trigger="manual")
    wait_until(lambda: Run.objects.get(pk=waiting.pk).waiting_for == "group", 10, "it to wait")

    os.killpg(doomed.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_until(
        lambda: Run.objects.get(pk=waiting.pk).status == "succeeded",
        LOCK_TTL_S + POLL_S + 10,
        "the waiting run to run",
    )
    freed_s = time.monotonic() - killed_at

    # the slot lapses after the TTL; the beat's next sweep sends the run
    assert freed_s <= LOCK_TTL_S + POLL_S + 2.5, freed_s
