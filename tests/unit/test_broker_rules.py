"""The broker rules (runs/core/broker.py): which URLs are RabbitMQ's, the
priority a run's message carries on each broker, kombu's Redis lists."""

from __future__ import annotations

import pytest

from runs.core.broker import is_amqp_url, message_priority, redis_queue_keys


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("amqp://guest:guest@127.0.0.1:5672//", True),
        ("amqps://user:pw@mq.example.com:5671/prod", True),
        ("pyamqp://guest@localhost//", True),
        ("AMQP://guest@localhost//", True),
        ("amqp://a//;amqp://b//", True),  # failover: judged by the first
        ("redis://127.0.0.1:6379/0", False),
        ("rediss://127.0.0.1:6380/0", False),
        ("sentinel://a:26379;sentinel://b:26379", False),
        ("", False),
        (None, False),
    ],
)
def test_is_amqp_url(url, expected):
    assert is_amqp_url(url) is expected


@pytest.mark.parametrize(
    ("priority", "on_redis", "on_amqp"),
    [(0, 0, 9), (1, 1, 8), (5, 5, 4), (9, 9, 0)],
)
def test_message_priority_keeps_takts_order_on_both_brokers(priority, on_redis, on_amqp):
    assert message_priority(priority, amqp=False) == on_redis
    assert message_priority(priority, amqp=True) == on_amqp


def test_takts_first_priority_is_delivered_first_on_each_broker():
    # kombu's Redis transport pops the lowest step first, RabbitMQ the highest.
    redis_order = sorted(range(10), key=lambda p: message_priority(p, amqp=False))
    amqp_order = sorted(range(10), key=lambda p: -message_priority(p, amqp=True))
    assert redis_order == amqp_order == list(range(10))


def test_redis_queue_keys_are_one_list_per_priority_step():
    assert redis_queue_keys("takt") == ["takt", *(f"takt:{step}" for step in range(1, 10))]
