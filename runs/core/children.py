"""A parent run's next step (F-04): a parent job's run executes its
children in their order, each as a run of its own linked to the parent run
(trigger `parent`), and ends with their outcome. Pure: the engine
(runs/children.py) passes the children with the status of each one's
latest run for this parent run, and applies the step in the transaction
that recorded the child's end, so a crash never leaves a parent between
two children.

The rules:

* the next child starts once every child before it has ended;
* a child that ended failed, timed out, lost or cancelled is a failure;
  with `stop_on_failure` the children after it are not run (the parent
  says so in its message), else they run as if nothing happened;
* a skipped child (its overlap policy, maintenance, its condition) is not
  a failure: it did not run, and the next one starts;
* the parent ends `failed` when any child failed, else `succeeded` (also
  with no child to run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ACTIVE = ("queued", "running")
FAILURES = ("failed", "timed_out", "lost", "cancelled")


@dataclass(frozen=True)
class ChildFacts:
    job_id: int
    name: str
    # Its latest run for this parent run (a retry's, if it was retried);
    # None: not started yet.
    status: str | None = None


@dataclass(frozen=True)
class ParentStep:
    start: int | None = None  # the child job to start now
    finish: str | None = None  # the parent run's final status
    message: str = ""

    @property
    def waits(self) -> bool:
        """A child is still queued or running: nothing to do yet."""
        return self.start is None and self.finish is None


def compute_parent_step(children: Sequence[ChildFacts], *, stop_on_failure: bool) -> ParentStep:
    """What the parent run does now, given its children in their order."""
    for index, child in enumerate(children):
        if child.status in ACTIVE:
            return ParentStep()
        if child.status is None:
            failed = [c for c in children[:index] if c.status in FAILURES]
            if failed and stop_on_failure:
                return _finish(children, stopped_after=failed[0])
            return ParentStep(start=child.job_id)
    return _finish(children, stopped_after=None)


def _finish(children: Sequence[ChildFacts], *, stopped_after: ChildFacts | None) -> ParentStep:
    parts = [
        f"{child.name!r} {(child.status or 'not run').replace('_', ' ')}" for child in children
    ]
    failed = any(child.status in FAILURES for child in children)
    if not children:
        message = "no enabled child to run"
    else:
        message = "children: " + ", ".join(parts)
        if stopped_after is not None:
            message += f" (stopped after {stopped_after.name!r} failed)"
    return ParentStep(finish="failed" if failed else "succeeded", message=message)
