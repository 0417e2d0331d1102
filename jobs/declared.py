"""Jobs declared in code (F-75), synced into the database at start.

A job is declared, under a unique key, in one of three places:

* ``settings.TAKT_JOBS``: ``{key: job}`` like Celery's beat_schedule;
* the file ``settings.TAKT_JOBS_FILE`` (YAML or JSON): a list of jobs with a
  ``key`` each, or a mapping ``{key: job}``;
* ``@takt_job("name", schedule="0 3 * * *", ...)`` (jobs.registry);
* the Celery app's own ``beat_schedule`` (unless TAKT_CELERY_BEAT_SCHEDULE
  is "refuse"), translated by jobs.beat_schedule as `import_celery_beat`
  translates a PeriodicTask.

Each job is in the export format of ``manage.py export_jobs`` (jobs.exchange)
and complete: an omitted field takes the model's default. The sync:

1. reads and checks every declaration (jobs.exchange: JobSerializer's types,
   the admin's rules); one bad declaration raises ImproperlyConfigured
   naming the key and the field, and nothing changes;
2. creates or updates each declared job by key and marks it code-managed.
   A declaration may name another declared job (`parent`, a dependency's
   `upstream_job`, by key; jobs.references), in any order: the jobs a
   declaration names are saved first, and it is then planned against
   them; a loop of such references is refused.
   enabled, paused, pause_note and paused_until are the operator's once the
   job exists: the declaration sets them only when it creates (or takes
   over) the job. Triggers are matched by schedule, so an unchanged schedule
   keeps next_run_at. A job that is already as declared is not written;
3. disables each code-managed job (with a key) that is no longer declared,
   notes why, and hands it to the admin (code_managed off). Nothing is
   deleted: the run history stays. Takt's built-in jobs (without a key,
   like "Takt maintenance", or with a key starting with ``takt.``, like
   "Takt operations") belong to the migrations, not the sync.

All of it runs in one transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction

from jobs import audit, registry
from jobs.definitions import OPERATOR_FIELDS, DefinitionPlan, save_definition
from jobs.documents import load_document
from jobs.exchange import (
    Definition,
    InvalidDefinition,
    job_state,
    parse_definition,
    plan_changes,
    plan_job,
)
from jobs.models import Job
from jobs.policies import JobKind, TriggerKind
from jobs.references import FileJobs, pending_references, saving_order
from jobs.registry import BUILTIN_KEY_PREFIX

log = logging.getLogger("takt.declared")

SYNC_BY = "sync_jobs"
SCHEDULE_OPTIONS = ("schedule", "every", "triggers")


@dataclass
class Declaration:
    key: str
    where: str  # names it in errors, e.g. "TAKT_JOBS['nightly']."
    raw: dict[str, Any]


@dataclass
class SyncReport:
    """What a sync did (or, dry, would do): keys by action, and for each
    created or updated key its changes (``field: old → new``)."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    changes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.retired)

    def summary(self) -> str:
        return (
            f"{len(self.created)} created, {len(self.updated)} updated,"
            f" {len(self.unchanged)} unchanged, {len(self.retired)} disabled (no longer declared)"
        )


# --- collecting ---------------------------------------------------------------------


def declarations() -> list[Declaration]:
    """Every declared job: TAKT_JOBS, then TAKT_JOBS_FILE, then the
    decorators. Raises ImproperlyConfigured for a malformed source or a key
    declared twice (naming both places)."""
    found: list[Declaration] = []
    jobs = settings.TAKT_JOBS
    if not isinstance(jobs, dict):
        raise ImproperlyConfigured(f"TAKT_JOBS: expected a dict {{key: job}}, got {jobs!r}")
    found += [_keyed(key, raw, f"TAKT_JOBS[{key!r}].") for key, raw in jobs.items()]
    if settings.TAKT_JOBS_FILE:
        found += _from_file(settings.TAKT_JOBS_FILE)
    found += [
        _from_decorator(name, options) for name, options in registry.declared_by_decorator().items()
    ]
    if settings.TAKT_CELERY_BEAT_SCHEDULE == "sync":
        found += _from_beat_schedule()
    seen: dict[str, str] = {}
    for item in found:
        if item.key in seen:
            raise ImproperlyConfigured(
                f"{item.where}key: {item.key!r} is also declared by {seen[item.key].rstrip('.')}"
            )
        seen[item.key] = item.where
    return found


def _from_beat_schedule() -> list[Declaration]:
    from django.utils import timezone

    from jobs.beat_schedule import beat_schedule_definitions, beat_schedule_entries

    entries = beat_schedule_entries()
    if not entries:
        return []
    return [
        Declaration(key, where, raw)
        for key, where, raw in beat_schedule_definitions(entries, now=timezone.now())
    ]


def _keyed(key: Any, raw: Any, where: str) -> Declaration:
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(f"{where.rstrip('.')}: expected a mapping of job fields")
    if raw.get("key") not in (None, key):
        raise ImproperlyConfigured(f"{where}key: {raw['key']!r} differs from the key {key!r}")
    return Declaration(str(key), where, {**raw, "key": key})


def _from_file(path: str) -> list[Declaration]:
    """TAKT_JOBS_FILE: a list of jobs with keys (as export_jobs writes) or {key: job}."""
    label = f"TAKT_JOBS_FILE ({path})"
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = load_document(text, "json" if path.lower().endswith(".json") else "yaml")
    except (OSError, ValueError, yaml.YAMLError) as exc:  # DocumentRefused: a ValueError
        raise ImproperlyConfigured(f"{label}: cannot read it: {exc}") from None
    if isinstance(data, dict):
        return [_keyed(key, raw, f"{label}[{key!r}].") for key, raw in data.items()]
    if not isinstance(data, list):
        raise ImproperlyConfigured(f"{label}: expected a list of jobs or a mapping {{key: job}}")
    found = []
    for i, raw in enumerate(data):
        key = raw.get("key") if isinstance(raw, dict) else None
        if not key:
            raise ImproperlyConfigured(f"{label}[{i}].key: a job declared in code needs a key")
        found.append(_keyed(key, raw, f"{label}[{key!r}]."))
    return found


def _from_decorator(name: str, options: dict[str, Any]) -> Declaration:
    """@takt_job(name, schedule=..., every=..., timezone=..., triggers=..., key=..., **fields)."""
    options = dict(options)
    key = str(options.pop("key", None) or name)
    where = f"@takt_job({name!r})."
    for forced in ("target", "kind"):
        if forced in options:
            raise ImproperlyConfigured(f"{where}{forced}: set by the decorator; leave it out")
    given = [option for option in SCHEDULE_OPTIONS if options.get(option) is not None]
    if len(given) > 1:
        raise ImproperlyConfigured(f"{where}{given[1]}: give one of {', '.join(SCHEDULE_OPTIONS)}")
    zone = options.pop("timezone", "")
    if zone and not {"schedule", "every"} & set(given):
        raise ImproperlyConfigured(f"{where}timezone: goes with schedule= or every=")
    schedule, every = options.pop("schedule", None), options.pop("every", None)
    if schedule is not None:
        options["triggers"] = [
            {"kind": TriggerKind.CRON, "cron_expression": schedule, "timezone": zone}
        ]
    elif every is not None:
        seconds = every.total_seconds() if isinstance(every, timedelta) else every
        if not isinstance(seconds, int | float) or seconds != int(seconds):
            raise ImproperlyConfigured(f"{where}every: whole seconds or a timedelta, got {every!r}")
        options["triggers"] = [
            {"kind": TriggerKind.INTERVAL, "interval_seconds": int(seconds), "timezone": zone}
        ]
    raw = {"name": name, **options, "kind": JobKind.CALLABLE, "target": name, "key": key}
    return Declaration(key, where, raw)


# --- syncing ------------------------------------------------------------------------


def sync_declared_jobs(*, now: datetime, dry_run: bool = False) -> SyncReport:
    """Create, update and retire code-managed jobs so that the database
    matches the declarations (see the module docstring). Idempotent: a sync
    with nothing to change writes nothing. `dry_run`: report; nothing stays
    written (declarations that name each other are saved, then rolled back).
    Raises ImproperlyConfigured naming the key and field of a bad
    declaration; then nothing stored has changed."""
    found = declarations()
    # Recorded as the sync (F-120), saying who started it (a command) if known.
    outer = audit.current().by
    by = f"{SYNC_BY} ({outer})" if outer else SYNC_BY
    for attempt in (1, 2):
        try:
            with transaction.atomic(), audit.recording(audit.Source.SYNC, by=by):
                return _sync(found, now=now, dry_run=dry_run)
        except IntegrityError:
            # Another beat created the same key at the same moment: its sync
            # has committed, so a second pass finds the jobs and updates them.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _sync(found: list[Declaration], *, now: datetime, dry_run: bool) -> SyncReport:
    report = SyncReport()
    jobs = FileJobs.of([item.raw for item in found], [item.where.rstrip(".") for item in found])
    definitions, refs, problems = _parse_all(found, jobs)
    order, loop = saving_order(list(definitions), refs, jobs.labels)
    if loop is not None:
        position, path, message = loop
        problems.append((found[position].where, path, message))
    if problems:
        raise ImproperlyConfigured(str(InvalidDefinition(problems)))
    # A declaration that names another one not created yet is planned once
    # that one is saved: then the sync writes as it goes (a dry run, and a
    # refusal, roll it back with the caller's transaction).
    linked = any(refs.values())
    plans: dict[int, DefinitionPlan] = {}
    outcome: dict[int, str] = {}
    for position in order:
        item = found[position]
        try:
            definition = definitions[position]
            if refs[position]:
                definition = _parse_again(item, jobs)
            job = Job.objects.select_for_update().filter(key=item.key).first()
            if job is not None and job.code_managed:
                for name in OPERATOR_FIELDS:  # the operator's, once the job exists
                    definition.values[name] = getattr(job, name)
            before = job_state(job)
            plan = plan_job(job, definition, where=item.where, now=now)
        except InvalidDefinition as exc:
            problems += exc.problems
            continue
        changes = plan_changes(before, plan)
        if plan.creates:
            outcome[position] = "created"
        elif changes or not plan.job.code_managed:
            outcome[position] = "updated"
        else:
            outcome[position] = "unchanged"
        if outcome[position] != "unchanged":
            report.changes[item.key] = changes
            plans[position] = plan
            plan.job.code_managed = True
            if linked:
                save_definition(plan, by=SYNC_BY, now=now)
        jobs.saved[position] = plan.job
    if problems:
        raise ImproperlyConfigured(str(InvalidDefinition(problems)))
    for position, action in sorted(outcome.items()):  # in the order declared
        getattr(report, action).append(found[position].key)
    retired = list(
        Job.objects.select_for_update()
        .filter(code_managed=True, key__isnull=False)
        .exclude(key__in=[item.key for item in found])
        .exclude(key__startswith=BUILTIN_KEY_PREFIX)
    )
    report.retired = [job.key or "" for job in retired]
    if dry_run:
        if linked:
            transaction.set_rollback(True)
        return report
    for position in order:
        if position in plans:
            job = (
                plans[position].job
                if linked
                else save_definition(plans[position], by=SYNC_BY, now=now)
            )
            log.info("declared job %s synced", job.key, extra={"job_id": job.pk})
    for job in retired:
        _retire(job, now=now)
    return report


def _parse_all(
    found: list[Declaration], jobs: FileJobs
) -> tuple[dict[int, Definition], dict[int, dict[str, int]], list[tuple[str, str, str]]]:
    """Every declaration parsed (by position), the declarations each names
    that are not saved yet, and the problems."""
    definitions: dict[int, Definition] = {}
    refs: dict[int, dict[str, int]] = {}
    problems: list[tuple[str, str, str]] = []
    for position, item in enumerate(found):
        try:
            definition = parse_definition(item.raw, where=item.where, resolve=jobs.resolve)
        except InvalidDefinition as exc:
            problems += exc.problems
            continue
        definitions[position] = definition
        refs[position] = pending_references(definition.values, definition.triggers)
    return definitions, refs, problems


def _parse_again(item: Declaration, jobs: FileJobs) -> Definition:
    """A declaration naming others, parsed again now that they are saved."""
    definition = parse_definition(item.raw, where=item.where, resolve=jobs.resolve)
    left = pending_references(definition.values, definition.triggers)
    if left:  # what it names was refused
        raise InvalidDefinition(
            [
                (item.where, path, f"names {jobs.labels[position]}, which was refused")
                for path, position in left.items()
            ]
        )
    return definition


def _retire(job: Job, *, now: datetime) -> None:
    note = (
        f"{now.date().isoformat()}: no longer declared in code; disabled by the sync of"
        " declared jobs and editable in the admin again."
    )
    job.enabled, job.code_managed = False, False
    job.notes = f"{job.notes}\n{note}" if job.notes else note
    job.save()
    log.warning("job %s is no longer declared in code: disabled", job.key, extra={"job_id": job.pk})
