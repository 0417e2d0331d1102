"""What a beat loads (issue 16, beat memory): on a fresh installation, with
nothing declared in code, the beat's start-up sync does not import the API's
serializers (Django REST framework and what it pulls in, about 10 MB), and
no module loads the holiday tables before a calendar needs them (about 4 MB).

Measured in a fresh process, as a beat starts: a module once imported by the
test process would hide the difference."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
import django
django.setup()
from scheduler_project.celery import app
from runs.beat import TaktScheduler
from jobs.models import Job
assert Job.objects.filter(key="takt.operations", code_managed=True).exists()
scheduler = TaktScheduler.__new__(TaktScheduler)
scheduler.app = app
scheduler.sync_declared_jobs()
heavy = ("jobs.serializers", "rest_framework.serializers", "requests", "holidays")
print("loaded:", *[name for name in heavy if name in sys.modules])
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAKT_", "DJANGO_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        TAKT_VAR_DIR=str(tmp_path / "var"),
    )
    return env


def test_a_beat_with_nothing_declared_loads_no_serializers_and_no_holidays(tmp_path: Path) -> None:
    env = _env(tmp_path)
    migrate = subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert migrate.returncode == 0, migrate.stderr
    probe = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["loaded:"], probe.stdout
