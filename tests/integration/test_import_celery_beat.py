"""`manage.py import_celery_beat` (F-76) against the real django-celery-beat:
PeriodicTasks of every kind made through its own models, on its own
migrations, imported; the next 20 fire times its schedule objects compute
compared with Takt's for every imported task, on both sides of both DST
changes in Europe/Berlin and America/New_York. Bad input (issue 15): a task
not registered here (imported disabled), rows Takt cannot take (refused
together, or reported with --continue-on-error), a database without
django-celery-beat's tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    SolarSchedule,
)

from jobs.core import triggers as core
from jobs.models import Job
from jobs.specs import trigger_spec

pytestmark = pytest.mark.django_db

NOW = datetime(2027, 3, 10, 9, 0, 30, tzinfo=UTC)
TARGET = "tests.celery_echo"
BERLIN, NEW_YORK = ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")


# Enabled in django-celery-beat, imported disabled: --disable-source leaves them.
WILL_NOT_RUN = {"unknown", "clocked-past", "one-off-ran", "expired"}


def crontab(minute="*", hour="*", dom="*", month="*", dow="*", tz=BERLIN) -> CrontabSchedule:
    return CrontabSchedule.objects.create(
        minute=minute,
        hour=hour,
        day_of_month=dom,
        month_of_year=month,
        day_of_week=dow,
        timezone=tz,
    )


def every(n: int, period: str) -> IntervalSchedule:
    return IntervalSchedule.objects.create(every=n, period=period)


def task(name: str, **fields) -> PeriodicTask:
    fields.setdefault("task", TARGET)
    with time_machine.travel(NOW - timedelta(days=30), tick=False):
        return PeriodicTask.objects.create(name=name, **fields)


def import_(*args: str) -> str:
    out = StringIO()
    with time_machine.travel(NOW, tick=False):
        call_command("import_celery_beat", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def every_kind() -> dict[str, PeriodicTask]:
    hour_ago = NOW - timedelta(minutes=3)
    return {
        "weekday": task(
            "weekday report",
            crontab=crontab("0", "9", dow="mon-fri"),
            args=json.dumps([1, "a"]),
            kwargs=json.dumps({"x": 1}),
            queue="reports",
            priority=3,
            description="The 09:00 report",
            last_run_at=NOW - timedelta(days=1),
            total_run_count=120,
        ),
        "night": task("night.0230", crontab=crontab("30", "2")),
        "ny-night": task("ny-night", crontab=crontab("30", "1,2", tz=NEW_YORK)),
        "first-monday": task(
            "first-monday", crontab=crontab("15", "6", dom="1-7", dow="1", tz=NEW_YORK)
        ),
        "two-hourly": task("two-hourly", crontab=crontab("0", "*/2")),
        "quarter": task("quarter", crontab=crontab("*/15", "8-17", month="3-11", dow="1-5")),
        "every-10m": task(
            "every-10m", interval=every(10, "minutes"), last_run_at=hour_ago, total_run_count=9
        ),
        "later": task("later", interval=every(2, "days"), start_time=NOW + timedelta(days=3)),
        "clocked": task(
            "clocked",
            clocked=ClockedSchedule.objects.create(clocked_time=NOW + timedelta(days=2)),
            one_off=True,
        ),
        "clocked-past": task(
            "clocked-past",
            clocked=ClockedSchedule.objects.create(clocked_time=NOW - timedelta(days=2)),
            one_off=True,
        ),
        "one-off-ran": task(
            "one-off-ran", crontab=crontab("0", "4"), one_off=True, total_run_count=1
        ),
        "expired": task("expired", crontab=crontab("0", "5"), expires=NOW - timedelta(hours=1)),
        "expires-later": task(
            "expires-later", interval=every(1, "hours"), expires=NOW + timedelta(days=9)
        ),
        "off": task("off", crontab=crontab("0", "6"), enabled=False),
        "unknown": task("unknown", task="nowhere.task", crontab=crontab("0", "7")),
    }


def test_a_dry_run_says_what_it_would_do_and_writes_nothing(every_kind):
    out = import_("--dry-run", "--disable-source")

    assert Job.objects.filter(key__in=[t.name for t in every_kind.values()]).count() == 0
    assert PeriodicTask.objects.filter(enabled=True).count() == 14
    assert f"PeriodicTask #{every_kind['weekday'].pk} 'weekday report'" in out
    assert "→ key 'weekday-report-" in out  # a space is not a key's
    assert "imported disabled: its task 'nowhere.task' is not registered in this project" in out
    assert "disabled without a trigger: its clocked time" in out
    assert "Celery fires on days matching both, cron on days matching either" in out
    assert "dry run, nothing written: 15 create, 0 update, 0 unchanged" in out
    # Not 'off' (disabled there already) nor the four whose jobs will not run.
    assert "would disable 10 PeriodicTask(s) in django-celery-beat" in out
    assert "LEFT ENABLED in django-celery-beat: 4 PeriodicTask(s)" in out


def test_the_import_carries_each_task_over_and_a_second_run_updates(every_kind):
    out = import_()
    assert "15 create" in out

    weekday = Job.objects.get(name="weekday report")
    assert (weekday.target, weekday.args, weekday.params) == (TARGET, [1, "a"], {"x": 1})
    assert (weekday.queue, weekday.priority, weekday.enabled) == ("reports", 3, True)
    assert weekday.description == "The 09:00 report"
    assert "120 runs there" in weekday.notes
    (trigger,) = weekday.triggers.all()
    assert (trigger.cron_expression, trigger.timezone) == ("0 9 * * MON-FRI", "Europe/Berlin")

    first_monday = Job.objects.get(key="first-monday").triggers.get()
    assert (first_monday.cron_expression, first_monday.weekdays) == ("15 6 1-7 * *", "0")

    ten = Job.objects.get(key="every-10m").triggers.get()
    assert (ten.interval_seconds, ten.start_at) == (
        600,
        (NOW + timedelta(minutes=7)).replace(microsecond=0),
    )
    assert ten.next_run_at == ten.start_at  # the run django-celery-beat would have sent next

    later = Job.objects.get(key="later")
    assert later.paused and later.paused_until == NOW + timedelta(days=3)
    assert Job.objects.get(key="clocked").triggers.get().run_at == NOW + timedelta(days=2)
    assert Job.objects.get(key="clocked").max_runs == 1
    for disabled in ("clocked-past", "one-off-ran", "expired", "off", "unknown"):
        assert not Job.objects.get(key=disabled).enabled, disabled

    again = import_()
    assert "0 create, 0 update, 15 unchanged" in again, again
    assert (
        Job.objects.count()
        == 15
        + Job.objects.exclude(key__in=[t.name for t in every_kind.values()])
        .exclude(name="weekday report")
        .count()
    )


def test_a_second_run_keeps_what_the_operator_changed_in_takt_and_the_interval_grid(every_kind):
    import_()
    job = Job.objects.get(key="every-10m")
    job.enabled = False
    job.save()
    start = job.triggers.get().start_at
    PeriodicTask.objects.filter(name="every-10m").update(last_run_at=NOW)

    out = import_()

    job.refresh_from_db()
    assert not job.enabled and "enabled: kept False: changed in Takt since the last import" in out
    assert job.triggers.get().start_at == start


def test_disable_source_switches_in_one_command(every_kind):
    out = import_("--disable-source")

    assert "disabled 10 PeriodicTask(s) in django-celery-beat" in out  # 'off' was already
    still = set(PeriodicTask.objects.filter(enabled=True).values_list("name", flat=True))
    # Imported disabled: each keeps running (or expiring) where it runs.
    assert still == WILL_NOT_RUN
    assert f"#{every_kind['unknown'].pk} 'unknown' (nowhere.task): its task 'nowhere.task'" in out


# --- bad input (issue 15) ------------------------------------------------------------


def bad_rows() -> dict[str, str]:
    """A PeriodicTask of each kind Takt cannot take, made with
    django-celery-beat's models (or, where they refuse the value, written
    to its table as a broken project or a hand edit leaves it): name →
    what the report must say of it."""
    task("bad-args", crontab=crontab("0", "8"), args="[1, 2")  # the models do not check JSON
    task("bad-kwargs", crontab=crontab("0", "8"), kwargs="[1]")
    # Celery takes April 31 (it never comes); Takt refuses an expression that can never fire.
    task("never", crontab=crontab("0", "0", dom="31", month="4"))
    zoned = task("mars-time", crontab=crontab("0", "9"))
    with connection.cursor() as cursor:  # TimeZoneField refuses the name on save
        cursor.execute(
            f"UPDATE {CrontabSchedule._meta.db_table} SET timezone = %s WHERE id = %s",
            ["Mars/Olympus_Mons", zoned.crontab_id],
        )
    task(
        "solar",
        solar=SolarSchedule.objects.create(event="sunrise", latitude=52.52, longitude=13.4),
    )
    return {
        "bad-args": "args is not JSON",
        "bad-kwargs": "kwargs must be a JSON object, got '[1]'",
        "never": "cron_expression",
        "mars-time": "Mars/Olympus_Mons",
        "solar": "solar schedule (sunrise at 52.52, 13.4)",
    }


def test_without_continue_on_error_one_bad_task_refuses_all_and_names_every_one(every_kind):
    reasons = bad_rows()

    with pytest.raises(CommandError) as refused:
        import_("--disable-source")

    message = str(refused.value)
    assert message.startswith("nothing imported, in either database: 5 PeriodicTask(s)")
    for name, reason in reasons.items():
        (line,) = [line for line in message.splitlines() if f" {name!r}: " in line]
        assert reason in line, line
    assert "--continue-on-error" in message
    assert refused.value.returncode == 1
    assert not Job.objects.filter(
        key__in=[*(t.name for t in every_kind.values()), *reasons]
    ).exists()
    assert PeriodicTask.objects.filter(enabled=True).count() == 14 + 5


def test_a_dry_run_is_refused_as_the_import_would_be(every_kind):
    bad_rows()

    with pytest.raises(CommandError, match="5 PeriodicTask"):
        import_("--dry-run")


def test_with_continue_on_error_the_good_tasks_come_and_the_bad_are_reported(every_kind):
    reasons = bad_rows()
    out = StringIO()

    with pytest.raises(CommandError) as partial, time_machine.travel(NOW, tick=False):
        call_command("import_celery_beat", "--continue-on-error", "--disable-source", stdout=out)

    assert partial.value.returncode == 3
    message = str(partial.value)
    assert message.startswith("5 PeriodicTask(s) not imported (--continue-on-error)")
    for name, reason in reasons.items():
        (line,) = [line for line in message.splitlines() if f" {name!r}: " in line]
        assert reason in line, line
        assert f"{name!r} ({TARGET}): cannot be imported" in out.getvalue()
    assert "15 create" in out.getvalue()
    assert not Job.objects.filter(key__in=reasons).exists()
    # The failed ones keep running where they are, as do those Takt will not run.
    still = set(PeriodicTask.objects.filter(enabled=True).values_list("name", flat=True))
    assert still == {*WILL_NOT_RUN, *reasons}


def test_a_job_declared_in_code_holding_the_key_fails_that_task(every_kind):
    Job.objects.create(name="declared", key="night.0230", target="tests.echo", code_managed=True)

    with pytest.raises(
        CommandError, match=r"'night.0230': job #\d+ with key 'night.0230' is declared in code"
    ):
        import_()


def test_a_task_not_registered_keeps_its_args_and_stays_disabled_on_a_second_run():
    task("elsewhere", task="other_project.tasks.report", crontab=crontab("0", "7"), args="[1]")

    import_("--disable-source")
    out = import_("--disable-source")

    job = Job.objects.get(key="elsewhere")
    assert (job.enabled, job.target, job.args) == (False, "other_project.tasks.report", [1])
    assert "0 create, 0 update, 1 unchanged" in out
    assert PeriodicTask.objects.get(name="elsewhere").enabled


def test_a_task_not_registered_is_not_enabled_in_bulk_from_the_admin(admin_client):
    task("elsewhere", task="other_project.tasks.report", crontab=crontab("0", "7"))
    import_()
    job = Job.objects.get(key="elsewhere")

    response = admin_client.post(
        "/admin/takt_jobs/job/",
        {"action": "enable", "_selected_action": [job.pk]},
        follow=True,
    )

    assert [str(m) for m in response.context["messages"]] == [
        "enabled: not enabled, their target is not a task registered here:"
        " elsewhere (other_project.tasks.report)"
    ]
    job.refresh_from_db()
    assert job.enabled is False


def test_a_database_name_that_is_neither_alias_nor_url():
    with pytest.raises(CommandError, match="neither a database alias"):
        import_("--database", "nosuch")


def manage(*args: str, database: Path, var: Path) -> subprocess.CompletedProcess[str]:
    """manage.py in a shell of its own, on its own SQLite database."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "TAKT_VAR_DIR": str(var)}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=settings.BASE_DIR,
    )


# Three fresh Django processes (a migrate and two imports): on a loaded
# 2-core machine their start-up alone once passed the default 60 s.
@pytest.mark.timeout(180)
def test_a_database_that_does_not_exist_or_has_no_tables_is_named_without_a_traceback(tmp_path):
    takt = tmp_path / "takt.sqlite3"
    assert manage("migrate", "-v0", database=takt, var=tmp_path).returncode == 0
    missing, empty = tmp_path / "missing.sqlite3", tmp_path / "empty.sqlite3"
    empty.touch()

    for source, said in [
        (missing, "there is no SQLite database file"),
        (empty, "it has no django-celery-beat tables (no django_celery_beat_periodictask)"),
    ]:
        done = manage(
            "import_celery_beat", "--database", f"sqlite:///{source}", database=takt, var=tmp_path
        )
        assert done.returncode == 1, done
        assert f"--database 'sqlite:///{source}'" in done.stderr and said in done.stderr
        assert "Traceback" not in done.stderr, done.stderr
    assert not missing.exists()  # not made by looking


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL server's database")
def test_a_postgres_database_that_does_not_exist_is_named(tmp_path):
    url = "postgres://{USER}:secret@{HOST}:{PORT}/takt_no_such_database".format(
        **{k: connection.settings_dict[k] or "" for k in ("USER", "HOST", "PORT")}
    )

    done = manage(
        "import_celery_beat", "--database", url, database=tmp_path / "t.sqlite3", var=tmp_path
    )

    assert done.returncode == 1, done
    assert (
        done.stderr.startswith("CommandError: --database 'postgres://") and ":***@" in done.stderr
    )
    assert "secret" not in done.stderr and "takt_no_such_database" in done.stderr
    assert "cannot connect to it" in done.stderr and "Traceback" not in done.stderr


# --- the next 20 fire times, django-celery-beat's and Takt's -----------------------


def celery_beat_times(row: PeriodicTask, after: datetime, count: int = 20) -> list[datetime]:
    """What django-celery-beat's beat sends after a run at `after`, in UTC:
    its schedule object asked as the beat asks it, with the clock of the
    crontab's zone (TzAwareCrontab) and waking shortly before the time it
    was told (it wakes at least every 5 s), run after run."""
    schedule = row.schedule
    times, last = [], after
    for _ in range(count):
        if row.interval is not None:
            last = last + schedule.run_every
        else:
            last = _next_crontab_time(schedule, last)
        times.append(last.astimezone(UTC))
    return times


def _next_crontab_time(schedule, last: datetime) -> datetime:
    last_local, now = last.astimezone(schedule.tz), last.astimezone(schedule.tz)
    for _ in range(10):
        schedule.nowfun = lambda now=now: now
        remaining = schedule.remaining_estimate(last_local)
        due = now.astimezone(UTC) + remaining
        if remaining <= timedelta(seconds=90):
            return due
        now = (due - timedelta(seconds=60)).astimezone(schedule.tz)
    raise AssertionError(f"no fire time after {last}")


def takt_times(job: Job, after: datetime, count: int = 20) -> list[datetime]:
    spec = trigger_spec(job.triggers.get())
    return [t.astimezone(UTC) for t in core.compute_fire_times(spec, after=after, count=count)]


def dst_change_near(moment: datetime, zone: ZoneInfo) -> bool:
    day = moment.astimezone(zone).replace(hour=12, minute=0)
    offsets = {(day + timedelta(hours=h)).utcoffset() for h in range(-36, 36)}
    return len(offsets) > 1


@pytest.mark.parametrize(
    "after",
    [
        NOW,
        datetime(2027, 3, 27, 20, 0, 30, tzinfo=UTC),
        datetime(2027, 10, 20, 12, 0, 30, tzinfo=UTC),
        datetime(2027, 10, 30, 20, 0, 30, tzinfo=UTC),
    ],
    ids=["spring", "berlin-spring-night", "autumn", "berlin-autumn-night"],
)
def test_the_next_20_fire_times_match_django_celery_beat_but_where_takt_is_right(every_kind, after):
    import_()
    report = []
    compared = 0
    for key, row in every_kind.items():
        job = Job.objects.filter(key=key).first() or Job.objects.filter(name=row.name).first()
        if job is None or not job.triggers.exists() or row.clocked is not None:
            continue
        if row.interval is not None:
            start = job.triggers.get().start_at
            theirs = celery_beat_times(row, start - row.schedule.run_every)
            ours = takt_times(job, start - timedelta(microseconds=1))
        else:
            theirs, ours = celery_beat_times(row, after), takt_times(job, after)
        compared += 1
        zone = row.crontab.timezone if row.crontab else UTC
        until = min(theirs[-1], ours[-1])
        for moment in sorted(set(theirs) ^ set(ours)):
            if moment <= until:
                side = "django-celery-beat only" if moment in theirs else "Takt only"
                report.append(f"{row.name}: {side} {moment.astimezone(zone).isoformat()}")
                assert dst_change_near(moment, zone), report[-1]
    assert compared == 13
    print("\n".join(report))


# migrates a second database for django-celery-beat in a subprocess: 10 to 20 s alone
@pytest.mark.timeout(120)
def test_another_database_by_url(tmp_path):
    """As an operator does it, from a shell: the old project's database named
    by URL; its tables read there, the jobs made in Takt's, the
    PeriodicTasks disabled there."""
    old, new = tmp_path / "old-project.sqlite3", tmp_path / "takt.sqlite3"

    def run(database: Path, *args: str) -> str:
        done = manage(*args, database=database, var=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout

    run(old, "migrate", "django_celery_beat", "-v0")
    run(
        old,
        "shell",
        "-c",
        "from django_celery_beat.models import CrontabSchedule as C, PeriodicTask as P;"
        "P.objects.create(name='old.report', task='takt.resume_queue',"
        " crontab=C.objects.create(minute='0', hour='6', timezone='Europe/Berlin'))",
    )
    run(new, "migrate", "-v0")

    out = run(new, "import_celery_beat", "--database", f"sqlite:///{old}", "--disable-source")

    assert "1 create" in out and "disabled 1 PeriodicTask(s)" in out
    check = "from jobs.models import Job; print(Job.objects.get(key='old.report').triggers.get().cron_expression)"
    assert "0 6 * * *" in run(new, "shell", "-c", check)
    enabled = (
        "from django_celery_beat.models import PeriodicTask as P; print(P.objects.get().enabled)"
    )
    assert run(old, "shell", "-c", enabled).splitlines()[-1] == "False"
