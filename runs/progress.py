"""How far a long run has come (F-93): the value `job.progress(done,
total, note)` stores in `Run.progress`, its percentage, and the progress
lines the commands print on the terminal.

Pure: no Django, no clock. `Run.progress` holds ``{"done": 40, "total":
100, "note": "…"}`` (total None when the job does not know it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jobs.errors import InvalidInput

NOTE_MAX_CHARS = 500


@dataclass(frozen=True)
class Progress:
    """`done` items of `total` (None: unknown), with a short `note`."""

    done: int | float
    total: int | float | None = None
    note: str = ""

    @property
    def percent(self) -> float | None:
        """0.0 to 100.0, one decimal; None without a total; 100.0 when
        the total is 0 (nothing to do)."""
        if self.total is None:
            return None
        if self.total == 0:
            return 100.0
        return round(min(100.0, 100.0 * self.done / self.total), 1)

    def as_json(self) -> dict[str, Any]:
        return {"done": self.done, "total": self.total, "note": self.note}


def _number(name: str, value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(name, f"must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise InvalidInput(name, f"must be a finite number of at least 0, got {value!r}")
    return value


def check_progress(done: object, total: object = None, note: object = "") -> Progress:
    """The validated Progress. `done` and `total` are numbers of items
    (whole or fractional, not bool), done ≥ 0, total ≥ 0 or None (0:
    nothing to do), done ≤ total; `note` a string, cut to NOTE_MAX_CHARS. Raises InvalidInput
    (a ValueError) naming the argument."""
    done_n = _number("done", done)
    total_n = None if total is None else _number("total", total)
    if total_n is not None and done_n > total_n:
        raise InvalidInput("done", f"{done_n!r} is more than total ({total_n!r})")
    if not isinstance(note, str):
        raise InvalidInput("note", f"must be a string, got {type(note).__name__}")
    if len(note) > NOTE_MAX_CHARS:
        note = note[: NOTE_MAX_CHARS - 1] + "…"
    return Progress(done_n, total_n, note)


def progress_from_json(data: object) -> Progress | None:
    """The Progress stored in `Run.progress`, or None (no progress, or a
    value that is not one: the page shows none rather than failing)."""
    if not isinstance(data, dict):
        return None
    try:
        return check_progress(data.get("done", 0), data.get("total"), data.get("note") or "")
    except InvalidInput:
        return None


def progress_text(progress: Progress) -> str:
    """ "40 of 100 (40 %): note", "40 done: note"."""
    if progress.total is not None:
        text = f"{progress.done:g} of {progress.total:g} ({progress.percent:g} %)"
    else:
        text = f"{progress.done:g} done"
    return f"{text}: {progress.note}" if progress.note else text


class Stream(Protocol):
    def write(self, text: str, /) -> Any: ...
    def flush(self) -> Any: ...


class TerminalProgress:
    """A progress callback ``(done, total, note)`` for the commands: writes
    ``"<label>: 40 of 100 (40 %): note"`` to `stream` (their stderr, so
    their stdout stays as it was) each time the percentage crosses a
    multiple of `step_pct` (100 % included, once); `step_pct` 0 writes
    every call (a line per batch). Without a total it writes every call."""

    def __init__(self, stream: Stream, label: str, *, step_pct: float = 10) -> None:
        self.stream, self.label, self.step_pct = stream, label, step_pct
        self._last_step: float = -1

    def __call__(self, done: int | float, total: int | float | None, note: str = "") -> None:
        progress = check_progress(done, total, note)
        percent = progress.percent
        if percent is not None and self.step_pct:
            step = percent // self.step_pct
            if step <= self._last_step:
                return
            self._last_step = step
        self.stream.write(f"{self.label}: {progress_text(progress)}\n")
        self.stream.flush()


ProgressCallback = Callable[[int, int, str], None]


class Steps:
    """Progress counted in steps whose total may grow as work is found
    (maintenance: a step per section, more per cleanup batch). Calls
    `report(done, total, note)` at each step; `done` never passes `total`
    (a step beyond it raises the total)."""

    def __init__(self, total: int, report: ProgressCallback | None = None) -> None:
        self.total, self.done, self.report = total, 0, report

    def grow(self, steps: int) -> None:
        self.total += max(steps, 0)

    def advance(self, note: str, *, to: int | None = None) -> None:
        """One step on, or on `to` (never back)."""
        self.done = self.done + 1 if to is None else max(to, self.done)
        self.total = max(self.total, self.done)
        if self.report is not None:
            self.report(self.done, self.total, note)
