"""Command jobs (F-02 `command`) as rules: what a command job stores, the
checks the admin, the API, imports and the worker share (each raises
TriggerError naming the job's field), how an exit becomes a run's status
and result code, and how the output of two streams is told apart. The
process itself is started and watched by runs/commands.py. Pure core:
stdlib only (the file-system checks take the answers as arguments)."""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from jobs.core.cron import TriggerError, gettext_noop

NICE_MIN, NICE_MAX = 0, 19
MAX_ARGS = 1000
# The output's stream markers: one per line, so an interleaved output reads
# in the order the lines came and each line says where it came from.
STREAM_MARKERS = {"stdout": "", "stderr": "[stderr] "}


class ResultCodeAt(StrEnum):
    """When a detached command's result code is taken (the manual's
    "Rückgabecode übernehmen")."""

    START = "start"  # 0 once it has started: its dependants may go at once
    EXIT = "exit"  # -1 while it runs, then its exit code


@dataclass(frozen=True)
class CommandSpec:
    argv: tuple[str, ...]
    shell: bool = False
    cwd: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    nice: int = 0
    success_codes: tuple[int, ...] = (0,)

    def popen_args(self) -> list[str] | str:
        """What subprocess.Popen takes: the argv list, or with `shell` the
        one command line (run by /bin/sh -c)."""
        return self.argv[0] if self.shell else list(self.argv)

    def describe(self) -> str:
        """The command as a reader sees it in a run's first output line."""
        if self.shell:
            return f"$ {self.argv[0]}"
        return "$ " + " ".join(_quoted(a) for a in self.argv)


def _quoted(arg: str) -> str:
    if arg and all(c.isalnum() or c in "-_./=:,@%+" for c in arg):
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def validate_command(
    raw_argv: object,
    *,
    shell: bool,
    cwd: str,
    env: object,
    nice: object,
    success_codes: object,
    is_dir: Callable[[str], bool],
) -> CommandSpec:
    """The spec of a command job, or TriggerError naming the field
    (`command`, `cwd`, `env`, `nice`, `success_codes`). `is_dir` answers
    whether a working directory exists (an absolute path; a relative one is
    refused: a worker's own directory is no place to rely on)."""
    argv = _argv(raw_argv, shell=shell)
    if cwd:
        if not cwd.startswith("/"):
            raise TriggerError(
                "cwd",
                gettext_noop(
                    "%(cwd)r is a relative path: give the working directory as an absolute path"
                ),
                cwd=cwd,
            )
        if not is_dir(cwd):
            raise TriggerError(
                "cwd", gettext_noop("%(cwd)r is not a directory on this machine"), cwd=cwd
            )
    return CommandSpec(
        argv=argv,
        shell=shell,
        cwd=cwd,
        env=_env(env),
        nice=_nice(nice),
        success_codes=_codes(success_codes),
    )


def _argv(raw: object, *, shell: bool) -> tuple[str, ...]:
    if not isinstance(raw, list | tuple) or not raw:
        example = "[\"sh -c '...'\"]" if shell else '["rsync", "-a", "/src/", "/dst/"]'
        raise TriggerError(
            "command",
            gettext_noop("a command job needs its command: a list of strings, e.g. %(example)s"),
            example=example,
        )
    if any(not isinstance(a, str) for a in raw):
        raise TriggerError("command", gettext_noop("every item of the command must be a string"))
    if len(raw) > MAX_ARGS:
        raise TriggerError(
            "command", gettext_noop("at most %(max_args)s arguments"), max_args=MAX_ARGS
        )
    if any("\x00" in a for a in raw):
        raise TriggerError("command", gettext_noop("an argument cannot hold a NUL character"))
    if not raw[0].strip():
        raise TriggerError("command", gettext_noop("the program (the first item) is empty"))
    if shell and len(raw) != 1:
        raise TriggerError(
            "command",
            gettext_noop(
                "with shell on, the command is one command line (a list of one string), not %(count)s items"
            ),
            count=len(raw),
        )
    return tuple(raw)


def _env(raw: object) -> dict[str, str]:
    if raw in (None, ""):
        return {}
    if not isinstance(raw, Mapping):
        raise TriggerError(
            "env", gettext_noop('environment additions are a JSON object, e.g. {"LANG": "C"}')
        )
    for name, value in raw.items():
        if not isinstance(name, str) or not name or "=" in name or "\x00" in name:
            raise TriggerError("env", gettext_noop("%(name)r is not a variable name"), name=name)
        if not isinstance(value, str):
            raise TriggerError(
                "env",
                gettext_noop("%(name)s: the value must be a string, got %(type)s %(value)r"),
                name=name,
                type=type(value).__name__,
                value=value,
            )
        if "\x00" in value:
            raise TriggerError(
                "env", gettext_noop("%(name)s: the value cannot hold a NUL character"), name=name
            )
    return dict(raw)


def _nice(raw: object) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or not NICE_MIN <= raw <= NICE_MAX:
        raise TriggerError(
            "nice",
            gettext_noop(
                "the process priority (nice) is a whole number from %(nice_min)s (normal) to %(nice_max)s (lowest), got %(raw)r"
            ),
            nice_min=NICE_MIN,
            nice_max=NICE_MAX,
            raw=raw,
        )
    return raw


def _codes(raw: object) -> tuple[int, ...]:
    if raw in (None, []):
        return (0,)
    if not isinstance(raw, list | tuple) or any(
        not isinstance(c, int) or isinstance(c, bool) or not 0 <= c <= 255 for c in raw
    ):
        raise TriggerError(
            "success_codes",
            gettext_noop("exit codes from 0 to 255, e.g. [0, 1], got %(raw)r"),
            raw=raw,
        )
    return tuple(sorted(set(raw)))


@dataclass(frozen=True)
class Exit:
    """How a command's end reads as a run's end."""

    succeeded: bool
    code: int  # the run's result code
    message: str  # for a failure; "" when it succeeded


def exit_outcome(returncode: int, success_codes: Sequence[int]) -> Exit:
    """A process's return code (negative: killed by that signal, as
    subprocess says) as the run's outcome. A signal's result code is the
    shell's 128 + N."""
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return Exit(False, 128 + number, f"the command was killed by {name}")
    if returncode in success_codes:
        return Exit(True, returncode, "")
    accepted = ", ".join(str(c) for c in success_codes)
    return Exit(
        False, returncode, f"the command exited with code {returncode} (success: {accepted})"
    )
