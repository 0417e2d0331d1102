"""The broker rules that are plain facts (runs/broker.py applies them):
which URLs name RabbitMQ, the priority a run's message carries there, and
the lists kombu's Redis transport keeps for one queue."""

from __future__ import annotations

AMQP_SCHEMES = frozenset({"amqp", "amqps", "pyamqp", "librabbitmq"})
# Takt's priorities 0..9; RabbitMQ's x-max-priority for Takt's queue.
MAX_PRIORITY = 9
# kombu's Redis transport keeps one list per priority step: `q`, `q:1` … `q:9`.
REDIS_PRIORITY_STEPS = range(10)


def is_amqp_url(url: str | None) -> bool:
    """Whether a broker URL names RabbitMQ (amqp://, amqps://, pyamqp://…).
    A URL that lists failover brokers (`a;b`) is judged by its first."""
    scheme = str(url or "").split(";", 1)[0].partition("://")[0].strip().lower()
    return scheme.split("+", 1)[-1] in AMQP_SCHEMES


def message_priority(priority: int, *, amqp: bool) -> int:
    """The priority a run's message carries for Takt's `priority` (0 starts
    first, 9 last): as is on Redis (kombu pops the lowest step first),
    inverted on AMQP (RabbitMQ delivers the highest number first)."""
    return MAX_PRIORITY - priority if amqp else priority


def redis_queue_keys(queue: str) -> list[str]:
    """kombu's Redis lists of one queue, one per priority step."""
    return [queue if step == 0 else f"{queue}:{step}" for step in REDIS_PRIORITY_STEPS]
