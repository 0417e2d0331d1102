"""The age of Redis's data, which the lost-run and lost-message checks
wait out after a Redis restart or flush: measured on Redis's clock (the
countdown of the key's expiry), never on a process's own."""

from datetime import timedelta

import time_machine
from django.utils import timezone

from runs.liveness import Liveness
from runs.redis_age import SPAN_S, data_age_seconds, set_data_age, since_key


def aged_by_redis(client, seconds: float) -> None:
    """Redis's clock moves `seconds` on (its countdown of the key's expiry)."""
    client.pexpire(since_key(), client.pttl(since_key()) - int(seconds * 1000))


def test_first_look_after_a_loss_starts_the_clock(redis_client):
    redis_client.delete(since_key())
    assert data_age_seconds() < 1
    assert SPAN_S - 1 < redis_client.ttl(since_key()) <= SPAN_S
    aged_by_redis(redis_client, 12.5)
    assert 12.5 <= data_age_seconds() < 13.5


def test_a_flush_starts_it_again(redis_client):
    set_data_age(redis_client, 100)
    assert 100 <= data_age_seconds() < 101
    redis_client.flushdb()
    assert data_age_seconds() < 1
    aged_by_redis(redis_client, 3)
    assert 3 <= data_age_seconds() < 4


def test_a_key_without_expiry_counts_from_now(redis_client):
    """By hand, or a time stamp an earlier Takt wrote: a loss, once."""
    redis_client.set(since_key(), f"{timezone.now().timestamp() - 3600:.3f}")
    assert data_age_seconds() == 0.0
    assert data_age_seconds() < 1


def test_a_workers_liveness_beat_dates_a_loss_before_any_check_looks(redis_client):
    """After a flush, the first worker liveness beat writes the start of
    Redis's data: a check looking 20 s later sees 20 s, not 0 (it would
    otherwise wait its whole grace from its first look)."""
    redis_client.flushdb()
    Liveness("w1@host").beat()
    assert redis_client.get("takt:alive:worker:w1@host") == b"1"
    aged_by_redis(redis_client, 20)
    assert 20 <= data_age_seconds() < 21


def test_clocks_that_are_off_neither_age_nor_rejuvenate_the_data(redis_client):
    """Issue 28: a worker 90 s ahead dated a loss 90 s in the future, and a
    beat on time then read "Redis's data is 0.0 s old" for 90 s more. Both
    ends are Redis's clock now."""
    redis_client.flushdb()
    with time_machine.travel(timezone.now() + timedelta(seconds=90)):
        Liveness("ahead@host").beat()
    aged_by_redis(redis_client, 20)
    with time_machine.travel(timezone.now() - timedelta(seconds=90)):
        assert 20 <= data_age_seconds() < 21
    assert 20 <= data_age_seconds() < 21


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
