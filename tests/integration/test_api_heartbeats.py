"""F-41: heartbeats and alerts through the REST API, by session (+CSRF) and
by API token; the refusals; and the ping sharing /api/v1/heartbeats/<name>."""

from __future__ import annotations

from datetime import timedelta

import pytest

from heartbeats.models import Alert, Heartbeat
from heartbeats.processes import report_process, worker_detail
from tests.integration.api_helpers import SessionClient, TokenClient, make_token, user_with
from tests.integration.conftest import make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 11, 30, 8, 0)
READ = ("takt_heartbeats.view_heartbeat", "takt_heartbeats.view_alert")
WRITE = ("takt_heartbeats.change_heartbeat", "takt_heartbeats.change_alert")


@pytest.fixture
def beats() -> dict[str, Heartbeat]:
    job = make_job("report")
    report_process("worker:celery@w1", now=T0, detail=worker_detail(4, ["takt"]))
    return {
        "job": Heartbeat.objects.create(
            name="report",
            job=job,
            deadline_s=3600,
            last_run_at=T0,
            last_success_at=T0,
            last_status="succeeded",
            run_count=3,
            state="up",
        ),
        "backup": Heartbeat.objects.create(
            name="nightly-backup",
            deadline_s=86400,
            last_run_at=T0,
            last_status="failed",
            run_count=2,
            failure_count=1,
            state="down",
            paused=True,
        ),
        "process": Heartbeat.objects.get(name="worker:celery@w1"),
    }


@pytest.fixture
def alerts() -> dict[str, Alert]:
    def alert(key: str, severity: str, minutes: int, **fields: object) -> Alert:
        at = T0 + timedelta(minutes=minutes)
        return Alert.objects.create(
            key=key,
            severity=severity,
            title=key,
            first_seen_at=at,
            last_seen_at=at,
            **fields,
        )

    return {
        "failed": alert("run-failed:job:1", "warning", 1),
        "overdue": alert("overdue:2", "critical", 2, seen=True),
        "old": alert("overdue:3", "info", 0, resolved_at=T0 + timedelta(minutes=5)),
    }


@pytest.fixture
def reader() -> TokenClient:
    return TokenClient(make_token(user=user_with(*READ, username="reader")))


@pytest.fixture
def operator() -> SessionClient:
    return SessionClient(user_with(*READ, *WRITE))


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["name"] for row in response.json()["results"]]


def test_list_heartbeats_with_their_fields(reader, beats):
    response = reader.get("/api/v1/heartbeats")
    assert names(response) == ["nightly-backup", "report", "worker:celery@w1"]
    backup = response.json()["results"][0]
    assert backup["id"] == beats["backup"].pk
    assert (backup["kind"], backup["job"], backup["state"], backup["paused"]) == (
        "outside",
        None,
        "down",
        True,
    )
    assert (backup["deadline_s"], backup["grace_s"]) == (86400, None)
    assert (backup["run_count"], backup["failure_count"], backup["last_status"]) == (
        2,
        1,
        "failed",
    )
    assert backup["last_success_at"] is None
    assert backup["deadline_at"].startswith("2026-12-01T09:00:00")  # Europe/Berlin, +01:00
    report = response.json()["results"][1]
    assert (report["kind"], report["job"]) == ("job", beats["job"].job_id)
    assert report["last_success_at"] == report["last_run_at"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"state": "down"}, ["nightly-backup"]),
        ({"state": "up"}, ["report", "worker:celery@w1"]),
        ({"paused": "true"}, ["nightly-backup"]),
        ({"paused": "false"}, ["report", "worker:celery@w1"]),
        ({"name": "BACK"}, ["nightly-backup"]),
        ({"kind": "job"}, ["report"]),
        ({"kind": "outside"}, ["nightly-backup"]),
        ({"kind": "process"}, ["worker:celery@w1"]),
    ],
)
def test_heartbeat_filters(reader, beats, query, expected):
    assert names(reader.get("/api/v1/heartbeats", **query)) == expected


def test_heartbeat_filter_by_job_and_bad_filter_values(reader, beats):
    assert names(reader.get("/api/v1/heartbeats", job=beats["job"].job_id)) == ["report"]
    bad = reader.get("/api/v1/heartbeats", kind="cron")
    assert bad.status_code == 400 and "kind" in bad.json()


@pytest.mark.parametrize("slash", ["", "/"])
def test_retrieve_a_heartbeat_by_id_with_or_without_the_slash(reader, operator, beats, slash):
    pk = beats["backup"].pk
    for client in (reader, operator):
        response = client.get(f"/api/v1/heartbeats/{pk}{slash}")
        assert response.status_code == 200, response.content
        assert response.json()["name"] == "nightly-backup"
    assert reader.get(f"/api/v1/heartbeats/{pk + 100}{slash}").status_code == 404


def test_a_ping_still_reaches_the_ping_view(client, reader, beats, settings):
    settings.TAKT_PING_TOKEN = "t0ken"
    token = {"HTTP_AUTHORIZATION": "Bearer t0ken"}
    assert client.post("/api/v1/heartbeats/nightly-backup", **token).status_code == 200
    assert client.post("/api/v1/heartbeats/nightly-backup/start", **token).status_code == 200
    assert client.get("/api/v1/heartbeats/nightly-backup").status_code == 405
    backup = reader.get(f"/api/v1/heartbeats/{beats['backup'].pk}").json()
    assert (backup["run_count"], backup["last_status"]) == (3, "succeeded")


def test_patch_pauses_and_changes_an_outside_heartbeat(operator, beats):
    pk = beats["backup"].pk
    response = operator.send(
        "patch",
        f"/api/v1/heartbeats/{pk}",
        {"paused": False, "deadline_s": 7200, "grace_s": 60, "reminder_s": 600},
    )
    assert response.status_code == 200, response.content
    assert (response.json()["paused"], response.json()["deadline_s"]) == (False, 7200)
    beat = Heartbeat.objects.get(pk=pk)
    assert (beat.paused, beat.deadline_s, beat.grace_s, beat.reminder_s) == (
        False,
        7200,
        60,
        600,
    )
    assert beat.run_count == 2  # untouched


def test_patch_with_a_token_pauses_a_job_heartbeat(beats):
    token = TokenClient(make_token(user=user_with("takt_heartbeats.change_heartbeat")))
    response = token.send("patch", f"/api/v1/heartbeats/{beats['job'].pk}/", {"paused": True})
    assert response.status_code == 200, response.content
    assert Heartbeat.objects.get(pk=beats["job"].pk).paused is True


@pytest.mark.parametrize(
    ("which", "body", "field"),
    [
        ("job", {"deadline_s": 60}, "deadline_s"),  # the job's own setting
        ("backup", {"reminder_s": 30}, "reminder_s"),  # at least 60
        ("backup", {"alert_after_failures": 0}, "alert_after_failures"),
        ("backup", {"grace_s": -1}, "grace_s"),
        ("backup", {"paused": "perhaps"}, "paused"),
    ],
)
def test_patch_refusals_name_the_field_and_change_nothing(operator, beats, which, body, field):
    beat = beats[which]
    before = Heartbeat.objects.values().get(pk=beat.pk)
    response = operator.send("patch", f"/api/v1/heartbeats/{beat.pk}", body)
    assert response.status_code == 400
    assert field in response.json()
    assert Heartbeat.objects.values().get(pk=beat.pk) == before


def keys(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["key"] for row in response.json()["results"]]


def test_list_and_retrieve_alerts(reader, operator, alerts):
    assert keys(reader.get("/api/v1/alerts")) == ["overdue:2", "run-failed:job:1", "overdue:3"]
    one = operator.get(f"/api/v1/alerts/{alerts['old'].pk}").json()
    assert (one["severity"], one["resolved"], one["seen"], one["count"]) == (
        "info",
        True,
        False,
        1,
    )
    assert reader.get(f"/api/v1/alerts/{alerts['old'].pk + 100}").status_code == 404


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"severity": "critical"}, ["overdue:2"]),
        ({"seen": "false"}, ["run-failed:job:1", "overdue:3"]),
        ({"resolved": "true"}, ["overdue:3"]),
        ({"resolved": "false"}, ["overdue:2", "run-failed:job:1"]),
        ({"key": "overdue:2"}, ["overdue:2"]),
        ({"key": "overdue"}, []),
    ],
)
def test_alert_filters(reader, alerts, query, expected):
    assert keys(reader.get("/api/v1/alerts", **query)) == expected


def test_mark_an_alert_seen_by_session_and_by_token(operator, alerts):
    pk = alerts["failed"].pk
    response = operator.send("post", f"/api/v1/alerts/{pk}/seen")
    assert response.status_code == 200, response.content
    assert response.json()["seen"] is True
    assert Alert.objects.get(pk=pk).seen is True
    again = operator.send("post", f"/api/v1/alerts/{pk}/seen/")  # idempotent
    assert again.status_code == 200 and again.json()["seen"] is True

    Alert.objects.filter(pk=pk).update(seen=False)
    token = TokenClient(make_token(user=user_with("takt_heartbeats.change_alert", username="t")))
    assert token.send("post", f"/api/v1/alerts/{pk}/seen").json()["seen"] is True
    assert token.send("post", f"/api/v1/alerts/{pk + 100}/seen").status_code == 404


def test_the_csrf_header_as_the_spec_spells_it(alerts):
    operator = SessionClient(user_with(*READ, *WRITE), header="X-CSRF-Token")
    assert operator.send("post", f"/api/v1/alerts/{alerts['failed'].pk}/seen").status_code == 200


def test_writes_without_the_csrf_token_are_refused(operator, beats, alerts):
    seen = operator.send("post", f"/api/v1/alerts/{alerts['failed'].pk}/seen", csrf=False)
    assert seen.status_code == 403 and "CSRF" in seen.json()["detail"]
    patch = operator.send(
        "patch", f"/api/v1/heartbeats/{beats['backup'].pk}", {"paused": False}, csrf=False
    )
    assert patch.status_code == 403
    assert Alert.objects.get(pk=alerts["failed"].pk).seen is False
    assert Heartbeat.objects.get(pk=beats["backup"].pk).paused is True


def requests(beats, alerts) -> list[tuple[str, str, dict | None]]:
    return [
        ("get", "/api/v1/heartbeats", None),
        ("get", f"/api/v1/heartbeats/{beats['backup'].pk}", None),
        ("patch", f"/api/v1/heartbeats/{beats['backup'].pk}", {"paused": False}),
        ("get", "/api/v1/alerts", None),
        ("get", f"/api/v1/alerts/{alerts['failed'].pk}", None),
        ("post", f"/api/v1/alerts/{alerts['failed'].pk}/seen", None),
    ]


def send(client, method: str, path: str, body: dict | None):
    return client.get(path) if method == "get" else client.send(method, path, body)


def test_a_wrong_token_is_401_everywhere(beats, alerts):
    wrong = TokenClient("takt_nope_" + "x" * 30)
    for method, path, body in requests(beats, alerts):
        response = send(wrong, method, path, body)
        assert response.status_code == 401, (method, path)
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_no_credentials_is_refused(client, beats, alerts):
    for method, path, _ in requests(beats, alerts):
        if method == "get":
            assert client.get(path).status_code in (401, 403), path


def test_a_job_scoped_token_is_403_everywhere(beats, alerts):
    token = TokenClient(make_token(job=beats["job"].job))
    for method, path, body in requests(beats, alerts):
        assert send(token, method, path, body).status_code == 403, (method, path)
    assert Heartbeat.objects.get(pk=beats["backup"].pk).paused is True
    assert Alert.objects.get(pk=alerts["failed"].pk).seen is False


def test_users_without_the_model_permission_are_403(beats, alerts):
    nobody = SessionClient(user_with(username="nobody"))
    for method, path, body in requests(beats, alerts):
        assert send(nobody, method, path, body).status_code == 403, (method, path)
    # Reading does not allow writing.
    reader = TokenClient(make_token(user=user_with(*READ, username="only-reads")))
    seen = reader.send("post", f"/api/v1/alerts/{alerts['failed'].pk}/seen")
    patch = reader.send("patch", f"/api/v1/heartbeats/{beats['backup'].pk}", {"paused": False})
    assert (seen.status_code, patch.status_code) == (403, 403)
    # Alerts and heartbeats are separate permissions.
    alerts_only = TokenClient(
        make_token(user=user_with("takt_heartbeats.view_alert", username="a"))
    )
    assert alerts_only.get("/api/v1/heartbeats").status_code == 403
    assert alerts_only.get("/api/v1/alerts").status_code == 200
