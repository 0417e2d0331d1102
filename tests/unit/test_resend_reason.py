"""Which published runs the lost-message sweep sends again (runs/delivery.py
resend_reason): a table of marks, live workers and queue states."""

from __future__ import annotations

import os

import pytest

from runs.delivery import resend_reason
from runs.marks import run_id_of_task, worker_start

ALIVE = {"a@host"}


@pytest.mark.parametrize(
    ("mark", "queue_empty", "expected"),
    [
        (None, False, "its message mark is gone (Redis lost the message with it)"),
        (None, True, "its message mark is gone (Redis lost the message with it)"),
        ("sent", False, None),  # behind a long queue: never a storm
        ("sent", True, "marked sent, but its queue is empty"),
        ("w:a@host", True, None),  # a live worker holds it
        ("w:a@host", False, None),
        (
            "w:b@host",
            False,
            "worker b@host that had received it is gone (killed, or restarted since)",
        ),
        (
            "w:b@host",
            True,
            "worker b@host that had received it is gone (killed, or restarted since)",
        ),
    ],
)
def test_resend_reason(mark, queue_empty, expected):
    assert resend_reason(mark, alive=ALIVE, queue_empty=queue_empty) == expected


@pytest.mark.parametrize(
    ("task_id", "run_id"),
    [
        ("takt-run-12", 12),
        ("takt-run-", None),
        ("takt-run-x1", None),
        ("other", None),
        (None, None),
    ],
)
def test_run_id_of_task(task_id, run_id):
    assert run_id_of_task(task_id) == run_id


def test_a_worker_restarted_under_its_name_is_another_start():
    """The marks and the liveness key name the worker's start: the one that
    died with messages stays dead when its successor takes its name."""
    old = "w:a@host~0011aabb"
    assert resend_reason(old, alive={"a@host~99ccddee"}, queue_empty=False) == (
        "worker a@host that had received it is gone (killed, or restarted since)"
    )
    assert resend_reason(old, alive={"a@host~0011aabb"}, queue_empty=False) is None


def test_a_worker_start_is_its_name_and_a_token_of_its_process():
    first = worker_start("a@host")
    assert first.startswith("a@host~") and worker_start("a@host") == first
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a new process (a restarted worker): its own token
        os.write(write, worker_start("a@host").encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    assert child.startswith("a@host~") and child != first
