"""What a beat loads (issue 16, beat memory): on a fresh installation, with
nothing declared in code, the beat's start-up sync does not import the API's
serializers (Django REST framework and what it pulls in, about 10 MB), and
no module loads the holiday tables before a calendar needs them (about 4 MB).

Measured in a fresh process, as a beat starts: a module once imported by the
test process would hide the difference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.processes import ROOT, clean_env

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


def test_a_beat_with_nothing_declared_loads_no_serializers_and_no_holidays(tmp_path: Path) -> None:
    env = clean_env(
        tmp_path / "var",
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    for args in (["manage.py", "migrate", "-v0"], ["-c", PROBE]):
        done = subprocess.run(
            [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["loaded:"], done.stdout
