"""The API refuses what it does not understand (issue 27, item 4): every
write endpoint (found in the URL patterns, so a new one is covered by
itself) answers an unknown field with a 400 naming it and changes nothing;
`auto_sync_interval_minutes` is an alias of `interval_minutes`; a body over
DATA_UPLOAD_MAX_MEMORY_SIZE is a JSON 400 naming the limit; a command
job's params past TAKT_MAX_PARAMS_BYTES are refused saying they become its
environment; a write answers with the state after it (defect 7)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db.models import Model
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from heartbeats.models import Alert, AlertSeverity, Heartbeat
from jobs.models import ConcurrencyGroup, Job, QueueState, ResultVariable, Trigger
from runs.models import Run
from runs.services import enqueue_job
from tests.integration.api_helpers import SessionClient, user_with
from tests.integration.conftest import make_job

pytestmark = pytest.mark.django_db

WRITES = ("post", "put", "patch")
STORED: tuple[type[Model], ...] = (
    Job,
    Trigger,
    ConcurrencyGroup,
    ResultVariable,
    Run,
    Heartbeat,
    Alert,
    QueueState,
)


def _route(prefix: str, pattern: Any) -> str:
    text = str(pattern).removeprefix("^").removesuffix("$").replace("/?", "")
    return prefix + re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", text)


def write_endpoints() -> list[tuple[str, str, str]]:
    """(method, path with {pk}, basename) of every write of every API view:
    the viewsets' routes and the other DRF views under /api/v1/ (not the
    heartbeat ping, a plain Django view a process posts to)."""
    found: set[tuple[str, str, str]] = set()

    def walk(patterns: list[Any], prefix: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, _route(prefix, entry.pattern))
                continue
            assert isinstance(entry, URLPattern)
            view = entry.callback
            cls = getattr(view, "cls", None)
            path = _route(prefix, entry.pattern)
            if cls is None or not path.startswith("api/v1/") or "{format}" in path:
                continue
            actions = getattr(view, "actions", None)
            methods = actions if actions else {m: m for m in WRITES if hasattr(cls, m)}
            basename = (getattr(view, "initkwargs", None) or {}).get("basename", "")
            for method in methods:
                if method in WRITES and method in cls.http_method_names:
                    found.add((method, "/" + path, basename))

    walk(get_resolver().url_patterns, "")
    return sorted(found)


ENDPOINTS = write_endpoints()


def test_the_endpoints_are_found():
    paths = {f"{m} {p}" for m, p, _ in ENDPOINTS}
    assert {
        "patch /api/v1/jobs/{pk}",
        "post /api/v1/jobs",
        "post /api/v1/jobs/{pk}/run",
        "post /api/v1/queue/maintenance",
        "post /api/v1/schedule/preview",
        "patch /api/v1/heartbeats/{pk}",
        "post /api/v1/runs/{pk}/cancel",
        "post /api/v1/alerts/{pk}/seen",
    } <= paths, paths


def stored() -> dict[str, list[dict[str, Any]]]:
    """Every row an API write could touch."""
    return {m.__name__: list(m.objects.order_by("pk").values()) for m in STORED}


@pytest.fixture
def admin(redis_client: Any) -> SessionClient:
    return SessionClient(user_with(username="root", superuser=True))


@pytest.fixture
def objects() -> dict[str, int]:
    """One object of each kind a route names by id, by the route's basename."""
    now = datetime.now(UTC)
    job = make_job("export", api_trigger_permission="authenticated", params={"region": "eu"})
    Trigger.objects.create(job=job, kind="cron", cron_expression="0 3 * * *", timezone="UTC")
    run = enqueue_job(job)
    beat = Heartbeat.objects.create(name="backup", deadline_s=3600)
    alert = Alert.objects.create(
        key="k", severity=AlertSeverity.WARNING, title="t", first_seen_at=now, last_seen_at=now
    )
    group = ConcurrencyGroup.objects.create(name="Imports", limit=2)
    variable = ResultVariable.objects.create(name="etl_result")
    return {
        "job": job.pk,
        "run": run.pk,
        "heartbeat": beat.pk,
        "alert": alert.pk,
        "group": group.pk,
        "variable": variable.pk,
    }


@pytest.mark.parametrize(("method", "path", "basename"), ENDPOINTS)
def test_every_write_refuses_an_unknown_field_and_changes_nothing(
    admin: SessionClient, objects: dict[str, int], method: str, path: str, basename: str
):
    if "{pk}" in path:
        assert basename in objects, f"add an object for {path} to the fixture `objects`"
        path = path.replace("{pk}", str(objects[basename]))
    before = stored()
    refused = admin.send(method, path, {"no_such_field": 1, "enabld": False})
    assert refused.status_code == 400, (refused.status_code, refused.content)
    errors = refused.json()
    assert errors["no_such_field"] == ["unknown field"]
    assert errors["enabld"][0].startswith("unknown field")
    assert stored() == before


def test_a_typo_gets_the_nearest_field_name(admin, objects):
    refused = admin.send("patch", f"/api/v1/jobs/{objects['job']}", {"enabld": False})
    assert refused.status_code == 400
    assert refused.json() == {"enabld": ["unknown field (did you mean 'enabled'?)"]}
    assert Job.objects.get(pk=objects["job"]).enabled


def test_a_read_only_field_is_refused_naming_it(admin, objects):
    before = stored()
    refused = admin.send(
        "patch", f"/api/v1/jobs/{objects['job']}", {"runs_done": 0, "enabled": False}
    )
    assert refused.status_code == 400
    assert refused.json() == {"runs_done": ["read-only: Takt sets it, leave it out"]}
    assert stored() == before


def test_an_unknown_field_of_a_trigger_is_refused_by_its_index(admin, objects):
    before = stored()
    body = {
        "triggers": [
            {"kind": "cron", "cron_expression": "0 3 * * *", "timezone": "UTC"},
            {"kind": "interval", "interval_seconds": 60, "every": 5},
        ]
    }
    refused = admin.send("patch", f"/api/v1/jobs/{objects['job']}", body)
    assert refused.status_code == 400
    assert refused.json() == {"triggers": {"1": {"every": ["unknown field"]}}}
    assert stored() == before


def test_an_unknown_field_of_a_new_job_stores_no_job(admin, redis_client):
    body = {"name": "new", "target": "tests.echo", "enabld": True}
    refused = admin.send("post", "/api/v1/jobs", body)
    assert refused.status_code == 400
    assert list(refused.json()) == ["enabld"]
    assert not Job.objects.filter(name="new").exists()


def test_the_schema_closes_every_request_body(admin):
    schema = admin.get("/api/v1/schema", format="json").json()
    components = schema["components"]["schemas"]
    for name in ("PatchedJobRequest", "JobRequest", "TriggerRequest", "RunRequestRequest"):
        assert components[name]["additionalProperties"] is False, name
    alias = components["PatchedJobRequest"]["properties"]["auto_sync_interval_minutes"]
    assert alias["writeOnly"] is True and alias["maximum"] == 43200


def test_an_export_with_its_read_only_fields_still_imports():
    """The import reads an export's `id` and drops it (jobs.exchange)."""
    from jobs.exchange import parse_definition

    definition = parse_definition(
        {"id": 7, "name": "n", "target": "tests.echo", "auto_sync_interval_minutes": 5},
        where="x: ",
    )
    assert definition.id == 7
    assert [t["interval_seconds"] for t in definition.triggers] == [300]


# --- auto_sync_interval_minutes, the migration manual's name ------------------------


def test_auto_sync_interval_minutes_is_interval_minutes(admin, objects):
    """The migration manual's curl, as written."""
    path = f"/api/v1/jobs/{objects['job']}"
    done = admin.send("patch", path, {"auto_sync_interval_minutes": 60})
    assert done.status_code == 200, done.json()
    assert done.json()["interval_minutes"] == 60
    triggers = list(Trigger.objects.filter(job_id=objects["job"]))
    assert [(t.kind, t.interval_seconds) for t in triggers] == [("interval", 3600)]
    done = admin.send("patch", path, {"auto_sync_interval_minutes": None})
    assert done.status_code == 200
    assert done.json()["interval_minutes"] is None and done.json()["triggers"] == []


def test_both_names_with_different_values_are_refused_naming_both(admin, objects):
    path = f"/api/v1/jobs/{objects['job']}"
    before = stored()
    refused = admin.send("patch", path, {"auto_sync_interval_minutes": 60, "interval_minutes": 30})
    assert refused.status_code == 400
    assert set(refused.json()) == {"auto_sync_interval_minutes", "interval_minutes"}
    assert stored() == before
    same = admin.send("patch", path, {"auto_sync_interval_minutes": 60, "interval_minutes": 60})
    assert same.status_code == 200 and same.json()["interval_minutes"] == 60


def test_the_alias_is_checked_as_interval_minutes(admin, objects):
    before = stored()
    refused = admin.send(
        "patch", f"/api/v1/jobs/{objects['job']}", {"auto_sync_interval_minutes": 43201}
    )
    assert refused.status_code == 400
    assert list(refused.json()) == ["auto_sync_interval_minutes"]
    assert stored() == before


# --- the size of a body, and of params ----------------------------------------------


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
def test_a_body_over_the_limit_is_a_json_400_naming_it(admin, objects):
    before = stored()
    body = {"name": "x" * 10_000}
    refused = admin.send("patch", f"/api/v1/jobs/{objects['job']}", body)
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/json"
    message = refused.json()["detail"]
    assert "at most 10000 bytes" in message and "DATA_UPLOAD_MAX_MEMORY_SIZE" in message
    assert stored() == before


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
def test_django_refusing_a_body_as_it_is_read_is_the_same_json_400():
    """A body Django refuses while DRF reads it (RequestDataTooBig) gets the
    same answer as one refused by its Content-Length."""
    from django.core.exceptions import RequestDataTooBig

    from jobs.api.errors import exception_handler

    answer = exception_handler(RequestDataTooBig("too big"), {})
    assert answer is not None and answer.status_code == 400
    assert answer.data == {
        "detail": "the request body is too large: at most 10000 bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)"
    }


@override_settings(TAKT_MAX_PARAMS_BYTES=1024)
def test_a_command_jobs_params_past_the_cap_say_they_become_its_environment(admin):
    user = user_with(username="runner", superuser=True)
    client = SessionClient(user)
    body = {
        "name": "shell",
        "kind": "command",
        "command": ["/bin/true"],
        "params": {"x": "a" * 1100},
    }
    refused = client.send("post", "/api/v1/jobs", body)
    assert refused.status_code == 400, refused.json()
    (message,) = refused.json()["params"]
    assert "at most 1024 bytes as JSON (TAKT_MAX_PARAMS_BYTES)" in message
    assert "environment variables" in message
    assert not Job.objects.filter(name="shell").exists()


@override_settings(TAKT_MAX_PARAMS_BYTES=1024)
def test_enqueue_job_says_a_command_jobs_params_become_its_environment(redis_client):
    from jobs.errors import InvalidInput

    job = Job.objects.create(name="cmd", kind="command", command=["true"], target="")
    with pytest.raises(InvalidInput) as refused:
        enqueue_job(job, params={"x": "a" * 1100})
    assert refused.value.field == "params"
    assert "environment variables (TAKT_PARAMS and TAKT_PARAM_<NAME>)" in refused.value.message
    assert not Run.objects.exists()


# --- the answer is the state after the write (defect 7) -----------------------------


def test_a_patch_answers_with_the_next_run_after_it(admin, objects):
    path = f"/api/v1/jobs/{objects['job']}"
    before = admin.get(path).json()["next_run_at"]
    assert before is not None
    done = admin.send("patch", path, {"interval_minutes": 60})
    assert done.status_code == 200
    assert done.json()["next_run_at"] is not None
    assert done.json() == admin.get(path).json()
    done = admin.send("patch", path, {"interval_minutes": None})
    assert done.json()["next_run_at"] is None
    assert done.json() == admin.get(path).json()


def test_a_post_answers_as_a_get_does(admin, redis_client):
    body = {"name": "new", "target": "tests.echo", "interval_minutes": 5}
    made = admin.send("post", "/api/v1/jobs", body)
    assert made.status_code == 201
    assert made.json() == admin.get(f"/api/v1/jobs/{made.json()['id']}").json()
    assert made.json()["next_run_at"] is not None


def test_a_variable_patch_answers_with_its_new_value(admin, objects):
    path = f"/api/v1/variables/{objects['variable']}"
    done = admin.send("patch", path, {"value": 0})
    assert done.status_code == 200
    assert done.json() == admin.get(path).json()
    assert done.json()["value"] == 0
