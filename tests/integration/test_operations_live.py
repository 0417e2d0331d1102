"""A run's live view (F-93): the JSON the run page polls (runs/admin/live.py),
its permissions, and the live panel snippet."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.template import Context, Template
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from heartbeats.processes import PROCESS_DEADLINE_S, report_process
from runs.admin.live import LIVE_OUTPUT_CHARS, NO_WORKER, WAITING, output_tail
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run
from tests.integration.api_helpers import user_with
from tests.integration.conftest import make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)


def live(client: Client, run: Run):
    return client.get(reverse("admin:takt_runs_run_live", args=[run.pk]))


def a_run(**fields) -> Run:
    run = create_run(make_job("long one"), trigger=RunTrigger.MANUAL, now=T0)
    Run.objects.filter(pk=run.pk).update(**fields)
    run.refresh_from_db()
    return run


def test_a_running_run_shows_status_progress_output_and_the_time_so_far(admin_client):
    started = timezone.now() - timedelta(seconds=75)
    run = a_run(status=RunStatus.RUNNING, started_at=started, output="one\ntwo",
                progress={"done": 40, "total": 160, "note": "copying"})  # fmt: skip

    data = live(admin_client, run).json()

    assert {
        k: data[k] for k in ("id", "job", "status", "active", "output", "output_truncated")
    } == {
        "id": run.pk,
        "job": {"id": run.job_id, "name": "long one"},
        "status": "running",
        "active": True,
        "output": "one\ntwo",
        "output_truncated": False,
    }
    assert data["progress"] == {"done": 40, "total": 160, "note": "copying", "percent": 25.0}
    assert data["started_at"] == started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert data["finished_at"] is None and 75 <= data["duration_s"] < 80
    assert data["html"]["status"] == '<span class="takt-badge takt-status-running">running</span>'
    assert data["html"]["started_at"].startswith('<time class="takt-time" datetime="')
    assert data["html"]["duration"].startswith("1 min 1") and data["notice"] == ""


def test_a_finished_run_shows_its_duration_and_no_progress_when_it_reported_none(admin_client):
    run = a_run(status=RunStatus.SUCCEEDED, started_at=T0, finished_at=T0 + timedelta(seconds=4),
                duration_s=4.0, message="")  # fmt: skip
    data = live(admin_client, run).json()
    assert (data["active"], data["progress"], data["duration_s"]) == (False, None, 4.0)
    assert data["html"]["duration"] == "4.00 s"


def test_a_progress_without_total_has_no_percent(admin_client):
    run = a_run(status=RunStatus.RUNNING, started_at=T0, progress={"done": 7, "note": ""})
    assert live(admin_client, run).json()["progress"] == {
        "done": 7, "total": None, "note": "", "percent": None,
    }  # fmt: skip


def test_a_queued_run_says_when_no_worker_is_running(admin_client):
    run = a_run()
    assert (
        live(admin_client, run).json()["notice"]
        == NO_WORKER
        == ("waiting for a worker: none is running")
    )

    stale = timezone.now() - timedelta(seconds=PROCESS_DEADLINE_S + 5)
    report_process("worker:old@host", now=stale)
    assert live(admin_client, run).json()["notice"] == NO_WORKER
    report_process("worker:celery@host", now=timezone.now())
    assert live(admin_client, run).json()["notice"] == WAITING
    report_process("beat@host", now=timezone.now())  # a beat is no worker


def test_the_output_is_the_tail_from_a_line_start():
    output = "\n".join(f"line {n:06d}" for n in range(10_000))
    tail, cut = output_tail(output)
    assert cut and len(tail) <= LIVE_OUTPUT_CHARS
    assert tail.startswith("line ") and tail.endswith("line 009999")
    assert output_tail("short") == ("short", False)


def test_the_live_view_needs_view_run_and_staff(admin_client):
    run = a_run()
    no_perm = Client()
    no_perm.force_login(user_with("takt_jobs.view_job", username="jobs-only"))
    response = live(no_perm, run)
    assert response.status_code == 403 and "takt_runs.view_run" in response.json()["detail"]

    viewer = Client()
    viewer.force_login(user_with("takt_runs.view_run", username="viewer"))
    assert live(viewer, run).status_code == 200

    anonymous = live(Client(), run)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    assert admin_client.get(reverse("admin:takt_runs_run_live", args=[99999])).status_code == 404
    assert "no-store" in live(admin_client, run)["Cache-Control"]


def test_the_live_panel_renders_the_run_as_it_is_for_the_script_to_follow():
    run = a_run(status=RunStatus.RUNNING, started_at=T0, output="a <b>\nc",
                progress={"done": 3, "total": 4, "note": "almost"})  # fmt: skip
    html = Template('{% include "admin/takt_runs/run/live_panel.html" with run=run %}').render(
        Context({"run": run})
    )
    assert f'data-takt-live-url="/admin/takt_runs/run/{run.pk}/live/"' in html
    assert 'data-active="1"' in html
    assert '<progress class="takt-progress" data-live="bar" max="100" value="75">' in html
    assert "75 % (3 of 4)" in html and "almost" in html
    assert "a &lt;b&gt;\nc</pre>" in html  # escaped
    assert "takt-status-running" in html and "takt/run_live.js" in html

    finished = a_run(status=RunStatus.FAILED)
    html = Template('{% include "admin/takt_runs/run/live_panel.html" with run=run %}').render(
        Context({"run": finished})
    )
    assert 'data-active="0"' in html and 'data-live="bar" max="100" hidden>' in html
