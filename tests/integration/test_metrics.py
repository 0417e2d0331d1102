"""F-107: /metrics in Prometheus' text format, counted across processes in
Redis."""

from __future__ import annotations

import pytest
from django.test import override_settings

from runs.execution import execute
from runs.locks import job_lock
from runs.models import RunTrigger
from runs.services import create_run
from tests.integration.conftest import SECOND, clock, make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)


def test_metrics_count_runs_by_status_lag_and_lock_waits(client, redis_client):
    ok, bad = make_job("ok"), make_job("bad", target="tests.fail")
    for job in (ok, ok, bad):
        run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
        execute(run.pk, worker="w", clock=clock(T0 + 2 * SECOND, T0 + 3 * SECOND))
    holder = job_lock(ok.pk)
    holder.acquire()
    run = create_run(ok, trigger=RunTrigger.MANUAL, now=T0)
    execute(run.pk, worker="w", clock=clock(T0))
    holder.release()

    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert 'takt_runs_total{status="succeeded"} 2.0' in text
    assert 'takt_runs_total{status="failed"} 1.0' in text
    assert 'takt_scheduling_lag_seconds_bucket{le="2.5"} 3.0' in text  # 2 s late each
    assert 'takt_scheduling_lag_seconds_bucket{le="1.0"} 0.0' in text
    assert "takt_scheduling_lag_seconds_sum 6.0" in text
    assert 'takt_lock_waits_total{outcome="skip"} 1.0' in text
    assert 'takt_queue_depth{queue="takt"}' in text
    assert "takt_queue_paused 0.0" in text


@override_settings(TAKT_METRICS_TOKEN="s3cret")
def test_metrics_can_require_a_token(client):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200
