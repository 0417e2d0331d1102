"""Testing helpers for your own test suite (F-96), without a worker or a beat.

    from jobs.testing import fire_times, run_inline, tick

    def test_the_nightly_report(db, takt):          # takt: jobs.pytest_plugin
        run = run_inline(Job.objects.get(key="nightly"), params={"day": "2027-01-04"})
        assert run.status == "succeeded" and "42 rows" in run.output

    def test_it_runs_on_weekdays_at_nine():
        assert fire_times("0 9 * * MON-FRI", count=2, timezone="Europe/Berlin",
                          after="2027-01-01T00:00:00+01:00") == [
            "2027-01-01T09:00:00+01:00", "2027-01-04T09:00:00+01:00"]

* `run_inline` records a run of a job and runs it in this process, as a
  worker would (the job's lock, timeout handling, output, result, retry
  bookkeeping, heartbeat), at the times you give; it returns the Run.
* `fire_times` gives a job's, a trigger's or a cron expression's next fire
  times, as ISO strings in the trigger's zone (or datetimes).
* `tick` is one beat tick at a frozen `now`: the runs it records (queued for
  a worker, or run inline with `run=True`); every call a whole tick at
  `now`, whatever the real clock did, with Takt's built-in jobs ("Takt
  maintenance") held unless `builtin_jobs=True`.
* `private_redis` starts a redis-server of the test's own (no persistence,
  a free port) and `takt_settings` points Takt at it, so a test never
  touches the Redis of `make run` or production. jobs.pytest_plugin has
  them as fixtures.

Takt's own test suite uses `private_redis` and `takt_settings` for its
session (tests/conftest.py) and these helpers in
tests/integration/test_testing_helpers.py.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import redis
from celery import current_app
from django.conf import settings
from django.db.models import Q
from django.test.utils import override_settings
from django.utils import timezone as dj_timezone
from kombu import pools as kombu_pools

from jobs.core import triggers as core
from jobs.models import Job, Trigger
from jobs.registry import BUILTIN_KEY_PREFIX
from jobs.specs import trigger_spec
from runs.execution import execute
from runs.models import Run, RunStatus
from runs.services import create_run
from runs.tick import reset_periodic_passes, run_tick

Moment = datetime | str


class RedisMissing(RuntimeError):
    """redis-server is not installed."""


def _moment(value: Moment | None) -> datetime:
    if value is None:
        return dj_timezone.now()
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if dj_timezone.is_naive(moment):
        raise ValueError(f"{value!r}: give a time with its UTC offset (or tzinfo)")
    return moment


# --- fire times -------------------------------------------------------------------


def fire_times(
    what: Job | Trigger | str,
    *,
    count: int = 5,
    after: Moment | None = None,
    timezone: str | None = None,
    as_strings: bool = True,
) -> list[Any]:
    """The next `count` fire times after `after` (default now) of a job (all
    its enabled triggers, merged), a trigger, or a cron expression (in
    `timezone`, default the server's), in each trigger's own zone: ISO
    strings, or datetimes with `as_strings=False`. Raises TriggerError for
    an expression Takt refuses, naming the field."""
    start = _moment(after)
    if isinstance(what, str):
        zone = core.canonical_timezone(timezone or settings.TIME_ZONE)
        specs: list[core.TriggerSpec] = [core.CronSpec(core.normalize_cron(what), zone)]
    elif isinstance(what, Trigger):
        specs = [trigger_spec(what)]
    else:
        specs = [trigger_spec(t) for t in what.triggers.filter(enabled=True)]
    times = sorted(
        (t for spec in specs for t in core.compute_fire_times(spec, after=start, count=count)),
        key=lambda t: t.timestamp(),
    )[:count]
    return [t.isoformat() for t in times] if as_strings else times


# --- runs -------------------------------------------------------------------------


def _clock(times: Sequence[Moment] | Moment | None) -> Callable[[], datetime]:
    if times is None:
        return dj_timezone.now
    if isinstance(times, datetime | str):
        frozen = _moment(times)
        return lambda: frozen
    moments = [_moment(t) for t in times]
    state = {"i": 0}

    def clock() -> datetime:  # each reading the next time; the last one repeats
        moment = moments[min(state["i"], len(moments) - 1)]
        state["i"] += 1
        return moment

    return clock


def run_inline(
    job: Job,
    *,
    trigger: str = "manual",
    params: dict[str, Any] | None = None,
    now: Sequence[Moment] | Moment | None = None,
) -> Run:
    """Record a run of `job` (as "Run now" or the given trigger: manual,
    api, schedule, ...) with `params` over the job's own, as enqueue_job
    does, and run it here, as a worker does.
    `now`: one time (the run is recorded, starts and ends then), a list
    (recorded and started at the first, each later clock reading the next:
    the end, ...) or None (the real clock). Returns the
    Run, reloaded: status, output, result, result_code, error. Runs that a
    run starts (a parent's children, dependants) are recorded and sent to
    the broker, not run here: run them with `run_inline` or `tick`."""
    clock = _clock(now)
    recorded_at = _clock(now)()  # recorded at the first time, started at it too
    merged = None if params is None else {**job.params, **params}  # as enqueue_job
    run = create_run(job, trigger=trigger, now=recorded_at, params=merged)
    if run.status == RunStatus.QUEUED:
        execute(run.pk, worker="takt-testing", clock=clock)
    return Run.objects.get(pk=run.pk)


def tick(now: Moment, *, run: bool = False, builtin_jobs: bool = False) -> list[Run]:
    """One beat tick with its clock frozen at `now`: the runs it records for
    the fire times due then (in the order recorded). `run=True` runs the
    queued ones inline (at `now`) and returns them reloaded.

    Each call is a whole tick at `now`, whatever the real clock did since
    the one before: the beat's periodic passes (lifting the pauses that ran
    out, the lost-run check, ...), which a beat runs at most every few
    seconds, all run (runs.tick.reset_periodic_passes). Takt's built-in
    jobs (builtin_job_ids: the hourly "Takt maintenance") are held, their
    fire times staying due, unless `builtin_jobs=True`: a test sees the
    runs of its own jobs only."""
    moment = _moment(now)
    held = frozenset() if builtin_jobs else builtin_job_ids()
    last = Run.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    reset_periodic_passes()
    run_tick(now=moment, hold_jobs=held)
    runs = list(Run.objects.filter(pk__gt=last).order_by("pk"))
    if not run:
        return runs
    for recorded in runs:
        if recorded.status == RunStatus.QUEUED:
            execute(recorded.pk, worker="takt-testing", clock=lambda: moment)
    return list(Run.objects.filter(pk__in=[r.pk for r in runs]).order_by("pk"))


def builtin_job_ids() -> frozenset[int]:
    """The ids of Takt's built-in jobs, which its migrations make and which
    the sync of jobs declared in code leaves alone (jobs.declared): the
    code-managed jobs without a key ("Takt maintenance", enabled, hourly)
    or with a key starting with "takt." ("Takt operations", never
    scheduled). The disabled "Hello world" is not one: it is an example
    to enable."""
    builtin = Q(key__isnull=True) | Q(key__startswith=BUILTIN_KEY_PREFIX)
    return frozenset(Job.objects.filter(builtin, code_managed=True).values_list("pk", flat=True))


# --- Redis of the test's own -------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def private_redis(workdir: Path | str, *, port: Callable[[], int] = _free_port) -> Iterator[str]:
    """A redis-server of its own on a free port, without persistence, for
    the block; yields its URL. `port` picks the port (by default one the
    system calls free); when the server cannot bind it (something took the
    port meanwhile), another is picked, up to five times. Raises
    RedisMissing (saying what to install) or RuntimeError when it does not
    answer within 10 s."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RedisMissing("redis-server is not installed: apt-get install redis-server")
    attempts = 5
    for _ in range(attempts):
        chosen = port()
        command = [binary, "--port", str(chosen), "--bind", "127.0.0.1", "--save", ""]
        command += ["--appendonly", "no", "--dir", str(workdir)]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"redis://127.0.0.1:{chosen}/0"
        try:
            if _answers(url, proc):
                break
        except BaseException:
            proc.kill()
            proc.wait(timeout=10)
            raise
        proc.kill()  # the port was taken: it exits, or is stopped here
        proc.wait(timeout=10)
    else:
        raise RuntimeError(f"redis-server did not start ({attempts} ports tried)")
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _answers(url: str, proc: subprocess.Popen[bytes]) -> bool:
    """Wait until the redis-server at `url` answers (True: it is `proc`) or
    `proc` exits or another process answers there (False); RuntimeError if
    none of these within 10 s."""
    client = redis.Redis.from_url(url)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                # Ours, not a server that held the port before it.
                return bool(client.info("server")["process_id"] == proc.pid)
            except redis.ConnectionError:
                if proc.poll() is not None:
                    return False
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server at {url} did not answer in 10 s") from None
                time.sleep(0.05)
    finally:
        client.close()


@contextmanager
def takt_settings(
    redis_url: str, *, broker_url: str | None = None, **overrides: Any
) -> Iterator[None]:
    """Point Takt (its locks, its broker) at `redis_url` for the block, with
    the file watcher off; `broker_url` (say a RabbitMQ's amqp://…) takes
    the runs' messages instead of that Redis; `overrides` are more
    settings."""
    before = current_app.conf.broker_url
    broker = broker_url or redis_url
    with override_settings(
        REDIS_URL=redis_url,
        CELERY_BROKER_URL=broker,
        REDIS_SENTINEL=None,
        TAKT_WATCH_FILES=False,
        **overrides,
    ):
        current_app.conf.broker_url = broker
        _new_broker_pool()
        try:
            yield
        finally:
            current_app.conf.broker_url = before
            _new_broker_pool()


def _new_broker_pool() -> None:
    """Drop the pooled broker connections (they are to the other Redis):
    kombu's pools, which it keeps per broker URL for the whole process, and
    the Celery app's hold on them, as Celery drops them after a fork; the
    next message opens a connection to the broker_url now set."""
    kombu_pools.reset()
    current_app._pool = None
    current_app.amqp._producer_pool = None
