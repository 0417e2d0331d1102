"""The job-side admin pages in German (issue 15, item 9): a request whose
browser asks for German (Accept-Language: de, Django's LocaleMiddleware)
gets the queue page, the timeline, the load forecast and the concurrency
groups with German headings, buttons and messages, and the catalogue of
the scripts' texts (jobs/urls.py's takt-jsi18n) in German; without it
they stay English (LANGUAGE_CODE).
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from jobs.models import ConcurrencyGroup
from tests.integration.conftest import make_job

pytestmark = pytest.mark.django_db

GERMAN = {"HTTP_ACCEPT_LANGUAGE": "de"}


def page(client, url: str, **headers) -> str:
    response = client.get(url, **headers)
    assert response.status_code == 200
    return response.content.decode()


def test_the_queue_page_in_german(admin_client, redis_client):
    url = reverse("admin:takt_jobs_queuestate_changelist")
    german = page(admin_client, url, **GERMAN)
    for text in ("<h2>Zustand</h2>", "<h2>Schalter</h2>", "<th>Läufe</th>", "Wartungsmodus"):
        assert text in german
    assert 'value="Warteschlange anhalten"' in german
    assert "Kein laufender Worker: Eingereihte Läufe warten." in german
    assert "<title>Warteschlange" in german
    assert f'<script src="{reverse("takt-jsi18n")}"></script>' in german  # the relative times
    english = page(admin_client, url)
    assert "<h2>State</h2>" in english and 'value="Pause the queue"' in english


def test_the_queue_page_says_its_messages_and_errors_in_german(admin_client, redis_client):
    url = reverse("admin:takt_jobs_queuestate_changelist")
    refused = admin_client.post(url, {"action": "pause", "until": "2000-01-01 00:00"}, **GERMAN)
    assert "2000-01-01 00:00 CET liegt in der Vergangenheit" in refused.content.decode()
    done = admin_client.post(url, {"action": "pause", "note": "Wartung"}, follow=True, **GERMAN)
    assert "Warteschlange angehalten." in done.content.decode()


def test_the_timeline_and_the_forecast_in_german(admin_client):
    job = make_job("Nachtbericht")
    timeline = page(admin_client, reverse("admin:takt_jobs_job_timeline"), **GERMAN)
    assert "<title>Zeitleiste" in timeline and ">Lastvorschau</a>" in timeline
    assert "Vergangene Läufe und nächste Auslösezeitpunkte jedes Jobs" in timeline
    assert 'data-range="7d">7 T</button>' in timeline
    assert reverse("takt-jsi18n") in timeline  # the scripts' texts, before the scripts
    assert timeline.index(reverse("takt-jsi18n")) < timeline.index("takt/timeline.js")
    one = page(admin_client, reverse("admin:takt_jobs_job_timeline") + f"?job={job.pk}", **GERMAN)
    assert "Zeitleiste: Nachtbericht" in one and "Die Läufe von <a href=" in one
    forecast = page(admin_client, reverse("admin:takt_jobs_job_forecast"), **GERMAN)
    assert "Log-Skala" in forecast and "Läufe pro Stunde" in forecast
    assert "<title>Timeline" in page(admin_client, reverse("admin:takt_jobs_job_timeline"))


def test_the_timeline_data_refuses_in_german(admin_client):
    url = reverse("admin:takt_jobs_job_timeline_data")
    response = admin_client.get(url, {"start": "gestern"}, **GERMAN)
    assert response.status_code == 400
    assert "ist kein Datum mit Uhrzeit nach ISO 8601" in response.json()["errors"]["start"]


def test_the_groups_page_in_german(admin_client, redis_client):
    group = ConcurrencyGroup.objects.create(name="Importe", limit=2)
    make_job("Import", concurrency_group=group)
    german = page(admin_client, reverse("admin:takt_jobs_concurrencygroup_changelist"), **GERMAN)
    for text in ("Läuft gerade", "Wartet auf einen Platz", "Exklusive Jobs (sie laufen nur"):
        assert text in german
    assert german.index(reverse("takt-jsi18n")) < german.index("takt/admin.js")
    change = page(
        admin_client, reverse("admin:takt_jobs_concurrencygroup_change", args=[group.pk]), **GERMAN
    )
    assert "Parallelitätsgruppe ändern" in change and "Farbe:" in change and "Ihre Jobs:" in change
    english = page(admin_client, reverse("admin:takt_jobs_concurrencygroup_changelist"))
    assert "Running now" in english and "Waiting for a slot" in english


def test_a_group_refusal_in_german(admin_client, redis_client):
    url = reverse("admin:takt_jobs_concurrencygroup_add")
    data = {"name": "Blau", "colour": "blau", "limit": "1", "description": ""}
    german = admin_client.post(url, data, **GERMAN).content.decode()
    assert "eine Farbe als #rrggbb, z. B. #2f6fde" in german


def test_the_script_catalogue_answers_in_the_request_language(client):
    url = reverse("takt-jsi18n")
    german = client.get(url, **GERMAN)
    assert german.status_code == 200 and german["Content-Type"].startswith("text/javascript")
    text = german.content.decode()
    assert '"Could not load the timeline: %(error)s": "Die Zeitleiste konnte nicht' in text
    english = client.get(url).content.decode()
    assert "Die Zeitleiste konnte nicht" not in english
