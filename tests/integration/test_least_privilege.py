"""Least privilege (docs/security.md): no permission, token or file drop
grants more than it says. Each test here is one finding of the review
(issue 25), tried as the attacker did: through the admin's forms and
actions, the API, the import page, RUN files and remote runs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from jobs.models import Job
from jobs.tokens import ApiToken
from runs.execution import execute
from runs.models import Run, RunStatus
from runs.operations import start_operation
from runs.services import enqueue_job
from tests.integration.api_helpers import SessionClient, TokenClient, make_token, user_with
from tests.integration.conftest import job_form_fields

pytestmark = pytest.mark.django_db

EDITOR = ("takt_jobs.view_job", "takt_jobs.add_job", "takt_jobs.change_job", "takt_jobs.delete_job")
COMMAND = {"name": "sh", "kind": "command", "command": ["id"]}


def admin_as(*perms: str, username: str = "editor") -> Client:
    client = Client()
    client.force_login(user_with(*perms, username=username))
    return client


def new_job_form(**changes: Any) -> dict[str, Any]:
    data = {
        **job_form_fields(Job(name="new", target="tests.echo")),
        "triggers-TOTAL_FORMS": 0,
        "triggers-INITIAL_FORMS": 0,
        "triggers-MIN_NUM_FORMS": 0,
        "triggers-MAX_NUM_FORMS": 1000,
    }
    data.update(changes)
    return data


def kinds_offered(page: str) -> list[str]:
    start = page.index('name="kind"')
    select = page[start : page.index("</select>", start)]
    return [part.split('"')[1] for part in select.split("<option value=")[1:]]


# --- 1. "Change job" is not a shell ---------------------------------------------------


def test_an_editor_without_run_programs_cannot_make_a_command_job_through_the_api() -> None:
    api = SessionClient(user_with(*EDITOR))
    response = api.send("post", "/api/v1/jobs", COMMAND)
    assert response.status_code == 403, response.content
    assert "Can create, change and run command jobs" in response.json()["kind"][0]
    assert not Job.objects.filter(name="sh").exists()
    # Nor turn an ordinary job into one.
    job = Job.objects.create(name="plain", target="tests.echo")
    response = api.send(
        "patch", f"/api/v1/jobs/{job.pk}", {"kind": "command", "command": ["id"], "target": ""}
    )
    assert response.status_code == 403 and "kind" in response.json()
    assert Job.objects.get(pk=job.pk).kind == "callable"


def test_an_editor_without_run_programs_cannot_start_change_or_delete_a_command_job() -> None:
    job = Job.objects.create(
        name="sh", kind="command", command=["id"], api_trigger_permission="authenticated"
    )
    api = SessionClient(user_with(*EDITOR))
    assert api.send("post", f"/api/v1/jobs/{job.pk}/run").status_code == 403
    assert api.send("patch", f"/api/v1/jobs/{job.pk}", {"name": "x"}).status_code == 403
    assert api.send("delete", f"/api/v1/jobs/{job.pk}").status_code == 403
    assert not Run.objects.exists() and Job.objects.get(pk=job.pk).name == "sh"
    # The operator's fields stay his: he may switch it off.
    assert api.send("patch", f"/api/v1/jobs/{job.pk}", {"enabled": False}).status_code == 200


def test_the_permission_run_programs_lets_an_editor_make_and_start_command_jobs() -> None:
    api = SessionClient(user_with(*EDITOR, "takt_jobs.run_programs"))
    response = api.send(
        "post", "/api/v1/jobs", {**COMMAND, "api_trigger_permission": "authenticated"}
    )
    assert response.status_code == 201, response.content
    assert api.send("post", f"/api/v1/jobs/{response.json()['id']}/run").status_code == 201


def test_the_admin_offers_no_command_kind_and_refuses_a_forged_one() -> None:
    editor = admin_as(*EDITOR)
    page = editor.get(reverse("admin:takt_jobs_job_add")).content.decode()
    assert kinds_offered(page) == ["callable", "system"]
    assert 'name="command"' not in page and 'name="env"' not in page
    response = editor.post(
        reverse("admin:takt_jobs_job_add"),
        new_job_form(kind="command", target="", command=json.dumps(["id"])),
    )
    assert response.status_code == 200  # the form again, with the error
    assert not Job.objects.filter(name="new").exists()
    # With the permission it is offered.
    page = admin_as(*EDITOR, "takt_jobs.run_programs", username="ops").get(
        reverse("admin:takt_jobs_job_add")
    )
    assert "command" in kinds_offered(page.content.decode())


def test_a_command_job_is_read_only_and_cannot_be_run_in_the_admin_without_run_programs() -> None:
    job = Job.objects.create(name="sh", kind="command", command=["id"])
    editor = admin_as(*EDITOR)
    page = editor.get(reverse("admin:takt_jobs_job_change", args=[job.pk])).content.decode()
    assert 'name="_save"' not in page
    editor.post(reverse("admin:takt_jobs_job_run_now", args=[job.pk]))
    changelist = reverse("admin:takt_jobs_job_changelist")
    editor.post(changelist, {"action": "run_now", "_selected_action": [job.pk]})
    assert not Run.objects.exists()


def test_a_celery_task_target_and_a_remote_run_need_their_permissions() -> None:
    api = SessionClient(user_with(*EDITOR))
    for body, field in (
        ({"name": "t", "target": "tests.celery_echo", "args": [1]}, "target"),
        (
            {"name": "r", "target": "takt.remote_run", "params": {"url": "https://b", "job": 1}},
            "target",
        ),
    ):
        response = api.send("post", "/api/v1/jobs", body)
        assert response.status_code == 403 and field in response.json(), response.content
    assert not Job.objects.filter(name__in=["t", "r"]).exists()
    # A registered Takt function stays every editor's.
    assert (
        api.send("post", "/api/v1/jobs", {"name": "ok", "target": "tests.echo"}).status_code == 201
    )


def test_a_file_trigger_needs_watch_folders(tmp_path: Path) -> None:
    api = SessionClient(user_with(*EDITOR))
    body = {
        "name": "w",
        "target": "tests.echo",
        "triggers": [{"kind": "file", "watch_folder": str(tmp_path), "watch_pattern": "*.csv"}],
    }
    response = api.send("post", "/api/v1/jobs", body)
    assert response.status_code == 403 and "triggers" in response.json(), response.content
    triggers = ("takt_jobs.add_trigger", "takt_jobs.change_trigger", "takt_jobs.view_trigger")
    page = admin_as(*EDITOR, *triggers).get(reverse("admin:takt_jobs_job_add")).content.decode()
    assert '<option value="cron"' in page and '<option value="file"' not in page


def test_the_import_page_refuses_a_command_job_to_an_editor_without_run_programs() -> None:
    editor = admin_as(*EDITOR)
    text = "- name: sh\n  kind: command\n  command: [id]\n"
    response = editor.post(
        reverse("admin:takt_jobs_job_import"), {"text": text, "format": "yaml", "check": "1"}
    )
    page = response.content.decode()
    assert "Can create, change and run command jobs" in page, page[:3000]
    assert not Job.objects.filter(name="sh").exists()


# --- 2. and 6. Tokens ------------------------------------------------------------------


def token_admin(*perms: str) -> Client:
    return admin_as(
        *perms, "takt_jobs.add_apitoken", "takt_jobs.change_apitoken", "takt_jobs.view_apitoken"
    )


def test_only_a_superuser_makes_a_token_for_another_user() -> None:
    root = user_with(username="root", superuser=True)
    client = token_admin()
    response = client.post(
        reverse("admin:takt_jobs_apitoken_add"), {"name": "mine now", "user": root.pk}
    )
    assert response.status_code == 200  # the form again
    assert not ApiToken.objects.exists()


def test_a_token_for_a_job_needs_the_right_to_change_that_job() -> None:
    job = Job.objects.create(name="sh", kind="command", command=["id"])
    client = token_admin(*EDITOR)
    client.post(reverse("admin:takt_jobs_apitoken_add"), {"name": "t", "job": job.pk})
    assert not ApiToken.objects.exists()


def test_a_tokens_user_and_revocation_are_a_superusers_to_change() -> None:
    editor = user_with("takt_jobs.change_apitoken", "takt_jobs.view_apitoken", username="ed")
    other = user_with(username="other")
    token = ApiToken(name="t", user=editor, revoked=True)
    token.issue()
    token.save()
    client = Client()
    client.force_login(editor)
    client.post(
        reverse("admin:takt_jobs_apitoken_change", args=[token.pk]),
        {"name": "t", "user": other.pk, "revoked": ""},
    )
    token.refresh_from_db()
    assert token.user_id == editor.pk and token.revoked


def test_a_job_token_with_a_user_can_do_nothing_but_start_its_job() -> None:
    job = Job.objects.create(name="j", target="tests.echo", api_trigger_permission="token")
    api = TokenClient(make_token(user=user_with(*EDITOR), job=job))
    assert api.get("/api/v1/jobs").status_code == 403
    assert (
        api.send("post", "/api/v1/jobs", {"name": "x", "target": "tests.echo"}).status_code == 403
    )
    assert api.send("post", f"/api/v1/jobs/{job.pk}/run").status_code == 201


# --- 3. and 4. Run params and remote runs ---------------------------------------------------


def test_a_caller_cannot_redirect_a_remote_run() -> None:
    job = Job.objects.create(
        name="remote",
        target="takt.remote_run",
        params={"url": "https://b.example", "job": 7},
        api_trigger_permission="token",
        caller_params=["*"],
    )
    api = TokenClient(make_token(job=job))
    for key in ("url", "token_env", "job"):
        response = api.send("post", f"/api/v1/jobs/{job.pk}/run", {"params": {key: "x"}})
        assert response.status_code == 400, response.content
        assert list(response.json()) == [f"params.{key}"]
    assert not Run.objects.exists()


def test_a_job_takes_only_the_run_params_it_names() -> None:
    job = Job.objects.create(
        name="report", target="tests.echo", api_trigger_permission="token", caller_params=["day"]
    )
    api = TokenClient(make_token(job=job))
    response = api.send("post", f"/api/v1/jobs/{job.pk}/run", {"params": {"region": "eu"}})
    assert response.status_code == 400 and "params.region" in response.json()
    response = api.send("post", f"/api/v1/jobs/{job.pk}/run", {"params": {"day": "mon"}})
    assert response.status_code == 201 and response.json()["params"] == {"day": "mon"}


class _Listener:
    """A local HTTP server recording the requests it gets; `redirect_to`
    answers each with a 302 there."""

    def __init__(self, redirect_to: str = "") -> None:
        self.requests: list[tuple[str, str | None]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                listener.requests.append((self.path, self.headers.get("Authorization")))
                if redirect_to:
                    self.send_response(302)
                    self.send_header("Location", redirect_to + self.path)
                    self.end_headers()
                    return
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"id": 1, "status": "succeeded"}')

            do_GET = do_POST  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listeners() -> Iterator[list[_Listener]]:
    made: list[_Listener] = []
    yield made
    for listener in made:
        listener.close()


def remote_job(url: str, **params: Any) -> Job:
    return Job.objects.create(
        name="remote", target="takt.remote_run", params={"url": url, "job": 7, **params}
    )


@override_settings(TAKT_REMOTE_ALLOW_HTTP=True)
def test_a_remote_run_follows_no_redirect(
    listeners: list[_Listener], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAKT_REMOTE_TOKEN", "takt_secret")
    elsewhere = _Listener()
    listeners.append(elsewhere)
    first = _Listener(redirect_to=elsewhere.url)
    listeners.append(first)
    run = enqueue_job(remote_job(first.url, wait=False))
    assert execute(run.pk, worker="test") == RunStatus.FAILED
    run.refresh_from_db()
    assert "302" in run.message and "not followed" in run.message, run.message
    assert len(first.requests) == 1 and elsewhere.requests == []


def test_a_remote_run_needs_https_unless_http_is_allowed(
    listeners: list[_Listener], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAKT_REMOTE_TOKEN", "takt_secret")
    listener = _Listener()
    listeners.append(listener)
    run = enqueue_job(remote_job(listener.url, wait=False))
    assert execute(run.pk, worker="test") == RunStatus.FAILED
    assert "TAKT_REMOTE_ALLOW_HTTP" in Run.objects.get(pk=run.pk).message
    assert listener.requests == []
    with override_settings(TAKT_REMOTE_ALLOW_HTTP=True):
        run = enqueue_job(remote_job(listener.url, wait=False))
        assert execute(run.pk, worker="test") == RunStatus.SUCCEEDED
    assert listener.requests == [("/api/v1/jobs/7/run", "Bearer takt_secret")]


@override_settings(TAKT_REMOTE_ALLOW_HTTP=True)
def test_a_remote_run_sends_only_variables_named_takt_remote(
    listeners: list[_Listener], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", "do-not-send")
    listener = _Listener()
    listeners.append(listener)
    run = enqueue_job(remote_job(listener.url, token_env="DJANGO_SECRET_KEY", wait=False))
    assert execute(run.pk, worker="test") == RunStatus.FAILED
    assert "TAKT_REMOTE_" in Run.objects.get(pk=run.pk).message
    assert listener.requests == []


# --- 5. Admin actions check their permission -----------------------------------------------


def test_a_view_only_user_is_offered_no_job_action_and_starts_nothing() -> None:
    job = Job.objects.create(name="j", target="tests.echo")
    viewer = admin_as("takt_jobs.view_job", username="viewer")
    changelist = reverse("admin:takt_jobs_job_changelist")
    page = viewer.get(changelist).content.decode()
    assert 'value="run_now"' not in page
    for action in ("run_now", "enable", "disable", "pause", "resume", "backfill"):
        viewer.post(changelist, {"action": action, "_selected_action": [job.pk]})
    assert not Run.objects.exists()
    job.refresh_from_db()
    assert job.enabled and not job.paused


def test_revoking_tokens_and_marking_alerts_seen_need_change_permissions() -> None:
    from heartbeats.models import Alert

    token = ApiToken(name="t", user=user_with(username="owner"))
    token.issue()
    token.save()
    viewer = admin_as(
        "takt_jobs.view_apitoken",
        "takt_heartbeats.view_alert",
        "takt_heartbeats.view_heartbeat",
        username="viewer",
    )
    viewer.post(
        reverse("admin:takt_jobs_apitoken_changelist"),
        {"action": "revoke", "_selected_action": [token.pk]},
    )
    token.refresh_from_db()
    assert not token.revoked
    now = _now()
    alert = Alert.objects.create(
        key="k", title="t", message="m", severity="warning", first_seen_at=now, last_seen_at=now
    )
    viewer.post(reverse("admin:takt_heartbeats_alerts_seen"), {"alert": [alert.pk]})
    alert.refresh_from_db()
    assert not alert.seen


# --- 7. Internal targets -------------------------------------------------------------------


def test_no_job_but_the_built_in_one_may_name_takt_operation_or_a_celery_task() -> None:
    api = SessionClient(user_with(*EDITOR, "takt_jobs.run_celery_tasks"))
    for target in ("takt.operation", "celery.backend_cleanup"):
        response = api.send("post", "/api/v1/jobs", {"name": "x", "target": target})
        assert response.status_code == 400 and "target" in response.json(), response.content
    assert not Job.objects.filter(name="x").exists()


def test_an_operation_acts_for_the_user_who_started_it_not_for_its_params() -> None:
    """A bulk run started by an editor without run_programs starts no
    command job, whatever the run's params say."""
    job = Job.objects.create(name="sh", kind="command", command=["true"])
    user_with(*EDITOR, username="editor")
    user_with(username="admin", superuser=True)
    operation = start_operation("bulk_run", {"jobs": [job.pk]}, by="editor", now=_now())
    assert operation.started_by == "editor" and "by" not in operation.params
    assert execute(operation.pk, worker="test") == RunStatus.FAILED
    assert "Can create, change and run command jobs" in Run.objects.get(pk=operation.pk).message
    assert not Run.objects.filter(job=job).exists()


def _now() -> Any:
    from django.utils import timezone

    return timezone.now()


# --- RUN files -----------------------------------------------------------------------------


def test_a_run_file_starts_no_job_that_needs_a_capability_unless_granted(tmp_path: Path) -> None:
    from runs.watching import handle_run_file

    job = Job.objects.create(name="sh", kind="command", command=["true"])
    path = tmp_path / f"Takt{job.pk}.RUN"
    path.write_text("")
    stat = path.stat()
    with override_settings(TAKT_RUN_FILE_FOLDERS=[str(tmp_path)]):
        assert handle_run_file(str(path), 0, stat.st_mtime_ns, now=_now()) is None
    error = (tmp_path / f"Takt{job.pk}.RUN.error").read_text()
    assert "run_programs" in error and "TAKT_RUN_FILES_MAY_START" in error
    assert not Run.objects.exists()
    with override_settings(
        TAKT_RUN_FILE_FOLDERS=[str(tmp_path)], TAKT_RUN_FILES_MAY_START=["run_programs"]
    ):
        path.write_text("again")
        stat = path.stat()
        assert handle_run_file(str(path), 5, stat.st_mtime_ns, now=_now()) is not None


# --- Low: the job editor and run output ----------------------------------------------------


def test_the_job_editor_shows_run_output_only_to_whom_may_view_runs() -> None:
    job = Job.objects.create(name="j", target="tests.echo")
    run = enqueue_job(job)
    Run.objects.filter(pk=run.pk).update(output="secret output line")
    url = reverse("admin:takt_jobs_job_change", args=[job.pk])
    assert "secret output line" not in admin_as(*EDITOR).get(url).content.decode()
    viewer = admin_as(*EDITOR, "takt_runs.view_run", username="runs")
    assert "secret output line" in viewer.get(url).content.decode()


def test_run_now_of_a_parent_needs_what_its_children_need() -> None:
    """Issue 27, defect 4: a parent starts from the admin, the API and RUN
    files; its run runs its children, so starting it needs their
    capabilities (here a command child's run_programs)."""
    parent = Job.objects.create(name="Nightly", target="takt.children")
    Job.objects.create(name="sh", kind="command", command=["id"], parent=parent)
    run_now = reverse("admin:takt_jobs_job_run_now", args=[parent.pk])

    admin_as(*EDITOR).post(run_now)
    assert not Run.objects.exists()
    admin_as(*EDITOR, "takt_jobs.run_programs", username="ops").post(run_now)
    assert Run.objects.get().job_id == parent.pk
