"""Running a command job's process on a worker (F-02 `command`, wait mode).

`run_command` is what runs/execution.py calls in place of a callable's
function, inside the same frame: the job's timeout (Celery's soft time
limit) and an operator's cancel raise in it as they do in a function. It

* starts the program as the leader of its own session and process group
  (no shell unless the job says `shell`; `nice` through coreutils' nice),
  with stdin closed, the worker's environment plus the job's `env` and the
  run's facts as TAKT_* variables (`command_env`);
* reads stdout and stderr as they come, line by line, into the run's
  output, each stderr line marked `[stderr] ` (the pure core's
  STREAM_MARKERS), so the two interleave in the order they were written;
  the output is capped by TAKT_OUTPUT_LIMIT_BYTES with a note of how much
  was cut, while the pipes are still drained;
* on the timeout or a cancel kills the whole process group: SIGTERM, then
  SIGKILL after TAKT_COMMAND_KILL_GRACE_SECONDS (grandchildren included,
  as long as they stayed in the group), then lets the stop go on;
* ends the run by the exit code (jobs.core.command.exit_outcome): the code
  is the run's result code; one outside the job's success codes fails it.

A program that cannot be started (not found, not executable, its working
directory gone) raises CommandNotStarted: the run fails with result code
-1001.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from typing import IO, Any

from django.conf import settings

from jobs.core.command import STREAM_MARKERS, CommandSpec, exit_outcome
from runs.context import JobContext, JobFailed

READ_CHUNK = 65536
# A line longer than this without its newline goes to the output in pieces.
MAX_LINE = 65536


class CommandNotStarted(Exception):
    """The program could not be started (result code -1001)."""


def command_env(ctx: JobContext, spec: CommandSpec) -> dict[str, str]:
    """The command's environment: the worker's, the job's additions, and
    the run's facts: TAKT_RUN_ID, TAKT_JOB_ID, TAKT_JOB_NAME, TAKT_TRIGGER,
    TAKT_PARAMS (the run's params as JSON) and TAKT_PARAM_<NAME> for each
    param (a string as it is, anything else as JSON)."""
    env = {**os.environ, **spec.env}
    env.update(
        TAKT_RUN_ID=str(ctx.run_id),
        TAKT_JOB_ID=str(ctx.job_id),
        TAKT_JOB_NAME=ctx.name,
        TAKT_TRIGGER=ctx.trigger,
        TAKT_PARAMS=json.dumps(ctx.params),
    )
    for name, value in ctx.params.items():
        key = "TAKT_PARAM_" + "".join(c if c.isalnum() else "_" for c in str(name)).upper()
        env[key] = value if isinstance(value, str) else json.dumps(value)
    return env


def run_command(ctx: JobContext, spec: CommandSpec) -> int:
    """Run `spec` to its end (module docstring). Returns the exit code
    when it counts as success; raises JobFailed (another code, or killed by
    a signal), CommandNotStarted, or whatever stopped it (the timeout, a
    cancel) once the process group is gone."""
    args: list[str] | str = spec.popen_args()
    if spec.nice:
        args = ["nice", "-n", str(spec.nice), *(["/bin/sh", "-c", args] if spec.shell else args)]
    try:
        process = subprocess.Popen(
            args,
            shell=spec.shell and not spec.nice,
            cwd=spec.cwd or None,
            env=command_env(ctx, spec),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed as a whole
            close_fds=True,
        )
    except OSError as exc:
        raise CommandNotStarted(
            f"the command could not be started: {exc.strerror or exc} ({spec.describe()})"
        ) from exc
    ctx.log(f"{spec.describe()}  (pid {process.pid})")
    try:
        _pump(process, ctx)
        returncode = process.wait()
    except BaseException:
        kill_group(process, grace_s=settings.TAKT_COMMAND_KILL_GRACE_SECONDS)
        ctx.log(f"the command was stopped (exit {process.returncode})")
        raise
    finally:
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    outcome = exit_outcome(returncode, spec.success_codes)
    ctx.set_result_code(outcome.code)
    if not outcome.succeeded:
        raise JobFailed(outcome.message)
    return returncode


def _pump(process: subprocess.Popen[bytes], ctx: JobContext) -> None:
    """Copy stdout and stderr into the output line by line until both
    close."""
    streams: dict[IO[bytes], str] = {}
    if process.stdout is not None:
        streams[process.stdout] = "stdout"
    if process.stderr is not None:
        streams[process.stderr] = "stderr"
    pending = {name: b"" for name in streams.values()}
    with selectors.DefaultSelector() as selector:
        for pipe, name in streams.items():
            selector.register(pipe, selectors.EVENT_READ, name)
        while selector.get_map():
            for key, _ in selector.select():
                name = key.data
                chunk = os.read(key.fd, READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    if pending[name]:
                        _log(ctx, name, pending[name])
                        pending[name] = b""
                    continue
                pending[name] = _lines(ctx, name, pending[name] + chunk)


def _lines(ctx: JobContext, name: str, data: bytes) -> bytes:
    """Log the complete lines of `data`; return the rest (cut at MAX_LINE)."""
    *lines, rest = data.split(b"\n")
    for line in lines:
        _log(ctx, name, line)
    while len(rest) > MAX_LINE:
        _log(ctx, name, rest[:MAX_LINE])
        rest = rest[MAX_LINE:]
    return rest


def _log(ctx: JobContext, name: str, line: bytes) -> None:
    text = line.decode("utf-8", errors="replace").rstrip("\r")
    ctx.log(STREAM_MARKERS[name] + text)


def kill_group(process: subprocess.Popen[Any], *, grace_s: float) -> None:
    """SIGTERM to the process's group; SIGKILL to what is left of it once
    `grace_s` has passed (a process that ignores SIGTERM, the leader's or a
    grandchild); the leader is reaped meanwhile. The caller closes its
    pipes."""
    pgid = process.pid  # the session leader: its pid is the group's id
    if not _signal_group(pgid, signal.SIGTERM):
        process.wait()
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        process.poll()  # reap the leader, so its exit does not keep the group alive
        if not _signal_group(pgid, 0):
            break
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    process.wait()


def _signal_group(pgid: int, signum: int) -> bool:
    """Send `signum` to the group (0: only look); False once it is empty."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True
