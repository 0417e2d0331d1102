"""Published runs whose message is gone are sent again (F-83).

A run's message can vanish after it was published: a Redis restart without
persistence or a FLUSHALL takes the broker's queue with it, and a worker
killed with messages it had received but not started takes those along
(kombu would put them back only after the visibility timeout, 12 h by
default). Each published run therefore carries a *message mark* in Redis,
``<prefix>:msg:<run id>``, that says where its message is:

* ``sent``: in the broker's queue (written by `publish_runs` right after
  the broker batch was flushed: messages first, then marks, so a Redis
  that loses its last second keeps at worst a message without its mark,
  which costs one harmless re-send, never the reverse);
* ``w:<worker start>``: received by that worker's consumer (celery's
  task_received, in the worker's main process, so it covers prefetched
  messages that have not started, and the runs its pool children wait to
  claim while the database is down); a worker start is its hostname and a
  token of its main process (runs.marks.worker_start), so a worker killed
  and restarted under the same name at once is not taken for the old one;
* missing: lost with Redis's data, or the run ended (its end deletes the
  mark in the round trip that releases its lock, runs/metrics.py).

Each worker start keeps a liveness key ``<prefix>:alive:worker:<worker start>``
(runs/liveness.py). `resend_lost_messages` looks at the queued, published,
unheld runs older than TAKT_RESEND_AFTER_SECONDS and sends again those
whose mark is missing, names a worker whose liveness key is gone, or says
``sent`` while the run's broker queue is empty (a message popped by a
worker that died before it could record it, or an AOF tail lost). A
``sent`` mark with a non-empty queue is trusted however long the queue is:
a backlog causes no re-sends. A second delivery of the old message, should
it still exist, loses the queued → running compare-and-set
(runs/execution.py) and does nothing.

Nothing is re-sent while Redis's data is younger than the workers'
liveness TTL (plus a margin): right after a loss no worker has re-written
its liveness key yet.

On RabbitMQ (runs/broker.py) the queue lengths come from the broker, not
from Takt's Redis, and a worker's lost connection puts back the messages
it held at once; the marks work the same.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q

from runs.broker import amqp_queue_lengths, is_amqp
from runs.core.broker import REDIS_PRIORITY_STEPS, redis_queue_keys
from runs.decisions import Decision, record
from runs.locks import get_redis
from runs.marks import WORKER_PREFIX, alive_key, mark_key
from runs.models import Run, RunStatus
from runs.publish import publish_runs
from runs.redis_age import data_age_seconds

log = logging.getLogger("takt.delivery")

# Candidates read per query, with one MGET of their marks per batch.
RESEND_BATCH = 1000
# Seconds past the liveness TTL that Redis's data must be old before a
# missing key counts: live workers re-write theirs every third of the TTL.
ALIVE_GRACE_MARGIN_S = 2.0


def resend_reason(mark: str | None, *, alive: set[str], queue_empty: bool) -> str | None:
    """Why a queued, published run old enough to have started must be sent
    again, or None when its message is where its mark says. `alive`: the
    worker starts with a liveness key; `queue_empty`: its broker queue holds no
    message at all."""
    if mark is None:
        return "its message mark is gone (Redis lost the message with it)"
    if mark.startswith(WORKER_PREFIX):
        host = mark[len(WORKER_PREFIX) :]
        if host in alive:
            return None
        name = host.partition("~")[0]
        return f"worker {name} that had received it is gone (killed, or restarted since)"
    if queue_empty:
        return "marked sent, but its queue is empty"
    return None


@dataclass(frozen=True)
class Candidate:
    run_id: int
    job_id: int
    queue: str
    published_at: datetime


def resend_lost_messages(*, now: datetime, batch: int = RESEND_BATCH) -> int:
    """Send again the queued runs whose message is gone (module docstring).
    Returns how many were sent. An idle system pays one probe of an empty
    partial index (SQLite uses `run_published_idx`; PostgreSQL chose
    `run_active_idx`, as empty); each batch of candidates costs one DB query,
    one Redis round trip for their marks and queue lengths and one for the
    liveness keys of the workers they name, and for the lost ones two
    statements (the compare-and-set that keeps two beats from sending the
    same run) and the publish. Raises redis.RedisError when
    Redis cannot be reached (the beat's tick logs it)."""
    cutoff = now - timedelta(seconds=settings.TAKT_RESEND_AFTER_SECONDS)
    page = _candidates(cutoff=cutoff, now=now, after=None, limit=batch)
    if not page:
        return 0
    grace = settings.TAKT_WORKER_ALIVE_TTL_SECONDS + ALIVE_GRACE_MARGIN_S
    age = data_age_seconds()
    if age < grace:
        log.info("lost messages: not looked for, Redis's data is only %.1f s old", age)
        return 0
    sent = 0
    while page:
        lost = _claimed(_lost(page), cutoff=cutoff, now=now)
        if lost:
            seen = {c.run_id: mark for c, mark, _ in lost}
            sent += publish_runs(list(seen), now=now, replacing=seen)
            record(Decision("resent", c.job_id, c.run_id, detail=why, at=now) for c, _, why in lost)
        if len(page) < batch:
            break
        last = page[-1]
        page = _candidates(cutoff=cutoff, now=now, after=last, limit=batch)
    if sent:
        log.warning("re-sent %d published runs whose message was gone", sent)
    return sent


def _candidates(
    *, cutoff: datetime, now: datetime, after: Candidate | None, limit: int
) -> list[Candidate]:
    """Queued, published, unheld, due runs published before `cutoff`, in
    (published_at, id) order after `after` (keyset pagination)."""
    rows = Run.objects.filter(
        status=RunStatus.QUEUED,
        published_at__isnull=False,
        published_at__lt=cutoff,
        held=False,
        scheduled_for__lte=now,
    )
    if after is not None:
        rows = rows.filter(
            Q(published_at__gt=after.published_at)
            | Q(published_at=after.published_at, pk__gt=after.run_id)
        )
    values = rows.order_by("published_at", "pk").values_list(
        "pk", "job_id", "job__queue", "published_at"
    )[:limit]
    return [Candidate(*row) for row in values]


def _lost(page: list[Candidate]) -> list[tuple[Candidate, str | None, str]]:
    """The candidates whose message is gone, each with its mark and why."""
    client = get_redis()
    queues = sorted({c.queue for c in page})
    amqp = is_amqp()
    pipe = client.pipeline(transaction=False)
    pipe.mget([mark_key(c.run_id) for c in page])
    if not amqp:  # the broker's lists, in the same round trip as the marks
        for queue in queues:
            for key in redis_queue_keys(queue):
                pipe.llen(key)
    raw_marks, *lengths = pipe.execute()
    marks = [_text(m) for m in raw_marks]
    if amqp:
        empty = {q: n == 0 for q, n in amqp_queue_lengths(queues).items()}
    else:
        steps = len(REDIS_PRIORITY_STEPS)
        empty = {q: sum(lengths[i * steps : (i + 1) * steps]) == 0 for i, q in enumerate(queues)}
    hosts = sorted({m[len(WORKER_PREFIX) :] for m in marks if m and m.startswith(WORKER_PREFIX)})
    alive: set[str] = set()
    if hosts:
        found = client.mget([alive_key(h) for h in hosts])
        alive = {h for h, v in zip(hosts, found, strict=True) if v is not None}
    lost = []
    for candidate, mark in zip(page, marks, strict=True):
        why = resend_reason(mark, alive=alive, queue_empty=empty[candidate.queue])
        if why is not None:
            lost.append((candidate, mark, why))
    return lost


def _claimed(
    lost: list[tuple[Candidate, str | None, str]], *, cutoff: datetime, now: datetime
) -> list[tuple[Candidate, str | None, str]]:
    """The lost runs this sweep may send: moves their published_at to `now`
    by compare-and-set (still queued, still older than `cutoff`), so a
    second beat sweeping at the same moment finds them young and leaves
    them. Two statements per batch. A beat that dies right after this sends
    nothing; the next sweep finds the run again TAKT_RESEND_AFTER_SECONDS
    later."""
    if not lost:
        return []
    ids = [c.run_id for c, _, _ in lost]
    rows = Run.objects.filter(pk__in=ids, status=RunStatus.QUEUED, published_at__lt=cutoff)
    if not rows.update(published_at=now):
        return []
    mine = set(Run.objects.filter(pk__in=ids, published_at=now).values_list("pk", flat=True))
    return [item for item in lost if item[0].run_id in mine]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)
