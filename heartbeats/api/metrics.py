"""Prometheus metrics (F-107) at /metrics: the collector that reads the
cluster's counters (counted in Redis by runs/metrics.py, so every worker
adds to the same totals) and the gauges read at scrape time (the broker's
queue lengths, held runs, the queue switches, the seconds until the next
fire time), and the view that serves them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Min
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from heartbeats.core.pings import bearer_token, token_matches
from jobs.models import Job, QueueState, Trigger
from runs.broker import amqp_queue_lengths, is_amqp
from runs.core.broker import redis_queue_keys
from runs.locks import get_redis
from runs.metrics import LAG_BUCKETS, metric_key
from runs.models import Run, RunStatus


class TaktCollector:
    """A prometheus_client collector that reads Redis and the database."""

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        client = get_redis()
        runs = CounterMetricFamily("takt_runs", "Runs that ended, by status.", labels=["status"])
        for status, n in sorted(client.hgetall(metric_key("runs")).items()):
            runs.add_metric([status.decode()], int(n))
        yield runs

        raw = {k.decode(): float(v) for k, v in client.hgetall(metric_key("lag")).items()}
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
        for outcome, n in sorted(client.hgetall(metric_key("lock_waits")).items()):
            waits.add_metric([outcome.decode()], int(n))
        yield waits

        depth = GaugeMetricFamily(
            "takt_queue_depth", "Messages waiting in the broker.", labels=["queue"]
        )
        if is_amqp():  # RabbitMQ: a passive declare per queue (runs/broker.py)
            for queue, length in amqp_queue_lengths(_queues()).items():
                depth.add_metric([queue], length)
        else:
            for queue in _queues():
                pipe = client.pipeline(transaction=False)
                for key in redis_queue_keys(queue):
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
    names = set(Job.objects.values_list("queue", flat=True).distinct())
    return sorted(names | {"takt"})


def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics in Prometheus' text format. With TAKT_METRICS_TOKEN set,
    a request must send `Authorization: Bearer <token>` (compared in
    constant time)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    token = getattr(settings, "TAKT_METRICS_TOKEN", "")
    presented = bearer_token(request.headers.get("Authorization", ""))
    if token and not token_matches(presented, token):
        return HttpResponse("metrics: a valid bearer token is required\n", status=401)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TaktCollector())  # type: ignore[arg-type]
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
