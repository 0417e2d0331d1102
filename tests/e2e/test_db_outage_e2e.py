"""A database outage with real processes: a beat, a worker and a web server
on a private PostgreSQL cluster (tests/pgcluster.py) that the tests stop
(`pg_ctl stop -m fast`, a server restart) or whose connections they kill
(`pg_terminate_backend`). The processes stay alive, log the outage once,
resume by themselves; the fire times missed meanwhile follow their
missed-run policy; a run that ends during the outage is recorded once when
the database is back. Executions are counted through a side channel
outside Takt's tables (an O_APPEND file, tests.append)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.e2e.conftest import wait_until
from tests.live_fixtures import holds_for
from tests.pgcluster import PrivateCluster, server_binaries
from tests.processes import ROOT, Proc, free_port

# The restart's length (the 30 s: TAKT_TEST_OUTAGE_SECONDS=30).
OUTAGE_S = int(os.environ.get("TAKT_TEST_OUTAGE_SECONDS", "10"))

pytestmark = [
    pytest.mark.e2e,
    # a private PostgreSQL cluster stopped and started again, the outage
    # (TAKT_TEST_OUTAGE_SECONDS) and the catch-up: 15 to 25 s each alone
    pytest.mark.timeout(120 + 2 * OUTAGE_S),
    # live_env needs the test database (the processes here use the private cluster's)
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(server_binaries() is None, reason="PostgreSQL's server is not installed"),
]

DB = "takt"


class Outage:
    """The private cluster with Takt migrated into it, and what the tests
    need around it: the processes' environment, SQL, manage.py."""

    def __init__(self, cluster: PrivateCluster, env: dict[str, str]) -> None:
        self.cluster = cluster
        self.env = env

    def sql(self, query: str) -> list[list[str]]:
        out = self.cluster.psql(query, db=DB)
        return [line.split("|") for line in out.splitlines() if line]

    def manage(self, *argv: str, **env: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *argv],
            cwd=ROOT, env={**self.env, **env}, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def runs(self, key: str) -> list[dict[str, Any]]:
        """The job's runs, oldest fire time first."""
        rows = self.sql(
            "SELECT r.id, r.status, r.trigger, r.scheduled_for, r.missed_count,"
            " coalesce(r.duration_s, -1), coalesce(r.finished_at::text, '')"
            " FROM takt_runs_run r JOIN takt_jobs_job j ON j.id = r.job_id"
            f" WHERE j.key = '{key}' ORDER BY r.scheduled_for, r.id"
        )
        return [
            {
                "id": int(row[0]),
                "status": row[1],
                "trigger": row[2],
                "scheduled_for": datetime.fromisoformat(row[3]),
                "missed": int(row[4]),
                "duration_s": float(row[5]),
                "finished_at": row[6],
            }
            for row in rows
        ]


OWN_REDIS_DB = 7


def own_redis_database(url: str, number: int) -> str:
    """`url` with database `number`, emptied."""
    base = url.rsplit("/", 1)[0]
    own = f"{base}/{number}"
    client = redis.Redis.from_url(own)
    client.flushdb()
    client.close()
    return own


@pytest.fixture(scope="module")
def outage(live_env: dict[str, str]) -> Iterator[Outage]:
    cluster = PrivateCluster()
    try:
        cluster.start()
        url = cluster.create_database(DB)
        # Its own Redis database, emptied: run and job ids start again in the
        # private cluster, so another test's leftovers under the same ids
        # (a cancel marker, a lock, a message mark) must not be seen here.
        redis_url = own_redis_database(live_env["REDIS_URL"], OWN_REDIS_DB)
        env = {
            **live_env,
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "CELERY_BROKER_URL": redis_url,
            "TAKT_LOCK_TTL_SECONDS": "3",
        }
        db = Outage(cluster, env)
        db.manage("migrate", "--noinput", "-v", "0")
        # The built-in hourly maintenance job must not fire during the tests.
        db.sql("UPDATE takt_jobs_trigger SET active = false")
        yield db
    finally:
        cluster.destroy()


@pytest.fixture
def up(outage: Outage) -> Iterator[Outage]:
    """The cluster, running again when the test ends however it ended."""
    yield outage
    try:
        outage.cluster.psql("SELECT 1")
    except subprocess.CalledProcessError:
        outage.cluster.start()


def jobs_file(tmp_path: Path, *jobs: dict[str, Any]) -> str:
    path = tmp_path / f"jobs-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(list(jobs)))
    return str(path)


def every_second(key: str, side: Path, **fields: Any) -> dict[str, Any]:
    return {
        "key": key,
        "name": key,
        "target": "tests.append",
        "params": {"path": str(side)},
        "triggers": [{"kind": "cron", "cron_expression": "* * * * * *"}],
        # the catch-up runs go out together: let them run side by side
        "overlap_policy": "allow",
        "max_instances": 100,
        **fields,
    }


def executions(side: Path) -> list[int]:
    """The run ids the side channel saw executed, one line each."""
    lines = side.read_text().splitlines() if side.exists() else []
    return [int(line.split()[0]) for line in lines if line.strip()]


def assert_quiet(proc: Proc) -> str:
    """The process is alive and logged no traceback."""
    assert proc.popen.poll() is None, f"{proc.name} died:\n{proc.log()[-3000:]}"
    text = proc.log()
    assert "Traceback" not in text, text[-6000:]
    return text


def wait_ended(db: Outage, *keys: str, timeout: float = 20) -> None:
    """Until every run of the jobs has ended; the ones left, if not."""

    def left() -> list[dict[str, Any]]:
        return [r for key in keys for r in db.runs(key) if r["status"] in ("queued", "running")]

    try:
        wait_until(lambda: not left(), timeout, "the runs to end")
    except AssertionError as exc:
        detail = db.sql(
            "SELECT id, status, trigger, scheduled_for, published_at, held, worker FROM takt_runs_run"
            " WHERE status IN ('queued', 'running') ORDER BY id"
        )
        raise AssertionError(f"{exc}: {detail}") from None


def assert_no_holes(runs: list[dict[str, Any]]) -> None:
    """One run per fire time (1 s apart), none twice."""
    times = [r["scheduled_for"] for r in runs]
    assert len(times) == len(set(times)), "a fire time has two runs"
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    assert set(gaps) <= {1.0}, f"holes in the fire times: {gaps}"


def test_beat_and_worker_ride_out_a_restart_and_catch_up_the_missed_fire_times(
    up, start_process, tmp_path
):
    side, skip_side = tmp_path / "all.txt", tmp_path / "skip.txt"
    jobs = jobs_file(
        tmp_path,
        every_second("outage.all", side, missed_run_policy="run_all", catchup_max_runs=30),
        every_second("outage.skip", skip_side, missed_run_policy="skip"),
    )
    worker = start_process("worker", **up.env)
    beat = start_process("beat", **{**up.env, "TAKT_JOBS_FILE": jobs})
    wait_until(lambda: len(executions(side)) >= 3, 20, "three runs before the outage")

    up.cluster.stop()
    stopped_at = time.monotonic()
    time.sleep(OUTAGE_S)
    up.cluster.start()
    wait_until(lambda: "database back after" in beat.log(), 15, "the beat to see the database")
    back_s = time.monotonic() - stopped_at
    # The catch-up runs of one claim go out one by one (the beat's sweep).
    held = "SELECT count(*) FROM takt_runs_run WHERE held AND status = 'queued'"
    wait_until(lambda: up.sql(held) == [["0"]], OUTAGE_S + 10, "the catch-up runs to go out")
    on_time = (
        "SELECT count(*) FROM takt_runs_run WHERE trigger = 'schedule' AND published_at IS NOT NULL"
    )
    since = int(up.sql(on_time)[0][0])
    wait_until(lambda: int(up.sql(on_time)[0][0]) > since, 10, "a fire time on time again")
    beat.stop()
    wait_ended(up, "outage.all", "outage.skip")

    runs = up.runs("outage.all")
    assert_no_holes(runs)
    assert {r["status"] for r in runs} == {"succeeded"}, runs
    assert sorted(executions(side)) == sorted(r["id"] for r in runs)  # each ran once
    caught_up = [r for r in runs if r["trigger"] == "catchup"]
    assert OUTAGE_S - 2 <= len(caught_up) <= back_s + 2, [r["scheduled_for"] for r in runs]

    skip_runs = up.runs("outage.skip")
    (skipped,) = [r for r in skip_runs if r["status"] == "skipped"]  # one record for the gap
    assert OUTAGE_S - 2 <= skipped["missed"] <= back_s + 2, skipped
    ran = [r["id"] for r in skip_runs if r["status"] == "succeeded"]
    assert {r["trigger"] for r in skip_runs if r["status"] == "succeeded"} == {"schedule"}
    assert sorted(executions(skip_side)) == ran

    beat_log = beat.log()
    assert "Traceback" not in beat_log, beat_log[-6000:]
    assert beat_log.count("database unavailable") == 1, beat_log[-6000:]
    assert beat_log.count("database back after") == 1
    assert_quiet(worker)
    worker.stop()


def test_a_run_that_ends_while_the_database_is_down_is_recorded_once_when_it_is_back(
    up, start_process, tmp_path
):
    side = tmp_path / "sleeper.txt"
    end_now = tmp_path / "end-now"  # the run ends when this file exists
    key = "outage.sleeper"
    sleeper = {
        "key": key,
        "name": key,
        "target": "tests.append",
        "params": {"path": str(side), "until": str(end_now)},
    }
    worker = start_process("worker", **up.env)
    up.manage("sync_jobs", TAKT_JOBS_FILE=jobs_file(tmp_path, sleeper))
    job_id = up.sql(f"SELECT id FROM takt_jobs_job WHERE key = '{key}'")[0][0]
    asked_at = time.time()
    up.manage("run_job", job_id)
    wait_until(lambda: executions(side), 20, "the run to start")

    up.cluster.stop()  # the run is running
    ended_at = time.time()
    end_now.touch()  # the run ends now, while the database is down
    client = redis.Redis.from_url(up.env["REDIS_URL"])
    lock = f"takt:lock:job:{job_id}"
    wait_until(lambda: "database unavailable" in worker.log(), 20, "the worker to meet the outage")
    # Its end cannot be recorded: the lock outlives its TTL (3 s).
    holds_for(lambda: client.exists(lock), 4, "the job's lock during the outage")
    up.cluster.start()
    back_at = time.time()

    def ended() -> list[dict[str, Any]]:
        runs = up.runs(key)
        return runs if runs and runs[0]["status"] != "running" else []

    (run,) = wait_until(ended, 15, "the run's end to be recorded")
    assert run["status"] == "succeeded"
    # the run's own end and time, not the outage's
    finished_at = datetime.fromisoformat(run["finished_at"]).timestamp()
    assert ended_at <= finished_at < back_at
    assert 0 < run["duration_s"] <= finished_at - asked_at
    assert executions(side) == [run["id"]]  # it ran once
    wait_until(lambda: not client.exists(lock), 5, "the lock's release")
    log = assert_quiet(worker)
    assert "database back after" in log
    # once per process at most: the run's pool child, and the main process
    # if its heartbeat fell into the outage; not once per attempt
    assert 1 <= log.count("database unavailable") <= 2, log
    worker.stop()


def test_a_run_delivered_and_a_beat_started_while_the_database_is_down_wait_for_it(
    up, start_process, tmp_path
):
    side = tmp_path / "late.txt"
    key = "outage.late"
    job = {"key": key, "name": key, "target": "tests.append", "params": {"path": str(side)}}
    up.manage("sync_jobs", TAKT_JOBS_FILE=jobs_file(tmp_path, job))
    job_id = up.sql(f"SELECT id FROM takt_jobs_job WHERE key = '{key}'")[0][0]
    up.manage("run_job", job_id)  # published; no worker yet
    up.cluster.stop()
    # The claim waits 2 s, then the task sends the run again (and again).
    worker = start_process("worker", **{**up.env, "TAKT_DB_OUTAGE_MAX_SECONDS": "2"})
    # A beat started now waits for the database before it syncs its jobs.
    ticking = tmp_path / "ticking.txt"
    jobs = jobs_file(tmp_path, job, every_second("outage.ticking", ticking))
    beat = start_process("beat", **{**up.env, "TAKT_JOBS_FILE": jobs})
    wait_until(lambda: "sending run" in worker.log(), 20, "the worker to give the run back")
    # the beat's first try at the database may come after the worker's (a
    # slower start on a busy machine): wait for it as for the worker's
    wait_until(lambda: "database unavailable (beat start)" in beat.log(), 20, "the beat to wait")
    assert executions(side) == []
    up.cluster.start()
    (run,) = wait_until(
        lambda: [r for r in up.runs(key) if r["status"] == "succeeded"], 20, "the run"
    )
    assert executions(side) == [run["id"]]  # once, whatever the deliveries
    wait_until(lambda: len(executions(ticking)) >= 2, 15, "the beat's job to run")
    log = assert_quiet(worker)
    assert "database back after" in log
    assert "database back after" in assert_quiet(beat)
    beat.stop()
    worker.stop()


def test_killed_connections_are_reconnected_and_nothing_is_missed(up, start_process, tmp_path):
    side = tmp_path / "killed.txt"
    jobs = jobs_file(tmp_path, every_second("outage.killed", side, missed_run_policy="run_all"))
    worker = start_process("worker", **up.env)
    beat = start_process("beat", **{**up.env, "TAKT_JOBS_FILE": jobs})
    wait_until(lambda: len(executions(side)) >= 3, 20, "three runs before the kill")
    for _ in range(3):
        up.cluster.kill_connections()
        time.sleep(1)
    before = len(executions(side))
    wait_until(lambda: len(executions(side)) >= before + 3, 10, "three runs after the kills")
    beat.stop()
    wait_ended(up, "outage.killed")
    runs = up.runs("outage.killed")
    assert_no_holes(runs)
    assert sorted(executions(side)) == sorted(r["id"] for r in runs)
    beat_log = beat.log()
    assert "Traceback" not in beat_log, beat_log[-6000:]
    # each kill broke the beat's connection: seen once, and over at the next try
    assert 1 <= beat_log.count("database back after") == beat_log.count("database unavailable")
    assert_quiet(worker)
    worker.stop()


def _get(url: str, *, session: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, method=method, headers={"Cookie": f"sessionid={session}"})
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


SESSION = """
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
user = get_user_model().objects.create_superuser("outage", "outage@example.com", "pw-outage-1")
session = SessionStore()
session.update({"_auth_user_id": str(user.pk), "_auth_user_hash": user.get_session_auth_hash(),
                "_auth_user_backend": "django.contrib.auth.backends.ModelBackend"})
session.create()
print(session.session_key)
"""


def test_a_web_request_during_the_outage_gets_a_clear_503(up, live_log_dir):
    session = up.manage("shell", "-c", SESSION).strip().splitlines()[-1]
    port = free_port()
    argv = [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    web = Proc("web", argv, up.env, live_log_dir)
    try:
        web.wait_for("Quit the server with", 30)
        base = f"http://127.0.0.1:{port}"
        get: Callable[..., tuple[int, dict[str, str], str]] = lambda path, **kw: _get(  # noqa: E731
            base + path, session=session, **kw
        )
        wait_until(lambda: get("/admin/takt_runs/run/")[0] == 200, 20, "the admin to answer")

        up.cluster.stop()
        status, headers, body = get("/admin/takt_runs/run/")
        assert (status, headers.get("Retry-After")) == (503, "10")
        assert "Database unavailable" in body and "The database is not reachable" in body
        assert "Traceback" not in body
        status, headers, body = get("/api/v1/jobs")
        assert (status, headers.get("Retry-After")) == (503, "10")
        assert headers["Content-Type"] == "application/json"
        assert json.loads(body)["detail"].startswith("The database is not reachable")
        status, _, body = get("/api/v1/heartbeats/backup", method="POST")  # a ping
        assert status == 503 and "detail" in json.loads(body)

        up.cluster.start()
        assert get("/admin/takt_runs/run/")[0] == 200
        log = web.log()
        assert "Traceback" not in log, log[-6000:]
        assert log.count("database unavailable") == 1
    finally:
        web.stop()
