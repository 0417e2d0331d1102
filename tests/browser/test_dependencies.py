"""Jobs that start one another, as an operator sets them up in a real
browser (F-33, F-04, F-91): a trigger "After another job" added with "Add
another Trigger", its upstream job typed into an autocomplete and the ends
of its runs ticked, checked live ("after job 'Import' (#1) ends
succeeded", no fire times) and saved; a dependency cycle refused beside the
upstream job with nothing saved; a job made a child of another through the
parent autocomplete, and the parent's editor showing its children; a
parent run's page listing its children's runs in order, and a child run's
page saying whose part it is."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from jobs.models import Job, Trigger
from runs.models import Run
from tests.browser.pages import (
    Shot,
    add_trigger,
    cell_texts,
    choose_in_autocomplete,
    coordination,
    field_errors,
    job_change_url,
    job_row,
    new_triggers,
    run_change_url,
    save,
    shown_value,
    times_localized,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def made_run(job: Job, status: str, at: datetime, **fields: Any) -> Run:
    """A run stored as the engine leaves it (a child's by default)."""
    fields.setdefault("trigger", "parent")
    fields.setdefault("started_at", at)
    return Run.objects.create(job=job, status=status, scheduled_for=at, enqueued_at=at, **fields)


def test_a_dependency_trigger_is_added_checked_live_and_saved(page: Page, shot: Shot) -> None:
    upstream = Job.objects.create(name="Import", target="takt.hello_world")
    job = Job.objects.create(name="Transform", target="takt.hello_world")
    page.goto(job_change_url(job.pk))

    trigger = add_trigger(page)
    trigger.get_by_label("Kind").select_option(label="After another job")
    # Only the dependency's fields: no clock, so no cron, zone or jitter.
    expect(trigger.get_by_label("Cron expression")).to_be_hidden()
    expect(trigger.get_by_label("Timezone")).to_be_hidden()
    expect(trigger.get_by_label("Jitter (seconds)")).to_be_hidden()
    expect(trigger.locator(".takt-preview-note")).to_have_text(
        "upstream_job: required for a dependency trigger"
    )
    ends = trigger.locator(".field-upstream_statuses")
    expect(ends.get_by_label("succeeded")).to_be_checked()  # the default
    expect(ends.get_by_label("failed")).not_to_be_checked()
    choose_in_autocomplete(trigger.locator(".field-upstream_job"), "Imp", "Import (#1)")
    preview = trigger.locator(".takt-preview")
    expect(preview.locator(".takt-preview-words")).to_have_text(
        f"after job 'Import' (#{upstream.pk}) ends succeeded"
    )
    ends.get_by_label("timed out").check()
    expect(preview.locator(".takt-preview-words")).to_have_text(
        f"after job 'Import' (#{upstream.pk}) ends succeeded or timed out"
    )
    expect(preview).to_contain_text("No fire times: it starts each time a run of that job ends so.")
    expect(preview.locator("table")).to_have_count(0)
    shot(page, "trigger-dependency", element=trigger)

    save(page)

    expect(page.locator(".messagelist .success")).to_contain_text("was changed successfully")
    expect(job_row(page, "Transform")).to_contain_text(
        f"after job 'Import' (#{upstream.pk}) ends succeeded or timed out"
    )
    saved = job.triggers.get()
    assert (saved.kind, saved.upstream_job_id, saved.upstream_statuses) == (
        "dependency",
        upstream.pk,
        ["succeeded", "timed_out"],
    )
    assert saved.next_run_at is None

    # Opened again: the saved trigger shows its upstream job and ends.
    page.goto(job_change_url(job.pk))
    stored = page.locator(".inline-related.has_original")
    expect(stored.locator(".field-upstream_job .select2-selection")).to_have_text(
        re.compile(r"Import \(#\d+\)")
    )
    expect(stored.get_by_label("timed out")).to_be_checked()
    expect(stored.get_by_label("Cron expression")).to_be_hidden()


def test_a_dependency_cycle_is_refused_beside_the_upstream_job(page: Page, shot: Shot) -> None:
    extract = Job.objects.create(name="Extract", target="takt.hello_world")
    load = Job.objects.create(name="Load", target="takt.hello_world")
    Trigger.objects.create(job=load, kind="dependency", upstream_job=extract)
    archive = Job.objects.create(name="Archive", target="takt.hello_world")
    page.goto(job_change_url(extract.pk))

    trigger = add_trigger(page)
    trigger.get_by_label("Kind").select_option(label="After another job")
    choose_in_autocomplete(trigger.locator(".field-upstream_job"), "Load", "Load (#2)")
    save(page)

    form = new_triggers(page).first
    loop = f"that would make a cycle: 'Load' (#{load.pk}) → 'Extract' (#{extract.pk}) → 'Load' (#{load.pk})"
    expect(field_errors(form, "upstream_job")).to_have_text(loop)
    expect(form.get_by_label("Kind")).to_have_value("dependency")
    expect(form.get_by_label("Cron expression")).to_be_hidden()
    assert not extract.triggers.exists()
    shot(page, "trigger-dependency-cycle", element=form)

    # The live check cannot see a cycle (it needs the saved job): the error
    # stays while that upstream job does, and goes with it.
    form.get_by_label("failed").check()
    form.page.wait_for_timeout(500)  # the live check's delay, and its answer
    expect(field_errors(form, "upstream_job")).to_have_text(loop)
    choose_in_autocomplete(form.locator(".field-upstream_job"), "Arch", "Archive (#3)")
    expect(field_errors(form, "upstream_job")).to_have_count(0)
    save(page)

    expect(page.locator(".messagelist .success")).to_contain_text("was changed successfully")
    assert list(extract.triggers.values_list("upstream_job_id", "upstream_statuses")) == [
        (archive.pk, ["succeeded", "failed"])
    ]


def test_a_job_made_a_child_shows_in_its_parents_editor(page: Page, shot: Shot) -> None:
    nightly = Job.objects.create(name="Nightly", target="takt.hello_world")
    backup = Job.objects.create(
        name="Backup", target="takt.hello_world", parent=nightly, child_order=1
    )
    Job.objects.create(
        name="Verify", target="takt.hello_world", parent=backup, child_order=1, enabled=False
    )
    vacuum = Job.objects.create(name="Vacuum", target="takt.hello_world")
    page.goto(job_change_url(vacuum.pk))

    section = coordination(page)
    choose_in_autocomplete(section.locator(".field-parent"), "Nigh", f"Nightly (#{nightly.pk})")
    section.get_by_label("Order among its siblings").fill("2")
    page.get_by_role("button", name="Save and continue editing").click()

    expect(page.locator(".messagelist .success")).to_contain_text("was changed successfully")
    expect(coordination(page).locator("summary")).to_contain_text(
        f"child of Nightly (#{nightly.pk})"
    )
    vacuum.refresh_from_db()
    assert (vacuum.parent_id, vacuum.child_order) == (nightly.pk, 2)

    page.goto(job_change_url(nightly.pk))
    section = coordination(page)
    expect(section.locator("summary")).to_contain_text("parent of 2 children")
    tree = shown_value(page, "children_tree")
    expect(tree.locator("> ol > li")).to_have_count(2)
    expect(tree.locator("li")).to_have_text(
        [
            re.compile(rf"^Backup \(#{backup.pk}\) order 1\s*Verify"),
            re.compile(r"^Verify \(#\d+\) order 1 · disabled: skipped$"),
            f"Vacuum (#{vacuum.pk}) order 2",
        ]
    )
    shot(page, "job-editor-children", element=section)

    # As a parent: run every child even after one failed.
    section.get_by_label("Stop on child failure").uncheck()
    page.get_by_role("button", name="Save and continue editing").click()
    expect(coordination(page).locator("summary")).to_have_text(
        "Coordination — parent of 2 children, runs them all after a failure"
    )
    nightly.refresh_from_db()
    assert nightly.stop_on_child_failure is False

    shown_value(page, "children_tree").get_by_role("link", name="Vacuum").click()
    expect(page).to_have_url(re.compile(rf"{job_change_url(vacuum.pk)}$"))


def test_a_loop_of_parents_is_refused_beside_the_parent(page: Page, shot: Shot) -> None:
    nightly = Job.objects.create(name="Nightly", target="takt.hello_world")
    backup = Job.objects.create(name="Backup", target="takt.hello_world", parent=nightly)
    page.goto(job_change_url(nightly.pk))

    section = coordination(page)
    choose_in_autocomplete(section.locator(".field-parent"), "Back", f"Backup (#{backup.pk})")
    save(page)

    section = coordination(page)  # open: it holds the error
    expect(section.locator(".field-parent .errorlist")).to_have_text(
        f"that would make a loop of parents: 'Nightly' (#{nightly.pk}) → 'Backup' (#{backup.pk})"
        f" → 'Nightly' (#{nightly.pk})"
    )
    nightly.refresh_from_db()
    assert nightly.parent_id is None


def test_a_parent_runs_page_lists_its_childrens_runs_in_order(page: Page, shot: Shot) -> None:
    now = timezone.now().replace(microsecond=0)
    nightly = Job.objects.create(name="Nightly", target="takt.hello_world")
    backup, vacuum, report = (
        Job.objects.create(name=name, target="takt.hello_world", parent=nightly, child_order=i)
        for i, name in enumerate(["Backup", "Vacuum", "Report"], start=1)
    )
    parent_run = made_run(nightly, "running", now, trigger="schedule")
    backup_run = made_run(backup, "succeeded", now + timedelta(seconds=1), cause=parent_run,
                          finished_at=now + timedelta(seconds=95), duration_s=94.0)  # fmt: skip
    vacuum_run = made_run(vacuum, "running", now + timedelta(seconds=96), cause=parent_run)

    page.goto(run_change_url(parent_run.pk))

    children = page.locator("#takt-children-runs")
    expect(children.locator("h2")).to_have_text("Its children's runs, in their order")
    rows = children.locator("tbody tr")
    expect(rows).to_have_count(3)
    times_localized(page)
    cells = [row[:5] + row[6:] for row in cell_texts(rows)]  # not the start time
    assert cells == [
        ["1", "Backup", f"run #{backup_run.pk}", "succeeded", "parent", "1 min 34 s"],
        ["2", "Vacuum", f"run #{vacuum_run.pk}", "running", "parent", "—"],
        ["3", "Report", "—", "not started yet", "", ""],
    ]
    expect(rows.nth(0).locator(".takt-status-succeeded")).to_be_visible()
    expect(rows.nth(1).locator(".takt-status-running")).to_be_visible()
    shot(
        page,
        "run-parent-children",
        between=(page.locator("#content-main fieldset").first, children),
    )

    children.get_by_role("link", name=f"run #{vacuum_run.pk}").click()

    expect(page).to_have_url(re.compile(rf"{run_change_url(vacuum_run.pk)}$"))
    expect(shown_value(page, "cause_text")).to_have_text(
        f"child of parent run #{parent_run.pk} of job Nightly"
    )
    page.locator(".field-cause_text").get_by_role("link", name=f"run #{parent_run.pk}").click()
    expect(page).to_have_url(re.compile(rf"{run_change_url(parent_run.pk)}$"))


def test_a_run_started_by_another_runs_end_says_so(page: Page, shot: Shot) -> None:
    now = timezone.now().replace(microsecond=0)
    extract = Job.objects.create(name="Extract", target="takt.hello_world")
    load = Job.objects.create(name="Load", target="takt.hello_world")
    upstream = made_run(extract, "succeeded", now, trigger="schedule")
    started = made_run(load, "queued", now + timedelta(seconds=5), cause=upstream,
                       trigger="dependency", started_at=None)  # fmt: skip

    page.goto(run_change_url(upstream.pk))

    dependants = page.locator("#takt-dependants")
    expect(dependants.locator("tbody tr")).to_have_count(1)
    assert cell_texts(dependants.locator("tbody tr"))[0][:3] == [
        f"run #{started.pk}",
        "Load",
        "queued",
    ]
    dependants.get_by_role("link", name=f"run #{started.pk}").click()

    cause = shown_value(page, "cause_text")
    expect(cause).to_have_text(
        f"started by the end of run #{upstream.pk} of job Extract (it ended succeeded)"
    )
    expect(cause.locator(".takt-status-succeeded")).to_be_visible()
    shot(
        page, "run-dependency-cause", between=(page.locator("#content-main fieldset").first, cause)
    )
