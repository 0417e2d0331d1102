"""F-41, F-28, F-29: GET /api/v1/queue and the queue switches through the
REST API, by session (+CSRF) and by API token; the refusals. Pause and
maintenance are mirrored to the (private) Redis for the workers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from heartbeats.processes import PROCESS_DEADLINE_S, report_process, worker_detail
from jobs.models import QueueState
from runs.models import Run, RunStatus
from runs.queue import maintenance_key, pause_key
from tests.integration.api_helpers import SessionClient, TokenClient, make_token, user_with
from tests.integration.conftest import hourly, make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 11, 30, 8, 0)
READ = ("takt_jobs.view_queuestate",)
WRITE = ("takt_jobs.view_queuestate", "takt_jobs.change_queuestate")


@pytest.fixture
def operator() -> SessionClient:
    return SessionClient(user_with(*WRITE))


@pytest.fixture
def token() -> TokenClient:
    return TokenClient(make_token(user=user_with(*WRITE, username="robot")))


def status_of(client) -> dict:
    response = client.get("/api/v1/queue")
    assert response.status_code == 200, response.content
    return response.json()


def test_an_empty_installation(token, redis_client):
    """No beat has reported: nothing dispatches by schedule."""
    assert status_of(token) == {
        "next_scheduled": None,
        "scheduler_enabled": False,
        "paused": False,
        "pause_note": "",
        "paused_by": "",
        "paused_at": None,
        "paused_until": None,
        "maintenance": False,
        "maintenance_note": "",
        "maintenance_lock_file": False,
        "maintenance_lock_files": [],
        "max_concurrency": None,
        "pool_size": 0,
        "active_count": 0,
        "queued_count": 0,
        "beats": [],
        "workers": [],
    }


def test_the_counts_the_next_fire_time_and_the_live_workers(token, redis_client):
    soon = hourly(make_job("soon"), created_at=T0 + timedelta(minutes=10))  # next: 09:00 UTC
    later = hourly(make_job("later"), created_at=T0 + timedelta(hours=2, minutes=10))
    # The earliest, but its job is disabled: the trigger is inactive.
    off = hourly(make_job("off", enabled=False), created_at=T0 - timedelta(hours=5))
    assert off.active is False
    assert soon.next_run_at == utc(2026, 11, 30, 9, 0) < later.next_run_at
    assert off.next_run_at < soon.next_run_at

    job = soon.job
    for status, n in ((RunStatus.QUEUED, 3), (RunStatus.RUNNING, 2), (RunStatus.SUCCEEDED, 4)):
        for _ in range(n):
            Run.objects.create(
                job=job, trigger="manual", status=status, scheduled_for=T0, enqueued_at=T0
            )
    Run.objects.create(  # held: queued too
        job=job, trigger="manual", held=True, scheduled_for=T0, enqueued_at=T0
    )

    now = timezone.now()
    report_process("worker:celery@a", now=now, detail=worker_detail(4, ["takt", "reports"]))
    report_process("worker:celery@b", now=now - timedelta(seconds=60), detail="concurrency=8")
    stale = now - timedelta(seconds=PROCESS_DEADLINE_S + 5)
    report_process("worker:celery@gone", now=stale, detail=worker_detail(16, ["takt"]))
    report_process("beat@host", now=now)

    status = status_of(token)
    assert parse_datetime(status["next_scheduled"]) == utc(2026, 11, 30, 9, 0)
    assert (status["active_count"], status["queued_count"]) == (2, 4)
    assert status["pool_size"] == 12
    # the queues each consumes; an older Takt's worker did not say
    assert [(w["name"], w["queues"]) for w in status["workers"]] == [
        ("worker:celery@a", ["reports", "takt"]),
        ("worker:celery@b", None),
    ]
    assert status["max_concurrency"] is None  # TAKT_MAX_CONCURRENCY unset: no limit


def test_max_concurrency_is_the_global_limit(token, redis_client, settings):
    settings.TAKT_MAX_CONCURRENCY = 4
    assert status_of(token)["max_concurrency"] == 4


def test_scheduler_enabled_is_what_the_live_beats_report(token, redis_client):
    """The beats' own TAKT_SCHEDULER_ENABLED, not the web process's."""
    now = timezone.now()
    report_process("beat@a", now=now, detail="scheduler=off")
    status = status_of(token)
    assert status["scheduler_enabled"] is False
    assert [(b["name"], b["scheduler_enabled"]) for b in status["beats"]] == [("beat@a", False)]
    report_process("beat@b", now=now, detail="scheduler=on")
    assert status_of(token)["scheduler_enabled"] is True
    stale = now - timedelta(seconds=PROCESS_DEADLINE_S + 5)
    report_process("beat@b", now=stale, detail="scheduler=on")
    assert status_of(token)["scheduler_enabled"] is False


def test_pause_and_resume_by_session(operator, redis_client):
    response = operator.send("post", "/api/v1/queue/pause", {"note": "deploy"})
    assert response.status_code == 200, response.content
    assert (response.json()["paused"], response.json()["pause_note"]) == (True, "deploy")
    state = QueueState.objects.get(pk=1)
    assert (state.paused, state.pause_note, state.paused_by) == (True, "deploy", "operator (API)")
    assert redis_client.get(pause_key()) == b"1"
    assert status_of(operator)["paused"] is True

    resumed = operator.send("post", "/api/v1/queue/resume/")
    assert resumed.status_code == 200 and resumed.json()["paused"] is False
    assert QueueState.objects.get(pk=1).paused is False
    assert redis_client.get(pause_key()) is None


def test_pause_twice_and_resume_when_running_are_harmless(token, redis_client):
    assert token.send("post", "/api/v1/queue/resume").json()["paused"] is False
    for _ in range(2):
        assert token.send("post", "/api/v1/queue/pause", {}).json()["paused"] is True
    assert QueueState.objects.get(pk=1).paused_by == "robot (API)"


def test_maintenance_on_and_off_by_token(token, redis_client):
    on = token.send("post", "/api/v1/queue/maintenance", {"on": True, "note": "db upgrade"})
    assert on.status_code == 200, on.content
    assert on.json()["maintenance"] is True
    state = QueueState.objects.get(pk=1)
    assert (state.maintenance, state.maintenance_note) == (True, "db upgrade")
    assert redis_client.get(maintenance_key()) == b"1"

    off = token.send("post", "/api/v1/queue/maintenance/", {"on": False})
    assert off.status_code == 200 and off.json()["maintenance"] is False
    assert redis_client.get(maintenance_key()) is None
    assert QueueState.objects.get(pk=1).maintenance_note == ""


def test_maintenance_by_session_and_its_lock_file(operator, redis_client, tmp_path):
    assert operator.send("post", "/api/v1/queue/maintenance", {"on": True}).json()["maintenance"]
    lock = tmp_path / "maintenance.lock"
    lock.touch()
    with override_settings(TAKT_MAINTENANCE_LOCK_FILE=str(lock)):
        off = operator.send("post", "/api/v1/queue/maintenance", {"on": False})
        assert off.json()["maintenance"] is True  # the lock file still holds it on
        assert redis_client.get(maintenance_key()) == b"1"
    assert status_of(operator)["maintenance"] is False


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/queue/maintenance", {}, "on"),
        ("/api/v1/queue/maintenance", {"on": "perhaps"}, "on"),
        ("/api/v1/queue/pause", {"note": 5 * [1]}, "note"),
    ],
)
def test_bad_bodies_name_the_field(token, redis_client, path, body, field):
    response = token.send("post", path, body)
    assert response.status_code == 400 and field in response.json()
    assert not QueueState.objects.filter(paused=True).exists()
    assert not QueueState.objects.filter(maintenance=True).exists()


WRITES = [
    ("/api/v1/queue/pause", {"note": "x"}),
    ("/api/v1/queue/resume", None),
    ("/api/v1/queue/maintenance", {"on": True}),
]


def unchanged() -> bool:
    state = QueueState.objects.filter(pk=1).first()
    return state is None or not (state.paused or state.maintenance)


@pytest.mark.parametrize(("path", "body"), WRITES)
def test_writes_without_the_csrf_token_are_refused(operator, redis_client, path, body):
    response = operator.send("post", path, body, csrf=False)
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert unchanged()


def test_a_wrong_token_is_401(redis_client):
    wrong = TokenClient("takt_nope_" + "x" * 30)
    assert wrong.get("/api/v1/queue").status_code == 401
    for path, body in WRITES:
        assert wrong.send("post", path, body).status_code == 401, path
    assert unchanged()


def test_a_job_scoped_token_is_403(redis_client):
    scoped = TokenClient(make_token(job=make_job("scoped")))
    assert scoped.get("/api/v1/queue").status_code == 403
    for path, body in WRITES:
        assert scoped.send("post", path, body).status_code == 403, path
    assert unchanged()


def test_reading_needs_view_and_switching_needs_change_queuestate(client, redis_client):
    assert client.get("/api/v1/queue").status_code in (401, 403)  # no credentials
    nobody = SessionClient(user_with(username="nobody"))
    assert nobody.get("/api/v1/queue").status_code == 403
    reader = SessionClient(user_with(*READ, username="reader"))
    assert reader.get("/api/v1/queue").status_code == 200
    reader_token = TokenClient(make_token(user=user_with(*READ, username="reader2")))
    for client_ in (nobody, reader, reader_token):
        for path, body in WRITES:
            assert client_.send("post", path, body).status_code == 403, path
    assert unchanged()
