"""Job callables used by the tests (registered by tests/conftest.py in the
test process, and by TAKT_JOB_MODULES in worker processes), and one plain
Celery task, as django-celery-beat users have them (`tests.celery_echo`)."""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import shared_task
from django.conf import settings

from jobs import takt_job


@takt_job("tests.echo")
def echo(job: Any) -> dict[str, Any]:
    job.log(f"hello from {job.name}")
    job.log(f"trigger={job.trigger}")
    job.log(f"params={sorted(job.params.items())}")
    return {"echo": job.params}


@shared_task(name="tests.celery_echo")
def celery_echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """A Celery task, not a @takt_job function: a job targeting it is called
    with the job's args and the run's params (Job.args)."""
    return {"args": list(args), "kwargs": kwargs}


@shared_task(name="tests.routed_echo", queue="reports")
def routed_echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """A Celery task with its own queue: a job targeting it (on the default
    queue) sends its runs there."""
    return {"args": list(args), "kwargs": kwargs}


@shared_task(name="tests.autoretry", autoretry_for=(ValueError,), max_retries=5)
def autoretry(*args: Any, **kwargs: Any) -> None:
    """A Celery task that retries itself on ValueError (autoretry_for): run
    by Takt, Takt's retry policy decides instead."""
    raise ValueError("the task's own retry would try again")


@shared_task(name="tests.self_retry", bind=True, max_retries=3)
def self_retry(self: Any) -> None:
    """A bound Celery task calling self.retry(): run by Takt, one failure."""
    raise self.retry(exc=KeyError("asked for a retry"), countdown=60)


@takt_job("tests.log_off", allowed_during_maintenance=True)
def log_off(job: Any) -> str:
    """An operator's own log-off hook: on the maintenance allow-list (F-29)."""
    job.log("logging everybody off")
    return "logged off"


@takt_job("tests.result_code")
def result_code(job: Any) -> int:
    """Ends with the result code in params['code'] (F-32), and logs the value
    its own result variable holds while it runs (params['variable'])."""
    from jobs.models import ResultVariable

    name = job.params.get("variable")
    if name:
        value = ResultVariable.objects.get(name=name).value
        job.log(f"{name} is {value} while it runs")
    code = int(job.params.get("code", 0))
    job.set_result_code(code)
    return code


@takt_job("tests.count")
def count(job: Any) -> int:
    """Counts its executions in Redis under params['key'] (to catch doubles)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    n = int(client.incr(job.params.get("key", "takt-test:count")))
    time.sleep(float(job.params.get("seconds", 0)))
    job.log(f"execution {n}")
    return n


@takt_job("tests.sleep")
def sleep(job: Any) -> str:
    seconds = float(job.params.get("seconds", 1))
    job.log(f"sleeping {seconds} s")
    time.sleep(seconds)
    job.log("woke up")
    return "slept"


@takt_job("tests.fail")
def fail(job: Any) -> None:
    job.log("about to fail")
    job.fail(job.params.get("message", "failed on purpose"))


@takt_job("tests.raise")
def explode(job: Any) -> None:
    raise RuntimeError("exploded on purpose")


@takt_job("tests.loop")
def loop(job: Any) -> str:
    """Loops for params['seconds'] (default 60) in short sleeps; its
    `finally` logs, to show that a stop lets it clean up."""
    seconds = float(job.params.get("seconds", 60))
    job.log(f"looping {seconds} s in process {os.getpid()}")
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        job.log("cleaned up")
    return "looped"


@takt_job("tests.stubborn")
def stubborn(job: Any) -> str:
    """Catches every exception (the stop included) and loops on for
    params['seconds'] (default 60)."""
    job.log(f"stubborn in process {os.getpid()}")
    deadline = time.monotonic() + float(job.params.get("seconds", 60))
    while time.monotonic() < deadline:
        try:
            time.sleep(0.05)
        except BaseException as exc:  # what a job should never do
            job.log(f"ignored {type(exc).__name__}")
    return "never stopped"


@takt_job("tests.cancel_self")
def cancel_self(job: Any) -> str:
    """Cancels its own run while it runs, as an operator would, then goes on
    and returns: its end then races the cancel that came first."""
    from django.utils import timezone

    from runs.cancel import cancel_run

    job.log("before the cancel")
    cancel_run(job.run_id, by=job.params.get("by", "someone"), now=timezone.now())
    job.log("after the cancel")
    return "returned"


@takt_job("tests.progress")
def progress(job: Any) -> int:
    """Counts to params['steps'] (5), a log line and job.progress() per
    step, sleeping params['step_s'] (0) before each. With params['hold_key']
    it stops after params['hold_after'] steps until that Redis list gets an
    item (at most 20 s), so a test can look at the run half-way."""
    steps = int(job.params.get("steps", 5))
    pause_s = float(job.params.get("step_s", 0))
    hold_key, hold_after = job.params.get("hold_key"), int(job.params.get("hold_after", 0))
    for i in range(1, steps + 1):
        time.sleep(pause_s)
        job.log(f"step {i} of {steps}")
        job.progress(i, steps, note=f"step {i}")
        if hold_key and i == hold_after:
            redis.Redis.from_url(settings.REDIS_URL).blpop([hold_key], timeout=20)
    return steps


@takt_job("tests.bad_progress")
def bad_progress(job: Any) -> None:
    job.progress(*job.params.get("args", ["many"]))


@takt_job("tests.loop_first")
def loop_first(job: Any) -> int:
    """Loops for params['seconds'] (default 60) on its first execution only,
    counted in Redis under params['key']; every later one returns at once:
    a long run to cancel, then runs that succeed."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    n = int(client.incr(job.params.get("key", "takt-test:loop-first")))
    if n == 1:
        job.log(f"execution 1: looping {job.params.get('seconds', 60)} s")
        deadline = time.monotonic() + float(job.params.get("seconds", 60))
        while time.monotonic() < deadline:
            time.sleep(0.05)
    job.log(f"execution {n}: done")
    return n


@takt_job("tests.append")
def append(job: Any) -> str:
    """Appends "<run id> <pid>" to the file params['path'] (O_APPEND: one
    line per execution, a side channel outside Takt's tables and Redis),
    then sleeps params['seconds'] (default 0), or, with params['until'],
    waits (at most 120 s) until that file exists: the test ends the run
    when the state it needs is there, not after a guessed time."""
    fd = os.open(job.params["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job.run_id} {os.getpid()}\n".encode())
    finally:
        os.close(fd)
    if "until" in job.params:
        deadline = time.monotonic() + 120
        while not os.path.exists(job.params["until"]) and time.monotonic() < deadline:
            time.sleep(0.02)
    else:
        time.sleep(float(job.params.get("seconds", 0)))
    return "appended"


@takt_job("tests.fence")
def fence(job: Any) -> int | None:
    """Returns the run's fencing token (F-113)."""
    return job.fencing_token


@takt_job("tests.steps")
def steps(job: Any) -> int:
    """Writes a line per step, "<run id> <pid> step <n> <wall time>", to the
    file params['path'] (O_APPEND, outside Takt's tables and Redis) every
    params['step_s'] seconds (default 0.05) for params['seconds'] (default
    60), and on its way out, however it ends, "<run id> <pid> end <what
    ended it> <wall time>": a test sees when the body stopped."""
    path, step_s = job.params["path"], float(job.params.get("step_s", 0.05))

    def line(text: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{job.run_id} {os.getpid()} {text} {time.time():.6f}\n".encode())
        finally:
            os.close(fd)

    deadline = time.monotonic() + float(job.params.get("seconds", 60))
    n, ended = 0, "returned"
    try:
        while time.monotonic() < deadline:
            n += 1
            line(f"step {n}")
            time.sleep(step_s)
    except BaseException as exc:
        ended = type(exc).__name__
        raise
    finally:
        line(f"end {ended}")
    return n


# docs/coordination.md's worked example: the nightly ERP import, whose
# steps run inside a maintenance window (so they are on the allow-list).
@takt_job("tests.erp_import", allowed_during_maintenance=True)
def erp_import(job: Any) -> int:
    """Imports params['rows'] rows: result code 200 when it imported some,
    0 when there was nothing new; fails when rows < 0 (no export found)."""
    rows = int(job.params.get("rows", 0))
    if rows < 0:
        job.fail("no ERP export found")
    job.log(f"imported {rows} rows")
    job.set_result_code(200 if rows else 0)
    return rows


@takt_job("tests.erp_transform", allowed_during_maintenance=True)
def erp_transform(job: Any) -> str:
    job.log("transformed the imported rows")
    return "transformed"
