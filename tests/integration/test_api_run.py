"""POST /api/v1/jobs/<id>/run (F-41, F-42, F-43) and the runs API:
the job's API trigger permission, job-scoped tokens (how another Takt
installation starts a job), Idempotency-Key, and reading runs back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from jobs.api.base import CappedCountPagination
from jobs.models import Job
from runs.models import Run, RunStatus
from runs.queue import pause_queue
from runs.services import enqueue_job
from tests.integration.api_helpers import SessionClient, TokenClient, make_token, user_with
from tests.integration.conftest import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _redis(redis_client: Any) -> None:
    """Runs are published to the private Redis after commit."""


def job_with(permission: str, name: str = "export") -> Job:
    # Its callers may set any run param (caller_params; test_least_privilege
    # tries a job that takes only some).
    return make_job(name, api_trigger_permission=permission, caller_params=["*"])


def run_path(job: Job) -> str:
    return f"/api/v1/jobs/{job.pk}/run"


def session_user() -> SessionClient:
    return SessionClient(user_with(username="alice"))  # no model permissions needed


# --- F-42: who may start a job -----------------------------------------------------------


def test_permission_off_refuses_everyone() -> None:
    job = job_with("off")
    admin = SessionClient(user_with(superuser=True, username="root"))
    own_token = TokenClient(make_token(job=job))
    for client in (admin, own_token):
        response = client.send("post", run_path(job))
        assert response.status_code == 403
        assert "api_trigger_permission" in response.json()
    assert not Run.objects.filter(job=job).exists()


def test_authenticated_admits_users_and_the_jobs_tokens() -> None:
    job = job_with("authenticated")
    user = user_with(username="bob")
    for client in (
        session_user(),
        TokenClient(make_token(user=user)),
        TokenClient(make_token(job=job)),
    ):
        response = client.send("post", run_path(job), {"params": {"n": 1}})
        assert response.status_code == 201, response.json()
        assert response.json()["trigger"] == "api"
    assert Run.objects.filter(job=job).count() == 3


def test_token_mode_admits_only_the_jobs_own_tokens() -> None:
    job = job_with("token")
    response = session_user().send("post", run_path(job))
    assert response.status_code == 403
    assert "api_trigger_permission" in response.json()
    user_token = TokenClient(make_token(user=user_with(superuser=True, username="root")))
    assert user_token.send("post", run_path(job)).status_code == 403
    response = TokenClient(make_token(job=job)).send("post", run_path(job))
    assert response.status_code == 201
    assert Run.objects.filter(job=job).count() == 1


def test_a_token_for_another_job_is_refused() -> None:
    job, other = job_with("token"), job_with("token", name="other")
    client = TokenClient(make_token(job=other))
    response = client.send("post", run_path(job))
    assert response.status_code == 403
    assert f"job #{other.pk}" in response.json()["detail"]
    # Nor does it learn which jobs exist.
    assert client.send("post", "/api/v1/jobs/999999/run").status_code == 403
    assert not Run.objects.filter(job=job).exists()


def test_refusals_without_csrf_or_with_a_wrong_token() -> None:
    job = job_with("authenticated")
    assert session_user().send("post", run_path(job), csrf=False).status_code == 403
    assert TokenClient("takt_00000000_wrong").send("post", run_path(job)).status_code == 401
    assert not Run.objects.filter(job=job).exists()


def test_unknown_job_is_404_for_a_user() -> None:
    response = session_user().send("post", "/api/v1/jobs/999999/run")
    assert response.status_code == 404


# --- the request body --------------------------------------------------------------------


def test_params_priority_and_run_at() -> None:
    job = job_with("authenticated")
    job.params = {"region": "eu", "full": False}
    job.save()
    later = timezone.now() + timedelta(hours=1)
    response = session_user().send(
        "post",
        run_path(job),
        {"params": {"full": True}, "priority": 1, "run_at": later.isoformat()},
    )
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert run.params == {"region": "eu", "full": True}
    assert run.priority == 1
    assert abs(run.scheduled_for - later) < timedelta(seconds=1)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"params": [1, 2]}, "params"),
        ({"params": "x"}, "params"),
        ({"priority": 12}, "priority"),
        ({"priority": "high"}, "priority"),
        ({"run_at": "tomorrow"}, "run_at"),
    ],
)
def test_bad_body_names_the_field(body: dict[str, Any], field: str) -> None:
    job = job_with("authenticated")
    response = session_user().send("post", run_path(job), body)
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Run.objects.filter(job=job).exists()


def test_a_paused_queue_refuses_with_409(redis_client: Any) -> None:
    job = job_with("authenticated")
    pause_queue(note="deploy", by="test", now=timezone.now())
    response = session_user().send("post", run_path(job))
    assert response.status_code == 409
    assert "queue" in response.json()
    assert not Run.objects.filter(job=job).exists()


# --- F-43: Idempotency-Key ---------------------------------------------------------------


def test_idempotency_key_returns_the_first_run() -> None:
    job = job_with("token")
    client = TokenClient(make_token(job=job))
    first = client.send(
        "post", run_path(job), {"params": {"n": 1}}, **{"Idempotency-Key": "nightly-2026-11-30"}
    )
    assert first.status_code == 201 and first.headers["Idempotent-Replayed"] == "false"
    again = client.send(
        "post", run_path(job), {"params": {"n": 2}}, **{"Idempotency-Key": "nightly-2026-11-30"}
    )
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    other = client.send("post", run_path(job), **{"Idempotency-Key": "nightly-2026-12-01"})
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]


def test_idempotency_key_holds_after_the_run_finished_within_the_window() -> None:
    job = job_with("authenticated")
    client = session_user()
    first = client.send("post", run_path(job), **{"Idempotency-Key": "k"}).json()
    Run.objects.filter(pk=first["id"]).update(
        status=RunStatus.SUCCEEDED, finished_at=timezone.now()
    )
    assert (
        client.send("post", run_path(job), **{"Idempotency-Key": "k"}).json()["id"] == first["id"]
    )


def test_too_long_idempotency_key_is_refused() -> None:
    job = job_with("authenticated")
    response = session_user().send("post", run_path(job), **{"Idempotency-Key": "k" * 201})
    assert response.status_code == 400 and "Idempotency-Key" in response.json()


def test_dedupe_window_from_python() -> None:
    """enqueue_job(dedupe_key=...) returns the same run within
    TAKT_DEDUPE_WINDOW_SECONDS whatever its status, and a new one after."""
    job = make_job("dedupe")
    t0 = timezone.now()
    with override_settings(TAKT_DEDUPE_WINDOW_SECONDS=60):
        first = enqueue_job(job, dedupe_key="invoice-7", now=t0)
        Run.objects.filter(pk=first.pk).update(status=RunStatus.FAILED, finished_at=t0)
        same = enqueue_job(job, dedupe_key="invoice-7", now=t0 + timedelta(seconds=59))
        assert same.pk == first.pk and same.deduplicated
        later = enqueue_job(job, dedupe_key="invoice-7", now=t0 + timedelta(seconds=61))
    assert later.pk != first.pk and not getattr(later, "deduplicated", False)
    assert Run.objects.get(pk=first.pk).dedupe_key == ""  # the key moved to the new run
    assert Run.objects.get(pk=later.pk).dedupe_key == "invoice-7"
    # The same key on another job is another key.
    assert enqueue_job(make_job("b"), dedupe_key="invoice-7", now=t0).pk not in (first.pk, later.pk)


# --- the runs API --------------------------------------------------------------------------


@pytest.mark.parametrize("via", ["session", "token"])
def test_runs_list_filters_and_retrieve_with_output(via: str) -> None:
    job, other = job_with("authenticated"), job_with("authenticated", name="other")
    done = enqueue_job(job)
    Run.objects.filter(pk=done.pk).update(
        status=RunStatus.SUCCEEDED, output="hello\nworld\n", finished_at=timezone.now()
    )
    enqueue_job(other)
    user = user_with("takt_runs.view_run", username="viewer")
    viewer: Any = TokenClient(make_token(user=user)) if via == "token" else SessionClient(user)
    listed = viewer.get("/api/v1/runs", job=job.pk).json()["results"]
    assert [r["id"] for r in listed] == [done.pk]
    assert "output" not in listed[0]
    assert [r["job"] for r in viewer.get("/api/v1/runs", status="queued").json()["results"]] == [
        other.pk
    ]
    both = viewer.get("/api/v1/runs?status=queued&status=succeeded").json()["results"]
    assert len(both) == 2
    future = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert viewer.get("/api/v1/runs", enqueued_after=future).json()["results"] == []
    assert len(viewer.get("/api/v1/runs", enqueued_before=future).json()["results"]) == 2
    one = viewer.get(f"/api/v1/runs/{done.pk}").json()
    assert one["output"] == "hello\nworld\n" and one["status"] == "succeeded"
    bad = viewer.get("/api/v1/runs", status="exploded")
    assert bad.status_code == 400 and "status" in bad.json()
    assert viewer.get("/api/v1/runs", enqueued_after="yesterday").status_code == 400


def test_the_runs_count_stops_at_its_cap_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run table grows without bound: the list counts at most the cap
    (or as deep as the page asked for), and says when more runs exist."""
    monkeypatch.setattr(CappedCountPagination, "count_cap", 5)
    jobs = [job_with("authenticated", name=f"export {i}") for i in range(8)]
    for job in jobs:
        enqueue_job(job)
    viewer = SessionClient(user_with("takt_runs.view_run", username="viewer"))

    first = viewer.get("/api/v1/runs", limit=2).json()
    assert (first["count"], first["count_capped"], len(first["results"])) == (5, True, 2)
    assert "offset=2" in first["next"]
    deep = viewer.get("/api/v1/runs", limit=2, offset=4).json()
    assert (deep["count"], deep["count_capped"]) == (6, True)  # counted to the page's end
    last = viewer.get("/api/v1/runs", limit=2, offset=6).json()
    assert (last["count"], last["count_capped"], last["next"]) == (8, False, None)
    assert [r["job"] for r in last["results"]] == [jobs[1].pk, jobs[0].pk]  # newest first
    one = viewer.get("/api/v1/runs", job=jobs[3].pk).json()
    assert (one["count"], one["count_capped"], one["next"]) == (1, False, None)


def test_runs_need_the_view_permission() -> None:
    enqueue_job(job_with("authenticated"))
    assert (
        TokenClient(make_token(user=user_with(username="nobody"))).get("/api/v1/runs").status_code
        == 403
    )
    assert session_user().get("/api/v1/runs").status_code == 403


def test_a_job_token_reads_only_its_jobs_runs() -> None:
    job, other = job_with("token"), job_with("token", name="other")
    client = TokenClient(make_token(job=job))
    mine = client.send("post", run_path(job)).json()
    theirs = enqueue_job(other)
    assert [r["id"] for r in client.get("/api/v1/runs").json()["results"]] == [mine["id"]]
    assert client.get(f"/api/v1/runs/{mine['id']}").status_code == 200
    assert client.get(f"/api/v1/runs/{theirs.pk}").status_code == 404


# --- issue 27, defect 4: a parent (F-04) is requested from outside -------------------------


def test_a_parent_job_is_started_through_the_api() -> None:
    """The manual says to request the main task, and a child's refusal says
    "request the parent instead": a parent (target takt.children) starts."""
    parent = make_job("Nightly", target="takt.children", api_trigger_permission="authenticated")
    make_job("Import", parent=parent)

    response = session_user().send("post", run_path(parent))

    assert response.status_code == 201, response.content
    assert Run.objects.get(job=parent).status == RunStatus.QUEUED


def test_starting_a_parent_needs_what_its_children_need() -> None:
    """Least privilege: the parent's run runs its children's programs, so
    whoever starts it needs their capabilities (a child's never checks the
    starter again)."""
    parent = make_job("Nightly", target="takt.children", api_trigger_permission="authenticated")
    make_job("Import", parent=parent)
    Job.objects.create(name="sh", kind="command", command=["id"], parent=parent)
    plain = session_user()

    response = plain.send("post", run_path(parent))

    assert response.status_code == 403 and "kind" in response.json()
    assert not Run.objects.filter(job=parent).exists()
    ops = SessionClient(user_with("takt_jobs.run_programs", username="ops"))
    assert ops.send("post", run_path(parent)).status_code == 201
