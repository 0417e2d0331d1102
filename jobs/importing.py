"""Importing jobs from text (F-74, F-93): what `manage.py import_jobs`, the
admin's "Import jobs" page and the import operation (runs/operations.py)
share: read a YAML or JSON text in the export format, check it (a dry
run) or import it all or nothing (jobs.exchange.import_jobs), and describe
the plan in the same lines everywhere::

    create     job 1 (key 'nightly', name 'Nightly report')
    update     job 2 (key 'backup')
        priority: 5 → 3
    dry run, nothing written: 1 create, 1 update, 0 unchanged
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from jobs.exchange import ImportItem, ImportProgress, InvalidDefinition, import_jobs, load

ACTIONS = ("create", "update", "unchanged")


def import_text(
    text: str,
    fmt: str,
    *,
    now: datetime,
    by: str,
    dry_run: bool = False,
    on_progress: ImportProgress | None = None,
) -> list[ImportItem]:
    """Parse `text` (`fmt`: yaml or json) and import it (see
    jobs.exchange.import_jobs; `by` is recorded on pauses it sets). Raises
    InvalidDefinition naming each refused job and field; then nothing
    stored has changed."""
    return import_jobs(load(text, fmt), now=now, by=by, dry_run=dry_run, on_progress=on_progress)


@dataclass
class ImportCheck:
    """A dry run's outcome: the plan's items, or the problems (see
    problem_texts) that refuse the whole import."""

    items: list[ImportItem] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_text(text: str, fmt: str, *, now: datetime) -> ImportCheck:
    """The plan of importing `text`, writing nothing."""
    try:
        return ImportCheck(items=import_text(text, fmt, now=now, by="dry run", dry_run=True))
    except InvalidDefinition as exc:
        return ImportCheck(problems=problem_texts(exc))


def problem_texts(exc: InvalidDefinition) -> list[str]:
    """One text per problem, naming the job and the field (a text may span
    lines: a YAML error shows where it is)."""
    return [str(InvalidDefinition([problem])) for problem in exc.problems]


def plan_lines(items: list[ImportItem]) -> list[str]:
    """A line per job (its action and label), and under an update a line per change."""
    lines = []
    for item in items:
        lines.append(f"{item.action:<10} {item.label}")
        if item.action == "update":
            lines += [f"    {change}" for change in item.changes]
    return lines


def action_counts(items: list[ImportItem]) -> dict[str, int]:
    return {action: sum(item.action == action for item in items) for action in ACTIONS}


def summary_line(items: list[ImportItem], *, dry_run: bool) -> str:
    """ "1 create, 1 update, 0 unchanged", after "dry run, nothing written: " for a dry run."""
    summary = ", ".join(f"{n} {action}" for action, n in action_counts(items).items())
    return ("dry run, nothing written: " if dry_run else "") + summary
