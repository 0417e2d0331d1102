"""An installation made before Takt's apps had labels of their own
(jobs, runs, heartbeats) upgrades with `manage.py migrate` and keeps
everything: jobs, triggers with their calendars, runs, heartbeats, the
permissions given to groups and the admin's history.

The old installation is made by the code of the last commit with the old
labels (`git archive`), on the database this suite runs on: a file for
SQLite, a database of its own on the same server for PostgreSQL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from jobs.legacy_labels import LABELS

OLD_LABELS_COMMIT = "e4ccaac"  # the last commit with the apps labelled jobs, runs, heartbeats
# the last migration of each app in that commit
OLD_LAST = {"takt_jobs": "0015", "takt_runs": "0012", "takt_heartbeats": "0003"}

MAKE_OLD_DATA = """
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone
from heartbeats.models import Heartbeat
from jobs.models import HolidayCalendar, Job, Trigger
from runs.models import Run

job = Job.objects.create(key="nightly.report", name="Nightly report", target="tests.echo")
calendar = HolidayCalendar.objects.create(name="Berlin holidays")
trigger = Trigger.objects.create(job=job, kind="cron", cron_expression="0 6 * * *")
trigger.exclude_calendars.add(calendar)
Run.objects.create(job=job, status="succeeded", trigger="manual", output="it ran",
                   scheduled_for=timezone.now(), enqueued_at=timezone.now())
Heartbeat.objects.get_or_create(job=job)
group = Group.objects.create(name="operators")
group.permissions.add(Permission.objects.get(content_type__app_label="jobs", codename="change_job"))
user = User.objects.create_user("olga", password="x")
user.groups.add(group)
LogEntry.objects.log_action(user.pk, ContentType.objects.get_for_model(Job).pk, job.pk,
                            str(job), CHANGE, "renamed")
print("made", job.pk)
"""

CHECK_NEW_DATA = """
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from jobs.models import Job
job = Job.objects.get(key="nightly.report")
trigger = job.triggers.get()
print("calendars", [c.name for c in trigger.exclude_calendars.all()])
print("runs", [(r.status, r.output) for r in job.runs.all()])
print("heartbeat", job.heartbeat.pk is not None)
olga = User.objects.get(username="olga")
print("olga may change jobs", olga.has_perm("takt_jobs.change_job"))
print("history", LogEntry.objects.get().get_edited_object() == job)
"""


@pytest.fixture
def old_code(tmp_path: Path) -> Path:
    root = Path(settings.BASE_DIR)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", OLD_LABELS_COMMIT],
        cwd=root,
        capture_output=True,
        check=False,
    )
    assert archive.returncode == 0, (
        f"this test needs commit {OLD_LABELS_COMMIT} of the repository's history"
        f" (a full clone): {archive.stderr.decode()}"
    )
    where = tmp_path / "old"
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(where, filter="data")
    return where


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    """An empty database of the kind this suite runs on."""
    if connection.vendor != "postgresql":
        yield f"sqlite:///{tmp_path / 'takt.sqlite3'}"
        return
    params = connection.settings_dict
    name = f"takt_labels_{os.getpid()}"
    server = f"host={params['HOST']} port={params['PORT'] or 5432} user={params['USER']}"
    with psycopg.connect(f"{server} dbname=postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    port = params["PORT"] or 5432
    yield f"postgres://{params['USER']}@{params['HOST']}:{port}/{name}"
    with psycopg.connect(f"{server} dbname=postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(code: Path, url: str, tmp_path: Path, *args: str, ok: bool = True) -> str:
    env = {**os.environ, "DATABASE_URL": url, "TAKT_VAR_DIR": str(tmp_path / "var")}
    env["DJANGO_SETTINGS_MODULE"] = (
        "scheduler_project.settings"  # the tree's own (not tests.settings)
    )
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        env=env,
        cwd=code,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (done.returncode == 0) == ok, done.stdout + done.stderr
    return done.stdout


def tables(url: str, code: Path, tmp_path: Path) -> set[str]:
    out = manage(
        code,
        url,
        tmp_path,
        "shell",
        "-c",
        "from django.db import connection; print(*connection.introspection.table_names())",
    )
    return set(out.split())


# migrates two databases from an old release's labels in subprocesses: 20 to 30 s alone
@pytest.mark.timeout(180)
def test_an_installation_with_the_old_labels_upgrades_with_migrate(
    old_code: Path, database_url: str, tmp_path: Path
) -> None:
    new_code = Path(settings.BASE_DIR)
    manage(old_code, database_url, tmp_path, "migrate", "-v0")
    assert "made" in manage(old_code, database_url, tmp_path, "shell", "-c", MAKE_OLD_DATA)
    assert {"jobs_job", "runs_run", "heartbeats_heartbeat"} <= tables(
        database_url, old_code, tmp_path
    )

    check = manage(new_code, database_url, tmp_path, "migrate", "--check", ok=False)
    assert "Takt's app labels to move: jobs → takt_jobs" in check

    out = manage(new_code, database_url, tmp_path, "migrate")

    for old, new in LABELS:
        assert f"Takt's app labels moved: {old} → {new}:" in out
    after = tables(database_url, new_code, tmp_path)
    assert {"takt_jobs_job", "takt_jobs_trigger_exclude_calendars", "takt_runs_run"} <= after
    assert not {t for t in after if t.startswith(("jobs_", "runs_", "heartbeats_"))}
    # what the old code had applied is not applied again under the new
    # labels; only Takt's migrations newer than the old code run (other
    # apps the new code installs, such as django_celery_beat, bring theirs)
    applied = [a for a in re.findall(r"Applying (\w+)\.(\d{4})_", out) if a[0] in OLD_LAST]
    assert applied and all(number > OLD_LAST[label] for label, number in applied), applied
    manage(new_code, database_url, tmp_path, "migrate", "--check")  # nothing left
    assert manage(
        new_code, database_url, tmp_path, "shell", "-v0", "-c", CHECK_NEW_DATA
    ).splitlines() == [
        "calendars ['Berlin holidays']",
        "runs [('succeeded', 'it ran')]",
        "heartbeat True",
        "olga may change jobs True",
        "history True",
    ]
    again = manage(new_code, database_url, tmp_path, "migrate")
    assert "moved" not in again  # once only


# a whole migrate in a subprocess: 5 to 10 s alone, a minute and more on a
# machine loaded four times over
@pytest.mark.timeout(180)
def test_a_fresh_database_has_nothing_to_move(database_url: str, tmp_path: Path) -> None:
    out = manage(Path(settings.BASE_DIR), database_url, tmp_path, "migrate")
    assert "Takt's app labels" not in out
    assert "Applying takt_jobs.0001_initial... OK" in out


def test_an_old_admin_bookmark_leads_to_the_new_address(admin_client) -> None:
    response = admin_client.get("/admin/jobs/job/?q=nightly")
    assert (response.status_code, response["Location"]) == (301, "/admin/takt_jobs/job/?q=nightly")
    response = admin_client.get("/admin/runs/run/12/change/")
    assert response["Location"] == "/admin/takt_runs/run/12/change/"
