"""Script jobs' pure rules (F-02 `script`): the compile check's messages
name the field `script` and say where a syntax error is; a script's exit as
the run's end; the diff an edit leaves in the audit table."""

from __future__ import annotations

import pytest

from jobs.core.cron import TriggerError
from jobs.core.script import MAX_SCRIPT_CHARS, check_script, script_diff, script_exit


def refusal(source: object) -> str:
    with pytest.raises(TriggerError) as caught:
        check_script(source)
    assert caught.value.field == "script"
    return caught.value.message


def test_a_script_that_compiles_passes_and_is_not_run():
    check_script('job.log("hello")\nraise SystemExit(3)\n')  # compiled only: nothing raised


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('job.log("a")\nx = (1,\n', "line 2, column 5: '(' was never closed: `x = (1,`"),
        ("if True:\njob.log(1)\n", "line 2, column 1: expected an indented block after 'if'"),
        ("def f(:\n    pass\n", "line 1, column 7: invalid syntax: `def f(:`"),
        ("return 3\n", "line 1, column 1: 'return' outside function: `return 3`"),
    ],
)
def test_a_syntax_error_names_its_line_and_column(source, message):
    assert refusal(source).startswith(message)


@pytest.mark.parametrize("source", ["", "   \n\n", None, 42])
def test_an_empty_script_is_refused(source):
    assert refusal(source).startswith("a script job needs its script: Python source")


def test_a_script_that_is_too_long_or_holds_nul_is_refused():
    assert refusal("#" * (MAX_SCRIPT_CHARS + 1)) == (
        f"at most {MAX_SCRIPT_CHARS} characters, got {MAX_SCRIPT_CHARS + 1}"
    )
    assert refusal("x = 1\x00") == "a script cannot hold a NUL character"


@pytest.mark.parametrize(
    ("returncode", "succeeded", "code", "message"),
    [
        (0, True, 0, ""),
        (3, False, 3, "the script exited with code 3"),
        (-9, False, 137, "the script was killed by SIGKILL"),
        (-15, False, 143, "the script was killed by SIGTERM"),
    ],
)
def test_the_exit_of_a_script_as_the_runs_end(returncode, succeeded, code, message):
    outcome = script_exit(returncode)
    assert (outcome.succeeded, outcome.code, outcome.message) == (succeeded, code, message)


def test_the_diff_of_an_edit_a_creation_and_a_deletion():
    before = 'job.log("one")\njob.log("two")\n'
    after = 'job.log("one")\njob.log("2")\n'

    assert script_diff(before, after, label="job #4 Report") == (
        "--- job #4 Report (before)\n"
        "+++ job #4 Report (after)\n"
        "@@ -1,2 +1,2 @@\n"
        ' job.log("one")\n'
        '-job.log("two")\n'
        '+job.log("2")\n'
    )
    created = script_diff("", "x = 1", label="job #4 Report")
    assert created.splitlines()[:2] == ["--- /dev/null", "+++ job #4 Report (after)"]
    assert created.splitlines()[-1] == "+x = 1"
    deleted = script_diff("x = 1\n", "", label="job #4 Report")
    assert deleted.splitlines()[:2] == ["--- job #4 Report (before)", "+++ /dev/null"]
    assert script_diff(before, before, label="same") == ""
