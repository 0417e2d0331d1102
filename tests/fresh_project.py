"""A Django project of a user's, made fresh by `django-admin startproject`
with Takt's apps installed as docs/embedding.md says (its settings, its
URLs under takt/, a Celery app of the project's own), for the tests that
run a user's code in it: the schema of the API embedded
(tests/integration/test_embedded_api_schema.py) and the example of
docs/testing-your-jobs.md run with pytest there
(tests/integration/test_docs_testing_example.py).

The lighter form of tests/e2e/test_embedded_project.py: this checkout's
virtualenv, this checkout on PYTHONPATH (not Takt's wheel), no worker or
beat. Nothing of Takt's own project or of the shell's settings reaches
the project: its settings module is its own, its Celery broker a port
where nothing answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.processes import ROOT, free_port

# The apps docs/embedding.md tells a project to add.
TAKT_APPS = (
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_ace",
    "simple_history",
    "jobs.apps.JobsConfig",
    "runs.apps.RunsConfig",
    "heartbeats.apps.HeartbeatsConfig",
)


def installed_apps(*before: str, after: tuple[str, ...] = ()) -> str:
    """`INSTALLED_APPS += [...]` for a project's settings: `before`, Takt's
    apps, `after`."""
    return (
        "INSTALLED_APPS += [\n"
        + "".join(f'    "{n}",\n' for n in (*before, *TAKT_APPS, *after))
        + "]\n"
    )


TAKT_SETTINGS = (
    "\n# --- Takt (docs/embedding.md) ---\n"
    + installed_apps()
    + """CELERY_BROKER_URL = "redis://127.0.0.1:{port}/0"   # nothing answers: no test may use it
DATABASES["default"]["OPTIONS"] = {{"transaction_mode": "IMMEDIATE", "timeout": 30}}
"""
)

CELERY = """\
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
app = Celery("mysite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
"""

# Variables of the shell or of Takt's own suite that a user's project does
# not have.
FOREIGN = ("DJANGO_", "EMAIL_", "TAKT_", "CELERY_", "REDIS_", "PYTEST_", "DATABASE_URL")


def project_env() -> dict[str, str]:
    """The environment of the project's processes: this checkout importable,
    none of FOREIGN."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN)}
    env["PYTHONPATH"] = str(ROOT)
    return env


def python(site: Path, *args: str, timeout_s: float = 300) -> str:
    """Run this virtualenv's python with `args` in the project; its output,
    or AssertionError with both streams when it fails."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=site,
        env=project_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def make_project(site: Path) -> Path:
    """`django-admin startproject mysite` in `site` (made), Takt added as
    docs/embedding.md says, `takt/` its URL prefix; returns `site`."""
    site.mkdir(parents=True, exist_ok=True)
    python(site, "-m", "django", "startproject", "mysite", str(site))
    with (site / "mysite" / "settings.py").open("a") as settings:
        settings.write(TAKT_SETTINGS.format(port=free_port()))
    (site / "mysite" / "celery.py").write_text(CELERY)
    (site / "mysite" / "__init__.py").write_text("from .celery import app as celery_app\n")
    urls = site / "mysite" / "urls.py"
    urls.write_text(
        urls.read_text()
        .replace("from django.urls import path", "from django.urls import include, path")
        .replace("urlpatterns = [", 'urlpatterns = [\n    path("takt/", include("jobs.urls")),')
    )
    return site
