"""Script jobs (F-02 `script`) as rules: the compile check the admin's
"Check" button, validation (admin, API, imports) and the worker share, how
a script process's end reads as a run's end, and the diff an edit of a
script leaves in the audit table. The process is started by
runs/scripts.py. Pure core: stdlib only."""

from __future__ import annotations

import difflib
import signal

from jobs.core.command import Exit
from jobs.core.cron import TriggerError, gettext_noop

MAX_SCRIPT_CHARS = 200_000
# The file name compile() and tracebacks show for a script.
SCRIPT_FILENAME = "<script>"


def check_script(source: object) -> None:
    """Compile `source` without running it. Raises TriggerError on
    `script`: empty, not a string, too long, or a SyntaxError with its line
    and column (1-based), e.g. "line 2, column 9: invalid syntax:
    `x = (1,`"."""
    if not isinstance(source, str) or not source.strip():
        raise TriggerError(
            "script",
            gettext_noop('a script job needs its script: Python source, e.g. job.log("hello")'),
        )
    if len(source) > MAX_SCRIPT_CHARS:
        raise TriggerError(
            "script",
            gettext_noop("at most %(max_script_chars)s characters, got %(count)s"),
            max_script_chars=MAX_SCRIPT_CHARS,
            count=len(source),
        )
    if "\x00" in source:
        raise TriggerError("script", gettext_noop("a script cannot hold a NUL character"))
    try:
        compile(source, SCRIPT_FILENAME, "exec", dont_inherit=True)
    except SyntaxError as exc:
        if not exc.text and exc.lineno and exc.lineno <= len(lines := source.splitlines()):
            exc.text = lines[exc.lineno - 1]  # the compiler's own errors leave it out
        raise TriggerError("script", syntax_error_text(exc)) from None
    except ValueError as exc:  # e.g. a surrogate that cannot be encoded
        raise TriggerError("script", str(exc)) from None


def syntax_error_text(exc: SyntaxError) -> str:
    """ "line L, column C: <what>: `<the line>`" (what Python knows of it)."""
    where = []
    if exc.lineno:
        where.append(f"line {exc.lineno}")
    if exc.offset:
        where.append(f"column {exc.offset}")
    text = f"{', '.join(where)}: {exc.msg}" if where else str(exc.msg)
    line = (exc.text or "").strip()
    return f"{text}: `{line}`" if line else text


def script_exit(returncode: int) -> Exit:
    """A script process's exit as the run's outcome (a job.fail() or an
    uncaught exception is reported by the host, not by its exit code):
    0 succeeds; another code (sys.exit(3)) or a signal fails it. The result
    code is the exit code, or 128 + N for signal N, as a shell says."""
    if returncode == 0:
        return Exit(True, 0, "")
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return Exit(False, 128 + number, f"the script was killed by {name}")
    return Exit(False, returncode, f"the script exited with code {returncode}")


def script_diff(before: str, after: str, *, label: str) -> str:
    """A unified diff of a script's source, `label` naming both sides
    ("" on a side: created or deleted). Empty when nothing changed."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"{label} (before)" if before else "/dev/null",
        tofile=f"{label} (after)" if after else "/dev/null",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
