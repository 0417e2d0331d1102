"""Script jobs (F-02 `script`, issue 14) against the real database and
Redis, with real processes: off unless TAKT_SCRIPTS_ENABLED (refused with
the message, nothing stored; a stored one's run fails without running);
a script's job.log lines and job.params in its run's output, job.fail and
an uncaught exception failing it, its timeout killing it, its temporary
files gone; only users with write_scripts create, change, delete or run script jobs in
the admin, the API and imports; every change of a script in the audit
table with who and the diff."""

from __future__ import annotations

import json
import re
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse

from jobs.audit import history_of
from jobs.history import entries_for
from jobs.models import Job
from runs.context import JobContext, JobFailed
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.operation_kinds import import_jobs as import_operation
from runs.operations import operations_job
from runs.services import create_run
from tests.integration.api_helpers import SessionClient, user_with
from tests.integration.conftest import SECOND, clock, job_form_fields, utc
from tests.integration.test_command_jobs import soft_time_limit

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
ON = override_settings(TAKT_SCRIPTS_ENABLED=True)
REPORT = 'job.log(f"report for {job.params[\'week\']} ({job.trigger})")\njob.log("sent")\n'
JOB_PERMS = (
    "takt_jobs.view_job",
    "takt_jobs.add_job",
    "takt_jobs.change_job",
    "takt_jobs.delete_job",
)


def script_job(script: str = REPORT, **fields) -> Job:
    job = Job(name="weekly report", kind="script", script=script, **fields)
    job.full_clean()
    job.save()
    return job


def script_history() -> list:
    """The audit trail's rows of script jobs (F-120), in writing order."""
    return list(history_of(Job).objects.filter(kind="script").order_by("history_id"))


def stored_script_job(script: str = REPORT, **fields) -> Job:
    """A script job saved without validation (as if stored while scripts were on)."""
    return Job.objects.create(name="weekly report", kind="script", script=script, **fields)


def run_job(job: Job, **run_fields) -> Run:
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0, **run_fields)
    execute(run.pk, worker="test", clock=clock(T0 + SECOND, T0 + 2 * SECOND))
    run.refresh_from_db()
    return run


def leftovers(run: Run) -> list[Path]:
    import tempfile

    return list(Path(tempfile.gettempdir()).glob(f"takt-script-{run.pk}-*"))


# --- off by default ---------------------------------------------------------------


def test_scripts_are_off_by_default_a_script_job_is_refused_naming_kind():
    with pytest.raises(ValidationError) as caught:
        Job(name="weekly report", kind="script", script=REPORT).full_clean()

    (message,) = caught.value.message_dict["kind"]
    assert message.startswith("script jobs are off on this installation")
    assert "set TAKT_SCRIPTS_ENABLED=true" in message
    assert not Job.objects.filter(kind="script").exists()


def test_scripts_off_the_api_refuses_even_a_superuser_and_stores_nothing():
    root = SessionClient(user_with(username="root", superuser=True))

    response = root.send("post", "/api/v1/jobs", {"name": "r", "kind": "script", "script": REPORT})

    assert response.status_code == 400
    assert "TAKT_SCRIPTS_ENABLED=true" in response.json()["kind"][0]
    assert not Job.objects.filter(kind="script").exists() and not script_history()


def test_scripts_off_a_stored_script_jobs_run_fails_and_runs_nothing(redis_client, tmp_path):
    marker = tmp_path / "ran"
    job = stored_script_job(f"open({str(marker)!r}, 'w').close()\n")

    run = run_job(job)

    assert (run.status, run.result_code) == (RunStatus.FAILED, -1001)
    assert run.message.startswith("the script was not run: script jobs are off")
    assert not marker.exists() and run.output == ""


# --- running ------------------------------------------------------------------------


@ON
def test_a_scripts_job_log_lines_and_params_are_in_the_run_output(redis_client):
    job = script_job(params={"week": "2026-W23"})

    run = run_job(job)

    assert (run.status, run.result_code, run.message) == (RunStatus.SUCCEEDED, 0, "")
    first, *rest = run.output.splitlines()
    assert re.fullmatch(rf"script of job #{job.pk} started  \(pid \d+\)", first)
    assert rest == ["report for 2026-W23 (manual)", "sent"]
    assert not leftovers(run)


@ON
def test_a_script_sees_the_same_job_as_a_callable(redis_client):
    job = script_job(
        "job.log(job.name)\njob.log(job.description)\njob.log(job.run_id)\n"
        "job.log(job.job_id)\njob.log(sorted(job.params.items()))\nprint('plain print')\n",
        description="Mondays at seven",
        params={"a": 1, "b": [2]},
    )

    run = run_job(job)

    assert run.output.splitlines()[1:] == [
        "weekly report",
        "Mondays at seven",
        str(run.pk),
        str(job.pk),
        "[('a', 1), ('b', [2])]",
        "plain print",
    ]


@ON
def test_job_fail_ends_the_run_failed_with_its_message(redis_client):
    run = run_job(script_job('job.log("checking")\njob.fail("no data for the week")\njob.log("x")'))

    assert (run.status, run.message, run.result_code) == (
        RunStatus.FAILED,
        "no data for the week",
        1,
    )
    assert run.output.splitlines()[1:] == ["checking"]
    assert not leftovers(run)


@ON
def test_an_uncaught_exception_fails_the_run_with_its_traceback_in_the_output(redis_client):
    run = run_job(script_job('job.log("dividing")\ntotal = 1 / 0\n'))

    assert (run.status, run.message) == (RunStatus.FAILED, "ZeroDivisionError: division by zero")
    lines = run.output.splitlines()[1:]
    assert lines[0] == "dividing"
    assert "[stderr] Traceback (most recent call last):" in lines
    assert '[stderr]   File "<script>", line 2, in <module>' in lines
    assert "[stderr]     total = 1 / 0" in lines
    assert lines[-1] == "[stderr] ZeroDivisionError: division by zero"


@ON
def test_another_exit_code_fails_the_run_and_is_its_result_code(redis_client):
    run = run_job(script_job("import sys\nsys.exit(3)\n"))

    assert (run.status, run.result_code, run.message) == (
        RunStatus.FAILED,
        3,
        "the script exited with code 3",
    )


@pytest.mark.django_db(transaction=True)  # the autosave writes on its own connection
@override_settings(TAKT_SCRIPTS_ENABLED=True, TAKT_COMMAND_KILL_GRACE_SECONDS=1)
def test_the_timeout_kills_the_script(redis_client, tmp_path):
    pid_file = tmp_path / "pid"
    job = script_job(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        'job.log("working")\ntime.sleep(60)\n',
        timeout_s=1,
    )
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)

    started = time.monotonic()
    with soft_time_limit(1.0):
        status = execute(run.pk, worker="test", clock=clock(T0 + SECOND, T0 + 2 * SECOND))
    elapsed = time.monotonic() - started

    run.refresh_from_db()
    assert (status, run.result_code) == (RunStatus.TIMED_OUT, -1002)
    assert elapsed < 5
    assert "working" in run.output.splitlines()
    from tests.processes import alive

    assert not alive(int(pid_file.read_text()))
    assert not leftovers(run)


@ON
def test_a_script_that_does_not_compile_is_refused_naming_script_and_nothing_is_stored():
    with pytest.raises(ValidationError) as caught:
        Job(name="broken", kind="script", script='job.log("a")\nif x\n').full_clean()

    assert caught.value.message_dict["script"] == [
        "line 2, column 5: expected ':': `if x`",
    ]
    assert not Job.objects.filter(kind="script").exists()


# --- the admin ---------------------------------------------------------------------


def job_form(job: Job, **changes) -> dict:
    data = {
        **job_form_fields(job),
        "script": job.script,
        "triggers-TOTAL_FORMS": 0,
        "triggers-INITIAL_FORMS": 0,
        "triggers-MIN_NUM_FORMS": 0,
        "triggers-MAX_NUM_FORMS": 1000,
    }
    data.update(changes)
    return data


def operator_client() -> Client:
    client = Client()
    client.force_login(user_with(*JOB_PERMS, "takt_runs.view_run", username="operator"))
    return client


def root_client() -> Client:
    client = Client()
    client.force_login(user_with(username="root", superuser=True))
    return client


ADD = reverse("admin:takt_jobs_job_add")


@ON
def test_admin_a_non_superuser_cannot_add_change_run_or_check_a_script_job(redis_client):
    operator = operator_client()
    page = operator.get(ADD)
    kinds = [value for value, _ in page.context["adminform"].form.fields["kind"].choices]
    assert "script" not in kinds and "callable" in kinds
    assert 'name="script"' not in page.content.decode()

    refused = operator.post(ADD, job_form(Job(name="mine", kind="script", script=REPORT)))
    assert "kind" in refused.context["adminform"].form.errors
    assert not Job.objects.filter(name="mine").exists()

    job = script_job()
    change = reverse("admin:takt_jobs_job_change", args=[job.pk])
    assert not operator.get(change).context["has_change_permission"]  # shown read-only
    assert operator.post(change, job_form(job, script="job.log(1)")).status_code == 403
    job.refresh_from_db()
    assert job.script == REPORT

    done = operator.post(reverse("admin:takt_jobs_job_run_now", args=[job.pk]), follow=True)
    assert (
        f"Nothing was started: weekly report (#{job.pk}): kind: this needs the permission"
        " “Can create, change and run script jobs”"
    ) in done.content.decode()
    listed = operator.post(
        reverse("admin:takt_jobs_job_changelist"),
        {"action": "run_now", "_selected_action": [job.pk]},
        follow=True,
    )
    assert "Nothing was started" in listed.content.decode()
    assert not Run.objects.exists()

    check = operator.post(reverse("admin:takt_jobs_job_check_script"), {"script": "x = 1"})
    assert check.status_code == 403
    assert (
        operator.post(
            reverse("admin:takt_jobs_job_delete", args=[job.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert Job.objects.filter(pk=job.pk).exists()
    assert [r.history_type for r in script_history()] == ["+"]


@ON
def test_admin_a_superuser_adds_changes_and_deletes_a_script_job_each_audited(redis_client):
    root = root_client()
    page = root.get(ADD)
    assert "script" in [v for v, _ in page.context["adminform"].form.fields["kind"].choices]

    added = root.post(ADD, job_form(Job(name="weekly report", kind="script", script=REPORT)))
    assert added.status_code == 302, added.context["adminform"].form.errors
    job = Job.objects.get(name="weekly report")
    change = reverse("admin:takt_jobs_job_change", args=[job.pk])
    edited = REPORT.replace('"sent"', '"mailed"')
    assert root.post(change, job_form(job, script=edited)).status_code == 302
    root.post(reverse("admin:takt_jobs_job_delete", args=[job.pk]), {"post": "yes"})

    created, changed, deleted = script_history()
    assert [r.history_type for r in (created, changed, deleted)] == ["+", "~", "-"]
    assert {(r.audit_source, r.audit_by) for r in (created, changed, deleted)} == {
        ("admin", "root")
    }
    assert (created.script, changed.script, deleted.script) == (REPORT, edited, edited)
    (entry,) = [e for e in entries_for(Job, job.pk) if e.action == "change"]
    (script,) = [c for c in entry.changes if c.field == "script"]
    assert script.diff.splitlines() == [
        f"--- job #{job.pk} (before)",
        f"+++ job #{job.pk} (after)",
        "@@ -1,2 +1,2 @@",
        " job.log(f\"report for {job.params['week']} ({job.trigger})\")",
        '-job.log("sent")',
        '+job.log("mailed")',
    ]


@ON
def test_admin_check_compiles_without_running_and_names_the_line(redis_client, tmp_path):
    root = root_client()
    url = reverse("admin:takt_jobs_job_check_script")
    marker = tmp_path / "ran"

    good = root.post(url, {"script": f"open({str(marker)!r}, 'w').close()"}).json()
    bad = root.post(url, {"script": "job.log('a')\nx = (1,\n"}).json()

    assert good == {"ok": True, "message": "compiles"} and not marker.exists()
    assert bad == {
        "ok": False,
        "message": "line 2, column 5: '(' was never closed: `x = (1,`",
        "line": 2,
        "column": 5,
    }


@ON
def test_admin_the_script_editor_is_ace_from_the_package_with_check_and_run_now(redis_client):
    job = script_job()
    html = root_client().get(reverse("admin:takt_jobs_job_change", args=[job.pk])).content.decode()

    assert (
        "/static/django_ace/ace/ace.js" in html and "/static/django_ace/ace/mode-python.js" in html
    )
    assert 'class="button takt-script-check"' in html
    assert f'formaction="{reverse("admin:takt_jobs_job_run_now", args=[job.pk])}"' in html


# --- the API -------------------------------------------------------------------------


@ON
def test_api_a_non_superuser_is_refused_creating_changing_running_deleting_a_script_job(
    redis_client,
):
    operator = SessionClient(user_with(*JOB_PERMS, username="operator"))
    body = {"name": "r", "kind": "script", "script": REPORT}

    created = operator.send("post", "/api/v1/jobs", body)
    assert created.status_code == 403
    assert created.json()["kind"] == [
        "only users with the permission “Can create, change and run script jobs” may create,"
        " change, delete or run script jobs"
    ]
    assert not Job.objects.filter(name="r").exists()

    job = script_job(api_trigger_permission="authenticated")
    other = Job.objects.create(name="plain", target="tests.echo")
    assert operator.send("patch", f"/api/v1/jobs/{job.pk}", {"script": "x = 1"}).status_code == 403
    assert (
        operator.send("patch", f"/api/v1/jobs/{other.pk}", {"kind": "script", "script": "x = 1"})
    ).status_code == 403
    assert operator.send("post", f"/api/v1/jobs/{job.pk}/run", {}).status_code == 403
    # Enabling, disabling and pausing stay an operator's: when it runs, not what.
    assert operator.send("patch", f"/api/v1/jobs/{job.pk}", {"enabled": False}).status_code == 200
    assert operator.send("delete", f"/api/v1/jobs/{job.pk}").status_code == 403
    job.refresh_from_db()
    assert job.script == REPORT and not Run.objects.exists()
    # Switching it off is allowed; the script neither changed nor was deleted.
    assert [(r.history_type, r.script) for r in script_history()] == [
        ("+", REPORT),
        ("~", REPORT),
    ]


@ON
def test_api_a_superuser_creates_edits_runs_and_deletes_a_script_job_each_audited(redis_client):
    root = SessionClient(user_with(username="root", superuser=True))

    created = root.send(
        "post",
        "/api/v1/jobs",
        {
            "name": "r",
            "kind": "script",
            "script": REPORT,
            "api_trigger_permission": "authenticated",
        },
    )
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    assert root.send("patch", f"/api/v1/jobs/{pk}", {"script": "job.log(2)\n"}).status_code == 200
    assert root.send("post", f"/api/v1/jobs/{pk}/run", {}).status_code == 201
    assert root.send("delete", f"/api/v1/jobs/{pk}").status_code == 204

    records = script_history()
    assert [(r.history_type, r.audit_source, r.audit_by) for r in records] == [
        ("+", "api", "root (API)"),
        ("~", "api", "root (API)"),
        ("-", "api", "root (API)"),
    ]
    (script,) = [c for c in entries_for(Job, pk)[1].changes if c.field == "script"]
    assert '-job.log("sent")\n+job.log(2)' in script.diff


@ON
def test_api_a_broken_script_is_refused_naming_script():
    root = SessionClient(user_with(username="root", superuser=True))

    response = root.send("post", "/api/v1/jobs", {"name": "r", "kind": "script", "script": "if x"})

    assert response.status_code == 400
    assert response.json()["script"] == ["line 1, column 5: expected ':': `if x`"]
    assert not Job.objects.filter(kind="script").exists()


# --- importing -----------------------------------------------------------------------

IMPORT_URL = reverse("admin:takt_jobs_job_import")
FILE = json.dumps([{"key": "reports.weekly", "name": "Weekly", "kind": "script", "script": REPORT}])


@ON
def test_import_page_a_non_superuser_is_refused_and_nothing_is_stored():
    operator = operator_client()

    page = operator.post(IMPORT_URL, {"text": FILE, "format": "json", "check": "Check"})

    (problem,) = page.context["check"].problems
    assert problem == (
        "job 1 (key 'reports.weekly', name 'Weekly'): kind: only users with the permission"
        " “Can create, change and run script jobs” may create, change, delete or run script"
        " jobs: this import was started by a user who may not write scripts"
    )
    assert 'name="import"' not in page.content.decode()
    assert not Job.objects.filter(kind="script").exists()


@ON
def test_import_page_a_superuser_gets_the_plan():
    page = root_client().post(IMPORT_URL, {"text": FILE, "format": "json", "check": "Check"})

    assert page.context["check"].ok
    assert page.context["plan"].splitlines()[0] == (
        "create     job 1 (key 'reports.weekly', name 'Weekly')"
    )


@ON
def test_the_import_operation_checks_who_started_it_now():
    user_with(*JOB_PERMS, username="operator")
    user_with(username="root", superuser=True)
    params = {"text": FILE, "format": "json", "source": "weekly.json"}

    def operation(by: str) -> JobContext:
        # Who started it is the run's started_by, never its params.
        run = Run.objects.create(
            job=operations_job(), trigger="manual", status="running", enqueued_at=utc(2026, 1, 1),
            scheduled_for=utc(2026, 1, 1), started_by=by,
        )  # fmt: skip
        return JobContext(
            name="ops", description="", trigger="manual", params={}, run_id=run.pk, job_id=1
        )

    with pytest.raises(JobFailed, match="may not write scripts"):
        import_operation(operation("operator"), {**params, "by": "root"})
    assert not Job.objects.filter(kind="script").exists()

    by_root = operation("root")
    import_operation(by_root, params)
    job = Job.objects.get(key="reports.weekly")
    (record,) = script_history()
    assert (record.history_type, record.audit_source, record.audit_by, record.id) == (
        "+",
        "admin",
        f"root (import, run #{by_root.run_id})",
        job.pk,
    )


@ON
def test_an_unchanged_script_job_in_a_file_does_not_stop_a_non_superusers_import(tmp_path):
    path = tmp_path / "weekly.json"
    path.write_text(FILE)
    call_command("import_jobs", str(path), stdout=StringIO(), stderr=StringIO())
    nightly = {"key": "nightly", "name": "Nightly", "target": "tests.echo"}
    text = json.dumps([*json.loads(FILE), nightly])

    page = operator_client().post(IMPORT_URL, {"text": text, "format": "json", "check": "Check"})

    assert page.context["check"].ok, page.context["check"].problems
    assert page.context["plan"].splitlines()[:2] == [
        "unchanged  job 1 (key 'reports.weekly', name 'Weekly')",
        "create     job 2 (key 'nightly', name 'Nightly')",
    ]


@ON
def test_manage_py_import_jobs_takes_scripts_as_the_shell_has_access(monkeypatch, tmp_path):
    path = tmp_path / "weekly.json"
    path.write_text(FILE)
    monkeypatch.setattr("getpass.getuser", lambda: "deploy")

    call_command("import_jobs", str(path), stdout=StringIO(), stderr=StringIO())

    job = Job.objects.get(key="reports.weekly")
    assert (job.kind, job.script) == ("script", REPORT)
    (record,) = script_history()
    assert (record.history_type, record.audit_source, record.audit_by) == (
        "+",
        "command",
        "manage.py import_jobs (deploy)",
    )


def test_the_built_in_operations_job_cannot_be_started_through_the_api():
    """Its runs carry who started them (the admin's long operations check
    that user's rights, such as writing scripts): a run from outside could
    claim to be anyone."""
    from runs.operations import operations_job
    from tests.integration.api_helpers import SessionClient, user_with

    job = operations_job()
    client = SessionClient(user_with("takt_jobs.view_job", "takt_jobs.change_job"))
    body = {"params": {"operation": "import_jobs", "text": "[]", "format": "json", "by": "admin"}}
    response = client.send("post", f"/api/v1/jobs/{job.pk}/run", body)
    assert response.status_code == 403
    assert "runs only when Takt starts it" in str(response.json())
    assert not job.runs.exists()
