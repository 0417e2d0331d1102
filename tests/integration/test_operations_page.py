"""F-64: the operations page in the admin, and marking alerts as seen."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from heartbeats.alerts import raise_alert
from heartbeats.models import Alert, Heartbeat

pytestmark = pytest.mark.django_db


def test_an_empty_operations_page_says_no_run_has_reported_yet(admin_client):
    page = admin_client.get(reverse("admin:takt_heartbeats_operations"))
    assert page.status_code == 200
    assert b"No run has reported yet." in page.content


def test_the_operations_page_shows_each_heartbeat_state_and_marks_alerts_seen(admin_client):
    now = timezone.now()
    Heartbeat.objects.create(name="fresh", deadline_s=3600, last_run_at=now,
                             last_success_at=now, last_status="succeeded")  # fmt: skip
    Heartbeat.objects.create(name="stale", deadline_s=60, last_run_at=now - timedelta(hours=2),
                             last_status="succeeded")  # fmt: skip
    Heartbeat.objects.create(name="broken", deadline_s=3600, last_run_at=now,
                             last_status="failed")  # fmt: skip
    Heartbeat.objects.create(name="never", deadline_s=60)
    alert = raise_alert("k", severity="warning", title="Run 'broken' failed", message="x", now=now)

    page = admin_client.get(reverse("admin:takt_heartbeats_operations")).content.decode()
    for name, state in (("fresh", "up"), ("stale", "down"), ("broken", "down"),
                        ("never", "new")):  # fmt: skip
        row = page[page.index(f">{name}</a>") :].split("</tr>")[0]
        assert f">{state}</span></td>" in row, (name, row)
    assert "Run &#x27;broken&#x27; failed" in page or "Run 'broken' failed" in page
    # UTC for the browser to show in its own zone; the server's zone as the text.
    utc_iso = now.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    assert f'datetime="{utc_iso}"' in page
    assert timezone.localtime(now).strftime("%Y-%m-%d %H:%M:%S %Z") in page

    admin_client.post(reverse("admin:takt_heartbeats_alerts_seen"), {"alert": [alert.pk]})
    assert Alert.objects.get(pk=alert.pk).seen


def test_outside_heartbeats_can_be_added_in_the_admin(admin_client):
    response = admin_client.post(
        reverse("admin:takt_heartbeats_heartbeat_add"),
        {"name": "nightly-backup", "deadline_s": 86400, "grace_s": "", "alert_after_failures": "",
         "reminder_s": ""},
    )  # fmt: skip
    assert response.status_code == 302, response.content[:2000]
    assert Heartbeat.objects.get(name="nightly-backup").job_id is None


def test_every_page_says_a_heartbeats_state_in_the_same_words(admin_client):
    """Issue 29, A.5: one vocabulary, worked out at the page's moment; the
    stored state (the last overdue check's, stale here) is not what is shown."""
    now = timezone.now()
    Heartbeat.objects.create(name="stale", deadline_s=60, last_run_at=now - timedelta(hours=2),
                             last_status="succeeded", state="up")  # fmt: skip
    badge = '<span class="takt-badge takt-state-down">down</span>'

    landing = admin_client.get(reverse("admin:index")).content.decode()
    listing = admin_client.get(reverse("admin:takt_heartbeats_heartbeat_changelist")).content
    operations = admin_client.get(reverse("admin:takt_heartbeats_operations")).content.decode()

    states = landing[landing.index('id="takt-landing-states"') :].split("</table>")[0]
    assert f'{badge}</td><td><span class="takt-count">1<' in states
    assert badge in listing.decode() and badge in operations
    assert "Overdue" not in operations and "Last run failed" not in operations
