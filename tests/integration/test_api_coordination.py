"""Coordination through the API (F-04, F-31..F-33, F-41): a job's group,
variables, condition, parent and dependencies by name and key; every bad
input refused naming the field with nothing stored; a child cannot be
started from outside, a job whose condition does not hold is refused with
409; the groups and variables endpoints (a group's slot holders from
Redis, a variable set by hand recorded as set by the caller); the runs'
`cause` and `waiting_for`."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import ConcurrencyGroup, Job, ResultVariable, Trigger
from runs.core.start import SlotNeeds
from runs.decisions import query
from runs.models import Run
from runs.slots import acquire_start
from tests.integration.api_helpers import SessionClient, TokenClient, make_token, user_with
from tests.integration.conftest import make_job

pytestmark = pytest.mark.django_db

PERMS = (
    *(f"takt_jobs.{verb}_job" for verb in ("view", "add", "change", "delete")),
    *(f"takt_jobs.{verb}_concurrencygroup" for verb in ("view", "add", "change", "delete")),
    *(f"takt_jobs.{verb}_resultvariable" for verb in ("view", "add", "change", "delete")),
    "takt_runs.view_run",
)


@pytest.fixture(autouse=True)
def _redis(redis_client: Any) -> None:
    """Slots and the decision log are in the private Redis, emptied."""


@pytest.fixture(params=["session", "token"])
def client(request: pytest.FixtureRequest) -> Any:
    user = user_with(*PERMS)
    if request.param == "session":
        return SessionClient(user)
    return TokenClient(make_token(user=user))


@pytest.fixture
def api() -> Any:
    """One client, for tests that need no second run."""
    return TokenClient(make_token(user=user_with(*PERMS)))


@pytest.fixture
def world() -> dict[str, Any]:
    imports = ConcurrencyGroup.objects.create(name="Imports", limit=2)
    etl_result = ResultVariable.objects.create(name="etl_result")
    etl = make_job("ETL", key="etl")
    return {"group": imports, "variable": etl_result, "etl": etl}


def stored() -> dict[str, Any]:
    """Everything the refusals must leave as it was."""
    return {
        "jobs": list(Job.objects.order_by("pk").values()),
        "triggers": list(Trigger.objects.order_by("pk").values()),
        "groups": list(ConcurrencyGroup.objects.order_by("pk").values()),
        "variables": list(ResultVariable.objects.order_by("pk").values()),
    }


# --- jobs ---------------------------------------------------------------------------


def test_a_job_names_its_group_variables_and_parent(client, world):
    body = {
        "name": "Load",
        "target": "tests.echo",
        "concurrency_group": "imports",  # any case
        "result_variable": "etl_result",
        "parent": "etl",
        "child_order": 2,
        "stop_on_child_failure": False,
    }
    response = client.send("post", "/api/v1/jobs", body)
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["concurrency_group"], data["result_variable"], data["parent"]) == (
        "Imports",
        "etl_result",
        "etl",
    )
    load = Job.objects.get(pk=data["id"])
    assert (load.concurrency_group, load.parent, load.child_order) == (
        world["group"],
        world["etl"],
        2,
    )

    body = {
        "name": "Report",
        "target": "tests.echo",
        "condition_variable": "ETL_RESULT",
        "condition_values": [200, 0],
        "condition_consume": True,
        "triggers": [
            {"kind": "dependency", "upstream_job": load.pk, "upstream_statuses": ["failed"]},
            {"kind": "dependency", "upstream_job": "etl"},
        ],
    }
    response = client.send("post", "/api/v1/jobs", body)
    assert response.status_code == 201, response.json()
    data = client.get(f"/api/v1/jobs/{response.json()['id']}").json()
    assert (data["condition_variable"], data["condition_values"], data["condition_consume"]) == (
        "etl_result",
        [0, 200],
        True,
    )
    after_load, after_etl = data["triggers"]
    assert (after_load["upstream_job"], after_load["upstream_statuses"]) == (load.pk, ["failed"])
    assert (after_etl["upstream_job"], after_etl["upstream_statuses"]) == ("etl", ["succeeded"])
    assert after_load["description"] and after_load["next_run_at"] is None


def test_a_parent_given_by_id_is_shown_by_key_when_it_has_one(client, world):
    plain = make_job("Plain")
    for parent, shown in ((world["etl"].pk, "etl"), (plain.pk, plain.pk)):
        body = {"name": "Child", "target": "tests.echo", "parent": parent}
        response = client.send("post", "/api/v1/jobs", body)
        assert response.status_code == 201, response.json()
        assert response.json()["parent"] == shown


BAD_JOBS = [
    ({"concurrency_group": "Nope"}, "concurrency_group", "no concurrency group is named 'Nope'"),
    ({"concurrency_group": 1}, "concurrency_group", "give the concurrency group's name"),
    ({"result_variable": "nope"}, "result_variable", "no result variable is named 'nope'"),
    ({"condition_variable": "nope"}, "condition_variable", "no result variable is named 'nope'"),
    ({"condition_variable": "etl_result", "condition_values": ["0"]}, "condition_values", "whole"),
    ({"condition_variable": "etl_result", "condition_values": [True]}, "condition_values", "whole"),
    ({"condition_variable": "etl_result", "condition_values": 0}, "condition_values", "whole"),
    ({"condition_variable": "etl_result"}, "condition_values", "give the accepted values"),
    ({"condition_values": [0]}, "condition_variable", "accepted values need a variable"),
    ({"condition_consume": True}, "condition_consume", "only a condition on a variable"),
    ({"concurrency_group": "Imports", "exclusive": True}, "exclusive", "in no group"),
    ({"parent": "nope"}, "parent", "no job has the key 'nope'"),
    ({"parent": 987654}, "parent", "no job has the id 987654"),
    ({"parent": 2**70}, "parent", f"no job has the id {2**70}"),  # past a bigint
    ({"parent": 1.5}, "parent", "give a job's key (a string) or id (an integer)"),
    ({"parent": ""}, "parent", "give a job's key (a string) or id (an integer)"),
    ({"parent": "grouped"}, "parent", "is exclusive or in a group"),
    (
        {"parent": "etl", "triggers": [{"kind": "cron", "cron_expression": "0 3 * * *"}]},
        ("triggers", "0", "kind"),
        "is a child of job #",
    ),
    (
        {"triggers": [{"kind": "dependency"}]},
        ("triggers", "0", "upstream_job"),
        "required for a dependency trigger",
    ),
    (
        {"triggers": [{"kind": "dependency", "upstream_job": "nope"}]},
        ("triggers", "0", "upstream_job"),
        "no job has the key 'nope'",
    ),
    (
        {"triggers": [{"kind": "dependency", "upstream_job": "etl", "upstream_statuses": ["ok"]}]},
        ("triggers", "0", "upstream_statuses"),
        "'ok' is not how a run ends",
    ),
    (
        {"triggers": [{"kind": "dependency", "upstream_job": "etl", "upstream_statuses": "ok"}]},
        ("triggers", "0", "upstream_statuses"),
        "Expected a list",
    ),
    ({"allowed_during_maintenance": True}, "allowed_during_maintenance", "@takt_job("),
]


def message_at(data: Any, field: str | tuple[str, ...]) -> str:
    for part in (field,) if isinstance(field, str) else field:
        data = data[part]
    return " ".join(data)


@pytest.mark.parametrize(("change", "field", "words"), BAD_JOBS)
def test_a_bad_job_is_refused_naming_the_field_and_nothing_is_stored(
    api, world, change, field, words
):
    make_job("Grouped", key="grouped", concurrency_group=world["group"])
    before = stored()

    response = api.send("post", "/api/v1/jobs", {"name": "New", "target": "tests.echo", **change})

    assert response.status_code == 400, response.json()
    assert words in message_at(response.json(), field)
    assert stored() == before


@pytest.fixture
def family(world) -> dict[str, Job]:
    """ETL is the parent of Extract; Report depends on ETL; Cron has a schedule."""
    extract = make_job("Extract", key="extract", parent=world["etl"])
    report = make_job("Report", key="report")
    Trigger.objects.create(
        job=report, kind="dependency", upstream_job=world["etl"], upstream_statuses=["succeeded"]
    )
    cron = make_job("Cron", key="cron")
    Trigger.objects.create(job=cron, kind="cron", cron_expression="0 3 * * *", timezone="UTC")
    return {"etl": world["etl"], "extract": extract, "report": report, "cron": cron}


def patch(api: Any, job: Job, body: dict[str, Any]) -> Any:
    return api.send("patch", f"/api/v1/jobs/{job.pk}", body)


@pytest.mark.parametrize(
    ("who", "body", "field", "words"),
    [
        ("etl", {"parent": "etl"}, "parent", "a job cannot be its own parent"),
        ("etl", {"parent": "extract"}, "parent", "that would make a loop of parents"),
        ("etl", {"concurrency_group": "Imports"}, "concurrency_group", "a parent runs no code"),
        ("etl", {"exclusive": True}, "exclusive", "a parent runs no code"),
        ("cron", {"parent": "etl"}, "parent", "has 1 enabled trigger(s)"),
        (
            "extract",
            {"triggers": [{"kind": "cron", "cron_expression": "0 3 * * *"}]},
            ("triggers", "0", "kind"),
            "is a child of job #",
        ),
        (
            "etl",
            {"triggers": [{"kind": "dependency", "upstream_job": "report"}]},
            ("triggers", "0", "upstream_job"),
            "that would make a cycle: 'Report' (#",
        ),
        (
            "report",
            {"triggers": [{"kind": "dependency", "upstream_job": "report"}]},
            ("triggers", "0", "upstream_job"),
            "a job cannot depend on itself",
        ),
    ],
)
def test_a_bad_change_is_refused_naming_the_field_and_nothing_is_stored(
    api, family, who, body, field, words
):
    before = stored()

    response = patch(api, family[who], body)

    assert response.status_code == 400, response.json()
    assert words in message_at(response.json(), field)
    assert stored() == before


def test_a_job_becomes_a_child_when_its_triggers_go_with_the_same_change(api, family):
    cron = family["cron"]
    disabled = patch(
        api, cron, {"parent": "etl", "triggers": [{"kind": "cron", "cron_expression": "0 3 * * *",
                                                   "enabled": False}]},
    )  # fmt: skip
    assert disabled.status_code == 200, disabled.json()
    assert disabled.json()["parent"] == "etl"
    assert patch(api, cron, {"parent": None}).status_code == 200
    assert patch(api, cron, {"triggers": [{"kind": "cron", "cron_expression": "0 4 * * *"}]})

    response = patch(api, cron, {"parent": family["etl"].pk, "triggers": []})

    assert response.status_code == 200, response.json()
    cron.refresh_from_db()
    assert (cron.parent, cron.triggers.count()) == (family["etl"], 0)


def test_a_child_cannot_be_started_from_outside(api, family):
    extract = family["extract"]
    Job.objects.filter(pk=extract.pk).update(api_trigger_permission="authenticated")

    response = api.send("post", f"/api/v1/jobs/{extract.pk}/run")

    assert response.status_code == 400
    assert "is a child of job #" in " ".join(response.json()["job"])
    assert not Run.objects.filter(job=extract).exists()


def test_a_job_whose_condition_does_not_hold_is_refused_with_409(api, world):
    job = make_job(
        "Report",
        api_trigger_permission="authenticated",
        condition_variable=world["variable"],
        condition_values=[0],
    )
    path = f"/api/v1/jobs/{job.pk}/run"

    response = api.send("post", path)

    assert response.status_code == 409
    assert "etl_result" in " ".join(response.json()["condition"])
    assert not Run.objects.filter(job=job).exists()
    ResultVariable.objects.filter(pk=world["variable"].pk).update(value=0)
    assert api.send("post", path).status_code == 201


def test_jobs_filter_by_group_name_parent_and_exclusive(api, family, world):
    Job.objects.filter(pk=family["report"].pk).update(concurrency_group=world["group"])
    Job.objects.filter(pk=family["cron"].pk).update(exclusive=True)
    plain_parent = make_job("Plain parent")
    orphan = make_job("Child of plain", parent=plain_parent)

    def ids(**params: str) -> list[int]:
        return [job["id"] for job in api.get("/api/v1/jobs", **params).json()["results"]]

    assert ids(concurrency_group="imports") == [family["report"].pk]
    assert ids(parent="etl") == ids(parent=str(family["etl"].pk)) == [family["extract"].pk]
    assert ids(parent=str(plain_parent.pk)) == [orphan.pk]
    assert ids(exclusive="true") == [family["cron"].pk]


# --- groups -------------------------------------------------------------------------


def test_groups_can_be_listed_made_changed_and_deleted(client):
    response = client.send(
        "post", "/api/v1/groups", {"name": "Blue", "colour": "#2255ff", "limit": 2}
    )
    assert response.status_code == 201, response.json()
    group = response.json()
    assert group == {
        "id": group["id"],
        "name": "Blue",
        "colour": "#2255ff",
        "limit": 2,
        "description": "",
        "job_count": 0,
        "holders": [],
        "reserved": [],
    }
    path = f"/api/v1/groups/{group['id']}"
    assert client.get("/api/v1/groups", name="blu").json()["results"] == [group]
    changed = client.send("patch", path, {"limit": 3, "description": "the blue jobs"})
    assert changed.status_code == 200, changed.json()
    assert (changed.json()["limit"], changed.json()["description"]) == (3, "the blue jobs")
    assert ConcurrencyGroup.objects.get(pk=group["id"]).limit == 3

    assert client.send("delete", path).status_code == 204
    assert not ConcurrencyGroup.objects.filter(pk=group["id"]).exists()


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"name": "imports"}, "name", "a concurrency group with this name exists already"),
        ({"name": ""}, "name", "This field may not be blank."),
        ({"name": "x" * 101}, "name", "at most 100 characters"),
        ({"name": "Red", "colour": "red"}, "colour", "a colour as #rrggbb"),
        ({"name": "Red", "limit": 0}, "limit", "greater than or equal to 1"),
        ({"name": "Red", "limit": 1001}, "limit", "less than or equal to 1000"),
        ({"name": "Red", "limit": "many"}, "limit", "A valid integer is required."),
    ],
)
def test_a_bad_group_is_refused_naming_the_field(api, world, body, field, words):
    before = stored()

    response = api.send("post", "/api/v1/groups", body)

    assert response.status_code == 400, response.json()
    assert words in message_at(response.json(), field)
    assert stored() == before


def test_renaming_a_group_to_a_taken_name_is_refused(api, world):
    blue = ConcurrencyGroup.objects.create(name="Blue")
    response = api.send("patch", f"/api/v1/groups/{blue.pk}", {"name": "IMPORTS"})
    assert response.status_code == 400
    assert response.json() == {"name": ["a concurrency group with this name exists already"]}
    assert api.send("patch", f"/api/v1/groups/{blue.pk}", {"name": "BLUE"}).status_code == 200


def test_a_group_shows_the_runs_holding_its_slots(api, world):
    job = make_job("Load", concurrency_group=world["group"])
    first, second = (
        Run.objects.create(job=job, trigger="manual", scheduled_for=now, enqueued_at=now)
        for now in (job.created_at, job.created_at)
    )
    needs = SlotNeeds(group=world["group"].pk, group_limit=2)
    for run in (first, second):
        _, started = acquire_start(job.pk, run_id=run.pk, slots=2, needs=needs)
        assert started is True

    data = api.get(f"/api/v1/groups/{world['group'].pk}").json()

    assert sorted(data["holders"]) == sorted([first.pk, second.pk])
    assert (data["job_count"], data["reserved"]) == (1, [])
    [listed] = api.get("/api/v1/groups").json()["results"]
    assert sorted(listed["holders"]) == sorted(data["holders"])


def test_a_group_with_jobs_is_not_deleted(api, world):
    make_job("Load", concurrency_group=world["group"])
    make_job("Extract", concurrency_group=world["group"])

    response = api.send("delete", f"/api/v1/groups/{world['group'].pk}")

    assert response.status_code == 409
    [message] = response.json()["jobs"]
    assert message.startswith("jobs are in this group: 'Extract' (#")
    assert "'Load' (#" in message
    assert ConcurrencyGroup.objects.filter(pk=world["group"].pk).exists()


def test_groups_and_variables_need_their_model_permissions(world):
    reader = TokenClient(make_token(user=user_with("takt_jobs.view_concurrencygroup")))
    assert reader.get("/api/v1/groups").status_code == 200
    assert reader.get("/api/v1/variables").status_code == 403
    assert reader.send("post", "/api/v1/groups", {"name": "Red"}).status_code == 403
    assert reader.send("delete", f"/api/v1/groups/{world['group'].pk}").status_code == 403
    job_token = TokenClient(make_token(job=world["etl"]))
    assert job_token.get("/api/v1/groups").status_code == 403
    assert ConcurrencyGroup.objects.count() == 1


# --- variables ----------------------------------------------------------------------


def test_a_variable_set_by_hand_is_recorded_as_set_by_the_caller(client):
    response = client.send("post", "/api/v1/variables", {"name": "etl_result"})
    assert response.status_code == 201, response.json()
    variable = response.json()
    assert (variable["value"], variable["changed_by"], variable["changed_at"]) == (-1, "", None)
    path = f"/api/v1/variables/{variable['id']}"

    response = client.send("patch", path, {"value": 0})

    assert response.status_code == 200, response.json()
    data = response.json()
    assert (data["value"], data["changed_by"], data["changed_by_run"]) == (
        0,
        "operator (API)",
        None,
    )
    assert data["changed_at"] is not None
    stored_variable = ResultVariable.objects.get(pk=variable["id"])
    assert (stored_variable.value, stored_variable.changed_by) == (0, "operator (API)")
    assert query(limit=1)[0]["detail"] == "variable 'etl_result': -1 → 0, set by operator (API)"

    renamed = client.send("patch", path, {"name": "etl_code", "description": "ETL's end"})
    assert renamed.status_code == 200, renamed.json()
    stored_variable.refresh_from_db()
    assert (stored_variable.name, stored_variable.value, stored_variable.changed_at) == (
        "etl_code",
        0,
        stored_variable.changed_at,
    )
    assert client.get("/api/v1/variables", name="CODE").json()["results"][0]["id"] == variable["id"]


def test_a_variable_made_with_a_value_records_who_set_it(api):
    response = api.send("post", "/api/v1/variables", {"name": "gate", "value": 200})
    assert response.status_code == 201, response.json()
    assert (response.json()["value"], response.json()["changed_by"]) == (200, "operator (API)")


def test_a_variable_shows_the_jobs_that_write_and_read_it_and_is_kept_while_they_do(api, world):
    variable = world["variable"]
    writer = make_job("Writer", result_variable=variable)
    reader = make_job("Reader", condition_variable=variable, condition_values=[0])
    path = f"/api/v1/variables/{variable.pk}"
    data = api.get(path).json()
    assert (data["writers"], data["readers"]) == ([writer.pk], [reader.pk])

    response = api.send("delete", path)

    assert response.status_code == 409
    [message] = response.json()["jobs"]
    assert f"'Reader' (#{reader.pk}), 'Writer' (#{writer.pk})" in message
    Job.objects.filter(pk=writer.pk).update(result_variable=None)
    assert api.send("delete", path).status_code == 409  # still read
    Job.objects.filter(pk=reader.pk).update(condition_variable=None, condition_values=[])
    assert api.send("delete", path).status_code == 204
    assert not ResultVariable.objects.filter(pk=variable.pk).exists()


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"name": "ETL_RESULT"}, "name", "a result variable with this name exists already"),
        ({"name": "gate", "value": "x"}, "value", "A valid integer is required."),
        ({"name": "gate", "value": 2**40}, "value", "less than or equal to 2147483647"),
        ({"name": ""}, "name", "This field may not be blank."),
    ],
)
def test_a_bad_variable_is_refused_naming_the_field(api, world, body, field, words):
    before = stored()

    response = api.send("post", "/api/v1/variables", body)

    assert response.status_code == 400, response.json()
    assert words in message_at(response.json(), field)
    assert stored() == before


def test_a_bad_value_by_patch_changes_nothing(api, world):
    before = stored()
    response = api.send("patch", f"/api/v1/variables/{world['variable'].pk}", {"value": 2**40})
    assert response.status_code == 400 and "value" in response.json()
    assert stored() == before


# --- runs ---------------------------------------------------------------------------


def test_runs_show_their_cause_and_what_they_wait_for(api, family):
    etl, extract, report = family["etl"], family["extract"], family["report"]
    at = etl.created_at
    parent_run = Run.objects.create(job=etl, trigger="manual", scheduled_for=at, enqueued_at=at)
    child_run = Run.objects.create(
        job=extract, trigger="parent", cause=parent_run, scheduled_for=at, enqueued_at=at
    )
    dependant = Run.objects.create(
        job=report,
        trigger="dependency",
        cause=parent_run,
        held=True,
        waiting_for="group",
        scheduled_for=at,
        enqueued_at=at,
    )
    Run.objects.create(job=report, trigger="manual", scheduled_for=at, enqueued_at=at)

    caused = api.get("/api/v1/runs", cause=str(parent_run.pk)).json()["results"]

    assert sorted(run["id"] for run in caused) == sorted([child_run.pk, dependant.pk])
    assert {run["cause"] for run in caused} == {parent_run.pk}
    shown = api.get(f"/api/v1/runs/{dependant.pk}").json()
    assert (shown["cause"], shown["waiting_for"], shown["held"]) == (parent_run.pk, "group", True)
    assert api.get(f"/api/v1/runs/{parent_run.pk}").json()["cause"] is None
    assert api.get("/api/v1/runs", cause="999999").json()["results"] == []
    assert api.get("/api/v1/runs", cause="1.5").status_code == 400
