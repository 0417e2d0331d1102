"""The process a script job's run executes (F-02 `script`): started by
runs/scripts.py, through the command supervisor, as

    python -P script_host.py <folder>

where <folder> holds `script.py` (the job's source) and `context.json`
(its name, description, trigger, params, run and job ids). Standard
library only: it runs without Django.

It makes the `job` object a job callable gets (runs/context.py) and runs
the source with `job` in its globals:

* `job.log(msg)` prints a line (flushed at once: the worker reads it live);
* `job.fail(msg)` ends the run `failed` with that message;
* an uncaught exception prints its traceback (on stderr) and fails the run
  with "<Type>: <message>", as a callable's would;
* the end of the source (or sys.exit(0)) ends it `succeeded`; sys.exit(N)
  another code fails it with "the script exited with code N".

How it failed goes to <folder>/outcome.json ({"message": ...}), which the
worker reads once the process has ended.
"""

from __future__ import annotations

import json
import linecache
import os
import sys
import traceback
from typing import Any, NoReturn

FILENAME = "<script>"  # as jobs.core.script.SCRIPT_FILENAME


class JobFailed(Exception):
    """Raised by job.fail(msg)."""


class ScriptJob:
    """The `job` a script sees: as a callable's context, without progress()
    and set_result_code() (the run's result code is the exit code)."""

    def __init__(self, context: dict[str, Any]) -> None:
        self.name: str = context["name"]
        self.description: str = context["description"]
        self.trigger: str = context["trigger"]
        self.params: dict[str, Any] = context["params"]
        self.run_id: int = context["run_id"]
        self.job_id: int = context["job_id"]
        self.fencing_token: int | None = context.get("fencing_token")

    def log(self, message: object) -> None:
        """A line (or lines) in the run's output."""
        print(str(message), flush=True)

    def fail(self, message: str) -> NoReturn:
        """End the run as failed with `message`."""
        raise JobFailed(str(message))

    def __repr__(self) -> str:
        return f"<job #{self.job_id} {self.name!r}, run #{self.run_id} ({self.trigger})>"


def _fail(folder: str, message: str) -> NoReturn:
    with open(os.path.join(folder, "outcome.json"), "w", encoding="utf-8") as out:
        json.dump({"message": message}, out)
    sys.stdout.flush()
    sys.exit(1)


def main(folder: str) -> None:
    with open(os.path.join(folder, "context.json"), encoding="utf-8") as src:
        job = ScriptJob(json.load(src))
    with open(os.path.join(folder, "script.py"), encoding="utf-8") as src:
        source = src.read()
    # Tracebacks show the script's lines as the editor numbers them.
    lines = source.splitlines(keepends=True)
    linecache.cache[FILENAME] = (len(source), None, lines, FILENAME)
    code = compile(source, FILENAME, "exec", dont_inherit=True)
    namespace = {"__name__": "__main__", "__builtins__": __builtins__, "job": job}
    try:
        exec(code, namespace)
    except JobFailed as exc:
        _fail(folder, str(exc))
    except SystemExit:
        raise
    except BaseException as exc:  # KeyboardInterrupt too: the run failed
        traceback.print_exc()
        sys.stderr.flush()
        _fail(folder, f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main(sys.argv[1])
