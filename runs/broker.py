"""What differs between the two brokers Takt's runs travel through: Redis
(kombu's virtual transport, Takt's default) and RabbitMQ (AMQP, a
project's existing broker: docs/failures.md, "Celery on RabbitMQ"). Takt's
own Redis (REDIS_URL: locks, slots, message marks, the decision log) is the
same with either.

* Priorities. Takt's run priority 0 starts first and 9 last. kombu's Redis
  transport keeps one list per priority step and pops the lowest number
  first; RabbitMQ delivers the highest number first, and only from a queue
  declared with ``x-max-priority``. On AMQP a run's message therefore
  carries 9 - priority, and Takt's queue `takt` is declared with
  ``x-max-priority`` 9 by every publisher and worker (`declare_priorities`).
* Queue lengths (the lost-message sweep, the metrics): LLEN of kombu's
  lists on Redis; a passive queue.declare, which counts the ready messages
  and not the unacknowledged ones, as LLEN does, on AMQP.

The broker is the Celery app's: `app.conf.broker_url`, which Celery takes
from the environment's CELERY_BROKER_URL before the project's setting.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jobs.policies import DEFAULT_QUEUE
from runs.core.broker import MAX_PRIORITY, is_amqp_url


def is_amqp(app: Any = None) -> bool:
    """Whether the Celery app (the current one by default) sends through AMQP."""
    if app is None:
        from celery import current_app as app
    return is_amqp_url(app.conf.broker_url)


def declare_priorities(app: Any) -> None:
    """On AMQP, give Takt's queue `takt` in `app`'s queue table the
    ``x-max-priority`` argument (unless the project declared one itself),
    so a publisher and a worker declare it alike: RabbitMQ refuses a
    second declaration whose arguments differ. Idempotent; nothing on
    Redis. Other queues keep the project's own declaration: a queue the
    project already has on its RabbitMQ cannot gain an argument (its runs
    then start in order of publishing)."""
    if not is_amqp(app):
        return
    queue = app.amqp.queues[DEFAULT_QUEUE]  # created if missing, as Celery's router does
    arguments = dict(queue.queue_arguments or {})
    if "x-max-priority" not in arguments:
        arguments["x-max-priority"] = MAX_PRIORITY
        queue.queue_arguments = arguments


def amqp_queue_lengths(queues: Iterable[str], *, app: Any = None) -> dict[str, int]:
    """Ready messages in each AMQP queue (a passive queue.declare, one
    round trip each, on one connection); a queue that does not exist holds
    none. Raises the broker's connection errors."""
    if app is None:
        from celery import current_app as app
    from amqp.exceptions import NotFound

    lengths: dict[str, int] = {}
    with app.connection_for_read() as connection:
        channel = connection.channel()
        try:
            for name in queues:
                try:
                    lengths[name] = int(channel.queue_declare(queue=name, passive=True)[1])
                except NotFound:  # RabbitMQ closes the channel: take a new one
                    lengths[name] = 0
                    channel = connection.channel()
        finally:
            channel.close()
    return lengths
