"""One local set-up for every process (scheduler_project/localenv.py):
what `make run` chose is what a command from a second terminal uses,
without exporting anything; the environment wins; a command that cannot
reach Redis names the URL it tried and exits non-zero."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from runs.decisions import Decision, record
from tests.processes import ROOT, free_port

PRINT_SETTINGS = (
    "from django.conf import settings;"
    "print(settings.REDIS_URL);"
    "print(settings.CELERY_BROKER_URL);"
    "print(settings.TIME_ZONE);"
    "print(settings.REDIS_URL_SOURCE)"
)


def second_terminal(local_env: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`manage.py …` as a user starts it from another terminal: no REDIS_URL
    or DATABASE_URL exported, outside pytest."""
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTEST_VERSION", "REDIS_URL", "DATABASE_URL", "TAKT_TIME_ZONE", "TZ")
        and not k.startswith("PYTEST_")
    }
    base.update(TAKT_LOCAL_ENV_FILE=str(local_env), PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


def make_run_writes(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The step of deploy/dev/run.sh that writes var/local.env, from a
    shell of the usual umask (files 0644 unless the writer says otherwise)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TAKT_", "DJANGO_"))}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "scheduler_project.localenv", "write", str(path)]
        + ["REDIS_URL", "DATABASE_URL"],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        preexec_fn=lambda: os.umask(0o022),
    )


def test_a_command_from_a_second_terminal_uses_what_make_run_chose(tmp_path):
    local_env = tmp_path / "local.env"
    printed = make_run_writes(
        local_env, REDIS_URL="redis://127.0.0.1:6380/0", TAKT_TIME_ZONE="America/New_York"
    ).stdout
    assert "REDIS_URL" in printed and "TAKT_TIME_ZONE" in printed
    done = second_terminal(local_env, "shell", "--no-imports", "-c", PRINT_SETTINGS)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines[:3] == ["redis://127.0.0.1:6380/0", "redis://127.0.0.1:6380/0", "America/New_York"]
    assert "written by make run" in lines[3]


def test_the_file_is_owner_only_and_make_run_says_it_holds_a_password(tmp_path):
    """It carries the private Redis's password (and a DATABASE_URL's): 0600
    whatever the umask, also over an older make run's 0644 file."""
    local_env = tmp_path / "var" / "local.env"
    local_env.parent.mkdir()
    local_env.write_text("# an older make run's file\n")
    local_env.chmod(0o644)

    done = make_run_writes(local_env, REDIS_URL="redis://:s3cr3t-pw@127.0.0.1:6380/0")

    assert stat.S_IMODE(local_env.stat().st_mode) == 0o600
    assert "s3cr3t-pw" in local_env.read_text()  # a second terminal needs it
    assert "holds the password of REDIS_URL" in done.stderr
    assert "s3cr3t-pw" not in done.stdout + done.stderr


def test_a_file_without_a_password_has_no_note_and_a_new_folder_is_owner_only(tmp_path):
    local_env = tmp_path / "new" / "local.env"
    done = make_run_writes(local_env, REDIS_URL="redis://127.0.0.1:6380/0")
    assert stat.S_IMODE(local_env.stat().st_mode) == 0o600
    assert stat.S_IMODE(local_env.parent.stat().st_mode) == 0o700
    assert "password" not in done.stderr


def test_a_variable_set_in_the_environment_wins_over_the_file(tmp_path):
    local_env = tmp_path / "local.env"
    make_run_writes(local_env, REDIS_URL="redis://127.0.0.1:6380/0")
    done = second_terminal(
        local_env,
        "shell",
        "--no-imports",
        "-c",
        PRINT_SETTINGS,
        REDIS_URL="redis://127.0.0.1:6390/2",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "redis://127.0.0.1:6390/2"
    assert "from the environment" in done.stdout


def test_values_with_spaces_and_quotes_survive_the_file(tmp_path):
    local_env = tmp_path / "local.env"
    make_run_writes(local_env, REDIS_URL="redis://:p'a\"ss w@127.0.0.1:6380/0")
    done = second_terminal(local_env, "shell", "--no-imports", "-c", PRINT_SETTINGS)
    assert done.stdout.split("\n")[0] == "redis://:p'a\"ss w@127.0.0.1:6380/0", done.stderr


def test_a_command_that_cannot_reach_redis_names_the_url_and_fails(tmp_path):
    local_env = tmp_path / "local.env"
    dead = f"redis://127.0.0.1:{free_port()}/0"
    make_run_writes(local_env, REDIS_URL=dead)
    for argv in (["decision_log"], ["explain_job", "1"], ["pause_queue"], ["run_job", "1"]):
        done = second_terminal(local_env, *argv)
        assert done.returncode != 0, (argv, done.stdout)
        assert f"cannot reach Redis at {dead}" in done.stderr, (argv, done.stderr)
        assert "written by make run" in done.stderr


def test_a_command_reaches_the_redis_of_the_file(tmp_path, redis_url, redis_client):
    """decision_log reads the Redis that make run's processes write to."""
    record([Decision("due", 7, detail="seen by the beat")])
    local_env = tmp_path / "local.env"
    make_run_writes(local_env, REDIS_URL=redis_url)
    done = second_terminal(local_env, "decision_log", "--job", "7")
    assert done.returncode == 0, done.stderr
    assert "due" in done.stdout and "seen by the beat" in done.stdout


def test_the_test_suite_never_reads_the_local_file():
    """pytest sets PYTEST_VERSION: a `make run` never changes what `make test` uses."""
    from scheduler_project import localenv

    assert "PYTEST_VERSION" in os.environ
    assert localenv.SOURCES.get("REDIS_URL") != "written by make run"


@pytest.mark.parametrize("value", [""])
def test_an_empty_local_file_setting_means_none(tmp_path, value):
    from scheduler_project.localenv import local_env_path

    os.environ["TAKT_LOCAL_ENV_FILE"] = value
    try:
        assert local_env_path(tmp_path) is None
    finally:
        del os.environ["TAKT_LOCAL_ENV_FILE"]
