"""What a worker's main process does for message delivery (runs/delivery.py),
connected once from the app's ready(): a received message marks its run
with the worker's name and start (runs.marks.worker_start: a worker
restarted under the same name is another start); the worker keeps its liveness key from the moment
it is ready until it shuts down; a warm shutdown gives back the messages
it has not started (runs/shutdown.py); a pool child that died before it could
start a run gives the run's message up, so the beat sends it again. On
RabbitMQ the worker declares Takt's queue with its priorities
(runs/broker.py) before it consumes."""

from __future__ import annotations

import logging
from typing import Any

from runs.broker import declare_priorities
from runs.liveness import Liveness
from runs.marks import forget_mark, mark_received, run_id_of_task, worker_start
from runs.models import EXECUTE_RUN_TASK
from runs.shutdown import give_back_soon

log = logging.getLogger("takt.delivery")

_liveness: list[Any] = []


def task_received(sender: Any = None, request: Any = None, **kwargs: Any) -> None:
    """One SET per received message, in the consumer: no database."""
    if request is None or getattr(request, "name", None) != EXECUTE_RUN_TASK:
        return
    run_id = run_id_of_task(getattr(request, "id", None))
    hostname = getattr(request, "hostname", None) or getattr(sender, "hostname", None)
    if run_id is None or not hostname:
        return
    try:
        mark_received(run_id, worker_start(hostname))
    except Exception:  # never stop the consumer: a missing mark costs a re-send
        log.exception("could not mark run %s as received", run_id, extra={"run_id": run_id})


def task_failure(
    sender: Any = None, task_id: str | None = None, exception: Any = None, **_: Any
) -> None:
    """A pool child lost while it held a run (WorkerLostError): the message
    is acknowledged (reject_on_worker_lost is off), so if the run never
    started its message is gone. Dropping its mark lets the sweep send it
    again; a run that had started is recovered as lost instead."""
    from billiard.exceptions import WorkerLostError

    if getattr(sender, "name", None) != EXECUTE_RUN_TASK or not isinstance(
        exception, WorkerLostError
    ):
        return
    run_id = run_id_of_task(task_id)
    if run_id is None:
        return
    try:
        forget_mark(run_id)
    except Exception:
        log.exception("could not drop the mark of run %s", run_id, extra={"run_id": run_id})


def after_setup(sender: Any = None, instance: Any = None, **kwargs: Any) -> None:
    """After -Q was applied, before the consumer declares its queues: on
    AMQP, Takt's queue as every publisher declares it (x-max-priority)."""
    app = getattr(instance, "app", None)
    if app is not None:
        declare_priorities(app)


def worker_ready(sender: Any = None, **kwargs: Any) -> None:
    hostname = getattr(sender, "hostname", None) or "unknown"
    _liveness.append(Liveness(worker_start(hostname)).start())


def worker_shutting_down(sender: Any = None, how: str = "", **kwargs: Any) -> None:
    """SIGTERM (warm): messages received but not started go back at once
    (runs/shutdown.py); the running runs finish."""
    if how == "Warm":
        give_back_soon()


def worker_shutdown(sender: Any = None, **kwargs: Any) -> None:
    while _liveness:
        _liveness.pop().stop()


def connect_all() -> None:
    from celery import signals

    for signal, receiver, uid in (
        (signals.task_received, task_received, "received"),
        (signals.task_failure, task_failure, "failure"),
        (signals.celeryd_after_setup, after_setup, "after_setup"),
        (signals.worker_ready, worker_ready, "ready"),
        (signals.worker_shutting_down, worker_shutting_down, "shutting_down"),
        (signals.worker_shutdown, worker_shutdown, "shutdown"),
    ):
        signal.connect(receiver, weak=False, dispatch_uid=f"takt.runs.{uid}")
