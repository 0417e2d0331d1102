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
