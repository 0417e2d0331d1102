"""The chaos harness (issue 12), shared by `make chaos` (tests/chaos/run.py,
the long form) and the pytest marker `chaos` (tests/chaos/test_chaos.py,
the short form).

1. Starts its own redis-server without persistence and its own PostgreSQL
   cluster (tests/pgcluster.py), migrates it, imports the chaos jobs
   (tests/chaos/jobdefs.py) and switches Takt's built-in jobs off.
2. Starts 2 beats and 3 prefork workers (concurrency 2) with a 3-second
   lock TTL and a fast poll; waits for them and a baseline phase.
3. Plays the seeded chaos schedule (tests/chaos/schedule.py): kills and
   restarts, both beats down, a Redis restart, a database outage. Every
   action is written to kills.jsonl with its wall-clock time and pids.
4. Waits a minute after the chaos, records what is still queued or
   running, stops everything and hands the run rows, the side channel
   and the kill log to tests/chaos/analysis.py.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from tests.chaos import jobdefs
from tests.chaos.analysis import Timeline, analyse
from tests.chaos.fleet import READY, Slot, make_slots
from tests.chaos.jobs import executing_pids, read_lines
from tests.chaos.report import Report
from tests.chaos.schedule import BEATS, WORKERS, Event, Profile, plan_chaos
from tests.pgcluster import PrivateCluster
from tests.processes import ROOT, RedisServer, free_port

LOCK_TTL_S = 3
POLL_S = 0.5
STARTUP_TIMEOUT_S = 120
CHILD_WAIT_S = 2.0  # a pool-child kill waits this long for a child that is executing
COLLECTED = "collected.pickle"  # the data the analysis read, to re-run it (run.py --analyse)
STUCK_AFTER_S = 15  # a queued or running run older than this at the check is stuck
# The live processes' settings; the checks that scale with the lock TTL
# are as short as it (a Takt without one of them ignores it).
SETTINGS = {
    "DJANGO_SETTINGS_MODULE": "scheduler_project.settings",
    "TAKT_LOCAL_ENV_FILE": "",
    "TAKT_JOB_MODULES": "tests.chaos.jobs",
    "TAKT_TIME_ZONE": "UTC",
    "TAKT_POLL_SECONDS": str(POLL_S),
    "TAKT_LOCK_TTL_SECONDS": str(LOCK_TTL_S),
    "TAKT_REPUBLISH_AFTER_SECONDS": "3",
    "TAKT_LOST_CHECK_SECONDS": "1",
    "TAKT_RESEND_AFTER_SECONDS": "5",
    "TAKT_RESEND_CHECK_SECONDS": "1",
    "TAKT_WORKER_ALIVE_TTL_SECONDS": "3",
    "PYTHONUNBUFFERED": "1",
}
RUN_COLUMNS = (
    "id, job_id, trigger, status, scheduled_for, enqueued_at, published_at, started_at,"
    " finished_at, attempt, retry_of_id, worker, message, missed_count"
)


def say_now(text: str) -> None:
    print(text, flush=True)


@dataclass
class Chaos:
    profile: Profile
    seed: int
    workdir: Path
    say: Callable[[str], None] = say_now
    kills: list[dict[str, Any]] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)

    @property
    def side_channel(self) -> Path:
        return self.workdir / "executions.jsonl"

    def log_kill(self, action: str, **detail: Any) -> None:
        entry = {"wall": time.time(), "mono": time.monotonic(), "action": action, **detail}
        self.kills.append(entry)
        with (self.workdir / "kills.jsonl").open("a") as f:
            f.write(json.dumps(entry) + "\n")
        self.say(f"  [{datetime.now(UTC):%H:%M:%S.%f}] {action} {detail}")


def run_chaos(
    profile: Profile, *, seed: int, workdir: Path, say: Callable[[str], None] = say_now
) -> Report:
    """The whole chaos test; returns the report (its `passed` and table)."""
    workdir.mkdir(parents=True, exist_ok=True)
    chaos = Chaos(profile, seed, workdir, say)
    events = plan_chaos(seed, profile)
    say(f"chaos test, {profile.name} form, seed {seed}, in {workdir}")
    say("schedule:\n" + "\n".join("  " + e.describe() for e in events))
    cluster = PrivateCluster()
    server = RedisServer(free_port(), workdir)
    try:
        cluster.start()
        server.start()
        url = cluster.create_database("takt_chaos")
        env = _environment(url, server.url, chaos.side_channel)
        _prepare_database(cluster, env, workdir, profile)
        chaos.slots = make_slots(env, workdir, beats=BEATS, workers=WORKERS)
        _start_all(chaos.slots)
        ready_at = datetime.now(UTC)
        window_start = (ready_at + timedelta(seconds=6)).replace(microsecond=0)
        say(
            f"all processes ready at {ready_at:%H:%M:%S}; fire times counted from {window_start:%H:%M:%S}"
        )
        _wait_supervised(
            chaos, (window_start - datetime.now(UTC)).total_seconds() + profile.baseline_s
        )
        chaos_start = datetime.now(UTC)
        _play(chaos, events, cluster, server)
        chaos_end = datetime.now(UTC)
        say(f"chaos over at {chaos_end:%H:%M:%S}; waiting {profile.after_s:g} s")
        _wait_supervised(chaos, profile.after_s)
        checked_at = datetime.now(UTC)
        stuck = _fetch(
            url,
            f"SELECT {RUN_COLUMNS} FROM takt_runs_run WHERE status IN ('queued', 'running')"
            " AND enqueued_at < %s",
            [checked_at - timedelta(seconds=STUCK_AFTER_S)],
        )
        for slot in chaos.slots:
            slot.stop()
        timeline = Timeline(
            window_start=window_start,
            window_end=checked_at - timedelta(seconds=10),
            chaos_start=chaos_start,
            chaos_end=chaos_end,
            checked_at=checked_at,
            events=[(chaos_start + timedelta(seconds=e.at_s), e) for e in events],
            dead_after_s=LOCK_TTL_S + POLL_S + 2,
        )
        collected = dict(
            jobs=_fetch(
                url,
                "SELECT id, key, overlap_policy, max_instances, max_retries FROM takt_jobs_job"
                " WHERE key LIKE 'chaos.%'",
            ),
            triggers=_fetch(
                url,
                "SELECT t.job_id, t.kind, t.cron_expression, t.interval_seconds, t.start_at"
                " FROM takt_jobs_trigger t JOIN takt_jobs_job j ON j.id = t.job_id"
                " WHERE j.key LIKE 'chaos.%'",
            ),
            runs=_fetch(url, f"SELECT {RUN_COLUMNS} FROM takt_runs_run"),
            stuck=stuck,
            executions=read_lines(chaos.side_channel),
            kills=chaos.kills,
            timeline=timeline,
            crashes=[c for s in chaos.slots for c in s.crashes],
        )
        (workdir / COLLECTED).write_bytes(pickle.dumps(collected))
        report = analyse(**collected)
        report.commit = _commit()
        report.header = (
            f"Chaos test, {profile.name} form: {profile.jobs + 2} jobs, {BEATS} beats, {WORKERS}"
            f" workers (prefork, concurrency 2), lock TTL {LOCK_TTL_S} s, poll {POLL_S:g} s;"
            f" {profile.chaos_s:g} s of chaos (seed {seed}), database outage"
            f" {profile.db_outage_s:g} s; {chaos_start:%Y-%m-%d %H:%M} UTC."
        )
        meta = {"commit": report.commit, "header": report.header}
        (workdir / "report.json").write_text(json.dumps(meta))
        (workdir / "table.md").write_text(report.markdown())
        say(report.markdown())
        return report
    finally:
        for slot in chaos.slots:
            slot.stop()
        server.kill()
        cluster.destroy()


def reanalyse(workdir: Path) -> Report:
    """The analysis again, on the data a finished run saved in `workdir`."""
    collected = pickle.loads((workdir / COLLECTED).read_bytes())
    report = analyse(**collected)
    meta = json.loads((workdir / "report.json").read_text())
    report.commit, report.header = meta["commit"], meta["header"]
    return report


def _environment(database_url: str, redis_url: str, side_channel: Path) -> dict[str, str]:
    """The live processes' environment, as tests/live_fixtures.py's
    live_env, on the private cluster and Redis."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env |= SETTINGS
    env |= {"DATABASE_URL": database_url, "REDIS_URL": redis_url}
    env |= {"TAKT_CHAOS_LOG": str(side_channel), "PYTHONPATH": str(ROOT)}
    return env


def _prepare_database(
    cluster: PrivateCluster, env: dict[str, str], workdir: Path, profile: Profile
) -> None:
    """Migrate, switch off Takt's own scheduled jobs (the hourly maintenance
    would find lost runs and hide whether the continuous detection does),
    and import the chaos jobs."""
    manage = [sys.executable, "manage.py"]
    _check([*manage, "migrate", "--noinput"], env, "manage.py migrate")
    url = env["DATABASE_URL"]
    _execute(url, "UPDATE takt_jobs_trigger SET enabled = false, active = false")
    path = workdir / "jobs.json"
    start_at = datetime.now(UTC).replace(microsecond=0)
    path.write_text(json.dumps(jobdefs.definitions(profile.jobs, start_at=start_at), indent=1))
    _check([*manage, "import_jobs", str(path)], env, "manage.py import_jobs")


def _check(argv: list[str], env: dict[str, str], what: str) -> None:
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def _start_all(slots: list[Slot]) -> None:
    for slot in slots:
        slot.start()
    for slot in slots:
        assert slot.proc is not None
        slot.proc.wait_for(READY[slot.kind], STARTUP_TIMEOUT_S)


def _wait_supervised(chaos: Chaos, seconds: float) -> None:
    """Sleep `seconds`, restarting the slots that are due meanwhile."""
    deadline = time.monotonic() + max(0.0, seconds)
    while time.monotonic() < deadline:
        for slot in chaos.slots:
            crashed, orphans = slot.supervise()
            if crashed:
                chaos.log_kill("crashed", slot=slot.name, detail=crashed)
            if orphans:  # their runs die here: the death map needs them
                chaos.log_kill("kill orphans", slot=slot.name, pids=orphans)
        time.sleep(0.1)


def _play(chaos: Chaos, events: list[Event], cluster: PrivateCluster, server: RedisServer) -> None:
    """Each event at its time; restarts by supervision. Ends when every
    event is done and every process is back."""
    rng = random.Random(chaos.seed + 1)  # which pool child: chosen at the time, still seeded
    began = time.monotonic()
    helpers: list[threading.Thread] = []
    for event in events:
        _wait_supervised(chaos, began + event.at_s - time.monotonic())
        helpers += _act(chaos, event, rng, cluster, server)
    for thread in helpers:
        thread.join(timeout=120)
    _wait_supervised(chaos, chaos.profile.chaos_s - (time.monotonic() - began))
    while not all(slot.alive() for slot in chaos.slots):
        _wait_supervised(chaos, 0.2)


def _act(
    chaos: Chaos, event: Event, rng: random.Random, cluster: PrivateCluster, server: RedisServer
) -> list[threading.Thread]:
    beats = [s for s in chaos.slots if s.kind == "beat"]
    workers = [s for s in chaos.slots if s.kind == "worker"]
    if event.action == "kill" and event.target == "child":
        return _kill_child(chaos, workers, event.index, rng)
    if event.action == "kill":
        slot = (beats if event.target == "beat" else workers)[event.index]
        if not slot.alive():
            chaos.log_kill("skip", slot=slot.name, detail="already down")
            return []
        main_only = event.target == "worker-main"
        pids = slot.kill(event.restart_after_s, main_only=main_only)
        detail: dict[str, Any] = {
            "slot": slot.name,
            "pids": pids,
            "back_after_s": event.restart_after_s,
        }
        if slot.kind == "worker":
            detail["worker"] = f"chaos-w{event.index}"
        chaos.log_kill("kill worker main" if main_only else f"kill {slot.kind}", **detail)
        return []
    if event.action == "beats_down":
        pids = [pid for slot in beats for pid in slot.kill(event.restart_after_s)]
        chaos.log_kill("beats down", pids=pids, back_after_s=event.restart_after_s)
        return []
    if event.action == "redis_restart":
        server.kill()
        server.start()
        chaos.log_kill("redis restart", detail="no persistence: every key and message gone")
        return []
    assert event.action == "db_outage"

    def outage() -> None:
        cluster.stop()
        chaos.log_kill("database down", detail="pg_ctl stop -m fast")
        time.sleep(event.restart_after_s)
        cluster.start()
        chaos.log_kill("database up")

    thread = threading.Thread(target=outage, name="db-outage")
    thread.start()
    return [thread]


def _kill_child(
    chaos: Chaos, workers: list[Slot], index: int, rng: random.Random
) -> list[threading.Thread]:
    """SIGKILL one pool child, one that is executing a run (an idle
    child's death tests nothing): of worker `index` if it has one, else of
    any worker. The load comes in waves at whole seconds, so it waits up to
    CHILD_WAIT_S for an execution, then takes an idle child of `index`."""
    deadline = time.monotonic() + CHILD_WAIT_S
    order = [workers[index]] + [w for w in workers if w is not workers[index]]
    while True:
        executing = executing_pids(chaos.side_channel)
        found = [(w, p) for w in order for p in w.pids()[1:] if p in executing]
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if found:
        slot, pid = rng.choice([f for f in found if f[0] is found[0][0]])
    elif workers[index].pids()[1:]:
        slot, pid = workers[index], rng.choice(workers[index].pids()[1:])
    else:
        chaos.log_kill("skip", slot=workers[index].name, detail="no pool child to kill")
        return []
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return []
    busy = "executing" if found else "idle"
    chaos.log_kill(
        "kill child", slot=slot.name, pids=[pid], worker=f"chaos-w{slot.index}", busy=busy
    )
    return []


def _fetch(url: str, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(sql, params)
        names = [d.name for d in cur.description or ()]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    # In UTC, whatever the session's zone: the report prints them.
    for row in rows:
        for name, value in row.items():
            if isinstance(value, datetime):
                row[name] = value.astimezone(UTC)
    return rows


def _execute(url: str, sql: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


def _commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
