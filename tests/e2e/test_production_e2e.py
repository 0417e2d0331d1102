"""Production pieces with real processes: gunicorn serving the admin and
its static files (WhiteNoise) with DEBUG off, its log lines JSON, and a
worker's JSON log lines (TAKT_LOG_FORMAT=json, F-107) carrying the run
they belong to."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django.contrib.admin
import pytest

import tests.e2e.logging_jobs  # noqa: F401  (registers tests.log_lines here too)
from jobs.models import Job, Trigger
from runs.models import Run, RunStatus, RunTrigger
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until
from tests.processes import ROOT, Proc, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN_CSS = Path(django.contrib.admin.__file__).parent / "static/admin/css/base.css"


def production_env(live_env: dict[str, str], var_dir: Path) -> dict[str, str]:
    return {
        **live_env,
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "TAKT_VAR_DIR": str(var_dir),
        "TAKT_LOCAL_ENV_FILE": "",
    }


def get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, dict(response.headers), response.read()


def answers(url: str) -> bool:
    try:
        get(url)
    except OSError:
        return False
    return True


def test_gunicorn_serves_the_admin_and_its_static_files_with_debug_off(
    live_env, live_log_dir, tmp_path
):
    env = {**production_env(live_env, tmp_path), "TAKT_LOG_FORMAT": "json"}
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=180,
    )
    port = free_port()
    argv = [sys.executable, "-m", "gunicorn", "-c", "python:scheduler_project.gunicorn_conf"]
    argv += ["scheduler_project.wsgi"]
    argv += ["--bind", f"127.0.0.1:{port}", "--workers", "1"]
    proc = Proc("gunicorn", argv, env, live_log_dir)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(f"{base}/admin/login/"), 30, "gunicorn to answer")

        status, _, page = get(f"{base}/admin/login/")
        assert status == 200
        assert b"csrfmiddlewaretoken" in page and b"/static/admin/css/base.css" in page

        status, headers, css = get(f"{base}/static/admin/css/base.css")
        assert status == 200 and headers["Content-Type"].startswith("text/css")
        assert css == ADMIN_CSS.read_bytes()
        _, headers, _ = get(f"{base}/static/admin/css/base.css", **{"Accept-Encoding": "gzip"})
        assert headers.get("Content-Encoding") == "gzip"  # collectstatic's .gz copy

        status, _, js = get(f"{base}/static/takt/run_live.js")  # Takt's own, from its app
        assert status == 200 and js == (ROOT / "jobs/static/takt/run_live.js").read_bytes()

        with pytest.raises(urllib.error.HTTPError) as missing:
            get(f"{base}/no-such-page/")
        missing.value.close()
        assert missing.value.code == 404  # DEBUG off: no technical page (and a log line)
    finally:
        proc.stop()
    lines = [json.loads(line) for line in proc.log().splitlines()]  # TAKT_LOG_FORMAT=json
    assert {e["logger"] for e in lines} >= {"gunicorn.error"}, lines
    assert not any("Traceback" in e.get("exc_info", "") for e in lines), lines


@contextlib.contextmanager
def celery_with_stderr(
    args: list[str], env: dict[str, str], stderr: Path, ready: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`celery -A scheduler_project <args>` whose stderr (its log lines)
    goes to `stderr` and whose stdout (Celery's start banner) is dropped;
    yields once `ready` is in its stderr, stopped on leaving."""
    argv = [sys.executable, "-m", "celery", "-A", "scheduler_project", *args, "-l", "info"]
    with stderr.open("wb") as err:
        popen = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
        try:
            wait_until(lambda: ready in stderr.read_text(), 30, f"celery {args[0]} to start")
            yield popen
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGTERM)
            popen.wait(timeout=30)


def json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of `path` as a JSON object; fails naming a line that is not."""
    entries = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            entries.append(json.loads(line))
        except ValueError:
            pytest.fail(f"line {number} of {path.name} is not JSON: {line!r}")
    assert all({"time", "level", "logger", "message", "host", "pid"} <= e.keys() for e in entries)
    return entries


WORKER = ["worker", "--pool=prefork", "--concurrency=1", "-Q", "takt"]
WORKER += ["--without-gossip", "--without-mingle"]


def test_json_logs_of_a_worker_carry_the_run(live_env, live_log_dir):
    job = Job.objects.create(name="json logs", target="tests.log_lines")
    env = {
        **live_env,
        "TAKT_LOG_FORMAT": "json",
        "TAKT_LOG_JOB_OUTPUT": "true",  # job.log()'s lines too (off by default)
        "TAKT_JOB_MODULES": "tests.sample_jobs,tests.e2e.logging_jobs",
    }
    stderr = live_log_dir / f"json-worker-{uuid.uuid4().hex[:6]}.stderr"
    name = ["-n", f"json-{uuid.uuid4().hex[:6]}@%h"]
    with celery_with_stderr(WORKER + name, env, stderr, ready="ready."):
        run = enqueue_job(job, trigger=RunTrigger.MANUAL)
        wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, 20, "the run")
    run.refresh_from_db()

    entries = json_lines(stderr)
    assert any(e["message"].endswith("ready.") for e in entries)

    of_run = {e["message"]: e for e in entries if e.get("run_id") == run.pk}
    for message in ("line from job.log", "line from the job's own logger", "line from print"):
        assert message in of_run, sorted(of_run)
    for entry in of_run.values():
        assert (entry["job_id"], entry["trigger"], entry["worker"]) == (
            job.pk,
            "manual",
            run.worker,
        ), entry


def test_json_logs_of_a_beat_name_it(live_env, live_log_dir):
    job = Job.objects.create(name="every second", target="tests.echo")
    Trigger.objects.create(job=job, kind="cron", cron_expression="* * * * * *", timezone="UTC")
    env = {**live_env, "TAKT_LOG_FORMAT": "json", "TAKT_BEAT_NAME": "beat-json"}
    stderr = live_log_dir / f"json-beat-{uuid.uuid4().hex[:6]}.stderr"
    schedule = live_log_dir / f"beat-{uuid.uuid4().hex[:6]}"
    beat = ["beat", "-S", "runs.beat:TaktScheduler", "--pidfile=", "-s", str(schedule)]
    with celery_with_stderr(beat, env, stderr, ready="beat: Starting"):
        wait_until(lambda: "dispatched" in stderr.read_text(), 20, "a dispatch")

    dispatched = [e for e in json_lines(stderr) if e["message"].startswith("dispatched")]
    assert dispatched and all(e.get("beat") == "beat@beat-json" for e in dispatched), dispatched
