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
from redis import RedisError

from jobs.models import ConcurrencyGroup, Job, ResultVariable, Trigger
from runs.models import Run, RunStatus, WaitingFor
from runs.slots import exclusive_key, group_key
from tests.integration.conftest import hourly, make_job
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
    html = admin_client.get(reverse("admin:takt_jobs_job_add")).content.decode()
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
        {
            "app_label": "takt_jobs",
            "model_name": "trigger",
            "field_name": "upstream_job",
            "term": "imp",
        },
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


# --- the job editor's Coordination section ---------------------------------------


def editor_errors(response) -> dict:
    return dict(response.context["adminform"].form.errors)


def stored_coordination(job: Job) -> tuple:
    return (
        Job.objects.filter(pk=job.pk)
        .values_list("name", "concurrency_group", "exclusive", "condition_variable",
                     "condition_values", "condition_consume", "result_variable", "parent")
        .get()
    )  # fmt: skip


def test_the_coordination_fields_are_saved_from_the_editor(admin_client):
    group = ConcurrencyGroup.objects.create(name="Database")
    status, report = (
        ResultVariable.objects.create(name="import_status"),
        ResultVariable.objects.create(name="report"),
    )
    parent, job = make_job("nightly"), make_job("vacuum")
    data = job_form(
        job, concurrency_group=group.pk, condition_variable=status.pk, condition_values="200; 0, 200",
        condition_consume="on", result_variable=report.pk, parent=parent.pk, child_order="",
    )  # fmt: skip

    response = post(admin_client, job, data)

    assert response.status_code == 302, response.context and editor_errors(response)
    job.refresh_from_db()
    assert (job.concurrency_group, job.condition_variable, job.condition_values) == (
        group,
        status,
        [0, 200],
    )
    assert (job.condition_consume, job.result_variable, job.parent, job.child_order) == (
        True,
        report,
        parent,
        0,
    )


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"group": True, "exclusive": "on"}, "exclusive",
         "an exclusive job is in no group (it excludes every group): clear its concurrency group, or exclusive"),
        ({"condition_values": "0, 200"}, "condition_variable", "accepted values need a variable to compare them with"),
        ({"condition_consume": "on"}, "condition_consume", "only a condition on a variable can be consumed"),
        ({"variable": True, "condition_values": ""}, "condition_values",
         "give the accepted values as whole numbers, e.g. [0, 200]"),
        ({"variable": True, "condition_values": "0, ok"}, "condition_values",
         "'ok' is not a whole number: give values like 0, 200"),
        ({"child_order": "-1"}, "child_order", "Ensure this value is greater than or equal to 0."),
    ],
)  # fmt: skip
def test_bad_coordination_in_the_editor_names_its_field_and_saves_nothing(
    admin_client, changes, field, message
):
    job = make_job("vacuum")
    if changes.pop("group", False):
        changes["concurrency_group"] = ConcurrencyGroup.objects.create(name="Database").pk
    if changes.pop("variable", False):
        changes["condition_variable"] = ResultVariable.objects.create(name="import_status").pk
    before = stored_coordination(job)

    response = post(admin_client, job, job_form(job, name="renamed", **changes))

    assert response.status_code == 200
    assert editor_errors(response) == {field: [message]}
    assert stored_coordination(job) == before
    page = response.content.decode()
    section = page[page.index("Coordination —") :]
    assert "<details>" not in section.split("</fieldset>")[0]  # shown open: it holds the error


def test_a_loop_of_parents_is_refused_on_the_parent(admin_client):
    top = make_job("top")
    middle = make_job("middle", parent=top)
    before = stored_coordination(top)

    response = post(admin_client, top, job_form(top, parent=middle.pk))

    loop = f"that would make a loop of parents: 'top' (#{top.pk}) → 'middle' (#{middle.pk}) → 'top' (#{top.pk})"
    assert editor_errors(response) == {"parent": [loop]}
    assert stored_coordination(top) == before


def test_a_child_with_a_trigger_is_refused_on_the_triggers_kind(admin_client):
    parent, job = make_job("nightly"), make_job("vacuum")
    trigger = hourly(job, created_at=T0)

    response = post(
        admin_client, job, job_form(job, trigger_row(job, trigger), initial=1, parent=parent.pk)
    )

    assert response.status_code == 200
    assert list(trigger_errors(response)) == ["kind"]
    assert trigger_errors(response)["kind"][0].startswith(
        f"job #{job.pk} is a child of job #{parent.pk}: it runs only as part of its parent's run"
    )
    assert stored_coordination(job)[-1] is None


def test_a_new_job_with_a_parent_and_a_trigger_is_refused(admin_client):
    parent = make_job("nightly")
    data = job_form(
        Job(name="vacuum", target="tests.echo"), trigger_row(Job(), cron_expression="0 * * * *"),
        parent=parent.pk,
    )  # fmt: skip
    data["triggers-0-job"] = ""

    with time_machine.travel(T0, tick=False):
        response = admin_client.post(reverse("admin:takt_jobs_job_add"), data)

    assert response.status_code == 200
    assert list(trigger_errors(response)) == ["kind"]
    assert not Job.objects.filter(name="vacuum").exists()


def test_the_editor_shows_a_parents_tree_and_the_maintenance_allow_list(admin_client):
    parent = make_job("nightly")
    first = make_job("backup", parent=parent, child_order=1)
    make_job("verify", parent=first, child_order=1, enabled=False)
    make_job("vacuum", parent=parent, child_order=2)

    page = admin_client.get(change_url(parent)).content.decode()

    tree = page[page.index('class="takt-children"') :]
    assert tree.index(">backup<") < tree.index(">verify<") < tree.index(">vacuum<")
    assert "order 1 · disabled: skipped" in tree
    assert "Coordination — parent of 2 children" in page
    assert "no: during maintenance only targets registered with" in page


# --- the groups and variables pages --------------------------------------------------


def hold_slot(client, key: str, run: Run) -> None:
    seconds, micros = client.time()
    client.zadd(key, {f"run-{run.pk}:test": seconds * 1000 + micros // 1000 + 60_000})


def add_run(job: Job, status: str = RunStatus.RUNNING, **fields) -> Run:
    fields.setdefault("trigger", "schedule")
    return Run.objects.create(job=job, status=status, scheduled_for=T0, enqueued_at=T0, **fields)


def test_the_group_list_shows_colour_limit_jobs_holders_and_waiting_runs(
    admin_client, redis_client, django_assert_max_num_queries
):
    database = ConcurrencyGroup.objects.create(name="Database", colour="#d94f00", limit=2)
    ConcurrencyGroup.objects.create(name="Reports")
    vacuum = make_job("vacuum", concurrency_group=database)
    backup = make_job("backup", concurrency_group=database)
    running = add_run(vacuum)
    add_run(backup, RunStatus.QUEUED, held=True, waiting_for=WaitingFor.GROUP)
    hold_slot(redis_client, group_key(database.pk), running)
    reindex = make_job("reindex", exclusive=True)
    hold_slot(redis_client, exclusive_key(), add_run(reindex))

    with django_assert_max_num_queries(8):
        page = admin_client.get(
            reverse("admin:takt_jobs_concurrencygroup_changelist")
        ).content.decode()

    row = page[page.index(">Database</span>") :].split("</tr>")[0]
    assert 'class="takt-swatch" style="background:#d94f00"' in page
    assert '<td class="field-limit">2</td>' in row
    assert f"href='/admin/takt_jobs/job/?group={database.pk}'>2</a>" in row
    assert f">run #{running.pk}</a> vacuum" in row
    assert f"href='/admin/takt_runs/run/?waiting=group&amp;group={database.pk}'>1 run</a>" in row
    reports = page[page.index(">Reports</span>") :].split("</tr>")[0]
    assert '<td class="field-holders">none</td>' in reports
    exclusive = page[page.index('id="takt-exclusive-now"') :].split("</p>")[0]
    assert "reindex" in exclusive


def test_a_groups_page_lists_its_jobs_and_says_when_redis_is_away(admin_client, monkeypatch):
    database = ConcurrencyGroup.objects.create(name="Database")
    make_job("vacuum", concurrency_group=database)

    def unreachable(key):
        raise RedisError("Connection refused")

    monkeypatch.setattr("jobs.admin.groups.slot_holders", unreachable)
    page = admin_client.get(
        reverse("admin:takt_jobs_concurrencygroup_change", args=[database.pk])
    ).content.decode()

    assert ">vacuum</a>" in page
    assert "unknown (Redis: Connection refused)" in page


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"colour": "orange"}, "colour", "a colour as #rrggbb, e.g. #2f6fde"),
        ({"limit": "0"}, "limit", "Ensure this value is greater than or equal to 1."),
        ({"name": "DATABASE"}, "name", "a concurrency group with this name exists already"),
    ],
)
def test_a_bad_group_names_its_field_and_saves_nothing(admin_client, fields, field, message):
    ConcurrencyGroup.objects.create(name="Database")
    data = {"name": "Imports", "colour": "#2f6fde", "limit": "1", "description": "", **fields}

    response = admin_client.post(reverse("admin:takt_jobs_concurrencygroup_add"), data)

    assert response.status_code == 200
    assert dict(response.context["adminform"].form.errors) == {field: [message]}
    assert ConcurrencyGroup.objects.count() == 1


def test_a_value_set_by_hand_is_recorded_as_the_users(admin_client):
    variable = ResultVariable.objects.create(name="import_status", value=1, changed_by_run=41)
    url = reverse("admin:takt_jobs_resultvariable_change", args=[variable.pk])

    response = admin_client.post(url, {"name": "import_status", "value": "200", "description": "x"})

    assert response.status_code == 302
    variable.refresh_from_db()
    assert (variable.value, variable.changed_by, variable.changed_by_run) == (200, "admin", None)
    assert variable.description == "x" and variable.changed_at is not None
    page = admin_client.get(reverse("admin:takt_jobs_resultvariable_changelist")).content.decode()
    assert '<td class="field-set_by">admin</td>' in page


def test_a_variable_saved_with_its_value_unchanged_keeps_its_setter(admin_client):
    run = add_run(make_job("import"), RunStatus.SUCCEEDED)
    variable = ResultVariable.objects.create(name="import_status", value=0, changed_by_run=run.pk)
    url = reverse("admin:takt_jobs_resultvariable_change", args=[variable.pk])

    admin_client.post(url, {"name": "import_status", "value": "0", "description": "new words"})

    variable.refresh_from_db()
    assert (variable.changed_by_run, variable.changed_by, variable.description) == (
        run.pk, "", "new words",
    )  # fmt: skip
    page = admin_client.get(reverse("admin:takt_jobs_resultvariable_changelist")).content.decode()
    assert f">run #{run.pk}</a> of import" in page


def test_the_variable_page_names_its_writers_and_readers(admin_client):
    variable = ResultVariable.objects.create(name="import_status", value=-1002)
    make_job("import", result_variable=variable)
    make_job("report", condition_variable=variable, condition_values=[0])

    page = admin_client.get(
        reverse("admin:takt_jobs_resultvariable_change", args=[variable.pk])
    ).content.decode()
    listed = admin_client.get(reverse("admin:takt_jobs_resultvariable_changelist")).content.decode()

    assert ">import</a>" in page[page.index("Written by") :]
    assert ">report</a>" in page[page.index("Read by") :]
    assert "-1002 <span class='takt-muted'>(timed out; stopped)</span>" in listed


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"value": "ok"}, "value", "Enter a whole number."),
        ({"name": "IMPORT_STATUS"}, "name", "a result variable with this name exists already"),
    ],
)
def test_a_bad_variable_names_its_field_and_saves_nothing(admin_client, fields, field, message):
    ResultVariable.objects.create(name="import_status")
    data = {"name": "report_status", "value": "0", "description": "", **fields}

    response = admin_client.post(reverse("admin:takt_jobs_resultvariable_add"), data)

    assert dict(response.context["adminform"].form.errors) == {field: [message]}
    assert ResultVariable.objects.count() == 1


# --- runs: the cause, the runs caused, what a held run waits for ----------------------


def run_page(client, run: Run) -> str:
    return client.get(reverse("admin:takt_runs_run_change", args=[run.pk])).content.decode()


def test_a_parent_runs_page_lists_its_children_in_order_and_a_child_names_its_parent(
    admin_client, redis_client
):
    parent = make_job("nightly")
    backup = make_job("backup", parent=parent, child_order=2)
    vacuum = make_job("vacuum", parent=parent, child_order=1)
    make_job("verify", parent=parent, child_order=3, enabled=False)
    parent_run = add_run(parent)
    first = add_run(vacuum, RunStatus.FAILED, trigger="parent", cause=parent_run)
    retry = add_run(vacuum, RunStatus.SUCCEEDED, trigger="retry", cause=parent_run, retry_of=first)
    second = add_run(backup, RunStatus.RUNNING, trigger="parent", cause=parent_run)

    page = run_page(admin_client, parent_run)

    panel = page[page.index('id="takt-children-runs"') :].split("</fieldset>")[0]
    order = [panel.index(f">run #{r.pk}<") for r in (first, retry, second)]
    assert order == sorted(order)
    assert panel.index(">vacuum<") < panel.index(">backup<") < panel.index(">verify<")
    assert "disabled: skipped" in panel
    assert 'id="takt-dependants"' not in page
    child = run_page(admin_client, retry)
    link = f"<a href='/admin/takt_runs/run/{parent_run.pk}/change/'>run #{parent_run.pk}</a>"
    assert f"child of parent {link}" in child
    assert "Children" not in child and 'id="takt-children-runs"' not in child


def test_a_dependant_names_the_run_whose_end_started_it(admin_client):
    extract, load = make_job("extract"), make_job("load")
    upstream = add_run(extract, RunStatus.SUCCEEDED)
    started = add_run(load, RunStatus.QUEUED, trigger="dependency", cause=upstream)

    upstream_page, started_page = run_page(admin_client, upstream), run_page(admin_client, started)

    assert f">run #{started.pk}</a>" in upstream_page[upstream_page.index('id="takt-dependants"') :]
    link = f"<a href='/admin/takt_runs/run/{upstream.pk}/change/'>run #{upstream.pk}</a>"
    assert f"started by the end of {link} of job" in started_page
    assert (
        '(it ended <span class="takt-badge takt-status-succeeded">succeeded</span>)' in started_page
    )
    assert 'class="form-row field-cause_text"' not in upstream_page  # a scheduled run: no cause


def test_a_dependant_whose_cause_was_cleaned_up_says_so(admin_client):
    started = add_run(make_job("load"), RunStatus.SUCCEEDED, trigger="dependency")
    assert "its cause is no longer stored" in run_page(admin_client, started)


def test_a_held_run_says_what_it_waits_for_on_its_page_and_in_the_list(
    admin_client, redis_client, django_assert_max_num_queries
):
    database = ConcurrencyGroup.objects.create(name="Database", limit=1)
    vacuum = make_job("vacuum", concurrency_group=database)
    running = add_run(vacuum)
    hold_slot(redis_client, group_key(database.pk), running)
    waiting = add_run(make_job("backup", concurrency_group=database), RunStatus.QUEUED,
                      held=True, waiting_for=WaitingFor.GROUP)  # fmt: skip
    exclusive = add_run(make_job("reindex", exclusive=True), RunStatus.QUEUED, held=True,
                        waiting_for=WaitingFor.EXCLUSIVE)  # fmt: skip
    buffered = add_run(vacuum, RunStatus.QUEUED, held=True, trigger="manual")

    page = run_page(admin_client, waiting)
    with django_assert_max_num_queries(10):
        listed = admin_client.get(reverse("admin:takt_runs_run_changelist")).content.decode()
    only_groups = admin_client.get(
        reverse("admin:takt_runs_run_changelist"), {"waiting": "group", "group": database.pk}
    ).content.decode()

    assert "waiting for a slot of group <a href=" in page
    assert f">run #{running.pk}</a> vacuum" in page[page.index("Running now in the group") :]
    assert "held: waiting for a slot of group" in listed
    assert "held: waiting for every group&#x27;s runs to end (an exclusive job)" in listed
    assert "held: waiting for its job&#x27;s running run to end" in listed
    assert 'class="form-row field-waiting"' not in run_page(admin_client, running)
    assert f">#{waiting.pk}<" in only_groups
    assert f">#{exclusive.pk}<" not in only_groups and f">#{buffered.pk}<" not in only_groups


def test_a_dependency_stored_without_ends_opens_with_succeeded_ticked(admin_client):
    """A trigger made in code skips validation: no end stored means succeeded."""
    upstream, job = make_job("import"), make_job("transform")
    trigger = Trigger.objects.create(job=job, kind="dependency", upstream_job=upstream)
    assert trigger.upstream_statuses == []

    html = admin_client.get(change_url(job)).content.decode()

    boxes = [line for line in html.split("<input") if 'name="triggers-0-upstream_statuses"' in line]
    assert [("checked" in box) for box in boxes] == [True, False, False, False, False]
