"""The age of Redis's data, which the lost-run and lost-message checks
wait out after a Redis restart or flush."""

from datetime import UTC, datetime, timedelta

from runs.redis_age import data_age_seconds, since_key

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_first_look_after_a_loss_starts_the_clock(redis_client):
    redis_client.delete(since_key())
    assert data_age_seconds(now=T0) == 0.0
    assert data_age_seconds(now=T0 + timedelta(seconds=12.5)) == 12.5


def test_a_flush_starts_it_again(redis_client):
    redis_client.delete(since_key())
    data_age_seconds(now=T0)
    redis_client.flushdb()
    assert data_age_seconds(now=T0 + timedelta(seconds=100)) == 0.0
    assert data_age_seconds(now=T0 + timedelta(seconds=103)) == 3.0


def test_a_garbled_value_counts_from_now(redis_client):
    redis_client.set(since_key(), "not a time")
    assert data_age_seconds(now=T0) == 0.0
    assert data_age_seconds(now=T0 + timedelta(seconds=1)) == 1.0


def test_a_workers_liveness_beat_dates_a_loss_before_any_check_looks(redis_client, settings):
    """After a flush, the first worker liveness beat writes the start of
    Redis's data: a check looking 20 s later sees 20 s, not 0 (it would
    otherwise wait its whole grace from its first look)."""
    from django.utils import timezone

    from runs.liveness import Liveness

    redis_client.flushdb()
    Liveness("w1@host").beat()
    assert redis_client.get("takt:alive:worker:w1@host") == b"1"
    later = timezone.now() + timedelta(seconds=20)
    assert 19.5 < data_age_seconds(now=later) <= 20.5


def test_a_worker_stopping_after_redis_says_so_in_one_line(redis_client, monkeypatch, caplog):
    """Ctrl-C in `make run` stops Redis with the worker: the worker's last
    act, deleting its liveness key, finds no Redis. One warning, no
    traceback; the key would expire with its TTL."""
    import redis

    from runs import liveness
    from tests.processes import free_port

    alive = liveness.Liveness("w2@host")
    gone = redis.Redis(port=free_port(), socket_connect_timeout=0.5)  # nothing listens there
    monkeypatch.setattr(liveness, "get_redis", lambda: gone)
    with caplog.at_level("WARNING", logger="takt.liveness"):
        alive.stop()
    (record,) = caplog.records
    assert record.levelname == "WARNING" and record.exc_info is None
    assert record.getMessage().startswith("could not delete the liveness key of worker w2@host (")
    assert record.getMessage().endswith(f"it expires within {alive.ttl_s} s")
