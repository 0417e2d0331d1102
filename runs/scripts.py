"""Running a script job on a worker (F-02 `script`).

A script run is a command run (runs/commands.py) whose program is the
worker's Python running runs/script_host.py on a temporary folder that
holds the job's source and its run's context. So it has everything a
command has: its own process group under the supervisor (killed when the
worker's pool process dies), output read live line by line into the run's
output with the byte cap, the job's timeout and a cancel killing the whole
group, the run's facts as TAKT_* variables. The host gives the source the
`job` object a callable gets (job.log, job.fail, job.params,
job.trigger …); how it failed comes back in the folder's outcome.json.
The folder is deleted when the run ends, however it ends.

`script_target` is what runs/execution.py calls for a script job: while
TAKT_SCRIPTS_ENABLED is off, or when the stored source no longer
compiles, the run fails at once with CommandNotStarted (result code
-1001) and nothing runs.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from jobs.core.command import CommandSpec
from jobs.core.cron import TriggerError
from jobs.core.script import check_script, script_exit
from jobs.models import Job
from jobs.validation import SCRIPTS_OFF
from runs.commands import CommandNotStarted, follow, start_command
from runs.context import JobContext, JobFailed

HOST = str(Path(__file__).with_name("script_host.py"))


def script_target(job: Any) -> Callable[[JobContext], None]:
    """The call that runs `job`'s script with a run's context. Raises
    CommandNotStarted when scripts are off or its source does not compile."""
    if not settings.TAKT_SCRIPTS_ENABLED:
        raise CommandNotStarted(f"the script was not run: {SCRIPTS_OFF}")
    # Read here, for script runs only: the start of every run loads the
    # job's other fields in one statement (runs/statements.py) without it.
    source = Job.objects.filter(pk=job.pk).values_list("script", flat=True).first() or ""
    try:
        check_script(source)
    except TriggerError as exc:
        raise CommandNotStarted(f"the script was not run: {exc.field}: {exc.message}") from None
    description = job.description
    return lambda ctx: run_script(ctx, source, description=description)


def run_script(ctx: JobContext, source: str, *, description: str = "") -> None:
    """Run `source` to its end in its own process. Returns when it
    succeeded; raises JobFailed (job.fail(), an uncaught exception, another
    exit code, a signal), CommandNotStarted, or whatever stopped it (the
    timeout, a cancel) once its process group is gone."""
    folder = Path(tempfile.mkdtemp(prefix=f"takt-script-{ctx.run_id}-"))
    try:
        (folder / "script.py").write_text(source, encoding="utf-8")
        context = {
            "name": ctx.name,
            "description": description,
            "trigger": ctx.trigger,
            "params": ctx.params,
            "run_id": ctx.run_id,
            "job_id": ctx.job_id,
            "fencing_token": ctx.fencing_token,
        }
        (folder / "context.json").write_text(json.dumps(context), encoding="utf-8")
        spec = CommandSpec(
            argv=(sys.executable, "-P", HOST, str(folder)),
            env={"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"},
        )
        process = start_command(ctx, spec, label=f"script of job #{ctx.job_id} started")
        returncode = follow(process, ctx)
        failure = _failure(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    outcome = script_exit(returncode)
    ctx.set_result_code(outcome.code)
    if failure is not None:
        raise JobFailed(failure)
    if not outcome.succeeded:
        raise JobFailed(outcome.message)


def _failure(folder: Path) -> str | None:
    """The message of a job.fail() or an uncaught exception, if the host
    wrote one."""
    try:
        data = json.loads((folder / "outcome.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    message = data.get("message") if isinstance(data, dict) else None
    return str(message) if message is not None else None
