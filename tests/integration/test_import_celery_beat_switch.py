"""`import_celery_beat` switching a project over safely (issue 26): never
strand a task (--disable-source leaves every PeriodicTask whose Takt job
will not run enabled, and the summary names each with why), a re-import
that brings `enabled` in line unless the operator changed it in Takt,
django-celery-beat's own `celery.backend_cleanup` skipped with its reason,
no "overdue" said of a job imported disabled, the last run the first
import read kept after django-celery-beat blanked it. And the DST rows
of the migration guide that its comparison test does not cover: a
quarter-hourly crontab in the repeated hour. PeriodicTasks made through
django-celery-beat's own models, on its own migrations."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django_celery_beat.models import ClockedSchedule, PeriodicTask

from jobs import registry
from jobs.models import Job
from jobs.services import pause_job, resume_due_jobs
from runs.dispatch import claim_due_runs
from runs.models import Run
from tests.integration.test_import_celery_beat import (
    BERLIN,
    NEW_YORK,
    NOW,
    TARGET,
    celery_beat_times,
    crontab,
    every,
    takt_times,
    task,
)

pytestmark = pytest.mark.django_db

LATER = NOW + timedelta(hours=1)


def import_(*args: str, at: datetime = NOW) -> str:
    out = StringIO()
    with time_machine.travel(at, tick=False):
        call_command("import_celery_beat", *args, stdout=out)
    return out.getvalue()


def summary(out: str) -> list[str]:
    """The summary block that ends the output (between its rules)."""
    lines = out.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("SUMMARY")))
    assert lines[start - 1] == lines[-1] == "=" * 78, out
    return lines[start:-1]


def enabled_there(name: str) -> bool:
    return bool(PeriodicTask.objects.get(name=name).enabled)


@pytest.fixture
def register(monkeypatch):
    """Register a @takt_job target for this test only."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    def register(name: str) -> None:
        registry.takt_job(name)(lambda job: None)

    return register


# --- never strand a task ---------------------------------------------------------------


def test_a_job_imported_disabled_is_enabled_once_its_task_is_registered_then_switched(register):
    """The trial of issue 26: imported while `reports.build` was not
    registered; registered since; the re-import enables the job (nobody
    changed it in Takt) and only then --disable-source switches the task."""
    task("reports", task="reports.build", crontab=crontab("0", "6"))

    first = import_("--disable-source")

    job = Job.objects.get(key="reports")
    assert not job.enabled and enabled_there("reports")

    register("reports.build")
    again = import_("--disable-source", at=LATER)

    job.refresh_from_db()
    assert job.enabled, again
    assert not enabled_there("reports")
    assert "enabled: False → True (the job was not changed in Takt since" in again
    assert "disabled 1 PeriodicTask(s) in django-celery-beat" in again
    assert "its task 'reports.build' is not registered in this project" in "\n".join(summary(first))


def test_a_job_paused_in_takt_until_resumed_keeps_its_task_running_there():
    """Before issue 26 the import disabled the PeriodicTask of a job that
    would not run: the task then ran nowhere."""
    task("nightly", crontab=crontab("0", "3"))
    import_()
    job = Job.objects.get(key="nightly")
    pause_job(job.pk, note="until the new server is up", by="ops", now=NOW)

    out = import_("--disable-source", at=LATER)

    job.refresh_from_db()
    assert job.enabled and job.paused and job.pause_note == "until the new server is up"
    assert enabled_there("nightly")
    assert "'nightly' (tests.celery_echo): its Takt job is paused in Takt until resumed" in out
    assert "disabled 0 PeriodicTask(s)" in out


def test_an_operator_who_disabled_the_job_keeps_it_disabled_and_the_task_keeps_running_there():
    task("nightly", crontab=crontab("0", "3"))
    import_()
    job = Job.objects.get(key="nightly")
    assert job.enabled
    job.enabled = False  # by hand in Takt, after the import
    job.save()

    out = import_("--disable-source", at=LATER)
    again = import_("--disable-source", at=LATER + timedelta(hours=1))

    job.refresh_from_db()
    assert not job.enabled and enabled_there("nightly")
    assert (
        "enabled: kept False: changed in Takt since the last import (which set True);"
        " the import would set True" in out
    )
    nightly = PeriodicTask.objects.get(name="nightly")
    for said in (out, again):  # the third import keeps it too
        assert (
            f"    #{nightly.pk} 'nightly' ({TARGET}): its Takt job was disabled in Takt after the"
            " last import" in summary(said)
        )


def test_the_summary_counts_and_names_every_task_left_running_and_why():
    rows = {
        "runs": task("runs", crontab=crontab("0", "1")),
        "elsewhere": task("elsewhere", task="other.task", crontab=crontab("0", "2")),
        "expired": task("expired", crontab=crontab("0", "5"), expires=NOW - timedelta(hours=1)),
        "off": task("off", crontab=crontab("0", "6"), enabled=False),
        "bad": task("bad", crontab=crontab("0", "7"), kwargs="[1]"),
        "cleanup": task(
            "celery.backend_cleanup", task="celery.backend_cleanup", crontab=crontab("0", "4")
        ),
    }
    out = StringIO()

    with pytest.raises(CommandError) as partial, time_machine.travel(NOW, tick=False):
        call_command("import_celery_beat", "--disable-source", "--continue-on-error", stdout=out)

    assert partial.value.returncode == 3  # the failed one, named on standard error as before
    assert "'bad': kwargs must be a JSON object" in str(partial.value)
    ids = {name: row.pk for name, row in rows.items()}
    assert summary(out.getvalue()) == [
        "SUMMARY: 6 PeriodicTask(s): 4 imported, 1 switched, 3 left in django-celery-beat,"
        " 1 skipped, 1 failed",
        "  switched: disabled 1 PeriodicTask(s) in django-celery-beat, whose Takt jobs run them"
        " now",
        "  LEFT ENABLED in django-celery-beat: 3 PeriodicTask(s) that Takt will not run; they"
        " keep running there until you act:",
        f"    #{ids['elsewhere']} 'elsewhere' (other.task): its task 'other.task' is not"
        " registered in this project",
        f"    #{ids['expired']} 'expired' ({TARGET}): it expired at 2027-03-10T08:00:30+00:00"
        " (django-celery-beat sends it no more)",
        f"    #{ids['bad']} 'bad' ({TARGET}): kwargs must be a JSON object, got '[1]'",
        "  skipped: 1 PeriodicTask(s) not imported, on purpose, left as they are in"
        " django-celery-beat:",
        f"    #{ids['cleanup']} 'celery.backend_cleanup': Celery's own result cleanup, which"
        " django-celery-beat's scheduler adds by itself (result_expires): Takt records its runs"
        " itself and deletes old ones (TAKT_RETENTION_DAYS), no job may name Celery's tasks, and"
        " a result backend that expires results itself (Redis) needs nothing. A database result"
        " backend of your own tasks: schedule a @takt_job that calls app.backend.cleanup()",
    ]
    enabled = set(PeriodicTask.objects.filter(enabled=True).values_list("name", flat=True))
    assert enabled == {"elsewhere", "expired", "bad", "celery.backend_cleanup"}


def test_a_dry_run_ends_with_the_same_summary_and_switches_nothing():
    task("runs", crontab=crontab("0", "1"))
    task("elsewhere", task="other.task", crontab=crontab("0", "2"))

    lines = summary(import_("--dry-run", "--disable-source"))

    assert lines[0].startswith("SUMMARY (dry run): 2 PeriodicTask(s): 2 imported, 1 switched,")
    assert lines[1].startswith("  switched: would disable 1 PeriodicTask(s)")
    assert enabled_there("runs") and not Job.objects.filter(key="runs").exists()


def test_without_disable_source_the_summary_says_the_tasks_run_in_both():
    task("runs", crontab=crontab("0", "1"))

    lines = summary(import_())

    assert lines[1] == (
        "  switched: none (no --disable-source): 1 PeriodicTask(s) are enabled in both; stop"
        " django-celery-beat's beat before Takt's starts, or run again with --disable-source"
    )


# --- a re-import follows the PeriodicTask's enabled --------------------------------------


def test_a_task_disabled_in_django_celery_beat_disables_the_untouched_job_and_back():
    row = task("sync", crontab=crontab("0", "3"))
    import_()
    row.enabled = False  # in django-celery-beat's admin
    row.save()

    out = import_(at=LATER)

    job = Job.objects.get(key="sync")
    assert not job.enabled and "enabled: True → False" in out
    row.enabled = True
    row.save()
    import_(at=LATER + timedelta(hours=1))
    job.refresh_from_db()
    assert job.enabled


def test_a_task_the_import_switched_off_does_not_read_as_disabled_on_the_next_import():
    task("sync", crontab=crontab("0", "3"))
    import_("--disable-source")
    assert not enabled_there("sync")

    out = import_("--disable-source", at=LATER)
    import_(at=LATER + timedelta(hours=1))

    assert Job.objects.get(key="sync").enabled
    assert "read as enabled (Takt runs it now)" in out


def test_a_job_made_in_takt_before_the_import_keeps_its_enabled():
    Job.objects.create(name="by hand", key="sync", target=TARGET, enabled=False)
    task("sync", crontab=crontab("0", "3"))

    out = import_("--disable-source")

    assert not Job.objects.get(key="sync").enabled and enabled_there("sync")
    assert "enabled: kept False as Takt's job has it: no import recorded setting it" in out


# --- celery.backend_cleanup, overdue, the last run -------------------------------------


def test_django_celery_beats_backend_cleanup_is_skipped_not_imported_and_not_switched():
    """As django-celery-beat's DatabaseScheduler adds it (result_expires set)."""
    task(
        "celery.backend_cleanup",
        task="celery.backend_cleanup",
        crontab=crontab("0", "4", tz="UTC"),
        expire_seconds=12 * 3600,
    )
    task("runs", crontab=crontab("0", "1"))

    out = import_("--disable-source")  # not refused: exit 0

    assert not Job.objects.filter(target="celery.backend_cleanup").exists()
    assert "'celery.backend_cleanup' (celery.backend_cleanup): skipped, not imported" in out
    assert "1 imported, 1 switched, 0 left in django-celery-beat, 1 skipped, 0 failed" in out
    assert enabled_there("celery.backend_cleanup") and not enabled_there("runs")


def test_a_job_imported_disabled_is_not_said_to_run_10_s_after_the_import():
    hour_ago = NOW - timedelta(hours=1)
    task(
        "ran-once",
        interval=every(10, "minutes"),
        one_off=True,
        total_run_count=1,
        last_run_at=hour_ago,
    )
    task("off", interval=every(10, "minutes"), last_run_at=hour_ago, enabled=False)
    task(
        "clocked-past",
        clocked=ClockedSchedule.objects.create(clocked_time=NOW - timedelta(days=2)),
        one_off=True,
    )
    task("elsewhere", task="other.task", interval=every(10, "minutes"), last_run_at=hour_ago)
    task("due", interval=every(10, "minutes"), last_run_at=hour_ago)

    out = import_()

    said = {
        name: block for name, block in re.findall(r"'([\w-]+)' \([\w.]+\)\n((?:    .*\n)*)", out)
    }
    assert "overdue" in said["due"]
    for name in ("ran-once", "off", "clocked-past", "elsewhere"):
        assert not Job.objects.get(key=name).enabled
        assert "overdue" not in said[name], (name, said[name])


def test_a_reimport_keeps_the_last_run_the_first_import_read():
    """django-celery-beat blanks last_run_at whenever it saves a disabled
    task (its beat does, after --disable-source)."""
    task(
        "report",
        crontab=crontab("0", "9"),
        last_run_at=datetime(2027, 3, 9, 9, 0, tzinfo=UTC),
        total_run_count=120,
    )
    import_("--disable-source")
    row = PeriodicTask.objects.get(name="report")
    row.save()  # as django-celery-beat's beat saves an entry
    row.refresh_from_db()
    assert row.last_run_at is None

    import_("--disable-source", at=LATER)

    assert Job.objects.get(key="report").notes == (
        f"Imported from django-celery-beat PeriodicTask #{row.pk} 'report': 120 runs there,"
        " the last 2027-03-09T09:00:00+00:00."
    )


# --- the repeated hour of a quarter-hourly crontab (the migration guide's table) ----------


def local(moments: list[datetime], zone) -> list[str]:
    return [m.astimezone(zone).isoformat(timespec="minutes") for m in moments]


@pytest.mark.parametrize(
    ("hour", "zone", "after", "takt_only", "celery_beat_only"),
    [
        # Every 15 minutes of real time: Takt runs in both copies of the
        # repeated hour; django-celery-beat runs none in the second.
        (
            "*",
            BERLIN,
            datetime(2027, 10, 30, 23, 50, tzinfo=UTC),
            [f"2027-10-31T02:{m}+01:00" for m in ("00", "15", "30", "45")],
            [],
        ),
        (
            "*",
            NEW_YORK,
            datetime(2027, 11, 7, 4, 50, tzinfo=UTC),
            [f"2027-11-07T01:{m}-05:00" for m in ("00", "15", "30", "45")],
            [],
        ),
        # The repeated hour named: Takt runs it twice (a minute step follows
        # real time), django-celery-beat once.
        (
            "2",
            BERLIN,
            datetime(2027, 10, 30, 23, 50, tzinfo=UTC),
            [f"2027-10-31T02:{m}+01:00" for m in ("00", "15", "30", "45")],
            [],
        ),
        # The hour that does not exist: django-celery-beat runs once at 03:00,
        # Takt none that day (a wildcard minute follows the clock).
        ("2", BERLIN, datetime(2027, 3, 28, 0, 50, tzinfo=UTC), [], ["2027-03-28T03:00+02:00"]),
    ],
    ids=["berlin-every-15", "new-york-every-15", "berlin-0200-every-15", "berlin-spring-gap"],
)
def test_a_quarter_hourly_crontab_in_the_hours_that_dst_repeats_or_skips(
    hour, zone, after, takt_only, celery_beat_only
):
    row = task("quarterly", crontab=crontab("*/15", hour, tz=zone))
    import_()
    job = Job.objects.get(key="quarterly")

    theirs, ours = celery_beat_times(row, after, 8), takt_times(job, after, 8)

    until = min(theirs[-1], ours[-1])
    assert local(sorted(t for t in set(ours) - set(theirs) if t <= until), zone) == takt_only
    assert local(sorted(t for t in set(theirs) - set(ours) if t <= until), zone) == celery_beat_only


# --- start_time (the migration guide's table) -------------------------------------------


def claims(at: datetime) -> list[tuple[str, str, int]]:
    """What Takt's beat does at `at`: lift the pauses that ended, claim
    what is due; the runs made, as (trigger, scheduled for, missed count)."""
    resume_due_jobs(now=at)
    before = set(Run.objects.values_list("pk", flat=True))
    claim_due_runs(now=at, limit=100)
    made = Run.objects.exclude(pk__in=before).order_by("scheduled_for")
    return [(r.trigger, r.scheduled_for.isoformat(), r.missed_count) for r in made]


def test_a_start_time_to_come_pauses_the_job_and_its_end_runs_once_as_django_celery_beat_does():
    """django-celery-beat sends nothing before start_time, then (never run:
    it backdates the last run 30 years) one run at start_time, then the
    schedule. Takt: paused until then; the fire times passed meanwhile are
    missed runs, caught up once (run_once, the latest) when the pause ends."""
    start = NOW.replace(minute=0, second=0) + timedelta(hours=3, minutes=15)  # 12:15 UTC
    task("hourly", crontab=crontab("0", "*", tz="UTC"), start_time=start)
    task("every-2h", interval=every(2, "hours"), start_time=start)
    import_()

    assert claims(start - timedelta(seconds=1)) == []
    assert claims(start) == [
        ("catchup", "2027-03-10T12:00:00+00:00", 2),  # 10:00 and 11:00 counted
        ("schedule", "2027-03-10T12:15:00+00:00", 0),  # the interval's first, at start_time
    ]
    then = [claims(start + timedelta(minutes=m)) for m in (45, 105, 120)]
    assert then == [
        [("schedule", "2027-03-10T13:00:00+00:00", 0)],
        [("schedule", "2027-03-10T14:00:00+00:00", 0)],
        [("schedule", "2027-03-10T14:15:00+00:00", 0)],  # start_time + 2 h
    ]
