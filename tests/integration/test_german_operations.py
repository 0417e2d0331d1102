"""German on the operations page, the admin index's Takt summary and in
alerts (issue 15, item 9): a German browser (Accept-Language) gets German
headings, states and messages, English stays the default; alerts and their
e-mails, written by workers and beats with no request, are in the
installation's LANGUAGE_CODE — German with LANGUAGE_CODE="de", English by
default, whatever language the code that raises them runs in."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone, translation

from heartbeats.alerts import raise_alert
from heartbeats.models import Alert, Heartbeat
from heartbeats.services import check_overdue
from jobs.models import Job
from runs.execution import execute
from runs.models import RunTrigger
from runs.services import create_run
from tests.integration.conftest import SECOND, clock, make_job, utc

pytestmark = pytest.mark.django_db

GERMAN = {"HTTP_ACCEPT_LANGUAGE": "de-DE,de;q=0.9,en;q=0.5"}
T0 = utc(2026, 6, 1, 8, 0)


def heartbeats_and_an_alert() -> Alert:
    now = timezone.now()
    Heartbeat.objects.create(name="fresh", deadline_s=3600, last_run_at=now,
                             last_success_at=now, last_status="succeeded")  # fmt: skip
    Heartbeat.objects.create(name="stale", deadline_s=60, last_run_at=now - timedelta(hours=2),
                             last_status="succeeded")  # fmt: skip
    Heartbeat.objects.create(name="broken", deadline_s=3600, last_run_at=now,
                             last_status="failed")  # fmt: skip
    Heartbeat.objects.create(name="never", deadline_s=60)
    return raise_alert("k", severity="critical", title="Run 'broken' failed", message="x", now=now)


def state_of(page: str, name: str) -> str:
    row = page[page.index(f">{name}</a>") :].split("</tr>")[0]
    return row.split("</span></td>")[0].rsplit(">", 1)[1]


def test_the_operations_page_speaks_german_to_a_german_browser(admin_client):
    heartbeats_and_an_alert()

    page = admin_client.get(reverse("admin:takt_heartbeats_operations"), **GERMAN)
    html = page.content.decode()

    assert '<html lang="de"' in html
    for text in (
        "<h1>Betrieb</h1>",
        "Wiederkehrende Läufe",
        "<th>Letzter Lauf</th>",
        "<th>Letzter Erfolg</th>",
        "<th>Frist (Sekunden)</th>",
        "<th>Zustand</th>",
        "<h2>Alarme</h2>",
        "<th>Schweregrad</th>",
        "<td>kritisch</td>",
        "Die angekreuzten Alarme als gesehen markieren",
    ):
        assert text in html, text
    # The heartbeat states, the same words as on every page (issue 29, A.5).
    assert [state_of(html, n) for n in ("fresh", "stale", "broken", "never")] == [
        "in Ordnung",
        "ausgefallen",
        "ausgefallen",
        "neu",
    ]
    assert "takt-state-down" in html  # the CSS class keeps the English code
    assert "Recurring runs" not in html and "Overdue" not in html


def test_without_a_language_header_the_operations_page_stays_english(admin_client):
    heartbeats_and_an_alert()

    html = admin_client.get(reverse("admin:takt_heartbeats_operations")).content.decode()

    assert "Recurring runs" in html and "<th>Severity</th>" in html
    assert state_of(html, "stale") == "down"
    assert "Wiederkehrende Läufe" not in html


def test_marking_alerts_seen_answers_in_german(admin_client):
    alert = heartbeats_and_an_alert()

    page = admin_client.post(
        reverse("admin:takt_heartbeats_alerts_seen"), {"alert": [alert.pk]}, follow=True, **GERMAN
    )

    assert "1 Alarm als gesehen markiert." in page.content.decode()
    assert "<td>ja</td>" in page.content.decode()  # seen


def test_the_admin_index_summary_and_the_heartbeat_admin_speak_german(admin_client):
    heartbeats_and_an_alert()
    Heartbeat.objects.filter(name="stale").update(state="down")

    index = admin_client.get(reverse("admin:index"), **GERMAN).content.decode()
    listing = admin_client.get(
        reverse("admin:takt_heartbeats_heartbeat_changelist"), **GERMAN
    ).content.decode()
    editor = admin_client.get(
        reverse("admin:takt_heartbeats_heartbeat_add"), **GERMAN
    ).content.decode()

    for text in ("Offene Alarme", "Nächste Läufe", "Betriebsseite →", "Warteschlange"):
        assert text in index, text
    assert 'takt-state-down">ausgefallen</span>' in index
    assert ">Läufe</a>" in index and "<th>Läufe</th>" in index  # the noun, not "runs" the verb
    # One state column, in the same words as the landing page's.
    assert "Betriebszustand" not in listing and 'takt-state-down">ausgefallen</span>' in listing
    assert "Betriebsseite" in listing
    assert "Karenz (Sekunden)" in editor
    broken = Heartbeat.objects.get(name="broken")
    change = admin_client.get(
        reverse("admin:takt_heartbeats_heartbeat_change", args=[broken.pk]), **GERMAN
    ).content.decode()
    assert "Letzter Status:" in change and "fehlgeschlagen" in change
    assert "Ein angehaltener Heartbeat löst keine Alarme aus." in editor


# --- Alerts and their e-mails: the installation's language ---------------------


@pytest.fixture
def mailing(settings, mailoutbox):
    settings.TAKT_ALERT_EMAILS = ["ops@example.com"]
    settings.TAKT_ALERT_WEBHOOK_URL = ""
    settings.TAKT_ALERT_MIN_SEVERITY = "warning"
    return mailoutbox


def fail_once(job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(target="tests.fail")
    job.refresh_from_db()
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    execute(run.pk, worker="test", clock=clock(T0, T0 + SECOND))


def test_an_alert_mail_is_german_with_language_code_de(
    redis_client, mailing, settings, django_capture_on_commit_callbacks
):
    settings.LANGUAGE_CODE = "de"
    job = make_job("nightly")
    with django_capture_on_commit_callbacks(execute=True):
        fail_once(job)

    (mail,) = mailing
    assert mail.subject == "[Takt] Lauf 'nightly' fehlgeschlagen (Warnung)"
    assert mail.body.startswith("Lauf #")
    assert "Schweregrad:     Warnung\n" in mail.body and "Anzahl:          1\n" in mail.body
    assert "Zuerst gesehen:" in mail.body
    assert Alert.objects.get().title == "Lauf 'nightly' fehlgeschlagen"


def test_an_alert_mail_is_english_by_default_even_inside_a_german_request(
    redis_client, mailing, django_capture_on_commit_callbacks
):
    job = make_job("nightly")
    with translation.override("de"), django_capture_on_commit_callbacks(execute=True):
        fail_once(job)

    (mail,) = mailing
    assert mail.subject == "[Takt] Run 'nightly' failed (warning)"
    assert "Severity:   warning\n" in mail.body and "Count:      1\n" in mail.body
    assert Alert.objects.get().title == "Run 'nightly' failed"


def test_an_overdue_alert_is_written_in_german_with_language_code_de(settings, mailing):
    settings.LANGUAGE_CODE = "de"
    Heartbeat.objects.create(name="export", deadline_s=60, grace_s=0, last_run_at=T0,
                             last_status="succeeded")  # fmt: skip

    check_overdue(now=T0 + 61 * SECOND)

    alert = Alert.objects.get()
    assert alert.title == "Lauf 'export' überfällig"
    assert alert.message == (
        "Lauf 'export' ist ausgefallen: letzter Lauf 2026-06-01 08:00:00 UTC; Frist 60 s"
        " (überschritten 2026-06-01 08:01:00 UTC), Karenz 0 s."
    )


def test_ping_errors_answer_in_the_callers_language_and_a_failure_alert_in_language_code(
    client, settings
):
    Heartbeat.objects.create(name="backup", deadline_s=86400)
    settings.TAKT_PING_TOKEN = "t0ken"
    token = {"HTTP_AUTHORIZATION": "Bearer t0ken"}

    unknown = client.post("/api/v1/heartbeats/nobody", **GERMAN, **token)
    bad = client.post("/api/v1/heartbeats/backup/300", **GERMAN, **token)
    english = client.post("/api/v1/heartbeats/nobody", **token)

    assert unknown.status_code == 404
    assert unknown.json() == {"name": "kein externer Heartbeat heißt 'nobody'"}
    assert bad.json()["exit_status"].startswith("erwartet start, fail oder einen Exit-Status")
    assert english.json() == {"name": "no outside heartbeat is named 'nobody'"}

    settings.LANGUAGE_CODE = "de"
    client.post("/api/v1/heartbeats/backup/fail", **token)  # no Accept-Language: a cron job's curl
    alert = Alert.objects.get()
    assert (alert.title, alert.message) == (
        "Lauf 'backup' fehlgeschlagen",
        "backup hat einen Fehlschlag gemeldet (fail)",
    )
