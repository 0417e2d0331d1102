"""`manage.py runserver` (make run's web) keeps no database connection of a
request that ended: it serves each request in a thread of its own, and a
connection kept for CONN_MAX_AGE stayed open with its ended thread until
the garbage collector came by. On PostgreSQL the browser tests' server ran
the database out of connections ("sorry, too many clients already")."""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from tests.live_fixtures import STARTUP_TIMEOUT_S, wait_until
from tests.processes import Proc, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REQUESTS = 40


def open_connections(pid: int) -> int:
    """The process's open connections to the test database: its file
    handles on the SQLite file, or its sessions on the PostgreSQL server
    (found by their client ports)."""
    if connection.vendor == "sqlite":
        database = os.path.realpath(connection.settings_dict["NAME"])
        return sum(
            1 for fd in Path(f"/proc/{pid}/fd").iterdir() if os.path.realpath(fd) == database
        )
    inodes = {
        os.readlink(fd)[len("socket:[") : -1]
        for fd in Path(f"/proc/{pid}/fd").iterdir()
        if os.readlink(fd).startswith("socket:[")
    }
    ports = [
        int(fields[1].rsplit(":", 1)[1], 16)
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
        if (fields := line.split())[9] in inodes
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND client_port = ANY(%s)",
            [ports],
        )
        return int(cursor.fetchone()[0])


def ping(url: str) -> int:
    try:
        with urllib.request.urlopen(url, data=b"", timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_requests_that_ended_leave_no_database_connection_open(live_env, live_log_dir):
    port = free_port()
    argv = [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    web = Proc("web", argv, live_env, live_log_dir)
    try:
        web.wait_for("Quit the server with", STARTUP_TIMEOUT_S)
        url = f"http://127.0.0.1:{port}/api/v1/heartbeats/no-such-heartbeat/0"
        # an unknown heartbeat: the view looks it up in the database
        wait_until(lambda: ping(url) == 404, 10, "the web server answers 404")
        for _ in range(REQUESTS):
            assert ping(url) == 404
        # a request's thread closes its connection after its answer went out
        wait_until(
            lambda: open_connections(web.pid) == 0, 10, "the requests' connections to be closed"
        )
    finally:
        web.stop()
