"""The API over HTTP against a real web server and worker: the curl
examples of docs/api.md, run as written, and a job started from "another
installation" with a job-scoped token, executed by the worker."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import pytest
from django.contrib.auth.models import User

from jobs.models import Job
from runs.models import Run, RunStatus
from tests.e2e.conftest import wait_until
from tests.integration.api_helpers import make_token
from tests.processes import ROOT, Proc

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed"),
]

DOC = (ROOT / "docs" / "api.md").read_text()


def doc_block(marker: str) -> str:
    """The ```bash block that follows `<!-- marker -->` in docs/api.md."""
    match = re.search(rf"<!-- {marker} -->\s*```bash\n(.*?)```", DOC, re.S)
    assert match, f"docs/api.md has no {marker} block"
    return match.group(1)


def run_bash(script: str, *, stdin: str = "", cwd: Any, **env: str) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", **env},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_session_example_works_as_written(web: str, tmp_path: Any) -> None:
    User.objects.create_superuser("admin", password="s3cret-pw")
    job = Job.objects.create(name="Hello world", target="tests.echo")
    script = doc_block("session-example").replace("/api/v1/jobs/1", f"/api/v1/jobs/{job.pk}")
    out = run_bash(script, stdin="s3cret-pw\n", cwd=tmp_path, TAKT_URL=web)
    queue_line, patch_line = [line for line in out.splitlines() if line.startswith("{")]
    queue = json.loads(queue_line)
    assert {
        "next_scheduled",
        "scheduler_enabled",
        "paused",
        "maintenance",
        "max_concurrency",
        "active_count",
        "queued_count",
    } <= set(queue)
    assert json.loads(patch_line)["enabled"] is False
    assert not Job.objects.get(pk=job.pk).enabled
    # Without the header the same write is refused.
    refused = run_bash(
        "curl -s -b cookies.txt -H 'Content-Type: application/json' -X PATCH"
        f" -d '{{\"enabled\": true}}' {web}/api/v1/jobs/{job.pk}",
        cwd=tmp_path,
    )
    assert "CSRF" in refused
    assert not Job.objects.get(pk=job.pk).enabled


def test_another_installation_starts_a_job_with_its_token(
    web: str, worker: Proc, tmp_path: Any
) -> None:
    job = Job.objects.create(
        name="export",
        target="tests.echo",
        api_trigger_permission="token",
        params={"full": False},
        caller_params=["full"],  # what the docs' caller sends
    )
    token = make_token(job=job, name="installation B")
    script = doc_block("token-example")
    env = {"TAKT_URL": web, "TAKT_JOB_TOKEN": token, "TAKT_JOB_ID": str(job.pk)}
    first = json.loads(run_bash(script, cwd=tmp_path, **env))
    assert first["status"] == "queued" and first["params"] == {"full": True}
    again = json.loads(run_bash(script, cwd=tmp_path, **env))  # same Idempotency-Key
    assert again["id"] == first["id"]
    run = Run.objects.get(pk=first["id"])
    wait_until(
        lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, 20, "the run succeeds"
    )
    followed = json.loads(
        run_bash(
            f'curl -s -H "Authorization: Bearer {token}" {web}/api/v1/runs/{run.pk}', cwd=tmp_path
        )
    )
    assert followed["status"] == "succeeded" and "hello from export" in followed["output"]
    assert Run.objects.filter(job=job).count() == 1
