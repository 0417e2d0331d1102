"""Re-running from the admin (issue 30, runs/rerun.py), as an operator in
New York does it against a UTC server: the run page's "Re-run", the run
list's "Re-run the selected runs", and the job list's "Re-run failed runs
since…" with a time typed in the browser's zone (an operation, F-93).
What is stored is read back from the database."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job
from runs.models import Run, RunStatus, RunTrigger
from tests.browser.history import past_run
from tests.browser.pages import (
    JOB_LIST,
    RUN_LIST,
    Shot,
    job_row,
    message,
    run_action,
    run_change_url,
    typed,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def failed_run(job: Job, *, hours_ago: float) -> Run:
    run = past_run(
        job,
        started_at=datetime.now(UTC) - timedelta(hours=hours_ago),
        status=RunStatus.FAILED,
        trigger=RunTrigger.SCHEDULE,
    )
    Run.objects.filter(pk=run.pk).update(params={"day": "2026-12-01"})
    return run


def test_a_failed_run_is_re_run_from_its_page_with_its_params(page: Page, shot: Shot) -> None:
    job = Job.objects.create(name="Nightly export", target="tests.echo")
    old = failed_run(job, hours_ago=3)

    page.goto(run_change_url(old.pk))
    page.get_by_role("button", name="Re-run").click()

    new = Run.objects.exclude(pk=old.pk).get(job=job)
    expect(page).to_have_url(re.compile(rf"/admin/takt_runs/run/{new.pk}/change/$"))
    expect(message(page, "success")).to_have_text(
        f"Re-run of run #{old.pk}: run #{new.pk} (queued)."
    )
    expect(page.locator(".fieldBox.field-rerun_of")).to_contain_text(f"Run #{old.pk} of job")
    assert (new.trigger, new.rerun_of_id, new.params) == ("manual", old.pk, {"day": "2026-12-01"})
    shot(page, "run-rerun")
    page.goto(run_change_url(new.pk))  # queued: no button until it ends
    expect(page.locator(".object-tools")).to_contain_text("Runs of this job")
    expect(page.get_by_role("button", name="Re-run")).to_have_count(0)


def test_selected_runs_are_re_run_from_the_run_list(page: Page) -> None:
    job = Job.objects.create(
        name="Nightly export", target="tests.echo", overlap_policy="allow", max_instances=5
    )
    first, second = failed_run(job, hours_ago=5), failed_run(job, hours_ago=4)

    page.goto(f"{RUN_LIST}?job={job.pk}")
    rows = [
        page.get_by_role("row").filter(has=page.get_by_role("link", name=f"#{run.pk}", exact=True))
        for run in (first, second)
    ]
    run_action(page, "Re-run the selected runs", *rows)

    expect(message(page)).to_contain_text("Re-ran 2 runs:")
    reruns = dict(Run.objects.filter(rerun_of__isnull=False).values_list("rerun_of", "status"))
    assert reruns == {first.pk: "queued", second.pk: "queued"}


def test_failed_runs_since_a_time_typed_in_new_york_are_re_run_as_an_operation(
    page: Page, operations_job: Job
) -> None:
    job = Job.objects.create(name="Nightly export", target="tests.echo")
    failed_run(job, hours_ago=3)
    since = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=6)

    page.goto(JOB_LIST)
    run_action(page, "Re-run failed runs since…", job_row(page, "Nightly export"))
    expect(page.get_by_role("heading", name="Re-run failed runs")).to_be_visible()
    page.get_by_label("Since:", exact=True).fill(typed(since + timedelta(hours=7)))
    page.get_by_role("button", name="Re-run").click()
    error = page.locator(".errorlist")
    expect(error).to_contain_text("is in the future")  # in the zone it was typed in
    assert not Run.objects.filter(job=operations_job).exists()

    page.get_by_label("Since:", exact=True).fill(typed(since))
    page.get_by_role("button", name="Re-run").click()

    expect(message(page)).to_have_text(
        re.compile(r"^Re-run of the failed runs of 1 job started as run #\d+")
    )
    operation = Run.objects.get(job=operations_job)
    assert operation.params["operation"] == "rerun_failed"
    assert datetime.fromisoformat(operation.params["since"]) == since  # typed in New York
    assert operation.params["jobs"] == [job.pk]
