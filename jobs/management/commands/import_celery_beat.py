"""F-76: turn django-celery-beat's PeriodicTasks into Takt jobs
(jobs.celery_beat). All or nothing: a task that cannot be imported refuses
the import, naming every such task; --continue-on-error imports the others
and exits 3. --dry-run shows the plan and, per task, every note. A
summary ends every import: the counts, and each PeriodicTask left enabled
in django-celery-beat because Takt will not run it, and why
(--disable-source never switches one off).
docs/migrating-from-django-celery-beat.md."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from jobs.audit import AuditedCommand
from jobs.celery_beat import BeatImport, BeatImportRefused, import_celery_beat
from jobs.celery_beat_source import CeleryBeatUnavailable, source_alias, source_label
from jobs.core.celery_beat import Translation
from jobs.exchange import InvalidDefinition
from jobs.importing import plan_lines, summary_line

# The exit status when --continue-on-error imported some tasks and others
# failed (1: nothing imported; 2: a wrong option, Django's).
EXIT_SOME_FAILED = 3


class Command(AuditedCommand):
    help = (
        "Import django-celery-beat's PeriodicTasks as Takt jobs (keyed by the task's name:"
        " a second run updates them). All or nothing: a task that cannot be imported refuses"
        " the import, naming it, unless --continue-on-error. --dry-run shows the plan and every"
        " note; --disable-source disables the imported PeriodicTasks in the same transaction."
        " See docs/migrating-from-django-celery-beat.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--database",
            help="where django-celery-beat's tables are: a DATABASES alias or a database URL"
            " (default: this project's database)",
        )
        parser.add_argument("--dry-run", action="store_true", help="show the plan, write nothing")
        parser.add_argument(
            "--disable-source",
            action="store_true",
            help="disable the imported PeriodicTasks (in the same transaction), but only those"
            " whose Takt job will run: every other one stays enabled, named in the summary",
        )
        parser.add_argument(
            "--continue-on-error",
            action="store_true",
            help="import the tasks that can be, report the others by name and why, and exit"
            f" {EXIT_SOME_FAILED} if any failed (without it, any failure imports nothing)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        dry_run, database = options["dry_run"], options["database"]
        try:
            using = source_alias(database)
            result = import_celery_beat(
                now=timezone.now(),
                by=f"{getpass.getuser()} (import_celery_beat)",
                using=using,
                dry_run=dry_run,
                disable_source=options["disable_source"],
                continue_on_error=options["continue_on_error"],
            )
        except CeleryBeatUnavailable as exc:
            message = str(exc)
            if not message.startswith("--database"):
                message = f"{source_label(database)}: {message}"
            raise CommandError(message) from None
        except BeatImportRefused as exc:
            self._report(exc.result)
            raise CommandError(
                f"nothing imported, in either database: {len(exc.result.failed)} PeriodicTask(s)"
                " cannot be imported:\n"
                + "\n".join(_failure(t) for t in exc.result.failed)
                + "\nFix or delete them in django-celery-beat, or import the others with"
                " --continue-on-error."
            ) from None
        except InvalidDefinition as exc:
            raise CommandError(f"nothing imported:\n{exc}") from None
        self._report(result)
        for line in plan_lines(result.items):
            self.stdout.write(line)
        self.stdout.write(summary_line(result.items, dry_run=dry_run))
        for line in summary(result, dry_run=dry_run, disable_source=options["disable_source"]):
            self.stdout.write(line)
        if result.failed:
            raise CommandError(
                f"{len(result.failed)} PeriodicTask(s) not imported (--continue-on-error):\n"
                + "\n".join(_failure(t) for t in result.failed),
                returncode=EXIT_SOME_FAILED,
            )

    def _report(self, result: BeatImport) -> None:
        for translation in result.translations:
            task = translation.task
            head = f"PeriodicTask #{task.id} {task.name!r} ({task.task})"
            if translation.error is not None:
                head += ": cannot be imported"
            elif translation.skipped is not None:
                head += ": skipped, not imported"
            elif translation.key != task.name:
                head += f" → key {translation.key!r}"
            self.stdout.write(head)
            for why in (translation.error, translation.skipped):
                if why is not None:
                    self.stdout.write(f"    {why}")
            for note in translation.notes:
                self.stdout.write(f"    {note}")


RULE = "=" * 78


def summary(result: BeatImport, *, dry_run: bool, disable_source: bool) -> list[str]:
    """The block that ends an import: the counts, the PeriodicTasks left
    enabled in django-celery-beat (Takt will not run them) with why, the
    ones skipped with why."""
    disable = "would disable" if dry_run else "disabled"
    left = result.left()
    lines = [
        RULE,
        f"SUMMARY{' (dry run)' if dry_run else ''}: {len(result.translations)} PeriodicTask(s):"
        f" {len(result.imported)} imported, {len(result.switched)} switched,"
        f" {len(left)} left in django-celery-beat, {len(result.skipped)} skipped,"
        f" {len(result.failed)} failed",
    ]
    if disable_source:
        lines.append(
            f"  switched: {disable} {len(result.switched)} PeriodicTask(s) in"
            " django-celery-beat, whose Takt jobs run them now"
        )
    else:
        runs_both = [t for t in result.imported if t.task.enabled and t.hold is None]
        lines.append(
            f"  switched: none (no --disable-source): {len(runs_both)} PeriodicTask(s) are"
            " enabled in both; stop django-celery-beat's beat before Takt's starts, or run"
            " again with --disable-source"
        )
    if left:
        lines.append(
            f"  LEFT ENABLED in django-celery-beat: {len(left)} PeriodicTask(s) that Takt will"
            " not run; they keep running there until you act:"
        )
        lines += [f"    #{t.task.id} {t.task.name!r} ({t.task.task}): {why}" for t, why in left]
    if result.skipped:
        lines.append(
            f"  skipped: {len(result.skipped)} PeriodicTask(s) not imported, on purpose, left as"
            " they are in django-celery-beat:"
        )
        lines += [f"    #{t.task.id} {t.task.name!r}: {t.skipped}" for t in result.skipped]
    lines.append(RULE)
    return lines


def _failure(translation: Translation) -> str:
    task = translation.task
    return f"    PeriodicTask #{task.id} {task.name!r}: {translation.error}"
