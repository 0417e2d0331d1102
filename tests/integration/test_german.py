"""German in the admin and the API (issue 15, item 9; docs/translation.md):
the browser's Accept-Language picks the language, DJANGO_LANGUAGE_CODE the
default, and English stays the default without either."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import time

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test import override_settings
from django.urls import reverse
from django.utils import translation

from jobs.models import Job
from scheduler_project.languages import language_code
from tests.integration.conftest import make_job
from tests.integration.test_admin import change_url, job_form, trigger_row

pytestmark = pytest.mark.django_db

GERMAN = {"HTTP_ACCEPT_LANGUAGE": "de-DE,de;q=0.9,en;q=0.5"}


def test_the_job_editor_speaks_german_to_a_german_browser(admin_client):
    html = admin_client.get(reverse("admin:takt_jobs_job_add"), **GERMAN).content.decode()

    assert '<html lang="de"' in html
    for text in (
        "Job hinzufügen",  # Django's own German with Takt's verbose_name
        "Priorität",
        "0 läuft zuerst, 9 zuletzt.",
        "Überlappungsrichtlinie",
        "Überspringen (einen übersprungenen Lauf vermerken)",
        "Zeitüberschreitung (Sekunden)",
        "Wiederholungen",  # the Retries section's title
        "Cron-Ausdruck",  # the trigger inline's kind choices
        "Zeitzone",
    ):
        assert text in html, text
    assert "Overlap policy" not in html
    assert "0 runs first, 9 last." not in html


def test_the_change_page_and_the_job_list_speak_german(admin_client):
    job = make_job("nightly")

    editor = admin_client.get(change_url(job), **GERMAN).content.decode()
    listing = admin_client.get(reverse("admin:takt_jobs_job_changelist"), **GERMAN)

    assert "Job ändern" in editor and "Parameter" in editor
    assert "Warum ist er nicht gelaufen?" in editor
    assert "zurückgehalten durch:" in editor  # no live beat in this test
    assert "Nächster Lauf" in listing.content.decode()
    assert "Ausgewählte Jobs anhalten" in listing.content.decode()


def test_without_a_language_header_the_admin_stays_english(admin_client):
    html = admin_client.get(reverse("admin:takt_jobs_job_add")).content.decode()

    assert '<html lang="en' in html
    assert "Priority" in html and "0 runs first, 9 last." in html
    assert "Priorität" not in html


def test_an_invalid_job_gets_its_field_error_in_german(admin_client):
    job = make_job("nightly", params={"ratio": 0.5})

    with transaction.atomic():
        response = admin_client.post(
            change_url(job), job_form(job, params='{"ratio": NaN}'), **GERMAN
        )

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["params"] == ["muss gültiges JSON sein: NaN und Infinity sind nicht erlaubt"]
    assert "muss gültiges JSON sein" in response.content.decode()
    assert Job.objects.get(pk=job.pk).params == {"ratio": 0.5}


def test_an_invalid_trigger_gets_the_core_error_in_german_with_its_value(admin_client):
    job = make_job("nightly")
    row = trigger_row(job, cron_expression="0 3 * * *", timezone="Mars/Olympus")

    with transaction.atomic():
        response = admin_client.post(change_url(job), job_form(job, row), **GERMAN)

    assert response.status_code == 200
    html = response.content.decode()
    assert "unbekannte Zeitzone &#x27;Mars/Olympus&#x27;" in html
    # The same error in English without the header.
    with transaction.atomic():
        response = admin_client.post(change_url(job), job_form(job, row))
    assert "unknown time zone &#x27;Mars/Olympus&#x27;" in response.content.decode()


def test_a_required_field_of_a_trigger_is_named_in_german(admin_client):
    job = make_job("nightly")
    row = trigger_row(job, kind="interval", interval_seconds="")

    with transaction.atomic():
        response = admin_client.post(change_url(job), job_form(job, row), **GERMAN)

    assert "erforderlich für einen Intervall-Auslöser" in response.content.decode()


def test_an_admin_action_reports_in_german(admin_client):
    job = make_job("nightly")

    response = admin_client.post(
        reverse("admin:takt_jobs_job_changelist"),
        {"action": "disable", "_selected_action": [job.pk]},
        follow=True,
        **GERMAN,
    )

    assert "1 Job deaktiviert." in response.content.decode()


def test_the_api_follows_accept_language(admin_client):
    data = {"name": "api job", "kind": "callable", "target": "tests.echo", "params": []}

    english = admin_client.post("/api/v1/jobs", data, content_type="application/json")
    german = admin_client.post("/api/v1/jobs", data, content_type="application/json", **GERMAN)

    assert english.status_code == german.status_code == 400
    assert "must be a JSON object" in english.content.decode()
    assert "muss ein JSON-Objekt sein" in german.content.decode()


@override_settings(LANGUAGE_CODE="de")
def test_language_code_de_makes_german_the_default(admin_client):
    html = admin_client.get(reverse("admin:takt_jobs_job_add")).content.decode()
    assert "Priorität" in html
    # A browser that asks for English still gets English.
    html = admin_client.get(
        reverse("admin:takt_jobs_job_add"), HTTP_ACCEPT_LANGUAGE="en"
    ).content.decode()
    assert "Priority" in html


def test_django_language_code_sets_language_code():
    code = "from django.conf import settings; print(settings.LANGUAGE_CODE)"
    env = {**os.environ, "DJANGO_LANGUAGE_CODE": "de"}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        env=env, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert result.stdout.strip().splitlines()[-1] == "de"

    env["DJANGO_LANGUAGE_CODE"] = "fr"
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "DJANGO_LANGUAGE_CODE: unsupported language 'fr' (supported: en, de)" in result.stderr


@pytest.mark.parametrize(
    ("value", "code"), [("de", "de"), ("de-DE", "de-de"), ("en-us", "en-us"), ("EN", "en")]
)
def test_language_code_accepts_english_and_german(value, code):
    assert language_code(value, [("en", "English"), ("de", "Deutsch")]) == code


def test_language_code_refuses_another_language_naming_the_variable():
    with pytest.raises(ImproperlyConfigured, match="DJANGO_LANGUAGE_CODE"):
        language_code("fr", [("en", "English"), ("de", "Deutsch")])


def test_lazy_labels_follow_the_active_language():
    field = Job._meta.get_field("priority")
    with translation.override("de"):
        assert str(field.verbose_name) == "Priorität"
    with translation.override("en"):
        assert str(field.verbose_name) == "priority"


def test_a_cron_error_of_the_pure_core_comes_out_in_german_with_its_values(admin_client):
    job = make_job("nightly")
    row = trigger_row(job, cron_expression="61 * * * *")

    with transaction.atomic():
        german = admin_client.post(change_url(job), job_form(job, row), **GERMAN)
        english = admin_client.post(change_url(job), job_form(job, row))

    assert "minute: 61 liegt außerhalb des Bereichs 0-59" in german.content.decode()
    assert "minute: 61 is out of range 0-59" in english.content.decode()


def test_the_job_list_says_a_schedule_in_german(admin_client):
    job = make_job("nightly")
    job.triggers.create(kind="interval", interval_seconds=5400, interval_anchor="from_finish")
    job.triggers.create(kind="calendar", calendar_rule="quarter_end", at_time=time(23))
    job.triggers.create(kind="cron", cron_expression="30 2 * * 1-5", timezone="UTC")

    german = admin_client.get(reverse("admin:takt_jobs_job_changelist"), **GERMAN)
    english = admin_client.get(reverse("admin:takt_jobs_job_changelist"))

    assert "alle 90 Minuten nach dem Ende des vorigen Laufs" in german.content.decode()
    assert "am letzten Tag jedes Quartals um 23:00" in german.content.decode()
    assert "Um 02:30, Montag bis Freitag (UTC)" in german.content.decode()
    assert "every 90 minutes after the previous run ends" in english.content.decode()
    assert "on the last day of each quarter at 23:00" in english.content.decode()
    assert "At 02:30, Monday through Friday (UTC)" in english.content.decode()
