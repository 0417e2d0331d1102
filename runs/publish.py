"""Sending recorded runs to the workers (the outbox's second half, F-83).

A run is always in the database before its message is sent. A message may
be sent twice (a beat died between sending and marking, or two sweepers
raced): the worker's compare-and-set on the run's status makes the second
delivery a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any

from celery import current_app
from django.db import transaction

from jobs.policies import DEFAULT_QUEUE, JobKind, TimeoutAction
from jobs.registry import is_celery_task
from runs.broker import declare_priorities, is_amqp
from runs.clock import now as shared_now
from runs.core.broker import message_priority
from runs.marks import mark_sent
from runs.models import EXECUTE_RUN_TASK, Run, RunStatus, task_id_for
from runs.statements import mark_published

log = logging.getLogger("takt.publish")

# Seconds past the job's timeout before Celery kills a run that ignored the
# soft limit (the run is then recovered as lost by maintenance).
HARD_KILL_GRACE_S = 30
# Messages per pipelined round trip to the broker.
PUBLISH_BATCH = 500


def publish_runs(
    runs: Iterable[Run | int], *, now: datetime, replacing: Mapping[int, str | None] | None = None
) -> int:
    """Send runs and mark them published; returns how many were sent. Ids
    are read from the database first and only still-queued runs are sent;
    Run objects (just recorded by the caller, their job loaded) are sent as
    they are. After the broker batch is flushed, each run's message mark
    (runs/delivery.py) says `sent`, then its published_at is set: only if
    it had none, or to `now` for a lost message sent again (`replacing`:
    run id -> the mark the sweep saw, see delivery.mark_sent)."""
    items = list(runs)
    if not items:
        return 0
    ids = [item for item in items if not isinstance(item, Run)]
    in_hand = [item for item in items if isinstance(item, Run)]
    if ids:
        in_hand += (
            Run.objects.filter(pk__in=ids, status=RunStatus.QUEUED)
            .select_related("job")
            .only(
                "pk",
                "priority",
                "job__queue",
                "job__kind",
                "job__target",
                "job__timeout_s",
                "job__timeout_action",
            )
        )
    sent: list[int] = []
    # One broker connection for the whole batch, and (kombu >= 5.7 on Redis)
    # the messages go out in pipelined round trips instead of one each. Runs
    # are marked published only after the batch has been flushed.
    # By name: the task (runs/tasks.py) is the worker's; a publisher needs
    # only the app that the project configured (celery.current_app).
    app = current_app
    amqp = is_amqp(app)
    if amqp:  # RabbitMQ: Takt's queue is declared with x-max-priority (runs/broker.py)
        declare_priorities(app)
    routes: dict[str, str] = {}
    with app.producer_or_acquire() as producer, _batch(producer, len(in_hand)):
        send = _Sender(app, producer)
        for run in in_hand:
            send(
                run.pk,
                queue=queue_of(run.job, routes),
                priority=message_priority(run.priority, amqp=amqp),
                **_time_limits(run.job),
            )
            sent.append(run.pk)
    try:
        mark_sent(
            sent, replacing=replacing
        )  # after the flush: a lost tail loses a mark, never a message
    except Exception:  # the run without its mark is sent again later: a duplicate, harmless
        log.exception("could not mark %d sent messages in Redis", len(sent))
    for start in range(0, len(sent), PUBLISH_BATCH):
        mark_published(sent[start : start + PUBLISH_BATCH], now=now, again=replacing is not None)
    return len(sent)


class _Sender:
    """Sends execute-run messages for one batch, as ``app.send_task`` would
    send each (the same message, headers, properties, routing, signals and
    publish retry), with what send_task works out anew for every message
    worked out once per batch: the app's settings it reads, the task's
    options, the route of each queue, the parent task when publishing from
    inside one. That halves the broker side's cost per message (send_task
    140 µs, this 70 µs: benchmarks/README.md). The queue's declaration is
    made by the batch's first message to it."""

    def __init__(self, app: Any, producer: Any) -> None:
        self.app, self.producer, self.amqp = app, producer, app.amqp
        conf = app.conf
        self.sent_event = conf.task_send_sent_event
        self.reply_to = app.thread_oid
        task = app.tasks.get(EXECUTE_RUN_TASK)  # registered in workers, not in a beat
        self.task = task
        options = getattr(task, "_get_exec_options", None)
        self.task_options = {
            k: v for k, v in (options() if callable(options) else {}).items() if v is not None
        }
        parent = app.current_worker_task
        self.parent = parent
        self.root_id = (parent.request.root_id or parent.request.id) if parent else None
        self.parent_id = parent.request.id if parent else None
        self.routes: dict[str, dict[str, Any]] = {}

    def __call__(
        self, run_id: int, *, queue: str, priority: int | None, **limits: float | None
    ) -> None:
        first = queue not in self.routes
        if first:
            self.routes[queue] = self.amqp.router.route(
                {**self.task_options, "queue": queue}, EXECUTE_RUN_TASK, None, None, self.task
            )
        # What Celery would compute for every message: saferepr of the arguments.
        options = {**self.routes[queue], "priority": priority,
                   "argsrepr": f"[{run_id}]", "kwargsrepr": "{}"}  # fmt: skip
        task_id = task_id_for(run_id)
        message = self.amqp.create_task_message(
            task_id, EXECUTE_RUN_TASK, [run_id], {},
            reply_to=self.reply_to, create_sent_event=self.sent_event,
            root_id=self.root_id, parent_id=self.parent_id, ignore_result=True,
            time_limit=limits.get("time_limit"), soft_time_limit=limits.get("soft_time_limit"),
            **options,
        )  # fmt: skip
        with self.producer.connection._reraise_as_library_errors():
            self.amqp.send_task_message(
                self.producer, EXECUTE_RUN_TASK, message,
                **options, **({} if first else {"declare": []}),
            )  # fmt: skip
        if self.parent is not None:
            self.parent.add_trail(self.app.AsyncResult(task_id))


def queue_of(job: Any, routes: dict[str, str]) -> str:
    """The queue a run of `job` goes to: the job's; for a Celery task target
    whose job keeps the default queue (`takt`), the task's own (its `queue`, or the
    app's task_routes), so the run executes on the workers that serve that
    task. `routes` caches a target's queue for one batch."""
    default = DEFAULT_QUEUE
    if job.queue != default or getattr(job, "kind", JobKind.CALLABLE) != JobKind.CALLABLE:
        return str(job.queue)
    target = job.target
    if target not in routes:
        routes[target] = default
        if is_celery_task(target):
            routes[target] = task_queue(target) or default
    return routes[target]


def task_queue(target: str) -> str | None:
    """The queue a Celery task's own routing names: its `queue` option, else
    the app's task_routes; None when neither names one. Celery's own
    fallback, task_default_queue (`celery`), is not the task's routing: a
    run of such a task goes to Takt's queue, where Takt's workers listen."""
    own = getattr(current_app.tasks[target], "queue", None)
    route = {"queue": own} if own else None
    if route is None and current_app.amqp.router.routes:
        route = current_app.amqp.router.lookup_route(target, (), {}, {}, None)
    if not route:
        return None
    if isinstance(route, str):
        return route
    found = route.get("queue")
    return getattr(found, "name", None) or (str(found) if found else None)


def _time_limits(job: Any) -> dict[str, Any]:
    """Celery's time limits for a run: the job's timeout as the soft limit
    (the run ends `timed_out`) and a hard kill 30 s later; none at all for
    timeout action `continue`, which lets the run go on (F-26)."""
    if getattr(job, "timeout_action", TimeoutAction.STOP) == TimeoutAction.CONTINUE:
        return {"soft_time_limit": None, "time_limit": None}
    return {"soft_time_limit": job.timeout_s, "time_limit": job.timeout_s + HARD_KILL_GRACE_S}


def _batch(producer: Any, size: int) -> AbstractContextManager[Any]:
    batch = getattr(producer, "batch", None)  # kombu >= 5.7
    if batch is None or size < 2:  # a pipeline for one message only costs
        return nullcontext()
    return batch(max_size=PUBLISH_BATCH)  # type: ignore[no-any-return]


def publish_after_commit(run_ids: list[Run | int]) -> None:
    """Publish once the surrounding transaction commits (at once if none)."""
    transaction.on_commit(lambda: publish_runs(run_ids, now=shared_now()))
