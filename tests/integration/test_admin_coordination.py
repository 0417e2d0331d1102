"""The admin of coordination (F-04, F-31..F-33, F-90, F-91) through the
Django test client: a dependency trigger saved from the job editor, and
every bad input refused with its field named and nothing stored (a cycle,
no end ticked, exclusive in a group, values without a variable, a child
with a trigger, a loop of parents); the groups and variables pages; a run's
cause, the runs it caused and what a held run waits for."""

from __future__ import annotations

import pytest
import time_machine
from django.urls import reverse

from jobs.models import Job, Trigger
from tests.integration.conftest import make_job
from tests.integration.test_admin import T0, change_url, job_form, trigger_row

pytestmark = pytest.mark.django_db


def dependency_row(job: Job, upstream: Job | None, *ends: str, **changes) -> dict:
    """A new trigger "After another job" as the inline posts it (the
    weekday boxes hidden but ticked, as a new form has them)."""
    return trigger_row(
        job,
        kind="dependency",
        upstream_job=upstream.pk if upstream else "",
        upstream_statuses=list(ends),
        upstream_statuses__shown="1",
        weekdays=list("0123456"),
        weekdays__shown="1",
        **changes,
    )


def post(client, job: Job, data: dict):
    with time_machine.travel(T0, tick=False):
        return client.post(change_url(job), data)


def trigger_errors(response) -> dict:
    return response.context["inline_admin_formsets"][0].formset.errors[0]


def test_a_dependency_trigger_is_saved_with_its_upstream_job_and_ends(admin_client):
    upstream, job = make_job("import"), make_job("transform")

    response = post(
        admin_client, job, job_form(job, dependency_row(job, upstream, "succeeded", "lost"))
    )

    assert response.status_code == 302, response.context and trigger_errors(response)
    trigger = job.triggers.get()
    assert (trigger.kind, trigger.upstream_job, trigger.upstream_statuses) == (
        "dependency",
        upstream,
        ["succeeded", "lost"],
    )
    assert trigger.next_run_at is None and trigger.active


def test_the_new_trigger_form_offers_the_upstream_job_as_an_autocomplete(admin_client):
    html = admin_client.get(reverse("admin:jobs_job_add")).content.decode()
    select = html[html.index('name="triggers-__prefix__-upstream_job"') - 300 :].split("</select>")[
        0
    ]
    assert "admin-autocomplete" in select
    assert '<option value="' not in select.replace('<option value="">', "")  # no job listed
    boxes = [
        line
        for line in html.split("<input")
        if 'name="triggers-__prefix__-upstream_statuses"' in line
    ]
    assert [("checked" in box) for box in boxes] == [True, False, False, False, False]


def test_the_upstream_job_autocomplete_finds_jobs_by_name(admin_client):
    wanted, _ = make_job("import orders"), make_job("report")
    answer = admin_client.get(
        reverse("admin:autocomplete"),
        {"app_label": "jobs", "model_name": "trigger", "field_name": "upstream_job", "term": "imp"},
    )
    assert answer.status_code == 200
    assert [row["text"] for row in answer.json()["results"]] == [f"import orders (#{wanted.pk})"]


@pytest.mark.parametrize(
    ("upstream", "ends", "field", "message"),
    [
        ("load", ("succeeded",), "upstream_job", "that would make a cycle: 'load' (#L) → 'extract' (#E) → 'load' (#L)"),
        ("other", (), "upstream_statuses", "tick at least one way its run ends"),
    ],
)  # fmt: skip
def test_a_refused_dependency_names_its_field_and_saves_nothing(
    admin_client, upstream, ends, field, message
):
    extract, load, other = make_job("extract"), make_job("load"), make_job("other")
    message = message.replace("#L", f"#{load.pk}").replace("#E", f"#{extract.pk}")
    Trigger.objects.create(job=load, kind="dependency", upstream_job=extract)
    chosen = {"load": load, "other": other}[upstream]

    response = post(
        admin_client,
        extract,
        job_form(extract, dependency_row(extract, chosen, *ends), name="renamed"),
    )

    assert response.status_code == 200
    assert trigger_errors(response) == {field: [message]}
    assert not extract.triggers.exists()
    assert Job.objects.get(pk=extract.pk).name == "extract"


def test_a_job_cannot_depend_on_itself(admin_client):
    job = make_job("self")
    response = post(admin_client, job, job_form(job, dependency_row(job, job, "failed")))
    assert trigger_errors(response) == {"upstream_job": ["a job cannot depend on itself"]}
    assert not job.triggers.exists()


def test_a_saved_dependency_says_it_has_no_fire_times(admin_client):
    upstream, job = make_job("import"), make_job("transform")
    Trigger.objects.create(
        job=job, kind="dependency", upstream_job=upstream, upstream_statuses=["failed"]
    )
    html = admin_client.get(change_url(job)).content.decode()
    assert f"after job &#x27;import&#x27; (#{upstream.pk}) ends failed: no fire times" in html
    assert "none by the clock: it fires when a run of the upstream job ends" in html
