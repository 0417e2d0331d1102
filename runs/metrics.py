"""Prometheus metrics (F-107) at /metrics.

Counted in Redis, so every worker process adds to the same totals and a
scrape sees the whole cluster: a run's end adds to `takt_runs_total{status}`
and to the scheduling-lag histogram (started_at − scheduled_for) in the same
Lua call that releases the job's lock (no extra round trip per run); a
worker that finds a job's lock taken adds to `takt_lock_waits_total{outcome}`.
The gauges are read at scrape time: the broker's queue lengths, held runs,
the queue switches and the seconds until the next fire time (each one
indexed lookup or an LLEN).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from runs.decisions import Decision, decision_fields, decision_key, log_size
from runs.locks import get_redis
from runs.marks import mark_key

LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

# KEYS: lock, runs hash, lag hash, decision stream, the run's message mark
# (runs/marks.py), then the slot sets the run is a member of (runs/slots.py);
# ARGV: token, status, lag bucket ('' = none), lag seconds, stream size,
# then the decision's fields.
RELEASE_AND_COUNT = """
for i = 6, #KEYS do
  redis.call('zrem', KEYS[i], ARGV[1])
end
local released = 0
if redis.call('get', KEYS[1]) == ARGV[1] then
  released = redis.call('del', KEYS[1])
end
redis.call('del', KEYS[5])
redis.call('hincrby', KEYS[2], ARGV[2], 1)
if ARGV[3] ~= '' then
  redis.call('hincrby', KEYS[3], ARGV[3], 1)
  redis.call('hincrbyfloat', KEYS[3], 'sum', ARGV[4])
end
redis.call('xadd', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', unpack(ARGV, 6))
return released
"""


def metric_key(name: str) -> str:
    return f"{settings.TAKT_KEY_PREFIX}:metrics:{name}"


def lag_bucket(lag_s: float) -> str:
    """The histogram bucket a lag falls in (its upper bound, or +Inf)."""
    for bound in LAG_BUCKETS:
        if lag_s <= bound:
            return repr(bound)
    return "+Inf"


def release_and_count(lock: Any, *, status: str, lag_s: float | None, decision: Decision) -> bool:
    """Release `lock` (by token) and the slots it holds, count the run's
    end, add its `end` entry to the decision log (F-65) and delete the
    run's message mark (it needs no re-send any more), in one round trip."""
    bucket = "" if lag_s is None else lag_bucket(max(lag_s, 0.0))
    mark = mark_key("none" if decision.run_id is None else decision.run_id)
    keys = (lock.key, metric_key("runs"), metric_key("lag"), decision_key(), mark, *lock.members)
    args = (lock.token, status, bucket, f"{max(lag_s or 0.0, 0.0):.6f}", str(log_size()))
    flat = [part for pair in decision_fields(decision).items() for part in pair]
    return bool(lock.client.eval(RELEASE_AND_COUNT, len(keys), *keys, *args, *flat))


def count_lock_wait(outcome: str) -> None:
    try:
        get_redis().hincrby(metric_key("lock_waits"), outcome, 1)
    except Exception:  # a metric never fails a run
        pass
