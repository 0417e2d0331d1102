"""F-61: outside processes report by POST /api/v1/heartbeats/<name>."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from heartbeats.models import Alert, Heartbeat

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(settings):
    """A cron job's curl with the token TAKT_PING_TOKEN asks for: DEBUG is
    off in the tests, so a ping without one is refused (test_ping_security)."""
    settings.TAKT_PING_TOKEN = "t0ken"
    return Client(headers={"Authorization": "Bearer t0ken"})


@pytest.fixture
def backup():
    return Heartbeat.objects.create(name="nightly-backup", deadline_s=86400)


def test_start_then_success_then_a_failing_exit_status(client, backup):
    assert client.post("/api/v1/heartbeats/nightly-backup/start").status_code == 200
    backup.refresh_from_db()
    assert backup.last_started_at is not None and backup.run_count == 0

    ok = client.post("/api/v1/heartbeats/nightly-backup")
    assert ok.status_code == 200 and ok.json()["last_status"] == "succeeded"
    backup.refresh_from_db()
    assert backup.last_success_at == backup.last_run_at and backup.run_count == 1

    failed = client.post("/api/v1/heartbeats/nightly-backup/3")
    assert failed.json()["last_status"] == "failed"
    backup.refresh_from_db()
    assert (backup.failure_count, backup.last_result) == (1, "exit status 3")
    assert backup.last_success_at < backup.last_run_at  # kept through the failure
    alert = Alert.objects.get()
    assert alert.title == "Run 'nightly-backup' failed" and alert.resolved_at is None

    client.post("/api/v1/heartbeats/nightly-backup/fail")
    alert.refresh_from_db()
    assert alert.count == 2  # the same alert, counted

    client.post("/api/v1/heartbeats/nightly-backup/0")
    alert.refresh_from_db()
    assert alert.resolved_at is not None  # recovery


@pytest.mark.parametrize(
    ("path", "status", "field"),
    [
        ("/api/v1/heartbeats/no-such-thing", 404, "name"),
        ("/api/v1/heartbeats/nightly-backup/256", 400, "exit_status"),
        ("/api/v1/heartbeats/nightly-backup/-1", 400, "exit_status"),
        ("/api/v1/heartbeats/nightly-backup/oops", 400, "exit_status"),
    ],
)
def test_bad_pings_get_a_json_error_naming_the_field_and_change_nothing(
    client, backup, path, status, field
):
    before = Heartbeat.objects.values().get(pk=backup.pk)
    response = client.post(path)
    assert response.status_code == status
    assert field in response.json()
    assert Heartbeat.objects.values().get(pk=backup.pk) == before


def test_a_ping_must_be_a_post(client, backup):
    assert client.get("/api/v1/heartbeats/nightly-backup").status_code == 405


@override_settings(TAKT_PING_TOKEN="t0ken")
def test_a_ping_token_when_configured(backup):
    anonymous = Client()
    assert anonymous.post("/api/v1/heartbeats/nightly-backup").status_code == 401
    ok = anonymous.post("/api/v1/heartbeats/nightly-backup", HTTP_AUTHORIZATION="Bearer t0ken")
    assert ok.status_code == 200
