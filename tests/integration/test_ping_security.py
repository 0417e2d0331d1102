"""Issue 25, finding 8: who may ping which heartbeat, and what a ping may
cost. Takt's own process heartbeats accept no pings; with DEBUG off a ping
needs a token (TAKT_PING_TOKEN or the heartbeat's own), compared in constant
time; the notification a ping causes is sent after the answer, at most once
per heartbeat per TAKT_PING_NOTIFY_INTERVAL_SECONDS."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from heartbeats.api.ping import record_ping
from heartbeats.models import Alert, Heartbeat
from heartbeats.ping_tokens import NotPingable, issue_ping_token
from heartbeats.processes import report_process
from tests.integration.conftest import SECOND, utc
from tests.integration.webhook import Hook
from tests.live_fixtures import wait_until

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
PING = "/api/v1/heartbeats/"
SIGNALS = ["", "/start", "/fail", "/0", "/3"]


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


@pytest.fixture
def production(settings):
    """DEBUG off, as in production (pytest-django's default, said aloud)."""
    settings.DEBUG = False
    settings.TAKT_PING_TOKEN = ""
    return settings


@pytest.fixture
def backup():
    return Heartbeat.objects.create(name="nightly-backup", deadline_s=86400)


def rows() -> list[dict[str, Any]]:
    return list(Heartbeat.objects.order_by("pk").values())


# --- Takt's own processes ---------------------------------------------------------


@pytest.mark.parametrize("name", ["worker:celery@w1", "beat@host-a"])
@pytest.mark.parametrize("signal", SIGNALS)
@pytest.mark.parametrize("debug", [True, False])
def test_a_process_heartbeat_accepts_no_ping_and_nothing_changes(
    client, settings, name, signal, debug
):
    """A dead worker cannot be made to look alive (nor a live one failed),
    its pool size stays what it reported, with or without DEBUG and with
    the global ping token."""
    settings.DEBUG, settings.TAKT_PING_TOKEN = debug, "t0ken"
    report_process(name, now=T0, detail="concurrency=8")
    before = rows()

    response = client.post(f"{PING}{name}{signal}", **bearer("t0ken"))

    assert response.status_code == 403
    assert "accepts no pings" in response.json()["name"]
    assert rows() == before
    assert not Alert.objects.exists()


# --- A token with DEBUG off -------------------------------------------------------


@pytest.mark.parametrize("signal", SIGNALS)
def test_with_debug_off_and_no_token_configured_a_ping_is_refused(
    client, production, backup, signal
):
    before = rows()
    response = client.post(f"{PING}nightly-backup{signal}")
    assert response.status_code == 401
    message = response.json()["authorization"]
    assert "TAKT_PING_TOKEN" in message and "ping token" in message
    assert rows() == before
    assert not Alert.objects.exists()


def test_an_unknown_name_without_a_token_is_refused_as_a_known_one_is(client, production):
    """With DEBUG off a caller without a token cannot tell names apart."""
    unknown = client.post(f"{PING}no-such-thing")
    assert unknown.status_code == 401 and "authorization" in unknown.json()


def test_with_debug_on_and_no_token_configured_the_documented_curl_works(client, settings, backup):
    """`make run` runs with DEBUG on: docs/operations.md's curl lines as written."""
    settings.DEBUG, settings.TAKT_PING_TOKEN = True, ""
    assert client.post(f"{PING}nightly-backup/start").status_code == 200
    assert client.post(f"{PING}nightly-backup").status_code == 200
    assert client.post(f"{PING}no-such-thing").status_code == 404


def test_with_debug_off_the_global_token_is_required_and_accepted(client, production, backup):
    production.TAKT_PING_TOKEN = "t0ken"
    for wrong in ({}, bearer("t0ke"), bearer("t0ken "), {"HTTP_AUTHORIZATION": "t0ken"}):
        assert client.post(f"{PING}nightly-backup/fail", **wrong).status_code == 401
    assert rows()[0]["run_count"] == 0
    ok = client.post(f"{PING}nightly-backup/fail", **bearer("t0ken"))
    assert ok.status_code == 200 and ok.json()["last_status"] == "failed"


# --- Constant-time comparisons ----------------------------------------------------


@pytest.fixture
def compared(monkeypatch) -> list[tuple[Any, Any]]:
    """The pairs given to hmac.compare_digest (the real one still answers)."""
    calls: list[tuple[Any, Any]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    return calls


def test_the_ping_token_is_compared_in_constant_time(client, production, backup, compared):
    production.TAKT_PING_TOKEN = "t0ken"
    assert client.post(f"{PING}nightly-backup", **bearer("guess")).status_code == 401
    assert client.post(f"{PING}nightly-backup", **bearer("t0ken")).status_code == 200
    assert len(compared) >= 2


def test_the_metrics_token_is_compared_in_constant_time(client, settings, compared):
    settings.TAKT_METRICS_TOKEN = "s3cret"
    assert client.get("/metrics", **bearer("guess")).status_code == 401
    assert compared, "the metrics token was compared with != (not constant time)"


# --- Notifications leave the request ----------------------------------------------


@pytest.fixture
def hook(settings) -> Iterator[Hook]:
    """A webhook receiver that holds each request until `hook.release` is set."""
    server = Hook(hold=True)
    settings.TAKT_ALERT_WEBHOOK_URL = server.url
    settings.TAKT_ALERT_EMAILS = []
    settings.TAKT_ALERT_MIN_SEVERITY = "warning"
    settings.TAKT_ALERT_TIMEOUT_SECONDS = 30.0  # the hook is released well before
    yield server
    server.close()


@pytest.mark.django_db(transaction=True)
def test_a_failure_ping_answers_before_the_webhook_and_the_alert_still_goes_out(
    client, production, hook
):
    production.TAKT_PING_TOKEN = "t0ken"
    beat = Heartbeat.objects.create(name="nightly-backup", deadline_s=86400)

    response = client.post(f"{PING}nightly-backup/fail", **bearer("t0ken"))

    assert response.status_code == 200
    assert hook.received == [], "the ping waited for the webhook's answer"
    hook.release.set()
    wait_until(lambda: hook.received, 15, "the webhook's notification")
    assert [(r["event"], r["key"]) for r in hook.received] == [("raised", f"ping-failed:{beat.pk}")]
    wait_until(
        lambda: Alert.objects.filter(notified_at__isnull=False).exists(),
        15,
        "the alert marked notified",
    )


# --- A heartbeat's own ping token -------------------------------------------------


def test_a_heartbeats_own_token_reaches_it_and_no_other(client, production, backup):
    other = Heartbeat.objects.create(name="weekly-report", deadline_s=86400)
    token = issue_ping_token(backup)
    assert token not in Heartbeat.objects.get(pk=backup.pk).ping_token_hash  # only a digest

    assert client.post(f"{PING}nightly-backup", **bearer(token)).status_code == 200
    assert client.post(f"{PING}nightly-backup", **bearer(token[:-1])).status_code == 401
    assert client.post(f"{PING}nightly-backup").status_code == 401
    refused = client.post(f"{PING}weekly-report", **bearer(token))
    assert refused.status_code == 401 and "authorization" in refused.json()
    other.refresh_from_db()
    assert other.run_count == 0

    newer = issue_ping_token(backup)  # the old one stops working at once
    assert client.post(f"{PING}nightly-backup", **bearer(token)).status_code == 401
    assert client.post(f"{PING}nightly-backup", **bearer(newer)).status_code == 200


def test_with_debug_on_a_heartbeat_with_its_own_token_still_needs_it(client, settings, backup):
    settings.DEBUG, settings.TAKT_PING_TOKEN = True, ""
    token = issue_ping_token(backup)
    assert client.post(f"{PING}nightly-backup").status_code == 401
    assert client.post(f"{PING}nightly-backup", **bearer(token)).status_code == 200


@pytest.mark.parametrize("name", ["worker:celery@w1", "beat@host-a"])
def test_a_process_heartbeat_gets_no_ping_token(name):
    report_process(name, now=T0, detail="concurrency=8")
    with pytest.raises(NotPingable):
        issue_ping_token(Heartbeat.objects.get(name=name))
    assert Heartbeat.objects.get(name=name).ping_token_hash == ""


def test_the_admin_issues_a_token_shown_once_and_removes_it(admin_client, client, production):
    beat = Heartbeat.objects.create(name="nightly-backup", deadline_s=86400)
    report_process("worker:celery@w1", now=T0)
    changelist = reverse("admin:takt_heartbeats_heartbeat_changelist")
    both = [beat.pk, Heartbeat.objects.get(name="worker:celery@w1").pk]

    page = admin_client.post(
        changelist, {"action": "new_ping_token", "_selected_action": both}, follow=True
    )

    shown = [str(m) for m in page.context["messages"]]
    token = next(m for m in shown if "nightly-backup" in m).split(": ")[1].split(" ")[0]
    assert any("worker:celery@w1" in m and "not pinged" in m for m in shown)
    assert client.post(f"{PING}nightly-backup", **bearer(token)).status_code == 200

    admin_client.post(changelist, {"action": "remove_ping_token", "_selected_action": both})
    assert client.post(f"{PING}nightly-backup", **bearer(token)).status_code == 401


def test_a_user_who_may_only_view_heartbeats_cannot_issue_a_token(client, production):
    beat = Heartbeat.objects.create(name="nightly-backup", deadline_s=86400)
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_heartbeat"))
    client.force_login(viewer)
    client.post(
        reverse("admin:takt_heartbeats_heartbeat_changelist"),
        {"action": "new_ping_token", "_selected_action": [beat.pk]},
    )
    assert Heartbeat.objects.get(pk=beat.pk).ping_token_hash == ""


# --- At most one notification per heartbeat per interval ---------------------------


@pytest.mark.django_db(transaction=True)
def test_a_heartbeat_notifies_at_most_once_per_interval(production, hook):
    production.TAKT_PING_NOTIFY_INTERVAL_SECONDS = 60
    hook.release.set()
    beat = Heartbeat.objects.create(name="nightly-backup", deadline_s=86400)
    failed = f"ping-failed:{beat.pk}"

    record_ping("nightly-backup", "fail", now=T0)  # raised: sent
    record_ping("nightly-backup", "0", now=T0 + 59 * SECOND)  # resolved: too soon, not sent
    record_ping("nightly-backup", "fail", now=T0 + 60 * SECOND)  # raised again: sent
    record_ping("nightly-backup", "fail", now=T0 + 200 * SECOND)  # a repeat: nothing to send
    record_ping("nightly-backup", "0", now=T0 + 300 * SECOND)  # resolved: sent

    # One thread sends them in order: once the last is in, none is still coming.
    wait_until(lambda: len(hook.received) >= 3, 15, "three notifications")
    assert [(r["event"], r["key"]) for r in hook.received] == [
        ("raised", failed),
        ("raised", failed),
        ("resolved", failed),
    ]
    assert Heartbeat.objects.get(pk=beat.pk).ping_notified_at == T0 + 300 * SECOND
    alert = Alert.objects.get(key=failed)
    assert (alert.count, alert.resolved_at) == (3, T0 + 300 * SECOND)  # all recorded
