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
from datetime import datetime
from itertools import takewhile
from pathlib import Path

import pytest

from tests.fresh_project import CELERY, installed_apps
from tests.processes import ROOT, Proc

pytestmark = pytest.mark.e2e

SETTINGS = (
    "\n# --- Takt (docs/embedding.md) ---\nimport os\n\n"
    + installed_apps(after=("reports", "mysite.jobs", "mysite.runs"))
    + """DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 30}
CELERY_BROKER_URL = os.environ["MYSITE_REDIS"]
TAKT_POLL_SECONDS = 0.2
"""
)

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


def project_env(redis_url: str, settings_module: str) -> dict[str, str]:
    """This process's environment without Django's or Takt's variables:
    a project's own, with its settings module and its broker's address."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "TAKT_"))}
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_SKIP_CHECKS"):
        env.pop(name, None)
    env.update(DJANGO_SETTINGS_MODULE=settings_module, MYSITE_REDIS=redis_url)
    return env


@pytest.fixture(scope="module")
def takt_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """Takt's wheel, in a virtualenv of the project's own (its python, its
    site-packages); built once for this file's tests. Its dependencies come
    from this checkout's virtualenv (no network here); Takt itself only from
    the wheel (this checkout is not on the path)."""
    tmp_path = tmp_path_factory.mktemp("takt-venv")
    dist, venv = tmp_path / "dist", tmp_path / "venv"
    env = {k: v for k, v in project_env("", "").items() if k != "DJANGO_SETTINGS_MODULE"}
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    run([*build, "-q", "-w", str(dist), str(ROOT)], ROOT, env)
    (wheel,) = dist.glob("takt-*.whl")
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    target = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (target / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target"]
    run([*install, str(target), str(wheel)], tmp_path, env)
    return str(venv / "bin" / "python"), target


# The first test of the file builds Takt's wheel and installs it into a new
# virtualenv (takt_venv): 15 to 30 s alone.
@pytest.mark.timeout(300)
def test_takt_runs_a_job_inside_a_project_made_by_startproject(
    tmp_path, redis_url, live_log_dir, takt_venv
):
    python, target = takt_venv
    site = tmp_path / "mysite"
    env = project_env(redis_url, "mysite.settings")

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


# --- Issue 26: a django-celery-beat project switches in one command ----------

GUIDE_CELERY = """\
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")

app = Celery("proj")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.broker_url = os.environ["MYSITE_REDIS"]  # the broker in code, as the guide allows
app.autodiscover_tasks()
"""

GUIDE_SETTINGS = (
    "\n# --- django-celery-beat, then Takt (docs/embedding.md) ---\n"
    + installed_apps("django_celery_beat", after=("reports",))
    + """DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 30}
TAKT_POLL_SECONDS = 0.2
"""
)

# The project's own tasks, found only by its app's autodiscover_tasks().
REPORT_TASKS = """\
from celery import shared_task


@shared_task(name="reports.build")
def build(kind="daily"):
    return f"built {kind}"


@shared_task(name="reports.mail")
def mail(*to):
    return f"mailed {len(to)}"


@shared_task
def cleanup():  # named by Celery: reports.tasks.cleanup
    return "clean"
"""

# PeriodicTasks made through django-celery-beat's own models: four that can
# switch (two intervals, a Berlin crontab, a clocked one-off) and three that
# cannot (an unregistered task, a solar schedule, arguments that are not
# JSON), one already disabled, and django-celery-beat's own cleanup.
PERIODIC_TASKS = """
import json
from datetime import timedelta
from django.utils import timezone
from django_celery_beat.models import (
    ClockedSchedule, CrontabSchedule, IntervalSchedule, PeriodicTask, SolarSchedule)

every2 = IntervalSchedule.objects.create(every=2, period="seconds")
every3 = IntervalSchedule.objects.create(every=3, period="seconds")
berlin = CrontabSchedule.objects.create(minute="*/15", timezone="Europe/Berlin")
nightly = CrontabSchedule.objects.create(minute="0", hour="4")
clocked = ClockedSchedule.objects.create(clocked_time=timezone.now() + timedelta(seconds=40))
sunrise = SolarSchedule.objects.create(event="sunrise", latitude=52.5, longitude=13.4)
make = PeriodicTask.objects.create
make(name="build every 2 s", task="reports.build", interval=every2, kwargs=json.dumps({"kind": "hourly"}))
make(name="mail every 3 s", task="reports.mail", interval=every3, args=json.dumps(["a@x.org", "b@x.org"]))
make(name="cleanup in Berlin", task="reports.tasks.cleanup", crontab=berlin)
make(name="build once", task="reports.build", clocked=clocked, one_off=True)
make(name="not here", task="reports.gone", interval=every2)
make(name="at sunrise", task="reports.build", solar=sunrise)
make(name="odd kwargs", task="reports.build", interval=every3, kwargs="{kind: hourly}")
make(name="switched off", task="reports.build", interval=every3, enabled=False)
make(name="celery.backend_cleanup", task="celery.backend_cleanup", crontab=nightly)
print(clocked.clocked_time.isoformat())
"""

SOURCE_STATES = """
from django_celery_beat.models import PeriodicTask
for task in PeriodicTask.objects.order_by("name"):
    print(f"{task.name}={task.enabled}")
"""

TAKT_JOBS = """
from jobs.models import Job
for job in Job.objects.exclude(key__startswith="takt.").order_by("name"):
    print(f"{job.name}={job.enabled}")
"""

RUNS = """
from runs.models import Run
for run in Run.objects.filter(job__name__in=["build every 2 s", "mail every 3 s", "build once"]
                              ).order_by("job__name", "scheduled_for"):
    late = (run.started_at - run.scheduled_for).total_seconds() if run.started_at else ""
    print(run.job.name, run.status, run.scheduled_for.isoformat(), late, run.result, sep="|")
"""

HOST_APP = """
import os
from celery import current_app
from django.conf import settings
from jobs import registry
print(current_app.main, os.environ.get("CELERY_SKIP_CHECKS"), settings.REDIS_URL)
print(registry.is_known("reports.mail"), registry.is_known("reports.tasks.cleanup"))
"""


def shell(python: str, code: str, site: Path, env: dict[str, str]) -> list[str]:
    return run([python, "manage.py", "shell", "-v0", "-c", code], site, env).splitlines()


@pytest.mark.timeout(300)
def test_a_celery_guide_project_switches_from_django_celery_beat_in_one_command(
    tmp_path, redis_url, live_log_dir, takt_venv
):
    """Issue 26's trial, from the docs: Celery's "First steps with Django"
    layout (proj/celery.py with autodiscover_tasks and the broker set in
    code, the project's tasks in reports/tasks.py), PeriodicTasks made with
    django-celery-beat's models, then `import_celery_beat --disable-source
    --continue-on-error` and Takt's beat and a worker started as
    docs/embedding.md says (-Q takt). Every switchable task runs on its
    grid through them; the ones that cannot switch stay enabled in
    django-celery-beat, named in the summary."""
    python, _ = takt_venv
    site = tmp_path / "proj"
    env = project_env(redis_url, "proj.settings")
    fresh = {k: v for k, v in env.items() if k != "DJANGO_SETTINGS_MODULE"}
    site.mkdir()
    run([python, "-m", "django", "startproject", "proj", str(site)], site, fresh)
    (site / "proj" / "celery.py").write_text(GUIDE_CELERY)
    (site / "proj" / "__init__.py").write_text(
        "from .celery import app as celery_app\n\n__all__ = ('celery_app',)\n"
    )
    with (site / "proj" / "settings.py").open("a") as settings:
        settings.write(GUIDE_SETTINGS)
    (site / "reports").mkdir()
    (site / "reports" / "__init__.py").write_text("")
    (site / "reports" / "tasks.py").write_text(REPORT_TASKS)
    run([python, "manage.py", "migrate", "-v0"], site, env)

    # The project's app is Takt's, with its broker from code; Takt sets no
    # Celery variable of its own; the project's tasks are known in a command.
    app, known = shell(python, HOST_APP, site, env)[-2:]
    assert app == f"proj None {redis_url}"
    assert known == "True True"

    clocked_at = shell(python, PERIODIC_TASKS, site, env)[-1]
    command = [python, "manage.py", "import_celery_beat", "--disable-source", "--continue-on-error"]
    done = subprocess.run(command, cwd=site, env=env, capture_output=True, text=True, timeout=120)
    report = done.stdout + done.stderr
    print(report)  # the trial's output (pytest -s shows it)
    assert done.returncode == 3, report  # some could not be imported: named, exit 3
    for task in ("reports.build", "reports.mail", "reports.tasks.cleanup"):
        assert f"{task!r} is not registered" not in report, report
    # the summary at the end names what stays in django-celery-beat, and why
    tail = report[report.rindex("SUMMARY") :]
    assert "4 switched" in tail.splitlines()[0], tail
    left = tail[tail.index("LEFT ENABLED") : tail.index("skipped: 1")]
    for name, why in (
        ("not here", "'reports.gone' is not registered in this project"),
        ("at sunrise", "solar"),
        ("odd kwargs", "kwargs"),
    ):
        assert f"'{name}' " in left and why in left, tail
    assert "'celery.backend_cleanup'" in tail[tail.index("skipped: 1") :], tail

    assert shell(python, SOURCE_STATES, site, env) == [
        "at sunrise=True",  # cannot switch: stays running in django-celery-beat
        "build every 2 s=False",
        "build once=False",
        "celery.backend_cleanup=True",
        "cleanup in Berlin=False",
        "mail every 3 s=False",
        "not here=True",
        "odd kwargs=True",
        "switched off=False",
    ], report
    jobs = dict(line.split("=") for line in shell(python, TAKT_JOBS, site, env))
    assert {k: jobs.get(k) for k in ("build every 2 s", "mail every 3 s", "build once")} == {
        "build every 2 s": "True",
        "mail every 3 s": "True",
        "build once": "True",
    }, jobs
    assert jobs.get("cleanup in Berlin") == "True", jobs
    assert jobs.get("not here") in (None, "False"), jobs

    worker = Proc(
        "guide-worker",
        [python, "-m", "celery", "-A", "proj", "worker", "-Q", "takt", "-c", "2", "-l", "info"],
        env,
        live_log_dir,
        cwd=site,
    )
    beat = None
    try:
        worker.wait_for(" ready.", timeout=60)
        beat = Proc(
            "guide-beat",
            [python, "-m", "celery", "-A", "proj", "beat", "-S", "runs.beat:TaktScheduler"],
            env,
            live_log_dir,
            cwd=site,
        )
        deadline = time.monotonic() + 120
        while True:
            rows = [line.split("|") for line in shell(python, RUNS, site, env)]
            ended = {
                name: [r for r in rows if r[0] == name and r[1] == "succeeded"]
                for name in ("build every 2 s", "mail every 3 s", "build once")
            }
            wanted = {"build every 2 s": 4, "mail every 3 s": 3, "build once": 1}
            if all(len(ended[name]) >= n for name, n in wanted.items()):
                break
            assert time.monotonic() < deadline, (
                "awaited 4 runs of 'build every 2 s', 3 of 'mail every 3 s' and the clocked"
                f" one, all succeeded:\n{rows}\n{worker.log()[-3000:]}\n{beat.log()[-3000:]}"
            )
            time.sleep(1)
    finally:
        if beat is not None:
            beat.stop()
        worker.stop()

    for name, every in (("build every 2 s", 2), ("mail every 3 s", 3)):
        mine = [r for r in rows if r[0] == name]
        times = [datetime.fromisoformat(r[2]) for r in mine]
        # on its grid, one run per fire time from the first on, none early,
        # none skipped (the runs still going end the list)
        steps = {(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)}
        assert steps == {every}, mine
        # each fire time ran, or was recorded skipped by the overlap policy
        # (a run not yet taken when the next was due); the runs still going
        # end the list
        statuses = [r[1] for r in mine]
        ended_ = len(list(takewhile(lambda status: status in ("succeeded", "skipped"), statuses)))
        assert set(statuses[ended_:]) <= {"queued", "running"}, mine
        assert all(float(r[3]) >= 0 for r in mine if r[3]), mine
    assert ended["build every 2 s"][0][4] == "built hourly"
    assert ended["mail every 3 s"][0][4] == "mailed 2"
    (once,) = [r for r in rows if r[0] == "build once"]
    assert datetime.fromisoformat(once[2]) == datetime.fromisoformat(clocked_at), once
