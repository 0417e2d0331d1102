"""Secrets at rest on a development machine: what `make run` writes under
var/ (the SQLite database, the private Redis's config; var/local.env in
test_local_setup.py) is readable by its owner only, whatever the umask of
the shell that started it; a folder the settings make is 0700."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.processes import ROOT, clean_env

LAX = 0o022  # the usual umask: files 0644, folders 0755


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def lax_umask() -> None:
    os.umask(LAX)


def test_make_runs_var_folder_and_database_are_owner_only(tmp_path):
    """takt_private_var (deploy/dev/lib.sh), as run.sh calls it before
    anything is written: files an older make run left readable are closed,
    and the database migrate then creates (with its WAL files) is 0600."""
    var = tmp_path / "var"
    (var / "redis").mkdir(parents=True)
    old = [var / "takt.sqlite3", var / "local.env", var / "redis" / "redis.conf"]
    for path in old:
        path.write_text("")
        path.chmod(0o644)
    var.chmod(0o755)
    fresh = var / "fresh"
    script = (
        '. deploy/dev/lib.sh && takt_private_var "$1" && '
        'TAKT_VAR_DIR="$2" "$3" manage.py migrate --noinput -v 0'
    )

    subprocess.run(
        ["bash", "-c", script, "private", str(var), str(fresh), sys.executable],
        cwd=ROOT,
        # SQLite's files are what this is about, whatever database the suite uses.
        env=clean_env(tmp_path, DATABASE_URL=""),
        check=True,
        timeout=120,
        preexec_fn=lax_umask,
    )

    assert mode(var) == 0o700
    assert {path.name: mode(path) for path in old} == {path.name: 0o600 for path in old}
    assert mode(fresh) == 0o700
    made = sorted(fresh.glob("takt.sqlite3*"))
    assert made, list(fresh.iterdir())
    assert {path.name: mode(path) for path in made} == {path.name: 0o600 for path in made}


def test_settings_make_a_new_var_folder_owner_only(tmp_path):
    """`manage.py` run by hand on a fresh checkout (no make run, lax umask)."""
    var = tmp_path / "new-var"
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=clean_env(tmp_path, TAKT_VAR_DIR=str(var)),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lax_umask,
    )
    assert done.returncode == 0, done.stderr
    assert mode(var) == 0o700
