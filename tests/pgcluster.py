"""A private PostgreSQL cluster for the tests that take the database away
(outages, chaos): `initdb` into a temporary directory and `pg_ctl` on a free
port, from the installed server binaries. Never the machine's shared server
or its databases.

As root (CI), the cluster runs as the `postgres` system user, since the
server refuses to run as root; its directory is handed to that user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.processes import free_port


def server_binaries() -> Path | None:
    """The directory of initdb and pg_ctl: on PATH, else Debian's newest
    /usr/lib/postgresql/<version>/bin; None when PostgreSQL's server is
    not installed."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    return Path(versions[-1]).parent if versions else None


def _version(path: str) -> float:
    try:
        return float(Path(path).parent.parent.name)
    except ValueError:
        return 0.0


class PrivateCluster:
    """One PostgreSQL cluster of its own: `start()`, `stop()` (fast: the
    connections are cut), `restart()`, `kill_connections()`; `url(db)` for
    DATABASE_URL. Trust authentication on 127.0.0.1 only."""

    def __init__(self, *, port: int | None = None) -> None:
        binaries = server_binaries()
        if binaries is None:
            raise RuntimeError(
                "PostgreSQL's server binaries (initdb, pg_ctl) are not installed:"
                " apt-get install postgresql"
            )
        self.bin = binaries
        # Its own directory under the system's temp dir, which the postgres
        # user can reach (pytest's tmp_path is private to the test's user).
        self.root = Path(tempfile.mkdtemp(prefix="takt-pg-"))
        self.root.chmod(0o755)
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "server.log"
        self.port = port or free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
        self._initdb()

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as, *argv], capture_output=True, text=True, timeout=120, check=check
        )

    def _initdb(self) -> None:
        self.socket_dir.mkdir(exist_ok=True)
        if self._as:
            user = pwd.getpwnam("postgres")
            for path in (self.root, self.socket_dir):
                os.chown(path, user.pw_uid, user.pw_gid)
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
            "--no-sync", "-E", "UTF8",
        )  # fmt: skip

    def start(self, timeout_s: float = 30) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.socket_dir}"
            " -c fsync=off -c synchronous_commit=off -c max_connections=200"
        )
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
            "-o", options, "-w", "-t", str(int(timeout_s)), "start",
        )  # fmt: skip

    def stop(self) -> None:
        """A fast shutdown: every connection is cut, as in a server restart."""
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop", check=False
        )

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill_connections(self) -> None:
        """Terminate every other backend (connections killed, server up)."""
        self.psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )

    def psql(self, sql: str, db: str = "postgres") -> str:
        done = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", db,
             "-Atc", sql],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    def create_database(self, name: str) -> str:
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def url(self, db: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}"

    def wait_ready(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.psql("SELECT 1")
                return
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
