"""A worker's warm shutdown (SIGTERM) gives back what it has not started.

Celery's warm shutdown stops consuming and lets the running runs finish
(acks_late: their messages stay unacknowledged until they end). Messages
the worker had received but not handed to a pool process would go back to
the queue only when the broker channel closes, that is after the last
running run ended. Here they go back at once: when the shutdown begins,
each such message is moved from kombu's unacked set back to the head of
its queue (kombu's own restore, by delivery tag, in a WATCH transaction),
so another worker starts it while this one finishes its runs. The restore
at channel close then finds nothing left to restore for those tags, and
this worker does not start them any more (a pool process that did anyway
would lose the queued → running compare-and-set to the other worker).

On RabbitMQ (runs/broker.py) nothing is given back early: the broker puts
a worker's unacknowledged messages back when its connection closes, after
its last run ended (with the prefetch of 1 that Takt recommends, a worker
holds no message it has not started).

It runs in a short thread: the shutdown is announced from a signal
handler, where Redis I/O must not happen.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from runs.models import EXECUTE_RUN_TASK

log = logging.getLogger("takt.shutdown")


def unstarted_requests() -> list[Any]:
    """Requests of this worker's consumer received but not yet accepted by
    a pool process (celery.worker.state)."""
    from celery.worker import state

    active = set(state.active_requests)
    return [
        r for r in tuple(state.reserved_requests) if r not in active and r.name == EXECUTE_RUN_TASK
    ]


def give_back(requests: list[Any]) -> int:
    """Put the requests' messages back at the head of their queues; returns
    how many were given back. A Redis error is logged (the channel's close
    restores them later)."""
    given = 0
    for request in requests:
        message = request.message
        if getattr(message.channel, "qos", None) is None:
            # AMQP: RabbitMQ has no restore by tag (a reject now would race
            # the pool's ack); it puts the message back when this worker's
            # connection closes.
            continue
        try:
            message.channel.qos.restore_by_tag(message.delivery_tag)
            given += 1
        except Exception:
            log.exception("could not give back the message of %s", request.id)
    if given:
        log.info("warm shutdown: gave back %d received runs that had not started", given)
    return given


def give_back_soon() -> threading.Thread:
    """From the shutdown's signal handler: give back in a thread."""
    thread = threading.Thread(
        target=give_back, args=(unstarted_requests(),), name="takt-give-back", daemon=True
    )
    thread.start()
    return thread
