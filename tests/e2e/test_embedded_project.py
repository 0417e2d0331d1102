"""Takt inside another Django project, as docs/embedding.md tells a user to
put it there: a project made by `django-admin startproject` with a Celery
app of its own, Takt installed from its wheel into the project's own
virtualenv (not this checkout), its apps in INSTALLED_APPS, its URLs under
a prefix, a job declared with @takt_job in the project's own app, and a
real worker and beat that run it. The project has apps of its own labelled
`jobs` and `runs`, with a `Job` and a `Run` model: Takt's labels
(takt_jobs, takt_runs, takt_heartbeats) and tables do not collide."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest

from tests.processes import ROOT, Proc

pytestmark = pytest.mark.e2e

CELERY = """\
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
app = Celery("mysite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
"""

SETTINGS = """
# --- Takt (docs/embedding.md) ---
import os

INSTALLED_APPS += [
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_ace",
    "jobs.apps.JobsConfig",
    "runs.apps.RunsConfig",
    "heartbeats.apps.HeartbeatsConfig",
    "reports",
    "mysite.jobs",
    "mysite.runs",
]
DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 30}
CELERY_BROKER_URL = os.environ["MYSITE_REDIS"]
TAKT_POLL_SECONDS = 0.2
"""

JOBS = """\
from celery import shared_task

from jobs import takt_job


@takt_job("reports.hello", schedule="* * * * * *")  # every second
def hello(job):
    job.log("hello from the project's own app")
    return 42


@shared_task(name="reports.celery_add")
def celery_add(a, b):
    return a + b
"""


OWN_MODELS = """\
from django.db import models


class {model}(models.Model):
    key = models.CharField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
"""

OWN_ADMIN = """\
from django.contrib import admin

from .models import {model}

admin.site.register({model})
"""


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done.stdout


# builds Takt's wheel and installs it into a new virtualenv: 15 to 30 s alone
@pytest.mark.timeout(300)
def test_takt_runs_a_job_inside_a_project_made_by_startproject(tmp_path, redis_url, live_log_dir):
    dist, venv, site = tmp_path / "dist", tmp_path / "venv", tmp_path / "mysite"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "TAKT_"))}
    env.pop("DATABASE_URL", None)
    env.update(DJANGO_SETTINGS_MODULE="mysite.settings", MYSITE_REDIS=redis_url)

    # Takt's wheel, into a virtualenv of the project's own. Its dependencies
    # come from this checkout's virtualenv (no network here); Takt itself
    # only from the wheel (this checkout is not on the path).
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    run([*build, "-q", "-w", str(dist), str(ROOT)], ROOT, env)
    (wheel,) = dist.glob("takt-*.whl")
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    target = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (target / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target"]
    run([*install, str(target), str(wheel)], tmp_path, env)
    python = str(venv / "bin" / "python")

    fresh = {k: v for k, v in env.items() if k != "DJANGO_SETTINGS_MODULE"}
    site.mkdir()
    run([python, "-m", "django", "startproject", "mysite", str(site)], site, fresh)
    (site / "mysite" / "celery.py").write_text(CELERY)
    (site / "mysite" / "__init__.py").write_text("from .celery import app as celery_app\n")
    with (site / "mysite" / "settings.py").open("a") as settings:
        settings.write(SETTINGS)
    urls = site / "mysite" / "urls.py"
    urls.write_text(
        urls.read_text()
        .replace("from django.urls import path", "from django.urls import include, path")
        .replace("urlpatterns = [", 'urlpatterns = [\n    path("takt/", include("jobs.urls")),')
    )
    (site / "reports").mkdir()
    (site / "reports" / "__init__.py").write_text("")
    (site / "reports" / "takt_jobs.py").write_text(JOBS)
    for app, model in (("jobs", "Job"), ("runs", "Run")):  # the project's own
        (site / "mysite" / app).mkdir()
        (site / "mysite" / app / "__init__.py").write_text("")
        (site / "mysite" / app / "models.py").write_text(OWN_MODELS.format(model=model))
        (site / "mysite" / app / "admin.py").write_text(OWN_ADMIN.format(model=model))
    run([python, "manage.py", "makemigrations", "jobs", "runs", "-v0"], site, env)

    where = run([python, "-c", "import jobs; print(jobs.__file__)"], site, env)
    assert where.startswith(str(target)), where  # the wheel's, not this checkout's
    run([python, "manage.py", "migrate", "-v0"], site, env)
    check = textwrap.dedent(
        """
        from django.conf import settings
        from django.test import Client
        print(settings.TAKT_DEFAULT_TIMEOUT, settings.TAKT_POLL_SECONDS, settings.REDIS_URL)
        client = Client(SERVER_NAME="localhost")
        print(client.get("/takt/api/v1/jobs").status_code, client.get("/takt/metrics").status_code)
        """
    )
    lines = run([python, "manage.py", "shell", "-c", check], site, env).splitlines()
    assert lines[-2] == f"300 0.2 {redis_url}"  # a default, the project's, the broker's Redis
    assert lines[-1] == "401 200"  # the API under the project's prefix keeps its own auth
    both = textwrap.dedent(
        """
        from django.contrib.auth.models import User
        from django.test import Client
        from jobs.models import Job as TaktJob
        from mysite.jobs.models import Job
        Job.objects.create(key="own", name="the project's own job")
        client = Client(SERVER_NAME="localhost")
        client.force_login(User.objects.create_superuser("admin", password="x"))
        for url in ("/admin/jobs/job/", "/admin/takt_jobs/job/", "/admin/runs/run/",
                    "/admin/takt_runs/run/"):
            print(url, client.get(url).status_code)
        print(Job._meta.db_table, TaktJob._meta.db_table, Job.objects.count())
        """
    )
    lines = run([python, "manage.py", "shell", "-v0", "-c", both], site, env).splitlines()
    assert lines == [
        "/admin/jobs/job/ 200",
        "/admin/takt_jobs/job/ 200",
        "/admin/runs/run/ 200",
        "/admin/takt_runs/run/ 200",
        "jobs_job takt_jobs_job 1",
    ]

    worker = Proc(
        "embedded-worker",
        [python, "-m", "celery", "-A", "mysite", "worker", "-Q", "takt", "-c", "1", "-l", "info"],
        env,
        live_log_dir,
        cwd=site,
    )
    beat = Proc(
        "embedded-beat",
        [python, "-m", "celery", "-A", "mysite", "beat", "-S", "runs.beat:TaktScheduler"],
        env,
        live_log_dir,
        cwd=site,
    )
    try:
        count = "from runs.models import Run; print(Run.objects.filter(job__key='reports.hello', status='succeeded').count())"
        deadline = time.monotonic() + 60
        while int(run([python, "manage.py", "shell", "-c", count], site, env).split()[-1]) < 2:
            assert time.monotonic() < deadline, worker.log()[-3000:] + beat.log()[-3000:]
            time.sleep(1)
        output = "from runs.models import Run; r = Run.objects.filter(job__key='reports.hello', status='succeeded').first(); print(r.result, r.output)"
        assert "42 hello from the project's own app" in run(
            [python, "manage.py", "shell", "-c", output], site, env
        )
    finally:
        beat.stop()
        worker.stop()
