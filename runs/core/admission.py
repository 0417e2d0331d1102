"""Admission (F-23): what happens to a new run while its job is busy, and
what a worker does when the job's lock is taken, as pure functions of the
facts (the job's OverlapRules and its active runs). The same functions
decide for every source of a run (schedule, catch-up, retry, "Run now",
`enqueue_job()`, backfill): runs/dispatch.py, runs/services.py and
runs/execution.py only apply the answer."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from jobs.core.rules import Overlap, OverlapRules


class Admission(StrEnum):
    """What to do with a new run."""

    QUEUE = "queue"  # send it to the workers now
    HOLD = "hold"  # keep it queued but unsent; the run ahead of it sends it when it ends
    SKIP = "skip"  # record it `skipped`
    REPLACE = "replace"  # send it, and cancel the job's other active runs


@dataclass(frozen=True)
class Decision:
    admission: Admission
    reason: str = ""  # for a skip: the message the skipped run carries


def compute_admission(rules: OverlapRules, *, running: int, waiting: int) -> Decision:
    """Decide for a new run that is due now. `running`: the job's runs that
    are running; `waiting`: its runs that are queued and due (sent or held).
    A run for a later time (run_at, a retry's delay) is decided when it
    becomes due, not before."""
    active = running + waiting
    policy = rules.policy
    if policy is Overlap.SKIP:
        if active:
            return Decision(
                Admission.SKIP, "the job already has an active run (overlap policy 'skip')"
            )
        return Decision(Admission.QUEUE)
    if policy is Overlap.BUFFER_ONE:
        if waiting:
            return Decision(
                Admission.SKIP, "a run of the job is already waiting (overlap policy 'buffer_one')"
            )
        return Decision(Admission.HOLD if running else Admission.QUEUE)
    if policy is Overlap.BUFFER_ALL:
        if waiting >= rules.max_buffered:
            return Decision(
                Admission.SKIP,
                f"{waiting} runs of the job are already waiting, the most overlap policy"
                f" 'buffer_all' keeps (max_buffered = {rules.max_buffered})",
            )
        return Decision(Admission.HOLD if active else Admission.QUEUE)
    if policy is Overlap.CANCEL_OTHER:
        return Decision(Admission.REPLACE if active else Admission.QUEUE)
    if policy is Overlap.ALLOW:
        if active >= rules.max_instances:
            return Decision(
                Admission.SKIP,
                f"the job already has {active} active runs, the most overlap policy 'allow'"
                f" permits (max_instances = {rules.max_instances})",
            )
        return Decision(Admission.QUEUE)
    raise ValueError(f"unknown overlap policy {policy!r}")


class StartAction(StrEnum):
    """What a worker does with a run whose job lock it could not take."""

    SKIP = "skip"  # end the run `skipped`
    HOLD = "hold"  # put it back to wait; the lock holder sends it when it ends
    TAKE_OVER = "take_over"  # cancel the holder's run and take the lock from it


def compute_start_action(rules: OverlapRules, *, holders_ended: bool = False) -> StartAction:
    """The worker's answer when every lock slot of the job is taken (the
    second check of F-23, for runs that got past the first one in a race).
    With `allow`, the job has `max_instances` slots; the others have one.

    `holders_ended`: every run holding a slot has ended already. A run's
    end is recorded before its worker frees its slot (a moment later; if
    that worker died, the slot lapses after the lock TTL), so the job is
    not busy any more: a run that would be skipped waits for the slot
    instead, and is sent once it is free (issue 28)."""
    if rules.policy in (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL):
        return StartAction.HOLD
    if rules.policy is Overlap.CANCEL_OTHER:
        return StartAction.TAKE_OVER
    return StartAction.HOLD if holders_ended else StartAction.SKIP
