"""Message marks (F-83): where each published run's message is, in Redis
(``<prefix>:msg:<run id>``: ``sent``, ``w:<worker start>``, or missing), and
the workers' liveness keys. A worker is named by its *start* (`worker_start`):
its hostname and a token drawn when its main process began, so a worker
restarted under the same name (as a supervisor does within a second) is not
taken for the one that died with messages it had received. Written by the publisher (`mark_sent`), a worker's
consumer (`mark_received`) and a hold or a lost pool child
(`forget_mark`); the run's end deletes its mark in the round trip that
releases its lock (runs/metrics.py). runs/delivery.py reads them to send
lost messages again."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Mapping

from django.conf import settings

from runs.locks import get_redis

SENT = "sent"
WORKER_PREFIX = "w:"


RUN_TASK_PREFIX = "takt-run-"


# pid -> this process's token: drawn once per process, never inherited by a fork.
_TOKENS: dict[int, str] = {}


def worker_start(hostname: str) -> str:
    """`hostname` and this process's start token ("w1@host~3f9a0c1e"): what
    a worker's marks and liveness key name. Called in the worker's main
    process (its consumer receives the messages)."""
    pid = os.getpid()
    token = _TOKENS.get(pid)
    if token is None:
        token = _TOKENS[pid] = secrets.token_hex(4)
    return f"{hostname}~{token}"


def mark_key(run_id: int | str) -> str:
    return f"{settings.TAKT_KEY_PREFIX}:msg:{run_id}"


def alive_key(hostname: str) -> str:
    return f"{settings.TAKT_KEY_PREFIX}:alive:worker:{hostname}"


def mark_ttl_s() -> int:
    """A mark lives as long as kombu keeps an unacknowledged message: the
    broker's visibility timeout."""
    return int(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 43200))


def run_id_of_task(task_id: str | None) -> int | None:
    """The run a Celery task id names (`takt-run-<id>`), else None."""
    if not task_id or not task_id.startswith(RUN_TASK_PREFIX):
        return None
    tail = task_id[len(RUN_TASK_PREFIX) :]
    return int(tail) if tail.isdigit() else None


# KEYS: the runs' marks; ARGV: the TTL (s), then per key the value it must
# hold to be replaced ('' = none). A worker's `w:` mark written between the
# broker flush and this call is never overwritten.
_MARK_SENT = """
for i, key in ipairs(KEYS) do
  local current = redis.call('get', key)
  local expected = ARGV[i + 1]
  if (current == false and expected == '') or current == expected then
    redis.call('set', key, 'sent', 'EX', ARGV[1])
  end
end
return 0
"""


MARK_CHUNK = 1000


def mark_sent(run_ids: Iterable[int], *, replacing: Mapping[int, str | None] | None = None) -> None:
    """Mark these runs' messages as in the broker's queue, one round trip
    per 1000 runs, after the broker batch was flushed. A mark is written
    only where there is none, or (`replacing`, a re-send) where it still
    holds the value the sweep saw: a worker may already have received the
    new message and said so."""
    ids = list(run_ids)
    seen = replacing or {}
    client = get_redis()
    for start in range(0, len(ids), MARK_CHUNK):
        chunk = ids[start : start + MARK_CHUNK]
        expected = [seen.get(run_id) or "" for run_id in chunk]
        keys = [mark_key(run_id) for run_id in chunk]
        client.eval(_MARK_SENT, len(keys), *keys, mark_ttl_s(), *expected)


def mark_received(run_id: int, worker: str) -> None:
    """The worker start `worker` (`worker_start`) holds the run's message
    (one SET)."""
    get_redis().set(mark_key(run_id), f"{WORKER_PREFIX}{worker}", ex=mark_ttl_s())


def forget_mark(run_id: int) -> None:
    """Drop the run's mark: its message is gone (a pool child died before
    it could start the run), so the sweep sends it again."""
    get_redis().delete(mark_key(run_id))
