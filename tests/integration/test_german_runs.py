"""The run list, a run's page and its messages in German (issue 15, item
9): a request whose browser asks for German (Accept-Language: de, Django's
LocaleMiddleware) gets German labels, statuses, filters, panels and
refusals; without it the pages stay English (LANGUAGE_CODE). Stored
values (a run's message and output) are shown as they were stored."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from jobs.models import Job
from runs.models import Run, RunStatus
from tests.integration.conftest import make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 11, 30, 8, 0)
GERMAN = {"HTTP_ACCEPT_LANGUAGE": "de"}


def add_run(job: Job, status: str = RunStatus.SUCCEEDED, *, at=T0, **fields) -> Run:
    ended = status not in (RunStatus.QUEUED, RunStatus.RUNNING)
    return Run.objects.create(
        job=job,
        trigger=fields.pop("trigger", "schedule"),
        status=status,
        scheduled_for=at,
        enqueued_at=at,
        started_at=fields.pop("started_at", at + timedelta(seconds=1)),
        finished_at=fields.pop("finished_at", at + timedelta(seconds=3) if ended else None),
        duration_s=fields.pop("duration_s", 2.0 if ended else None),
        **fields,
    )


def page(client, url: str, **headers) -> str:
    response = client.get(url, **headers)
    assert response.status_code == 200
    return response.content.decode()


def test_the_run_list_in_german(admin_client):
    job = make_job("Nachtbericht")
    add_run(job, RunStatus.FAILED, message="boom: stored as it was")
    add_run(job, RunStatus.TIMED_OUT, at=T0 + timedelta(minutes=1))
    add_run(job, RunStatus.QUEUED, at=T0 + timedelta(minutes=2), held=True, started_at=None)

    html = page(admin_client, reverse("admin:takt_runs_run_changelist"), **GERMAN)

    assert '<html lang="de"' in html
    for column in ("Lauf", "Job", "Auslöser", "Status", "Geplant für", "Gestartet", "Dauer"):
        assert f">{column}</" in html, column
    assert 'class="takt-badge takt-status-failed">fehlgeschlagen<' in html
    assert 'class="takt-badge takt-status-timed_out">Zeitüberschreitung<' in html
    assert 'class="takt-badge takt-status-queued">eingereiht<' in html
    assert "zurückgehalten: wartet, bis der laufende Lauf seines Jobs endet" in html
    assert ">Zeitplan<" in html  # the trigger column
    # Filters: their titles and choices.
    assert "Nach Job (ID oder Teil seines Namens)" in html
    assert 'placeholder="z. B. 17 oder nightly"' in html and 'value="Ausführen"' in html
    for choice in ("Fehlgeschlagen", "Zeitüberschreitung", "Letzte 24 Stunden", "Nachholen"):
        assert f">{choice}</a>" in html, choice
    assert "auf seinen Job oder die Warteschlange" in html
    assert "Ausgewählte eingereihte oder laufende Läufe abbrechen" in html
    assert "Die ID eines Laufs (#123 oder 123)" in html
    for english in (">failed<", ">Scheduled for<", "Past 24 hours", "held: "):
        assert english not in html, english


def test_the_run_list_stays_english_by_default(admin_client):
    job = make_job("nightly")
    add_run(job, RunStatus.FAILED)

    html = page(admin_client, reverse("admin:takt_runs_run_changelist"))

    assert '<html lang="en' in html
    assert 'class="takt-badge takt-status-failed">failed<' in html
    assert ">Scheduled for</" in html and "By job (id or part of its name)" in html
    assert ">Failed</a>" in html and "Past 24 hours" in html
    assert "fehlgeschlagen" not in html and "Geplant für" not in html


def test_a_runs_page_in_german(admin_client):
    upstream = add_run(make_job("Import"), RunStatus.SUCCEEDED)
    job = make_job("Export")
    run = add_run(
        job,
        RunStatus.RUNNING,
        trigger="dependency",
        cause=upstream,
        output="line one\n",
        message="started by hand: stored as it was",
    )
    url = reverse("admin:takt_runs_run_change", args=[run.pk])

    html = page(admin_client, url, **GERMAN)

    assert 'class="takt-badge takt-status-running">läuft<' in html
    for heading in ("Zeiten", "Details", "Fortschritt und Ausgabe"):
        assert f">{heading}</h2>" in html, heading
    for label in ("Auslöser", "Versuch", "Priorität", "Ursache", "Meldung", "Geplant für"):
        assert f">{label}:</label>" in html, label
    assert "Abhängigkeit" in html  # the trigger's value
    assert "gestartet durch das Ende von" in html and f">Lauf #{upstream.pk}</a>" in html
    assert '(Ergebnis: <span class="takt-badge takt-status-succeeded">erfolgreich</span>)' in html
    assert ">Lauf abbrechen</button>" in html and ">Läufe dieses Jobs</a>" in html
    assert "Gestartet <span" in html and "· Dauer <span" in html  # the live panel
    assert f'src="{reverse("takt-jsi18n")}"' in html  # its script's texts, in German too
    # Stored values are shown as stored.
    assert "started by hand: stored as it was" in html and "line one" in html
    for english in ("Progress and output", ">Cancel run<", "started by the end of", ">Times<"):
        assert english not in html, english


def test_a_runs_page_stays_english_by_default(admin_client):
    run = add_run(make_job("Export"), RunStatus.RUNNING)

    html = page(admin_client, reverse("admin:takt_runs_run_change", args=[run.pk]))

    assert 'class="takt-badge takt-status-running">running<' in html
    assert ">Progress and output</h2>" in html and ">Cancel run</button>" in html
    assert ">Trigger:</label>" in html and "Lauf" not in html


def test_a_parent_runs_children_in_german(admin_client):
    parent_job = make_job("Kette")
    child = make_job("Schritt", parent=parent_job, child_order=1)
    make_job("Aus", parent=parent_job, child_order=2, enabled=False)
    parent = add_run(parent_job, RunStatus.RUNNING)
    add_run(child, RunStatus.SUCCEEDED, trigger="parent", cause=parent)

    html = page(admin_client, reverse("admin:takt_runs_run_change", args=[parent.pk]), **GERMAN)

    assert "Läufe seiner Unterjobs, in ihrer Reihenfolge" in html
    for header in ("Reihenfolge", "Unterjob", "Auslöser"):
        assert f"<th>{header}</th>" in html, header
    assert "deaktiviert: übersprungen" in html
    assert "<td>übergeordneter Job</td>" in html


def test_cancelling_says_so_in_german(admin_client, redis_client):
    job = make_job("Abbruch")
    queued = add_run(job, RunStatus.QUEUED, started_at=None)
    done = add_run(job, RunStatus.SUCCEEDED, at=T0 + timedelta(minutes=1))
    cancel = reverse("admin:takt_runs_run_cancel", args=[queued.pk])

    html = admin_client.post(cancel, {"post": "yes"}, follow=True, **GERMAN).content.decode()
    assert f"Lauf #{queued.pk} abgebrochen." in html

    html = admin_client.post(cancel, {"post": "yes"}, follow=True, **GERMAN).content.decode()
    assert f"Lauf #{queued.pk} ist bereits beendet (abgebrochen) am " in html
    assert "nur ein eingereihter oder laufender Lauf kann abgebrochen werden" in html

    again = add_run(job, RunStatus.QUEUED, at=T0 + timedelta(minutes=2), started_at=None)
    html = admin_client.post(
        reverse("admin:takt_runs_run_changelist"),
        {"action": "cancel_selected", "_selected_action": [again.pk, done.pk], "post": "yes"},
        follow=True,
        **GERMAN,
    ).content.decode()
    assert f"1 Lauf abgebrochen: #{again.pk}." in html
    assert f"Lauf #{done.pk} ist bereits beendet (erfolgreich)" in html
    # The run's stored message stays English, whoever reads it.
    assert Run.objects.get(pk=again.pk).message == "cancelled by admin before it started"


def test_the_live_view_speaks_the_readers_language(admin_client):
    run = add_run(make_job("Live"), RunStatus.QUEUED, started_at=None)
    url = reverse("admin:takt_runs_run_live", args=[run.pk])

    german = admin_client.get(url, **GERMAN).json()
    english = admin_client.get(url).json()

    assert german["status"] == english["status"] == "queued"  # the code, for scripts
    assert german["notice"] == "wartet auf einen Worker: keiner läuft"
    assert english["notice"] == "waiting for a worker: none is running"
    assert ">eingereiht</span>" in german["html"]["status"]
    assert ">queued</span>" in english["html"]["status"]
