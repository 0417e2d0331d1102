"""What a job callable sees (F-03): its name, trigger, params, and
`log()`/`fail()`/`progress()`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobs.errors import InvalidInput
from runs.progress import Progress, check_progress

log = logging.getLogger("takt.job")


class JobFailed(Exception):
    """Raised by ``job.fail(msg)``: the run ends `failed` with that message."""


@dataclass
class JobContext:
    """Handed to a registered job function as its one argument.

    `on_change`, if set, is called after each `log()` and `progress()`
    (outside the context's lock): the worker's autosave uses it to save
    the output and progress soon, at most once a second (runs.autosave).

    `log_output` (TAKT_LOG_JOB_OUTPUT, off by default) also writes each
    kept line to the process log (logger `takt.job`), and none past the
    output limit: whatever a job prints (its environment, a secret, 35 MB
    of it) reaches the central logs only when the operator asked for it,
    and never more of it than the run keeps."""

    name: str
    description: str
    trigger: str
    params: dict[str, Any]
    run_id: int
    job_id: int
    output_limit: int = 256 * 1024
    log_output: bool = False
    on_change: Callable[[], None] | None = None
    result_code: int | None = None  # set by set_result_code (F-32)
    # The run's fencing token (F-113, runs/locks.py JobLock.fence): a number
    # that grows with every start of the job; None in a context built by hand.
    fencing_token: int | None = None
    _lines: list[str] = field(default_factory=list)
    _size: int = 0
    _dropped: int = 0
    _progress: Progress | None = None
    _version: int = 0  # counts changes, so a save can tell whether anything is new
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def log(self, message: object) -> None:
        """Append a line to the run's output (kept up to the output limit,
        TAKT_OUTPUT_LIMIT_BYTES, counted in UTF-8 bytes)."""
        line = str(message)
        size = len(line.encode("utf-8", errors="replace")) + 1  # with its newline
        with self._lock:
            self._version += 1
            kept = self._size + size <= self.output_limit
            first_dropped = not kept and not self._dropped
            if kept:
                self._lines.append(line)
                self._size += size
            else:
                self._dropped += size
        if self.log_output and (kept or first_dropped):
            extra = {"job_id": self.job_id, "run_id": self.run_id}
            if kept:
                log.info("%s", line, extra=extra)
            else:
                log.info(
                    "[output truncated: no more lines of run %s logged]", self.run_id, extra=extra
                )
        self._changed()

    def progress(self, done: int | float, total: int | float | None = None, note: str = "") -> None:
        """Report how far the run has come: `done` items of `total` (None
        when unknown), with a short `note` (cut to 500 characters). Shown
        live as a bar and a percentage on the run's page and stored in
        `Run.progress`; the last call wins. Cheap: call it per item.

        Raises InvalidInput (a ValueError) naming the argument: `done` and
        `total` must be numbers (not bool), done ≥ 0, total ≥ 0 (0: nothing
        to do), done ≤ total; `note` a string."""
        value = check_progress(done, total, note)
        with self._lock:
            self._version += 1
            self._progress = value
        self._changed()

    def set_result_code(self, code: int) -> None:
        """The run's result code (F-32), written to the job's result
        variable when it ends: e.g. 200 for "succeeded, something to do".
        Without it a run that returns has 0 and one that fails 1. Raises
        InvalidInput for anything but a whole number."""
        if not isinstance(code, int) or isinstance(code, bool):
            raise InvalidInput("code", f"a result code is a whole number, got {code!r}")
        self.result_code = code

    def fail(self, message: str) -> None:
        """End the run as failed with `message`."""
        raise JobFailed(message)

    def output(self) -> str:
        with self._lock:
            return self._output()

    def snapshot(self) -> tuple[int, str, dict[str, Any] | None]:
        """(version, output, progress as stored) at one instant."""
        with self._lock:
            progress = self._progress.as_json() if self._progress is not None else None
            return self._version, self._output(), progress

    def _output(self) -> str:
        text = "\n".join(self._lines)
        if self._dropped:
            text += f"\n[output truncated: {self._dropped} more bytes not kept]"
        return text

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


def context_for(run: Any) -> JobContext:
    """The context a run's job gets: its job's name and description, the
    run's trigger and params, the output limit (TAKT_OUTPUT_LIMIT_BYTES),
    whether its lines also go to the process log (TAKT_LOG_JOB_OUTPUT)."""
    from django.conf import settings

    job = run.job
    return JobContext(
        name=job.name,
        description=job.description,
        trigger=run.trigger,
        params=dict(run.params or {}),
        run_id=run.pk,
        job_id=job.pk,
        output_limit=settings.TAKT_OUTPUT_LIMIT_BYTES,
        log_output=settings.TAKT_LOG_JOB_OUTPUT,
    )
