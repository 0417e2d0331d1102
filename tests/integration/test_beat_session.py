"""A paused beat holds no row lock for long (runs/beat_session.py, issue
28 item 3): on PostgreSQL a beat's connection ends a transaction left
idle longer than TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS, so another beat
can claim the triggers it had locked, and the paused beat's next statement
fails as a short outage (the tick drops the connection and goes on)."""

from __future__ import annotations

import pytest
from django.db import connection, connections
from django.utils import timezone

from runs.beat_session import limit_hit, limit_session, session_limits
from tests.integration.conftest import make_job, make_trigger
from tests.live_fixtures import wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's session limits"),
]


def test_the_limits_come_from_the_settings(settings):
    settings.TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS = 2.5
    settings.TAKT_BEAT_STATEMENT_TIMEOUT_SECONDS = 0
    assert session_limits() == {
        "idle_in_transaction_session_timeout": 2500,
        "statement_timeout": 0,
    }


def test_a_beat_paused_in_its_claim_releases_its_rows_and_wakes_to_an_outage(settings):
    settings.TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS = 1
    trigger = make_trigger(
        make_job("claimed by a paused beat"),
        created_at=timezone.now(),
        kind="interval",
        interval_seconds=60,
    )
    paused = connections.create_connection("default")
    try:
        paused.ensure_connection()
        limit_session(connection=paused)
        paused.set_autocommit(False)
        with paused.cursor() as cursor:  # the claim's row lock, then the pause
            cursor.execute(
                "SELECT id FROM takt_jobs_trigger WHERE id = %s FOR UPDATE", [trigger.pk]
            )

        def claimable() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT id FROM takt_jobs_trigger WHERE id = %s FOR UPDATE SKIP LOCKED",
                    [trigger.pk],
                )
                return cursor.fetchone() is not None

        wait_until(claimable, 15, "the other beat to be able to claim the paused beat's trigger")

        with pytest.raises(Exception) as woke:
            with paused.cursor() as cursor:
                cursor.execute("SELECT 1")
        assert limit_hit(woke.value) == "TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS", repr(woke.value)
    finally:
        paused.close()


def test_the_woken_beat_says_so_in_one_line_and_ticks_again(settings, caplog):
    """The tick's failure (runs.beat `_failed`): one warning naming the
    setting, no traceback, the next tick after one poll."""
    from runs.beat import TaktScheduler

    settings.TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS = 1
    paused = connections.create_connection("default")
    try:
        paused.ensure_connection()
        limit_session(connection=paused)
        paused.set_autocommit(False)
        with paused.cursor() as cursor:
            cursor.execute("SELECT 1")

        def ended() -> BaseException | None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                    [paused.connection.info.backend_pid],
                )
                if cursor.fetchone()[0]:
                    return None
            try:
                with paused.cursor() as cursor:
                    cursor.execute("SELECT 1")
            except Exception as exc:
                return exc
            raise AssertionError("the idle transaction's session was not ended")

        exc = wait_until(ended, 15, "PostgreSQL to end the idle transaction's session")
    finally:
        paused.close()
    scheduler = TaktScheduler.__new__(TaktScheduler)
    with caplog.at_level("WARNING", logger="takt.beat"):
        assert scheduler._failed(exc, poll=0.5) == 0.5
    (record,) = caplog.records
    assert record.exc_info is None
    assert "TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS" in record.getMessage()
