"""Importing jobs (F-74, F-93): `import_jobs`, all or nothing, and what
`manage.py import_jobs`, the admin's "Import jobs" page and the import
operation (runs/operations.py) share: read a YAML or JSON text in the
export format (jobs.exchange), check it (a dry run) or import it, and
describe the plan in the same lines everywhere::

    create     job 1 (key 'nightly', name 'Nightly report')
    update     job 2 (key 'backup')
        priority: 5 → 3
    dry run, nothing written: 1 create, 1 update, 0 unchanged

Jobs of one file may name each other (`parent`, a dependency's
`upstream_job`), in any order: a reference names a job of the file first
(by its key, or by the `id` it was exported with), else a stored job. An
import runs in two passes:

1. Check, outside any transaction (on SQLite a transaction holds the one
   write lock, which would stop the beat and the workers meanwhile):
   every entry is parsed and matched, and planned with the admin's rules;
   an entry naming another entry of the file is planned without that
   reference (it is checked in pass 2). Any problem refuses the import,
   and so do entries that name each other in a loop.
2. Save, in one transaction, in reference order: the entries an entry
   names are saved before it, and an entry naming others is planned again
   then, against the jobs just saved (their ids known, every rule
   applied). A problem found now rolls everything back. A dry run of a
   file whose jobs name each other makes this pass too, and rolls it
   back; any other dry run stops after pass 1.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction

from jobs import capabilities
from jobs.capabilities import SCRIPTS, Capability
from jobs.definitions import DefinitionPlan, save_definition
from jobs.exchange import (
    Definition,
    InvalidDefinition,
    job_state,
    load,
    parse_definition,
    plan_changes,
    plan_job,
)
from jobs.models import Job
from jobs.references import FileJobs, Pending, pending_references, saving_order
from jobs.scripts import SUPERUSERS_ONLY, touches_scripts


@dataclass
class ImportItem:
    """One job of an import: `action` is create, update or unchanged."""

    action: str
    label: str
    changes: list[str] = field(default_factory=list)
    plan: DefinitionPlan | None = None


# on_progress(done, total, note): `done` steps of `total`, a check per
# entry and (unless dry) a save per entry.
ImportProgress = Callable[[int, int, str], None]


def import_jobs(
    entries: Any,
    *,
    now: datetime,
    by: str,
    dry_run: bool = False,
    on_progress: ImportProgress | None = None,
    granted: Collection[Capability] = (),
) -> list[ImportItem]:
    """Create or update the jobs in `entries` (a list in the export format):
    check every entry, then save them all in one transaction (all or
    nothing; see the module docstring). A job with a `key` updates the job
    with that key; one without updates the job whose id and name both
    match; else it is new. Raises InvalidDefinition naming each refused job
    (entry number, key, name) and field, and then nothing stored changes; a
    job whose key or id belongs to a job declared in code is refused.
    `dry_run`: plan only. `on_progress` is called after each entry is
    checked and each is saved. `granted`: the capabilities of whoever
    imports (jobs.capabilities: all of them for the shell's `manage.py
    import_jobs`); an entry that would create or change a job needing one
    it lacks is refused on the field it concerns (a script job on `kind`
    before its source is checked). Returns the items in
    the file's order."""
    if not isinstance(entries, list):
        raise InvalidDefinition([("file ", "", "expected a list of jobs (as export_jobs writes)")])
    steps = len(entries) * (1 if dry_run else 2)
    report = on_progress or (lambda done, total, note: None)
    jobs = FileJobs.of(entries, [_label(n, raw) for n, raw in enumerate(entries, start=1)])
    checked = _check(
        entries, jobs, now=now, granted=granted, report=lambda n, note: report(n, steps, note)
    )
    if dry_run and not any(entry.refs for entry in checked):
        return [entry.item for entry in checked if entry.item is not None]
    with transaction.atomic():
        items = _save(
            checked,
            jobs,
            now=now,
            by=by,
            dry_run=dry_run,
            granted=granted,
            report=lambda n, note: report(len(entries) + n, steps, note),
        )
        if dry_run:
            transaction.set_rollback(True)
    return items


@dataclass
class _Entry:
    """An entry of the file that passed the check: the stored job it
    updates (None: it creates one), the entries it names that are not
    saved yet (`refs`: field path → position), and its plan if it names
    none."""

    position: int
    where: str
    raw: dict[str, Any]
    job: Job | None
    refs: dict[str, int]
    item: ImportItem | None = None


def _check(
    entries: list[Any],
    jobs: FileJobs,
    *,
    now: datetime,
    granted: Collection[Capability],
    report: Callable[[int, str], None],
) -> list[_Entry]:
    problems: list[tuple[str, str, str]] = []
    checked: list[_Entry] = []
    claimed: dict[int, str] = {}
    duplicates = dict(jobs.duplicate_keys(entries))
    for position, raw in enumerate(entries):
        where = jobs.labels[position] + ": "
        report(position, f"checking {jobs.labels[position]}")
        try:
            definition = parse_definition(raw, where=where, resolve=jobs.resolve)
            job = _match(definition, where=where)
            if job is not None and job.pk in claimed:
                raise InvalidDefinition([(where, "", f"matches the same job as {claimed[job.pk]}")])
            if job is not None:
                claimed[job.pk] = where.rstrip(": ")
            elif position in duplicates:  # two new jobs with one key
                raise InvalidDefinition([(where, "key", duplicates[position])])
            entry = _Entry(position, where, raw, job, pending_references(*_parts(definition)))
            if entry.refs:
                _precheck(job, definition, entry.refs, where=where, now=now)
            else:
                entry.item = _item(job, definition, where=where, now=now, granted=granted)
        except InvalidDefinition as exc:
            problems += exc.problems
            continue
        checked.append(entry)
    report(len(entries), f"checked {len(entries)} job(s), {len(problems)} problem(s)")
    refs = {entry.position: entry.refs for entry in checked}
    _, loop = saving_order([entry.position for entry in checked], refs, jobs.labels)
    if loop is not None:
        position, path, message = loop
        problems.append((jobs.labels[position] + ": ", path, message))
    if problems:
        raise InvalidDefinition(problems)
    return checked


def _parts(definition: Definition) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return definition.values, definition.triggers


def _precheck(
    job: Job | None, definition: Definition, refs: dict[str, int], *, where: str, now: datetime
) -> None:
    """Plan an entry that names entries not saved yet without those
    references, for the problems of its other fields (pass 2 plans it in
    full). Raises InvalidDefinition, leaving out the named fields."""
    values = {k: (None if isinstance(v, Pending) else v) for k, v in definition.values.items()}
    triggers = [
        {k: (None if isinstance(v, Pending) else v) for k, v in trigger.items()}
        for trigger in definition.triggers
    ]
    try:
        plan_job(job, Definition(values, triggers, definition.id), where=where, now=now)
    except InvalidDefinition as exc:
        left = [p for p in exc.problems if p[1] not in refs]
        if left:
            raise InvalidDefinition(left) from None


def _item(
    job: Job | None,
    definition: Definition,
    *,
    where: str,
    now: datetime,
    granted: Collection[Capability],
) -> ImportItem:
    stored_kind = job.kind if job is not None else None
    if SCRIPTS not in granted and touches_scripts(stored_kind, definition.values.get("kind")):
        # Before validation, which would tell whether scripts are on or how
        # the script compiles.
        if job is None or _changes_job(job, definition, where=where, now=now):
            raise InvalidDefinition([(where, "kind", f"{SUPERUSERS_ONLY}: {NOT_SUPERUSER}")])
    before = job_state(job)
    plan = plan_job(job, definition, where=where, now=now)
    changes = plan_changes(before, plan)
    if plan.creates or changes:
        # What the job can do, before and after: a capability the importer
        # lacks refuses the entry on the field it concerns.
        lacking = set(capabilities.needed_by_plan(plan)) - set(granted)
        if job is not None:
            lacking |= set(capabilities.needed_by_job(job)) - set(granted)
        if lacking:
            errors = capabilities.refusals(lacking)
            raise InvalidDefinition(
                [
                    (where, field, f"{' '.join(texts)}: {NOT_GRANTED}")
                    for field, texts in errors.items()
                ]
            )
    action = "create" if plan.creates else ("update" if changes else "unchanged")
    return ImportItem(action, where.rstrip(": "), changes, plan)


NOT_SUPERUSER = "this import was started by a user who may not write scripts"
NOT_GRANTED = "the user who started this import does not have it"


def _changes_job(job: Job, definition: Definition, *, where: str, now: datetime) -> bool:
    """Whether `definition` would change the stored `job` (a script job
    left as it is may stay in a file a non-superuser imports)."""
    try:
        plan = plan_job(Job.objects.get(pk=job.pk), definition, where=where, now=now)
    except InvalidDefinition:
        return True
    return bool(plan_changes(job_state(job), plan))


def _save(
    checked: list[_Entry],
    jobs: FileJobs,
    *,
    now: datetime,
    by: str,
    dry_run: bool,
    granted: Collection[Capability],
    report: Callable[[int, str], None],
) -> list[ImportItem]:
    """Pass 2 (in the caller's transaction): save the entries, each after
    those it names, planning again those that name others. Raises
    InvalidDefinition (the caller's transaction then rolls back)."""
    entries = {entry.position: entry for entry in checked}
    order, _ = saving_order(list(entries), {p: e.refs for p, e in entries.items()}, jobs.labels)
    items: dict[int, ImportItem] = {}
    problems: list[tuple[str, str, str]] = []
    for done, position in enumerate(order, start=1):
        entry = entries[position]
        try:
            item = entry.item or _replan(entry, jobs, now=now, granted=granted)
        except InvalidDefinition as exc:
            problems += exc.problems
            continue
        assert item.plan is not None
        if item.action != "unchanged":
            save_definition(item.plan, by=by, now=now)
        jobs.saved[position] = item.plan.job
        items[position] = item
        if not dry_run:
            report(done, f"saved {item.label}")
    if problems:
        raise InvalidDefinition(problems)
    return [items[entry.position] for entry in checked]


def _replan(
    entry: _Entry, jobs: FileJobs, *, now: datetime, granted: Collection[Capability]
) -> ImportItem:
    """Plan an entry that names others of the file, now that they are saved."""
    definition = parse_definition(entry.raw, where=entry.where, resolve=jobs.resolve)
    left = pending_references(*_parts(definition))
    if left:  # what it names was refused in this pass
        raise InvalidDefinition(
            [
                (entry.where, path, f"names {jobs.labels[position]}, which was refused")
                for path, position in left.items()
            ]
        )
    job = Job.objects.filter(pk=entry.job.pk).first() if entry.job is not None else None
    return _item(job, definition, where=entry.where, now=now, granted=granted)


def _label(n: int, raw: Any) -> str:
    if not isinstance(raw, dict):
        return f"job {n}"
    parts = [f"{k} {raw[k]!r}" for k in ("key", "name") if raw.get(k)]
    return f"job {n} ({', '.join(parts)})" if parts else f"job {n}"


def _match(definition: Definition, *, where: str) -> Job | None:
    key = definition.values["key"]
    if key:
        job = Job.objects.filter(key=key).first()
    elif definition.id is not None:
        job = Job.objects.filter(
            pk=_int_or_none(definition.id), name=definition.values["name"]
        ).first()
    else:
        job = None
    if job is not None and job.code_managed:
        message = f"job #{job.pk} is declared in code (code_managed): change it there"
        raise InvalidDefinition([(where, "key" if key else "id", message)])
    return job


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# --- text ---------------------------------------------------------------------------


def import_text(
    text: str,
    fmt: str,
    *,
    now: datetime,
    by: str,
    dry_run: bool = False,
    on_progress: ImportProgress | None = None,
    granted: Collection[Capability] = (),
) -> list[ImportItem]:
    """Parse `text` (`fmt`: yaml or json) and import it (see `import_jobs`;
    `by` is recorded on pauses it sets and on the audit rows of scripts).
    Raises InvalidDefinition naming each refused job and field; then
    nothing stored has changed."""
    return import_jobs(
        load(text, fmt),
        now=now,
        by=by,
        dry_run=dry_run,
        on_progress=on_progress,
        granted=granted,
    )


ACTIONS = ("create", "update", "unchanged")


@dataclass
class ImportCheck:
    """A dry run's outcome: the plan's items, or the problems (see
    problem_texts) that refuse the whole import."""

    items: list[ImportItem] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_text(
    text: str, fmt: str, *, now: datetime, granted: Collection[Capability] = ()
) -> ImportCheck:
    """The plan of importing `text`, writing nothing (`granted`: as import_jobs)."""
    try:
        items = import_text(text, fmt, now=now, by="dry run", dry_run=True, granted=granted)
        return ImportCheck(items=items)
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
