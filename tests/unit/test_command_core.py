"""The pure rules of command jobs (jobs/core/command.py): what is accepted,
what is refused with which field, and how an exit reads as a run's end."""

from __future__ import annotations

import pytest

from jobs.core.command import CommandSpec, exit_outcome, validate_command
from jobs.core.cron import TriggerError


def check(argv, *, shell=False, cwd="", env=None, nice=0, codes=None, dirs=("/srv",)):
    return validate_command(
        argv,
        shell=shell,
        cwd=cwd,
        env=env,
        nice=nice,
        success_codes=codes,
        is_dir=dirs.__contains__,
    )


def test_defaults():
    spec = check(["true"])
    assert spec == CommandSpec(argv=("true",))
    assert (spec.success_codes, spec.popen_args()) == ((0,), ["true"])


def test_shell_takes_one_command_line():
    spec = check(["ls *.csv | wc -l"], shell=True)
    assert (spec.popen_args(), spec.describe()) == ("ls *.csv | wc -l", "$ ls *.csv | wc -l")


def test_describe_quotes_what_a_shell_would_split():
    assert check(["cp", "a b", "it's", "/x/"]).describe() == "$ cp 'a b' 'it'\"'\"'s' /x/"


@pytest.mark.parametrize(
    ("kwargs", "field", "start"),
    [
        ({"argv": []}, "command", "a command job needs its command"),
        ({"argv": "ls"}, "command", "a command job needs its command"),
        ({"argv": None}, "command", "a command job needs its command"),
        ({"argv": [" "]}, "command", "the program (the first item) is empty"),
        ({"argv": ["a\x00b"]}, "command", "an argument cannot hold a NUL"),
        ({"argv": ["ls", None]}, "command", "every item of the command must be a string"),
        ({"argv": ["a", "b"], "shell": True}, "command", "with shell on"),
        ({"argv": ["x"] * 1001}, "command", "at most 1000 arguments"),
        ({"cwd": "srv"}, "cwd", "'srv' is a relative path"),
        ({"cwd": "/nowhere"}, "cwd", "'/nowhere' is not a directory"),
        ({"env": "A=1"}, "env", "environment additions are a JSON object"),
        ({"env": {"": "x"}}, "env", "'' is not a variable name"),
        ({"env": {"A=B": "x"}}, "env", "'A=B' is not a variable name"),
        ({"env": {"A": None}}, "env", "A: the value must be a string, got NoneType None"),
        ({"env": {"A": True}}, "env", "A: the value must be a string"),
        ({"nice": -1}, "nice", "the process priority (nice) is a whole number from 0"),
        ({"nice": 20}, "nice", "the process priority (nice) is a whole number from 0"),
        ({"nice": True}, "nice", "the process priority (nice) is a whole number from 0"),
        ({"nice": "5"}, "nice", "the process priority (nice) is a whole number from 0"),
        ({"codes": [0, -1]}, "success_codes", "exit codes from 0 to 255"),
        ({"codes": ["0"]}, "success_codes", "exit codes from 0 to 255"),
        ({"codes": 0}, "success_codes", "exit codes from 0 to 255"),
    ],
)
def test_refused_naming_the_field(kwargs, field, start):
    argv = kwargs.pop("argv", ["true"])
    with pytest.raises(TriggerError) as caught:
        check(argv, **kwargs)
    assert caught.value.field == field
    assert caught.value.message.startswith(start), caught.value.message


def test_accepted_cwd_env_nice_and_codes():
    spec = check(["true"], cwd="/srv", env={"LANG": "C"}, nice=19, codes=[3, 0, 3])
    assert (spec.cwd, dict(spec.env), spec.nice, spec.success_codes) == (
        "/srv",
        {"LANG": "C"},
        19,
        (0, 3),
    )


@pytest.mark.parametrize(
    ("returncode", "codes", "expected"),
    [
        (0, (0,), (True, 0, "")),
        (1, (0,), (False, 1, "the command exited with code 1 (success: 0)")),
        (1, (0, 1), (True, 1, "")),
        (0, (1,), (False, 0, "the command exited with code 0 (success: 1)")),
        (-9, (0,), (False, 137, "the command was killed by SIGKILL")),
        (-15, (0,), (False, 143, "the command was killed by SIGTERM")),
    ],
)
def test_exit_outcome(returncode, codes, expected):
    outcome = exit_outcome(returncode, codes)
    assert (outcome.succeeded, outcome.code, outcome.message) == expected
