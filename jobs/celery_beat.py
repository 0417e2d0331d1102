"""`manage.py import_celery_beat` (F-76): read django-celery-beat's
PeriodicTasks through its own models, from this database or another
(jobs.celery_beat_source), translate each (jobs.core.celery_beat) and import the jobs with
`import_jobs`, matched by key so a second run updates. All or nothing: a
task that cannot be imported refuses the import, naming it, unless
`continue_on_error` imports the others. With `disable_source` the imported
PeriodicTasks are disabled in the same transaction, so a project switches
in one command: only those whose job will run (jobs.core.beat_reimport);
every other one keeps running where it runs, and the result says why.
Each job it makes or updates gets a jobs.beat_origin.BeatOrigin: what the
import set, so a later import tells an operator's change from its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction

from jobs import capabilities, registry
from jobs.beat_origin import BeatOrigin
from jobs.celery_beat_source import beat_models, read_beat_tasks
from jobs.core.beat_reimport import Prior, known_task, settle
from jobs.core.celery_beat import (
    OVERDUE_NOTE,
    BeatTask,
    Interval,
    Translation,
    job_key,
    translate,
)
from jobs.errors import TaktError
from jobs.exchange import InvalidDefinition
from jobs.importing import ImportItem, import_jobs
from jobs.models import Job, Trigger

# import_celery_beat is a command of the shell (trusted as the shell): its
# PeriodicTasks call Celery tasks by name; no scripts come from them.
BEAT_GRANTED = frozenset(capabilities.ALL) - {capabilities.SCRIPTS}


@dataclass
class BeatImport:
    """What an import did (or would do): a translation per PeriodicTask in
    their id order, the import's items for the ones imported, and the ids
    of the PeriodicTasks it switched off (a dry run: would)."""

    translations: list[Translation]
    items: list[ImportItem] = field(default_factory=list)
    switched: list[int] = field(default_factory=list)

    @property
    def imported(self) -> list[Translation]:
        return [t for t in self.translations if t.definition is not None]

    @property
    def failed(self) -> list[Translation]:
        """The tasks that cannot be imported, each with its `error`."""
        return [t for t in self.translations if t.error is not None]

    @property
    def skipped(self) -> list[Translation]:
        """The tasks left out on purpose, each with its reason."""
        return [t for t in self.translations if t.skipped is not None]

    def left(self) -> list[tuple[Translation, str]]:
        """The PeriodicTasks enabled in django-celery-beat that Takt will not
        run, imported or failed (not those skipped), each with why: they
        keep running there."""
        out = []
        for t in self.translations:
            why = t.hold if t.definition is not None else t.error
            if t.task.enabled and t.task.id not in self.switched and why is not None:
                out.append((t, why))
        return out


class BeatImportRefused(TaktError):
    """Tasks cannot be imported and `continue_on_error` was not given:
    nothing was imported. `result` has every translation; `result.failed`
    the tasks that failed."""

    def __init__(self, result: BeatImport) -> None:
        self.result = result
        names = ", ".join(repr(t.task.name) for t in result.failed)
        super().__init__(f"{len(result.failed)} PeriodicTask(s) cannot be imported: {names}")


def translate_all(
    tasks: list[BeatTask], *, now: datetime, declared: bool = False
) -> list[Translation]:
    """Translate each task, and settle Takt's side of it
    (jobs.core.beat_reimport.settle): a task whose Celery task is not
    registered in this project is imported disabled; a job an earlier
    import made follows its PeriodicTask's `enabled` unless an operator
    changed it in Takt since; every job gets `hold` (why it will not run)
    and keeps its interval's grid. One whose key a job declared in code
    holds fails. `declared`: for the sync of jobs declared in code, which
    owns code-managed jobs and keeps the operator's fields itself, and
    where a task not registered fails."""
    keys = [job_key(t.name) for t in tasks]
    existing = {
        j.key: j
        for j in Job.objects.filter(key__in=keys)
        .select_related("beat_origin")
        .prefetch_related("triggers")
    }
    out = []
    for task, key in zip(tasks, keys, strict=True):
        job = existing.get(key)
        origin = _origin(job) if not declared else None
        if origin is not None:
            task = known_task(
                task,
                switched=origin.source_switched,
                last_run_at=origin.last_run_at,
                total_run_count=origin.total_run_count,
            )
        translation = translate(task, now=now, interval_start=_kept_start(job, task))
        if translation.definition is None:
            pass
        elif declared:
            if not registry.is_known(task.task):
                translation.fail(f"its task {task.task!r} is not registered in this project")
            elif translation.overdue and translation.definition["enabled"]:
                translation.notes.append(OVERDUE_NOTE)
        elif job is not None and job.code_managed:
            translation.fail(f"job #{job.pk} with key {job.key!r} is declared in code")
        else:
            prior = None
            if job is not None:
                prior = Prior(
                    enabled=job.enabled,
                    enabled_set=origin.enabled_set if origin is not None else None,
                    paused=job.paused,
                    paused_until=job.paused_until,
                    pause_note=job.pause_note,
                )
            settle(translation, registered=registry.is_known(task.task), prior=prior)
        out.append(translation)
    return out


def _origin(job: Job | None) -> BeatOrigin | None:
    if job is None:
        return None
    try:
        return job.beat_origin  # type: ignore[no-any-return]
    except BeatOrigin.DoesNotExist:
        return None


def check_each(translations: list[Translation], *, now: datetime, by: str) -> None:
    """Check each translated job alone with import_jobs' rules (a dry run):
    one Takt refuses (a crontab that can never fire, an unknown time zone)
    fails, its fields named."""
    for translation in translations:
        if translation.definition is None:
            continue
        try:
            import_jobs(
                [translation.definition], now=now, by=by, dry_run=True, granted=BEAT_GRANTED
            )
        except InvalidDefinition as exc:
            translation.fail("; ".join(f"{f}: {m}" if f else m for _, f, m in exc.problems))


def _kept_start(job: Job | None, task: BeatTask) -> datetime | None:
    if job is None or not isinstance(task.schedule, Interval):
        return None
    seconds = int(task.schedule.every.total_seconds())
    trigger: Trigger | None = next(
        (t for t in job.triggers.all() if t.kind == "interval" and t.interval_seconds == seconds),
        None,
    )
    return trigger.start_at if trigger is not None else None


def import_celery_beat(
    *,
    now: datetime,
    by: str,
    using: str = "default",
    dry_run: bool = False,
    disable_source: bool = False,
    continue_on_error: bool = False,
) -> BeatImport:
    """Import every PeriodicTask of database `using`:

    1. read and translate each (a row that cannot be read fails alone);
    2. check each job alone with import_jobs' rules (`check_each`);
    3. if any task failed and not `continue_on_error`: raise
       BeatImportRefused, having written nothing;
    4. import the others in one transaction on each database (Takt's and
       `using`; the same one when it is Takt's), record what it set on each
       job (BeatOrigin) and, with `disable_source`, disable the
       PeriodicTasks whose jobs will run: never one with a `hold`, nor
       one that failed or was skipped (a dry run lists them).

    Raises CeleryBeatUnavailable, BeatImportRefused, or InvalidDefinition
    (the jobs refused together, e.g. two names made one key); nothing
    stored changes then, in either database."""
    result = BeatImport(translate_all(read_beat_tasks(using), now=now))
    check_each(result.translations, now=now, by=by)
    if result.failed and not continue_on_error:
        raise BeatImportRefused(result)
    imported = result.imported
    entries = [t.definition for t in imported]
    # Never strand a task: only those whose job will run are switched off.
    to_disable = [t.task.id for t in imported if t.hold is None and t.task.enabled]
    with transaction.atomic(using=using), transaction.atomic():
        result.items = import_jobs(entries, now=now, by=by, dry_run=dry_run, granted=BEAT_GRANTED)
        if disable_source:
            result.switched = _disable(to_disable, using=using, now=now, dry_run=dry_run)
        if not dry_run:
            _record(imported, switched=set(result.switched), now=now)
    return result


def _disable(ids: list[int], *, using: str, now: datetime, dry_run: bool) -> list[int]:
    """Disable the PeriodicTasks `ids` that are enabled; their ids."""
    PeriodicTask, PeriodicTasks = beat_models()
    enabled = PeriodicTask.objects.using(using).filter(pk__in=ids, enabled=True)
    switched = sorted(int(pk) for pk in enabled.values_list("pk", flat=True))
    if dry_run or not switched:
        return switched
    # update(), not save(): django-celery-beat's save() blanks last_run_at.
    PeriodicTask.objects.using(using).filter(pk__in=switched).update(enabled=False)
    # django-celery-beat's beat reloads its schedule when this row changes.
    PeriodicTasks.objects.using(using).update_or_create(ident=1, defaults={"last_update": now})
    return switched


def _record(imported: list[Translation], *, switched: set[int], now: datetime) -> None:
    """What this import set on each job (jobs.beat_origin)."""
    ids = dict(Job.objects.filter(key__in=[t.key for t in imported]).values_list("key", "pk"))
    for t in imported:
        BeatOrigin.objects.update_or_create(
            job_id=ids[t.key],
            defaults={
                "periodic_task_id": t.task.id,
                "enabled_set": t.enabled_set,
                "source_switched": t.task.id in switched or t.task.switched,
                "last_run_at": t.task.last_run_at,
                "total_run_count": t.task.total_run_count,
                "imported_at": now,
            },
        )
