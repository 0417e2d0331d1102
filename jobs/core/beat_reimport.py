"""Takt's side of an imported PeriodicTask (F-76, issue 26): what the job's
`enabled` becomes on this import, and whether its PeriodicTask may be
switched off in django-celery-beat. Part of the pure core: the facts come
in as values (the job an earlier import made, whether the task is
registered here), nothing is read.

The rules (docs/migrating-from-django-celery-beat.md, "Running it again"):

- A new job takes the `enabled` the translation wants: the PeriodicTask's,
  off when Takt would not run it (expired, a one-off that ran, a clocked
  time that passed) or its task is not registered here.
- A job an import made follows what the translation wants on every
  import, *unless* its `enabled` differs from what the last import set:
  then an operator changed it in Takt, and Takt's value is kept (and the
  recorded value too, so a later import keeps it as well).
- A job no import recorded (made by hand with that key, or imported before
  Takt kept this record) keeps its `enabled`.
- Never strand a task: a PeriodicTask is switched off (--disable-source)
  only when its job will run: enabled, and not paused until resumed. Every
  other one keeps running where it runs, and `hold` says why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from jobs.core.celery_beat import OVERDUE_NOTE, BeatTask, Translation


@dataclass(frozen=True)
class Prior:
    """The stored job with the task's key, as this import finds it.

    `enabled_set`: the `enabled` the last import set (None: no import
    recorded one). The pause fields are the operator's and are kept."""

    enabled: bool
    enabled_set: bool | None
    paused: bool = False
    paused_until: datetime | None = None
    pause_note: str = ""


def settle(translation: Translation, *, registered: bool, prior: Prior | None) -> None:
    """Decide the job's `enabled` on Takt's side (see the module docstring),
    in place: the definition's `enabled` and pause fields, the notes,
    `enabled_set` (what to record as set by this import) and `hold` (why
    its job will not run; None: it will, and the PeriodicTask may be
    switched off). The translation must have a definition."""
    definition = translation.definition
    assert definition is not None
    target = translation.task.task
    wanted = bool(definition["enabled"])
    if not registered:
        translation.notes.append(
            f"imported disabled: its task {target!r} is not registered in this project;"
            " a later import enables it once it is (unless you change the job's enabled in"
            " Takt meanwhile)"
        )
        if wanted or translation.off_reason is None:
            translation.off_reason = f"its task {target!r} is not registered in this project"
        wanted = False
    enabled, translation.enabled_set = _enabled(translation, wanted, prior)
    definition["enabled"] = enabled
    if prior is not None:
        definition["paused"] = prior.paused
        definition["paused_until"] = prior.paused_until
        definition["pause_note"] = prior.pause_note
    if translation.overdue and enabled:
        translation.notes.append(OVERDUE_NOTE)
    translation.hold = compute_hold(
        registered=registered,
        enabled=enabled,
        paused=bool(definition.get("paused")),
        paused_until=definition.get("paused_until"),
        off_reason=translation.off_reason,
    )


def _enabled(
    translation: Translation, wanted: bool, prior: Prior | None
) -> tuple[bool, bool | None]:
    """(the job's enabled, what to record as the import's)."""
    if prior is None:
        return wanted, wanted
    notes = translation.notes
    if prior.enabled_set is None:
        if prior.enabled != wanted:
            notes.append(
                f"enabled: kept {prior.enabled} as Takt's job has it: no import recorded setting"
                f" it (a job made in Takt, or imported by an earlier Takt); the import would set"
                f" {wanted}. Set it in Takt"
            )
            if not prior.enabled:
                translation.off_reason = (
                    "its Takt job is disabled, and no import recorded setting that: enable it in"
                    " Takt"
                )
        return prior.enabled, None
    if prior.enabled != prior.enabled_set:
        if prior.enabled != wanted:
            notes.append(
                f"enabled: kept {prior.enabled}: changed in Takt since the last import (which set"
                f" {prior.enabled_set}); the import would set {wanted}"
            )
            if not prior.enabled:
                translation.off_reason = "its Takt job was disabled in Takt after the last import"
        return prior.enabled, prior.enabled_set
    if prior.enabled != wanted:
        notes.append(
            f"enabled: {prior.enabled} → {wanted} (the job was not changed in Takt since the last"
            f" import set it {prior.enabled})"
        )
    return wanted, wanted


def compute_hold(
    *,
    registered: bool,
    enabled: bool,
    paused: bool,
    paused_until: datetime | None,
    off_reason: str | None,
) -> str | None:
    """Why the job will not run (None: it will): its task not registered
    here, disabled (for `off_reason`), or paused with no end. A pause with
    an end (a start_time) ends by itself: the job will run."""
    if not enabled or not registered:
        return off_reason or "its Takt job is disabled"
    if paused and paused_until is None:
        return "its Takt job is paused in Takt until resumed"
    return None


def known_task(
    task: BeatTask, *, switched: bool, last_run_at: datetime | None, total_run_count: int
) -> BeatTask:
    """The task as read, with what an earlier import recorded of it:
    `switched` (that import disabled it with --disable-source; it counts as
    enabled while it stays disabled), and the later of the two last runs
    and the larger run count (django-celery-beat blanks a disabled task's
    `last_run_at`; the note keeps what the first import read)."""
    runs = [t for t in (task.last_run_at, last_run_at) if t is not None]
    return replace(
        task,
        switched=switched and not task.enabled,
        last_run_at=max(runs, default=None),
        total_run_count=max(task.total_run_count, total_run_count),
    )
