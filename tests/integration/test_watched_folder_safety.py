"""Least privilege for watched folders (issue 25, finding 9 and the low
ones): a watched folder is written by others and the watcher may run as
root, so what is planted there must not make it write, move or read a file
elsewhere; a trigger's folder must lie inside TAKT_WATCH_ROOTS (by default:
no system folder); a file name with control characters reaches the logs and
the decision log escaped. Real database, Redis and file system; the
watcher is driven step by step with an injected clock."""

from __future__ import annotations

import logging
import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import override_settings

from jobs.models import Job, Trigger
from runs.decisions import Decision, query, record
from runs.models import Run
from runs.watching import Watcher
from tests.integration.api_helpers import SessionClient, user_with
from tests.integration.conftest import make_job
from tests.integration.test_file_triggers import Clock, file_trigger, settle

pytestmark = pytest.mark.django_db

ESC = "\x1b"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def watcher(redis_client, clock):
    made = Watcher(name="safety", clock=clock)
    yield made
    made.release_all()


@pytest.fixture
def run_folder(tmp_path):
    folder = tmp_path / "requests"
    folder.mkdir()
    with override_settings(TAKT_RUN_FILE_FOLDERS=[str(folder)], TAKT_RUN_FILE_DONE_FOLDER=""):
        yield folder


@pytest.fixture
def victim(tmp_path) -> Path:
    """A file outside the watched folders that the watcher must not touch."""
    path = tmp_path / "victim.txt"
    path.write_text("precious\n")
    return path


@pytest.fixture
def watch_log(caplog):
    with caplog.at_level(logging.INFO, logger="takt.watching"):
        yield caplog


# --- RUN files: a planted link is never followed ---------------------------


@pytest.mark.parametrize("plant", ["symlink", "hardlink"])
def test_a_planted_error_file_is_not_written_through(
    run_folder, victim, watcher, clock, watch_log, plant
):
    error = run_folder / "Takt999999.RUN.error"
    if plant == "symlink":
        error.symlink_to(victim)
    else:
        os.link(victim, error)
    (run_folder / "Takt999999.RUN").write_text("")
    settle(watcher, clock)

    assert victim.read_text() == "precious\n"  # not overwritten
    assert not (run_folder / "Takt999999.RUN").exists()  # the request is consumed
    why = "it is a symbolic link" if plant == "symlink" else "it is a hard link to another file"
    assert f"did not write {run_folder}/Takt999999.RUN.error: {why}" in watch_log.text
    assert "no job with id 999999" in watch_log.text  # why the request was refused


def test_a_done_folder_that_is_a_link_moves_no_file_out_of_the_folder(
    run_folder, tmp_path, watcher, clock, watch_log
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_folder / "done").symlink_to(elsewhere)
    job = make_job("report")
    with override_settings(TAKT_RUN_FILE_DONE_FOLDER="done"):
        (run_folder / f"Takt{job.pk}.RUN").write_text("")
        settle(watcher, clock)

    assert Run.objects.filter(job=job).count() == 1  # the request was honoured
    assert list(elsewhere.iterdir()) == []  # nothing left the folder
    assert sorted(p.name for p in run_folder.iterdir()) == ["done"]  # consumed: deleted
    assert (
        f"did not move the run file {run_folder}/Takt{job.pk}.RUN into {run_folder}/done"
        " (done is a symbolic link (not followed)): deleted it instead"
    ) in watch_log.text


def test_a_real_done_folder_below_the_request_folder_still_keeps_the_files(
    run_folder, watcher, clock
):
    job = make_job("report")
    with override_settings(TAKT_RUN_FILE_DONE_FOLDER="done/runs"):
        for _ in range(2):  # the second of the same name gets a time stamp
            (run_folder / f"Takt{job.pk}.RUN").write_text(f"{_}")
            settle(watcher, clock)
    names = sorted(p.name for p in (run_folder / "done" / "runs").iterdir())
    assert len(names) == 2 and names[0] == f"Takt{job.pk}.RUN", names
    assert names[1].startswith(f"Takt{job.pk}.RUN.")


def test_a_run_file_that_is_a_link_starts_nothing(run_folder, victim, watcher, clock, watch_log):
    job = make_job("report")
    (run_folder / f"Takt{job.pk}.RUN").symlink_to(victim)
    settle(watcher, clock)

    assert not Run.objects.exists()
    assert victim.read_text() == "precious\n"
    assert (
        f"not taking {run_folder}/Takt{job.pk}.RUN: a symbolic link (the watcher follows none)"
        in watch_log.text
    )


# --- file triggers: links are not taken -------------------------------------


def test_a_linked_file_or_folder_in_a_watched_folder_starts_no_run(
    tmp_path, victim, watcher, clock, watch_log
):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "keys.csv").write_text("k")
    job = make_job("import", overlap_policy="allow")
    file_trigger(job, inbox, watch_pattern="*.csv", watch_recursive=True)
    watcher.refresh()
    (inbox / "orders.csv").symlink_to(victim)
    (inbox / "sub").symlink_to(secrets)  # a folder below that is a link
    (inbox / "real.csv").write_text("1,2\n")
    settle(watcher, clock)

    assert [r.params["path"] for r in Run.objects.filter(job=job)] == [str(inbox / "real.csv")]
    assert f"not taking {inbox}/orders.csv: a symbolic link" in watch_log.text


# --- where a watcher may look: TAKT_WATCH_ROOTS -----------------------------


@pytest.mark.parametrize("folder", ["/", "/root", "/etc", "/proc", "/home", "/var/lib", "/usr/bin"])
def test_a_system_folder_is_refused_by_default(folder):
    trigger = Trigger(job=make_job("import"), kind="file", watch_folder=folder)
    with pytest.raises(ValidationError) as caught:
        trigger.full_clean(exclude=["job"])
    (message,) = caught.value.message_dict["watch_folder"]
    assert "is a system folder: Takt does not watch it" in message, message


def test_a_folder_outside_the_roots_is_refused_also_through_a_link(tmp_path):
    allowed, other = tmp_path / "allowed", tmp_path / "other"
    allowed.mkdir()
    other.mkdir()
    (allowed / "inbox").mkdir()
    (allowed / "sneaky").symlink_to(other)
    with override_settings(TAKT_WATCH_ROOTS=[str(allowed)]):
        file_trigger(make_job("fine"), allowed / "inbox")  # inside: saved
        for folder, shown in [
            (other, str(other)),
            (allowed / "sneaky", f"{allowed}/sneaky ({other})"),
            (Path("/nonexistent/x"), "/nonexistent/x"),  # not "does not exist": not its business
        ]:
            trigger = Trigger(job=make_job("import"), kind="file", watch_folder=str(folder))
            with pytest.raises(ValidationError) as caught:
                trigger.full_clean(exclude=["job"])
            assert caught.value.message_dict["watch_folder"] == [
                f"{shown} is outside the folders Takt may watch (TAKT_WATCH_ROOTS: {allowed})"
            ]


def test_the_api_refuses_a_folder_outside_the_roots_naming_the_field_and_stores_nothing(tmp_path):
    client = SessionClient(
        user_with("takt_jobs.view_job", "takt_jobs.add_job", "takt_jobs.change_job")
    )
    body = {
        "name": "import",
        "target": "tests.echo",
        "triggers": [{"kind": "file", "watch_folder": "/root"}],
    }
    response = client.send("post", "/api/v1/jobs", body)
    assert response.status_code == 400, response.json()
    assert "watch_folder" in str(response.json())
    assert "/root is a system folder" in str(response.json())
    assert not Job.objects.filter(name="import").exists()
    assert not Trigger.objects.filter(kind="file").exists()


def test_a_stored_trigger_outside_the_roots_is_not_watched(tmp_path, watcher, clock, watch_log):
    job = make_job("import")
    file_trigger(job, tmp_path)
    with override_settings(TAKT_WATCH_ROOTS=[str(tmp_path / "elsewhere")]):
        watcher.refresh()
        (tmp_path / "a.csv").write_text("a")
        settle(watcher, clock)
    assert watcher.held == {} and not Run.objects.exists()
    assert f"not watching {tmp_path}: {tmp_path} is outside the folders" in watch_log.text


# --- names with control characters ------------------------------------------


def test_a_file_name_with_an_escape_sequence_is_logged_escaped(
    tmp_path, watcher, clock, watch_log, redis_client
):
    job = make_job("import", overlap_policy="allow")
    file_trigger(job, tmp_path, watch_pattern="*.csv")
    name = f"report{ESC}[2J{ESC}]0;pwned\a.csv"
    (tmp_path / name).write_text("x")
    settle(watcher, clock)

    run = Run.objects.get(job=job)
    assert run.params["path"] == str(tmp_path / name)  # the job gets the real name
    escaped = "report\\x1b[2J\\x1b]0;pwned\\x07.csv"
    assert f"file {tmp_path}/{escaped} started run" in watch_log.text
    assert ESC not in watch_log.text and "\a" not in watch_log.text
    (decision,) = [d for d in query(job_id=job.pk) if d["kind"] == "file_started"]
    assert escaped in decision["detail"] and ESC not in decision["detail"]


def test_a_refused_run_file_with_an_escape_sequence_is_logged_escaped(
    run_folder, watcher, clock, watch_log
):
    (run_folder / f"Takt{ESC}[31mX.RUN").write_text("")
    settle(watcher, clock)
    assert ESC not in watch_log.text
    assert f"run file {run_folder}/Takt\\x1b[31mX.RUN refused" in watch_log.text


def test_decision_log_prints_an_old_raw_detail_escaped(redis_client, clock):
    job = make_job("import")
    record([Decision("file_started", job.pk, None, None, f"created /in/a{ESC}[2J.csv", clock())])
    out = StringIO()
    call_command("decision_log", "--job", str(job.pk), stdout=out)
    assert "created /in/a\\x1b[2J.csv" in out.getvalue() and ESC not in out.getvalue()


def test_a_name_that_is_not_utf8_starts_nothing_and_keeps_no_other_file_waiting(
    tmp_path, watcher, clock, watch_log
):
    """Such a name cannot be a run's `path` (text in the database) nor a
    line of the decision log; it is skipped, said once, escaped."""
    job = make_job("import", overlap_policy="allow")
    file_trigger(job, tmp_path, watch_pattern="*.csv")
    with open(os.path.join(os.fsencode(tmp_path), b"bad\xff.csv"), "wb") as out:
        out.write(b"x")
    (tmp_path / "good.csv").write_text("y")
    settle(watcher, clock)
    settle(watcher, clock)

    assert [r.params["path"] for r in Run.objects.filter(job=job)] == [str(tmp_path / "good.csv")]
    assert watch_log.text.count(f"not taking {tmp_path}/bad\\udcff.csv: its name is not UTF-8") == 1
