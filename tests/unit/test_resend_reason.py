"""Which published runs the lost-message sweep sends again (runs/delivery.py
resend_reason): a table of marks, live workers and queue states."""

from __future__ import annotations

import pytest

from runs.delivery import resend_reason
from runs.marks import run_id_of_task

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
        ("w:b@host", False, "worker b@host that had received it is gone"),
        ("w:b@host", True, "worker b@host that had received it is gone"),
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
