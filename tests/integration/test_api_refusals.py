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
