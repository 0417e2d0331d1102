"""A beat paused inside its claim (issue 28, finding 4; runs/beat_session.py):
SIGSTOP while its claim transaction holds the trigger's row lock. The other
beat takes the fire time over within the idle-in-transaction limit, not
after the pause; the paused beat, woken, says so in one line and doubles
nothing.

To pause the beat exactly inside its claim, the test holds an uncommitted
run row for the fire time the beat is about to insert: the beat's INSERT
waits on the unique (job, fire time) key with the trigger's row locked.
The test then stops the beat and rolls its row back; the beat's INSERT
completes on the server while the beat sleeps, its transaction idle.

PostgreSQL only: SQLite serializes writers and has no sessions to limit."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from jobs.models import Job, Trigger
from runs.models import Run
from tests.live_fixtures import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's session limits"),
]

IDLE_LIMIT_S = 2  # TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS of both beats


def waiting_inserts() -> int:
    """Backends of this database waiting on a lock in an INSERT."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query ILIKE 'INSERT%%'"
        )
        return int(cursor.fetchone()[0])


class HeldRunRow:
    """In a thread of its own (its own connection): the run row of `fire`,
    inserted and not committed until `rollback()`."""

    def __init__(self, job: Job, fire) -> None:
        self.inserted, self.done = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold, args=(job, fire), daemon=True)
        self.thread.start()
        assert self.inserted.wait(15), "the held run row was not inserted"

    def _hold(self, job: Job, fire) -> None:
        try:
            with transaction.atomic():
                Run.objects.create(
                    job=job, trigger="schedule", status="queued", scheduled_for=fire,
                    enqueued_at=timezone.now(),
                )  # fmt: skip
                self.inserted.set()
                self.done.wait(120)
                transaction.set_rollback(True)
        finally:
            connections.close_all()

    def rollback(self) -> None:
        self.done.set()
        self.thread.join(15)


def test_a_beat_paused_in_its_claim_blocks_its_trigger_only_seconds(beat):
    job = Job.objects.create(name="claimed while paused", target="takt.hello_world")
    trigger = Trigger.objects.create(job=job, kind="interval", interval_seconds=3600)
    Trigger.objects.filter(pk=trigger.pk).update(next_run_at=timezone.now())
    fire = Trigger.objects.get(pk=trigger.pk).next_run_at

    held = HeldRunRow(job, fire)
    limit = {"TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS": str(IDLE_LIMIT_S)}
    paused = None
    try:
        paused = beat(**limit)
        wait_until(lambda: waiting_inserts() >= 1, 30, "the beat's claim to wait on the run key")
        os.kill(paused.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        held.rollback()  # the beat's INSERT completes; its transaction stays open, idle

        beat(**limit)  # the other beat
        run = wait_until(
            lambda: Run.objects.filter(job=job, scheduled_for=fire).first(),
            IDLE_LIMIT_S + 30,
            "the other beat to claim the paused beat's fire time",
        )
        taken_s = time.monotonic() - stopped
        print(f"the other beat claimed the fire time {taken_s:.1f} s after the pause began")
        assert paused.popen.poll() is None  # still paused, not dead
    finally:
        held.rollback()
        if paused is not None:
            os.kill(paused.pid, signal.SIGCONT)

    # The woken beat finds its connection closed: one line (the server's
    # reason, when it reaches the client, else a short outage) and on.
    wait_until(
        lambda: (
            "PostgreSQL ended the beat's transaction at" in paused.log()
            or "database back after" in paused.log()
        ),
        30,
        "the woken beat's line about its ended transaction, and its next tick",
    )
    assert paused.log().count("Traceback") == 0, paused.log()[-3000:]
    assert Run.objects.filter(job=job, scheduled_for=fire).count() == 1
    assert run.pk == Run.objects.get(job=job, scheduled_for=fire).pk
