"""Check 12 of "Why didn't it run?" (F-66), "active runs": whether an
active run of the job holds a new run back under its overlap policy, and
which one, with what happens to the next fire time. Part of the pure core
(heartbeats.core.explain runs it in its place); no Django, no clock reads."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from heartbeats.core.check import Check, Phrase, phrase, said
from jobs.core.cron import gettext_noop

# A queued, published run that no worker started for this long is stuck.
QUEUED_STUCK_AFTER = timedelta(seconds=60)

# What a held run waits for besides its job (Run.waiting_for), in words.
WAITING_WORDS = {
    "group": gettext_noop("waiting for a slot of its concurrency group"),
    "exclusive": gettext_noop("waiting for every group to drain (exclusive)"),
    "limit": gettext_noop("waiting for a slot under TAKT_MAX_CONCURRENCY"),
}


@dataclass(frozen=True)
class RunFacts:
    """An active run of the job: `since` is when it started (running) or
    when it was due (queued)."""

    run_id: int
    status: str  # "queued" or "running"
    since: datetime
    worker: str = ""
    lock_alive: bool = True  # running: its worker still holds the job's lock
    held: bool = False  # queued: waiting for the running run (buffer policies), or a slot
    waiting_for: str = ""  # held for a slot: "group", "exclusive" or "limit"
    # A parent's running run (F-04) holds no lock while its children run:
    # its active child run, in words ("run #42 of job 'Import' (#4), queued").
    child: object = ""
    # queued: the queue it was sent to, when no live worker consumes it.
    unread_queue: str = ""


def active_runs_check(
    active_runs: tuple[RunFacts, ...],
    *,
    overlap_policy: str,
    max_instances: int,
    lock_ttl_s: float,
    now: datetime,
) -> Check:
    """Check 12: no active run of the job holds a new run back under its
    overlap policy (`max_instances` under "allow"); a running run without
    its lock for longer than `lock_ttl_s` has lost its worker."""
    running = [r for r in active_runs if r.status == "running"]
    waiting = [r for r in active_runs if r.status == "queued"]
    limit = max_instances if overlap_policy == "allow" else 1
    busy = len(running) + len(waiting) >= limit and overlap_policy != "cancel_other"
    if not active_runs:
        return said("active runs", True, gettext_noop("none"))
    if not busy:
        return said(
            "active runs",
            True,
            gettext_noop(
                "%(running)s running, %(waiting)s waiting;"
                " overlap policy '%(policy)s' lets a new run start"
            ),
            running=len(running),
            waiting=len(waiting),
            policy=overlap_policy,
        )
    return _blocking(
        running,
        waiting,
        overlap_policy=overlap_policy,
        max_instances=max_instances,
        lock_ttl_s=lock_ttl_s,
        now=now,
    )


def _blocking(
    running: list[RunFacts],
    waiting: list[RunFacts],
    *,
    overlap_policy: str,
    max_instances: int,
    lock_ttl_s: float,
    now: datetime,
) -> Check:
    """The active run that holds new runs back, named, with what happens to
    the next fire time under the job's overlap policy."""
    effects = {
        "skip": phrase(gettext_noop("the next fire time is recorded as skipped")),
        "buffer_one": phrase(gettext_noop("the next run waits until it ends")),
        "buffer_all": phrase(gettext_noop("new runs wait until it ends")),
        "allow": phrase(gettext_noop("all %(count)s allowed runs are taken"), count=max_instances),
    }
    effect = effects.get(overlap_policy) or phrase(gettext_noop("a new run waits"))
    if running:
        run = min(running, key=lambda r: r.since)
        if run.child:
            return said(
                "active runs",
                False,
                gettext_noop(
                    "run #%(run)s runs its children (now %(child)s); %(effect)s; running since"
                ),
                at=run.since,
                run_id=run.run_id,
                run=run.run_id,
                child=run.child,
                effect=effect,
            )
        where = phrase(gettext_noop(" on %(worker)s"), worker=run.worker) if run.worker else ""
        # A run takes its lock just after it starts: only a lock missing for
        # longer than its lease says the worker is gone.
        gone = not run.lock_alive and now - run.since > timedelta(seconds=lock_ttl_s)
        state = (
            phrase(gettext_noop("; its worker is gone (its lock lapsed): it is recovered as lost"))
            if gone
            else ""
        )
        return said(
            "active runs",
            False,
            gettext_noop("run #%(run)s is running%(where)s%(state)s; %(effect)s; running since"),
            at=run.since,
            run_id=run.run_id,
            run=run.run_id,
            where=where,
            state=state,
            effect=effect,
        )
    run = min(waiting, key=lambda r: r.since)
    stuck: Phrase | str = ""
    if not run.held and run.unread_queue:
        stuck = phrase(
            gettext_noop("; it waits on the queue %(queue)s, which no live worker reads"),
            queue=f"'{run.unread_queue}'",
        )
    elif not run.held and now - run.since >= QUEUED_STUCK_AFTER:
        stuck = phrase(gettext_noop("; no worker has started it"))
    held: Phrase | str = ""
    if run.held:
        slot = WAITING_WORDS.get(run.waiting_for)
        held = (
            phrase(gettext_noop(" (held, %(slot)s)"), slot=phrase(slot))
            if slot
            else phrase(gettext_noop(" (held)"))
        )
    return said(
        "active runs",
        False,
        gettext_noop("run #%(run)s is queued%(held)s%(stuck)s; %(effect)s; due since"),
        at=run.since,
        run_id=run.run_id,
        run=run.run_id,
        held=held,
        stuck=stuck,
        effect=effect,
    )
