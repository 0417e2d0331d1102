"""Running a command job's process on a worker (F-02 `command`, wait mode).

`run_command` is what runs/execution.py calls in place of a callable's
function, inside the same frame: the job's timeout (Celery's soft time
limit) and an operator's cancel raise in it as they do in a function. It

* starts the program through the supervisor (runs/supervise.py), the
  leader of a new session and process group, which starts the program in
  that group (no shell unless the job says `shell`) at the job's `nice`,
  with stdin closed, the worker's environment plus the job's `env` and the
  run's facts as TAKT_* variables (`command_env`). The supervisor kills
  the group when this pool process dies, however it dies;
* reads stdout and stderr as they come, line by line, into the run's
  output, each stderr line marked `[stderr] ` (the pure core's
  STREAM_MARKERS), so the two interleave in the order they were written;
  the output is capped by TAKT_OUTPUT_LIMIT_BYTES with a note of how much
  was cut, while the pipes are still drained;
* on the timeout or a cancel kills the whole process group: SIGTERM, then
  SIGKILL once TAKT_COMMAND_KILL_GRACE_SECONDS are over to whatever is
  left (grandchildren included, as long as they stayed in the group), then
  lets the stop go on;
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
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from django.conf import settings

from jobs.core.command import STREAM_MARKERS, CommandSpec, exit_outcome
from jobs.core.cron import TriggerError
from jobs.specs import command_spec
from runs.context import JobContext, JobFailed

# The supervisor between the worker and the program (runs/supervise.py).
SUPERVISOR = str(Path(__file__).with_name("supervise.py"))
READ_CHUNK = 65536
# A line longer than this without its newline goes to the output in pieces.
MAX_LINE = 65536


class CommandNotStarted(Exception):
    """The program could not be started (result code -1001)."""


def spec_at_start(job: Any) -> CommandSpec:
    """A command job's spec as it stands on this worker now; one that no
    longer holds here (its working directory gone, say) could not start."""
    try:
        return command_spec(job, is_dir=os.path.isdir)
    except TriggerError as exc:
        raise CommandNotStarted(
            f"the command could not be started: {exc.field}: {exc.message}"
        ) from None


def command_env(ctx: JobContext, spec: CommandSpec) -> dict[str, str]:
    """The command's environment: the worker's, the job's additions, and
    the run's facts: TAKT_RUN_ID, TAKT_JOB_ID, TAKT_JOB_NAME, TAKT_TRIGGER,
    TAKT_PARAMS (the run's params as JSON), TAKT_PARAM_<NAME> for each
    param (a string as it is, anything else as JSON) and TAKT_FENCING_TOKEN
    (F-113; left out when the context has none)."""
    env = {**os.environ, **spec.env}
    env.update(
        TAKT_RUN_ID=str(ctx.run_id),
        TAKT_JOB_ID=str(ctx.job_id),
        TAKT_JOB_NAME=ctx.name,
        TAKT_TRIGGER=ctx.trigger,
        TAKT_PARAMS=json.dumps(ctx.params),
    )
    if ctx.fencing_token is not None:
        env["TAKT_FENCING_TOKEN"] = str(ctx.fencing_token)
    for name, value in ctx.params.items():
        key = "TAKT_PARAM_" + "".join(c if c.isalnum() else "_" for c in str(name)).upper()
        env[key] = value if isinstance(value, str) else json.dumps(value)
    return env


def run_command(ctx: JobContext, spec: CommandSpec) -> int:
    """Run `spec` to its end (module docstring). Returns the exit code
    when it counts as success; raises JobFailed (another code, or killed by
    a signal), CommandNotStarted, or whatever stopped it (the timeout, a
    cancel) once the process group is gone."""
    process = start_command(ctx, spec)
    returncode = follow(process, ctx)
    return exit_code(returncode, spec, ctx)


def start_command(
    ctx: JobContext, spec: CommandSpec, *, label: str = ""
) -> subprocess.Popen[bytes]:
    """Start the program through the supervisor and log its first line
    (`label`, default the command line, and the pid); returns the
    supervisor's process (the group's leader) once the program runs.
    Raises CommandNotStarted. The supervisor stops the program when the
    calling *thread* ends (the parent-death signal follows the thread that
    forked), so call it from the thread that follows the program."""
    read_fd, write_fd = os.pipe()
    try:
        process = subprocess.Popen(
            [
                sys.executable,
                "-S",
                "-E",
                SUPERVISOR,
                str(write_fd),
                str(os.getpid()),
                str(spec.nice),
                str(settings.TAKT_COMMAND_KILL_GRACE_SECONDS),
                "1" if spec.shell else "0",
                "--",
                *spec.argv,
            ],
            cwd=spec.cwd or None,
            env=command_env(ctx, spec),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed as a whole
            pass_fds=(write_fd,),
        )
    except OSError as exc:  # the working directory went away, say
        os.close(read_fd)
        raise CommandNotStarted(
            f"the command could not be started: {exc.strerror or exc} ({spec.describe()})"
        ) from exc
    finally:
        os.close(write_fd)
    started = _status(read_fd)
    if not started.startswith("ok "):
        process.wait()
        _close(process)
        reason = started.removeprefix("error ") or "the supervisor exited"
        raise CommandNotStarted(f"the command could not be started: {reason} ({spec.describe()})")
    ctx.log(f"{label or spec.describe()}  (pid {started.split()[1]})")
    return process


def follow(
    process: subprocess.Popen[bytes],
    ctx: JobContext,
    *,
    check: Callable[[], None] | None = None,
    every_s: float = 0.5,
) -> int:
    """Copy the program's output into `ctx` until it has exited and its
    pipes are closed; returns its exit code (negative: the signal that
    killed it). `check()` is called at least every `every_s` seconds and
    may raise to stop it. Whatever raises in here (`check`, the timeout, a
    cancel) kills the group first. The pipes are closed either way."""
    try:
        _pump(process, ctx, check=check, every_s=every_s)
        return process.wait()
    except BaseException:
        kill_group(process, grace_s=settings.TAKT_COMMAND_KILL_GRACE_SECONDS)
        ctx.log(f"the command was stopped (exit {process.returncode})")
        raise
    finally:
        _close(process)


def exit_code(returncode: int, spec: CommandSpec, ctx: JobContext) -> int:
    """The exit as the run's end: sets the result code; raises JobFailed
    for a code outside the job's success codes or a signal."""
    outcome = exit_outcome(returncode, spec.success_codes)
    ctx.set_result_code(outcome.code)
    if not outcome.succeeded:
        raise JobFailed(outcome.message)
    return returncode


def _pump(
    process: subprocess.Popen[bytes],
    ctx: JobContext,
    *,
    check: Callable[[], None] | None,
    every_s: float,
) -> None:
    """Copy stdout and stderr into the output line by line until both
    close, calling `check` between reads."""
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
            if check is not None:
                check()
            for key, _ in selector.select(timeout=every_s if check is not None else None):
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
    """Stop the command: SIGTERM to its process group; the supervisor (the
    group's leader) SIGKILLs what is left of the group once the grace is
    over and exits. Should it not have, SIGKILL to the group a second
    later. Then reap it. The caller closes its pipes."""
    pgid = process.pid  # the session leader: its pid is the group's id
    if _signal_group(pgid, signal.SIGTERM):
        try:
            process.wait(timeout=grace_s + 1)
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
    process.wait()


def _signal_group(pgid: int, signum: int) -> bool:
    """Send `signum` to the group; False when it is empty."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True


def _status(fd: int) -> str:
    """The supervisor's one status line ("ok <pid>" or "error <reason>");
    "" when it exited without one."""
    with os.fdopen(fd, "rb") as status:
        return status.readline().decode(errors="replace").strip()


def _close(process: subprocess.Popen[Any]) -> None:
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
