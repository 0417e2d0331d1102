"""German on every Takt page (issue 29, A.3 and A.4): a real Chromium in
German (de-DE, New York; the server in UTC) opens the job editor, which
loads one JavaScript catalogue, Takt's, holding Django admin's texts too
(its date shortcuts say "Heute" and "Jetzt"), shows its summaries, the
latest run's trigger and its duration in German ("1,50 s"), and draws the
"Why didn't it run?" checks as icons, not emoji; the landing page, the run
list and the run page speak German too."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from heartbeats.alerts import raise_alert
from jobs.models import Job, Trigger
from runs.models import Run, RunTrigger
from runs.queue import pause_queue
from tests.browser.history import past_run
from tests.browser.pages import RUN_LIST, job_change_url, run_change_url, shown_value

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Emoji and pictographs that a machine without an emoji font draws as boxes.
EMOJI = re.compile("[\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff\ufe0f]")


def catalogue_requests(page: Page) -> list[str]:
    """The JavaScript catalogues the page asks for from now on."""
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "jsi18n" in r.url else None)
    return asked


def test_the_job_editor_in_german_with_one_catalogue(german_page: Page) -> None:
    page = german_page
    job = Job.objects.create(name="Bericht", target="tests.echo", timeout_s=3600,
                             timeout_action="stop", missed_run_policy="run_once",
                             catchup_pick="latest", enabled=False)  # fmt: skip
    Trigger.objects.create(job=job, kind="cron", cron_expression="0 3 * * *")
    Trigger.objects.create(job=job, kind="once", run_at=timezone.now() + timedelta(days=2))
    past_run(job, started_at=timezone.now() - timedelta(minutes=5), duration_s=1.5,
             trigger=RunTrigger.SCHEDULE)  # fmt: skip
    asked = catalogue_requests(page)
    page.goto(job_change_url(job.pk))
    page.wait_for_load_state("load")

    assert len(asked) == 1, asked  # Takt's, with Django admin's texts in it
    # Django's date and time shortcuts at the once trigger's "Run at", in German.
    expect(
        page.locator(".datetimeshortcuts a:visible").get_by_text("Heute", exact=True).first
    ).to_be_visible()
    expect(
        page.locator(".datetimeshortcuts a:visible").get_by_text("Jetzt", exact=True).first
    ).to_be_visible()
    latest = page.locator("#takt-latest-run")
    expect(latest.locator("h2")).to_have_text(re.compile(r"\(Zeitplan\)$"))
    expect(latest.locator("[data-live=duration]")).to_have_text("1,50 s")
    body = page.locator("#content").inner_text()
    assert "einmal ausführen (spätester)" in body and "(stoppen)" in body, body
    assert "(latest)" not in body and "(stop)" not in body and "(schedule)" not in body

    why = page.locator("#takt-why")
    expect(why.get_by_role("img", name="Prüfung nicht bestanden").first).to_be_visible()
    expect(why.get_by_role("img", name="Prüfung bestanden").first).to_be_visible()
    assert not EMOJI.search(why.inner_html()), why.inner_html()


def test_the_landing_page_the_run_list_and_a_run_in_german(german_page: Page) -> None:
    page = german_page
    job = Job.objects.create(name="Bericht", target="tests.echo")
    run = past_run(job, started_at=timezone.now() - timedelta(minutes=5), duration_s=12.25)
    asked = catalogue_requests(page)

    page.goto("/admin/")
    expect(page.get_by_role("heading", name="Jobs, Läufe und Heartbeats")).to_be_visible()
    page.goto(RUN_LIST)
    expect(page.get_by_role("row").filter(has_text="Bericht")).to_contain_text("12,2 s")
    page.goto(run_change_url(run.pk))
    expect(shown_value(page, "duration")).to_have_text("12,2 s")
    assert len(asked) == 3, asked  # one catalogue per page


# Takt's own pages, each with one catalogue (the import page has no script).
PAGES = [
    "/admin/",
    "/admin/takt_jobs/job/",
    "/admin/takt_jobs/job/1/change/",
    "/admin/takt_jobs/job/add/",
    "/admin/takt_jobs/job/timeline/",
    "/admin/takt_jobs/job/forecast/",
    "/admin/takt_runs/run/",
    "/admin/takt_runs/run/1/change/",
    "/admin/takt_runs/auditrecord/",
    "/admin/takt_heartbeats/heartbeat/",
    "/admin/takt_heartbeats/heartbeat/1/change/",
    "/admin/takt_heartbeats/heartbeat/operations/",
    "/admin/takt_heartbeats/alert/",
    "/admin/takt_heartbeats/alert/1/change/",
    "/admin/takt_jobs/queuestate/",
    "/admin/takt_jobs/concurrencygroup/",
    "/admin/takt_jobs/concurrencygroup/add/",
    "/admin/takt_jobs/resultvariable/",
    "/admin/takt_jobs/resultvariable/add/",
    "/admin/takt_jobs/holidaycalendar/",
    "/admin/takt_jobs/holidaycalendar/add/",
    "/admin/takt_jobs/apitoken/",
    "/admin/takt_jobs/apitoken/add/",
]


def test_every_takt_page_loads_one_catalogue_and_draws_no_emoji(german_page: Page) -> None:
    page = german_page
    job = Job.objects.create(name="Bericht", target="tests.echo")
    Trigger.objects.create(job=job, kind="cron", cron_expression="0 3 * * *")
    past_run(job, started_at=timezone.now() - timedelta(minutes=5), status="failed")
    raise_alert("overdue:x", severity="critical", title="T", message="x", now=timezone.now())
    asked = catalogue_requests(page)
    for url in PAGES:
        asked.clear()
        page.goto(url)
        page.wait_for_load_state("load")
        assert len(asked) == 1, (url, asked)
        content = page.locator("#content").inner_html()
        assert not EMOJI.search(content), (url, EMOJI.findall(content))
    page.goto("/admin/takt_heartbeats/alert/1/change/")  # a warning's heading in German
    expect(page.locator("#content h2").first).to_have_text(re.compile(r"\(Warnung, ×1\)$"))


def test_cancelling_asks_in_german_and_the_landing_page_says_the_queue_is_paused(
    german_page: Page,
) -> None:
    page = german_page
    job = Job.objects.create(name="Bericht", target="tests.echo")
    Trigger.objects.create(job=job, kind="cron", cron_expression="0 3 * * *")
    run = past_run(job, started_at=timezone.now() - timedelta(minutes=1), status="running")
    pause_queue(note="Umzug", by="ops", now=timezone.now())

    page.goto("/admin/")
    expect(page.locator("#takt-next-paused")).to_have_text(
        "Die Warteschlange ist angehalten: Keiner dieser Läufe startet, bevor sie fortgesetzt wird."
    )
    page.goto(run_change_url(run.pk))
    page.get_by_role("button", name="Lauf abbrechen").click()
    expect(page.get_by_role("heading", name="Sind Sie sicher?")).to_be_visible()
    expect(page.locator("#content")).to_contain_text(
        "Sind Sie sicher, dass Sie diesen Lauf abbrechen"
    )
    page.get_by_role("link", name="Nein, zurück").click()
    expect(page).to_have_url(re.compile(rf"{run_change_url(run.pk)}$"))
    assert Run.objects.get(pk=run.pk).status == "running"
    page.get_by_role("button", name="Lauf abbrechen").click()
    page.get_by_role("button", name="Ja, abbrechen").click()
    expect(page.locator(".messagelist")).to_have_text(f"Lauf #{run.pk} abgebrochen.")
