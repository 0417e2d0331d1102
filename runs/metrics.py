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

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Min
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from runs.decisions import Decision, decision_fields, decision_key, log_size

LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

# KEYS: lock, runs hash, lag hash, decision stream, the run's message mark
# (runs/delivery.py); ARGV: token, status, lag bucket ('' = none), lag
# seconds, stream size, then the decision's fields.
RELEASE_AND_COUNT = """
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


def _key(name: str) -> str:
    return f"{settings.TAKT_KEY_PREFIX}:metrics:{name}"


def lag_bucket(lag_s: float) -> str:
    """The histogram bucket a lag falls in (its upper bound, or +Inf)."""
    for bound in LAG_BUCKETS:
        if lag_s <= bound:
            return repr(bound)
    return "+Inf"


def release_and_count(lock: Any, *, status: str, lag_s: float | None, decision: Decision) -> bool:
    """Release `lock` (by token), count the run's end, add its `end` entry
    to the decision log (F-65) and delete the run's message mark (it needs
    no re-send any more), in one round trip."""
    from runs.delivery import mark_key

    bucket = "" if lag_s is None else lag_bucket(max(lag_s, 0.0))
    mark = mark_key("none" if decision.run_id is None else decision.run_id)
    keys = (lock.key, _key("runs"), _key("lag"), decision_key(), mark)
    args = (lock.token, status, bucket, f"{max(lag_s or 0.0, 0.0):.6f}", str(log_size()))
    flat = [part for pair in decision_fields(decision).items() for part in pair]
    return bool(lock.client.eval(RELEASE_AND_COUNT, 5, *keys, *args, *flat))


def count_lock_wait(outcome: str) -> None:
    from runs.locks import get_redis

    try:
        get_redis().hincrby(_key("lock_waits"), outcome, 1)
    except Exception:  # a metric never fails a run
        pass


class TaktCollector:
    """A prometheus_client collector that reads Redis and the database."""

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        from jobs.models import QueueState, Trigger
        from runs.locks import get_redis
        from runs.models import Run, RunStatus

        client = get_redis()
        runs = CounterMetricFamily("takt_runs", "Runs that ended, by status.", labels=["status"])
        for status, n in sorted(client.hgetall(_key("runs")).items()):
            runs.add_metric([status.decode()], int(n))
        yield runs

        raw = {k.decode(): float(v) for k, v in client.hgetall(_key("lag")).items()}
        cumulative, buckets = 0.0, []
        for bound in [*map(repr, LAG_BUCKETS), "+Inf"]:
            cumulative += raw.get(bound, 0.0)
            buckets.append((bound, cumulative))
        yield HistogramMetricFamily(
            "takt_scheduling_lag_seconds",
            "started_at - scheduled_for of the runs that ended.",
            buckets=buckets,
            sum_value=raw.get("sum", 0.0),
        )

        waits = CounterMetricFamily(
            "takt_lock_waits", "Runs that found their job's lock taken.", labels=["outcome"]
        )
        for outcome, n in sorted(client.hgetall(_key("lock_waits")).items()):
            waits.add_metric([outcome.decode()], int(n))
        yield waits

        depth = GaugeMetricFamily(
            "takt_queue_depth", "Messages waiting in the broker.", labels=["queue"]
        )
        for queue in _queues():
            keys = [queue, *(f"{queue}:{p}" for p in range(1, 10))]
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.llen(key)
            depth.add_metric([queue], sum(pipe.execute()))
        yield depth

        held = Run.objects.filter(status=RunStatus.QUEUED, held=True).count()
        yield GaugeMetricFamily("takt_runs_held", "Queued runs waiting for their job.", value=held)
        state = QueueState.objects.filter(pk=1).first()
        yield GaugeMetricFamily(
            "takt_queue_paused",
            "1 while the queue is paused.",
            value=int(bool(state and state.paused)),
        )
        yield GaugeMetricFamily(
            "takt_maintenance",
            "1 while maintenance mode is on.",
            value=int(bool(state and state.maintenance)),
        )
        nxt = Trigger.objects.filter(active=True).aggregate(m=Min("next_run_at"))["m"]
        if nxt is not None:
            yield GaugeMetricFamily(
                "takt_next_fire_seconds",
                "Seconds until the next fire time (negative: overdue).",
                value=(nxt - timezone.now()).total_seconds(),
            )


def _queues() -> list[str]:
    from jobs.models import Job

    names = set(Job.objects.values_list("queue", flat=True).distinct())
    return sorted(names | {"takt"})


def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics in Prometheus' text format. With TAKT_METRICS_TOKEN set,
    a request must send `Authorization: Bearer <token>`."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    token = getattr(settings, "TAKT_METRICS_TOKEN", "")
    if token and request.headers.get("Authorization", "") != f"Bearer {token}":
        return HttpResponse("metrics: a valid bearer token is required\n", status=401)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TaktCollector())  # type: ignore[arg-type]
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
